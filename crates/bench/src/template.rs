//! Command templates: `SET __key__ __data__` style strings turned into RESP
//! requests with a fresh key and value per request.
//!
//! A template is parsed once into literal byte runs and placeholders, so
//! encoding a request is a handful of `extend_from_slice` calls into the
//! connection's output buffer: no per-request allocation or formatting
//! machinery on the client's hot path.

/// Placeholder replaced by the request's key (`--key-prefix` + index).
pub const KEY: &str = "__key__";
/// Placeholder replaced by the request's value (`--data-size` bytes).
pub const DATA: &str = "__data__";

/// Commands whose nil reply means "key not found"; the report shows a hit
/// ratio for templates using them.
const READS: &[&str] = &[
    "GET",
    "GETEX",
    "GETDEL",
    "HGET",
    "LINDEX",
    "ZSCORE",
    "SRANDMEMBER",
    "LPOP",
    "RPOP",
    "SPOP",
    "HRANDFIELD",
    "ZRANK",
    "ZREVRANK",
    "GETSET",
];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Lit(Vec<u8>),
    Key,
    Data,
}

/// A parsed command template.
#[derive(Debug, Clone)]
pub struct Template {
    /// The template as written by the user.
    pub source: String,
    /// The command name, upper-cased (a label in reports).
    pub name: String,
    /// Whether nil replies to this command count as misses.
    pub is_read: bool,
    args: Vec<Vec<Part>>,
    /// `*argc\r\n`, precomputed.
    header: Vec<u8>,
    /// Per argument: its length when it contains no placeholder.
    fixed_len: Vec<Option<usize>>,
}

impl Template {
    /// Parses a template. Arguments are separated by whitespace; single or
    /// double quotes group words, and inside double quotes `\"`, `\\`, `\n`,
    /// `\r`, `\t` and `\xHH` are understood (as in redis-cli).
    pub fn parse(source: &str) -> Result<Template, String> {
        let words = split_words(source)?;
        if words.is_empty() {
            return Err("empty command template".into());
        }
        let args: Vec<Vec<Part>> = words.iter().map(|w| split_placeholders(w)).collect();
        let name = String::from_utf8_lossy(&words[0]).to_ascii_uppercase();
        let fixed_len = args
            .iter()
            .map(|parts| {
                parts.iter().try_fold(0usize, |n, p| match p {
                    Part::Lit(b) => Some(n + b.len()),
                    _ => None,
                })
            })
            .collect();
        Ok(Template {
            source: source.to_string(),
            is_read: READS.contains(&name.as_str()),
            name,
            header: format!("*{}\r\n", args.len()).into_bytes(),
            args,
            fixed_len,
        })
    }

    /// Whether the template contains `__key__`.
    pub fn uses_key(&self) -> bool {
        self.args.iter().flatten().any(|p| *p == Part::Key)
    }

    /// Whether the template contains `__data__`.
    pub fn uses_data(&self) -> bool {
        self.args.iter().flatten().any(|p| *p == Part::Data)
    }

    /// Appends one RESP request to `out`, substituting `key` and `data`.
    pub fn encode(&self, out: &mut Vec<u8>, key: &[u8], data: &[u8]) {
        out.extend_from_slice(&self.header);
        for (parts, fixed) in self.args.iter().zip(&self.fixed_len) {
            let len = match fixed {
                Some(n) => *n,
                None => parts
                    .iter()
                    .map(|p| match p {
                        Part::Lit(b) => b.len(),
                        Part::Key => key.len(),
                        Part::Data => data.len(),
                    })
                    .sum(),
            };
            out.push(b'$');
            push_decimal(out, len as u64);
            out.extend_from_slice(b"\r\n");
            for p in parts {
                match p {
                    Part::Lit(b) => out.extend_from_slice(b),
                    Part::Key => out.extend_from_slice(key),
                    Part::Data => out.extend_from_slice(data),
                }
            }
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Appends one RESP request made of literal arguments (used for the
/// connection handshake: AUTH, HELLO, SELECT).
pub fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    push_decimal(out, args.len() as u64);
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        push_decimal(out, a.len() as u64);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends the decimal digits of `v` without going through `fmt`.
pub fn push_decimal(out: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

/// Splits a word into literal runs and placeholders.
fn split_placeholders(word: &[u8]) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut lit = Vec::new();
    let mut i = 0;
    while i < word.len() {
        let rest = &word[i..];
        if rest.starts_with(KEY.as_bytes()) || rest.starts_with(DATA.as_bytes()) {
            if !lit.is_empty() {
                parts.push(Part::Lit(std::mem::take(&mut lit)));
            }
            if rest.starts_with(KEY.as_bytes()) {
                parts.push(Part::Key);
                i += KEY.len();
            } else {
                parts.push(Part::Data);
                i += DATA.len();
            }
        } else {
            lit.push(word[i]);
            i += 1;
        }
    }
    if !lit.is_empty() || parts.is_empty() {
        parts.push(Part::Lit(lit));
    }
    parts
}

/// Shell-like word splitting with quotes.
fn split_words(s: &str) -> Result<Vec<Vec<u8>>, String> {
    let b = s.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == b.len() {
            break;
        }
        let mut word = Vec::new();
        while i < b.len() && !b[i].is_ascii_whitespace() {
            match b[i] {
                b'"' => {
                    i += 1;
                    loop {
                        match b.get(i) {
                            None => return Err(format!("unterminated \" in {s:?}")),
                            Some(b'"') => break,
                            Some(b'\\') => {
                                let (byte, used) = unescape(&b[i + 1..])
                                    .ok_or_else(|| format!("bad escape in {s:?}"))?;
                                word.push(byte);
                                i += 1 + used;
                                continue;
                            }
                            Some(&c) => word.push(c),
                        }
                        i += 1;
                    }
                    i += 1;
                }
                b'\'' => {
                    i += 1;
                    loop {
                        match b.get(i) {
                            None => return Err(format!("unterminated ' in {s:?}")),
                            Some(b'\'') => break,
                            Some(&c) => word.push(c),
                        }
                        i += 1;
                    }
                    i += 1;
                }
                c => {
                    word.push(c);
                    i += 1;
                }
            }
        }
        words.push(word);
    }
    Ok(words)
}

/// Decodes one escape (after the backslash); returns the byte and how many
/// input bytes it used.
fn unescape(rest: &[u8]) -> Option<(u8, usize)> {
    let c = *rest.first()?;
    Some(match c {
        b'n' => (b'\n', 1),
        b'r' => (b'\r', 1),
        b't' => (b'\t', 1),
        b'x' => {
            let hex = std::str::from_utf8(rest.get(1..3)?).ok()?;
            (u8::from_str_radix(hex, 16).ok()?, 3)
        }
        other => (other, 1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(t: &str, key: &[u8], data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        Template::parse(t).unwrap().encode(&mut out, key, data);
        out
    }

    #[test]
    fn set_template() {
        assert_eq!(
            enc("SET __key__ __data__", b"key:1", b"abc"),
            b"*3\r\n$3\r\nSET\r\n$5\r\nkey:1\r\n$3\r\nabc\r\n".to_vec()
        );
    }

    #[test]
    fn placeholders_inside_words_and_quotes() {
        assert_eq!(
            enc(r#"hset "h x" f:__key__:__key__ 'a b'"#, b"k", b""),
            b"*4\r\n$4\r\nhset\r\n$3\r\nh x\r\n$5\r\nf:k:k\r\n$3\r\na b\r\n".to_vec()
        );
        assert_eq!(
            enc(r#"ECHO "\x41\n""#, b"", b""),
            b"*2\r\n$4\r\nECHO\r\n$2\r\nA\n\r\n".to_vec()
        );
        assert_eq!(
            enc("SET k ''", b"", b""),
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n".to_vec()
        );
    }

    #[test]
    fn metadata() {
        let t = Template::parse("get __key__").unwrap();
        assert_eq!(t.name, "GET");
        assert!(t.is_read && t.uses_key() && !t.uses_data());
        let t = Template::parse("SET __key__ __data__").unwrap();
        assert!(!t.is_read && t.uses_data());
    }

    #[test]
    fn bad_templates() {
        assert!(Template::parse("   ").is_err());
        assert!(Template::parse("SET \"abc").is_err());
        assert!(Template::parse("SET 'abc").is_err());
    }

    #[test]
    fn decimals() {
        for v in [0u64, 7, 10, 12345, u64::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, v);
            assert_eq!(out, v.to_string().into_bytes());
        }
    }
}
