//! The sorted set type and its two encodings.
//!
//! * `listpack` (small sets): one packed byte buffer holding the entries in
//!   (score, member) order, each as a LEB128 member length, the member bytes
//!   and the score's 8 bytes. Lookups are linear scans, which is what Redis
//!   does too and is fast for at most `zset-max-listpack-entries` entries.
//! * `skiplist` (large sets; the name Redis reports): instead of a skiplist,
//!   an order-statistic B+tree of (score, member id) pairs whose inner nodes
//!   keep per-child element counts, so rank lookups, rank-indexed access and
//!   insertion/removal are all O(log n). Members live once, in a slot arena
//!   indexed by a hash table of slot ids and member hashes (member → slot),
//!   so a member costs its bytes plus about 44 bytes of bookkeeping.
//!
//! Conversion is one-way (listpack → skiplist) while a value lives, as in
//! Redis 7.0; commands that build a new set (ZUNIONSTORE, ZRANGESTORE, …) pick
//! the encoding for the result with [`ZSet::from_entries`].

use std::cmp::Ordering;
use std::mem;

use crate::dict::{hash_key, prefetch_read};
use crate::open_table::{OpenTable, Probed};
use crate::small_bytes::SmallBytes;

/// The conversion thresholds (`zset-max-listpack-entries` and
/// `zset-max-listpack-value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most entries a listpack-encoded set holds.
    pub max_entries: usize,
    /// Longest member, in bytes, a listpack-encoded set holds.
    pub max_value: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_entries: 128,
            max_value: 64,
        }
    }
}

/// Compares (score, member) pairs the way sorted sets order them: by score,
/// then bytewise by member.
pub fn cmp_entries(a: (f64, &[u8]), b: (f64, &[u8])) -> Ordering {
    match a.0.partial_cmp(&b.0) {
        Some(Ordering::Equal) | None => a.1.cmp(b.1),
        Some(o) => o,
    }
}

/// A Redis sorted set value.
#[derive(Clone, Debug)]
pub struct ZSet {
    repr: Repr,
}

#[derive(Clone, Debug)]
enum Repr {
    Listpack(Listpack),
    Skiplist(Box<Big>),
}

impl PartialEq for ZSet {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other.iter())
                .all(|(a, b)| a.0 == b.0 && a.1.to_bits() == b.1.to_bits())
    }
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet {
            repr: Repr::Listpack(Listpack::default()),
        }
    }
}

impl ZSet {
    /// An empty set in the encoding Redis 7.0's ZADD picks for a new key
    /// whose first member is `first_len` bytes long: listpack unless the
    /// limits rule it out.
    pub fn new(limits: Limits, first_len: usize) -> Self {
        if limits.max_entries == 0 || first_len > limits.max_value {
            ZSet {
                repr: Repr::Skiplist(Box::default()),
            }
        } else {
            ZSet::default()
        }
    }

    /// Builds a set from (member, score) pairs with distinct members, in the
    /// encoding Redis gives a freshly computed result: listpack when the
    /// count and every member length are within `limits`.
    pub fn from_entries(mut entries: Vec<(Vec<u8>, f64)>, limits: Limits) -> Self {
        entries.sort_by(|a, b| cmp_entries((a.1, &a.0), (b.1, &b.0)));
        let small = entries.len() <= limits.max_entries
            && entries.iter().all(|(m, _)| m.len() <= limits.max_value);
        let mut z = ZSet::default();
        if small {
            let mut lp = Listpack::default();
            for (m, s) in &entries {
                lp.push(m, *s);
            }
            z.repr = Repr::Listpack(lp);
        } else {
            let mut big = Big::default();
            for (m, s) in entries {
                big.push_last(SmallBytes::from_vec(m), s);
            }
            z.repr = Repr::Skiplist(Box::new(big));
        }
        z
    }

    /// The encoding name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        match self.repr {
            Repr::Listpack(_) => "listpack",
            Repr::Skiplist(_) => "skiplist",
        }
    }

    /// Heap bytes owned by the value.
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Listpack(lp) => lp.buf.capacity(),
            Repr::Skiplist(b) => mem::size_of::<Big>() + b.heap_bytes(),
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Listpack(lp) => lp.len,
            Repr::Skiplist(b) => b.tree.len,
        }
    }

    /// True when the set has no members (a stored key never is).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The score of `member`, if present.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Listpack(lp) => lp.find(member).map(|(_, e)| e.score),
            Repr::Skiplist(b) => b.find(member).map(|id| b.slot(id).1),
        }
    }

    /// Starts loading level `depth` of where a member hashed to `hash`
    /// (with [`hash_key`]) lives in a big set, so that a pipelined command
    /// finds it in cache (see
    /// [`Keyspace::prefetch_members`](crate::keyspace::Keyspace::prefetch_members));
    /// false for a listpack, which the key's entry prefetch already
    /// reaches.
    pub(crate) fn prefetch_member(&self, hash: u64, depth: u8) -> bool {
        match &self.repr {
            Repr::Skiplist(b) => {
                b.prefetch_member(hash, depth);
                true
            }
            Repr::Listpack(_) => false,
        }
    }

    /// Sets the score of `member`, adding it if absent, and returns its
    /// previous score. Converts to the big encoding when the set outgrows
    /// `limits`. An unchanged score (`==`) leaves the entry untouched.
    pub fn insert(&mut self, member: &[u8], score: f64, limits: Limits) -> Option<f64> {
        if let Repr::Listpack(lp) = &mut self.repr {
            match lp.find(member) {
                Some((_, e)) => {
                    let old = e.score;
                    if old != score {
                        lp.remove_bytes(e.start, e.end);
                        lp.insert_sorted(member, score);
                    }
                    return Some(old);
                }
                None if lp.len < limits.max_entries && member.len() <= limits.max_value => {
                    lp.insert_sorted(member, score);
                    return None;
                }
                None => self.convert(),
            }
        }
        match &mut self.repr {
            Repr::Skiplist(b) => b.insert(member, score),
            Repr::Listpack(_) => unreachable!("converted above"),
        }
    }

    /// Converts a listpack-encoded set to the big encoding.
    fn convert(&mut self) {
        if let Repr::Listpack(lp) = &self.repr {
            let mut big = Big::default();
            for e in lp.entries() {
                big.push_last(SmallBytes::new(e.member), e.score);
            }
            self.repr = Repr::Skiplist(Box::new(big));
        }
    }

    /// Removes `member`; returns its score if it was present.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match &mut self.repr {
            Repr::Listpack(lp) => {
                let (_, e) = lp.find(member)?;
                let score = e.score;
                lp.remove_bytes(e.start, e.end);
                Some(score)
            }
            Repr::Skiplist(b) => b.remove(member),
        }
    }

    /// The 0-based ascending rank of `member` and its score.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        match &self.repr {
            Repr::Listpack(lp) => lp.find(member).map(|(r, e)| (r, e.score)),
            Repr::Skiplist(b) => {
                let id = b.find(member)?;
                let score = b.slot(id).1;
                Some((b.rank_of_present(score, id, member), score))
            }
        }
    }

    /// The member at ascending rank `rank`, with its score.
    pub fn get(&self, rank: usize) -> Option<(&[u8], f64)> {
        if rank >= self.len() {
            return None;
        }
        self.range(rank, rank + 1, false).next()
    }

    /// How many leading members (in order) have a score below `bound`, or
    /// at most `bound` when `inclusive`.
    pub fn rank_by_score(&self, bound: f64, inclusive: bool) -> usize {
        let below = |s: f64| s < bound || (inclusive && s == bound);
        match &self.repr {
            Repr::Listpack(lp) => lp.entries().take_while(|e| below(e.score)).count(),
            Repr::Skiplist(b) => b.tree.lower_bound(|s, _| below(s)),
        }
    }

    /// How many leading members (in order) satisfy `pred`, which must hold
    /// for a prefix of the set (e.g. "member sorts before a bound" when all
    /// scores are equal, as lexicographic ranges assume).
    pub fn rank_where(&self, pred: impl Fn(&[u8], f64) -> bool) -> usize {
        match &self.repr {
            Repr::Listpack(lp) => lp.entries().take_while(|e| pred(e.member, e.score)).count(),
            Repr::Skiplist(b) => b.tree.lower_bound(|s, id| pred(b.slot(id).0, s)),
        }
    }

    /// Every member with its score, in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        self.range(0, self.len(), false)
    }

    /// The members of ascending ranks `start..end` (clamped to the set),
    /// walked from `start` upward, or from `end - 1` downward when `rev`.
    pub fn range(&self, start: usize, end: usize, rev: bool) -> Iter<'_> {
        let end = end.min(self.len());
        let n = end.saturating_sub(start);
        let inner = match &self.repr {
            Repr::Listpack(lp) if n == 0 => IterRepr::Listpack {
                buf: &lp.buf,
                pos: 0,
                left: 0,
            },
            Repr::Listpack(lp) if !rev => IterRepr::Listpack {
                buf: &lp.buf,
                pos: lp.entries().nth(start).map_or(0, |e| e.start),
                left: n,
            },
            Repr::Listpack(lp) => IterRepr::ListpackRev {
                buf: &lp.buf,
                offsets: lp.entries().skip(start).take(n).map(|e| e.start).collect(),
            },
            Repr::Skiplist(b) => {
                let from = if rev { end.saturating_sub(1) } else { start };
                IterRepr::Tree {
                    it: b.tree.iter_from(from, n, rev),
                    slots: &b.slots,
                }
            }
        };
        Iter { inner }
    }

    /// Removes the members of ascending ranks `start..end` (clamped);
    /// returns how many were removed.
    pub fn remove_range(&mut self, start: usize, end: usize) -> usize {
        let end = end.min(self.len());
        if start >= end {
            return 0;
        }
        match &mut self.repr {
            Repr::Listpack(lp) => {
                let mut it = lp.entries().skip(start);
                let from = it.next().map_or(0, |e| e.start);
                let to = lp.entries().nth(end - 1).map_or(lp.buf.len(), |e| e.end);
                lp.buf.drain(from..to);
                lp.len -= end - start;
            }
            Repr::Skiplist(b) => {
                for _ in start..end {
                    b.remove_rank(start);
                }
            }
        }
        end - start
    }

    /// Removes and returns up to `count` members from the low end (or the
    /// high end when `max`), in popping order.
    pub fn pop(&mut self, max: bool, count: usize) -> Vec<(Vec<u8>, f64)> {
        let len = self.len();
        let n = count.min(len);
        if let Repr::Skiplist(b) = &mut self.repr {
            let popped = (0..n)
                .map(|_| {
                    let rank = if max { b.tree.len - 1 } else { 0 };
                    let (m, s) = b.remove_rank(rank);
                    (m.into_vec(), s)
                })
                .collect();
            b.prefetch_edge(max);
            return popped;
        }
        let (start, end) = if max { (len - n, len) } else { (0, n) };
        let out = self
            .range(start, end, max)
            .map(|(m, s)| (m.to_vec(), s))
            .collect();
        self.remove_range(start, end);
        out
    }

    /// One step of ZSCAN: calls `f` for about `count` members starting at
    /// `cursor` and returns the next cursor (0 when done). A listpack set is
    /// returned whole. Members present for the whole scan are returned
    /// exactly once, whatever else changes in between.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], f64)) -> u64 {
        match &self.repr {
            Repr::Listpack(lp) => {
                for e in lp.entries() {
                    f(e.member, e.score);
                }
                0
            }
            Repr::Skiplist(b) => {
                let Ok(mut i) = usize::try_from(cursor) else {
                    return 0;
                };
                let count = count.max(1);
                let mut budget = count.saturating_mul(10);
                let mut found = 0;
                while i < b.slots.len() && found < count && budget > 0 {
                    if let Slot::Used { member, score } = &b.slots[i] {
                        f(member.as_bytes(), *score);
                        found += 1;
                    }
                    i += 1;
                    budget -= 1;
                }
                if i >= b.slots.len() {
                    0
                } else {
                    i as u64
                }
            }
        }
    }
}

/// Iterator over (member, score) pairs, see [`ZSet::range`].
pub struct Iter<'a> {
    inner: IterRepr<'a>,
}

enum IterRepr<'a> {
    Listpack {
        buf: &'a [u8],
        pos: usize,
        left: usize,
    },
    ListpackRev {
        buf: &'a [u8],
        offsets: Vec<usize>,
    },
    Tree {
        it: TreeIter<'a>,
        slots: &'a [Slot],
    },
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            IterRepr::Listpack { buf, pos, left } => {
                if *left == 0 {
                    return None;
                }
                let e = decode(buf, *pos);
                *pos = e.end;
                *left -= 1;
                Some((e.member, e.score))
            }
            IterRepr::ListpackRev { buf, offsets } => {
                let e = decode(buf, offsets.pop()?);
                Some((e.member, e.score))
            }
            IterRepr::Tree { it, slots } => {
                let (score, id) = it.next()?;
                Some((slot_member(slots, id), score))
            }
        }
    }
}

// ---------------------------------------------------------------------------
// listpack encoding

/// The packed small encoding: entries in (score, member) order.
#[derive(Clone, Debug, Default)]
struct Listpack {
    buf: Vec<u8>,
    len: usize,
}

/// One decoded listpack entry and its byte span in the buffer.
struct LpEntry<'a> {
    member: &'a [u8],
    score: f64,
    start: usize,
    end: usize,
}

/// Decodes the entry starting at byte `pos`.
fn decode(buf: &[u8], pos: usize) -> LpEntry<'_> {
    let mut len = 0usize;
    let mut shift = 0;
    let mut p = pos;
    loop {
        let b = buf[p];
        p += 1;
        len |= usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    let member = &buf[p..p + len];
    p += len;
    let mut bits = [0u8; 8];
    bits.copy_from_slice(&buf[p..p + 8]);
    LpEntry {
        member,
        score: f64::from_le_bytes(bits),
        start: pos,
        end: p + 8,
    }
}

/// Appends the encoded entry to `out`. A score of -0 is stored as 0, as
/// Redis's listpack (which stores integral scores as integers) does.
fn encode(out: &mut Vec<u8>, member: &[u8], score: f64) {
    let score = score + 0.0;
    let mut len = member.len();
    while len >= 0x80 {
        out.push((len as u8 & 0x7f) | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
    out.extend_from_slice(member);
    out.extend_from_slice(&score.to_le_bytes());
}

/// Forward walk over a listpack's entries.
struct LpIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for LpIter<'a> {
    type Item = LpEntry<'a>;

    fn next(&mut self) -> Option<LpEntry<'a>> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let e = decode(self.buf, self.pos);
        self.pos = e.end;
        Some(e)
    }
}

impl Listpack {
    fn entries(&self) -> LpIter<'_> {
        LpIter {
            buf: &self.buf,
            pos: 0,
        }
    }

    /// The rank and entry of `member`.
    fn find(&self, member: &[u8]) -> Option<(usize, LpEntry<'_>)> {
        self.entries().enumerate().find(|(_, e)| e.member == member)
    }

    /// Appends an entry that sorts after every present one.
    fn push(&mut self, member: &[u8], score: f64) {
        encode(&mut self.buf, member, score);
        self.len += 1;
    }

    /// Inserts an absent member at its sorted position.
    fn insert_sorted(&mut self, member: &[u8], score: f64) {
        let at = self
            .entries()
            .find(|e| cmp_entries((e.score, e.member), (score, member)) == Ordering::Greater)
            .map_or(self.buf.len(), |e| e.start);
        let mut bytes = Vec::with_capacity(member.len() + 10);
        encode(&mut bytes, member, score);
        self.buf.splice(at..at, bytes);
        self.len += 1;
    }

    /// Removes the single entry spanning `start..end`.
    fn remove_bytes(&mut self, start: usize, end: usize) {
        self.buf.drain(start..end);
        self.len -= 1;
    }
}

// ---------------------------------------------------------------------------
// big encoding: slot arena + member index + counted B+tree

/// No free slot.
const NO_SLOT: u32 = u32::MAX;

/// A member's home in the arena; freed slots form a linked free list.
/// Most members fit in the slot itself ([`SmallBytes`]): finding one by
/// its index entry, or comparing it with a tied entry's, then reads one
/// cache line where a boxed member took two dependent misses.
#[derive(Clone, Debug)]
enum Slot {
    Used { member: SmallBytes, score: f64 },
    Free { next: u32 },
}

/// The member of a used slot (empty for a free one, which nothing refers
/// to).
fn slot_member(slots: &[Slot], id: u32) -> &[u8] {
    match &slots[id as usize] {
        Slot::Used { member, .. } => member.as_bytes(),
        Slot::Free { .. } => &[],
    }
}

/// An index entry: a slot id and the low 32 bits of its member's hash.
/// Keeping the hash means growing the index never reads a member (it
/// used to hash every member again, two cache misses each: a ZADD that
/// grew a 65,536-member set's index took 4-9 ms), and a lookup compares
/// member bytes only when the hashes agree.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Indexed {
    id: u32,
    hash: u32,
}

impl Probed for Indexed {
    const EMPTY: Indexed = Indexed {
        id: NO_SLOT,
        hash: 0,
    };
    // Lookups of absent members (every new member's) probe to the end of
    // the run, which linear probing keeps short only below 3/4 full.
    const FULL_EIGHTHS: usize = 6;
    fn tag(&self) -> u32 {
        self.hash
    }
}

/// How many entries from the end a pop prefetches for the next pops.
const POP_AHEAD: usize = 3;

/// How many entries of equal score [`Big::rank_of_present`] looks through
/// for a member's id before comparing members instead.
const TIE_SCAN: usize = 8;

/// The 32 bits of `member`'s hash the index keeps.
fn member_hash(member: &[u8]) -> u32 {
    hash_key(member) as u32
}

/// Whether a tree entry (score, slot id) orders before (`score`,
/// `member`): by score, ties by member bytes.
fn before<'a>(slots: &'a [Slot], score: f64, member: &'a [u8]) -> impl Fn(f64, u32) -> bool + 'a {
    move |s, id| s < score || (s == score && slot_member(slots, id) < member)
}

/// The large encoding.
#[derive(Clone, Debug)]
struct Big {
    slots: Vec<Slot>,
    free: u32,
    /// Slot ids by member hash. Our own table rather than hashbrown's so
    /// that a pipeline can prefetch a member's entry ahead of its command
    /// ([`Big::prefetch_member`]).
    index: OpenTable<Indexed>,
    tree: Tree,
    /// Heap bytes of the members kept out of their slots, for `heap_bytes`.
    member_bytes: usize,
}

impl Default for Big {
    fn default() -> Self {
        Big {
            slots: Vec::new(),
            free: NO_SLOT,
            index: OpenTable::default(),
            tree: Tree::default(),
            member_bytes: 0,
        }
    }
}

impl Big {
    fn slot(&self, id: u32) -> (&[u8], f64) {
        match &self.slots[id as usize] {
            Slot::Used { member, score } => (member.as_bytes(), *score),
            Slot::Free { .. } => (&[], 0.0),
        }
    }

    fn heap_bytes(&self) -> usize {
        self.slots.capacity() * mem::size_of::<Slot>()
            + self.member_bytes
            + self.index.heap_bytes()
            + self.tree.heap_bytes()
    }

    fn find(&self, member: &[u8]) -> Option<u32> {
        let slots = &self.slots;
        let i = self
            .index
            .position(member_hash(member), |e| slot_member(slots, e.id) == member)?;
        Some(self.index.slots()[i].id)
    }

    /// Starts loading level `depth` of where the member hashed to `hash`
    /// lives: its index run, then its slot, then its bytes.
    fn prefetch_member(&self, hash: u64, depth: u8) {
        let tag = hash as u32;
        if depth == 0 {
            if let Some(home) = self.index.home_slot(tag) {
                prefetch_read(home);
            }
            return;
        }
        for (_, e) in self.index.run(tag).filter(|(_, e)| e.hash == tag) {
            let slot = &self.slots[e.id as usize];
            match slot {
                _ if depth == 1 => prefetch_read(slot),
                // An inline member came with its slot at depth 1.
                Slot::Used {
                    member: SmallBytes::Heap(member),
                    ..
                } => prefetch_read(member.as_ptr()),
                _ => {}
            }
        }
    }

    /// The rank of a present entry: member `member` in slot `id` with
    /// score `score`. Members of equal score are usually few, so `id` is
    /// looked for among them first, which reads no other member; a long
    /// run of equal scores (a set ordered by member alone) falls back to
    /// comparing members.
    fn rank_of_present(&self, score: f64, id: u32, member: &[u8]) -> usize {
        self.tree
            .rank_of_id(score, id)
            .unwrap_or_else(|| self.tree.lower_bound(before(&self.slots, score, member)))
    }

    /// Takes present entry (`score`, `id`) holding `member` out of the
    /// tree, found as [`Big::rank_of_present`] finds it.
    fn unlink(&mut self, score: f64, id: u32, member: &[u8]) {
        let below = |s, _| s < score;
        let tied = self.tree.remove_where(below, |leaf| {
            leaf.find_tied(leaf_partition(leaf, below), score, id)
        });
        if tied.is_none() {
            // Up to and including the entry itself: routes to its leaf.
            let before = before(&self.slots, score, member);
            let through = |s, e| before(s, e) || e == id;
            self.tree
                .remove_where(through, |leaf| {
                    let at = leaf_partition(leaf, through);
                    (at > 0 && leaf.ids[at - 1] == id).then(|| at - 1)
                })
                .expect("a present member is in the tree");
        }
    }

    /// Stores a new member in a slot and the index; returns its id.
    fn alloc(&mut self, member: SmallBytes, score: f64) -> u32 {
        let hash = member_hash(member.as_bytes());
        self.member_bytes += member.heap_bytes();
        let used = Slot::Used { member, score };
        let id = if self.free != NO_SLOT {
            let id = self.free;
            let old = mem::replace(&mut self.slots[id as usize], used);
            self.free = match old {
                Slot::Free { next } => next,
                Slot::Used { .. } => NO_SLOT,
            };
            id
        } else {
            let id = u32::try_from(self.slots.len()).expect("sorted set too large");
            self.slots.push(used);
            id
        };
        self.index.insert(Indexed { id, hash });
        id
    }

    /// Appends a member known to sort after every present one.
    fn push_last(&mut self, member: SmallBytes, score: f64) {
        let id = self.alloc(member, score);
        self.tree.insert(score, id, |_, _| true);
    }

    fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        if let Some(id) = self.find(member) {
            let old = self.slot(id).1;
            if old != score {
                self.unlink(old, id, member);
                if let Slot::Used { score: s, .. } = &mut self.slots[id as usize] {
                    *s = score;
                }
                self.tree
                    .insert(score, id, before(&self.slots, score, member));
            }
            return Some(old);
        }
        let id = self.alloc(SmallBytes::new(member), score);
        self.tree
            .insert(score, id, before(&self.slots, score, member));
        None
    }

    /// Frees slot `id` (already out of the tree), dropping it from the
    /// index; returns its member and score.
    fn release(&mut self, id: u32) -> (SmallBytes, f64) {
        let hash = member_hash(slot_member(&self.slots, id));
        if let Some(i) = self.index.position(hash, |e| e.id == id) {
            self.index.remove_at(i);
        }
        let old = mem::replace(&mut self.slots[id as usize], Slot::Free { next: self.free });
        self.free = id;
        match old {
            Slot::Used { member, score } => {
                self.member_bytes -= member.heap_bytes();
                (member, score)
            }
            Slot::Free { .. } => (SmallBytes::default(), 0.0),
        }
    }

    fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let id = self.find(member)?;
        let score = self.slot(id).1;
        self.unlink(score, id, member);
        self.release(id);
        Some(score)
    }

    /// Prefetches what the next pop from the low end (or the high end when
    /// `max`) reads: the slots of the [`POP_AHEAD`] entries there and the
    /// first one's member. Pipelined pops (ZPOPMIN after ZPOPMIN) then
    /// find their entries loaded, each having prefetched the next.
    fn prefetch_edge(&self, max: bool) {
        let leaf = self.tree.edge_leaf(max);
        let n = leaf.ids.len();
        for k in 0..n.min(POP_AHEAD) {
            let id = leaf.ids[if max { n - 1 - k } else { k }];
            match &self.slots[id as usize] {
                // The previous pop prefetched this slot: reading it is cheap.
                Slot::Used {
                    member: SmallBytes::Heap(member),
                    ..
                } if k == 0 => prefetch_read(member.as_ptr()),
                slot => prefetch_read(slot),
            }
        }
    }

    fn remove_rank(&mut self, rank: usize) -> (SmallBytes, f64) {
        let (_, id) = self.tree.remove_at(rank);
        self.release(id)
    }
}

/// Most entries per leaf: a full leaf (8 + 126 x 12 = 1,520 bytes) fits
/// mimalloc's 1,536-byte size class.
const LEAF_CAP: usize = 126;
/// Most children per inner node.
const INNER_CAP: usize = 64;

#[derive(Clone, Debug)]
enum Node {
    Leaf(Box<Leaf>),
    Inner(Box<Inner>),
}

/// Entries of a leaf, as parallel arrays (12 bytes an entry) inside the
/// leaf's own block. A search's first probe of the scores needs no
/// pointer read from the leaf: with `Vec`s it waited for one more
/// dependent cache miss per leaf visited (docs/performance-log.md,
/// issue 4, session 10).
#[derive(Clone, Debug)]
struct Leaf {
    len: usize,
    scores: [f64; LEAF_CAP],
    ids: [u32; LEAF_CAP],
}

impl Leaf {
    fn empty() -> Box<Leaf> {
        Box::new(Leaf {
            len: 0,
            scores: [0.0; LEAF_CAP],
            ids: [0; LEAF_CAP],
        })
    }

    fn scores(&self) -> &[f64] {
        &self.scores[..self.len]
    }

    fn ids(&self) -> &[u32] {
        &self.ids[..self.len]
    }

    /// Inserts an entry at `at`. A full leaf first splits in two; the
    /// right half is returned for the parent to adopt.
    fn insert(&mut self, at: usize, score: f64, id: u32) -> Option<Box<Leaf>> {
        if self.len == LEAF_CAP {
            let h = LEAF_CAP / 2;
            let mut right = self.split_off(h);
            if at > h {
                right.insert(at - h, score, id);
            } else {
                self.insert(at, score, id);
            }
            return Some(right);
        }
        self.scores.copy_within(at..self.len, at + 1);
        self.ids.copy_within(at..self.len, at + 1);
        self.scores[at] = score;
        self.ids[at] = id;
        self.len += 1;
        None
    }

    fn remove(&mut self, at: usize) -> (f64, u32) {
        let out = (self.scores[at], self.ids[at]);
        self.scores.copy_within(at + 1..self.len, at);
        self.ids.copy_within(at + 1..self.len, at);
        self.len -= 1;
        out
    }

    /// Moves the entries from `h` on into a new leaf.
    fn split_off(&mut self, h: usize) -> Box<Leaf> {
        let mut right = Leaf::empty();
        right.append(&self.scores[h..self.len], &self.ids[h..self.len]);
        self.len = h;
        right
    }

    /// Adds entries after this leaf's (they fit).
    fn append(&mut self, scores: &[f64], ids: &[u32]) {
        let (from, to) = (self.len, self.len + scores.len());
        self.scores[from..to].copy_from_slice(scores);
        self.ids[from..to].copy_from_slice(ids);
        self.len = to;
    }

    /// The position of entry `id` among the first [`TIE_SCAN`] entries of
    /// score `score` from position `from` on; `None` when it is not there.
    fn find_tied(&self, from: usize, score: f64, id: u32) -> Option<usize> {
        let k = self.ids()[from..]
            .iter()
            .zip(&self.scores()[from..])
            .take(TIE_SCAN)
            .take_while(|(_, &s)| s == score)
            .position(|(&i, _)| i == id)?;
        Some(from + k)
    }
}

/// An inner node: its children with their element counts and first
/// entries (kept exact, so routing never needs a freed member).
#[derive(Clone, Debug, Default)]
struct Inner {
    children: Vec<Node>,
    counts: Vec<usize>,
    firsts: Vec<(f64, u32)>,
}

impl Node {
    fn first(&self) -> (f64, u32) {
        match self {
            Node::Leaf(l) => (l.scores[0], l.ids[0]),
            Node::Inner(n) => n.firsts[0],
        }
    }

    /// Entries of a leaf or children of an inner node.
    fn width(&self) -> usize {
        match self {
            Node::Leaf(l) => l.len,
            Node::Inner(n) => n.children.len(),
        }
    }

    fn cap(&self) -> usize {
        match self {
            Node::Leaf(_) => LEAF_CAP,
            Node::Inner(_) => INNER_CAP,
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Node::Leaf(_) => mem::size_of::<Leaf>(),
            Node::Inner(n) => {
                mem::size_of::<Inner>()
                    + n.children.capacity() * mem::size_of::<Node>()
                    + n.counts.capacity() * mem::size_of::<usize>()
                    + n.firsts.capacity() * mem::size_of::<(f64, u32)>()
                    + n.children.iter().map(Node::heap_bytes).sum::<usize>()
            }
        }
    }

    /// Moves all of `other`'s content after this node's (same kind).
    fn absorb(&mut self, other: Node) {
        match (self, other) {
            (Node::Leaf(a), Node::Leaf(b)) => a.append(b.scores(), b.ids()),
            (Node::Inner(a), Node::Inner(mut b)) => {
                a.children.append(&mut b.children);
                a.counts.append(&mut b.counts);
                a.firsts.append(&mut b.firsts);
            }
            _ => unreachable!("siblings are at the same depth"),
        }
    }
}

/// A node a descent passes, asked where to go on: which child of an inner
/// node, which entry of a leaf.
enum Step<'a> {
    Inner(&'a Inner),
    Leaf(&'a Leaf),
}

impl Inner {
    /// The child holding existing rank `rank`, and the rank within it.
    fn locate(&self, mut rank: usize) -> (usize, usize) {
        let last = self.counts.len() - 1;
        for (i, &c) in self.counts[..last].iter().enumerate() {
            if rank < c {
                return (i, rank);
            }
            rank -= c;
        }
        (last, rank)
    }

    /// The last child whose first entry `route` holds for (which must hold
    /// for a prefix of the entries), or the first child when it holds for
    /// none. With "orders before x" that is a child where x can be
    /// inserted; with "orders before x or is x", the child holding x.
    fn route(&self, route: impl Fn(f64, u32) -> bool) -> usize {
        self.firsts.partition_point(|&(s, id)| route(s, id)).max(1) - 1
    }

    fn remove_child(&mut self, i: usize) -> Node {
        self.counts.remove(i);
        self.firsts.remove(i);
        self.children.remove(i)
    }

    /// Merges child `i` with a neighbour when it got small and both fit in
    /// one node.
    fn rebalance(&mut self, i: usize) {
        let w = self.children[i].width();
        if w >= self.children[i].cap() / 4 {
            return;
        }
        let (a, b) = if i + 1 < self.children.len() {
            (i, i + 1)
        } else if i > 0 {
            (i - 1, i)
        } else {
            return;
        };
        if self.children[a].width() + self.children[b].width() > self.children[a].cap() {
            return;
        }
        let cb = self.counts[b];
        let right = self.remove_child(b);
        self.children[a].absorb(right);
        self.counts[a] += cb;
    }
}

/// Binary search: the first index in `0..n` where `pred` is false (pred
/// holds for a prefix).
fn partition(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The first position in `leaf` where `before` fails.
fn leaf_partition(leaf: &Leaf, before: impl Fn(f64, u32) -> bool) -> usize {
    partition(leaf.len, |j| before(leaf.scores[j], leaf.ids[j]))
}

/// An order-statistic B+tree of (score, slot id) entries.
#[derive(Clone, Debug)]
struct Tree {
    root: Node,
    len: usize,
}

impl Default for Tree {
    fn default() -> Self {
        Tree {
            root: Node::Leaf(Leaf::empty()),
            len: 0,
        }
    }
}

impl Tree {
    fn heap_bytes(&self) -> usize {
        self.root.heap_bytes()
    }

    /// Follows `before` (which holds for a prefix of the entries) down to
    /// a leaf (see [`Inner::route`]): that leaf, the first position in it
    /// where `before` fails (possibly its end), and the rank of the leaf's
    /// first entry.
    fn descend(&self, before: impl Fn(f64, u32) -> bool) -> (&Leaf, usize, usize) {
        let mut node = &self.root;
        let mut acc = 0;
        loop {
            match node {
                Node::Leaf(l) => return (l, leaf_partition(l, &before), acc),
                Node::Inner(n) => {
                    let k = n.route(&before);
                    acc += n.counts[..k].iter().sum::<usize>();
                    node = &n.children[k];
                }
            }
        }
    }

    /// Number of leading entries for which `before` holds (a prefix).
    fn lower_bound(&self, before: impl Fn(f64, u32) -> bool) -> usize {
        let (_, at, acc) = self.descend(before);
        acc + at
    }

    /// The leaf at the low end of the order (or the high end when `max`).
    fn edge_leaf(&self, max: bool) -> &Leaf {
        let mut node = &self.root;
        loop {
            match node {
                Node::Leaf(l) => return l,
                Node::Inner(n) => {
                    node = if max {
                        n.children.last()
                    } else {
                        n.children.first()
                    }
                    .expect("an inner node has children");
                }
            }
        }
    }

    /// The rank of entry (`score`, `id`) when it is among the first
    /// [`TIE_SCAN`] entries of that score in the leaf where they start;
    /// `None` when it is not found there.
    fn rank_of_id(&self, score: f64, id: u32) -> Option<usize> {
        let (leaf, at, acc) = self.descend(|s, _| s < score);
        leaf.find_tied(at, score, id).map(|k| acc + k)
    }

    /// Adds entry (`score`, `id`) after the entries `before` holds for (a
    /// prefix) and ahead of the rest, in one descent.
    fn insert(&mut self, score: f64, id: u32, before: impl Fn(f64, u32) -> bool) {
        if let Some((right, rc)) = insert_rec(&mut self.root, score, id, &before) {
            let left = mem::replace(&mut self.root, Node::Leaf(Leaf::empty()));
            let lc = self.len + 1 - rc;
            self.root = Node::Inner(Box::new(Inner {
                firsts: vec![left.first(), right.first()],
                counts: vec![lc, rc],
                children: vec![left, right],
            }));
        }
        self.len += 1;
    }

    fn remove_at(&mut self, rank: usize) -> (f64, u32) {
        let mut rank = rank;
        let out = self.remove_by(&mut |step| match step {
            Step::Inner(n) => {
                let (i, r) = n.locate(rank);
                rank = r;
                Some(i)
            }
            Step::Leaf(_) => Some(rank),
        });
        out.expect("rank within the tree")
    }

    /// Removes the entry `pick` chooses in the leaf `route` leads to (see
    /// [`Inner::route`]); `None`, with the tree unchanged, when it chooses
    /// none.
    fn remove_where(
        &mut self,
        route: impl Fn(f64, u32) -> bool,
        pick: impl Fn(&Leaf) -> Option<usize>,
    ) -> Option<(f64, u32)> {
        self.remove_by(&mut |step| match step {
            Step::Inner(n) => Some(n.route(&route)),
            Step::Leaf(l) => pick(l),
        })
    }

    /// Removes the entry a descent guided by `choose` ends at, then drops
    /// root levels left with a single child.
    fn remove_by(&mut self, choose: &mut impl FnMut(Step) -> Option<usize>) -> Option<(f64, u32)> {
        let out = remove_rec(&mut self.root, choose)?;
        self.len -= 1;
        while let Node::Inner(n) = &mut self.root {
            match n.children.len() {
                0 => self.root = Node::Leaf(Leaf::empty()),
                1 => {
                    let child = n.children.pop().expect("one child");
                    self.root = child;
                }
                _ => break,
            }
        }
        Some(out)
    }

    /// Walks `n` entries from rank `from`, upward or (when `rev`) downward.
    fn iter_from(&self, from: usize, n: usize, rev: bool) -> TreeIter<'_> {
        let mut it = TreeIter {
            stack: Vec::new(),
            leaf: None,
            pos: 0,
            left: 0,
            rev,
        };
        if n == 0 || from >= self.len {
            return it;
        }
        let mut node = &self.root;
        let mut rank = from;
        loop {
            match node {
                Node::Leaf(l) => {
                    it.leaf = Some(l);
                    it.pos = if rev { rank + 1 } else { rank };
                    break;
                }
                Node::Inner(inner) => {
                    let (i, r) = inner.locate(rank);
                    it.stack.push((inner, i));
                    node = &inner.children[i];
                    rank = r;
                }
            }
        }
        it.left = n;
        it
    }
}

fn insert_rec(
    node: &mut Node,
    score: f64,
    id: u32,
    before: &impl Fn(f64, u32) -> bool,
) -> Option<(Node, usize)> {
    match node {
        Node::Leaf(l) => {
            let at = leaf_partition(l, before);
            let right = l.insert(at, score, id)?;
            let rc = right.len;
            Some((Node::Leaf(right), rc))
        }
        Node::Inner(n) => {
            let i = n.route(before);
            let split = insert_rec(&mut n.children[i], score, id, before);
            n.counts[i] += 1;
            n.firsts[i] = n.children[i].first();
            if let Some((right, rc)) = split {
                n.counts[i] -= rc;
                n.firsts.insert(i + 1, right.first());
                n.counts.insert(i + 1, rc);
                n.children.insert(i + 1, right);
            }
            if n.children.len() <= INNER_CAP {
                return None;
            }
            let h = n.children.len() / 2;
            let right = Inner {
                children: n.children.split_off(h),
                counts: n.counts.split_off(h),
                firsts: n.firsts.split_off(h),
            };
            let rc = right.counts.iter().sum();
            Some((Node::Inner(Box::new(right)), rc))
        }
    }
}

/// Removes the entry `choose` leads to under `node`, keeping counts and
/// first entries exact on the way back up; `None` (nothing changed) when
/// `choose` gives up.
fn remove_rec(
    node: &mut Node,
    choose: &mut impl FnMut(Step) -> Option<usize>,
) -> Option<(f64, u32)> {
    match node {
        Node::Leaf(l) => {
            let at = choose(Step::Leaf(l))?;
            Some(l.remove(at))
        }
        Node::Inner(n) => {
            let i = choose(Step::Inner(n))?;
            let out = remove_rec(&mut n.children[i], choose)?;
            n.counts[i] -= 1;
            if n.counts[i] == 0 {
                n.remove_child(i);
            } else {
                n.firsts[i] = n.children[i].first();
                n.rebalance(i);
            }
            Some(out)
        }
    }
}

/// A walk over a range of tree entries, see [`Tree::iter_from`].
struct TreeIter<'a> {
    /// Inner nodes on the path to the current leaf, with the child index
    /// taken at each.
    stack: Vec<(&'a Inner, usize)>,
    leaf: Option<&'a Leaf>,
    /// Next index to yield (forward) or one past it (reverse).
    pos: usize,
    left: usize,
    rev: bool,
}

impl TreeIter<'_> {
    /// Moves to the next (or previous) leaf; false at the end of the tree.
    fn step_leaf(&mut self) -> bool {
        while let Some((inner, idx)) = self.stack.pop() {
            let next = if self.rev {
                idx.checked_sub(1)
            } else {
                Some(idx + 1).filter(|&j| j < inner.children.len())
            };
            let Some(j) = next else { continue };
            self.stack.push((inner, j));
            let mut node = &inner.children[j];
            loop {
                match node {
                    Node::Leaf(l) => {
                        self.leaf = Some(l);
                        self.pos = if self.rev { l.len } else { 0 };
                        return true;
                    }
                    Node::Inner(n) => {
                        let k = if self.rev { n.children.len() - 1 } else { 0 };
                        self.stack.push((n, k));
                        node = &n.children[k];
                    }
                }
            }
        }
        false
    }
}

impl Iterator for TreeIter<'_> {
    type Item = (f64, u32);

    fn next(&mut self) -> Option<(f64, u32)> {
        if self.left == 0 {
            return None;
        }
        loop {
            let leaf = self.leaf?;
            if !self.rev && self.pos < leaf.len {
                let p = self.pos;
                self.pos += 1;
                self.left -= 1;
                return Some((leaf.scores[p], leaf.ids[p]));
            }
            if self.rev && self.pos > 0 {
                self.pos -= 1;
                self.left -= 1;
                return Some((leaf.scores[self.pos], leaf.ids[self.pos]));
            }
            if !self.step_leaf() {
                self.left = 0;
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Limits = Limits {
        max_entries: 128,
        max_value: 64,
    };

    fn members(z: &ZSet) -> Vec<(Vec<u8>, f64)> {
        z.iter().map(|(m, s)| (m.to_vec(), s)).collect()
    }

    /// A model: a sorted Vec.
    fn model_sorted(v: &[(Vec<u8>, f64)]) -> Vec<(Vec<u8>, f64)> {
        let mut v = v.to_vec();
        v.sort_by(|a, b| cmp_entries((a.1, &a.0), (b.1, &b.0)));
        v
    }

    /// A slot is its member (inline up to 22 bytes) and score: the free
    /// variant needs no room of its own.
    #[test]
    fn slot_is_compact() {
        assert_eq!(mem::size_of::<Slot>(), 32);
    }

    #[test]
    fn listpack_basic_order_and_updates() {
        let mut z = ZSet::new(SMALL, 1);
        assert_eq!(z.encoding_name(), "listpack");
        assert_eq!(z.insert(b"b", 2.0, SMALL), None);
        assert_eq!(z.insert(b"a", 2.0, SMALL), None);
        assert_eq!(z.insert(b"c", 1.0, SMALL), None);
        assert_eq!(
            members(&z),
            vec![
                (b"c".to_vec(), 1.0),
                (b"a".to_vec(), 2.0),
                (b"b".to_vec(), 2.0)
            ]
        );
        assert_eq!(z.insert(b"c", 3.0, SMALL), Some(1.0));
        assert_eq!(z.rank(b"c"), Some((2, 3.0)));
        assert_eq!(z.rank(b"a"), Some((0, 2.0)));
        assert_eq!(z.score(b"zz"), None);
        assert_eq!(z.remove(b"a"), Some(2.0));
        assert_eq!(z.len(), 2);
        assert_eq!(z.get(1), Some((&b"c"[..], 3.0)));
        assert_eq!(z.rank_by_score(3.0, false), 1);
        assert_eq!(z.rank_by_score(3.0, true), 2);
    }

    #[test]
    fn converts_on_count_and_member_length() {
        let lim = Limits {
            max_entries: 4,
            max_value: 8,
        };
        let mut z = ZSet::new(lim, 1);
        for i in 0..4 {
            z.insert(format!("m{i}").as_bytes(), i as f64, lim);
        }
        assert_eq!(z.encoding_name(), "listpack");
        z.insert(b"m4", 4.0, lim);
        assert_eq!(z.encoding_name(), "skiplist");
        assert_eq!(z.len(), 5);
        assert_eq!(z.rank(b"m3"), Some((3, 3.0)));

        let mut z = ZSet::new(lim, 1);
        z.insert(b"a", 1.0, lim);
        z.insert(b"123456789", 0.0, lim);
        assert_eq!(z.encoding_name(), "skiplist");
        assert_eq!(z.get(0), Some((&b"123456789"[..], 0.0)));
        assert_eq!(ZSet::new(lim, 9).encoding_name(), "skiplist");
        assert_eq!(
            ZSet::new(
                Limits {
                    max_entries: 0,
                    max_value: 8
                },
                1
            )
            .encoding_name(),
            "skiplist"
        );
    }

    #[test]
    fn from_entries_picks_encoding() {
        let lim = Limits {
            max_entries: 2,
            max_value: 8,
        };
        let z = ZSet::from_entries(vec![(b"b".to_vec(), 1.0), (b"a".to_vec(), 1.0)], lim);
        assert_eq!(z.encoding_name(), "listpack");
        assert_eq!(members(&z)[0].0, b"a");
        let z = ZSet::from_entries(
            vec![
                (b"b".to_vec(), 1.0),
                (b"a".to_vec(), 1.0),
                (b"c".to_vec(), 0.0),
            ],
            lim,
        );
        assert_eq!(z.encoding_name(), "skiplist");
        assert_eq!(members(&z)[0].0, b"c");
        let big = ZSet::from_entries(vec![(vec![b'x'; 9], 1.0)], lim);
        assert_eq!(big.encoding_name(), "skiplist");
    }

    #[test]
    fn long_member_lengths_round_trip_in_listpack() {
        let lim = Limits {
            max_entries: 10,
            max_value: 100_000,
        };
        let mut z = ZSet::new(lim, 1);
        let long = vec![b'q'; 20_000];
        z.insert(&long, -1.5, lim);
        z.insert(b"", 7.0, lim);
        assert_eq!(z.encoding_name(), "listpack");
        assert_eq!(z.score(&long), Some(-1.5));
        assert_eq!(z.score(b""), Some(7.0));
        assert_eq!(z.range(0, 2, true).next(), Some((&b""[..], 7.0)));
    }

    /// Drives both encodings and a model through the same random operations.
    fn check_against_model(lim: Limits, ops: usize, seed: u64) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut z = ZSet::new(lim, 1);
        let mut model: Vec<(Vec<u8>, f64)> = Vec::new();
        for step in 0..ops {
            let m = format!("m{}", rng.usize(..600)).into_bytes();
            let s = rng.i32(-50..50) as f64;
            match rng.u8(..10) {
                0..=5 => {
                    let old = model.iter().position(|e| e.0 == m);
                    let got = z.insert(&m, s, lim);
                    assert_eq!(got, old.map(|i| model[i].1));
                    match old {
                        Some(i) => model[i].1 = s,
                        None => model.push((m, s)),
                    }
                }
                6 | 7 => {
                    let old = model.iter().position(|e| e.0 == m);
                    assert_eq!(z.remove(&m), old.map(|i| model.remove(i).1));
                }
                8 => {
                    let n = rng.usize(..4);
                    let max = rng.bool();
                    let sorted = model_sorted(&model);
                    let want: Vec<_> = if max {
                        sorted.iter().rev().take(n).cloned().collect()
                    } else {
                        sorted.iter().take(n).cloned().collect()
                    };
                    assert_eq!(z.pop(max, n), want);
                    model.retain(|e| !want.iter().any(|w| w.0 == e.0));
                }
                _ => {
                    let len = model.len();
                    let a = rng.usize(..=len);
                    let b = rng.usize(a..=len.min(a + 5));
                    let sorted = model_sorted(&model);
                    assert_eq!(z.remove_range(a, b), b - a);
                    model = sorted[..a].iter().chain(&sorted[b..]).cloned().collect();
                }
            }
            if step % 97 == 0 || step + 1 == ops {
                let sorted = model_sorted(&model);
                assert_eq!(members(&z), sorted);
                assert_eq!(z.len(), sorted.len());
                let rev: Vec<_> = z
                    .range(0, z.len(), true)
                    .map(|(m, s)| (m.to_vec(), s))
                    .collect();
                assert_eq!(rev, sorted.iter().rev().cloned().collect::<Vec<_>>());
                for (i, (m, s)) in sorted.iter().enumerate() {
                    assert_eq!(z.rank(m), Some((i, *s)));
                    assert_eq!(z.get(i), Some((&m[..], *s)));
                }
                for b in [-60.0, -3.0, 0.0, 10.0, 60.0] {
                    let want = sorted.iter().filter(|e| e.1 < b).count();
                    assert_eq!(z.rank_by_score(b, false), want);
                    let want = sorted.iter().filter(|e| e.1 <= b).count();
                    assert_eq!(z.rank_by_score(b, true), want);
                }
                if sorted.len() > 3 {
                    let a = rng.usize(..sorted.len());
                    let n = rng.usize(..sorted.len());
                    let fwd: Vec<_> = z.range(a, a + n, false).map(|(m, _)| m.to_vec()).collect();
                    let want: Vec<_> = sorted.iter().skip(a).take(n).map(|e| e.0.clone()).collect();
                    assert_eq!(fwd, want);
                }
                let mut seen = Vec::new();
                let mut cursor = 0;
                loop {
                    cursor = z.scan(cursor, 7, |m, _| seen.push(m.to_vec()));
                    if cursor == 0 {
                        break;
                    }
                }
                seen.sort();
                let mut all: Vec<_> = sorted.iter().map(|e| e.0.clone()).collect();
                all.sort();
                assert_eq!(seen, all);
            }
        }
        assert_eq!(z.clone(), z);
    }

    #[test]
    fn listpack_matches_model() {
        check_against_model(
            Limits {
                max_entries: usize::MAX,
                max_value: 64,
            },
            3000,
            1,
        );
    }

    #[test]
    fn big_encoding_matches_model() {
        check_against_model(
            Limits {
                max_entries: 0,
                max_value: 64,
            },
            20_000,
            2,
        );
    }

    /// Enough members for inner nodes to split and merge, and runs of
    /// equal scores that span leaves, so that updates and removals take
    /// both the tie scan and the member-comparing route: the tree keeps the
    /// model's order and ranks throughout.
    #[test]
    fn deep_tree_matches_model() {
        let lim = Limits {
            max_entries: 0,
            max_value: 64,
        };
        let mut rng = fastrand::Rng::with_seed(11);
        let mut z = ZSet::new(lim, 1);
        let mut model = std::collections::HashMap::new();
        let sorted = |model: &std::collections::HashMap<Vec<u8>, f64>| {
            let v: Vec<_> = model.iter().map(|(m, s)| (m.clone(), *s)).collect();
            model_sorted(&v)
        };
        for round in 0..6 {
            // Grow for three rounds, then shrink.
            let (grow, ops) = (round < 3, 40_000);
            for _ in 0..ops {
                let m = format!("m{}", rng.usize(..20_000)).into_bytes();
                let s = f64::from(rng.i32(-300..300));
                if rng.u8(..10) < if grow { 8 } else { 3 } {
                    assert_eq!(z.insert(&m, s, lim), model.insert(m, s));
                } else {
                    assert_eq!(z.remove(&m), model.remove(&m));
                }
            }
            let want = sorted(&model);
            assert_eq!(members(&z), want, "round {round}");
            for (i, (m, s)) in want.iter().enumerate().step_by(13) {
                assert_eq!(z.rank(m), Some((i, *s)));
            }
        }
        let popped = z.pop(false, 100);
        let want = sorted(&model);
        assert_eq!(popped, want[..100.min(want.len())].to_vec());
    }

    #[test]
    fn mixed_encoding_matches_model() {
        check_against_model(SMALL, 20_000, 3);
    }

    /// A present member's rank is found by its id among a few equal
    /// scores, and by comparing members in a run longer than that (a set
    /// with one score, as lexicographic commands use).
    #[test]
    fn ranks_of_present_members_in_runs_of_equal_scores() {
        let lim = Limits {
            max_entries: 0,
            max_value: 64,
        };
        let mut z = ZSet::new(lim, 1);
        for i in 0..1000 {
            z.insert(format!("m{i:04}").as_bytes(), f64::from(i / 500), lim);
        }
        let Repr::Skiplist(b) = &z.repr else {
            panic!("big encoding")
        };
        let id = |m: &str| b.find(m.as_bytes()).expect("present");
        assert_eq!(b.tree.rank_of_id(0.0, id("m0003")), Some(3));
        assert_eq!(b.tree.rank_of_id(1.0, id("m0500")), Some(500));
        assert_eq!(b.tree.rank_of_id(0.0, id("m0200")), None, "past the scan");
        assert_eq!(b.tree.rank_of_id(1.0, id("m0003")), None, "wrong score");
        for i in (0..1000).step_by(37) {
            let m = format!("m{i:04}");
            assert_eq!(z.rank(m.as_bytes()), Some((i as usize, f64::from(i / 500))));
        }
        // Moving members out of the long runs and back keeps the order.
        for i in (0..1000).step_by(3) {
            let m = format!("m{i:04}");
            assert_eq!(z.insert(m.as_bytes(), 5.0, lim), Some(f64::from(i / 500)));
            assert_eq!(z.remove(m.as_bytes()), Some(5.0));
            assert_eq!(z.insert(m.as_bytes(), f64::from(i / 500), lim), None);
        }
        let want: Vec<_> = (0..1000).map(|i| format!("m{i:04}").into_bytes()).collect();
        let got: Vec<_> = members(&z).into_iter().map(|(m, _)| m).collect();
        assert_eq!(got, want);
    }

    /// Prefetching is a hint: any depth, present or absent member, big or
    /// small set, changes nothing; only a big set has levels to load.
    #[test]
    fn member_prefetch_and_pop_ahead_change_nothing() {
        let small = Limits::default();
        let mut z = ZSet::new(small, 1);
        z.insert(b"a", 1.0, small);
        assert!(!z.prefetch_member(hash_key(b"a"), 0));
        let big = Limits {
            max_entries: 0,
            max_value: 64,
        };
        let mut z = ZSet::new(big, 1);
        for depth in 0..3 {
            assert!(z.prefetch_member(hash_key(b"m1"), depth), "empty big set");
        }
        for i in 0..300 {
            z.insert(format!("m{i}").as_bytes(), f64::from(i % 7), big);
        }
        let before = members(&z);
        for m in ["m1", "m299", "absent"] {
            for depth in 0..3 {
                assert!(z.prefetch_member(hash_key(m.as_bytes()), depth));
            }
        }
        assert_eq!(members(&z), before);
        // Pops from both ends prefetch the next ones; all the way to empty.
        let mut sorted = before.clone();
        while !sorted.is_empty() {
            assert_eq!(z.pop(false, 1), vec![sorted.remove(0)]);
            if let Some(last) = sorted.pop() {
                assert_eq!(z.pop(true, 1), vec![last]);
            }
        }
        assert!(z.is_empty());
    }

    #[test]
    fn large_tree_ranks_and_shrink() {
        let lim = Limits {
            max_entries: 0,
            max_value: 64,
        };
        let mut z = ZSet::new(lim, 1);
        let n = 100_000;
        for i in (0..n).rev() {
            z.insert(format!("{i:08}").as_bytes(), (i / 3) as f64, lim);
        }
        assert_eq!(z.len(), n);
        for i in (0..n).step_by(997) {
            assert_eq!(z.rank(format!("{i:08}").as_bytes()).map(|r| r.0), Some(i));
        }
        assert_eq!(z.rank_by_score(10.0, false), 30);
        assert_eq!(z.remove_range(10, n - 10), n - 20);
        assert_eq!(z.len(), 20);
        let got: Vec<_> = z.iter().map(|(m, _)| m.to_vec()).collect();
        let want: Vec<_> = (0..10)
            .chain(n - 10..n)
            .map(|i| format!("{i:08}").into_bytes())
            .collect();
        assert_eq!(got, want);
        assert_eq!(z.pop(true, 100).len(), 20);
        assert!(z.is_empty());
        assert!(z.heap_bytes() > 0);
    }

    #[test]
    fn equality_ignores_encoding_layout() {
        let big = Limits {
            max_entries: 0,
            max_value: 64,
        };
        let mut a = ZSet::new(SMALL, 1);
        let mut b = ZSet::new(big, 1);
        for (m, s) in [(&b"x"[..], 1.0), (b"y", 0.5)] {
            a.insert(m, s, SMALL);
            b.insert(m, s, big);
        }
        assert_eq!(a, b);
        b.insert(b"y", 0.25, big);
        assert_ne!(a, b);
    }
}
