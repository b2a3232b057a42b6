//! Clock helpers. Expiry times are absolute Unix milliseconds, as in Redis.
//!
//! These read `clock_gettime` directly and do integer arithmetic: every
//! command reads the wall clock once (for expiry) and the monotonic clock
//! twice (for its duration), and going through `SystemTime`/`Instant` cost
//! about 300 instructions per command in a callgrind profile of SET, with
//! `Duration` normalisation and 128-bit divisions.

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
}
