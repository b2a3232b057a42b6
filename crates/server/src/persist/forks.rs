//! INFO's fork statistics for a server that never forks.
//!
//! Redis forks a child for every background snapshot: BGSAVE (and save
//! points), the AOF rewrite, and a replica's full sync; `total_forks`
//! counts them and `latest_fork_usec` is how long the last `fork()` held
//! the main thread. Vireo takes the same snapshots as a point-in-time cut
//! of the keyspace (every shard locked at once, see
//! `vireo_store::snapshot`) walked by a background thread, so the faithful
//! equivalents are: a background snapshot started counts as a fork, and
//! the time from asking for the cut to having it is the fork time, the
//! pause writers see. Snapshots taken in the foreground (SAVE, DEBUG
//! RELOAD, SHUTDOWN's save, the AOF base made at start-up) are not
//! counted, as Redis does not fork for them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::server::Server;

/// A background snapshot's cut was taken, `took` after it was asked for:
/// counts it, and records a `fork` latency event past the threshold, as
/// Redis does for its fork.
pub fn started(server: &Server, took: Duration) {
    let ms = server.forks.record(took);
    crate::ops::metrics::sample_latency(server, "fork", ms);
}

/// `total_forks` and `latest_fork_usec`.
#[derive(Default)]
pub struct ForkStats {
    total: AtomicU64,
    latest_us: AtomicU64,
}

impl ForkStats {
    /// A background snapshot's cut was taken, `took` after it was asked
    /// for. Returns the time in ms, for the latency monitor's `fork`
    /// event.
    pub fn record(&self, took: Duration) -> u64 {
        let us = took.as_micros() as u64;
        self.total.fetch_add(1, Ordering::Relaxed);
        self.latest_us.store(us, Ordering::Relaxed);
        us / 1000
    }

    /// `total_forks`: background snapshots started.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// `latest_fork_usec`: how long the last one's cut took.
    pub fn latest_us(&self) -> u64 {
        self.latest_us.load(Ordering::Relaxed)
    }

    /// CONFIG RESETSTAT zeroes both, as Redis does.
    pub fn reset(&self) {
        self.total.store(0, Ordering::Relaxed);
        self.latest_us.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cut_counts_and_resetstat_zeroes() {
        let forks = ForkStats::default();
        assert_eq!(forks.record(Duration::from_micros(2500)), 2);
        forks.record(Duration::from_micros(700));
        assert_eq!((forks.total(), forks.latest_us()), (2, 700));
        forks.reset();
        assert_eq!((forks.total(), forks.latest_us()), (0, 0));
    }
}
