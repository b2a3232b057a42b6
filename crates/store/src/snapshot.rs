//! Point-in-time snapshots of the whole keyspace without `fork()`.
//!
//! Redis snapshots by forking and letting the kernel copy pages on write,
//! which costs a latency spike at the fork and up to twice the memory under
//! writes. Vireo instead copies on *first touch at shard granularity*:
//!
//! 1. [`Keyspace::begin_snapshot`] locks every shard (in ascending order, so
//!    the moment is a consistent cut between multi-key commands), marks each
//!    one pending and runs the caller's `at_cut` hook (the AOF switches to a
//!    new incremental file there), then lets go.
//! 2. From then on, whoever locks a pending shard first — a command on any
//!    worker, active expiry, or the background driver
//!    ([`Keyspace::drive_snapshot`]) — hands it to the [`ShardVisitor`]
//!    *before* doing anything else with it. Nothing can have changed the
//!    shard since the cut, so the visitor sees it exactly as it was then.
//!
//! The visitor usually serializes the shard into a buffer and passes the
//! buffer to a writer thread; the order of shards in the output does not
//! matter for RDB or AOF. Extra memory is only the serialized shards not yet
//! written out, and a writer pays at most one shard's serialization (about
//! 1/1024 of the data) the first time it touches a shard.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::keyspace::{Entry, Keyspace, Shard};

/// Receives the shards of a snapshot.
pub trait ShardVisitor: Send + Sync {
    /// Called exactly once per shard, with the shard locked and in the state
    /// it had at the snapshot's cut. Must not lock shards itself (it runs
    /// while the caller holds shard locks) and should be quick: blocking here
    /// stalls the command that touched the shard.
    fn visit(&self, index: usize, shard: &Shard);
}

/// A snapshot is already running; only one may run at a time (as Redis
/// refuses a second BGSAVE while one is in progress).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotBusy;

impl std::fmt::Display for SnapshotBusy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a snapshot is already in progress")
    }
}

impl std::error::Error for SnapshotBusy {}

impl Keyspace {
    /// Takes a point-in-time cut of every database and starts handing the
    /// shards to `visitor`. `at_cut` runs while every shard is locked: no
    /// command is half-way through, so anything it records (an AOF file
    /// switch) splits the command stream exactly at the snapshot.
    ///
    /// Returns at once with the number of keys (every database) at the cut;
    /// call [`Keyspace::drive_snapshot`] from a background thread to make
    /// sure every shard gets visited. Shards may be handed to the visitor
    /// from the moment this returns, so whatever consumes its output must
    /// already be running: a visitor that waits for a consumer which is only
    /// started afterwards stalls every command touching a pending shard.
    pub fn begin_snapshot(
        &self,
        visitor: Arc<dyn ShardVisitor>,
        at_cut: impl FnOnce(),
    ) -> Result<usize, SnapshotBusy> {
        let n = self.shards.len();
        self.snapshot_left
            .compare_exchange(0, n, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| SnapshotBusy)?;
        let mut guards: Vec<_> = self.shards.iter().map(|s| s.lock()).collect();
        let mut keys = 0;
        for g in &mut guards {
            g.pending_visit = Some(Arc::clone(&visitor));
            keys += g.dbs.iter().map(|t| t.keys.len()).sum::<usize>();
        }
        at_cut();
        drop(guards);
        Ok(keys)
    }

    /// Visits every shard the snapshot has not reached yet, one lock at a
    /// time. When it returns, every shard of the snapshot begun before the
    /// call has been visited.
    pub fn drive_snapshot(&self) {
        for i in 0..self.shards.len() {
            if !self.snapshot_in_progress() {
                return;
            }
            drop(self.lock_shard(i));
        }
    }

    /// True from [`Keyspace::begin_snapshot`] until its last shard was
    /// visited.
    pub fn snapshot_in_progress(&self) -> bool {
        self.snapshot_left.load(Ordering::Acquire) != 0
    }

    /// Hands a freshly locked shard to a pending snapshot first. Every lock
    /// through which data can be read or changed calls this.
    pub(crate) fn settle_snapshot(&self, index: usize, shard: &mut Shard) {
        if let Some(visitor) = shard.pending_visit.take() {
            visitor.visit(index, shard);
            self.snapshot_left.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Shard {
    /// Number of logical databases the shard has a slice of.
    pub fn databases(&self) -> usize {
        self.dbs.len()
    }

    /// Every key of `db` in this shard with its entry, expired ones
    /// included (a snapshot keeps them with their expiry time; a loader
    /// drops the ones past due, as Redis does).
    pub fn entries(&self, db: usize) -> impl ExactSizeIterator<Item = (&[u8], &Entry)> {
        self.dbs[db].keys.iter().map(|(k, e)| (&k[..], e))
    }

    /// (keys, keys with a TTL) of `db` in this shard, for RDB's RESIZEDB.
    pub fn db_sizes(&self, db: usize) -> (usize, usize) {
        let t = &self.dbs[db];
        (t.keys.len(), t.volatile.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{StrValue, Value};
    use parking_lot::Mutex;
    use std::collections::BTreeMap;

    /// (db, key) → value.
    type Image = BTreeMap<(usize, Vec<u8>), Vec<u8>>;

    /// Collects (db, key, value) of every visited shard and counts visits.
    #[derive(Default)]
    struct Collect {
        seen: Mutex<Image>,
        visits: Mutex<Vec<usize>>,
    }

    impl ShardVisitor for Collect {
        fn visit(&self, index: usize, shard: &Shard) {
            self.visits.lock().push(index);
            let mut seen = self.seen.lock();
            for db in 0..shard.databases() {
                for (k, e) in shard.entries(db) {
                    let Value::Str(s) = &e.value else {
                        panic!("strings only")
                    };
                    seen.insert((db, k.to_vec()), s.to_vec());
                }
            }
        }
    }

    fn put(ks: &Keyspace, db: usize, key: &str, val: &str) {
        let mut keys = ks.lock_keys([key.as_bytes()]);
        keys.set(
            db,
            key.as_bytes(),
            Value::Str(StrValue::from_bytes(val.as_bytes())),
        );
    }

    #[test]
    fn image_is_the_state_at_the_cut_despite_later_writes() {
        let ks = Keyspace::new(2, 16);
        for i in 0..200 {
            put(&ks, i % 2, &format!("k{i}"), "old");
        }
        let c = Arc::new(Collect::default());
        let mut cut_ran = false;
        let keys_at_cut = ks.begin_snapshot(c.clone(), || cut_ran = true).unwrap();
        assert!(cut_ran);
        assert_eq!(keys_at_cut, 200);
        assert!(ks.snapshot_in_progress());
        // Writes after the cut: overwrite, add, delete.
        for i in 0..100 {
            put(&ks, i % 2, &format!("k{i}"), "new");
        }
        put(&ks, 0, "added", "new");
        {
            let mut keys = ks.lock_keys([&b"k150"[..]]);
            keys.remove(0, b"k150");
        }
        ks.drive_snapshot();
        assert!(!ks.snapshot_in_progress());
        let seen = c.seen.lock();
        assert_eq!(seen.len(), 200);
        assert!(seen.values().all(|v| v == b"old"));
        assert!(!seen.contains_key(&(0, b"added".to_vec())));
        let mut visits = c.visits.lock().clone();
        visits.sort_unstable();
        assert_eq!(
            visits,
            (0..16).collect::<Vec<_>>(),
            "each shard exactly once"
        );
    }

    #[test]
    fn one_snapshot_at_a_time_and_the_next_may_follow() {
        let ks = Keyspace::new(1, 4);
        let c = Arc::new(Collect::default());
        ks.begin_snapshot(c.clone(), || {}).unwrap();
        assert_eq!(ks.begin_snapshot(c.clone(), || {}), Err(SnapshotBusy));
        ks.drive_snapshot();
        ks.begin_snapshot(c.clone(), || {}).unwrap();
        ks.drive_snapshot();
        assert_eq!(c.visits.lock().len(), 8);
    }

    #[test]
    fn concurrent_writers_never_leak_into_the_image() {
        let ks = Arc::new(Keyspace::new(1, 64));
        for i in 0..2000 {
            put(&ks, 0, &format!("k{i}"), "0");
        }
        let c = Arc::new(Collect::default());
        let writers: Vec<_> = (0..2)
            .map(|t| {
                let ks = Arc::clone(&ks);
                std::thread::spawn(move || {
                    for round in 1..20 {
                        for i in (t..2000).step_by(2) {
                            put(&ks, 0, &format!("k{i}"), &round.to_string());
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(5));
        ks.begin_snapshot(c.clone(), || {}).unwrap();
        ks.drive_snapshot();
        for w in writers {
            w.join().unwrap();
        }
        let seen = c.seen.lock();
        assert_eq!(seen.len(), 2000);
        // Each writer writes its keys in one order, round after round, so at
        // any instant its keys hold at most two adjacent round numbers and
        // the values are non-increasing along its write order.
        for t in 0..2 {
            let vals: Vec<u32> = (t..2000)
                .step_by(2)
                .map(|i| {
                    let v = &seen[&(0, format!("k{i}").into_bytes())];
                    std::str::from_utf8(v).unwrap().parse().unwrap()
                })
                .collect();
            assert!(vals.windows(2).all(|w| w[0] >= w[1]), "not a cut: {vals:?}");
            assert!(vals[0] - vals[vals.len() - 1] <= 1);
        }
    }
}
