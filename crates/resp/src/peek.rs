//! Looking ahead in a pipeline without parsing it.
//!
//! A server that has a batch of pipelined commands in its input buffer can
//! start loading the memory each command's key lives in before running the
//! first of them, so that the batch's cache misses overlap instead of
//! coming one after the other. [`peek_command`] finds the next command's
//! arguments and where that command ends, without any state and without
//! touching the parser the connection is using.
//!
//! It is a hint, not a parser: anything it does not recognise as a
//! complete, well-formed multibulk command (inline commands, incomplete
//! input, bad lengths) ends the look-ahead with `None`, and the real
//! [`Parser`](crate::Parser) decides what that input means.

use crate::parse::fast_len_line;

/// The next command in `buf`: its length in bytes and its number of
/// arguments (the command name included), with the `(start, end)` ranges
/// of its first `args.len()` arguments written to `args`, as
/// [`Args`](crate::Args) holds them. `None` when `buf` does not start with
/// a complete multibulk command.
///
/// Where it answers, it finds what [`Parser`](crate::Parser) would, save
/// for the limits the parser enforces (bulk lengths, and the counts of an
/// unauthenticated client), which are the caller's to check.
pub fn peek_command(buf: &[u8], args: &mut [(usize, usize)]) -> Option<(usize, usize)> {
    let (count, mut at) = header(buf, 0, b'*')?;
    for i in 0..count {
        let (len, start) = header(buf, at, b'$')?;
        let end = start.checked_add(len)?;
        if end.checked_add(2)? > buf.len() {
            return None;
        }
        if let Some(arg) = args.get_mut(i) {
            *arg = (start, end);
        }
        // Like the parser, the two bytes after a payload are not checked.
        at = end + 2;
    }
    Some((at, count))
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

    /// The command at the front of `buf` as (length, argument count,
    /// the first two arguments).
    fn peek2(buf: &[u8]) -> Option<(usize, usize, Vec<&[u8]>)> {
        let mut args = [(0, 0); 2];
        let (len, count) = peek_command(buf, &mut args)?;
        let shown = args.iter().take(count).map(|&(s, e)| &buf[s..e]).collect();
        Some((len, count, shown))
    }

    #[test]
    fn finds_the_arguments_and_the_end_of_each_command() {
        let buf = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n*1\r\n$4\r\nPING\r\n";
        assert_eq!(peek2(buf), Some((33, 3, vec![&b"SET"[..], b"key"])));
        assert_eq!(peek2(&buf[33..]), Some((14, 1, vec![&b"PING"[..]])));
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
            assert_eq!(peek2(buf), None, "{buf:?}");
        }
    }

    proptest::proptest! {
        /// Byte soup built from protocol fragments: whenever the
        /// look-ahead claims a command, the parser finds the same command
        /// there, with the same arguments.
        #[test]
        fn agrees_with_the_parser_on_what_it_accepts(picks in proptest::collection::vec(0..9usize, 1..8)) {
            let pieces: [&[u8]; 9] = [
                b"*2\r\n", b"*1\r\n", b"*0\r\n", b"$3\r\n", b"GET\r\n", b"$0\r\n\r\n", b"key",
                b"\r\n", b"$1\r\nx\r\n",
            ];
            let buf: Vec<u8> = picks.iter().flat_map(|&i| pieces[i].iter().copied()).collect();
            let mut ranges = [(0, 0); 8];
            if let Some((len, count)) = peek_command(&buf, &mut ranges) {
                let mut parser = Parser::new();
                let parsed = parser.parse(&buf, &ParseLimits::default());
                proptest::prop_assert_eq!(parsed, Ok(Some(len)));
                let args = parser.args(&buf);
                proptest::prop_assert_eq!(count, args.len());
                let peeked = crate::Args::new(&buf, &ranges[..count.min(8)]);
                proptest::prop_assert!(peeked.iter().eq(args.iter().take(8)));
            }
        }
    }
}
