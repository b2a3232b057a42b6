//! A keyspace entry: key, value and metadata in one heap block.
//!
//! Redis spends four allocations on a small string key (dict entry, object
//! header, key and value strings) plus a second dict entry when the key has
//! a TTL. A Vireo [`Entry`] is a single pointer-sized handle to one block:
//!
//! ```text
//! access clock (24 bits) | flags u8                      4 bytes
//! [expire_at u64]                                  only with a TTL
//! [padding to 8 | Value]                           object kind
//! [key length (varint)] | key bytes                length in the flags if < 15
//! [value length (varint) | value bytes]            embedded kind
//! [value (zigzag varint)]                          int kind
//! ```
//!
//! Blocks come from [`crate::entry_alloc`], in 8-byte size classes up to
//! 256 bytes (mimalloc's are 16, 32, 48, 64, 80, 96, 112, 128 … bytes): a
//! 16-byte key with a 64-byte value is an 86-byte block costing 88, not
//! 96. An 8-digit key holding an 8-digit number is 4 + 8 + 4 = 16 bytes,
//! one class below what an 8-byte header or a separate key length byte
//! would need.
//!
//! Three kinds of value, chosen by what is stored:
//!
//! * **int**: a string that is the canonical form of an `i64` (Redis's `int`
//!   encoding), as a varint of one to ten bytes (four for an 8-digit
//!   number);
//! * **embedded**: any other string as written by SET and friends, its bytes
//!   after the key, so a lookup that compared the key already has the value
//!   in cache;
//! * **object**: every other value (lists, hashes, sets, sorted sets, and
//!   strings changed in place by APPEND, SETRANGE, SETBIT…) as a [`Value`]
//!   stored in the block itself.
//!
//! Strings are read through [`Entry::value`], which borrows; asking for a
//! mutable [`Value`] ([`Entry::value_mut`]) turns an int or embedded string
//! into an object first, which is what Redis does to an `embstr` it modifies
//! (it becomes `raw`). Whole-value replacements ([`Entry::set_value`]) pick
//! the compact kind again.

use std::alloc::{self, Layout};
use std::fmt;
use std::mem::{align_of, size_of, ManuallyDrop};
use std::ptr::{self, NonNull};

use crate::entry_alloc;
use crate::keyspace::{LfuTuning, LFU_INIT_VAL};
use crate::value::{StrRef, StrValue, Value, ValueRef};

/// Value kinds, in the low two bits of the flags byte.
const KIND_INT: u8 = 0;
const KIND_EMB: u8 = 1;
const KIND_OBJ: u8 = 2;
const KIND_MASK: u8 = 3;
/// Flag: the block holds an expiry time.
const HAS_TTL: u8 = 4;
/// Flag: the entry was never stored, so the keyspace gives it its access
/// clock when it is (see [`Entry::stamp_new`]).
const UNSTAMPED: u8 = 8;
/// The key's length sits in the flags' top four bits when below this
/// value; this value there means a varint before the key holds it.
const KEY_LEN_INLINE: usize = 15;
const KEY_LEN_SHIFT: u8 = 4;

/// Bytes of metadata every block starts with.
const HEADER: usize = 4;
/// Offset of the flags byte (the header's last; the clock is the low 24
/// bits of the header read as a little-endian u32).
const FLAGS_AT: usize = 3;
/// Alignment of every block: the header and the value word are read as
/// aligned words (the expiry, after the header, unaligned).
const BLOCK_ALIGN: usize = 8;
/// The access clock's bits.
const CLOCK_MASK: u32 = (1 << 24) - 1;

const _: () = assert!(align_of::<Value>() <= BLOCK_ALIGN);
const _: () = assert!(size_of::<Value>().is_multiple_of(BLOCK_ALIGN));

/// Bytes a LEB128 varint of `n` takes.
#[inline]
fn varint_len(n: u64) -> usize {
    let bits = u64::BITS - (n | 1).leading_zeros();
    bits.div_ceil(7) as usize
}

/// An `i64` mapped to a `u64` so that small magnitudes of either sign
/// make short varints (zigzag: 0, -1, 1, -2 … become 0, 1, 2, 3 …).
#[inline]
fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

/// The inverse of [`zigzag`].
#[inline]
fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

/// Writes `n` as a LEB128 varint at `p`; returns the bytes written.
///
/// # Safety
/// `p` must be valid for `varint_len(n)` bytes of writes.
#[inline]
unsafe fn write_varint(p: *mut u8, mut n: u64) -> usize {
    let mut i = 0;
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        // SAFETY: the caller sized the space with `varint_len`, which
        // counts exactly the bytes this loop writes.
        unsafe { p.add(i).write(if n == 0 { byte } else { byte | 0x80 }) };
        i += 1;
        if n == 0 {
            return i;
        }
    }
}

/// Reads a LEB128 varint at `p`; returns (value, bytes read).
///
/// # Safety
/// `p` must point at a varint written by [`write_varint`].
#[inline]
unsafe fn read_varint(p: *const u8) -> (u64, usize) {
    // SAFETY: the caller guarantees a complete varint at `p`.
    let first = unsafe { *p };
    if first < 0x80 {
        return (u64::from(first), 1);
    }
    let mut n = 0u64;
    let mut i = 0;
    loop {
        // SAFETY: as above; the varint ends at the first byte below 0x80.
        let byte = unsafe { *p.add(i) };
        n |= u64::from(byte & 0x7f) << (7 * i);
        i += 1;
        if byte < 0x80 {
            return (n, i);
        }
    }
}

/// Access metadata: Redis's 24-bit `lru` field. With an LFU
/// `maxmemory-policy` it holds the minute of the counter's last decay
/// (16 bits, Unix minutes modulo 2^16) above the logarithmic access counter
/// (8 bits); otherwise the last access in Unix seconds modulo 2^24. Which
/// one is kept follows the policy at the time of access, as in Redis:
/// after the policy changes between LRU and LFU, entries not accessed since
/// read as garbage until they are (Redis's OBJECT FREQ and IDLETIME refuse
/// to answer under the other kind of policy for this reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Meta(u32);

impl Meta {
    /// An LRU clock reading: the last access at `now_ms`.
    fn lru(now_ms: u64) -> Meta {
        Meta((now_ms / 1000) as u32 & CLOCK_MASK)
    }

    /// An LFU reading: counter `count` as of `now_ms`.
    fn lfu(count: u8, now_ms: u64) -> Meta {
        Meta((u32::from(lfu_minutes(now_ms)) << 8) | u32::from(count))
    }

    /// Whole seconds from this LRU reading to `now_ms`, allowing for the
    /// 24-bit clock's wrap (every 194 days) as Redis does.
    fn idle_secs(self, now_ms: u64) -> u64 {
        u64::from(Meta::lru(now_ms).0.wrapping_sub(self.0) & CLOCK_MASK)
    }

    /// The counter of an LFU reading, before decay.
    fn lfu_count(self) -> u8 {
        self.0 as u8
    }

    /// The minute of an LFU reading's last decay.
    fn lfu_minutes(self) -> u16 {
        (self.0 >> 8) as u16
    }
}

/// What goes in the value part of a block being built.
enum Payload<'a> {
    Int(i64),
    Emb(&'a [u8]),
    Obj(Value),
}

impl Payload<'_> {
    fn kind(&self) -> u8 {
        match self {
            Payload::Int(_) => KIND_INT,
            Payload::Emb(_) => KIND_EMB,
            Payload::Obj(_) => KIND_OBJ,
        }
    }

    /// The compact payload for a string written by SET and friends: an int
    /// when it is an integer's canonical form.
    fn of_str(bytes: &[u8]) -> Payload<'_> {
        match vireo_resp::number::parse_i64(bytes) {
            Some(n) => Payload::Int(n),
            None => Payload::Emb(bytes),
        }
    }

    /// Bytes the payload takes after the key (see [`Shape::tail`]).
    fn tail(&self) -> usize {
        match self {
            Payload::Emb(b) => varint_len(b.len() as u64) + b.len(),
            Payload::Int(n) => varint_len(zigzag(*n)),
            Payload::Obj(_) => 0,
        }
    }

    /// Writes an int or embedded payload at `tail`; an object payload
    /// writes nothing here (its Value goes in the block's word).
    ///
    /// # Safety
    /// `tail` must be valid for [`Payload::tail`] bytes of writes.
    unsafe fn write_compact(&self, tail: *mut u8) {
        // SAFETY: the caller provides `self.tail()` bytes at `tail`, which
        // is what these writes take.
        unsafe {
            match self {
                Payload::Int(v) => drop(write_varint(tail, zigzag(*v))),
                Payload::Emb(b) => {
                    let n = write_varint(tail, b.len() as u64);
                    ptr::copy_nonoverlapping(b.as_ptr(), tail.add(n), b.len());
                }
                Payload::Obj(_) => {}
            }
        }
    }

    /// The compact payload for a whole value.
    fn of(value: &Value) -> Option<Payload<'_>> {
        match value {
            Value::Str(StrValue::Int(n)) => Some(Payload::Int(*n)),
            Value::Str(StrValue::Bytes { data, raw: false }) => Some(Payload::Emb(data)),
            _ => None,
        }
    }
}

/// Where things are in a block; computed from the flags byte and lengths.
#[derive(Clone, Copy)]
struct Shape {
    flags: u8,
    key_len: usize,
    /// Bytes after the key: an embedded string's length and bytes, or an
    /// int's varint.
    tail: usize,
}

impl Shape {
    fn kind(self) -> u8 {
        self.flags & KIND_MASK
    }

    /// Offset of what follows the header and the expiry.
    fn after_expiry(self) -> usize {
        HEADER + if self.flags & HAS_TTL != 0 { 8 } else { 0 }
    }

    /// Offset of an object's Value (8-aligned, after the expiry).
    fn word_offset(self) -> usize {
        self.after_expiry().next_multiple_of(BLOCK_ALIGN)
    }

    /// Offset of the key's length varint, or of the key when its length is
    /// in the flags.
    fn key_offset(self) -> usize {
        match self.kind() {
            KIND_OBJ => self.word_offset() + size_of::<Value>(),
            _ => self.after_expiry(),
        }
    }

    /// Bytes the key's length takes before the key (0 when in the flags).
    fn key_len_bytes(self) -> usize {
        if self.key_len < KEY_LEN_INLINE {
            0
        } else {
            varint_len(self.key_len as u64)
        }
    }

    /// Offset of what follows the key (see `tail`).
    fn tail_offset(self) -> usize {
        self.key_offset() + self.key_len_bytes() + self.key_len
    }

    /// Total block size.
    fn size(self) -> usize {
        self.tail_offset() + self.tail
    }

    fn layout(self) -> Layout {
        match Layout::from_size_align(self.size(), BLOCK_ALIGN) {
            Ok(l) => l,
            // Keys and values are bounded by the protocol's bulk length
            // limit, far below isize::MAX.
            Err(_) => panic!("entry of {} bytes", self.size()),
        }
    }
}

/// One key with its value, TTL and access metadata, in one allocation.
///
/// An entry made by [`Entry::new`] has an empty key until the keyspace
/// stores it under one; entries handed out of the keyspace keep theirs.
///
/// The handle also carries bits that belong to the key table holding it
/// (`key_table.rs`): a 16-bit tag of the key's hash in the address's
/// unused top bits, and in its alignment bits the snapshot mark and a
/// 2-bit access generation. They let the table keep one word per key,
/// reject non-matching keys without reading their blocks, and tell
/// eviction which keys are older without reading them either. The entry's
/// own operations ignore and keep them, including those that move it to a
/// new block.
pub struct Entry {
    block: NonNull<u8>,
}

/// The handle bits that are the block's address: blocks are 8-aligned and
/// user-space addresses fit in 48 bits on the 64-bit targets we build for
/// (x86_64 and aarch64 Linux hand out addresses above 2^47 only to a
/// `mmap` that asks for them), which [`Entry::build`] checks.
const ADDR_BITS: usize = ((1 << 48) - 1) & !(BLOCK_ALIGN - 1);
/// Where the key table's tag sits in the handle.
const TAG_SHIFT: u32 = 48;
/// The snapshot mark's bit in the handle.
const MARK_BIT: usize = 1;
/// Where the key table's access generation sits in the handle: the other
/// two alignment bits.
const GEN_SHIFT: u32 = 1;
const GEN_BITS: usize = 3 << GEN_SHIFT;

const _: () = assert!(
    usize::BITS == 64,
    "entry handles pack table bits above 48-bit addresses"
);

// SAFETY: an Entry exclusively owns its block (like a Box), and the Value
// it may hold is Send and Sync.
unsafe impl Send for Entry {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for Entry {}

impl Entry {
    /// The block's address, without the key table's bits.
    #[inline]
    fn ptr(&self) -> *mut u8 {
        self.block.as_ptr().map_addr(|a| a & ADDR_BITS)
    }

    /// The address of the entry's block: no other live entry has it, so
    /// it names the entry (eviction keeps it instead of a copy of the key).
    #[inline]
    pub(crate) fn addr(&self) -> usize {
        self.ptr().addr()
    }

    /// The handle bits that are not the address.
    #[inline]
    fn table_bits(&self) -> usize {
        self.block.as_ptr().addr() & !ADDR_BITS
    }

    /// Replaces the handle bits that are not the address with `bits`.
    #[inline]
    fn set_table_bits(&mut self, bits: usize) {
        let p = self.ptr().map_addr(|a| a | (bits & !ADDR_BITS));
        // The address part is a live block's, never zero.
        self.block = NonNull::new(p).unwrap_or(self.block);
    }

    /// The hash tag the key table stored with this entry (0: none).
    #[inline]
    pub(crate) fn table_tag(&self) -> u32 {
        (self.block.as_ptr().addr() >> TAG_SHIFT) as u32
    }

    /// Stores the key table's hash tag (16 bits) with the entry, keeping
    /// the mark and the generation.
    #[inline]
    pub(crate) fn set_table_tag(&mut self, tag: u32) {
        debug_assert!(tag <= u32::from(u16::MAX));
        let kept = self.table_bits() & (MARK_BIT | GEN_BITS);
        self.set_table_bits(((tag as usize) << TAG_SHIFT) | kept);
    }

    /// Drops every bit the key table stored in the handle (the entry
    /// leaves the table).
    #[inline]
    pub(crate) fn clear_table_bits(&mut self) {
        self.set_table_bits(0);
    }

    /// The access generation (0-3) the key table stored with the entry.
    #[inline]
    pub(crate) fn table_gen(&self) -> u8 {
        ((self.table_bits() & GEN_BITS) >> GEN_SHIFT) as u8
    }

    /// Stores the key table's access generation (the low two bits of
    /// `generation`).
    #[inline]
    pub(crate) fn set_table_gen(&mut self, generation: u8) {
        let bits = self.table_bits() & !GEN_BITS;
        self.set_table_bits(bits | ((usize::from(generation) << GEN_SHIFT) & GEN_BITS));
    }

    /// The snapshot mark the key table keeps with the entry.
    #[inline]
    pub(crate) fn is_marked(&self) -> bool {
        self.table_bits() & MARK_BIT != 0
    }

    /// Sets or clears the snapshot mark.
    #[inline]
    pub(crate) fn set_marked(&mut self, on: bool) {
        let bits = self.table_bits() & !MARK_BIT;
        self.set_table_bits(bits | if on { MARK_BIT } else { 0 });
    }

    /// Puts `fresh` in this entry's place, keeping the key table's bits
    /// with the place; returns the entry that was there (without them).
    pub(crate) fn replace_keeping_table_bits(&mut self, mut fresh: Entry) -> Entry {
        fresh.set_table_bits(self.table_bits());
        let mut old = std::mem::replace(self, fresh);
        old.set_table_bits(0);
        old
    }

    /// Starts loading the entry's header and key into the cache, for a
    /// caller about to read several scattered entries (eviction sampling).
    pub(crate) fn prefetch(&self) {
        crate::dict::prefetch_read(self.ptr());
    }

    /// Starts loading level `depth` of where a member hashed to `hash`
    /// lives when this entry holds a hash, a set or a sorted set
    /// ([`Hash::prefetch_field`], [`Set::prefetch_member`],
    /// [`ZSet::prefetch_member`]); false for any other value, or one with
    /// nothing more to load.
    ///
    /// [`Hash::prefetch_field`]: crate::hash::Hash::prefetch_field
    /// [`Set::prefetch_member`]: crate::set::Set::prefetch_member
    /// [`ZSet::prefetch_member`]: crate::zset::ZSet::prefetch_member
    pub(crate) fn prefetch_member(&self, hash: u64, depth: u8) -> bool {
        match self.value() {
            ValueRef::Hash(h) => h.prefetch_field(hash, depth),
            ValueRef::Set(s) => s.prefetch_member(hash, depth),
            ValueRef::ZSet(z) => z.prefetch_member(hash, depth),
            _ => false,
        }
    }

    /// A persistent entry with an empty key, with fresh access metadata once
    /// stored.
    pub fn new(value: Value) -> Self {
        Self::from_value(UNSTAMPED_META, 0, b"", value)
    }

    /// An entry for `key` holding `value`, expiring at `expire_at` (Unix
    /// ms): what the keyspace stores.
    pub fn with_key_value(key: &[u8], value: Value, expire_at: Option<u64>) -> Self {
        Self::from_value(UNSTAMPED_META, expire_raw(expire_at), key, value)
    }

    /// An entry for `key` holding the string `bytes`, built straight from
    /// the bytes (SET's path: no intermediate buffer).
    pub fn with_key_str(key: &[u8], bytes: &[u8], expire_at: Option<u64>) -> Self {
        Self::build(
            UNSTAMPED_META,
            expire_raw(expire_at),
            key,
            Payload::of_str(bytes),
        )
    }

    /// Makes this stored entry hold the string `bytes` with expiry
    /// `expire_at`, as if a fresh entry had replaced it (access clock
    /// included), when that fits the block as it is: same kind of string,
    /// same TTL presence, same length. False (nothing changed) otherwise.
    /// SET's overwrite path: no allocation, and no free of a block that
    /// another thread may have allocated.
    pub(crate) fn overwrite_str(
        &mut self,
        bytes: &[u8],
        expire_at: Option<u64>,
        now_ms: u64,
        tuning: LfuTuning,
    ) -> bool {
        let shape = self.shape();
        let expire = expire_raw(expire_at);
        let payload = Payload::of_str(bytes);
        if shape.kind() != payload.kind()
            || (expire != 0) != (shape.flags & HAS_TTL != 0)
            || payload.tail() != shape.tail
        {
            return false;
        }
        let meta = fresh_meta(Some(self), now_ms, tuning);
        // SAFETY: same kind, TTL presence and tail length as the block was
        // built with, so the expiry and the tail are where `build` wrote
        // them and the new ones are exactly as long; `&mut self` is
        // exclusive.
        unsafe {
            let p = self.ptr();
            if expire != 0 {
                p.add(HEADER).cast::<u64>().write_unaligned(expire);
            }
            payload.write_compact(p.add(shape.tail_offset()));
        }
        self.set_meta(meta);
        true
    }

    fn from_value(meta: (Meta, bool), expire: u64, key: &[u8], value: Value) -> Self {
        match Payload::of(&value) {
            Some(p) => Self::build(meta, expire, key, p),
            None => Self::build(meta, expire, key, Payload::Obj(value)),
        }
    }

    /// Allocates and fills a block; `meta` is the access clock and whether
    /// it is still to be stamped.
    fn build((meta, unstamped): (Meta, bool), expire: u64, key: &[u8], payload: Payload) -> Self {
        let mut flags = payload.kind();
        if expire != 0 {
            flags |= HAS_TTL;
        }
        if unstamped {
            flags |= UNSTAMPED;
        }
        flags |= (key.len().min(KEY_LEN_INLINE) as u8) << KEY_LEN_SHIFT;
        let shape = Shape {
            flags,
            key_len: key.len(),
            tail: payload.tail(),
        };
        let layout = shape.layout();
        // The layout has a non-zero size (the header alone is 4) and
        // alignment 8, as `entry_alloc::alloc` needs.
        let raw = entry_alloc::alloc(layout);
        let Some(block) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        assert!(
            raw.addr() & !ADDR_BITS == 0,
            "entry block at {raw:p}, beyond the 48-bit addresses entry handles assume"
        );
        // SAFETY: every write below stays inside the `shape.size()` bytes
        // just allocated, at the offsets `Shape` computes; the block is
        // 8-aligned and the header and Value offsets are multiples of 4 and
        // 8, so those typed writes are aligned (the expiry's is not).
        unsafe {
            let p = block.as_ptr();
            p.cast::<u32>()
                .write((meta.0 & CLOCK_MASK) | (u32::from(flags) << 24));
            if expire != 0 {
                p.add(HEADER).cast::<u64>().write_unaligned(expire);
            }
            let at = shape.key_offset();
            let n = if key.len() < KEY_LEN_INLINE {
                0
            } else {
                write_varint(p.add(at), key.len() as u64)
            };
            ptr::copy_nonoverlapping(key.as_ptr(), p.add(at + n), key.len());
            match payload {
                Payload::Obj(v) => p.add(shape.word_offset()).cast::<Value>().write(v),
                compact => compact.write_compact(p.add(shape.tail_offset())),
            }
        }
        Entry { block }
    }

    #[inline]
    fn flags(&self) -> u8 {
        // SAFETY: every block has its 4-byte header.
        unsafe { *self.ptr().add(FLAGS_AT) }
    }

    /// The key's offset and length.
    #[inline]
    fn key_span(&self) -> (usize, usize) {
        let flags = self.flags();
        let at = Shape {
            flags,
            key_len: 0,
            tail: 0,
        }
        .key_offset();
        let inline = usize::from(flags >> KEY_LEN_SHIFT);
        if inline < KEY_LEN_INLINE {
            return (at, inline);
        }
        // SAFETY: a key of KEY_LEN_INLINE bytes or more has its length as a
        // varint at the key offset, which `build` wrote.
        let (len, n) = unsafe { read_varint(self.ptr().add(at)) };
        (at + n, len as usize)
    }

    #[inline]
    fn kind(&self) -> u8 {
        self.flags() & KIND_MASK
    }

    /// The block's shape, read back from it.
    fn shape(&self) -> Shape {
        let flags = self.flags();
        let mut shape = Shape {
            flags,
            key_len: 0,
            tail: 0,
        };
        shape.key_len = self.key_span().1;
        // SAFETY: for the embedded and int kinds `build` wrote a varint
        // after the key.
        unsafe {
            let p = self.ptr();
            let kind = flags & KIND_MASK;
            if kind != KIND_OBJ {
                let (v, n) = read_varint(p.add(shape.tail_offset()));
                shape.tail = if kind == KIND_EMB { n + v as usize } else { n };
            }
        }
        shape
    }

    fn meta(&self) -> Meta {
        // SAFETY: the header is at the (8-aligned) start of every block.
        Meta(unsafe { self.ptr().cast::<u32>().read() } & CLOCK_MASK)
    }

    /// The access clock and whether it is still to be stamped, for a
    /// rebuilt block.
    fn meta_state(&self) -> (Meta, bool) {
        (self.meta(), self.flags() & UNSTAMPED != 0)
    }

    /// Sets the access clock, which makes the entry stamped.
    fn set_meta(&mut self, m: Meta) {
        let flags = self.flags() & !UNSTAMPED;
        // SAFETY: as in `meta`; `&mut self` means no one else reads it.
        unsafe {
            self.ptr()
                .cast::<u32>()
                .write((m.0 & CLOCK_MASK) | (u32::from(flags) << 24));
        }
    }

    /// The key's bytes (empty for an entry not stored yet).
    #[inline]
    pub fn key(&self) -> &[u8] {
        let (at, len) = self.key_span();
        // SAFETY: `build` wrote the key's bytes there; they live as long as
        // the block, which `&self` borrows.
        unsafe { std::slice::from_raw_parts(self.ptr().add(at), len) }
    }

    /// The value, borrowed.
    pub fn value(&self) -> ValueRef<'_> {
        let shape = Shape {
            flags: self.flags(),
            key_len: 0,
            tail: 0,
        };
        // SAFETY: the kind says what `build` put at the Value offset (an
        // aligned Value) or after the key (an int's varint, an embedded
        // string's length and bytes); the borrow of `self` keeps the block
        // alive.
        unsafe {
            let p = self.ptr();
            if shape.kind() == KIND_OBJ {
                return (*p.add(shape.word_offset()).cast::<Value>()).as_ref();
            }
            let tail = p.add(self.shape().tail_offset());
            let (v, n) = read_varint(tail);
            if shape.kind() == KIND_INT {
                return ValueRef::Str(StrRef::Int(unzigzag(v)));
            }
            let data = std::slice::from_raw_parts(tail.add(n), v as usize);
            ValueRef::Str(StrRef::Bytes { data, raw: false })
        }
    }

    /// The value if it is a string.
    pub fn as_str(&self) -> Option<StrRef<'_>> {
        match self.value() {
            ValueRef::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value, mutably. An int or embedded string becomes an object
    /// first (the block is rebuilt once); commands that only replace a
    /// string whole should use [`Entry::set_value`], which keeps it compact.
    pub fn value_mut(&mut self) -> &mut Value {
        if self.kind() != KIND_OBJ {
            let owned = self.value().to_value();
            self.rebuild(self.expire_raw(), Payload::Obj(owned));
        }
        let word = Shape {
            flags: self.flags(),
            key_len: 0,
            tail: 0,
        }
        .word_offset();
        // SAFETY: the block now holds a Value at the word offset; `&mut
        // self` makes this the only reference to it, for as long as it lives.
        unsafe { &mut *self.ptr().add(word).cast::<Value>() }
    }

    /// The value as a mutable [`Value`] when it is stored as one (every
    /// non-string value is; int and embedded strings are not): typed
    /// accessors for lists, hashes, sets and sorted sets use this, so that a
    /// WRONGTYPE check on a string does not turn it into an object.
    pub fn object_mut(&mut self) -> Option<&mut Value> {
        (self.kind() == KIND_OBJ).then(|| self.value_mut())
    }

    /// The string value, mutably, or None for another type: for commands
    /// that change a string in place (APPEND, SETRANGE, SETBIT, BITFIELD),
    /// after which it is stored as an object like Redis's `raw` strings.
    pub fn str_mut(&mut self) -> Option<&mut StrValue> {
        self.as_str()?;
        match self.value_mut() {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Replaces the value, keeping key, TTL and access metadata.
    pub fn set_value(&mut self, value: Value) {
        if let (KIND_INT, Value::Str(StrValue::Int(n))) = (self.kind(), &value) {
            let shape = self.shape();
            let z = zigzag(*n);
            if varint_len(z) == shape.tail {
                // SAFETY: the int kind ends with the value's varint, which
                // the new one exactly replaces; `&mut self` is exclusive.
                // (INCR's path: no new block.)
                unsafe { write_varint(self.ptr().add(shape.tail_offset()), z) };
                return;
            }
        }
        match Payload::of(&value) {
            Some(p) => self.rebuild(self.expire_raw(), p),
            None => self.rebuild(self.expire_raw(), Payload::Obj(value)),
        }
    }

    /// Takes the value out, freeing the block.
    pub fn into_value(self) -> Value {
        if self.kind() != KIND_OBJ {
            return self.value().to_value();
        }
        let this = ManuallyDrop::new(self);
        let shape = this.shape();
        // SAFETY: the object kind holds an initialised Value at the word
        // offset; it is moved out exactly once and the block is then freed
        // without dropping it again (`this` is never dropped).
        unsafe {
            let p = this.ptr();
            let value = p.add(shape.word_offset()).cast::<Value>().read();
            entry_alloc::dealloc(p, shape.layout());
            value
        }
    }

    /// The same entry stored under `key` (RENAME, MOVE, and entries made
    /// with [`Entry::new`] being stored).
    pub fn with_key(self, key: &[u8]) -> Self {
        if self.key() == key {
            return self;
        }
        let expire = self.expire_raw();
        self.relayout(expire, Some(key))
    }

    /// Rebuilds the block with a new payload, same key and metadata; the old
    /// value (if an object) is dropped.
    fn rebuild(&mut self, expire: u64, payload: Payload) {
        let fresh = Self::build(self.meta_state(), expire, self.key(), payload);
        self.replace_keeping_table_bits(fresh);
    }

    /// The same value in a new block with another expiry or (given) key;
    /// an object value moves across without being copied.
    fn relayout(self, expire: u64, new_key: Option<&[u8]>) -> Self {
        let meta = self.meta_state();
        if self.kind() != KIND_OBJ {
            let key = new_key.unwrap_or(self.key());
            return match self.value() {
                ValueRef::Str(StrRef::Int(n)) => Self::build(meta, expire, key, Payload::Int(n)),
                ValueRef::Str(StrRef::Bytes { data, .. }) => {
                    Self::build(meta, expire, key, Payload::Emb(data))
                }
                _ => unreachable!("only objects hold other values"),
            };
        }
        let this = ManuallyDrop::new(self);
        let shape = this.shape();
        // SAFETY: the Value is moved out of the old block once, into the
        // new block; the old block (whose key bytes `build` copies) is freed
        // afterwards without dropping the value (`this` is never dropped).
        // `build` only aborts on allocation failure, so the value cannot be
        // dropped twice by an unwind.
        unsafe {
            let p = this.ptr();
            let value = p.add(shape.word_offset()).cast::<Value>().read();
            let key = new_key.unwrap_or(this.key());
            let fresh = Self::build(meta, expire, key, Payload::Obj(value));
            entry_alloc::dealloc(p, shape.layout());
            fresh
        }
    }

    /// The stored expiry, 0 for none.
    #[inline]
    fn expire_raw(&self) -> u64 {
        if self.flags() & HAS_TTL == 0 {
            return 0;
        }
        // SAFETY: with HAS_TTL the 8 bytes after the header are the expiry.
        unsafe { self.ptr().add(HEADER).cast::<u64>().read_unaligned() }
    }

    /// Sets (or, with 0, removes) the absolute expiry in Unix ms.
    pub(crate) fn set_expire_raw(&mut self, at: u64) {
        let has = self.flags() & HAS_TTL != 0;
        if has && at != 0 {
            // SAFETY: as in `expire_raw`; `&mut self` is exclusive.
            unsafe { self.ptr().add(HEADER).cast::<u64>().write_unaligned(at) };
            return;
        }
        if has || at != 0 {
            let bits = self.table_bits();
            // SAFETY: `relayout` consumes the entry read here and returns
            // a new one that is written back before anything else can
            // observe `self`; it cannot unwind (see `relayout`).
            unsafe { ptr::write(self, ptr::read(self).relayout(at, None)) }
            self.set_table_bits(bits);
        }
    }

    /// The same entry with absolute expiry `at_ms` (Unix ms), or persistent
    /// for None.
    pub fn with_expire(mut self, at_ms: Option<u64>) -> Self {
        self.set_expire_raw(expire_raw(at_ms));
        self
    }

    /// The expiry time in Unix milliseconds, if any.
    pub fn expire_at(&self) -> Option<u64> {
        let at = self.expire_raw();
        (at != 0).then_some(at)
    }

    /// Redis treats a key as expired only once the clock is strictly past
    /// its expiry time.
    #[inline]
    pub(crate) fn is_expired(&self, now: u64) -> bool {
        let at = self.expire_raw();
        at != 0 && now > at
    }

    /// Bytes of the block (as `used_memory` counts it: its size class, see
    /// [`entry_alloc::block_bytes`]) plus what an object value owns, for
    /// `MEMORY USAGE` and eviction's accounting.
    pub fn heap_bytes(&self) -> usize {
        let shape = self.shape();
        let block = entry_alloc::block_bytes(shape.size());
        if shape.kind() != KIND_OBJ {
            return block;
        }
        // SAFETY: the object kind holds a Value at the word offset.
        let value = unsafe { &*self.ptr().add(shape.word_offset()).cast::<Value>() };
        block + value.heap_bytes()
    }

    /// The same entry, marked as last accessed `idle_secs` seconds before
    /// `now_ms` (RESTORE ... IDLETIME, the RDB IDLE opcode, under an LRU
    /// or no policy).
    pub fn with_idle(mut self, idle_secs: u64, now_ms: u64) -> Self {
        let at = now_ms.saturating_sub(idle_secs.saturating_mul(1000));
        self.set_meta(Meta::lru(at));
        self
    }

    /// The same entry with access counter `freq` as of `now_ms` (RESTORE
    /// ... FREQ, the RDB FREQ opcode, under an LFU policy).
    pub fn with_freq(mut self, freq: u8, now_ms: u64) -> Self {
        self.set_meta(Meta::lfu(freq, now_ms));
        self
    }

    /// Milliseconds since the key was last accessed, at the one-second
    /// resolution the access time is kept with (LRU eviction's ranking).
    pub fn idle_ms(&self, now_ms: u64) -> u64 {
        self.idle_secs(now_ms) * 1000
    }

    /// Backdates the last access, for tests of eviction's ranking.
    #[cfg(test)]
    pub(crate) fn set_access_for_test(&mut self, at_ms: u64) {
        self.set_meta(Meta::lru(at_ms));
    }

    /// Whole seconds since the key was last accessed (`OBJECT IDLETIME`;
    /// meaningful under an LRU or no policy).
    pub fn idle_secs(&self, now_ms: u64) -> u64 {
        self.meta().idle_secs(now_ms)
    }

    /// The access counter after the decay due since its last update
    /// (`OBJECT FREQ`; meaningful under an LFU policy), as Redis's
    /// `LFUDecrAndReturn`.
    pub fn lfu_freq(&self, now_ms: u64, decay_minutes: u32) -> u8 {
        decayed(self.meta(), now_ms, decay_minutes)
    }

    /// Records an access: under an LFU policy the counter is decayed then
    /// incremented with probability 1 / ((c - 5) * factor + 1), as Redis's
    /// `updateLFU` does; otherwise the access time becomes now.
    pub(crate) fn touch(&mut self, now_ms: u64, tuning: LfuTuning) {
        if !tuning.lfu {
            return self.set_meta(Meta::lru(now_ms));
        }
        let mut count = decayed(self.meta(), now_ms, tuning.decay_minutes);
        if count < u8::MAX {
            let base = f64::from(count.saturating_sub(LFU_INIT_VAL));
            let p = 1.0 / (base * f64::from(tuning.log_factor) + 1.0);
            if fastrand::f64() < p {
                count += 1;
            }
        }
        self.set_meta(Meta::lfu(count, now_ms));
    }

    /// Gives an entry that is about to be stored for the first time its
    /// access clock: accessed now, or under an LFU policy the counter of the
    /// entry it replaces (Redis keeps it on overwrite) or [`LFU_INIT_VAL`].
    /// Entries that were stored before (RENAME, MOVE) or were given a clock
    /// (RESTORE, RDB load) keep theirs.
    pub(crate) fn stamp_new(&mut self, now_ms: u64, replaced: Option<&Entry>, tuning: LfuTuning) {
        if self.flags() & UNSTAMPED == 0 {
            return;
        }
        self.set_meta(fresh_meta(replaced, now_ms, tuning));
    }
}

/// The access clock of an entry stored now in place of `replaced`:
/// accessed now, or under an LFU policy the replaced entry's counter
/// (Redis keeps it on overwrite) or [`LFU_INIT_VAL`].
fn fresh_meta(replaced: Option<&Entry>, now_ms: u64, tuning: LfuTuning) -> Meta {
    if tuning.lfu {
        let count = replaced.map_or(LFU_INIT_VAL, |old| {
            old.lfu_freq(now_ms, tuning.decay_minutes)
        });
        Meta::lfu(count, now_ms)
    } else {
        Meta::lru(now_ms)
    }
}

/// The stored form of an expiry: 0 for none, so a real one is at least 1.
fn expire_raw(at_ms: Option<u64>) -> u64 {
    at_ms.map_or(0, |t| t.max(1))
}

/// A counter after the decay due since its last update.
fn decayed(m: Meta, now_ms: u64, decay_minutes: u32) -> u8 {
    if decay_minutes == 0 {
        return m.lfu_count();
    }
    let elapsed = lfu_minutes(now_ms).wrapping_sub(m.lfu_minutes());
    let periods = u32::from(elapsed) / decay_minutes;
    u8::try_from(u32::from(m.lfu_count()).saturating_sub(periods)).unwrap_or(0)
}

/// The clock of an entry never stored: stamped when it is.
const UNSTAMPED_META: (Meta, bool) = (Meta(0), true);

/// Unix minutes modulo 2^16, the LFU decay clock.
fn lfu_minutes(now_ms: u64) -> u16 {
    (now_ms / 60_000) as u16
}

impl Drop for Entry {
    fn drop(&mut self) {
        let shape = self.shape();
        // SAFETY: the block was allocated by `build` with this shape's
        // layout; an object value is initialised and dropped exactly once
        // here (`into_value` and `relayout` skip this by not dropping).
        unsafe {
            let p = self.ptr();
            if shape.kind() == KIND_OBJ {
                ptr::drop_in_place(p.add(shape.word_offset()).cast::<Value>());
            }
            entry_alloc::dealloc(p, shape.layout());
        }
    }
}

impl Clone for Entry {
    fn clone(&self) -> Self {
        let payload = match self.value() {
            ValueRef::Str(StrRef::Int(n)) if self.kind() == KIND_INT => Payload::Int(n),
            ValueRef::Str(StrRef::Bytes { data, .. }) if self.kind() == KIND_EMB => {
                Payload::Emb(data)
            }
            v => Payload::Obj(v.to_value()),
        };
        Self::build(self.meta_state(), self.expire_raw(), self.key(), payload)
    }
}

impl std::borrow::Borrow<[u8]> for Entry {
    fn borrow(&self) -> &[u8] {
        self.key()
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("value", &self.value())
            .field("expire_at", &self.expire_at())
            .field("meta", &self.meta())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[u8]) -> Value {
        Value::Str(StrValue::from_bytes(v))
    }

    #[test]
    fn varints_round_trip() {
        let mut buf = [0u8; 10];
        for n in [0, 1, 127, 128, 300, 16_383, 16_384, 1 << 30, u64::MAX] {
            // SAFETY: 10 bytes hold any 64-bit varint.
            let w = unsafe { write_varint(buf.as_mut_ptr(), n) };
            assert_eq!(w, varint_len(n), "{n}");
            // SAFETY: just written.
            assert_eq!(unsafe { read_varint(buf.as_ptr()) }, (n, w));
        }
    }

    #[test]
    fn each_kind_stores_key_value_and_ttl() {
        let big = vec![b'x'; 300];
        let mut list = crate::list::List::new(16);
        list.push(crate::list::End::Right, b"a");
        let values = [s(b"12345"), s(b"hello"), s(&big), s(b""), Value::List(list)];
        for v in values {
            for key in [&b""[..], b"k", &[b'k'; 200][..]] {
                let e = Entry::with_key_value(key, v.clone(), None);
                assert_eq!(e.key(), key);
                assert_eq!(e.value(), v.as_ref());
                assert_eq!(e.expire_at(), None);
                let e = e.with_expire(Some(99));
                assert_eq!(
                    (e.key(), e.value(), e.expire_at()),
                    (key, v.as_ref(), Some(99))
                );
                let c = e.clone();
                assert_eq!(
                    (c.key(), c.value(), c.expire_at()),
                    (key, v.as_ref(), Some(99))
                );
                let e = e.with_expire(None).with_key(b"other");
                assert_eq!((e.key(), e.expire_at()), (&b"other"[..], None));
                assert_eq!(e.into_value(), v);
            }
        }
    }

    #[test]
    fn kinds_follow_redis_encodings() {
        assert_eq!(Entry::with_key_str(b"k", b"42", None).kind(), KIND_INT);
        assert_eq!(Entry::with_key_str(b"k", b"042", None).kind(), KIND_EMB);
        assert_eq!(
            Entry::with_key_str(b"k", &[b'v'; 64], None).kind(),
            KIND_EMB
        );
        let mut e = Entry::with_key_str(b"k", b"abc", None);
        assert_eq!(e.value().encoding_name(), "embstr");
        // Changing a string in place makes it an object, reported raw.
        if let Value::Str(sv) = e.value_mut() {
            sv.bytes_mut().push(b'd');
        }
        assert_eq!(e.kind(), KIND_OBJ);
        assert_eq!(e.value().encoding_name(), "raw");
        assert_eq!(
            e.value(),
            ValueRef::Str(StrRef::Bytes {
                data: b"abcd",
                raw: true
            })
        );
        // A whole replacement is compact again.
        e.set_value(s(b"7"));
        assert_eq!((e.kind(), e.key()), (KIND_INT, &b"k"[..]));
    }

    #[test]
    fn metadata_survives_every_rebuild() {
        let now = 1_700_000_000_000;
        let rebuild_all = |mut e: Entry| {
            let before = e.meta_state();
            assert!(!before.1, "given a clock, the entry is stamped");
            e.set_expire_raw(now + 5);
            e.set_value(s(b"12"));
            let _ = e.value_mut();
            e.set_expire_raw(0);
            let e = e.with_key(b"a key longer than fifteen bytes");
            let e = e.with_key(b"k2");
            assert_eq!(e.meta_state(), before);
            e
        };
        let e = rebuild_all(Entry::with_key_str(b"k", b"v", None).with_idle(100, now));
        assert_eq!(e.idle_secs(now), 100);
        let e = rebuild_all(Entry::with_key_str(b"k", b"v", None).with_freq(77, now));
        assert_eq!(e.lfu_freq(now, 1), 77);
        // Not yet stamped stays so.
        let mut e = Entry::with_key_str(b"k", b"v", None);
        e.set_value(s(b"w"));
        assert!(e.with_key(b"k3").meta_state().1);
    }

    #[test]
    fn the_block_is_as_small_as_promised() {
        // 16-byte key, 64-byte value: header, two one-byte lengths, payload.
        let e = Entry::with_key_str(&[b'k'; 16], &[b'v'; 64], None);
        assert_eq!(e.shape().size(), 4 + 1 + 16 + 1 + 64);
        let e = e.with_expire(Some(5));
        assert_eq!(e.shape().size(), 4 + 8 + 1 + 16 + 1 + 64);
        // 8-digit key (its length in the flags) and integer value (a 4-byte
        // varint): one 16-byte allocator class.
        let e = Entry::with_key_str(b"00000001", b"10000001", None);
        assert_eq!(e.shape().size(), 4 + 8 + 4);
        assert_eq!(e.key(), b"00000001");
        // Keys around the inline limit.
        for len in [0, 14, 15, 16, 200] {
            let key = vec![b'x'; len];
            let e = Entry::with_key_value(&key, s(b"abc"), Some(9));
            assert_eq!((e.key(), e.expire_at()), (&key[..], Some(9)));
            assert_eq!(e.value(), s(b"abc").as_ref());
            let inline = if len < 15 { 0 } else { varint_len(len as u64) };
            assert_eq!(e.shape().size(), 4 + 8 + inline + len + 1 + 3);
        }
    }

    #[test]
    fn set_overwrites_in_place_exactly_when_the_block_fits() {
        let now = 1_700_000_000_000;
        let lru = LfuTuning::default();
        // (old value, its TTL), (new value, its TTL), fits in place.
        type Str = (&'static [u8], Option<u64>);
        let cases: [(Str, Str, bool); 7] = [
            ((b"abc", None), (b"xyz", None), true),
            ((b"123", Some(9)), (b"-99", Some(7)), true),
            ((b"abc", None), (b"abcd", None), false),
            ((b"abc", None), (b"123", None), false),
            ((b"abc", None), (b"xyz", Some(7)), false),
            ((b"abc", Some(9)), (b"xyz", None), false),
            ((b"1", None), (b"1000", None), false),
        ];
        for ((old, old_ttl), (new, new_ttl), fits) in cases {
            let mut e = Entry::with_key_str(b"key", old, old_ttl).with_idle(100, now);
            let block = e.block;
            assert_eq!(
                e.overwrite_str(new, new_ttl, now, lru),
                fits,
                "{old:?} -> {new:?}"
            );
            let fresh = Entry::with_key_str(b"key", new, new_ttl);
            if fits {
                assert_eq!(e.block, block);
                assert_eq!((e.value(), e.expire_at()), (fresh.value(), new_ttl));
                assert_eq!((e.key(), e.idle_secs(now)), (&b"key"[..], 0));
            } else {
                let before = Entry::with_key_str(b"key", old, old_ttl);
                assert_eq!((e.value(), e.expire_at()), (before.value(), old_ttl));
                assert_eq!(e.idle_secs(now), 100);
            }
        }
        // A string changed in place (an object) is never overwritten so.
        let mut e = Entry::with_key_str(b"key", b"abc", None);
        let _ = e.value_mut();
        assert!(!e.overwrite_str(b"xyz", None, now, lru));
        // Under LFU the counter carries over, as for a new block.
        let lfu = LfuTuning {
            lfu: true,
            ..LfuTuning::default()
        };
        let mut e = Entry::with_key_str(b"key", b"abc", None).with_freq(77, now);
        assert!(e.overwrite_str(b"xyz", None, now, lfu));
        assert_eq!(e.lfu_freq(now, 1), 77);
    }

    #[test]
    fn ints_round_trip_and_change_in_place() {
        for n in [0, 1, -1, 63, -64, 64, 1 << 40, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(n)), n);
            let mut e = Entry::with_key_value(b"k", s(n.to_string().as_bytes()), Some(3));
            assert_eq!(e.value(), ValueRef::Str(StrRef::Int(n)));
            let block = e.block;
            e.set_value(Value::Str(StrValue::Int(n ^ 1)));
            assert_eq!(e.value(), ValueRef::Str(StrRef::Int(n ^ 1)));
            assert_eq!((e.key(), e.expire_at()), (&b"k"[..], Some(3)));
            // Same varint length: no new block.
            assert_eq!(e.block, block, "{n}");
            e.set_value(Value::Str(StrValue::Int(i64::MIN)));
            assert_eq!(e.value(), ValueRef::Str(StrRef::Int(i64::MIN)));
        }
    }
}
