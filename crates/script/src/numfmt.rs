//! C number text conversions the Lua libraries depend on: `printf("%.*g")`
//! (Lua's `tostring`, cjson's number encoding) and `strtod` (cjson's number
//! decoding, which accepts what C accepts: hex, `inf`, `nan`, a leading
//! `+`). Written against glibc's observable output.

/// `printf("%.{precision}g", d)` as glibc prints it.
pub(crate) fn format_g(d: f64, precision: usize) -> String {
    if d.is_nan() {
        return if d.is_sign_negative() { "-nan" } else { "nan" }.to_owned();
    }
    if d.is_infinite() {
        return if d < 0.0 { "-inf" } else { "inf" }.to_owned();
    }
    let p = precision.max(1);
    let sci = format!("{:.*e}", p - 1, d);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp >= -4 && exp < p as i32 {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        strip_zeros(format!("{d:.decimals$}"))
    } else {
        let mantissa = strip_zeros(mantissa.to_owned());
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    }
}

/// Drops trailing fractional zeros (and a bare `.`), as `%g` does.
fn strip_zeros(mut s: String) -> String {
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    s
}

/// `strtod(s, &end)`: the value of the longest numeric prefix of `s` and
/// its length, or `None` when no prefix is a number (`end == s`).
pub(crate) fn strtod_prefix(s: &[u8]) -> Option<(f64, usize)> {
    let mut i = s.iter().take_while(|c| c.is_ascii_whitespace()).count();
    let negative = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let (value, len) = unsigned_prefix(&s[i..])?;
    Some((if negative { -value } else { value }, i + len))
}

/// The unsigned part of [`strtod_prefix`].
fn unsigned_prefix(s: &[u8]) -> Option<(f64, usize)> {
    let lower = |n: usize| -> Vec<u8> { s.iter().take(n).map(u8::to_ascii_lowercase).collect() };
    if lower(8) == b"infinity" {
        return Some((f64::INFINITY, 8));
    }
    if lower(3) == b"inf" {
        return Some((f64::INFINITY, 3));
    }
    if lower(3) == b"nan" {
        let mut len = 3;
        if s.get(3) == Some(&b'(') {
            let inner = s[4..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count();
            if s.get(4 + inner) == Some(&b')') {
                len = 5 + inner;
            }
        }
        return Some((f64::NAN, len));
    }
    if lower(2) == b"0x" {
        if let Some(hex) = hex_prefix(&s[2..]) {
            return Some((hex.0, 2 + hex.1));
        }
        return Some((0.0, 1));
    }
    decimal_prefix(s)
}

/// A decimal floating-point prefix: digits, optional fraction, optional
/// exponent (taken only when digits follow the `e`).
fn decimal_prefix(s: &[u8]) -> Option<(f64, usize)> {
    let digits = |from: usize| s[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let int_digits = digits(0);
    let mut end = int_digits;
    let mut frac_digits = 0;
    if s.get(end) == Some(&b'.') {
        frac_digits = digits(end + 1);
        if int_digits + frac_digits > 0 {
            end += 1 + frac_digits;
        }
    }
    if int_digits + frac_digits == 0 {
        return None;
    }
    if matches!(s.get(end), Some(b'e') | Some(b'E')) {
        let sign = usize::from(matches!(s.get(end + 1), Some(b'+') | Some(b'-')));
        let exp_digits = digits(end + 1 + sign);
        if exp_digits > 0 {
            end += 1 + sign + exp_digits;
        }
    }
    let text = std::str::from_utf8(&s[..end]).ok()?;
    let text = text.strip_suffix('.').unwrap_or(text);
    let text = if text.starts_with('.') {
        format!("0{text}")
    } else {
        text.to_owned()
    };
    text.parse::<f64>().ok().map(|v| (v, end))
}

/// A hexadecimal float after `0x`: hex digits, optional fraction, optional
/// binary exponent `p[+-]digits`.
fn hex_prefix(s: &[u8]) -> Option<(f64, usize)> {
    let mut value = 0.0f64;
    let mut i = 0;
    let mut any = false;
    while let Some(d) = s.get(i).and_then(|c| (*c as char).to_digit(16)) {
        value = value * 16.0 + f64::from(d);
        i += 1;
        any = true;
    }
    if s.get(i) == Some(&b'.') {
        let mut scale = 1.0 / 16.0;
        let mut j = i + 1;
        while let Some(d) = s.get(j).and_then(|c| (*c as char).to_digit(16)) {
            value += f64::from(d) * scale;
            scale /= 16.0;
            j += 1;
            any = true;
        }
        if any {
            i = j;
        }
    }
    if !any {
        return None;
    }
    if matches!(s.get(i), Some(b'p') | Some(b'P')) {
        let sign = matches!(s.get(i + 1), Some(b'+') | Some(b'-'));
        let start = i + 1 + usize::from(sign);
        let n = s[start..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n > 0 {
            let exp: i32 = std::str::from_utf8(&s[start..start + n])
                .ok()?
                .parse()
                .unwrap_or(i32::MAX);
            let exp = if s[i + 1] == b'-' { -exp } else { exp };
            value *= 2f64.powi(exp);
            i = start + n;
        }
    }
    Some((value, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `%.14g` and `%.17g` outputs as glibc prints them.
    #[test]
    fn format_g_like_printf() {
        let cases: &[(f64, usize, &str)] = &[
            (0.0, 14, "0"),
            (-0.0, 14, "-0"),
            (1.0, 14, "1"),
            (0.1, 14, "0.1"),
            (100.5, 14, "100.5"),
            (1e15, 14, "1e+15"),
            (123456789012345.0, 14, "1.2345678901234e+14"),
            (12345678901234.0, 14, "12345678901234"),
            (0.0001, 14, "0.0001"),
            (0.00001, 14, "1e-05"),
            (1.5e-300, 14, "1.5e-300"),
            (1.23456, 3, "1.23"),
            (0.1, 17, "0.10000000000000001"),
            (f64::INFINITY, 14, "inf"),
            (f64::NEG_INFINITY, 14, "-inf"),
            (2.5, 1, "2"),
        ];
        for (d, p, want) in cases {
            assert_eq!(format_g(*d, *p), *want, "{d} %.{p}g");
        }
    }

    /// `strtod` prefixes, including the forms JSON forbids.
    #[test]
    fn strtod_like_c() {
        assert_eq!(strtod_prefix(b"12abc"), Some((12.0, 2)));
        assert_eq!(strtod_prefix(b"-1.5e3,"), Some((-1500.0, 6)));
        assert_eq!(strtod_prefix(b"1e"), Some((1.0, 1)));
        assert_eq!(strtod_prefix(b"+7"), Some((7.0, 2)));
        assert_eq!(strtod_prefix(b"0x1F]"), Some((31.0, 4)));
        assert_eq!(strtod_prefix(b"0xg"), Some((0.0, 1)));
        assert_eq!(strtod_prefix(b".5"), Some((0.5, 2)));
        assert_eq!(strtod_prefix(b"5."), Some((5.0, 2)));
        assert_eq!(strtod_prefix(b"-Infinity"), Some((f64::NEG_INFINITY, 9)));
        assert!(strtod_prefix(b"nan(123)x").is_some_and(|(v, n)| v.is_nan() && n == 8));
        assert_eq!(strtod_prefix(b"-"), None);
        assert_eq!(strtod_prefix(b"."), None);
        assert_eq!(strtod_prefix(b"x"), None);
    }
}
