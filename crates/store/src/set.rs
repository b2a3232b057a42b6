//! The Set type and its two encodings, the ones Redis 7.0 has.
//!
//! * `intset`: a sorted vector of integers of the narrowest width (16, 32 or
//!   64 bits) that holds all of them, searched by bisection. A set starts
//!   this way when its first member is a canonical integer and stays so
//!   while every member is one and there are at most
//!   `set-max-intset-entries` of them. Like Redis's intset the width only
//!   ever grows.
//! * `hashtable`: a [`Dict`] of boxed member bytes, which gives O(1)
//!   membership, exactly uniform random picks (SPOP, SRANDMEMBER) and a
//!   resize-stable SSCAN cursor.
//!
//! Conversion is one-way, intset to hashtable, as in Redis 7.0 (which never
//! converts back). Iteration of an intset is in ascending order, which
//! Redis clients can observe (SMEMBERS of small integer sets) and which is
//! kept exactly.

use std::collections::HashSet;
use std::fmt;

use vireo_resp::number::parse_i64;

use crate::dict::{hash_key, prefetch_read, Dict};
use crate::small_bytes::SmallBytes;

/// Redis caps `set-max-intset-entries` at 2^30 because of intset internals.
const INTSET_MAX_ENTRIES_CAP: usize = 1 << 30;

/// SPOP with a count keeps the set and pops members one by one while the
/// remaining part is more than a fifth of the popped part; otherwise it
/// moves the survivors to a new set and returns the old one (Redis's
/// `SPOP_MOVE_STRATEGY_MUL`, which decides the new set's encoding too).
const SPOP_MOVE_STRATEGY_MUL: usize = 5;

/// SRANDMEMBER with a positive count below the size copies the whole set
/// and shuffles when the count is more than a third of it, and otherwise
/// draws random members until enough distinct ones were found.
const SRANDMEMBER_SUB_STRATEGY_MUL: usize = 3;

/// A set member: an integer of an intset, or the bytes of a hashtable
/// member (`B` is `&[u8]` when borrowed from a set, `Box<[u8]>` when taken
/// out of one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Member<B> {
    /// A member of an intset, whose text form is its decimal digits.
    Int(i64),
    /// A member of a hashtable set.
    Bytes(B),
}

impl<B: AsRef<[u8]>> Member<B> {
    /// The member's bytes; integers are formatted into `buf`.
    pub fn as_bytes<'s>(&'s self, buf: &'s mut itoa::Buffer) -> &'s [u8] {
        match self {
            Member::Int(v) => buf.format(*v).as_bytes(),
            Member::Bytes(b) => b.as_ref(),
        }
    }

    /// Copies the member's bytes out.
    pub fn to_vec(&self) -> Vec<u8> {
        self.as_bytes(&mut itoa::Buffer::new()).to_vec()
    }

    /// The same member borrowing its bytes.
    pub fn borrowed(&self) -> Member<&[u8]> {
        match self {
            Member::Int(v) => Member::Int(*v),
            Member::Bytes(b) => Member::Bytes(b.as_ref()),
        }
    }
}

/// An integer width an intset can store its members in.
trait Width: Copy + Ord + Into<i64> + TryFrom<i64> {
    /// The value widened to `i64`.
    fn into_i64(self) -> i64 {
        self.into()
    }
}
impl Width for i16 {}
impl Width for i32 {}
impl Width for i64 {}

/// Where `x` is (Ok) or would go (Err) in the sorted `v`; None when `x`
/// does not fit the width, so it cannot be there.
fn search<W: Width>(v: &[W], x: i64) -> Option<Result<usize, usize>> {
    let x = W::try_from(x).ok()?;
    Some(v.binary_search(&x))
}

/// Inserts `x` into the sorted `v`: Some(true) if added, Some(false) if
/// already there, None if it does not fit the width.
fn insert_sorted<W: Width>(v: &mut Vec<W>, x: i64) -> Option<bool> {
    let w = W::try_from(x).ok()?;
    Some(match v.binary_search(&w) {
        Ok(_) => false,
        Err(pos) => {
            v.insert(pos, w);
            true
        }
    })
}

/// Removes `x` from the sorted `v`; true if it was there.
fn remove_sorted<W: Width>(v: &mut Vec<W>, x: i64) -> bool {
    match search(v, x) {
        Some(Ok(pos)) => {
            v.remove(pos);
            true
        }
        _ => false,
    }
}

/// Bytes of the buffer behind `v`, spare capacity included.
fn capacity_bytes<W>(v: &Vec<W>) -> usize {
    v.capacity() * std::mem::size_of::<W>()
}

/// Widens every element of `v`.
fn widen<W: Width, T: Width + From<W>>(v: &[W]) -> Vec<T> {
    v.iter().map(|&x| T::from(x)).collect()
}

/// Sorted distinct integers in the narrowest width that holds them all.
#[derive(Clone, Debug)]
enum IntSet {
    W16(Vec<i16>),
    W32(Vec<i32>),
    W64(Vec<i64>),
}

/// Runs `$e` with `$v` bound to the vector of whichever width `$s` has.
macro_rules! with_vec {
    ($s:expr, $v:ident => $e:expr) => {
        match $s {
            IntSet::W16($v) => $e,
            IntSet::W32($v) => $e,
            IntSet::W64($v) => $e,
        }
    };
}

impl IntSet {
    fn len(&self) -> usize {
        with_vec!(self, v => v.len())
    }

    /// The `i`-th smallest member; `i` must be below `len`.
    fn get(&self, i: usize) -> i64 {
        with_vec!(self, v => v[i].into_i64())
    }

    fn contains(&self, x: i64) -> bool {
        with_vec!(self, v => matches!(search(v, x), Some(Ok(_))))
    }

    /// Adds `x`, widening the storage first if `x` needs it; true if added.
    fn insert(&mut self, x: i64) -> bool {
        if let Some(added) = with_vec!(self, v => insert_sorted(v, x)) {
            return added;
        }
        *self = match (&*self, i32::try_from(x).is_ok()) {
            (IntSet::W16(v), true) => IntSet::W32(widen(v)),
            (IntSet::W16(v), false) => IntSet::W64(widen(v)),
            (IntSet::W32(v), _) => IntSet::W64(widen(v)),
            (IntSet::W64(_), _) => unreachable!("every i64 fits the widest intset"),
        };
        // A value that needs the new width is beyond every current member.
        with_vec!(self, v => insert_sorted(v, x)).unwrap_or(false)
    }

    fn remove(&mut self, x: i64) -> bool {
        with_vec!(self, v => remove_sorted(v, x))
    }

    /// Removes and returns the `i`-th smallest member (`i < len`).
    fn remove_at(&mut self, i: usize) -> i64 {
        with_vec!(self, v => v.remove(i).into_i64())
    }

    fn heap_bytes(&self) -> usize {
        with_vec!(self, v => capacity_bytes(v))
    }
}

impl Default for IntSet {
    fn default() -> Self {
        IntSet::W16(Vec::new())
    }
}

/// The hashtable encoding: member bytes as keys, no values.
type Table = Dict<SmallBytes, ()>;

/// A set's current encoding.
#[derive(Clone)]
enum Repr {
    Ints(IntSet),
    Table(Table),
}

/// A Redis set value.
#[derive(Clone, Default)]
pub struct Set {
    repr: Repr,
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Ints(IntSet::default())
    }
}

impl fmt::Debug for Set {
    /// Formats the members as a set, with the encoding name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let members: Vec<Vec<u8>> = self.iter().map(|m| m.to_vec()).collect();
        f.debug_struct("Set")
            .field("encoding", &self.encoding_name())
            .field("members", &members)
            .finish()
    }
}

impl PartialEq for Set {
    /// Sets are equal when they have the same members, whatever their
    /// encodings.
    fn eq(&self, other: &Set) -> bool {
        self.len() == other.len() && self.iter().all(|m| other.contains_member(m))
    }
}

/// Adds `member` to a hashtable (no-op if present); true if added.
fn table_insert(t: &mut Table, member: &[u8]) -> bool {
    let before = t.len();
    t.get_or_insert_with(hash_key(member), member, || (SmallBytes::new(member), ()));
    t.len() > before
}

impl Set {
    /// An empty set in the intset encoding (Redis's `createIntsetObject`).
    pub fn new() -> Set {
        Set::default()
    }

    /// An empty set whose encoding can hold `first` (Redis's
    /// `setTypeCreate`): an intset for a canonical integer, otherwise a
    /// hashtable.
    pub fn for_member(first: &[u8]) -> Set {
        if parse_i64(first).is_some() {
            Set::new()
        } else {
            Set {
                repr: Repr::Table(Table::new()),
            }
        }
    }

    /// The encoding name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        match self.repr {
            Repr::Ints(_) => "intset",
            Repr::Table(_) => "hashtable",
        }
    }

    /// Heap bytes owned by the value.
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Ints(s) => s.heap_bytes(),
            Repr::Table(t) => {
                t.overhead_bytes() + t.iter().map(|(k, _)| k.heap_bytes()).sum::<usize>()
            }
        }
    }

    /// Number of members (SCARD).
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Ints(s) => s.len(),
            Repr::Table(t) => t.len(),
        }
    }

    /// True when the set has no members (the keyspace never keeps such a
    /// set).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Starts loading level `depth` (0 the bucket, 1 the slot, 2 the
    /// member's bytes) of where the member hashed to `hash` lives (see
    /// [`Keyspace::prefetch_members`](crate::keyspace::Keyspace::prefetch_members)).
    /// False when there is nothing to load: an intset is one block.
    pub(crate) fn prefetch_member(&self, hash: u64, depth: u8) -> bool {
        match &self.repr {
            Repr::Table(t) => {
                // A short member is in the slot itself: depth 1 loaded it.
                t.prefetch(hash, depth, |m| {
                    if let SmallBytes::Heap(b) = m {
                        prefetch_read(b.as_ptr());
                    }
                });
                true
            }
            Repr::Ints(_) => false,
        }
    }

    /// True if `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        match &self.repr {
            Repr::Ints(s) => parse_i64(member).is_some_and(|x| s.contains(x)),
            Repr::Table(t) => t.contains_key(hash_key(member), member),
        }
    }

    /// True if `member` (taken from another set) is in this one.
    pub fn contains_member(&self, member: Member<&[u8]>) -> bool {
        match (&self.repr, member) {
            (Repr::Ints(s), Member::Int(x)) => s.contains(x),
            (_, m) => self.contains(m.as_bytes(&mut itoa::Buffer::new())),
        }
    }

    /// Adds `member`; true if it was not there yet. The set becomes a
    /// hashtable when the member is not an integer or the intset would
    /// exceed `max_intset` entries (`set-max-intset-entries`).
    pub fn insert(&mut self, member: &[u8], max_intset: usize) -> bool {
        match &mut self.repr {
            Repr::Table(t) => table_insert(t, member),
            Repr::Ints(_) => match parse_i64(member) {
                Some(x) => self.insert_int(x, max_intset),
                None => {
                    let t = self.ensure_table();
                    table_insert(t, member)
                }
            },
        }
    }

    /// Adds a member taken from another set, without a round trip through
    /// text for integers going into an intset. Same rules as
    /// [`Set::insert`].
    pub fn insert_member(&mut self, member: Member<&[u8]>, max_intset: usize) -> bool {
        match member {
            Member::Int(x) => self.insert_int(x, max_intset),
            Member::Bytes(b) => self.insert(b, max_intset),
        }
    }

    /// Adds the integer `x`.
    fn insert_int(&mut self, x: i64, max_intset: usize) -> bool {
        match &mut self.repr {
            Repr::Ints(s) => {
                if !s.insert(x) {
                    return false;
                }
                if s.len() > max_intset.min(INTSET_MAX_ENTRIES_CAP) {
                    self.ensure_table();
                }
                true
            }
            Repr::Table(t) => table_insert(t, itoa::Buffer::new().format(x).as_bytes()),
        }
    }

    /// Converts an intset to a hashtable (no-op for a hashtable) and returns
    /// the table.
    fn ensure_table(&mut self) -> &mut Table {
        if let Repr::Ints(s) = &self.repr {
            let mut t = Table::new();
            t.reserve(s.len());
            let mut buf = itoa::Buffer::new();
            for i in 0..s.len() {
                let b = buf.format(s.get(i)).as_bytes();
                t.insert(hash_key(b), SmallBytes::new(b), ());
            }
            self.repr = Repr::Table(t);
        }
        match &mut self.repr {
            Repr::Table(t) => t,
            Repr::Ints(_) => unreachable!("converted above"),
        }
    }

    /// Removes `member`; true if it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Ints(s) => parse_i64(member).is_some_and(|x| s.remove(x)),
            Repr::Table(t) => t.remove(hash_key(member), member).is_some(),
        }
    }

    /// Iterates over the members: ascending for an intset, unspecified
    /// order for a hashtable.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            inner: match &self.repr {
                Repr::Ints(s) => IterInner::Ints(s, 0..s.len()),
                Repr::Table(t) => IterInner::Table(Box::new(t.iter())),
            },
        }
    }

    /// A uniformly random member, or None if the set is empty.
    pub fn random(&self, rng: &mut fastrand::Rng) -> Option<Member<&[u8]>> {
        match &self.repr {
            Repr::Ints(s) if s.len() == 0 => None,
            Repr::Ints(s) => Some(Member::Int(s.get(rng.usize(..s.len())))),
            Repr::Table(t) => t
                .random_entry(rng)
                .map(|(k, _)| Member::Bytes(k.as_bytes())),
        }
    }

    /// Removes and returns a uniformly random member (SPOP), or None if the
    /// set is empty.
    pub fn pop_random(&mut self, rng: &mut fastrand::Rng) -> Option<Member<Box<[u8]>>> {
        match &mut self.repr {
            Repr::Ints(s) if s.len() == 0 => None,
            Repr::Ints(s) => Some(Member::Int(s.remove_at(rng.usize(..s.len())))),
            Repr::Table(t) => {
                let key: Box<[u8]> = t.random_entry(rng)?.0.as_bytes().into();
                t.remove(hash_key(&key), &key).map(|_| Member::Bytes(key))
            }
        }
    }

    /// Removes `count` random members (SPOP with a count), which must be
    /// fewer than the set has, reporting each to `f`.
    ///
    /// As Redis does, when few members remain the survivors are moved to a
    /// new set (created for its first member, like `setTypeCreate`, so a
    /// hashtable of integers may become an intset again) and the members
    /// left behind are reported in the old set's order.
    pub fn pop_random_many(
        &mut self,
        count: usize,
        rng: &mut fastrand::Rng,
        max_intset: usize,
        mut f: impl FnMut(Member<&[u8]>),
    ) {
        debug_assert!(count < self.len());
        let remaining = self.len().saturating_sub(count);
        if remaining.saturating_mul(SPOP_MOVE_STRATEGY_MUL) > count {
            for _ in 0..count {
                if let Some(m) = self.pop_random(rng) {
                    f(m.borrowed());
                }
            }
            return;
        }
        let mut survivors: Option<Set> = None;
        for _ in 0..remaining {
            let Some(m) = self.pop_random(rng) else { break };
            let mut buf = itoa::Buffer::new();
            let bytes = m.as_bytes(&mut buf);
            survivors
                .get_or_insert_with(|| Set::for_member(bytes))
                .insert(bytes, max_intset);
        }
        let popped = std::mem::replace(self, survivors.unwrap_or_default());
        popped.iter().for_each(f);
    }

    /// Reports `count` distinct random members to `f` (SRANDMEMBER with a
    /// positive count); the whole set in its iteration order when `count`
    /// is at least its size.
    pub fn random_distinct(
        &self,
        count: usize,
        rng: &mut fastrand::Rng,
        mut f: impl FnMut(Member<&[u8]>),
    ) {
        let size = self.len();
        if count >= size {
            self.iter().for_each(f);
        } else if count.saturating_mul(SRANDMEMBER_SUB_STRATEGY_MUL) > size {
            // A partial Fisher-Yates shuffle of all the members.
            let mut all: Vec<Member<&[u8]>> = self.iter().collect();
            for i in 0..count {
                all.swap(i, rng.usize(i..size));
            }
            all.into_iter().take(count).for_each(f);
        } else {
            let mut seen: HashSet<Member<&[u8]>> = HashSet::with_capacity(count);
            while seen.len() < count {
                match self.random(rng) {
                    Some(m) => {
                        if seen.insert(m) {
                            f(m);
                        }
                    }
                    None => break,
                }
            }
        }
    }

    /// One step of SSCAN: reports members to `f` and returns the next
    /// cursor (0 when done). An intset is reported whole in one call, as in
    /// Redis; a hashtable goes through [`Dict::scan`] with `count`.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(Member<&[u8]>)) -> u64 {
        match &self.repr {
            Repr::Ints(_) => {
                self.iter().for_each(f);
                0
            }
            Repr::Table(t) => t.scan(cursor, count, |k, _| f(Member::Bytes(k.as_bytes()))),
        }
    }

    /// Reports each member common to all `sets` to `f` until `f` returns
    /// false (SINTER, SINTERSTORE, SINTERCARD). The smallest set is walked,
    /// so members come in its iteration order (ascending when it is an
    /// intset). No sets means no members.
    pub fn intersect_each<'a>(sets: &[&'a Set], mut f: impl FnMut(Member<&'a [u8]>) -> bool) {
        let mut sorted: Vec<&Set> = sets.to_vec();
        sorted.sort_by_key(|s| s.len());
        let Some((&first, rest)) = sorted.split_first() else {
            return;
        };
        for m in first.iter() {
            let everywhere = rest
                .iter()
                .all(|s| std::ptr::eq(*s, first) || s.contains_member(m));
            if everywhere && !f(m) {
                return;
            }
        }
    }

    /// The union of `sets`, built from an empty intset as Redis does (so an
    /// all-integer result within `max_intset` is an intset).
    pub fn union<'a>(sets: impl IntoIterator<Item = &'a Set>, max_intset: usize) -> Set {
        let mut out = Set::new();
        for s in sets {
            for m in s.iter() {
                out.insert_member(m, max_intset);
            }
        }
        out
    }

    /// The members of `first` that are in none of `others`, built from an
    /// empty intset as Redis does. Like Redis it either filters `first`
    /// through the others or copies it and removes theirs, whichever is
    /// estimated to be less work.
    pub fn difference(first: &Set, others: &[&Set], max_intset: usize) -> Set {
        if others.iter().any(|s| std::ptr::eq(*s, first)) {
            return Set::new();
        }
        let filter_work = first.len().saturating_mul(others.len() + 1) / 2;
        let remove_work = others
            .iter()
            .fold(first.len(), |w, s| w.saturating_add(s.len()));
        if filter_work <= remove_work {
            let mut by_size: Vec<&Set> = others.to_vec();
            by_size.sort_by_key(|s| std::cmp::Reverse(s.len()));
            let mut out = Set::new();
            for m in first.iter() {
                if !by_size.iter().any(|s| s.contains_member(m)) {
                    out.insert_member(m, max_intset);
                }
            }
            out
        } else {
            let mut out = Set::union([first], max_intset);
            let mut buf = itoa::Buffer::new();
            for s in others {
                if out.is_empty() {
                    break;
                }
                for m in s.iter() {
                    out.remove(m.as_bytes(&mut buf));
                }
            }
            out
        }
    }
}

/// Iterator over a set's members, from [`Set::iter`].
pub struct Iter<'a> {
    inner: IterInner<'a>,
}

enum IterInner<'a> {
    Ints(&'a IntSet, std::ops::Range<usize>),
    Table(Box<dyn ExactSizeIterator<Item = (&'a SmallBytes, &'a ())> + 'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = Member<&'a [u8]>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            IterInner::Ints(s, range) => range.next().map(|i| Member::Int(s.get(i))),
            IterInner::Table(it) => it.next().map(|(k, _)| Member::Bytes(k.as_bytes())),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.inner {
            IterInner::Ints(_, range) => range.size_hint(),
            IterInner::Table(it) => it.size_hint(),
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 512;

    fn members(s: &Set) -> Vec<Vec<u8>> {
        s.iter().map(|m| m.to_vec()).collect()
    }

    fn sorted(s: &Set) -> Vec<Vec<u8>> {
        let mut v = members(s);
        v.sort();
        v
    }

    fn set_of(items: &[&str]) -> Set {
        let mut s = Set::for_member(items[0].as_bytes());
        for i in items {
            s.insert(i.as_bytes(), MAX);
        }
        s
    }

    fn b(items: &[&str]) -> Vec<Vec<u8>> {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn intset_keeps_members_sorted_and_widens() {
        let mut s = Set::new();
        for x in ["5", "-3", "100", "5", "0"] {
            s.insert(x.as_bytes(), MAX);
        }
        assert_eq!(s.encoding_name(), "intset");
        assert_eq!(members(&s), b(&["-3", "0", "5", "100"]));
        assert!(matches!(s.repr, Repr::Ints(IntSet::W16(_))));
        assert!(s.insert(b"70000", MAX));
        assert!(matches!(s.repr, Repr::Ints(IntSet::W32(_))));
        assert!(s.insert(b"-9223372036854775808", MAX));
        assert!(matches!(s.repr, Repr::Ints(IntSet::W64(_))));
        assert!(s.insert(b"32767", MAX));
        assert_eq!(
            members(&s),
            b(&[
                "-9223372036854775808",
                "-3",
                "0",
                "5",
                "100",
                "32767",
                "70000"
            ])
        );
        // Removing the wide member does not narrow the storage.
        assert!(s.remove(b"-9223372036854775808"));
        assert!(matches!(s.repr, Repr::Ints(IntSet::W64(_))));
        assert!(s.contains(b"70000"));
        assert!(!s.contains(b"070000"));
        assert!(!s.contains(b"4000000000"));
        assert!(!s.remove(b"abc"));
        assert_eq!(s.len(), 6);
    }

    #[test]
    fn intset_converts_on_non_integer_and_on_size() {
        let mut s = set_of(&["1", "2"]);
        assert_eq!(s.encoding_name(), "intset");
        // Not canonical integers: they need the hashtable.
        assert!(s.insert(b"01", MAX));
        assert_eq!(s.encoding_name(), "hashtable");
        assert_eq!(sorted(&s), b(&["01", "1", "2"]));
        assert!(s.contains(b"1") && s.contains(b"01") && !s.contains(b"3"));
        // Never converts back.
        assert!(s.remove(b"01"));
        assert_eq!(s.encoding_name(), "hashtable");

        let mut s = Set::new();
        for i in 0..4 {
            s.insert(i.to_string().as_bytes(), 4);
        }
        assert_eq!(s.encoding_name(), "intset");
        assert!(!s.insert(b"3", 4));
        assert_eq!(s.encoding_name(), "intset");
        s.insert(b"4", 4);
        assert_eq!(s.encoding_name(), "hashtable");
        assert_eq!(sorted(&s), b(&["0", "1", "2", "3", "4"]));

        // A limit of 0: even one integer needs the hashtable.
        let mut s = Set::for_member(b"7");
        s.insert(b"7", 0);
        assert_eq!(s.encoding_name(), "hashtable");
        assert_eq!(Set::for_member(b"x").encoding_name(), "hashtable");
    }

    #[test]
    fn hashtable_membership_and_removal() {
        let mut s = set_of(&["a", "b", "c"]);
        assert_eq!(s.encoding_name(), "hashtable");
        assert!(!s.insert(b"a", MAX));
        assert!(s.insert(b"", MAX));
        assert!(s.contains(b""));
        assert!(s.remove(b"b"));
        assert!(!s.remove(b"b"));
        assert_eq!(sorted(&s), b(&["", "a", "c"]));
        assert!(s.heap_bytes() > 0);
        assert_eq!(s, set_of(&["c", "", "a"]));
        assert_ne!(s, set_of(&["c", "a"]));
    }

    #[test]
    fn equality_ignores_encoding() {
        let small = set_of(&["1", "2"]);
        let mut big = set_of(&["x", "1", "2"]);
        big.remove(b"x");
        assert_eq!(small, big);
        assert_eq!(
            format!("{small:?}"),
            "Set { encoding: \"intset\", members: [[49], [50]] }"
        );
    }

    #[test]
    fn random_and_pop_cover_every_member() {
        let mut rng = fastrand::Rng::with_seed(7);
        for items in [&["1", "2", "3"][..], &["a", "b", "c"][..]] {
            let s = set_of(items);
            let mut seen = HashSet::new();
            for _ in 0..200 {
                seen.insert(s.random(&mut rng).unwrap().to_vec());
            }
            assert_eq!(seen.len(), 3);
            let mut s = s;
            let mut popped = Vec::new();
            while let Some(m) = s.pop_random(&mut rng) {
                popped.push(m.to_vec());
            }
            popped.sort();
            assert_eq!(popped, b(items));
            assert!(s.is_empty() && s.random(&mut rng).is_none());
        }
    }

    #[test]
    fn pop_many_both_strategies() {
        let mut rng = fastrand::Rng::with_seed(1);
        let all: Vec<String> = (0..20).map(|i| i.to_string()).collect();
        for count in [1, 3, 16, 18, 19] {
            let mut s = Set::new();
            for x in &all {
                s.insert(x.as_bytes(), MAX);
            }
            let mut got = Vec::new();
            s.pop_random_many(count, &mut rng, MAX, |m| got.push(m.to_vec()));
            assert_eq!(got.len(), count);
            assert_eq!(s.len(), 20 - count);
            got.extend(members(&s));
            got.sort();
            let mut want: Vec<Vec<u8>> = all.iter().map(|x| x.as_bytes().to_vec()).collect();
            want.sort();
            assert_eq!(got, want, "count {count}");
        }
        // The move strategy rebuilds the survivors with setTypeCreate rules:
        // a hashtable of integers becomes an intset.
        let mut s = set_of(&["x", "1", "2", "3", "4", "5", "6"]);
        s.remove(b"x");
        s.pop_random_many(5, &mut rng, MAX, |_| {});
        assert_eq!((s.len(), s.encoding_name()), (1, "intset"));
        // Popping a few keeps the encoding.
        let mut s = set_of(&["x", "1", "2", "3", "4", "5", "6"]);
        s.remove(b"x");
        s.pop_random_many(1, &mut rng, MAX, |_| {});
        assert_eq!((s.len(), s.encoding_name()), (5, "hashtable"));
    }

    #[test]
    fn random_distinct_all_strategies() {
        let mut rng = fastrand::Rng::with_seed(3);
        let words: Vec<String> = (0..30).map(|i| format!("w{i}")).collect();
        let refs: Vec<&str> = words.iter().map(|s| s.as_str()).collect();
        let s = set_of(&refs);
        for count in [1, 5, 11, 29, 30, 100] {
            let mut got = Vec::new();
            s.random_distinct(count, &mut rng, |m| got.push(m.to_vec()));
            assert_eq!(got.len(), count.min(30));
            let uniq: HashSet<_> = got.iter().collect();
            assert_eq!(uniq.len(), got.len());
            assert!(got.iter().all(|m| s.contains(m)));
        }
        // The whole intset comes in ascending order.
        let ints = set_of(&["3", "1", "2"]);
        let mut got = Vec::new();
        ints.random_distinct(3, &mut rng, |m| got.push(m.to_vec()));
        assert_eq!(got, b(&["1", "2", "3"]));
    }

    #[test]
    fn scan_reports_everything() {
        let ints = set_of(&["3", "1"]);
        let mut got = Vec::new();
        assert_eq!(ints.scan(0, 1, |m| got.push(m.to_vec())), 0);
        assert_eq!(got, b(&["1", "3"]));

        let mut big = Set::new();
        for i in 0..1000 {
            big.insert(format!("m{i}").as_bytes(), MAX);
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        loop {
            cursor = big.scan(cursor, 10, |m| {
                seen.insert(m.to_vec());
            });
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 1000);
    }

    /// Members for the model test: small and wide integers, non-canonical
    /// integers and plain strings.
    fn pool_member(i: u8) -> Vec<u8> {
        match i % 16 {
            0..=7 => (i64::from(i) - 20).to_string().into_bytes(),
            8 => b"70000".to_vec(),
            9 => b"-9223372036854775808".to_vec(),
            10 => b"4294967296".to_vec(),
            11 => b"01".to_vec(),
            12 => b"".to_vec(),
            _ => format!("m{}", i % 5).into_bytes(),
        }
    }

    proptest::proptest! {
        #[test]
        fn behaves_like_a_model(
            ops in proptest::collection::vec((proptest::bool::ANY, 0u8..64), 1..200),
            max in 0usize..8,
        ) {
            let mut s = Set::new();
            let mut model = std::collections::BTreeSet::new();
            for (add, i) in ops {
                let m = pool_member(i);
                if add {
                    proptest::prop_assert_eq!(s.insert(&m, max), model.insert(m.clone()));
                } else {
                    proptest::prop_assert_eq!(s.remove(&m), model.remove(&m));
                }
                proptest::prop_assert_eq!(s.len(), model.len());
                proptest::prop_assert!(s.contains(&m) == model.contains(&m));
                if s.encoding_name() == "intset" {
                    proptest::prop_assert!(s.len() <= max);
                    let ints: Vec<i64> = s
                        .iter()
                        .map(|m| match m {
                            Member::Int(v) => v,
                            Member::Bytes(_) => i64::MIN,
                        })
                        .collect();
                    proptest::prop_assert!(ints.windows(2).all(|w| w[0] < w[1]));
                }
            }
            let got: std::collections::BTreeSet<Vec<u8>> = members(&s).into_iter().collect();
            proptest::prop_assert_eq!(got, model);
        }
    }

    #[test]
    fn set_algebra() {
        let a = set_of(&["1", "2", "3", "4"]);
        let b2 = set_of(&["4", "3", "x"]);
        let c = set_of(&["3", "4", "5"]);

        let mut inter = Vec::new();
        Set::intersect_each(&[&b2, &a, &c], |m| {
            inter.push(m.to_vec());
            true
        });
        inter.sort();
        assert_eq!(inter, b(&["3", "4"]));
        // The smallest set is an intset here: ascending order.
        let mut inter = Vec::new();
        Set::intersect_each(&[&a, &c], |m| {
            inter.push(m.to_vec());
            true
        });
        assert_eq!(inter, b(&["3", "4"]));
        let mut n = 0;
        Set::intersect_each(&[&a, &a], |_| {
            n += 1;
            n < 2
        });
        assert_eq!(n, 2);

        let u = Set::union([&a, &c], MAX);
        assert_eq!(
            (u.encoding_name(), members(&u)),
            ("intset", b(&["1", "2", "3", "4", "5"]))
        );
        let u = Set::union([&a, &b2], MAX);
        assert_eq!(u.encoding_name(), "hashtable");
        assert_eq!(sorted(&u), b(&["1", "2", "3", "4", "x"]));
        assert_eq!(Set::union([&a, &c], 3).encoding_name(), "hashtable");

        let d = Set::difference(&a, &[&b2], MAX);
        assert_eq!((d.encoding_name(), members(&d)), ("intset", b(&["1", "2"])));
        // Integers out of a hashtable make an intset result.
        let d = Set::difference(&b2, &[&set_of(&["x"])], MAX);
        assert_eq!((d.encoding_name(), members(&d)), ("intset", b(&["3", "4"])));
        assert!(Set::difference(&a, &[&c, &a], MAX).is_empty());
        // The copy-and-remove strategy (first set large, others small).
        let mut big = Set::new();
        for i in 0..100 {
            big.insert(i.to_string().as_bytes(), MAX);
        }
        let d = Set::difference(&big, &[&a, &c, &set_of(&["7"]), &set_of(&["8"])], MAX);
        assert_eq!(d.len(), 93);
        assert!(!d.contains(b"5") && d.contains(b"6") && !d.contains(b"8"));
    }
}
