//! Property tests for number parsing/formatting.

use proptest::prelude::*;
use vireo_resp::{format_double, parse_f64, parse_i64, parse_u64, write_double, write_i64};

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
}
