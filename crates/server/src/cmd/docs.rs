//! Command metadata that the execution table does not need: summaries,
//! groups, ACL categories, tips, key specs and argument trees, as COMMAND
//! INFO and COMMAND DOCS report them (Redis keeps these in its per-command
//! JSON files).
//!
//! The data is a small line-based text format in `docs.txt` (its header
//! describes the syntax), parsed once on first use.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::flags;

/// Key-spec flags, with the names COMMAND INFO prints.
pub mod keyflags {
    /// Read-only access to the value.
    pub const RO: u32 = 1;
    /// Read-write access.
    pub const RW: u32 = 1 << 1;
    /// Overwrite: the value is replaced without being read.
    pub const OW: u32 = 1 << 2;
    /// The key is removed.
    pub const RM: u32 = 1 << 3;
    /// User data is returned (or copied).
    pub const ACCESS: u32 = 1 << 4;
    /// Existing data is modified.
    pub const UPDATE: u32 = 1 << 5;
    /// Data is added.
    pub const INSERT: u32 = 1 << 6;
    /// Data is removed.
    pub const DELETE: u32 = 1 << 7;
    /// Not really a key (but routed like one).
    pub const NOT_KEY: u32 = 1 << 8;
    /// The spec may miss some keys.
    pub const INCOMPLETE: u32 = 1 << 9;
    /// The flags depend on the other arguments.
    pub const VARIABLE_FLAGS: u32 = 1 << 10;

    /// Flags with their printed names, in Redis's order.
    pub const NAMES: &[(u32, &str)] = &[
        (RO, "RO"),
        (RW, "RW"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "access"),
        (UPDATE, "update"),
        (INSERT, "insert"),
        (DELETE, "delete"),
        (NOT_KEY, "not_key"),
        (INCOMPLETE, "incomplete"),
        (VARIABLE_FLAGS, "variable_flags"),
    ];

    /// The bit of a flag name (case-insensitive).
    pub fn by_name(name: &str) -> Option<u32> {
        NAMES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|&(b, _)| b)
    }
}

/// ACL categories, with their names (without the `@`) in Redis's order.
pub mod acl {
    use super::flags;

    /// Every category, in the order COMMAND INFO lists them.
    pub const NAMES: &[&str] = &[
        "keyspace",
        "read",
        "write",
        "set",
        "sortedset",
        "list",
        "hash",
        "string",
        "bitmap",
        "hyperloglog",
        "geo",
        "stream",
        "pubsub",
        "admin",
        "fast",
        "slow",
        "blocking",
        "dangerous",
        "connection",
        "transaction",
        "scripting",
    ];

    /// The bit of a category name (case-insensitive, without `@`).
    pub fn by_name(name: &str) -> Option<u32> {
        NAMES
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .map(|i| 1 << i)
    }

    fn bit(name: &str) -> u32 {
        by_name(name).unwrap_or(0)
    }

    /// The categories a command gets from its flags on top of its declared
    /// ones: @write, @read, @admin and @dangerous, @pubsub, @fast,
    /// @blocking, and @slow for everything not @fast.
    pub fn with_implicit(declared: u32, cmd_flags: u32) -> u32 {
        let mut c = declared;
        if cmd_flags & flags::WRITE != 0 {
            c |= bit("write");
        }
        if cmd_flags & flags::READONLY != 0 && c & bit("scripting") == 0 {
            c |= bit("read");
        }
        if cmd_flags & flags::ADMIN != 0 {
            c |= bit("admin") | bit("dangerous");
        }
        if cmd_flags & flags::PUBSUB != 0 {
            c |= bit("pubsub");
        }
        if cmd_flags & flags::FAST != 0 {
            c |= bit("fast");
        }
        if cmd_flags & flags::BLOCKING != 0 {
            c |= bit("blocking");
        }
        if c & bit("fast") == 0 {
            c |= bit("slow");
        }
        c
    }
}

/// Where a key spec's search for keys starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeginSearch {
    /// At a fixed argument index.
    Index(i32),
    /// After a keyword, searched from `startfrom` (negative: from the end,
    /// backwards).
    Keyword {
        keyword: &'static str,
        startfrom: i32,
    },
    /// Cannot be described (the command's own key finder knows).
    Unknown,
}

/// How a key spec finds the keys once its search started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindKeys {
    /// Keys up to `lastkey` (relative to the start; negative counts from the
    /// end), every `step`; `limit` splits the rest when lastkey is -1.
    Range { lastkey: i32, step: i32, limit: i32 },
    /// The key count is the argument at `keynumidx` (relative to the start),
    /// the keys begin `firstkey` after the start, every `step`.
    Keynum {
        keynumidx: i32,
        firstkey: i32,
        step: i32,
    },
    /// Cannot be described.
    Unknown,
}

/// One key spec of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpecDoc {
    /// Bits from [`keyflags`].
    pub flags: u32,
    /// Where the search starts.
    pub begin: BeginSearch,
    /// How the keys are found.
    pub find: FindKeys,
}

/// An argument's type, as COMMAND DOCS names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgType {
    String,
    Integer,
    Double,
    Key,
    Pattern,
    UnixTime,
    PureToken,
    OneOf,
    Block,
}

impl ArgType {
    /// The name COMMAND DOCS prints.
    pub fn name(self) -> &'static str {
        match self {
            ArgType::String => "string",
            ArgType::Integer => "integer",
            ArgType::Double => "double",
            ArgType::Key => "key",
            ArgType::Pattern => "pattern",
            ArgType::UnixTime => "unix-time",
            ArgType::PureToken => "pure-token",
            ArgType::OneOf => "oneof",
            ArgType::Block => "block",
        }
    }

    fn from_code(code: &str) -> Option<ArgType> {
        Some(match code {
            "str" => ArgType::String,
            "int" => ArgType::Integer,
            "dbl" => ArgType::Double,
            "key" => ArgType::Key,
            "pat" => ArgType::Pattern,
            "time" => ArgType::UnixTime,
            "oneof" => ArgType::OneOf,
            "block" => ArgType::Block,
            _ => return None,
        })
    }
}

/// Argument flags, with the names COMMAND DOCS prints.
pub mod argflags {
    /// The argument may be left out.
    pub const OPTIONAL: u8 = 1;
    /// The argument may repeat.
    pub const MULTIPLE: u8 = 1 << 1;
    /// The token repeats with each repetition.
    pub const MULTIPLE_TOKEN: u8 = 1 << 2;

    /// Flags with their printed names, in Redis's order.
    pub const NAMES: &[(u8, &str)] = &[
        (OPTIONAL, "optional"),
        (MULTIPLE, "multiple"),
        (MULTIPLE_TOKEN, "multiple_token"),
    ];
}

/// One argument of a command, possibly with nested arguments.
#[derive(Debug, PartialEq, Eq)]
pub struct ArgDoc {
    /// Its name in the documentation.
    pub name: &'static str,
    /// Its type.
    pub kind: ArgType,
    /// The key spec describing it, for key arguments.
    pub key_spec_index: Option<u32>,
    /// The literal keyword introducing it.
    pub token: Option<&'static str>,
    /// The version that added it.
    pub since: Option<&'static str>,
    /// The version that deprecated it.
    pub deprecated_since: Option<&'static str>,
    /// Bits from [`argflags`].
    pub flags: u8,
    /// Nested arguments of a oneof or block.
    pub args: Vec<ArgDoc>,
}

/// Everything COMMAND INFO and COMMAND DOCS report about a command beyond
/// its arity, flags and key triple.
#[derive(Debug, PartialEq, Eq)]
pub struct CommandDoc {
    /// Full lower-case name (`parent|sub` for subcommands).
    pub name: &'static str,
    /// One-line description.
    pub summary: Option<&'static str>,
    /// The version that added it.
    pub since: &'static str,
    /// Its command group (`string`, `generic`, `sorted-set`, …).
    pub group: &'static str,
    /// Its time complexity.
    pub complexity: Option<&'static str>,
    /// Documentation flags (`deprecated`, `syscmd`).
    pub doc_flags: Vec<&'static str>,
    /// The version that deprecated it.
    pub deprecated_since: Option<&'static str>,
    /// What to use instead, when deprecated.
    pub replaced_by: Option<&'static str>,
    /// Declared ACL categories (bits of [`acl::NAMES`]), without the ones
    /// the command flags imply (see [`acl::with_implicit`]).
    pub acl: u32,
    /// Command tips for clients and proxies.
    pub tips: Vec<&'static str>,
    /// Its key specs.
    pub key_specs: Vec<KeySpecDoc>,
    /// Its argument tree.
    pub args: Vec<ArgDoc>,
}

/// The metadata text; the header of the file describes the format.
const TEXT: &str = include_str!("docs.txt");

/// The documentation of a command (`name` or `parent|sub`, any case).
pub fn doc(name: &str) -> Option<&'static CommandDoc> {
    all().get(name.to_ascii_lowercase().as_str())
}

/// Every documented command, by lower-case full name.
fn all() -> &'static HashMap<&'static str, CommandDoc> {
    static DOCS: OnceLock<HashMap<&'static str, CommandDoc>> = OnceLock::new();
    DOCS.get_or_init(|| match parse(TEXT) {
        Ok(docs) => docs.into_iter().map(|d| (d.name, d)).collect(),
        Err(e) => {
            tracing::error!("command documentation is malformed: {e}");
            HashMap::new()
        }
    })
}

/// Parses the metadata text; Err names the first bad line.
fn parse(text: &'static str) -> Result<Vec<CommandDoc>, String> {
    let mut docs: Vec<CommandDoc> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fail = |what: &str| format!("docs.txt line {}: {what}: {raw}", n + 1);
        if !raw.starts_with(' ') {
            docs.push(parse_header(line).ok_or_else(|| fail("bad command header"))?);
            continue;
        }
        let cur = docs
            .last_mut()
            .ok_or_else(|| fail("attribute before any command"))?;
        let (sigil, rest) = line.split_at(1);
        let rest = rest.trim();
        match sigil {
            ":" => cur.summary = Some(rest),
            "~" => cur.complexity = Some(rest),
            "!" => cur.tips.extend(rest.split_whitespace()),
            "$" => cur.doc_flags.extend(rest.split_whitespace()),
            "x" => {
                let (since, by) = rest
                    .split_once(' ')
                    .ok_or_else(|| fail("deprecation needs a replacement"))?;
                cur.doc_flags.insert(0, "deprecated");
                cur.deprecated_since = Some(since);
                cur.replaced_by = Some(by);
            }
            "k" => cur
                .key_specs
                .push(parse_key_spec(rest).ok_or_else(|| fail("bad key spec"))?),
            "-" => {
                let depth = line.bytes().take_while(|&b| b == b'-').count();
                let arg = parse_arg(line[depth..].trim()).ok_or_else(|| fail("bad argument"))?;
                let mut list = &mut cur.args;
                for _ in 1..depth {
                    list = &mut list
                        .last_mut()
                        .ok_or_else(|| fail("nested argument without parent"))?
                        .args;
                }
                list.push(arg);
            }
            _ => return Err(fail("unknown attribute")),
        }
    }
    Ok(docs)
}

/// `name group since [@category ...]`.
fn parse_header(line: &'static str) -> Option<CommandDoc> {
    let mut words = line.split_whitespace();
    let (name, group, since) = (words.next()?, words.next()?, words.next()?);
    let mut acl = 0;
    for cat in words {
        acl |= acl::by_name(cat.strip_prefix('@')?)?;
    }
    Some(CommandDoc {
        name,
        summary: None,
        since,
        group,
        complexity: None,
        doc_flags: Vec::new(),
        deprecated_since: None,
        replaced_by: None,
        acl,
        tips: Vec::new(),
        key_specs: Vec::new(),
        args: Vec::new(),
    })
}

/// Comma-separated integers.
fn ints<const N: usize>(s: &str) -> Option<[i32; N]> {
    let mut out = [0; N];
    let mut parts = s.split(',');
    for slot in &mut out {
        *slot = parts.next()?.parse().ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// `FLAGS BEGIN FIND`, see the header of docs.txt.
fn parse_key_spec(s: &'static str) -> Option<KeySpecDoc> {
    let mut words = s.split_whitespace();
    let (fl, bs, fk) = (words.next()?, words.next()?, words.next()?);
    if words.next().is_some() {
        return None;
    }
    let mut flags = 0;
    for f in fl.split(',') {
        flags |= keyflags::by_name(f)?;
    }
    let begin = if bs == "?" {
        BeginSearch::Unknown
    } else if let Some(pos) = bs.strip_prefix('i') {
        BeginSearch::Index(pos.parse().ok()?)
    } else {
        let (keyword, from) = bs.strip_prefix('w')?.split_once(',')?;
        BeginSearch::Keyword {
            keyword,
            startfrom: from.parse().ok()?,
        }
    };
    let find = if fk == "?" {
        FindKeys::Unknown
    } else if let Some(r) = fk.strip_prefix('r') {
        let [lastkey, step, limit] = ints(r)?;
        FindKeys::Range {
            lastkey,
            step,
            limit,
        }
    } else {
        let [keynumidx, firstkey, step] = ints(fk.strip_prefix('n')?)?;
        FindKeys::Keynum {
            keynumidx,
            firstkey,
            step,
        }
    };
    if (begin == BeginSearch::Unknown) != (find == FindKeys::Unknown) {
        return None;
    }
    Some(KeySpecDoc { flags, begin, find })
}

/// `name [type] [=TOKEN] [?] [*] [+] [@since] [x@since] [#keyspec]`.
fn parse_arg(s: &'static str) -> Option<ArgDoc> {
    let mut words = s.split_whitespace();
    let mut arg = ArgDoc {
        name: words.next()?,
        kind: ArgType::PureToken,
        key_spec_index: None,
        token: None,
        since: None,
        deprecated_since: None,
        flags: 0,
        args: Vec::new(),
    };
    let mut typed = false;
    for w in words {
        if let Some(t) = w.strip_prefix('=') {
            arg.token = Some(t);
        } else if let Some(v) = w.strip_prefix('@') {
            arg.since = Some(v);
        } else if let Some(v) = w.strip_prefix("x@") {
            arg.deprecated_since = Some(v);
        } else if let Some(i) = w.strip_prefix('#') {
            arg.key_spec_index = Some(i.parse().ok()?);
        } else if w == "?" {
            arg.flags |= argflags::OPTIONAL;
        } else if w == "*" {
            arg.flags |= argflags::MULTIPLE;
        } else if w == "+" {
            arg.flags |= argflags::MULTIPLE_TOKEN;
        } else if !typed {
            arg.kind = ArgType::from_code(w)?;
            typed = true;
        } else {
            return None;
        }
    }
    // A pure token is all token.
    if arg.kind == ArgType::PureToken && arg.token.is_none() {
        return None;
    }
    Some(arg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk<'a>(args: &'a [ArgDoc], out: &mut Vec<&'a ArgDoc>) {
        for a in args {
            out.push(a);
            walk(&a.args, out);
        }
    }

    #[test]
    fn the_text_parses_and_names_are_unique() {
        let docs = parse(TEXT).unwrap();
        let mut seen = std::collections::HashSet::new();
        for d in &docs {
            assert!(seen.insert(d.name), "{} documented twice", d.name);
            assert_eq!(d.name, d.name.to_ascii_lowercase());
            if let Some((parent, _)) = d.name.split_once('|') {
                assert!(
                    docs.iter().any(|p| p.name == parent),
                    "{} has no parent",
                    d.name
                );
            }
        }
        assert_eq!(all().len(), docs.len());
    }

    #[test]
    fn arguments_are_consistent() {
        for d in parse(TEXT).unwrap() {
            let mut args = Vec::new();
            walk(&d.args, &mut args);
            for a in args {
                let nested = matches!(a.kind, ArgType::OneOf | ArgType::Block);
                assert_eq!(nested, !a.args.is_empty(), "{}: {}", d.name, a.name);
                match a.key_spec_index {
                    Some(i) => assert!((i as usize) < d.key_specs.len(), "{}: {}", d.name, a.name),
                    None => assert_ne!(a.kind, ArgType::Key, "{}: {}", d.name, a.name),
                }
            }
        }
    }

    #[test]
    fn set_is_described() {
        let set = doc("SET").unwrap();
        assert_eq!(set.group, "string");
        assert_eq!(set.acl, acl::by_name("string").unwrap());
        let names: Vec<_> = set.args.iter().map(|a| a.name).collect();
        assert_eq!(names, ["key", "value", "condition", "get", "expiration"]);
        let cond = &set.args[2];
        assert_eq!(cond.kind, ArgType::OneOf);
        assert_eq!(cond.flags, argflags::OPTIONAL);
        assert_eq!(cond.since, Some("2.6.12"));
        assert_eq!(cond.args[0].token, Some("NX"));
        assert_eq!(
            set.key_specs,
            [KeySpecDoc {
                flags: keyflags::RW
                    | keyflags::ACCESS
                    | keyflags::UPDATE
                    | keyflags::VARIABLE_FLAGS,
                begin: BeginSearch::Index(1),
                find: FindKeys::Range {
                    lastkey: 0,
                    step: 1,
                    limit: 0
                },
            }]
        );
        let getset = doc("getset").unwrap();
        assert_eq!(getset.doc_flags, ["deprecated"]);
        assert_eq!(getset.deprecated_since, Some("6.2.0"));
        assert!(doc("nosuch").is_none());
    }

    #[test]
    fn malformed_lines_are_rejected() {
        assert!(parse("  : orphan summary").is_err());
        assert!(parse("get string 1.0.0 @nosuchcat").is_err());
        assert!(parse("get string 1.0.0\n  k RO i1 ?").is_err());
        assert!(parse("get string 1.0.0\n  - key wat").is_err());
        assert!(parse("get string 1.0.0\n  -- key key").is_err());
        assert!(parse("get string 1.0.0\n  - bare").is_err());
    }

    #[test]
    fn implicit_categories_follow_flags() {
        let names = |bits: u32| -> Vec<&str> {
            acl::NAMES
                .iter()
                .enumerate()
                .filter(|(i, _)| bits & (1 << i) != 0)
                .map(|(_, n)| *n)
                .collect()
        };
        let string = acl::by_name("string").unwrap();
        assert_eq!(
            names(acl::with_implicit(string, flags::READONLY | flags::FAST)),
            ["read", "string", "fast"]
        );
        assert_eq!(
            names(acl::with_implicit(0, flags::ADMIN)),
            ["admin", "slow", "dangerous"]
        );
    }
}
