//! Number parsing and formatting with Redis-compatible semantics.
//!
//! Commands constantly convert between byte strings and numbers (lengths in
//! the wire protocol, `INCR`, scores, `INCRBYFLOAT`, ...). Clients observe
//! both which strings are accepted and exactly how results are printed, so
//! these helpers follow the rules of Redis 7.0's `util.c` (`string2ll`,
//! `string2d`, `ld2string`) and C's `printf("%.17g")` rather than Rust's own
//! (more lenient or differently formatted) conversions.
//!
//! Nothing here allocates on the hot paths (`parse_i64`, `write_i64`,
//! `write_double`), and nothing panics for any input.

use std::fmt::Write as _;

/// Longest accepted integer string, in bytes: Redis rejects strings of
/// `LONG_STR_SIZE` (21) bytes or more, so "-9223372036854775808" (20 bytes) is
/// the longest valid `i64`.
const MAX_INT_STR_LEN: usize = 20;

/// Parses a signed 64-bit integer exactly like Redis's `string2ll`.
///
/// Accepted: an optional `-` followed by decimal digits, with no leading
/// zeros (except the single string `"0"`), at most 20 bytes, within `i64`.
/// Rejected: empty input, `+`, whitespace anywhere, `"-0"`, `"007"`,
/// overflow. The strictness matters because Redis uses it both for protocol
/// lengths and for deciding whether a value "is an integer" (e.g. `INCR`).
#[inline]
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    let (neg, digits) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some(_) => (false, b),
        None => return None,
    };
    if b.len() > MAX_INT_STR_LEN {
        return None;
    }
    let magnitude = parse_digits_strict(digits, neg)?;
    if neg {
        // -(2^63) is representable, anything larger in magnitude is not.
        if magnitude > (i64::MAX as u64) + 1 {
            return None;
        }
        Some((magnitude as i64).wrapping_neg())
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Parses an unsigned 64-bit integer with the same strictness as
/// [`parse_i64`]: decimal digits only (no sign at all), no leading zeros
/// except `"0"`, at most 20 bytes, within `u64`.
///
/// Redis's own `string2ull` falls back to the lenient `strtoull`; Vireo uses
/// the strict rules everywhere so that the same textual forms are accepted
/// for signed and unsigned values.
#[inline]
pub fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.len() > MAX_INT_STR_LEN {
        return None;
    }
    parse_digits_strict(b, false)
}

/// Parses the digit part shared by [`parse_i64`] and [`parse_u64`]: non-empty,
/// first digit `1-9` unless the whole string is `"0"` (which is rejected
/// after a minus sign, as in Redis), digits only, no `u64` overflow.
#[inline]
fn parse_digits_strict(digits: &[u8], after_minus: bool) -> Option<u64> {
    let (&first, rest) = digits.split_first()?;
    if first == b'0' {
        return if rest.is_empty() && !after_minus {
            Some(0)
        } else {
            None
        };
    }
    if !first.is_ascii_digit() {
        return None;
    }
    let mut v = u64::from(first - b'0');
    for &c in rest {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(v)
}

/// Two-digit lookup table used by [`write_u64`] to emit digits in pairs.
const DIGIT_PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Formats `v` in decimal into the tail of `buf`, returning the index of the
/// first digit. Shared by the integer writers so that no caller allocates.
#[inline]
pub(crate) fn format_u64_into(mut v: u64, buf: &mut [u8; 20]) -> usize {
    let mut pos = buf.len();
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        pos -= 2;
        buf[pos] = DIGIT_PAIRS[pair];
        buf[pos + 1] = DIGIT_PAIRS[pair + 1];
    }
    if v >= 10 {
        let pair = v as usize * 2;
        pos -= 2;
        buf[pos] = DIGIT_PAIRS[pair];
        buf[pos + 1] = DIGIT_PAIRS[pair + 1];
    } else {
        pos -= 1;
        buf[pos] = b'0' + v as u8;
    }
    pos
}

/// Formats `v` in decimal into the tail of `buf` (sign included) and
/// returns the index of its first byte; lets callers learn the length of a
/// number before emitting it, without allocating.
#[inline]
pub(crate) fn format_i64_into(v: i64, buf: &mut [u8; 20]) -> usize {
    let mut pos = format_u64_into(v.unsigned_abs(), buf);
    if v < 0 {
        // At most 19 digits for |i64|, so there is room for the sign.
        pos -= 1;
        buf[pos] = b'-';
    }
    pos
}

/// Appends the decimal representation of `v` to `out` (no allocation beyond
/// growing `out`). Used for integer replies, lengths and `bulk_int`.
#[inline]
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    write_u64(out, v.unsigned_abs());
}

/// Appends the decimal representation of `v` to `out`. The unsigned
/// counterpart of [`write_i64`], used for aggregate and bulk lengths.
#[inline]
pub fn write_u64(out: &mut Vec<u8>, v: u64) {
    // Most lengths written are one or two digits; skipping the scratch
    // buffer and the variable-length copy for them halves the cost of
    // encoding a short command (callgrind).
    if v < 10 {
        out.push(b'0' + v as u8);
        return;
    }
    if v < 100 {
        let pair = v as usize * 2;
        out.extend_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
        return;
    }
    let mut buf = [0u8; 20];
    let start = format_u64_into(v, &mut buf);
    out.extend_from_slice(&buf[start..]);
}

/// Number of decimal digits needed to print `v` (at least 1). Handy for
/// computing encoded sizes up front.
#[inline]
pub fn u64_digits(v: u64) -> usize {
    let mut buf = [0u8; 20];
    20 - format_u64_into(v, &mut buf)
}

/// Returns true for the bytes C's `isspace` accepts in the "C" locale.
#[inline]
pub(crate) fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// Parses a double like Redis's `string2d` / `getDoubleFromObject`:
/// the syntax accepted by C's `strtod` (decimal with optional exponent,
/// hexadecimal floats such as `0x1.8p1`, and case-insensitive `inf` /
/// `infinity`, each with an optional sign), where the whole input must be
/// consumed.
///
/// Rejected, as in Redis: empty input, leading or trailing whitespace, NaN
/// (`"nan"`), and finite literals that overflow to infinity (`"1e400"`) or
/// underflow to zero (`"1e-400"`; `"0e-400"` is fine because it *is* zero).
/// Results that underflow to a nonzero subnormal are accepted, like Redis.
/// This is the rule for scores (`ZADD`, `ZINCRBY`), `INCRBYFLOAT` and most
/// other float arguments.
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    match parse_literal(b)? {
        Conversion::Value(v) => Some(v),
        Conversion::Overflow(_) | Conversion::Underflow(_) => None,
    }
}

/// Parses a double the way Redis's `zslParseRange` does for
/// `ZRANGEBYSCORE`/`ZCOUNT`-style bounds: plain `strtod` followed by a check
/// that it stopped at the end of the C string.
///
/// Compared with [`parse_f64`] this accepts leading whitespace, lets
/// overflow become `±inf` and underflow become `0`, treats the input as a C
/// string (a NUL byte ends it), and accepts the empty string as `0` (strtod
/// converts nothing and stops at the terminator). NaN is still rejected.
/// The caller strips a leading `(` (exclusive bound) first.
pub fn parse_f64_lenient(b: &[u8]) -> Option<f64> {
    let b = match memchr::memchr(0, b) {
        Some(nul) => &b[..nul],
        None => b,
    };
    if b.is_empty() {
        return Some(0.0);
    }
    let start = b.iter().position(|&c| !is_c_space(c))?;
    match parse_literal(&b[start..])? {
        Conversion::Value(v) | Conversion::Overflow(v) | Conversion::Underflow(v) => Some(v),
    }
}

/// Result of converting a syntactically valid float literal; the range
/// variants carry what strtod returns alongside `ERANGE`.
enum Conversion {
    /// In range (possibly subnormal).
    Value(f64),
    /// Too large: `±inf`.
    Overflow(f64),
    /// Nonzero literal that rounds to zero: `±0`.
    Underflow(f64),
}

impl Conversion {
    /// Applies a sign to the carried value.
    fn negate(self) -> Conversion {
        match self {
            Conversion::Value(v) => Conversion::Value(-v),
            Conversion::Overflow(v) => Conversion::Overflow(-v),
            Conversion::Underflow(v) => Conversion::Underflow(-v),
        }
    }
}

/// Parses a complete strtod literal (sign, then inf/infinity, hex or
/// decimal); `None` for anything strtod would not consume entirely and for
/// NaN.
fn parse_literal(b: &[u8]) -> Option<Conversion> {
    let (neg, body) = match b.split_first()? {
        (b'-', rest) => (true, rest),
        (b'+', rest) => (false, rest),
        _ => (false, b),
    };
    let first = *body.first()?;
    let conv = if first == b'i' || first == b'I' {
        if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
            Conversion::Value(f64::INFINITY)
        } else {
            return None;
        }
    } else if body.len() >= 2 && body[0] == b'0' && (body[1] == b'x' || body[1] == b'X') {
        parse_hex_float(&body[2..])?
    } else {
        parse_decimal_float(body)?
    };
    Some(if neg { conv.negate() } else { conv })
}

/// Parses an unsigned decimal floating point literal with strtod's grammar
/// (`digits[.digits][e[+-]digits]`, `.5`, `5.` ...), flagging overflow and
/// underflow-to-zero (which strtod reports through `ERANGE`).
fn parse_decimal_float(s: &[u8]) -> Option<Conversion> {
    let mut i = 0;
    let mut mantissa_digits = 0usize;
    let mut nonzero = false;
    while i < s.len() && s[i].is_ascii_digit() {
        nonzero |= s[i] != b'0';
        mantissa_digits += 1;
        i += 1;
    }
    if i < s.len() && s[i] == b'.' {
        i += 1;
        while i < s.len() && s[i].is_ascii_digit() {
            nonzero |= s[i] != b'0';
            mantissa_digits += 1;
            i += 1;
        }
    }
    if mantissa_digits == 0 {
        return None;
    }
    if i < s.len() && (s[i] == b'e' || s[i] == b'E') {
        i += 1;
        if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
            i += 1;
        }
        let exp_start = i;
        while i < s.len() && s[i].is_ascii_digit() {
            i += 1;
        }
        if i == exp_start {
            return None;
        }
    }
    if i != s.len() {
        return None;
    }
    // The grammar above is a subset of what Rust's parser accepts, and both
    // round correctly (to nearest, ties to even) like glibc's strtod.
    let text = std::str::from_utf8(s).ok()?;
    let v: f64 = text.parse().ok()?;
    Some(if v.is_infinite() {
        Conversion::Overflow(v)
    } else if v == 0.0 && nonzero {
        Conversion::Underflow(v)
    } else {
        Conversion::Value(v)
    })
}

/// Parses the part of a C99 hexadecimal float after `0x`:
/// `hexdigits[.hexdigits][p[+-]decimaldigits]` with at least one hex digit,
/// rounding to nearest-even like glibc, and flagging overflow and underflow
/// to zero (strtod's `ERANGE` cases).
fn parse_hex_float(s: &[u8]) -> Option<Conversion> {
    let mut mant: u64 = 0;
    let mut exp: i64 = 0;
    let mut sticky = false;
    let mut any_digit = false;
    let mut i = 0;
    let mut in_fraction = false;
    while i < s.len() {
        let c = s[i];
        if c == b'.' && !in_fraction {
            in_fraction = true;
            i += 1;
            continue;
        }
        let d = match hex_value(c) {
            Some(d) => d,
            None => break,
        };
        any_digit = true;
        if mant >> 60 == 0 {
            mant = (mant << 4) | u64::from(d);
            if in_fraction {
                exp = exp.saturating_sub(4);
            }
        } else {
            sticky |= d != 0;
            if !in_fraction {
                exp = exp.saturating_add(4);
            }
        }
        i += 1;
    }
    if !any_digit {
        return None;
    }
    if i < s.len() && (s[i] == b'p' || s[i] == b'P') {
        i += 1;
        let mut neg = false;
        if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
            neg = s[i] == b'-';
            i += 1;
        }
        let start = i;
        let mut e: i64 = 0;
        while i < s.len() && s[i].is_ascii_digit() {
            // Saturate far beyond any meaningful binary exponent.
            e = (e * 10 + i64::from(s[i] - b'0')).min(1 << 40);
            i += 1;
        }
        if i == start {
            return None;
        }
        exp = exp.saturating_add(if neg { -e } else { e });
    }
    if i != s.len() {
        return None;
    }
    if mant == 0 {
        return Some(Conversion::Value(0.0));
    }
    let lz = mant.leading_zeros();
    let m = mant << lz;
    // value = m * 2^(exp - lz), with m in [2^63, 2^64): leading bit weight.
    let top = exp.saturating_sub(i64::from(lz)).saturating_add(63);
    if top > 1023 {
        return Some(Conversion::Overflow(f64::INFINITY));
    }
    let (shift, field_base) = if top >= -1022 {
        (11u64, (top + 1022) as u64)
    } else {
        ((11 + (-1022 - top)) as u64, 0)
    };
    let q = round_shift_right(m, shift, sticky);
    let bits = (field_base << 52).wrapping_add(q);
    Some(if bits == 0 {
        Conversion::Underflow(0.0)
    } else if bits >= 0x7ff0_0000_0000_0000 {
        Conversion::Overflow(f64::INFINITY)
    } else {
        Conversion::Value(f64::from_bits(bits))
    })
}

/// Shifts `m` right by `shift` bits rounding to nearest, ties to even, where
/// `sticky` says whether nonzero bits were already dropped below `m`.
fn round_shift_right(m: u64, shift: u64, sticky: bool) -> u64 {
    if shift == 0 {
        return m;
    }
    if shift > 64 {
        // Everything is below the half-way point of the lowest kept bit.
        return 0;
    }
    let (q, rem, half) = if shift == 64 {
        (0u64, m, 1u64 << 63)
    } else {
        (m >> shift, m & ((1u64 << shift) - 1), 1u64 << (shift - 1))
    };
    if rem > half || (rem == half && (sticky || q & 1 == 1)) {
        q + 1
    } else {
        q
    }
}

/// Value of an ASCII hex digit.
#[inline]
pub(crate) fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// A tiny fixed-size `fmt::Write` sink so float formatting needs no heap
/// allocation.
struct StackBuf {
    /// Storage; large enough for any `{:.16e}` rendering of an `f64`.
    buf: [u8; 40],
    /// Bytes used.
    len: usize,
}

impl StackBuf {
    /// An empty buffer.
    fn new() -> Self {
        StackBuf {
            buf: [0; 40],
            len: 0,
        }
    }

    /// The bytes written so far.
    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let b = s.as_bytes();
        let end = self.len.checked_add(b.len()).ok_or(std::fmt::Error)?;
        if end > self.buf.len() {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(b);
        self.len = end;
        Ok(())
    }
}

/// Decimal digits and exponent of a finite double rounded to `N`
/// significant digits: value ≈ 0.d1d2..dN × 10^(exp+1), i.e. `d1.d2..dN e exp`.
struct SciDigits<const N: usize> {
    /// True for negative values (including -0.0).
    neg: bool,
    /// The `N` significant digits as ASCII.
    digits: [u8; N],
    /// Decimal exponent of the first digit.
    exp: i32,
}

impl<const N: usize> SciDigits<N> {
    /// Cheap exact path: if the exact decimal expansion of `d` (finite,
    /// non-integral) has at most `N` significant digits, returns them without
    /// going through the general (possibly bignum-based) formatter. Common
    /// for scores such as `1.5` or `0.25`.
    fn exact(d: f64) -> Option<Self> {
        let bits = d.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i32;
        let fraction = bits & ((1u64 << 52) - 1);
        let (mut m, mut e) = if biased == 0 {
            (fraction, -1074)
        } else {
            (fraction | (1u64 << 52), biased - 1075)
        };
        if m == 0 {
            return None;
        }
        let tz = m.trailing_zeros();
        m >>= tz;
        e += tz as i32;
        // d = m / 2^q = m * 5^q / 10^q; m is odd so m * 5^q has no trailing
        // decimal zeros and is exactly the digit string. 5^25 > 10^17.
        if !(-24..0).contains(&e) {
            return None;
        }
        let q = e.unsigned_abs();
        let value = u128::from(m) * 5u128.pow(q);
        let value = u64::try_from(value).ok()?;
        let mut buf = [0u8; 20];
        let start = format_u64_into(value, &mut buf);
        let n = 20 - start;
        if n > N {
            return None;
        }
        let mut out = SciDigits {
            neg: d.is_sign_negative(),
            digits: [b'0'; N],
            exp: n as i32 - 1 - q as i32,
        };
        out.digits[..n].copy_from_slice(&buf[start..]);
        Some(out)
    }

    /// Rounds `d` (finite) to `N` significant digits using Rust's exact
    /// formatter, which rounds the exact binary value half-to-even like glibc.
    fn new(d: f64) -> Self {
        let mut sb = StackBuf::new();
        let mut out = SciDigits {
            neg: d.is_sign_negative(),
            digits: [b'0'; N],
            exp: 0,
        };
        if write!(sb, "{:.*e}", N - 1, d.abs()).is_err() {
            return out;
        }
        let s = sb.as_bytes();
        let mut n = 0;
        let mut i = 0;
        while i < s.len() && s[i] != b'e' {
            if s[i].is_ascii_digit() && n < N {
                out.digits[n] = s[i];
                n += 1;
            }
            i += 1;
        }
        let exp_text = s.get(i + 1..).unwrap_or(b"0");
        let (eneg, edigits) = match exp_text.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, exp_text),
        };
        let mut e: i32 = 0;
        for &c in edigits {
            e = e * 10 + i32::from(c.wrapping_sub(b'0') % 10);
        }
        out.exp = if eneg { -e } else { e };
        out
    }

    /// Number of significant digits once trailing zeros are dropped (≥ 1).
    fn trimmed_len(&self) -> usize {
        let mut n = N;
        while n > 1 && self.digits[n - 1] == b'0' {
            n -= 1;
        }
        n
    }

    /// Writes the digits in plain positional notation (no exponent), with
    /// trailing fractional zeros and a bare '.' removed.
    fn write_fixed(&self, out: &mut Vec<u8>) {
        let n = self.trimmed_len();
        let digits = &self.digits[..n];
        if self.neg {
            out.push(b'-');
        }
        if self.exp >= 0 {
            let int_len = self.exp as usize + 1;
            if n <= int_len {
                out.extend_from_slice(digits);
                out.resize(out.len() + (int_len - n), b'0');
            } else {
                out.extend_from_slice(&digits[..int_len]);
                out.push(b'.');
                out.extend_from_slice(&digits[int_len..]);
            }
        } else {
            out.extend_from_slice(b"0.");
            let zeros = (-(self.exp + 1)) as usize;
            out.resize(out.len() + zeros, b'0');
            out.extend_from_slice(digits);
        }
    }
}

/// Appends the Redis 7.0 textual form of a double: `inf`, `-inf`, `nan`, or
/// otherwise exactly what C's `printf("%.17g", d)` prints (e.g.
/// `1.1000000000000001`, `3`, `1e+20`, `1.0000000000000001e-05`, `-0`).
///
/// This is the representation used in double replies (`ZSCORE`, RESP3
/// doubles), so it must be byte-identical to Redis.
pub fn write_double(out: &mut Vec<u8>, d: f64) {
    if d.is_nan() {
        out.extend_from_slice(b"nan");
        return;
    }
    if d.is_infinite() {
        out.extend_from_slice(if d > 0.0 { b"inf" } else { b"-inf" });
        return;
    }
    // Fast path: integral values below 10^17 have at most 17 digits, so
    // %.17g prints them as plain integers.
    if d == d.trunc() && d.abs() < 1e17 && !(d == 0.0 && d.is_sign_negative()) {
        write_i64(out, d as i64);
        return;
    }
    let sci = SciDigits::<17>::exact(d).unwrap_or_else(|| SciDigits::<17>::new(d));
    if sci.exp < -4 || sci.exp >= 17 {
        let n = sci.trimmed_len();
        if sci.neg {
            out.push(b'-');
        }
        out.push(sci.digits[0]);
        if n > 1 {
            out.push(b'.');
            out.extend_from_slice(&sci.digits[1..n]);
        }
        out.push(b'e');
        out.push(if sci.exp < 0 { b'-' } else { b'+' });
        let e = sci.exp.unsigned_abs();
        if e < 10 {
            out.push(b'0');
        }
        write_u64(out, u64::from(e));
    } else {
        sci.write_fixed(out);
    }
}

/// Returns the Redis 7.0 textual form of a double as a `String`; see
/// [`write_double`] for the exact rules.
pub fn format_double(d: f64) -> String {
    let mut v = Vec::with_capacity(24);
    write_double(&mut v, d);
    // Only ASCII is ever written.
    String::from_utf8(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_i64_accepts_canonical_forms() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"1"), Some(1));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"1234567890"), Some(1_234_567_890));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn parse_i64_rejects_non_canonical_forms() {
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"1 ",
            b"01",
            b"00",
            b"-0",
            b"-01",
            b"1a",
            b"1.0",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"99999999999999999999",
            b"000000000000000000001",
            b"\x001",
            b"--1",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn parse_u64_rules() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"+1"), None);
        assert_eq!(parse_u64(b"01"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"12 "), None);
    }

    #[test]
    fn write_i64_matches_display() {
        for v in [
            0i64,
            1,
            -1,
            9,
            10,
            99,
            100,
            -100,
            12345,
            i64::MAX,
            i64::MIN,
            1_000_000_007,
        ] {
            let mut out = Vec::new();
            write_i64(&mut out, v);
            assert_eq!(out, v.to_string().into_bytes());
        }
        let mut out = b"x".to_vec();
        write_u64(&mut out, u64::MAX);
        assert_eq!(out, b"x18446744073709551615");
        // Every path: one digit, two digits, the general loop.
        for v in (0..1000).chain([9_999, 10_000, 123_456_789]) {
            let mut out = Vec::new();
            write_u64(&mut out, v);
            assert_eq!(out, v.to_string().into_bytes());
        }
        assert_eq!(u64_digits(0), 1);
        assert_eq!(u64_digits(99), 2);
        assert_eq!(u64_digits(u64::MAX), 20);
    }

    #[test]
    fn parse_f64_decimal_forms() {
        assert_eq!(parse_f64(b"1"), Some(1.0));
        assert_eq!(parse_f64(b"-1.5"), Some(-1.5));
        assert_eq!(parse_f64(b"+1.5"), Some(1.5));
        assert_eq!(parse_f64(b"1."), Some(1.0));
        assert_eq!(parse_f64(b".5"), Some(0.5));
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        assert_eq!(parse_f64(b"1E+3"), Some(1000.0));
        assert_eq!(parse_f64(b"5.0e3"), Some(5000.0));
        assert_eq!(parse_f64(b"1.e2"), Some(100.0));
        assert_eq!(parse_f64(b"007"), Some(7.0));
        assert_eq!(parse_f64(b"0e-400"), Some(0.0));
        assert_eq!(parse_f64(b"-0"), Some(-0.0));
        assert_eq!(parse_f64(b"10.50"), Some(10.5));
        // Subnormal results are accepted (strtod sets ERANGE but nonzero).
        assert_eq!(parse_f64(b"4e-320"), Some(4e-320));
    }

    #[test]
    fn parse_f64_infinities() {
        for s in [
            &b"inf"[..],
            b"+inf",
            b"INF",
            b"Infinity",
            b"+infinity",
            b"INFINITY",
        ] {
            assert_eq!(parse_f64(s), Some(f64::INFINITY));
        }
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"-Infinity"), Some(f64::NEG_INFINITY));
    }

    #[test]
    fn parse_f64_rejections() {
        for bad in [
            &b""[..],
            b" 1",
            b"1 ",
            b"\t1",
            b"nan",
            b"NaN",
            b"-nan",
            b"1e400",
            b"-1e400",
            b"1e-400",
            b"infin",
            b"infinityx",
            b"inf ",
            b".",
            b"-",
            b"+",
            b"e5",
            b"1e",
            b"1e+",
            b"1.5.2",
            b"1,5",
            b"0x",
            b"0x1p",
            b"0xg",
            b"1\x00",
            b"--1",
            b"+-1",
            b"1_000",
            b"0x1p1024",
            b"0x1p-1075",
        ] {
            assert_eq!(parse_f64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn parse_f64_lenient_follows_zsl_parse_range() {
        assert_eq!(parse_f64_lenient(b"1.5"), Some(1.5));
        assert_eq!(parse_f64_lenient(b"  1.5"), Some(1.5));
        assert_eq!(parse_f64_lenient(b"\t-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64_lenient(b"1e400"), Some(f64::INFINITY));
        assert_eq!(parse_f64_lenient(b"-1e400"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64_lenient(b"1e-400"), Some(0.0));
        assert_eq!(parse_f64_lenient(b"0x1p-1080"), Some(0.0));
        assert_eq!(parse_f64_lenient(b"0x1p2000"), Some(f64::INFINITY));
        assert_eq!(parse_f64_lenient(b""), Some(0.0));
        assert_eq!(parse_f64_lenient(b"7\x00junk"), Some(7.0));
        assert_eq!(parse_f64_lenient(b"   "), None);
        assert_eq!(parse_f64_lenient(b"1 "), None);
        assert_eq!(parse_f64_lenient(b"nan"), None);
        assert_eq!(parse_f64_lenient(b"abc"), None);
        assert_eq!(parse_f64_lenient(b"(1"), None);
    }

    #[test]
    fn parse_f64_hex_floats() {
        assert_eq!(parse_f64(b"0x10"), Some(16.0));
        assert_eq!(parse_f64(b"0x1.8p1"), Some(3.0));
        assert_eq!(parse_f64(b"0X1P+1"), Some(2.0));
        assert_eq!(parse_f64(b"0x.8"), Some(0.5));
        assert_eq!(parse_f64(b"-0x1p-2"), Some(-0.25));
        assert_eq!(parse_f64(b"0x0p0"), Some(0.0));
        assert_eq!(parse_f64(b"0x1p-1074"), Some(f64::from_bits(1)));
        assert_eq!(
            parse_f64(b"0x1.0000000000000fp0"),
            Some(f64::from_bits(1.0f64.to_bits() + 1))
        );
        assert_eq!(parse_f64(b"0x1.fffffffffffff7p1023"), Some(f64::MAX));
        assert_eq!(parse_f64(b"0x1.fffffffffffff8p1023"), None);
        // Exactly half-way between 1 and the next double: ties to even.
        assert_eq!(parse_f64(b"0x1.00000000000008p0"), Some(1.0));
        assert_eq!(
            parse_f64(b"0x1.00000000000018p0"),
            Some(f64::from_bits(1.0f64.to_bits() + 2))
        );
        // A sticky bit far below breaks the tie upwards.
        assert_eq!(
            parse_f64(b"0x1.000000000000080000001p0"),
            Some(f64::from_bits(1.0f64.to_bits() + 1))
        );
        // Expected bits from glibc's strtod.
        assert_eq!(
            parse_f64(b"0x123456789abcdef0123p0"),
            Some(f64::from_bits(0x4472_3456_789a_bcdf))
        );
    }

    #[test]
    fn format_double_matches_c_printf() {
        // Expected strings produced by glibc's printf("%.17g").
        let cases: &[(f64, &str)] = &[
            (1.1, "1.1000000000000001"),
            (3.0, "3"),
            (1e20, "1e+20"),
            (1e-5, "1.0000000000000001e-05"),
            (0.1, "0.10000000000000001"),
            (1.0 / 3.0, "0.33333333333333331"),
            // 2^-25 = 2.98023223876953125e-08 exactly: a tie, rounded to even.
            (1.0 / 33_554_432.0, "2.9802322387695312e-08"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1e17, "1e+17"),
            (1e16, "10000000000000000"),
            (1e-4, "0.0001"),
            (0.0001234, "0.00012339999999999999"),
            (-0.0, "-0"),
            (0.0, "0"),
            (5e-324, "4.9406564584124654e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (100.0, "100"),
            (-100.0, "-100"),
            (12345678901234567890.0, "1.2345678901234567e+19"),
            (0.5, "0.5"),
            (2.5e-5, "2.5000000000000001e-05"),
            (1e15, "1000000000000000"),
            (123.456, "123.456"),
            (-1.5, "-1.5"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ];
        for &(d, want) in cases {
            assert_eq!(format_double(d), want, "{d:e}");
            let mut out = b"pre".to_vec();
            write_double(&mut out, d);
            assert_eq!(&out[3..], want.as_bytes());
        }
    }

    #[test]
    fn exact_fast_path_agrees_with_general_path() {
        for d in [
            1.5,
            -0.25,
            1234.5,
            0.1,
            1.0 / 1024.0,
            3.0517578125e-05,
            99999999999999.5,
            1e-7,
            123.456,
            2.5e-5,
        ] {
            let general = SciDigits::<17>::new(d);
            if let Some(exact) = SciDigits::<17>::exact(d) {
                assert_eq!(exact.digits, general.digits, "{d:e}");
                assert_eq!(exact.exp, general.exp, "{d:e}");
                assert_eq!(exact.neg, general.neg, "{d:e}");
            }
        }
        assert!(SciDigits::<17>::exact(1.5).is_some());
        assert!(SciDigits::<17>::exact(0.1).is_none());
        assert_eq!(format_double(99999999999999984.0), "99999999999999984");
        assert_eq!(format_double(1e17), "1e+17");
        assert_eq!(format_double(1234.5), "1234.5");
        assert_eq!(format_double(3.0517578125e-05), "3.0517578125e-05");
    }

    #[test]
    fn format_double_round_trips() {
        for d in [0.1, 1.0 / 3.0, 1e-300, 1.7e308, 123.456, 5e-324, -2.5e-7] {
            let s = format_double(d);
            assert_eq!(parse_f64(s.as_bytes()), Some(d), "{s}");
        }
    }
}
