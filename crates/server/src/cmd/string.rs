//! String commands (Redis's `t_string.c`): GET/SET and their variants,
//! MGET/MSET, APPEND, STRLEN, GETRANGE/SETRANGE, the INCR family,
//! INCRBYFLOAT and LCS.
//!
//! Values are [`StrValue`]s: SET-like commands store them with the most
//! compact encoding (`int` when the bytes are a canonical integer), in-place
//! edits (APPEND, SETRANGE) turn them `raw`, as Redis's encodings do.
//!
//! LCS builds Redis's dynamic-programming table of `(len(a)+1)*(len(b)+1)`
//! `u32` cells. Like Redis 7.0.15 it refuses, with an error reply instead of
//! aborting, a table whose byte size exceeds `proto-max-bulk-len` (512 MB by
//! default) or that cannot be allocated; sizes are computed with checked
//! arithmetic.

use crate::exec::notify::class as ev;
use std::ops::Range;
use std::sync::atomic::Ordering;

use vireo_resp::number::parse_i64;
use vireo_resp::{Args, ReplyBuf};
use vireo_store::long_double::{add_long_doubles, check_long_double, LongDoubleError};
use vireo_store::{Entry, Keys, StrRef, StrValue, Value, ValueRef};

use super::{errors, flags::*, is, spec, CommandSpec, Ctx, KeySpec, KEY1};

/// This family's commands, with Redis 7.0's arities, flags and key triples.
pub const COMMANDS: &[CommandSpec] = &[
    spec("get", 2, READONLY | FAST, KEY1, get),
    spec("set", -3, WRITE | DENYOOM, KEY1, set),
    spec("setnx", 3, WRITE | DENYOOM | FAST, KEY1, setnx),
    spec("setex", 4, WRITE | DENYOOM, KEY1, setex),
    spec("psetex", 4, WRITE | DENYOOM, KEY1, psetex),
    spec("getset", 3, WRITE | DENYOOM | FAST, KEY1, getset),
    spec("getdel", 2, WRITE | FAST, KEY1, getdel),
    spec("getex", -2, WRITE | FAST, KEY1, getex),
    spec("mget", -2, READONLY | FAST, super::ALL_ARGS_KEYS, mget),
    spec("mset", -3, WRITE | DENYOOM, PAIR_KEYS, mset),
    spec("msetnx", -3, WRITE | DENYOOM, PAIR_KEYS, msetnx),
    spec("append", 3, WRITE | DENYOOM | FAST, KEY1, append),
    spec("strlen", 2, READONLY | FAST, KEY1, strlen),
    spec("getrange", 4, READONLY, KEY1, getrange),
    spec("substr", 4, READONLY, KEY1, getrange),
    spec("setrange", 4, WRITE | DENYOOM, KEY1, setrange),
    spec("incr", 2, WRITE | DENYOOM | FAST, KEY1, incr),
    spec("decr", 2, WRITE | DENYOOM | FAST, KEY1, decr),
    spec("incrby", 3, WRITE | DENYOOM | FAST, KEY1, incrby),
    spec("decrby", 3, WRITE | DENYOOM | FAST, KEY1, decrby),
    spec("incrbyfloat", 3, WRITE | DENYOOM | FAST, KEY1, incrbyfloat),
    spec(
        "lcs",
        -3,
        READONLY,
        KeySpec::Range {
            first: 1,
            last: 2,
            step: 1,
        },
        lcs,
    ),
];

/// Keys of MSET/MSETNX: every other argument from 1 (`key value key value …`).
const PAIR_KEYS: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 2,
};

/// Redis's `checkStringLength` error.
const TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// The key exists but does not hold a string: the caller replies WRONGTYPE.
struct WrongType;

/// The string stored under `key` for reading (counting a keyspace hit or
/// miss, like Redis's `lookupKeyRead`): `Ok(None)` when the key is missing,
/// `Err(WrongType)` when it holds another type.
fn read<'k>(
    keys: &'k mut Keys<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<StrRef<'k>>, WrongType> {
    match keys.get_read(db, key).map(|e| e.value()) {
        None => Ok(None),
        Some(ValueRef::Str(s)) => Ok(Some(s)),
        Some(_) => Err(WrongType),
    }
}

/// The entry holding a string under `key`, for commands that replace the
/// string whole (INCR and friends; `lookupKeyWrite`).
fn write_entry<'k>(
    keys: &'k mut Keys<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'k mut Entry>, WrongType> {
    match keys.get_mut(db, key) {
        None => Ok(None),
        Some(e) if matches!(e.value(), ValueRef::Str(_)) => Ok(Some(e)),
        Some(_) => Err(WrongType),
    }
}

/// The string under `key` for changing in place (APPEND, SETRANGE).
fn write_in_place<'k>(
    keys: &'k mut Keys<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'k mut StrValue>, WrongType> {
    match keys.get_mut(db, key) {
        None => Ok(None),
        Some(e) => e.str_mut().map(Some).ok_or(WrongType),
    }
}

/// Replies a string value as a bulk string.
fn reply_str(out: &mut ReplyBuf, s: StrRef<'_>) {
    match s {
        StrRef::Int(n) => out.bulk_int(n),
        StrRef::Bytes { data, .. } => out.bulk(data),
    }
}

/// Redis's `getGenericCommand`: replies the string at `key` (null when
/// missing). Err when the key holds another type (WRONGTYPE was replied).
fn reply_value(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<(), WrongType> {
    match read(&mut ctx.keys, ctx.db, key) {
        Ok(Some(s)) => reply_str(ctx.out, s),
        Ok(None) => ctx.out.null(),
        Err(WrongType) => {
            ctx.out.error(errors::WRONGTYPE);
            return Err(WrongType);
        }
    }
    Ok(())
}

/// The configured `proto-max-bulk-len`: the longest string a command may
/// build, and the most transient memory LCS may use.
fn max_string_len(ctx: &Ctx<'_>) -> u64 {
    ctx.server
        .config
        .hot
        .proto_max_bulk_len
        .load(Ordering::Relaxed)
}

/// Redis's `checkStringLength`: true if a string of `len + extra` bytes is
/// within `limit`; otherwise replies the error and returns false.
fn check_string_len(out: &mut ReplyBuf, limit: u64, len: u64, extra: u64) -> bool {
    match len.checked_add(extra) {
        Some(total) if total <= limit => true,
        _ => {
            out.error(TOO_LONG);
            false
        }
    }
}

// ---------------------------------------------------------------------------
// SET / GETEX option parsing and expire times.

/// How a TTL argument is expressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ExpireKind {
    /// EX: seconds from now.
    Ex,
    /// PX: milliseconds from now.
    Px,
    /// EXAT: absolute Unix time in seconds.
    ExAt,
    /// PXAT: absolute Unix time in milliseconds.
    PxAt,
}

impl ExpireKind {
    /// The option keyword's kind, if `opt` is one.
    fn from_keyword(opt: &[u8]) -> Option<Self> {
        [
            ("ex", ExpireKind::Ex),
            ("px", ExpireKind::Px),
            ("exat", ExpireKind::ExAt),
            ("pxat", ExpireKind::PxAt),
        ]
        .into_iter()
        .find(|(name, _)| is(opt, name))
        .map(|(_, kind)| kind)
    }

    /// True for the absolute forms (EXAT, PXAT).
    fn is_absolute(self) -> bool {
        matches!(self, ExpireKind::ExAt | ExpireKind::PxAt)
    }
}

/// Which command's options are being parsed: SET takes NX/XX/GET/KEEPTTL,
/// GETEX takes PERSIST; both take the four expire forms.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OptsFor {
    Set,
    GetEx,
}

/// Parsed options of SET (and, through fixed values, SETNX/SETEX/PSETEX)
/// or GETEX.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct StrOpts<'a> {
    /// NX: only set a missing key.
    nx: bool,
    /// XX: only set an existing key.
    xx: bool,
    /// GET: reply the old value instead of OK.
    get: bool,
    /// KEEPTTL: keep the key's current TTL.
    keepttl: bool,
    /// PERSIST (GETEX): remove the TTL.
    persist: bool,
    /// The TTL option and its (not yet parsed) argument.
    expire: Option<(ExpireKind, &'a [u8])>,
}

/// Parses SET/GETEX options the way Redis 7.0 does: an option that
/// conflicts with one already given (NX with XX, KEEPTTL or PERSIST with an
/// expire, two different expire forms), an option the command does not
/// take, an unknown word or a missing expire argument is a syntax error
/// (`None`). Repeating the same option is allowed (the last expire wins),
/// and NX with GET is allowed.
fn parse_opts<'a>(mut opts: impl Iterator<Item = &'a [u8]>, mode: OptsFor) -> Option<StrOpts<'a>> {
    let mut o = StrOpts::default();
    let set = mode == OptsFor::Set;
    while let Some(opt) = opts.next() {
        if set && is(opt, "nx") && !o.xx {
            o.nx = true;
        } else if set && is(opt, "xx") && !o.nx {
            o.xx = true;
        } else if set && is(opt, "get") {
            o.get = true;
        } else if set && is(opt, "keepttl") && o.expire.is_none() {
            o.keepttl = true;
        } else if !set && is(opt, "persist") && o.expire.is_none() {
            o.persist = true;
        } else {
            let kind = ExpireKind::from_keyword(opt)?;
            let other_kind = matches!(o.expire, Some((k, _)) if k != kind);
            let compatible = !o.keepttl && !o.persist && !other_kind;
            if !compatible {
                return None;
            }
            o.expire = Some((kind, opts.next()?));
        }
    }
    Some(o)
}

/// Converts a TTL option's value to an absolute Unix time in milliseconds,
/// relative forms counting from `now_ms`. None when Redis calls it an
/// invalid expire time: not positive, or overflowing once converted.
fn expire_at_ms(kind: ExpireKind, n: i64, now_ms: u64) -> Option<u64> {
    if n <= 0 {
        return None;
    }
    let ms = match kind {
        ExpireKind::Ex | ExpireKind::ExAt => n.checked_mul(1000)?,
        ExpireKind::Px | ExpireKind::PxAt => n,
    };
    let at = if kind.is_absolute() {
        ms
    } else {
        ms.checked_add(i64::try_from(now_ms).ok()?)?
    };
    u64::try_from(at).ok()
}

/// Parses and validates an optional TTL option (integer, then range),
/// replying the error on failure. `cmd` names the command in the
/// "invalid expire time" error.
fn resolve_expire(
    out: &mut ReplyBuf,
    now_ms: u64,
    expire: Option<(ExpireKind, &[u8])>,
    cmd: &str,
) -> Result<Option<u64>, ()> {
    let Some((kind, arg)) = expire else {
        return Ok(None);
    };
    let Some(n) = parse_i64(arg) else {
        out.error(errors::NOT_INT);
        return Err(());
    };
    match expire_at_ms(kind, n, now_ms) {
        Some(at) => Ok(Some(at)),
        None => {
            out.error(&format!("ERR invalid expire time in '{cmd}' command"));
            Err(())
        }
    }
}

// ---------------------------------------------------------------------------
// GET / SET and variants.

/// The replies of a SET-like command: SET answers OK or null, SETNX 1 or 0.
#[derive(Clone, Copy)]
enum SetReplies {
    OkOrNull,
    OneOrZero,
}

/// Redis's `setGenericCommand`: validates the TTL, answers the old value
/// for GET (WRONGTYPE stops everything), applies NX/XX, stores `value`
/// (dropping the TTL unless KEEPTTL) and sets the new TTL.
fn set_generic(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    value: &[u8],
    opts: &StrOpts<'_>,
    cmd: &str,
    replies: SetReplies,
) {
    let Ok(expire_at) = resolve_expire(ctx.out, ctx.keys.now(), opts.expire, cmd) else {
        return;
    };
    if opts.get && reply_value(ctx, key).is_err() {
        return;
    }
    // Only NX and XX need to know beforehand (a plain SET's store looks
    // the key up itself: one lookup per SET, not two).
    let applies = !(opts.nx || opts.xx) || ctx.keys.contains(ctx.db, key) == opts.xx;
    if applies {
        if opts.keepttl {
            let value = Value::Str(StrValue::from_bytes(value));
            ctx.keys.set_keep_ttl(ctx.db, key, value);
        } else {
            // EX/PX/... and KEEPTTL exclude each other: the TTL goes in
            // with the value.
            ctx.keys.set_str(ctx.db, key, value, expire_at);
        }
        if let Some(at) = expire_at {
            ctx.propagate_set_pxat(key, value, at);
        }
        ctx.modified(key);
        ctx.notify(ev::STRING, "set", key);
        if expire_at.is_some() {
            ctx.notify(ev::GENERIC, "expire", key);
        }
    }
    if !opts.get {
        match (replies, applies) {
            (SetReplies::OkOrNull, true) => ctx.out.ok(),
            (SetReplies::OkOrNull, false) => ctx.out.null(),
            (SetReplies::OneOrZero, applied) => ctx.out.int(applied as i64),
        }
    }
}

/// GET key: the string value, null if the key is missing.
fn get(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let _ = reply_value(ctx, args.get(1));
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT ts|PXAT ts|KEEPTTL]: stores
/// the value; OK, or null when NX/XX prevented it, or the old value with GET.
fn set(ctx: &mut Ctx<'_>, args: Args<'_>) {
    // (Most SETs have no options: skip the iterator, 110 instructions.)
    let opts = match args.len() {
        3 => Some(StrOpts::default()),
        _ => parse_opts(args.iter().skip(3), OptsFor::Set),
    };
    let Some(opts) = opts else {
        return ctx.out.error(errors::SYNTAX);
    };
    set_generic(
        ctx,
        args.get(1),
        args.get(2),
        &opts,
        "set",
        SetReplies::OkOrNull,
    );
}

/// SETNX key value: sets the key only if it does not exist; 1 if it did, 0
/// otherwise.
fn setnx(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let opts = StrOpts {
        nx: true,
        ..StrOpts::default()
    };
    set_generic(
        ctx,
        args.get(1),
        args.get(2),
        &opts,
        "setnx",
        SetReplies::OneOrZero,
    );
}

/// SETEX/PSETEX: sets the value with a TTL in the given unit.
fn set_with_ttl(ctx: &mut Ctx<'_>, args: Args<'_>, kind: ExpireKind, cmd: &str) {
    let opts = StrOpts {
        expire: Some((kind, args.get(2))),
        ..StrOpts::default()
    };
    set_generic(
        ctx,
        args.get(1),
        args.get(3),
        &opts,
        cmd,
        SetReplies::OkOrNull,
    );
}

/// SETEX key seconds value: SET with a TTL in seconds.
fn setex(ctx: &mut Ctx<'_>, args: Args<'_>) {
    set_with_ttl(ctx, args, ExpireKind::Ex, "setex");
}

/// PSETEX key milliseconds value: SET with a TTL in milliseconds.
fn psetex(ctx: &mut Ctx<'_>, args: Args<'_>) {
    set_with_ttl(ctx, args, ExpireKind::Px, "psetex");
}

/// GETSET key value: sets the value (dropping any TTL) and replies the old
/// one, or null.
fn getset(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    if reply_value(ctx, key).is_err() {
        return;
    }
    ctx.keys
        .set(ctx.db, key, Value::Str(StrValue::from_bytes(args.get(2))));
    ctx.propagate(&[b"SET", key, args.get(2)]);
    ctx.modified(key);
    ctx.notify(ev::STRING, "set", key);
}

/// GETDEL key: replies the value (or null) and deletes the key.
fn getdel(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    if reply_value(ctx, key).is_err() {
        return;
    }
    if ctx.keys.remove(ctx.db, key).is_some() {
        let lazy = ctx.server.config.lazyfree_lazy_user_del();
        ctx.propagate_del(key, lazy);
        ctx.modified(key);
        ctx.notify(ev::GENERIC, "del", key);
    }
}

/// GETEX key [EX s|PX ms|EXAT ts|PXAT ts|PERSIST]: replies the value and
/// sets or removes its TTL; an absolute time already past deletes the key.
fn getex(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(opts) = parse_opts(args.iter().skip(2), OptsFor::GetEx) else {
        return ctx.out.error(errors::SYNTAX);
    };
    let key = args.get(1);
    let now = ctx.keys.now();
    let expire_at = match read(&mut ctx.keys, ctx.db, key) {
        Ok(None) => return ctx.out.null(),
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(Some(s)) => {
            let Ok(at) = resolve_expire(ctx.out, now, opts.expire, "getex") else {
                return;
            };
            reply_str(ctx.out, s);
            at
        }
    };
    let absolute = opts.expire.is_some_and(|(kind, _)| kind.is_absolute());
    let event = match (expire_at, opts.persist) {
        (Some(at), _) if absolute && at <= now => "del",
        (Some(_), _) => "expire",
        _ => "persist",
    };
    let changed = match expire_at {
        Some(at) if absolute && at <= now => {
            let removed = ctx.keys.delete_expired(ctx.db, key);
            if removed {
                let lazy = ctx.server.config.lazyfree_lazy_expire();
                ctx.propagate_del(key, lazy);
            }
            removed
        }
        Some(at) => {
            let set = ctx.keys.set_expire(ctx.db, key, at);
            if set {
                ctx.propagate_pexpireat(key, at, &[]);
            }
            set
        }
        None => {
            let persisted = opts.persist && ctx.keys.persist(ctx.db, key);
            if persisted {
                ctx.propagate(&[b"PERSIST", key]);
            }
            persisted
        }
    };
    if changed {
        ctx.modified(key);
        ctx.notify(ev::GENERIC, event, key);
    }
}

/// MGET key [key …]: the value of each key; null for missing keys and keys
/// of other types.
fn mget(ctx: &mut Ctx<'_>, args: Args<'_>) {
    ctx.out.array(args.len() - 1);
    for key in args.iter().skip(1) {
        match read(&mut ctx.keys, ctx.db, key) {
            Ok(Some(s)) => reply_str(ctx.out, s),
            Ok(None) | Err(WrongType) => ctx.out.null(),
        }
    }
}

/// MSET/MSETNX: checks the key/value pairing, and with `nx` that no key
/// exists; then stores every pair (dropping TTLs). False if nothing was set
/// (an error or the NX refusal was replied; the caller replies success).
fn mset_generic(ctx: &mut Ctx<'_>, args: Args<'_>, nx: bool, cmd: &str) -> bool {
    // An even count (with the name) leaves a key without its value.
    if args.len() & 1 == 0 {
        ctx.out.error(&format!(
            "ERR wrong number of arguments for '{cmd}' command"
        ));
        return false;
    }
    let pairs = (1..args.len())
        .step_by(2)
        .map(|i| (args.get(i), args.get(i + 1)));
    if nx && pairs.clone().any(|(key, _)| ctx.keys.contains(ctx.db, key)) {
        ctx.out.int(0);
        return false;
    }
    for (key, value) in pairs {
        ctx.keys
            .set(ctx.db, key, Value::Str(StrValue::from_bytes(value)));
        ctx.modified(key);
        ctx.notify(ev::STRING, "set", key);
    }
    true
}

/// MSET key value [key value …]: sets every pair; always OK.
fn mset(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if mset_generic(ctx, args, false, "mset") {
        ctx.out.ok();
    }
}

/// MSETNX key value [key value …]: sets every pair only if none of the keys
/// exists; 1 if set, 0 otherwise.
fn msetnx(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if mset_generic(ctx, args, true, "msetnx") {
        ctx.out.int(1);
    }
}

// ---------------------------------------------------------------------------
// APPEND, STRLEN, GETRANGE, SETRANGE.

/// APPEND key value: appends to the string (creating it); replies the new
/// length.
fn append(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let (key, value) = (args.get(1), args.get(2));
    let limit = max_string_len(ctx);
    let len = match write_in_place(&mut ctx.keys, ctx.db, key) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(None) => {
            ctx.keys.set_str(ctx.db, key, value, None);
            value.len()
        }
        Ok(Some(s)) => {
            if !check_string_len(ctx.out, limit, s.len() as u64, value.len() as u64) {
                return;
            }
            let buf = s.bytes_mut();
            buf.extend_from_slice(value);
            buf.len()
        }
    };
    ctx.modified(key);
    ctx.notify(ev::STRING, "append", key);
    ctx.out.int(len as i64);
}

/// STRLEN key: the string's length in bytes, 0 for a missing key.
fn strlen(ctx: &mut Ctx<'_>, args: Args<'_>) {
    match read(&mut ctx.keys, ctx.db, args.get(1)) {
        Ok(Some(s)) => ctx.out.int(s.len() as i64),
        Ok(None) => ctx.out.int(0),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// The byte range GETRANGE returns for inclusive `start..=end` over a
/// string of `len` bytes, with Redis 7.0's rules: negative indexes count
/// from the end, both are clamped into the string, and an empty range is
/// `None`. (A negative `end` beyond the start clamps to 0, so
/// `GETRANGE k 0 -100` is the first byte, as in Redis 7.0.)
fn substr_range(len: usize, start: i64, end: i64) -> Option<Range<usize>> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let len = i64::try_from(len).ok()?;
    // Adding a negative index to a non-negative length cannot overflow.
    let from_end = |i: i64| if i < 0 { len + i } else { i };
    let start = from_end(start).max(0);
    let end = from_end(end).max(0).min(len - 1);
    if len == 0 || start > end {
        return None;
    }
    Some(usize::try_from(start).ok()?..usize::try_from(end).ok()? + 1)
}

/// GETRANGE key start end (and its old name SUBSTR): the substring between
/// two inclusive offsets; empty for a missing key or an empty range.
fn getrange(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(start) = ctx.int_arg(args.get(2)) else {
        return;
    };
    let Some(end) = ctx.int_arg(args.get(3)) else {
        return;
    };
    match read(&mut ctx.keys, ctx.db, args.get(1)) {
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
        Ok(None) => ctx.out.bulk(b""),
        Ok(Some(s)) => {
            let mut scratch = itoa::Buffer::new();
            let bytes = s.as_bytes(&mut scratch);
            match substr_range(bytes.len(), start, end) {
                Some(r) => ctx.out.bulk(&bytes[r]),
                None => ctx.out.bulk(b""),
            }
        }
    }
}

/// Copies `value` into `buf` at `offset`, zero-padding `buf` up to it.
fn write_at(buf: &mut Vec<u8>, offset: usize, value: &[u8]) {
    let end = offset + value.len();
    if buf.len() < end {
        buf.resize(end, 0);
    }
    buf[offset..end].copy_from_slice(value);
}

/// SETRANGE key offset value: overwrites part of the string starting at
/// `offset`, zero-padding as needed (creating the key unless `value` is
/// empty); replies the new length.
fn setrange(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let (key, value) = (args.get(1), args.get(3));
    let limit = max_string_len(ctx);
    let Some(offset) = ctx.int_arg(args.get(2)) else {
        return;
    };
    let Ok(offset) = u64::try_from(offset) else {
        return ctx.out.error("ERR offset is out of range");
    };
    let found = match write_in_place(&mut ctx.keys, ctx.db, key) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(found) => found,
    };
    if value.is_empty() {
        return ctx.out.int(found.map_or(0, |s| s.len()) as i64);
    }
    // Once checked against the limit the offset is a memory size.
    let offset = match usize::try_from(offset) {
        Ok(o) if check_string_len(ctx.out, limit, offset, value.len() as u64) => o,
        Ok(_) => return,
        Err(_) => return ctx.out.error(TOO_LONG),
    };
    let len = match found {
        Some(s) => {
            let buf = s.bytes_mut();
            write_at(buf, offset, value);
            buf.len()
        }
        None => {
            let mut data = Vec::new();
            write_at(&mut data, offset, value);
            let len = data.len();
            // A string built in place: Redis reports it `raw`.
            ctx.keys
                .set(ctx.db, key, Value::Str(StrValue::Bytes { data, raw: true }));
            len
        }
    };
    ctx.modified(key);
    ctx.notify(ev::STRING, "setrange", key);
    ctx.out.int(len as i64);
}

// ---------------------------------------------------------------------------
// INCR family and INCRBYFLOAT.

/// Redis's `incrDecrCommand`: adds `delta` to the integer stored at `key`
/// (0 if missing), keeping its TTL; replies the new value.
fn incr_by(ctx: &mut Ctx<'_>, key: &[u8], delta: i64) {
    let new = match write_entry(&mut ctx.keys, ctx.db, key) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(Some(e)) => {
            let Some(old) = e.as_str().and_then(StrRef::as_i64) else {
                return ctx.out.error(errors::NOT_INT);
            };
            let Some(new) = old.checked_add(delta) else {
                return ctx.out.error(errors::OVERFLOW);
            };
            e.set_value(Value::Str(StrValue::Int(new)));
            new
        }
        Ok(None) => {
            ctx.keys.set(ctx.db, key, Value::Str(StrValue::Int(delta)));
            delta
        }
    };
    ctx.modified(key);
    ctx.notify(ev::STRING, "incrby", key);
    ctx.out.int(new);
}

/// INCR key: adds 1 to the integer value.
fn incr(ctx: &mut Ctx<'_>, args: Args<'_>) {
    incr_by(ctx, args.get(1), 1);
}

/// DECR key: subtracts 1 from the integer value.
fn decr(ctx: &mut Ctx<'_>, args: Args<'_>) {
    incr_by(ctx, args.get(1), -1);
}

/// INCRBY key increment: adds the increment to the integer value.
fn incrby(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if let Some(delta) = ctx.int_arg(args.get(2)) {
        incr_by(ctx, args.get(1), delta);
    }
}

/// DECRBY key decrement: subtracts the decrement (which cannot be
/// i64::MIN, whose negation overflows) from the integer value.
fn decrby(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(delta) = ctx.int_arg(args.get(2)) else {
        return;
    };
    match delta.checked_neg() {
        Some(neg) => incr_by(ctx, args.get(1), neg),
        None => ctx.out.error("ERR decrement would overflow"),
    }
}

/// The stored string's text when it is a number INCRBYFLOAT accepts.
fn str_as_float_text(s: StrRef<'_>) -> Option<Vec<u8>> {
    match s {
        StrRef::Int(n) => Some(n.to_string().into_bytes()),
        StrRef::Bytes { data, .. } => check_long_double(data).map(|_| data.to_vec()),
    }
}

/// INCRBYFLOAT key increment: adds a float to the value (0 if missing),
/// keeping the TTL; the result is stored and replied as Redis prints it
/// (its long double sum, positional notation, no trailing zeros).
fn incrbyfloat(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    let old = match write_entry(&mut ctx.keys, ctx.db, key) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(None) => Some(b"0".to_vec()),
        Ok(Some(e)) => e.as_str().and_then(str_as_float_text),
    };
    let incr = args.get(2);
    let (Some(old), Some(_)) = (old, check_long_double(incr)) else {
        return ctx.out.error(errors::NOT_FLOAT);
    };
    let text = match add_long_doubles(&old, incr) {
        Ok(text) => text,
        Err(LongDoubleError::NotFinite) => {
            return ctx.out.error("ERR increment would produce NaN or Infinity")
        }
        Err(LongDoubleError::Unprintable) => return ctx.out.error(errors::NOT_FLOAT),
    };
    ctx.out.bulk(&text);
    ctx.propagate(&[b"SET", key, &text, b"KEEPTTL"]);
    // Redis stores the printed form as a plain string object (not `int`).
    let value = Value::Str(StrValue::Bytes {
        data: text,
        raw: false,
    });
    ctx.keys.set_keep_ttl(ctx.db, key, value);
    ctx.modified(key);
    ctx.notify(ev::STRING, "incrbyfloat", key);
}

// ---------------------------------------------------------------------------
// LCS.

/// Why an LCS table cannot be built; each maps to Redis's error.
#[derive(Debug, PartialEq, Eq)]
enum LcsRefused {
    /// A string is too long for `u32` cell values.
    StringTooLong,
    /// The table would be larger than the allowed transient memory.
    OverLimit,
    /// The allocation failed.
    AllocFailed,
}

impl LcsRefused {
    fn message(&self) -> &'static str {
        match self {
            LcsRefused::StringTooLong => "ERR String too long for LCS",
            LcsRefused::OverLimit => {
                "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
            }
            LcsRefused::AllocFailed => {
                "ERR Insufficient memory, failed allocating transient memory for LCS"
            }
        }
    }
}

/// One run of consecutive matching bytes found by LCS IDX: inclusive byte
/// ranges in each string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LcsMatch {
    a: (usize, usize),
    b: (usize, usize),
}

impl LcsMatch {
    /// The run's length.
    fn len(&self) -> usize {
        self.a.1 - self.a.0 + 1
    }
}

/// The dynamic-programming table: cell `(i, j)` holds the LCS length of
/// `a[..i]` and `b[..j]`.
struct LcsTable<'s> {
    a: &'s [u8],
    b: &'s [u8],
    /// `(a.len()+1) * (b.len()+1)` cells, row-major by `i`.
    cells: Vec<u32>,
}

impl<'s> LcsTable<'s> {
    /// Builds the table, refusing (like Redis 7.0.15) strings whose length
    /// does not fit the `u32` cells and tables over `limit_bytes`.
    fn build(a: &'s [u8], b: &'s [u8], limit_bytes: u64) -> Result<Self, LcsRefused> {
        let max = u64::from(u32::MAX - 1);
        if a.len() as u64 >= max || b.len() as u64 >= max {
            return Err(LcsRefused::StringTooLong);
        }
        let bytes = (a.len() as u64 + 1)
            .checked_mul(b.len() as u64 + 1)
            .and_then(|n| n.checked_mul(std::mem::size_of::<u32>() as u64))
            .ok_or(LcsRefused::OverLimit)?;
        if bytes > limit_bytes {
            return Err(LcsRefused::OverLimit);
        }
        let n = usize::try_from(bytes / 4).map_err(|_| LcsRefused::OverLimit)?;
        let mut cells = Vec::new();
        cells
            .try_reserve_exact(n)
            .map_err(|_| LcsRefused::AllocFailed)?;
        cells.resize(n, 0);
        let width = b.len() + 1;
        for (i, &ca) in a.iter().enumerate() {
            // Row i is the previous row, row i+1 the one being filled.
            let (prev, cur) = cells[i * width..(i + 2) * width].split_at_mut(width);
            for (j, &cb) in b.iter().enumerate() {
                cur[j + 1] = if ca == cb {
                    prev[j] + 1
                } else {
                    prev[j + 1].max(cur[j])
                };
            }
        }
        Ok(LcsTable { a, b, cells })
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * (self.b.len() + 1) + j]
    }

    /// The length of the longest common subsequence.
    fn len(&self) -> usize {
        self.at(self.a.len(), self.b.len()) as usize
    }

    /// Walks the table back from the end as Redis does (a match is taken
    /// whenever the bytes agree; otherwise it moves towards the larger
    /// neighbour, preferring to shorten `b` on ties). Returns the common
    /// subsequence and the runs of consecutive matches, last run first, of
    /// at least `min_len` bytes.
    fn backtrack(&self, min_len: u64) -> (Vec<u8>, Vec<LcsMatch>) {
        let mut seq = Vec::with_capacity(self.len());
        let mut matches = Vec::new();
        let (mut i, mut j) = (self.a.len(), self.b.len());
        let mut run: Option<LcsMatch> = None;
        let mut emit = |run: &mut Option<LcsMatch>| {
            if let Some(m) = run.take() {
                if m.len() as u64 >= min_len {
                    matches.push(m);
                }
            }
        };
        while i > 0 && j > 0 {
            if self.a[i - 1] == self.b[j - 1] {
                i -= 1;
                j -= 1;
                seq.push(self.a[i]);
                run = Some(match run {
                    Some(m) => LcsMatch {
                        a: (i, m.a.1),
                        b: (j, m.b.1),
                    },
                    None => LcsMatch {
                        a: (i, i),
                        b: (j, j),
                    },
                });
                if i == 0 || j == 0 {
                    emit(&mut run);
                }
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                emit(&mut run);
            }
        }
        seq.reverse();
        (seq, matches)
    }
}

/// The copy of a string key LCS works on: empty when missing, Err for other
/// types.
fn lcs_operand(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Vec<u8>, WrongType> {
    Ok(read(&mut ctx.keys, ctx.db, key)?.map_or_else(Vec::new, |s| s.to_vec()))
}

/// LCS's error for a key of another type.
const LCS_WRONGTYPE: &str = "ERR The specified keys must contain string values";

/// What LCS should reply, from its options.
#[derive(Debug, Default, PartialEq, Eq)]
struct LcsOpts {
    /// LEN: only the length.
    len: bool,
    /// IDX: the matching ranges and the length.
    idx: bool,
    /// WITHMATCHLEN: each range with its length.
    with_match_len: bool,
    /// MINMATCHLEN: ranges shorter than this are left out (0 keeps all).
    min_match_len: u64,
}

/// Parses LCS options; Err is the error reply (syntax error, or a
/// MINMATCHLEN that is not an integer). A negative MINMATCHLEN means 0.
fn parse_lcs_opts<'a>(mut opts: impl Iterator<Item = &'a [u8]>) -> Result<LcsOpts, &'static str> {
    let mut o = LcsOpts::default();
    while let Some(opt) = opts.next() {
        if is(opt, "idx") {
            o.idx = true;
        } else if is(opt, "len") {
            o.len = true;
        } else if is(opt, "withmatchlen") {
            o.with_match_len = true;
        } else if is(opt, "minmatchlen") {
            let arg = opts.next().ok_or(errors::SYNTAX)?;
            let n = parse_i64(arg).ok_or(errors::NOT_INT)?;
            o.min_match_len = n.max(0) as u64;
        } else {
            return Err(errors::SYNTAX);
        }
    }
    Ok(o)
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]: the longest
/// common subsequence of two strings (missing keys are empty strings), its
/// length with LEN, or with IDX the matching ranges (last first) and the
/// length.
fn lcs(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Ok(a) = lcs_operand(ctx, args.get(1)) else {
        return ctx.out.error(LCS_WRONGTYPE);
    };
    let Ok(b) = lcs_operand(ctx, args.get(2)) else {
        return ctx.out.error(LCS_WRONGTYPE);
    };
    let opts = match parse_lcs_opts(args.iter().skip(3)) {
        Ok(o) => o,
        Err(e) => return ctx.out.error(e),
    };
    if opts.len && opts.idx {
        return ctx
            .out
            .error("ERR If you want both the length and indexes, please just use IDX.");
    }
    let table = match LcsTable::build(&a, &b, max_string_len(ctx)) {
        Ok(t) => t,
        Err(e) => return ctx.out.error(e.message()),
    };
    if opts.len {
        return ctx.out.int(table.len() as i64);
    }
    let (seq, matches) = table.backtrack(opts.min_match_len);
    if !opts.idx {
        return ctx.out.bulk(&seq);
    }
    let out = &mut *ctx.out;
    out.map(2);
    out.bulk(b"matches");
    out.array(matches.len());
    for m in &matches {
        out.array(if opts.with_match_len { 3 } else { 2 });
        for (start, end) in [m.a, m.b] {
            out.array(2);
            out.int(start as i64);
            out.int(end as i64);
        }
        if opts.with_match_len {
            out.int(m.len() as i64);
        }
    }
    out.bulk(b"len");
    out.int(table.len() as i64);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use vireo_resp::OwnedArgs;

    fn words(s: &str) -> impl Iterator<Item = &[u8]> {
        s.split_whitespace().map(str::as_bytes)
    }

    fn set_opts(s: &str) -> Option<StrOpts<'_>> {
        parse_opts(words(s), OptsFor::Set)
    }

    fn getex_opts(s: &str) -> Option<StrOpts<'_>> {
        parse_opts(words(s), OptsFor::GetEx)
    }

    fn spec_of(name: &str) -> &'static CommandSpec {
        COMMANDS
            .iter()
            .find(|s| s.name == name)
            .expect("command in the family")
    }

    #[test]
    fn key_positions_and_flags_match_redis() {
        let keys = |args: &[&str]| {
            spec_of(&args[0].to_ascii_lowercase())
                .key_indices(OwnedArgs::from_slices(args).as_args())
        };
        assert_eq!(keys(&["MSET", "a", "1", "b", "2"]), vec![1, 3]);
        assert_eq!(keys(&["MSETNX", "a", "1", "b"]), vec![1, 3]);
        assert_eq!(keys(&["MGET", "a", "b", "c"]), vec![1, 2, 3]);
        assert_eq!(
            keys(&["LCS", "a", "b", "IDX", "MINMATCHLEN", "3"]),
            vec![1, 2]
        );
        assert_eq!(keys(&["SET", "k", "v", "EX", "10"]), vec![1]);
        assert_eq!(keys(&["GETRANGE", "k", "0", "1"]), vec![1]);
        for s in COMMANDS {
            assert_ne!(s.has(WRITE), s.has(READONLY), "{}", s.name);
            assert!(!s.has(DENYOOM) || s.has(WRITE), "{}", s.name);
        }
        let fast: Vec<&str> = COMMANDS
            .iter()
            .filter(|s| s.has(FAST))
            .map(|s| s.name)
            .collect();
        assert_eq!(
            fast,
            [
                "get",
                "setnx",
                "getset",
                "getdel",
                "getex",
                "mget",
                "append",
                "strlen",
                "incr",
                "decr",
                "incrby",
                "decrby",
                "incrbyfloat"
            ]
        );
        assert!(!spec_of("getdel").has(DENYOOM) && !spec_of("getex").has(DENYOOM));
    }

    #[test]
    fn set_options_parse_and_combine() {
        assert_eq!(set_opts(""), Some(StrOpts::default()));
        let o = set_opts("nx GET ex 10").unwrap();
        assert!(o.nx && o.get && !o.xx);
        assert_eq!(o.expire, Some((ExpireKind::Ex, &b"10"[..])));
        let o = set_opts("XX keepttl").unwrap();
        assert!(o.xx && o.keepttl);
        assert_eq!(
            set_opts("pxat 5").unwrap().expire,
            Some((ExpireKind::PxAt, &b"5"[..]))
        );
        assert_eq!(
            set_opts("EXAT 5").unwrap().expire,
            Some((ExpireKind::ExAt, &b"5"[..]))
        );
        // Repeats are fine; the last expire value wins.
        assert!(set_opts("nx nx get get").is_some());
        assert_eq!(
            set_opts("ex 1 ex 2").unwrap().expire,
            Some((ExpireKind::Ex, &b"2"[..]))
        );
        // The expire argument is taken verbatim, even if it looks like an option.
        assert_eq!(
            set_opts("px nx").unwrap().expire,
            Some((ExpireKind::Px, &b"nx"[..]))
        );
    }

    #[test]
    fn set_option_conflicts_are_syntax_errors() {
        for bad in [
            "nx xx",
            "xx nx",
            "ex 1 px 1",
            "px 1 exat 1",
            "exat 1 pxat 1",
            "ex 1 keepttl",
            "keepttl ex 1",
            "keepttl pxat 1",
            "ex",
            "get ex",
            "persist",
            "foo",
            "nxx",
            "e",
        ] {
            assert_eq!(set_opts(bad), None, "{bad}");
        }
    }

    #[test]
    fn getex_options() {
        assert!(getex_opts("persist").unwrap().persist);
        assert!(getex_opts("").unwrap().expire.is_none());
        assert_eq!(
            getex_opts("px 3").unwrap().expire,
            Some((ExpireKind::Px, &b"3"[..]))
        );
        for bad in [
            "nx",
            "xx",
            "get",
            "keepttl",
            "persist ex 1",
            "ex 1 persist",
            "ex 1 px 2",
            "exat",
        ] {
            assert_eq!(getex_opts(bad), None, "{bad}");
        }
    }

    #[test]
    fn expire_times_are_checked() {
        let now = 1_700_000_000_000;
        assert_eq!(expire_at_ms(ExpireKind::Ex, 10, now), Some(now + 10_000));
        assert_eq!(expire_at_ms(ExpireKind::Px, 10, now), Some(now + 10));
        assert_eq!(expire_at_ms(ExpireKind::ExAt, 10, now), Some(10_000));
        assert_eq!(expire_at_ms(ExpireKind::PxAt, 10, now), Some(10));
        assert_eq!(
            expire_at_ms(ExpireKind::PxAt, i64::MAX, now),
            Some(i64::MAX as u64)
        );
        for kind in [
            ExpireKind::Ex,
            ExpireKind::Px,
            ExpireKind::ExAt,
            ExpireKind::PxAt,
        ] {
            assert_eq!(expire_at_ms(kind, 0, now), None);
            assert_eq!(expire_at_ms(kind, -1, now), None);
            assert_eq!(expire_at_ms(kind, i64::MIN, now), None);
        }
        // Seconds that overflow once in milliseconds, or once "now" is added.
        assert_eq!(
            expire_at_ms(ExpireKind::ExAt, i64::MAX / 1000 + 1, now),
            None
        );
        assert!(expire_at_ms(ExpireKind::ExAt, i64::MAX / 1000, now).is_some());
        assert_eq!(expire_at_ms(ExpireKind::Ex, i64::MAX / 1000, now), None);
        assert_eq!(expire_at_ms(ExpireKind::Px, i64::MAX, now), None);
        assert_eq!(
            expire_at_ms(ExpireKind::Px, i64::MAX - now as i64, now),
            Some(i64::MAX as u64)
        );
    }

    #[test]
    fn substr_ranges_follow_redis_7_0() {
        let r = |start, end| substr_range(11, start, end);
        assert_eq!(r(0, 4), Some(0..5));
        assert_eq!(r(-5, -1), Some(6..11));
        assert_eq!(r(0, -1), Some(0..11));
        assert_eq!(r(0, 100), Some(0..11));
        assert_eq!(r(0, -100), Some(0..1));
        assert_eq!(r(-100, -50), Some(0..1));
        assert_eq!(r(-1, -5), None);
        assert_eq!(r(5, 2), None);
        assert_eq!(r(11, 20), None);
        assert_eq!(r(i64::MIN, i64::MAX), Some(0..11));
        assert_eq!(r(i64::MAX, i64::MAX), None);
        assert_eq!(r(i64::MIN, i64::MIN), Some(0..1));
        assert_eq!(substr_range(0, 0, -1), None);
        assert_eq!(substr_range(0, 0, 0), None);
        assert_eq!(substr_range(1, -1, -1), Some(0..1));
    }

    const NO_LIMIT: u64 = u64::MAX;

    #[test]
    fn lcs_of_the_redis_example() {
        let t = LcsTable::build(b"ohmytext", b"mynewtext", NO_LIMIT).unwrap();
        assert_eq!(t.len(), 6);
        let (seq, matches) = t.backtrack(0);
        assert_eq!(seq, b"mytext");
        let want = [
            LcsMatch {
                a: (4, 7),
                b: (5, 8),
            },
            LcsMatch {
                a: (2, 3),
                b: (0, 1),
            },
        ];
        assert_eq!(matches, want);
        assert_eq!(matches[0].len(), 4);
        let (_, long) = t.backtrack(4);
        assert_eq!(long, want[..1]);
        let (_, none) = t.backtrack(5);
        assert!(none.is_empty());
    }

    #[test]
    fn lcs_edge_cases() {
        let t = LcsTable::build(b"", b"abc", NO_LIMIT).unwrap();
        assert_eq!((t.len(), t.backtrack(0)), (0, (vec![], vec![])));
        let t = LcsTable::build(b"abc", b"xyz", NO_LIMIT).unwrap();
        assert_eq!((t.len(), t.backtrack(0)), (0, (vec![], vec![])));
        let t = LcsTable::build(b"abc", b"abc", NO_LIMIT).unwrap();
        assert_eq!(
            t.backtrack(0),
            (
                b"abc".to_vec(),
                vec![LcsMatch {
                    a: (0, 2),
                    b: (0, 2)
                }]
            )
        );
    }

    #[test]
    fn lcs_refuses_tables_over_the_limit() {
        // (3+1)*(3+1) cells of 4 bytes = 64 bytes.
        assert!(LcsTable::build(b"abc", b"abc", 64).is_ok());
        assert_eq!(
            LcsTable::build(b"abc", b"abc", 63).err(),
            Some(LcsRefused::OverLimit)
        );
        assert_eq!(
            LcsRefused::OverLimit.message(),
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
        );
    }

    #[test]
    fn lcs_options() {
        let p = |s| parse_lcs_opts(words(s));
        assert_eq!(p(""), Ok(LcsOpts::default()));
        let o = p("IDX withmatchlen MinMatchLen 3").unwrap();
        assert!(o.idx && o.with_match_len && !o.len);
        assert_eq!(o.min_match_len, 3);
        assert_eq!(p("minmatchlen -5").unwrap().min_match_len, 0);
        assert!(
            p("len idx").is_ok(),
            "the LEN+IDX conflict is checked by the command"
        );
        assert_eq!(p("minmatchlen"), Err(errors::SYNTAX));
        assert_eq!(p("minmatchlen x"), Err(errors::NOT_INT));
        assert_eq!(p("minmatchlen x foo"), Err(errors::NOT_INT));
        assert_eq!(p("foo minmatchlen x"), Err(errors::SYNTAX));
    }

    /// Reference LCS length by the textbook recursion over suffixes.
    fn lcs_len_reference(a: &[u8], b: &[u8]) -> usize {
        let mut memo = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for i in (0..a.len()).rev() {
            for j in (0..b.len()).rev() {
                memo[i][j] = if a[i] == b[j] {
                    memo[i + 1][j + 1] + 1
                } else {
                    memo[i + 1][j].max(memo[i][j + 1])
                };
            }
        }
        memo[0][0]
    }

    fn is_subsequence(seq: &[u8], of: &[u8]) -> bool {
        let mut it = of.iter();
        seq.iter().all(|c| it.any(|x| x == c))
    }

    proptest! {
        #[test]
        fn lcs_is_a_longest_common_subsequence(
            a in proptest::collection::vec(b'a'..b'e', 0..40),
            b in proptest::collection::vec(b'a'..b'e', 0..40),
        ) {
            let t = LcsTable::build(&a, &b, NO_LIMIT).unwrap();
            let (seq, matches) = t.backtrack(0);
            prop_assert_eq!(t.len(), lcs_len_reference(&a, &b));
            prop_assert_eq!(seq.len(), t.len());
            prop_assert!(is_subsequence(&seq, &a) && is_subsequence(&seq, &b));
            // The runs cover the subsequence exactly, last run first, and
            // each one names equal bytes in both strings.
            prop_assert_eq!(matches.iter().map(LcsMatch::len).sum::<usize>(), t.len());
            let mut rebuilt = Vec::new();
            for m in matches.iter().rev() {
                prop_assert_eq!(&a[m.a.0..=m.a.1], &b[m.b.0..=m.b.1]);
                rebuilt.extend_from_slice(&a[m.a.0..=m.a.1]);
            }
            prop_assert_eq!(rebuilt, seq);
        }
    }

    #[test]
    fn stored_strings_read_as_floats() {
        assert_eq!(str_as_float_text(StrRef::Int(-3)), Some(b"-3".to_vec()));
        assert_eq!(
            str_as_float_text(StrValue::from_bytes(b"2.5e1").as_ref()),
            Some(b"2.5e1".to_vec())
        );
        assert_eq!(
            str_as_float_text(StrValue::from_bytes(b"x1").as_ref()),
            None
        );
    }
}
