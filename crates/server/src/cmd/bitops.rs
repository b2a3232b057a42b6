//! Bit commands on strings (Redis's `bitops.c`): SETBIT, GETBIT, BITCOUNT,
//! BITPOS, BITOP, BITFIELD and BITFIELD_RO.
//!
//! A string is a bitmap whose bit 0 is the most significant bit of its first
//! byte. Reads past the end see zero bits; writes zero-pad the string up to
//! the addressed bit (creating the key) and leave it `raw`, as Redis does.
//! Bit offsets are limited by `proto-max-bulk-len` (an offset whose byte is
//! at or past the limit is refused), which bounds every allocation.
//!
//! Counting and searching work a 64-bit word at a time; only the partial
//! bytes at the edges of a bit range are masked one by one.

use crate::exec::notify::class as ev;
use std::sync::atomic::Ordering;

use vireo_resp::number::parse_i64;
use vireo_resp::{Args, ReplyBuf};
use vireo_store::{Keys, StrValue, Value, ValueRef};

use super::{errors, flags::*, is, spec, CommandSpec, Ctx, KeySpec, KEY1};

/// This family's commands, with Redis 7.0's arities, flags and key triples.
pub const COMMANDS: &[CommandSpec] = &[
    spec("setbit", 4, WRITE | DENYOOM, KEY1, setbit),
    spec("getbit", 3, READONLY | FAST, KEY1, getbit),
    spec("bitcount", -2, READONLY, KEY1, bitcount),
    spec("bitpos", -3, READONLY, KEY1, bitpos),
    spec(
        "bitop",
        -4,
        WRITE | DENYOOM,
        KeySpec::Range {
            first: 2,
            last: -1,
            step: 1,
        },
        bitop,
    ),
    spec("bitfield", -2, WRITE | DENYOOM, KEY1, bitfield),
    spec("bitfield_ro", -2, READONLY | FAST, KEY1, bitfield_ro),
];

/// A bit offset that is not an integer, negative, or past the size limit.
const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";

/// SETBIT's value is not 0 or 1.
const BAD_BIT: &str = "ERR bit is not an integer or out of range";

/// BITPOS's bit is not 0 or 1.
const BAD_BITPOS_BIT: &str = "ERR The bit argument must be 1 or 0.";

/// A BITFIELD type that is not `i1`…`i64` or `u1`…`u63`.
const BAD_FIELD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// The string could not be grown to the addressed bit (only reachable when
/// `proto-max-bulk-len` was raised beyond what memory allows).
const TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

// ---------------------------------------------------------------------------
// Pure bit helpers.

/// Number of set bits in `bytes`, eight bytes at a time.
fn popcount(bytes: &[u8]) -> u64 {
    let words = bytes.chunks_exact(8);
    let tail: u64 = words
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum();
    words
        .map(|w| u64::from(u64::from_ne_bytes(w.try_into().unwrap_or_default()).count_ones()))
        .sum::<u64>()
        + tail
}

/// Position of the first bit equal to `bit` in `bytes` (bit 0 being the
/// most significant bit of the first byte), skipping whole 64-bit words
/// that cannot contain it.
fn first_bit(bytes: &[u8], bit: bool) -> Option<u64> {
    let flip = if bit { 0 } else { u64::MAX };
    let words = bytes.chunks_exact(8);
    let tail_at = bytes.len() - words.remainder().len();
    for (i, w) in words.enumerate() {
        let w = u64::from_be_bytes(w.try_into().unwrap_or_default()) ^ flip;
        if w != 0 {
            return Some(i as u64 * 64 + u64::from(w.leading_zeros()));
        }
    }
    bytes[tail_at..]
        .iter()
        .position(|&b| b != flip as u8)
        .map(|i| {
            let b = bytes[tail_at + i] ^ flip as u8;
            (tail_at + i) as u64 * 8 + u64::from(b.leading_zeros())
        })
}

/// Mask of the bits of a byte at and after in-byte position `i` (0 = most
/// significant).
fn from_bit_mask(i: u64) -> u8 {
    0xFF >> (i & 7)
}

/// Mask of the bits of a byte at and before in-byte position `i`.
fn to_bit_mask(i: u64) -> u8 {
    !(0x7F >> (i & 7))
}

/// The bytes holding the inclusive bit range `first..=last`, with the masks
/// of the range's bits in the first and last of them. None when the range
/// is empty or not inside `bytes`.
fn bit_window(bytes: &[u8], first: u64, last: u64) -> Option<(&[u8], u8, u8)> {
    if first > last {
        return None;
    }
    let from = usize::try_from(first / 8).ok()?;
    let to = usize::try_from(last / 8).ok()?;
    let window = bytes.get(from..=to)?;
    Some((window, from_bit_mask(first), to_bit_mask(last)))
}

/// Number of set bits in the inclusive bit range `first..=last`.
fn count_bits(bytes: &[u8], first: u64, last: u64) -> u64 {
    let Some((window, head, tail)) = bit_window(bytes, first, last) else {
        return 0;
    };
    let outside = |b: Option<&u8>, keep: u8| b.map_or(0, |b| u64::from((b & !keep).count_ones()));
    popcount(window) - outside(window.first(), head) - outside(window.last(), tail)
}

/// Position of the first bit equal to `bit` in the inclusive bit range
/// `first..=last`, or None if the range has none.
fn find_bit(bytes: &[u8], bit: bool, first: u64, last: u64) -> Option<u64> {
    let (window, head, tail) = bit_window(bytes, first, last)?;
    let base = first / 8 * 8;
    let matching = |b: u8, keep: u8| (if bit { b } else { !b }) & keep;
    let in_byte =
        |at: usize, m: u8| (m != 0).then(|| base + at as u64 * 8 + u64::from(m.leading_zeros()));
    let (&first_byte, rest) = window.split_first()?;
    let Some((&last_byte, middle)) = rest.split_last() else {
        return in_byte(0, matching(first_byte, head & tail));
    };
    in_byte(0, matching(first_byte, head))
        .or_else(|| first_bit(middle, bit).map(|p| base + 8 + p))
        .or_else(|| in_byte(window.len() - 1, matching(last_byte, tail)))
}

/// Whether a BITCOUNT/BITPOS range counts bytes or bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Byte,
    Bit,
}

impl Unit {
    /// Parses `BYTE` or `BIT` (any case).
    fn parse(arg: &[u8]) -> Option<Unit> {
        if is(arg, "bit") {
            Some(Unit::Bit)
        } else if is(arg, "byte") {
            Some(Unit::Byte)
        } else {
            None
        }
    }
}

/// The inclusive bit range that `start..=end`, counted in `unit`s, selects
/// in a string of `len` bytes, with Redis's rules: negative indexes count
/// from the end, then both are clamped into the string. None when empty.
fn resolve_range(len: usize, start: i64, end: i64, unit: Unit) -> Option<(u64, u64)> {
    let unit_bits: u64 = if unit == Unit::Bit { 1 } else { 8 };
    let per_byte = if unit == Unit::Bit { 8 } else { 1 };
    let total = i64::try_from(len).ok()?.checked_mul(per_byte)?;
    // Adding a negative index to a non-negative total cannot overflow.
    let from_end = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let start = from_end(start);
    let end = from_end(end).min(total - 1);
    if start > end {
        return None;
    }
    let (start, end) = (u64::try_from(start).ok()?, u64::try_from(end).ok()?);
    Some((start * unit_bits, end * unit_bits + unit_bits - 1))
}

/// Parses a bit offset as Redis's `getBitOffsetFromArgument`: a
/// non-negative integer whose byte is below `max_bytes`. With `field_bits`
/// (BITFIELD) the `#N` form means N fields of that width; like Redis the
/// multiplication wraps around instead of failing.
fn parse_bit_offset(arg: &[u8], field_bits: Option<u32>, max_bytes: u64) -> Option<u64> {
    let (digits, scale) = match (arg.split_first(), field_bits) {
        (Some((b'#', rest)), Some(bits)) => (rest, i64::from(bits)),
        _ => (arg, 1),
    };
    let offset = u64::try_from(parse_i64(digits)?.wrapping_mul(scale)).ok()?;
    (offset >> 3 < max_bytes).then_some(offset)
}

// ---------------------------------------------------------------------------
// Looking strings up.

/// The key holds another type: the caller replies WRONGTYPE.
struct WrongType;

/// The configured `proto-max-bulk-len`, which bounds bit offsets.
fn max_bytes(ctx: &Ctx<'_>) -> u64 {
    ctx.server
        .config
        .hot
        .proto_max_bulk_len
        .load(Ordering::Relaxed)
}

/// The bytes of the string at `key` for reading (Redis's `lookupKeyRead`,
/// counting a hit or miss); integers are formatted into `scratch`.
fn read_string<'k>(
    keys: &'k mut Keys<'_>,
    db: usize,
    key: &[u8],
    scratch: &'k mut itoa::Buffer,
) -> Result<Option<&'k [u8]>, WrongType> {
    match keys.get_read(db, key).map(|e| e.value()) {
        None => Ok(None),
        Some(ValueRef::Str(s)) => Ok(Some(s.as_bytes(scratch))),
        Some(_) => Err(WrongType),
    }
}

/// Why a string could not be prepared for writing bits.
enum WriteRefused {
    /// The key holds another type.
    WrongType,
    /// The zero padding could not be allocated.
    TooLong,
}

impl WriteRefused {
    /// The error reply.
    fn message(&self) -> &'static str {
        match self {
            WriteRefused::WrongType => errors::WRONGTYPE,
            WriteRefused::TooLong => TOO_LONG,
        }
    }
}

/// Zero-pads `buf` to at least `len` bytes; true if it grew.
fn grow_zeroed(buf: &mut Vec<u8>, len: usize) -> Result<bool, WriteRefused> {
    let missing = len.saturating_sub(buf.len());
    if missing == 0 {
        return Ok(false);
    }
    buf.try_reserve_exact(missing)
        .map_err(|_| WriteRefused::TooLong)?;
    buf.resize(len, 0);
    Ok(true)
}

/// Redis's `lookupStringForBitCommand`: runs `f` on the bytes of the string
/// at `key`, created or zero-padded so that bit `max_bit` exists (the string
/// becomes `raw`). `f` also learns whether the string was created or grown.
fn with_string_for_bits<R>(
    keys: &mut Keys<'_>,
    db: usize,
    key: &[u8],
    max_bit: u64,
    f: impl FnOnce(&mut [u8], bool) -> R,
) -> Result<R, WriteRefused> {
    let len = usize::try_from(max_bit / 8)
        .ok()
        .and_then(|b| b.checked_add(1))
        .ok_or(WriteRefused::TooLong)?;
    match keys.get_mut(db, key).map(|e| e.str_mut()) {
        Some(Some(s)) => {
            let buf = s.bytes_mut();
            let grown = grow_zeroed(buf, len)?;
            Ok(f(buf, grown))
        }
        Some(None) => Err(WriteRefused::WrongType),
        None => {
            let mut data = Vec::new();
            grow_zeroed(&mut data, len)?;
            let r = f(&mut data, true);
            keys.set(db, key, Value::Str(StrValue::Bytes { data, raw: true }));
            Ok(r)
        }
    }
}

// ---------------------------------------------------------------------------
// SETBIT / GETBIT.

/// The value of bit `offset` in `bytes` (0 past the end).
fn bit_at(bytes: &[u8], offset: u64) -> bool {
    let byte = usize::try_from(offset / 8)
        .ok()
        .and_then(|i| bytes.get(i))
        .copied()
        .unwrap_or(0);
    byte & (0x80 >> (offset & 7)) != 0
}

/// SETBIT key offset value: sets or clears one bit, zero-padding the string
/// (creating the key) as needed; replies the bit's previous value.
fn setbit(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    let Some(offset) = parse_bit_offset(args.get(2), None, max_bytes(ctx)) else {
        return ctx.out.error(BAD_OFFSET);
    };
    let on = match parse_i64(args.get(3)) {
        Some(0) => false,
        Some(1) => true,
        _ => return ctx.out.error(BAD_BIT),
    };
    let result = with_string_for_bits(&mut ctx.keys, ctx.db, key, offset, |bytes, grown| {
        let old = bit_at(bytes, offset);
        let mask = 0x80u8 >> (offset & 7);
        let byte = usize::try_from(offset / 8)
            .ok()
            .and_then(|i| bytes.get_mut(i));
        if let Some(b) = byte {
            *b = if on { *b | mask } else { *b & !mask };
        }
        (old, grown || old != on)
    });
    match result {
        Ok((old, changed)) => {
            if changed {
                ctx.modified(key);
                ctx.notify(ev::STRING, "setbit", key);
            }
            ctx.out.int(i64::from(old));
        }
        Err(e) => ctx.out.error(e.message()),
    }
}

/// GETBIT key offset: the bit at the offset; 0 past the end of the string
/// or for a missing key.
fn getbit(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(offset) = parse_bit_offset(args.get(2), None, max_bytes(ctx)) else {
        return ctx.out.error(BAD_OFFSET);
    };
    let mut scratch = itoa::Buffer::new();
    match read_string(&mut ctx.keys, ctx.db, args.get(1), &mut scratch) {
        Ok(bytes) => ctx
            .out
            .int(i64::from(bytes.is_some_and(|b| bit_at(b, offset)))),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

// ---------------------------------------------------------------------------
// BITCOUNT / BITPOS.

/// An index range given to BITCOUNT or BITPOS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct IndexRange {
    start: i64,
    /// None when BITPOS was given no end: up to the end of the string.
    end: Option<i64>,
    unit: Unit,
}

impl IndexRange {
    /// The whole string.
    const WHOLE: IndexRange = IndexRange {
        start: 0,
        end: None,
        unit: Unit::Byte,
    };

    /// The inclusive bit range selected in a string of `len` bytes.
    fn resolve(self, len: usize) -> Option<(u64, u64)> {
        resolve_range(len, self.start, self.end.unwrap_or(i64::MAX), self.unit)
    }
}

/// An integer argument, or the standard error.
fn int(arg: &[u8]) -> Result<i64, &'static str> {
    parse_i64(arg).ok_or(errors::NOT_INT)
}

/// Parses BITCOUNT's `[start end [BYTE|BIT]]` in Redis's order: both
/// integers, then (before the unit is looked at) two negative indexes in
/// the wrong order select nothing (None), then the unit.
fn parse_count_range(args: &[&[u8]]) -> Result<Option<IndexRange>, &'static str> {
    let (start, end, unit) = match *args {
        [] => return Ok(Some(IndexRange::WHOLE)),
        [start, end] => (start, end, None),
        [start, end, unit] => (start, end, Some(unit)),
        _ => return Err(errors::SYNTAX),
    };
    let (start, end) = (int(start)?, int(end)?);
    if start < 0 && end < 0 && start > end {
        return Ok(None);
    }
    let unit = unit.map_or(Some(Unit::Byte), Unit::parse);
    let unit = unit.ok_or(errors::SYNTAX)?;
    Ok(Some(IndexRange {
        start,
        end: Some(end),
        unit,
    }))
}

/// Parses BITPOS's `[start [end [BYTE|BIT]]]` in Redis's order: start,
/// then the unit, then end.
fn parse_pos_range(args: &[&[u8]]) -> Result<IndexRange, &'static str> {
    let (start, end, unit) = match *args {
        [] => return Ok(IndexRange::WHOLE),
        [start] => (start, None, None),
        [start, end] => (start, Some(end), None),
        [start, end, unit] => (start, Some(end), Some(unit)),
        _ => return Err(errors::SYNTAX),
    };
    let start = int(start)?;
    let unit = unit.map_or(Some(Unit::Byte), Unit::parse);
    let unit = unit.ok_or(errors::SYNTAX)?;
    let end = end.map(int).transpose()?;
    Ok(IndexRange { start, end, unit })
}

/// BITCOUNT key [start end [BYTE|BIT]]: the number of set bits in the
/// string or in a range of it; 0 for a missing key (whatever the range
/// arguments, which are only checked for an existing string).
fn bitcount(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let rest: Vec<&[u8]> = args.iter().skip(2).collect();
    let mut scratch = itoa::Buffer::new();
    let bytes = match read_string(&mut ctx.keys, ctx.db, args.get(1), &mut scratch) {
        Ok(Some(b)) => b,
        Ok(None) => return ctx.out.int(0),
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
    };
    match parse_count_range(&rest) {
        Err(e) => ctx.out.error(e),
        Ok(range) => {
            let count = range
                .and_then(|r| r.resolve(bytes.len()))
                .map_or(0, |(first, last)| count_bits(bytes, first, last));
            ctx.out.int(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }
}

/// BITPOS key bit [start [end [BYTE|BIT]]]: the position of the first bit
/// set to `bit` in the string or a range of it, or -1. A missing key is all
/// zeros; looking for 0 with no explicit end may answer the first bit past
/// the string.
fn bitpos(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let bit = match parse_i64(args.get(2)) {
        Some(0) => false,
        Some(1) => true,
        Some(_) => return ctx.out.error(BAD_BITPOS_BIT),
        None => return ctx.out.error(errors::NOT_INT),
    };
    let rest: Vec<&[u8]> = args.iter().skip(3).collect();
    let mut scratch = itoa::Buffer::new();
    let bytes = match read_string(&mut ctx.keys, ctx.db, args.get(1), &mut scratch) {
        Ok(Some(b)) => b,
        Ok(None) => return ctx.out.int(if bit { -1 } else { 0 }),
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
    };
    let range = match parse_pos_range(&rest) {
        Ok(r) => r,
        Err(e) => return ctx.out.error(e),
    };
    let pos = range.resolve(bytes.len()).map(|(first, last)| {
        find_bit(bytes, bit, first, last).or_else(|| {
            // Without an explicit end the string continues with zeros.
            (!bit && range.end.is_none()).then(|| bytes.len() as u64 * 8)
        })
    });
    match pos.flatten() {
        Some(p) => ctx.out.int(i64::try_from(p).unwrap_or(i64::MAX)),
        None => ctx.out.int(-1),
    }
}

// ---------------------------------------------------------------------------
// BITOP.

/// A BITOP operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

impl BitOp {
    /// Parses the operation name (any case).
    fn parse(arg: &[u8]) -> Option<BitOp> {
        [
            ("and", BitOp::And),
            ("or", BitOp::Or),
            ("xor", BitOp::Xor),
            ("not", BitOp::Not),
        ]
        .into_iter()
        .find(|(name, _)| is(arg, name))
        .map(|(_, op)| op)
    }

    /// Folds one more source into the result so far, missing bytes of the
    /// shorter one counting as zeros. NOT has a single source: its result
    /// is that source inverted.
    fn fold(self, acc: &mut Vec<u8>, src: &[u8]) {
        if acc.len() < src.len() {
            acc.resize(src.len(), 0);
        }
        let pairs = acc.iter_mut().zip(src);
        match self {
            BitOp::And => {
                pairs.for_each(|(a, b)| *a &= b);
                acc[src.len()..].fill(0);
            }
            BitOp::Or => pairs.for_each(|(a, b)| *a |= b),
            BitOp::Xor => pairs.for_each(|(a, b)| *a ^= b),
            BitOp::Not => pairs.for_each(|(a, b)| *a = !b),
        }
    }
}

/// BITOP AND|OR|XOR|NOT destkey key [key …]: stores the bitwise combination
/// of the source strings (missing keys and short strings padded with
/// zeros) at destkey, dropping its TTL, or deletes destkey when the result
/// is empty; replies the result's length.
fn bitop(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(op) = BitOp::parse(args.get(1)) else {
        return ctx.out.error(errors::SYNTAX);
    };
    if op == BitOp::Not && args.len() != 4 {
        return ctx
            .out
            .error("ERR BITOP NOT must be called with a single source key.");
    }
    let mut result: Option<Vec<u8>> = None;
    for key in args.iter().skip(3) {
        let mut scratch = itoa::Buffer::new();
        let src = match read_string(&mut ctx.keys, ctx.db, key, &mut scratch) {
            Ok(src) => src.unwrap_or_default(),
            Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        };
        match result.as_mut() {
            Some(acc) => op.fold(acc, src),
            None if op == BitOp::Not => {
                let mut acc = Vec::new();
                op.fold(&mut acc, src);
                result = Some(acc);
            }
            None => result = Some(src.to_vec()),
        }
    }
    let data = result.unwrap_or_default();
    let len = data.len();
    let dest = args.get(2);
    if len > 0 {
        // Redis stores the result as a plain (`raw`) string object.
        ctx.keys.set(
            ctx.db,
            dest,
            Value::Str(StrValue::Bytes { data, raw: true }),
        );
        ctx.modified(dest);
        ctx.notify(ev::STRING, "set", dest);
    } else if ctx.keys.delete(ctx.db, dest) {
        ctx.modified(dest);
        ctx.notify(ev::GENERIC, "del", dest);
    }
    ctx.out.int(i64::try_from(len).unwrap_or(i64::MAX));
}

// ---------------------------------------------------------------------------
// BITFIELD.

/// A BITFIELD integer type: signed `i1`…`i64` or unsigned `u1`…`u63`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FieldType {
    signed: bool,
    bits: u32,
}

impl FieldType {
    /// Parses `i<bits>` or `u<bits>` (lower-case prefix only; like Redis,
    /// the width ends at a NUL byte).
    fn parse(arg: &[u8]) -> Option<FieldType> {
        let (&sign, rest) = arg.split_first()?;
        let signed = match sign {
            b'i' => true,
            b'u' => false,
            _ => return None,
        };
        let width = rest.split(|&b| b == 0).next().unwrap_or_default();
        let bits = u32::try_from(parse_i64(width)?).ok()?;
        let max = if signed { 64 } else { 63 };
        (1..=max)
            .contains(&bits)
            .then_some(FieldType { signed, bits })
    }

    /// The smallest and largest values of the type.
    fn bounds(self) -> (i128, i128) {
        if self.signed {
            let half = 1i128 << (self.bits - 1);
            (-half, half - 1)
        } else {
            (0, (1i128 << self.bits) - 1)
        }
    }

    /// The value of the field's raw bits.
    fn decode(self, raw: u64) -> i128 {
        let v = i128::from(raw & self.mask());
        if self.signed && v >> (self.bits - 1) != 0 {
            v - (1i128 << self.bits)
        } else {
            v
        }
    }

    /// The field's raw bits for a value (modulo 2^bits).
    fn encode(self, v: i128) -> u64 {
        (v as u64) & self.mask()
    }

    /// Mask of the type's width.
    fn mask(self) -> u64 {
        u64::MAX >> (64 - self.bits)
    }

    /// Fits `value + incr` into the type according to `policy`; None when
    /// it overflows under FAIL.
    ///
    /// The overflow test is exact arithmetic with one quirk kept from Redis:
    /// for a signed type narrower than 64 bits, Redis computes `max - value`
    /// modulo 2^64, so a SET of a value so negative that the difference
    /// exceeds `i64::MAX` counts as overflowing upwards (SAT stores the
    /// maximum). INCRBY starts from an in-range value and is unaffected.
    fn fit(self, value: i128, incr: i128, policy: Overflow) -> Option<i128> {
        let (min, max) = self.bounds();
        let sum = value + incr;
        let wraps_up = self.signed && self.bits < 64 && max - value > i128::from(i64::MAX);
        let up = wraps_up || sum > max;
        if !up && sum >= min {
            return Some(sum);
        }
        match policy {
            Overflow::Wrap => Some(self.decode(self.encode(sum))),
            Overflow::Sat => Some(if up { max } else { min }),
            Overflow::Fail => None,
        }
    }
}

/// What BITFIELD does when SET or INCRBY goes outside the type's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Overflow {
    /// Wrap around modulo 2^bits (the default).
    Wrap,
    /// Saturate at the minimum or maximum.
    Sat,
    /// Leave the field unchanged and reply null.
    Fail,
}

impl Overflow {
    /// Parses WRAP, SAT or FAIL (any case).
    fn parse(arg: &[u8]) -> Option<Overflow> {
        [
            ("wrap", Overflow::Wrap),
            ("sat", Overflow::Sat),
            ("fail", Overflow::Fail),
        ]
        .into_iter()
        .find(|(name, _)| is(arg, name))
        .map(|(_, o)| o)
    }
}

/// One BITFIELD subcommand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FieldAction {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// A parsed BITFIELD operation with the overflow policy in force for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FieldOp {
    action: FieldAction,
    ty: FieldType,
    offset: u64,
    overflow: Overflow,
}

/// Parsed BITFIELD arguments.
#[derive(Debug, PartialEq, Eq)]
struct FieldOps {
    ops: Vec<FieldOp>,
    /// The last bit a SET or INCRBY touches; None when all are GETs.
    max_write_bit: Option<u64>,
}

/// Parses the subcommands after the key, as Redis does: a keyword without
/// enough arguments after it is a syntax error, and errors are reported in
/// argument order.
fn parse_field_ops(args: &[&[u8]], max_bytes: u64) -> Result<FieldOps, &'static str> {
    let mut parsed = FieldOps {
        ops: Vec::new(),
        max_write_bit: None,
    };
    let mut overflow = Overflow::Wrap;
    let mut rest = args;
    while let Some((&sub, tail)) = rest.split_first() {
        let (action_args, after) = if is(sub, "get") && tail.len() >= 2 {
            tail.split_at(2)
        } else if (is(sub, "set") || is(sub, "incrby")) && tail.len() >= 3 {
            tail.split_at(3)
        } else if is(sub, "overflow") && !tail.is_empty() {
            overflow = Overflow::parse(tail[0]).ok_or("ERR Invalid OVERFLOW type specified")?;
            rest = &tail[1..];
            continue;
        } else {
            return Err(errors::SYNTAX);
        };
        let ty = FieldType::parse(action_args[0]).ok_or(BAD_FIELD_TYPE)?;
        let offset =
            parse_bit_offset(action_args[1], Some(ty.bits), max_bytes).ok_or(BAD_OFFSET)?;
        let action = match action_args.get(2) {
            None => FieldAction::Get,
            Some(value) => {
                let last = offset.saturating_add(u64::from(ty.bits) - 1);
                parsed.max_write_bit = parsed.max_write_bit.max(Some(last));
                let value = int(value)?;
                if is(sub, "set") {
                    FieldAction::Set(value)
                } else {
                    FieldAction::IncrBy(value)
                }
            }
        };
        parsed.ops.push(FieldOp {
            action,
            ty,
            offset,
            overflow,
        });
        rest = after;
    }
    Ok(parsed)
}

/// The nine bytes from `start` (zeros past the end) as a 72-bit big-endian
/// number: enough for any field of up to 64 bits starting in that byte.
fn field_window(bytes: &[u8], start: usize) -> u128 {
    (0..9).fold(0u128, |w, i| {
        let b = start
            .checked_add(i)
            .and_then(|at| bytes.get(at))
            .copied()
            .unwrap_or(0);
        w << 8 | u128::from(b)
    })
}

/// Splits a field's bit offset into its first byte and the shift of the
/// field's lowest bit inside that byte's 72-bit window.
fn field_position(offset: u64, bits: u32) -> (usize, u32) {
    let start = usize::try_from(offset / 8).unwrap_or(usize::MAX);
    let shift = 72 - (offset % 8) as u32 - bits;
    (start, shift)
}

/// Reads the `bits`-wide field at bit `offset` as an unsigned number, most
/// significant bit first; bits past the end of `bytes` read as zero.
fn get_field(bytes: &[u8], offset: u64, bits: u32) -> u64 {
    let (start, shift) = field_position(offset, bits);
    let mask = (1u128 << bits) - 1;
    ((field_window(bytes, start) >> shift) & mask) as u64
}

/// Writes the low `bits` bits of `value` as the field at bit `offset`; bits
/// past the end of `bytes` are dropped (callers grow the string first).
fn set_field(bytes: &mut [u8], offset: u64, bits: u32, value: u64) {
    let (start, shift) = field_position(offset, bits);
    let mask = ((1u128 << bits) - 1) << shift;
    let window = (field_window(bytes, start) & !mask) | ((u128::from(value) << shift) & mask);
    for i in 0..9 {
        if let Some(b) = start.checked_add(i).and_then(|at| bytes.get_mut(at)) {
            *b = (window >> (8 * (8 - i))) as u8;
        }
    }
}

/// Runs one operation on `bytes` (already long enough for writes).
/// Returns the value to reply (the current value for GET, the old one for
/// SET, the new one for INCRBY) and whether the field's bits changed; None
/// when a write overflowed under FAIL and nothing was written.
fn apply(bytes: &mut [u8], op: &FieldOp) -> Option<(i64, bool)> {
    let ty = op.ty;
    let old_raw = get_field(bytes, op.offset, ty.bits);
    let old = ty.decode(old_raw);
    let (value, incr, reply_old) = match op.action {
        FieldAction::Get => (old, 0, true),
        // An unsigned SET takes the value's 64-bit two's complement form,
        // so negative values overflow upwards, as in Redis.
        FieldAction::Set(v) if ty.signed => (i128::from(v), 0, true),
        FieldAction::Set(v) => (i128::from(v as u64), 0, true),
        FieldAction::IncrBy(d) => (old, i128::from(d), false),
    };
    let new = ty.fit(value, incr, op.overflow)?;
    let new_raw = ty.encode(new);
    if new_raw != old_raw {
        set_field(bytes, op.offset, ty.bits, new_raw);
    }
    // Fitted values and decoded fields are within the i64 range.
    let reply = if reply_old { old } else { new };
    Some((reply as i64, new_raw != old_raw))
}

/// Replies the value of a GET on `bytes` (None for a missing key).
fn reply_get(out: &mut ReplyBuf, bytes: Option<&[u8]>, op: &FieldOp) {
    let raw = bytes.map_or(0, |b| get_field(b, op.offset, op.ty.bits));
    // A decoded field of at most 64 signed or 63 unsigned bits fits i64.
    out.int(op.ty.decode(raw) as i64);
}

/// Runs parsed BITFIELD operations: GETs only read the key (a missing key
/// reads as zeros), anything else grows the string to the furthest written
/// bit first. `read_only` refuses writes (BITFIELD_RO).
fn bitfield_generic(ctx: &mut Ctx<'_>, args: Args<'_>, read_only: bool) {
    let key = args.get(1);
    let rest: Vec<&[u8]> = args.iter().skip(2).collect();
    let parsed = match parse_field_ops(&rest, max_bytes(ctx)) {
        Ok(p) => p,
        Err(e) => return ctx.out.error(e),
    };
    let Some(max_bit) = parsed.max_write_bit else {
        let mut scratch = itoa::Buffer::new();
        let bytes = match read_string(&mut ctx.keys, ctx.db, key, &mut scratch) {
            Ok(b) => b,
            Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        };
        ctx.out.array(parsed.ops.len());
        for op in &parsed.ops {
            reply_get(ctx.out, bytes, op);
        }
        return;
    };
    if read_only {
        return ctx
            .out
            .error("ERR BITFIELD_RO only supports the GET subcommand");
    }
    let out = &mut *ctx.out;
    let result = with_string_for_bits(&mut ctx.keys, ctx.db, key, max_bit, |bytes, grown| {
        out.array(parsed.ops.len());
        let mut changes = 0u64;
        for op in &parsed.ops {
            match apply(bytes, op) {
                Some((v, changed)) => {
                    out.int(v);
                    // Redis counts each SET or INCRBY that changed the
                    // string (any of them, when it was created or grown).
                    let write = op.action != FieldAction::Get;
                    changes += u64::from(write && (grown || changed));
                }
                None => out.null(),
            }
        }
        changes
    });
    match result {
        Ok(0) => {}
        Ok(changes) => {
            ctx.modified(key);
            ctx.notify(ev::STRING, "setbit", key);
            // Redis counts one change per modifying operation.
            ctx.dirty += changes - 1;
        }
        Err(e) => ctx.out.error(e.message()),
    }
}

/// BITFIELD key [GET type offset | [OVERFLOW WRAP|SAT|FAIL] SET type offset
/// value | INCRBY type offset increment]…: reads and writes integer fields
/// of any width at any bit offset (`#N` meaning the N-th field of the
/// type's width); replies one result per GET/SET/INCRBY, null for an
/// INCRBY or SET that overflowed under OVERFLOW FAIL.
fn bitfield(ctx: &mut Ctx<'_>, args: Args<'_>) {
    bitfield_generic(ctx, args, false);
}

/// BITFIELD_RO key [GET type offset …]: the read-only BITFIELD, refusing
/// SET and INCRBY.
fn bitfield_ro(ctx: &mut Ctx<'_>, args: Args<'_>) {
    bitfield_generic(ctx, args, true);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit `i` of `bytes`, one at a time (the reference for the fast paths).
    fn naive_bit(bytes: &[u8], i: u64) -> bool {
        bytes[(i / 8) as usize] & (0x80 >> (i % 8)) != 0
    }

    fn sample(len: usize, seed: u64) -> Vec<u8> {
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..len)
            .map(|_| match rng.u8(..4) {
                0 => 0,
                1 => 0xFF,
                _ => rng.u8(..),
            })
            .collect()
    }

    #[test]
    fn popcount_matches_per_byte_counting() {
        for len in 0..40 {
            let b = sample(len, len as u64);
            let expect: u64 = b.iter().map(|x| u64::from(x.count_ones())).sum();
            assert_eq!(popcount(&b), expect);
        }
    }

    #[test]
    fn count_and_find_match_a_bit_by_bit_scan() {
        for seed in 0..200u64 {
            let len = (seed % 37) as usize + 1;
            let b = sample(len, seed);
            let total = len as u64 * 8;
            let mut rng = fastrand::Rng::with_seed(seed ^ 0xABCD);
            for _ in 0..20 {
                let first = rng.u64(..total);
                let last = rng.u64(first..total);
                let expect = (first..=last).filter(|&i| naive_bit(&b, i)).count() as u64;
                assert_eq!(count_bits(&b, first, last), expect, "{b:?} {first} {last}");
                for bit in [false, true] {
                    let expect = (first..=last).find(|&i| naive_bit(&b, i) == bit);
                    assert_eq!(
                        find_bit(&b, bit, first, last),
                        expect,
                        "{b:?} {first}..={last}"
                    );
                }
            }
            for bit in [false, true] {
                let expect = (0..total).find(|&i| naive_bit(&b, i) == bit);
                assert_eq!(first_bit(&b, bit), expect);
            }
        }
        assert_eq!(count_bits(b"", 0, 0), 0);
        assert_eq!(find_bit(b"\xff", true, 3, 2), None);
    }

    #[test]
    fn ranges_follow_redis_index_rules() {
        // "foobar": 6 bytes, 48 bits.
        assert_eq!(resolve_range(6, 0, -1, Unit::Byte), Some((0, 47)));
        assert_eq!(resolve_range(6, 1, 1, Unit::Byte), Some((8, 15)));
        assert_eq!(resolve_range(6, -2, -1, Unit::Byte), Some((32, 47)));
        assert_eq!(resolve_range(6, 5, 30, Unit::Bit), Some((5, 30)));
        assert_eq!(resolve_range(6, -100, 100, Unit::Bit), Some((0, 47)));
        assert_eq!(resolve_range(6, 3, 2, Unit::Byte), None);
        assert_eq!(resolve_range(0, 0, -1, Unit::Byte), None);
        assert_eq!(
            resolve_range(6, i64::MIN, i64::MAX, Unit::Byte),
            Some((0, 47))
        );
        assert_eq!(resolve_range(6, i64::MAX, i64::MAX, Unit::Bit), None);
    }

    #[test]
    fn range_arguments_parse_in_redis_order() {
        let p = |s: &str| {
            let v: Vec<&[u8]> = s.split_whitespace().map(str::as_bytes).collect();
            (parse_count_range(&v), parse_pos_range(&v))
        };
        assert_eq!(p("").0, Ok(Some(IndexRange::WHOLE)));
        assert_eq!(p("1").0, Err(errors::SYNTAX));
        assert_eq!(p("-1 -5 junk").0, Ok(None));
        assert_eq!(p("0 1 junk").0, Err(errors::SYNTAX));
        assert_eq!(p("x 1 junk").0, Err(errors::NOT_INT));
        assert_eq!(p("0 1 2 3").0, Err(errors::SYNTAX));
        assert_eq!(
            p("0 7 BiT").0,
            Ok(Some(IndexRange {
                start: 0,
                end: Some(7),
                unit: Unit::Bit
            }))
        );
        // BITPOS checks the unit before the end.
        assert_eq!(p("0 x junk").1, Err(errors::SYNTAX));
        assert_eq!(p("0 x").1, Err(errors::NOT_INT));
        assert_eq!(
            p("2").1,
            Ok(IndexRange {
                start: 2,
                end: None,
                unit: Unit::Byte
            })
        );
        assert_eq!(p("0 1 bit x").1, Err(errors::SYNTAX));
    }

    #[test]
    fn bit_offsets() {
        let limit = 512 * 1024 * 1024;
        assert_eq!(parse_bit_offset(b"0", None, limit), Some(0));
        assert_eq!(
            parse_bit_offset(b"4294967295", None, limit),
            Some(4294967295)
        );
        assert_eq!(parse_bit_offset(b"4294967296", None, limit), None);
        assert_eq!(parse_bit_offset(b"-1", None, limit), None);
        assert_eq!(parse_bit_offset(b"#1", None, limit), None);
        assert_eq!(parse_bit_offset(b"#3", Some(8), limit), Some(24));
        assert_eq!(parse_bit_offset(b"#-1", Some(8), limit), None);
        assert_eq!(parse_bit_offset(b"#", Some(8), limit), None);
        assert_eq!(parse_bit_offset(b"", Some(8), limit), None);
        // Redis's multiplication wraps: 2^61 * 8 is 0.
        assert_eq!(
            parse_bit_offset(b"#2305843009213693953", Some(8), limit),
            Some(8)
        );
    }

    #[test]
    fn field_types() {
        let t = |s: &[u8]| FieldType::parse(s);
        assert_eq!(
            t(b"i64"),
            Some(FieldType {
                signed: true,
                bits: 64
            })
        );
        assert_eq!(
            t(b"u63"),
            Some(FieldType {
                signed: false,
                bits: 63
            })
        );
        for bad in [
            &b"u64"[..],
            b"i65",
            b"i0",
            b"U8",
            b"I8",
            b"i",
            b"u08",
            b"8",
            b"",
        ] {
            assert_eq!(t(bad), None, "{bad:?}");
        }
        assert_eq!(t(b"u8\0junk").map(|t| t.bits), Some(8));
    }

    #[test]
    fn fields_read_and_write_big_endian_bits() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2000 {
            let mut b = sample(12, rng.u64(..));
            let bits = rng.u32(1..=64);
            let offset = rng.u64(..=(96 - u64::from(bits)));
            let naive =
                (0..u64::from(bits)).fold(0u64, |v, i| v << 1 | naive_bit(&b, offset + i) as u64);
            assert_eq!(get_field(&b, offset, bits), naive);
            let before = b.clone();
            let value = rng.u64(..);
            set_field(&mut b, offset, bits, value);
            let mask = u64::MAX >> (64 - bits);
            assert_eq!(get_field(&b, offset, bits), value & mask);
            for i in (0..96).filter(|i| *i < offset || *i >= offset + u64::from(bits)) {
                assert_eq!(naive_bit(&b, i), naive_bit(&before, i));
            }
        }
        // Past the end reads zeros and writes nothing.
        assert_eq!(get_field(b"\xff", 4, 8), 0xF0);
        let mut short = *b"\x00";
        set_field(&mut short, 4, 8, 0xFF);
        assert_eq!(short, *b"\x0f");
    }

    #[test]
    fn overflow_policies() {
        let i8t = FieldType::parse(b"i8").unwrap();
        let u8t = FieldType::parse(b"u8").unwrap();
        let i64t = FieldType::parse(b"i64").unwrap();
        assert_eq!(i8t.fit(127, 1, Overflow::Wrap), Some(-128));
        assert_eq!(i8t.fit(127, 0, Overflow::Fail), Some(127));
        assert_eq!(i8t.fit(200, 0, Overflow::Sat), Some(127));
        assert_eq!(i8t.fit(-200, 0, Overflow::Sat), Some(-128));
        assert_eq!(i8t.fit(-128, -1, Overflow::Fail), None);
        assert_eq!(u8t.fit(255, 5, Overflow::Wrap), Some(4));
        assert_eq!(u8t.fit(0, -1, Overflow::Wrap), Some(255));
        assert_eq!(u8t.fit(0, -1, Overflow::Sat), Some(0));
        assert_eq!(u8t.fit(u64::MAX as i128, 0, Overflow::Sat), Some(255));
        let max = i128::from(i64::MAX);
        let min = i128::from(i64::MIN);
        assert_eq!(i64t.fit(max, 1, Overflow::Wrap), Some(min));
        assert_eq!(i64t.fit(max, 1, Overflow::Sat), Some(max));
        assert_eq!(i64t.fit(min, 0, Overflow::Sat), Some(min));
        // Redis's modular `max - value`: a SET of a hugely negative value
        // saturates upwards, the same target reached by INCRBY downwards.
        assert_eq!(i8t.fit(min, 0, Overflow::Sat), Some(127));
        assert_eq!(i8t.fit(min + 127 + 1, 0, Overflow::Sat), Some(-128));
        assert_eq!(i8t.fit(min + 127, 0, Overflow::Sat), Some(127));
        assert_eq!(i8t.fit(-128, min, Overflow::Sat), Some(-128));
        assert_eq!(i8t.fit(min, 0, Overflow::Wrap), Some(0));
        assert_eq!(i8t.decode(0xFF), -1);
        assert_eq!(i8t.encode(-1), 0xFF);
    }

    #[test]
    fn writes_reply_old_or_new_values() {
        let op = |action, ty: &[u8], overflow| FieldOp {
            action,
            ty: FieldType::parse(ty).unwrap(),
            offset: 0,
            overflow,
        };
        let mut b = vec![0u8; 8];
        // An unsigned SET of -1 is the huge 2^64-1: it saturates to the max.
        let set = op(FieldAction::Set(-1), b"u8", Overflow::Sat);
        assert_eq!(apply(&mut b, &set), Some((0, true)));
        assert_eq!(b[0], 255);
        let get = op(FieldAction::Get, b"i8", Overflow::Fail);
        assert_eq!(apply(&mut b, &get), Some((-1, false)));
        let incr = op(FieldAction::IncrBy(1), b"u8", Overflow::Fail);
        assert_eq!(apply(&mut b, &incr), None);
        assert_eq!(b[0], 255);
        let incr = op(FieldAction::IncrBy(1), b"u8", Overflow::Wrap);
        assert_eq!(apply(&mut b, &incr), Some((0, true)));
        let set = op(FieldAction::Set(0), b"i8", Overflow::Wrap);
        assert_eq!(apply(&mut b, &set), Some((0, false)));
        let incr = op(FieldAction::IncrBy(i64::MIN), b"i64", Overflow::Sat);
        assert_eq!(apply(&mut b, &incr), Some((i64::MIN, true)));
    }

    #[test]
    fn bitfield_arguments() {
        let p = |s: &str| {
            let v: Vec<&[u8]> = s.split_whitespace().map(str::as_bytes).collect();
            parse_field_ops(&v, 512 * 1024 * 1024)
        };
        let ops = p("get u8 0 overflow sat incrby i5 #2 3 set u4 100 1").unwrap();
        assert_eq!(ops.ops.len(), 3);
        assert_eq!(ops.ops[1].offset, 10);
        assert_eq!(ops.ops[1].overflow, Overflow::Sat);
        assert_eq!(ops.ops[0].overflow, Overflow::Wrap);
        assert_eq!(ops.max_write_bit, Some(103));
        assert_eq!(p("get u8 0").unwrap().max_write_bit, None);
        assert_eq!(p("").unwrap().ops, vec![]);
        assert_eq!(p("get u8").unwrap_err(), errors::SYNTAX);
        assert_eq!(p("overflow").unwrap_err(), errors::SYNTAX);
        assert_eq!(
            p("overflow maybe get u8 0").unwrap_err(),
            "ERR Invalid OVERFLOW type specified"
        );
        assert_eq!(p("get u64 0").unwrap_err(), BAD_FIELD_TYPE);
        assert_eq!(p("get u8 -1").unwrap_err(), BAD_OFFSET);
        assert_eq!(p("set u8 0 x").unwrap_err(), errors::NOT_INT);
        assert_eq!(p("set u8 x x").unwrap_err(), BAD_OFFSET);
        assert_eq!(p("bogus").unwrap_err(), errors::SYNTAX);
    }

    #[test]
    fn bitop_folds_with_zero_padding() {
        let run = |op: BitOp, srcs: &[&[u8]]| {
            let mut acc = srcs[0].to_vec();
            if op == BitOp::Not {
                acc.clear();
                op.fold(&mut acc, srcs[0]);
            }
            for s in &srcs[1..] {
                op.fold(&mut acc, s);
            }
            acc
        };
        assert_eq!(run(BitOp::And, &[b"\xff\xff", b"\x0f"]), b"\x0f\x00");
        assert_eq!(run(BitOp::And, &[b"", b"\xff"]), b"\x00");
        assert_eq!(run(BitOp::Or, &[b"\x01", b"\x10\x20"]), b"\x11\x20");
        assert_eq!(run(BitOp::Xor, &[b"\xff\x01", b"\x0f"]), b"\xf0\x01");
        assert_eq!(run(BitOp::Not, &[b"\x0f\xff"]), b"\xf0\x00");
        assert_eq!(BitOp::parse(b"XoR"), Some(BitOp::Xor));
        assert_eq!(BitOp::parse(b"nand"), None);
    }
}
