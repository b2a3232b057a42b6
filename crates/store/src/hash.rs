//! The hash type and its two encodings.
//!
//! * `listpack` — small hashes: one packed byte buffer of field/value pairs
//!   in insertion order, each string stored as a LEB128 length followed by
//!   its bytes (one byte of overhead for strings shorter than 128 bytes).
//!   Lookups are linear scans, as in Redis's listpack.
//! * `hashtable` — large hashes: a [`Dict`] whose entries are single
//!   allocations holding the field and the value together (a length prefix,
//!   the field, then the value), so a field costs one allocation plus a
//!   24-byte table slot.
//!
//! A hash starts as a listpack and becomes a hashtable, for good, once it
//! holds more than `hash-max-listpack-entries` fields, a field or value
//! longer than `hash-max-listpack-value` bytes is stored, or the buffer would
//! exceed Redis's listpack safety limit (1 GiB). Redis 7.0 never converts
//! back.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;

use crate::dict::{hash_key, prefetch_read, Dict};

/// Largest listpack Redis builds (`LISTPACK_MAX_SAFETY_SIZE`); a hash whose
/// buffer would grow beyond it is converted to a hashtable.
const LISTPACK_MAX_BYTES: usize = 1 << 30;

/// Below this ratio of hash size to requested distinct picks, random
/// distinct picks copy the whole hash and shuffle instead of sampling with
/// rejection (Redis's `HRANDFIELD_SUB_STRATEGY_MUL`).
const SUB_STRATEGY_MUL: usize = 3;

/// The listpack → hashtable conversion thresholds, from
/// `hash-max-listpack-entries` and `hash-max-listpack-value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashLimits {
    /// Most fields a listpack-encoded hash may hold.
    pub max_entries: usize,
    /// Longest field or value (in bytes) a listpack-encoded hash may hold.
    pub max_value: usize,
}

impl Default for HashLimits {
    /// Redis 7.0's defaults: 512 entries, 64 bytes.
    fn default() -> Self {
        HashLimits {
            max_entries: 512,
            max_value: 64,
        }
    }
}

/// Appends `n` as an unsigned LEB128 varint.
fn put_len(buf: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        buf.push((n as u8) | 0x80);
        n >>= 7;
    }
    buf.push(n as u8);
}

/// Encodes `n` as a LEB128 varint into `tmp`, returning the used prefix.
fn len_bytes(n: usize, tmp: &mut [u8; 10]) -> &[u8] {
    let mut n = n;
    let mut i = 0;
    while n >= 0x80 {
        tmp[i] = (n as u8) | 0x80;
        n >>= 7;
        i += 1;
    }
    tmp[i] = n as u8;
    &tmp[..=i]
}

/// Decodes the varint at `buf[pos..]`: (value, position after it). The
/// buffers are only ever written by this module, so they are well formed.
#[inline]
fn get_len(buf: &[u8], mut pos: usize) -> (usize, usize) {
    let mut n = 0usize;
    let mut shift = 0;
    loop {
        let b = buf[pos];
        pos += 1;
        n |= usize::from(b & 0x7f) << shift;
        if b < 0x80 {
            return (n, pos);
        }
        shift += 7;
    }
}

/// Reads the length-prefixed string at `buf[pos..]`: (string, position
/// after it).
#[inline]
fn get_str(buf: &[u8], pos: usize) -> (&[u8], usize) {
    let (n, start) = get_len(buf, pos);
    (&buf[start..start + n], start + n)
}

/// The small encoding: packed field/value pairs in insertion order.
#[derive(Clone, Default)]
struct Listpack {
    /// `[len][field][len][value]` for every pair, back to back.
    buf: Vec<u8>,
    /// Number of pairs.
    len: u32,
}

/// Where a pair lives inside a listpack buffer.
struct Slot {
    /// Offset of the pair's first byte (the field's length).
    start: usize,
    /// Offset of the value's length prefix.
    value: usize,
    /// Offset just past the value.
    end: usize,
}

impl Listpack {
    /// Iterates over the pairs in insertion order.
    fn iter(&self) -> ListpackIter<'_> {
        ListpackIter {
            buf: &self.buf,
            pos: 0,
            left: self.len as usize,
        }
    }

    /// Finds the pair for `field`.
    fn find(&self, field: &[u8]) -> Option<Slot> {
        let buf = &self.buf[..];
        let mut pos = 0;
        while pos < buf.len() {
            let (f, value) = get_str(buf, pos);
            let (vlen, vstart) = get_len(buf, value);
            let end = vstart + vlen;
            if f == field {
                return Some(Slot {
                    start: pos,
                    value,
                    end,
                });
            }
            pos = end;
        }
        None
    }

    /// The value stored for `field`.
    fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.find(field).map(|s| get_str(&self.buf, s.value).0)
    }

    /// Sets `field` to `value` (replacing in place, or appending a new
    /// pair); true if the field is new.
    fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        let mut tmp = [0u8; 10];
        let prefix = len_bytes(value.len(), &mut tmp);
        match self.find(field) {
            Some(s) => {
                let new = prefix.iter().chain(value).copied();
                self.buf.splice(s.value..s.end, new);
                false
            }
            None => {
                self.buf
                    .reserve_exact(field.len() + value.len() + prefix.len() + 10);
                put_len(&mut self.buf, field.len());
                self.buf.extend_from_slice(field);
                self.buf.extend_from_slice(prefix);
                self.buf.extend_from_slice(value);
                self.len += 1;
                true
            }
        }
    }

    /// Removes `field`; true if it was present.
    fn remove(&mut self, field: &[u8]) -> bool {
        match self.find(field) {
            Some(s) => {
                self.buf.drain(s.start..s.end);
                self.len -= 1;
                if self.buf.capacity() > 2 * self.buf.len() + 64 {
                    self.buf.shrink_to_fit();
                }
                true
            }
            None => false,
        }
    }
}

/// Iterator over a listpack's pairs.
struct ListpackIter<'a> {
    buf: &'a [u8],
    pos: usize,
    left: usize,
}

impl<'a> Iterator for ListpackIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let (f, pos) = get_str(self.buf, self.pos);
        let (v, pos) = get_str(self.buf, pos);
        self.pos = pos;
        self.left -= 1;
        Some((f, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// A hashtable entry: the field and its value in one allocation,
/// `[varint field length][field][value]`. It borrows as its field, which is
/// what the table hashes and compares.
#[derive(Clone)]
struct Pair(Box<[u8]>);

impl Pair {
    /// Packs a field and its value.
    fn new(field: &[u8], value: &[u8]) -> Pair {
        let mut v = Vec::with_capacity(field.len() + value.len() + 10);
        put_len(&mut v, field.len());
        v.extend_from_slice(field);
        v.extend_from_slice(value);
        Pair(v.into_boxed_slice())
    }

    /// The field and the value.
    #[inline]
    fn split(&self) -> (&[u8], &[u8]) {
        let (field, end) = get_str(&self.0, 0);
        (field, &self.0[end..])
    }
}

impl Borrow<[u8]> for Pair {
    #[inline]
    fn borrow(&self) -> &[u8] {
        self.split().0
    }
}

/// The large encoding: the table plus the total size of its entries (for
/// memory reporting without a walk).
#[derive(Clone, Default)]
struct Table {
    dict: Dict<Pair, ()>,
    /// Sum of the entries' allocation sizes.
    payload: usize,
}

impl Table {
    /// The value stored for `field`.
    fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.dict
            .get_key_value(hash_key(field), field)
            .map(|(p, _)| p.split().1)
    }

    /// Sets `field` to `value`; true if the field is new.
    /// An existing field keeps its place in the table (one lookup, where
    /// removing and re-inserting it moved another entry into its slot and
    /// looked the field up twice: half of a big-hash HSET's time, perf),
    /// and its pair's allocation when the value's length is unchanged.
    fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        let h = hash_key(field);
        match self.dict.get_key_mut(h, field) {
            Some(old) => {
                let value_at = old.0.len() - old.split().1.len();
                if old.0.len() - value_at == value.len() {
                    old.0[value_at..].copy_from_slice(value);
                } else {
                    let pair = Pair::new(field, value);
                    self.payload = self.payload - old.0.len() + pair.0.len();
                    // Same field bytes: the entry stays in its bucket.
                    *old = pair;
                }
                false
            }
            None => {
                let pair = Pair::new(field, value);
                self.payload += pair.0.len();
                self.dict.insert_absent(h, pair, ());
                true
            }
        }
    }

    /// Removes `field`; true if it was present.
    fn remove(&mut self, field: &[u8]) -> bool {
        match self.dict.remove(hash_key(field), field) {
            Some((p, ())) => {
                self.payload -= p.0.len();
                true
            }
            None => false,
        }
    }
}

/// The two encodings.
#[derive(Clone)]
enum Repr {
    Listpack(Listpack),
    Table(Box<Table>),
}

/// A Redis hash value: field → value, `listpack`-encoded while small and
/// `hashtable`-encoded once large (see the module documentation).
#[derive(Clone)]
pub struct Hash {
    repr: Repr,
}

impl Default for Hash {
    /// An empty listpack-encoded hash.
    fn default() -> Self {
        Hash::new()
    }
}

impl fmt::Debug for Hash {
    /// Formats the pairs as a map, in iteration order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(k, v)| {
                (
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            }))
            .finish()
    }
}

impl PartialEq for Hash {
    /// Same fields with the same values, whatever the encodings and order.
    fn eq(&self, other: &Hash) -> bool {
        self.len() == other.len() && self.iter().all(|(f, v)| other.get(f) == Some(v))
    }
}

impl Hash {
    /// An empty hash (listpack-encoded, as Redis creates them).
    pub fn new() -> Self {
        Hash {
            repr: Repr::Listpack(Listpack::default()),
        }
    }

    /// The encoding name OBJECT ENCODING reports: `listpack` or `hashtable`.
    pub fn encoding_name(&self) -> &'static str {
        match self.repr {
            Repr::Listpack(_) => "listpack",
            Repr::Table(_) => "hashtable",
        }
    }

    /// True while the hash is listpack-encoded (its iteration order is then
    /// the insertion order).
    pub fn is_listpack(&self) -> bool {
        matches!(self.repr, Repr::Listpack(_))
    }

    /// Heap bytes owned by the value.
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Listpack(lp) => lp.buf.capacity(),
            Repr::Table(t) => std::mem::size_of::<Table>() + t.dict.overhead_bytes() + t.payload,
        }
    }

    /// Number of fields (HLEN).
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Listpack(lp) => lp.len as usize,
            Repr::Table(t) => t.dict.len(),
        }
    }

    /// True when the hash has no fields (such a hash is never stored under
    /// a key).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Starts loading level `depth` (0 the bucket, 1 the slot, 2 the
    /// pair) of where the field hashed to `hash` lives, for a worker about
    /// to run a batch of commands on this hash (see
    /// [`Keyspace::prefetch_members`](crate::keyspace::Keyspace::prefetch_members)).
    /// False when there is nothing to load: a listpack is one block,
    /// already in cache with the entry.
    pub(crate) fn prefetch_field(&self, hash: u64, depth: u8) -> bool {
        match &self.repr {
            Repr::Table(t) => {
                t.dict
                    .prefetch(hash, depth, |pair| prefetch_read(pair.0.as_ptr()));
                true
            }
            Repr::Listpack(_) => false,
        }
    }

    /// The value of `field`, if present.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.repr {
            Repr::Listpack(lp) => lp.get(field),
            Repr::Table(t) => t.get(field),
        }
    }

    /// True if `field` is present.
    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Sets `field` to `value`, converting to a hashtable first when the
    /// field or value is longer than the limit or the listpack would grow too
    /// big, and afterwards when it holds more than the limit of fields.
    /// Returns true if the field is new (HSET's count), false if it was
    /// updated.
    pub fn set(&mut self, field: &[u8], value: &[u8], limits: HashLimits) -> bool {
        if let Repr::Listpack(lp) = &self.repr {
            let too_long = field.len() > limits.max_value || value.len() > limits.max_value;
            let too_big = lp.buf.len() + field.len() + value.len() > LISTPACK_MAX_BYTES;
            if too_long || too_big {
                self.convert();
            }
        }
        match &mut self.repr {
            Repr::Listpack(lp) => {
                let added = lp.set(field, value);
                if lp.len as usize > limits.max_entries {
                    self.convert();
                }
                added
            }
            Repr::Table(t) => t.set(field, value),
        }
    }

    /// Removes `field`; true if it was present. The encoding never changes.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Listpack(lp) => lp.remove(field),
            Repr::Table(t) => t.remove(field),
        }
    }

    /// Converts a listpack to a hashtable (no-op for a hashtable).
    fn convert(&mut self) {
        let Repr::Listpack(lp) = &self.repr else {
            return;
        };
        let mut t = Table::default();
        t.dict.reserve(lp.len as usize);
        for (f, v) in lp.iter() {
            let pair = Pair::new(f, v);
            t.payload += pair.0.len();
            t.dict.insert(hash_key(f), pair, ());
        }
        self.repr = Repr::Table(Box::new(t));
    }

    /// Iterates over the (field, value) pairs: insertion order for a
    /// listpack, unspecified order for a hashtable.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            inner: match &self.repr {
                Repr::Listpack(lp) => IterInner::Listpack(lp.iter()),
                Repr::Table(t) => IterInner::Table(Box::new(t.dict.iter())),
            },
        }
    }

    /// One step of HSCAN: reports pairs to `f` and returns the cursor to
    /// continue from (0 when done). A listpack reports everything at once
    /// and returns 0 whatever the cursor, as Redis does; a hashtable walks
    /// about `count` entries with [`Dict::scan`]'s guarantees.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], &[u8])) -> u64 {
        match &self.repr {
            Repr::Listpack(lp) => {
                lp.iter().for_each(|(k, v)| f(k, v));
                0
            }
            Repr::Table(t) => t.dict.scan(cursor, count, |p, ()| {
                let (k, v) = p.split();
                f(k, v)
            }),
        }
    }

    /// Reports `n` uniformly random pairs to `f`, with repetitions
    /// (HRANDFIELD with a negative count).
    pub fn random_pairs<'a>(
        &'a self,
        rng: &mut fastrand::Rng,
        n: usize,
        mut f: impl FnMut(&'a [u8], &'a [u8]),
    ) {
        if self.is_empty() {
            return;
        }
        match &self.repr {
            Repr::Listpack(lp) => {
                let pairs: Vec<_> = lp.iter().collect();
                for _ in 0..n {
                    let (k, v) = pairs[rng.usize(..pairs.len())];
                    f(k, v);
                }
            }
            Repr::Table(t) => {
                for _ in 0..n {
                    if let Some((p, ())) = t.dict.random_entry(rng) {
                        let (k, v) = p.split();
                        f(k, v);
                    }
                }
            }
        }
    }

    /// Reports `min(n, len)` distinct pairs to `f`, each subset equally
    /// likely (HRANDFIELD with a positive count). When `n >= len` every
    /// pair is reported in iteration order.
    pub fn random_distinct<'a>(
        &'a self,
        rng: &mut fastrand::Rng,
        n: usize,
        mut f: impl FnMut(&'a [u8], &'a [u8]),
    ) {
        let len = self.len();
        if n >= len {
            self.iter().for_each(|(k, v)| f(k, v));
            return;
        }
        if let Repr::Table(t) = &self.repr {
            if n.saturating_mul(SUB_STRATEGY_MUL) <= len {
                // Few picks from a big table: sample with rejection.
                let mut seen: HashSet<&[u8]> = HashSet::with_capacity(n);
                while seen.len() < n {
                    if let Some((p, ())) = t.dict.random_entry(rng) {
                        let (k, v) = p.split();
                        if seen.insert(k) {
                            f(k, v);
                        }
                    }
                }
                return;
            }
        }
        // A partial Fisher-Yates shuffle over all pairs.
        let mut pairs: Vec<_> = self.iter().collect();
        for i in 0..n {
            let j = rng.usize(i..pairs.len());
            pairs.swap(i, j);
            let (k, v) = pairs[i];
            f(k, v);
        }
    }
}

/// Iterator over a hash's (field, value) pairs; see [`Hash::iter`].
pub struct Iter<'a> {
    inner: IterInner<'a>,
}

/// The per-encoding iterators behind [`Iter`].
enum IterInner<'a> {
    Listpack(ListpackIter<'a>),
    Table(Box<dyn ExactSizeIterator<Item = (&'a Pair, &'a ())> + 'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            IterInner::Listpack(it) => it.next(),
            IterInner::Table(it) => it.next().map(|(p, ())| p.split()),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.inner {
            IterInner::Listpack(it) => it.size_hint(),
            IterInner::Table(it) => it.size_hint(),
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: HashLimits = HashLimits {
        max_entries: 4,
        max_value: 8,
    };

    fn pairs(h: &Hash) -> Vec<(Vec<u8>, Vec<u8>)> {
        h.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
    }

    #[test]
    fn listpack_keeps_insertion_order_and_updates_in_place() {
        let mut h = Hash::new();
        assert!(h.set(b"b", b"1", SMALL));
        assert!(h.set(b"a", b"2", SMALL));
        assert!(h.set(b"c", b"", SMALL));
        assert!(!h.set(b"a", b"22222", SMALL));
        assert_eq!(h.encoding_name(), "listpack");
        assert_eq!(h.len(), 3);
        assert_eq!(
            pairs(&h),
            vec![
                (b"b".to_vec(), b"1".to_vec()),
                (b"a".to_vec(), b"22222".to_vec()),
                (b"c".to_vec(), b"".to_vec()),
            ]
        );
        assert_eq!(h.get(b"a"), Some(&b"22222"[..]));
        assert_eq!(h.get(b"c"), Some(&b""[..]));
        assert_eq!(h.get(b"x"), None);
        assert!(h.remove(b"a"));
        assert!(!h.remove(b"a"));
        assert_eq!(pairs(&h).len(), 2);
        assert!(h.remove(b"b") && h.remove(b"c"));
        assert!(h.is_empty());
    }

    #[test]
    fn long_strings_use_multibyte_lengths() {
        let limits = HashLimits {
            max_entries: 10,
            max_value: 100_000,
        };
        let mut h = Hash::new();
        let big = vec![b'x'; 20_000];
        h.set(&big, b"v", limits);
        h.set(b"k", &big, limits);
        h.set(&big, &big[..300], limits);
        assert_eq!(h.encoding_name(), "listpack");
        assert_eq!(h.get(&big), Some(&big[..300]));
        assert_eq!(h.get(b"k"), Some(&big[..]));
        assert!(h.remove(&big));
        assert_eq!(h.get(b"k"), Some(&big[..]));
    }

    #[test]
    fn converts_on_entry_count() {
        let mut h = Hash::new();
        for i in 0..4 {
            h.set(format!("f{i}").as_bytes(), b"v", SMALL);
        }
        assert_eq!(h.encoding_name(), "listpack");
        h.set(b"f4", b"v", SMALL);
        assert_eq!(h.encoding_name(), "hashtable");
        assert_eq!(h.len(), 5);
        for i in 0..5 {
            assert_eq!(h.get(format!("f{i}").as_bytes()), Some(&b"v"[..]));
        }
        // Never converts back.
        for i in 0..4 {
            assert!(h.remove(format!("f{i}").as_bytes()));
        }
        assert_eq!(h.encoding_name(), "hashtable");
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn converts_on_long_field_or_value() {
        let mut h = Hash::new();
        h.set(b"a", b"12345678", SMALL);
        assert_eq!(h.encoding_name(), "listpack");
        h.set(b"b", b"123456789", SMALL);
        assert_eq!(h.encoding_name(), "hashtable");
        let mut h = Hash::new();
        h.set(b"123456789", b"x", SMALL);
        assert_eq!(h.encoding_name(), "hashtable");
        assert_eq!(h.get(b"123456789"), Some(&b"x"[..]));
    }

    #[test]
    fn zero_entry_limit_converts_the_first_field() {
        let mut h = Hash::new();
        let limits = HashLimits {
            max_entries: 0,
            max_value: 64,
        };
        h.set(b"a", b"b", limits);
        assert_eq!(h.encoding_name(), "hashtable");
    }

    #[test]
    fn hashtable_set_get_remove_and_payload() {
        let mut h = Hash::new();
        for i in 0..1000 {
            assert!(h.set(format!("field:{i}").as_bytes(), b"x", SMALL));
        }
        assert!(!h.set(b"field:7", b"longer value", SMALL));
        assert_eq!(h.get(b"field:7"), Some(&b"longer value"[..]));
        assert!(
            !h.set(b"field:8", b"y", SMALL),
            "same length: rewritten in place"
        );
        assert_eq!(h.get(b"field:8"), Some(&b"y"[..]));
        assert!(!h.set(b"field:7", b"", SMALL));
        assert_eq!(h.get(b"field:7"), Some(&b""[..]));
        assert_eq!(h.get(b"field:9"), Some(&b"x"[..]));
        assert_eq!(h.len(), 1000);
        let Repr::Table(t) = &h.repr else {
            panic!("expected a table")
        };
        let walked: usize = t.dict.iter().map(|(p, ())| p.0.len()).sum();
        assert_eq!(t.payload, walked);
        for i in 0..1000 {
            assert!(h.remove(format!("field:{i}").as_bytes()));
        }
        assert!(h.is_empty());
        assert!(h.heap_bytes() > 0);
    }

    #[test]
    fn equality_ignores_encoding_and_order() {
        let mut a = Hash::new();
        let mut b = Hash::new();
        a.set(b"x", b"1", SMALL);
        a.set(b"y", b"2", SMALL);
        b.set(b"y", b"2", HashLimits::default());
        b.set(b"x", b"1", HashLimits::default());
        assert_eq!(a, b);
        b.set(b"123456789", b"1", SMALL);
        assert_eq!(b.encoding_name(), "hashtable");
        assert_ne!(a, b);
        b.remove(b"123456789");
        assert_eq!(a, b);
        a.set(b"x", b"3", SMALL);
        assert_ne!(a, b);
        assert_eq!(format!("{a:?}"), r#"{"x": "3", "y": "2"}"#);
    }

    #[test]
    fn scan_listpack_in_one_call_and_table_fully() {
        let mut h = Hash::new();
        h.set(b"a", b"1", SMALL);
        h.set(b"b", b"2", SMALL);
        let mut seen = Vec::new();
        assert_eq!(h.scan(77, 1, |k, _| seen.push(k.to_vec())), 0);
        assert_eq!(seen, vec![b"a".to_vec(), b"b".to_vec()]);
        for i in 0..100 {
            h.set(format!("f{i}").as_bytes(), b"v", SMALL);
        }
        let mut all = HashSet::new();
        let mut cursor = 0;
        loop {
            cursor = h.scan(cursor, 5, |k, _| {
                all.insert(k.to_vec());
            });
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(all.len(), 102);
    }

    #[test]
    fn random_picks() {
        let mut rng = fastrand::Rng::with_seed(7);
        for limits in [HashLimits::default(), SMALL] {
            let mut h = Hash::new();
            for i in 0..10 {
                h.set(format!("f{i}").as_bytes(), b"v", limits);
            }
            let mut n = 0;
            h.random_pairs(&mut rng, 25, |k, v| {
                assert!(h.get(k) == Some(v));
                n += 1;
            });
            assert_eq!(n, 25);
            for want in [0, 1, 2, 3, 8, 9, 10, 20] {
                let mut got = HashSet::new();
                h.random_distinct(&mut rng, want, |k, _| assert!(got.insert(k.to_vec())));
                assert_eq!(got.len(), want.min(10));
            }
        }
        // Sampling with rejection from a big table.
        let mut h = Hash::new();
        for i in 0..100 {
            h.set(format!("f{i}").as_bytes(), b"v", SMALL);
        }
        let mut got = HashSet::new();
        h.random_distinct(&mut rng, 30, |k, _| assert!(got.insert(k.to_vec())));
        assert_eq!(got.len(), 30);
    }

    #[test]
    fn random_distinct_is_roughly_uniform() {
        let mut rng = fastrand::Rng::with_seed(11);
        let mut h = Hash::new();
        for i in 0..10 {
            h.set(&[b'a' + i], b"v", HashLimits::default());
        }
        let mut counts = [0u32; 10];
        for _ in 0..10_000 {
            h.random_distinct(&mut rng, 2, |k, _| counts[usize::from(k[0] - b'a')] += 1);
        }
        for c in counts {
            assert!((1700..2300).contains(&c), "{counts:?}");
        }
    }
}
