//! The RDB format: Redis's snapshot file and the `DUMP`/`RESTORE` payload.
//!
//! Vireo writes what Redis 7.0 writes (RDB version 10), so a snapshot moves
//! between the two in both directions, and reads every encoding Redis 7.0
//! reads (back to version 1 files), except streams and module values.
//!
//! * [`encode`]: writing the header, auxiliary fields, database selectors
//!   and entries into a byte buffer the caller flushes, plus the checksum.
//! * [`load`]: a streaming [`Loader`] over any `std::io::Read`, yielding one
//!   [`Item`] at a time, and [`restore_payload`] for RESTORE.
//! * [`stream`]: the stream payload, both ways.
//! * The packed sub-formats values are stored in: [`listpack`],
//!   [`ziplist`], [`intset`], [`zipmap`], plus [`lzf`] string compression
//!   and the [`crc64`] checksum.
//!
//! Everything read is untrusted: every declared length is checked against
//! the data before use, buffers grow only as data actually arrives, packed
//! blobs are validated completely (Redis's deep sanitisation), and damage
//! is reported as an [`RdbError`] naming what, where and in which key.

pub mod crc64;
pub mod encode;
pub mod intset;
pub mod listpack;
pub mod load;
pub mod lzf;
pub mod stream;
pub mod ziplist;
pub mod zipmap;

use std::fmt;

pub use crc64::crc64;
pub use encode::{
    dump_functions, dump_payload, dump_stream_payload, encode_value, write_aux, write_entry,
    write_eof, write_function, write_header, write_resize_db, write_select_db, EncodeOptions,
};
pub use load::{
    restore_functions, restore_payload, restore_stream_payload, FunctionsPayloadError, Item,
    LoadOptions, Loader, PayloadError,
};
pub use stream::write_stream;

/// The RDB version Redis 7.0 writes and the newest Vireo reads.
pub const RDB_VERSION: u16 = 10;

/// Opcodes that may stand where a value type byte stands.
pub(crate) mod opcode {
    /// A function library (Redis 7.0's format).
    pub const FUNCTION2: u8 = 245;
    /// Function libraries in the format of Redis 7.0 release candidates.
    pub const FUNCTION_PRE_GA: u8 = 246;
    /// Module auxiliary data.
    pub const MODULE_AUX: u8 = 247;
    /// The next key's idle time in seconds (LRU).
    pub const IDLE: u8 = 248;
    /// The next key's access frequency counter (LFU).
    pub const FREQ: u8 = 249;
    /// An auxiliary field (key/value metadata).
    pub const AUX: u8 = 250;
    /// Hash table size hints for the current database.
    pub const RESIZEDB: u8 = 251;
    /// The next key's expiry in Unix milliseconds.
    pub const EXPIRETIME_MS: u8 = 252;
    /// The next key's expiry in Unix seconds (old files).
    pub const EXPIRETIME: u8 = 253;
    /// Switch to another database.
    pub const SELECTDB: u8 = 254;
    /// End of the data (the checksum follows).
    pub const EOF: u8 = 255;
}

/// Value type bytes.
pub(crate) mod rtype {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    pub const STREAM_LISTPACKS_3: u8 = 21;
}

/// One entry of a packed blob (listpack or ziplist): an integer stored in
/// binary, or a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packed<'a> {
    /// An integer entry; its string form is its decimal digits.
    Int(i64),
    /// A string entry.
    Str(&'a [u8]),
}

impl Packed<'_> {
    /// The entry's string form.
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Packed::Int(v) => itoa::Buffer::new().format(v).as_bytes().to_vec(),
            Packed::Str(s) => s.to_vec(),
        }
    }
}

/// What went wrong reading RDB data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The data ended in the middle of something.
    UnexpectedEof,
    /// The underlying reader failed.
    Io(String),
    /// The file does not start with `REDIS` and four digits.
    BadMagic,
    /// An RDB version this implementation cannot read (0 or above 10).
    UnsupportedVersion(u32),
    /// The checksum after the EOF opcode does not match the data.
    ChecksumMismatch {
        /// The checksum the file stores.
        stored: u64,
        /// The checksum of the data read.
        computed: u64,
    },
    /// Valid RDB content Vireo cannot represent (streams, modules, …).
    Unsupported(String),
    /// Malformed content.
    Corrupt(String),
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::UnexpectedEof => write!(f, "unexpected end of file"),
            ErrorKind::Io(e) => write!(f, "read error: {e}"),
            ErrorKind::BadMagic => write!(f, "wrong signature trying to load DB from file"),
            ErrorKind::UnsupportedVersion(v) => write!(f, "can't handle RDB format version {v}"),
            ErrorKind::ChecksumMismatch { stored, computed } => write!(
                f,
                "RDB CRC error: checksum mismatch (stored {stored:016x}, computed {computed:016x})"
            ),
            ErrorKind::Unsupported(m) | ErrorKind::Corrupt(m) => f.write_str(m),
        }
    }
}

/// An error reading RDB data: what failed, the byte offset where it was
/// noticed and, inside a key, the key's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdbError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// Offset from the start of the data at which the problem was noticed.
    pub offset: u64,
    /// The key being read, if the problem is inside one.
    pub key: Option<Vec<u8>>,
}

impl fmt::Display for RdbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        if let Some(k) = &self.key {
            write!(f, " for key '{}'", String::from_utf8_lossy(k))?;
        }
        write!(f, " at offset {}", self.offset)
    }
}

impl std::error::Error for RdbError {}

#[cfg(test)]
mod stream_tests;
#[cfg(test)]
mod tests;
