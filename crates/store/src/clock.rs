//! Clock helpers. Expiry times are absolute Unix milliseconds, as in Redis.
//!
//! These read `clock_gettime` directly and do integer arithmetic: going
//! through `SystemTime`/`Instant` cost about 300 instructions per command
//! in a callgrind profile of SET, with `Duration` normalisation and 128-bit
//! divisions. A worker's commands share their readings further (a chain,
//! see [`command_start_us`]) and, where the kernel keeps time with the
//! CPU's time-stamp counter, read that counter instead ([`anchor_chain`]).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Nanoseconds of `clock` (a `libc::CLOCK_*` id).
fn read_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and both clock ids used
    // here exist on every Linux; on failure `ts` stays zero, which callers
    // treat as "the epoch" (never reached in practice).
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    read_ns(libc::CLOCK_REALTIME) / 1_000_000
}

/// Microseconds since the Unix epoch.
pub fn now_us() -> u64 {
    read_ns(libc::CLOCK_REALTIME) / 1_000
}

/// Microseconds of a monotonic clock with an arbitrary origin: for
/// measuring durations (command latency), immune to wall-clock jumps.
pub fn mono_us() -> u64 {
    read_ns(libc::CLOCK_MONOTONIC) / 1_000
}

/// Nanoseconds per time-stamp-counter tick in 32.32 fixed point, once
/// [`calibrate_tsc`] found the counter fit to keep time; 0 before that
/// or when it is not.
static TSC_NS_Q32: AtomicU64 = AtomicU64::new(0);

/// The time-stamp counter (0 where there is none).
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: RDTSC only reads a counter; every x86_64 CPU has it and
    // Linux lets user space run it. Exercised by the chain tests below
    // after `calibrate_tsc`.
    return unsafe { std::arch::x86_64::_rdtsc() };
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// Lets chained commands (see [`command_start_us`]) time themselves with
/// the CPU's time-stamp counter instead of `clock_gettime`, when the
/// kernel itself keeps time with that counter (which it does only when
/// the counter is invariant and synchronized across cores). Takes about
/// 20 ms to measure the counter's rate; a server calls it once, on a
/// thread of its own, at start.
///
/// The clock reads of a pipelined GET/SET mix were 6% of the server's
/// samples with `clock_gettime`; `rdtsc` takes about 1.3%.
pub fn calibrate_tsc() {
    let source =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    if source.map_or(true, |s| s.trim() != "tsc") || ticks() == 0 {
        return;
    }
    let (t0, n0) = (ticks(), read_ns(libc::CLOCK_MONOTONIC));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (t1, n1) = (ticks(), read_ns(libc::CLOCK_MONOTONIC));
    if t1 <= t0 || n1 <= n0 {
        return;
    }
    let q32 = (u128::from(n1 - n0) << 32) / u128::from(t1 - t0);
    TSC_NS_Q32.store(u64::try_from(q32).unwrap_or(0), Ordering::Relaxed);
}

/// A thread's command clock (see [`command_start_us`]). One cell per
/// field: with the whole struct in one `Cell`, every get and set copied it
/// through odd stack offsets (its padding), and the store-forwarding
/// stalls that made were 3% of a pipelined GET/SET mix's samples.
struct Chain {
    /// The thread runs commands back to back and breaks its chain whenever
    /// it starts on new input ([`break_chain`]); other threads read the
    /// clock every time.
    active: Cell<bool>,
    /// Monotonic µs the next command starts at; 0 when it must read the
    /// clock.
    next_start: Cell<u64>,
    /// Wall-clock minus monotonic µs, taken when the chain began.
    offset: Cell<u64>,
    /// The counter reading and monotonic ns of the last [`anchor_chain`];
    /// 0 ns when there is none to time from.
    anchor_ticks: Cell<u64>,
    anchor_ns: Cell<u64>,
}

thread_local! {
    static CHAIN: Chain = const {
        Chain {
            active: Cell::new(false),
            next_start: Cell::new(0),
            offset: Cell::new(0),
            anchor_ticks: Cell::new(0),
            anchor_ns: Cell::new(0),
        }
    };
}

impl Chain {
    /// Monotonic µs now: from the anchor and the counter when there is
    /// one, else from the clock.
    fn now_us(&self) -> u64 {
        let rate = TSC_NS_Q32.load(Ordering::Relaxed);
        let anchor_ns = self.anchor_ns.get();
        if anchor_ns == 0 || rate == 0 {
            return mono_us();
        }
        let elapsed = ticks().saturating_sub(self.anchor_ticks.get());
        let ns = (u128::from(elapsed) * u128::from(rate)) >> 32;
        (anchor_ns + u64::try_from(ns).unwrap_or(u64::MAX / 2)) / 1000
    }

    /// The running command's start (taken now if the chain has none yet);
    /// None off a chain.
    fn started(&self) -> Option<u64> {
        if !self.active.get() {
            return None;
        }
        let mut start = self.next_start.get();
        if start == 0 {
            start = self.now_us();
            if self.anchor_ns.get() == 0 {
                self.offset.set(now_us().wrapping_sub(start));
            }
            self.next_start.set(start);
        }
        Some(start)
    }
}

/// Like [`break_chain`], and reads the clocks once for the commands that
/// follow: until the next anchor they take their times from the
/// time-stamp counter when [`calibrate_tsc`] enabled it. A worker calls
/// this after every poll.
pub fn anchor_chain() {
    if TSC_NS_Q32.load(Ordering::Relaxed) == 0 {
        return break_chain();
    }
    let anchor_ticks = ticks();
    let anchor_ns = read_ns(libc::CLOCK_MONOTONIC);
    let offset = now_us().wrapping_sub(anchor_ns / 1000);
    CHAIN.with(|c| {
        c.active.set(true);
        c.next_start.set(0);
        c.offset.set(offset);
        c.anchor_ticks.set(anchor_ticks);
        c.anchor_ns.set(anchor_ns);
    });
}

/// Starts a new chain of back-to-back commands on this thread: the next
/// command reads the clock afresh. A worker calls this whenever it starts
/// on new input, so time spent outside commands (polling, socket I/O)
/// never counts as a command's.
pub fn break_chain() {
    CHAIN.with(|c| {
        c.active.set(true);
        c.next_start.set(0);
    });
}

/// The monotonic µs the command about to run starts at. In a chain (a
/// worker running a pipelined batch) one command's end is the next one's
/// start, so a batch of n commands reads the clock n + 2 times instead of
/// 3n: three `clock_gettime` calls per command were 8-9% of a pipelined
/// LPUSH's or GET/SET mix's samples. A command's duration then includes
/// the dispatch work just before it (parsing, key lookup: a few hundred
/// ns), which Redis leaves out.
pub fn command_start_us() -> u64 {
    CHAIN.with(Chain::started).unwrap_or_else(mono_us)
}

/// Ends the running command: the monotonic µs now, which is also when the
/// next command of the chain starts.
pub fn command_end_us() -> u64 {
    CHAIN.with(|c| {
        if !c.active.get() {
            return mono_us();
        }
        let now = c.now_us();
        c.next_start.set(now);
        now
    })
}

/// Wall-clock ms for the expiry decisions of the command about to run:
/// its start ([`command_start_us`]) on the wall clock. Off a chain, the
/// clock now.
pub fn command_now_ms() -> u64 {
    CHAIN.with(|c| {
        c.started()
            .map_or_else(now_ms, |start| start.wrapping_add(c.offset.get()) / 1000)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Instant, SystemTime, UNIX_EPOCH};

    #[test]
    fn wall_clock_agrees_with_system_time() {
        let sys = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let ours = now_ms();
        assert!(ours.abs_diff(sys) < 1_000, "{ours} vs {sys}");
        assert!(now_us() / 1000 >= ours);
    }

    #[test]
    fn monotonic_clock_measures_durations() {
        let a = mono_us();
        let t = Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = mono_us();
        let real = t.elapsed().as_micros() as u64;
        assert!(b >= a + 20_000, "{a} {b}");
        assert!((b - a).abs_diff(real) < 5_000);
    }

    /// Off a chain every call reads the clock; on one, a command starts
    /// when the one before ended and its wall time follows from that, until
    /// the chain is broken. (Threads keep their own chains: each test runs
    /// on its own thread.)
    #[test]
    fn chained_commands_share_clock_reads() {
        let pause = || std::thread::sleep(std::time::Duration::from_millis(5));
        std::thread::spawn(move || {
            let a = command_start_us();
            pause();
            assert!(command_start_us() >= a + 5_000, "off a chain: fresh reads");
            assert!(command_now_ms().abs_diff(now_ms()) <= 1);
            break_chain();
            let start = command_start_us();
            pause();
            assert_eq!(command_start_us(), start, "the start is taken once");
            assert!(command_now_ms().abs_diff(now_ms()) <= 6);
            let end = command_end_us();
            assert!(end >= start + 5_000);
            pause();
            assert_eq!(command_start_us(), end, "the next starts at that end");
            break_chain();
            assert!(command_start_us() >= end + 5_000, "a break reads afresh");
            assert!(command_now_ms().abs_diff(now_ms()) <= 1);
        })
        .join()
        .unwrap();
    }

    /// After an anchor, chained commands time themselves from the counter
    /// (where the kernel keeps time with it, as on these machines): their
    /// durations and wall times agree with the clock's.
    #[test]
    fn anchored_chains_agree_with_the_clock() {
        calibrate_tsc();
        let pause = || std::thread::sleep(std::time::Duration::from_millis(5));
        std::thread::spawn(move || {
            anchor_chain();
            let start = command_start_us();
            assert!(start.abs_diff(mono_us()) < 1_000, "{start}");
            pause();
            let end = command_end_us();
            let real = mono_us();
            assert!(
                end >= start + 5_000 && end <= real + 1_000,
                "{start} {end} {real}"
            );
            break_chain();
            pause();
            let next = command_start_us();
            assert!(next >= end + 5_000, "a break keeps timing from the anchor");
            assert!(next.abs_diff(mono_us()) < 1_000);
            assert!(command_now_ms().abs_diff(now_ms()) <= 2);
        })
        .join()
        .unwrap();
    }
}
