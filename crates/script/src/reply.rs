//! The reply of a command a script ran (`redis.call`), as a value tree.
//!
//! The host runs the command the way it runs any command and hands the
//! engine a [`Reply`]; the engine turns it into Lua values with Redis 7.0's
//! rules (`convert`). A host whose commands write RESP into a
//! `vireo_resp::ReplyBuf` can get the tree with [`Reply::parse`], which reads
//! exactly one RESP2/RESP3 reply (attributes are skipped, as Redis's script
//! reply parser does). The parser bounds nesting and never trusts declared
//! lengths for allocation, so it is safe on any bytes.

/// One command reply, RESP2 or RESP3.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+text` (Lua: `{ok=text}`).
    Status(Vec<u8>),
    /// `-CODE text`, without the leading `-` (Lua: `{err=...}`).
    Error(Vec<u8>),
    /// `:n` (Lua: number).
    Int(i64),
    /// `$n` (Lua: string).
    Bulk(Vec<u8>),
    /// `$-1` (Lua: `false`).
    NullBulk,
    /// `*-1` (Lua: `false`).
    NullArray,
    /// RESP3 `_` (Lua: `nil`).
    Null,
    /// `*n` (Lua: array table).
    Array(Vec<Reply>),
    /// RESP3 `%n` (Lua: `{map={...}}`).
    Map(Vec<(Reply, Reply)>),
    /// RESP3 `~n` (Lua: `{set={elem=true...}}`).
    Set(Vec<Reply>),
    /// RESP3 `,d` (Lua: `{double=d}`).
    Double(f64),
    /// RESP3 `#t`/`#f` (Lua: boolean).
    Bool(bool),
    /// RESP3 `(digits` (Lua: `{big_number=digits}`).
    BigNumber(Vec<u8>),
    /// RESP3 `=n fmt:text` (Lua: `{verbatim_string={format=,string=}}`).
    Verbatim {
        /// The three-byte format (`txt`, `mkd`).
        format: Vec<u8>,
        /// The text after `fmt:`.
        text: Vec<u8>,
    },
}

/// Deepest aggregate nesting [`Reply::parse`] accepts (command replies nest
/// a few levels; this only stops hostile input from exhausting the stack).
pub const MAX_PARSE_DEPTH: usize = 128;

/// Why [`Reply::parse`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyParseError {
    /// The bytes end before the reply does.
    Incomplete,
    /// The bytes are not a RESP reply (or nest deeper than
    /// [`MAX_PARSE_DEPTH`]).
    Invalid,
}

impl Reply {
    /// Parses one reply from the front of `bytes`, returning it and the
    /// number of bytes it took.
    pub fn parse(bytes: &[u8]) -> Result<(Reply, usize), ReplyParseError> {
        let mut cursor = Cursor::new(bytes);
        let reply = Reply::build(&mut cursor, 0)?;
        Ok((reply, cursor.consumed()))
    }

    /// The value whose first token `cursor` reads next, at nesting `depth`.
    fn build(cursor: &mut Cursor<'_>, depth: usize) -> Result<Reply, ReplyParseError> {
        let items = |cursor: &mut Cursor<'_>, n: usize| {
            (0..n)
                .map(|_| Reply::build(cursor, depth + 1))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(match cursor.token(depth)? {
            Token::Status(s) => Reply::Status(s.to_vec()),
            Token::Error(e) => Reply::Error(e.to_vec()),
            Token::Int(i) => Reply::Int(i),
            Token::Bulk(b) => Reply::Bulk(b.to_vec()),
            Token::NullBulk => Reply::NullBulk,
            Token::NullArray => Reply::NullArray,
            Token::Null => Reply::Null,
            Token::Bool(b) => Reply::Bool(b),
            Token::Double(d) => Reply::Double(d),
            Token::BigNumber(n) => Reply::BigNumber(n.to_vec()),
            Token::Verbatim { format, text } => Reply::Verbatim {
                format: format.to_vec(),
                text: text.to_vec(),
            },
            Token::Array(n) => Reply::Array(items(cursor, n)?),
            Token::Set(n) => Reply::Set(items(cursor, n)?),
            Token::Map(n) => {
                let mut flat = items(cursor, n.saturating_mul(2))?.into_iter();
                let mut pairs = Vec::new();
                while let (Some(k), Some(v)) = (flat.next(), flat.next()) {
                    pairs.push((k, v));
                }
                Reply::Map(pairs)
            }
        })
    }
}

/// One token of a reply: a whole scalar, or the header of an aggregate
/// whose elements (a map's keys and values alternating) follow as values
/// of their own. Slices borrow the parsed bytes, so a consumer that turns
/// the reply straight into something else (Lua values) copies nothing
/// twice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Token<'a> {
    /// `+text`.
    Status(&'a [u8]),
    /// `-CODE text`, without the `-`.
    Error(&'a [u8]),
    /// `:n`.
    Int(i64),
    /// `$n` and its bytes.
    Bulk(&'a [u8]),
    /// `$-1`.
    NullBulk,
    /// `*-1`.
    NullArray,
    /// RESP3 `_`.
    Null,
    /// RESP3 `#t`/`#f`.
    Bool(bool),
    /// RESP3 `,d`.
    Double(f64),
    /// RESP3 `(digits`.
    BigNumber(&'a [u8]),
    /// RESP3 `=n fmt:text`.
    Verbatim {
        /// The three-byte format.
        format: &'a [u8],
        /// The text after `fmt:`.
        text: &'a [u8],
    },
    /// `*n`: `n` values follow.
    Array(usize),
    /// RESP3 `%n`: `n` key-value pairs follow.
    Map(usize),
    /// RESP3 `~n`: `n` values follow.
    Set(usize),
}

/// A reader of reply tokens over RESP bytes. Declared lengths are checked
/// against the bytes before they are trusted; nesting is bounded by
/// [`MAX_PARSE_DEPTH`]; attributes are skipped.
pub(crate) struct Cursor<'a> {
    /// The whole input.
    bytes: &'a [u8],
    /// Offset of the next unread byte.
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, pos: 0 }
    }

    /// Bytes read so far.
    pub(crate) fn consumed(&self) -> usize {
        self.pos
    }

    /// The line starting at `pos` (without CRLF), advancing past it.
    fn line(&mut self) -> Result<&'a [u8], ReplyParseError> {
        let rest = &self.bytes[self.pos..];
        let end = find_crlf(rest).ok_or(ReplyParseError::Incomplete)?;
        self.pos += end + 2;
        Ok(&rest[..end])
    }

    /// A line holding a signed decimal integer.
    fn int_line(&mut self) -> Result<i64, ReplyParseError> {
        let line = self.line()?;
        vireo_resp::parse_i64(line).ok_or(ReplyParseError::Invalid)
    }

    /// `len` bytes followed by CRLF.
    fn payload(&mut self, len: i64) -> Result<&'a [u8], ReplyParseError> {
        let len = usize::try_from(len).map_err(|_| ReplyParseError::Invalid)?;
        let end = self.pos.checked_add(len).ok_or(ReplyParseError::Invalid)?;
        if end.saturating_add(2) > self.bytes.len() {
            return Err(ReplyParseError::Incomplete);
        }
        if &self.bytes[end..end + 2] != b"\r\n" {
            return Err(ReplyParseError::Invalid);
        }
        let data = &self.bytes[self.pos..end];
        self.pos = end + 2;
        Ok(data)
    }

    /// An aggregate length: `Ok(None)` for `-1`.
    fn count(&mut self) -> Result<Option<usize>, ReplyParseError> {
        match self.int_line()? {
            -1 => Ok(None),
            n => usize::try_from(n)
                .map(Some)
                .map_err(|_| ReplyParseError::Invalid),
        }
    }

    /// A length that may not be `-1` (maps, sets, attributes).
    fn strict_count(&mut self) -> Result<usize, ReplyParseError> {
        self.count()?.ok_or(ReplyParseError::Invalid)
    }

    /// Reads and drops one whole value at nesting `depth`.
    fn skip_value(&mut self, depth: usize) -> Result<(), ReplyParseError> {
        let children = match self.token(depth)? {
            Token::Array(n) | Token::Set(n) => n,
            Token::Map(n) => n.saturating_mul(2),
            _ => 0,
        };
        (0..children).try_for_each(|_| self.skip_value(depth + 1))
    }

    /// The next token, of a value at nesting `depth` (attributes before
    /// it are skipped).
    pub(crate) fn token(&mut self, depth: usize) -> Result<Token<'a>, ReplyParseError> {
        if depth > MAX_PARSE_DEPTH {
            return Err(ReplyParseError::Invalid);
        }
        let &kind = self
            .bytes
            .get(self.pos)
            .ok_or(ReplyParseError::Incomplete)?;
        self.pos += 1;
        Ok(match kind {
            b'+' => Token::Status(self.line()?),
            b'-' => Token::Error(self.line()?),
            b':' => Token::Int(self.int_line()?),
            b'$' => match self.int_line()? {
                -1 => Token::NullBulk,
                n => Token::Bulk(self.payload(n)?),
            },
            b'*' => match self.count()? {
                None => Token::NullArray,
                Some(n) => Token::Array(n),
            },
            b'~' => Token::Set(self.strict_count()?),
            b'%' => Token::Map(self.strict_count()?),
            b'|' => {
                let n = self.strict_count()?;
                for _ in 0..n.saturating_mul(2) {
                    self.skip_value(depth + 1)?;
                }
                return self.token(depth);
            }
            b'_' => {
                self.line()?;
                Token::Null
            }
            b'#' => match self.line()? {
                b"t" => Token::Bool(true),
                b"f" => Token::Bool(false),
                _ => return Err(ReplyParseError::Invalid),
            },
            b',' => {
                let line = self.line()?;
                Token::Double(vireo_resp::parse_f64(line).ok_or(ReplyParseError::Invalid)?)
            }
            b'(' => Token::BigNumber(self.line()?),
            b'=' => {
                let n = self.int_line()?;
                let data = self.payload(n)?;
                if data.len() < 4 || data[3] != b':' {
                    return Err(ReplyParseError::Invalid);
                }
                Token::Verbatim {
                    format: &data[..3],
                    text: &data[4..],
                }
            }
            _ => return Err(ReplyParseError::Invalid),
        })
    }
}

/// Offset of the first `\r\n` in `bytes`.
fn find_crlf(bytes: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = bytes[from..].iter().position(|&c| c == b'\r') {
        let at = from + i;
        if bytes.get(at + 1) == Some(&b'\n') {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(b: &[u8]) -> Reply {
        let (r, n) = Reply::parse(b).unwrap();
        assert_eq!(n, b.len());
        r
    }

    /// Every RESP2 and RESP3 type parses to its variant.
    #[test]
    fn parses_every_type() {
        assert_eq!(parse(b"+OK\r\n"), Reply::Status(b"OK".to_vec()));
        assert_eq!(parse(b"-ERR x y\r\n"), Reply::Error(b"ERR x y".to_vec()));
        assert_eq!(parse(b":-12\r\n"), Reply::Int(-12));
        assert_eq!(parse(b"$3\r\na\r\n\r\n"), Reply::Bulk(b"a\r\n".to_vec()));
        assert_eq!(parse(b"$-1\r\n"), Reply::NullBulk);
        assert_eq!(parse(b"*-1\r\n"), Reply::NullArray);
        assert_eq!(parse(b"_\r\n"), Reply::Null);
        assert_eq!(
            parse(b"*2\r\n:1\r\n$1\r\nx\r\n"),
            Reply::Array(vec![Reply::Int(1), Reply::Bulk(b"x".to_vec())])
        );
        assert_eq!(
            parse(b"%1\r\n+a\r\n#t\r\n"),
            Reply::Map(vec![(Reply::Status(b"a".to_vec()), Reply::Bool(true))])
        );
        assert_eq!(parse(b"~1\r\n#f\r\n"), Reply::Set(vec![Reply::Bool(false)]));
        assert_eq!(parse(b",1.5\r\n"), Reply::Double(1.5));
        assert_eq!(parse(b",inf\r\n"), Reply::Double(f64::INFINITY));
        assert_eq!(parse(b"(123\r\n"), Reply::BigNumber(b"123".to_vec()));
        assert_eq!(
            parse(b"=8\r\ntxt:abcd\r\n"),
            Reply::Verbatim {
                format: b"txt".to_vec(),
                text: b"abcd".to_vec()
            }
        );
        assert_eq!(parse(b"|1\r\n+k\r\n+v\r\n:3\r\n"), Reply::Int(3));
    }

    /// Truncated and malformed input are errors, not panics.
    #[test]
    fn rejects_bad_input() {
        assert_eq!(Reply::parse(b"$5\r\nab"), Err(ReplyParseError::Incomplete));
        assert_eq!(Reply::parse(b"?\r\n"), Err(ReplyParseError::Invalid));
        assert_eq!(Reply::parse(b"$-5\r\n"), Err(ReplyParseError::Invalid));
        assert_eq!(
            Reply::parse(b"*99999999999\r\n"),
            Err(ReplyParseError::Incomplete)
        );
        let deep = b"*1\r\n".repeat(MAX_PARSE_DEPTH + 2);
        assert_eq!(Reply::parse(&deep), Err(ReplyParseError::Invalid));
    }

    /// Random bytes (seeded) never panic the parser.
    #[test]
    fn random_bytes_never_panic() {
        let mut rng = crate::rand48::Rand48::new(7);
        let alphabet = b"+-:$*~%|_#,(=\r\n0123456789-tfx";
        for _ in 0..20000 {
            let len = (rng.next() % 40) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| alphabet[(rng.next() as usize) % alphabet.len()])
                .collect();
            let _ = Reply::parse(&bytes);
        }
    }
}
