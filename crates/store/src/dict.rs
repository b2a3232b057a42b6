//! The hash table of big hashes and sets.
//!
//! [`Dict`] is a chained hash table specialised for what Redis's
//! hashtable-encoded hashes and sets need and general-purpose maps
//! (hashbrown, `std::collections`) do not offer:
//!
//! * a stateless, resize-stable cursor for `HSCAN`/`SSCAN` (reverse-binary
//!   cursor increment over a power-of-two bucket array),
//! * cheap uniform random picks for `SRANDMEMBER`, `SPOP`, `HRANDFIELD`,
//! * a small, predictable per-entry overhead.
//!
//! (The keyspace's own keys live in `key_table.rs`, one word per key.)
//!
//! The module also provides [`hash_key`], the keyed hash function the whole
//! store uses, so that a single 64-bit hash can select the shard (high
//! bits, chosen by the caller), a key table's tag (bits 16-31) and the
//! bucket inside a `Dict` (low bits).

use std::borrow::Borrow;
use std::fmt;
use std::mem;
use std::num::NonZeroU32;
use std::sync::OnceLock;

/// Hashes a key with the process-wide keyed hash used throughout the store.
///
/// The hash is `ahash` keyed with a random seed that is generated once per
/// process, so bucket placement cannot be predicted (and attacked with
/// colliding keys) from outside. The same value must be passed to every
/// [`Dict`] method that takes a `hash` for that key; callers typically use the
/// high bits to pick a shard and let the `Dict` use the low bits.
pub fn hash_key(key: &[u8]) -> u64 {
    static STATE: OnceLock<ahash::RandomState> = OnceLock::new();
    STATE.get_or_init(ahash::RandomState::new).hash_one(key)
}

/// A link to an entry: the entry's arena index plus one, or `None` for the
/// end of a chain. Using `NonZeroU32` keeps links at four bytes and lets a
/// freshly allocated bucket array be zeroed memory.
type Link = Option<NonZeroU32>;

/// Smallest non-empty bucket array.
const MIN_BUCKETS: usize = 4;

/// Smallest non-empty entry arena.
const MIN_SLOTS: usize = 4;

/// Most entries one table can hold: indices must fit in a `u32` link, and
/// bucket indices in the hash bits a slot keeps ([`HASH_BITS`]; a table
/// has at most one bucket per entry, rounded up to a power of two).
const MAX_ENTRIES: usize = HASH_BITS as usize;

/// The bits of a caller's hash a slot keeps (the low 31).
const HASH_BITS: u32 = (1 << 31) - 1;

/// The part of a caller's hash that slots keep and compare.
#[inline]
fn stored(hash: u64) -> u32 {
    hash as u32 & HASH_BITS
}

/// Scan gives up after visiting this many buckets per requested entry, so a
/// call does bounded work even when it runs into a long stretch of empty
/// buckets.
const SCAN_BUCKETS_PER_ENTRY: usize = 10;

/// Link pointing at arena index `i`.
#[inline]
fn link_to(i: usize) -> Link {
    debug_assert!(i < MAX_ENTRIES);
    NonZeroU32::new(i as u32 + 1)
}

/// Arena index a (non-empty) link points at.
#[inline]
fn index_of(link: NonZeroU32) -> usize {
    (link.get() - 1) as usize
}

/// The key's bytes; a helper so that `Borrow<[u8]>` is picked unambiguously.
#[inline]
fn key_bytes<K: Borrow<[u8]>>(key: &K) -> &[u8] {
    key.borrow()
}

/// Advances a reverse-binary scan cursor over a table whose bucket mask is
/// `mask`: the bits outside the mask are set so that the increment (done on
/// the bit-reversed value) carries straight into the masked bits, starting
/// from the most significant one.
#[inline]
fn next_cursor(cursor: u64, mask: u64) -> u64 {
    (cursor | !mask)
        .reverse_bits()
        .wrapping_add(1)
        .reverse_bits()
}

/// Asks the CPU to start loading the cache line holding `*p`, so that a
/// later read finds it there; a hint with no effect on what is read.
#[inline]
pub(crate) fn prefetch_read<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and does not dereference in the
    // language's sense, whatever the address; SSE is part of x86_64's
    // baseline. Exercised by every eviction test (sampling prefetches).
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// One entry in the arena.
#[derive(Clone)]
struct Slot<K, V> {
    /// Low 31 bits of the caller's hash ([`HASH_BITS`]). Bucket indices
    /// never need more (see [`MAX_ENTRIES`]), and keeping them means
    /// resizing never rehashes a key and lookups reject almost every
    /// non-matching entry without touching its key bytes.
    hash: u32,
    /// Next entry in the same bucket.
    next: Link,
    key: K,
    value: V,
}

impl<K, V> Slot<K, V> {
    /// The stored hash bits.
    #[inline]
    fn hash(&self) -> u32 {
        self.hash
    }
}

/// A chained hash table with a Redis-style `SCAN` cursor and random sampling.
///
/// # Layout
///
/// Entries live densely in an arena (`Vec`) with no holes; each bucket of a
/// power-of-two bucket array heads a singly linked chain threaded through
/// the arena with 32-bit indices. Each entry stores the low 31 bits of its
/// hash, so that resizing relinks the existing entries in one pass over the
/// arena without rehashing keys or moving entries. Removing an entry moves
/// the last arena entry into the hole and repoints the one link that
/// referenced it, so the arena stays dense: iteration is a linear walk and a
/// uniformly random entry is a single random index.
///
/// Per entry the structure costs 8 bytes (hash + link) next to the key and
/// value stored inline, plus a 4-byte bucket slot per bucket (between one
/// and two buckets per entry after growth) and the arena's spare capacity.
/// There is no per-entry allocation. See [`Dict::overhead_bytes`].
///
/// # Resizing
///
/// The bucket array doubles when `len` would exceed the bucket count (load
/// factor 1) and shrinks to the smallest power of two that holds `len` once
/// fewer than one entry per eight buckets remains (never below four buckets;
/// an empty table frees all its memory). Resizing happens all at once
/// rather than incrementally as in Redis: the store shards the keyspace into
/// many tables, so any single table is small and a full relink is a short
/// pause.
///
/// # SCAN guarantee
///
/// [`Dict::scan`] walks buckets in reverse-binary order of their index. An
/// entry that is present during a whole scan (from cursor 0 until 0 is
/// returned again) is reported at least once, even if the table grows or
/// shrinks any number of times between calls; entries may be reported more
/// than once after a shrink. Without resizes every entry is reported exactly
/// once.
///
/// # Hashes
///
/// The caller supplies the 64-bit hash of every key (normally from
/// [`hash_key`]) and must always pass the same hash for the same key bytes.
/// Only the low 31 bits are used by the table.
#[derive(Clone)]
pub struct Dict<K, V> {
    /// Chain heads; empty (no allocation) or a power-of-two length.
    buckets: Box<[Link]>,
    /// All entries, densely packed.
    slots: Vec<Slot<K, V>>,
}

impl<K, V> Default for Dict<K, V> {
    /// An empty table; same as [`Dict::new`].
    fn default() -> Self {
        Self::new()
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for Dict<K, V> {
    /// Formats the entries as a map (in unspecified order).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K, V> Dict<K, V> {
    /// Creates an empty table. Nothing is allocated until the first insert,
    /// so idle shards and empty collections cost only the struct itself.
    pub fn new() -> Self {
        Dict {
            buckets: Box::default(),
            slots: Vec::new(),
        }
    }

    /// Number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the table has no entries.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Current number of buckets (0 for a table that has never held an
    /// entry or has been emptied). Exposed for tests, `DEBUG`-style
    /// introspection and memory reporting.
    #[inline]
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    /// Heap bytes owned by the table structure itself: the bucket array plus
    /// the entry arena's whole capacity (each arena slot holds the key and
    /// value inline, so their inline size is included), but not any heap
    /// memory the keys and values own themselves. Used for `INFO memory` /
    /// `MEMORY USAGE`-style accounting.
    pub fn overhead_bytes(&self) -> usize {
        self.buckets.len() * mem::size_of::<Link>()
            + self.slots.capacity() * mem::size_of::<Slot<K, V>>()
    }

    /// Iterates over all entries in unspecified order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&K, &V)> {
        self.slots.iter().map(|s| (&s.key, &s.value))
    }

    /// Iterates over all entries in unspecified order with mutable access to
    /// the values (keys cannot change: that would break their placement).
    pub fn iter_mut(&mut self) -> impl ExactSizeIterator<Item = (&K, &mut V)> {
        self.slots.iter_mut().map(|s| (&s.key, &mut s.value))
    }

    /// Removes all entries and frees the table's memory (as `FLUSHDB` needs).
    pub fn clear(&mut self) {
        self.buckets = Box::default();
        // Detach first so that a panicking destructor cannot leave the
        // table pointing at dropped entries.
        drop(mem::take(&mut self.slots));
    }

    /// Removes all entries, handing them out by value in unspecified order.
    /// The table is empty (and has freed its bucket array) as soon as this
    /// returns; entries the iterator does not yield are dropped with it.
    pub fn drain(&mut self) -> impl ExactSizeIterator<Item = (K, V)> {
        self.buckets = Box::default();
        mem::take(&mut self.slots)
            .into_iter()
            .map(|s| (s.key, s.value))
    }

    /// Incremental scan in the style of Redis `SCAN`.
    ///
    /// Pass 0 to start; pass the returned cursor to continue; 0 is returned
    /// when the scan is complete. Each call reports every entry of at least
    /// one bucket to `f` and keeps visiting buckets until about `count`
    /// entries were reported (`count` 0 is treated as 1), the scan is done,
    /// or `10 * count` buckets were visited (bounding the work spent on empty
    /// buckets). Any `u64` is accepted as a cursor.
    ///
    /// Buckets are visited in reverse-binary order of their index, which is
    /// what makes the guarantee described on [`Dict`] hold across resizes
    /// between calls.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&K, &V)) -> u64 {
        if self.slots.is_empty() {
            return 0;
        }
        let mask = (self.buckets.len() - 1) as u64;
        let want = count.max(1);
        let max_buckets = want.saturating_mul(SCAN_BUCKETS_PER_ENTRY);
        let mut cursor = cursor;
        let mut emitted = 0usize;
        let mut visited = 0usize;
        loop {
            let mut cur = self.buckets[(cursor & mask) as usize];
            while let Some(link) = cur {
                let slot = &self.slots[index_of(link)];
                f(&slot.key, &slot.value);
                emitted += 1;
                cur = slot.next;
            }
            visited += 1;
            cursor = next_cursor(cursor, mask);
            if cursor == 0 || emitted >= want || visited >= max_buckets {
                return cursor;
            }
        }
    }

    /// A uniformly random entry, or `None` if the table is empty.
    ///
    /// Because the arena is dense this is a single random index: O(1) in the
    /// worst case and exactly uniform, which is stronger than the
    /// bucket-then-chain pick of a classic chained table (that one favours
    /// entries in short chains).
    pub fn random_entry(&self, rng: &mut fastrand::Rng) -> Option<(&K, &V)> {
        if self.slots.is_empty() {
            return None;
        }
        let slot = &self.slots[rng.usize(..self.slots.len())];
        Some((&slot.key, &slot.value))
    }

    /// Removes every entry for which `f` returns false, then shrinks the
    /// table if it became sparse. The table stays consistent even if `f`
    /// panics part-way.
    pub fn retain(&mut self, mut f: impl FnMut(&K, &mut V) -> bool) {
        let mut i = 0;
        let mut removed = false;
        while i < self.slots.len() {
            let slot = &mut self.slots[i];
            if f(&slot.key, &mut slot.value) {
                i += 1;
            } else {
                // The last entry moves into slot `i`; it has not been looked
                // at yet, so `i` is not advanced.
                self.remove_at(i);
                removed = true;
            }
        }
        if removed {
            self.shrink_if_sparse();
        }
    }

    /// Bucket index for a stored hash under the current bucket array.
    #[inline]
    fn bucket_of(&self, hash: u32) -> usize {
        debug_assert!(!self.buckets.is_empty());
        hash as usize & (self.buckets.len() - 1)
    }

    /// Replaces the bucket array by one with `n` (a power of two) buckets
    /// and relinks every entry into it. Entries stay where they are in the
    /// arena; only their `next` links change. O(len + n).
    fn rebuild_buckets(&mut self, n: usize) {
        debug_assert!(n.is_power_of_two());
        let mut buckets: Box<[Link]> = vec![None; n].into_boxed_slice();
        let mask = n - 1;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let b = slot.hash() as usize & mask;
            slot.next = buckets[b];
            buckets[b] = link_to(i);
        }
        self.buckets = buckets;
    }

    /// Unlinks the entry at arena index `i` from its chain, fills the hole
    /// with the last arena entry and returns the removed key and value.
    /// Does not shrink.
    fn remove_at(&mut self, i: usize) -> (K, V) {
        let b = self.bucket_of(self.slots[i].hash());
        let next = self.slots[i].next;
        self.replace_link(b, link_to(i), next);
        let last = self.slots.len() - 1;
        if i != last {
            // `i` is no longer reachable, so this walk cannot touch it.
            let b = self.bucket_of(self.slots[last].hash());
            self.replace_link(b, link_to(last), link_to(i));
        }
        let slot = self.slots.swap_remove(i);
        (slot.key, slot.value)
    }

    /// In the chain of bucket `b`, makes the link that currently equals
    /// `from` equal `to` instead. `from` must be reachable from `b`.
    fn replace_link(&mut self, b: usize, from: Link, to: Link) {
        if self.buckets[b] == from {
            self.buckets[b] = to;
            return;
        }
        let mut cur = self.buckets[b];
        while let Some(link) = cur {
            let slot = &mut self.slots[index_of(link)];
            if slot.next == from {
                slot.next = to;
                return;
            }
            cur = slot.next;
        }
        unreachable!("dict invariant broken: entry not reachable from its bucket");
    }

    /// Frees everything when empty; shrinks the bucket array when fewer than
    /// one entry per eight buckets remains and the arena when it is less
    /// than a quarter full.
    fn shrink_if_sparse(&mut self) {
        let len = self.slots.len();
        if len == 0 {
            self.buckets = Box::default();
            self.slots = Vec::new();
            return;
        }
        let n = self.buckets.len();
        if n > MIN_BUCKETS && len < n / 8 {
            self.rebuild_buckets(len.next_power_of_two().max(MIN_BUCKETS));
        }
        let cap = self.slots.capacity();
        if cap > MIN_SLOTS && len < cap / 4 {
            self.slots.shrink_to((len + len / 2).max(MIN_SLOTS));
        }
    }

    /// Appends a new entry known not to be present and links it in,
    /// growing the bucket array and arena as needed. Returns its index.
    fn push_new(&mut self, hash: u32, key: K, value: V) -> usize {
        let i = self.slots.len();
        assert!(i < MAX_ENTRIES, "Dict cannot hold more than 2^31-1 entries");
        if i + 1 > self.buckets.len() {
            self.rebuild_buckets((i + 1).next_power_of_two().max(MIN_BUCKETS));
        }
        if i == self.slots.capacity() {
            // Grow by 1.5x rather than Vec's 2x: less idle capacity on
            // average, and moving entries is a plain memcpy.
            self.slots.reserve_exact((i / 2).max(MIN_SLOTS));
        }
        let b = self.bucket_of(hash);
        self.slots.push(Slot {
            hash,
            next: self.buckets[b],
            key,
            value,
        });
        self.buckets[b] = link_to(i);
        i
    }
}

impl<K: Borrow<[u8]>, V> Dict<K, V> {
    /// Arena index of the entry for `key`, if present.
    #[inline]
    fn find(&self, hash: u32, key: &[u8]) -> Option<usize> {
        if self.buckets.is_empty() {
            return None;
        }
        let mut cur = self.buckets[self.bucket_of(hash)];
        while let Some(link) = cur {
            let i = index_of(link);
            let slot = &self.slots[i];
            if slot.hash() == hash && key_bytes(&slot.key) == key {
                return Some(i);
            }
            cur = slot.next;
        }
        None
    }

    /// Starts loading one level of the memory a lookup of `hash` reads:
    /// `depth` 0 the bucket, 1 the first entry of its chain, 2 and more
    /// what `deep` prefetches for the first entry stored with `hash`'s
    /// bits (what the key points to). Each level reads the memory the
    /// previous one loaded, so a caller with a batch of keys asks for
    /// depth 0 for all of them, then depth 1 for all, and so on: the
    /// batch's misses then overlap level by level instead of queueing.
    /// Only a hint: nothing it reads changes what a lookup finds.
    pub fn prefetch(&self, hash: u64, depth: u8, mut deep: impl FnMut(&K)) {
        if self.buckets.is_empty() {
            return;
        }
        let hash = stored(hash);
        let bucket = &self.buckets[self.bucket_of(hash)];
        if depth == 0 {
            prefetch_read(bucket);
            return;
        }
        let mut cur = *bucket;
        while let Some(link) = cur {
            let slot = &self.slots[index_of(link)];
            if depth == 1 {
                prefetch_read(slot);
                return;
            }
            if slot.hash() == hash {
                deep(&slot.key);
                return;
            }
            cur = slot.next;
        }
    }

    /// The value stored for `key`, if any.
    pub fn get(&self, hash: u64, key: &[u8]) -> Option<&V> {
        self.find(stored(hash), key).map(|i| &self.slots[i].value)
    }

    /// Mutable access to the value stored for `key`, if any (for in-place
    /// updates such as `APPEND` or `INCR`).
    pub fn get_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut V> {
        self.find(stored(hash), key)
            .map(move |i| &mut self.slots[i].value)
    }

    /// Mutable access to the stored key for `key`, for tables whose keys
    /// carry their value (the keyspace's entries). The caller must not change
    /// the key's bytes: the entry would then sit in the wrong bucket and no
    /// longer be found (memory stays safe, lookups go wrong).
    pub fn get_key_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut K> {
        self.find(stored(hash), key)
            .map(move |i| &mut self.slots[i].key)
    }

    /// The stored key and value for `key`, if any. Useful when the stored
    /// key carries more than its bytes (or must be cloned cheaply).
    pub fn get_key_value(&self, hash: u64, key: &[u8]) -> Option<(&K, &V)> {
        self.find(stored(hash), key).map(|i| {
            let slot = &self.slots[i];
            (&slot.key, &slot.value)
        })
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, hash: u64, key: &[u8]) -> bool {
        self.find(stored(hash), key).is_some()
    }

    /// Inserts or replaces; returns the old value if the key existed (the
    /// stored key is kept and the new `key` is dropped in that case).
    ///
    /// # Panics
    ///
    /// If the table would exceed 2^31 - 1 entries.
    pub fn insert(&mut self, hash: u64, key: K, value: V) -> Option<V> {
        let hash = stored(hash);
        if let Some(i) = self.find(hash, key_bytes(&key)) {
            return Some(mem::replace(&mut self.slots[i].value, value));
        }
        self.push_new(hash, key, value);
        None
    }

    /// Inserts an entry whose key the caller knows is absent (it just
    /// looked): no second walk of the bucket chain.
    ///
    /// # Panics
    ///
    /// If the table would exceed 2^31 - 1 entries.
    pub fn insert_absent(&mut self, hash: u64, key: K, value: V) {
        debug_assert!(self.find(stored(hash), key_bytes(&key)).is_none());
        self.push_new(stored(hash), key, value);
    }

    /// Returns the value for `key`, first inserting the entry built by
    /// `make` if the key is absent: one lookup instead of `get_mut` followed
    /// by `insert` (e.g. `LPUSH` creating a list). The key `make` returns
    /// must have the same bytes as `key`.
    ///
    /// # Panics
    ///
    /// If the table would exceed 2^31 - 1 entries.
    pub fn get_or_insert_with(
        &mut self,
        hash: u64,
        key: &[u8],
        make: impl FnOnce() -> (K, V),
    ) -> &mut V {
        let hash = stored(hash);
        let i = match self.find(hash, key) {
            Some(i) => i,
            None => {
                let (k, v) = make();
                debug_assert!(key_bytes(&k) == key, "make() returned a different key");
                self.push_new(hash, k, v)
            }
        };
        &mut self.slots[i].value
    }

    /// Removes `key`, returning the stored key and value if it was present.
    /// Shrinks the table when it becomes sparse.
    pub fn remove(&mut self, hash: u64, key: &[u8]) -> Option<(K, V)> {
        let i = self.find(stored(hash), key)?;
        let removed = self.remove_at(i);
        self.shrink_if_sparse();
        Some(removed)
    }

    /// Makes room for at least `additional` more entries without further
    /// resizing (e.g. before loading a snapshot). A later removal may shrink
    /// the table again if it is still sparse.
    ///
    /// # Panics
    ///
    /// If the table would exceed 2^31 - 1 entries.
    pub fn reserve(&mut self, additional: usize) {
        let want = self.slots.len().saturating_add(additional);
        assert!(
            want <= MAX_ENTRIES,
            "Dict cannot hold more than 2^31-1 entries"
        );
        if want > self.buckets.len() {
            self.rebuild_buckets(want.next_power_of_two().max(MIN_BUCKETS));
        }
        self.slots.reserve_exact(additional);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{HashMap, HashSet};

    type D = Dict<Vec<u8>, u64>;

    fn k(i: usize) -> Vec<u8> {
        format!("key:{i}").into_bytes()
    }

    fn ins(d: &mut D, key: &[u8], v: u64) -> Option<u64> {
        d.insert(hash_key(key), key.to_vec(), v)
    }

    fn get(d: &D, key: &[u8]) -> Option<u64> {
        d.get(hash_key(key), key).copied()
    }

    fn del(d: &mut D, key: &[u8]) -> Option<u64> {
        d.remove(hash_key(key), key).map(|(_, v)| v)
    }

    /// Checks every structural invariant: each arena entry is reachable from
    /// exactly its own bucket, chains are acyclic, sizes follow the policy.
    fn check(d: &D) {
        let len = d.slots.len();
        if len == 0 {
            return;
        }
        let n = d.buckets.len();
        assert!(n.is_power_of_two() && n >= MIN_BUCKETS);
        assert!(len <= n, "load factor above 1: {len} > {n}");
        let mut seen = vec![false; len];
        for (b, head) in d.buckets.iter().enumerate() {
            let mut cur = *head;
            while let Some(l) = cur {
                let i = index_of(l);
                assert!(i < len, "dangling link");
                assert!(!seen[i], "entry linked twice / cycle");
                seen[i] = true;
                assert_eq!(d.slots[i].hash() as usize & (n - 1), b, "wrong bucket");
                cur = d.slots[i].next;
            }
        }
        assert!(seen.iter().all(|&s| s), "unreachable entry");
        for s in &d.slots {
            assert_eq!(s.hash(), stored(hash_key(&s.key)));
        }
    }

    fn scan_all(d: &D, count: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut cursor = 0;
        loop {
            cursor = d.scan(cursor, count, |k, _| out.push(k.clone()));
            if cursor == 0 {
                return out;
            }
        }
    }

    #[test]
    fn prefetch_reaches_only_entries_stored_with_the_keys_hash() {
        let mut d = D::new();
        let prefetch = |d: &D, key: &[u8], depth| {
            let mut reached = Vec::new();
            d.prefetch(hash_key(key), depth, |k| reached.push(k.clone()));
            reached
        };
        assert!(
            prefetch(&d, b"x", 2).is_empty(),
            "an empty table has nothing to reach"
        );
        for i in 0..1000 {
            ins(&mut d, &k(i), i as u64);
        }
        for i in 0..2000 {
            let key = k(i);
            for depth in 0..2 {
                assert!(
                    prefetch(&d, &key, depth).is_empty(),
                    "depth {depth} stops in the table"
                );
            }
            let got = prefetch(&d, &key, 2);
            for other in &got {
                assert_eq!(stored(hash_key(other)), stored(hash_key(&key)));
            }
            if i < 1000 {
                assert_eq!(got.len(), 1, "a present key's entry is reached");
            }
        }
        assert_eq!(d.len(), 1000);
        check(&d);
    }

    #[test]
    fn dict_new_does_not_allocate() {
        let d = D::new();
        assert_eq!(d.len(), 0);
        assert!(d.is_empty());
        assert_eq!(d.bucket_count(), 0);
        assert_eq!(d.overhead_bytes(), 0);
        assert_eq!(get(&d, b"x"), None);
        assert_eq!(d.scan(0, 10, |_, _| panic!("empty")), 0);
        assert!(d.random_entry(&mut fastrand::Rng::with_seed(1)).is_none());
        let d2: D = Dict::default();
        assert_eq!(d2.bucket_count(), 0);
    }

    #[test]
    fn dict_insert_get_replace_remove() {
        let mut d = D::new();
        assert_eq!(ins(&mut d, b"a", 1), None);
        assert_eq!(ins(&mut d, b"b", 2), None);
        assert_eq!(ins(&mut d, b"", 3), None);
        assert_eq!(d.len(), 3);
        assert_eq!(get(&d, b"a"), Some(1));
        assert_eq!(get(&d, b"b"), Some(2));
        assert_eq!(get(&d, b""), Some(3));
        assert_eq!(get(&d, b"c"), None);
        assert!(d.contains_key(hash_key(b"a"), b"a"));
        assert!(!d.contains_key(hash_key(b"c"), b"c"));

        assert_eq!(ins(&mut d, b"a", 10), Some(1));
        assert_eq!(d.len(), 3);
        assert_eq!(get(&d, b"a"), Some(10));

        *d.get_mut(hash_key(b"b"), b"b").unwrap() += 5;
        assert_eq!(get(&d, b"b"), Some(7));
        assert!(d.get_mut(hash_key(b"zz"), b"zz").is_none());

        let (kk, vv) = d.get_key_value(hash_key(b"a"), b"a").unwrap();
        assert_eq!((kk.as_slice(), *vv), (&b"a"[..], 10));

        assert_eq!(d.remove(hash_key(b"a"), b"a"), Some((b"a".to_vec(), 10)));
        assert_eq!(del(&mut d, b"a"), None);
        assert_eq!(get(&d, b"a"), None);
        assert_eq!(d.len(), 2);
        check(&d);
        assert_eq!(del(&mut d, b"b"), Some(7));
        assert_eq!(del(&mut d, b""), Some(3));
        assert!(d.is_empty());
        assert_eq!(d.bucket_count(), 0, "empty table frees its buckets");
        assert_eq!(d.overhead_bytes(), 0);
        // Reusable after becoming empty.
        assert_eq!(ins(&mut d, b"a", 1), None);
        assert_eq!(get(&d, b"a"), Some(1));
    }

    #[test]
    fn dict_insert_keeps_stored_key() {
        // Keys that compare equal as bytes but are distinguishable objects.
        #[derive(Debug)]
        struct Tagged(Vec<u8>, u32);
        impl Borrow<[u8]> for Tagged {
            fn borrow(&self) -> &[u8] {
                &self.0
            }
        }
        let mut d: Dict<Tagged, u8> = Dict::new();
        let h = hash_key(b"k");
        assert_eq!(d.insert(h, Tagged(b"k".to_vec(), 1), 1), None);
        assert_eq!(d.insert(h, Tagged(b"k".to_vec(), 2), 2), Some(1));
        let (key, v) = d.get_key_value(h, b"k").unwrap();
        assert_eq!((key.1, *v), (1, 2));
    }

    #[test]
    fn dict_get_or_insert_with() {
        let mut d = D::new();
        let h = hash_key(b"list");
        *d.get_or_insert_with(h, b"list", || (b"list".to_vec(), 0)) += 1;
        *d.get_or_insert_with(h, b"list", || unreachable!()) += 1;
        assert_eq!(get(&d, b"list"), Some(2));
        assert_eq!(d.len(), 1);
        check(&d);
    }

    #[test]
    fn dict_colliding_hashes_are_distinguished() {
        // All keys share one hash: everything is in one chain.
        let mut d = D::new();
        for i in 0..200 {
            assert_eq!(d.insert(42, k(i), i as u64), None);
        }
        for i in 0..200 {
            assert_eq!(d.get(42, &k(i)), Some(&(i as u64)));
        }
        for i in (0..200).step_by(2) {
            assert_eq!(d.remove(42, &k(i)), Some((k(i), i as u64)));
        }
        for i in 0..200 {
            assert_eq!(d.get(42, &k(i)).is_some(), i % 2 == 1);
        }
        // Same low 31 bits, different high bits: still the same entry.
        assert_eq!(d.get(42 | (7 << 40) | (1 << 31), &k(1)), Some(&1));
    }

    #[test]
    fn dict_long_chain_drops_without_recursion() {
        // A pathological single chain; dropping, clearing and draining must
        // not recurse (entries live in a flat arena, so none of them do).
        let mut d = D::new();
        for i in 0..10_000 {
            d.insert(7, k(i), 0);
        }
        assert_eq!(d.len(), 10_000);
        let d2 = d.clone();
        assert_eq!(d.drain().count(), 10_000);
        drop(d2);
    }

    #[test]
    fn dict_grows_and_shrinks() {
        let mut d = D::new();
        ins(&mut d, &k(0), 0);
        assert_eq!(d.bucket_count(), MIN_BUCKETS);
        for i in 1..1000 {
            ins(&mut d, &k(i), i as u64);
            let n = d.bucket_count();
            assert!(d.len() <= n && n.is_power_of_two());
        }
        assert_eq!(d.bucket_count(), 1024);
        check(&d);
        for i in 0..1000 {
            del(&mut d, &k(i));
            let (len, n) = (d.len(), d.bucket_count());
            if len > 0 {
                assert!(len <= n);
                assert!(n == MIN_BUCKETS || len >= n / 8, "sparse: {len} in {n}");
            }
            if i % 97 == 0 {
                check(&d);
            }
            for j in (i + 1..1000).step_by(61) {
                assert_eq!(get(&d, &k(j)), Some(j as u64));
            }
        }
        assert_eq!(d.bucket_count(), 0);
    }

    #[test]
    fn dict_reserve() {
        let mut d = D::new();
        d.reserve(1000);
        assert_eq!(d.bucket_count(), 1024);
        let before = d.overhead_bytes();
        for i in 0..1000 {
            ins(&mut d, &k(i), 0);
        }
        assert_eq!(d.bucket_count(), 1024);
        assert_eq!(d.overhead_bytes(), before, "no reallocation after reserve");
        check(&d);
    }

    #[test]
    fn dict_iter_and_iter_mut() {
        let mut d = D::new();
        for i in 0..500 {
            ins(&mut d, &k(i), i as u64);
        }
        assert_eq!(d.iter().len(), 500);
        let seen: HashMap<Vec<u8>, u64> = d.iter().map(|(k, v)| (k.clone(), *v)).collect();
        assert_eq!(seen.len(), 500);
        for i in 0..500 {
            assert_eq!(seen[&k(i)], i as u64);
        }
        for (_, v) in d.iter_mut() {
            *v *= 2;
        }
        for i in 0..500 {
            assert_eq!(get(&d, &k(i)), Some(2 * i as u64));
        }
        let dbg = format!("{:?}", {
            let mut s = D::new();
            ins(&mut s, b"a", 1);
            s
        });
        assert_eq!(dbg, "{[97]: 1}");
    }

    #[test]
    fn dict_clear_and_drain() {
        let mut d = D::new();
        for i in 0..300 {
            ins(&mut d, &k(i), i as u64);
        }
        d.clear();
        assert!(d.is_empty());
        assert_eq!(d.overhead_bytes(), 0);
        assert_eq!(get(&d, &k(1)), None);

        for i in 0..300 {
            ins(&mut d, &k(i), i as u64);
        }
        let mut drained: Vec<(Vec<u8>, u64)> = d.drain().collect();
        assert!(d.is_empty());
        assert_eq!(d.bucket_count(), 0);
        drained.sort_by_key(|e| e.1);
        assert_eq!(drained.len(), 300);
        for (i, (key, v)) in drained.into_iter().enumerate() {
            assert_eq!((key, v), (k(i), i as u64));
        }
        // Dropping a partially consumed drain drops the rest.
        for i in 0..10 {
            ins(&mut d, &k(i), i as u64);
        }
        assert_eq!(d.drain().take(3).count(), 3);
        assert!(d.is_empty());
        ins(&mut d, b"again", 1);
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn dict_retain() {
        let mut d = D::new();
        for i in 0..2000 {
            ins(&mut d, &k(i), i as u64);
        }
        let mut calls = 0;
        d.retain(|_, v| {
            calls += 1;
            *v += 1;
            *v % 3 == 0
        });
        assert_eq!(calls, 2000, "every entry visited exactly once");
        check(&d);
        for i in 0..2000 {
            let expect = ((i + 1) % 3 == 0).then_some(i as u64 + 1);
            assert_eq!(get(&d, &k(i)), expect, "key {i}");
        }
        assert_eq!(d.len(), (1..=2000).filter(|v| v % 3 == 0).count());

        d.retain(|k, _| k.ends_with(b"1"));
        check(&d);
        let n = d.bucket_count();
        assert!(
            n == MIN_BUCKETS || d.len() >= n / 8,
            "sparse: {} in {n}",
            d.len()
        );
        d.retain(|_, _| false);
        assert!(d.is_empty());
        assert_eq!(d.bucket_count(), 0);
    }

    #[test]
    fn dict_retain_survives_panic() {
        let mut d = D::new();
        for i in 0..100 {
            ins(&mut d, &k(i), i as u64);
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut n = 0;
            d.retain(|_, v| {
                n += 1;
                assert!(n < 50, "boom");
                *v % 2 == 0
            });
        }));
        assert!(r.is_err());
        check(&d);
        for (key, v) in d.iter() {
            assert_eq!(get(&d, key), Some(*v));
        }
    }

    #[test]
    fn dict_scan_without_changes_returns_each_key_once() {
        for n in [1usize, 3, 4, 5, 100, 1000, 4097] {
            let mut d = D::new();
            for i in 0..n {
                ins(&mut d, &k(i), 0);
            }
            for count in [0usize, 1, 7, 100, 10_000] {
                let mut got = scan_all(&d, count);
                got.sort();
                let mut want: Vec<_> = (0..n).map(k).collect();
                want.sort();
                assert_eq!(got, want, "n={n} count={count}");
            }
        }
    }

    #[test]
    fn dict_scan_respects_count_and_bounds_work() {
        let mut d = D::new();
        for i in 0..1000 {
            ins(&mut d, &k(i), 0);
        }
        let mut emitted = 0;
        let c = d.scan(0, 10, |_, _| emitted += 1);
        assert_ne!(c, 0);
        // At least `count`, overshooting only by the last bucket's chain.
        assert!((10..40).contains(&emitted), "emitted {emitted}");

        // A sparse table (shrink is triggered only by removals, so build one
        // with reserve) must not walk all buckets in one call.
        let mut s = D::new();
        s.reserve(1 << 16);
        ins(&mut s, b"only", 0);
        let mut calls = 0;
        let mut found = 0;
        let mut cursor = 0;
        loop {
            calls += 1;
            cursor = s.scan(cursor, 1, |_, _| found += 1);
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(found, 1);
        assert!(
            calls >= (1 << 16) / 10,
            "each call visits at most 10 buckets"
        );
    }

    #[test]
    fn dict_scan_survives_growth_and_shrink_between_calls() {
        // Start small and grow first, or start big and shrink first: a
        // plain (non-reversed) cursor increment misses keys on shrink.
        for start_big in [false, true] {
            let stable: Vec<Vec<u8>> = (0..200)
                .map(|i| format!("stable:{i}").into_bytes())
                .collect();
            let tmp: Vec<Vec<u8>> = (0..12_000)
                .map(|i| format!("tmp:{i}").into_bytes())
                .collect();
            let mut d = D::new();
            for s in &stable {
                ins(&mut d, s, 0);
            }
            if start_big {
                for t in &tmp {
                    ins(&mut d, t, 0);
                }
            }
            let mut seen = HashSet::new();
            let mut cursor = 0;
            let mut big = start_big;
            loop {
                cursor = d.scan(cursor, 5, |k, _| {
                    seen.insert(k.clone());
                });
                if cursor == 0 {
                    break;
                }
                // Alternate between 256 and 16384 buckets.
                if big {
                    for t in &tmp {
                        del(&mut d, t);
                    }
                    assert!(d.bucket_count() <= 256);
                } else {
                    for t in &tmp {
                        ins(&mut d, t, 0);
                    }
                    assert!(d.bucket_count() >= 16_384);
                }
                big = !big;
            }
            for s in &stable {
                assert!(seen.contains(s), "missed {:?}", String::from_utf8_lossy(s));
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Nothing,
        /// Insert this many fresh volatile keys.
        Grow(usize),
        /// Remove volatile keys whose index is a multiple of this.
        RemoveEvery(usize),
        /// Remove all volatile keys.
        RemoveAll,
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        prop_oneof![
            Just(Op::Nothing),
            (1usize..3000).prop_map(Op::Grow),
            (1usize..4).prop_map(Op::RemoveEvery),
            Just(Op::RemoveAll),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn dict_scan_guarantee_under_resizes(
            stable_n in 0usize..300,
            volatile_n in 0usize..3000,
            steps in prop::collection::vec((0usize..40, op_strategy()), 0..60),
        ) {
            let mut d = D::new();
            let stable: Vec<Vec<u8>> =
                (0..stable_n).map(|i| format!("s{i}").into_bytes()).collect();
            for s in &stable {
                ins(&mut d, s, 1);
            }
            let mut volatile: Vec<Vec<u8>> = Vec::new();
            let mut next_volatile = 0usize;
            let mut add_volatile = |d: &mut D, volatile: &mut Vec<Vec<u8>>, n: usize| {
                for _ in 0..n {
                    let key = format!("v{next_volatile}").into_bytes();
                    next_volatile += 1;
                    ins(d, &key, 0);
                    volatile.push(key);
                }
            };
            add_volatile(&mut d, &mut volatile, volatile_n);

            let mut seen = HashSet::new();
            let mut cursor = 0u64;
            let mut step = 0usize;
            loop {
                let count = steps.get(step).map_or(10, |s| s.0);
                cursor = d.scan(cursor, count, |key, _| {
                    seen.insert(key.clone());
                });
                if cursor == 0 {
                    break;
                }
                match steps.get(step).map_or(&Op::Nothing, |s| &s.1) {
                    Op::Nothing => {}
                    Op::Grow(n) => add_volatile(&mut d, &mut volatile, *n),
                    Op::RemoveEvery(m) => {
                        let mut j = 0;
                        volatile.retain(|key| {
                            j += 1;
                            if j % m == 0 {
                                del(&mut d, key);
                                false
                            } else {
                                true
                            }
                        });
                    }
                    Op::RemoveAll => {
                        for key in volatile.drain(..) {
                            del(&mut d, &key);
                        }
                    }
                }
                step += 1;
                prop_assert!(step < 1_000_000, "scan does not terminate");
            }
            check(&d);
            for s in &stable {
                prop_assert!(seen.contains(s), "missed {:?}", String::from_utf8_lossy(s));
            }
        }

        #[test]
        fn dict_matches_hashmap_model(
            ops in prop::collection::vec((any::<bool>(), 0u16..400, any::<u64>()), 0..2000),
        ) {
            let mut d = D::new();
            let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
            for (is_insert, key, v) in ops {
                let key = k(key as usize);
                if is_insert {
                    prop_assert_eq!(ins(&mut d, &key, v), model.insert(key.clone(), v));
                } else {
                    prop_assert_eq!(del(&mut d, &key), model.remove(&key));
                }
                prop_assert_eq!(d.len(), model.len());
            }
            check(&d);
            for (key, v) in &model {
                prop_assert_eq!(get(&d, key), Some(*v));
            }
            let n = d.bucket_count();
            prop_assert!(d.is_empty() || n == MIN_BUCKETS || d.len() >= n / 8 || n <= 8);
        }
    }

    #[test]
    fn dict_random_entry_is_present_and_covers_small_tables() {
        let mut rng = fastrand::Rng::with_seed(0x5eed);
        let mut d = D::new();
        for i in 0..50 {
            ins(&mut d, &k(i), i as u64);
        }
        let mut hits = HashMap::new();
        for _ in 0..5000 {
            let (key, v) = d.random_entry(&mut rng).unwrap();
            assert_eq!(get(&d, key), Some(*v));
            *hits.entry(key.clone()).or_insert(0u32) += 1;
        }
        assert_eq!(hits.len(), 50, "every key drawn at least once");
        // Uniform: expected 100 each; allow a generous band.
        assert!(hits.values().all(|&c| (40..200).contains(&c)), "{hits:?}");
    }

    #[test]
    fn dict_random_entry_after_mass_delete() {
        let mut rng = fastrand::Rng::with_seed(3);
        let mut d = D::new();
        for i in 0..100_000 {
            ins(&mut d, &k(i), i as u64);
        }
        for i in 0..100_000 {
            if i % 1000 != 0 {
                del(&mut d, &k(i));
            }
        }
        assert_eq!(d.len(), 100);
        assert!(d.bucket_count() <= 1024, "buckets {}", d.bucket_count());
        let mut hits = HashSet::new();
        for _ in 0..5000 {
            let (key, _) = d.random_entry(&mut rng).unwrap();
            assert!(d.contains_key(hash_key(key), key));
            hits.insert(key.clone());
        }
        assert_eq!(hits.len(), 100);
    }

    #[test]
    fn dict_hash_key_is_stable_within_process() {
        assert_eq!(hash_key(b"abc"), hash_key(b"abc"));
        assert_ne!(hash_key(b"abc"), hash_key(b"abd"));
        assert_ne!(hash_key(b""), hash_key(b"\0"));
    }

    #[test]
    fn dict_next_cursor_visits_every_bucket_once() {
        for bits in 0..12 {
            let mask = (1u64 << bits) - 1;
            let mut seen = vec![false; 1 << bits];
            let mut c = 0u64;
            loop {
                assert!(!seen[(c & mask) as usize]);
                seen[(c & mask) as usize] = true;
                c = next_cursor(c, mask);
                if c == 0 {
                    break;
                }
            }
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn dict_million_inserts_then_removes_shrinks_back() {
        let mut d = D::new();
        const N: usize = 1_000_000;
        for i in 0..N {
            assert_eq!(ins(&mut d, &k(i), i as u64), None);
        }
        assert_eq!(d.len(), N);
        assert_eq!(d.bucket_count(), 1 << 20);
        let full = d.overhead_bytes();
        for i in (0..N).step_by(9973) {
            assert_eq!(get(&d, &k(i)), Some(i as u64));
        }
        for i in 0..N - 10 {
            assert_eq!(del(&mut d, &k(i)), Some(i as u64));
        }
        assert_eq!(d.len(), 10);
        assert!(d.bucket_count() <= 64, "buckets {}", d.bucket_count());
        assert!(
            d.overhead_bytes() < 2048,
            "{} of {full}",
            d.overhead_bytes()
        );
        check(&d);
        for i in N - 10..N {
            assert_eq!(get(&d, &k(i)), Some(i as u64));
        }
        for i in N - 10..N {
            del(&mut d, &k(i));
        }
        assert_eq!(d.bucket_count(), 0);
        assert_eq!(d.overhead_bytes(), 0);
    }
}
