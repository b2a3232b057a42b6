//! `#!` first lines: script flags for EVAL bodies (`#!lua flags=...`) and
//! library metadata for FUNCTION LOAD (`#!lua name=...`), with Redis's
//! argument splitting (`sdssplitargs`) and error texts.

/// Flags a script or function declares (`#!lua flags=...` or
/// `redis.register_function{flags={...}}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// No shebang at all: the script runs with EVAL's legacy rules (its
    /// command flags are not derived from script flags).
    pub eval_compat_mode: bool,
    /// `no-writes`: write commands are refused; allowed in `*_RO` calls.
    pub no_writes: bool,
    /// `allow-oom`: may run (and write) over `maxmemory`.
    pub allow_oom: bool,
    /// `allow-stale`: may run on a stale replica.
    pub allow_stale: bool,
    /// `no-cluster`: refused in cluster mode.
    pub no_cluster: bool,
    /// `allow-cross-slot-keys`: may touch keys of several slots.
    pub allow_cross_slot_keys: bool,
}

impl ScriptFlags {
    /// Sets the flag named `name` (Redis's spelling); false if unknown.
    /// `ignore_case` for function flags (`strcasecmp`), not for shebangs.
    pub(crate) fn set(&mut self, name: &[u8], ignore_case: bool) -> bool {
        let eq = |want: &str| {
            if ignore_case {
                name.eq_ignore_ascii_case(want.as_bytes())
            } else {
                name == want.as_bytes()
            }
        };
        let flag = if eq("no-writes") {
            &mut self.no_writes
        } else if eq("allow-oom") {
            &mut self.allow_oom
        } else if eq("allow-stale") {
            &mut self.allow_stale
        } else if eq("no-cluster") {
            &mut self.no_cluster
        } else if eq("allow-cross-slot-keys") {
            &mut self.allow_cross_slot_keys
        } else {
            return false;
        };
        *flag = true;
        true
    }

    /// The flag names that are set, in Redis's order (for FUNCTION LIST).
    pub fn names(&self) -> Vec<&'static str> {
        [
            (self.no_writes, "no-writes"),
            (self.allow_oom, "allow-oom"),
            (self.allow_stale, "allow-stale"),
            (self.no_cluster, "no-cluster"),
            (self.allow_cross_slot_keys, "allow-cross-slot-keys"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect()
    }
}

/// What [`parse_script_shebang`] found: the flags and how many bytes of
/// the body the shebang line takes (the newline stays, so line numbers in
/// errors match the user's script).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shebang {
    /// Declared flags (`eval_compat_mode` when there is no shebang).
    pub flags: ScriptFlags,
    /// Length of the shebang line without its newline (0 without one).
    pub len: usize,
}

/// Parses an EVAL body's shebang (`evalExtractShebangFlags`). Errors are
/// reply texts (`ERR Unexpected engine in script shebang: #!py`).
pub fn parse_script_shebang(body: &[u8]) -> Result<Shebang, String> {
    if !body.starts_with(b"#!") {
        return Ok(Shebang {
            flags: ScriptFlags {
                eval_compat_mode: true,
                ..Default::default()
            },
            len: 0,
        });
    }
    let Some(len) = body.iter().position(|&c| c == b'\n') else {
        return Err("ERR Invalid script shebang".to_owned());
    };
    let parts = match split_args(&body[..len]) {
        Some(p) if !p.is_empty() => p,
        _ => return Err("ERR Invalid engine in script shebang".to_owned()),
    };
    if parts[0] != b"#!lua" {
        return Err(format!(
            "ERR Unexpected engine in script shebang: {}",
            lossy(&parts[0])
        ));
    }
    let mut flags = ScriptFlags::default();
    for part in &parts[1..] {
        let Some(list) = part.strip_prefix(b"flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {}", lossy(part)));
        };
        if list.is_empty() {
            continue;
        }
        for name in list.split(|&c| c == b',') {
            if !flags.set(name, false) {
                return Err(format!(
                    "ERR Unexpected flag in script shebang: {}",
                    lossy(name)
                ));
            }
        }
    }
    Ok(Shebang { flags, len })
}

/// A library's metadata line (`functionExtractLibMetaData`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LibraryHeader {
    /// Engine named after `#!` (`lua`).
    pub(crate) engine: Vec<u8>,
    /// `name=` value.
    pub(crate) name: Vec<u8>,
    /// Offset where the code starts (at the header's newline).
    pub(crate) code_start: usize,
}

/// Parses FUNCTION LOAD's first line. Errors are reply texts.
pub(crate) fn parse_library_header(code: &[u8]) -> Result<LibraryHeader, String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".to_owned());
    }
    let Some(end) = code.iter().position(|&c| c == b'\n') else {
        return Err("ERR Invalid library metadata".to_owned());
    };
    let parts = match split_args(&code[..end]) {
        Some(p) if !p.is_empty() => p,
        _ => return Err("ERR Invalid library metadata".to_owned()),
    };
    let engine = parts[0].get(2..).unwrap_or_default().to_vec();
    let mut name = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".to_owned(),
                );
            }
            name = Some(part[5..].to_vec());
            continue;
        }
        return Err(format!("ERR Invalid metadata value given: {}", lossy(part)));
    }
    let name = name.ok_or_else(|| "ERR Library name was not given".to_owned())?;
    Ok(LibraryHeader {
        engine,
        name,
        code_start: end,
    })
}

/// Redis's name rule for libraries and functions: `[A-Za-z0-9_]+`.
pub(crate) fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Text for error messages.
fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `sdssplitargs`: whitespace-separated words with `"..."` (C escapes,
/// `\xHH`) and `'...'` quoting; `None` on unbalanced quotes or a closing
/// quote not followed by a space.
pub(crate) fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while line.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
            i += 1;
        }
        if i >= line.len() {
            return Some(args);
        }
        let mut word = Vec::new();
        loop {
            match line.get(i) {
                None => break,
                Some(c) if c.is_ascii_whitespace() => break,
                Some(b'"') => i = quoted(line, i + 1, b'"', &mut word)?,
                Some(b'\'') => i = quoted(line, i + 1, b'\'', &mut word)?,
                Some(&c) => {
                    word.push(c);
                    i += 1;
                }
            }
        }
        args.push(word);
    }
}

/// Reads a quoted section starting after the opening quote; returns the
/// offset after the closing quote.
fn quoted(line: &[u8], mut i: usize, quote: u8, word: &mut Vec<u8>) -> Option<usize> {
    loop {
        let c = *line.get(i)?;
        if c == quote {
            i += 1;
            return match line.get(i) {
                None => Some(i),
                Some(c) if c.is_ascii_whitespace() => Some(i),
                Some(_) => None,
            };
        }
        if c == b'\\' && quote == b'"' {
            let next = *line.get(i + 1)?;
            let hex = |b: u8| (b as char).to_digit(16);
            if next == b'x' {
                if let (Some(h), Some(l)) = (
                    line.get(i + 2).and_then(|&b| hex(b)),
                    line.get(i + 3).and_then(|&b| hex(b)),
                ) {
                    word.push((h * 16 + l) as u8);
                    i += 4;
                    continue;
                }
            }
            word.push(match next {
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'b' => 8,
                b'a' => 7,
                other => other,
            });
            i += 2;
        } else if c == b'\\' && quote == b'\'' && line.get(i + 1) == Some(&b'\'') {
            word.push(b'\'');
            i += 2;
        } else {
            word.push(c);
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shebang flags and Redis's errors for bad ones.
    #[test]
    fn script_shebangs() {
        let s = parse_script_shebang(b"return 1").unwrap();
        assert!(s.flags.eval_compat_mode);
        assert_eq!(s.len, 0);
        let s = parse_script_shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1").unwrap();
        assert!(s.flags.no_writes && s.flags.allow_oom && !s.flags.eval_compat_mode);
        assert_eq!(s.len, 31);
        assert_eq!(
            parse_script_shebang(b"#!lua").unwrap_err(),
            "ERR Invalid script shebang"
        );
        assert_eq!(
            parse_script_shebang(b"#!py\n").unwrap_err(),
            "ERR Unexpected engine in script shebang: #!py"
        );
        assert_eq!(
            parse_script_shebang(b"#!lua flags=bad\n").unwrap_err(),
            "ERR Unexpected flag in script shebang: bad"
        );
        assert_eq!(
            parse_script_shebang(b"#!lua foo=bar\n").unwrap_err(),
            "ERR Unknown lua shebang option: foo=bar"
        );
        assert_eq!(
            parse_script_shebang(b"#!lua \"unbalanced\n").unwrap_err(),
            "ERR Invalid engine in script shebang"
        );
        assert!(parse_script_shebang(b"#!lua flags=\n").unwrap().flags == ScriptFlags::default());
    }

    /// Library headers.
    #[test]
    fn library_headers() {
        let h = parse_library_header(b"#!lua name=mylib\ncode").unwrap();
        assert_eq!(
            (h.engine.as_slice(), h.name.as_slice(), h.code_start),
            (&b"lua"[..], &b"mylib"[..], 16)
        );
        assert_eq!(
            parse_library_header(b"code").unwrap_err(),
            "ERR Missing library metadata"
        );
        assert_eq!(
            parse_library_header(b"#!lua name=x").unwrap_err(),
            "ERR Invalid library metadata"
        );
        assert_eq!(
            parse_library_header(b"#!lua\n").unwrap_err(),
            "ERR Library name was not given"
        );
        assert_eq!(
            parse_library_header(b"#!lua name=a NAME=b\n").unwrap_err(),
            "ERR Invalid metadata value, name argument was given multiple times"
        );
        assert_eq!(
            parse_library_header(b"#!lua name=a x=y\n").unwrap_err(),
            "ERR Invalid metadata value given: x=y"
        );
    }

    /// Quoting as `sdssplitargs` does it.
    #[test]
    fn splitting() {
        let v = split_args(b" a \"b c\" 'd\\'e' \"\\x41\\n\"").unwrap();
        assert_eq!(
            v,
            vec![
                b"a".to_vec(),
                b"b c".to_vec(),
                b"d'e".to_vec(),
                b"A\n".to_vec()
            ]
        );
        assert_eq!(split_args(b"\"a\"b"), None);
        assert_eq!(split_args(b"'a"), None);
        assert!(split_args(b"   ").unwrap().is_empty());
    }

    /// Random first lines never panic the parsers.
    #[test]
    fn random_headers_never_panic() {
        let mut rng = crate::rand48::Rand48::new(3);
        let alphabet = b"#!lua nmeflags=,\"'\\x0a\n ";
        for _ in 0..20000 {
            let len = (rng.next() % 30) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| alphabet[(rng.next() as usize) % alphabet.len()])
                .collect();
            let _ = parse_script_shebang(&bytes);
            let _ = parse_library_header(&bytes);
        }
    }
}
