//! What stops a running statement: its deadline, or its caller losing
//! interest ([`Abandon`]).
//!
//! Each connection has one [`Watch`], read by SQLite's progress handler
//! every few thousand virtual-machine steps on the thread that runs the
//! statement. A run arms it with its [`RunLimits`] and disarms it when it
//! returns. The handler's answer "stop" makes SQLite interrupt the
//! statement (`SQLITE_INTERRUPT`), exactly as `sqlite3_interrupt` would,
//! but decided on the running thread: nothing outside has to find the
//! connection, and a watch that is not armed costs one atomic load.
//!
//! The deadline is checked on every call; the [`Abandon`] question (for a
//! client, a `poll` of its socket) at most every [`ABANDON_POLL`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::Mutex;

use crate::{Abandon, RunLimits, ABANDON_POLL};

/// One connection's stop conditions for the run in progress.
#[derive(Default)]
pub(crate) struct Watch {
    /// When the run must stop, in ns since [`epoch`]; 0 for no limit.
    deadline_ns: AtomicU64,
    /// When to ask `abandon` next, in ns since [`epoch`].
    next_ask_ns: AtomicU64,
    /// Who to ask whether the run is still wanted; None when unarmed.
    abandon: Mutex<Option<Arc<dyn Abandon>>>,
}

/// The instant deadlines count from.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ns() -> u64 {
    epoch().elapsed().as_nanos() as u64
}

impl Watch {
    /// Arms the watch for a run under `limits`.
    pub(crate) fn arm(&self, limits: &RunLimits) {
        let now = now_ns();
        let deadline = limits
            .time_limit
            .map_or(0, |t| now.saturating_add(t.as_nanos() as u64).max(1));
        self.deadline_ns.store(deadline, Ordering::Relaxed);
        self.next_ask_ns
            .store(now + ABANDON_POLL.as_nanos() as u64, Ordering::Relaxed);
        *self.abandon.lock() = limits.abandon.clone();
    }

    /// Disarms the watch once the run returned.
    pub(crate) fn disarm(&self) {
        self.deadline_ns.store(0, Ordering::Relaxed);
        *self.abandon.lock() = None;
    }

    /// The progress handler's question: true to interrupt the statement.
    pub(crate) fn must_stop(&self) -> bool {
        let deadline = self.deadline_ns.load(Ordering::Relaxed);
        let now = now_ns();
        if deadline != 0 && now > deadline {
            return true;
        }
        if now < self.next_ask_ns.load(Ordering::Relaxed) {
            return false;
        }
        self.next_ask_ns
            .store(now + ABANDON_POLL.as_nanos() as u64, Ordering::Relaxed);
        self.abandon.lock().as_ref().is_some_and(|a| a.abandoned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    struct Flag(AtomicBool);

    impl Abandon for Flag {
        fn abandoned(&self) -> bool {
            self.0.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn a_watch_stops_past_its_deadline_or_once_abandoned_and_never_unarmed() {
        let watch = Watch::default();
        assert!(!watch.must_stop());
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        watch.arm(&RunLimits {
            time_limit: Some(Duration::from_millis(30)),
            abandon: Some(flag.clone()),
            ..RunLimits::default()
        });
        assert!(!watch.must_stop());
        std::thread::sleep(Duration::from_millis(40));
        assert!(watch.must_stop(), "past the deadline");
        watch.arm(&RunLimits {
            abandon: Some(flag.clone()),
            ..RunLimits::default()
        });
        flag.0.store(true, Ordering::Relaxed);
        // Asked only once ABANDON_POLL has passed since arming.
        assert!(!watch.must_stop());
        std::thread::sleep(ABANDON_POLL + Duration::from_millis(5));
        assert!(watch.must_stop(), "abandoned");
        watch.disarm();
        std::thread::sleep(ABANDON_POLL + Duration::from_millis(5));
        assert!(!watch.must_stop(), "disarmed");
    }
}
