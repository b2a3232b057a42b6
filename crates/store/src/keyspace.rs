//! The keyspace: `databases` logical databases split across many shards.
//!
//! A key's shard depends only on its hash, not on its database: shard `i`
//! holds the slice of *every* database whose keys hash to `i`. That makes
//! cross-database commands on one key (MOVE, COPY ... DB) single-shard, and
//! SWAPDB a per-shard swap of two tables.
//!
//! Locking protocol (the invariant that keeps multi-key commands atomic and
//! deadlock-free): a command locks every shard it will touch *before* it
//! starts, in ascending shard order, and holds them until it finishes.
//! [`Keyspace::lock_keys`] and [`Keyspace::lock_all`] do that and return a
//! [`Keys`] view; all reads and writes go through it. Commands that walk the
//! whole keyspace without needing a point-in-time view (SCAN, DBSIZE) use
//! [`Keyspace::lock_dynamic`], which locks one shard at a time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};
use smallvec::SmallVec;

use crate::clock::{command_now_ms, now_ms};
use crate::dict::hash_key;
pub use crate::entry::Entry;
use crate::hash_memo::key_hash;
use crate::key_table::KeyTable;
use crate::snapshot::Pending;
use crate::ttl_index::TtlIndex;
use crate::value::{Value, ValueRef};

/// Levels a prefetch loads inside a table, one per pass over a batch:
/// the home slot, then what the slot's entry points to.
const PREFETCH_DEPTHS: u8 = 2;

/// A key as stored: an owned byte string.
pub type Key = Box<[u8]>;

/// Set by the keyspace when a key a client WATCHes is modified.
pub type WatchFlag = Arc<AtomicBool>;

/// The LFU counter a new key starts with, so that it is not the first
/// eviction candidate before it had a chance to be accessed (Redis's
/// `LFU_INIT_VAL`).
pub const LFU_INIT_VAL: u8 = 5;

/// How accesses are recorded: which clock entries keep (`maxmemory-policy`
/// LFU or not) and the LFU counter's knobs (`lfu-log-factor`,
/// `lfu-decay-time`).
#[derive(Clone, Copy, Debug)]
pub struct LfuTuning {
    /// An LFU policy is set: entries keep an access counter, not an
    /// access time.
    pub lfu: bool,
    /// How many accesses it takes to saturate the counter: the higher, the
    /// slower the logarithmic counter grows.
    pub log_factor: u32,
    /// Minutes of inactivity that take one off the counter; 0 never decays.
    pub decay_minutes: u32,
}

impl Default for LfuTuning {
    fn default() -> Self {
        LfuTuning {
            lfu: false,
            log_factor: 10,
            decay_minutes: 1,
        }
    }
}

/// A function that frees values off the request path (the server's lazy
/// free thread).
pub type BackgroundFree = Box<dyn Fn(Value) + Send + Sync>;

/// What happens to values the keyspace removes on its own account: expired
/// keys, and values the server overwrites or deletes implicitly (Redis's
/// `dbOverwrite` and `dbDelete`: SET over a key, a *STORE destination,
/// RESTORE REPLACE, a collection emptied by a pop). Dropped in place, or,
/// with `lazyfree-lazy-expire` / `lazyfree-lazy-server-del` on, handed to
/// the background freer the server installed.
#[derive(Default)]
pub struct Disposal {
    lazy_expire: AtomicBool,
    lazy_server_del: AtomicBool,
    background: OnceLock<BackgroundFree>,
}

impl Disposal {
    /// Frees an expired entry (`lazyfree-lazy-expire`).
    fn expired(&self, entry: Entry) {
        self.dispose(entry, &self.lazy_expire);
    }

    /// Frees an entry the server overwrote or deleted implicitly
    /// (`lazyfree-lazy-server-del`).
    fn server_deleted(&self, entry: Entry) {
        self.dispose(entry, &self.lazy_server_del);
    }

    /// A string is one or two allocations and always freed in place; other
    /// values go to the background freer when `lazy` is on (which frees
    /// small ones in place too).
    fn dispose(&self, entry: Entry, lazy: &AtomicBool) {
        if matches!(entry.value(), ValueRef::Str(_)) {
            return;
        }
        match self.background.get() {
            Some(free) if lazy.load(Ordering::Relaxed) => free(entry.into_value()),
            _ => drop(entry),
        }
    }
}

/// Per-shard counters, summed over shards by INFO.
#[derive(Clone, Copy, Debug, Default)]
pub struct ShardStats {
    /// Keys removed because their TTL passed (lazily or actively).
    pub expired_keys: u64,
    /// Read lookups that found a key.
    pub keyspace_hits: u64,
    /// Read lookups that found nothing.
    pub keyspace_misses: u64,
    /// Keys removed by `maxmemory` eviction.
    pub evicted_keys: u64,
}

impl std::ops::AddAssign for ShardStats {
    fn add_assign(&mut self, o: Self) {
        self.expired_keys += o.expired_keys;
        self.keyspace_hits += o.keyspace_hits;
        self.keyspace_misses += o.keyspace_misses;
        self.evicted_keys += o.evicted_keys;
    }
}

/// One database's slice within a shard. (`repr(C)`: the key table's
/// header comes first, see [`ShardSlot`].)
#[derive(Default)]
#[repr(C)]
pub(crate) struct DbTable {
    pub(crate) keys: KeyTable,
    /// The keys that have a TTL, for active expiry and eviction sampling.
    pub(crate) volatile: TtlIndex,
    /// Where the active expiry cycle resumes its scan of `volatile`.
    expire_cursor: u64,
}

impl DbTable {
    /// Removes the entry at (occupied) position `i` of the key table.
    /// `hash` is its key's when the caller has it; a key with a TTL needs
    /// it to leave the TTL index.
    pub(crate) fn remove_at(&mut self, i: usize, hash: Option<u64>) -> Entry {
        let entry = self.keys.remove_at(i);
        if entry.expire_at().is_some() {
            self.volatile
                .remove(hash.unwrap_or_else(|| key_hash(entry.key())));
        }
        entry
    }
}

/// Tables taken out of the keyspace by [`Keys::flush_db`]; dropping this
/// frees them, which for a big database is worth doing on another thread.
pub struct Flushed {
    tables: Vec<DbTable>,
}

impl Flushed {
    /// Number of keys the flushed tables held.
    pub fn key_count(&self) -> usize {
        self.tables.iter().map(|t| t.keys.len()).sum()
    }
}

/// A shard's tables, one per database, indexed by database number.
/// Database 0's, where most data lives, is stored in the shard itself
/// rather than in a separate array, so that it shares a cache line with
/// the shard's lock (see [`ShardSlot`]).
pub(crate) struct Tables {
    first: DbTable,
    rest: Box<[DbTable]>,
}

impl Tables {
    fn new(databases: usize) -> Self {
        Tables {
            first: DbTable::default(),
            rest: (1..databases).map(|_| DbTable::default()).collect(),
        }
    }

    /// Number of databases.
    pub(crate) fn len(&self) -> usize {
        1 + self.rest.len()
    }

    /// The tables in database order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &DbTable> {
        std::iter::once(&self.first).chain(self.rest.iter())
    }

    /// Exchanges the tables of databases `a` and `b`.
    fn swap(&mut self, a: usize, b: usize) {
        match (a.min(b), a.max(b)) {
            (x, y) if x == y => {}
            (0, y) => std::mem::swap(&mut self.first, &mut self.rest[y - 1]),
            (x, y) => self.rest.swap(x - 1, y - 1),
        }
    }
}

impl std::ops::Index<usize> for Tables {
    type Output = DbTable;
    fn index(&self, db: usize) -> &DbTable {
        match db {
            0 => &self.first,
            _ => &self.rest[db - 1],
        }
    }
}

impl std::ops::IndexMut<usize> for Tables {
    fn index_mut(&mut self, db: usize) -> &mut DbTable {
        match db {
            0 => &mut self.first,
            _ => &mut self.rest[db - 1],
        }
    }
}

/// A lockable piece of the keyspace: its part of every database, the WATCH
/// registrations of its keys and its counters. (`repr(C)`: what every
/// write reads comes first, on the lock's cache line, see [`ShardSlot`]:
/// whether a snapshot is pending, whether anyone watches a key, database
/// 0's key table.)
#[repr(C)]
pub struct Shard {
    /// The snapshot this shard still owes its pre-cut contents to, with
    /// the entries changed since the cut (boxed: rare, and the shard array
    /// stays small).
    pub(crate) pending: Option<Box<Pending>>,
    /// WATCHed keys of this shard: key → (db, flag) for each watching
    /// client; none while no key is watched (boxed: one word to check).
    watchers: Option<Box<Watchers>>,
    pub(crate) dbs: Tables,
    pub(crate) stats: ShardStats,
    /// Where values this shard expires go.
    disposal: Arc<Disposal>,
}

/// WATCH registrations: key → each watching client's registration.
type Watchers = HashMap<Key, Vec<Watcher>>;

/// One client's WATCH of one key.
struct Watcher {
    /// The database the key was watched in.
    db: usize,
    /// The client's dirty flag, set when the key changes.
    flag: WatchFlag,
    /// The key was already past its TTL when watched (Redis 7.0's
    /// `watchedKey.expired`): its deletion is no change, and EXEC does not
    /// count it as expired since. Only touched under the shard's lock.
    stale: std::cell::Cell<bool>,
}

impl Shard {
    fn new(databases: usize, disposal: Arc<Disposal>) -> Self {
        Shard {
            pending: None,
            watchers: None,
            dbs: Tables::new(databases.max(1)),
            stats: ShardStats::default(),
            disposal,
        }
    }

    /// Removes `key` from `db` (and from the TTL index), keeping it for a
    /// pending snapshot first.
    pub(crate) fn remove_entry(&mut self, db: usize, hash: u64, key: &[u8]) -> Option<Entry> {
        let i = self.dbs[db].keys.position(hash, key)?;
        Some(self.remove_entry_at(db, i, Some(hash)))
    }

    /// Removes the entry at (occupied) position `i` of `db`'s table (and
    /// from the TTL index; `hash` is its key's if the caller has it),
    /// keeping it for a pending snapshot first.
    pub(crate) fn remove_entry_at(&mut self, db: usize, i: usize, hash: Option<u64>) -> Entry {
        self.preserve_at(db, Some(i));
        self.dbs[db].remove_at(i, hash)
    }

    /// Marks every client watching `key` in `db` as dirty (Redis's
    /// `touchWatchedKey`), called after the change: a key that was stale
    /// when watched and is now gone did not logically change.
    pub(crate) fn signal(&self, db: usize, key: &[u8]) {
        let Some(watchers) = self.watchers.as_deref() else {
            return;
        };
        for w in watchers.get(key).into_iter().flatten() {
            if w.db != db {
                continue;
            }
            if w.stale.get() && !self.dbs[db].keys.contains(key_hash(key), key) {
                w.stale.set(false);
                continue;
            }
            w.flag.store(true, Ordering::Release);
        }
    }

    /// Before `emptied` is flushed (`replaced_with` None) or swapped with
    /// `replaced_with`, marks the clients watching a key there whose value
    /// logically changes, as Redis 7.0's `touchAllWatchedKeysInDb`: a stale
    /// key that goes, or stays stale, is no change; a missing key replaced
    /// by a stale one becomes stale.
    fn signal_replaced(&self, emptied: usize, replaced_with: Option<usize>, now: u64) {
        for (key, list) in self.watchers.iter().flat_map(|w| w.iter()) {
            let hash = key_hash(key);
            let in_emptied = self.dbs[emptied].keys.contains(hash, key);
            let replacement = replaced_with.and_then(|d| self.dbs[d].keys.get(hash, key));
            if !in_emptied && replacement.is_none() {
                continue;
            }
            let replacement_stale = replacement.is_some_and(|e| e.is_expired(now));
            for w in list.iter().filter(|w| w.db == emptied) {
                if w.stale.get() {
                    if replacement.is_none() {
                        w.stale.set(false);
                        continue;
                    }
                    if replacement_stale {
                        continue;
                    }
                } else if !in_emptied && replacement_stale {
                    w.stale.set(true);
                    continue;
                }
                w.flag.store(true, Ordering::Release);
            }
        }
    }

    /// Deletes `key` if its TTL passed; true if it did.
    fn expire_if_needed(&mut self, db: usize, hash: u64, key: &[u8], now: u64) -> bool {
        let expired = match self.dbs[db].keys.get(hash, key) {
            Some(e) => e.is_expired(now),
            None => return false,
        };
        if expired {
            if let Some(e) = self.remove_entry(db, hash, key) {
                self.disposal.expired(e);
            }
            self.stats.expired_keys += 1;
            self.signal(db, key);
        }
        expired
    }

    /// Counters of this shard.
    pub fn stats(&self) -> ShardStats {
        self.stats
    }
}

/// A shard behind its lock, starting a cache line: the lock word and the
/// start of the shard (database 0's key table header) share that line, so
/// a lookup's first cache miss brings both. Before, the table header was
/// in a separate array, a miss of its own: a quarter of the samples of
/// the lookup (`Keys::find_live`, 39% of a pinned server's time under a
/// pipelined SET load) were spent waiting for it.
#[repr(align(64))]
pub(crate) struct ShardSlot(Mutex<Shard>);

impl std::ops::Deref for ShardSlot {
    type Target = Mutex<Shard>;
    fn deref(&self) -> &Mutex<Shard> {
        &self.0
    }
}

/// All databases of the server, as a fixed array of independently locked
/// shards.
pub struct Keyspace {
    pub(crate) shards: Box<[ShardSlot]>,
    shard_mask: usize,
    databases: usize,
    /// Next shard the active expiry cycle visits.
    expire_shard: AtomicUsize,
    /// `maxmemory-policy` is an LFU one (see [`LfuTuning::lfu`]).
    lfu_mode: AtomicBool,
    /// `lfu-log-factor`.
    lfu_log_factor: AtomicU32,
    /// `lfu-decay-time`, in minutes.
    lfu_decay_minutes: AtomicU32,
    /// Shared by every shard: where expired values go.
    disposal: Arc<Disposal>,
    /// Shards the running snapshot has yet to visit; 0 when none runs.
    pub(crate) snapshot_left: AtomicUsize,
    /// Snapshots begun so far, which tells one snapshot from the next.
    pub(crate) snapshots_begun: AtomicU64,
    /// Some key may have a TTL: set when a key gets one, cleared by an
    /// active expiry sweep that found none in any shard (see
    /// [`Keyspace::active_expire_cycle`]).
    ttls_maybe: AtomicBool,
    /// Unix ms until which expired keys are kept (0: not paused); see
    /// [`Keyspace::pause_expiry_until`].
    expiry_paused_until: AtomicU64,
    /// This server follows a master: expired keys are kept until the
    /// master's DEL arrives (see [`Keyspace::set_replica_expiry`]).
    replica_expiry: AtomicBool,
}

impl Keyspace {
    /// A keyspace with `databases` databases over `shards` shards (rounded up
    /// to a power of two).
    pub fn new(databases: usize, shards: usize) -> Self {
        let n = shards.max(1).next_power_of_two();
        let disposal = Arc::new(Disposal::default());
        Keyspace {
            shards: (0..n)
                .map(|_| ShardSlot(Mutex::new(Shard::new(databases, disposal.clone()))))
                .collect(),
            disposal,
            shard_mask: n - 1,
            databases,
            expire_shard: AtomicUsize::new(0),
            lfu_mode: AtomicBool::new(false),
            lfu_log_factor: AtomicU32::new(LfuTuning::default().log_factor),
            lfu_decay_minutes: AtomicU32::new(LfuTuning::default().decay_minutes),
            snapshot_left: AtomicUsize::new(0),
            snapshots_begun: AtomicU64::new(0),
            expiry_paused_until: AtomicU64::new(0),
            replica_expiry: AtomicBool::new(false),
            ttls_maybe: AtomicBool::new(false),
        }
    }

    /// The LFU counter's current tuning.
    pub fn lfu_tuning(&self) -> LfuTuning {
        LfuTuning {
            lfu: self.lfu_mode.load(Ordering::Relaxed),
            log_factor: self.lfu_log_factor.load(Ordering::Relaxed),
            decay_minutes: self.lfu_decay_minutes.load(Ordering::Relaxed),
        }
    }

    /// Changes the LFU counter's tuning (CONFIG SET lfu-log-factor /
    /// lfu-decay-time); takes effect for the next accesses.
    pub fn set_lfu_tuning(&self, t: LfuTuning) {
        self.lfu_mode.store(t.lfu, Ordering::Relaxed);
        self.lfu_log_factor.store(t.log_factor, Ordering::Relaxed);
        self.lfu_decay_minutes
            .store(t.decay_minutes, Ordering::Relaxed);
    }

    /// Installs the function that frees values on a background thread
    /// (once; later calls are ignored). Until then everything is freed in
    /// place.
    pub fn set_background_free(&self, free: BackgroundFree) {
        let _ = self.disposal.background.set(free);
    }

    /// `lazyfree-lazy-expire`: expired values go to the background freer.
    pub fn set_lazy_expire(&self, on: bool) {
        self.disposal.lazy_expire.store(on, Ordering::Relaxed);
    }

    /// `lazyfree-lazy-server-del`: values the server overwrites or deletes
    /// implicitly go to the background freer.
    pub fn set_lazy_server_del(&self, on: bool) {
        self.disposal.lazy_server_del.store(on, Ordering::Relaxed);
    }

    /// Locks shard `i` if no one holds it (eviction never waits).
    pub(crate) fn try_lock_shard(&self, i: usize) -> Option<MutexGuard<'_, Shard>> {
        self.shards[i].try_lock()
    }

    /// Number of logical databases.
    pub fn databases(&self) -> usize {
        self.databases
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The shard a key hash belongs to. Uses the hash's high bits; the
    /// tables inside a shard use the low bits.
    pub fn shard_of_hash(&self, hash: u64) -> usize {
        (hash >> 40) as usize & self.shard_mask
    }

    /// The shard `key` belongs to.
    pub fn shard_of(&self, key: &[u8]) -> usize {
        self.shard_of_hash(key_hash(key))
    }

    /// Starts loading the memory lookups of the keys with these hashes
    /// in database `db` will read, for a worker about to run a batch of
    /// pipelined commands: the shards (lock word and table header), then
    /// the keys' home slots in the key tables, then the entries. Each
    /// level needs the one before it in cache, so every key gets a level
    /// before any key gets the next, and the batch's cache misses overlap
    /// instead of queueing one command after the other. A hint only: a
    /// shard someone else holds is skipped rather than waited for, and
    /// nothing changes.
    pub fn prefetch(&self, db: usize, hashes: &[u64]) {
        for &hash in hashes {
            crate::dict::prefetch_read(&self.shards[self.shard_of_hash(hash)]);
        }
        for depth in 0..PREFETCH_DEPTHS {
            for &hash in hashes {
                self.with_table_if_free(db, hash, |keys| {
                    keys.prefetch(hash, depth, Entry::prefetch)
                });
            }
        }
    }

    /// After [`Keyspace::prefetch`] of the keys, starts loading where
    /// members live inside the keys' collections: `members` holds (key
    /// hash, member hash) pairs (HSET's fields, SADD's and ZADD's
    /// members), at most 64. Level by level as there (bucket, slot, the
    /// member's bytes), skipping a pair once its key turns out to hold
    /// anything but a hashtable-encoded hash or set or a big sorted set. A
    /// hint, like the keys'.
    pub fn prefetch_members(&self, db: usize, members: &[(u64, u64)]) {
        let mut live = u64::MAX;
        for depth in 0..PREFETCH_DEPTHS {
            for (i, &(key, member)) in members.iter().enumerate().take(64) {
                if live & (1 << i) == 0 {
                    continue;
                }
                let mut deeper = false;
                self.with_table_if_free(db, key, |keys| {
                    // Depth 1 of the key table reaches the key's entry.
                    keys.prefetch(key, 1, |entry: &Entry| {
                        deeper = entry.prefetch_member(member, depth);
                    })
                });
                if !deeper {
                    live &= !(1 << i);
                }
            }
        }
    }

    /// Runs `f` on `db`'s key table in the shard of `hash`, unless someone
    /// holds that shard (a prefetch never waits) or there is no such
    /// database.
    fn with_table_if_free(&self, db: usize, hash: u64, f: impl FnOnce(&KeyTable)) {
        if let Some(shard) = self.shards[self.shard_of_hash(hash)].try_lock() {
            if db < shard.dbs.len() {
                f(&shard.dbs[db].keys);
            }
        }
    }

    /// Locks the shards of the given shard indices (any order, duplicates
    /// allowed), ascending. Up to 8 shards need no allocation.
    pub fn lock_shards(&self, idx: impl IntoIterator<Item = usize>) -> Keys<'_> {
        self.lock_sorted(idx, |i| Some(self.lock_shard(i)))
            .expect("waiting without a stop condition never gives up")
    }

    /// Like [`Keyspace::lock_shards`], but a shard another thread holds is
    /// waited for in slices of [`LOCK_WAIT_SLICE`], asking `stop` after
    /// each: when it says so, the shards taken so far are released and
    /// `None` returned. (A worker waiting for a shard a long script holds
    /// gives up once the script is past its busy threshold, to answer
    /// `-BUSY` and go on serving its other clients.)
    pub fn lock_shards_unless(
        &self,
        idx: impl IntoIterator<Item = usize>,
        mut stop: impl FnMut() -> bool,
    ) -> Option<Keys<'_>> {
        self.lock_sorted(idx, |i| self.lock_shard_unless(i, &mut stop))
    }

    /// [`Keyspace::lock_all`] giving up as [`Keyspace::lock_shards_unless`].
    pub fn lock_all_unless(&self, stop: impl FnMut() -> bool) -> Option<Keys<'_>> {
        self.lock_shards_unless(0..self.shards.len(), stop)
    }

    /// Takes the shards of `idx` in ascending order with `lock_one`; `None`
    /// (and nothing held) as soon as it gives up.
    fn lock_sorted<'a>(
        &'a self,
        idx: impl IntoIterator<Item = usize>,
        mut lock_one: impl FnMut(usize) -> Option<MutexGuard<'a, Shard>>,
    ) -> Option<Keys<'a>> {
        let mut it = idx.into_iter();
        let first = it.next();
        let second = it.next();
        // Most commands have one key: no sorting or collecting (measured:
        // the general path cost ~300 instructions per SET).
        if let (Some(i), None) = (first, second) {
            let mut guards = Guards::new();
            guards.push((i, lock_one(i)?));
            return Some(Keys::new(self, guards, false));
        }
        let mut idx: SmallVec<[usize; 8]> = first.into_iter().chain(second).chain(it).collect();
        idx.sort_unstable();
        idx.dedup();
        let guards = idx
            .into_iter()
            .map(|i| Some((i, lock_one(i)?)))
            .collect::<Option<Guards<'_>>>()?;
        Some(Keys::new(self, guards, false))
    }

    /// Locks shard `i`, waiting in slices and asking `stop` after each.
    fn lock_shard_unless(
        &self,
        i: usize,
        stop: &mut impl FnMut() -> bool,
    ) -> Option<MutexGuard<'_, Shard>> {
        if let Some(guard) = self.shards[i].try_lock() {
            return Some(guard);
        }
        loop {
            if let Some(guard) = self.shards[i].try_lock_for(LOCK_WAIT_SLICE) {
                return Some(guard);
            }
            if stop() {
                return None;
            }
        }
    }

    /// Locks the shards of `keys`, ascending.
    pub fn lock_keys<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) -> Keys<'_> {
        self.lock_shards(keys.into_iter().map(|k| self.shard_of(k)))
    }

    /// Locks every shard: the whole keyspace is frozen for this view.
    pub fn lock_all(&self) -> Keys<'_> {
        let guards = (0..self.shards.len())
            .map(|i| (i, self.lock_shard(i)))
            .collect();
        Keys::new(self, guards, false)
    }

    /// A view that locks shards one at a time as they are visited.
    pub fn lock_dynamic(&self) -> Keys<'_> {
        Keys::new(self, SmallVec::new(), true)
    }

    /// Locks shard `i` for reading or changing its data.
    pub(crate) fn lock_shard(&self, i: usize) -> MutexGuard<'_, Shard> {
        self.shards[i].lock()
    }

    /// Sums every shard's counters.
    pub fn stats(&self) -> ShardStats {
        let mut total = ShardStats::default();
        for s in self.shards.iter() {
            total += s.lock().stats;
        }
        total
    }

    /// Zeroes every shard's counters (CONFIG RESETSTAT).
    pub fn reset_stats(&self) {
        for s in self.shards.iter() {
            s.lock().stats = ShardStats::default();
        }
    }

    /// Per database: (keys, keys with a TTL), for INFO keyspace.
    pub fn db_sizes(&self) -> Vec<(usize, usize)> {
        let mut sizes = vec![(0, 0); self.databases];
        for s in self.shards.iter() {
            add_db_sizes(&s.lock(), &mut sizes);
        }
        sizes
    }

    /// Until Unix ms `until` (0: from now on no more), keys past their TTL
    /// are not deleted, neither by reads nor by active expiry, though they
    /// read as absent: as Redis does while clients are paused for writes
    /// (CLIENT PAUSE), so that a paused server's dataset, and what it logs
    /// or replicates, stays as it is. Writes still delete such a key before
    /// replacing it.
    pub fn pause_expiry_until(&self, until: u64) {
        self.expiry_paused_until.store(until, Ordering::Release);
    }

    /// Expiry on a replica, as in Redis 7.0: keys past their TTL read as
    /// absent but stay until the master's DEL for them arrives, and active
    /// expiry stops, so the dataset follows the master's exactly. Writes
    /// (on a writable replica) still delete such a key before replacing it.
    pub fn set_replica_expiry(&self, on: bool) {
        self.replica_expiry.store(on, Ordering::Release);
    }

    /// True while expired keys must be kept: [`Keyspace::pause_expiry_until`]
    /// holds at `now` (ms), or this is a replica.
    fn expiry_paused(&self, now: u64) -> bool {
        self.replica_expiry.load(Ordering::Acquire)
            || now < self.expiry_paused_until.load(Ordering::Acquire)
    }

    /// Records that a key got a TTL, for [`Keyspace::active_expire_cycle`].
    /// Called after the TTL is in its table, under or after the shard's
    /// lock. Only stores when the flag is clear, so the workers setting
    /// TTLs do not keep taking the line from each other.
    fn note_ttl(&self) {
        if !self.ttls_maybe.load(Ordering::Relaxed) {
            self.ttls_maybe.store(true, Ordering::Relaxed);
        }
    }

    /// One pass of active expiry, like Redis's `activeExpireCycle`: visits
    /// shards round-robin, in each samples keys with a TTL and deletes the
    /// expired ones, repeating while more than a quarter of a sample was
    /// expired, until `budget` is spent. Returns the number of keys deleted.
    /// `on_expired(db, key)` is told of each deletion while the key's shard
    /// is still locked, so a persistence log can record it in order.
    pub fn active_expire_cycle(
        &self,
        budget: Duration,
        on_expired: &mut dyn FnMut(usize, &[u8]),
    ) -> u64 {
        if self.expiry_paused(now_ms()) {
            return 0;
        }
        const SAMPLE: usize = 20;
        // With no TTL anywhere, sweeping every shard's every database each
        // tick cost an idle server 0.2 ms of a core per tick (perf), on
        // the workers' cores. A TTL set during the sweep sets the flag
        // again: either its shard is visited after it (its lock orders the
        // two), or its note comes after the swap.
        if !self.ttls_maybe.swap(false, Ordering::Relaxed) {
            return 0;
        }
        let start = Instant::now();
        let mut deleted = 0;
        let mut ttls_seen = false;
        let mut swept = 0;
        for _ in 0..self.shards.len() {
            let i = self.expire_shard.fetch_add(1, Ordering::Relaxed) & self.shard_mask;
            let mut shard = self.lock_shard(i);
            let now = now_ms();
            swept += 1;
            for db in 0..self.databases {
                ttls_seen |= !shard.dbs[db].volatile.is_empty();
                loop {
                    let (sampled, expired) = expire_sample(&mut shard, db, SAMPLE, now, on_expired);
                    deleted += expired as u64;
                    if sampled == 0 || expired * 4 <= sampled || start.elapsed() >= budget {
                        break;
                    }
                }
            }
            drop(shard);
            if start.elapsed() >= budget {
                break;
            }
        }
        if ttls_seen || swept < self.shards.len() {
            self.ttls_maybe.store(true, Ordering::Relaxed);
        }
        deleted
    }
}

/// Scans up to about `n` TTL keys of one database in a shard, deleting the
/// expired ones. Returns (sampled, expired).
fn expire_sample(
    shard: &mut Shard,
    db: usize,
    n: usize,
    now: u64,
    on_expired: &mut dyn FnMut(usize, &[u8]),
) -> (usize, usize) {
    let table = &mut shard.dbs[db];
    if table.volatile.is_empty() {
        return (0, 0);
    }
    let mut due: Vec<Key> = Vec::new();
    let mut sampled = 0;
    let keys = &table.keys;
    table.expire_cursor = table.volatile.scan(table.expire_cursor, n, |hash| {
        keys.with_hash(hash, |e| {
            if e.expire_at().is_some() {
                sampled += 1;
                if e.is_expired(now) {
                    due.push(Key::from(e.key()));
                }
            }
        });
    });
    // Keys sharing a tag are found once per copy of the tag.
    due.sort_unstable();
    due.dedup();
    for k in &due {
        if let Some(e) = shard.remove_entry(db, hash_key(k), k) {
            shard.disposal.expired(e);
        }
        on_expired(db, k);
    }
    shard.stats.expired_keys += due.len() as u64;
    for k in &due {
        shard.signal(db, k);
    }
    (sampled, due.len())
}

/// Adds one shard's (keys, keys with a TTL) per database to `sizes`.
fn add_db_sizes(shard: &Shard, sizes: &mut [(usize, usize)]) {
    for (db, t) in shard.dbs.iter().enumerate() {
        sizes[db].0 += t.keys.len();
        sizes[db].1 += t.volatile.len();
    }
}

/// Held shard guards, sorted by index; most commands hold one or two.
type Guards<'a> = SmallVec<[(usize, MutexGuard<'a, Shard>); 4]>;

/// How long [`Keyspace::lock_shards_unless`] waits for a busy shard
/// between two questions to its stop condition.
pub const LOCK_WAIT_SLICE: std::time::Duration = std::time::Duration::from_millis(5);

/// A locked view of the keyspace for one command (or one transaction).
///
/// Every method takes the database index, because a transaction may SELECT
/// another database half-way. The clock is read once when the view is made,
/// so one command sees one consistent "now" for expiry decisions.
pub struct Keys<'a> {
    ks: &'a Keyspace,
    /// Held guards, sorted by shard index.
    guards: Guards<'a>,
    dynamic: bool,
    now: u64,
    /// Lookups update access metadata (false for a CLIENT NO-TOUCH client).
    touch: bool,
    /// Lookups ignore TTLs: a replica's master client sees every key its
    /// master sent until the master deletes it (see [`Keys::set_ttl_blind`]).
    ttl_blind: bool,
    /// Keys this view deleted because their TTL had passed, as (db, key),
    /// in order, for the persistence log (Redis propagates them as DEL).
    expired: Vec<(usize, Key)>,
    /// What the view records for keyspace notifications while someone
    /// wants to know (classes `new` and `m`); None otherwise. Boxed on
    /// purpose: one word in a view every command moves around (callgrind:
    /// unboxed lists cost every SET an out-of-line drop).
    recorded: Option<Box<Recorded>>,
    /// Position in `guards` of the shard found last: one key's expiry
    /// check, lookup and WATCH signal ask for the same shard in a row
    /// (callgrind: the repeated binary searches cost MSET ~7%).
    last_pos: usize,
}

/// The keys a view records for keyspace notifications; each list is None
/// while its class is off.
#[derive(Default)]
struct Recorded {
    /// Keys the view created (class `new`).
    created: Option<Vec<(usize, Key)>>,
    /// Keys read lookups did not find (class `m`, Redis's `keymiss`).
    misses: Option<Vec<(usize, Key)>>,
}

impl<'a> Keys<'a> {
    #[inline]
    fn new(ks: &'a Keyspace, guards: Guards<'a>, dynamic: bool) -> Self {
        Keys {
            ks,
            guards,
            dynamic,
            now: command_now_ms(),
            touch: true,
            ttl_blind: false,
            expired: Vec::new(),
            recorded: None,
            last_pos: 0,
        }
    }

    /// The keys this view deleted on expiry and not yet taken, as (db, key),
    /// oldest first.
    pub fn expired(&self) -> &[(usize, Key)] {
        &self.expired
    }

    /// Takes the list of keys this view deleted on expiry since the last
    /// call, as (db, key), oldest first.
    pub fn take_expired(&mut self) -> Vec<(usize, Key)> {
        std::mem::take(&mut self.expired)
    }

    /// The keys this view deleted on expiry from the `from`-th on, as
    /// [`Keys::take_expired`] would return them, without taking them.
    pub fn expired_since(&self, from: usize) -> Vec<(usize, Key)> {
        self.expired.get(from..).unwrap_or_default().to_vec()
    }

    /// Number of keys this view deleted on expiry and still holds.
    pub fn expired_count(&self) -> usize {
        self.expired.len()
    }

    /// From now on, records the keys this view creates (see
    /// [`Keys::take_created`]).
    pub fn record_created(&mut self) {
        self.recorded.get_or_insert_with(Box::default).created = Some(Vec::new());
    }

    /// Takes the keys created since the last call, as (db, key), oldest
    /// first; empty unless [`Keys::record_created`] was called.
    pub fn take_created(&mut self) -> Vec<(usize, Key)> {
        self.recorded
            .as_deref_mut()
            .and_then(|r| r.created.as_mut())
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// From now on, records the keys that read lookups (those counting
    /// keyspace hits and misses) did not find (see [`Keys::take_misses`]).
    pub fn record_misses(&mut self) {
        self.recorded.get_or_insert_with(Box::default).misses = Some(Vec::new());
    }

    /// Takes the keys read lookups missed since the last call, as (db,
    /// key), oldest first; empty unless [`Keys::record_misses`] was called.
    pub fn take_misses(&mut self) -> Vec<(usize, Key)> {
        self.recorded
            .as_deref_mut()
            .and_then(|r| r.misses.as_mut())
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Records a read lookup's miss of `key`, if misses are recorded.
    #[cold]
    fn record_miss(&mut self, db: usize, key: &[u8]) {
        if let Some(misses) = self.recorded.as_deref_mut().and_then(|r| r.misses.as_mut()) {
            misses.push((db, Key::from(key)));
        }
    }

    /// The key table position of `key` in its (held) shard, found with one
    /// probe; None when absent, or when its TTL passed, in which case it is
    /// deleted and recorded (the rare case looks again). Positions stay
    /// valid until the table next changes.
    fn find_live(&mut self, db: usize, hash: u64, key: &[u8]) -> Option<usize> {
        self.find_live_for(db, hash, key, true)
    }

    /// [`Keys::find_live`] for a read (`writing` false) or a write: a read
    /// leaves an expired key in place while expiry is paused.
    fn find_live_for(&mut self, db: usize, hash: u64, key: &[u8], writing: bool) -> Option<usize> {
        let now = self.now;
        let blind = self.ttl_blind;
        let keys = &self.shard(hash).dbs[db].keys;
        let i = keys.position(hash, key)?;
        if !blind && keys.at(i).is_some_and(|e| e.is_expired(now)) {
            if writing || !self.ks.expiry_paused(now) {
                self.expire_held(db, hash, key);
            }
            return None;
        }
        Some(i)
    }

    /// Deletes `key` from its (held) shard if its TTL passed, recording it.
    fn expire_held(&mut self, db: usize, hash: u64, key: &[u8]) -> bool {
        let now = self.now;
        let expired = self.shard(hash).expire_if_needed(db, hash, key, now);
        if expired {
            self.expired.push((db, key.into()));
        }
        expired
    }

    /// With `no_touch`, lookups through this view stop updating the keys'
    /// access time and counter (CLIENT NO-TOUCH); [`Keys::touch`] still does.
    pub fn set_no_touch(&mut self, no_touch: bool) {
        self.touch = !no_touch;
    }

    /// With `blind`, lookups through this view find keys whose TTL passed
    /// as if it had not, and never delete them: what a replica's master
    /// client needs, as the master decides when a key expires (its DEL
    /// follows) and the two clocks differ (Redis's `expireIfNeeded` spares
    /// the master client too).
    pub fn set_ttl_blind(&mut self, blind: bool) {
        self.ttl_blind = blind;
    }

    /// Whether this view is TTL-blind ([`Keys::set_ttl_blind`]).
    pub fn ttl_blind(&self) -> bool {
        self.ttl_blind
    }

    /// The keyspace this view locks.
    pub fn keyspace(&self) -> &'a Keyspace {
        self.ks
    }

    /// The time this view uses for expiry decisions (Unix ms).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Re-reads the clock (before serving blocked clients, which Redis does
    /// at the time of serving, not of the command that made keys ready).
    pub fn refresh_clock(&mut self) {
        self.now = now_ms();
    }

    /// True when this view holds at least one shard (a command with keys,
    /// or a transaction): keyspace-wide readings must then go through
    /// [`Keys::stats`] and [`Keys::db_sizes`], since locking a held shard
    /// again would wait for ever.
    pub fn holds_any(&self) -> bool {
        !self.guards.is_empty()
    }

    /// Calls `f` with every shard: the held ones through their guards, the
    /// others locked one at a time. A shard below the highest held one is
    /// only tried (waiting for it out of ascending order could deadlock
    /// with a thread locking in order); one still busy after a while is
    /// left out of the reading.
    fn each_shard(&self, mut f: impl FnMut(&Shard)) {
        let highest = self.guards.last().map(|(i, _)| *i);
        for (i, slot) in self.ks.shards.iter().enumerate() {
            if let Some((_, g)) = self.guards.iter().find(|(j, _)| *j == i) {
                f(g);
            } else if highest.is_none_or(|h| i > h) {
                f(&slot.lock());
            } else {
                for _ in 0..1000 {
                    if let Some(g) = slot.try_lock() {
                        f(&g);
                        break;
                    }
                    std::thread::yield_now();
                }
            }
        }
    }

    /// [`Keyspace::stats`] from inside this view (INFO in a transaction).
    pub fn stats(&self) -> ShardStats {
        let mut total = ShardStats::default();
        self.each_shard(|s| total += s.stats);
        total
    }

    /// [`Keyspace::db_sizes`] from inside this view.
    pub fn db_sizes(&self) -> Vec<(usize, usize)> {
        let mut sizes = vec![(0, 0); self.ks.databases];
        self.each_shard(|s| add_db_sizes(s, &mut sizes));
        sizes
    }

    /// True when every shard is held.
    pub fn holds_all(&self) -> bool {
        self.guards.len() == self.ks.shards.len()
    }

    /// Makes sure this view holds `key`'s shard: true if it already did or
    /// the lock could be taken without waiting (blocked clients served by a
    /// push write a destination key the pusher did not declare). Never
    /// blocks, so taking a shard out of ascending order cannot deadlock;
    /// false when the shard is busy (or the view is dynamic).
    pub fn try_hold(&mut self, key: &[u8]) -> bool {
        self.try_hold_shard(self.ks.shard_of(key))
    }

    /// [`Keys::try_hold`] for shard `idx`.
    pub fn try_hold_shard(&mut self, idx: usize) -> bool {
        if self.holds_all() {
            return true;
        }
        let pos = match self.guards.binary_search_by_key(&idx, |(i, _)| *i) {
            Ok(_) => return true,
            Err(pos) => pos,
        };
        if self.dynamic {
            return false;
        }
        match self.ks.shards[idx].try_lock() {
            Some(g) => {
                self.guards.insert(pos, (idx, g));
                true
            }
            None => false,
        }
    }

    /// Lets go of every shard this view holds while `f` runs, then takes
    /// them again in ascending order: for long work that needs no shard (a
    /// query on an SQL database whose `Arc` the caller took out of its
    /// entry), so other keys of those shards are not held up. Nothing read
    /// through the view before may be assumed unchanged after. `f` must
    /// not lock shards itself (it runs outside the lock order).
    pub fn unlocked<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let held: SmallVec<[usize; 4]> = self.guards.iter().map(|(i, _)| *i).collect();
        self.guards.clear();
        let result = f();
        for i in held {
            self.guards.push((i, self.ks.lock_shard(i)));
        }
        self.last_pos = 0;
        result
    }

    /// Whether this view holds shard `idx` (a dynamic view holds none).
    pub fn holds_shard(&self, idx: usize) -> bool {
        self.holds_all() || self.guards.binary_search_by_key(&idx, |(i, _)| *i).is_ok()
    }

    /// Locks shard `idx` for this view, waiting for it, when that keeps the
    /// ascending lock order: `idx` is above every shard the view holds.
    /// False (nothing taken) otherwise, or for a dynamic view. A script
    /// that reaches a key it did not declare takes its shard this way
    /// (waiting in ascending order cannot deadlock, see ARCHITECTURE.md).
    pub fn hold_shard_ascending(&mut self, idx: usize) -> bool {
        if self.holds_shard(idx) {
            return true;
        }
        let above_all = self.guards.last().is_none_or(|(top, _)| idx > *top);
        if self.dynamic || !above_all || idx >= self.ks.shards.len() {
            return false;
        }
        let guard = self.ks.lock_shard(idx);
        self.guards.push((idx, guard));
        true
    }

    /// Runs `f` on shard `idx`: the held guard if this view holds it, or
    /// (dynamic views only) a lock taken just for `f`.
    ///
    /// # Panics
    /// If a non-dynamic view is asked for a shard it did not lock: a command
    /// whose declared keys miss a key it touches. That is a bug in the
    /// command table; the server turns the panic into an error reply.
    pub fn with_shard<R>(&mut self, idx: usize, f: impl FnOnce(&mut Shard) -> R) -> R {
        if let Some(g) = self.held(idx) {
            return f(g);
        }
        assert!(
            self.dynamic && self.guards.is_empty(),
            "shard {idx} was not locked for this command"
        );
        let mut g = self.ks.lock_shard(idx);
        f(&mut g)
    }

    fn held(&mut self, idx: usize) -> Option<&mut Shard> {
        if self.holds_all() {
            return Some(&mut self.guards[idx].1);
        }
        // `last_pos` may be stale after `try_hold` inserted a guard: the
        // index check makes that harmless.
        let pos = match self.guards.get(self.last_pos) {
            Some((i, _)) if *i == idx => self.last_pos,
            _ => {
                let pos = self.guards.binary_search_by_key(&idx, |(i, _)| *i).ok()?;
                self.last_pos = pos;
                pos
            }
        };
        Some(&mut self.guards[pos].1)
    }

    /// The shard holding `hash`, which this view must have locked.
    fn shard(&mut self, hash: u64) -> &mut Shard {
        let idx = self.ks.shard_of_hash(hash);
        match self.held(idx) {
            Some(s) => s,
            None => panic!("shard {idx} was not locked for this command"),
        }
    }

    /// The lookup behind every accessor: deletes the key first if expired,
    /// keeps the entry for a pending snapshot when the caller may `change`
    /// it, counts a keyspace hit or miss when `stats`, and records an access
    /// when `touch`.
    fn lookup(
        &mut self,
        db: usize,
        key: &[u8],
        change: bool,
        stats: bool,
        touch: bool,
    ) -> Option<&mut Entry> {
        let hash = key_hash(key);
        let now = self.now;
        let tuning = self.ks.lfu_tuning();
        let found = self.find_live_for(db, hash, key, change);
        if found.is_none() && stats && self.recorded.is_some() {
            self.record_miss(db, key);
        }
        let shard = self.shard(hash);
        if change {
            shard.preserve_at(db, found);
        }
        let keys = &mut shard.dbs[db].keys;
        let generation = keys.generation();
        let entry = found.and_then(|i| keys.at_mut(i));
        if stats {
            match entry {
                Some(_) => shard.stats.keyspace_hits += 1,
                None => shard.stats.keyspace_misses += 1,
            }
        }
        let entry = entry?;
        if touch {
            entry.touch(now, tuning);
            entry.set_table_gen(generation);
        }
        Some(entry)
    }

    /// Looks a key up for writing or metadata: deletes it first if expired
    /// and records an access (unless the view is no-touch). Does not count
    /// keyspace hits or misses.
    pub fn get_mut(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        let touch = self.touch;
        self.lookup(db, key, true, false, touch)
    }

    /// Shared access to a live entry with no side effects (no expiry
    /// deletion, statistics or access update), so that several entries can
    /// be borrowed at once (SINTER, SUNION, ZUNION, SORT ... BY/GET). Look
    /// each key up first with [`Keys::get_read`] or [`Keys::get_mut`] for
    /// the usual bookkeeping.
    ///
    /// # Panics
    /// If the key's shard is not held by this view (a dynamic view holds
    /// none between calls).
    pub fn peek(&self, db: usize, key: &[u8]) -> Option<&Entry> {
        let hash = key_hash(key);
        let idx = self.ks.shard_of_hash(hash);
        let shard: &Shard = if self.holds_all() {
            &self.guards[idx].1
        } else {
            match self.guards.binary_search_by_key(&idx, |(i, _)| *i) {
                Ok(pos) => &self.guards[pos].1,
                Err(_) => panic!("shard {idx} was not locked for this command"),
            }
        };
        shard.dbs[db]
            .keys
            .get(hash, key)
            .filter(|e| self.ttl_blind || !e.is_expired(self.now))
    }

    /// Looks a key up for a read command: like [`Keys::get_mut`], and counts
    /// a keyspace hit or miss. The caller must not change the value (it may
    /// change internal state no reader can observe, such as an iteration
    /// cache): unlike [`Keys::get_mut`], this does not keep the entry for a
    /// pending snapshot.
    pub fn get_read(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        let touch = self.touch;
        self.lookup(db, key, false, true, touch)
    }

    /// Like [`Keys::get_read`] but never records an access, for commands
    /// that inspect a key without using it (TYPE, EXISTS, TTL, OBJECT: Redis's
    /// `LOOKUP_NOTOUCH`).
    pub fn get_read_no_touch(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        self.lookup(db, key, false, true, false)
    }

    /// Like [`Keys::get_read_no_touch`], but a miss is not recorded for
    /// the `keymiss` event (Redis's OBJECT looks up with
    /// `LOOKUP_NONOTIFY`).
    pub fn get_read_unreported(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        let recorded = self.recorded.take();
        let found = self.lookup(db, key, false, true, false).is_some();
        self.recorded = recorded;
        if !found {
            return None;
        }
        self.lookup(db, key, false, false, false)
    }

    /// A read lookup that always records an access, even for a no-touch
    /// view (TOUCH). True if the key exists.
    pub fn touch(&mut self, db: usize, key: &[u8]) -> bool {
        self.lookup(db, key, false, true, true).is_some()
    }

    /// True if `key` exists (and is not expired). Neither counts statistics
    /// nor records an access.
    pub fn contains(&mut self, db: usize, key: &[u8]) -> bool {
        self.lookup(db, key, false, false, false).is_some()
    }

    /// Stores `value` under `key`, dropping any TTL; true if it replaced a
    /// key (whose value goes the way [`Disposal`] says).
    pub fn set(&mut self, db: usize, key: &[u8], value: Value) -> bool {
        self.set_entry(db, key, Entry::with_key_value(key, value, None))
    }

    /// Stores the string `bytes` under `key` with expiry `expire_at` (Unix
    /// ms, or none); true if it replaced a key. SET's path: the entry is
    /// built straight from the bytes, TTL included.
    pub fn set_str(&mut self, db: usize, key: &[u8], bytes: &[u8], expire_at: Option<u64>) -> bool {
        let hash = key_hash(key);
        let found = self.find_live(db, hash, key);
        self.shard(hash).preserve_at(db, found);
        if let Some(i) = found {
            let (now, tuning) = (self.now, self.ks.lfu_tuning());
            let keys = &mut self.shard(hash).dbs[db].keys;
            let generation = keys.generation();
            if let Some(e) = keys.at_mut(i) {
                e.set_table_gen(generation);
                if e.overwrite_str(bytes, expire_at, now, tuning) {
                    return true;
                }
            }
        }
        let entry = Entry::with_key_str(key, bytes, expire_at);
        let old = self.store_found(db, hash, found, entry);
        self.dispose_server_deleted(old)
    }

    /// Stores `value` under `key`, keeping an existing TTL; true if it
    /// replaced a key.
    pub fn set_keep_ttl(&mut self, db: usize, key: &[u8], value: Value) -> bool {
        let hash = key_hash(key);
        let found = self.find_live(db, hash, key);
        let shard = self.shard(hash);
        shard.preserve_at(db, found);
        let expire = found
            .and_then(|i| shard.dbs[db].keys.at(i))
            .and_then(Entry::expire_at);
        let old = self.store_found(db, hash, found, Entry::with_key_value(key, value, expire));
        self.dispose_server_deleted(old)
    }

    /// Stores a whole entry (value and TTL) under `key`; true if it
    /// replaced a key (whose value goes the way [`Disposal`] says). An
    /// entry made with [`Entry::new`] counts as accessed now and inherits
    /// the access counter of the entry it replaces; one taken out of the
    /// keyspace (RENAME, MOVE) keeps its metadata.
    pub fn set_entry(&mut self, db: usize, key: &[u8], entry: Entry) -> bool {
        let old = self.put_entry(db, key, entry);
        self.dispose_server_deleted(old)
    }

    /// Hands an entry the server replaced or deleted implicitly to the
    /// keyspace's [`Disposal`]; true if there was one.
    fn dispose_server_deleted(&self, old: Option<Entry>) -> bool {
        match old {
            Some(e) => {
                self.ks.disposal.server_deleted(e);
                true
            }
            None => false,
        }
    }

    /// [`Self::set_entry`], returning the replaced entry.
    fn put_entry(&mut self, db: usize, key: &[u8], entry: Entry) -> Option<Entry> {
        let hash = key_hash(key);
        let found = self.find_live(db, hash, key);
        self.shard(hash).preserve_at(db, found);
        self.store_found(db, hash, found, entry.with_key(key))
    }

    /// Stores `entry` (which holds its key, hashed to `hash`) at position
    /// `found` of `db`'s table (what [`Keys::find_live`] answered for the
    /// key), or adds it when none; returns the replaced entry. The caller
    /// has kept the old entry for a pending snapshot
    /// ([`Shard::preserve_at`]).
    fn store_found(
        &mut self,
        db: usize,
        hash: u64,
        found: Option<usize>,
        mut entry: Entry,
    ) -> Option<Entry> {
        let now = self.now;
        let ks = self.ks;
        let tuning = ks.lfu_tuning();
        // Copied only while creations are recorded.
        let created_key = self
            .recorded
            .as_ref()
            .is_some_and(|r| r.created.is_some())
            .then(|| Key::from(entry.key()));
        let shard = self.shard(hash);
        let table = &mut shard.dbs[db];
        let new_ttl = entry.expire_at().is_some();
        let mut added_at = None;
        let old = match found.filter(|&i| table.keys.at(i).is_some()) {
            Some(i) => {
                entry.stamp_new(now, table.keys.at(i), tuning);
                table.keys.replace_at(i, entry)
            }
            None => {
                entry.stamp_new(now, None, tuning);
                added_at = Some(table.keys.insert_absent(hash, entry));
                None
            }
        };
        let old_ttl = old.as_ref().is_some_and(|e| e.expire_at().is_some());
        if new_ttl && !old_ttl {
            table.volatile.add(hash);
            ks.note_ttl();
        } else if old_ttl && !new_ttl {
            table.volatile.remove(hash);
        }
        if let Some(i) = added_at {
            shard.mark_added(db, i);
            if let (Some(created), Some(key)) = (
                self.recorded
                    .as_deref_mut()
                    .and_then(|r| r.created.as_mut()),
                created_key,
            ) {
                created.push((db, key));
            }
        }
        old
    }

    /// Deletes `key`; returns its entry if it existed (and was not expired).
    /// For a user's deletion (DEL, UNLINK, GETDEL) or a move (RENAME,
    /// MOVE), where the caller decides what becomes of the value.
    pub fn remove(&mut self, db: usize, key: &[u8]) -> Option<Entry> {
        let hash = key_hash(key);
        if self.expire_held(db, hash, key) {
            return None;
        }
        self.shard(hash).remove_entry(db, hash, key)
    }

    /// Deletes `key` on the server's own account (Redis's `dbDelete`: an
    /// emptied collection, a *STORE destination, RESTORE or COPY REPLACE);
    /// true if it existed. The value goes the way [`Disposal`] says.
    pub fn delete(&mut self, db: usize, key: &[u8]) -> bool {
        let old = self.remove(db, key);
        self.dispose_server_deleted(old)
    }

    /// Deletes `key` because a command gave it a time already past (EXPIRE
    /// or GETEX with such a time); true if it existed. The value goes the
    /// way `lazyfree-lazy-expire` says.
    pub fn delete_expired(&mut self, db: usize, key: &[u8]) -> bool {
        match self.remove(db, key) {
            Some(e) => {
                self.ks.disposal.expired(e);
                true
            }
            None => false,
        }
    }

    /// Sets the absolute expiry (Unix ms) of an existing key; false if the
    /// key does not exist. Not an access to the key.
    pub fn set_expire(&mut self, db: usize, key: &[u8], at_ms: u64) -> bool {
        let hash = key_hash(key);
        let Some(e) = self.lookup(db, key, true, false, false) else {
            return false;
        };
        let had = e.expire_at().is_some();
        e.set_expire_raw(at_ms.max(1));
        if !had {
            self.shard(hash).dbs[db].volatile.add(hash);
            self.ks.note_ttl();
        }
        true
    }

    /// Removes the TTL of `key`; true if it had one. Not an access to the key.
    pub fn persist(&mut self, db: usize, key: &[u8]) -> bool {
        let hash = key_hash(key);
        let Some(e) = self.lookup(db, key, true, false, false) else {
            return false;
        };
        if e.expire_at().is_none() {
            return false;
        }
        e.set_expire_raw(0);
        self.shard(hash).dbs[db].volatile.remove(hash);
        true
    }

    /// True if `key` exists and its TTL has passed, without deleting it
    /// (EXEC checks watched keys this way).
    pub fn is_logically_expired(&mut self, db: usize, key: &[u8]) -> bool {
        self.is_expired_hashed(db, key_hash(key), key)
    }

    /// [`Keys::is_logically_expired`] for a key whose hash is known.
    fn is_expired_hashed(&mut self, db: usize, hash: u64, key: &[u8]) -> bool {
        let now = self.now;
        self.shard(hash).dbs[db]
            .keys
            .get(hash, key)
            .is_some_and(|e| e.is_expired(now))
    }

    /// Tells clients WATCHing `key` in `db` that it changed.
    pub fn signal_modified(&mut self, db: usize, key: &[u8]) {
        let hash = key_hash(key);
        self.shard(hash).signal(db, key);
    }

    /// Registers `flag` to be set when `key` in `db` is modified,
    /// remembering whether the key is already past its TTL.
    pub fn watch(&mut self, db: usize, key: &[u8], flag: &WatchFlag) {
        let hash = key_hash(key);
        let stale = self.is_expired_hashed(db, hash, key);
        let watchers = self.shard(hash).watchers.get_or_insert_default();
        let list = watchers.entry(key.into()).or_default();
        if !list
            .iter()
            .any(|w| w.db == db && Arc::ptr_eq(&w.flag, flag))
        {
            list.push(Watcher {
                db,
                flag: flag.clone(),
                stale: std::cell::Cell::new(stale),
            });
        }
    }

    /// Whether `key`, watched in `db` with `flag`, expired since it was
    /// watched (EXEC then fails, as Redis 7.0's `isWatchedKeyExpired`); a
    /// key already stale when watched does not count.
    pub fn expired_since_watched(&mut self, db: usize, key: &[u8], flag: &WatchFlag) -> bool {
        let hash = key_hash(key);
        let stale = self
            .shard(hash)
            .watchers
            .as_deref()
            .and_then(|w| w.get(key))
            .and_then(|list| {
                list.iter()
                    .find(|w| w.db == db && Arc::ptr_eq(&w.flag, flag))
            })
            .is_some_and(|w| w.stale.get());
        !stale && self.is_expired_hashed(db, hash, key)
    }

    /// Removes a registration made by [`Keys::watch`].
    pub fn unwatch(&mut self, db: usize, key: &[u8], flag: &WatchFlag) {
        let hash = key_hash(key);
        let slot = &mut self.shard(hash).watchers;
        let Some(watchers) = slot.as_deref_mut() else {
            return;
        };
        if let Some(list) = watchers.get_mut(key) {
            list.retain(|w| !(w.db == db && Arc::ptr_eq(&w.flag, flag)));
            if list.is_empty() {
                watchers.remove(key);
            }
        }
        if watchers.is_empty() {
            *slot = None;
        }
    }

    /// Moves `key` from database `src` to `dst` (MOVE); false if it is
    /// missing in `src` or already present in `dst`.
    pub fn move_key(&mut self, src: usize, dst: usize, key: &[u8]) -> bool {
        if !self.contains(src, key) || self.contains(dst, key) {
            return false;
        }
        let entry = self.remove(src, key).expect("checked above");
        self.set_entry(dst, key, entry);
        true
    }

    /// Number of keys in `db` (including expired keys not yet reclaimed, as
    /// Redis's DBSIZE does).
    pub fn db_len(&mut self, db: usize) -> usize {
        (0..self.ks.shard_count())
            .map(|i| self.with_shard(i, |s| s.dbs[db].keys.len()))
            .sum()
    }

    /// Calls `f` for every live key of `db` (KEYS). Expired keys are skipped.
    pub fn for_each_key(&mut self, db: usize, mut f: impl FnMut(&[u8], &Entry)) {
        let now = self.now;
        for i in 0..self.ks.shard_count() {
            self.with_shard(i, |s| {
                for e in s.dbs[db].keys.iter() {
                    if !e.is_expired(now) {
                        f(e.key(), e);
                    }
                }
            });
        }
    }

    /// One step of SCAN over `db`. The cursor packs the shard index in its
    /// low bits and the shard table's own cursor above them. Returns the
    /// next cursor (0 when done). Expired keys are skipped and deleted;
    /// `on_expired(db, key)` is told of each deletion while its shard is
    /// still locked (this view may let go of the shard before the command
    /// ends, so the deletion is logged there, in order with the key's other
    /// writes, as the active expiry cycle logs its own).
    pub fn scan(
        &mut self,
        db: usize,
        cursor: u64,
        count: usize,
        mut f: impl FnMut(&[u8], &Entry),
        on_expired: &mut dyn FnMut(usize, &[u8]),
    ) -> u64 {
        let bits = self.ks.shard_count().trailing_zeros();
        let mut shard = (cursor & self.ks.shard_mask as u64) as usize;
        let mut inner = cursor >> bits;
        let mut emitted = 0;
        let now = self.now;
        while emitted < count.max(1) {
            let mut expired = Vec::new();
            inner = self.with_shard(shard, |s| {
                let table = &s.dbs[db];
                let next = table.keys.scan(inner, count.max(1) - emitted, |e| {
                    if e.is_expired(now) {
                        expired.push(Key::from(e.key()));
                    } else {
                        emitted += 1;
                        f(e.key(), e);
                    }
                });
                if !self.ks.expiry_paused(now) {
                    for k in &expired {
                        if s.expire_if_needed(db, hash_key(k), k, now) {
                            on_expired(db, k);
                        }
                    }
                }
                next
            });
            if inner == 0 {
                shard += 1;
                if shard == self.ks.shard_count() {
                    return 0;
                }
            }
        }
        (inner << bits) | shard as u64
    }

    /// A random live key of `db`, or None if it is empty. Needs every shard
    /// locked (RANDOMKEY is declared that way) so the choice of shard can be
    /// weighted by size.
    pub fn random_key(&mut self, db: usize, rng: &mut fastrand::Rng) -> Option<Key> {
        // Bounded retries over expired keys, as Redis bounds RANDOMKEY's.
        for _ in 0..100 {
            let total = self.db_len(db);
            if total == 0 {
                return None;
            }
            let mut pick = rng.usize(..total);
            let mut chosen = None;
            for i in 0..self.ks.shard_count() {
                let len = self.with_shard(i, |s| s.dbs[db].keys.len());
                if pick < len {
                    chosen = Some(i);
                    break;
                }
                pick -= len;
            }
            let idx = chosen?;
            let key = self.with_shard(idx, |s| {
                s.dbs[db].keys.random_entry(rng).map(|e| Key::from(e.key()))
            })?;
            if self.contains(db, &key) {
                return Some(key);
            }
        }
        None
    }

    /// Empties `db` (FLUSHDB), telling watchers of existing keys. Returns the
    /// removed tables so the caller can free them off the request path.
    pub fn flush_db(&mut self, db: usize) -> Flushed {
        let mut tables = Vec::new();
        let now = self.now;
        let ks = self.ks;
        for i in 0..self.ks.shard_count() {
            self.with_shard(i, |s| {
                // Keeping every entry would copy the shard: hand it over.
                ks.settle_snapshot(s);
                s.signal_replaced(db, None, now);
                tables.push(std::mem::take(&mut s.dbs[db]));
            });
        }
        Flushed { tables }
    }

    /// Exchanges every database with those of `staging`, another keyspace
    /// of the same shape (a replica's diskless load into a staging
    /// keyspace, Redis's `swapMainDbWithTempDb`), telling watchers of keys
    /// that exist in either. Both views must hold every shard.
    ///
    /// # Panics
    /// If a view does not hold every shard or the shapes differ: a bug in
    /// the caller.
    pub fn swap_all_with(&mut self, staging: &mut Keys<'_>) {
        assert!(self.holds_all() && staging.holds_all());
        assert_eq!(
            (self.ks.shard_count(), self.ks.databases()),
            (staging.ks.shard_count(), staging.ks.databases())
        );
        let (ks, now) = (self.ks, self.now);
        let mut any_ttl = false;
        for (ours, theirs) in self.guards.iter_mut().zip(staging.guards.iter_mut()) {
            let (s, t) = (&mut *ours.1, &mut *theirs.1);
            ks.settle_snapshot(s);
            for db in 0..ks.databases() {
                s.signal_replaced(db, None, now);
            }
            std::mem::swap(&mut s.dbs, &mut t.dbs);
            for db in 0..ks.databases() {
                s.signal_replaced(db, None, now);
                any_ttl |= !s.dbs[db].volatile.is_empty();
            }
        }
        if any_ttl {
            ks.note_ttl();
        }
    }

    /// Swaps two databases (SWAPDB), telling watchers of keys that exist in
    /// either.
    pub fn swap_db(&mut self, a: usize, b: usize) {
        let ks = self.ks;
        let now = self.now;
        for i in 0..self.ks.shard_count() {
            self.with_shard(i, |s| {
                ks.settle_snapshot(s);
                s.signal_replaced(a, Some(b), now);
                s.signal_replaced(b, Some(a), now);
                s.dbs.swap(a, b);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_every_write_reads_shares_the_shard_locks_cache_line() {
        let ks = Keyspace::new(16, 8);
        for slot in ks.shards.iter() {
            let base = slot as *const ShardSlot as usize;
            assert_eq!(base % 64, 0, "a shard starts a cache line");
            // The lock word comes before the data it guards.
            assert!(slot.data_ptr() as usize - base <= 8);
            let shard = slot.lock();
            let end_of = |p: usize, size: usize| p + size - base;
            let fields = [
                (
                    "table header",
                    end_of(
                        &shard.dbs[0].keys as *const _ as usize,
                        size_of::<KeyTable>(),
                    ),
                ),
                (
                    "pending",
                    end_of(&shard.pending as *const _ as usize, size_of::<usize>()),
                ),
                (
                    "watchers",
                    end_of(&shard.watchers as *const _ as usize, size_of::<usize>()),
                ),
            ];
            for (name, end) in fields {
                assert!(end <= 64, "{name} ends {end} bytes in");
            }
        }
    }

    #[test]
    fn unlocked_lets_other_views_take_the_shards_and_takes_them_back() {
        let ks = Keyspace::new(1, 4);
        let mut view = ks.lock_keys([&b"a"[..], &b"b"[..]]);
        view.set(0, b"a", s(b"1"));
        let held = ks.shard_of(b"a");
        let seen = view.unlocked(|| {
            // Another view can lock and write the shard meanwhile.
            let mut other = ks.lock_keys([&b"a"[..]]);
            other.set(0, b"a", s(b"2"));
            drop(other);
            ks.shards[held].try_lock().is_some()
        });
        assert!(seen, "the shard was free while the closure ran");
        assert!(view.holds_shard(held));
        assert!(ks.shards[held].try_lock().is_none(), "held again");
        assert_eq!(view.get_read(0, b"a").unwrap().value(), s(b"2").as_ref());
    }

    #[test]
    fn active_expiry_skips_a_keyspace_without_ttls_until_a_key_gets_one() {
        let ks = Keyspace::new(2, 8);
        let sweep = |ks: &Keyspace| {
            let mut deleted = Vec::new();
            ks.active_expire_cycle(Duration::from_secs(1), &mut |db, k| {
                deleted.push((db, k.to_vec()))
            });
            deleted
        };
        ks.lock_keys([&b"a"[..]]).set(0, b"a", s(b"1"));
        assert!(sweep(&ks).is_empty());
        assert!(
            !ks.ttls_maybe.load(Ordering::Relaxed),
            "no TTL found: the next ticks skip"
        );
        assert!(ks.lock_keys([&b"a"[..]]).set_expire(0, b"a", 1));
        assert_eq!(sweep(&ks), [(0, b"a".to_vec())]);
        ks.lock_keys([&b"b"[..]]).set_str(1, b"b", b"x", Some(1));
        ks.lock_keys([&b"c"[..]])
            .set_str(1, b"c", b"x", Some(u64::MAX));
        assert_eq!(sweep(&ks), [(1, b"b".to_vec())]);
        assert!(
            ks.ttls_maybe.load(Ordering::Relaxed),
            "a TTL remains: keep sweeping"
        );
        assert!(sweep(&ks).is_empty());
        assert!(ks.ttls_maybe.load(Ordering::Relaxed));
    }

    #[test]
    fn member_prefetch_goes_into_big_hashes_and_sets_and_changes_nothing() {
        use crate::hash::{Hash, HashLimits};
        use crate::set::Set;
        let small = Hash::new();
        let mut big = Hash::new();
        let mut set = Set::default();
        for i in 0..1000 {
            let m = format!("m{i}");
            big.set(m.as_bytes(), b"v", HashLimits::default());
            set.insert(m.as_bytes(), 0);
        }
        let h = |m: &str| hash_key(m.as_bytes());
        for depth in 0..3 {
            assert!(
                !small.prefetch_field(h("m1"), depth),
                "a listpack has no levels"
            );
            assert!(big.prefetch_field(h("m1"), depth));
            assert!(set.prefetch_member(h("nope"), depth));
        }
        let ks = Keyspace::new(2, 8);
        ks.lock_keys([&b"h"[..]]).set(0, b"h", Value::Hash(big));
        ks.lock_keys([&b"s"[..]]).set(0, b"s", Value::Set(set));
        ks.lock_keys([&b"x"[..]]).set(0, b"x", s(b"1"));
        let pairs: Vec<(u64, u64)> = [("h", "m1"), ("s", "m2"), ("x", "m3"), ("none", "m4")]
            .iter()
            .map(|(k, m)| (h(k), h(m)))
            .collect();
        let keys: Vec<u64> = pairs.iter().map(|p| p.0).collect();
        ks.prefetch(0, &keys);
        ks.prefetch_members(0, &pairs);
        ks.prefetch_members(5, &pairs); // no such database
        let held = ks.lock_keys([&b"h"[..]]);
        ks.prefetch_members(0, &pairs); // would deadlock if it waited
        drop(held);
        let mut k = ks.lock_keys([&b"h"[..], b"s", b"x"]);
        assert!(
            matches!(k.get_read(0, b"h").unwrap().value(), ValueRef::Hash(h) if h.len() == 1000)
        );
        assert!(
            matches!(k.get_read(0, b"s").unwrap().value(), ValueRef::Set(s) if s.len() == 1000)
        );
        assert_eq!(k.get_read(0, b"x").unwrap().value(), s(b"1").as_ref());
    }

    #[test]
    fn prefetch_changes_nothing_and_never_waits_for_a_held_shard() {
        let ks = Keyspace::new(2, 8);
        ks.lock_keys([&b"a"[..]]).set_str(0, b"a", b"1", None);
        let hashes: Vec<u64> = [&b"a"[..], b"b", b"c"]
            .iter()
            .map(|k| hash_key(k))
            .collect();
        ks.prefetch(0, &hashes);
        ks.prefetch(1, &hashes);
        ks.prefetch(7, &hashes); // no such database
        let held = ks.lock_keys([&b"a"[..]]);
        ks.prefetch(0, &hashes); // would deadlock if it waited for the lock
        drop(held);
        let mut k = ks.lock_keys([&b"a"[..], b"b"]);
        assert_eq!(k.get_read(0, b"a").unwrap().value(), s(b"1").as_ref());
        assert!(k.get_read(0, b"b").is_none());
    }

    #[test]
    fn waiting_for_a_held_shard_gives_up_when_told_and_releases_the_rest() {
        let ks = Keyspace::new(1, 8);
        let held = ks.lock_shards([5]);
        let mut asked = 0;
        let gave_up = ks.lock_shards_unless([2, 5, 7], || {
            asked += 1;
            asked == 3
        });
        assert!(gave_up.is_none());
        assert_eq!(asked, 3, "asked after each slice, until told to stop");
        // Shard 2, taken before the wait, was released.
        assert!(ks.try_lock_shard(2).is_some());
        assert!(ks.lock_all_unless(|| true).is_none());
        drop(held);
        let k = ks
            .lock_shards_unless([7, 2, 5, 2], || panic!("nothing is held"))
            .expect("every shard is free");
        assert!(k.holds_shard(2) && k.holds_shard(5) && k.holds_shard(7));
        assert!(!k.holds_shard(3));
        drop(k);
        let k = ks.lock_all_unless(|| false).expect("free");
        assert!(k.holds_all());
    }

    #[test]
    fn swapping_databases_moves_their_tables_including_the_inline_one() {
        let mut t = Tables::new(4);
        for (db, n) in [(0, 1), (1, 2), (2, 3), (3, 4)] {
            t[db].expire_cursor = n;
        }
        t.swap(0, 2);
        t.swap(3, 1);
        t.swap(1, 1);
        let cursors: Vec<u64> = t.iter().map(|d| d.expire_cursor).collect();
        assert_eq!(cursors, [3, 4, 1, 2]);
        assert_eq!(t.len(), 4);
    }
    use crate::value::StrValue;

    fn s(v: &[u8]) -> Value {
        Value::Str(StrValue::from_bytes(v))
    }

    #[test]
    fn views_record_creations_and_read_misses_only_when_asked() {
        let ks = Keyspace::new(16, 8);
        let mut k = ks.lock_keys([&b"a"[..], &b"b"[..], &b"c"[..]]);
        assert!(!k.set(0, b"a", s(b"1")));
        assert!(k.get_read(0, b"c").is_none());
        assert!(k.take_created().is_empty());
        assert!(k.take_misses().is_empty());
        k.record_created();
        k.record_misses();
        assert!(!k.set(0, b"b", s(b"1")));
        assert!(k.set(0, b"a", s(b"2")));
        assert!(k.get_read(0, b"a").is_some());
        assert!(k.get_read(1, b"c").is_none());
        // Write lookups and OBJECT's lookup are no read misses.
        assert!(k.get_mut(0, b"c").is_none());
        assert!(k.get_read_unreported(0, b"c").is_none());
        assert!(k.get_read_unreported(0, b"a").is_some());
        assert!(k.get_read_no_touch(0, b"c").is_none());
        let key = |v: &[u8]| Key::from(v);
        assert_eq!(k.take_created(), vec![(0, key(b"b"))]);
        assert_eq!(k.take_misses(), vec![(1, key(b"c")), (0, key(b"c"))]);
        assert!(k.take_misses().is_empty());
        drop(k);
        let st = ks.stats();
        // The unreported lookups still count as hit and miss.
        assert_eq!((st.keyspace_hits, st.keyspace_misses), (2, 4));
    }

    #[test]
    fn set_get_remove() {
        let ks = Keyspace::new(16, 8);
        let mut k = ks.lock_keys([&b"a"[..]]);
        assert!(!k.set(0, b"a", s(b"1")));
        assert!(k.set(0, b"a", s(b"1")));
        assert_eq!(k.get_read(0, b"a").unwrap().value(), s(b"1").as_ref());
        assert!(k.get_read(1, b"a").is_none());
        assert!(k.remove(0, b"a").is_some());
        assert!(k.get_read(0, b"a").is_none());
        drop(k);
        let st = ks.stats();
        assert_eq!((st.keyspace_hits, st.keyspace_misses), (1, 2));
    }

    #[test]
    fn expired_keys_vanish_lazily_and_count() {
        let ks = Keyspace::new(16, 8);
        let mut k = ks.lock_keys([&b"a"[..]]);
        k.set(0, b"a", s(b"1"));
        assert!(k.set_expire(0, b"a", 1));
        assert_eq!(ks_sizes_locked(&mut k), 1);
        assert!(k.get_read(0, b"a").is_none());
        drop(k);
        assert_eq!(ks.stats().expired_keys, 1);
        assert_eq!(ks.db_sizes()[0], (0, 0));
    }

    #[test]
    fn the_ttl_index_follows_every_way_a_ttl_changes() {
        let ks = Keyspace::new(2, 4);
        let mut rng = fastrand::Rng::with_seed(7);
        let far = now_ms() + 1_000_000;
        for round in 0..2000 {
            let key = format!("k{}", rng.usize(..40));
            let key = key.as_bytes();
            let mut k = ks.lock_all();
            match rng.u8(..8) {
                0 => drop(k.set(0, key, s(b"v"))),
                1 => drop(k.set_str(0, key, b"12", Some(far))),
                // Overwrites of an int "12" or a string "v" in place.
                7 => drop(k.set_str(0, key, if rng.bool() { b"34" } else { b"w" }, None)),
                2 => drop(k.set_expire(0, key, far)),
                3 => drop(k.persist(0, key)),
                4 => drop(k.remove(0, key)),
                5 => drop(k.set_keep_ttl(0, key, s(b"w"))),
                _ => drop(k.set_expire(0, key, 1)),
            }
            let mut with_ttl = 0;
            k.for_each_key(0, |_, e| with_ttl += usize::from(e.expire_at().is_some()));
            drop(k);
            // Expired keys still count until reclaimed, as in Redis.
            let pending: usize = (0..4)
                .map(|i| {
                    let s = ks.shards[i].lock();
                    let t = &s.dbs[0];
                    t.keys.iter().filter(|e| e.is_expired(now_ms())).count()
                })
                .sum();
            assert_eq!(ks.db_sizes()[0].1, with_ttl + pending, "round {round}");
        }
        // Active expiry finds every expired key through the index.
        let mut k = ks.lock_all();
        for i in 0..40 {
            let key = format!("k{i}");
            k.set(0, key.as_bytes(), s(b"v"));
            k.set_expire(0, key.as_bytes(), 1);
        }
        drop(k);
        while ks.active_expire_cycle(Duration::from_secs(1), &mut |_, _| {}) > 0 {}
        assert_eq!(ks.db_sizes()[0], (0, 0));
    }

    fn ks_sizes_locked(k: &mut Keys) -> usize {
        let h = hash_key(b"a");
        let idx = k.ks.shard_of_hash(h);
        k.with_shard(idx, |s| s.dbs[0].volatile.len())
    }

    #[test]
    fn lazily_expired_keys_are_reported_once_in_order() {
        let ks = Keyspace::new(2, 8);
        let mut k = ks.lock_all();
        for key in [&b"a"[..], b"b", b"c"] {
            k.set(1, key, s(b"v"));
            k.set_expire(1, key, 1);
        }
        assert!(k.get_read(1, b"b").is_none());
        assert!(k.remove(1, b"a").is_none());
        k.set(1, b"c", s(b"new"));
        assert!(k.get_read(1, b"missing").is_none());
        let got = k.take_expired();
        let want: Vec<(usize, Key)> = [&b"b"[..], b"a", b"c"]
            .iter()
            .map(|key| (1, Key::from(*key)))
            .collect();
        assert_eq!(got, want);
        assert!(k.take_expired().is_empty());
        // Active expiry tells its callback instead.
        k.set(0, b"d", s(b"v"));
        k.set_expire(0, b"d", 1);
        drop(k);
        let mut seen = Vec::new();
        ks.active_expire_cycle(Duration::from_millis(50), &mut |db, key| {
            seen.push((db, key.to_vec()))
        });
        assert_eq!(seen, vec![(0, b"d".to_vec())]);
    }

    #[test]
    fn paused_expiry_hides_expired_keys_without_deleting_them() {
        let ks = Keyspace::new(1, 4);
        let mut k = ks.lock_all();
        for key in [&b"a"[..], b"b", b"c"] {
            k.set(0, key, s(b"v"));
            k.set_expire(0, key, 1);
        }
        drop(k);
        ks.pause_expiry_until(now_ms() + 60_000);
        assert_eq!(
            ks.active_expire_cycle(Duration::from_secs(1), &mut |_, _| {}),
            0
        );
        let mut k = ks.lock_all();
        assert!(k.get_read(0, b"a").is_none());
        assert!(k.take_expired().is_empty());
        drop(k);
        assert_eq!(ks.db_sizes()[0].0, 3);
        // A write still deletes the expired key it replaces.
        ks.lock_all().set(0, b"b", s(b"new"));
        assert_eq!(ks.db_sizes()[0].0, 3);
        // Unpaused, reads and the sweep delete again.
        ks.pause_expiry_until(0);
        let mut k = ks.lock_all();
        assert!(k.get_read(0, b"a").is_none());
        assert_eq!(k.take_expired().len(), 1);
        drop(k);
        while ks.active_expire_cycle(Duration::from_secs(1), &mut |_, _| {}) > 0 {}
        assert_eq!(ks.db_sizes()[0].0, 1);
    }

    #[test]
    fn a_ttl_blind_view_sees_and_keeps_expired_keys() {
        let ks = Keyspace::new(1, 4);
        let mut k = ks.lock_all();
        k.set(0, b"a", s(b"v"));
        k.set_expire(0, b"a", 1);
        k.set_ttl_blind(true);
        assert!(k.get_read(0, b"a").is_some());
        assert!(k.get_mut(0, b"a").is_some());
        assert!(k.peek(0, b"a").is_some());
        assert!(k.take_expired().is_empty());
        k.set_ttl_blind(false);
        assert!(k.get_read(0, b"a").is_none());
    }

    #[test]
    fn a_replica_keeps_expired_keys_until_told_otherwise() {
        let ks = Keyspace::new(1, 4);
        let mut k = ks.lock_all();
        k.set(0, b"a", s(b"v"));
        k.set_expire(0, b"a", 1);
        drop(k);
        ks.set_replica_expiry(true);
        // Even an ended CLIENT PAUSE does not bring expiry back.
        ks.pause_expiry_until(0);
        assert_eq!(
            ks.active_expire_cycle(Duration::from_secs(1), &mut |_, _| {}),
            0
        );
        let mut k = ks.lock_all();
        assert!(k.get_read(0, b"a").is_none());
        assert!(k.take_expired().is_empty());
        drop(k);
        assert_eq!(ks.db_sizes()[0].0, 1);
        ks.set_replica_expiry(false);
        let mut k = ks.lock_all();
        assert!(k.get_read(0, b"a").is_none());
        assert_eq!(k.take_expired().len(), 1);
    }

    #[test]
    fn active_expiry_removes_expired_keys() {
        let ks = Keyspace::new(2, 4);
        let keys: Vec<Vec<u8>> = (0..500).map(|i| format!("k{i}").into_bytes()).collect();
        let mut k = ks.lock_all();
        for key in &keys {
            k.set(1, key, s(b"v"));
            k.set_expire(1, key, 1);
        }
        k.set(1, b"keep", s(b"v"));
        drop(k);
        let mut total = 0;
        for _ in 0..100 {
            total += ks.active_expire_cycle(Duration::from_millis(50), &mut |_, _| {});
            if total == 500 {
                break;
            }
        }
        assert_eq!(total, 500);
        assert_eq!(ks.db_sizes()[1], (1, 0));
    }

    #[test]
    fn watch_flags_fire_on_modification_flush_and_expiry() {
        let ks = Keyspace::new(16, 8);
        let flag: WatchFlag = Arc::default();
        let mut k = ks.lock_all();
        k.watch(0, b"w", &flag);
        k.signal_modified(1, b"w");
        assert!(!flag.load(Ordering::Acquire));
        k.signal_modified(0, b"w");
        assert!(flag.load(Ordering::Acquire));
        flag.store(false, Ordering::Release);
        k.flush_db(0);
        assert!(
            !flag.load(Ordering::Acquire),
            "flush of a db without the key does not fire"
        );
        k.set(0, b"w", s(b"1"));
        k.flush_db(0);
        assert!(flag.load(Ordering::Acquire));
        flag.store(false, Ordering::Release);
        k.set(0, b"w", s(b"1"));
        k.set_expire(0, b"w", 1);
        assert!(!k.contains(0, b"w"));
        assert!(flag.load(Ordering::Acquire));
        k.unwatch(0, b"w", &flag);
        flag.store(false, Ordering::Release);
        k.signal_modified(0, b"w");
        assert!(!flag.load(Ordering::Acquire));
        // With nothing watched, no shard keeps a map.
        drop(k);
        assert!(ks.shards.iter().all(|s| s.lock().watchers.is_none()));
    }

    /// Redis 7.0's stale WATCH rules: a key already past its TTL when
    /// watched may be deleted (lazily, by FLUSHDB, or swapped away) without
    /// failing EXEC, and a missing key swapped for a stale one is stale.
    #[test]
    fn deleting_a_key_that_was_stale_when_watched_is_no_change() {
        let ks = Keyspace::new(16, 8);
        let flag: WatchFlag = Arc::default();
        let mut k = ks.lock_all();
        for key in [&b"x"[..], b"y"] {
            k.set(0, key, s(b"1"));
            k.set_expire(0, key, 1);
            k.watch(0, key, &flag);
            assert!(!k.expired_since_watched(0, key, &flag));
        }
        assert!(!k.contains(0, b"x"), "read as missing, and deleted");
        k.flush_db(0);
        assert!(!flag.load(Ordering::Acquire));
        // Gone now, so a new value is a change.
        k.set(0, b"x", s(b"2"));
        k.signal_modified(0, b"x");
        assert!(flag.load(Ordering::Acquire));
        // A fresh client: SWAPDB brings a stale key where none was.
        let flag: WatchFlag = Arc::default();
        k.watch(0, b"z", &flag);
        k.set(1, b"z", s(b"1"));
        k.set_expire(1, b"z", 1);
        k.swap_db(0, 1);
        assert!(!flag.load(Ordering::Acquire));
        assert!(!k.expired_since_watched(0, b"z", &flag));
        k.watch(0, b"fresh", &flag);
        k.set(0, b"fresh", s(b"1"));
        flag.store(false, Ordering::Release);
        k.set_expire(0, b"fresh", 1);
        assert!(k.expired_since_watched(0, b"fresh", &flag));
    }

    #[test]
    fn swap_all_with_exchanges_every_database_and_fires_watches() {
        let (main, staging) = (Keyspace::new(4, 8), Keyspace::new(4, 8));
        let (old_flag, new_flag): (WatchFlag, WatchFlag) = Default::default();
        let mut m = main.lock_all();
        let mut t = staging.lock_all();
        for i in 0..100 {
            m.set(i % 4, format!("old{i}").as_bytes(), s(b"1"));
            t.set(i % 4, format!("new{i}").as_bytes(), s(b"2"));
        }
        t.set_expire(3, b"new3", u64::MAX / 2);
        m.watch(0, b"old0", &old_flag);
        m.watch(1, b"new1", &new_flag);
        m.swap_all_with(&mut t);
        assert!(old_flag.load(Ordering::Acquire) && new_flag.load(Ordering::Acquire));
        for i in 0..100 {
            assert!(m.contains(i % 4, format!("new{i}").as_bytes()));
            assert!(!m.contains(i % 4, format!("old{i}").as_bytes()));
            assert!(t.contains(i % 4, format!("old{i}").as_bytes()));
        }
        assert!(main.ttls_maybe.load(Ordering::Relaxed));
    }

    #[test]
    fn scan_visits_every_key_across_shards() {
        let ks = Keyspace::new(1, 16);
        let mut k = ks.lock_all();
        for i in 0..1000 {
            k.set(0, format!("key:{i}").as_bytes(), s(b"x"));
        }
        drop(k);
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        loop {
            let mut k = ks.lock_dynamic();
            cursor = k.scan(
                0,
                cursor,
                10,
                |key, _| {
                    seen.insert(key.to_vec());
                },
                &mut |_, _| {},
            );
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 1000);
    }

    #[test]
    fn access_metadata_of_new_and_overwritten_keys() {
        let ks = Keyspace::new(2, 4);
        let mut k = ks.lock_all();
        let now = k.now();
        // Without an LFU policy an entry keeps its last access time.
        k.set(0, b"a", s(b"1"));
        let e = k.get_read_no_touch(0, b"a").unwrap();
        assert_eq!(e.idle_secs(now), 0);
        assert_eq!(e.idle_secs(now + 5_000), 5);
        // Under an LFU policy, a counter instead.
        ks.set_lfu_tuning(LfuTuning {
            lfu: true,
            ..LfuTuning::default()
        });
        k.remove(0, b"a");
        k.set(0, b"a", s(b"1"));
        let e = k.get_read_no_touch(0, b"a").unwrap();
        assert_eq!(e.lfu_freq(now, 1), LFU_INIT_VAL);
        // One decay period per `decay_minutes` without access.
        assert_eq!(e.lfu_freq(now + 3 * 60_000, 1), LFU_INIT_VAL - 3);
        assert_eq!(e.lfu_freq(now + 3 * 60_000, 0), LFU_INIT_VAL);
        assert_eq!(e.lfu_freq(now + 100 * 60_000, 1), 0);
        // With a log factor of 0 every access increments the counter. (One
        // view, so one clock reading: no decay can sneak in.)
        ks.set_lfu_tuning(LfuTuning {
            lfu: true,
            log_factor: 0,
            decay_minutes: 1,
        });
        for _ in 0..3 {
            assert!(k.get_read(0, b"a").is_some());
        }
        assert!(k.touch(0, b"a"));
        k.get_mut(0, b"a");
        assert!(k.contains(0, b"a"));
        k.get_read_no_touch(0, b"a");
        assert_eq!(
            k.get_read_no_touch(0, b"a").unwrap().lfu_freq(now, 1),
            LFU_INIT_VAL + 5
        );
        // An overwrite keeps the counter; a deleted and recreated key starts over.
        k.set(0, b"a", s(b"2"));
        k.set_keep_ttl(0, b"a", s(b"3"));
        // (SET's in-place overwrite, and its fallback to a new block.)
        k.set_str(0, b"a", b"5", None);
        k.set_str(0, b"a", b"a longer value", None);
        assert_eq!(
            k.get_read_no_touch(0, b"a").unwrap().lfu_freq(now, 1),
            LFU_INIT_VAL + 5
        );
        k.remove(0, b"a");
        k.set(0, b"a", s(b"4"));
        assert_eq!(
            k.get_read_no_touch(0, b"a").unwrap().lfu_freq(now, 1),
            LFU_INIT_VAL
        );
        // A moved entry keeps its metadata.
        k.get_read(0, b"a");
        assert!(k.move_key(0, 1, b"a"));
        assert_eq!(
            k.get_read_no_touch(1, b"a").unwrap().lfu_freq(now, 1),
            LFU_INIT_VAL + 1
        );
        // A no-touch view leaves the counter alone, except for TOUCH.
        k.set_no_touch(true);
        k.get_read(1, b"a");
        k.get_mut(1, b"a");
        assert_eq!(
            k.get_read_no_touch(1, b"a").unwrap().lfu_freq(now, 1),
            LFU_INIT_VAL + 1
        );
        k.touch(1, b"a");
        assert_eq!(
            k.get_read_no_touch(1, b"a").unwrap().lfu_freq(now, 1),
            LFU_INIT_VAL + 2
        );
    }

    #[test]
    fn lfu_counter_grows_ever_more_slowly() {
        // With the default log factor (10) the chance to increment falls as
        // the counter grows: Redis's table has ~10 after 100 hits and ~18
        // after 1000. Wide bounds: the increments are random.
        let ks = Keyspace::new(1, 1);
        ks.set_lfu_tuning(LfuTuning {
            lfu: true,
            ..LfuTuning::default()
        });
        let mut k = ks.lock_all();
        let now = k.now();
        k.set(0, b"a", s(b"1"));
        let freq_after = |hits: usize, k: &mut Keys| {
            for _ in 0..hits {
                k.get_read(0, b"a");
            }
            k.get_read_no_touch(0, b"a").unwrap().lfu_freq(now, 0)
        };
        let f100 = freq_after(100, &mut k);
        let f1000 = freq_after(900, &mut k);
        let f10000 = freq_after(9000, &mut k);
        assert!((6..=16).contains(&f100), "{f100} after 100 hits");
        assert!((12..=32).contains(&f1000), "{f1000} after 1000 hits");
        assert!((30..=75).contains(&f10000), "{f10000} after 10000 hits");
        // A hundred times the hits moved the counter a few times further,
        // never near a hundred times: the bounds above are far from linear.
    }

    #[test]
    fn counter_saturates_and_flush_reports_keys() {
        let ks = Keyspace::new(1, 2);
        ks.set_lfu_tuning(LfuTuning {
            lfu: true,
            log_factor: 0,
            decay_minutes: 0,
        });
        let mut k = ks.lock_all();
        k.set(0, b"a", s(b"1"));
        k.set_entry(0, b"b", Entry::new(s(b"2")).with_expire(Some(u64::MAX)));
        for _ in 0..300 {
            k.get_read(0, b"a");
        }
        let now = k.now();
        assert_eq!(
            k.get_read_no_touch(0, b"a").unwrap().lfu_freq(now, 0),
            u8::MAX
        );
        assert_eq!(
            k.get_read_no_touch(0, b"b").unwrap().expire_at(),
            Some(u64::MAX)
        );
        assert_eq!(k.flush_db(0).key_count(), 2);
        assert_eq!(k.db_len(0), 0);
        drop(k);
        assert_eq!(ks.db_sizes()[0], (0, 0));
    }

    #[test]
    fn swap_and_move() {
        let ks = Keyspace::new(4, 8);
        let mut k = ks.lock_all();
        k.set(0, b"a", s(b"1"));
        assert!(k.move_key(0, 2, b"a"));
        assert!(!k.move_key(0, 2, b"a"));
        k.swap_db(2, 3);
        assert!(k.contains(3, b"a"));
        assert_eq!(k.db_len(3), 1);
        let mut rng = fastrand::Rng::with_seed(1);
        assert_eq!(k.random_key(3, &mut rng).as_deref(), Some(&b"a"[..]));
        assert_eq!(k.random_key(0, &mut rng), None);
    }

    #[test]
    fn try_hold_takes_free_shards_only() {
        let ks = Keyspace::new(1, 64);
        let a: &[u8] = b"a";
        let b = (0..)
            .map(|i| format!("b{i}").into_bytes())
            .find(|b| ks.shard_of(b) != ks.shard_of(a))
            .unwrap();
        let mut k = ks.lock_keys([a]);
        assert!(k.try_hold(a));
        let busy = ks.lock_keys([b.as_slice()]);
        assert!(!k.try_hold(&b));
        drop(busy);
        assert!(k.try_hold(&b));
        // Both shards are usable through the view now.
        k.set(0, a, s(b"1"));
        k.set(0, &b, s(b"2"));
        assert!(k.contains(0, a) && k.contains(0, &b));
        drop(k);
        assert!(ks.lock_all().try_hold(&b));
        assert!(!ks.lock_dynamic().try_hold(a));
    }

    #[test]
    fn ascending_hold_waits_only_above_the_held_shards() {
        let ks = Keyspace::new(1, 16);
        let mut k = ks.lock_shards([5]);
        assert!(!k.hold_shard_ascending(3), "below a held shard");
        assert!(!k.holds_shard(3));
        assert!(k.hold_shard_ascending(9));
        assert!(k.holds_shard(9) && k.holds_shard(5));
        assert!(k.hold_shard_ascending(5), "already held");
        assert!(k.try_hold_shard(3), "a free lower shard can be tried");
        assert!(k.holds_shard(3));
        drop(k);
        let mut none = ks.lock_shards([]);
        assert!(none.hold_shard_ascending(0));
        assert!(!ks.lock_dynamic().hold_shard_ascending(1));
        assert!(!ks.lock_shards([]).hold_shard_ascending(16));
    }
}
