//! Which keys of a table have a TTL, for active expiry and the `volatile-*`
//! eviction policies, without a second copy of the keys.
//!
//! Redis keeps a second dictionary (`db->expires`) whose entries point at
//! the keys; Vireo's first version kept a second table of key copies, about
//! 47 bytes per key with a TTL. A [`TtlIndex`] records only the 32-bit hash
//! the key table already stores per entry (with a count, as two keys of one
//! shard may share it): about 20 bytes per key. Finding the keys behind a
//! sampled hash is one bucket chain of the key table
//! ([`crate::dict::Dict::with_hash`]), the same walk a lookup does.

use crate::dict::Dict;

/// A multiset of the low 32 bits of the hashes of keys that have a TTL.
#[derive(Default)]
pub(crate) struct TtlIndex {
    /// Hash (its four bytes) → how many keys with a TTL have it.
    tags: Dict<[u8; 4], u32>,
    /// Keys with a TTL (the sum of the counts).
    len: usize,
}

/// The tag stored for `hash`: the bits every table keeps.
fn tag(hash: u64) -> [u8; 4] {
    (hash as u32).to_le_bytes()
}

/// The key-table hash a tag stands for (the low 32 bits are all a table
/// looks at).
pub(crate) fn tag_hash(tag: &[u8; 4]) -> u64 {
    u64::from(u32::from_le_bytes(*tag))
}

impl TtlIndex {
    /// Keys with a TTL.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// True when no key has a TTL.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Records a key with hash `hash` that gained a TTL.
    pub(crate) fn add(&mut self, hash: u64) {
        let t = tag(hash);
        *self
            .tags
            .get_or_insert_with(tag_hash(&t), &t[..], || (t, 0)) += 1;
        self.len += 1;
    }

    /// Forgets one key with hash `hash` that lost its TTL (or was deleted).
    pub(crate) fn remove(&mut self, hash: u64) {
        let t = tag(hash);
        let h = tag_hash(&t);
        let Some(count) = self.tags.get_mut(h, &t) else {
            debug_assert!(false, "TTL index lost a hash");
            return;
        };
        *count -= 1;
        if *count == 0 {
            self.tags.remove(h, &t);
        }
        self.len -= 1;
    }

    /// SCAN-style step over the recorded hashes (see [`Dict::scan`]): calls
    /// `f` with each hash; returns the next cursor, 0 when done.
    pub(crate) fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(u64)) -> u64 {
        self.tags.scan(cursor, count, |t, _| f(tag_hash(t)))
    }

    /// Calls `f` with about `n` recorded hashes picked at random.
    pub(crate) fn sample(&self, rng: &mut fastrand::Rng, n: usize, mut f: impl FnMut(u64)) {
        self.tags.sample(rng, n, |t, _| f(tag_hash(t)));
    }

    /// One recorded hash picked at random.
    pub(crate) fn random(&self, rng: &mut fastrand::Rng) -> Option<u64> {
        self.tags.random_entry(rng).map(|(t, _)| tag_hash(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_shared_hashes() {
        let mut ix = TtlIndex::default();
        ix.add(0xdead_beef_0000_0001);
        ix.add(0x0000_0000_0000_0001);
        ix.add(7);
        assert_eq!(ix.len(), 3);
        let mut seen = Vec::new();
        let mut c = 0;
        loop {
            c = ix.scan(c, 10, |h| seen.push(h));
            if c == 0 {
                break;
            }
        }
        seen.sort();
        assert_eq!(seen, vec![1, 7]);
        ix.remove(1);
        assert_eq!(ix.len(), 2);
        assert!(ix.random(&mut fastrand::Rng::with_seed(1)).is_some());
        ix.remove(0xffff_0000_0000_0001);
        ix.remove(7);
        assert!(ix.is_empty());
        assert_eq!(ix.random(&mut fastrand::Rng::with_seed(1)), None);
    }
}
