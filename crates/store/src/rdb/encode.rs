//! Writing RDB data the way Redis 7.0 does (version 10).
//!
//! Functions append to a caller-owned buffer; a snapshot writer flushes it
//! to the file as it fills and feeds the same bytes to [`super::crc64`].

use vireo_resp::number::{parse_i64, write_double};

use super::{crc64, intset, listpack, lzf, opcode, rtype, RDB_VERSION};
use crate::keyspace::{Entry, LfuTuning};
use crate::list::{Elem, List};
use crate::set::Member;
use crate::stream::Stream;
use crate::value::{StrRef, ValueRef};

/// How entries are written (from `rdbcompression` and `maxmemory-policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncodeOptions {
    /// LZF-compress strings longer than 20 bytes when that saves space.
    pub compress: bool,
    /// Write each key's idle time (the IDLE opcode), for LRU policies.
    pub lru_idle: bool,
    /// Write each key's access counter (the FREQ opcode), for LFU policies.
    pub lfu_freq: bool,
}

/// Strings at most this long are tried as integers (Redis's limit: an
/// `int32` never needs more than 11 characters).
const INT_TRY_MAX: usize = 11;
/// Strings longer than this are tried with LZF.
const COMPRESS_MIN: usize = 20;

/// Writes the file header: `REDIS` and the version as four digits.
pub fn write_header(out: &mut Vec<u8>) {
    out.extend_from_slice(format!("REDIS{RDB_VERSION:04}").as_bytes());
}

/// Writes an auxiliary field (`redis-ver`, `ctime`, …).
pub fn write_aux(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    out.push(opcode::AUX);
    write_string(out, key, false);
    write_string(out, value, false);
}

/// Writes a database selector: the entries that follow belong to `db`.
pub fn write_select_db(out: &mut Vec<u8>, db: usize) {
    out.push(opcode::SELECTDB);
    write_len(out, db as u64);
}

/// Writes the current database's size hints (keys, keys with a TTL).
pub fn write_resize_db(out: &mut Vec<u8>, keys: u64, expires: u64) {
    out.push(opcode::RESIZEDB);
    write_len(out, keys);
    write_len(out, expires);
}

/// Writes one key: its expiry (milliseconds) if any, its idle time and
/// access counter when asked, then the type byte, the key and the value.
pub fn write_entry(
    out: &mut Vec<u8>,
    key: &[u8],
    entry: &Entry,
    now_ms: u64,
    opts: &EncodeOptions,
) {
    if let Some(at) = entry.expire_at() {
        out.push(opcode::EXPIRETIME_MS);
        out.extend_from_slice(&at.to_le_bytes());
    }
    if opts.lru_idle {
        out.push(opcode::IDLE);
        write_len(out, entry.idle_secs(now_ms));
    }
    if opts.lfu_freq {
        out.push(opcode::FREQ);
        out.push(entry.lfu_freq(now_ms, LfuTuning::default().decay_minutes));
    }
    let value = entry.value();
    let ty = value_type(value);
    out.push(ty);
    write_string(out, key, opts.compress);
    write_payload(out, ty, value, opts);
}

/// Writes the EOF opcode (the caller appends the checksum).
pub fn write_eof(out: &mut Vec<u8>) {
    out.push(opcode::EOF);
}

/// Writes a function library (the FUNCTION2 opcode and its code), as
/// Redis saves each library in RDB files and FUNCTION DUMP payloads.
pub fn write_function(out: &mut Vec<u8>, code: &[u8], opts: &EncodeOptions) {
    out.push(opcode::FUNCTION2);
    write_string(out, code, opts.compress);
}

/// The FUNCTION DUMP payload of `libraries` (each one's code): their
/// records, the RDB version and the CRC64, like a key's DUMP payload.
pub fn dump_functions<'a>(
    libraries: impl IntoIterator<Item = &'a [u8]>,
    opts: &EncodeOptions,
) -> Vec<u8> {
    let mut out = Vec::new();
    for code in libraries {
        write_function(&mut out, code, opts);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Writes a value as its type byte and payload (DUMP's body).
pub fn encode_value(out: &mut Vec<u8>, value: ValueRef, opts: &EncodeOptions) {
    let ty = value_type(value);
    out.push(ty);
    write_payload(out, ty, value, opts);
}

/// The DUMP payload of `value`: type and payload, the RDB version as two
/// little-endian bytes, and the CRC64 of all that in eight.
pub fn dump_payload(value: ValueRef, opts: &EncodeOptions) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(&mut out, value, opts);
    finish_payload(out)
}

/// The DUMP payload of a stream (type `STREAM_LISTPACKS_2`), laid out as
/// [`dump_payload`]'s.
pub fn dump_stream_payload(stream: &Stream, opts: &EncodeOptions) -> Vec<u8> {
    let mut out = vec![rtype::STREAM_LISTPACKS_2];
    super::stream::write_stream(&mut out, stream, opts.compress);
    finish_payload(out)
}

/// Appends the DUMP footer (RDB version and CRC64) to a type and payload.
fn finish_payload(mut out: Vec<u8>) -> Vec<u8> {
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The type byte Redis 7.0 writes for a value in its current encoding.
fn value_type(value: ValueRef) -> u8 {
    match value {
        ValueRef::Str(_) => rtype::STRING,
        ValueRef::List(_) => rtype::LIST_QUICKLIST_2,
        ValueRef::Hash(h) if h.is_listpack() => rtype::HASH_LISTPACK,
        ValueRef::Hash(_) => rtype::HASH,
        ValueRef::Set(s) if s.encoding_name() == "intset" => rtype::SET_INTSET,
        ValueRef::Set(_) => rtype::SET,
        ValueRef::ZSet(z) if z.encoding_name() == "listpack" => rtype::ZSET_LISTPACK,
        ValueRef::ZSet(_) => rtype::ZSET_2,
        ValueRef::Stream(_) => rtype::STREAM_LISTPACKS_2,
        ValueRef::Module(_) => rtype::MODULE_2,
    }
}

/// Writes the payload of `value` for type byte `ty` (from [`value_type`]).
fn write_payload(out: &mut Vec<u8>, ty: u8, value: ValueRef, opts: &EncodeOptions) {
    let compress = opts.compress;
    match value {
        ValueRef::Str(StrRef::Int(n)) => write_int_string(out, n),
        ValueRef::Str(StrRef::Bytes { data, .. }) => write_string(out, data, compress),
        ValueRef::List(l) => write_list(out, l, compress),
        ValueRef::Hash(h) if ty == rtype::HASH_LISTPACK => {
            let mut lp = listpack::Builder::new();
            for (f, v) in h.iter() {
                lp.push(f);
                lp.push(v);
            }
            write_string(out, &lp.finish(), compress);
        }
        ValueRef::Hash(h) => {
            write_len(out, h.len() as u64);
            for (f, v) in h.iter() {
                write_string(out, f, compress);
                write_string(out, v, compress);
            }
        }
        ValueRef::Set(s) if ty == rtype::SET_INTSET => {
            let ints: Vec<i64> = s
                .iter()
                .filter_map(|m| match m {
                    Member::Int(v) => Some(v),
                    Member::Bytes(_) => None,
                })
                .collect();
            write_string(out, &intset::encode(&ints), compress);
        }
        ValueRef::Set(s) => {
            write_len(out, s.len() as u64);
            let mut buf = itoa::Buffer::new();
            for m in s.iter() {
                write_string(out, m.as_bytes(&mut buf), compress);
            }
        }
        ValueRef::ZSet(z) if ty == rtype::ZSET_LISTPACK => {
            let mut lp = listpack::Builder::new();
            let mut score = Vec::with_capacity(24);
            for (m, s) in z.iter() {
                lp.push(m);
                score.clear();
                write_double(&mut score, s);
                lp.push(&score);
            }
            write_string(out, &lp.finish(), compress);
        }
        ValueRef::ZSet(z) => {
            write_len(out, z.len() as u64);
            for (m, s) in z.iter() {
                write_string(out, m, compress);
                out.extend_from_slice(&s.to_le_bytes());
            }
        }
        ValueRef::Stream(s) => super::stream::write_stream(out, s, compress),
        ValueRef::Module(m) => write_module(out, &m.0.serialize(), m.0.module_id(), compress),
    }
}

/// Module value opcodes (Redis's `RDB_MODULE_OPCODE_*`).
pub(crate) mod module_opcode {
    pub const EOF: u64 = 0;
    pub const STRING: u64 = 5;
}

/// Writes a module value as `RDB_TYPE_MODULE_2`: the module id, the
/// payload as one string field, the end marker. Redis can skip such a
/// record field by field; without the module it refuses the file, naming
/// the module type.
fn write_module(out: &mut Vec<u8>, payload: &[u8], id: u64, compress: bool) {
    write_len(out, id);
    write_len(out, module_opcode::STRING);
    write_string(out, payload, compress);
    write_len(out, module_opcode::EOF);
}

/// A quicklist node that holds its elements packed in a listpack.
const NODE_PACKED: u64 = 2;

/// Writes a list as `LIST_QUICKLIST_2`: the node count, then each node as
/// a packed listpack, nodes cut where the list's fill says so.
fn write_list(out: &mut Vec<u8>, list: &List, compress: bool) {
    // First pass: count the nodes from entry sizes alone.
    let mut nodes = 0u64;
    let (mut bytes, mut count) = (0usize, 0usize);
    for e in list.iter() {
        let sz = elem_size(e);
        if count == 0 || !list.node_fits(bytes + sz, count + 1) {
            nodes += 1;
            bytes = listpack::Builder::new().bytes();
            count = 0;
        }
        bytes += sz;
        count += 1;
    }
    write_len(out, nodes);
    let mut lp = listpack::Builder::new();
    for e in list.iter() {
        let sz = elem_size(e);
        if lp.count() > 0 && !list.node_fits(lp.bytes() + sz, lp.count() + 1) {
            write_node(out, std::mem::take(&mut lp), compress);
        }
        match e {
            Elem::Int(v) => lp.push_int(v),
            Elem::Bytes(b) => lp.push(b),
        }
    }
    if lp.count() > 0 {
        write_node(out, lp, compress);
    }
}

/// Bytes a list element takes in a listpack.
fn elem_size(e: Elem<'_>) -> usize {
    match e {
        Elem::Int(v) => listpack::Builder::int_entry_size(v),
        Elem::Bytes(b) => listpack::Builder::entry_size(b),
    }
}

/// Writes one packed quicklist node.
fn write_node(out: &mut Vec<u8>, lp: listpack::Builder, compress: bool) {
    write_len(out, NODE_PACKED);
    write_string(out, &lp.finish(), compress);
}

/// Writes a length: 6 bits in one byte, 14 bits in two, else a marker
/// byte and 4 or 8 big-endian bytes.
pub(crate) fn write_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
    } else if let Ok(n) = u32::try_from(n) {
        out.push(0x80);
        out.extend_from_slice(&n.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Writes an integer in the 1, 2 or 4 byte integer encodings when it fits,
/// else as its decimal string.
fn write_int_string(out: &mut Vec<u8>, v: i64) {
    if let Ok(b) = i8::try_from(v) {
        out.push(0xC0);
        out.extend_from_slice(&b.to_le_bytes());
    } else if let Ok(b) = i16::try_from(v) {
        out.push(0xC1);
        out.extend_from_slice(&b.to_le_bytes());
    } else if let Ok(b) = i32::try_from(v) {
        out.push(0xC2);
        out.extend_from_slice(&b.to_le_bytes());
    } else {
        let mut buf = itoa::Buffer::new();
        let s = buf.format(v).as_bytes();
        write_len(out, s.len() as u64);
        out.extend_from_slice(s);
    }
}

/// Writes a string: as an integer when it is a short canonical one, LZF
/// compressed when `compress` and that saves at least four bytes, else raw.
pub(crate) fn write_string(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    if s.len() <= INT_TRY_MAX {
        if let Some(v) = parse_i64(s).filter(|v| i32::try_from(*v).is_ok()) {
            write_int_string(out, v);
            return;
        }
    }
    if compress && s.len() > COMPRESS_MIN {
        if let Some(c) = lzf::compress(s, s.len() - 3) {
            out.push(0xC3);
            write_len(out, c.len() as u64);
            write_len(out, s.len() as u64);
            out.extend_from_slice(&c);
            return;
        }
    }
    write_len(out, s.len() as u64);
    out.extend_from_slice(s);
}
