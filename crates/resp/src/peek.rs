//! Looking ahead in a pipeline without parsing it.
//!
//! A server that has a batch of pipelined commands in its input buffer can
//! start loading the memory each command's key lives in before running the
//! first of them, so that the batch's cache misses overlap instead of
//! coming one after the other. [`peek_key`] finds the next command's
//! first argument (the key of most commands) and where that command ends,
//! at a fraction of a full parse's cost and without any state.
//!
//! It is a hint, not a parser: anything it does not recognise as a
//! complete, well-formed multibulk command (inline commands, incomplete
//! input, bad lengths) ends the look-ahead with `None`, and the real
//! [`Parser`](crate::Parser) decides what that input means.

use std::ops::Range;

use crate::parse::fast_len_line;

/// The next command in `buf`: its length in bytes, and the range of its
/// second element (the first argument after the command name) when it has
/// one. `None` when `buf` does not start with a complete multibulk
/// command.
pub fn peek_key(buf: &[u8]) -> Option<(usize, Option<Range<usize>>)> {
    let (count, mut at) = header(buf, 0, b'*')?;
    let mut key = None;
    for i in 0..count {
        let (len, start) = header(buf, at, b'$')?;
        let end = start.checked_add(len)?;
        if end.checked_add(2)? > buf.len() {
            return None;
        }
        if i == 1 {
            key = Some(start..end);
        }
        // Like the parser, the two bytes after a payload are not checked.
        at = end + 2;
    }
    Some((at, key))
}

/// Reads `<kind><decimal>\r\n` at `at` with the parser's fast path for
/// well-formed lengths; returns the number and the position after the
/// line.
fn header(buf: &[u8], at: usize, kind: u8) -> Option<(usize, usize)> {
    if *buf.get(at)? != kind {
        return None;
    }
    match fast_len_line(buf, at)? {
        (Some(n), next) => Some((usize::try_from(n).ok()?, next)),
        (None, _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ParseLimits, Parser};

    #[test]
    fn finds_the_key_and_the_end_of_each_command() {
        let buf = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n*1\r\n$4\r\nPING\r\n";
        let (len, key) = peek_key(buf).unwrap();
        assert_eq!(&buf[key.unwrap()], b"key");
        assert_eq!(len, 33);
        assert_eq!(peek_key(&buf[len..]), Some((14, None)));
    }

    #[test]
    fn stops_at_anything_but_a_complete_multibulk_command() {
        for buf in [
            &b""[..],
            b"PING\r\n",
            b"*2\r\n$3\r\nGET\r\n$3\r\nke",
            b"*2\r\n$3\r\nGET\r\n$-1\r\n",
            b"*\r\n",
            b"*1\n",
            b"*99999999999999999999\r\n",
            b"*1\r\n$999999999999999999\r\n",
        ] {
            assert_eq!(peek_key(buf), None, "{buf:?}");
        }
    }

    proptest::proptest! {
        /// Byte soup built from protocol fragments: whenever the
        /// look-ahead claims a command, the parser finds the same command
        /// there, with the same second argument.
        #[test]
        fn agrees_with_the_parser_on_what_it_accepts(picks in proptest::collection::vec(0..9usize, 1..8)) {
            let pieces: [&[u8]; 9] = [
                b"*2\r\n", b"*1\r\n", b"*0\r\n", b"$3\r\n", b"GET\r\n", b"$0\r\n\r\n", b"key",
                b"\r\n", b"$1\r\nx\r\n",
            ];
            let buf: Vec<u8> = picks.iter().flat_map(|&i| pieces[i].iter().copied()).collect();
            if let Some((len, key)) = peek_key(&buf) {
                let mut parser = Parser::new();
                let parsed = parser.parse(&buf, &ParseLimits::default());
                proptest::prop_assert_eq!(parsed, Ok(Some(len)));
                let args = parser.args(&buf);
                proptest::prop_assert_eq!(key.map(|r| &buf[r]), args.try_get(1));
            }
        }
    }
}
