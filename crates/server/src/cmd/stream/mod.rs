//! Stream commands (Redis's `t_stream.c`): XADD XRANGE XREVRANGE XLEN XDEL
//! XTRIM XSETID here; XREAD and XREADGROUP with their blocking forms in
//! [`read`]; the consumer group commands (XGROUP, XACK, XPENDING, XCLAIM,
//! XAUTOCLAIM) in [`group`]; XINFO in [`info`].
//!
//! Values are [`Stream`]s (`vireo_store::stream`). Unlike the other types a
//! stream may be empty and still exist (XADD … MAXLEN 0, XDEL of the last
//! entry, XGROUP CREATE … MKSTREAM).
//!
//! Propagation follows Redis: XADD is logged with the ID it generated and
//! approximate trimming rewritten as exact (`MAXLEN = <len>`, `MINID =
//! <first id>`), so replaying the log rebuilds the same stream; the group
//! commands log their effects as XCLAIM / XGROUP commands ([`group`]).
//!
//! Keyspace notifications (`xadd`, `xdel`, `xtrim`, `xsetid`, `xgroup-*`)
//! are not sent yet: the server has no Pub/Sub at this point; they belong
//! where this module calls `ctx.modified`.

mod group;
mod info;
mod read;

use vireo_resp::number::parse_i64;
use vireo_resp::{Args, ReplyBuf};
use vireo_store::stream::{
    parse_range_bound, AddId, BoundKind, Entry, NodeLimits, SetId, Stream, StreamError, StreamId,
    Trim, TrimStrategy,
};
use vireo_store::{Keys, Value, ValueRef};

use super::{errors, flags::*, is, spec, CommandSpec, Ctx, KEY1};
use crate::exec::notify::class::STREAM as EV_STREAM;

/// This family's commands, with Redis 7.0's arities, flags and keys.
pub const COMMANDS: &[CommandSpec] = &[
    spec("xadd", -5, WRITE | DENYOOM | FAST, KEY1, xadd),
    spec("xrange", -4, READONLY, KEY1, xrange),
    spec("xrevrange", -4, READONLY, KEY1, xrevrange),
    spec("xlen", 2, READONLY | FAST, KEY1, xlen),
    spec("xdel", -3, WRITE | FAST, KEY1, xdel),
    spec("xtrim", -4, WRITE, KEY1, xtrim),
    spec("xsetid", -3, WRITE | DENYOOM | FAST, KEY1, xsetid),
    read::XREAD,
    read::XREADGROUP,
    spec("xack", -4, WRITE | FAST, KEY1, group::xack),
    spec("xpending", -3, READONLY, KEY1, group::xpending),
    spec("xclaim", -6, WRITE | FAST, KEY1, group::xclaim),
    spec("xautoclaim", -6, WRITE | FAST, KEY1, group::xautoclaim),
    group::XGROUP,
    info::XINFO,
];

/// The key exists but does not hold a stream: the caller replies WRONGTYPE.
struct WrongType;

/// The stream at `key` for reading (counts a keyspace hit or miss).
fn read_stream<'k>(
    keys: &'k mut Keys<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'k Stream>, WrongType> {
    match keys.get_read(db, key) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::Stream(s) => Ok(Some(s)),
            _ => Err(WrongType),
        },
    }
}

/// The stream at `key` for writing.
fn write_stream<'k>(
    keys: &'k mut Keys<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'k mut Stream>, WrongType> {
    match keys.get_mut(db, key) {
        None => Ok(None),
        Some(e) => match e.object_mut() {
            Some(Value::Stream(s)) => Ok(Some(s)),
            _ => Err(WrongType),
        },
    }
}

/// The configured node limits (`stream-node-max-bytes`,
/// `stream-node-max-entries`).
fn node_limits(ctx: &Ctx<'_>) -> NodeLimits {
    ctx.server.config.hot.stream_node_limits()
}

/// Unix time in milliseconds, the clock of generated IDs.
fn now() -> u64 {
    vireo_store::clock::now_ms()
}

/// [`now`] as delivery and seen times are kept (signed, as Redis's
/// `mstime_t`).
fn now_i64() -> i64 {
    i64::try_from(now()).unwrap_or(i64::MAX)
}

/// The `ms-seq` text of an ID.
fn id_text(id: StreamId) -> Vec<u8> {
    let mut out = Vec::with_capacity(41);
    id.write(&mut out);
    out
}

/// Replies an ID as a bulk string.
fn reply_id(out: &mut ReplyBuf, id: StreamId) {
    out.bulk(&id_text(id));
}

/// Replies an entry as `[id, [field, value, ...]]`.
fn reply_entry(out: &mut ReplyBuf, entry: &Entry<'_>) {
    out.array(2);
    reply_id(out, entry.id);
    let fields = entry.fields();
    out.array(2 * fields.clone().count());
    for (f, v) in fields {
        out.bulk(f);
        out.bulk(v);
    }
}

/// Replies up to `count` (0: all) entries of `s` between `start` and `end`
/// as an array; returns how many.
fn reply_range(
    out: &mut ReplyBuf,
    s: &Stream,
    start: StreamId,
    end: StreamId,
    count: usize,
    rev: bool,
) -> usize {
    let len = out.deferred();
    let limit = if count == 0 { usize::MAX } else { count };
    let mut n = 0;
    for entry in s.range(start, end, rev).take(limit) {
        reply_entry(out, &entry);
        n += 1;
    }
    out.fill_deferred_array(len, n);
    n
}

/// Replies a stream error, returning None (for `?`-style use).
fn fail<T>(ctx: &mut Ctx<'_>, e: StreamError) -> Option<T> {
    ctx.out.error(e.message());
    None
}

/// Parses a strict ID argument (no `-`/`+`), replying the error.
fn strict_id(ctx: &mut Ctx<'_>, arg: &[u8]) -> Option<StreamId> {
    StreamId::parse_strict(arg, 0)
        .map_err(|e| ctx.out.error(e.message()))
        .ok()
}

/// Parses a range bound, replying the error.
fn bound(ctx: &mut Ctx<'_>, arg: &[u8], kind: BoundKind) -> Option<StreamId> {
    parse_range_bound(arg, kind)
        .map_err(|e| ctx.out.error(e.message()))
        .ok()
}

/// Parses every argument from `from` as a strict ID (XDEL, XACK): all or
/// nothing, as Redis checks them before acting.
fn strict_ids(ctx: &mut Ctx<'_>, args: Args<'_>, from: usize) -> Option<Vec<StreamId>> {
    (from..args.len())
        .map(|i| strict_id(ctx, args.get(i)))
        .collect()
}

/// The `-NOGROUP` error of commands that name a key and a group.
fn no_group(ctx: &mut Ctx<'_>, key: &[u8], group: &[u8], suffix: &str) {
    ctx.out.error(&format!(
        "NOGROUP No such key '{}' or consumer group '{}'{suffix}",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ));
}

/// A trimming request as parsed, with where its arguments are (for
/// rewriting approximate trimming into its exact, propagated form).
struct TrimArgs {
    trim: Trim,
    /// Argument index of the MAXLEN count or MINID ID.
    arg_idx: usize,
}

/// What XADD and XTRIM share: the trimming options, and XADD's NOMKSTREAM
/// and ID.
#[derive(Default)]
struct AddTrimArgs {
    trim: Option<TrimArgs>,
    nomkstream: bool,
    /// XADD's ID and its argument index.
    id: Option<(AddId, usize)>,
}

/// Parses XADD's (`xadd`) or XTRIM's options from argument 2 as Redis's
/// `streamParseAddOrTrimArgsOrReply`, replying the error on bad input.
fn parse_add_trim(ctx: &mut Ctx<'_>, args: Args<'_>, xadd: bool) -> Option<AddTrimArgs> {
    let mut parsed = AddTrimArgs::default();
    let (mut approx, mut limit) = (false, None::<u64>);
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args.get(i);
        if xadd && opt == b"*" {
            parsed.id = Some((AddId::Auto, i));
            break;
        } else if (is(opt, "maxlen") || is(opt, "minid")) && more > 0 {
            if parsed.trim.is_some() {
                ctx.out.error("ERR syntax error, MAXLEN and MINID options at the same time are not compatible");
                return None;
            }
            approx = false;
            let next = args.get(i + 1);
            if more >= 2 && (next == b"~" || next == b"=") {
                approx = next == b"~";
                i += 1;
            }
            i += 1;
            let strategy = if is(opt, "maxlen") {
                let n = ctx.int_arg(args.get(i))?;
                if n < 0 {
                    ctx.out.error("ERR The MAXLEN argument must be >= 0.");
                    return None;
                }
                TrimStrategy::MaxLen(n as u64)
            } else {
                TrimStrategy::MinId(strict_id(ctx, args.get(i))?)
            };
            parsed.trim = Some(TrimArgs {
                trim: Trim {
                    strategy,
                    approx: false,
                    limit: 0,
                },
                arg_idx: i,
            });
        } else if is(opt, "limit") && more > 0 {
            let n = ctx.int_arg(args.get(i + 1))?;
            if n < 0 {
                ctx.out.error("ERR The LIMIT argument must be >= 0.");
                return None;
            }
            limit = Some(n as u64);
            i += 1;
        } else if xadd && is(opt, "nomkstream") {
            parsed.nomkstream = true;
        } else if xadd {
            match AddId::parse(opt) {
                Ok(id) => parsed.id = Some((id, i)),
                Err(e) => return fail(ctx, e),
            }
            break;
        } else {
            ctx.out.error(errors::SYNTAX);
            return None;
        }
        i += 1;
    }
    if limit.is_some_and(|l| l != 0) && parsed.trim.is_none() {
        ctx.out
            .error("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy");
        return None;
    }
    if !xadd && parsed.trim.is_none() {
        ctx.out
            .error("ERR syntax error, XTRIM must be called with a trimming strategy");
        return None;
    }
    let limit = if ctx.session.replaying {
        // Replayed commands were rewritten exact; their trimming is never
        // cut short (Redis's `mustObeyClient`).
        0
    } else if let Some(l) = limit {
        if !approx {
            ctx.out
                .error("ERR syntax error, LIMIT cannot be used without the special ~ option");
            return None;
        }
        l
    } else if approx {
        node_limits(ctx).default_trim_limit()
    } else {
        0
    };
    if let Some(t) = parsed.trim.as_mut() {
        t.trim.approx = approx;
        t.trim.limit = limit;
    }
    Some(parsed)
}

/// The exact form of an approximate trim, for propagation: `=` before the
/// argument, which becomes the stream's length (MAXLEN) or its first
/// entry's ID, tombstones included (MINID).
fn rewrite_trim(cmd: &mut [Vec<u8>], t: &TrimArgs, s: &Stream) {
    cmd[t.arg_idx - 1] = b"=".to_vec();
    cmd[t.arg_idx] = match t.trim.strategy {
        TrimStrategy::MaxLen(_) => itoa::Buffer::new().format(s.len()).as_bytes().to_vec(),
        TrimStrategy::MinId(_) => id_text(s.first_edge_id(true)),
    };
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]]
/// *|id field value [field value ...]: appends an entry, replying its ID.
fn xadd(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(parsed) = parse_add_trim(ctx, args, true) else {
        return;
    };
    let Some((id, idpos)) = parsed.id else {
        return ctx.out.error(&wrong_arity("xadd"));
    };
    let fields = idpos + 1;
    if args.len() - fields < 2 || !(args.len() - fields).is_multiple_of(2) {
        return ctx.out.error(&wrong_arity("xadd"));
    }
    let id = match id.reject_zero() {
        Ok(id) => id,
        Err(e) => return ctx.out.error(e.message()),
    };
    let key = args.get(1);
    let limits = node_limits(ctx);
    let s = match write_stream(&mut ctx.keys, ctx.db, key) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(Some(s)) => s,
        Ok(None) if parsed.nomkstream => return ctx.out.null(),
        Ok(None) => {
            ctx.keys
                .set(ctx.db, key, Value::Stream(Box::new(Stream::new())));
            match write_stream(&mut ctx.keys, ctx.db, key) {
                Ok(Some(s)) => s,
                _ => return ctx.out.error(errors::WRONGTYPE),
            }
        }
    };
    let pairs = (fields..args.len())
        .step_by(2)
        .map(|i| (args.get(i), args.get(i + 1)));
    let added = match s.add(id, pairs, limits, now()) {
        Ok(added) => added,
        Err(e) => return ctx.out.error(e.message()),
    };
    reply_id(ctx.out, added);
    let mut cmd: Option<Vec<Vec<u8>>> = None;
    let mut trimmed = 0;
    if let Some(t) = &parsed.trim {
        trimmed = s.trim(&t.trim);
        if t.trim.approx {
            let c = cmd.get_or_insert_with(|| args.iter().map(<[u8]>::to_vec).collect());
            rewrite_trim(c, t, s);
        }
    }
    if !matches!(id, AddId::Exact(_)) {
        cmd.get_or_insert_with(|| args.iter().map(<[u8]>::to_vec).collect())[idpos] =
            id_text(added);
    }
    if let Some(cmd) = cmd {
        ctx.propagate(&cmd);
    }
    ctx.modified(key);
    ctx.notify(EV_STREAM, "xadd", key);
    if trimmed > 0 {
        ctx.notify(EV_STREAM, "xtrim", key);
    }
    ctx.signal_ready(key);
}

/// Redis's arity error for a command name.
fn wrong_arity(name: &str) -> String {
    format!("ERR wrong number of arguments for '{name}' command")
}

/// XRANGE key start end [COUNT count].
fn xrange(ctx: &mut Ctx<'_>, args: Args<'_>) {
    range_command(ctx, args, false);
}

/// XREVRANGE key end start [COUNT count].
fn xrevrange(ctx: &mut Ctx<'_>, args: Args<'_>) {
    range_command(ctx, args, true);
}

/// The body of XRANGE and XREVRANGE.
fn range_command(ctx: &mut Ctx<'_>, args: Args<'_>, rev: bool) {
    let (start_arg, end_arg) = if rev { (3, 2) } else { (2, 3) };
    let Some(start) = bound(ctx, args.get(start_arg), BoundKind::Start) else {
        return;
    };
    let Some(end) = bound(ctx, args.get(end_arg), BoundKind::End) else {
        return;
    };
    let mut count = None;
    let mut j = 4;
    while j < args.len() {
        if is(args.get(j), "count") && j + 1 < args.len() {
            let Some(n) = ctx.int_arg(args.get(j + 1)) else {
                return;
            };
            count = Some(n.max(0) as u64);
            j += 2;
        } else {
            return ctx.out.error(errors::SYNTAX);
        }
    }
    match read_stream(&mut ctx.keys, ctx.db, args.get(1)) {
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
        Ok(None) => ctx.out.array(0),
        Ok(Some(_)) if count == Some(0) => ctx.out.null_array(),
        Ok(Some(s)) => {
            let count = usize::try_from(count.unwrap_or(0)).unwrap_or(usize::MAX);
            reply_range(ctx.out, s, start, end, count, rev);
        }
    }
}

/// XLEN key.
fn xlen(ctx: &mut Ctx<'_>, args: Args<'_>) {
    match read_stream(&mut ctx.keys, ctx.db, args.get(1)) {
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
        Ok(None) => ctx.out.int(0),
        Ok(Some(s)) => ctx.out.int(s.len() as i64),
    }
}

/// XDEL key id [id ...]: deletes entries, replying how many existed.
fn xdel(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    match write_stream(&mut ctx.keys, ctx.db, key) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(None) => return ctx.out.int(0),
        Ok(Some(_)) => {}
    }
    let Some(ids) = strict_ids(ctx, args, 2) else {
        return;
    };
    let Ok(Some(s)) = write_stream(&mut ctx.keys, ctx.db, key) else {
        return ctx.out.error(errors::WRONGTYPE);
    };
    let deleted = s.delete(&ids);
    if deleted > 0 {
        ctx.modified(key);
        ctx.notify(EV_STREAM, "xdel", key);
        ctx.dirty += deleted - 1;
    }
    ctx.out.int(deleted as i64);
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count].
fn xtrim(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(parsed) = parse_add_trim(ctx, args, false) else {
        return;
    };
    let Some(t) = parsed.trim else {
        return;
    };
    let key = args.get(1);
    let s = match write_stream(&mut ctx.keys, ctx.db, key) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(None) => return ctx.out.int(0),
        Ok(Some(s)) => s,
    };
    let deleted = s.trim(&t.trim);
    if deleted > 0 {
        if t.trim.approx {
            let mut cmd: Vec<Vec<u8>> = args.iter().map(<[u8]>::to_vec).collect();
            rewrite_trim(&mut cmd, &t, s);
            ctx.propagate(&cmd);
        }
        ctx.modified(key);
        ctx.notify(EV_STREAM, "xtrim", key);
        ctx.dirty += deleted - 1;
    }
    ctx.out.int(deleted as i64);
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID id].
fn xsetid(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(last) = strict_id(ctx, args.get(2)) else {
        return;
    };
    let (mut entries_added, mut max_deleted) = (None, None);
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args.get(i);
        if is(opt, "entriesadded") && more > 0 {
            let Some(n) = ctx.int_arg(args.get(i + 1)) else {
                return;
            };
            if n < 0 {
                return ctx.out.error("ERR entries_added must be positive");
            }
            entries_added = Some(n as u64);
        } else if is(opt, "maxdeletedid") && more > 0 {
            let Some(id) = strict_id(ctx, args.get(i + 1)) else {
                return;
            };
            if last < id {
                return ctx
                    .out
                    .error(StreamError::SetIdMaxDeletedTooLarge.message());
            }
            max_deleted = Some(id);
        } else {
            return ctx.out.error(errors::SYNTAX);
        }
        i += 2;
    }
    let set = match SetId::new(last, entries_added, max_deleted) {
        Ok(set) => set,
        Err(e) => return ctx.out.error(e.message()),
    };
    let key = args.get(1);
    let result = match write_stream(&mut ctx.keys, ctx.db, key) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(None) => return ctx.out.error(errors::NO_SUCH_KEY),
        Ok(Some(s)) => s.set_id(&set),
    };
    match result {
        Ok(()) => {
            ctx.out.ok();
            ctx.modified(key);
            ctx.notify(EV_STREAM, "xsetid", key);
        }
        Err(e) => ctx.out.error(e.message()),
    }
}

/// Parses a non-negative COUNT-like integer where Redis clamps negatives
/// to 0, as usize; None after replying the error.
fn count_arg(ctx: &mut Ctx<'_>, arg: &[u8]) -> Option<usize> {
    let n = ctx.int_arg(arg)?;
    Some(usize::try_from(n.max(0)).unwrap_or(usize::MAX))
}

/// Parses an integer with a custom error message.
fn int_or(ctx: &mut Ctx<'_>, arg: &[u8], msg: &str) -> Option<i64> {
    let n = parse_i64(arg);
    if n.is_none() {
        ctx.out.error(msg);
    }
    n
}

#[cfg(test)]
mod tests;
