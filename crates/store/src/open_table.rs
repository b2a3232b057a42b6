//! Linear probing over small fixed-size entries: the core of the tables
//! that keep hashes or ids rather than keys, [`crate::ttl_index`] (which
//! keys have a TTL) and the big sorted set's member index
//! ([`crate::zset`]).
//!
//! Each entry carries 32 bits of a hash, which pick its home slot by
//! multiplying them with the table's length (the top bits of the product,
//! Lemire's "fastrange"), so a table may have any length and grows by half
//! rather than doubling: its slots are 58-88% used after growing where a
//! doubling table's are 44-88%. At 1M keys with TTLs that took the TTL
//! index from 8.2 to 6.3 bytes per key (docs/performance-log.md, issue 6,
//! session 11). An entry sits in the first free slot at or after its home
//! (wrapping at the end), and removal shifts later entries of the run back
//! into the hole (no tombstones), so a probe always ends at the first empty
//! slot however many entries came and went.

/// An entry of an [`OpenTable`].
pub(crate) trait Probed: Copy + PartialEq {
    /// The value of an empty slot; never stored.
    const EMPTY: Self;
    /// Most entries per eight slots before the table grows.
    const FULL_EIGHTHS: usize;
    /// The hash bits this entry is placed by.
    fn tag(&self) -> u32;
}

/// Smallest non-empty table.
const MIN_SLOTS: usize = 8;

/// A linear-probing table of [`Probed`] entries; duplicates allowed. It
/// grows by half when more than [`Probed::FULL_EIGHTHS`] of its slots are
/// used and shrinks by a third when under an eighth.
#[derive(Clone, Debug)]
pub(crate) struct OpenTable<E> {
    slots: Vec<E>,
    len: usize,
}

impl<E> Default for OpenTable<E> {
    fn default() -> Self {
        OpenTable {
            slots: Vec::new(),
            len: 0,
        }
    }
}

impl<E: Probed> OpenTable<E> {
    /// Stored entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Every slot, empty ones included (`E::EMPTY`), for walks and samples
    /// that need stable positions.
    pub(crate) fn slots(&self) -> &[E] {
        &self.slots
    }

    /// The slot `tag` belongs in (the table has slots).
    fn home(&self, tag: u32) -> usize {
        ((u64::from(tag) * self.slots.len() as u64) >> 32) as usize
    }

    /// The slot after `i`, wrapping at the end.
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() {
            0
        } else {
            i + 1
        }
    }

    /// Slots from `from` forward to `to`, wrapping at the end.
    fn distance(&self, from: usize, to: usize) -> usize {
        if to >= from {
            to - from
        } else {
            to + self.slots.len() - from
        }
    }

    /// Adds `e` (which must not be `E::EMPTY`).
    pub(crate) fn insert(&mut self, e: E) {
        debug_assert!(e != E::EMPTY);
        if (self.len + 1) * 8 > self.slots.len() * E::FULL_EIGHTHS {
            self.resize((self.slots.len() + self.slots.len() / 2).max(MIN_SLOTS));
        }
        self.place(e);
        self.len += 1;
    }

    /// Puts `e` in the first free slot of its run (there is one: the table
    /// is never full).
    fn place(&mut self, e: E) {
        let mut i = self.home(e.tag());
        while self.slots[i] != E::EMPTY {
            i = self.next(i);
        }
        self.slots[i] = e;
    }

    /// Rebuilds the table with `slots` slots.
    fn resize(&mut self, slots: usize) {
        let old = std::mem::replace(&mut self.slots, vec![E::EMPTY; slots]);
        for e in old.into_iter().filter(|&e| e != E::EMPTY) {
            self.place(e);
        }
    }

    /// The entries that may have tag `tag`, with their slots: the run from
    /// its home slot to the first empty one.
    pub(crate) fn run(&self, tag: u32) -> impl Iterator<Item = (usize, &E)> {
        // Ends: a table always has an empty slot.
        let mut i = match self.slots.len() {
            0 => usize::MAX,
            _ => self.home(tag),
        };
        std::iter::from_fn(move || {
            let e = self.slots.get(i).filter(|e| **e != E::EMPTY)?;
            let at = i;
            i = self.next(i);
            Some((at, e))
        })
    }

    /// The slot of the first entry tagged `tag` that `eq` accepts.
    pub(crate) fn position(&self, tag: u32, mut eq: impl FnMut(&E) -> bool) -> Option<usize> {
        self.run(tag)
            .find(|(_, e)| e.tag() == tag && eq(e))
            .map(|(i, _)| i)
    }

    /// The home slot of `tag`, the first a lookup reads (for prefetching).
    pub(crate) fn home_slot(&self, tag: u32) -> Option<&E> {
        if self.slots.is_empty() {
            return None;
        }
        Some(&self.slots[self.home(tag)])
    }

    /// Removes the entry in slot `hole` (from [`OpenTable::position`]).
    pub(crate) fn remove_at(&mut self, mut hole: usize) {
        debug_assert!(self.slots[hole] != E::EMPTY);
        self.len -= 1;
        // Move later entries of the run into the hole when their home is at
        // or before it (cyclically), so every entry stays reachable from its
        // home without crossing an empty slot.
        let mut j = hole;
        loop {
            j = self.next(j);
            let moved = self.slots[j];
            if moved == E::EMPTY {
                break;
            }
            let home = self.home(moved.tag());
            if self.distance(home, j) >= self.distance(hole, j) {
                self.slots[hole] = moved;
                hole = j;
            }
        }
        self.slots[hole] = E::EMPTY;
        if self.slots.len() > MIN_SLOTS && self.len * 8 < self.slots.len() {
            self.resize((self.slots.len() * 2 / 3).max(MIN_SLOTS));
        }
    }

    /// Heap bytes of the slots.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<E>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Pair(u32, u32);

    impl Probed for Pair {
        const EMPTY: Pair = Pair(0, u32::MAX);
        const FULL_EIGHTHS: usize = 6;
        fn tag(&self) -> u32 {
            self.0
        }
    }

    /// Random inserts and removals over few distinct tags (long runs that
    /// wrap, shared tags, growing and shrinking), checked against a map
    /// after every step.
    #[test]
    fn matches_a_map_under_churn() {
        let mut rng = fastrand::Rng::with_seed(11);
        let mut t: OpenTable<Pair> = OpenTable::default();
        let mut model: HashMap<u32, u32> = HashMap::new();
        for step in 0..20_000u32 {
            let id = rng.u32(..300);
            // Tags clustered at the end of the table so runs wrap.
            let tag = u32::MAX - id % 7;
            if model.contains_key(&id) && (rng.bool() || step > 15_000) {
                let i = t.position(tag, |e| e.1 == id).expect("present");
                t.remove_at(i);
                model.remove(&id);
            } else if step <= 15_000 && !model.contains_key(&id) {
                t.insert(Pair(tag, id));
                model.insert(id, tag);
            }
            assert_eq!(t.len(), model.len());
            if step % 89 == 0 {
                for id in 0..300 {
                    let found = t.position(u32::MAX - id % 7, |e| e.1 == id);
                    assert_eq!(
                        found.is_some(),
                        model.contains_key(&id),
                        "id {id} step {step}"
                    );
                }
                let stored = t.slots().iter().filter(|e| **e != Pair::EMPTY).count();
                assert_eq!(stored, model.len());
            }
        }
        assert_eq!(t.len(), 0);
        assert!(t.slots().len() <= MIN_SLOTS);
    }

    #[test]
    fn empty_table_has_no_run_and_no_home() {
        let t: OpenTable<Pair> = OpenTable::default();
        assert_eq!(t.run(5).count(), 0);
        assert!(t.home_slot(5).is_none());
        assert_eq!(t.position(5, |_| true), None);
    }

    #[test]
    fn home_slot_is_where_a_lone_entry_goes() {
        let mut t: OpenTable<Pair> = OpenTable::default();
        let (tag, other) = (u32::MAX / 3, u32::MAX / 3 * 2);
        t.insert(Pair(tag, 1));
        assert_eq!(t.home_slot(tag), Some(&Pair(tag, 1)));
        assert_eq!(t.home_slot(other), Some(&Pair::EMPTY));
    }
}
