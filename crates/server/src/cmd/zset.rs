//! Sorted set commands (Redis's `t_zset.c`): ZADD and ZINCRBY, removals,
//! scores and ranks, the ZRANGE family (by rank, score or lex, forward or
//! reverse, with LIMIT and WITHSCORES, and ZRANGESTORE), the ZREMRANGEBY*
//! family, ZPOPMIN/ZPOPMAX/ZMPOP, ZRANDMEMBER, the ZUNION/ZINTER/ZDIFF
//! family (which also accept plain sets, every member scoring 1) and ZSCAN.
//!
//! The blocking variants (BZPOPMIN, BZPOPMAX, BZMPOP) live in the blocking
//! family and pop through [`pop_members`].
//!
//! Scores are printed as Redis 7.0 does: RESP2 bulk strings in `%.17g` form,
//! RESP3 doubles (both through `ReplyBuf::double`).

use crate::exec::notify::class as ev;
use std::collections::HashMap;

use vireo_resp::number::{format_double, parse_f64, parse_f64_lenient};
use vireo_resp::{Args, Protocol, ReplyBuf};
use vireo_store::zset::{cmp_entries, Limits, ZSet};
use vireo_store::{Keys, Value, ValueRef};

use super::shared::{parse_cursor, parse_scan_args, store_zset_result};
use super::{errors, flags::*, is, spec, CommandSpec, Ctx, KeySpec, KEY1};

/// Members popped from a sorted set, in popping order, with their scores.
pub(crate) type Popped = Vec<(Vec<u8>, f64)>;

/// Pops up to `count` lowest (`max == false`) or highest members of the zset
/// at `key`, deleting the key when it empties. Ok(None) if missing; Err(())
/// on a wrong type. The caller records the write (`ctx.modified`).
pub(crate) fn pop_members(
    keys: &mut Keys<'_>,
    db: usize,
    key: &[u8],
    max: bool,
    count: usize,
) -> Result<Option<Popped>, ()> {
    let Some(entry) = keys.get_mut(db, key) else {
        return Ok(None);
    };
    let Some(Value::ZSet(z)) = entry.object_mut() else {
        return Err(());
    };
    let popped = z.pop(max, count);
    if z.is_empty() {
        keys.delete(db, key);
    }
    Ok(Some(popped))
}

/// This family's commands, with Redis 7.0's arities, flags and key triples.
pub const COMMANDS: &[CommandSpec] = &[
    // ZADD's members follow its scores when it has no options; with
    // options the look-ahead prefetches a few wrong arguments, harmlessly.
    spec("zadd", -4, WRITE | DENYOOM | FAST, KEY1, zadd).with_members(3, 2),
    spec("zincrby", 4, WRITE | DENYOOM | FAST, KEY1, zincrby).with_members(3, 1),
    spec("zrem", -3, WRITE | FAST, KEY1, zrem).with_members(2, 1),
    spec("zcard", 2, READONLY | FAST, KEY1, zcard),
    spec("zcount", 4, READONLY | FAST, KEY1, zcount),
    spec("zlexcount", 4, READONLY | FAST, KEY1, zlexcount),
    spec("zscore", 3, READONLY | FAST, KEY1, zscore).with_members(2, 1),
    spec("zmscore", -3, READONLY | FAST, KEY1, zmscore).with_members(2, 1),
    spec("zrank", 3, READONLY | FAST, KEY1, zrank).with_members(2, 1),
    spec("zrevrank", 3, READONLY | FAST, KEY1, zrevrank).with_members(2, 1),
    spec("zrange", -4, READONLY, KEY1, zrange),
    spec(
        "zrangestore",
        -5,
        WRITE | DENYOOM,
        KeySpec::Range {
            first: 1,
            last: 2,
            step: 1,
        },
        zrangestore,
    ),
    spec("zrevrange", -4, READONLY, KEY1, zrevrange),
    spec("zrangebyscore", -4, READONLY, KEY1, zrangebyscore),
    spec("zrevrangebyscore", -4, READONLY, KEY1, zrevrangebyscore),
    spec("zrangebylex", -4, READONLY, KEY1, zrangebylex),
    spec("zrevrangebylex", -4, READONLY, KEY1, zrevrangebylex),
    spec("zremrangebyrank", 4, WRITE, KEY1, zremrangebyrank),
    spec("zremrangebyscore", 4, WRITE, KEY1, zremrangebyscore),
    spec("zremrangebylex", 4, WRITE, KEY1, zremrangebylex),
    spec("zpopmin", -2, WRITE | FAST, KEY1, zpopmin),
    spec("zpopmax", -2, WRITE | FAST, KEY1, zpopmax),
    spec("zmpop", -4, WRITE, NUMKEYS_AT_1, zmpop),
    spec("zrandmember", -2, READONLY, KEY1, zrandmember),
    spec("zunion", -3, READONLY, NUMKEYS_AT_1, zunion),
    spec("zinter", -3, READONLY, NUMKEYS_AT_1, zinter),
    spec("zdiff", -3, READONLY, NUMKEYS_AT_1, zdiff),
    spec("zintercard", -3, READONLY, NUMKEYS_AT_1, zintercard),
    spec(
        "zunionstore",
        -4,
        WRITE | DENYOOM,
        DEST_NUMKEYS_AT_2,
        zunionstore,
    ),
    spec(
        "zinterstore",
        -4,
        WRITE | DENYOOM,
        DEST_NUMKEYS_AT_2,
        zinterstore,
    ),
    spec(
        "zdiffstore",
        -4,
        WRITE | DENYOOM,
        DEST_NUMKEYS_AT_2,
        zdiffstore,
    ),
    spec("zscan", -3, READONLY, KEY1, zscan),
];

/// `numkeys key [key ...]` starting at argument 1 (ZUNION, ZMPOP, …).
const NUMKEYS_AT_1: KeySpec = KeySpec::Custom {
    first: 0,
    last: 0,
    step: 0,
    find: numkeys_at_1,
};

/// `destination numkeys key [key ...]` (ZUNIONSTORE, …).
const DEST_NUMKEYS_AT_2: KeySpec = KeySpec::Custom {
    first: 1,
    last: 1,
    step: 1,
    find: dest_numkeys_at_2,
};

/// The keys following a `numkeys` argument at `at`, clamped to the
/// arguments present (the handler reports a bad count).
fn numkeys_keys(args: Args<'_>, at: usize) -> Vec<usize> {
    let n = args
        .try_get(at)
        .and_then(vireo_resp::number::parse_i64)
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0);
    (at + 1..args.len()).take(n).collect()
}

fn numkeys_at_1(args: Args<'_>) -> Vec<usize> {
    numkeys_keys(args, 1)
}

fn dest_numkeys_at_2(args: Args<'_>) -> Vec<usize> {
    let mut keys = vec![1];
    keys.extend(numkeys_keys(args, 2));
    keys
}

const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";
const NOT_FLOAT_RANGE: &str = "ERR min or max is not a float";
const NOT_LEX_RANGE: &str = "ERR min or max not valid string range item";
const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";

/// The key exists but does not hold a sorted set: the caller replies
/// WRONGTYPE.
struct WrongType;

/// The conversion thresholds currently configured.
fn limits(ctx: &Ctx<'_>) -> Limits {
    ctx.server.config.hot.zset_limits()
}

/// The reply for a missing key.
#[derive(Clone, Copy)]
enum Missing {
    Zero,
    Null,
    EmptyArray,
}

/// The zset at `key` for reading (counting a keyspace hit or miss).
fn read<'k>(keys: &'k mut Keys<'_>, db: usize, key: &[u8]) -> Result<Option<&'k ZSet>, WrongType> {
    match keys.get_read(db, key) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::ZSet(z) => Ok(Some(z)),
            _ => Err(WrongType),
        },
    }
}

/// The zset at `key` for writing.
fn write<'k>(
    keys: &'k mut Keys<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'k mut ZSet>, WrongType> {
    match keys.get_mut(db, key) {
        None => Ok(None),
        Some(e) => match e.object_mut() {
            Some(Value::ZSet(z)) => Ok(Some(z)),
            _ => Err(WrongType),
        },
    }
}

/// Looks the zset up for reading; replies `missing` or WRONGTYPE and
/// returns None when there is nothing to work on.
fn read_or<'k>(
    keys: &'k mut Keys<'_>,
    out: &mut ReplyBuf,
    db: usize,
    key: &[u8],
    missing: Missing,
) -> Option<&'k ZSet> {
    match read(keys, db, key) {
        Ok(Some(z)) => Some(z),
        Ok(None) => {
            reply_missing(out, missing);
            None
        }
        Err(WrongType) => {
            out.error(errors::WRONGTYPE);
            None
        }
    }
}

/// Looks the zset up for writing; replies `missing` or WRONGTYPE and
/// returns None when there is nothing to work on.
fn write_or<'k>(
    keys: &'k mut Keys<'_>,
    out: &mut ReplyBuf,
    db: usize,
    key: &[u8],
    missing: Missing,
) -> Option<&'k mut ZSet> {
    match write(keys, db, key) {
        Ok(Some(z)) => Some(z),
        Ok(None) => {
            reply_missing(out, missing);
            None
        }
        Err(WrongType) => {
            out.error(errors::WRONGTYPE);
            None
        }
    }
}

fn reply_missing(out: &mut ReplyBuf, missing: Missing) {
    match missing {
        Missing::Zero => out.int(0),
        Missing::Null => out.null(),
        Missing::EmptyArray => out.array(0),
    }
}

/// Deletes `key` if the write left its zset empty, then records the write
/// and publishes `event` (and `del` for the deletion).
fn finish_write(ctx: &mut Ctx<'_>, key: &[u8], now_empty: bool, event: &str) {
    if now_empty {
        ctx.keys.delete(ctx.db, key);
    }
    ctx.modified(key);
    ctx.notify(ev::ZSET, event, key);
    if now_empty {
        ctx.notify(ev::GENERIC, "del", key);
    }
}

fn is_resp3(out: &ReplyBuf) -> bool {
    out.protocol() == Protocol::Resp3
}

/// Replies `n` members, with their scores when `withscores`: a flat array
/// (`member score member score …`) unless `nested`, where each member is a
/// `[member, score]` pair (RESP3).
fn reply_scored<'e>(
    out: &mut ReplyBuf,
    n: usize,
    withscores: bool,
    nested: bool,
    items: impl IntoIterator<Item = (&'e [u8], f64)>,
) {
    let nested = nested && withscores;
    out.array(if withscores && !nested { n * 2 } else { n });
    for (m, s) in items {
        if nested {
            out.array(2);
        }
        out.bulk(m);
        if withscores {
            out.double(s);
        }
    }
}

/// Owned (member, score) pairs, replied like [`reply_scored`].
fn reply_owned(out: &mut ReplyBuf, items: &[(Vec<u8>, f64)], withscores: bool, nested: bool) {
    reply_scored(
        out,
        items.len(),
        withscores,
        nested,
        items.iter().map(|(m, s)| (&m[..], *s)),
    );
}

// ---------------------------------------------------------------- ZADD

/// ZADD's options.
#[derive(Clone, Copy, Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    incr: bool,
}

/// What adding one element did.
enum Added {
    /// New member with this score.
    New(f64),
    /// Existing member whose score changed to this.
    Updated(f64),
    /// Existing member whose score stays this (processed, not changed).
    Same(f64),
    /// Skipped because of NX/XX/GT/LT.
    Nop,
    /// INCR produced NaN.
    Nan,
}

/// Redis's `zsetAdd`: adds or updates one member under the ZADD flags.
fn add_one(z: &mut ZSet, member: &[u8], score: f64, f: AddFlags, lim: Limits) -> Added {
    if !(f.nx || f.xx || f.gt || f.lt || f.incr) {
        // Plain ZADD: one lookup, the insert reports the previous score.
        return match z.insert(member, score, lim) {
            None => Added::New(score),
            Some(old) if old != score => Added::Updated(score),
            Some(old) => Added::Same(old),
        };
    }
    match z.score(member) {
        Some(cur) => {
            if f.nx {
                return Added::Nop;
            }
            let mut new = score;
            if f.incr {
                new += cur;
                if new.is_nan() {
                    return Added::Nan;
                }
            }
            if (f.lt && new >= cur) || (f.gt && new <= cur) {
                return Added::Nop;
            }
            if new != cur {
                z.insert(member, new, lim);
                Added::Updated(new)
            } else {
                Added::Same(new)
            }
        }
        None if !f.xx => {
            z.insert(member, score, lim);
            Added::New(score)
        }
        None => Added::Nop,
    }
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]:
/// adds members or updates their scores; replies the number added (or
/// added plus changed with CH), or with INCR the new score (null when the
/// update was skipped).
fn zadd(ctx: &mut Ctx<'_>, args: Args<'_>) {
    zadd_generic(ctx, args, AddFlags::default());
}

/// ZINCRBY key increment member: adds `increment` to the member's score
/// (creating it at `increment`) and replies the new score.
fn zincrby(ctx: &mut Ctx<'_>, args: Args<'_>) {
    zadd_generic(
        ctx,
        args,
        AddFlags {
            incr: true,
            ..AddFlags::default()
        },
    );
}

fn zadd_generic(ctx: &mut Ctx<'_>, args: Args<'_>, mut f: AddFlags) {
    let key = args.get(1);
    let mut ch = false;
    let mut idx = 2;
    while idx < args.len() {
        let opt = args.get(idx);
        if is(opt, "nx") {
            f.nx = true;
        } else if is(opt, "xx") {
            f.xx = true;
        } else if is(opt, "ch") {
            ch = true;
        } else if is(opt, "incr") {
            f.incr = true;
        } else if is(opt, "gt") {
            f.gt = true;
        } else if is(opt, "lt") {
            f.lt = true;
        } else {
            break;
        }
        idx += 1;
    }
    let elements = args.len() - idx;
    if elements == 0 || !elements.is_multiple_of(2) {
        return ctx.out.error(errors::SYNTAX);
    }
    if f.nx && f.xx {
        return ctx
            .out
            .error("ERR XX and NX options at the same time are not compatible");
    }
    if [f.gt, f.lt, f.nx].iter().filter(|&&on| on).count() > 1 {
        return ctx
            .out
            .error("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if f.incr && elements > 2 {
        return ctx
            .out
            .error("ERR INCR option supports a single increment-element pair");
    }
    let mut pairs = Vec::with_capacity(elements / 2);
    for i in (idx..args.len()).step_by(2) {
        let Some(score) = parse_f64(args.get(i)) else {
            return ctx.out.error(errors::NOT_FLOAT);
        };
        pairs.push((score, args.get(i + 1)));
    }
    let lim = limits(ctx);
    let mut created = None;
    let z = match write(&mut ctx.keys, ctx.db, key) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(Some(z)) => z,
        Ok(None) if f.xx => {
            return if f.incr {
                ctx.out.null()
            } else {
                ctx.out.int(0)
            };
        }
        Ok(None) => created.insert(ZSet::new(lim, pairs[0].1.len())),
    };
    let (mut added, mut updated) = (0i64, 0i64);
    let mut last = None;
    let mut nan = false;
    for &(score, member) in &pairs {
        last = match add_one(z, member, score, f, lim) {
            Added::New(s) => {
                added += 1;
                Some(s)
            }
            Added::Updated(s) => {
                updated += 1;
                Some(s)
            }
            Added::Same(s) => Some(s),
            Added::Nop => None,
            Added::Nan => {
                nan = true;
                break;
            }
        };
    }
    if let Some(z) = created {
        if !z.is_empty() {
            ctx.keys.set(ctx.db, key, Value::ZSet(z));
        }
    }
    if added + updated > 0 {
        ctx.modified(key);
        ctx.notify(ev::ZSET, if f.incr { "zincr" } else { "zadd" }, key);
        ctx.dirty += (added + updated - 1) as u64;
        if added > 0 {
            ctx.signal_ready(key);
        }
    }
    if nan {
        ctx.out.error(NAN_SCORE);
    } else if f.incr {
        match last {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    } else {
        ctx.out.int(if ch { added + updated } else { added });
    }
}

// ------------------------------------------------------- simple commands

/// ZREM key member [member ...]: removes the members, deleting the key
/// once empty; replies how many were removed.
fn zrem(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    let Some(z) = write_or(&mut ctx.keys, ctx.out, ctx.db, key, Missing::Zero) else {
        return;
    };
    let mut deleted = 0;
    for m in args.iter().skip(2) {
        if z.remove(m).is_some() {
            deleted += 1;
            if z.is_empty() {
                break;
            }
        }
    }
    let empty = z.is_empty();
    if deleted > 0 {
        finish_write(ctx, key, empty, "zrem");
        ctx.dirty += deleted as u64 - 1;
    }
    ctx.out.int(deleted);
}

/// ZCARD key: the number of members (0 for a missing key).
fn zcard(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if let Some(z) = read_or(&mut ctx.keys, ctx.out, ctx.db, args.get(1), Missing::Zero) {
        let n = z.len() as i64;
        ctx.out.int(n);
    }
}

/// ZSCORE key member: the member's score, or null.
fn zscore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if let Some(z) = read_or(&mut ctx.keys, ctx.out, ctx.db, args.get(1), Missing::Null) {
        match z.score(args.get(2)) {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    }
}

/// ZMSCORE key member [member ...]: the score of each member, null for
/// absent ones (all null for a missing key).
fn zmscore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let z = match read(&mut ctx.keys, ctx.db, args.get(1)) {
        Ok(z) => z,
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
    };
    ctx.out.array(args.len() - 2);
    for m in args.iter().skip(2) {
        match z.and_then(|z| z.score(m)) {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    }
}

/// ZRANK key member: the member's 0-based rank by ascending score, or null.
fn zrank(ctx: &mut Ctx<'_>, args: Args<'_>) {
    rank_generic(ctx, args, false);
}

/// ZREVRANK key member: the member's 0-based rank by descending score, or
/// null.
fn zrevrank(ctx: &mut Ctx<'_>, args: Args<'_>) {
    rank_generic(ctx, args, true);
}

fn rank_generic(ctx: &mut Ctx<'_>, args: Args<'_>, rev: bool) {
    if let Some(z) = read_or(&mut ctx.keys, ctx.out, ctx.db, args.get(1), Missing::Null) {
        match z.rank(args.get(2)) {
            Some((r, _)) => {
                let r = if rev { z.len() - 1 - r } else { r };
                ctx.out.int(r as i64);
            }
            None => ctx.out.null(),
        }
    }
}

// ------------------------------------------------------------- ranges

/// A score interval, `(` marking an exclusive end (Redis's `zrangespec`).
#[derive(Clone, Copy)]
struct ScoreRange {
    min: f64,
    minex: bool,
    max: f64,
    maxex: bool,
}

impl ScoreRange {
    /// Parses `min max` as Redis's `zslParseRange`.
    fn parse(min: &[u8], max: &[u8]) -> Option<Self> {
        let bound = |b: &[u8]| match b.split_first() {
            Some((b'(', rest)) => parse_f64_lenient(rest).map(|v| (v, true)),
            _ => parse_f64_lenient(b).map(|v| (v, false)),
        };
        let (min, minex) = bound(min)?;
        let (max, maxex) = bound(max)?;
        Some(ScoreRange {
            min,
            minex,
            max,
            maxex,
        })
    }

    /// The ascending ranks `start..end` of the members in range.
    fn ranks(&self, z: &ZSet) -> (usize, usize) {
        let start = z.rank_by_score(self.min, self.minex);
        let end = z.rank_by_score(self.max, !self.maxex);
        (start, end.max(start))
    }
}

/// One end of a lexicographic interval.
#[derive(Clone, Copy)]
enum Lex<'a> {
    /// `-`: before every member.
    Min,
    /// `+`: after every member.
    Max,
    /// `[member`.
    Incl(&'a [u8]),
    /// `(member`.
    Excl(&'a [u8]),
}

/// A lexicographic interval (Redis's `zlexrangespec`).
#[derive(Clone, Copy)]
struct LexRange<'a> {
    min: Lex<'a>,
    max: Lex<'a>,
}

impl<'a> LexRange<'a> {
    /// Parses `min max` as Redis's `zslParseLexRange`.
    fn parse(min: &'a [u8], max: &'a [u8]) -> Option<Self> {
        let item = |b: &'a [u8]| match b.split_first() {
            Some((b'+', [])) => Some(Lex::Max),
            Some((b'-', [])) => Some(Lex::Min),
            Some((b'(', rest)) => Some(Lex::Excl(rest)),
            Some((b'[', rest)) => Some(Lex::Incl(rest)),
            _ => None,
        };
        Some(LexRange {
            min: item(min)?,
            max: item(max)?,
        })
    }

    /// How many members sort before `bound`, or are not after it when
    /// `upper` (the end of the range).
    fn count_before(z: &ZSet, bound: Lex<'_>, upper: bool) -> usize {
        match bound {
            Lex::Min => 0,
            Lex::Max => z.len(),
            Lex::Incl(b) if upper => z.rank_where(|m, _| m <= b),
            Lex::Excl(b) if !upper => z.rank_where(|m, _| m <= b),
            Lex::Incl(b) | Lex::Excl(b) => z.rank_where(|m, _| m < b),
        }
    }

    /// The ascending ranks `start..end` of the members in range (the set's
    /// scores are assumed equal, as lexicographic commands require).
    fn ranks(&self, z: &ZSet) -> (usize, usize) {
        let start = Self::count_before(z, self.min, false);
        let end = Self::count_before(z, self.max, true);
        (start, end.max(start))
    }
}

/// Normalises Redis-style inclusive rank indices (negative from the end)
/// into `start..end`; None when the range is empty.
fn rank_window(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    let llen = len as i64;
    let start = if start < 0 { llen + start } else { start }.max(0);
    let end = if end < 0 { llen + end } else { end };
    if start > end || start >= llen {
        return None;
    }
    Some((start as usize, end.min(llen - 1) as usize + 1))
}

/// Applies LIMIT offset count to the in-range ranks `s..e`, counted from
/// the low end or (when `rev`) from the high end.
fn limit_window(s: usize, e: usize, offset: i64, count: i64, rev: bool) -> (usize, usize) {
    let Ok(off) = usize::try_from(offset) else {
        return (0, 0);
    };
    let avail = e - s;
    if off >= avail {
        return (0, 0);
    }
    let n = usize::try_from(count).map_or(avail - off, |c| c.min(avail - off));
    if rev {
        (e - off - n, e - off)
    } else {
        (s + off, s + off + n)
    }
}

/// How a ZRANGE-style command selects members.
#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Auto,
    Rank,
    Score,
    Lex,
}

/// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count]
/// [WITHSCORES]: the members in a rank, score or lex range, ascending or
/// (REV) descending.
fn zrange(ctx: &mut Ctx<'_>, args: Args<'_>) {
    range_generic(ctx, args, 1, None, By::Auto, None);
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]:
/// stores what ZRANGE would return at `dst` and replies its size.
fn zrangestore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    range_generic(ctx, args, 2, Some(args.get(1)), By::Auto, None);
}

/// ZREVRANGE key start stop [WITHSCORES]: ranks counted from the highest.
fn zrevrange(ctx: &mut Ctx<'_>, args: Args<'_>) {
    range_generic(ctx, args, 1, None, By::Rank, Some(true));
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count].
fn zrangebyscore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    range_generic(ctx, args, 1, None, By::Score, Some(false));
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count].
fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    range_generic(ctx, args, 1, None, By::Score, Some(true));
}

/// ZRANGEBYLEX key min max [LIMIT offset count].
fn zrangebylex(ctx: &mut Ctx<'_>, args: Args<'_>) {
    range_generic(ctx, args, 1, None, By::Lex, Some(false));
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count].
fn zrevrangebylex(ctx: &mut Ctx<'_>, args: Args<'_>) {
    range_generic(ctx, args, 1, None, By::Lex, Some(true));
}

/// A parsed range of any kind.
enum Range<'a> {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange<'a>),
}

impl Range<'_> {
    /// Parses `min max` for `by` (not Auto), replying the error on failure.
    fn parse<'a>(ctx: &mut Ctx<'_>, by: By, min: &'a [u8], max: &'a [u8]) -> Option<Range<'a>> {
        match by {
            By::Score => match ScoreRange::parse(min, max) {
                Some(r) => Some(Range::Score(r)),
                None => {
                    ctx.out.error(NOT_FLOAT_RANGE);
                    None
                }
            },
            By::Lex => match LexRange::parse(min, max) {
                Some(r) => Some(Range::Lex(r)),
                None => {
                    ctx.out.error(NOT_LEX_RANGE);
                    None
                }
            },
            By::Auto | By::Rank => {
                let start = ctx.int_arg(min)?;
                let end = ctx.int_arg(max)?;
                Some(Range::Rank(start, end))
            }
        }
    }

    /// The ascending ranks `start..end` selected in `z`; rank ranges
    /// count from the high end when `rev`.
    fn ranks(&self, z: &ZSet, rev: bool) -> (usize, usize) {
        match self {
            Range::Rank(a, b) => match rank_window(z.len(), *a, *b) {
                Some((s, e)) if rev => (z.len() - e, z.len() - s),
                Some(w) => w,
                None => (0, 0),
            },
            Range::Score(r) => r.ranks(z),
            Range::Lex(r) => r.ranks(z),
        }
    }
}

/// Redis's `zrangeGenericCommand`: parses the options after `src min max`,
/// then replies the selected members or (with `dst`) stores them.
fn range_generic(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    src_idx: usize,
    dst: Option<&[u8]>,
    mut by: By,
    mut rev: Option<bool>,
) {
    let mut withscores = false;
    let mut limit: Option<(i64, i64)> = None;
    let mut j = src_idx + 3;
    while j < args.len() {
        let a = args.get(j);
        let left = args.len() - j - 1;
        if dst.is_none() && is(a, "withscores") {
            withscores = true;
        } else if is(a, "limit") && left >= 2 {
            let Some(off) = ctx.int_arg(args.get(j + 1)) else {
                return;
            };
            let Some(cnt) = ctx.int_arg(args.get(j + 2)) else {
                return;
            };
            limit = Some((off, cnt));
            j += 2;
        } else if rev.is_none() && is(a, "rev") {
            rev = Some(true);
        } else if by == By::Auto && is(a, "bylex") {
            by = By::Lex;
        } else if by == By::Auto && is(a, "byscore") {
            by = By::Score;
        } else {
            return ctx.out.error(errors::SYNTAX);
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    if by == By::Auto {
        by = By::Rank;
    }
    // Only a LIMIT with a count other than -1 counts, as in Redis.
    if by == By::Rank && limit.is_some_and(|(_, c)| c != -1) {
        return ctx.out.error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if withscores && by == By::Lex {
        return ctx
            .out
            .error("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    let (mut min, mut max) = (args.get(src_idx + 1), args.get(src_idx + 2));
    if rev && by != By::Rank {
        std::mem::swap(&mut min, &mut max);
    }
    let Some(range) = Range::parse(ctx, by, min, max) else {
        return;
    };
    let (offset, count) = limit.unwrap_or((0, -1));
    let src = args.get(src_idx);
    let z = match read(&mut ctx.keys, ctx.db, src) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(z) => z,
    };
    let (s, e) = z.map_or((0, 0), |z| {
        let (s, e) = range.ranks(z, rev);
        match range {
            Range::Rank(..) => (s, e),
            _ => limit_window(s, e, offset, count, rev),
        }
    });
    let Some(dst) = dst else {
        let resp3 = is_resp3(ctx.out);
        match z {
            Some(z) => reply_scored(ctx.out, e - s, withscores, resp3, z.range(s, e, rev)),
            None => ctx.out.array(0),
        }
        return;
    };
    let items: Vec<(Vec<u8>, f64)> = z.map_or_else(Vec::new, |z| {
        z.range(s, e, false)
            .map(|(m, sc)| (m.to_vec(), sc))
            .collect()
    });
    store_zset_result(ctx, dst, items, "zrangestore");
}

/// ZCOUNT key min max: the number of members with a score in range.
fn zcount(ctx: &mut Ctx<'_>, args: Args<'_>) {
    count_generic(ctx, args, By::Score);
}

/// ZLEXCOUNT key min max: the number of members in a lexicographic range.
fn zlexcount(ctx: &mut Ctx<'_>, args: Args<'_>) {
    count_generic(ctx, args, By::Lex);
}

fn count_generic(ctx: &mut Ctx<'_>, args: Args<'_>, by: By) {
    let Some(range) = Range::parse(ctx, by, args.get(2), args.get(3)) else {
        return;
    };
    if let Some(z) = read_or(&mut ctx.keys, ctx.out, ctx.db, args.get(1), Missing::Zero) {
        let (s, e) = range.ranks(z, false);
        ctx.out.int((e - s) as i64);
    }
}

/// ZREMRANGEBYRANK key start stop: removes the members in a rank range;
/// replies how many.
fn zremrangebyrank(ctx: &mut Ctx<'_>, args: Args<'_>) {
    remrange_generic(ctx, args, By::Rank);
}

/// ZREMRANGEBYSCORE key min max: removes the members in a score range;
/// replies how many.
fn zremrangebyscore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    remrange_generic(ctx, args, By::Score);
}

/// ZREMRANGEBYLEX key min max: removes the members in a lexicographic
/// range; replies how many.
fn zremrangebylex(ctx: &mut Ctx<'_>, args: Args<'_>) {
    remrange_generic(ctx, args, By::Lex);
}

fn remrange_generic(ctx: &mut Ctx<'_>, args: Args<'_>, by: By) {
    let key = args.get(1);
    let Some(range) = Range::parse(ctx, by, args.get(2), args.get(3)) else {
        return;
    };
    let Some(z) = write_or(&mut ctx.keys, ctx.out, ctx.db, key, Missing::Zero) else {
        return;
    };
    let (s, e) = range.ranks(z, false);
    let removed = z.remove_range(s, e);
    let empty = z.is_empty();
    if removed > 0 {
        let event = match by {
            By::Rank | By::Auto => "zremrangebyrank",
            By::Score => "zremrangebyscore",
            By::Lex => "zremrangebylex",
        };
        finish_write(ctx, key, empty, event);
        ctx.dirty += removed as u64 - 1;
    }
    ctx.out.int(removed as i64);
}

// ------------------------------------------------------------------ pops

/// ZPOPMIN key [count]: removes and replies the lowest-scored members.
fn zpopmin(ctx: &mut Ctx<'_>, args: Args<'_>) {
    pop_generic(ctx, args, false);
}

/// ZPOPMAX key [count]: removes and replies the highest-scored members.
fn zpopmax(ctx: &mut Ctx<'_>, args: Args<'_>) {
    pop_generic(ctx, args, true);
}

fn pop_generic(ctx: &mut Ctx<'_>, args: Args<'_>, max: bool) {
    if args.len() > 3 {
        return ctx.out.error(errors::SYNTAX);
    }
    let mut count = None;
    if let Some(arg) = args.try_get(2) {
        // Redis's getPositiveLongFromObjectOrReply: one error for both a
        // non-integer and a negative count.
        match vireo_resp::number::parse_i64(arg).map(usize::try_from) {
            Some(Ok(n)) => count = Some(n),
            _ => return ctx.out.error(NOT_POSITIVE),
        }
    }
    let key = args.get(1);
    let popped = match pop_members(&mut ctx.keys, ctx.db, key, max, count.unwrap_or(1)) {
        Err(()) => return ctx.out.error(errors::WRONGTYPE),
        Ok(None) => return ctx.out.array(0),
        Ok(Some(p)) => p,
    };
    if !popped.is_empty() {
        ctx.modified(key);
        ctx.dirty += popped.len() as u64 - 1;
        notify_zpopped(ctx, key, max);
    }
    let nested = count.is_some() && is_resp3(ctx.out);
    reply_owned(ctx.out, &popped, true, nested);
}

/// Redis's events for a pop from `key`: `zpopmin`/`zpopmax`, then `del`
/// if the set emptied.
fn notify_zpopped(ctx: &mut Ctx<'_>, key: &[u8], max: bool) {
    if crate::exec::notify::flags(ctx.server) == 0 {
        return;
    }
    ctx.notify(ev::ZSET, if max { "zpopmax" } else { "zpopmin" }, key);
    if !ctx.keys.contains(ctx.db, key) {
        ctx.notify(ev::GENERIC, "del", key);
    }
}

/// Parses `numkeys key [key ...]` at argument `at` for ZMPOP-style commands
/// and `MIN|MAX [COUNT count]` after the keys; replies the error and
/// returns None on bad input. Yields (keys, max, count).
pub(crate) fn parse_mpop<'a>(
    ctx: &mut Ctx<'_>,
    args: Args<'a>,
    at: usize,
) -> Option<(Vec<&'a [u8]>, bool, usize)> {
    const NUMKEYS: &str = "ERR numkeys should be greater than 0";
    const COUNT: &str = "ERR count should be greater than 0";
    let numkeys = match vireo_resp::number::parse_i64(args.get(at)) {
        Some(n) if n >= 1 => n as u64,
        _ => {
            ctx.out.error(NUMKEYS);
            return None;
        }
    };
    let avail = (args.len() - at - 1) as u64;
    if numkeys >= avail {
        ctx.out.error(errors::SYNTAX);
        return None;
    }
    let first = at + 1;
    let where_idx = first + numkeys as usize;
    let keys = (first..where_idx).map(|i| args.get(i)).collect();
    let w = args.get(where_idx);
    let max = if is(w, "min") {
        false
    } else if is(w, "max") {
        true
    } else {
        ctx.out.error(errors::SYNTAX);
        return None;
    };
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && is(args.get(j), "count") && j + 1 < args.len() {
            match vireo_resp::number::parse_i64(args.get(j + 1)) {
                Some(n) if n >= 1 => count = Some(usize::try_from(n).unwrap_or(usize::MAX)),
                _ => {
                    ctx.out.error(COUNT);
                    return None;
                }
            }
            j += 2;
        } else {
            ctx.out.error(errors::SYNTAX);
            return None;
        }
    }
    Some((keys, max, count.unwrap_or(1)))
}

/// Replies a ZMPOP-style result: `[key, [[member, score], ...]]`.
pub(crate) fn reply_mpop(out: &mut ReplyBuf, key: &[u8], popped: &[(Vec<u8>, f64)]) {
    out.array(2);
    out.bulk(key);
    reply_owned(out, popped, true, true);
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]: pops from the first
/// non-empty sorted set among the keys; replies `[key, [[member, score],
/// ...]]`, or null when every key is missing.
fn zmpop(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some((keys, max, count)) = parse_mpop(ctx, args, 1) else {
        return;
    };
    for key in keys {
        match pop_members(&mut ctx.keys, ctx.db, key, max, count) {
            Err(()) => return ctx.out.error(errors::WRONGTYPE),
            Ok(None) => continue,
            Ok(Some(popped)) => {
                let pop = super::shared::Pop::ZSet {
                    max,
                    count: Some(count),
                };
                ctx.propagate(&super::shared::pop_effect(pop, key, popped.len()));
                ctx.modified(key);
                ctx.dirty += popped.len() as u64 - 1;
                notify_zpopped(ctx, key, max);
                return reply_mpop(ctx.out, key, &popped);
            }
        }
    }
    ctx.out.null_array();
}

// ----------------------------------------------------------- ZRANDMEMBER

/// ZRANDMEMBER key [count [WITHSCORES]]: one random member (null when the
/// key is missing), or with a count that many distinct members (at most the
/// set's size), or with a negative count that many picks with repetition.
fn zrandmember(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    if args.len() == 2 {
        if let Some(z) = read_or(&mut ctx.keys, ctx.out, ctx.db, key, Missing::Null) {
            let r = fastrand::usize(..z.len());
            if let Some((m, _)) = z.get(r) {
                ctx.out.bulk(m);
            }
        }
        return;
    }
    let Some(l) = ctx.int_arg(args.get(2)) else {
        return;
    };
    if l == i64::MIN {
        return ctx.out.error(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        );
    }
    if args.len() > 4 || (args.len() == 4 && !is(args.get(3), "withscores")) {
        return ctx.out.error(errors::SYNTAX);
    }
    let withscores = args.len() == 4;
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
        return ctx.out.error("ERR value is out of range");
    }
    let Some(z) = read_or(&mut ctx.keys, ctx.out, ctx.db, key, Missing::EmptyArray) else {
        return;
    };
    let nested = is_resp3(ctx.out);
    let count = l.unsigned_abs() as usize;
    let size = z.len();
    let mut rng = fastrand::Rng::new();
    if l < 0 {
        let picks = (0..count).map(|_| z.get(rng.usize(..size)).unwrap_or((&[], 0.0)));
        return reply_scored(ctx.out, count, withscores, nested, picks);
    }
    if count >= size {
        // The whole set, highest first: Redis walks sorted sets from the
        // tail when it iterates them for set operations.
        return reply_scored(ctx.out, size, withscores, nested, z.range(0, size, true));
    }
    // Distinct ranks: drop random ones from the whole set when the sample
    // is a large part of it, otherwise draw until enough distinct ones.
    let mut ranks: Vec<usize> = if count * 3 > size {
        let mut all: Vec<usize> = (0..size).collect();
        rng.shuffle(&mut all);
        all.truncate(count);
        all
    } else {
        let mut seen = std::collections::HashSet::with_capacity(count);
        while seen.len() < count {
            seen.insert(rng.usize(..size));
        }
        seen.into_iter().collect()
    };
    rng.shuffle(&mut ranks);
    let picks = ranks.into_iter().map(|r| z.get(r).unwrap_or((&[], 0.0)));
    reply_scored(ctx.out, count, withscores, nested, picks);
}

// ------------------------------------------------- ZUNION / ZINTER / ZDIFF

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// Redis's `zunionInterAggregate`.
fn aggregate(target: &mut f64, v: f64, agg: Aggregate) {
    match agg {
        Aggregate::Sum => {
            *target += v;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if v < *target {
                *target = v;
            }
        }
        Aggregate::Max => {
            if v > *target {
                *target = v;
            }
        }
    }
}

/// The value at `key` as a set-operation input (no statistics: the keys
/// were already looked up once).
fn source<'k>(keys: &'k mut Keys<'_>, db: usize, key: &[u8]) -> Option<ValueRef<'k>> {
    keys.get_mut(db, key).map(|e| e.value())
}

/// Calls `f` for every (member, score) of a zset or set (score 1).
fn for_each_scored(v: ValueRef, mut f: impl FnMut(&[u8], f64)) {
    match v {
        ValueRef::ZSet(z) => z.iter().for_each(|(m, s)| f(m, s)),
        ValueRef::Set(s) => {
            let mut buf = itoa::Buffer::new();
            for m in s.iter() {
                f(m.as_bytes(&mut buf), 1.0);
            }
        }
        _ => {}
    }
}

/// The score of `member` in a zset or set (1 when present in a set).
fn score_in(v: ValueRef, member: &[u8]) -> Option<f64> {
    match v {
        ValueRef::ZSet(z) => z.score(member),
        ValueRef::Set(s) => s.contains(member).then_some(1.0),
        _ => None,
    }
}

/// ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]
/// [WITHSCORES]: the union of the sorted sets (or sets), scores weighted and
/// aggregated.
fn zunion(ctx: &mut Ctx<'_>, args: Args<'_>) {
    setop_generic(ctx, args, SetOp::Union, None, "zunion");
}

/// ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]
/// [WITHSCORES]: the members present in every input.
fn zinter(ctx: &mut Ctx<'_>, args: Args<'_>) {
    setop_generic(ctx, args, SetOp::Inter, None, "zinter");
}

/// ZDIFF numkeys key [key ...] [WITHSCORES]: the members of the first input
/// absent from all the others, with their scores in the first.
fn zdiff(ctx: &mut Ctx<'_>, args: Args<'_>) {
    setop_generic(ctx, args, SetOp::Diff, None, "zdiff");
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]: the size of the
/// intersection, counting at most `limit` when it is not 0.
fn zintercard(ctx: &mut Ctx<'_>, args: Args<'_>) {
    setop_generic(ctx, args, SetOp::Inter, None, "zintercard");
}

/// ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS …] [AGGREGATE …]:
/// stores the union at `destination` and replies its size.
fn zunionstore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    setop_generic(ctx, args, SetOp::Union, Some(args.get(1)), "zunionstore");
}

/// ZINTERSTORE destination numkeys key [key ...] [WEIGHTS …] [AGGREGATE …]:
/// stores the intersection at `destination` and replies its size.
fn zinterstore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    setop_generic(ctx, args, SetOp::Inter, Some(args.get(1)), "zinterstore");
}

/// ZDIFFSTORE destination numkeys key [key ...]: stores the difference at
/// `destination` and replies its size.
fn zdiffstore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    setop_generic(ctx, args, SetOp::Diff, Some(args.get(1)), "zdiffstore");
}

/// Options of the set-operation commands.
struct SetOpOptions {
    weights: Vec<f64>,
    agg: Aggregate,
    withscores: bool,
    /// ZINTERCARD's LIMIT (0: none).
    limit: usize,
}

/// Parses the options after the keys, starting at `j`; replies the error
/// and returns None on bad input.
fn parse_setop_options(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    mut j: usize,
    n: usize,
    op: SetOp,
    store: bool,
    card_only: bool,
) -> Option<SetOpOptions> {
    let mut o = SetOpOptions {
        weights: vec![1.0; n],
        agg: Aggregate::Sum,
        withscores: false,
        limit: 0,
    };
    let scored = op != SetOp::Diff && !card_only;
    while j < args.len() {
        let remaining = args.len() - j;
        let a = args.get(j);
        if scored && remaining > n && is(a, "weights") {
            for i in 0..n {
                match parse_f64(args.get(j + 1 + i)) {
                    Some(w) => o.weights[i] = w,
                    None => {
                        ctx.out.error("ERR weight value is not a float");
                        return None;
                    }
                }
            }
            j += n + 1;
        } else if scored && remaining >= 2 && is(a, "aggregate") {
            let v = args.get(j + 1);
            o.agg = if is(v, "sum") {
                Aggregate::Sum
            } else if is(v, "min") {
                Aggregate::Min
            } else if is(v, "max") {
                Aggregate::Max
            } else {
                ctx.out.error(errors::SYNTAX);
                return None;
            };
            j += 2;
        } else if !store && !card_only && is(a, "withscores") {
            o.withscores = true;
            j += 1;
        } else if card_only && remaining >= 2 && is(a, "limit") {
            match vireo_resp::number::parse_i64(args.get(j + 1)) {
                Some(l) if l >= 0 => o.limit = usize::try_from(l).unwrap_or(usize::MAX),
                _ => {
                    ctx.out.error("ERR LIMIT can't be negative");
                    return None;
                }
            }
            j += 2;
        } else {
            ctx.out.error(errors::SYNTAX);
            return None;
        }
    }
    Some(o)
}

/// Redis's `zunionInterDiffGenericCommand` for every set-operation command.
fn setop_generic(ctx: &mut Ctx<'_>, args: Args<'_>, op: SetOp, dst: Option<&[u8]>, name: &str) {
    let card_only = name == "zintercard";
    let numkeys_idx = if dst.is_some() { 2 } else { 1 };
    let Some(n) = ctx.int_arg(args.get(numkeys_idx)) else {
        return;
    };
    if n < 1 {
        return ctx.out.error(&format!(
            "ERR at least 1 input key is needed for '{name}' command"
        ));
    }
    if n as u64 > (args.len() - numkeys_idx - 1) as u64 {
        return ctx.out.error(errors::SYNTAX);
    }
    let n = n as usize;
    let keys: Vec<&[u8]> = (0..n).map(|i| args.get(numkeys_idx + 1 + i)).collect();
    let mut lens = Vec::with_capacity(n);
    for key in &keys {
        lens.push(match ctx.keys.get_read(ctx.db, key).map(|e| e.value()) {
            None => 0,
            Some(ValueRef::ZSet(z)) => z.len(),
            Some(ValueRef::Set(s)) => s.len(),
            Some(_) => return ctx.out.error(errors::WRONGTYPE),
        });
    }
    let Some(opts) = parse_setop_options(
        ctx,
        args,
        numkeys_idx + 1 + n,
        n,
        op,
        dst.is_some(),
        card_only,
    ) else {
        return;
    };
    let mut order: Vec<usize> = (0..n).collect();
    if op != SetOp::Diff {
        order.sort_by_key(|&i| lens[i]);
    }
    let (db, w, agg) = (ctx.db, &opts.weights, opts.agg);
    let result: Vec<(Vec<u8>, f64)> = match op {
        SetOp::Inter => {
            let first = order[0];
            // (member, unweighted score, aggregate)
            let mut cands: Vec<(Vec<u8>, f64, f64)> = Vec::new();
            if lens[first] > 0 {
                if let Some(v) = source(&mut ctx.keys, db, keys[first]) {
                    for_each_scored(v, |m, s| {
                        let mut acc = w[first] * s;
                        if acc.is_nan() {
                            acc = 0.0;
                        }
                        cands.push((m.to_vec(), s, acc));
                    });
                }
            }
            for &i in &order[1..] {
                if cands.is_empty() {
                    break;
                }
                if keys[i] == keys[first] {
                    for c in &mut cands {
                        aggregate(&mut c.2, c.1 * w[i], agg);
                    }
                    continue;
                }
                let Some(v) = source(&mut ctx.keys, db, keys[i]) else {
                    cands.clear();
                    break;
                };
                cands.retain_mut(|c| match score_in(v, &c.0) {
                    Some(s) => {
                        aggregate(&mut c.2, s * w[i], agg);
                        true
                    }
                    None => false,
                });
            }
            if card_only {
                let mut card = cands.len();
                if opts.limit > 0 {
                    card = card.min(opts.limit);
                }
                return ctx.out.int(card as i64);
            }
            cands.into_iter().map(|(m, _, acc)| (m, acc)).collect()
        }
        SetOp::Union => {
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            for &i in &order {
                if lens[i] == 0 {
                    continue;
                }
                let Some(v) = source(&mut ctx.keys, db, keys[i]) else {
                    continue;
                };
                for_each_scored(v, |m, s| {
                    let mut score = w[i] * s;
                    if score.is_nan() {
                        score = 0.0;
                    }
                    match acc.get_mut(m) {
                        Some(t) => aggregate(t, score, agg),
                        None => {
                            acc.insert(m.to_vec(), score);
                        }
                    }
                });
            }
            acc.into_iter().collect()
        }
        SetOp::Diff => {
            let mut cands: Vec<(Vec<u8>, f64)> = Vec::new();
            if lens[0] > 0 {
                if let Some(v) = source(&mut ctx.keys, db, keys[0]) {
                    for_each_scored(v, |m, s| cands.push((m.to_vec(), s)));
                }
            }
            for i in 1..n {
                if cands.is_empty() {
                    break;
                }
                if lens[i] == 0 {
                    continue;
                }
                if keys[i] == keys[0] {
                    cands.clear();
                    break;
                }
                if let Some(v) = source(&mut ctx.keys, db, keys[i]) {
                    cands.retain(|c| score_in(v, &c.0).is_none());
                }
            }
            cands
        }
    };
    match dst {
        Some(dst) => store_zset_result(ctx, dst, result, name),
        None => {
            let mut result = result;
            result.sort_by(|a, b| cmp_entries((a.1, &a.0), (b.1, &b.0)));
            let nested = is_resp3(ctx.out);
            reply_owned(ctx.out, &result, opts.withscores, nested);
        }
    }
}

// ------------------------------------------------------------------ ZSCAN

/// ZSCAN key cursor [MATCH pattern] [COUNT count]: one step of an
/// incremental walk over the members; replies the next cursor and a flat
/// list of members and scores (scores as bulk strings in every protocol).
fn zscan(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(cursor) = parse_cursor(args.get(2)) else {
        return ctx.out.error("ERR invalid cursor");
    };
    match read(&mut ctx.keys, ctx.db, args.get(1)) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(None) => {
            ctx.out.array(2);
            ctx.out.bulk(b"0");
            return ctx.out.array(0);
        }
        Ok(Some(_)) => {}
    }
    let Some(opts) = parse_scan_args(ctx, args, 2, false) else {
        return;
    };
    let Ok(Some(z)) = read(&mut ctx.keys, ctx.db, args.get(1)) else {
        return ctx.out.array(0);
    };
    let mut found: Vec<(Vec<u8>, f64)> = Vec::new();
    let next = z.scan(cursor, opts.count, |m, s| {
        if opts.matches(m) {
            found.push((m.to_vec(), s));
        }
    });
    let out = &mut *ctx.out;
    out.array(2);
    out.bulk(itoa::Buffer::new().format(next).as_bytes());
    out.array(found.len() * 2);
    for (m, s) in &found {
        out.bulk(m);
        out.bulk(format_double(*s).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_windows_follow_redis() {
        assert_eq!(rank_window(5, 0, -1), Some((0, 5)));
        assert_eq!(rank_window(5, -2, -1), Some((3, 5)));
        assert_eq!(rank_window(5, -100, 1), Some((0, 2)));
        assert_eq!(rank_window(5, 3, 1), None);
        assert_eq!(rank_window(5, 5, 10), None);
        assert_eq!(rank_window(5, 0, i64::MAX), Some((0, 5)));
        assert_eq!(rank_window(5, i64::MIN, i64::MIN), None);
        assert_eq!(rank_window(0, 0, -1), None);
    }

    #[test]
    fn limit_windows() {
        assert_eq!(limit_window(2, 8, 0, -1, false), (2, 8));
        assert_eq!(limit_window(2, 8, 1, 2, false), (3, 5));
        assert_eq!(limit_window(2, 8, 1, 2, true), (5, 7));
        assert_eq!(limit_window(2, 8, 6, 2, false), (0, 0));
        assert_eq!(limit_window(2, 8, -1, 2, false), (0, 0));
        assert_eq!(limit_window(2, 8, 0, 0, false), (2, 2));
        assert_eq!(limit_window(2, 8, 0, i64::MAX, true), (2, 8));
    }

    #[test]
    fn score_ranges_parse_like_zslparserange() {
        let r = ScoreRange::parse(b"(1", b"+inf").unwrap();
        assert!(r.minex && !r.maxex && r.min == 1.0 && r.max == f64::INFINITY);
        assert!(ScoreRange::parse(b"nan", b"1").is_none());
        assert!(ScoreRange::parse(b"1x", b"1").is_none());
        assert!(ScoreRange::parse(b"(", b"1").is_some());
    }

    #[test]
    fn lex_ranges_parse_like_zslparselexrange() {
        assert!(LexRange::parse(b"-", b"+").is_some());
        assert!(LexRange::parse(b"[a", b"(b").is_some());
        assert!(LexRange::parse(b"a", b"+").is_none());
        assert!(LexRange::parse(b"", b"+").is_none());
        assert!(LexRange::parse(b"-x", b"+").is_none());
    }

    #[test]
    fn numkeys_key_positions() {
        let args = vireo_resp::OwnedArgs::from_slices(["zunion", "2", "a", "b", "WEIGHTS"]);
        assert_eq!(numkeys_at_1(args.as_args()), vec![2, 3]);
        let args = vireo_resp::OwnedArgs::from_slices(["zunionstore", "d", "9", "a"]);
        assert_eq!(dest_numkeys_at_2(args.as_args()), vec![1, 3]);
        let args = vireo_resp::OwnedArgs::from_slices(["zmpop", "-1", "a"]);
        assert!(numkeys_at_1(args.as_args()).is_empty());
    }
}
