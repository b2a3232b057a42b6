//! Resumable RESP request parser (inline and multibulk forms).
//!
//! The behaviour mirrors Redis 7.0's `processInlineBuffer` and
//! `processMultibulkBuffer` in `networking.c`, including its error messages
//! and a few of its leniencies (see [`Parser::parse`]), because clients and
//! test suites depend on them. The parser never performs I/O: the caller owns
//! the connection buffer and feeds its unconsumed prefix to
//! [`Parser::parse`].

use memchr::memchr;

use crate::args::Args;
use crate::number::{hex_value, is_c_space, parse_i64};

/// Size limits checked before any declared length is trusted, mirroring the
/// corresponding Redis configuration. They protect the server from clients
/// that announce huge sizes to make it reserve memory or buffer forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseLimits {
    /// Largest accepted bulk argument (`proto-max-bulk-len`), default 512 MiB.
    pub max_bulk_len: usize,
    /// Largest accepted multibulk argument count, default 1024*1024.
    pub max_multibulk_len: usize,
    /// Longest inline request or length line buffered without a terminator
    /// before the client is rejected (`PROTO_INLINE_MAX_SIZE`), default 64 KiB.
    pub max_inline_len: usize,
}

impl Default for ParseLimits {
    /// Redis 7.0's defaults.
    fn default() -> Self {
        ParseLimits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: 1024 * 1024,
            max_inline_len: 64 * 1024,
        }
    }
}

/// A protocol violation. The server replies `-ERR {message}\r\n` and closes
/// the connection, as Redis does; `message` already starts with
/// `"Protocol error: "`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError {
    /// Human readable description, e.g. `"Protocol error: invalid bulk length"`.
    pub message: String,
}

impl ProtocolError {
    /// Builds an error from a static message.
    fn new(message: &str) -> Self {
        ProtocolError {
            message: message.to_owned(),
        }
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ProtocolError {}

/// Multibulk count above which an unauthenticated client is rejected
/// (Redis 7.0 hardening against memory abuse before `AUTH`).
const UNAUTH_MAX_MULTIBULK: i64 = 10;
/// Bulk length above which an unauthenticated client is rejected.
const UNAUTH_MAX_BULK: i64 = 16384;

/// What the parser is in the middle of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// No command started: the next byte decides inline vs multibulk.
    Idle,
    /// Inline request; the newline has not been seen yet.
    Inline,
    /// Multibulk request; the `*<n>` header has not been parsed yet.
    MultibulkHeader,
    /// Multibulk request; reading arguments.
    MultibulkArgs,
}

/// Argument ranges kept between commands (16 KiB); more is freed when the
/// parser goes idle.
const KEEP_RANGES: usize = 1024;
/// Inline argument bytes kept between commands.
const KEEP_SCRATCH: usize = 64 * 1024;

/// Resumable command parser; keep one per connection.
///
/// All progress on a partially received command (position, arguments found,
/// pending bulk length, how far a terminator search got) is kept between
/// calls, so feeding a command in many small pieces costs time linear in its
/// size. Argument ranges are stored in a reused vector: steady-state parsing
/// does not allocate.
#[derive(Debug, Clone)]
pub struct Parser {
    /// Current phase.
    state: State,
    /// Offset (from the start of the command) of the next unparsed byte.
    pos: usize,
    /// Offset from which to resume searching for a line terminator; bytes in
    /// `pos..scan` are known not to contain it.
    scan: usize,
    /// Multibulk arguments still to read.
    remaining: usize,
    /// Declared length of the bulk argument being read, if its header was
    /// already parsed.
    bulk_len: Option<usize>,
    /// Buffer length seen by the last `parse` call (for `bytes_wanted`).
    last_len: usize,
    /// Argument ranges of the current/last command, into the input buffer
    /// (multibulk) or into `scratch` (inline).
    ranges: Vec<(usize, usize)>,
    /// Unescaped inline arguments.
    scratch: Vec<u8>,
    /// Whether `ranges` refer to `scratch` (inline) or the input buffer.
    inline_args: bool,
    /// Whether the Redis limits for unauthenticated clients apply.
    unauthenticated: bool,
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new()
    }
}

impl Parser {
    /// Creates an idle parser.
    pub fn new() -> Self {
        Parser {
            state: State::Idle,
            pos: 0,
            scan: 0,
            remaining: 0,
            bulk_len: None,
            last_len: 0,
            ranges: Vec::new(),
            scratch: Vec::new(),
            inline_args: false,
            unauthenticated: false,
        }
    }

    /// Enables Redis's extra limits for clients that still have to
    /// authenticate: a multibulk count above 10 fails with
    /// `"Protocol error: unauthenticated multibulk length"` and a bulk length
    /// above 16384 with `"Protocol error: unauthenticated bulk length"`.
    /// Off by default; the server turns it on while `AUTH` is required and
    /// not yet done.
    pub fn set_unauthenticated(&mut self, on: bool) {
        self.unauthenticated = on;
    }

    /// Parses one command from the front of `buf`, the connection's
    /// unconsumed input.
    ///
    /// * `Ok(Some(n))`: a complete command occupies `buf[..n]`; its arguments
    ///   are available through [`Parser::args`] (with the same `buf`) until
    ///   the next `parse` call. A command may have zero arguments (empty
    ///   inline line, `*0\r\n`, `*-1\r\n`); the caller just skips it.
    /// * `Ok(None)`: more input is needed. Progress is kept, and the next
    ///   call must be given a buffer starting at the same byte (usually the
    ///   same buffer, extended).
    /// * `Err(e)`: protocol error; the caller replies and closes.
    ///
    /// After `Some` or `Err` the parser is ready for the next command.
    ///
    /// Redis quirks reproduced on purpose: the byte following the `\r` of a
    /// length line and the two bytes following a bulk payload are skipped
    /// without checking that they are `\n` / `\r\n`; "too big" errors are
    /// reported only when no terminator is buffered at all. Differences:
    /// line terminators are found with `memchr`, so a NUL byte does not hide
    /// a later terminator as it does for Redis's `strchr` (Redis would stall
    /// until the too-big limit); inside an inline line a NUL still ends the
    /// argument list, as in Redis's C-string splitting.
    pub fn parse(
        &mut self,
        buf: &[u8],
        limits: &ParseLimits,
    ) -> Result<Option<usize>, ProtocolError> {
        self.last_len = buf.len();
        if self.state == State::Idle {
            let Some(&first) = buf.first() else {
                return Ok(None);
            };
            self.ranges.clear();
            self.scratch.clear();
            self.pos = 0;
            self.scan = 0;
            self.bulk_len = None;
            self.remaining = 0;
            if first == b'*' {
                self.inline_args = false;
                self.state = State::MultibulkHeader;
            } else {
                self.inline_args = true;
                self.state = State::Inline;
            }
        }
        let result = match self.state {
            State::Inline => self.parse_inline(buf, limits),
            _ => self.parse_multibulk(buf, limits),
        };
        match result {
            Ok(None) => {}
            Ok(Some(_)) => self.finish(),
            Err(_) => {
                self.finish();
                self.ranges.clear();
                self.scratch.clear();
            }
        }
        result
    }

    /// Returns the state to idle after a command completed or failed,
    /// keeping the argument ranges readable.
    fn finish(&mut self) {
        self.state = State::Idle;
        self.pos = 0;
        self.scan = 0;
        self.bulk_len = None;
        self.remaining = 0;
    }

    /// Arguments of the command most recently completed by
    /// [`Parser::parse`]; `buf` must be the buffer given to that call. Valid
    /// until the next `parse` call.
    pub fn args<'a>(&'a self, buf: &'a [u8]) -> Args<'a> {
        let base: &'a [u8] = if self.inline_args { &self.scratch } else { buf };
        Args::new(base, &self.ranges)
    }

    /// While a large bulk argument is being received, the minimum number of
    /// additional bytes (beyond the buffer last passed to `parse`) the
    /// current command needs, so the caller can reserve a bounded amount of
    /// memory backed by a length that passed the limits. 0 if unknown.
    pub fn bytes_wanted(&self) -> usize {
        match (self.state, self.bulk_len) {
            (State::MultibulkArgs, Some(len)) => self
                .pos
                .saturating_add(len)
                .saturating_add(2)
                .saturating_sub(self.last_len),
            _ => 0,
        }
    }

    /// Gives back the memory of a big command's argument list once the
    /// parser is between commands, as Redis frees a big `argv`: a client
    /// that once sent 100,000 arguments and then went quiet does not keep
    /// room for them. Call when the input is drained; a partly parsed
    /// command keeps its arguments.
    pub fn shrink_if_idle(&mut self) {
        if self.state != State::Idle {
            return;
        }
        if self.ranges.capacity() > KEEP_RANGES {
            self.ranges = Vec::new();
        }
        if self.scratch.capacity() > KEEP_SCRATCH {
            self.scratch = Vec::new();
        }
    }

    /// Frees the argument buffers entirely when no command is in progress
    /// (a connection gone idle; they are allocated again with its next
    /// command).
    pub fn release_if_idle(&mut self) {
        if self.state == State::Idle {
            self.ranges = Vec::new();
            self.scratch = Vec::new();
        }
    }

    /// Bytes the parser holds for arguments (a client's `argv-mem`).
    pub fn memory(&self) -> usize {
        self.ranges.capacity() * std::mem::size_of::<(usize, usize)>() + self.scratch.capacity()
    }

    /// Abandons any partially parsed command (e.g. when the connection's
    /// buffer is discarded).
    pub fn reset(&mut self) {
        self.finish();
        self.ranges.clear();
        self.scratch.clear();
        self.inline_args = false;
        self.last_len = 0;
    }

    /// Inline request: everything up to `\n` (minus a preceding `\r`), split
    /// like Redis's `sdssplitargs`.
    fn parse_inline(
        &mut self,
        buf: &[u8],
        limits: &ParseLimits,
    ) -> Result<Option<usize>, ProtocolError> {
        let from = self.scan.min(buf.len());
        let Some(off) = memchr(b'\n', &buf[from..]) else {
            self.scan = buf.len();
            if buf.len() > limits.max_inline_len {
                return Err(ProtocolError::new("Protocol error: too big inline request"));
            }
            return Ok(None);
        };
        let newline = from + off;
        let mut line = &buf[..newline];
        if let Some((&b'\r', rest)) = line.split_last() {
            line = rest;
        }
        if !split_args(line, &mut self.scratch, &mut self.ranges) {
            return Err(ProtocolError::new(
                "Protocol error: unbalanced quotes in request",
            ));
        }
        Ok(Some(newline + 1))
    }

    /// Multibulk request: `*<n>\r\n` followed by `n` times `$<len>\r\n<bytes>\r\n`.
    fn parse_multibulk(
        &mut self,
        buf: &[u8],
        limits: &ParseLimits,
    ) -> Result<Option<usize>, ProtocolError> {
        if self.state == State::MultibulkHeader {
            let Some((count, next)) =
                self.read_len_line(buf, limits, "Protocol error: too big mbulk count string")?
            else {
                return Ok(None);
            };
            let count = match count {
                Some(c) if c <= 0 || c as u64 <= limits.max_multibulk_len as u64 => c,
                _ => {
                    return Err(ProtocolError::new(
                        "Protocol error: invalid multibulk length",
                    ))
                }
            };
            if self.unauthenticated && count > UNAUTH_MAX_MULTIBULK {
                return Err(ProtocolError::new(
                    "Protocol error: unauthenticated multibulk length",
                ));
            }
            self.pos = next;
            self.scan = next;
            if count <= 0 {
                return Ok(Some(next));
            }
            self.remaining = count as usize;
            // Bounded reservation, like Redis's min(count, 1024) argv.
            self.ranges.reserve(self.remaining.min(1024));
            self.state = State::MultibulkArgs;
        }
        if self.bulk_len.is_none() {
            self.fast_args(buf, limits);
        }
        while self.remaining > 0 {
            let len = match self.bulk_len {
                Some(len) => len,
                None => {
                    let Some(len) = self.read_bulk_header(buf, limits)? else {
                        return Ok(None);
                    };
                    len
                }
            };
            let available = buf.len().saturating_sub(self.pos);
            if available < len.saturating_add(2) {
                self.bulk_len = Some(len);
                return Ok(None);
            }
            let start = self.pos;
            self.ranges.push((start, start + len));
            // Like Redis, the two bytes after the payload are not checked.
            self.pos = start + len + 2;
            self.scan = self.pos;
            self.bulk_len = None;
            self.remaining -= 1;
        }
        Ok(Some(self.pos))
    }

    /// Hot loop for well-formed arguments that are fully buffered: parses
    /// `$<len>\r\n<bytes>\r\n` with local state and stops at the first
    /// argument needing the general path (incomplete, malformed, over a
    /// limit), which then reproduces Redis's exact behaviour.
    #[inline]
    fn fast_args(&mut self, buf: &[u8], limits: &ParseLimits) {
        let mut pos = self.pos;
        let mut remaining = self.remaining;
        let max_len = if self.unauthenticated {
            limits.max_bulk_len.min(UNAUTH_MAX_BULK as usize)
        } else {
            limits.max_bulk_len
        };
        while remaining > 0 {
            if buf.get(pos) != Some(&b'$') {
                break;
            }
            let Some((Some(v), start)) = fast_len_line(buf, pos) else {
                break;
            };
            // The fast path only yields non-negative values.
            let len = v as usize;
            if len > max_len || buf.len() - start < len + 2 {
                break;
            }
            self.ranges.push((start, start + len));
            pos = start + len + 2;
            remaining -= 1;
        }
        if pos != self.pos {
            self.pos = pos;
            self.scan = pos;
            self.remaining = remaining;
        }
    }

    /// Reads a `$<len>` line at `self.pos`; returns the validated length
    /// (and advances past the line) or `None` if incomplete.
    fn read_bulk_header(
        &mut self,
        buf: &[u8],
        limits: &ParseLimits,
    ) -> Result<Option<usize>, ProtocolError> {
        let Some((value, next)) =
            self.read_len_line(buf, limits, "Protocol error: too big bulk count string")?
        else {
            return Ok(None);
        };
        let marker = buf.get(self.pos).copied().unwrap_or(b'$');
        if marker != b'$' {
            return Err(ProtocolError {
                message: format!("Protocol error: expected '$', got '{}'", marker as char),
            });
        }
        let len = match value {
            Some(v) if v >= 0 && (v as u64) <= limits.max_bulk_len as u64 => v,
            _ => return Err(ProtocolError::new("Protocol error: invalid bulk length")),
        };
        if self.unauthenticated && len > UNAUTH_MAX_BULK {
            return Err(ProtocolError::new(
                "Protocol error: unauthenticated bulk length",
            ));
        }
        self.pos = next;
        self.scan = next;
        Ok(Some(len as usize))
    }

    /// Finds the length line starting at `self.pos` (one type byte, then the
    /// integer, then `\r` and one more byte) and parses its integer.
    ///
    /// Returns `Ok(None)` if the line is incomplete, an error if no `\r` is
    /// buffered and more than `max_inline_len` bytes are (`too_big`), and
    /// otherwise the parsed integer (`None` if not a valid `string2ll`
    /// integer) with the offset just past the line. The type byte is not
    /// checked here.
    #[inline]
    fn read_len_line(
        &mut self,
        buf: &[u8],
        limits: &ParseLimits,
        too_big: &str,
    ) -> Result<Option<(Option<i64>, usize)>, ProtocolError> {
        if let Some(hit) = fast_len_line(buf, self.pos) {
            return Ok(Some(hit));
        }
        self.read_len_line_slow(buf, limits, too_big)
    }

    /// General, Redis-exact version of [`Parser::read_len_line`]: search
    /// for the first `\r` (resuming where the previous call stopped).
    #[inline(never)]
    fn read_len_line_slow(
        &mut self,
        buf: &[u8],
        limits: &ParseLimits,
        too_big: &str,
    ) -> Result<Option<(Option<i64>, usize)>, ProtocolError> {
        let start = self.pos;
        let from = self.scan.max(start).min(buf.len());
        let Some(off) = memchr(b'\r', &buf[from..]) else {
            self.scan = buf.len();
            if buf.len().saturating_sub(start) > limits.max_inline_len {
                return Err(ProtocolError::new(too_big));
            }
            return Ok(None);
        };
        let cr = from + off;
        // The byte after '\r' must be buffered too (it is not inspected).
        if cr + 1 >= buf.len() {
            self.scan = cr;
            return Ok(None);
        }
        let digits = buf.get(start + 1..cr).unwrap_or(&[]);
        Ok(Some((parse_i64(digits), cr + 2)))
    }
}

/// Fast path for the overwhelmingly common well-formed length line: a type
/// byte, 1 to 18 digits without a leading zero (or a lone `0`), `\r`, and
/// one more byte. Returns the value and the offset after the line, or `None`
/// to let the general (Redis-exact) path decide.
#[inline(always)]
pub(crate) fn fast_len_line(buf: &[u8], start: usize) -> Option<(Option<i64>, usize)> {
    let rest = buf.get(start + 1..)?;
    let first = *rest.first()?;
    if first == b'0' {
        return if rest.len() >= 3 && rest[1] == b'\r' {
            Some((Some(0), start + 4))
        } else {
            None
        };
    }
    if !(b'1'..=b'9').contains(&first) {
        return None;
    }
    let mut v = i64::from(first - b'0');
    let mut i = 1;
    while i < rest.len() && i < 18 {
        let c = rest[i];
        if c == b'\r' {
            return if i + 1 < rest.len() {
                Some((Some(v), start + 1 + i + 2))
            } else {
                None
            };
        }
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i64::from(c - b'0');
        i += 1;
    }
    None
}

/// Splits an inline request line into arguments exactly like Redis's
/// `sdssplitargs`, appending unescaped bytes to `scratch` and their ranges
/// to `ranges`. Returns `false` for unbalanced quotes (or a closing quote
/// not followed by whitespace).
///
/// The line is treated as a C string: a NUL byte ends it.
fn split_args(line: &[u8], scratch: &mut Vec<u8>, ranges: &mut Vec<(usize, usize)>) -> bool {
    let line = match memchr(0, line) {
        Some(nul) => &line[..nul],
        None => line,
    };
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut p = 0;
    loop {
        while p < line.len() && is_c_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return true;
        }
        let start = scratch.len();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            let c = at(p);
            if in_dq {
                if c == b'\\' && at(p + 1) == b'x' {
                    if let (Some(hi), Some(lo)) = (hex_value(at(p + 2)), hex_value(at(p + 3))) {
                        scratch.push(hi * 16 + lo);
                        p += 4;
                        continue;
                    }
                }
                if c == b'\\' && at(p + 1) != 0 {
                    let e = at(p + 1);
                    scratch.push(match e {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                    p += 2;
                } else if c == b'"' {
                    // The closing quote must be followed by a space or the end.
                    let next = at(p + 1);
                    if next != 0 && !is_c_space(next) {
                        return false;
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return false;
                } else {
                    scratch.push(c);
                    p += 1;
                }
            } else if in_sq {
                if c == b'\\' && at(p + 1) == b'\'' {
                    scratch.push(b'\'');
                    p += 2;
                } else if c == b'\'' {
                    let next = at(p + 1);
                    if next != 0 && !is_c_space(next) {
                        return false;
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return false;
                } else {
                    scratch.push(c);
                    p += 1;
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' => {
                        p += 1;
                        break;
                    }
                    0 => break,
                    b'"' => {
                        in_dq = true;
                        p += 1;
                    }
                    b'\'' => {
                        in_sq = true;
                        p += 1;
                    }
                    other => {
                        scratch.push(other);
                        p += 1;
                    }
                }
            }
        }
        ranges.push((start, scratch.len()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outcome of parsing one command: bytes consumed and arguments, or
    /// incomplete, or the error message.
    type One = Result<Option<(usize, Vec<Vec<u8>>)>, String>;

    /// Parses `input` in one go, expecting exactly one complete command.
    fn one(input: &[u8]) -> One {
        let mut p = Parser::new();
        match p.parse(input, &ParseLimits::default()) {
            Ok(Some(n)) => Ok(Some((
                n,
                p.args(input).iter().map(<[u8]>::to_vec).collect(),
            ))),
            Ok(None) => Ok(None),
            Err(e) => Err(e.message),
        }
    }

    fn args_of(input: &[u8]) -> Vec<Vec<u8>> {
        match one(input) {
            Ok(Some((_, a))) => a,
            other => panic!("{:?} -> {:?}", String::from_utf8_lossy(input), other),
        }
    }

    fn err_of(input: &[u8]) -> String {
        match one(input) {
            Err(e) => e,
            other => panic!("{:?} -> {:?}", String::from_utf8_lossy(input), other),
        }
    }

    fn v(items: &[&str]) -> Vec<Vec<u8>> {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn a_big_commands_argument_list_is_freed_between_commands() {
        let n = 5000;
        let mut big = format!("*{n}\r\n").into_bytes();
        for _ in 0..n {
            big.extend_from_slice(b"$1\r\nx\r\n");
        }
        let mut p = Parser::new();
        let limits = ParseLimits::default();
        // Half of it: the parser is mid-command and keeps its arguments.
        assert_eq!(p.parse(&big[..big.len() / 2], &limits), Ok(None));
        let held = p.memory();
        assert!(held > KEEP_RANGES * 16, "{held}");
        p.shrink_if_idle();
        assert_eq!(p.memory(), held);
        assert_eq!(p.parse(&big, &limits), Ok(Some(big.len())));
        assert_eq!(p.args(&big).len(), n);
        p.shrink_if_idle();
        assert_eq!(p.memory(), 0);
        // Small commands keep their (reused) room.
        let small = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        assert_eq!(p.parse(small, &limits), Ok(Some(small.len())));
        p.shrink_if_idle();
        assert!(p.memory() > 0);
    }

    #[test]
    fn multibulk_basic() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nrest";
        assert_eq!(one(input), Ok(Some((31, v(&["SET", "k", "hello"])))));
    }

    #[test]
    fn multibulk_binary_and_empty_args() {
        let input = b"*2\r\n$0\r\n\r\n$4\r\n\r\n\x00\xff\r\n";
        assert_eq!(args_of(input), vec![b"".to_vec(), b"\r\n\x00\xff".to_vec()]);
    }

    #[test]
    fn multibulk_zero_and_negative_counts() {
        assert_eq!(one(b"*0\r\n"), Ok(Some((4, vec![]))));
        assert_eq!(one(b"*-1\r\n"), Ok(Some((5, vec![]))));
        assert_eq!(one(b"*-5\r\nxyz"), Ok(Some((5, vec![]))));
    }

    #[test]
    fn multibulk_incomplete_everywhere() {
        let full = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
        for cut in 0..full.len() {
            assert_eq!(one(&full[..cut]), Ok(None), "cut at {cut}");
        }
        assert_eq!(one(full), Ok(Some((full.len(), v(&["GET", "key"])))));
    }

    #[test]
    fn multibulk_redis_leniencies() {
        // The byte after '\r' and the two bytes after a payload are skipped
        // unchecked, as in networking.c.
        assert_eq!(args_of(b"*1\rX$1\r\na\r\n"), v(&["a"]));
        assert_eq!(args_of(b"*1\r\n$1\rYaZZ"), v(&["a"]));
    }

    #[test]
    fn error_invalid_multibulk_length() {
        let e = "Protocol error: invalid multibulk length";
        for input in [
            &b"*\r\n"[..],
            b"*x\r\n",
            b"*+1\r\n",
            b"*01\r\n",
            b"* 1\r\n",
            b"*1 \r\n",
            b"*-0\r\n",
            b"*1048577\r\n",
            b"*99999999999999999999\r\n",
            b"*1.5\r\n",
        ] {
            assert_eq!(err_of(input), e, "{:?}", String::from_utf8_lossy(input));
        }
        // The limit itself is accepted.
        assert_eq!(one(b"*1048576\r\n"), Ok(None));
    }

    #[test]
    fn error_too_big_mbulk_count_string() {
        let mut input = b"*".to_vec();
        input.extend_from_slice(&[b'1'; 64 * 1024 - 1]);
        assert_eq!(one(&input), Ok(None));
        input.push(b'1');
        assert_eq!(err_of(&input), "Protocol error: too big mbulk count string");
        // A '\r' anywhere means "not too big": the line is parsed instead.
        input.extend_from_slice(b"\r\n");
        assert_eq!(err_of(&input), "Protocol error: invalid multibulk length");
    }

    #[test]
    fn error_expected_dollar() {
        assert_eq!(
            err_of(b"*1\r\n:1\r\n"),
            "Protocol error: expected '$', got ':'"
        );
        assert_eq!(
            err_of(b"*2\r\n$1\r\na\r\nfoo\r\n"),
            "Protocol error: expected '$', got 'f'"
        );
        // Only reported once the whole line is buffered.
        assert_eq!(one(b"*1\r\nfoo"), Ok(None));
        assert_eq!(one(b"*1\r\nfoo\r"), Ok(None));
        assert_eq!(
            err_of(b"*1\r\n\r\n"),
            "Protocol error: expected '$', got '\r'"
        );
    }

    #[test]
    fn error_invalid_bulk_length() {
        let e = "Protocol error: invalid bulk length";
        for input in [
            &b"*1\r\n$\r\n"[..],
            b"*1\r\n$-1\r\n",
            b"*1\r\n$-0\r\n",
            b"*1\r\n$abc\r\n",
            b"*1\r\n$01\r\n",
            b"*1\r\n$+1\r\n",
            b"*1\r\n$1 \r\n",
            b"*1\r\n$536870913\r\n",
            b"*1\r\n$9223372036854775808\r\n",
        ] {
            assert_eq!(err_of(input), e, "{:?}", String::from_utf8_lossy(input));
        }
        assert_eq!(one(b"*1\r\n$536870912\r\n"), Ok(None));
    }

    #[test]
    fn error_invalid_bulk_length_respects_custom_limit() {
        let limits = ParseLimits {
            max_bulk_len: 3,
            ..ParseLimits::default()
        };
        let mut p = Parser::new();
        assert_eq!(p.parse(b"*1\r\n$3\r\nabc\r\n", &limits), Ok(Some(13)));
        assert_eq!(
            p.parse(b"*1\r\n$4\r\nabcd\r\n", &limits),
            Err(ProtocolError::new("Protocol error: invalid bulk length"))
        );
    }

    #[test]
    fn error_too_big_bulk_count_string() {
        let mut input = b"*1\r\n$".to_vec();
        input.extend_from_slice(&[b'1'; 64 * 1024 - 1]);
        assert_eq!(one(&input), Ok(None));
        input.push(b'1');
        assert_eq!(err_of(&input), "Protocol error: too big bulk count string");
    }

    #[test]
    fn custom_multibulk_limit() {
        let limits = ParseLimits {
            max_multibulk_len: 2,
            ..ParseLimits::default()
        };
        let mut p = Parser::new();
        assert_eq!(p.parse(b"*2\r\n", &limits), Ok(None));
        p.reset();
        assert_eq!(
            p.parse(b"*3\r\n", &limits).unwrap_err().message,
            "Protocol error: invalid multibulk length"
        );
    }

    #[test]
    fn unauthenticated_limits() {
        let mut p = Parser::new();
        p.set_unauthenticated(true);
        let l = ParseLimits::default();
        assert_eq!(
            p.parse(b"*11\r\n", &l).unwrap_err().message,
            "Protocol error: unauthenticated multibulk length"
        );
        assert_eq!(p.parse(b"*10\r\n", &l), Ok(None));
        assert_eq!(
            p.parse(b"*10\r\n$16385\r\n", &l).unwrap_err().message,
            "Protocol error: unauthenticated bulk length"
        );
        assert_eq!(p.parse(b"*1\r\n$16384\r\n", &l), Ok(None));
        p.reset();
        p.set_unauthenticated(false);
        assert_eq!(p.parse(b"*11\r\n", &l), Ok(None));
    }

    #[test]
    fn inline_basic() {
        assert_eq!(one(b"PING\r\n"), Ok(Some((6, v(&["PING"])))));
        assert_eq!(one(b"PING\n"), Ok(Some((5, v(&["PING"])))));
        assert_eq!(args_of(b"set  k \t v\r\n"), v(&["set", "k", "v"]));
        assert_eq!(one(b"PING"), Ok(None));
        assert_eq!(one(b"PING\r"), Ok(None));
    }

    #[test]
    fn inline_zero_args() {
        assert_eq!(one(b"\r\n"), Ok(Some((2, vec![]))));
        assert_eq!(one(b"\n"), Ok(Some((1, vec![]))));
        assert_eq!(one(b"   \t \r\n"), Ok(Some((7, vec![]))));
    }

    #[test]
    fn inline_double_quotes() {
        assert_eq!(
            args_of(b"set \"a b\" \"c\\\"d\"\r\n"),
            v(&["set", "a b", "c\"d"])
        );
        assert_eq!(
            args_of(b"x \"\\n\\r\\t\\b\\a\\\\\\q\"\n"),
            vec![b"x".to_vec(), b"\n\r\t\x08\x07\\q".to_vec()]
        );
        assert_eq!(
            args_of(b"\"\\x41\\x7a\\xFF\\x4\" \n"),
            vec![b"Az\xffx4".to_vec()]
        );
        assert_eq!(args_of(b"\"\"\n"), vec![b"".to_vec()]);
        assert_eq!(args_of(b"a\"b c\"\n"), v(&["ab c"]));
        assert_eq!(args_of(b"\"a\"\x0bb\n"), v(&["a", "b"]));
    }

    #[test]
    fn inline_single_quotes() {
        assert_eq!(args_of(b"'a b' 'it\\'s'\n"), v(&["a b", "it's"]));
        assert_eq!(args_of(b"'\\n'\n"), v(&["\\n"]));
        assert_eq!(args_of(b"''\n"), vec![b"".to_vec()]);
    }

    #[test]
    fn inline_unquoted_tokens_end_only_at_some_spaces() {
        // Vertical tab / form feed are skipped between tokens but do not end
        // an unquoted token (sdssplitargs quirk).
        assert_eq!(args_of(b"\x0ba\x0bb c\n"), v(&["a\x0bb", "c"]));
        assert_eq!(args_of(b"a\rb\r\n"), v(&["a", "b"]));
        assert_eq!(args_of(b"a\\nb\n"), v(&["a\\nb"]));
    }

    #[test]
    fn inline_nul_ends_line() {
        assert_eq!(args_of(b"a b\x00c d\n"), v(&["a", "b"]));
        assert_eq!(
            err_of(b"a \"b\x00\"\n"),
            "Protocol error: unbalanced quotes in request"
        );
    }

    #[test]
    fn error_unbalanced_quotes() {
        let e = "Protocol error: unbalanced quotes in request";
        for input in [
            &b"set \"abc\r\n"[..],
            b"set 'abc\n",
            b"\"a\"b\n",
            b"'a'b\n",
            b"\"abc\\\"\n",
            b"'it\\'\n",
            b"\"\\\n",
        ] {
            assert_eq!(err_of(input), e, "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn error_too_big_inline_request() {
        let mut input = vec![b'a'; 64 * 1024];
        assert_eq!(one(&input), Ok(None));
        input.push(b'a');
        assert_eq!(err_of(&input), "Protocol error: too big inline request");
        // With a newline it is simply a (long) command.
        input.push(b'\n');
        assert_eq!(args_of(&input).len(), 1);
    }

    #[test]
    fn resumes_without_rescanning() {
        let mut p = Parser::new();
        let l = ParseLimits::default();
        let full = b"*2\r\n$3\r\nGET\r\n$10\r\n0123456789\r\n";
        let mut n = None;
        for cut in 1..=full.len() {
            n = p.parse(&full[..cut], &l).unwrap();
            if cut < full.len() {
                assert_eq!(n, None);
            }
        }
        assert_eq!(n, Some(full.len()));
        let a = p.args(full);
        assert_eq!(a.get(0), b"GET");
        assert_eq!(a.get(1), b"0123456789");
    }

    #[test]
    fn bytes_wanted_reports_pending_bulk() {
        let mut p = Parser::new();
        let l = ParseLimits::default();
        assert_eq!(p.bytes_wanted(), 0);
        assert_eq!(p.parse(b"*1\r\n$100000\r\nabc", &l), Ok(None));
        assert_eq!(p.bytes_wanted(), 100_000 + 2 - 3);
        p.reset();
        assert_eq!(p.bytes_wanted(), 0);
        assert_eq!(p.parse(b"*1\r\n$5", &l), Ok(None));
        assert_eq!(p.bytes_wanted(), 0);
    }

    #[test]
    fn state_resets_after_error_and_success() {
        let mut p = Parser::new();
        let l = ParseLimits::default();
        assert!(p.parse(b"*x\r\n", &l).is_err());
        assert_eq!(p.parse(b"PING\r\n", &l), Ok(Some(6)));
        assert_eq!(p.args(b"PING\r\n").get(0), b"PING");
        let mb = b"*1\r\n$4\r\nPING\r\n";
        assert_eq!(p.parse(mb, &l), Ok(Some(mb.len())));
        assert_eq!(p.args(mb).len(), 1);
        assert_eq!(p.parse(b"", &l), Ok(None));
    }

    #[test]
    fn reset_abandons_partial_command() {
        let mut p = Parser::new();
        let l = ParseLimits::default();
        assert_eq!(p.parse(b"*2\r\n$3\r\nGET\r\n", &l), Ok(None));
        p.reset();
        assert_eq!(p.parse(b"PING\n", &l), Ok(Some(5)));
    }

    #[test]
    fn fast_path_agrees_with_general_path() {
        for line in [
            &b"$0\r\n"[..],
            b"$7\r\n",
            b"$123456789012345678\r\n",
            b"$1234567890123456789\r\n",
            b"$00\r\n",
            b"$0x\r\n",
            b"$\r\n",
            b"$1\r",
        ] {
            let general = {
                let digits_end = memchr(b'\r', line).unwrap();
                if digits_end + 1 >= line.len() {
                    None
                } else {
                    Some((parse_i64(&line[1..digits_end]), digits_end + 2))
                }
            };
            if let Some(fast) = fast_len_line(line, 0) {
                assert_eq!(Some(fast), general, "{:?}", String::from_utf8_lossy(line));
            }
        }
    }

    #[test]
    fn protocol_error_display() {
        let e = ProtocolError::new("Protocol error: invalid bulk length");
        assert_eq!(e.to_string(), "Protocol error: invalid bulk length");
    }
}
