//! Streams in RDB files and DUMP payloads, as Redis 7.0 stores them.
//!
//! Written as `RDB_TYPE_STREAM_LISTPACKS_2` (type 19); read from types 15
//! (Redis 5 and 6), 19, and 21 (Redis 7.2, whose consumers carry an
//! active-time that 7.0 has no place for and that is skipped):
//!
//! ```text
//! nodes:len ( master-id:string(16 bytes BE) listpack:string )*
//! length:len last-id:len,len
//! [first-id:len,len max-deleted-id:len,len entries-added:len]   19, 21
//! groups:len ( name:string last-id:len,len [entries-read:len]    19, 21
//!              pel:len ( id:16 bytes BE delivery-time:i64le delivery-count:len )*
//!              consumers:len ( name:string seen-time:i64le [active-time:i64le]
//!                              pel:len id:16 bytes BE * )* )*
//! ```
//!
//! A node's listpack holds a master entry `count deleted n name{n} 0`,
//! then each entry as `flags ms-delta seq-delta [k] (name value){k} or
//! value{n}, lp-count`, the form [`crate::stream`]'s nodes are rebuilt
//! from and written back to (byte for byte what Redis writes).
//!
//! Loading checks everything Redis's deep sanitisation checks, and also
//! what Vireo's own structure relies on: IDs strictly increasing across
//! nodes and never below their node's master ID, node counters matching
//! the entry flags, the length matching the live entries, the last ID not
//! below any entry, and each pending entry owned by exactly one consumer.
//! Declared counts only bound loops: memory grows with the data read.

use std::borrow::Cow;
use std::io::Read;

use vireo_resp::number::parse_i64;

use super::encode::{write_len, write_string};
use super::listpack::{self, Builder};
use super::load::{corrupt, Res, Src};
use super::ErrorKind;
use super::{rtype, Packed};
use crate::stream::{Node, Stream, StreamId, FLAG_DELETED, FLAG_SAME_FIELDS};

/// An `entries-read` Redis writes for "unknown" (its -1 as unsigned).
const ENTRIES_READ_UNKNOWN: u64 = u64::MAX;

/// Writes a stream's payload in the `STREAM_LISTPACKS_2` layout.
pub fn write_stream(out: &mut Vec<u8>, s: &Stream, compress: bool) {
    write_len(out, s.nodes.len() as u64);
    for (&master, node) in &s.nodes {
        write_string(out, &master.to_be_bytes(), compress);
        write_string(out, &node_listpack(master, node), compress);
    }
    let m = &s.meta;
    write_len(out, m.length);
    for id in [m.last_id, m.first_id, m.max_deleted] {
        write_id(out, id);
    }
    write_len(out, m.entries_added);
    write_len(out, s.groups.len() as u64);
    for (name, g) in s.groups() {
        write_string(out, name, compress);
        write_id(out, g.last_id);
        write_len(out, g.entries_read.unwrap_or(ENTRIES_READ_UNKNOWN));
        write_len(out, g.pending_len() as u64);
        for (id, nack) in g.pending(StreamId::MIN, StreamId::MAX) {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&nack.delivery_time.to_le_bytes());
            write_len(out, nack.delivery_count);
        }
        write_len(out, g.consumer_count() as u64);
        for (cname, c) in g.consumers() {
            write_string(out, cname, compress);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            write_len(out, c.pending_len() as u64);
            for id in c.pending_ids(StreamId::MIN, StreamId::MAX) {
                out.extend_from_slice(&id.to_be_bytes());
            }
        }
    }
}

/// Writes an ID as two lengths.
fn write_id(out: &mut Vec<u8>, id: StreamId) {
    write_len(out, id.ms);
    write_len(out, id.seq);
}

/// The Redis listpack of a node.
pub(super) fn node_listpack(master: StreamId, node: &Node) -> Vec<u8> {
    let mut lp = Builder::new();
    lp.push_int(node.live() as i64);
    lp.push_int(node.deleted() as i64);
    lp.push_int(node.master_field_count() as i64);
    for name in node.master_names() {
        lp.push(name);
    }
    lp.push_int(0);
    for raw in node.raw_entries(master) {
        lp.push_int(i64::from(raw.flags));
        lp.push_int(raw.id.ms.wrapping_sub(master.ms) as i64);
        lp.push_int(raw.id.seq.wrapping_sub(master.seq) as i64);
        let fields = node.fields(&raw);
        let n = fields.len() as i64;
        if raw.flags & FLAG_SAME_FIELDS != 0 {
            fields.for_each(|(_, value)| lp.push(value));
            lp.push_int(n + 3);
        } else {
            lp.push_int(n);
            for (name, value) in fields {
                lp.push(name);
                lp.push(value);
            }
            lp.push_int(2 * n + 4);
        }
    }
    lp.finish()
}

/// Reads a stream payload of RDB type `ty` (15, 19 or 21). With
/// `salvage` (`sanitize-dump-payload no`), a node whose listpack frame is
/// sound but whose entries are not is left out, and the stream's length
/// and first ID follow the nodes kept, rather than the payload refused.
pub(super) fn read_stream<R: Read>(src: &mut Src<R>, ty: u8, salvage: bool) -> Res<Stream> {
    let mut s = Stream::new();
    let dropped = read_nodes(src, &mut s, salvage)?;
    s.meta.length = src.len()?;
    s.meta.last_id = read_id(src)?;
    if ty == rtype::STREAM_LISTPACKS {
        // Redis 7.0 derives what older files lack; an empty stream's first
        // ID comes out as the largest ID (its edge search finds nothing).
        s.meta.entries_added = s.meta.length;
        s.meta.first_id = s.first_edge_id(false);
    } else {
        s.meta.first_id = read_id(src)?;
        s.meta.max_deleted = read_id(src)?;
        s.meta.entries_added = src.len()?;
    }
    let live: u64 = s.nodes.values().map(Node::live).sum();
    if dropped {
        s.meta.length = live;
        s.meta.first_id = s.first_edge_id(false);
    }
    if live != s.meta.length {
        return corrupt(format!(
            "stream length {} but its nodes hold {live} entries",
            s.meta.length
        ));
    }
    if s.nodes
        .values()
        .next_back()
        .is_some_and(|n| n.last_id() > s.meta.last_id)
    {
        return corrupt("stream last ID below one of its entries");
    }
    let groups = src.len()?;
    for _ in 0..groups {
        read_group(src, &mut s, ty)?;
    }
    Ok(s)
}

/// Reads the nodes, checking their IDs are in order; true when `salvage`
/// left a damaged one out.
fn read_nodes<R: Read>(src: &mut Src<R>, s: &mut Stream, salvage: bool) -> Res<bool> {
    let mut dropped = false;
    let nodes = src.len()?;
    for _ in 0..nodes {
        let key = src.string()?;
        let Ok(key) = <[u8; 16]>::try_from(&key[..]) else {
            return corrupt("stream node key entry is not the size of a stream ID");
        };
        let master = StreamId::from_be_bytes(key);
        if s.nodes
            .last_key_value()
            .is_some_and(|(_, n)| n.last_id() >= master)
        {
            return corrupt("stream nodes out of order");
        }
        let blob = src.string()?;
        match node_from_listpack(master, &blob) {
            Ok(node) => {
                s.nodes.insert(master, node);
            }
            Err(NodeDamage::Entries(_)) if salvage => dropped = true,
            Err(NodeDamage::Frame(e) | NodeDamage::Entries(e)) => return Err(e),
        }
    }
    Ok(dropped)
}

/// What is wrong with a node's listpack: its frame, which Redis checks
/// even with `sanitize-dump-payload no` (size, terminator, a first
/// entry), or only what lies inside it.
enum NodeDamage {
    Frame(ErrorKind),
    Entries(ErrorKind),
}

/// Names a problem inside a node's entries as Redis's loader does.
fn entries_damage(why: impl std::fmt::Display) -> NodeDamage {
    NodeDamage::Entries(ErrorKind::Corrupt(format!(
        "Stream listpack integrity check failed. ({why})"
    )))
}

/// Reads an ID written as two lengths.
fn read_id<R: Read>(src: &mut Src<R>) -> Res<StreamId> {
    Ok(StreamId::new(src.len()?, src.len()?))
}

/// Reads an ID written as 16 raw big-endian bytes.
fn read_raw_id<R: Read>(src: &mut Src<R>) -> Res<StreamId> {
    Ok(StreamId::from_be_bytes(src.exact::<16>()?))
}

/// Reads a millisecond time (8 bytes, little-endian).
fn read_ms<R: Read>(src: &mut Src<R>) -> Res<i64> {
    Ok(i64::from_le_bytes(src.exact::<8>()?))
}

/// Reads one consumer group with its PEL and consumers.
fn read_group<R: Read>(src: &mut Src<R>, s: &mut Stream, ty: u8) -> Res<()> {
    let name = src.string()?;
    let last_id = read_id(src)?;
    let entries_read = if ty == rtype::STREAM_LISTPACKS {
        s.estimate_distance(last_id)
    } else {
        // Redis keeps the counter as a signed number; -1 means unknown.
        Some(src.len()?).filter(|&n| i64::try_from(n).is_ok())
    };
    if s.create_group(&name, last_id, entries_read).is_err() {
        return corrupt("Duplicated consumer group name");
    }
    let Some(group) = s.group_mut(&name) else {
        return corrupt("consumer group vanished while loading");
    };
    let pending = src.len()?;
    for _ in 0..pending {
        let id = read_raw_id(src)?;
        let delivery_time = read_ms(src)?;
        let delivery_count = src.len()?;
        if !group.load_nack(id, delivery_time, delivery_count) {
            return corrupt("Duplicated global PEL entry loading stream consumer group");
        }
    }
    let consumers = src.len()?;
    for _ in 0..consumers {
        let cname = src.string()?;
        let seen_time = read_ms(src)?;
        if ty == rtype::STREAM_LISTPACKS_3 {
            read_ms(src)?; // active-time: Redis 7.0 has no such field
        }
        if !group.create_consumer(&cname, seen_time) {
            return corrupt("Duplicate stream consumer detected.");
        }
        let owned = src.len()?;
        for _ in 0..owned {
            let id = read_raw_id(src)?;
            if !group.load_consumer_entry(&cname, id) {
                return corrupt("consumer PEL entry missing from the group PEL or owned twice");
            }
        }
    }
    if !group.all_owned() {
        return corrupt("stream CG PEL entry without consumer");
    }
    Ok(())
}

/// Reads listpack elements in order, as stream fields expect them.
struct Elements<'a> {
    items: std::vec::IntoIter<Packed<'a>>,
}

impl<'a> Elements<'a> {
    fn next(&mut self) -> Res<Packed<'a>> {
        match self.items.next() {
            Some(p) => Ok(p),
            None => corrupt("stream listpack ends inside an entry"),
        }
    }

    /// An integer element (Redis also takes a string holding one).
    fn int(&mut self) -> Res<i64> {
        match self.next()? {
            Packed::Int(v) => Ok(v),
            Packed::Str(s) => {
                parse_i64(s).map_or_else(|| corrupt("stream listpack: integer expected"), Ok)
            }
        }
    }

    /// A non-negative count that the remaining elements can satisfy
    /// `per` times over.
    fn count(&mut self, per: usize) -> Res<usize> {
        let n = self.int()?;
        match usize::try_from(n) {
            Ok(n) if n.saturating_mul(per) <= self.items.len() => Ok(n),
            _ => corrupt(format!("stream listpack: bad count {n}")),
        }
    }

    /// A string element (integers in their decimal form).
    fn text(&mut self) -> Res<Cow<'a, [u8]>> {
        Ok(match self.next()? {
            Packed::Str(s) => Cow::Borrowed(s),
            v @ Packed::Int(_) => Cow::Owned(v.to_vec()),
        })
    }

    fn texts(&mut self, n: usize) -> Res<Vec<Cow<'a, [u8]>>> {
        (0..n).map(|_| self.text()).collect()
    }
}

/// Rebuilds a node from its Redis listpack, validating it.
fn node_from_listpack(master: StreamId, blob: &[u8]) -> Result<Node, NodeDamage> {
    let frame = |why: String| {
        NodeDamage::Frame(ErrorKind::Corrupt(format!(
            "Stream listpack integrity check failed. ({why})"
        )))
    };
    let (items, damage) = listpack::sound_prefix(blob).map_err(frame)?;
    if items.is_empty() {
        // Redis checks the first entry even in its shallow check.
        let first = damage.unwrap_or_default();
        if first.is_empty() {
            return Err(NodeDamage::Frame(ErrorKind::Corrupt(
                "Empty listpack inside stream".into(),
            )));
        }
        return Err(frame(first));
    }
    if let Some(why) = damage {
        return Err(entries_damage(why));
    }
    node_from_entries(master, items).map_err(|e| match e {
        ErrorKind::Corrupt(why) => entries_damage(why),
        other => NodeDamage::Entries(other),
    })
}

/// Rebuilds a node from its listpack's entries: the master entry, then
/// entries whose IDs, flags and counts must agree with it.
fn node_from_entries(master: StreamId, items: Vec<Packed<'_>>) -> Res<Node> {
    let mut el = Elements {
        items: items.into_iter(),
    };
    let live = el.int()?;
    let deleted = el.int()?;
    let n = el.count(1)?;
    let names = el.texts(n)?;
    if el.int()? != 0 {
        return corrupt("stream listpack: master entry not terminated by 0");
    }
    let declared = live
        .checked_add(deleted)
        .and_then(|n| u32::try_from(n).ok());
    let Some(declared) = declared.map(u64::from) else {
        return corrupt("stream listpack: bad entry counts");
    };
    let mut node = Node::new(names.iter().map(|c| &c[..]));
    let mut prev: Option<StreamId> = None;
    while el.items.len() > 0 {
        if node.entry_count() == declared {
            return corrupt("stream listpack: more entries than its master entry counts");
        }
        let flags = el.int()?;
        let id = StreamId::new(
            master.ms.wrapping_add(el.int()? as u64),
            master.seq.wrapping_add(el.int()? as u64),
        );
        if id < master || prev.is_some_and(|p| p >= id) {
            return corrupt("stream listpack: entry IDs out of order");
        }
        prev = Some(id);
        let (pairs, parts) = if flags & i64::from(FLAG_SAME_FIELDS) != 0 {
            let values = el.texts(n)?;
            (names.iter().cloned().zip(values).collect::<Vec<_>>(), n + 3)
        } else {
            let k = el.count(2)?;
            let pairs = (0..k)
                .map(|_| Ok((el.text()?, el.text()?)))
                .collect::<Res<Vec<_>>>()?;
            (pairs, 2 * k + 4)
        };
        if usize::try_from(el.int()?) != Ok(parts) {
            return corrupt("stream listpack: wrong entry element count");
        }
        let dead = flags & i64::from(FLAG_DELETED) != 0;
        node.push(
            master,
            id,
            dead,
            pairs.iter().map(|(f, v)| (&f[..], &v[..])),
        );
    }
    if prev.is_none() {
        return corrupt("a node without entries");
    }
    if node.live() as i64 != live || node.deleted() as i64 != deleted {
        return corrupt("stream listpack: entry counts do not match the flags");
    }
    Ok(node)
}
