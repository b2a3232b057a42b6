//! Reading RDB data: the streaming [`Loader`] for files and
//! [`restore_payload`] for RESTORE.
//!
//! Files can be far larger than memory allows to buffer, so the loader
//! reads through a fixed 64 KiB window, checksumming bytes as they leave
//! it. Declared lengths never size an allocation up front beyond
//! [`PREALLOC_MAX`]: buffers grow as the data actually arrives, so a lying
//! length costs at most what the input really contains.

use std::io::Read;

use vireo_resp::number::parse_f64;

use super::stream::read_stream;
use super::{
    crc64, intset, listpack, lzf, opcode, rtype, ziplist, zipmap, ErrorKind, Packed, RdbError,
    RDB_VERSION,
};
use crate::clock;
use crate::hash::{Hash, HashLimits};
use crate::keyspace::Entry;
use crate::list::{End, List};
use crate::set::{Member, Set};
use crate::stream::Stream;
use crate::value::{StrValue, Value};
use crate::zset::{self, ZSet};

/// The read window, and the most any declared length preallocates.
const PREALLOC_MAX: usize = 64 * 1024;

/// The encoding thresholds (and limits) loaded values are built with; the
/// defaults are Redis's.
#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    /// `hash-max-listpack-entries` / `hash-max-listpack-value`.
    pub hash: HashLimits,
    /// `zset-max-listpack-entries` / `zset-max-listpack-value`.
    pub zset: zset::Limits,
    /// `set-max-intset-entries`.
    pub set_max_intset_entries: usize,
    /// `list-max-listpack-size`.
    pub list_fill: i64,
    /// `databases`: a file selecting a database beyond it is refused.
    pub databases: usize,
    /// `rdbchecksum`: verify the file's checksum (when it has one).
    pub verify_checksum: bool,
    /// DEBUG SET-SKIP-CHECKSUM-VALIDATION: RESTORE payloads load without
    /// checking their CRC64 (files follow `verify_checksum`).
    pub skip_payload_checksum: bool,
    /// `maxmemory-policy` is an LFU one: keys take the file's access
    /// counters (FREQ); otherwise its idle times (IDLE), as Redis's
    /// `objectSetLRUOrLFU` (an entry keeps one or the other).
    pub lfu: bool,
    /// Redis's `sanitize-dump-payload no`, for RESTORE: a listpack whose
    /// frame passes Redis's shallow check keeps its entries up to the
    /// first damaged one, and a stream leaves out such a node, where the
    /// payload would otherwise be refused. (Redis stores these blobs as
    /// they are and crashes when a command reaches the damage.)
    pub salvage: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            hash: HashLimits::default(),
            zset: zset::Limits::default(),
            set_max_intset_entries: 512,
            list_fill: -2,
            databases: 16,
            verify_checksum: true,
            skip_payload_checksum: false,
            lfu: false,
            salvage: false,
        }
    }
}

/// One thing read from an RDB file.
#[derive(Debug)]
pub enum Item {
    /// An auxiliary field (`redis-ver`, `ctime`, `repl-id`, …).
    Aux {
        /// Field name.
        key: Vec<u8>,
        /// Field value.
        value: Vec<u8>,
    },
    /// Size hints for database `db`, before its keys.
    ResizeDb {
        /// The database the hints are for.
        db: usize,
        /// Number of keys.
        keys: u64,
        /// Number of keys with a TTL.
        expires: u64,
    },
    /// A key with its value, expiry and (when the file has them) idle time
    /// and access counter. The expiry may already be in the past: whether to
    /// keep such a key is the caller's decision (Redis drops them on a
    /// master).
    Entry {
        /// The database the key belongs to.
        db: usize,
        /// The key.
        key: Vec<u8>,
        /// Value and metadata.
        entry: Entry,
    },
    /// A function library (`FUNCTION LOAD` source code).
    Function {
        /// The library's code.
        code: Vec<u8>,
    },
    /// Auxiliary data of a module (skipped: Vireo has no modules).
    ModuleAux {
        /// The module type's name, from its id.
        module: String,
    },
}

/// How many skipped empty keys a [`Loader`] keeps the names of.
const EMPTY_KEYS_NAMED: usize = 10;

/// A buffered reader that tracks the offset and checksums what it consumes.
pub(super) struct Src<R> {
    r: R,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    /// Bytes consumed before `buf[0]`.
    base: u64,
    crc: u64,
    /// `buf[crc_from..pos]` is consumed but not yet in `crc`.
    crc_from: usize,
}

/// A read's result: the value or what was wrong.
pub(super) type Res<T> = Result<T, ErrorKind>;

/// A `Corrupt` error with this message.
pub(super) fn corrupt<T>(msg: impl Into<String>) -> Res<T> {
    Err(ErrorKind::Corrupt(msg.into()))
}

/// A packed blob (ziplist, listpack, intset, zipmap) that failed its
/// validation, named as Redis's loader names it (`"Zset ziplist"` →
/// "Zset ziplist integrity check failed."): operators and Redis's own
/// tests look for those words. The decoder's own reason follows.
fn integrity<T>(blob: &'static str) -> impl FnOnce(String) -> Res<T> {
    move |why| corrupt(format!("{blob} integrity check failed. ({why})"))
}

impl<R: Read> Src<R> {
    /// A reader with a window of `window` bytes (at least 1).
    fn new(r: R, window: usize) -> Self {
        Src {
            r,
            buf: vec![0; window.max(1)].into_boxed_slice(),
            pos: 0,
            end: 0,
            base: 0,
            crc: 0,
            crc_from: 0,
        }
    }

    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// The checksum of everything consumed so far.
    fn crc(&mut self) -> u64 {
        self.crc = crc64(self.crc, &self.buf[self.crc_from..self.pos]);
        self.crc_from = self.pos;
        self.crc
    }

    /// Refills an exhausted window; Eof if the input has ended.
    fn refill(&mut self) -> Res<()> {
        self.crc();
        self.base += self.end as u64;
        self.pos = 0;
        self.end = 0;
        self.crc_from = 0;
        loop {
            match self.r.read(&mut self.buf) {
                Ok(0) => return Err(ErrorKind::UnexpectedEof),
                Ok(n) => {
                    self.end = n;
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ErrorKind::Io(e.to_string())),
            }
        }
    }

    fn u8(&mut self) -> Res<u8> {
        if self.pos == self.end {
            self.refill()?;
        }
        self.pos += 1;
        Ok(self.buf[self.pos - 1])
    }

    pub(super) fn exact<const N: usize>(&mut self) -> Res<[u8; N]> {
        let mut out = [0u8; N];
        let mut got = 0;
        while got < N {
            if self.pos == self.end {
                self.refill()?;
            }
            let n = (N - got).min(self.end - self.pos);
            out[got..got + n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
            self.pos += n;
            got += n;
        }
        Ok(out)
    }

    /// Reads `n` bytes, growing the result only as data arrives.
    fn bytes(&mut self, n: u64) -> Res<Vec<u8>> {
        let n = usize::try_from(n).map_err(|_| ErrorKind::UnexpectedEof)?;
        let mut out = Vec::with_capacity(n.min(PREALLOC_MAX));
        while out.len() < n {
            if self.pos == self.end {
                self.refill()?;
            }
            let k = (n - out.len()).min(self.end - self.pos);
            out.extend_from_slice(&self.buf[self.pos..self.pos + k]);
            self.pos += k;
        }
        Ok(out)
    }

    /// Reads a length, or an encoded-string marker (Err(low 6 bits)).
    fn len_or_enc(&mut self) -> Res<Result<u64, u8>> {
        let b = self.u8()?;
        Ok(match b >> 6 {
            0 => Ok(u64::from(b & 0x3f)),
            1 => Ok(u64::from(b & 0x3f) << 8 | u64::from(self.u8()?)),
            2 if b == 0x80 => Ok(u64::from(u32::from_be_bytes(self.exact()?))),
            2 if b == 0x81 => Ok(u64::from_be_bytes(self.exact()?)),
            2 => return corrupt(format!("unknown length encoding {b:#04x}")),
            _ => Err(b & 0x3f),
        })
    }

    /// Reads a length.
    pub(super) fn len(&mut self) -> Res<u64> {
        match self.len_or_enc()? {
            Ok(n) => Ok(n),
            Err(_) => corrupt("an encoded string where a length was expected"),
        }
    }

    /// Reads a length that counts elements to come, as a usize.
    pub(super) fn count(&mut self) -> Res<usize> {
        usize::try_from(self.len()?).or_else(|_| corrupt("element count too large"))
    }

    /// Reads a string in any of its encodings.
    pub(super) fn string(&mut self) -> Res<Vec<u8>> {
        let int = |v: i64| itoa::Buffer::new().format(v).as_bytes().to_vec();
        match self.len_or_enc()? {
            Ok(n) => self.bytes(n),
            Err(0) => Ok(int(i64::from(i8::from_le_bytes(self.exact()?)))),
            Err(1) => Ok(int(i64::from(i16::from_le_bytes(self.exact()?)))),
            Err(2) => Ok(int(i64::from(i32::from_le_bytes(self.exact()?)))),
            Err(3) => {
                let clen = self.len()?;
                let ulen = self.len()?;
                if ulen > clen.saturating_mul(lzf::MAX_EXPANSION as u64) {
                    return corrupt("LZF string longer than its compressed data allows");
                }
                let c = self.bytes(clen)?;
                match lzf::decompress(&c, ulen as usize) {
                    Some(s) => Ok(s),
                    None => corrupt("invalid LZF compressed string"),
                }
            }
            Err(e) => corrupt(format!("unknown string encoding {e}")),
        }
    }

    /// Reads a sorted set score in the old text format.
    fn text_double(&mut self) -> Res<f64> {
        match self.u8()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => {
                let s = self.bytes(u64::from(n))?;
                parse_f64(&s).map_or_else(|| corrupt("invalid sorted set score"), Ok)
            }
        }
    }
}

/// Reads an RDB file item by item; see the module documentation.
pub struct Loader<R> {
    src: Src<R>,
    version: u32,
    opts: LoadOptions,
    db: usize,
    done: bool,
    /// Keys skipped because their value was empty (Redis skips them too).
    empty_keys: u64,
    /// The first [`EMPTY_KEYS_NAMED`] of those keys.
    empty_key_names: Vec<Vec<u8>>,
    /// The checksum stored after the EOF opcode, once read.
    stored_checksum: Option<u64>,
}

impl<R: Read> Loader<R> {
    /// Reads and checks the header (`REDIS` and a version from 1 to 10),
    /// building values with Redis's default thresholds.
    pub fn new(r: R) -> Result<Self, RdbError> {
        Loader::with_options(r, LoadOptions::default())
    }

    /// Like [`Loader::new`] with the server's thresholds and limits.
    pub fn with_options(r: R, opts: LoadOptions) -> Result<Self, RdbError> {
        let mut src = Src::new(r, PREALLOC_MAX);
        let header = src.exact::<9>().map_err(|kind| RdbError {
            kind: match kind {
                ErrorKind::UnexpectedEof => ErrorKind::BadMagic,
                k => k,
            },
            offset: 0,
            key: None,
        })?;
        let err = |kind| RdbError {
            kind,
            offset: 0,
            key: None,
        };
        if &header[..5] != b"REDIS" || !header[5..].iter().all(u8::is_ascii_digit) {
            return Err(err(ErrorKind::BadMagic));
        }
        let version = header[5..]
            .iter()
            .fold(0u32, |v, d| v * 10 + u32::from(d - b'0'));
        if version == 0 || version > u32::from(RDB_VERSION) {
            return Err(err(ErrorKind::UnsupportedVersion(version)));
        }
        Ok(Loader {
            src,
            version,
            opts,
            db: 0,
            done: false,
            empty_keys: 0,
            empty_key_names: Vec::new(),
            stored_checksum: None,
        })
    }

    /// The file's RDB version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.src.offset()
    }

    /// The checksum stored at the end of the file, once the end was read
    /// (None before that, and for versions before 5, which have none; 0
    /// means the writer had checksums off and nothing was verified).
    pub fn stored_checksum(&self) -> Option<u64> {
        self.stored_checksum
    }

    /// Keys skipped so far because their value was empty.
    pub fn empty_keys_skipped(&self) -> u64 {
        self.empty_keys
    }

    /// The names of the first skipped empty keys (at most ten: Redis logs
    /// that many, then only counts).
    pub fn empty_key_names(&self) -> &[Vec<u8>] {
        &self.empty_key_names
    }

    /// The next item, or None after the EOF opcode (whose checksum has then
    /// been verified, unless it is 0, meaning the writer had checksums off).
    // Not an Iterator: an error ends the stream, and callers want `?`.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Item>, RdbError> {
        if self.done {
            return Ok(None);
        }
        let mut key = None;
        let r = self.step(&mut key);
        if r.is_err() {
            self.done = true;
        }
        r.map_err(|kind| RdbError {
            kind,
            offset: self.src.offset(),
            key,
        })
    }

    /// Reads up to the next item; `key` is set while a key is being read so
    /// that errors can name it.
    fn step(&mut self, key: &mut Option<Vec<u8>>) -> Res<Option<Item>> {
        let mut expire: Option<i64> = None;
        let mut idle = None;
        let mut freq = None;
        loop {
            let op = self.src.u8()?;
            match op {
                opcode::EOF => {
                    self.done = true;
                    if self.version >= 5 {
                        let computed = self.src.crc();
                        let stored = u64::from_le_bytes(self.src.exact()?);
                        self.stored_checksum = Some(stored);
                        if self.opts.verify_checksum && stored != 0 && stored != computed {
                            return Err(ErrorKind::ChecksumMismatch { stored, computed });
                        }
                    }
                    return Ok(None);
                }
                opcode::SELECTDB => {
                    let db = self.src.len()?;
                    if db >= self.opts.databases as u64 {
                        return corrupt(format!(
                            "database {db} selected, but only {} are configured",
                            self.opts.databases
                        ));
                    }
                    self.db = db as usize;
                }
                opcode::RESIZEDB => {
                    let keys = self.src.len()?;
                    let expires = self.src.len()?;
                    return Ok(Some(Item::ResizeDb {
                        db: self.db,
                        keys,
                        expires,
                    }));
                }
                opcode::AUX => {
                    let key = self.src.string()?;
                    let value = self.src.string()?;
                    return Ok(Some(Item::Aux { key, value }));
                }
                opcode::EXPIRETIME => {
                    expire = Some(i64::from(i32::from_le_bytes(self.src.exact()?)) * 1000);
                }
                opcode::EXPIRETIME_MS => expire = Some(i64::from_le_bytes(self.src.exact()?)),
                opcode::IDLE => idle = Some(self.src.len()?),
                opcode::FREQ => freq = Some(self.src.u8()?),
                opcode::MODULE_AUX => return self.module_aux().map(Some),
                opcode::FUNCTION_PRE_GA => {
                    return Err(ErrorKind::Unsupported(
                        "pre-release function format not supported".into(),
                    ))
                }
                opcode::FUNCTION2 => {
                    let code = self.src.string()?;
                    return Ok(Some(Item::Function { code }));
                }
                ty => {
                    *key = Some(self.src.string()?);
                    let value = read_value(&mut self.src, ty, &self.opts)?;
                    let key = key.take().unwrap_or_default();
                    let Some(value) = value else {
                        self.empty_keys += 1;
                        if self.empty_key_names.len() < EMPTY_KEYS_NAMED {
                            self.empty_key_names.push(key);
                        }
                        expire = None;
                        idle = None;
                        freq = None;
                        continue;
                    };
                    let now = if idle.is_some() || freq.is_some() {
                        clock::now_ms()
                    } else {
                        0
                    };
                    let mut entry = Entry::new(value)
                        .with_expire(expire.map(|t| u64::try_from(t).unwrap_or(0)));
                    match (self.opts.lfu, idle, freq) {
                        (false, Some(s), _) => entry = entry.with_idle(s, now),
                        (true, _, Some(f)) => entry = entry.with_freq(f, now),
                        _ => {}
                    }
                    return Ok(Some(Item::Entry {
                        db: self.db,
                        key,
                        entry,
                    }));
                }
            }
        }
    }

    /// Skips a module's auxiliary data (id, when, then typed values up to
    /// the module EOF marker) and names the module.
    fn module_aux(&mut self) -> Res<Item> {
        const CHARSET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let id = self.src.len()?;
        let when_op = self.src.len()?;
        if when_op != 2 {
            return corrupt("module aux data has an invalid 'when' field");
        }
        self.src.len()?;
        loop {
            match self.src.len()? {
                0 => break,
                1 | 2 => {
                    self.src.len()?;
                }
                3 => {
                    self.src.exact::<4>()?;
                }
                4 => {
                    self.src.exact::<8>()?;
                }
                5 => {
                    self.src.string()?;
                }
                op => return corrupt(format!("unknown module value opcode {op}")),
            }
        }
        let mut name = [0u8; 9];
        let mut bits = id >> 10;
        for c in name.iter_mut().rev() {
            *c = CHARSET[(bits & 63) as usize];
            bits >>= 6;
        }
        Ok(Item::ModuleAux {
            module: String::from_utf8_lossy(&name).into_owned(),
        })
    }
}

/// Why a RESTORE payload was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum PayloadError {
    /// Too short, from a newer RDB version, or its checksum does not match
    /// ("DUMP payload version or checksum are wrong").
    VersionOrChecksum,
    /// The value inside is malformed or unsupported ("Bad data format").
    BadData(RdbError),
}

/// Decodes a DUMP payload: checks the RDB version (at most 10) and the
/// CRC64 footer, then reads and fully validates the value. An empty
/// collection is bad data.
pub fn restore_payload(payload: &[u8], opts: &LoadOptions) -> Result<Value, PayloadError> {
    read_payload(payload, !opts.skip_payload_checksum, |src, ty| {
        read_value(src, ty, opts).and_then(|v| v.map_or_else(|| corrupt("empty value"), Ok))
    })
}

/// Decodes the DUMP payload of a stream (types 15, 19 and 21), checked as
/// [`restore_payload`] checks; any other type is bad data.
pub fn restore_stream_payload(payload: &[u8]) -> Result<Stream, PayloadError> {
    read_payload(payload, true, |src, ty| match ty {
        rtype::STREAM_LISTPACKS | rtype::STREAM_LISTPACKS_2 | rtype::STREAM_LISTPACKS_3 => {
            read_stream(src, ty, false)
        }
        _ => corrupt(format!("RDB type {ty} is not a stream")),
    })
}

/// Checks a DUMP payload's footer (its CRC64 unless `verify_crc` is off,
/// DEBUG SET-SKIP-CHECKSUM-VALIDATION), then reads its type byte and hands
/// the body to `read`.
fn read_payload<T>(
    payload: &[u8],
    verify_crc: bool,
    read: impl FnOnce(&mut Src<&[u8]>, u8) -> Res<T>,
) -> Result<T, PayloadError> {
    let body = checked_payload_body(payload, verify_crc).ok_or(PayloadError::VersionOrChecksum)?;
    // A payload is already in memory: a window bigger than it is waste.
    let mut src = Src::new(body, body.len().min(PREALLOC_MAX));
    let r = src.u8().and_then(|ty| read(&mut src, ty));
    r.map_err(|kind| {
        PayloadError::BadData(RdbError {
            kind,
            offset: src.offset(),
            key: None,
        })
    })
}

/// Why a FUNCTION RESTORE payload was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum FunctionsPayloadError {
    /// Too short, from a newer RDB version, or a bad checksum.
    VersionOrChecksum,
    /// A record is not a function library ("given type is not a function").
    NotAFunction,
    /// A record is cut short or malformed.
    BadData,
}

/// Decodes a FUNCTION DUMP payload into the libraries' code, checking the
/// version and CRC64 footer like [`restore_payload`].
pub fn restore_functions(payload: &[u8]) -> Result<Vec<Vec<u8>>, FunctionsPayloadError> {
    let body =
        checked_payload_body(payload, true).ok_or(FunctionsPayloadError::VersionOrChecksum)?;
    let mut src = Src::new(body, body.len().min(PREALLOC_MAX));
    let mut codes = Vec::new();
    while src.offset() < body.len() as u64 {
        match src.u8() {
            Ok(opcode::FUNCTION2) => {}
            Ok(_) => return Err(FunctionsPayloadError::NotAFunction),
            Err(_) => return Err(FunctionsPayloadError::BadData),
        }
        codes.push(src.string().map_err(|_| FunctionsPayloadError::BadData)?);
    }
    Ok(codes)
}

/// The body of a DUMP-style payload whose version is known and whose
/// checksum is good (not checked unless `verify_crc`: DEBUG
/// SET-SKIP-CHECKSUM-VALIDATION).
fn checked_payload_body(payload: &[u8], verify_crc: bool) -> Option<&[u8]> {
    if payload.len() < 10 {
        return None;
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let stored = u64::from_le_bytes(footer[2..].try_into().ok()?);
    let crc_ok = !verify_crc || crc64(0, &payload[..payload.len() - 8]) == stored;
    (version <= RDB_VERSION && crc_ok).then_some(body)
}

/// Reads a value of type byte `ty`; None for an empty collection (which a
/// key never holds).
fn read_value<R: Read>(src: &mut Src<R>, ty: u8, o: &LoadOptions) -> Res<Option<Value>> {
    let v = match ty {
        rtype::STRING => Value::Str(StrValue::from_vec(src.string()?)),
        rtype::LIST => {
            let n = src.count()?;
            let mut l = List::new(o.list_fill);
            for _ in 0..n {
                l.push(End::Right, &src.string()?);
            }
            Value::List(l)
        }
        rtype::SET => {
            let n = src.count()?;
            let mut s = Set::new();
            for _ in 0..n {
                if !s.insert(&src.string()?, o.set_max_intset_entries) {
                    return corrupt("Duplicate set members detected");
                }
            }
            Value::Set(s)
        }
        rtype::ZSET | rtype::ZSET_2 => {
            let n = src.count()?;
            let cap = PREALLOC_MAX / std::mem::size_of::<(Vec<u8>, f64)>();
            let mut entries = Vec::with_capacity(n.min(cap));
            for _ in 0..n {
                let m = src.string()?;
                let score = if ty == rtype::ZSET {
                    src.text_double()?
                } else {
                    f64::from_le_bytes(src.exact()?)
                };
                entries.push((m, score));
            }
            build_zset(entries, o.zset).or_else(corrupt)?
        }
        rtype::HASH => {
            let n = src.count()?;
            // Too many fields for a listpack: a hashtable from the start
            // (a limit of 0 converts at the first field), as Redis does.
            let limits = if n > o.hash.max_entries {
                HashLimits {
                    max_entries: 0,
                    ..o.hash
                }
            } else {
                o.hash
            };
            let mut h = Hash::new();
            for _ in 0..n {
                let f = src.string()?;
                let v = src.string()?;
                if !h.set(&f, &v, limits) {
                    return corrupt("Duplicate hash fields detected");
                }
            }
            Value::Hash(h)
        }
        rtype::HASH_ZIPMAP => {
            let blob = src.string()?;
            let pairs = zipmap::pairs(&blob).or_else(integrity("Zipmap"))?;
            build_hash(pairs.into_iter(), o.hash).or_else(|field| {
                corrupt(format!(
                    "Hash zipmap with dup elements, or big length ({})",
                    field.len()
                ))
            })?
        }
        rtype::LIST_ZIPLIST => {
            let blob = src.string()?;
            let mut l = List::new(o.list_fill);
            push_all(
                &mut l,
                &ziplist::entries(&blob).or_else(integrity("Ziplist"))?,
            );
            Value::List(l)
        }
        rtype::SET_INTSET => {
            let blob = src.string()?;
            let mut s = Set::new();
            for v in intset::decode(&blob).or_else(integrity("Intset"))? {
                s.insert_member(Member::Int(v), o.set_max_intset_entries);
            }
            Value::Set(s)
        }
        rtype::ZSET_ZIPLIST | rtype::ZSET_LISTPACK => {
            let blob = src.string()?;
            let (blob_name, items) = if ty == rtype::ZSET_ZIPLIST {
                let name = "Zset ziplist";
                (name, ziplist::entries(&blob).or_else(integrity(name))?)
            } else {
                let name = "Zset listpack";
                (name, packed_pairs(&blob, name, o.salvage)?)
            };
            if items.len() % 2 != 0 {
                return integrity(blob_name)("an odd number of entries".into());
            }
            let mut entries = Vec::with_capacity(items.len() / 2);
            for pair in items.chunks_exact(2) {
                let score = match pair[1] {
                    Packed::Int(v) => v as f64,
                    Packed::Str(s) => match parse_f64(s) {
                        Some(f) => f,
                        None => return integrity(blob_name)("a score that is not a number".into()),
                    },
                };
                entries.push((pair[0].to_vec(), score));
            }
            // Redis converts a packed set by its length only.
            let limits = zset::Limits {
                max_value: usize::MAX,
                ..o.zset
            };
            build_zset(entries, limits).or_else(integrity(blob_name))?
        }
        rtype::HASH_ZIPLIST | rtype::HASH_LISTPACK => {
            let blob = src.string()?;
            let (blob_name, items) = if ty == rtype::HASH_ZIPLIST {
                let name = "Hash ziplist";
                (name, ziplist::entries(&blob).or_else(integrity(name))?)
            } else {
                let name = "Hash listpack";
                (name, packed_pairs(&blob, name, o.salvage)?)
            };
            if items.len() % 2 != 0 {
                return integrity(blob_name)("an odd number of entries".into());
            }
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = items
                .chunks_exact(2)
                .map(|p| (p[0].to_vec(), p[1].to_vec()))
                .collect();
            // Redis converts a packed hash by its length only.
            let limits = HashLimits {
                max_value: usize::MAX,
                ..o.hash
            };
            build_hash(pairs.iter().map(|(f, v)| (&f[..], &v[..])), limits)
                .or_else(|_| integrity(blob_name)("duplicate hash fields".into()))?
        }
        rtype::LIST_QUICKLIST | rtype::LIST_QUICKLIST_2 => {
            let nodes = src.count()?;
            let mut l = List::new(o.list_fill);
            for _ in 0..nodes {
                let container = if ty == rtype::LIST_QUICKLIST_2 {
                    src.len()?
                } else {
                    2
                };
                if container != 1 && container != 2 {
                    return integrity("Quicklist")(format!("unknown node container {container}"));
                }
                let blob = src.string()?;
                if blob.is_empty() {
                    // Redis refuses an empty node without naming it.
                    return corrupt("an empty quicklist node");
                }
                match container {
                    1 => l.push(End::Right, &blob),
                    _ if ty == rtype::LIST_QUICKLIST => push_all(
                        &mut l,
                        &ziplist::entries(&blob).or_else(integrity("Ziplist"))?,
                    ),
                    _ => push_all(&mut l, &packed_items(&blob, "Listpack", o.salvage)?),
                }
            }
            Value::List(l)
        }
        rtype::STREAM_LISTPACKS | rtype::STREAM_LISTPACKS_2 | rtype::STREAM_LISTPACKS_3 => {
            Value::Stream(Box::new(read_stream(src, ty, o.salvage)?))
        }
        rtype::MODULE_2 => Value::Module(read_module(src)?),
        rtype::MODULE => {
            return Err(ErrorKind::Unsupported(format!(
                "module keys are not supported (RDB type {ty})"
            )))
        }
        _ => return corrupt(format!("unknown RDB type {ty}")),
    };
    let empty = match &v {
        Value::Str(_) => false,
        Value::List(l) => l.is_empty(),
        Value::Hash(h) => h.is_empty(),
        Value::Set(s) => s.is_empty(),
        Value::ZSet(z) => z.is_empty(),
        // An empty stream is a valid value (XADD ... MAXLEN 0 makes one).
        Value::Stream(_) => false,
        Value::Module(_) => false,
    };
    Ok((!empty).then_some(v))
}

/// Reads an `RDB_TYPE_MODULE_2` value written by `encode::write_module`:
/// the module id, one string field, the end marker; the registered
/// decoder rebuilds the value. An unknown id is refused the way Redis
/// refuses it, naming the module type.
fn read_module<R: Read>(src: &mut Src<R>) -> Res<crate::module::ModuleValue> {
    use super::encode::module_opcode;
    let id = src.len()?;
    let Some(decode) = crate::module::decoder(id) else {
        return Err(ErrorKind::Unsupported(format!(
            "The RDB file contains module data I can't load: no matching module type '{}'",
            crate::module::module_name(id)
        )));
    };
    if src.len()? != module_opcode::STRING {
        return corrupt("module value without its payload string");
    }
    let payload = src.string()?;
    if src.len()? != module_opcode::EOF {
        return corrupt("module value not terminated");
    }
    decode(&payload).or_else(|e| corrupt(format!("module value: {e}")))
}

/// Appends packed entries to a list.
fn push_all(l: &mut List, items: &[Packed<'_>]) {
    for it in items {
        match it {
            Packed::Str(s) => l.push(End::Right, s),
            Packed::Int(v) => l.push(End::Right, itoa::Buffer::new().format(*v).as_bytes()),
        }
    }
}

/// A listpack's entries (its blob named `name` in errors, as Redis names
/// it). With `salvage`, a sound frame keeps the entries before the first
/// damaged one ([`listpack::sound_prefix`]).
fn packed_items<'a>(blob: &'a [u8], name: &'static str, salvage: bool) -> Res<Vec<Packed<'a>>> {
    if !salvage {
        return listpack::entries(blob).or_else(integrity(name));
    }
    let (items, _damage) = listpack::sound_prefix(blob).or_else(integrity(name))?;
    Ok(items)
}

/// [`packed_items`] for a blob of (field, value) pairs: a salvaged prefix
/// keeps whole pairs only.
fn packed_pairs<'a>(blob: &'a [u8], name: &'static str, salvage: bool) -> Res<Vec<Packed<'a>>> {
    let mut items = packed_items(blob, name, salvage)?;
    if salvage {
        items.truncate(items.len() & !1);
    }
    Ok(items)
}

/// Builds a hash from pairs; Err is the first duplicate field.
fn build_hash<'a>(
    pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    limits: HashLimits,
) -> Result<Value, Vec<u8>> {
    let mut h = Hash::new();
    for (f, v) in pairs {
        if !h.set(f, v, limits) {
            return Err(f.to_vec());
        }
    }
    Ok(Value::Hash(h))
}

/// Builds a sorted set from (member, score) pairs in the encoding `limits`
/// give its size; Err names a NaN score or a duplicate member (Redis's
/// messages for a plain sorted set's; a packed one's are an integrity
/// failure of its blob).
fn build_zset(entries: Vec<(Vec<u8>, f64)>, limits: zset::Limits) -> Result<Value, String> {
    if entries.iter().any(|(_, s)| s.is_nan()) {
        return Err("Zset with NAN score detected".into());
    }
    let mut names: Vec<&[u8]> = entries.iter().map(|(m, _)| &m[..]).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        return Err("Duplicate zset fields detected".into());
    }
    Ok(Value::ZSet(ZSet::from_entries(entries, limits)))
}
