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
//! 2. The background driver ([`Keyspace::drive_snapshot`]) walks each
//!    shard's tables in the order their entries are stored, a few hundred
//!    keys per lock hold, and hands the serialized bytes to the
//!    [`ShardVisitor`] after letting go of the lock.
//! 3. Until the walk has passed a key, the first change to it writes the
//!    key's entry as it was at the cut into the shard's [`Pending`] output
//!    (serialized by the visitor on the thread of the command changing it,
//!    so nothing but those bytes is kept) and marks its entry for the
//!    walk to pass over (a bit in the key table's slot, which the lookup
//!    has just read); a key added after the cut is marked the same way.
//!    Reads cost nothing, a write at most the serialization of one
//!    entry, and a command waits for the walk at most one step. FLUSHDB
//!    and SWAPDB, which would have to write out whole tables, finish their
//!    shards' walks first.
//!
//! The walk follows the key table's tag cursor
//! (`KeyTable::walk` in `key_table.rs`), which is also storage order, so
//! it reads memory sequentially (walking the old chained table in bucket
//! order took most of the driver's time under a write load). Whether a key
//! is behind the walk depends on its tag alone, so insertions, removals and
//! resizes, which move entries between slots, never carry one across the
//! walk; its mark moves with it. The order of keys in the output does not
//! matter for RDB or AOF. Extra memory is the serialized cut versions of the
//! keys changed ahead of the walk and the output not yet written to the
//! file. (Session 7 moved the marks from a bitmap per table, whose load was
//! a cache miss on most writes, into the slots; session 12 into the entry
//! handles the slots are.)
//!
//! (Until session 6 the cut versions were kept as copies of the entries
//! in a table of their keys: under a write load over 10M small keys,
//! inserting into that table was a tenth of the workers' time, and the
//! copies were most of a save's extra memory.)

use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::keyspace::{Entry, Keyspace, Shard};

/// Keys the driver serializes per lock hold: long enough to amortize the
/// locking, short enough that a command finding the shard busy waits
/// microseconds, not the whole shard's serialization.
const STEP_KEYS: usize = 64;

/// How many keys ahead of the one it serializes the walk prefetches an
/// entry: enough misses in flight to cover a memory latency (~100 ns)
/// with a key's serialization taking tens of nanoseconds.
const WALK_PREFETCH_AHEAD: usize = 16;

/// Output the driver collects across steps before handing it over, so the
/// writer is woken per 64 KiB rather than per step.
const EMIT_BYTES: usize = 64 * 1024;

/// Cut versions a shard's writers serialize are handed over in pieces of
/// about this size, without waiting for the walk to reach the shard: what
/// waited was most of a save's extra memory (the walk reaches the last
/// shards at the end of the save, so under a uniform write load a quarter
/// of the save's writes were held at its midpoint).
const KEPT_PIECE_BYTES: usize = 16 * 1024;

/// Serializes the shards of a snapshot.
pub trait ShardVisitor: Send + Sync {
    /// Appends the record that makes the following entries belong to
    /// database `db` (SELECTDB, SELECT).
    fn select_db(&self, out: &mut Vec<u8>, db: usize);
    /// Appends `key` of `db` with its entry as it was at the cut (after a
    /// [`ShardVisitor::select_db`] for `db`); false if the visitor left it
    /// out (already expired, say). Runs with the shard locked: must not
    /// lock shards and should be quick.
    fn entry(&self, out: &mut Vec<u8>, db: usize, key: &[u8], entry: &Entry) -> bool;
    /// Takes a finished piece of output holding `keys` entries, in general
    /// after the shard lock was let go (FLUSHDB and SWAPDB finish walks
    /// with every shard locked), so it may wait for a writer.
    fn emit(&self, bytes: Vec<u8>, keys: u64);
}

/// Where a snapshot's output goes, shared by its pending shards.
struct Sink {
    visitor: Arc<dyn ShardVisitor>,
    /// Full pieces of cut versions serialized by writers (with their
    /// SELECTDB records), and their key counts, for the driver to hand
    /// over when it next lets go of a shard.
    ready: Mutex<Vec<(Vec<u8>, u64)>>,
}

impl Sink {
    /// Hands the ready pieces to the visitor.
    fn emit_ready(&self) {
        let pieces = std::mem::take(&mut *self.ready.lock());
        for (bytes, keys) in pieces {
            self.visitor.emit(bytes, keys);
        }
    }
}

/// What a shard owes the running snapshot: where its output goes, how far
/// the walk got, and the cut's version of keys changed ahead of the walk
/// (already serialized) not yet handed over.
///
/// The entries ahead of the walk that it must pass over (their cut version
/// is out already, or they did not exist at the cut) carry their key
/// table's mark ([`crate::key_table::KeyTable::set_marked`]). Invariant: only
/// entries ahead of the walk are marked, and the walk clears each mark it
/// passes, so no mark outlives the snapshot.
pub(crate) struct Pending {
    sink: Arc<Sink>,
    /// Per database: the serialized cut versions of keys changed ahead of
    /// the walk (after a SELECTDB record) and how many keys that is, until
    /// they make a piece or the walk hands them on.
    kept: Vec<(Vec<u8>, u64)>,
    /// The database being walked; the ones below are done.
    db: usize,
    /// The walk's cursor in `db`'s table: entries whose tag is below it
    /// are out (see [`crate::key_table::KeyTable::walk`]; tags, unlike
    /// positions, do not change when the table does).
    cursor: u64,
    /// The shard's number of databases, to size `kept`.
    databases: usize,
}

impl Pending {
    fn new(sink: Arc<Sink>, databases: usize) -> Self {
        Pending {
            sink,
            kept: Vec::new(),
            db: 0,
            cursor: 0,
            databases,
        }
    }

    /// True when an entry of `db` with key table tag `tag` is ahead of
    /// the walk.
    fn ahead(&self, db: usize, tag: u32) -> bool {
        db > self.db || db == self.db && u64::from(tag) >= self.cursor
    }

    /// Serializes `entry` as `key`'s cut version, to go out in a full
    /// piece or with the walk's next step, whichever comes first. Serializing now costs the writer about what
    /// copying the entry would and keeps a fraction of the memory (for
    /// small values, a third: no copy of the entry and its key, no table
    /// of kept keys).
    fn keep(&mut self, db: usize, key: &[u8], entry: &Entry) {
        if self.kept.is_empty() {
            self.kept.resize_with(self.databases, Default::default);
        }
        let visitor = &*self.sink.visitor;
        let (out, keys) = &mut self.kept[db];
        let empty = out.is_empty();
        if empty {
            visitor.select_db(out, db);
        }
        if visitor.entry(out, db, key, entry) {
            *keys += 1;
        } else if empty {
            out.clear();
        }
        if out.len() >= KEPT_PIECE_BYTES {
            let piece = (std::mem::take(out), std::mem::take(keys));
            self.sink.ready.lock().push(piece);
        }
    }

    /// Moves what writers kept to `out`; returns how many keys that was.
    fn hand_over_kept(&mut self, out: &mut Vec<u8>) -> u64 {
        let mut written = 0;
        for (bytes, keys) in &mut self.kept {
            out.extend_from_slice(&std::mem::take(bytes));
            written += std::mem::take(keys);
        }
        written
    }
}

impl Shard {
    /// Writes out the entry at position `found` of `db`'s table (none:
    /// the key is absent) as it is now, for a pending snapshot whose walk
    /// has not passed it; called, with the position the caller's lookup
    /// found, before anything changes the key.
    pub(crate) fn preserve_at(&mut self, db: usize, found: Option<usize>) {
        let Some(pending) = self.pending.as_deref_mut() else {
            return;
        };
        // Absent: if it is added, `mark_added` records that.
        let Some(i) = found else {
            return;
        };
        let keys = &mut self.dbs[db].keys;
        if !pending.ahead(db, keys.tag_at(i)) || keys.is_marked(i) {
            return;
        }
        if let Some(entry) = keys.at(i) {
            pending.keep(db, entry.key(), entry);
        }
        keys.set_marked(i, true);
    }

    /// A key was added at position `i` of `db`'s table: it did not exist
    /// at the cut, so the walk passes over it.
    #[inline]
    pub(crate) fn mark_added(&mut self, db: usize, i: usize) {
        let tag = self.dbs[db].keys.tag_at(i);
        if self.pending.as_deref().is_some_and(|p| p.ahead(db, tag)) {
            self.dbs[db].keys.set_marked(i, true);
        }
    }

    /// Walks on for about `budget` keys, appending their cut versions to
    /// `out` after what writers kept; returns (keys written, done). When
    /// done the shard no longer owes the snapshot anything.
    fn walk(&mut self, budget: usize, out: &mut Vec<u8>) -> (u64, bool) {
        let Some(pending) = self.pending.as_deref_mut() else {
            return (0, true);
        };
        let mut written = pending.hand_over_kept(out);
        let visitor = &*pending.sink.visitor;
        let mut selected = None;
        let mut seen = 0;
        let mut step = Vec::new();
        while pending.db < self.dbs.len() && seen < budget {
            let db = pending.db;
            let table = &mut self.dbs[db].keys;
            step.clear();
            let next = table.walk(pending.cursor, budget - seen, |i| step.push(i));
            for (n, &i) in step.iter().enumerate() {
                // Entries sit wherever the allocator put them: without
                // this the walk waits on one cache miss per key in turn.
                if let Some(ahead) = step.get(n + WALK_PREFETCH_AHEAD) {
                    table.at(*ahead).map(Entry::prefetch);
                }
                if table.is_marked(i) {
                    table.set_marked(i, false);
                    continue;
                }
                let Some(e) = table.at(i) else {
                    continue;
                };
                if selected != Some(db) {
                    visitor.select_db(out, db);
                    selected = Some(db);
                }
                written += u64::from(visitor.entry(out, db, e.key(), e));
            }
            seen += step.len().max(1);
            pending.cursor = next;
            if next == 0 {
                pending.db += 1;
            }
        }
        let done = pending.db == self.dbs.len();
        if done {
            self.pending = None;
        }
        (written, done)
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
    /// keep the cut's version of what changes until the walk passes it.
    /// `at_cut` runs while every shard is locked: no command is half-way
    /// through, so anything it records (an AOF file switch) splits the
    /// command stream exactly.
    ///
    /// Returns at once with the number of keys (every database) at the cut;
    /// call [`Keyspace::drive_snapshot`] from a background thread to walk
    /// the shards. FLUSHDB/SWAPDB may hand output to `visitor` from the
    /// moment this returns, with every shard locked, so whatever consumes
    /// it must already be running.
    pub fn begin_snapshot(
        &self,
        visitor: Arc<dyn ShardVisitor>,
        at_cut: impl FnOnce(),
    ) -> Result<usize, SnapshotBusy> {
        let n = self.shards.len();
        self.snapshot_left
            .compare_exchange(0, n, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| SnapshotBusy)?;
        let sink = Arc::new(Sink {
            visitor,
            ready: Mutex::new(Vec::new()),
        });
        self.snapshots_begun.fetch_add(1, Ordering::AcqRel);
        let mut guards: Vec<_> = self.shards.iter().map(|s| s.lock()).collect();
        let mut keys = 0;
        for g in &mut guards {
            let databases = g.dbs.len();
            g.pending = Some(Box::new(Pending::new(Arc::clone(&sink), databases)));
            keys += g.dbs.iter().map(|t| t.keys.len()).sum::<usize>();
        }
        at_cut();
        drop(guards);
        Ok(keys)
    }

    /// Walks every shard the snapshot has not finished, a step per lock
    /// hold. When it returns, the snapshot begun before the call is done.
    /// A second thread may drive the same snapshot alongside (to help a
    /// starved driver): they share each shard's walk step by step.
    pub fn drive_snapshot(&self) {
        for i in 0..self.shards.len() {
            if !self.snapshot_in_progress() {
                return;
            }
            self.walk_shard(i);
        }
    }

    /// Walks shard `i` to its end, a step per lock hold, handing the output
    /// over in pieces of about [`EMIT_BYTES`]. Stops early if something
    /// else (FLUSHDB, SWAPDB) finished the shard meanwhile.
    fn walk_shard(&self, i: usize) {
        let mut out = Vec::new();
        let mut keys = 0;
        let mut sink = None;
        loop {
            let done = {
                let mut shard = self.shards[i].lock();
                let Some(pending) = shard.pending.as_ref() else {
                    break;
                };
                sink.get_or_insert_with(|| pending.sink.clone());
                let (written, done) = shard.walk(STEP_KEYS, &mut out);
                keys += written;
                done
            };
            let Some(sink) = &sink else { break };
            sink.emit_ready();
            if done || out.len() >= EMIT_BYTES {
                // A big shard: the next piece will be as big.
                let room = if done { 0 } else { EMIT_BYTES + EMIT_BYTES / 4 };
                let piece = std::mem::replace(&mut out, Vec::with_capacity(room));
                sink.visitor.emit(piece, std::mem::take(&mut keys));
            }
            if done {
                // After the output is out: the snapshot ends when the last
                // piece has reached the visitor. (Pieces of shards still
                // pending go out with their own walks.)
                self.snapshot_left.fetch_sub(1, Ordering::AcqRel);
                return;
            }
        }
        if let Some(sink) = sink {
            if !out.is_empty() {
                sink.visitor.emit(out, keys);
            }
        }
    }

    /// True from [`Keyspace::begin_snapshot`] until its last shard was
    /// walked.
    pub fn snapshot_in_progress(&self) -> bool {
        self.snapshot_left.load(Ordering::Acquire) != 0
    }

    /// The running snapshot's progress, for noticing a driver that gets
    /// no CPU: which snapshot it is (a count of snapshots begun) and how
    /// many shards it has yet to finish (0 when none runs).
    pub fn snapshot_progress(&self) -> (u64, usize) {
        (
            self.snapshots_begun.load(Ordering::Acquire),
            self.snapshot_left.load(Ordering::Acquire),
        )
    }

    /// Finishes the walk of a locked shard at once, if it is pending.
    pub(crate) fn settle_snapshot(&self, shard: &mut Shard) {
        let Some(sink) = shard.pending.as_ref().map(|p| p.sink.clone()) else {
            return;
        };
        let mut out = Vec::new();
        let (keys, _) = shard.walk(usize::MAX, &mut out);
        sink.emit_ready();
        sink.visitor.emit(out, keys);
        self.snapshot_left.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{StrValue, Value, ValueRef};
    use parking_lot::Mutex;
    use std::collections::BTreeMap;

    /// (db, key) → value.
    type Image = BTreeMap<(usize, Vec<u8>), Vec<u8>>;

    /// Collects (db, key, value) of every serialized entry, checking that
    /// none comes twice, and the key count of every piece of output.
    #[derive(Default)]
    struct Collect {
        seen: Mutex<Image>,
        /// (db, key) → expiry, for keys with one.
        expires: Mutex<BTreeMap<(usize, Vec<u8>), u64>>,
        /// The key count of each piece of output.
        emitted: Mutex<Vec<u64>>,
    }

    impl ShardVisitor for Collect {
        fn select_db(&self, _out: &mut Vec<u8>, _db: usize) {}

        fn entry(&self, out: &mut Vec<u8>, db: usize, k: &[u8], e: &Entry) -> bool {
            let ValueRef::Str(s) = e.value() else {
                panic!("strings only")
            };
            // Output of a realistic size, so kept versions make pieces.
            out.extend_from_slice(k);
            out.extend_from_slice(&s.to_vec());
            let old = self.seen.lock().insert((db, k.to_vec()), s.to_vec());
            assert!(old.is_none(), "{k:?} serialized twice");
            if let Some(at) = e.expire_at() {
                self.expires.lock().insert((db, k.to_vec()), at);
            }
            true
        }

        fn emit(&self, _bytes: Vec<u8>, keys: u64) {
            self.emitted.lock().push(keys);
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
        assert_eq!(c.emitted.lock().iter().sum::<u64>(), 200);
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
        *keys.get_mut(0, b"k1").unwrap().value_mut() = Value::Str(StrValue::from_bytes(b"new"));
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
        let kept: u64 = (0..ks.shard_count())
            .map(|i| {
                let shard = ks.shards[i].lock();
                let pending = shard.pending.as_ref().unwrap();
                pending.kept.iter().map(|(_, keys)| *keys).sum::<u64>()
            })
            .sum();
        assert_eq!(kept, 5, "k0 k1 k2 k3 k4 written out, fresh only marked");
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
    fn writers_hand_full_pieces_over_before_the_walk_gets_there() {
        let ks = Keyspace::new(1, 1);
        let big = "c".repeat(1000);
        for i in 0..100 {
            put(&ks, 0, &format!("k{i}"), &big);
        }
        let c = Arc::new(Collect::default());
        ks.begin_snapshot(c.clone(), || {}).unwrap();
        for i in 0..100 {
            put(&ks, 0, &format!("k{i}"), "later");
        }
        let ready = {
            let shard = ks.shards[0].lock();
            let sink = &shard.pending.as_ref().unwrap().sink;
            let ready = sink.ready.lock();
            assert!(ready.iter().all(|(b, _)| b.len() >= KEPT_PIECE_BYTES));
            ready.iter().map(|(_, keys)| keys).sum::<u64>()
        };
        assert!(ready >= 64, "{ready} keys in full pieces");
        ks.drive_snapshot();
        assert_eq!(c.seen.lock().len(), 100);
        assert!(c.seen.lock().values().all(|v| *v == big.as_bytes()));
        assert_eq!(c.emitted.lock().iter().sum::<u64>(), 100);
    }

    #[test]
    fn one_snapshot_at_a_time_and_the_next_may_follow() {
        let ks = Keyspace::new(1, 4);
        for i in 0..10 {
            put(&ks, 0, &format!("k{i}"), "v");
        }
        assert_eq!(ks.snapshot_progress(), (0, 0));
        for n in 1..=2 {
            let c = Arc::new(Collect::default());
            ks.begin_snapshot(c.clone(), || {}).unwrap();
            assert_eq!(ks.begin_snapshot(c.clone(), || {}), Err(SnapshotBusy));
            assert_eq!(
                ks.snapshot_progress(),
                (n, 4),
                "a new snapshot, 4 shards to go"
            );
            ks.drive_snapshot();
            assert!(!ks.snapshot_in_progress());
            assert_eq!(ks.snapshot_progress(), (n, 0));
            assert_eq!(c.seen.lock().len(), 10);
        }
    }

    /// Writes interleaved with the walk's steps, in one shard whose tables
    /// grow several times (even seeds) or lose most of their keys (odd
    /// seeds) meanwhile: the image is still exactly the cut, each key once.
    #[test]
    fn a_walk_interleaved_with_writes_growth_and_deletes_is_exact() {
        for seed in 0..300 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let ks = Keyspace::new(2, 1);
            let mut cut = BTreeMap::new();
            let deleting = seed % 2 == 1;
            for i in 0..300 {
                let db = rng.usize(..2);
                put(&ks, db, &format!("k{i}"), "cut");
                cut.insert((db, format!("k{i}").into_bytes()), b"cut".to_vec());
            }
            let c = Arc::new(Collect::default());
            ks.begin_snapshot(c.clone(), || {}).unwrap();
            let mut fresh = 0;
            loop {
                let mut keys = ks.lock_all();
                for _ in 0..rng.usize(0..40) {
                    let db = rng.usize(..2);
                    let key = if deleting || rng.bool() {
                        format!("k{}", rng.usize(..300))
                    } else {
                        fresh += 1;
                        format!("new{fresh}")
                    };
                    if rng.u8(..4) < if deleting { 3 } else { 1 } {
                        keys.remove(db, key.as_bytes());
                    } else if rng.bool() {
                        let v = Value::Str(StrValue::from_bytes(b"later"));
                        keys.set(db, key.as_bytes(), v);
                    } else {
                        // As long as "cut": SET overwrites it in place.
                        keys.set_str(db, key.as_bytes(), b"new", None);
                    }
                }
                drop(keys);
                let mut shard = ks.shards[0].lock();
                let (_, done) = shard.walk(rng.usize(1..10), &mut Vec::new());
                if done {
                    break;
                }
            }
            assert_eq!(*c.seen.lock(), cut, "seed {seed}");
            // No mark outlives the walk (the next snapshot would skip).
            let shard = ks.shards[0].lock();
            for db in 0..2 {
                let keys = &shard.dbs[db].keys;
                assert!(keys.iter().all(|e| !e.is_marked()), "seed {seed}");
            }
        }
    }

    #[test]
    fn two_drivers_share_the_walk_and_write_each_key_once() {
        let ks = Arc::new(Keyspace::new(2, 8));
        for i in 0..3000 {
            put(&ks, i % 2, &format!("k{i}"), "cut");
        }
        let c = Arc::new(Collect::default());
        ks.begin_snapshot(c.clone(), || {}).unwrap();
        let writer = {
            let ks = Arc::clone(&ks);
            std::thread::spawn(move || {
                for i in (0..3000).rev() {
                    put(&ks, i % 2, &format!("k{i}"), "later");
                }
            })
        };
        let drivers: Vec<_> = (0..2)
            .map(|_| {
                let ks = Arc::clone(&ks);
                std::thread::spawn(move || ks.drive_snapshot())
            })
            .collect();
        for t in drivers.into_iter().chain([writer]) {
            t.join().unwrap();
        }
        assert!(!ks.snapshot_in_progress());
        let seen = c.seen.lock();
        assert_eq!(seen.len(), 3000);
        assert!(seen.values().all(|v| v == b"cut"));
        assert_eq!(c.emitted.lock().iter().sum::<u64>(), 3000);
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
