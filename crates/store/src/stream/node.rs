//! One node of a stream: a run of consecutive entries packed in one buffer.
//!
//! A stream keeps its entries in nodes keyed by their *master ID* (the ID
//! of the first entry ever added to the node), like Redis's radix tree of
//! listpacks. The node's buffer starts with the *master fields* (the field
//! names of that first entry); an entry whose field names are the same
//! stores only its values. Everything is delta- and varint-encoded:
//!
//! ```text
//! buffer  = varint(n) name{n} entry*
//! name    = varint(len) bytes
//! entry   = flags:u8 varint(ms - master.ms) zigzag(seq - master.seq)
//!           ( value{n}                      if flags & SAME_FIELDS
//!           | varint(k) (name value){k} )   otherwise
//! value   = varint(len) bytes
//! ```
//!
//! The sequence delta may be negative (a later millisecond restarts the
//! sequence), hence zigzag; both deltas wrap modulo 2^64 as Redis's do.
//! Deleting an entry only sets its DELETED flag (a *tombstone*, as in
//! Redis); the node goes away when its last live entry does.
//!
//! This is smaller than a listpack (no back-lengths, one-byte lengths for
//! short strings), yet the node also tracks the byte size the same entries
//! would have as a Redis listpack, so `stream-node-max-bytes` cuts nodes
//! exactly where Redis cuts them (approximate trimming removes whole nodes,
//! so node boundaries are visible to clients), and the RDB writer rebuilds
//! Redis's listpack from it.
//!
//! Buffers are written only by [`Node::push`] (the RDB loader also goes
//! through it), so readers may rely on their well-formedness.

use super::id::StreamId;
use crate::rdb::listpack::Builder;

/// Flag bit: the entry was deleted.
pub(crate) const FLAG_DELETED: u8 = 1;
/// Flag bit: the entry's field names are the node's master fields.
pub(crate) const FLAG_SAME_FIELDS: u8 = 2;

/// A stream node (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    /// Entries not deleted.
    live: u32,
    /// Tombstones.
    deleted: u32,
    /// Bytes the node would take as a Redis listpack.
    lp_bytes: u64,
    /// Number of master fields.
    master_fields: u32,
    /// Offset of the first entry (just past the master fields).
    entries_start: u32,
    /// The last entry's ID, tombstone or not (trimming by MINID asks).
    last: StreamId,
    buf: Vec<u8>,
}

/// A decoded entry header: where the entry is and what it is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawEntry {
    /// Offset of the flags byte.
    pub off: usize,
    /// Flag bits.
    pub flags: u8,
    /// The entry's ID.
    pub id: StreamId,
    /// Offset of the field count or first value.
    body: usize,
    /// Offset of the next entry.
    pub end: usize,
}

impl RawEntry {
    /// True for a tombstone.
    pub fn is_deleted(&self) -> bool {
        self.flags & FLAG_DELETED != 0
    }
}

/// Bytes of a Redis listpack holding no entries (header and terminator).
fn empty_listpack_bytes() -> u64 {
    Builder::new().bytes() as u64
}

/// Listpack bytes of an integer entry.
fn lp_int(v: i64) -> u64 {
    Builder::int_entry_size(v) as u64
}

/// Listpack bytes of a string entry (integers are packed as Redis does).
fn lp_str(s: &[u8]) -> u64 {
    Builder::entry_size(s) as u64
}

/// Listpack bytes of a count stored as an integer entry.
fn lp_count(n: u32) -> u64 {
    lp_int(i64::from(n))
}

impl Node {
    /// An empty node with these master field names.
    pub fn new<'a>(names: impl Iterator<Item = &'a [u8]> + Clone) -> Node {
        let count = names.clone().count();
        let mut buf = Vec::with_capacity(64);
        put_varint(&mut buf, count as u64);
        // Master entry: live count, deleted count, field count, names, 0.
        let mut lp_bytes = empty_listpack_bytes() + 2 * lp_count(0) + lp_int(count as i64);
        for name in names {
            put_bytes(&mut buf, name);
            lp_bytes += lp_str(name);
        }
        lp_bytes += lp_int(0);
        Node {
            live: 0,
            deleted: 0,
            lp_bytes,
            master_fields: u32::try_from(count).unwrap_or(u32::MAX),
            entries_start: u32::try_from(buf.len()).unwrap_or(u32::MAX),
            last: StreamId::MIN,
            buf,
        }
    }

    /// Live entries.
    pub fn live(&self) -> u64 {
        u64::from(self.live)
    }

    /// Tombstones.
    pub fn deleted(&self) -> u64 {
        u64::from(self.deleted)
    }

    /// Entries of either kind (what `stream-node-max-entries` caps).
    pub fn entry_count(&self) -> u64 {
        self.live() + self.deleted()
    }

    /// Bytes this node would take as a Redis listpack.
    pub fn listpack_bytes(&self) -> u64 {
        self.lp_bytes
    }

    /// The last entry's ID (a tombstone's, possibly).
    pub fn last_id(&self) -> StreamId {
        self.last
    }

    /// Number of master fields.
    pub fn master_field_count(&self) -> usize {
        self.master_fields as usize
    }

    /// The master field names.
    pub fn master_names(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut c = Cursor::at(&self.buf, 0);
        let n = c.varint();
        (0..n).map(move |_| c.bytes())
    }

    /// Heap bytes the node owns.
    pub fn heap_bytes(&self) -> usize {
        self.buf.capacity()
    }

    /// Gives back spare buffer capacity (once the node is full).
    pub fn shrink(&mut self) {
        self.buf.shrink_to_fit();
    }

    /// True when `pairs` has exactly the master field names, in order.
    fn same_fields<'a>(&self, pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> bool {
        let mut names = self.master_names();
        let mut pairs = pairs.map(|(name, _)| name);
        loop {
            match (names.next(), pairs.next()) {
                (None, None) => return true,
                (Some(a), Some(b)) if a == b => {}
                _ => return false,
            }
        }
    }

    /// Appends an entry (`deleted` makes it a tombstone, for the RDB
    /// loader). `id` must be above every ID in the node and not below
    /// `master`.
    pub fn push<'a>(
        &mut self,
        master: StreamId,
        id: StreamId,
        deleted: bool,
        pairs: impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone,
    ) {
        let same = self.same_fields(pairs.clone());
        let mut flags = if same { FLAG_SAME_FIELDS } else { 0 };
        if deleted {
            flags |= FLAG_DELETED;
        }
        let ms_delta = id.ms.wrapping_sub(master.ms);
        let seq_delta = id.seq.wrapping_sub(master.seq) as i64;
        self.buf.push(flags);
        put_varint(&mut self.buf, ms_delta);
        put_varint(&mut self.buf, zigzag(seq_delta));
        let n = pairs.clone().count();
        let mut lp = lp_int(i64::from(flags)) + lp_int(ms_delta as i64) + lp_int(seq_delta);
        if !same {
            put_varint(&mut self.buf, n as u64);
            lp += lp_int(n as i64);
        }
        for (name, value) in pairs {
            if !same {
                put_bytes(&mut self.buf, name);
                lp += lp_str(name);
            }
            put_bytes(&mut self.buf, value);
            lp += lp_str(value);
        }
        // The lp-count closing each listpack entry: its element count.
        let parts = if same { n + 3 } else { 2 * n + 4 };
        lp += lp_int(parts as i64);
        self.lp_bytes += lp;
        if deleted {
            self.set_counts(self.live, self.deleted + 1);
        } else {
            self.set_counts(self.live + 1, self.deleted);
        }
        self.last = id;
    }

    /// Updates the counters, keeping the listpack size in step (the master
    /// entry stores them as integers whose width varies).
    fn set_counts(&mut self, live: u32, deleted: u32) {
        self.lp_bytes = self.lp_bytes + lp_count(live) + lp_count(deleted)
            - lp_count(self.live)
            - lp_count(self.deleted);
        self.live = live;
        self.deleted = deleted;
    }

    /// Turns the live entry at `off` into a tombstone.
    pub fn mark_deleted(&mut self, off: usize) {
        debug_assert_eq!(self.buf[off] & FLAG_DELETED, 0);
        // Flags 0-3 are one-byte listpack integers either way: no size change.
        self.buf[off] |= FLAG_DELETED;
        self.set_counts(self.live - 1, self.deleted + 1);
    }

    /// Offset of the first entry.
    pub fn first_offset(&self) -> usize {
        self.entries_start as usize
    }

    /// True when `off` is past the last entry.
    pub fn is_end(&self, off: usize) -> bool {
        off >= self.buf.len()
    }

    /// Decodes the entry header at `off` (an entry boundary).
    pub fn decode(&self, master: StreamId, off: usize) -> RawEntry {
        let mut c = Cursor::at(&self.buf, off);
        let flags = c.u8();
        let ms = master.ms.wrapping_add(c.varint());
        let seq = master.seq.wrapping_add(unzigzag(c.varint()) as u64);
        let body = c.pos;
        if flags & FLAG_SAME_FIELDS != 0 {
            for _ in 0..self.master_fields {
                c.skip_bytes();
            }
        } else {
            for _ in 0..c.varint() * 2 {
                c.skip_bytes();
            }
        }
        RawEntry {
            off,
            flags,
            id: StreamId::new(ms, seq),
            body,
            end: c.pos,
        }
    }

    /// Every entry header in order, tombstones included.
    pub fn raw_entries(&self, master: StreamId) -> impl Iterator<Item = RawEntry> + '_ {
        let mut off = self.first_offset();
        std::iter::from_fn(move || {
            if self.is_end(off) {
                return None;
            }
            let raw = self.decode(master, off);
            off = raw.end;
            Some(raw)
        })
    }

    /// The field-value pairs of a decoded entry.
    pub fn fields(&self, raw: &RawEntry) -> Fields<'_> {
        let mut data = Cursor::at(&self.buf, raw.body);
        if raw.flags & FLAG_SAME_FIELDS != 0 {
            let mut names = Cursor::at(&self.buf, 0);
            let left = names.varint() as usize;
            Fields {
                names: Some(names),
                data,
                left,
            }
        } else {
            let left = data.varint() as usize;
            Fields {
                names: None,
                data,
                left,
            }
        }
    }
}

/// A stream entry: its ID and its field-value pairs, borrowed from the
/// stream.
#[derive(Clone, Debug)]
pub struct Entry<'a> {
    /// The entry's ID.
    pub id: StreamId,
    fields: Fields<'a>,
}

impl<'a> Entry<'a> {
    pub(crate) fn new(id: StreamId, fields: Fields<'a>) -> Self {
        Entry { id, fields }
    }

    /// The field-value pairs, in the order they were added.
    pub fn fields(&self) -> Fields<'a> {
        self.fields.clone()
    }

    /// Number of field-value pairs.
    pub fn field_count(&self) -> usize {
        self.fields.left
    }
}

/// The field-value pairs of an [`Entry`].
#[derive(Clone, Debug)]
pub struct Fields<'a> {
    /// The master field names, when the entry shares them.
    names: Option<Cursor<'a>>,
    /// The entry's own names (unless shared) and values.
    data: Cursor<'a>,
    left: usize,
}

impl<'a> Iterator for Fields<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let name = match &mut self.names {
            Some(names) => names.bytes(),
            None => self.data.bytes(),
        };
        Some((name, self.data.bytes()))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Fields<'_> {}

/// A read position in a node buffer.
#[derive(Clone, Debug)]
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn at(buf: &'a [u8], pos: usize) -> Self {
        Cursor { buf, pos }
    }

    fn u8(&mut self) -> u8 {
        self.pos += 1;
        self.buf[self.pos - 1]
    }

    fn varint(&mut self) -> u64 {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = self.u8();
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    }

    fn bytes(&mut self) -> &'a [u8] {
        let n = self.varint() as usize;
        self.pos += n;
        &self.buf[self.pos - n..self.pos]
    }

    fn skip_bytes(&mut self) {
        let n = self.varint() as usize;
        self.pos += n;
    }
}

/// Appends `v` in 7-bit groups, low first, the high bit marking "more".
fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Appends a length-prefixed string.
fn put_bytes(buf: &mut Vec<u8>, s: &[u8]) {
    put_varint(buf, s.len() as u64);
    buf.extend_from_slice(s);
}

/// Maps small negative and positive numbers to small unsigned ones.
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs<'a>(
        p: &'a [(&'a [u8], &'a [u8])],
    ) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone {
        p.iter().copied()
    }

    #[test]
    fn zigzag_round_trips() {
        for v in [0i64, 1, -1, 63, -64, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
    }

    #[test]
    fn entries_share_master_fields_and_decode_back() {
        let master = StreamId::new(100, 5);
        let a: &[(&[u8], &[u8])] = &[(b"f", b"1"), (b"g", b"two")];
        let b: &[(&[u8], &[u8])] = &[(b"f", b"3"), (b"g", b"")];
        let c: &[(&[u8], &[u8])] = &[(b"x", b"y")];
        let mut n = Node::new(pairs(a).map(|(f, _)| f));
        n.push(master, master, false, pairs(a));
        n.push(master, StreamId::new(101, 0), false, pairs(b));
        n.push(master, StreamId::new(u64::MAX, u64::MAX), true, pairs(c));
        assert_eq!((n.live(), n.deleted()), (2, 1));
        assert_eq!(n.last_id(), StreamId::MAX);
        let raws: Vec<RawEntry> = n.raw_entries(master).collect();
        assert_eq!(raws.len(), 3);
        assert_eq!(raws[0].flags, FLAG_SAME_FIELDS);
        assert_eq!(raws[1].id, StreamId::new(101, 0));
        assert_eq!(raws[2].flags, FLAG_DELETED);
        let got: Vec<_> = n.fields(&raws[1]).collect();
        assert_eq!(got, b.to_vec());
        let got: Vec<_> = n.fields(&raws[2]).collect();
        assert_eq!(got, c.to_vec());
        n.mark_deleted(raws[0].off);
        assert_eq!((n.live(), n.deleted()), (1, 2));
        assert!(n.decode(master, raws[0].off).is_deleted());
    }

    #[test]
    fn listpack_size_tracks_redis_layout() {
        // A node with one entry "f"="v" at its master ID, as Redis builds
        // it: header 6 + master [1, 0, 1, "f", 0] + entry [2, 0, 0, "v", 4]
        // + terminator; small integers take 2 bytes (1 + backlen), the
        // one-byte strings 3.
        let id = StreamId::new(7, 0);
        let p: &[(&[u8], &[u8])] = &[(b"f", b"v")];
        let mut n = Node::new(pairs(p).map(|(f, _)| f));
        n.push(id, id, false, pairs(p));
        assert_eq!(n.listpack_bytes(), 6 + (4 * 2 + 3) + (4 * 2 + 3) + 1);
    }
}
