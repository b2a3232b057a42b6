//! Stream entry IDs (`<ms>-<seq>`) and the ways clients write them.
//!
//! An ID is two unsigned 64-bit numbers compared as one 128-bit number:
//! milliseconds first, then the sequence. The textual forms follow Redis
//! 7.0's `streamGenericParseIDOrReply` exactly, quirks included, because
//! clients (and Redis's own tests) depend on which strings are accepted:
//!
//! * `-` and `+` are the smallest and largest IDs (refused by the strict
//!   parser that XADD, XDEL, XACK, … use);
//! * `<ms>` alone takes a caller-chosen sequence (0 for a range start,
//!   the maximum for a range end);
//! * `<ms>-*` lets XADD pick the sequence;
//! * `(<id>` in a range bound excludes the ID itself;
//! * each number goes through Redis's `string2ull`: a canonical integer, or
//!   else whatever C's `strtoull` accepts (leading blanks, a sign, leading
//!   zeros; a minus sign wraps the value around). Strings longer than 127
//!   bytes are refused, and a NUL byte ends the string as it does in C.

use std::fmt;

use super::StreamError;

/// A stream entry ID.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// Milliseconds part (normally a Unix time).
    pub ms: u64,
    /// Sequence number within the millisecond.
    pub seq: u64,
}

/// Longest argument Redis tries to parse as an ID (its buffer minus the NUL).
const MAX_ID_ARG_LEN: usize = 127;

impl StreamId {
    /// `0-0`, the smallest ID (what `-` means).
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest ID (what `+` means).
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// The ID `ms-seq`.
    pub const fn new(ms: u64, seq: u64) -> Self {
        StreamId { ms, seq }
    }

    /// True for `0-0`.
    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The next ID, or None after [`StreamId::MAX`].
    pub fn incr(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (u64::MAX, u64::MAX) => None,
            (ms, u64::MAX) => Some(StreamId::new(ms + 1, 0)),
            (ms, seq) => Some(StreamId::new(ms, seq + 1)),
        }
    }

    /// The previous ID, or None before `0-0`.
    pub fn decr(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (0, 0) => None,
            (ms, 0) => Some(StreamId::new(ms - 1, u64::MAX)),
            (ms, seq) => Some(StreamId::new(ms, seq - 1)),
        }
    }

    /// The ID as 16 big-endian bytes (how RDB files store IDs, and why
    /// byte order equals ID order).
    pub fn to_be_bytes(self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.ms.to_be_bytes());
        out[8..].copy_from_slice(&self.seq.to_be_bytes());
        out
    }

    /// Reads an ID written by [`StreamId::to_be_bytes`].
    pub fn from_be_bytes(b: [u8; 16]) -> Self {
        let (ms, seq) = b.split_at(8);
        StreamId::new(
            u64::from_be_bytes(ms.try_into().unwrap_or_default()),
            u64::from_be_bytes(seq.try_into().unwrap_or_default()),
        )
    }

    /// Appends the `ms-seq` text of the ID to `out` (reply and AOF form).
    pub fn write(self, out: &mut Vec<u8>) {
        let mut buf = itoa::Buffer::new();
        out.extend_from_slice(buf.format(self.ms).as_bytes());
        out.push(b'-');
        out.extend_from_slice(buf.format(self.seq).as_bytes());
    }

    /// Parses an ID where `-` and `+` are allowed (XRANGE bounds, XGROUP
    /// SETID); a missing sequence becomes `missing_seq`.
    pub fn parse(arg: &[u8], missing_seq: u64) -> Result<StreamId, StreamError> {
        match parse_generic(arg, missing_seq, false, false)? {
            Parsed::Id(id) => Ok(id),
            Parsed::AutoSeq(_) => Err(StreamError::InvalidId),
        }
    }

    /// Parses an ID where `-` and `+` are refused (XDEL, XACK, XCLAIM,
    /// XREAD, XGROUP CREATE, XSETID, MINID, …).
    pub fn parse_strict(arg: &[u8], missing_seq: u64) -> Result<StreamId, StreamError> {
        match parse_generic(arg, missing_seq, true, false)? {
            Parsed::Id(id) => Ok(id),
            Parsed::AutoSeq(_) => Err(StreamError::InvalidId),
        }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// The ID argument of XADD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddId {
    /// `*`: milliseconds from the clock, sequence after the last entry.
    Auto,
    /// `<ms>-*`: the given milliseconds, the sequence picked by the stream.
    AutoSeq(u64),
    /// A complete ID (a bare `<ms>` means `<ms>-0`).
    Exact(StreamId),
}

impl AddId {
    /// Parses XADD's ID argument (strict: `-` and `+` are refused).
    pub fn parse(arg: &[u8]) -> Result<AddId, StreamError> {
        if arg == b"*" {
            return Ok(AddId::Auto);
        }
        Ok(match parse_generic(arg, 0, true, true)? {
            Parsed::Id(id) => AddId::Exact(id),
            Parsed::AutoSeq(ms) => AddId::AutoSeq(ms),
        })
    }

    /// Refuses `0-0` with Redis's error. XADD makes this check before it
    /// looks the key up, so a refused XADD never creates an empty stream.
    pub fn reject_zero(self) -> Result<AddId, StreamError> {
        match self {
            AddId::Exact(id) if id.is_zero() => Err(StreamError::AddIdZero),
            other => Ok(other),
        }
    }
}

/// Which end of a range a bound is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoundKind {
    /// The low end: a bare `<ms>` means `<ms>-0`, `(id` means the next ID.
    Start,
    /// The high end: a bare `<ms>` means `<ms>-<max>`, `(id` the previous.
    End,
}

/// Parses a range bound of XRANGE, XREVRANGE, XPENDING or XAUTOCLAIM
/// into an inclusive ID: `(` makes it exclusive (and strict), and stepping
/// past either end of the ID space is Redis's "invalid start/end ID for
/// the interval" error.
pub fn parse_range_bound(arg: &[u8], kind: BoundKind) -> Result<StreamId, StreamError> {
    let missing_seq = match kind {
        BoundKind::Start => 0,
        BoundKind::End => u64::MAX,
    };
    match arg.split_first() {
        Some((b'(', rest)) if !rest.is_empty() => {
            let id = StreamId::parse_strict(rest, missing_seq)?;
            match kind {
                BoundKind::Start => id.incr().ok_or(StreamError::InvalidStartInterval),
                BoundKind::End => id.decr().ok_or(StreamError::InvalidEndInterval),
            }
        }
        _ => StreamId::parse(arg, missing_seq),
    }
}

/// What the generic parser found.
enum Parsed {
    Id(StreamId),
    /// `<ms>-*` (only when the caller accepts it).
    AutoSeq(u64),
}

/// Redis's `streamGenericParseIDOrReply`.
fn parse_generic(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    allow_auto_seq: bool,
) -> Result<Parsed, StreamError> {
    if arg.len() > MAX_ID_ARG_LEN {
        return Err(StreamError::InvalidId);
    }
    // Redis copies the argument into a C string: a NUL ends it.
    let s = arg.split(|&b| b == 0).next().unwrap_or_default();
    match s {
        b"-" | b"+" if strict => Err(StreamError::InvalidId),
        b"-" => Ok(Parsed::Id(StreamId::MIN)),
        b"+" => Ok(Parsed::Id(StreamId::MAX)),
        _ => {
            let (ms_text, seq_text) = match s.iter().position(|&b| b == b'-') {
                Some(dash) => (&s[..dash], Some(&s[dash + 1..])),
                None => (s, None),
            };
            let ms = string2ull(ms_text).ok_or(StreamError::InvalidId)?;
            match seq_text {
                None => Ok(Parsed::Id(StreamId::new(ms, missing_seq))),
                Some(b"*") if allow_auto_seq => Ok(Parsed::AutoSeq(ms)),
                Some(t) => {
                    let seq = string2ull(t).ok_or(StreamError::InvalidId)?;
                    Ok(Parsed::Id(StreamId::new(ms, seq)))
                }
            }
        }
    }
}

/// Redis's `string2ull`: a canonical integer (refused when negative), or
/// else what `strtoull(s, &end, 10)` accepts in full.
fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(v) = vireo_resp::number::parse_i64(s) {
        return u64::try_from(v).ok();
    }
    strtoull(s)
}

/// C's `strtoull` in base 10, accepting only when it consumed the whole
/// (non-empty) string without overflowing: leading white space, one
/// optional sign (a minus negates modulo 2^64), then at least one digit.
fn strtoull(s: &[u8]) -> Option<u64> {
    let is_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let rest = &s[s.iter().take_while(|b| is_space(b)).count()..];
    let (negative, digits) = match rest.split_first() {
        Some((b'-', d)) => (true, d),
        Some((b'+', d)) => (false, d),
        _ => (false, rest),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let magnitude = digits.iter().try_fold(0u64, |v, d| {
        v.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })?;
    Some(if negative {
        magnitude.wrapping_neg()
    } else {
        magnitude
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    #[test]
    fn order_is_ms_then_seq() {
        assert!(id(1, u64::MAX) < id(2, 0));
        assert!(id(2, 0) < id(2, 1));
        assert_eq!(id(5, 6).to_string(), "5-6");
        let mut out = Vec::new();
        StreamId::MAX.write(&mut out);
        assert_eq!(out, b"18446744073709551615-18446744073709551615");
        let b = id(0x0102, 0xff).to_be_bytes();
        assert_eq!(StreamId::from_be_bytes(b), id(0x0102, 0xff));
        assert!(id(1, 0).to_be_bytes() > id(0, u64::MAX).to_be_bytes());
    }

    #[test]
    fn incr_and_decr_stop_at_the_edges() {
        assert_eq!(id(1, u64::MAX).incr(), Some(id(2, 0)));
        assert_eq!(StreamId::MAX.incr(), None);
        assert_eq!(id(2, 0).decr(), Some(id(1, u64::MAX)));
        assert_eq!(StreamId::MIN.decr(), None);
    }

    #[test]
    fn parses_the_plain_forms() {
        assert_eq!(StreamId::parse(b"-", 0), Ok(StreamId::MIN));
        assert_eq!(StreamId::parse(b"+", 0), Ok(StreamId::MAX));
        assert_eq!(StreamId::parse(b"12", 7), Ok(id(12, 7)));
        assert_eq!(StreamId::parse(b"12-3", 7), Ok(id(12, 3)));
        assert_eq!(
            StreamId::parse(b"18446744073709551615-18446744073709551615", 0),
            Ok(StreamId::MAX)
        );
        assert_eq!(StreamId::parse_strict(b"-", 0), Err(StreamError::InvalidId));
        assert_eq!(StreamId::parse_strict(b"+", 0), Err(StreamError::InvalidId));
        for bad in [
            &b""[..],
            b"abc",
            b"1-",
            b"-1",
            b"1-2-3",
            b"1-*",
            b"18446744073709551616",
            b"1-18446744073709551616",
            b"1--5",
            b"1.5",
        ] {
            assert_eq!(
                StreamId::parse(bad, 0),
                Err(StreamError::InvalidId),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            StreamId::parse(&[b'1'; 128], 0),
            Err(StreamError::InvalidId)
        );
    }

    #[test]
    fn strtoull_quirks_match_redis() {
        // Observed on redis-server 7.0.15: XADD s2 '1--0', ' 2- +5', '3--01'
        // give 1-0, 2-5 and 3-18446744073709551615.
        assert_eq!(StreamId::parse(b"1--0", 0), Ok(id(1, 0)));
        assert_eq!(StreamId::parse(b" 2- +5", 0), Ok(id(2, 5)));
        assert_eq!(StreamId::parse(b"3--01", 0), Ok(id(3, u64::MAX)));
        assert_eq!(StreamId::parse(b"007", 0), Ok(id(7, 0)));
        assert_eq!(StreamId::parse(b"5\0junk", 9), Ok(id(5, 9)));
        assert_eq!(StreamId::parse(b"-\0x", 0), Ok(StreamId::MIN));
    }

    #[test]
    fn xadd_ids() {
        assert_eq!(AddId::parse(b"*"), Ok(AddId::Auto));
        assert_eq!(AddId::parse(b"5-*"), Ok(AddId::AutoSeq(5)));
        assert_eq!(AddId::parse(b"5"), Ok(AddId::Exact(id(5, 0))));
        assert_eq!(AddId::parse(b"5-1"), Ok(AddId::Exact(id(5, 1))));
        assert_eq!(AddId::parse(b"+"), Err(StreamError::InvalidId));
        assert_eq!(AddId::parse(b"*-1"), Err(StreamError::InvalidId));
        assert_eq!(AddId::parse(b"**"), Err(StreamError::InvalidId));
        assert_eq!(
            AddId::parse(b"0-0").and_then(AddId::reject_zero),
            Err(StreamError::AddIdZero)
        );
        assert_eq!(
            AddId::parse(b"0").and_then(AddId::reject_zero),
            Err(StreamError::AddIdZero)
        );
        assert_eq!(
            AddId::parse(b"0-*").and_then(AddId::reject_zero),
            Ok(AddId::AutoSeq(0))
        );
    }

    #[test]
    fn range_bounds() {
        use BoundKind::{End, Start};
        assert_eq!(parse_range_bound(b"5", Start), Ok(id(5, 0)));
        assert_eq!(parse_range_bound(b"5", End), Ok(id(5, u64::MAX)));
        assert_eq!(parse_range_bound(b"(5", Start), Ok(id(5, 1)));
        // A bare end takes the largest sequence before stepping back.
        assert_eq!(parse_range_bound(b"(5", End), Ok(id(5, u64::MAX - 1)));
        assert_eq!(parse_range_bound(b"(5-0", End), Ok(id(4, u64::MAX)));
        assert_eq!(parse_range_bound(b"(5-3", End), Ok(id(5, 2)));
        assert_eq!(parse_range_bound(b"-", Start), Ok(StreamId::MIN));
        assert_eq!(parse_range_bound(b"+", End), Ok(StreamId::MAX));
        assert_eq!(parse_range_bound(b"(-", Start), Err(StreamError::InvalidId));
        assert_eq!(parse_range_bound(b"(", Start), Err(StreamError::InvalidId));
        assert_eq!(
            parse_range_bound(b"(18446744073709551615-18446744073709551615", Start),
            Err(StreamError::InvalidStartInterval)
        );
        assert_eq!(
            parse_range_bound(b"(0-0", End),
            Err(StreamError::InvalidEndInterval)
        );
    }
}
