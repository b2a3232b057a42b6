//! Property tests for number parsing/formatting.

use proptest::prelude::*;
use vireo_resp::{
    format_double, format_long_double, parse_f64, parse_i64, parse_u64, write_double, write_i64,
};

/// Canonical decimal text of `m / 10^k` (no exponent, no trailing zeros).
fn decimal_text(m: i64, k: u32) -> String {
    let neg = m < 0;
    let m = m.unsigned_abs();
    let p = 10u64.pow(k);
    let (int, frac) = (m / p, m % p);
    let mut s = if neg && m != 0 {
        "-".to_owned()
    } else {
        String::new()
    };
    s += &int.to_string();
    if frac != 0 {
        let f = format!("{:0width$}", frac, width = k as usize);
        s.push('.');
        s += f.trim_end_matches('0');
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn parse_i64_accepts_exactly_canonical_text(s in "[-+ 0-9]{0,22}") {
        let canonical = s.parse::<i64>().ok().filter(|v| v.to_string() == s);
        prop_assert_eq!(parse_i64(s.as_bytes()), canonical);
    }

    #[test]
    fn parse_u64_accepts_exactly_canonical_text(s in "[-+ 0-9]{0,22}") {
        let canonical = s.parse::<u64>().ok().filter(|v| v.to_string() == s);
        prop_assert_eq!(parse_u64(s.as_bytes()), canonical);
    }

    #[test]
    fn i64_round_trip(v in any::<i64>()) {
        let mut out = Vec::new();
        write_i64(&mut out, v);
        prop_assert_eq!(&out, &v.to_string().into_bytes());
        prop_assert_eq!(parse_i64(&out), Some(v));
    }

    #[test]
    fn u64_round_trip(v in any::<u64>()) {
        prop_assert_eq!(parse_u64(v.to_string().as_bytes()), Some(v));
    }

    #[test]
    fn double_text_round_trips(bits in any::<u64>()) {
        let d = f64::from_bits(bits);
        let s = format_double(d);
        let mut w = Vec::new();
        write_double(&mut w, d);
        prop_assert_eq!(s.as_bytes(), &w[..]);
        if d.is_nan() {
            prop_assert_eq!(s, "nan");
        } else {
            let back = parse_f64(s.as_bytes());
            prop_assert_eq!(back.map(f64::to_bits), Some(bits), "{}", s);
            // %.17g never prints more than 17 significant digits.
            let mantissa = s.split('e').next().unwrap_or("");
            let digits = mantissa.bytes().filter(u8::is_ascii_digit).skip_while(|&c| c == b'0').count();
            prop_assert!(digits <= 17, "{}", s);
        }
    }

    #[test]
    fn parse_f64_matches_rust_on_plain_decimals(s in "-?[0-9]{1,15}(\\.[0-9]{0,15})?") {
        prop_assert_eq!(parse_f64(s.as_bytes()), s.parse::<f64>().ok());
    }

    #[test]
    fn parse_f64_rejects_surrounding_whitespace(s in "-?[0-9]{1,5}(\\.[0-9]{1,5})?", ws in "[ \t\r\n]") {
        prop_assert_eq!(parse_f64(format!("{ws}{s}").as_bytes()), None);
        prop_assert_eq!(parse_f64(format!("{s}{ws}").as_bytes()), None);
    }

    #[test]
    fn parse_f64_never_panics(b in proptest::collection::vec(any::<u8>(), 0..40)) {
        if let Some(d) = parse_f64(&b) {
            prop_assert!(!d.is_nan());
        }
    }

    #[test]
    fn long_double_prints_short_decimals_exactly(m in -1_000_000_000_000i64..1_000_000_000_000, k in 0u32..7) {
        let d = m as f64 / 10f64.powi(k as i32);
        prop_assert_eq!(format_long_double(d), decimal_text(m, k));
    }

    #[test]
    fn long_double_sums_of_cents_print_cleanly(a in 0i64..100_000_000_000, b in 0i64..100_000_000_000) {
        // INCRBYFLOAT on money-like values: (a/100) + (b/100).
        let d = a as f64 / 100.0 + b as f64 / 100.0;
        prop_assert_eq!(format_long_double(d), decimal_text(a + b, 2));
    }

    #[test]
    fn long_double_is_positional_and_close(bits in any::<u64>()) {
        let d = f64::from_bits(bits);
        let s = format_long_double(d);
        if d.is_finite() {
            prop_assert!(!s.contains('e'), "{}", s);
            let frac = s.split('.').nth(1).map_or(0, str::len);
            prop_assert!(frac <= 17, "{}", s);
            let back = parse_f64(s.as_bytes()).unwrap_or(f64::NAN);
            // Either within the 17-decimal resolution or within 1e-11 relative.
            let tol = (d.abs() * 1e-11).max(5e-18);
            prop_assert!((back - d).abs() <= tol, "{} vs {:e}", s, d);
        }
    }
}
