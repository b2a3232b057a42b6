//! The AOF manifest of Redis 7.0's multi-part layout: one line per file,
//! `file <name> seq <n> type <b|h|i>`, base first, then history, then
//! incremental files in sequence order. Parsing is as strict as Redis's
//! (it refuses the same malformed manifests with the same messages), so a
//! directory written by either server is read the same way by both.

use crate::config::split_args;

/// Longest manifest line Redis accepts.
const MAX_LINE: usize = 1024;

/// What a file in the manifest holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The base image (`.base.rdb` or `.base.aof`).
    Base,
    /// A file superseded by a rewrite, waiting to be deleted.
    History,
    /// Commands appended after the base.
    Incr,
}

impl Kind {
    fn letter(self) -> char {
        match self {
            Kind::Base => 'b',
            Kind::History => 'h',
            Kind::Incr => 'i',
        }
    }
}

/// One file of the AOF set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AofFile {
    /// Bare file name inside the AOF directory.
    pub name: String,
    /// Sequence number (base and incr files count separately).
    pub seq: u64,
    /// Base, history or incremental.
    pub kind: Kind,
}

/// The parsed manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The base file, if any.
    pub base: Option<AofFile>,
    /// Files to delete.
    pub history: Vec<AofFile>,
    /// Incremental files, oldest first.
    pub incr: Vec<AofFile>,
    /// Highest base sequence used so far.
    pub base_seq: u64,
    /// Highest incr sequence used so far.
    pub incr_seq: u64,
}

/// Why a manifest was refused: Redis's message and, when a line was read,
/// its number and text.
#[derive(Debug, PartialEq, Eq)]
pub struct ManifestError {
    /// 1-based line number and its trimmed text.
    pub line: Option<(usize, String)>,
    /// Redis's error text.
    pub message: &'static str,
}

impl std::fmt::Display for ManifestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some((n, text)) = &self.line {
            write!(f, "Reading the manifest file, at line {n}: >>> '{text}': ")?;
        }
        f.write_str(self.message)
    }
}

impl Manifest {
    /// Parses a manifest file's contents.
    pub fn parse(text: &[u8]) -> Result<Manifest, ManifestError> {
        let mut m = Manifest::default();
        let mut linenum = 0;
        let mut rest = text;
        if rest.is_empty() {
            return Err(ManifestError {
                line: None,
                message: "Found an empty AOF manifest",
            });
        }
        while !rest.is_empty() {
            // Redis reads with fgets into a buffer of MAX_LINE bytes: a
            // longer line is refused (unless it is a comment).
            let end = rest.iter().position(|&b| b == b'\n');
            let (raw, next) = match end {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, &rest[rest.len()..]),
            };
            linenum += 1;
            rest = next;
            if raw.first() == Some(&b'#') {
                continue;
            }
            if end.is_none() || raw.len() >= MAX_LINE {
                return Err(ManifestError {
                    line: None,
                    message: "The AOF manifest file contains too long line",
                });
            }
            let line = String::from_utf8_lossy(raw)
                .trim_matches([' ', '\t', '\r', '\n'])
                .to_string();
            let fail = |message| ManifestError {
                line: Some((linenum, line.clone())),
                message,
            };
            if line.is_empty() {
                return Err(fail("Invalid AOF manifest file format"));
            }
            let words = split_args(&line).unwrap_or_default();
            if words.len() < 6 || !words.len().is_multiple_of(2) {
                return Err(fail("Invalid AOF manifest file format"));
            }
            let (mut name, mut seq, mut kind) = (None, 0u64, None);
            for pair in words.chunks(2) {
                let key = pair[0].to_ascii_lowercase();
                match key.as_str() {
                    "file" => {
                        if pair[1].contains('/') {
                            return Err(fail("File can't be a path, just a filename"));
                        }
                        name = Some(pair[1].clone());
                    }
                    // atoll: leading digits, anything else reads as 0.
                    "seq" => seq = leading_number(&pair[1]),
                    "type" => kind = pair[1].chars().next(),
                    _ => {}
                }
            }
            let (Some(name), Some(kind)) = (name, kind) else {
                return Err(fail("Invalid AOF manifest file format"));
            };
            if seq == 0 || name.is_empty() {
                return Err(fail("Invalid AOF manifest file format"));
            }
            match kind {
                'b' => {
                    if m.base.is_some() {
                        return Err(fail("Found duplicate base file information"));
                    }
                    m.base_seq = seq;
                    m.base = Some(AofFile {
                        name,
                        seq,
                        kind: Kind::Base,
                    });
                }
                'h' => m.history.push(AofFile {
                    name,
                    seq,
                    kind: Kind::History,
                }),
                'i' => {
                    if seq <= m.incr_seq {
                        return Err(fail("Found a non-monotonic sequence number"));
                    }
                    m.incr_seq = seq;
                    m.incr.push(AofFile {
                        name,
                        seq,
                        kind: Kind::Incr,
                    });
                }
                _ => return Err(fail("Unknown AOF file type")),
            }
        }
        if linenum == 0 {
            return Err(ManifestError {
                line: None,
                message: "Found an empty AOF manifest",
            });
        }
        Ok(m)
    }

    /// The manifest's text, in Redis's format and order.
    pub fn format(&self) -> String {
        let mut out = String::new();
        for f in self.base.iter().chain(&self.history).chain(&self.incr) {
            out.push_str(&format!(
                "file {} seq {} type {}\n",
                quote_name(&f.name),
                f.seq,
                f.kind.letter()
            ));
        }
        out
    }

    /// Makes a new base file name (`<prefix>.<seq>.base.<rdb|aof>`) the
    /// base, turning the previous one into history.
    pub fn new_base(&mut self, prefix: &str, rdb: bool) -> String {
        if let Some(mut old) = self.base.take() {
            old.kind = Kind::History;
            self.history.insert(0, old);
        }
        self.base_seq += 1;
        let ext = if rdb { "rdb" } else { "aof" };
        let name = format!("{prefix}.{}.base.{ext}", self.base_seq);
        self.base = Some(AofFile {
            name: name.clone(),
            seq: self.base_seq,
            kind: Kind::Base,
        });
        name
    }

    /// Appends a new incremental file (`<prefix>.<seq>.incr.aof`) and
    /// returns its name.
    pub fn new_incr(&mut self, prefix: &str) -> String {
        self.incr_seq += 1;
        let name = format!("{prefix}.{}.incr.aof", self.incr_seq);
        self.incr.push(AofFile {
            name: name.clone(),
            seq: self.incr_seq,
            kind: Kind::Incr,
        });
        name
    }

    /// Turns the incremental files into history (after a rewrite, the base
    /// covers them), except the last one when `keep_last` (the file taking
    /// the commands since the rewrite's cut).
    pub fn retire_incr(&mut self, keep_last: bool) {
        let keep = if keep_last { self.incr.pop() } else { None };
        for mut f in self.incr.drain(..) {
            f.kind = Kind::History;
            self.history.push(f);
        }
        self.incr.extend(keep);
    }

    /// The files to load, base first.
    pub fn load_order(&self) -> impl Iterator<Item = &AofFile> {
        self.base.iter().chain(&self.incr)
    }
}

/// C `atoll`: optional sign and leading digits; anything else is 0.
fn leading_number(s: &str) -> u64 {
    let digits: String = s
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().unwrap_or(0)
}

/// A file name as Redis writes it in the manifest: bare, or quoted with
/// escapes when it holds spaces, quotes or unprintable bytes.
fn quote_name(name: &str) -> String {
    let plain = name
        .bytes()
        .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\' && b != b'\'');
    if plain && !name.is_empty() {
        return name.to_string();
    }
    let mut s = String::from("\"");
    for b in name.bytes() {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x07 => s.push_str("\\a"),
            0x08 => s.push_str("\\b"),
            b if b.is_ascii_graphic() || b == b' ' => s.push(b as char),
            b => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_redis_manifest() {
        let text = b"file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\nfile appendonly.aof.2.incr.aof seq 2 type i\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(m.base.as_ref().unwrap().name, "appendonly.aof.1.base.rdb");
        assert_eq!(m.incr.len(), 2);
        assert_eq!((m.base_seq, m.incr_seq), (1, 2));
        assert_eq!(m.format().as_bytes(), text);
        let names: Vec<_> = m.load_order().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "appendonly.aof.1.base.rdb",
                "appendonly.aof.1.incr.aof",
                "appendonly.aof.2.incr.aof"
            ]
        );
    }

    #[test]
    fn comments_history_and_extra_fields_are_accepted() {
        let text = b"# comment\nfile a.1.base.aof seq 1 type b future x\nfile a.0.base.aof seq 7 type h\nfile a.3.incr.aof seq 3 type i\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(m.history.len(), 1);
        assert_eq!(
            m.format(),
            "file a.1.base.aof seq 1 type b\nfile a.0.base.aof seq 7 type h\nfile a.3.incr.aof seq 3 type i\n"
        );
    }

    #[test]
    fn refuses_what_redis_refuses() {
        let err = |t: &[u8]| Manifest::parse(t).unwrap_err().message;
        assert_eq!(err(b""), "Found an empty AOF manifest");
        assert_eq!(err(b"\n"), "Invalid AOF manifest file format");
        assert_eq!(err(b"file a seq 1\n"), "Invalid AOF manifest file format");
        assert_eq!(
            err(b"file a seq 1 type b\nfile b seq 2 type b\n"),
            "Found duplicate base file information"
        );
        assert_eq!(
            err(b"file a seq 2 type i\nfile b seq 2 type i\n"),
            "Found a non-monotonic sequence number"
        );
        assert_eq!(err(b"file a seq 1 type x\n"), "Unknown AOF file type");
        assert_eq!(
            err(b"file ../a seq 1 type b\n"),
            "File can't be a path, just a filename"
        );
        assert_eq!(
            err(b"file a seq x type b\n"),
            "Invalid AOF manifest file format"
        );
        assert_eq!(
            err(b"file a seq 1 type b"),
            "The AOF manifest file contains too long line"
        );
        let long = format!("file {} seq 1 type b\n", "a".repeat(2000));
        assert_eq!(
            err(long.as_bytes()),
            "The AOF manifest file contains too long line"
        );
        let e = Manifest::parse(b"file a seq 1 type q\n").unwrap_err();
        assert_eq!(e.line, Some((1, "file a seq 1 type q".into())));
    }

    #[test]
    fn new_files_rotate_like_a_rewrite() {
        let mut m = Manifest::default();
        assert_eq!(
            m.new_base("appendonly.aof", true),
            "appendonly.aof.1.base.rdb"
        );
        assert_eq!(m.new_incr("appendonly.aof"), "appendonly.aof.1.incr.aof");
        assert_eq!(m.new_incr("appendonly.aof"), "appendonly.aof.2.incr.aof");
        assert_eq!(
            m.new_base("appendonly.aof", false),
            "appendonly.aof.2.base.aof"
        );
        m.retire_incr(true);
        assert_eq!(
            m.format(),
            "file appendonly.aof.2.base.aof seq 2 type b\n\
             file appendonly.aof.1.base.rdb seq 1 type h\n\
             file appendonly.aof.1.incr.aof seq 1 type h\n\
             file appendonly.aof.2.incr.aof seq 2 type i\n"
        );
        assert_eq!(Manifest::parse(m.format().as_bytes()).unwrap(), m);
    }

    #[test]
    fn names_with_spaces_are_quoted_and_read_back() {
        let mut m = Manifest::default();
        m.new_base("my aof", false);
        let text = m.format();
        assert!(text.starts_with("file \"my aof.1.base.aof\""), "{text}");
        assert_eq!(Manifest::parse(text.as_bytes()).unwrap(), m);
    }
}
