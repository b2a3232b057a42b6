//! COMMAND and its subcommands: introspection of the command table.
//!
//! Names, arities, flags and the legacy key triple come from the execution
//! table ([`super::table`]), so only implemented commands are listed;
//! categories, tips, key specs and argument trees come from [`super::docs`].
//! The reply layouts are Redis 7.0's, sets and all.

use vireo_resp::{Args, OwnedArgs, ReplyBuf};
use vireo_store::glob::glob_match;

use super::docs::{
    self, acl, argflags, keyflags, ArgDoc, BeginSearch, CommandDoc, FindKeys, KeySpecDoc,
};
use super::flags::{self, *};
use super::{errors, is, spec, table, CommandSpec, Ctx, KeySpec};

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "command",
    arity: -1,
    flags: LOADING | STALE,
    keys: KeySpec::None,
    handler: command_all,
    subcommands: SUBCOMMANDS,
    members: None,
    getkeys: None,
    flags_fn: None,
}];

const SUBCOMMANDS: &[CommandSpec] = &[
    spec("command|count", 2, LOADING | STALE, KeySpec::None, count),
    spec("command|docs", -2, LOADING | STALE, KeySpec::None, docs_cmd),
    spec(
        "command|getkeys",
        -4,
        LOADING | STALE,
        KeySpec::None,
        getkeys,
    ),
    spec(
        "command|getkeysandflags",
        -4,
        LOADING | STALE,
        KeySpec::None,
        getkeys_and_flags,
    ),
    spec("command|help", 2, LOADING | STALE, KeySpec::None, help),
    spec("command|info", -2, LOADING | STALE, KeySpec::None, info),
    spec("command|list", -2, LOADING | STALE, KeySpec::None, list),
];

/// Flags Redis keeps out of COMMAND INFO.
const HIDDEN_FLAGS: u32 = MAY_REPLICATE | SENTINEL | PROTECTED;

/// COMMAND: describes every command, as COMMAND INFO with no names does.
fn command_all(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let all: Vec<_> = table().top_level().collect();
    ctx.out.array(all.len());
    for spec in all {
        write_info(ctx.out, spec);
    }
}

/// COMMAND COUNT: the number of top-level commands.
fn count(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    ctx.out.int(table().top_level().count() as i64);
}

/// COMMAND INFO [name ...]: the 10-element description of each named
/// command (`parent|sub` names a subcommand), null for unknown names; every
/// command without names.
fn info(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if args.len() == 2 {
        return command_all(ctx, args);
    }
    ctx.out.array(args.len() - 2);
    for name in args.iter().skip(2) {
        match table().lookup_full(name) {
            Some(c) => write_info(ctx.out, c.spec),
            None => ctx.out.null(),
        }
    }
}

/// COMMAND DOCS [name ...]: a map from command name to its documentation;
/// unknown names are left out, no names means every command.
fn docs_cmd(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let specs: Vec<&CommandSpec> = if args.len() == 2 {
        table().top_level().collect()
    } else {
        args.iter()
            .skip(2)
            .filter_map(|n| table().lookup_full(n))
            .map(|c| c.spec)
            .collect()
    };
    ctx.out.map(specs.len());
    for spec in specs {
        ctx.out.bulk(spec.name.as_bytes());
        write_docs(ctx.out, spec);
    }
}

/// COMMAND LIST [FILTERBY MODULE m | ACLCAT c | PATTERN p]: the names of
/// every command and subcommand, optionally filtered.
fn list(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let all = &table().all;
    let names: Vec<&str> = match args.len() {
        2 => all.iter().map(|s| s.name).collect(),
        5 if is(args.get(2), "filterby") => {
            let (kind, arg) = (args.get(3), args.get(4));
            if is(kind, "module") {
                Vec::new()
            } else if is(kind, "aclcat") {
                let cat = std::str::from_utf8(arg)
                    .ok()
                    .and_then(acl::by_name)
                    .unwrap_or(0);
                all.iter()
                    .filter(|s| categories(s) & cat != 0)
                    .map(|s| s.name)
                    .collect()
            } else if is(kind, "pattern") {
                all.iter()
                    .filter(|s| glob_match(arg, s.name.as_bytes(), true))
                    .map(|s| s.name)
                    .collect()
            } else {
                return ctx.out.error(errors::SYNTAX);
            }
        }
        _ => return ctx.out.error(errors::SYNTAX),
    };
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk(n.as_bytes());
    }
}

/// COMMAND GETKEYS command [arg ...]: the keys a full command line names.
fn getkeys(ctx: &mut Ctx<'_>, args: Args<'_>) {
    reply_keys(ctx.out, args, false);
}

/// COMMAND GETKEYSANDFLAGS command [arg ...]: the keys a full command line
/// names, each with its key-spec flags.
fn getkeys_and_flags(ctx: &mut Ctx<'_>, args: Args<'_>) {
    reply_keys(ctx.out, args, true);
}

/// COMMAND HELP: lists the COMMAND subcommands.
fn help(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    super::shared::reply_help(
        ctx,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Describe every command of the server.",
            "COUNT",
            "    Return the number of commands of the server.",
            "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
            "    Return the names of the commands, optionally filtered.",
            "INFO [<command-name> ...]",
            "    Describe the given commands.",
            "    Without names, every command is described.",
            "DOCS [<command-name> ...]",
            "    Return the documentation of the given commands.",
            "    Without names, every command is documented.",
            "GETKEYS <full-command>",
            "    Return the keys named by a full command line.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys named by a full command line, with their access flags.",
        ],
    );
}

/// The command's ACL categories: its declared ones plus those its flags
/// imply.
pub fn categories(spec: &CommandSpec) -> u32 {
    acl::with_implicit(docs::doc(spec.name).map_or(0, |d| d.acl), spec.flags)
}

/// The legacy (first, last, step) key triple.
fn key_triple(keys: KeySpec) -> (i32, i32, i32) {
    match keys {
        KeySpec::Range { first, last, step }
        | KeySpec::Custom {
            first, last, step, ..
        } => (first, last, step),
        KeySpec::None | KeySpec::All | KeySpec::Dynamic | KeySpec::Queued => (0, 0, 0),
    }
}

/// Whether the key positions depend on the arguments (Redis's
/// `movablekeys`): decided from the key specs, or without documentation
/// from the execution table.
fn movable_keys(spec: &CommandSpec, doc: Option<&CommandDoc>) -> bool {
    match doc {
        Some(d) => legacy_keys(&d.key_specs).1,
        None => matches!(spec.keys, KeySpec::Custom { .. }),
    }
}

/// Redis's derivation of the legacy (first, last, step) key triple from key
/// specs, and whether the keys are movable: only specs starting at an index
/// and covering a range count, and they must follow each other with step 1;
/// any other spec (or an incomplete one) makes the keys movable.
fn legacy_keys(specs: &[KeySpecDoc]) -> ((i32, i32, i32), bool) {
    let absolute = |pos: i32, lastkey: i32| {
        if lastkey >= 0 {
            lastkey.saturating_add(pos)
        } else {
            lastkey
        }
    };
    if let [KeySpecDoc {
        flags,
        begin: BeginSearch::Index(pos),
        find: FindKeys::Range { lastkey, step, .. },
    }] = specs
    {
        return (
            (*pos, absolute(*pos, *lastkey), *step),
            flags & keyflags::INCOMPLETE != 0,
        );
    }
    if specs.is_empty() {
        return ((0, 0, 0), false);
    }
    let mut movable = false;
    let mut first = i32::MAX;
    // The running last key, compared unsigned as Redis does so that "to
    // the end" (negative) wins.
    let mut last: u32 = 0;
    for ks in specs {
        let (BeginSearch::Index(pos), FindKeys::Range { lastkey, step, .. }) = (ks.begin, ks.find)
        else {
            movable = true;
            continue;
        };
        if step != 1 || (last != 0 && last != pos.wrapping_sub(1) as u32) {
            movable = true;
            continue;
        }
        if ks.flags & keyflags::INCOMPLETE != 0 {
            movable = true;
        }
        first = first.min(pos);
        last = last.max(absolute(pos, lastkey) as u32);
    }
    if first == i32::MAX {
        return ((0, 0, 0), true);
    }
    ((first, last as i32, 1), movable)
}

/// Status replies for the names of the bits set in `bits`, as a set.
fn write_flag_set<T: Copy + std::ops::BitAnd<Output = T> + PartialEq + Default>(
    out: &mut ReplyBuf,
    bits: T,
    names: &[(T, &str)],
) {
    let set: Vec<&str> = names
        .iter()
        .filter(|(b, _)| bits & *b != T::default())
        .map(|(_, n)| *n)
        .collect();
    out.set(set.len());
    for n in set {
        out.simple(n);
    }
}

/// The 10-element COMMAND INFO description of a command.
fn write_info(out: &mut ReplyBuf, spec: &CommandSpec) {
    let doc = docs::doc(spec.name);
    out.array(10);
    out.bulk(spec.name.as_bytes());
    out.int(spec.arity as i64);
    let mut names: Vec<&str> = flags::NAMES
        .iter()
        .filter(|(b, _)| spec.flags & b & !HIDDEN_FLAGS != 0)
        .map(|(_, n)| *n)
        .collect();
    if movable_keys(spec, doc) {
        let at = names
            .iter()
            .position(|n| *n == "allow_busy")
            .unwrap_or(names.len());
        names.insert(at, "movablekeys");
    }
    out.set(names.len());
    for n in names {
        out.simple(n);
    }
    let (first, last, step) = key_triple(spec.keys);
    for v in [first, last, step] {
        out.int(v as i64);
    }
    let cats = categories(spec);
    let cats: Vec<String> = acl::NAMES
        .iter()
        .enumerate()
        .filter(|(i, _)| cats & (1 << i) != 0)
        .map(|(_, n)| format!("@{n}"))
        .collect();
    out.set(cats.len());
    for c in cats {
        out.simple(&c);
    }
    let tips = doc.map_or(&[][..], |d| &d.tips);
    out.set(tips.len());
    for t in tips {
        out.bulk(t.as_bytes());
    }
    let key_specs = doc.map_or(&[][..], |d| &d.key_specs);
    out.set(key_specs.len());
    for ks in key_specs {
        write_key_spec(out, ks);
    }
    if spec.subcommands.is_empty() {
        out.set(0);
    } else {
        out.array(spec.subcommands.len());
        for sub in spec.subcommands {
            write_info(out, sub);
        }
    }
}

/// `type` and `spec` of a key spec's begin_search or find_keys.
fn write_typed(out: &mut ReplyBuf, kind: &str, fields: &[(&str, i64)], keyword: Option<&str>) {
    out.map(2);
    out.bulk(b"type");
    out.bulk(kind.as_bytes());
    out.bulk(b"spec");
    out.map(fields.len() + usize::from(keyword.is_some()));
    if let Some(k) = keyword {
        out.bulk(b"keyword");
        out.bulk(k.as_bytes());
    }
    for (name, v) in fields {
        out.bulk(name.as_bytes());
        out.int(*v);
    }
}

/// One key spec as a map of flags, begin_search and find_keys.
fn write_key_spec(out: &mut ReplyBuf, ks: &KeySpecDoc) {
    out.map(3);
    out.bulk(b"flags");
    write_flag_set(out, ks.flags, keyflags::NAMES);
    out.bulk(b"begin_search");
    match ks.begin {
        BeginSearch::Index(pos) => write_typed(out, "index", &[("index", pos.into())], None),
        BeginSearch::Keyword { keyword, startfrom } => write_typed(
            out,
            "keyword",
            &[("startfrom", startfrom.into())],
            Some(keyword),
        ),
        BeginSearch::Unknown => write_typed(out, "unknown", &[], None),
    }
    out.bulk(b"find_keys");
    match ks.find {
        FindKeys::Range {
            lastkey,
            step,
            limit,
        } => write_typed(
            out,
            "range",
            &[
                ("lastkey", lastkey.into()),
                ("keystep", step.into()),
                ("limit", limit.into()),
            ],
            None,
        ),
        FindKeys::Keynum {
            keynumidx,
            firstkey,
            step,
        } => write_typed(
            out,
            "keynum",
            &[
                ("keynumidx", keynumidx.into()),
                ("firstkey", firstkey.into()),
                ("keystep", step.into()),
            ],
            None,
        ),
        FindKeys::Unknown => write_typed(out, "unknown", &[], None),
    }
}

/// A bulk key followed by a bulk value, for the optional string fields of
/// the documentation maps.
fn write_field(out: &mut ReplyBuf, name: &str, value: Option<&str>) {
    if let Some(v) = value {
        out.bulk(name.as_bytes());
        out.bulk(v.as_bytes());
    }
}

/// The COMMAND DOCS map of one command, including its subcommands'.
fn write_docs(out: &mut ReplyBuf, spec: &CommandSpec) {
    let doc = docs::doc(spec.name);
    let summary = doc.and_then(|d| d.summary);
    let since = doc.map(|d| d.since);
    let complexity = doc.and_then(|d| d.complexity);
    let doc_flags = doc.map_or(&[][..], |d| &d.doc_flags);
    let deprecated_since = doc.and_then(|d| d.deprecated_since);
    let replaced_by = doc.and_then(|d| d.replaced_by);
    let args = doc.map_or(&[][..], |d| &d.args);
    let len = 1
        + [summary, since, complexity, deprecated_since, replaced_by]
            .iter()
            .filter(|f| f.is_some())
            .count()
        + usize::from(!doc_flags.is_empty())
        + usize::from(!args.is_empty())
        + usize::from(!spec.subcommands.is_empty());
    out.map(len);
    write_field(out, "summary", summary);
    write_field(out, "since", since);
    write_field(out, "group", Some(doc.map_or("generic", |d| d.group)));
    write_field(out, "complexity", complexity);
    if !doc_flags.is_empty() {
        out.bulk(b"doc_flags");
        out.set(doc_flags.len());
        for f in doc_flags {
            out.simple(f);
        }
    }
    write_field(out, "deprecated_since", deprecated_since);
    write_field(out, "replaced_by", replaced_by);
    if !args.is_empty() {
        out.bulk(b"arguments");
        write_args(out, args);
    }
    if !spec.subcommands.is_empty() {
        out.bulk(b"subcommands");
        out.map(spec.subcommands.len());
        for sub in spec.subcommands {
            out.bulk(sub.name.as_bytes());
            write_docs(out, sub);
        }
    }
}

/// An argument list of COMMAND DOCS, recursively.
fn write_args(out: &mut ReplyBuf, args: &[ArgDoc]) {
    out.array(args.len());
    for a in args {
        let nested = !a.args.is_empty();
        let len = 2
            + [a.token, a.since, a.deprecated_since]
                .iter()
                .filter(|f| f.is_some())
                .count()
            + usize::from(a.key_spec_index.is_some())
            + usize::from(a.flags != 0)
            + usize::from(nested);
        out.map(len);
        write_field(out, "name", Some(a.name));
        write_field(out, "type", Some(a.kind.name()));
        if let Some(i) = a.key_spec_index {
            out.bulk(b"key_spec_index");
            out.int(i.into());
        }
        write_field(out, "token", a.token);
        write_field(out, "since", a.since);
        write_field(out, "deprecated_since", a.deprecated_since);
        if a.flags != 0 {
            out.bulk(b"flags");
            write_flag_set(out, a.flags, argflags::NAMES);
        }
        if nested {
            out.bulk(b"arguments");
            write_args(out, &a.args);
        }
    }
}

/// Shared body of GETKEYS and GETKEYSANDFLAGS: resolves the command given
/// from argument 2 on, checks it has keys and a valid arity, and replies
/// its keys (with their flags when asked).
fn reply_keys(out: &mut ReplyBuf, args: Args<'_>, with_flags: bool) {
    let line: Vec<&[u8]> = args.iter().skip(2).collect();
    let t = table();
    // Only top-level names (`lookup`): `config|get` is spelled `config get`
    // here.
    let cmd = line
        .first()
        .and_then(|name| t.lookup(name))
        .and_then(|base| {
            if base.spec.subcommands.is_empty() || line.len() == 1 {
                Some(base)
            } else {
                t.lookup_sub(base.spec, line[1])
            }
        });
    let Some(cmd) = cmd else {
        return out.error("ERR Invalid command specified");
    };
    let spec = cmd.spec;
    let doc = docs::doc(spec.name);
    if !has_keys(spec, doc) {
        return out.error("ERR The command has no key arguments");
    }
    if !spec.arity_ok(line.len()) {
        return out.error("ERR Invalid number of arguments specified for command");
    }
    let keys = match find_keys(spec, doc, &line) {
        Some(k) => k,
        None if spec.has(NO_MANDATORY_KEYS) => Vec::new(),
        None => return out.error("ERR Invalid arguments specified for command"),
    };
    out.array(keys.len());
    for (pos, kflags) in keys {
        if with_flags {
            out.array(2);
            out.bulk(line[pos]);
            write_flag_set(out, kflags, keyflags::NAMES);
        } else {
            out.bulk(line[pos]);
        }
    }
}

/// True if the command declares at least one real key.
fn has_keys(spec: &CommandSpec, doc: Option<&CommandDoc>) -> bool {
    match doc {
        Some(d) => d
            .key_specs
            .iter()
            .any(|ks| ks.flags & keyflags::NOT_KEY == 0),
        None => matches!(spec.keys, KeySpec::Range { .. } | KeySpec::Custom { .. }),
    }
}

/// The (position, flags) of each key in a command line (`line[0]` is the
/// command name), or None when the arguments do not locate the keys; what
/// ACLs check keys against too, as Redis's `getKeysFromCommandWithSpecs`
/// (`doc` is the command's [`docs::doc`], which callers may cache).
///
/// Key specs are followed as Redis does. A spec that cannot be followed
/// (unknown begin search, as for SORT's STORE) hands over to the execution
/// table's key finder; each key it finds takes the flags of the index spec
/// at its position, or else of the last spec. Commands whose flags vary
/// with the arguments (SET with or without GET) get them computed.
pub fn find_keys(
    spec: &CommandSpec,
    doc: Option<&CommandDoc>,
    line: &[&[u8]],
) -> Option<Vec<(usize, u32)>> {
    let Some(doc) = doc else {
        let owned = OwnedArgs::from_slices(line.iter());
        let found = spec.reported_keys(owned.as_args());
        return (!found.is_empty()).then(|| found.into_iter().map(|p| (p, 0)).collect());
    };
    // An incomplete spec (MIGRATE's KEYS) hands over to the command's own
    // finder, as Redis's does.
    let incomplete = doc
        .key_specs
        .iter()
        .any(|ks| ks.flags & keyflags::INCOMPLETE != 0);
    let from_specs = if incomplete {
        None
    } else {
        keys_from_specs(&doc.key_specs, line)
    };
    let mut keys = match from_specs {
        Some(k) => k,
        None if incomplete
            || doc
                .key_specs
                .iter()
                .any(|ks| ks.begin == BeginSearch::Unknown) =>
        {
            let owned = OwnedArgs::from_slices(line.iter());
            let last = doc.key_specs.last().map_or(0, |ks| ks.flags);
            spec.reported_keys(owned.as_args())
                .into_iter()
                .map(|p| {
                    let at = doc
                        .key_specs
                        .iter()
                        .find(|ks| ks.begin == BeginSearch::Index(p as i32));
                    (p, at.map_or(last, |ks| ks.flags))
                })
                .collect()
        }
        None => return None,
    };
    if doc
        .key_specs
        .iter()
        .any(|ks| ks.flags & keyflags::VARIABLE_FLAGS != 0)
    {
        for k in &mut keys {
            k.1 = variable_key_flags(spec.name, line.len(), |i| line[i]).unwrap_or(k.1);
        }
    }
    Some(keys)
}

/// Key flags of commands whose key specs say `variable_flags`: SET reads
/// the old value only with GET.
/// The line is `argc` arguments read through `arg`, so the ACL check can
/// pass its request buffer without collecting it.
pub fn variable_key_flags<'a>(
    name: &str,
    argc: usize,
    arg: impl Fn(usize) -> &'a [u8],
) -> Option<u32> {
    VariableFlags::of(name).map(|v| v.key_flags(argc, arg))
}

/// The commands whose key flags depend on their arguments, named once so
/// a hot path (the ACL check) decides by value rather than by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VariableFlags {
    /// SET: reads the old value only with GET.
    Set,
    /// BITFIELD: writes unless every operation is a GET.
    Bitfield,
}

impl VariableFlags {
    /// The kind of command `name` (the table's name), if its flags vary.
    pub fn of(name: &str) -> Option<VariableFlags> {
        match name {
            "set" => Some(VariableFlags::Set),
            "bitfield" => Some(VariableFlags::Bitfield),
            _ => None,
        }
    }

    /// The key flags of a line of `argc` arguments read through `arg`
    /// (inline: the ACL check of a plain SET decides it by `argc` alone).
    #[inline]
    pub fn key_flags<'a>(self, argc: usize, arg: impl Fn(usize) -> &'a [u8]) -> u32 {
        match self {
            VariableFlags::Set if (3..argc).any(|i| is(arg(i), "get")) => {
                keyflags::RW | keyflags::ACCESS | keyflags::UPDATE
            }
            VariableFlags::Set => keyflags::OW | keyflags::UPDATE,
            VariableFlags::Bitfield if bitfield_reads_only(argc, arg) => {
                keyflags::RO | keyflags::ACCESS
            }
            VariableFlags::Bitfield => keyflags::RW | keyflags::ACCESS | keyflags::UPDATE,
        }
    }
}

/// True when BITFIELD's operations are all GETs (Redis's
/// `bitfieldGetKeys`: anything it cannot read counts as a write).
fn bitfield_reads_only<'a>(argc: usize, arg: impl Fn(usize) -> &'a [u8]) -> bool {
    let mut i = 2;
    while i < argc {
        let more = argc - i - 1;
        let op = arg(i);
        if is(op, "get") && more >= 2 {
            i += 3;
        } else if is(op, "overflow") && more >= 1 {
            i += 2;
        } else {
            return false;
        }
    }
    true
}

/// Follows key specs over a command line (Redis's
/// `getKeysUsingKeySpecs`); None when a spec cannot be followed or the
/// arguments are inconsistent with it.
fn keys_from_specs(specs: &[KeySpecDoc], line: &[&[u8]]) -> Option<Vec<(usize, u32)>> {
    let argc = line.len() as i64;
    let mut keys = Vec::new();
    for ks in specs {
        if ks.flags & keyflags::NOT_KEY != 0 {
            continue;
        }
        let first: i64 = match ks.begin {
            BeginSearch::Index(pos) => pos.into(),
            BeginSearch::Keyword { keyword, startfrom } => {
                // Forwards up to (not including) the last argument, or
                // backwards down to (not including) the command's first
                // argument, as Redis scans.
                let hit = if startfrom > 0 {
                    (i64::from(startfrom)..argc - 1).find(|&i| is(line[i as usize], keyword))
                } else {
                    let start = argc + i64::from(startfrom);
                    let start = if start < argc { start } else { 0 };
                    (2..=start).rev().find(|&i| is(line[i as usize], keyword))
                };
                match hit {
                    Some(i) => i + 1,
                    None => continue,
                }
            }
            BeginSearch::Unknown => return None,
        };
        let (first, last, step) = match ks.find {
            FindKeys::Range {
                lastkey,
                step,
                limit,
            } => {
                let last = if lastkey >= 0 {
                    first + i64::from(lastkey)
                } else if limit == 0 {
                    argc + i64::from(lastkey)
                } else {
                    first + (argc - first) / i64::from(limit) + i64::from(lastkey)
                };
                (first, last, i64::from(step))
            }
            FindKeys::Keynum {
                keynumidx,
                firstkey,
                step,
            } => {
                let idx = first + i64::from(keynumidx);
                if idx >= argc {
                    return None;
                }
                let n = vireo_resp::number::parse_i64(line[idx as usize]).filter(|&n| n >= 0)?;
                let first = first + i64::from(firstkey);
                (first, first.checked_add(n)? - 1, i64::from(step))
            }
            FindKeys::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc || step <= 0 {
            return None;
        }
        let mut i = first;
        while i <= last {
            keys.push((i as usize, ks.flags));
            i += step;
        }
    }
    Some(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> Vec<&[u8]> {
        s.split(' ').map(str::as_bytes).collect()
    }

    fn positions(name: &str, cmd: &str) -> Option<Vec<usize>> {
        let doc = docs::doc(name).unwrap();
        keys_from_specs(&doc.key_specs, &line(cmd)).map(|k| k.into_iter().map(|(p, _)| p).collect())
    }

    #[test]
    fn key_specs_locate_keys() {
        assert_eq!(positions("get", "get k"), Some(vec![1]));
        assert_eq!(positions("mset", "mset a 1 b 2"), Some(vec![1, 3]));
        assert_eq!(
            positions("sdiffstore", "sdiffstore d a b"),
            Some(vec![1, 2, 3])
        );
        assert_eq!(
            positions("zunionstore", "zunionstore d 2 a b weights 1 2"),
            Some(vec![1, 3, 4])
        );
        assert_eq!(positions("blmpop", "blmpop 0 2 a b left"), Some(vec![3, 4]));
        assert_eq!(positions("blpop", "blpop a b 0"), Some(vec![1, 2]));
        // A key count of zero, too large or not a number: no keys.
        assert_eq!(positions("zunionstore", "zunionstore d 0 a"), None);
        assert_eq!(positions("zunionstore", "zunionstore d 5 a"), None);
        assert_eq!(positions("zunionstore", "zunionstore d x a"), None);
        assert_eq!(positions("sort", "sort k store d"), None);
    }

    #[test]
    fn keyword_search_runs_both_ways() {
        let fwd = [KeySpecDoc {
            flags: keyflags::RO,
            begin: BeginSearch::Keyword {
                keyword: "STREAMS",
                startfrom: 1,
            },
            find: FindKeys::Range {
                lastkey: -1,
                step: 1,
                limit: 2,
            },
        }];
        let found = keys_from_specs(&fwd, &line("xread count 2 streams a b 0 0")).unwrap();
        assert_eq!(found.iter().map(|k| k.0).collect::<Vec<_>>(), [4, 5]);
        let back = [KeySpecDoc {
            begin: BeginSearch::Keyword {
                keyword: "STORE",
                startfrom: -2,
            },
            find: FindKeys::Range {
                lastkey: 0,
                step: 1,
                limit: 0,
            },
            ..fwd[0]
        }];
        let found = keys_from_specs(&back, &line("georadius k 1 2 3 m store dst")).unwrap();
        assert_eq!(found.iter().map(|k| k.0).collect::<Vec<_>>(), [7]);
        assert_eq!(
            keys_from_specs(&back, &line("georadius k 1 2 3 m")),
            Some(vec![])
        );
    }

    #[test]
    fn set_flags_depend_on_get() {
        let set = table().lookup(b"set").unwrap().spec;
        let doc = docs::doc("set");
        let plain = find_keys(set, doc, &line("set k v ex 10")).unwrap();
        assert_eq!(plain, [(1, keyflags::OW | keyflags::UPDATE)]);
        let get = find_keys(set, doc, &line("set k v GET")).unwrap();
        assert_eq!(
            get,
            [(1, keyflags::RW | keyflags::ACCESS | keyflags::UPDATE)]
        );
    }

    /// Every implemented command is documented, and its key triple agrees
    /// with the one Redis derives from the key specs.
    #[test]
    fn the_table_is_documented_consistently() {
        let mut wrong = Vec::new();
        for spec in &table().all {
            let Some(doc) = docs::doc(spec.name) else {
                wrong.push(format!("{}: no documentation", spec.name));
                continue;
            };
            let (triple, movable) = legacy_keys(&doc.key_specs);
            // A command whose keys are only known while it runs (SORT's BY
            // and GET patterns) locks the whole keyspace instead.
            if movable && matches!(spec.keys, KeySpec::All) {
                continue;
            }
            if triple != key_triple(spec.keys) {
                wrong.push(format!(
                    "{}: table {:?}, key specs {triple:?}",
                    spec.name,
                    key_triple(spec.keys)
                ));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn legacy_triples_from_key_specs() {
        let triple = |name: &str| legacy_keys(&docs::doc(name).unwrap().key_specs);
        assert_eq!(triple("get"), ((1, 1, 1), false));
        assert_eq!(triple("mset"), ((1, -1, 2), false));
        assert_eq!(triple("blpop"), ((1, -2, 1), false));
        assert_eq!(triple("sdiffstore"), ((1, -1, 1), false));
        assert_eq!(triple("rename"), ((1, 2, 1), false));
        assert_eq!(triple("zunionstore"), ((1, 1, 1), true));
        assert_eq!(triple("sort"), ((1, 1, 1), true));
        assert_eq!(triple("blmpop"), ((0, 0, 0), true));
        assert_eq!(triple("keys"), ((0, 0, 0), false));
    }
}
