//! The keyspace's key table: one word per key.
//!
//! A database's keys in a shard live in a [`KeyTable`]: an open-addressing
//! table whose slots are the [`Entry`] handles themselves, with a 16-bit tag
//! of the key's hash packed into each handle's unused top bits (see
//! [`Entry::table_tag`]). Per key that is 8 bytes divided by the load
//! factor (70-87.5% between resizes), where the chained [`crate::dict::Dict`]
//! it replaced spent a 16-byte arena slot plus 4-8 bytes of buckets; and a
//! lookup reads the slot's cache line and then the entry, where the chain
//! read a bucket, an arena slot and then the entry.
//!
//! # Order
//!
//! Slots are kept sorted by tag, and a tag `t` has its home slot at
//! `t * homes / 2^16`, so that homes rise with tags. Every entry sits at or
//! after its home with no empty slot in between (linear probing with
//! ordered insertion, which is Robin Hood hashing with ties broken by tag).
//! That gives:
//!
//! * lookups that stop at the first slot with a greater tag, so a missing
//!   key costs about what a present one does even at high load;
//! * resizes that place the old slots into the new array in one sequential
//!   pass, from the tags alone, without reading an entry or hashing a key;
//! * a position-free cursor: "every tag below `t` is done" means the same
//!   thing before and after any insertion, removal or resize. `SCAN` uses
//!   it to report each key present for the whole scan exactly once, resizes
//!   included (Redis's reverse-binary cursor may repeat keys after a
//!   shrink), and a running snapshot uses it to tell the keys it has
//!   written out from those it has not ([`crate::snapshot`]).
//!
//! Homes are exact for tables of up to 2^16 slots per shard and database
//! (with 1024 shards, 60M keys in one database); beyond that keys sharing a
//! tag share a home and probe a little further.
//!
//! # Access generations
//!
//! Each slot also keeps two bits of when its key was last accessed: the
//! table's generation at the time, which moves on every
//! [`PASSES_PER_GENERATION`] times the eviction hand finishes a walk of the
//! table ([`KeyTable::hand_step`]). So a key of an older generation was
//! accessed before one of a newer generation, which is all LRU eviction
//! needs to pass over most sampled keys without reading their entries (a
//! miss to memory each; see `evict.rs`). Ages beyond [`OLDEST_AGE`] are
//! kept at it by the hand as it passes, so the two bits do not wrap.
//!
//! # Tags
//!
//! A tag is bits 16-31 of the key's hash (the shard takes the top bits),
//! with 0 mapped to 1: the handle's tag 0 means "unknown", which a lookup
//! treats as a possible match, and the table recomputes from the key when
//! it needs the order. Entries the table stores always have their tag; an
//! entry swapped in through a `&mut Entry` by code that bypasses
//! [`KeyTable::replace_at`] has none, and is still found.

use crate::dict::{hash_key, prefetch_read};
use crate::entry::Entry;

/// Tag values: 16 bits, 0 reserved for "unknown".
const TAG_BITS: u32 = 16;
/// One past the largest tag; a cursor at this value is done.
const TAG_END: u64 = 1 << TAG_BITS;

/// Fewest home slots of a non-empty table.
const MIN_HOMES: usize = 4;

/// Most slots past the last home that a run may spill into before the
/// table grows.
const MAX_TAIL: usize = 32;

/// Scan gives up after visiting this many slots per requested entry, so a
/// call does bounded work even in a sparse stretch.
const SCAN_SLOTS_PER_ENTRY: usize = 10;

/// Walks of the eviction hand per access generation. Under a steady load
/// a key lives `maxmemory-samples` walks on average (each eviction moves
/// the hand that many keys on), 5 by default. Of 2, 3, 4 or 6 walks per
/// generation, 2 left the fewest keys in a round's oldest generation
/// (docs/performance-log.md, issue 6, session 14).
const PASSES_PER_GENERATION: u32 = 2;

/// The oldest age, in generations, that the generation bits tell apart.
const OLDEST_AGE: u8 = 2;

/// The two generation bits.
const GENERATION_MASK: u8 = 3;

/// The tag of a key hash: bits 16-31, never 0.
#[inline]
pub(crate) fn tag_of(hash: u64) -> u32 {
    u32::from((hash >> TAG_BITS) as u16).max(1)
}

/// The tag an entry belongs under: the stored one, or its key's.
#[inline]
pub(crate) fn real_tag(e: &Entry) -> u32 {
    match e.table_tag() {
        0 => tag_of(hash_key(e.key())),
        t => t,
    }
}

/// Slots past the last home, for a table of `homes` homes.
fn tail_for(homes: usize) -> usize {
    (homes / 8).clamp(2, MAX_TAIL)
}

/// Generations from `e`'s to `generation`, modulo the four the bits hold.
#[inline]
fn generations_since(generation: u8, e: &Entry) -> u8 {
    generation.wrapping_sub(e.table_gen()) & GENERATION_MASK
}

/// Most slots one step of the eviction hand covers: a span's slots are
/// the bits of a word.
const MAX_SPAN: usize = u64::BITS as usize;

/// A step of the eviction hand (see [`KeyTable::hand_step`]): a span of
/// slots, and which of them held keys of each age when the hand passed.
/// Like any position, it is only exact until the table next changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct HandSpan {
    start: usize,
    /// Bit `i` of `by_age[a]`: slot `start + i` held a key of age `a`.
    by_age: [u64; OLDEST_AGE as usize + 1],
}

impl HandSpan {
    /// Every slot of the span that held a key.
    fn occupied(&self) -> u64 {
        self.by_age.iter().fold(0, |all, m| all | m)
    }

    /// Number of keys the span held.
    pub(crate) fn entries(&self) -> usize {
        self.occupied().count_ones() as usize
    }

    /// The positions a sampling round reads, and the age they must still
    /// have then (0: any). With `oldest_only` (under LRU: how many at
    /// most), when the span held keys of more than one age, the first that
    /// many of the oldest: every other key was accessed after all of them.
    /// When its keys were all of one age (no key was read since the hand
    /// went by, or it has not gone round yet), or without `oldest_only`,
    /// all of them.
    pub(crate) fn reads(&self, oldest_only: Option<usize>) -> (impl Iterator<Item = usize>, u8) {
        let present = self.by_age.map(|m| m != 0);
        let youngest = present.iter().position(|&p| p).unwrap_or(0);
        let oldest = present.iter().rposition(|&p| p).unwrap_or(0);
        let (mut mask, most, age) = match oldest_only {
            Some(most) if oldest > youngest => (self.by_age[oldest], most, oldest as u8),
            _ => (self.occupied(), MAX_SPAN, 0),
        };
        let start = self.start;
        let positions = std::iter::from_fn(move || {
            let bit = (mask != 0).then(|| mask.trailing_zeros() as usize)?;
            mask &= mask - 1;
            Some(start + bit)
        });
        (positions.take(most), age)
    }
}

/// A table of keyspace entries in tag order (see the module docs).
///
/// Positions (indices into the slot array) name slots; any insertion or
/// removal may move other entries to neighbouring slots, and a resize
/// moves all of them, so a position is only good until the table next
/// changes.
#[derive(Default)]
pub(crate) struct KeyTable {
    /// `homes` home slots and a short tail (longer when a resize needed
    /// it); no allocation when empty.
    slots: Box<[Option<Entry>]>,
    homes: usize,
    len: usize,
    /// Walks of the eviction hand finished (see "Access generations").
    pub(crate) passes: u32,
}

impl KeyTable {
    /// Number of entries.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// True when the table holds no entry.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The home slot of `tag`.
    #[inline]
    fn home(&self, tag: u32) -> usize {
        (tag as usize * self.homes) >> TAG_BITS
    }

    /// The smallest tag whose home is at or after slot `i` (`TAG_END` and
    /// above: none).
    fn first_tag_homed_from(&self, i: usize) -> u64 {
        ((i as u64) << TAG_BITS).div_ceil(self.homes as u64)
    }

    /// The tag of the entry at position `i` (0 for an empty slot); the
    /// snapshot compares it with its cursor.
    #[inline]
    pub(crate) fn tag_at(&self, i: usize) -> u32 {
        self.slots[i].as_ref().map_or(0, real_tag)
    }

    /// Calls `f` on each entry a lookup of `hash` looks at, until it
    /// returns true, and returns that entry's position: from the tag's home
    /// on, the entries stored with its tag or with none, up to the first
    /// greater tag or empty slot. Every entry whose key hashes to `hash` is
    /// among them.
    #[inline]
    pub(crate) fn probe(&self, hash: u64, f: impl FnMut(&Entry) -> bool) -> Option<usize> {
        self.probe_tag(tag_of(hash), f)
    }

    /// [`KeyTable::probe`] for the entries of tag `tag`.
    #[inline]
    fn probe_tag(&self, tag: u32, mut f: impl FnMut(&Entry) -> bool) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mut i = self.home(tag);
        while let Some(Some(e)) = self.slots.get(i) {
            let t = e.table_tag();
            if t > tag {
                break;
            }
            if (t == tag || t == 0) && f(e) {
                return Some(i);
            }
            i += 1;
        }
        None
    }

    /// The position of `key` (hashed to `hash`), if present.
    #[inline]
    pub(crate) fn position(&self, hash: u64, key: &[u8]) -> Option<usize> {
        self.probe(hash, |e| e.key() == key)
    }

    /// The position of the entry whose block is at `addr` (see
    /// [`Entry::addr`]) and whose tag is `tag`, if it is in the table:
    /// found from the handles alone, without reading an entry.
    #[inline]
    pub(crate) fn position_of_addr(&self, tag: u32, addr: usize) -> Option<usize> {
        self.probe_tag(tag, |e| e.addr() == addr)
    }

    /// The entry for `key`, if present.
    pub(crate) fn get(&self, hash: u64, key: &[u8]) -> Option<&Entry> {
        self.position(hash, key).and_then(|i| self.at(i))
    }

    /// Whether `key` is present.
    pub(crate) fn contains(&self, hash: u64, key: &[u8]) -> bool {
        self.position(hash, key).is_some()
    }

    /// The entry at position `i`, if the slot holds one.
    #[inline]
    pub(crate) fn at(&self, i: usize) -> Option<&Entry> {
        self.slots.get(i)?.as_ref()
    }

    /// Mutable access to the entry at position `i`. Its key must not change
    /// (it would sit out of order and not be found), and a whole new entry
    /// goes in with [`KeyTable::replace_at`], which keeps the slot's tag
    /// and mark.
    #[inline]
    pub(crate) fn at_mut(&mut self, i: usize) -> Option<&mut Entry> {
        self.slots.get_mut(i)?.as_mut()
    }

    /// Puts `entry` (same key) at position `i` in place of the entry there,
    /// which it returns.
    pub(crate) fn replace_at(&mut self, i: usize, entry: Entry) -> Option<Entry> {
        let generation = self.generation();
        let slot = self.at_mut(i)?;
        let old = slot.replace_keeping_table_bits(entry);
        slot.set_table_gen(generation);
        Some(old)
    }

    /// The generation an access now is stamped with (see "Access
    /// generations"); whoever records an access to an entry of this table
    /// through [`KeyTable::at_mut`] stores it with
    /// [`Entry::set_table_gen`].
    #[inline]
    pub(crate) fn generation(&self) -> u8 {
        (self.passes / PASSES_PER_GENERATION) as u8 & GENERATION_MASK
    }

    /// The entry at position `i`, if any, with its age: how many
    /// generations ago it was last accessed, up to [`OLDEST_AGE`].
    #[inline]
    pub(crate) fn aged_at(&self, i: usize) -> Option<(&Entry, u8)> {
        let e = self.at(i)?;
        Some((e, generations_since(self.generation(), e).min(OLDEST_AGE)))
    }

    /// Whether the entry at position `i` carries the snapshot mark (false
    /// for an empty slot).
    #[inline]
    pub(crate) fn is_marked(&self, i: usize) -> bool {
        self.at(i).is_some_and(Entry::is_marked)
    }

    /// Sets or clears the mark of the entry at position `i`. The mark moves
    /// with its entry and goes when it is removed (the keyspace marks the
    /// keys a running snapshot must pass over: the bit is in the handle a
    /// lookup has just read).
    #[inline]
    pub(crate) fn set_marked(&mut self, i: usize, on: bool) {
        if let Some(e) = self.at_mut(i) {
            e.set_marked(on);
        }
    }

    /// Starts loading the slot at position `i`, for a caller reading it a
    /// little later.
    pub(crate) fn prefetch_at(&self, i: usize) {
        if let Some(slot) = self.slots.get(i) {
            prefetch_read(slot);
        }
    }

    /// Starts loading one level of what a lookup of `hash` reads: `depth`
    /// 0 the home slot's cache line, 1 what `deep` prefetches for the first
    /// entry with the hash's tag. A batch of lookups asks for depth 0 for
    /// every key, then depth 1, so that their misses overlap. A hint only.
    pub(crate) fn prefetch(&self, hash: u64, depth: u8, mut deep: impl FnMut(&Entry)) {
        if self.len == 0 {
            return;
        }
        if depth == 0 {
            prefetch_read(&self.slots[self.home(tag_of(hash))]);
        } else {
            self.probe(hash, |e| {
                deep(e);
                true
            });
        }
    }

    /// Calls `f` for every entry whose tag is `hash`'s: the candidates for
    /// a key known only by its hash (the TTL index keeps hashes).
    pub(crate) fn with_hash(&self, hash: u64, mut f: impl FnMut(&Entry)) {
        self.probe(hash, |e| {
            f(e);
            false
        });
    }

    /// Every entry, in tag order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.slots.iter().flatten()
    }

    /// Adds an entry whose key (hashed to `hash`) the caller knows is
    /// absent; returns its position.
    pub(crate) fn insert_absent(&mut self, hash: u64, mut entry: Entry) -> usize {
        debug_assert!(!self.contains(hash, entry.key()));
        let tag = tag_of(hash);
        entry.set_table_tag(tag);
        entry.set_marked(false);
        entry.set_table_gen(self.generation());
        if (self.len + 1) * 8 > self.homes * 7 {
            self.grow();
        }
        loop {
            let mut at = self.home(tag);
            while at < self.slots.len() && self.slots[at].is_some() && self.tag_at(at) <= tag {
                at += 1;
            }
            let free = (at..self.slots.len()).find(|&j| self.slots[j].is_none());
            let Some(free) = free else {
                // The run reaches past the tail (the load is fine: many
                // keys share the last homes' tags).
                self.extend_tail();
                continue;
            };
            // The empty slot moves to `at`, the run after it one slot on
            // (swaps: runs are a few slots, for which `rotate_right` costs
            // more in its set-up than in moving).
            for j in (at..free).rev() {
                self.slots.swap(j, j + 1);
            }
            self.slots[at] = Some(entry);
            self.len += 1;
            return at;
        }
    }

    /// Removes `key` (hashed to `hash`), returning its entry.
    #[cfg(test)]
    pub(crate) fn remove(&mut self, hash: u64, key: &[u8]) -> Option<Entry> {
        let i = self.position(hash, key)?;
        Some(self.remove_at(i))
    }

    /// Removes the entry at (occupied) position `i`: the entries after it
    /// that sit past their home move one slot back.
    pub(crate) fn remove_at(&mut self, i: usize) -> Entry {
        let mut gone = self.slots[i].take().expect("remove_at an occupied slot");
        gone.clear_table_bits();
        self.len -= 1;
        let mut end = i + 1;
        while end < self.slots.len()
            && self.slots[end].is_some()
            && self.home(self.tag_at(end)) < end
        {
            end += 1;
        }
        for j in i..end - 1 {
            self.slots.swap(j, j + 1);
        }
        if self.len == 0 {
            *self = KeyTable::default();
        } else if self.len * 4 < self.homes && self.homes > MIN_HOMES {
            self.resize(self.len * 8 / 5);
        }
        gone
    }

    /// Adds empty slots after the last, for a run that reaches the end.
    fn extend_tail(&mut self) {
        let mut slots = std::mem::take(&mut self.slots).into_vec();
        slots.extend((0..tail_for(self.homes)).map(|_| None));
        self.slots = slots.into_boxed_slice();
    }

    /// Grows by a quarter: the load between resizes stays within 70% and
    /// 87.5%, which is what keeps the table at about 10 bytes per key.
    fn grow(&mut self) {
        self.resize(self.homes + self.homes / 4 + 1);
    }

    /// Moves every entry into a new array of `homes` homes (at least one
    /// per entry), in one pass in order. The array's tail grows past its
    /// usual length when the last run needs it.
    fn resize(&mut self, homes: usize) {
        let homes = homes.max(MIN_HOMES).max(self.len);
        let old = std::mem::take(&mut self.slots).into_vec();
        let mut slots: Vec<Option<Entry>> = (0..homes + tail_for(homes)).map(|_| None).collect();
        let mut next = 0;
        for mut e in old.into_iter().flatten() {
            let tag = match e.table_tag() {
                0 => {
                    let tag = real_tag(&e);
                    e.set_table_tag(tag);
                    tag
                }
                tag => tag,
            };
            let at = ((tag as usize * homes) >> TAG_BITS).max(next);
            // In order, so a run past the end adds one slot at a time.
            match slots.get_mut(at) {
                Some(slot) => *slot = Some(e),
                None => slots.push(Some(e)),
            }
            next = at + 1;
        }
        self.homes = homes;
        self.slots = slots.into_boxed_slice();
    }

    /// One step of a cursor walk: calls `f` with the position of every
    /// entry whose tag is at or above `cursor` and below the returned
    /// cursor, in order, and returns the next cursor (0 when done). A step
    /// reports at least `count` entries when that many remain, unless it
    /// visited `10 * count` slots, and ends where a tag does.
    ///
    /// What is reported depends on tags only, so across changes to the
    /// table between steps, an entry present from the first step (cursor
    /// 0) to the last is reported exactly once, and one added or removed
    /// meanwhile at most once.
    pub(crate) fn walk(&self, cursor: u64, count: usize, mut f: impl FnMut(usize)) -> u64 {
        if self.len == 0 || cursor >= TAG_END {
            return 0;
        }
        let from = cursor as u32;
        let want = count.max(1);
        let budget = want.saturating_mul(SCAN_SLOTS_PER_ENTRY);
        let start = self.home(from);
        let (mut reported, mut visited, mut last) = (0, 0, None);
        for i in start..self.slots.len() {
            let enough = reported >= want || visited >= budget;
            match &self.slots[i] {
                // No entry with a tag homed before `i` sits after it.
                None if enough && i > start => {
                    let next = self.first_tag_homed_from(i);
                    return if next >= TAG_END { 0 } else { next };
                }
                None => {}
                Some(e) => {
                    let tag = real_tag(e);
                    if tag >= from {
                        if enough && last.is_some_and(|l| tag > l) {
                            return u64::from(tag);
                        }
                        f(i);
                        reported += 1;
                        last = Some(tag);
                    }
                }
            }
            visited += 1;
        }
        0
    }

    /// One step of the eviction hand from position `at`: the span of
    /// slots from there that holds the next `count` entries (at most
    /// [`MAX_SPAN`] slots) with their ages, and the position after it (0
    /// once the hand has gone round, which counts toward the next
    /// generation), keeping ages there from growing past [`OLDEST_AGE`].
    /// Slots too few for another step (under `2 * count`) join this one as
    /// far as the span allows: a short last step, of a few keys all read
    /// lately, would look like a span of one generation.
    ///
    /// Positions shift as keys come and go, so a key near the hand may be
    /// taken twice in a walk or passed over; eviction only needs the walk
    /// to reach every part of the table in turn. (A tag cursor, as
    /// [`KeyTable::walk`] keeps, would be exact, for about a tenth of an
    /// eviction's instructions.)
    pub(crate) fn hand_step(&mut self, at: usize, count: usize) -> (HandSpan, usize) {
        let generation = self.generation();
        let len = self.slots.len();
        let start = at.min(len);
        let stop = len.min(start + MAX_SPAN);
        let mut span = HandSpan {
            start,
            ..HandSpan::default()
        };
        let mut entries = 0;
        for i in start..stop {
            if let Some(e) = &mut self.slots[i] {
                let age = generations_since(generation, e);
                if age > OLDEST_AGE {
                    e.set_table_gen(generation.wrapping_sub(OLDEST_AGE));
                }
                span.by_age[usize::from(age.min(OLDEST_AGE))] |= 1 << (i - start);
                entries += 1;
                if entries >= count && len - (i + 1) >= 2 * count {
                    return (span, i + 1);
                }
            }
        }
        if stop < len {
            return (span, stop);
        }
        self.passes = self.passes.wrapping_add(1);
        (span, 0)
    }

    /// SCAN's step: [`KeyTable::walk`] handing over the entries.
    pub(crate) fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&Entry)) -> u64 {
        self.walk(cursor, count, |i| {
            if let Some(e) = self.at(i) {
                f(e);
            }
        })
    }

    /// The position of a random entry: a random slot, or the first
    /// occupied one after it (wrapping). Entries after empty slots are
    /// somewhat likelier, as in Redis's bucket-then-chain pick; at the
    /// table's load that stays within a small factor.
    pub(crate) fn random_position(&self, rng: &mut fastrand::Rng) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let start = rng.usize(..self.slots.len());
        (start..self.slots.len())
            .chain(0..start)
            .find(|&i| self.slots[i].is_some())
    }

    /// A random entry (see [`KeyTable::random_position`]).
    pub(crate) fn random_entry(&self, rng: &mut fastrand::Rng) -> Option<&Entry> {
        self.random_position(rng).and_then(|i| self.at(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{StrValue, Value};
    use proptest::prelude::*;
    use std::collections::{BTreeSet, HashSet};

    fn entry(key: &[u8]) -> Entry {
        Entry::with_key_value(key, Value::Str(StrValue::from_bytes(b"v")), None)
    }

    fn name(i: usize) -> Vec<u8> {
        format!("key:{i}").into_bytes()
    }

    fn add(t: &mut KeyTable, key: &[u8]) -> usize {
        t.insert_absent(hash_key(key), entry(key))
    }

    /// Walks the whole table with the eviction hand.
    fn hand_walk(t: &mut KeyTable) {
        let mut cursor = 0;
        loop {
            cursor = t.hand_step(cursor, 7).1;
            if cursor == 0 {
                break;
            }
        }
    }

    /// The ages of the entries stored under `keys`.
    fn ages(t: &KeyTable, keys: impl Iterator<Item = usize>) -> BTreeSet<u8> {
        keys.map(|i| {
            let at = t.position(hash_key(&name(i)), &name(i)).unwrap();
            t.aged_at(at).unwrap().1
        })
        .collect()
    }

    /// The positions of a whole walk of the hand in steps of `count`
    /// entries, step by step, as `HandSpan::reads(None)` gives them; and
    /// the most slots a step covered.
    fn walk_steps(t: &mut KeyTable, count: usize) -> (Vec<Vec<usize>>, usize) {
        let (mut steps, mut widest) = (Vec::new(), 0);
        let mut cursor = 0;
        loop {
            let (span, next) = t.hand_step(cursor, count);
            let (reads, min_age) = span.reads(None);
            assert_eq!(min_age, 0);
            let positions: Vec<usize> = reads.collect();
            assert_eq!(positions.len(), span.entries());
            assert!(positions
                .iter()
                .all(|&i| i >= cursor && i < cursor + MAX_SPAN));
            steps.push(positions);
            if next == 0 {
                return (steps, widest);
            }
            assert!(next > cursor);
            widest = widest.max(next - cursor);
            cursor = next;
        }
    }

    #[test]
    fn a_walk_of_the_hand_covers_every_entry_once_in_bounded_steps() {
        let mut t = KeyTable::default();
        for i in 0..200 {
            add(&mut t, &name(i));
        }
        let occupied: Vec<usize> = (0..t.slots.len()).filter(|&i| t.at(i).is_some()).collect();
        let (steps, widest) = walk_steps(&mut t, 15);
        assert_eq!(steps.concat(), occupied);
        assert!(widest < MAX_SPAN);
        // Each step stops at its 15th entry, but the last takes in the
        // slots that would have made too short a step.
        let (last, full) = steps.split_last().unwrap();
        assert!(full.iter().all(|s| s.len() == 15));
        assert!(last.len() < 45, "{}", last.len());
        // Sparse (a quarter full, just above the shrink): a step ends at
        // MAX_SPAN slots, however few entries it found.
        for i in 0..130 {
            t.remove(hash_key(&name(i)), &name(i));
        }
        let occupied: Vec<usize> = (0..t.slots.len()).filter(|&i| t.at(i).is_some()).collect();
        let (steps, widest) = walk_steps(&mut t, 30);
        assert_eq!(steps.concat(), occupied);
        assert_eq!(widest, MAX_SPAN);
    }

    #[test]
    fn a_span_reads_its_oldest_keys_first_when_it_has_several_ages() {
        let mut t = KeyTable::default();
        for i in 0..100 {
            add(&mut t, &name(i));
        }
        hand_walk(&mut t);
        hand_walk(&mut t);
        // The first 100 keys are of age 1 now; new ones of age 0.
        for i in 100..160 {
            add(&mut t, &name(i));
        }
        let (span, _) = t.hand_step(0, 40);
        let (all, _) = span.reads(None);
        let all: Vec<usize> = all.collect();
        let old: Vec<usize> = all
            .iter()
            .copied()
            .filter(|&i| t.aged_at(i).unwrap().1 == 1)
            .collect();
        assert!(old.len() > 3 && old.len() < all.len(), "{old:?} of {all:?}");
        let (reads, min_age) = span.reads(Some(3));
        assert_eq!(reads.collect::<Vec<_>>(), old[..3]);
        assert_eq!(min_age, 1);
        // Keys all of one age: no telling them apart, so all are read.
        let mut t = KeyTable::default();
        for i in 0..100 {
            add(&mut t, &name(i));
        }
        let (span, _) = t.hand_step(0, 20);
        let (reads, min_age) = span.reads(Some(3));
        assert_eq!((reads.count(), min_age), (20, 0));
    }

    #[test]
    fn ages_follow_the_hands_walks_and_stop_at_the_oldest() {
        let mut t = KeyTable::default();
        for i in 0..100 {
            add(&mut t, &name(i));
        }
        assert_eq!(ages(&t, 0..100), BTreeSet::from([0]));
        hand_walk(&mut t);
        assert_eq!(ages(&t, 0..100), BTreeSet::from([0]));
        hand_walk(&mut t);
        assert_eq!(ages(&t, 0..100), BTreeSet::from([1]));
        // Stored or replaced now: the current generation.
        add(&mut t, &name(100));
        let at = t.position(hash_key(&name(7)), &name(7)).unwrap();
        t.replace_at(at, entry(&name(7)));
        assert_eq!(ages(&t, [7, 100].into_iter()), BTreeSet::from([0]));
        // Six more walks: three generations on, so the bits have gone
        // round (4 generations since the first keys); the hand kept them
        // at the oldest age instead.
        for _ in 0..6 {
            hand_walk(&mut t);
        }
        assert_eq!(t.generation(), 0);
        assert_eq!(ages(&t, 0..101), BTreeSet::from([OLDEST_AGE]));
        // An entry leaving the table takes none of its bits along.
        let gone = t.remove(hash_key(&name(3)), &name(3)).unwrap();
        assert_eq!(
            (gone.table_tag(), gone.table_gen(), gone.is_marked()),
            (0, 0, false)
        );
    }

    /// Checks the invariants the module docs state, for keys hashed with
    /// `hash_of`.
    fn check_hashed(t: &KeyTable, hash_of: impl Fn(&[u8]) -> u64) {
        let mut count = 0;
        let mut prev_tag = 0;
        let mut run_from = 0;
        for (i, slot) in t.slots.iter().enumerate() {
            let Some(e) = slot else {
                run_from = i + 1;
                continue;
            };
            count += 1;
            let tag = real_tag(e);
            assert_eq!(e.table_tag(), tag, "stored tag");
            assert_eq!(tag, tag_of(hash_of(e.key())));
            assert!(tag >= prev_tag, "tag order at {i}");
            prev_tag = tag;
            let home = t.home(tag);
            assert!(
                home <= i && home >= run_from,
                "entry {i} away from its home {home}"
            );
            assert_eq!(t.position(hash_of(e.key()), e.key()), Some(i));
        }
        assert_eq!(count, t.len());
    }

    /// [`check_hashed`] for keys hashed as the keyspace does.
    fn check(t: &KeyTable) {
        check_hashed(t, hash_key);
    }

    #[test]
    fn inserts_finds_and_removes_through_resizes() {
        let mut t = KeyTable::default();
        for i in 0..5000 {
            let at = add(&mut t, &name(i));
            assert_eq!(t.at(at).unwrap().key(), &name(i)[..]);
            if i % 997 == 0 {
                check(&t);
            }
        }
        check(&t);
        assert!(t.len() * 8 <= t.homes * 7);
        assert!(t.len() * 10 >= t.homes * 7 - 10, "grows by a quarter");
        assert!(!t.contains(hash_key(b"nope"), b"nope"));
        for i in (0..5000).step_by(2) {
            let key = name(i);
            let e = t.remove(hash_key(&key), &key).unwrap();
            assert_eq!(e.key(), &key[..]);
            assert_eq!((e.table_tag(), e.is_marked()), (0, false));
        }
        check(&t);
        for i in 0..5000 {
            assert_eq!(t.contains(hash_key(&name(i)), &name(i)), i % 2 == 1);
        }
        for i in (1..5000).step_by(2) {
            t.remove(hash_key(&name(i)), &name(i)).unwrap();
            if i % 701 == 1 {
                check(&t);
            }
        }
        assert!(t.is_empty());
        assert_eq!(t.slots.len(), 0, "an empty table frees its slots");
    }

    #[test]
    fn colliding_tags_are_told_apart_by_key() {
        // Keys with one tag: every hash with the same bits 16-31.
        let mut t = KeyTable::default();
        let hash = |i: u64| (i << 32) | 0x1234_0000;
        for i in 0..50u64 {
            let key = name(i as usize);
            t.insert_absent(hash(i), entry(&key));
        }
        for i in 0..50u64 {
            assert!(t.contains(hash(i), &name(i as usize)));
            let mut seen = 0;
            t.with_hash(hash(i), |_| seen += 1);
            assert_eq!(seen, 50);
        }
        t.remove(hash(7), &name(7)).unwrap();
        assert!(!t.contains(hash(7), &name(7)));
        assert!(t.contains(hash(8), &name(8)));
    }

    #[test]
    fn runs_past_the_end_lengthen_the_tail() {
        // Every key with the last tag: one run from the last home on.
        let mut t = KeyTable::default();
        let hash = |i: u64| (i << 32) | 0xffff_0000;
        let hash_of = |key: &[u8]| hash(std::str::from_utf8(&key[4..]).unwrap().parse().unwrap());
        for i in 0..300u64 {
            t.insert_absent(hash(i), entry(&name(i as usize)));
        }
        check_hashed(&t, hash_of);
        assert!(t.homes < 400, "{} homes for 300 keys", t.homes);
        for i in 0..300u64 {
            assert!(t.contains(hash(i), &name(i as usize)));
        }
        for i in 0..250u64 {
            t.remove(hash(i), &name(i as usize)).unwrap();
        }
        check_hashed(&t, hash_of);
    }

    #[test]
    fn a_walk_reports_each_steady_key_once_across_changes() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut t = KeyTable::default();
        for i in 0..3000 {
            add(&mut t, &name(i));
        }
        let mut seen: Vec<Vec<u8>> = Vec::new();
        let mut cursor = 0;
        let mut next_new = 3000;
        loop {
            cursor = t.scan(cursor, 1 + rng.usize(..40), |e| seen.push(e.key().to_vec()));
            // Churn between steps: keys 2000.. come and go, the table
            // grows and shrinks.
            for _ in 0..rng.usize(..300) {
                add(&mut t, &name(next_new));
                next_new += 1;
            }
            for _ in 0..rng.usize(..300) {
                let i = 2000 + rng.usize(..next_new - 2000);
                t.remove(hash_key(&name(i)), &name(i));
            }
            if cursor == 0 {
                break;
            }
        }
        let distinct: HashSet<_> = seen.iter().collect();
        assert_eq!(distinct.len(), seen.len(), "a key reported twice");
        for i in 0..2000 {
            assert!(distinct.contains(&name(i)), "key {i} missed");
        }
    }

    #[test]
    fn a_walk_step_is_bounded_and_progresses() {
        let mut t = KeyTable::default();
        for i in 0..1000 {
            add(&mut t, &name(i));
        }
        let (mut cursor, mut steps, mut total) = (0, 0, 0);
        loop {
            let mut n = 0;
            let next = t.walk(cursor, 10, |_| n += 1);
            assert!(next == 0 || next > cursor);
            assert!(n <= 40, "a step of {n} entries");
            total += n;
            steps += 1;
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(total, 1000);
        assert!(steps >= 25, "{steps} steps");
        assert_eq!(t.walk(TAG_END, 10, |_| panic!()), 0);
    }

    #[test]
    fn an_entry_swapped_in_without_its_tag_is_still_found() {
        let mut t = KeyTable::default();
        for i in 0..200 {
            add(&mut t, &name(i));
        }
        let key = name(42);
        let at = t.position(hash_key(&key), &key).unwrap();
        // A whole-entry assignment through `&mut Entry` loses the bits.
        *t.at_mut(at).unwrap() = entry(&key);
        assert_eq!(t.at(at).unwrap().table_tag(), 0);
        assert_eq!(t.position(hash_key(&key), &key), Some(at));
        for i in 200..2000 {
            add(&mut t, &name(i));
        }
        check(&t);
    }

    #[test]
    fn replace_keeps_tag_and_mark() {
        let mut t = KeyTable::default();
        let at = add(&mut t, b"k");
        t.set_marked(at, true);
        let old = t.replace_at(at, entry(b"k")).unwrap();
        assert_eq!((old.table_tag(), old.is_marked()), (0, false));
        assert!(t.is_marked(at));
        assert_eq!(t.tag_at(at), tag_of(hash_key(b"k")));
        // Marks move with their entries.
        for i in 0..500 {
            add(&mut t, &name(i));
        }
        let at = t.position(hash_key(b"k"), b"k").unwrap();
        assert!(t.is_marked(at));
        assert_eq!(t.iter().filter(|e| e.is_marked()).count(), 1);
    }

    #[test]
    fn random_picks_cover_the_table() {
        let mut rng = fastrand::Rng::with_seed(1);
        let mut t = KeyTable::default();
        assert!(t.random_entry(&mut rng).is_none());
        for i in 0..100 {
            add(&mut t, &name(i));
        }
        let mut seen = BTreeSet::new();
        for _ in 0..5000 {
            seen.insert(t.random_entry(&mut rng).unwrap().key().to_vec());
        }
        assert_eq!(seen.len(), 100);
    }

    /// A key table operation for the model test.
    #[derive(Debug, Clone)]
    enum Op {
        Insert(u16),
        Remove(u16),
        Mark(u16),
        /// One walk step of at most this many entries.
        Step(usize),
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Against a set as the model, half the keys' hashes drawn from a
        /// few tags so that keys share tags and runs grow long and reach
        /// the end: every
        /// operation keeps the invariants, marks stay with their keys, and
        /// a walk across all the changes reports each key at most once and
        /// every key present throughout.
        #[test]
        fn matches_a_set_model(
            tags in prop::collection::vec(1u64..0x1_0000, 1..6),
            ops in prop::collection::vec(
                prop_oneof![
                    3 => (0u16..400).prop_map(Op::Insert),
                    1 => (0u16..400).prop_map(Op::Remove),
                    1 => (0u16..400).prop_map(Op::Mark),
                    2 => (1usize..30).prop_map(Op::Step),
                ],
                1..600,
            ),
        ) {
            // Even ids share the drawn tags; odd ones get neighbouring tags
            // from a narrow band at the drawn first one, so that walk steps
            // end between tags that are taken.
            let tag_of_id = |id: u64| match id % 2 {
                0 => tags[(id / 2) as usize % tags.len()],
                _ => (tags[0] + id % 97).min(0xffff),
            };
            let hash_of_id = |id: u64| (id << 32) | (tag_of_id(id) << 16);
            let hash_of = |key: &[u8]| hash_of_id(std::str::from_utf8(&key[4..]).unwrap().parse().unwrap());
            let mut t = KeyTable::default();
            let mut model = BTreeSet::new();
            let mut marked = BTreeSet::new();
            let (mut cursor, mut walking, mut seen) = (0, true, Vec::new());
            let mut steady: Option<BTreeSet<u16>> = None;
            for op in ops {
                match op {
                    Op::Insert(id) if !model.contains(&id) => {
                        let key = name(usize::from(id));
                        t.insert_absent(hash_of_id(u64::from(id)), entry(&key));
                        model.insert(id);
                    }
                    Op::Insert(_) => {}
                    Op::Remove(id) => {
                        let key = name(usize::from(id));
                        let gone = t.remove(hash_of_id(u64::from(id)), &key);
                        prop_assert_eq!(gone.is_some(), model.remove(&id));
                        marked.remove(&id);
                        if let Some(s) = steady.as_mut() {
                            s.remove(&id);
                        }
                    }
                    Op::Mark(id) => {
                        let key = name(usize::from(id));
                        if let Some(i) = t.position(hash_of_id(u64::from(id)), &key) {
                            t.set_marked(i, true);
                            marked.insert(id);
                        }
                    }
                    // The walk starts once the table has some keys.
                    Op::Step(n) if walking && (steady.is_some() || model.len() >= 40) => {
                        let steady = steady.get_or_insert_with(|| model.clone());
                        cursor = t.walk(cursor, n, |i| {
                            let key = t.at(i).unwrap().key();
                            seen.push(std::str::from_utf8(&key[4..]).unwrap().parse::<u16>().unwrap());
                        });
                        if cursor == 0 {
                            walking = false;
                            let distinct: BTreeSet<u16> = seen.iter().copied().collect();
                            prop_assert_eq!(distinct.len(), seen.len(), "a key walked twice");
                            prop_assert!(steady.is_subset(&distinct), "a steady key missed");
                        }
                    }
                    Op::Step(_) => {}
                }
                check_hashed(&t, hash_of);
                let in_table: BTreeSet<u16> = t
                    .iter()
                    .map(|e| std::str::from_utf8(&e.key()[4..]).unwrap().parse().unwrap())
                    .collect();
                prop_assert_eq!(&in_table, &model);
                let marked_now: BTreeSet<u16> = t
                    .iter()
                    .filter(|e| e.is_marked())
                    .map(|e| std::str::from_utf8(&e.key()[4..]).unwrap().parse().unwrap())
                    .collect();
                prop_assert_eq!(&marked_now, &marked);
            }
        }
    }

    #[test]
    fn about_ten_bytes_per_key() {
        let mut t = KeyTable::default();
        for i in 0..100_000 {
            add(&mut t, &name(i));
        }
        let per_key = std::mem::size_of_val(&*t.slots) as f64 / t.len() as f64;
        assert!(per_key < 11.8, "{per_key} bytes per key");
    }
}
