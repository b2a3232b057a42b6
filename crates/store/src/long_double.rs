//! INCRBYFLOAT and HINCRBYFLOAT arithmetic, digit for digit as Redis.
//!
//! Redis adds the stored value and the increment as C `long double`s (80-bit
//! extended precision on x86-64, parsed with `strtold`) and replies
//! `%.17Lf` with trailing zeros removed (`ld2string` with `LD_STR_HUMAN`).
//! `f64` arithmetic cannot reproduce those digits: `1.8333333333333333 +
//! 1.5` is `3.33333333333333331` in Redis. So the addition and the printing
//! are done by C's own long double (`src/long_double.c`, built by
//! `build.rs`), and only the trimming is here. Validation follows Redis's
//! `string2ld` with the same `strtold` ([`check_long_double`]): `1e400` is
//! a number there, though not an `f64`.

use std::ffi::{c_char, c_int, CString};

extern "C" {
    fn vireo_long_double_check(s: *const c_char) -> c_int;
    fn vireo_long_double_add(
        a: *const c_char,
        b: *const c_char,
        out: *mut c_char,
        cap: c_int,
    ) -> c_int;
}

/// Redis's `MAX_LONG_DOUBLE_CHARS`: room for the widest `%.17Lf` of a
/// finite long double (about 4,950 characters).
const MAX_CHARS: usize = 5 * 1024;

/// Why a sum could not be produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongDoubleError {
    /// The sum is NaN or infinite (Redis: "increment would produce NaN or
    /// Infinity").
    NotFinite,
    /// An argument holds a NUL byte, or the sum does not print in
    /// `MAX_LONG_DOUBLE_CHARS` (neither passes Redis's own validation).
    Unprintable,
}

/// What a valid long double text spells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongDoubleKind {
    /// A finite number.
    Finite,
    /// `inf`, `-infinity`…: valid text, refused later by the commands.
    Infinite,
}

/// Whether `text` is a number by Redis's `string2ld` rules (`strtold`
/// syntax over the whole text, no leading space, no NUL, no overflow, not
/// NaN, shorter than `MAX_LONG_DOUBLE_CHARS`); None when it is not.
pub fn check_long_double(text: &[u8]) -> Option<LongDoubleKind> {
    if text.is_empty() || text.len() >= MAX_CHARS {
        return None;
    }
    let text = CString::new(text).ok()?;
    // SAFETY: `text` is NUL-terminated and outlives the call, which only
    // reads it. Exercised by the tests below and the INCRBYFLOAT tests.
    match unsafe { vireo_long_double_check(text.as_ptr()) } {
        0 => Some(LongDoubleKind::Finite),
        1 => Some(LongDoubleKind::Infinite),
        _ => None,
    }
}

/// `a + b` as Redis's INCRBYFLOAT computes and prints it. `a` and `b` must
/// already be valid numbers by Redis's rules.
pub fn add_long_doubles(a: &[u8], b: &[u8]) -> Result<Vec<u8>, LongDoubleError> {
    let a = CString::new(a).map_err(|_| LongDoubleError::Unprintable)?;
    let b = CString::new(b).map_err(|_| LongDoubleError::Unprintable)?;
    // On the stack: the widest sum needs the whole buffer, a typical one
    // a few dozen bytes, which is all that is copied out.
    let mut out = [0u8; MAX_CHARS];
    // SAFETY: `a` and `b` are NUL-terminated; `out` is writable for
    // `MAX_CHARS` bytes, the capacity passed, and snprintf writes no more
    // (the C side reports an overflow instead). Exercised by the tests
    // below, the INCRBYFLOAT differential tests and the random sums.
    let len = unsafe {
        vireo_long_double_add(
            a.as_ptr(),
            b.as_ptr(),
            out.as_mut_ptr().cast(),
            MAX_CHARS as c_int,
        )
    };
    match len {
        -1 => Err(LongDoubleError::NotFinite),
        n if n < 0 => Err(LongDoubleError::Unprintable),
        n => {
            let mut text = out[..n as usize].to_vec();
            trim_human(&mut text);
            Ok(text)
        }
    }
}

/// `LD_STR_HUMAN`'s clean-up of `%.17Lf`: zeros after the decimal point
/// and a bare `.` removed, and `-0` printed as `0`.
fn trim_human(text: &mut Vec<u8>) {
    if text.contains(&b'.') {
        while text.last() == Some(&b'0') {
            text.pop();
        }
        if text.last() == Some(&b'.') {
            text.pop();
        }
    }
    if text == b"-0" {
        *text = b"0".to_vec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(a: &str, b: &str) -> String {
        String::from_utf8(add_long_doubles(a.as_bytes(), b.as_bytes()).unwrap()).unwrap()
    }

    /// Sums as redis-server 7.0 printed them (x86-64).
    #[test]
    fn sums_print_as_redis() {
        assert_eq!(add("10.5", "0.1"), "10.6");
        assert_eq!(add("0", "1.5"), "1.5");
        assert_eq!(add("1.8333333333333333", "1.5"), "3.3333333333333333");
        assert_eq!(add("1.83333333333333331", "1.5"), "3.33333333333333331");
        assert_eq!(add("0.1", "0.2"), "0.3");
        assert_eq!(add("12345.6", "0"), "12345.59999999999999964");
        assert_eq!(add("5.0e3", "200"), "5200");
        assert_eq!(add("-1", "1"), "0");
        assert_eq!(add("-0.0", "0"), "0");
        assert_eq!(add("1e-20", "0"), "0");
        assert_eq!(add("3", "-1.5"), "1.5");
    }

    /// INCRBYFLOAT stores the printed sum, so each step starts from clean
    /// text: stepping by 0.1 never shows rounding noise, as in Redis.
    #[test]
    fn repeated_increments_stay_clean() {
        let mut cur = "0".to_owned();
        for i in 1..=200 {
            cur = add(&cur, "0.1");
            let want = format!("{}", f64::from(i) / 10.0);
            assert_eq!(cur, want);
        }
    }

    /// Texts as redis-server 7.0's INCRBYFLOAT judged them.
    #[test]
    fn validation_follows_string2ld() {
        use LongDoubleKind::*;
        for (text, want) in [
            ("1", Some(Finite)),
            ("1e400", Some(Finite)),
            ("0x1p-3", Some(Finite)),
            ("1e-400", Some(Finite)),
            ("infinity", Some(Infinite)),
            ("-inf", Some(Infinite)),
            ("1e5000", None),
            ("1e-5000", None),
            ("  1", None),
            ("1 ", None),
            ("1\u{0}5", None),
            ("nan", None),
            ("", None),
            ("1.5.5", None),
        ] {
            assert_eq!(check_long_double(text.as_bytes()), want, "{text:?}");
        }
        assert_eq!(check_long_double(&[b'1'; MAX_CHARS]), None);
    }

    #[test]
    fn non_finite_and_unprintable_sums_are_errors() {
        let big = "1.1e4932";
        assert_eq!(
            add_long_doubles(big.as_bytes(), big.as_bytes()),
            Err(LongDoubleError::NotFinite)
        );
        assert_eq!(
            add_long_doubles(b"1\0", b"1"),
            Err(LongDoubleError::Unprintable)
        );
        // The widest finite value still prints.
        let wide = add("1e4931", "0");
        assert_eq!(wide.len(), 4932);
    }

    /// Random sums never fail or overflow the buffer, and print positional
    /// text that parses back close to the f64 sum.
    #[test]
    fn random_sums_print_positional_text() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let a = f64::from_bits(state & !(0x7ffu64 << 52) | ((state % 90 + 980) << 52));
            let b = (state >> 11) as f64 / 1e6;
            let (sa, sb) = (format!("{a:e}"), format!("{b}"));
            let text = add(&sa, &sb);
            assert!(!text.contains('e'), "{text}");
            let back: f64 = text.parse().unwrap();
            // Long double and f64 sums differ by a few f64 ulps of the
            // larger operand (more where they cancel).
            let scale = a.abs().max(b.abs());
            assert!(
                (back - (a + b)).abs() <= scale * 1e-15 + 1e-17,
                "{sa} + {sb} = {text}"
            );
        }
    }
}
