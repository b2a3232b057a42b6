//! Reply encoder: appends RESP2 or RESP3 values to a connection's output
//! buffer.
//!
//! Command implementations describe replies with protocol-neutral calls
//! (`map`, `double`, `null`, ...) and [`ReplyBuf`] picks the wire form for
//! the connection's negotiated protocol (`HELLO 2|3`), with the same RESP2
//! fallbacks Redis 7.0 uses.

use crate::number::{format_i64_into, format_u64_into, write_double, write_i64, write_u64};

/// The protocol version negotiated by the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Protocol {
    /// RESP2, the default for new connections.
    #[default]
    Resp2,
    /// RESP3, enabled by `HELLO 3`.
    Resp3,
}

/// A placeholder for an aggregate header whose length is only known after
/// its elements were written (Redis's "deferred length"), created by
/// [`ReplyBuf::deferred`] and filled by `ReplyBuf::fill_deferred_*`.
#[derive(Debug)]
#[must_use = "a deferred length must be filled in"]
pub struct DeferredLen {
    /// Logical position (see [`ReplyBuf::mark`]) where the header goes.
    at: usize,
}

/// Per-connection output buffer. Every method appends exactly one RESP
/// value (or an aggregate header) in the connection's protocol.
///
/// Bytes already written to the socket are dropped from the front with
/// [`ReplyBuf::consume`], which only advances an offset and compacts once
/// the dead prefix is larger than the live data, so partial writes never
/// cause quadratic copying.
#[derive(Debug, Clone)]
pub struct ReplyBuf {
    /// Storage; the pending bytes are `buf[start..]`.
    buf: Vec<u8>,
    /// Offset of the first unsent byte in `buf`.
    start: usize,
    /// Total bytes dropped from the front so far (by `consume`, `clear` and
    /// compaction bookkeeping), making marks stable across `consume`.
    dropped: usize,
    /// Wire protocol used for encoding.
    proto: Protocol,
}

impl Default for ReplyBuf {
    /// An empty RESP2 buffer.
    fn default() -> Self {
        ReplyBuf::new(Protocol::Resp2)
    }
}

impl ReplyBuf {
    /// Creates an empty buffer encoding with `proto`.
    pub fn new(proto: Protocol) -> Self {
        ReplyBuf {
            buf: Vec::new(),
            start: 0,
            dropped: 0,
            proto,
        }
    }

    /// The protocol replies are encoded in.
    #[inline]
    pub fn protocol(&self) -> Protocol {
        self.proto
    }

    /// Switches protocol (after `HELLO`); affects subsequent replies only.
    #[inline]
    pub fn set_protocol(&mut self, p: Protocol) {
        self.proto = p;
    }

    /// True when encoding RESP3.
    #[inline]
    fn resp3(&self) -> bool {
        self.proto == Protocol::Resp3
    }

    /// Appends `prefix`, the decimal `n` and CRLF: the common shape of every
    /// length header.
    #[inline]
    fn header(&mut self, prefix: u8, n: u64) {
        self.buf.push(prefix);
        write_u64(&mut self.buf, n);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// Appends `text` with `\r` and `\n` replaced by spaces, so a line-based
    /// reply can never break the protocol framing.
    fn push_line_sanitized(&mut self, text: &[u8]) {
        if memchr::memchr2(b'\r', b'\n', text).is_none() {
            self.buf.extend_from_slice(text);
        } else {
            self.buf.extend(
                text.iter()
                    .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
            );
        }
    }

    /// Status reply `+s\r\n` (`\r`/`\n` in `s` become spaces).
    pub fn simple(&mut self, s: &str) {
        self.buf.push(b'+');
        self.push_line_sanitized(s.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `+OK\r\n`.
    #[inline]
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// Error reply `-{msg}\r\n`. `msg` already starts with its code
    /// (`"ERR ..."`, `"WRONGTYPE ..."`); a leading `-` is tolerated and not
    /// doubled. `\r`/`\n` in `msg` become spaces, like Redis's
    /// `addReplyErrorLength` sanitisation.
    pub fn error(&mut self, msg: &str) {
        let msg = msg.strip_prefix('-').unwrap_or(msg);
        self.buf.push(b'-');
        self.push_line_sanitized(msg.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// Integer reply `:v\r\n`.
    #[inline]
    pub fn int(&mut self, v: i64) {
        self.buf.push(b':');
        write_i64(&mut self.buf, v);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// Bulk string `$len\r\n<b>\r\n`.
    #[inline]
    pub fn bulk(&mut self, b: &[u8]) {
        self.header(b'$', b.len() as u64);
        self.buf.extend_from_slice(b);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An integer rendered as a bulk string (e.g. `GET` of an integer-encoded
    /// value), formatted without allocating.
    pub fn bulk_int(&mut self, v: i64) {
        let mut tmp = [0u8; 20];
        let first = format_i64_into(v, &mut tmp);
        self.bulk(&tmp[first..]);
    }

    /// Null: RESP2 null bulk `$-1\r\n`, RESP3 `_\r\n`.
    #[inline]
    pub fn null(&mut self) {
        self.buf
            .extend_from_slice(if self.resp3() { b"_\r\n" } else { b"$-1\r\n" });
    }

    /// Null aggregate: RESP2 null array `*-1\r\n`, RESP3 `_\r\n`.
    #[inline]
    pub fn null_array(&mut self) {
        self.buf
            .extend_from_slice(if self.resp3() { b"_\r\n" } else { b"*-1\r\n" });
    }

    /// Array header `*n\r\n`; `n` elements must follow.
    #[inline]
    pub fn array(&mut self, n: usize) {
        self.header(b'*', n as u64);
    }

    /// Map header of `n` key/value pairs: RESP3 `%n`, RESP2 a flat array of
    /// `2n` elements. `2n` elements must follow.
    #[inline]
    pub fn map(&mut self, n: usize) {
        if self.resp3() {
            self.header(b'%', n as u64);
        } else {
            self.header(b'*', (n as u64).saturating_mul(2));
        }
    }

    /// Set header: RESP3 `~n`, RESP2 `*n`.
    #[inline]
    pub fn set(&mut self, n: usize) {
        self.header(if self.resp3() { b'~' } else { b'*' }, n as u64);
    }

    /// Out-of-band push header (pub/sub messages, invalidations): RESP3
    /// RESP3 attribute header `|n` (n key-value pairs describing the reply
    /// that follows); RESP2 has no attributes, so nothing is written.
    pub fn attribute(&mut self, n: usize) {
        if self.resp3() {
            self.header(b'|', n as u64);
        }
    }

    /// `>n`, RESP2 `*n`.
    #[inline]
    pub fn push(&mut self, n: usize) {
        self.header(if self.resp3() { b'>' } else { b'*' }, n as u64);
    }

    /// Double: RESP3 `,<repr>\r\n`, RESP2 a bulk string of `<repr>`, where
    /// `<repr>` is Redis 7.0's (`inf`, `-inf`, `nan`, otherwise `%.17g`).
    pub fn double(&mut self, d: f64) {
        if self.resp3() {
            self.buf.push(b',');
            write_double(&mut self.buf, d);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            // Write the text first, then rotate the (tiny) length header in
            // front of it: no temporary allocation.
            let at = self.buf.len();
            write_double(&mut self.buf, d);
            let n = self.buf.len() - at;
            let mut hdr = [0u8; 24];
            let hlen = encode_header(b'$', n as u64, &mut hdr);
            self.buf.extend_from_slice(&hdr[..hlen]);
            self.buf[at..].rotate_right(hlen);
            self.buf.extend_from_slice(b"\r\n");
        }
    }

    /// Boolean: RESP3 `#t` / `#f`, RESP2 the integers `1` / `0`.
    #[inline]
    pub fn boolean(&mut self, b: bool) {
        if self.resp3() {
            self.buf
                .extend_from_slice(if b { b"#t\r\n" } else { b"#f\r\n" });
        } else {
            self.buf
                .extend_from_slice(if b { b":1\r\n" } else { b":0\r\n" });
        }
    }

    /// Verbatim string (e.g. `INFO`, `LATENCY DOCTOR`): RESP3
    /// `=<len>\r\n<fmt>:<text>\r\n`, RESP2 a plain bulk string of `text`.
    /// `format` is the 3-character type (`"txt"`, `"mkd"`); other lengths
    /// are truncated or padded with spaces to 3 bytes to keep framing valid.
    pub fn verbatim(&mut self, format: &str, text: &[u8]) {
        if !self.resp3() {
            self.bulk(text);
            return;
        }
        let mut fmt = [b' '; 3];
        for (dst, &src) in fmt.iter_mut().zip(format.as_bytes()) {
            *dst = src;
        }
        self.header(b'=', text.len() as u64 + 4);
        self.buf.extend_from_slice(&fmt);
        self.buf.push(b':');
        self.buf.extend_from_slice(text);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// Big number: RESP3 `(<digits>\r\n`, RESP2 a bulk string of `digits`.
    pub fn big_number(&mut self, digits: &str) {
        if self.resp3() {
            self.buf.push(b'(');
            self.push_line_sanitized(digits.as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(digits.as_bytes());
        }
    }

    /// Appends pre-encoded protocol bytes verbatim (shared replies, proxied
    /// data). The caller is responsible for their validity.
    #[inline]
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Reserves space for an aggregate header whose element count is not
    /// known yet; write the elements, then call one of
    /// `fill_deferred_array` / `fill_deferred_map` / `fill_deferred_set`.
    /// Filling inserts the header in place, costing a copy of the elements
    /// written after it (so prefer known lengths on hot paths).
    pub fn deferred(&mut self) -> DeferredLen {
        DeferredLen { at: self.mark() }
    }

    /// Completes `d` as an array header of `n` elements.
    pub fn fill_deferred_array(&mut self, d: DeferredLen, n: usize) {
        self.insert_header(d, b'*', n as u64);
    }

    /// Completes `d` as a map header of `n` pairs (RESP2: array of `2n`).
    pub fn fill_deferred_map(&mut self, d: DeferredLen, n: usize) {
        if self.resp3() {
            self.insert_header(d, b'%', n as u64);
        } else {
            self.insert_header(d, b'*', (n as u64).saturating_mul(2));
        }
    }

    /// Completes `d` as a set header of `n` elements (RESP2: array).
    pub fn fill_deferred_set(&mut self, d: DeferredLen, n: usize) {
        let prefix = if self.resp3() { b'~' } else { b'*' };
        self.insert_header(d, prefix, n as u64);
    }

    /// Inserts an encoded header at the deferred position (clamped to the
    /// pending region if that position was already consumed or truncated).
    fn insert_header(&mut self, d: DeferredLen, prefix: u8, n: u64) {
        let mut hdr = [0u8; 24];
        let hlen = encode_header(prefix, n, &mut hdr);
        let idx = self.start + self.logical_to_len(d.at);
        self.buf.splice(idx..idx, hdr[..hlen].iter().copied());
    }

    /// Number of pending (unsent) bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    /// True when nothing is pending.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pending bytes, to hand to the socket.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Drops `n` bytes from the front after they were written to the socket
    /// (`n` larger than `len()` drops everything). Amortised O(1) per byte:
    /// the storage is compacted only when the dead prefix exceeds the live
    /// data.
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.len());
        self.start += n;
        self.dropped = self.dropped.wrapping_add(n);
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > self.buf.len() - self.start {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }

    /// Discards all pending bytes (keeps the allocation).
    pub fn clear(&mut self) {
        let pending = self.len();
        self.consume(pending);
    }

    /// A position marking the current end of the buffer, for rolling back a
    /// partially written reply with [`ReplyBuf::truncate`]. Marks stay valid
    /// across `consume`.
    #[inline]
    pub fn mark(&self) -> usize {
        self.dropped.wrapping_add(self.len())
    }

    /// Removes everything appended after `mark` (no-op if nothing was).
    /// If part of that region was already consumed, only the pending part
    /// is removed.
    pub fn truncate(&mut self, mark: usize) {
        let keep = self.logical_to_len(mark);
        self.buf.truncate(self.start + keep);
    }

    /// Converts a logical position to a count of pending bytes before it,
    /// clamped to `0..=len()`.
    fn logical_to_len(&self, logical: usize) -> usize {
        let rel = logical.wrapping_sub(self.dropped);
        // A position before the consumed prefix wraps to a huge value.
        if rel > isize::MAX as usize {
            0
        } else {
            rel.min(self.len())
        }
    }

    /// Reserves capacity for at least `additional` more bytes.
    pub fn reserve(&mut self, additional: usize) {
        self.buf.reserve(additional);
    }

    /// Allocated capacity in bytes (for client memory accounting, like
    /// Redis's `omem`).
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Releases memory beyond what the pending bytes need (after a large
    /// reply was flushed), keeping at most `keep` bytes of slack.
    pub fn shrink_to(&mut self, keep: usize) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let target = self.buf.len().saturating_add(keep);
        if self.buf.capacity() > target {
            self.buf.shrink_to(target);
        }
    }
}

/// Encodes `<prefix><n>\r\n` into `out` and returns its length (at most
/// 1 + 20 + 2 bytes).
fn encode_header(prefix: u8, n: u64, out: &mut [u8; 24]) -> usize {
    let mut digits = [0u8; 20];
    let first = format_u64_into(n, &mut digits);
    let dl = 20 - first;
    out[0] = prefix;
    out[1..1 + dl].copy_from_slice(&digits[first..]);
    out[1 + dl] = b'\r';
    out[2 + dl] = b'\n';
    dl + 3
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes with `f` in both protocols, returning (RESP2, RESP3) output.
    fn both(f: impl Fn(&mut ReplyBuf)) -> (String, String) {
        let mut r2 = ReplyBuf::new(Protocol::Resp2);
        let mut r3 = ReplyBuf::new(Protocol::Resp3);
        f(&mut r2);
        f(&mut r3);
        (
            String::from_utf8_lossy(r2.as_bytes()).into_owned(),
            String::from_utf8_lossy(r3.as_bytes()).into_owned(),
        )
    }

    fn same(f: impl Fn(&mut ReplyBuf), want: &str) {
        assert_eq!(both(f), (want.to_owned(), want.to_owned()));
    }

    #[test]
    fn simple_and_ok() {
        same(|r| r.simple("PONG"), "+PONG\r\n");
        same(|r| r.simple("a\r\nb\nc"), "+a  b c\r\n");
        same(|r| r.simple(""), "+\r\n");
        same(|r| r.ok(), "+OK\r\n");
    }

    #[test]
    fn errors() {
        same(
            |r| r.error("ERR unknown command"),
            "-ERR unknown command\r\n",
        );
        same(
            |r| r.error("WRONGTYPE Operation against a key"),
            "-WRONGTYPE Operation against a key\r\n",
        );
        same(|r| r.error("ERR bad\r\nthing"), "-ERR bad  thing\r\n");
        same(|r| r.error("-ERR x"), "-ERR x\r\n");
    }

    #[test]
    fn integers() {
        same(|r| r.int(0), ":0\r\n");
        same(|r| r.int(-42), ":-42\r\n");
        same(|r| r.int(i64::MAX), ":9223372036854775807\r\n");
        same(|r| r.int(i64::MIN), ":-9223372036854775808\r\n");
    }

    #[test]
    fn bulks() {
        same(|r| r.bulk(b"hello"), "$5\r\nhello\r\n");
        same(|r| r.bulk(b""), "$0\r\n\r\n");
        same(|r| r.bulk(b"a\r\nb"), "$4\r\na\r\nb\r\n");
        same(|r| r.bulk_int(0), "$1\r\n0\r\n");
        same(|r| r.bulk_int(-123), "$4\r\n-123\r\n");
        same(|r| r.bulk_int(i64::MIN), "$20\r\n-9223372036854775808\r\n");
        same(|r| r.bulk_int(i64::MAX), "$19\r\n9223372036854775807\r\n");
    }

    #[test]
    fn nulls() {
        assert_eq!(both(|r| r.null()), ("$-1\r\n".into(), "_\r\n".into()));
        assert_eq!(both(|r| r.null_array()), ("*-1\r\n".into(), "_\r\n".into()));
    }

    #[test]
    fn aggregates() {
        same(|r| r.array(0), "*0\r\n");
        same(|r| r.array(12), "*12\r\n");
        assert_eq!(both(|r| r.map(2)), ("*4\r\n".into(), "%2\r\n".into()));
        assert_eq!(both(|r| r.map(0)), ("*0\r\n".into(), "%0\r\n".into()));
        assert_eq!(both(|r| r.set(3)), ("*3\r\n".into(), "~3\r\n".into()));
        assert_eq!(both(|r| r.push(3)), ("*3\r\n".into(), ">3\r\n".into()));
    }

    #[test]
    fn doubles() {
        assert_eq!(
            both(|r| r.double(1.5)),
            ("$3\r\n1.5\r\n".into(), ",1.5\r\n".into())
        );
        assert_eq!(
            both(|r| r.double(1.1)),
            (
                "$18\r\n1.1000000000000001\r\n".into(),
                ",1.1000000000000001\r\n".into()
            )
        );
        assert_eq!(
            both(|r| r.double(3.0)),
            ("$1\r\n3\r\n".into(), ",3\r\n".into())
        );
        assert_eq!(
            both(|r| r.double(f64::INFINITY)),
            ("$3\r\ninf\r\n".into(), ",inf\r\n".into())
        );
        assert_eq!(
            both(|r| r.double(f64::NEG_INFINITY)),
            ("$4\r\n-inf\r\n".into(), ",-inf\r\n".into())
        );
        assert_eq!(
            both(|r| r.double(f64::NAN)),
            ("$3\r\nnan\r\n".into(), ",nan\r\n".into())
        );
        assert_eq!(
            both(|r| r.double(1e20)),
            ("$5\r\n1e+20\r\n".into(), ",1e+20\r\n".into())
        );
        // A double after existing content keeps that content intact.
        let mut r = ReplyBuf::new(Protocol::Resp2);
        r.int(1);
        r.double(-0.25);
        assert_eq!(r.as_bytes(), b":1\r\n$5\r\n-0.25\r\n");
    }

    #[test]
    fn booleans() {
        assert_eq!(
            both(|r| r.boolean(true)),
            (":1\r\n".into(), "#t\r\n".into())
        );
        assert_eq!(
            both(|r| r.boolean(false)),
            (":0\r\n".into(), "#f\r\n".into())
        );
    }

    #[test]
    fn verbatim_strings() {
        assert_eq!(
            both(|r| r.verbatim("txt", b"Some string")),
            (
                "$11\r\nSome string\r\n".into(),
                "=15\r\ntxt:Some string\r\n".into()
            )
        );
        assert_eq!(
            both(|r| r.verbatim("mkd", b"")),
            ("$0\r\n\r\n".into(), "=4\r\nmkd:\r\n".into())
        );
        assert_eq!(both(|r| r.verbatim("markdown", b"x")).1, "=5\r\nmar:x\r\n");
        assert_eq!(both(|r| r.verbatim("t", b"x")).1, "=5\r\nt  :x\r\n");
    }

    #[test]
    fn big_numbers() {
        assert_eq!(
            both(|r| r.big_number("3492890328409238509324850943850943825024385")),
            (
                "$43\r\n3492890328409238509324850943850943825024385\r\n".into(),
                "(3492890328409238509324850943850943825024385\r\n".into()
            )
        );
        assert_eq!(
            both(|r| r.big_number("-1")),
            ("$2\r\n-1\r\n".into(), "(-1\r\n".into())
        );
    }

    #[test]
    fn raw_bytes() {
        same(|r| r.raw(b"+QUEUED\r\n"), "+QUEUED\r\n");
    }

    #[test]
    fn protocol_switching() {
        let mut r = ReplyBuf::default();
        assert_eq!(r.protocol(), Protocol::Resp2);
        r.null();
        r.set_protocol(Protocol::Resp3);
        assert_eq!(r.protocol(), Protocol::Resp3);
        r.null();
        assert_eq!(r.as_bytes(), b"$-1\r\n_\r\n");
    }

    #[test]
    fn consume_len_and_clear() {
        let mut r = ReplyBuf::new(Protocol::Resp2);
        assert!(r.is_empty());
        r.bulk(b"hello");
        r.int(7);
        assert_eq!(r.len(), 15);
        r.consume(4);
        assert_eq!(r.as_bytes(), b"hello\r\n:7\r\n");
        r.consume(7);
        assert_eq!(r.as_bytes(), b":7\r\n");
        r.ok();
        assert_eq!(r.as_bytes(), b":7\r\n+OK\r\n");
        r.consume(100);
        assert!(r.is_empty());
        assert_eq!(r.len(), 0);
        r.ok();
        r.clear();
        assert!(r.is_empty());
        assert_eq!(r.as_bytes(), b"");
    }

    #[test]
    fn consume_is_not_quadratic() {
        // Byte-at-a-time consumption of a large buffer must not shift the
        // whole buffer each time: count the work through capacity checks by
        // simply making it big enough that quadratic would time out.
        let mut r = ReplyBuf::new(Protocol::Resp2);
        let payload = vec![b'x'; 1 << 20];
        r.bulk(&payload);
        let total = r.len();
        let mut seen = 0;
        while !r.is_empty() {
            let n = r.len().min(7);
            seen += n;
            r.consume(n);
            if seen % 100_000 < 7 {
                r.int(1);
            }
        }
        assert!(seen >= total);
        // Compaction kept the dead prefix no larger than the live data.
        r.bulk(b"abc");
        r.consume(1);
        assert!(r.start <= r.buf.len() - r.start || r.start == 0);
    }

    #[test]
    fn mark_and_truncate() {
        let mut r = ReplyBuf::new(Protocol::Resp2);
        r.int(1);
        let m = r.mark();
        r.array(2);
        r.bulk(b"a");
        r.truncate(m);
        assert_eq!(r.as_bytes(), b":1\r\n");
        r.truncate(m);
        assert_eq!(r.as_bytes(), b":1\r\n");
        // Marks survive consumption of earlier bytes.
        let m2 = r.mark();
        r.bulk(b"xyz");
        r.consume(2);
        r.truncate(m2);
        assert_eq!(r.as_bytes(), b"\r\n");
        // A mark inside the consumed region drops only pending bytes.
        r.ok();
        r.consume(4);
        r.truncate(m);
        assert!(r.is_empty());
    }

    #[test]
    fn deferred_lengths() {
        let (r2, r3) = both(|r| {
            r.int(0);
            let d = r.deferred();
            r.bulk(b"k");
            r.int(1);
            r.fill_deferred_map(d, 1);
            let d = r.deferred();
            r.fill_deferred_array(d, 0);
            let d = r.deferred();
            r.bulk(b"m");
            r.fill_deferred_set(d, 1);
        });
        assert_eq!(r2, ":0\r\n*2\r\n$1\r\nk\r\n:1\r\n*0\r\n*1\r\n$1\r\nm\r\n");
        assert_eq!(r3, ":0\r\n%1\r\n$1\r\nk\r\n:1\r\n*0\r\n~1\r\n$1\r\nm\r\n");
        // Works after a consume that compacted the buffer.
        let mut r = ReplyBuf::new(Protocol::Resp2);
        r.bulk(b"0123456789");
        let d = r.deferred();
        r.consume(17);
        r.int(5);
        r.fill_deferred_array(d, 1);
        assert_eq!(r.as_bytes(), b"*1\r\n:5\r\n");
    }

    #[test]
    fn capacity_management() {
        let mut r = ReplyBuf::new(Protocol::Resp2);
        r.reserve(1000);
        assert!(r.capacity() >= 1000);
        r.bulk(&[b'a'; 500]);
        r.consume(400);
        r.shrink_to(0);
        assert_eq!(r.len(), 108);
        assert!(r.capacity() >= 108);
        assert_eq!(&r.as_bytes()[r.len() - 2..], b"\r\n");
    }
}
