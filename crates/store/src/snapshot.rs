//! Point-in-time snapshots of the whole keyspace without `fork()`.
//!
//! Redis snapshots by forking and letting the kernel copy pages on write,
//! which costs a latency spike at the fork and up to twice the memory under
//! writes. Vireo copies on write *per entry* instead:
//!
//! 1. [`Keyspace::begin_snapshot`] locks every shard (in ascending order, so
//!    the moment is a consistent cut between multi-key commands), marks each
//!    one pending and runs the caller's `at_cut` hook (the AOF switches to a
//!    new incremental file there), then lets go.
//! 2. Until a pending shard is serialized, every change to one of its keys
//!    first keeps the key's entry as it was at the cut (or the fact that the
//!    key did not exist) in the shard's [`Pending`] table — once per key.
//!    Reads cost nothing, and a write pays one copy of one entry.
//! 3. The background driver ([`Keyspace::drive_snapshot`]) locks the shards
//!    one at a time and hands each to the [`ShardVisitor`] as a
//!    [`ShardImage`]: the current entries that did not change, plus the kept
//!    ones. Bulk operations that would have to copy a whole shard (FLUSHDB,
//!    SWAPDB) hand it over themselves first.
//!
//! The visitor usually serializes the shard into a buffer for a writer
//! thread; the order of shards in the output does not matter for RDB or
//! AOF. Extra memory is the entries changed before the driver reached their
//! shard, plus the serialized shards not yet written out.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::dict::{hash_key, Dict};
use crate::keyspace::{Entry, Key, Keyspace, Shard};

/// Receives the shards of a snapshot.
pub trait ShardVisitor: Send + Sync {
    /// Called exactly once per shard, with the shard locked, seeing it as it
    /// was at the snapshot's cut. Must not lock shards itself (it runs while
    /// the caller holds shard locks) and should be quick: blocking here
    /// stalls the commands waiting for the shard.
    fn visit(&self, index: usize, image: &ShardImage<'_>);
}

/// What a shard owes the running snapshot: the visitor to hand it to, and
/// the cut's version of every key changed since.
pub(crate) struct Pending {
    visitor: Arc<dyn ShardVisitor>,
    /// Per database (empty until the first change): key → its entry at the
    /// cut, or None if the key did not exist then.
    before: Vec<Dict<Key, Option<Entry>>>,
}

impl Pending {
    /// Records `current` as `key`'s state at the cut, unless the key
    /// already changed since (then the older record is the cut's).
    pub(crate) fn keep(
        &mut self,
        databases: usize,
        db: usize,
        hash: u64,
        key: &[u8],
        current: Option<&Entry>,
    ) {
        if self.before.is_empty() {
            self.before.resize_with(databases, Dict::new);
        }
        let kept = &mut self.before[db];
        if !kept.contains_key(hash, key) {
            kept.insert(hash, key.into(), current.cloned());
        }
    }
}

/// A shard as it was at a snapshot's cut.
pub struct ShardImage<'a> {
    shard: &'a Shard,
    before: &'a [Dict<Key, Option<Entry>>],
}

impl<'a> ShardImage<'a> {
    /// Number of logical databases the shard has a slice of.
    pub fn databases(&self) -> usize {
        self.shard.dbs.len()
    }

    /// Every key of `db` in this shard at the cut, with its entry; expired
    /// ones included (a snapshot keeps them with their expiry time; a loader
    /// drops the ones past due, as Redis does).
    pub fn entries(&self, db: usize) -> impl Iterator<Item = (&'a [u8], &'a Entry)> + 'a {
        let kept = self.before.get(db).filter(|k| !k.is_empty());
        let unchanged = self.shard.dbs[db]
            .keys
            .iter()
            .filter(move |(k, _)| kept.is_none_or(|kept| !kept.contains_key(hash_key(k), k)));
        let changed = kept
            .into_iter()
            .flat_map(|kept| kept.iter())
            .filter_map(|(k, e)| e.as_ref().map(|e| (k, e)));
        unchanged.chain(changed).map(|(k, e)| (&k[..], e))
    }

    /// True if `db` had no keys in this shard at the cut.
    pub fn is_empty(&self, db: usize) -> bool {
        self.entries(db).next().is_none()
    }
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
    /// Takes a point-in-time cut of every database and makes every shard
    /// keep its pre-cut entries until it is visited. `at_cut` runs while
    /// every shard is locked: no command is half-way through, so anything
    /// it records (an AOF file switch) splits the command stream exactly.
    ///
    /// Returns at once with the number of keys (every database) at the cut;
    /// call [`Keyspace::drive_snapshot`] from a background thread to hand
    /// the shards to `visitor`. FLUSHDB/SWAPDB may hand shards over from the
    /// moment this returns, so whatever consumes the visitor's output must
    /// already be running.
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
            g.pending = Some(Box::new(Pending {
                visitor: Arc::clone(&visitor),
                before: Vec::new(),
            }));
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
            let mut shard = self.shards[i].lock();
            self.settle_snapshot(i, &mut shard);
        }
    }

    /// True from [`Keyspace::begin_snapshot`] until its last shard was
    /// visited.
    pub fn snapshot_in_progress(&self) -> bool {
        self.snapshot_left.load(Ordering::Acquire) != 0
    }

    /// Hands a locked shard to the pending snapshot, if it still owes it.
    pub(crate) fn settle_snapshot(&self, index: usize, shard: &mut Shard) {
        if let Some(pending) = shard.pending.take() {
            let image = ShardImage {
                shard,
                before: &pending.before,
            };
            pending.visitor.visit(index, &image);
            self.snapshot_left.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Shard {
    /// Keeps `key`'s entry as it is now for a pending snapshot; called
    /// before anything changes the key.
    #[inline]
    pub(crate) fn preserve(&mut self, db: usize, hash: u64, key: &[u8]) {
        if let Some(pending) = self.pending.as_deref_mut() {
            let databases = self.dbs.len();
            pending.keep(databases, db, hash, key, self.dbs[db].keys.get(hash, key));
        }
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
        /// (db, key) → expiry, for keys with one.
        expires: Mutex<BTreeMap<(usize, Vec<u8>), u64>>,
        visits: Mutex<Vec<usize>>,
    }

    impl ShardVisitor for Collect {
        fn visit(&self, index: usize, image: &ShardImage<'_>) {
            self.visits.lock().push(index);
            let mut seen = self.seen.lock();
            for db in 0..image.databases() {
                for (k, e) in image.entries(db) {
                    let Value::Str(s) = &e.value else {
                        panic!("strings only")
                    };
                    seen.insert((db, k.to_vec()), s.to_vec());
                    if let Some(at) = e.expire_at() {
                        self.expires.lock().insert((db, k.to_vec()), at);
                    }
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

    /// Every write path after the cut, and none leaks into the image.
    #[test]
    fn every_kind_of_change_keeps_the_cut_state() {
        let ks = Keyspace::new(3, 4);
        for i in 0..40 {
            put(&ks, 0, &format!("k{i}"), "old");
        }
        put(&ks, 2, "other", "old");
        let far = crate::clock::now_ms() + 1_000_000;
        ks.lock_all().set_expire(0, b"k0", far);
        let c = Arc::new(Collect::default());
        ks.begin_snapshot(c.clone(), || {}).unwrap();
        let mut keys = ks.lock_all();
        // In place through get_mut, and TTL changes.
        keys.get_mut(0, b"k1").unwrap().value = Value::Str(StrValue::from_bytes(b"new"));
        keys.persist(0, b"k0");
        keys.set_expire(0, b"k2", far);
        // Deleted then re-added; added then deleted; expired lazily.
        keys.remove(0, b"k3");
        put_held(&mut keys, 0, "k3", "new");
        put_held(&mut keys, 0, "fresh", "new");
        keys.remove(0, b"fresh");
        keys.set_expire(0, b"k4", 1);
        assert!(keys.get_read(0, b"k4").is_none());
        // Reads keep nothing.
        assert!(keys.get_read(0, b"k5").is_some());
        drop(keys);
        let kept: usize = (0..ks.shard_count())
            .map(|i| {
                let shard = ks.shards[i].lock();
                let pending = shard.pending.as_ref().unwrap();
                pending.before.iter().map(|d| d.len()).sum::<usize>()
            })
            .sum();
        assert_eq!(kept, 6, "k0 k1 k2 k3 k4 fresh");
        // Whole-database operations hand their shards over first.
        let mut keys = ks.lock_all();
        keys.swap_db(0, 1);
        drop(keys.flush_db(2));
        drop(keys);
        ks.drive_snapshot();
        let seen = c.seen.lock();
        assert_eq!(seen.len(), 41);
        assert!(seen.values().all(|v| v == b"old"));
        assert!(seen.contains_key(&(2, b"other".to_vec())));
        assert!(!seen.contains_key(&(0, b"fresh".to_vec())));
        let expires = c.expires.lock();
        assert_eq!(expires.len(), 1);
        assert_eq!(expires[&(0, b"k0".to_vec())], far);
    }

    fn put_held(keys: &mut crate::keyspace::Keys<'_>, db: usize, key: &str, val: &str) {
        keys.set(
            db,
            key.as_bytes(),
            Value::Str(StrValue::from_bytes(val.as_bytes())),
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
