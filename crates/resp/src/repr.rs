//! Redis's `sdscatrepr`: a byte string quoted for humans, as MONITOR
//! lines and the Lua debugger's logs show arguments and values.

/// Appends `s` quoted as Redis's `sdscatrepr` does: in double quotes, with
/// `\\ \" \n \r \t \a \b` escaped and other non-printable bytes as `\xHH`.
pub fn write_repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', c]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[
                    b'\\',
                    b'x',
                    HEX[usize::from(c >> 4)],
                    HEX[usize::from(c & 15)],
                ]);
            }
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_quotes_like_sdscatrepr() {
        let mut v = Vec::new();
        write_repr(&mut v, b"a\"b\\c\n\r\t\x07\x08 ~\x01\x7f\xc3\xa9");
        assert_eq!(
            String::from_utf8(v).unwrap(),
            r#""a\"b\\c\n\r\t\a\b ~\x01\x7f\xc3\xa9""#
        );
        let mut v = Vec::new();
        write_repr(&mut v, b"");
        assert_eq!(v, b"\"\"");
    }
}
