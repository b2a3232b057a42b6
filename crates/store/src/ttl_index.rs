//! Which keys of a table have a TTL, for active expiry and the `volatile-*`
//! eviction policies, without a second copy of the keys.
//!
//! Redis keeps a second dictionary (`db->expires`, about 32 bytes per key
//! with a TTL) whose entries point at the keys. A [`TtlIndex`] records only
//! the low 32 bits of each such key's hash, in an open-addressing table of
//! four-byte slots at most 7/8 full: 4.6 to 6.9 bytes per key as it grows. Two keys may
//! share those bits, so the table is a multiset (a tag is stored once per
//! key). Finding the keys behind a sampled tag is one probe of the key
//! table ([`crate::key_table::KeyTable::with_hash`]), the same walk a
//! lookup does.

use crate::open_table::{OpenTable, Probed};

/// A multiset of the low 32 bits of the hashes of keys that have a TTL.
///
/// An [`OpenTable`] of tags: zero marks an empty slot, so keys whose tag
/// is zero are only counted.
#[derive(Default)]
pub(crate) struct TtlIndex {
    tags: OpenTable<u32>,
    /// Keys with a TTL whose tag is zero.
    zeros: usize,
}

impl Probed for u32 {
    const EMPTY: u32 = 0;
    const FULL_EIGHTHS: usize = 7;
    fn tag(&self) -> u32 {
        *self
    }
}

/// The tag stored for `hash`: the bits every table keeps.
fn tag(hash: u64) -> u32 {
    hash as u32
}

impl TtlIndex {
    /// Keys with a TTL.
    pub(crate) fn len(&self) -> usize {
        self.tags.len() + self.zeros
    }

    /// True when no key has a TTL.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records a key with hash `hash` that gained a TTL.
    pub(crate) fn add(&mut self, hash: u64) {
        match tag(hash) {
            0 => self.zeros += 1,
            t => self.tags.insert(t),
        }
    }

    /// Forgets one key with hash `hash` that lost its TTL (or was deleted).
    pub(crate) fn remove(&mut self, hash: u64) {
        let found = match tag(hash) {
            0 => self.zeros.checked_sub(1).map(|z| self.zeros = z),
            t => self.find(t).map(|i| self.tags.remove_at(i)),
        };
        debug_assert!(found.is_some(), "TTL index lost a hash");
    }

    /// The slot holding (one copy of) `t`.
    fn find(&self, t: u32) -> Option<usize> {
        self.tags.position(t, |_| true)
    }

    /// A step of a walk over the recorded hashes: calls `f` with the tags
    /// of up to `count` slots from `cursor` on (and with hash 0 at the
    /// start, when a key has that tag); returns the next cursor, 0 when
    /// the walk is done. A walk that spans a resize may skip or repeat
    /// some, which active expiry tolerates.
    pub(crate) fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(u64)) -> u64 {
        if cursor == 0 && self.zeros > 0 {
            f(0);
        }
        let start = cursor as usize;
        let slots = self.tags.slots();
        let end = start.saturating_add(count.max(1)).min(slots.len());
        for &t in slots.get(start..end).unwrap_or(&[]) {
            if t != 0 {
                f(u64::from(t));
            }
        }
        if end >= slots.len() {
            0
        } else {
            end as u64
        }
    }

    /// Calls `f` with about `n` recorded hashes: those of a run of slots
    /// starting at a random one (as Redis's `dictGetSomeKeys`).
    pub(crate) fn sample(&self, rng: &mut fastrand::Rng, n: usize, mut f: impl FnMut(u64)) {
        if self.is_empty() {
            return;
        }
        let stored = self.tags.len();
        if stored == 0 {
            return f(0);
        }
        let slots = self.tags.slots();
        let mut i = rng.usize(..slots.len());
        let mut seen = 0;
        // The table holds `stored` tags, so this visits at most every slot.
        for _ in 0..slots.len() {
            let t = slots[i];
            if t != 0 {
                f(u64::from(t));
                seen += 1;
                if seen >= n.min(stored) {
                    return;
                }
            }
            i = if i + 1 == slots.len() { 0 } else { i + 1 };
        }
    }

    /// One recorded hash picked at random.
    pub(crate) fn random(&self, rng: &mut fastrand::Rng) -> Option<u64> {
        let mut picked = None;
        self.sample(rng, 1, |h| picked = Some(h));
        picked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Every recorded hash, one per key, in order.
    fn walk(ix: &TtlIndex, step: usize) -> Vec<u64> {
        let mut seen = Vec::new();
        let mut c = 0;
        loop {
            c = ix.scan(c, step, |h| seen.push(h));
            if c == 0 {
                break;
            }
        }
        seen.sort_unstable();
        seen
    }

    #[test]
    fn counts_shared_hashes() {
        let mut ix = TtlIndex::default();
        ix.add(0xdead_beef_0000_0001);
        ix.add(0x0000_0000_0000_0001);
        ix.add(7);
        ix.add(0xffff_0000_0000_0000);
        assert_eq!(ix.len(), 4);
        assert_eq!(walk(&ix, 3), vec![0, 1, 1, 7]);
        ix.remove(1);
        assert_eq!(ix.len(), 3);
        assert!(ix.random(&mut fastrand::Rng::with_seed(1)).is_some());
        ix.remove(0xffff_0000_0000_0001);
        ix.remove(7);
        assert_eq!(walk(&ix, 3), vec![0]);
        assert_eq!(ix.random(&mut fastrand::Rng::with_seed(1)), Some(0));
        ix.remove(0);
        assert!(ix.is_empty());
        assert_eq!(ix.random(&mut fastrand::Rng::with_seed(1)), None);
    }

    /// Random adds and removes over few distinct tags (long probe runs,
    /// wrap-around, duplicates, growing and shrinking), checked against a
    /// counted map after every step.
    #[test]
    fn matches_a_counted_map_under_churn() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut ix = TtlIndex::default();
        let mut model: HashMap<u64, usize> = HashMap::new();
        for step in 0..20_000 {
            // Tags clustered near the top of a small table so runs wrap.
            let hash = u64::from(rng.u32(..64)) | (u64::from(rng.u32(..4)) << 40);
            let tag = hash & 0xffff_ffff;
            let present = model.get(&tag).copied().unwrap_or(0);
            if present > 0 && (rng.bool() || step > 15_000) {
                ix.remove(hash);
                *model.get_mut(&tag).unwrap() -= 1;
            } else if step <= 15_000 {
                ix.add(hash);
                *model.entry(tag).or_default() += 1;
            }
            let total: usize = model.values().sum();
            assert_eq!(ix.len(), total);
            if step % 97 == 0 {
                let mut want: Vec<u64> = model
                    .iter()
                    // Tag zero is reported once, however many keys have it.
                    .flat_map(|(&t, &n)| std::iter::repeat_n(t, if t == 0 { n.min(1) } else { n }))
                    .collect();
                want.sort_unstable();
                assert_eq!(walk(&ix, 1 + step % 5), want, "step {step}");
                for (&t, &n) in model.iter().filter(|(&t, _)| t != 0) {
                    assert_eq!(n > 0, ix.find(t as u32).is_some(), "tag {t}");
                }
            }
        }
        assert!(ix.is_empty());
        assert!(ix.tags.slots().len() <= 8);
    }

    #[test]
    fn samples_come_from_the_index() {
        let mut ix = TtlIndex::default();
        for h in 1..=100u64 {
            ix.add(h << 3);
        }
        let mut rng = fastrand::Rng::with_seed(3);
        let mut got = Vec::new();
        ix.sample(&mut rng, 5, |h| got.push(h));
        assert_eq!(got.len(), 5);
        assert!(got.iter().all(|h| h % 8 == 0 && (8..=800).contains(h)));
    }
}
