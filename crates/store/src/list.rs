//! The list type: a quicklist, i.e. a deque of packed nodes.
//!
//! Like Redis 7.0 every list is a `quicklist` (that is the only name
//! `OBJECT ENCODING` reports for lists in 7.0): a small list is a single
//! node, a big one many. A node is one byte buffer of packed entries, in the
//! spirit of a listpack:
//!
//! ```text
//! entry = header [payload] backlen
//! ```
//!
//! `header` says what follows: canonical integers (the strings `string2ll`
//! accepts) are stored in binary in 1 to 9 bytes, other strings as a 1, 2, 5
//! or 9 byte length and the bytes. `backlen` is the size of header plus
//! payload written as 7-bit groups readable from the right, so a node can be
//! walked in both directions and popped at its tail in O(1).
//!
//! Nodes honour `list-max-listpack-size` (the "fill"): a negative fill -1 …
//! -5 caps a node's bytes at 4, 8, 16, 32 or 64 KiB, a positive fill caps
//! its entry count (and its size at 8 KiB), as Redis's quicklist does. An
//! element too big for any node gets a node of its own. Each node also keeps
//! free room before its first entry, so pushes and pops at the head are
//! amortised O(1) instead of moving the whole node: a node grows that room by
//! half its size when a head push finds none, and gives it back (compacting
//! and shrinking its buffer) once it is full and a new head node starts.
//!
//! The fill is fixed when the list is created, as in Redis, so a later
//! `CONFIG SET list-max-listpack-size` only affects new lists.

use std::collections::VecDeque;
use std::fmt;

use vireo_resp::number::parse_i64;

/// Which end of a list.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum End {
    /// The head (index 0, what LPUSH/LPOP use).
    Left,
    /// The tail (index -1, what RPUSH/RPOP use).
    Right,
}

impl End {
    /// The other end.
    pub fn opposite(self) -> End {
        match self {
            End::Left => End::Right,
            End::Right => End::Left,
        }
    }
}

/// Node byte caps for the negative fills -1 … -5.
const SIZE_LEVELS: [usize; 5] = [4096, 8192, 16384, 32768, 65536];

/// The byte cap of a node under a positive (entry count) fill.
const SIZE_SAFETY_LIMIT: usize = 8192;

/// Fill limits Redis clamps `list-max-listpack-size` to.
const FILL_MIN: i64 = -5;
const FILL_MAX: i64 = 32767;

/// Longest string that may be a canonical `i64` ("-9223372036854775808").
const MAX_INT_STR: usize = 20;

// Entry headers. 0x00-0x7f: the integer itself (0 … 127).
/// `10xxxxxx`: a string of up to 63 bytes.
const STR6: u8 = 0x80;
/// `110xxxxx yyyyyyyy`: a string of up to 8191 bytes.
const STR13: u8 = 0xc0;
/// `1110xxxx yyyyyyyy`: a 12-bit two's complement integer.
const INT12: u8 = 0xe0;
/// Integers of 2, 3, 4 and 8 little-endian bytes.
const INT16: u8 = 0xf0;
const INT24: u8 = 0xf1;
const INT32: u8 = 0xf2;
const INT64: u8 = 0xf3;
/// Strings with a 4 or 8 byte little-endian length.
const STR32: u8 = 0xf4;
const STR64: u8 = 0xf5;

/// One element as stored: a canonical integer or other bytes.
///
/// Build it with [`Elem::of`]: because only canonical integer strings are
/// stored as integers, two elements are equal exactly when their string
/// forms are.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Elem<'a> {
    /// A string that is the canonical decimal form of this integer.
    Int(i64),
    /// Any other string.
    Bytes(&'a [u8]),
}

impl<'a> Elem<'a> {
    /// The element for the string `b`.
    pub fn of(b: &'a [u8]) -> Self {
        if b.len() <= MAX_INT_STR {
            if let Some(n) = parse_i64(b) {
                return Elem::Int(n);
            }
        }
        Elem::Bytes(b)
    }

    /// The element's string form.
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Elem::Int(n) => itoa::Buffer::new().format(n).as_bytes().to_vec(),
            Elem::Bytes(b) => b.to_vec(),
        }
    }

    /// Bytes of header and payload.
    fn body_len(self) -> usize {
        match self {
            Elem::Int(0..=127) => 1,
            Elem::Int(-2048..=2047) => 2,
            Elem::Int(n) if i16::try_from(n).is_ok() => 3,
            Elem::Int(-0x80_0000..=0x7f_ffff) => 4,
            Elem::Int(n) if i32::try_from(n).is_ok() => 5,
            Elem::Int(_) => 9,
            Elem::Bytes(b) if b.len() < 64 => 1 + b.len(),
            Elem::Bytes(b) if b.len() < 8192 => 2 + b.len(),
            Elem::Bytes(b) if u32::try_from(b.len()).is_ok() => 5 + b.len(),
            Elem::Bytes(b) => 9 + b.len(),
        }
    }

    /// Bytes the whole entry takes in a node.
    fn entry_len(self) -> usize {
        let body = self.body_len();
        body + backlen_size(body)
    }

    /// Writes the entry into `dst`, which is exactly `entry_len()` long.
    fn write(self, dst: &mut [u8]) {
        let body = self.body_len();
        let (head, back) = dst.split_at_mut(body);
        match self {
            Elem::Int(n) => write_int(n, head),
            Elem::Bytes(b) => {
                let start = body - b.len();
                let len = b.len();
                match start {
                    1 => head[0] = STR6 | len as u8,
                    2 => {
                        head[0] = STR13 | (len >> 8) as u8;
                        head[1] = len as u8;
                    }
                    5 => {
                        head[0] = STR32;
                        head[1..5].copy_from_slice(&(len as u32).to_le_bytes());
                    }
                    _ => {
                        head[0] = STR64;
                        head[1..9].copy_from_slice(&(len as u64).to_le_bytes());
                    }
                }
                head[start..].copy_from_slice(b);
            }
        }
        write_backlen(body, back);
    }
}

/// Writes an integer's header and payload into `dst` (its `body_len`).
fn write_int(n: i64, dst: &mut [u8]) {
    let le = n.to_le_bytes();
    match dst.len() {
        1 => dst[0] = n as u8,
        2 => {
            let v = (n as u16) & 0x0fff;
            dst[0] = INT12 | (v >> 8) as u8;
            dst[1] = v as u8;
        }
        3 => {
            dst[0] = INT16;
            dst[1..].copy_from_slice(&le[..2]);
        }
        4 => {
            dst[0] = INT24;
            dst[1..].copy_from_slice(&le[..3]);
        }
        5 => {
            dst[0] = INT32;
            dst[1..].copy_from_slice(&le[..4]);
        }
        _ => {
            dst[0] = INT64;
            dst[1..].copy_from_slice(&le);
        }
    }
}

/// Bytes needed to write `body` as 7-bit groups.
fn backlen_size(body: usize) -> usize {
    let bits = usize::BITS - body.leading_zeros();
    (bits as usize).div_ceil(7).max(1)
}

/// Writes `body` into `dst` (its `backlen_size`) so that it reads from the
/// right: the last byte holds the low 7 bits, every byte but the leftmost
/// has its high bit set to say "more to the left".
fn write_backlen(body: usize, dst: &mut [u8]) {
    let k = dst.len();
    for i in 0..k {
        let group = ((body >> (7 * i)) & 0x7f) as u8;
        dst[k - 1 - i] = if i + 1 < k { group | 0x80 } else { group };
    }
}

/// Decodes the entry starting at `pos`: the element and the entry's size.
fn decode(buf: &[u8], pos: usize) -> (Elem<'_>, usize) {
    let h = buf[pos];
    let le = |n: usize| -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&buf[pos + 1..pos + 1 + n]);
        b
    };
    let (elem, body) = match h {
        0x00..=0x7f => (Elem::Int(i64::from(h)), 1),
        0x80..=0xbf => {
            let n = usize::from(h & 0x3f);
            (Elem::Bytes(&buf[pos + 1..pos + 1 + n]), 1 + n)
        }
        0xc0..=0xdf => {
            let n = usize::from(h & 0x1f) << 8 | usize::from(buf[pos + 1]);
            (Elem::Bytes(&buf[pos + 2..pos + 2 + n]), 2 + n)
        }
        0xe0..=0xef => {
            let raw = u16::from(h & 0x0f) << 8 | u16::from(buf[pos + 1]);
            (Elem::Int(i64::from(((raw << 4) as i16) >> 4)), 2)
        }
        INT16 => (
            Elem::Int(i64::from(i16::from_le_bytes([buf[pos + 1], buf[pos + 2]]))),
            3,
        ),
        INT24 => {
            let v = i32::from_le_bytes([0, buf[pos + 1], buf[pos + 2], buf[pos + 3]]) >> 8;
            (Elem::Int(i64::from(v)), 4)
        }
        INT32 => {
            let b = le(4);
            (
                Elem::Int(i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
                5,
            )
        }
        INT64 => (Elem::Int(i64::from_le_bytes(le(8))), 9),
        STR32 => {
            let b = le(4);
            let n = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
            (Elem::Bytes(&buf[pos + 5..pos + 5 + n]), 5 + n)
        }
        _ => {
            let n = u64::from_le_bytes(le(8)) as usize;
            (Elem::Bytes(&buf[pos + 9..pos + 9 + n]), 9 + n)
        }
    };
    (elem, body + backlen_size(body))
}

/// Start of the entry that ends at `end` (read from its backlen).
fn prev_start(buf: &[u8], end: usize) -> usize {
    let mut p = end - 1;
    let mut body = 0usize;
    let mut shift = 0;
    loop {
        let b = buf[p];
        body |= usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
        p -= 1;
        shift += 7;
    }
    p - body
}

/// One packed node: entries live in `buf[start..]`; the bytes before
/// `start` are free room for head pushes. A node in a list is never empty.
#[derive(Clone)]
struct Node {
    buf: Vec<u8>,
    start: usize,
    count: u32,
}

impl Node {
    /// A node holding just `e`.
    fn single(e: Elem<'_>, sz: usize) -> Node {
        let mut buf = vec![0u8; sz];
        e.write(&mut buf);
        Node {
            buf,
            start: 0,
            count: 1,
        }
    }

    /// Bytes of entries.
    fn used(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Replaces the `del` bytes at `pos` by `ins` bytes of room (to be
    /// written by the caller) and returns where that room starts; with
    /// `ins == 0` that is where the entry after the deleted bytes now starts.
    /// At the head this uses (and grows) the free room before `start`.
    fn make_room(&mut self, pos: usize, del: usize, ins: usize) -> usize {
        if pos == self.start {
            let avail = self.start + del;
            if avail >= ins {
                self.start = avail - ins;
                return self.start;
            }
            if del == 0 {
                let used = self.used();
                let gap = ins.max(used / 2);
                let old = self.start;
                self.buf.resize(gap + used, 0);
                self.buf.copy_within(old..old + used, gap);
                self.start = gap - ins;
                return self.start;
            }
        }
        let old_len = self.buf.len();
        if ins > del {
            self.buf.resize(old_len + (ins - del), 0);
            self.buf.copy_within(pos + del..old_len, pos + ins);
        } else if ins < del {
            self.buf.copy_within(pos + del..old_len, pos + ins);
            self.buf.truncate(old_len - (del - ins));
        }
        pos
    }

    /// Inserts `e` (of entry size `sz`) at byte position `pos`.
    fn insert(&mut self, pos: usize, e: Elem<'_>, sz: usize) {
        let at = self.make_room(pos, 0, sz);
        e.write(&mut self.buf[at..at + sz]);
        self.count += 1;
    }

    /// Drops the room before the entries and the spare capacity (a node
    /// that stopped growing).
    fn seal(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.shrink_to_fit();
    }

    /// Byte position of the `i`-th entry (`i < count`), walking from the
    /// nearer end.
    fn pos_of(&self, i: usize) -> usize {
        let count = self.count as usize;
        if i <= count / 2 {
            let mut pos = self.start;
            for _ in 0..i {
                pos += decode(&self.buf, pos).1;
            }
            pos
        } else {
            let mut pos = self.buf.len();
            for _ in i..count {
                pos = prev_start(&self.buf, pos);
            }
            pos
        }
    }

    /// Splits the entries from `pos` on into a new node.
    fn split_off(&mut self, pos: usize) -> Node {
        let buf = self.buf[pos..].to_vec();
        let mut moved = 0u32;
        let mut p = 0;
        while p < buf.len() {
            p += decode(&buf, p).1;
            moved += 1;
        }
        self.buf.truncate(pos);
        self.count -= moved;
        Node {
            buf,
            start: 0,
            count: moved,
        }
    }

    /// Deletes the entries at `dels` (ascending (position, size) pairs) by
    /// rebuilding the buffer.
    fn remove_entries(&mut self, dels: &[(usize, usize)]) {
        let gone: usize = dels.iter().map(|d| d.1).sum();
        let mut out = Vec::with_capacity(self.used() - gone);
        let mut cur = self.start;
        for &(p, s) in dels {
            out.extend_from_slice(&self.buf[cur..p]);
            cur = p + s;
        }
        out.extend_from_slice(&self.buf[cur..]);
        self.buf = out;
        self.start = 0;
        self.count -= dels.len() as u32;
    }
}

/// The list's state, boxed so that a list adds one word to [`Value`].
///
/// [`Value`]: crate::Value
#[derive(Clone)]
struct Quicklist {
    nodes: VecDeque<Node>,
    len: usize,
    fill: i16,
}

/// A Redis list value.
#[derive(Clone)]
pub struct List(Box<Quicklist>);

impl List {
    /// An empty list whose nodes follow `fill` (`list-max-listpack-size`,
    /// clamped to -5 … 32767 as Redis does).
    pub fn new(fill: i64) -> List {
        List(Box::new(Quicklist {
            nodes: VecDeque::with_capacity(1),
            len: 0,
            fill: fill.clamp(FILL_MIN, FILL_MAX) as i16,
        }))
    }

    /// The node fill this list was created with (see [`List::new`]).
    pub fn fill(&self) -> i64 {
        i64::from(self.0.fill)
    }

    /// True if a packed node of `bytes` bytes holding `count` elements
    /// respects this list's fill (used to cut nodes when writing RDB).
    pub fn node_fits(&self, bytes: usize, count: usize) -> bool {
        fits(self.0.fill, bytes, count)
    }

    /// The encoding name OBJECT ENCODING reports (Redis 7.0 has only one).
    pub fn encoding_name(&self) -> &'static str {
        "quicklist"
    }

    /// Heap bytes owned by the value.
    pub fn heap_bytes(&self) -> usize {
        let q = &self.0;
        std::mem::size_of::<Quicklist>()
            + q.nodes.capacity() * std::mem::size_of::<Node>()
            + q.nodes.iter().map(|n| n.buf.capacity()).sum::<usize>()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.0.len
    }

    /// Number of packed nodes (what freeing the list walks).
    pub fn node_count(&self) -> usize {
        self.0.nodes.len()
    }

    /// True when the list has no elements (a key never holds one).
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }

    /// Adds `v` at `end`.
    pub fn push(&mut self, end: End, v: &[u8]) {
        let e = Elem::of(v);
        let sz = e.entry_len();
        let q = &mut *self.0;
        let fill = q.fill;
        let node = match end {
            End::Left => q.nodes.front_mut(),
            End::Right => q.nodes.back_mut(),
        };
        match node {
            Some(n) if fits(fill, n.used() + sz, n.count as usize + 1) => {
                let pos = match end {
                    End::Left => n.start,
                    End::Right => n.buf.len(),
                };
                n.insert(pos, e, sz);
            }
            other => {
                if let Some(n) = other {
                    n.seal();
                }
                let node = Node::single(e, sz);
                match end {
                    End::Left => q.nodes.push_front(node),
                    End::Right => q.nodes.push_back(node),
                }
            }
        }
        q.len += 1;
    }

    /// Removes the element at `end`, handing it to `f` before it is dropped
    /// (so it can be replied without a copy); None if the list is empty.
    pub fn pop_with<R>(&mut self, end: End, f: impl FnOnce(Elem<'_>) -> R) -> Option<R> {
        let q = &mut *self.0;
        let node = match end {
            End::Left => q.nodes.front_mut()?,
            End::Right => q.nodes.back_mut()?,
        };
        let pos = match end {
            End::Left => node.start,
            End::Right => prev_start(&node.buf, node.buf.len()),
        };
        let (e, sz) = decode(&node.buf, pos);
        let r = f(e);
        if node.count == 1 {
            match end {
                End::Left => q.nodes.pop_front(),
                End::Right => q.nodes.pop_back(),
            };
        } else {
            node.make_room(pos, sz, 0);
            node.count -= 1;
        }
        q.len -= 1;
        Some(r)
    }

    /// Removes and returns the element at `end`.
    pub fn pop(&mut self, end: End) -> Option<Vec<u8>> {
        self.pop_with(end, |e| e.to_vec())
    }

    /// Node index and byte position of element `i`.
    fn locate(&self, i: usize) -> Option<(usize, usize)> {
        let q = &self.0;
        if i >= q.len {
            return None;
        }
        if i < q.len / 2 {
            let mut i = i;
            for (ni, n) in q.nodes.iter().enumerate() {
                let c = n.count as usize;
                if i < c {
                    return Some((ni, n.pos_of(i)));
                }
                i -= c;
            }
        } else {
            let mut r = q.len - 1 - i;
            for (ni, n) in q.nodes.iter().enumerate().rev() {
                let c = n.count as usize;
                if r < c {
                    return Some((ni, n.pos_of(c - 1 - r)));
                }
                r -= c;
            }
        }
        None
    }

    /// The element at index `i` (0 is the head).
    pub fn get(&self, i: usize) -> Option<Elem<'_>> {
        let (ni, pos) = self.locate(i)?;
        Some(decode(&self.0.nodes[ni].buf, pos).0)
    }

    /// Replaces the element at index `i`; false if out of range.
    pub fn set(&mut self, i: usize, v: &[u8]) -> bool {
        let Some((ni, pos)) = self.locate(i) else {
            return false;
        };
        let e = Elem::of(v);
        let sz = e.entry_len();
        let q = &mut *self.0;
        let fill = q.fill;
        let node = &mut q.nodes[ni];
        let old = decode(&node.buf, pos).1;
        if node.count == 1 || fits(fill, node.used() - old + sz, node.count as usize) {
            let at = node.make_room(pos, old, sz);
            e.write(&mut node.buf[at..at + sz]);
        } else {
            let at = node.make_room(pos, old, 0);
            node.count -= 1;
            q.len -= 1;
            q.insert_at(ni, at, e, sz);
        }
        true
    }

    /// Inserts `v` before (or, with `after`, after) the first element equal
    /// to `pivot`, searching from the head; false if there is none.
    pub fn insert(&mut self, pivot: &[u8], v: &[u8], after: bool) -> bool {
        let target = Elem::of(pivot);
        let q = &mut *self.0;
        let found = q.nodes.iter().enumerate().find_map(|(ni, n)| {
            let mut pos = n.start;
            while pos < n.buf.len() {
                let (e, sz) = decode(&n.buf, pos);
                if e == target {
                    return Some((ni, if after { pos + sz } else { pos }));
                }
                pos += sz;
            }
            None
        });
        let Some((ni, pos)) = found else {
            return false;
        };
        let e = Elem::of(v);
        q.insert_at(ni, pos, e, e.entry_len());
        true
    }

    /// Removes up to `limit` elements equal to `v` (all of them for 0),
    /// scanning from the head, or from the tail with `from_tail`. Returns
    /// how many were removed.
    pub fn remove(&mut self, v: &[u8], limit: usize, from_tail: bool) -> usize {
        let target = Elem::of(v);
        let q = &mut *self.0;
        let mut left = if limit == 0 { usize::MAX } else { limit };
        let mut removed = 0;
        let mut dels = Vec::new();
        let n_nodes = q.nodes.len();
        for k in 0..n_nodes {
            if left == 0 {
                break;
            }
            let node = &mut q.nodes[if from_tail { n_nodes - 1 - k } else { k }];
            dels.clear();
            if from_tail {
                let mut end = node.buf.len();
                while end > node.start && left > 0 {
                    let p = prev_start(&node.buf, end);
                    if decode(&node.buf, p).0 == target {
                        dels.push((p, end - p));
                        left -= 1;
                    }
                    end = p;
                }
                dels.reverse();
            } else {
                let mut p = node.start;
                while p < node.buf.len() && left > 0 {
                    let (e, sz) = decode(&node.buf, p);
                    if e == target {
                        dels.push((p, sz));
                        left -= 1;
                    }
                    p += sz;
                }
            }
            if !dels.is_empty() {
                node.remove_entries(&dels);
                removed += dels.len();
            }
        }
        if removed > 0 {
            q.nodes.retain(|n| n.count > 0);
            q.len -= removed;
        }
        removed
    }

    /// Removes `n` elements (or all, if fewer) from `end`.
    pub fn truncate_end(&mut self, end: End, mut n: usize) {
        let q = &mut *self.0;
        while n > 0 {
            let node = match end {
                End::Left => q.nodes.front_mut(),
                End::Right => q.nodes.back_mut(),
            };
            let Some(node) = node else {
                break;
            };
            let c = node.count as usize;
            if c <= n {
                n -= c;
                q.len -= c;
                match end {
                    End::Left => q.nodes.pop_front(),
                    End::Right => q.nodes.pop_back(),
                };
                continue;
            }
            match end {
                End::Left => {
                    let pos = node.pos_of(n);
                    node.make_room(node.start, pos - node.start, 0);
                }
                End::Right => {
                    let pos = node.pos_of(c - n);
                    node.buf.truncate(pos);
                }
            }
            node.count -= n as u32;
            q.len -= n;
            n = 0;
        }
    }

    /// Keeps only the elements with indices in `start..start + len`
    /// (LTRIM).
    pub fn retain_range(&mut self, start: usize, len: usize) {
        let tail = self.len().saturating_sub(start.saturating_add(len));
        self.truncate_end(End::Right, tail);
        self.truncate_end(End::Left, start);
    }

    /// Iterates from the head.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0, false)
    }

    /// Iterates from `end` towards the other end.
    pub fn iter_end(&self, end: End) -> Iter<'_> {
        match end {
            End::Left => self.iter_from(0, false),
            End::Right => self.iter_from(self.len().saturating_sub(1), true),
        }
    }

    /// Iterates from element `i`: towards the tail, or with `rev` towards
    /// the head (element `i` first either way). Empty if `i` is out of
    /// range.
    pub fn iter_from(&self, i: usize, rev: bool) -> Iter<'_> {
        let nodes = &self.0.nodes;
        let Some((ni, pos)) = self.locate(i) else {
            return Iter {
                nodes,
                ni: 0,
                pos: 0,
                left: 0,
                rev,
            };
        };
        let (pos, left) = if rev {
            (pos + decode(&nodes[ni].buf, pos).1, i + 1)
        } else {
            (pos, self.len() - i)
        };
        Iter {
            nodes,
            ni,
            pos,
            left,
            rev,
        }
    }
}

impl Quicklist {
    /// Inserts `e` (entry size `sz`) at byte `pos` of node `ni`, using a
    /// neighbour or a new node when that node is full and splitting it when
    /// the position is in its middle.
    fn insert_at(&mut self, ni: usize, pos: usize, e: Elem<'_>, sz: usize) {
        let fill = self.fill;
        let room = |n: &Node| fits(fill, n.used() + sz, n.count as usize + 1);
        let node = &self.nodes[ni];
        let (at_start, at_end) = (pos == node.start, pos == node.buf.len());
        if room(node) {
            self.nodes[ni].insert(pos, e, sz);
        } else if at_end && self.nodes.get(ni + 1).is_some_and(room) {
            let next = &mut self.nodes[ni + 1];
            next.insert(next.start, e, sz);
        } else if at_start && ni > 0 && room(&self.nodes[ni - 1]) {
            let prev = &mut self.nodes[ni - 1];
            prev.insert(prev.buf.len(), e, sz);
        } else if at_start || at_end {
            let at = if at_start { ni } else { ni + 1 };
            self.nodes.insert(at, Node::single(e, sz));
        } else {
            let tail = self.nodes[ni].split_off(pos);
            self.nodes.insert(ni + 1, tail);
            if room(&self.nodes[ni]) {
                let head = &mut self.nodes[ni];
                head.insert(head.buf.len(), e, sz);
            } else if room(&self.nodes[ni + 1]) {
                let tail = &mut self.nodes[ni + 1];
                tail.insert(tail.start, e, sz);
            } else {
                self.nodes.insert(ni + 1, Node::single(e, sz));
            }
        }
        self.len += 1;
    }
}

/// True if a node of `bytes` bytes and `count` entries respects `fill`.
fn fits(fill: i16, bytes: usize, count: usize) -> bool {
    if fill < 0 {
        let level = usize::from(fill.unsigned_abs()) - 1;
        bytes <= SIZE_LEVELS[level.min(SIZE_LEVELS.len() - 1)]
    } else {
        bytes <= SIZE_SAFETY_LIMIT && count <= fill as usize
    }
}

/// Walks a list's elements in one direction (see [`List::iter_from`]).
pub struct Iter<'a> {
    nodes: &'a VecDeque<Node>,
    /// Current node.
    ni: usize,
    /// Forward: start of the next entry; reverse: end of it.
    pos: usize,
    /// Elements still to yield.
    left: usize,
    rev: bool,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Elem<'a>;

    fn next(&mut self) -> Option<Elem<'a>> {
        if self.left == 0 {
            return None;
        }
        let nodes = self.nodes;
        let mut node = nodes.get(self.ni)?;
        if self.rev {
            if self.pos == node.start {
                self.ni = self.ni.checked_sub(1)?;
                node = nodes.get(self.ni)?;
                self.pos = node.buf.len();
            }
            let p = prev_start(&node.buf, self.pos);
            self.pos = p;
            self.left -= 1;
            Some(decode(&node.buf, p).0)
        } else {
            if self.pos == node.buf.len() {
                self.ni += 1;
                node = nodes.get(self.ni)?;
                self.pos = node.start;
            }
            let (e, sz) = decode(&node.buf, self.pos);
            self.pos += sz;
            self.left -= 1;
            Some(e)
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl fmt::Debug for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(l: &List) -> Vec<Vec<u8>> {
        l.iter().map(Elem::to_vec).collect()
    }

    /// Checks the internal invariants: no empty node, counts add up, every
    /// node within its fill unless it holds a single entry.
    fn check(l: &List) {
        let q = &l.0;
        let mut total = 0;
        for n in &q.nodes {
            assert!(n.count > 0);
            let mut p = n.start;
            let mut c = 0;
            while p < n.buf.len() {
                p += decode(&n.buf, p).1;
                c += 1;
            }
            assert_eq!(p, n.buf.len());
            assert_eq!(c, n.count);
            assert!(n.count == 1 || fits(q.fill, n.used(), n.count as usize));
            total += c as usize;
        }
        assert_eq!(total, q.len);
        let rev: Vec<Vec<u8>> = l
            .iter_from(l.len().saturating_sub(1), true)
            .map(Elem::to_vec)
            .collect();
        let mut fwd = items(l);
        fwd.reverse();
        assert_eq!(rev, fwd);
    }

    #[test]
    fn entries_round_trip_at_every_encoding_boundary() {
        let mut vals: Vec<Vec<u8>> = Vec::new();
        for n in [
            0i64,
            127,
            128,
            -1,
            -2048,
            2047,
            -2049,
            2048,
            i16::MIN as i64,
            i16::MAX as i64 + 1,
            -0x80_0000,
            0x7f_ffff,
            0x80_0000,
            i32::MIN as i64,
            i32::MAX as i64 + 1,
            i64::MIN,
            i64::MAX,
        ] {
            vals.push(n.to_string().into_bytes());
        }
        for len in [0usize, 1, 63, 64, 8191, 8192, 70000] {
            vals.push(vec![b'x'; len]);
        }
        for s in ["-0", "007", "+1", " 1", "1.5", "99999999999999999999"] {
            vals.push(s.as_bytes().to_vec());
        }
        for v in &vals {
            let e = Elem::of(v);
            let mut buf = vec![0u8; e.entry_len()];
            e.write(&mut buf);
            let (d, sz) = decode(&buf, 0);
            assert_eq!(sz, buf.len());
            assert_eq!(d, e);
            assert_eq!(d.to_vec(), *v);
            assert_eq!(prev_start(&buf, buf.len()), 0);
        }
        assert_eq!(Elem::of(b"5"), Elem::Int(5));
        assert_eq!(Elem::of(b"05"), Elem::Bytes(b"05"));
        assert_eq!(Elem::of(b"100").entry_len(), 2);
        assert_eq!(Elem::of(b"1000").entry_len(), 3);
        assert_eq!(Elem::of(b"hello").entry_len(), 7);
    }

    #[test]
    fn push_pop_both_ends_across_nodes() {
        for fill in [-5, -2, -1, 0, 1, 3, 128] {
            let mut l = List::new(fill);
            for i in 0..2000 {
                let v = format!("value-{i}");
                l.push(
                    if i % 3 == 0 { End::Left } else { End::Right },
                    v.as_bytes(),
                );
            }
            check(&l);
            assert_eq!(l.len(), 2000);
            assert_eq!(l.get(0).unwrap().to_vec(), b"value-1998");
            assert_eq!(l.get(1999).unwrap().to_vec(), b"value-1999");
            let mut n = 0;
            while let Some(v) = l.pop(if n % 2 == 0 { End::Left } else { End::Right }) {
                assert!(v.starts_with(b"value-"));
                n += 1;
            }
            assert_eq!(n, 2000);
            assert!(l.is_empty());
            check(&l);
        }
    }

    #[test]
    fn fill_limits_node_sizes() {
        let mut l = List::new(4);
        for i in 0..10 {
            l.push(End::Right, i.to_string().as_bytes());
        }
        assert_eq!(l.0.nodes.len(), 3);
        let mut l = List::new(-1);
        for _ in 0..100 {
            l.push(End::Left, &[b'a'; 100]);
        }
        assert!(l.0.nodes.iter().all(|n| n.used() <= 4096));
        assert!(l.0.nodes.len() >= 3);
        // A huge element gets a node of its own.
        l.push(End::Left, &[b'b'; 10000]);
        assert_eq!(l.0.nodes[0].count, 1);
        check(&l);
        assert_eq!(List::new(-100).0.fill, -5);
        assert_eq!(List::new(1 << 40).0.fill, 32767);
    }

    /// Random operations against a VecDeque model.
    #[test]
    fn matches_a_model_under_random_operations() {
        for seed in 0..30u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let fill = [-2i64, -1, 1, 2, 5, 0][seed as usize % 6];
            let mut l = List::new(fill);
            let mut m: VecDeque<Vec<u8>> = VecDeque::new();
            let val = |rng: &mut fastrand::Rng| -> Vec<u8> {
                match rng.u8(..4) {
                    0 => rng.i64(-3000..3000).to_string().into_bytes(),
                    1 => vec![b'a' + rng.u8(..3); rng.usize(0..4)],
                    2 => vec![b'z'; rng.usize(60..300)],
                    _ => rng.u8(..5).to_string().into_bytes(),
                }
            };
            for _ in 0..600 {
                match rng.u8(..10) {
                    0 | 1 => {
                        let v = val(&mut rng);
                        if rng.bool() {
                            l.push(End::Left, &v);
                            m.push_front(v);
                        } else {
                            l.push(End::Right, &v);
                            m.push_back(v);
                        }
                    }
                    2 => {
                        let end = if rng.bool() { End::Left } else { End::Right };
                        let want = match end {
                            End::Left => m.pop_front(),
                            End::Right => m.pop_back(),
                        };
                        assert_eq!(l.pop(end), want);
                    }
                    3 if !m.is_empty() => {
                        let i = rng.usize(..m.len());
                        let v = val(&mut rng);
                        assert!(l.set(i, &v));
                        m[i] = v;
                    }
                    4 => {
                        let pivot = val(&mut rng);
                        let v = val(&mut rng);
                        let after = rng.bool();
                        let want = m.iter().position(|x| *x == pivot);
                        assert_eq!(l.insert(&pivot, &v, after), want.is_some());
                        if let Some(i) = want {
                            m.insert(if after { i + 1 } else { i }, v);
                        }
                    }
                    5 => {
                        let v = val(&mut rng);
                        let limit = rng.usize(0..3);
                        let from_tail = rng.bool();
                        let mut idx: Vec<usize> = (0..m.len()).filter(|&i| m[i] == v).collect();
                        if from_tail {
                            idx.reverse();
                        }
                        if limit > 0 {
                            idx.truncate(limit);
                        }
                        idx.sort_unstable();
                        for &i in idx.iter().rev() {
                            m.remove(i);
                        }
                        assert_eq!(l.remove(&v, limit, from_tail), idx.len());
                    }
                    6 if rng.u8(..4) == 0 => {
                        let start = rng.usize(0..m.len() + 2);
                        let len = rng.usize(0..m.len() + 2);
                        l.retain_range(start, len);
                        let keep: VecDeque<Vec<u8>> =
                            m.iter().skip(start).take(len).cloned().collect();
                        m = keep;
                    }
                    7 if !m.is_empty() => {
                        let i = rng.usize(..m.len());
                        assert_eq!(l.get(i).unwrap().to_vec(), m[i]);
                        let rev = rng.bool();
                        let got: Vec<Vec<u8>> = l.iter_from(i, rev).map(Elem::to_vec).collect();
                        let want: Vec<Vec<u8>> = if rev {
                            m.iter().take(i + 1).rev().cloned().collect()
                        } else {
                            m.iter().skip(i).cloned().collect()
                        };
                        assert_eq!(got, want);
                    }
                    8 => {
                        let n = rng.usize(0..4);
                        let end = if rng.bool() { End::Left } else { End::Right };
                        l.truncate_end(end, n);
                        for _ in 0..n {
                            match end {
                                End::Left => m.pop_front(),
                                End::Right => m.pop_back(),
                            };
                        }
                    }
                    _ => {
                        assert_eq!(l.get(m.len()), None);
                    }
                }
                assert_eq!(l.len(), m.len());
            }
            check(&l);
            assert_eq!(items(&l), m.iter().cloned().collect::<Vec<_>>());
            let c = l.clone();
            assert_eq!(c, l);
        }
    }

    #[test]
    fn equality_ignores_node_layout_and_memory_is_packed() {
        let mut a = List::new(2);
        let mut b = List::new(-2);
        for i in 0..100 {
            a.push(End::Right, i.to_string().as_bytes());
            b.push(End::Right, i.to_string().as_bytes());
        }
        assert_eq!(a, b);
        b.push(End::Left, b"x");
        assert_ne!(a, b);
        assert_eq!(format!("{:?}", List::new(-2)), "[]");
        let mut big = List::new(-2);
        for i in 0..100_000 {
            big.push(End::Right, format!("element:{i}").as_bytes());
        }
        let per = big.heap_bytes() as f64 / 100_000.0;
        assert!(per < 16.0, "{per} bytes per element");
    }
}
