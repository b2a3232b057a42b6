//! A minimal, resumable RESP2/RESP3 reply reader.
//!
//! The load generator does not need reply values, only three facts about
//! each reply: that it is complete (so a pipelined request can be matched
//! with its answer), whether it is an error (and its message, for the error
//! table) and whether it is nil (a miss, for the hit ratio of reads). This
//! reader extracts exactly those facts without allocating for anything but
//! error messages, and it is *resumable*: a reply split across any number of
//! socket reads is parsed once, token by token, never rescanned from its
//! start. It is deliberately independent of the server's RESP crate so the
//! benchmark cannot share a parsing bug with the thing it measures.

use std::fmt;

/// What a complete top-level reply was, as far as the benchmark cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A simple string such as `+OK` or `+PONG`.
    Status,
    /// An error reply (`-ERR ...` or a RESP3 blob error `!`), with its message.
    Error(String),
    /// An integer reply (`:n`).
    Integer,
    /// A non-nil bulk string (`$n`).
    Bulk,
    /// A nil: `$-1`, `*-1` or the RESP3 null `_`.
    Nil,
    /// A non-nil aggregate: array, set or map (of any nesting).
    Aggregate,
    /// Another RESP3 scalar: double, boolean, big number, verbatim string.
    Scalar,
}

/// The stream is not valid RESP; the connection cannot be resynchronised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

/// An aggregate whose children are still being read.
#[derive(Debug, Clone, Copy)]
struct Frame {
    /// Children still expected.
    remaining: u64,
    /// What the aggregate counts as once complete.
    role: Role,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// An ordinary array/set/map: a value of its parent.
    Value,
    /// A RESP3 push (`>`): out-of-band at the top level, not a reply.
    Push,
    /// A RESP3 attribute (`|`): metadata that precedes the value it describes
    /// and is not itself a value.
    Attribute,
}

/// Longest error message kept; longer ones are cut (errors are grouped by
/// message, so unbounded messages would only waste memory).
const MAX_ERROR_LEN: usize = 256;

/// Resumable reply reader; one per connection.
///
/// Feed it the unconsumed bytes of the connection's read buffer; it reports
/// each complete top-level reply and how many bytes it consumed. Bytes of an
/// incomplete trailing token are left unconsumed and must be presented again
/// (followed by more data) on the next call.
#[derive(Debug, Default, Clone)]
pub struct ReplyReader {
    stack: Vec<Frame>,
}

impl ReplyReader {
    /// A reader at a reply boundary.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when no reply is partially read (the reader is between replies).
    pub fn at_boundary(&self) -> bool {
        self.stack.is_empty()
    }

    /// Forgets any partial reply (used after a reconnect).
    pub fn reset(&mut self) {
        self.stack.clear();
    }

    /// Parses as many complete tokens of `buf` as possible, calling
    /// `on_reply` for every completed top-level reply. Returns the number of
    /// bytes consumed; the caller drops them from its buffer.
    pub fn feed(
        &mut self,
        buf: &[u8],
        mut on_reply: impl FnMut(Reply),
    ) -> Result<usize, ProtocolError> {
        let mut pos = 0;
        while pos < buf.len() {
            let Some(line_end) = find_crlf(&buf[pos..]) else {
                if buf.len() - pos > 64 * 1024 && !matches!(buf[pos], b'+' | b'-') {
                    return Err(ProtocolError("header line too long".into()));
                }
                break;
            };
            let kind = buf[pos];
            let line = &buf[pos + 1..pos + line_end];
            let after_line = pos + line_end + 2;
            match kind {
                b'+' => {
                    pos = after_line;
                    self.complete(Reply::Status, &mut on_reply);
                }
                b'-' => {
                    pos = after_line;
                    self.complete(Reply::Error(error_text(line)), &mut on_reply);
                }
                b':' => {
                    parse_int(line)?;
                    pos = after_line;
                    self.complete(Reply::Integer, &mut on_reply);
                }
                b'_' => {
                    pos = after_line;
                    self.complete(Reply::Nil, &mut on_reply);
                }
                b'#' | b',' | b'(' => {
                    pos = after_line;
                    self.complete(Reply::Scalar, &mut on_reply);
                }
                b'$' | b'=' | b'!' => {
                    let len = parse_int(line)?;
                    if len < 0 {
                        if kind != b'$' || len != -1 {
                            return Err(ProtocolError(format!("bad length {len}")));
                        }
                        pos = after_line;
                        self.complete(Reply::Nil, &mut on_reply);
                        continue;
                    }
                    let len = len as usize;
                    let end = after_line
                        .checked_add(len)
                        .and_then(|e| e.checked_add(2))
                        .ok_or_else(|| ProtocolError("length overflow".into()))?;
                    if end > buf.len() {
                        break; // payload not fully here yet
                    }
                    if &buf[end - 2..end] != b"\r\n" {
                        return Err(ProtocolError("bulk payload not followed by CRLF".into()));
                    }
                    let payload = &buf[after_line..end - 2];
                    pos = end;
                    let reply = match kind {
                        b'$' => Reply::Bulk,
                        b'=' => Reply::Scalar,
                        _ => Reply::Error(error_text(payload)),
                    };
                    self.complete(reply, &mut on_reply);
                }
                b'*' | b'~' | b'%' | b'>' | b'|' => {
                    let n = parse_int(line)?;
                    pos = after_line;
                    if n < 0 {
                        if kind != b'*' || n != -1 {
                            return Err(ProtocolError(format!("bad aggregate length {n}")));
                        }
                        self.complete(Reply::Nil, &mut on_reply);
                        continue;
                    }
                    let children = if matches!(kind, b'%' | b'|') {
                        (n as u64) * 2
                    } else {
                        n as u64
                    };
                    let role = match kind {
                        b'>' => Role::Push,
                        b'|' => Role::Attribute,
                        _ => Role::Value,
                    };
                    if children == 0 {
                        self.finish_aggregate(role, &mut on_reply);
                    } else {
                        self.stack.push(Frame {
                            remaining: children,
                            role,
                        });
                    }
                }
                other => {
                    return Err(ProtocolError(format!(
                        "unexpected type byte {:?}",
                        other as char
                    )))
                }
            }
        }
        Ok(pos)
    }

    /// An aggregate with all its children read.
    fn finish_aggregate(&mut self, role: Role, on_reply: &mut impl FnMut(Reply)) {
        match role {
            Role::Value => self.complete(Reply::Aggregate, on_reply),
            // A finished push is a value only when nested (Redis never nests
            // them, but count it so the parent stays consistent).
            Role::Push if !self.stack.is_empty() => self.complete(Reply::Aggregate, on_reply),
            Role::Push | Role::Attribute => {}
        }
    }

    /// A value was completed at the current nesting level.
    fn complete(&mut self, reply: Reply, on_reply: &mut impl FnMut(Reply)) {
        match self.stack.last_mut() {
            None => on_reply(reply),
            Some(frame) => {
                frame.remaining -= 1;
                if frame.remaining == 0 {
                    let done = self.stack.pop().expect("frame present");
                    self.finish_aggregate(done.role, on_reply);
                }
            }
        }
    }
}

/// Position of the first `\r\n` in `buf`.
fn find_crlf(buf: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = buf[from..].iter().position(|&b| b == b'\r') {
        let at = from + i;
        match buf.get(at + 1) {
            Some(b'\n') => return Some(at),
            Some(_) => from = at + 1,
            None => return None,
        }
    }
    None
}

/// Parses a signed decimal as found in RESP length and integer lines.
fn parse_int(line: &[u8]) -> Result<i64, ProtocolError> {
    let bad = || ProtocolError(format!("bad integer {:?}", String::from_utf8_lossy(line)));
    let (neg, digits) = match line.first() {
        Some(b'-') => (true, &line[1..]),
        Some(b'+') => (false, &line[1..]),
        _ => (false, line),
    };
    if digits.is_empty() || digits.len() > 19 {
        return Err(bad());
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(bad());
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(i64::from(d - b'0')))
            .ok_or_else(bad)?;
    }
    Ok(if neg { -v } else { v })
}

fn error_text(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(MAX_ERROR_LEN)];
    String::from_utf8_lossy(cut).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8]) -> (Vec<Reply>, usize) {
        let mut r = ReplyReader::new();
        let mut out = Vec::new();
        let used = r.feed(input, |x| out.push(x)).unwrap();
        (out, used)
    }

    /// Feeds `input` in chunks of `step` bytes, keeping unconsumed bytes as a
    /// real connection buffer would.
    fn chunked(input: &[u8], step: usize) -> Vec<Reply> {
        let mut r = ReplyReader::new();
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for chunk in input.chunks(step) {
            buf.extend_from_slice(chunk);
            let used = r.feed(&buf, |x| out.push(x)).unwrap();
            buf.drain(..used);
        }
        assert!(
            buf.is_empty(),
            "left over: {:?}",
            String::from_utf8_lossy(&buf)
        );
        assert!(r.at_boundary());
        out
    }

    const PIPELINE: &[u8] = b"+OK\r\n$3\r\nbar\r\n$-1\r\n:42\r\n-ERR unknown command 'FOO'\r\n\
*3\r\n$1\r\na\r\n*2\r\n:1\r\n*-1\r\n_\r\n*0\r\n*-1\r\n";

    fn expected() -> Vec<Reply> {
        vec![
            Reply::Status,
            Reply::Bulk,
            Reply::Nil,
            Reply::Integer,
            Reply::Error("ERR unknown command 'FOO'".into()),
            Reply::Aggregate,
            Reply::Aggregate,
            Reply::Nil,
        ]
    }

    #[test]
    fn pipelined_replies_are_counted_and_classified() {
        let (out, used) = all(PIPELINE);
        assert_eq!(used, PIPELINE.len());
        assert_eq!(out, expected());
    }

    #[test]
    fn any_split_point_gives_the_same_replies() {
        for step in 1..PIPELINE.len() {
            assert_eq!(chunked(PIPELINE, step), expected(), "step {step}");
        }
    }

    #[test]
    fn partial_bulk_is_not_consumed() {
        let mut r = ReplyReader::new();
        let mut n = 0;
        let used = r.feed(b"+OK\r\n$5\r\nhel", |_| n += 1).unwrap();
        assert_eq!((n, used), (1, 5));
        let used = r.feed(b"$5\r\nhello\r\n", |_| n += 1).unwrap();
        assert_eq!((n, used), (2, 11));
    }

    #[test]
    fn nested_array_completes_only_at_the_end() {
        let mut r = ReplyReader::new();
        let mut n = 0;
        // Outer array of 2: an array of 2 ints, then (missing) a bulk.
        let used = r.feed(b"*2\r\n*2\r\n:1\r\n:2\r\n", |_| n += 1).unwrap();
        assert_eq!(n, 0);
        assert_eq!(used, 16);
        assert!(!r.at_boundary());
        r.feed(b"$1\r\nx\r\n", |_| n += 1).unwrap();
        assert_eq!(n, 1);
        assert!(r.at_boundary());
    }

    #[test]
    fn error_inside_array_is_not_a_top_level_error() {
        let (out, _) = all(b"*2\r\n+OK\r\n-WRONGTYPE nope\r\n");
        assert_eq!(out, vec![Reply::Aggregate]);
    }

    #[test]
    fn resp3_types() {
        let input = b"%2\r\n+a\r\n:1\r\n+b\r\n#t\r\n,3.14\r\n(12345678901234567890\r\n\
=8\r\ntxt:abcd\r\n!9\r\nERR blob!\r\n~1\r\n_\r\n";
        let (out, used) = all(input);
        assert_eq!(used, input.len());
        assert_eq!(
            out,
            vec![
                Reply::Aggregate,
                Reply::Scalar,
                Reply::Scalar,
                Reply::Scalar,
                Reply::Error("ERR blob!".into()),
                Reply::Aggregate,
            ]
        );
    }

    #[test]
    fn push_and_attribute_are_not_replies() {
        let input = b">2\r\n+invalidate\r\n*1\r\n$1\r\nk\r\n|1\r\n+ttl\r\n:3\r\n+OK\r\n";
        let (out, used) = all(input);
        assert_eq!(used, input.len());
        assert_eq!(out, vec![Reply::Status]);
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        let mut r = ReplyReader::new();
        assert!(r.feed(b"hello\r\n", |_| {}).is_err());
        assert!(r.feed(b"$abc\r\n", |_| {}).is_err());
        assert!(r.feed(b"$3\r\nabcXY", |_| {}).is_err());
        assert!(r.feed(b"*-2\r\n", |_| {}).is_err());
    }

    #[test]
    fn long_error_messages_are_cut() {
        let mut msg = b"-ERR ".to_vec();
        msg.extend(std::iter::repeat_n(b'x', 1000));
        msg.extend_from_slice(b"\r\n");
        let (out, _) = all(&msg);
        match &out[0] {
            Reply::Error(m) => assert_eq!(m.len(), MAX_ERROR_LEN),
            other => panic!("{other:?}"),
        }
    }
}
