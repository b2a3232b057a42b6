//! The software watchdog (`watchdog-period`, in milliseconds; 0 is off).
//!
//! Redis arms a timer from its event loop; when one loop iteration takes
//! longer than the period, SIGALRM interrupts the main thread and its
//! stack is logged under `--- WATCHDOG TIMER EXPIRED ---`. Vireo runs a
//! loop per worker thread, so each worker marks when its current
//! iteration started ([`busy`], [`idle`]) and a watchdog thread, started
//! the first time the period is set, looks every few milliseconds for a
//! worker busy longer than the period. It sends that thread SIGALRM; the
//! handler only records the interrupted thread's return addresses, and
//! the watchdog thread symbolizes and logs them. One report per long
//! iteration, as Redis's timer fires once until the loop re-arms it.
//!
//! The watchdog is its own thread rather than a cron step because a
//! stalled worker may hold the shard locks cron needs (DEBUG SLEEP holds
//! them all).

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

use libc::c_int;

use super::crash::{stack_trace, MAX_FRAMES};
use super::log::{write_raw, write_warning};

/// `watchdog-period` in milliseconds; 0 when off.
static PERIOD_MS: AtomicU64 = AtomicU64::new(0);

/// One worker's loop, as the watchdog sees it.
struct Beat {
    /// The worker's pthread, to signal.
    thread: AtomicU64,
    /// Milliseconds since [`epoch`] when the current iteration began, or
    /// 0 while the worker waits for events.
    busy_since: AtomicU64,
    /// The `busy_since` already reported, so one stall is reported once.
    reported: AtomicU64,
}

static BEATS: OnceLock<Box<[Beat]>> = OnceLock::new();

/// The capture handshake between the watchdog thread and the handler.
const IDLE: u8 = 0;
const REQUESTED: u8 = 1;
const CAPTURED: u8 = 2;
static CAPTURE: AtomicU8 = AtomicU8::new(IDLE);
/// The interrupted instruction and return addresses the handler saw.
static EIP: AtomicUsize = AtomicUsize::new(0);
static FRAME_COUNT: AtomicUsize = AtomicUsize::new(0);
static FRAMES: [AtomicUsize; MAX_FRAMES] = [const { AtomicUsize::new(0) }; MAX_FRAMES];

/// Sizes the table for `workers` worker threads (once, at start-up).
pub fn init(workers: usize) {
    let beats = (0..workers)
        .map(|_| Beat {
            thread: AtomicU64::new(0),
            busy_since: AtomicU64::new(0),
            reported: AtomicU64::new(0),
        })
        .collect();
    let _ = BEATS.set(beats);
}

/// Called by worker `id` on its own thread before its loop starts.
pub fn register_worker(id: usize) {
    if let Some(beat) = BEATS.get().and_then(|b| b.get(id)) {
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() };
        beat.thread.store(me as u64, Ordering::Relaxed);
    }
}

/// Worker `id` starts handling the events one wait returned.
#[inline]
pub fn busy(id: usize) {
    if PERIOD_MS.load(Ordering::Relaxed) == 0 {
        return;
    }
    if let Some(beat) = BEATS.get().and_then(|b| b.get(id)) {
        beat.busy_since.store(now_ms(), Ordering::Relaxed);
    }
}

/// Worker `id` is about to wait for events.
#[inline]
pub fn idle(id: usize) {
    if PERIOD_MS.load(Ordering::Relaxed) == 0 {
        return;
    }
    if let Some(beat) = BEATS.get().and_then(|b| b.get(id)) {
        beat.busy_since.store(0, Ordering::Relaxed);
    }
}

/// Milliseconds since the first call (never 0, which means idle).
fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// `watchdog-period`: 0 stops reporting; a period starts the watchdog
/// thread and installs the SIGALRM handler the first time. As in Redis, a
/// period shorter than two cron periods at the default `hz` is raised to
/// that (200 ms), too short to be told from ordinary scheduling.
pub fn set_period(ms: u64) {
    let ms = effective_period(ms);
    PERIOD_MS.store(ms, Ordering::Relaxed);
    if ms == 0 {
        return;
    }
    static START: Once = Once::new();
    START.call_once(|| {
        install_handler();
        let spawned = std::thread::Builder::new()
            .name("vireo-watchdog".into())
            .spawn(watch);
        if let Err(e) = spawned {
            tracing::warn!("the software watchdog could not start: {e}");
        }
    });
}

/// The period the watchdog uses for a configured one.
fn effective_period(ms: u64) -> u64 {
    if ms == 0 {
        0
    } else {
        ms.max(200)
    }
}

/// Installs [`on_alarm`] for SIGALRM, restarting interrupted system calls.
fn install_handler() {
    // SAFETY: `sigaction` only reads the struct we pass; the handler has
    // the three-argument signature SA_SIGINFO calls for.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_alarm as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(libc::SIGALRM, &act, std::ptr::null_mut());
    }
}

/// The watchdog thread: checks the workers every 10 ms while a period is
/// set.
fn watch() {
    loop {
        std::thread::sleep(Duration::from_millis(10));
        let period = PERIOD_MS.load(Ordering::Relaxed);
        if period == 0 {
            continue;
        }
        for beat in BEATS.get().map(|b| &b[..]).unwrap_or(&[]) {
            let since = beat.busy_since.load(Ordering::Relaxed);
            let stalled = since != 0 && now_ms().saturating_sub(since) >= period;
            if stalled && beat.reported.swap(since, Ordering::Relaxed) != since {
                report(beat.thread.load(Ordering::Relaxed));
            }
        }
    }
}

/// Interrupts `thread`, waits for its stack and logs it.
fn report(thread: u64) {
    if thread == 0 {
        return;
    }
    CAPTURE.store(REQUESTED, Ordering::Release);
    // SAFETY: the id is a live worker's (workers run until the process
    // ends); SIGALRM has our handler installed.
    let sent = unsafe { libc::pthread_kill(thread as libc::pthread_t, libc::SIGALRM) };
    let deadline = Instant::now() + Duration::from_secs(1);
    while sent == 0 && CAPTURE.load(Ordering::Acquire) != CAPTURED && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    write_warning("\n--- WATCHDOG TIMER EXPIRED ---");
    if CAPTURE.swap(IDLE, Ordering::AcqRel) == CAPTURED {
        let n = FRAME_COUNT.load(Ordering::Relaxed);
        let frames: Vec<usize> = FRAMES[..n]
            .iter()
            .map(|f| f.load(Ordering::Relaxed))
            .collect();
        let eip = Some(EIP.load(Ordering::Relaxed)).filter(|e| *e != 0);
        write_raw(&stack_trace(eip, &frames));
    } else {
        write_warning("The stalled thread's stack could not be taken.");
    }
    write_warning("--------\n");
}

/// SIGALRM on a stalled worker: records its stack when the watchdog asked.
///
/// SAFETY (async-signal safety): only atomics and glibc's backtrace() into
/// a buffer on this stack. backtrace() is async-signal-safe once the
/// unwinder is loaded, which `crash::install` makes sure of at start-up
/// (its first call loads libgcc); it does walk the loader's list of
/// objects, so a thread stopped inside dlopen could make it wait — the
/// same exposure Redis's watchdog handler has, which also formats and
/// writes the trace from inside the handler; ours leaves that to the
/// watchdog thread.
extern "C" fn on_alarm(_sig: c_int, _info: *mut libc::siginfo_t, uctx: *mut c_void) {
    if CAPTURE.load(Ordering::Acquire) != REQUESTED {
        return;
    }
    let mut buf = [std::ptr::null_mut::<c_void>(); MAX_FRAMES];
    // SAFETY: the buffer is ours and its length is passed.
    let n = unsafe { libc::backtrace(buf.as_mut_ptr(), MAX_FRAMES as c_int) };
    let n = usize::try_from(n).unwrap_or(0);
    // Frame 0 is this handler.
    let frames = buf[..n].iter().skip(1);
    let mut count = 0;
    for (slot, ip) in FRAMES.iter().zip(frames) {
        slot.store(*ip as usize, Ordering::Relaxed);
        count += 1;
    }
    FRAME_COUNT.store(count, Ordering::Relaxed);
    EIP.store(
        super::crash::instruction_pointer(uctx).unwrap_or(0),
        Ordering::Relaxed,
    );
    CAPTURE.store(CAPTURED, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_periods_are_raised_and_zero_stays_off() {
        assert_eq!(effective_period(0), 0);
        assert_eq!(effective_period(50), 200);
        assert_eq!(effective_period(1000), 1000);
    }

    #[inline(never)]
    fn a_stalled_worker() {
        register_worker(0);
        busy(0);
        std::thread::sleep(Duration::from_millis(700));
        idle(0);
    }

    /// The whole path: a worker busy past the period is interrupted, its
    /// handler records the stack, and the stack names the stalled function.
    #[test]
    fn a_stalled_worker_has_its_stack_taken() {
        init(1);
        set_period(200);
        std::thread::spawn(a_stalled_worker).join().unwrap();
        set_period(0);
        let n = FRAME_COUNT.load(Ordering::Relaxed);
        assert!(n > 0, "no stack was captured");
        let frames: Vec<usize> = FRAMES[..n]
            .iter()
            .map(|f| f.load(Ordering::Relaxed))
            .collect();
        let text = stack_trace(None, &frames);
        assert!(text.contains("a_stalled_worker"), "{text}");
    }
}
