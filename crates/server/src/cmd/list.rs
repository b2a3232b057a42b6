//! List commands (Redis's `t_list.c`, without the blocking ones, which live
//! in [`super::blocking`]): pushes and pops at both ends, LLEN, LRANGE,
//! LINDEX, LSET, LINSERT, LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH and LMPOP.
//!
//! Values are [`List`]s (quicklists of packed nodes). A key never holds an
//! empty list: every command that removes elements deletes the key when the
//! last one goes. Commands that add elements signal the key as ready for
//! clients blocked on it.

use crate::exec::notify::class as ev;
use std::ops::Range;
use std::sync::atomic::Ordering;

use vireo_resp::number::parse_i64;
use vireo_resp::{Args, ReplyBuf};
use vireo_store::list::{Elem, Iter, List};
use vireo_store::{Keys, Value};

use super::{errors, flags::*, is, spec, CommandSpec, Ctx, KeySpec, KEY1};

pub use vireo_store::list::End;

/// This family's commands, with Redis 7.0's arities, flags and key triples.
pub const COMMANDS: &[CommandSpec] = &[
    spec("lpush", -3, WRITE | DENYOOM | FAST, KEY1, lpush),
    spec("rpush", -3, WRITE | DENYOOM | FAST, KEY1, rpush),
    spec("lpushx", -3, WRITE | DENYOOM | FAST, KEY1, lpushx),
    spec("rpushx", -3, WRITE | DENYOOM | FAST, KEY1, rpushx),
    spec("lpop", -2, WRITE | FAST, KEY1, lpop),
    spec("rpop", -2, WRITE | FAST, KEY1, rpop),
    spec("llen", 2, READONLY | FAST, KEY1, llen),
    spec("lrange", 4, READONLY, KEY1, lrange),
    spec("lindex", 3, READONLY, KEY1, lindex),
    spec("lset", 4, WRITE | DENYOOM, KEY1, lset),
    spec("linsert", 5, WRITE | DENYOOM, KEY1, linsert),
    spec("lrem", 4, WRITE, KEY1, lrem),
    spec("ltrim", 4, WRITE, KEY1, ltrim),
    spec("lpos", -3, READONLY, KEY1, lpos),
    spec("lmove", 5, WRITE | DENYOOM, SRC_DST, lmove),
    spec("rpoplpush", 3, WRITE | DENYOOM, SRC_DST, rpoplpush),
    spec(
        "lmpop",
        -4,
        WRITE,
        KeySpec::Custom {
            first: 0,
            last: 0,
            step: 0,
            find: lmpop_keys,
        },
        lmpop,
    ),
];

/// Source and destination keys at 1 and 2.
const SRC_DST: KeySpec = KeySpec::Range {
    first: 1,
    last: 2,
    step: 1,
};

/// `getPositiveLongFromObjectOrReply`'s error (also for non-integers).
const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";
const INDEX_RANGE: &str = "ERR index out of range";
const RANK_ZERO: &str = "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list";
const COUNT_NEGATIVE: &str = "ERR COUNT can't be negative";
const MAXLEN_NEGATIVE: &str = "ERR MAXLEN can't be negative";
const NUMKEYS: &str = "ERR numkeys should be greater than 0";
const COUNT_POSITIVE: &str = "ERR count should be greater than 0";

/// Whether a lookup is a read (counts keyspace hits and misses, like
/// Redis's `lookupKeyRead`) or a write (`lookupKeyWrite`).
#[derive(Clone, Copy)]
enum Access {
    Read,
    Write,
}

/// The list at `key`: `Ok(None)` when the key is missing, `Err(())` when it
/// holds another type.
fn lookup<'k>(
    keys: &'k mut Keys<'_>,
    db: usize,
    key: &[u8],
    access: Access,
) -> Result<Option<&'k mut List>, ()> {
    let entry = match access {
        Access::Read => keys.get_read(db, key),
        Access::Write => keys.get_mut(db, key),
    };
    match entry {
        None => Ok(None),
        Some(e) => match e.object_mut() {
            Some(Value::List(l)) => Ok(Some(l)),
            _ => Err(()),
        },
    }
}

/// The existing list at `key`; otherwise replies `missing` (key absent) or
/// WRONGTYPE and returns None.
fn existing<'k>(
    keys: &'k mut Keys<'_>,
    out: &mut ReplyBuf,
    db: usize,
    key: &[u8],
    access: Access,
    missing: fn(&mut ReplyBuf),
) -> Option<&'k mut List> {
    match lookup(keys, db, key, access) {
        Ok(Some(l)) => Some(l),
        Ok(None) => {
            missing(out);
            None
        }
        Err(()) => {
            out.error(errors::WRONGTYPE);
            None
        }
    }
}

/// Missing-key replies for [`existing`].
fn reply_zero(out: &mut ReplyBuf) {
    out.int(0);
}
fn reply_null(out: &mut ReplyBuf) {
    out.null();
}
fn reply_empty(out: &mut ReplyBuf) {
    out.array(0);
}
fn reply_null_array(out: &mut ReplyBuf) {
    out.null_array();
}
fn reply_ok(out: &mut ReplyBuf) {
    out.ok();
}
fn reply_no_such_key(out: &mut ReplyBuf) {
    out.error(errors::NO_SUCH_KEY);
}

/// Replies one element as a bulk string.
fn reply_elem(out: &mut ReplyBuf, e: Elem<'_>) {
    match e {
        Elem::Int(n) => out.bulk_int(n),
        Elem::Bytes(b) => out.bulk(b),
    }
}

/// Replies elements as an array.
fn reply_elems<'e>(out: &mut ReplyBuf, items: impl ExactSizeIterator<Item = Elem<'e>>) {
    out.array(items.len());
    for e in items {
        reply_elem(out, e);
    }
}

/// The configured `list-max-listpack-size`, which new lists are built with.
fn fill(ctx: &Ctx<'_>) -> i64 {
    ctx.server
        .config
        .hot
        .list_max_listpack_size
        .load(Ordering::Relaxed)
}

/// [`Ctx::modified`] for a write that made `n` changes: Redis adds `n` to
/// its dirty counter (one per element pushed, popped or removed).
fn modified_by(ctx: &mut Ctx<'_>, key: &[u8], n: usize) {
    ctx.modified(key);
    ctx.dirty = ctx.dirty - 1 + n as u64;
}

/// Redis's events for elements popped from `end` of `key` in `db`:
/// `lpop`/`rpop`, then `del` if the list emptied.
pub(crate) fn notify_popped(ctx: &mut Ctx<'_>, db: usize, key: &[u8], end: End) {
    if crate::exec::notify::flags(ctx.server) == 0 {
        return;
    }
    ctx.notify_in(db, ev::LIST, end_event(end, "lpop", "rpop"), key);
    if !ctx.keys.contains(db, key) {
        ctx.notify_in(db, ev::GENERIC, "del", key);
    }
}

/// The event of an operation at `end`: `left` or `right`.
pub(crate) fn end_event(end: End, left: &'static str, right: &'static str) -> &'static str {
    match end {
        End::Left => left,
        End::Right => right,
    }
}

/// Parses an index or count argument, replying the standard error.
fn long_arg(ctx: &mut Ctx<'_>, arg: &[u8]) -> Option<i64> {
    ctx.int_arg(arg)
}

/// Parses a non-negative argument as Redis's `getPositiveLongFromObjectOrReply`
/// with message `msg` (replied for non-integers too).
fn non_negative_arg(ctx: &mut Ctx<'_>, arg: &[u8], msg: &str) -> Option<usize> {
    match parse_i64(arg).and_then(|n| usize::try_from(n).ok()) {
        Some(n) => Some(n),
        None => {
            ctx.out.error(msg);
            None
        }
    }
}

/// Parses `LEFT` or `RIGHT`.
fn end_arg(arg: &[u8]) -> Option<End> {
    if is(arg, "left") {
        Some(End::Left)
    } else if is(arg, "right") {
        Some(End::Right)
    } else {
        None
    }
}

/// Resolves `start`/`stop` (negative counting from the end) against a list
/// of `len` elements, as LRANGE and LTRIM do: the in-range indices, empty
/// when the range is.
fn clamp_range(start: i64, stop: i64, len: usize) -> Range<usize> {
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    let start = if start < 0 { len_i + start } else { start }.max(0);
    let stop = if stop < 0 { len_i + stop } else { stop };
    if start > stop || start >= len_i {
        return 0..0;
    }
    let stop = stop.min(len_i - 1);
    start as usize..stop as usize + 1
}

// ---------------------------------------------------------------------------
// Helpers shared with the blocking commands.

/// Pops up to `count` elements from `end` of the list at `key`, handing `f`
/// an iterator over them (in pop order) before they are removed; deletes the
/// key when it empties. `Ok(None)` if the key is missing, `Err(())` if it
/// holds another type.
fn pop_range<R>(
    keys: &mut Keys<'_>,
    db: usize,
    key: &[u8],
    end: End,
    count: usize,
    f: impl FnOnce(std::iter::Take<Iter<'_>>) -> R,
) -> Result<Option<R>, ()> {
    let Some(l) = lookup(keys, db, key, Access::Write)? else {
        return Ok(None);
    };
    let n = count.min(l.len());
    let r = f(l.iter_end(end).take(n));
    l.truncate_end(end, n);
    if l.is_empty() {
        keys.delete(db, key);
    }
    Ok(Some(r))
}

/// Pops up to `count` elements from `end` of the list at `key` (deleting the
/// key when it empties). Ok(None) if the key is missing; Err(()) if it holds
/// another type.
pub(crate) fn pop_elements(
    keys: &mut Keys<'_>,
    db: usize,
    key: &[u8],
    end: End,
    count: usize,
) -> Result<Option<Vec<Vec<u8>>>, ()> {
    pop_range(keys, db, key, end, count, |items| {
        items.map(Elem::to_vec).collect()
    })
}

/// LMOVE's core: moves one element from `src`'s `from` end to `dst`'s `to`
/// end; Ok(None) if src is missing; Err(()) on a wrong type (of src or dst)
/// — without modifying anything in that case. A new `dst` list gets the
/// node options of `src`. Deletes `src` when it empties.
pub(crate) fn move_element(
    keys: &mut Keys<'_>,
    db: usize,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
) -> Result<Option<Vec<u8>>, ()> {
    let Some(source) = lookup(keys, db, src, Access::Write)? else {
        return Ok(None);
    };
    if src == dst {
        let Some(v) = source.pop(from) else {
            return Ok(None);
        };
        source.push(to, &v);
        return Ok(Some(v));
    }
    let fill = source.fill();
    let dst_exists = lookup(keys, db, dst, Access::Write)?.is_some();
    let Some(v) = pop_range(keys, db, src, from, 1, |mut items| {
        items.next().map(Elem::to_vec)
    })?
    .flatten() else {
        return Ok(None);
    };
    if dst_exists {
        if let Ok(Some(d)) = lookup(keys, db, dst, Access::Write) {
            d.push(to, &v);
        }
    } else {
        let mut d = List::new(fill);
        d.push(to, &v);
        keys.set(db, dst, Value::List(d));
    }
    Ok(Some(v))
}

/// The key positions of `numkeys key ... where` with `numkeys` at argument
/// `at`, when it is valid and the `where` argument exists.
pub(crate) fn numkeys_range(args: Args<'_>, at: usize) -> Option<Range<usize>> {
    let n = usize::try_from(parse_i64(args.try_get(at)?)?).ok()?;
    let first = at + 1;
    let where_at = n.checked_add(first)?;
    (n >= 1 && where_at < args.len()).then_some(first..where_at)
}

/// Key finder of LMPOP: none when the arguments are malformed (the command
/// then fails before touching any key).
fn lmpop_keys(args: Args<'_>) -> Vec<usize> {
    numkeys_range(args, 1)
        .map(Iterator::collect)
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------
// Pushes.

/// LPUSH/RPUSH/LPUSHX/RPUSHX: pushes every element in turn at `end`,
/// creating the list unless `only_existing`; replies the new length (0 for
/// a missing key with the X forms).
fn push(ctx: &mut Ctx<'_>, args: Args<'_>, end: End, only_existing: bool) {
    let key = args.get(1);
    let values = (2..args.len()).map(|i| args.get(i));
    let len = match lookup(&mut ctx.keys, ctx.db, key, Access::Write) {
        Err(()) => return ctx.out.error(errors::WRONGTYPE),
        Ok(Some(l)) => {
            values.for_each(|v| l.push(end, v));
            l.len()
        }
        Ok(None) if only_existing => return ctx.out.int(0),
        Ok(None) => {
            let mut l = List::new(fill(ctx));
            values.for_each(|v| l.push(end, v));
            let len = l.len();
            ctx.keys.set(ctx.db, key, Value::List(l));
            len
        }
    };
    ctx.out.int(len as i64);
    modified_by(ctx, key, args.len() - 2);
    ctx.notify(ev::LIST, end_event(end, "lpush", "rpush"), key);
    ctx.signal_ready(key);
}

/// LPUSH key element [element ...]: inserts the elements at the head, one
/// after the other; replies the list's length.
fn lpush(ctx: &mut Ctx<'_>, args: Args<'_>) {
    push(ctx, args, End::Left, false);
}

/// RPUSH key element [element ...]: appends the elements at the tail;
/// replies the list's length.
fn rpush(ctx: &mut Ctx<'_>, args: Args<'_>) {
    push(ctx, args, End::Right, false);
}

/// LPUSHX key element [element ...]: LPUSH only if the key holds a list
/// already; replies 0 otherwise.
fn lpushx(ctx: &mut Ctx<'_>, args: Args<'_>) {
    push(ctx, args, End::Left, true);
}

/// RPUSHX key element [element ...]: RPUSH only if the key holds a list
/// already; replies 0 otherwise.
fn rpushx(ctx: &mut Ctx<'_>, args: Args<'_>) {
    push(ctx, args, End::Right, true);
}

// ---------------------------------------------------------------------------
// Pops.

/// LPOP/RPOP key [count]: without a count replies the popped element (null
/// for a missing key); with one, an array of up to `count` elements (a null
/// array for a missing key, an empty one for count 0).
fn pop(ctx: &mut Ctx<'_>, args: Args<'_>, end: End, name: &str) {
    if args.len() > 3 {
        return ctx.out.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let count = match args.try_get(2) {
        Some(a) => match non_negative_arg(ctx, a, NOT_POSITIVE) {
            Some(n) => Some(n),
            None => return,
        },
        None => None,
    };
    let key = args.get(1);
    let out = &mut *ctx.out;
    let popped = match count {
        None => pop_range(&mut ctx.keys, ctx.db, key, end, 1, |mut items| {
            if let Some(e) = items.next() {
                reply_elem(out, e);
            }
            1
        }),
        Some(0) => {
            if existing(
                &mut ctx.keys,
                out,
                ctx.db,
                key,
                Access::Write,
                reply_null_array,
            )
            .is_some()
            {
                out.array(0);
            }
            return;
        }
        Some(n) => pop_range(&mut ctx.keys, ctx.db, key, end, n, |items| {
            let popped = items.len();
            reply_elems(out, items);
            popped
        }),
    };
    match popped {
        Ok(Some(n)) => {
            modified_by(ctx, key, n);
            notify_popped(ctx, ctx.db, key, end);
        }
        Ok(None) if count.is_some() => ctx.out.null_array(),
        Ok(None) => ctx.out.null(),
        Err(()) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// LPOP key [count]: removes and replies the first element(s).
fn lpop(ctx: &mut Ctx<'_>, args: Args<'_>) {
    pop(ctx, args, End::Left, "lpop");
}

/// RPOP key [count]: removes and replies the last element(s).
fn rpop(ctx: &mut Ctx<'_>, args: Args<'_>) {
    pop(ctx, args, End::Right, "rpop");
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]: pops up to `count`
/// (default 1) elements from the first non-empty list among the keys;
/// replies `[key, [elements]]`, or a null array when every key is missing.
fn lmpop(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if parse_i64(args.get(1)).is_none_or(|n| n < 1) {
        return ctx.out.error(NUMKEYS);
    }
    let Some(keys) = numkeys_range(args, 1) else {
        return ctx.out.error(errors::SYNTAX);
    };
    let Some(end) = end_arg(args.get(keys.end)) else {
        return ctx.out.error(errors::SYNTAX);
    };
    let mut count = None;
    let mut i = keys.end + 1;
    while i < args.len() {
        if count.is_none() && is(args.get(i), "count") && i + 1 < args.len() {
            match parse_i64(args.get(i + 1)) {
                Some(n) if n >= 1 => count = Some(n as usize),
                _ => return ctx.out.error(COUNT_POSITIVE),
            }
            i += 2;
        } else {
            return ctx.out.error(errors::SYNTAX);
        }
    }
    let count = count.unwrap_or(1);
    for k in keys {
        let key = args.get(k);
        let out = &mut *ctx.out;
        let popped = pop_range(&mut ctx.keys, ctx.db, key, end, count, |items| {
            let n = items.len();
            out.array(2);
            out.bulk(key);
            reply_elems(out, items);
            n
        });
        match popped {
            Ok(None) => continue,
            Ok(Some(n)) => {
                let pop = super::shared::Pop::List {
                    end,
                    count: Some(count),
                };
                ctx.propagate(&super::shared::pop_effect(pop, key, n));
                modified_by(ctx, key, n);
                return notify_popped(ctx, ctx.db, key, end);
            }
            Err(()) => return ctx.out.error(errors::WRONGTYPE),
        }
    }
    ctx.out.null_array();
}

// ---------------------------------------------------------------------------
// Reads.

/// LLEN key: the list's length, 0 for a missing key.
fn llen(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if let Some(l) = existing(
        &mut ctx.keys,
        ctx.out,
        ctx.db,
        args.get(1),
        Access::Read,
        reply_zero,
    ) {
        ctx.out.int(l.len() as i64);
    }
}

/// LRANGE key start stop: the elements from `start` to `stop` inclusive
/// (negative indices count from the end; out-of-range ones are clamped).
fn lrange(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(start) = long_arg(ctx, args.get(2)) else {
        return;
    };
    let Some(stop) = long_arg(ctx, args.get(3)) else {
        return;
    };
    let out = &mut *ctx.out;
    if let Some(l) = existing(
        &mut ctx.keys,
        out,
        ctx.db,
        args.get(1),
        Access::Read,
        reply_empty,
    ) {
        let r = clamp_range(start, stop, l.len());
        reply_elems(out, l.iter_from(r.start, false).take(r.len()));
    }
}

/// Resolves a possibly negative index against a list of `len` elements.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let i = if index < 0 {
        i64::try_from(len).ok()?.checked_add(index)?
    } else {
        index
    };
    usize::try_from(i).ok().filter(|&i| i < len)
}

/// LINDEX key index: the element at `index` (negative from the end), null
/// when out of range or the key is missing.
fn lindex(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let out = &mut *ctx.out;
    let Some(l) = existing(
        &mut ctx.keys,
        out,
        ctx.db,
        args.get(1),
        Access::Read,
        reply_null,
    ) else {
        return;
    };
    let Some(index) = parse_i64(args.get(2)) else {
        return out.error(errors::NOT_INT);
    };
    match resolve_index(index, l.len()).and_then(|i| l.get(i)) {
        Some(e) => reply_elem(out, e),
        None => out.null(),
    }
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]: the index
/// of the `rank`-th match (negative ranks search from the tail), or with
/// COUNT an array of up to that many matching indices (0: all), scanning
/// at most MAXLEN elements (0: all).
fn lpos(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let mut rank: i64 = 1;
    let mut count: Option<usize> = None;
    let mut maxlen = 0usize;
    let mut i = 3;
    while i < args.len() {
        let opt = args.get(i);
        let value = args.try_get(i + 1);
        match value {
            Some(v) if is(opt, "rank") => {
                let Some(r) = ctx.int_arg(v) else {
                    return;
                };
                if r == 0 {
                    return ctx.out.error(RANK_ZERO);
                }
                rank = r;
            }
            Some(v) if is(opt, "count") => match non_negative_arg(ctx, v, COUNT_NEGATIVE) {
                Some(n) => count = Some(n),
                None => return,
            },
            Some(v) if is(opt, "maxlen") => match non_negative_arg(ctx, v, MAXLEN_NEGATIVE) {
                Some(n) => maxlen = n,
                None => return,
            },
            _ => return ctx.out.error(errors::SYNTAX),
        }
        i += 2;
    }
    let missing = if count.is_some() {
        reply_empty
    } else {
        reply_null
    };
    let out = &mut *ctx.out;
    let Some(l) = existing(
        &mut ctx.keys,
        out,
        ctx.db,
        args.get(1),
        Access::Read,
        missing,
    ) else {
        return;
    };
    // Redis negates the rank in a C long: i64::MIN stays itself (and then
    // every match qualifies), which wrapping arithmetic reproduces.
    let from_tail = rank < 0;
    let rank = if from_tail { rank.wrapping_neg() } else { rank };
    let target = Elem::of(args.get(2));
    let len = l.len();
    let items = if from_tail {
        l.iter_from(len.saturating_sub(1), true)
    } else {
        l.iter()
    };
    let limit = if maxlen == 0 { len } else { maxlen.min(len) };
    let mut matches: i64 = 0;
    let mut found = Vec::new();
    for (scanned, e) in items.take(limit).enumerate() {
        if e != target {
            continue;
        }
        matches += 1;
        if matches < rank {
            continue;
        }
        found.push(if from_tail {
            len - scanned - 1
        } else {
            scanned
        });
        match count {
            None => break,
            Some(c) => {
                let got = matches.wrapping_sub(rank).wrapping_add(1);
                if c != 0 && got >= c as i64 {
                    break;
                }
            }
        }
    }
    match count {
        Some(_) => {
            out.array(found.len());
            found.iter().for_each(|&i| out.int(i as i64));
        }
        None => match found.first() {
            Some(&i) => out.int(i as i64),
            None => out.null(),
        },
    }
}

// ---------------------------------------------------------------------------
// Edits.

/// LSET key index element: replaces the element at `index`; "no such key"
/// for a missing key, "index out of range" outside the list.
fn lset(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    let out = &mut *ctx.out;
    let Some(l) = existing(
        &mut ctx.keys,
        out,
        ctx.db,
        key,
        Access::Write,
        reply_no_such_key,
    ) else {
        return;
    };
    let Some(index) = parse_i64(args.get(2)) else {
        return out.error(errors::NOT_INT);
    };
    let done = resolve_index(index, l.len()).is_some_and(|i| l.set(i, args.get(3)));
    if !done {
        return out.error(INDEX_RANGE);
    }
    out.ok();
    ctx.modified(key);
    ctx.notify(ev::LIST, "lset", key);
}

/// LINSERT key BEFORE|AFTER pivot element: inserts next to the first
/// occurrence of `pivot`; replies the new length, -1 when the pivot is
/// absent, 0 for a missing key.
fn linsert(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let after = match args.get(2) {
        w if is(w, "after") => true,
        w if is(w, "before") => false,
        _ => return ctx.out.error(errors::SYNTAX),
    };
    let key = args.get(1);
    let out = &mut *ctx.out;
    let Some(l) = existing(&mut ctx.keys, out, ctx.db, key, Access::Write, reply_zero) else {
        return;
    };
    if !l.insert(args.get(3), args.get(4), after) {
        return out.int(-1);
    }
    out.int(l.len() as i64);
    ctx.modified(key);
    ctx.notify(ev::LIST, "linsert", key);
    ctx.signal_ready(key);
}

/// LREM key count element: removes the first `count` occurrences of
/// `element` (the last ones for a negative count, all for 0); replies how
/// many were removed.
fn lrem(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(count) = long_arg(ctx, args.get(2)) else {
        return;
    };
    let key = args.get(1);
    let out = &mut *ctx.out;
    let Some(l) = existing(&mut ctx.keys, out, ctx.db, key, Access::Write, reply_zero) else {
        return;
    };
    let limit = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    let removed = l.remove(args.get(3), limit, count < 0);
    let empty = l.is_empty();
    out.int(removed as i64);
    if empty {
        ctx.keys.delete(ctx.db, key);
    }
    if removed > 0 {
        modified_by(ctx, key, removed);
        ctx.notify(ev::LIST, "lrem", key);
        if empty {
            ctx.notify(ev::GENERIC, "del", key);
        }
    }
}

/// LTRIM key start stop: keeps only the elements from `start` to `stop`
/// inclusive (same index rules as LRANGE), deleting the key if none remain.
fn ltrim(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(start) = long_arg(ctx, args.get(2)) else {
        return;
    };
    let Some(stop) = long_arg(ctx, args.get(3)) else {
        return;
    };
    let key = args.get(1);
    let out = &mut *ctx.out;
    let Some(l) = existing(&mut ctx.keys, out, ctx.db, key, Access::Write, reply_ok) else {
        return;
    };
    let before = l.len();
    let keep = clamp_range(start, stop, before);
    l.retain_range(keep.start, keep.len());
    let empty = l.is_empty();
    if empty {
        ctx.keys.delete(ctx.db, key);
    }
    ctx.out.ok();
    modified_by(ctx, key, before - keep.len());
    ctx.notify(ev::LIST, "ltrim", key);
    if empty {
        ctx.notify(ev::GENERIC, "del", key);
    }
}

/// Runs LMOVE/RPOPLPUSH: replies the moved element, null when `src` is
/// missing.
fn move_generic(ctx: &mut Ctx<'_>, args: Args<'_>, from: End, to: End) {
    let (src, dst) = (args.get(1), args.get(2));
    match move_element(&mut ctx.keys, ctx.db, src, dst, from, to) {
        Ok(Some(v)) => {
            ctx.out.bulk(&v);
            modified_by(ctx, src, 1);
            if dst != src {
                modified_by(ctx, dst, 0);
            }
            ctx.notify(ev::LIST, end_event(to, "lpush", "rpush"), dst);
            notify_popped(ctx, ctx.db, src, from);
            ctx.signal_ready(dst);
        }
        Ok(None) => ctx.out.null(),
        Err(()) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT: atomically pops an
/// element from one end of `source` and pushes it at an end of
/// `destination`; replies the element (null if `source` is missing).
fn lmove(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(from) = end_arg(args.get(3)) else {
        return ctx.out.error(errors::SYNTAX);
    };
    let Some(to) = end_arg(args.get(4)) else {
        return ctx.out.error(errors::SYNTAX);
    };
    move_generic(ctx, args, from, to);
}

/// RPOPLPUSH source destination: LMOVE source destination RIGHT LEFT.
fn rpoplpush(ctx: &mut Ctx<'_>, args: Args<'_>) {
    move_generic(ctx, args, End::Right, End::Left);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_clamp_like_redis() {
        assert_eq!(clamp_range(0, -1, 5), 0..5);
        assert_eq!(clamp_range(-100, 100, 5), 0..5);
        assert_eq!(clamp_range(3, 1, 5), 0..0);
        assert_eq!(clamp_range(5, 10, 5), 0..0);
        assert_eq!(clamp_range(-2, -1, 5), 3..5);
        assert_eq!(clamp_range(i64::MIN, i64::MAX, 5), 0..5);
        assert_eq!(clamp_range(0, i64::MIN, 5), 0..0);
        assert_eq!(clamp_range(0, 0, 0), 0..0);
    }

    #[test]
    fn indices_resolve_from_either_end() {
        assert_eq!(resolve_index(0, 3), Some(0));
        assert_eq!(resolve_index(-1, 3), Some(2));
        assert_eq!(resolve_index(-3, 3), Some(0));
        assert_eq!(resolve_index(-4, 3), None);
        assert_eq!(resolve_index(3, 3), None);
        assert_eq!(resolve_index(i64::MIN, 3), None);
        assert_eq!(resolve_index(i64::MAX, 3), None);
    }

    #[test]
    fn numkeys_ranges() {
        let a = vireo_resp::OwnedArgs::from_slices(["lmpop", "2", "a", "b", "left"]);
        assert_eq!(numkeys_range(a.as_args(), 1), Some(2..4));
        assert_eq!(lmpop_keys(a.as_args()), vec![2, 3]);
        let a = vireo_resp::OwnedArgs::from_slices(["lmpop", "3", "a", "b", "left"]);
        assert_eq!(numkeys_range(a.as_args(), 1), None);
        let a = vireo_resp::OwnedArgs::from_slices(["lmpop", "0", "a", "left"]);
        assert_eq!(numkeys_range(a.as_args(), 1), None);
        let a = vireo_resp::OwnedArgs::from_slices(["lmpop", "-1", "a", "left"]);
        assert_eq!(lmpop_keys(a.as_args()), Vec::<usize>::new());
        let a = vireo_resp::OwnedArgs::from_slices(["lmpop", "99999999999999999", "a"]);
        assert_eq!(numkeys_range(a.as_args(), 1), None);
    }
}
