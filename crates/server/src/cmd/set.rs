//! Set commands (Redis's `t_set.c`): SADD, SREM, SMEMBERS, SISMEMBER,
//! SMISMEMBER, SCARD, SPOP, SRANDMEMBER, SMOVE, the SINTER / SUNION / SDIFF
//! families with their STORE variants, SINTERCARD and SSCAN.
//!
//! Values are [`Set`]s (`intset` or `hashtable`, converting at
//! `set-max-intset-entries`). Multi-key commands first look every key up
//! the usual way (expiry, statistics, type check) and then borrow all the
//! sets at once through [`vireo_store::Keys::peek`]; results are computed
//! into new sets built from an empty intset, as Redis builds them, so their
//! encodings and (for intsets) their ascending order match Redis's.

use crate::exec::notify::class as ev;
use std::sync::atomic::Ordering;

use vireo_resp::number::parse_i64;
use vireo_resp::{Args, ReplyBuf};
use vireo_store::set::{Member, Set};
use vireo_store::{Keys, Value, ValueRef};

use super::shared::reply_budget;
use super::shared::{parse_cursor, parse_scan_args};
use super::{errors, flags::*, is, spec, CommandSpec, Ctx, KeySpec, ALL_ARGS_KEYS, KEY1};

/// This family's commands, with Redis 7.0's arities, flags and key triples.
pub const COMMANDS: &[CommandSpec] = &[
    spec("sadd", -3, WRITE | DENYOOM | FAST, KEY1, sadd).with_members(2, 1),
    spec("srem", -3, WRITE | FAST, KEY1, srem).with_members(2, 1),
    spec("smembers", 2, READONLY, KEY1, sinter),
    spec("sismember", 3, READONLY | FAST, KEY1, sismember).with_members(2, 1),
    spec("smismember", -3, READONLY | FAST, KEY1, smismember).with_members(2, 1),
    spec("scard", 2, READONLY | FAST, KEY1, scard),
    spec("spop", -2, WRITE | FAST, KEY1, spop),
    spec("srandmember", -2, READONLY, KEY1, srandmember),
    spec(
        "smove",
        4,
        WRITE | FAST,
        KeySpec::Range {
            first: 1,
            last: 2,
            step: 1,
        },
        smove,
    ),
    spec("sinter", -2, READONLY, ALL_ARGS_KEYS, sinter),
    spec(
        "sintercard",
        -3,
        READONLY,
        // Redis reports no legacy key range for it (the keys follow numkeys).
        KeySpec::Custom {
            first: 0,
            last: 0,
            step: 0,
            find: sintercard_keys,
        },
        sintercard,
    ),
    spec(
        "sinterstore",
        -3,
        WRITE | DENYOOM,
        ALL_ARGS_KEYS,
        sinterstore,
    ),
    spec("sunion", -2, READONLY, ALL_ARGS_KEYS, sunion),
    spec(
        "sunionstore",
        -3,
        WRITE | DENYOOM,
        ALL_ARGS_KEYS,
        sunionstore,
    ),
    spec("sdiff", -2, READONLY, ALL_ARGS_KEYS, sdiff),
    spec("sdiffstore", -3, WRITE | DENYOOM, ALL_ARGS_KEYS, sdiffstore),
    spec("sscan", -3, READONLY, KEY1, sscan),
];

const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";
const SRANDMEMBER_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
const NUMKEYS: &str = "ERR numkeys should be greater than 0";
const TOO_MANY_KEYS: &str = "ERR Number of keys can't be greater than number of args";
const LIMIT_NEGATIVE: &str = "ERR LIMIT can't be negative";

/// How many random members are written between two checks of the reply's
/// size.
const RANDOM_REPLY_CHECK_EVERY: usize = 1024;

/// The key exists but does not hold a set: the caller replies WRONGTYPE.
struct WrongType;

/// The set stored under `key`: `Ok(None)` when the key is missing,
/// `Err(WrongType)` when it holds another type. A `read` lookup counts
/// keyspace hits and misses (Redis's `lookupKeyRead`); otherwise it is a
/// write lookup.
fn lookup<'k>(
    keys: &'k mut Keys<'_>,
    db: usize,
    key: &[u8],
    read: bool,
) -> Result<Option<&'k mut Set>, WrongType> {
    let entry = if read {
        keys.get_read(db, key)
    } else {
        keys.get_mut(db, key)
    };
    match entry {
        None => Ok(None),
        Some(e) => match e.object_mut() {
            Some(Value::Set(s)) => Ok(Some(s)),
            _ => Err(WrongType),
        },
    }
}

/// The set under `key` borrowed without side effects; the key must have
/// been looked up already (see [`load_sets`]).
fn peek_set<'k>(keys: &'k Keys<'_>, db: usize, key: &[u8]) -> Option<&'k Set> {
    match keys.peek(db, key)?.value() {
        ValueRef::Set(s) => Some(s),
        _ => None,
    }
}

/// Looks every key in `names` up for reading (expiring, counting and type
/// checking each, like Redis's loop of `lookupKeyRead`); true if any is
/// missing. Err after the first key of another type.
fn load_sets(ctx: &mut Ctx<'_>, names: &[&[u8]]) -> Result<bool, WrongType> {
    let mut missing = false;
    for name in names {
        missing |= lookup(&mut ctx.keys, ctx.db, name, true)?.is_none();
    }
    Ok(missing)
}

/// The configured `set-max-intset-entries`.
fn max_intset(ctx: &Ctx<'_>) -> usize {
    let v = ctx
        .server
        .config
        .hot
        .set_max_intset_entries
        .load(Ordering::Relaxed);
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// Records `n` changes to `key` (Redis adds one to `dirty` per member).
fn modified_n(ctx: &mut Ctx<'_>, key: &[u8], n: usize) {
    ctx.modified(key);
    ctx.dirty += n.saturating_sub(1) as u64;
}

/// Replies one member as a bulk string.
fn reply_member(out: &mut ReplyBuf, m: Member<&[u8]>) {
    match m {
        Member::Int(v) => out.bulk_int(v),
        Member::Bytes(b) => out.bulk(b),
    }
}

/// Replies every member of `set` as a set (an array in RESP2).
fn reply_members(out: &mut ReplyBuf, set: &Set) {
    out.set(set.len());
    for m in set.iter() {
        reply_member(out, m);
    }
}

/// The arguments from `from` on, as key names.
fn names_from(args: Args<'_>, from: usize) -> Vec<&[u8]> {
    args.iter().skip(from).collect()
}

/// SADD key member [member ...]: adds the members, creating the set;
/// replies how many were not there yet.
fn sadd(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    let max = max_intset(ctx);
    let add_all = |set: &mut Set| args.iter().skip(2).filter(|m| set.insert(m, max)).count();
    let added = match lookup(&mut ctx.keys, ctx.db, key, false) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(Some(set)) => add_all(set),
        Ok(None) => {
            let mut set = Set::for_member(args.get(2));
            let added = add_all(&mut set);
            ctx.keys.set(ctx.db, key, Value::Set(set));
            added
        }
    };
    if added > 0 {
        modified_n(ctx, key, added);
        ctx.notify(ev::SET, "sadd", key);
    }
    ctx.out.int(added as i64);
}

/// SREM key member [member ...]: removes the members (deleting the key once
/// the set is empty); replies how many were there.
fn srem(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    let (removed, emptied) = match lookup(&mut ctx.keys, ctx.db, key, false) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(None) => return ctx.out.int(0),
        Ok(Some(set)) => {
            let mut removed = 0;
            for m in args.iter().skip(2) {
                if set.remove(m) {
                    removed += 1;
                    if set.is_empty() {
                        break;
                    }
                }
            }
            (removed, set.is_empty())
        }
    };
    if emptied {
        ctx.keys.delete(ctx.db, key);
    }
    if removed > 0 {
        modified_n(ctx, key, removed);
        ctx.notify(ev::SET, "srem", key);
        if emptied {
            ctx.notify(ev::GENERIC, "del", key);
        }
    }
    ctx.out.int(removed as i64);
}

/// SISMEMBER key member: 1 if the member is in the set, else 0.
fn sismember(ctx: &mut Ctx<'_>, args: Args<'_>) {
    match lookup(&mut ctx.keys, ctx.db, args.get(1), true) {
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
        Ok(set) => ctx
            .out
            .int(i64::from(set.is_some_and(|s| s.contains(args.get(2))))),
    }
}

/// SMISMEMBER key member [member ...]: SISMEMBER for each member, as an
/// array (all zeros for a missing key).
fn smismember(ctx: &mut Ctx<'_>, args: Args<'_>) {
    match lookup(&mut ctx.keys, ctx.db, args.get(1), true) {
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
        Ok(set) => {
            ctx.out.array(args.len() - 2);
            for m in args.iter().skip(2) {
                let found = set.as_ref().is_some_and(|s| s.contains(m));
                ctx.out.int(i64::from(found));
            }
        }
    }
}

/// SCARD key: the number of members, 0 for a missing key.
fn scard(ctx: &mut Ctx<'_>, args: Args<'_>) {
    match lookup(&mut ctx.keys, ctx.db, args.get(1), true) {
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
        Ok(set) => ctx.out.int(set.map_or(0, |s| s.len()) as i64),
    }
}

/// SPOP key [count]: removes and replies one random member (null for a
/// missing key), or with a count a set of up to `count` distinct random
/// members, deleting the key when it empties.
fn spop(ctx: &mut Ctx<'_>, args: Args<'_>) {
    match args.len() {
        2 => spop_one(ctx, args.get(1)),
        3 => spop_count(ctx, args.get(1), args.get(2)),
        _ => ctx.out.error(errors::SYNTAX),
    }
}

/// SPOP without a count.
fn spop_one(ctx: &mut Ctx<'_>, key: &[u8]) {
    let mut rng = fastrand::Rng::new();
    let mut popped = None;
    let emptied = match lookup(&mut ctx.keys, ctx.db, key, false) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(None) => return ctx.out.null(),
        Ok(Some(set)) => {
            match set.pop_random(&mut rng) {
                Some(m) => {
                    reply_member(ctx.out, m.borrowed());
                    popped = Some(m.borrowed().as_bytes(&mut itoa::Buffer::new()).to_vec());
                }
                None => ctx.out.null(),
            }
            set.is_empty()
        }
    };
    if emptied {
        ctx.keys.delete(ctx.db, key);
    }
    // The random choice propagates as the removal it made.
    if let Some(m) = popped {
        ctx.propagate(&[b"SREM", key, &m]);
    }
    ctx.modified(key);
    ctx.notify(ev::SET, "spop", key);
    if emptied {
        ctx.notify(ev::GENERIC, "del", key);
    }
}

/// SPOP with a count, in Redis's order of checks: the count first, then the
/// key.
fn spop_count(ctx: &mut Ctx<'_>, key: &[u8], count: &[u8]) {
    // Redis's `getPositiveLongFromObjectOrReply` has one message for both
    // a non-integer and a negative count.
    let Some(count) = parse_i64(count).and_then(|c| usize::try_from(c).ok()) else {
        return ctx.out.error(NOT_POSITIVE);
    };
    let max = max_intset(ctx);
    let mut rng = fastrand::Rng::new();
    let size = match lookup(&mut ctx.keys, ctx.db, key, false) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(None) => return ctx.out.set(0),
        Ok(Some(_)) if count == 0 => return ctx.out.set(0),
        Ok(Some(set)) if count < set.len() => {
            ctx.out.set(count);
            let logging = ctx.server.aof.is_collecting();
            let mut popped = Vec::new();
            set.pop_random_many(count, &mut rng, max, |m| {
                reply_member(ctx.out, m);
                if logging {
                    popped.push(m.as_bytes(&mut itoa::Buffer::new()).to_vec());
                }
            });
            // One SREM per member, as Redis propagates them.
            for m in popped {
                ctx.propagate(&[b"SREM", key, &m]);
            }
            modified_n(ctx, key, count);
            return ctx.notify(ev::SET, "spop", key);
        }
        Ok(Some(set)) => set.len(),
    };
    // Everything goes: Redis replies the set rebuilt as a union (so a
    // hashtable of few integers comes out sorted) and deletes the key.
    if let Some(Value::Set(set)) = ctx.keys.remove(ctx.db, key).map(|e| e.into_value()) {
        reply_members(ctx.out, &Set::union([&set], max));
    }
    ctx.propagate_del(key, false);
    modified_n(ctx, key, size);
    ctx.notify(ev::SET, "spop", key);
    ctx.notify(ev::GENERIC, "del", key);
}

/// SRANDMEMBER key [count]: one random member (null for a missing key), or
/// with a positive count up to `count` distinct members, with a negative
/// one exactly `-count` members that may repeat.
fn srandmember(ctx: &mut Ctx<'_>, args: Args<'_>) {
    match args.len() {
        2 => srandmember_one(ctx, args.get(1)),
        3 => srandmember_count(ctx, args.get(1), args.get(2)),
        _ => ctx.out.error(errors::SYNTAX),
    }
}

/// SRANDMEMBER without a count.
fn srandmember_one(ctx: &mut Ctx<'_>, key: &[u8]) {
    let mut rng = fastrand::Rng::new();
    match lookup(&mut ctx.keys, ctx.db, key, true) {
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
        Ok(None) => ctx.out.null(),
        Ok(Some(set)) => match set.random(&mut rng) {
            Some(m) => reply_member(ctx.out, m),
            None => ctx.out.null(),
        },
    }
}

/// SRANDMEMBER with a count (checked before the key, as Redis does).
fn srandmember_count(ctx: &mut Ctx<'_>, key: &[u8], count: &[u8]) {
    let Some(count) = ctx.int_arg(count) else {
        return;
    };
    if count == i64::MIN {
        return ctx.out.error(SRANDMEMBER_RANGE);
    }
    let budget = reply_budget(ctx);
    let mut rng = fastrand::Rng::new();
    let set = match lookup(&mut ctx.keys, ctx.db, key, true) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(None) => return ctx.out.array(0),
        Ok(Some(_)) if count == 0 => return ctx.out.array(0),
        Ok(Some(set)) => set,
    };
    let n = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    if count > 0 && n > 1 {
        ctx.out.array(n.min(set.len()));
        set.random_distinct(n, &mut rng, |m| reply_member(ctx.out, m));
        return;
    }
    ctx.out.array(n);
    for i in 0..n {
        if i % RANDOM_REPLY_CHECK_EVERY == 0 && ctx.out.len() > budget {
            ctx.session.close_after_reply = true;
            return;
        }
        if let Some(m) = set.random(&mut rng) {
            reply_member(ctx.out, m);
        }
    }
}

/// SMOVE source destination member: moves the member between sets
/// (creating the destination, deleting an emptied source); 1 if the member
/// was in the source, else 0.
fn smove(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let (src, dst, member) = (args.get(1), args.get(2), args.get(3));
    let max = max_intset(ctx);
    let src_type = lookup(&mut ctx.keys, ctx.db, src, false).map(|s| s.is_some());
    let dst_type = lookup(&mut ctx.keys, ctx.db, dst, false).map(|s| s.is_some());
    match (src_type, dst_type) {
        (Ok(false), _) => return ctx.out.int(0),
        (Err(WrongType), _) | (_, Err(WrongType)) => return ctx.out.error(errors::WRONGTYPE),
        (Ok(true), Ok(_)) => {}
    }
    if src == dst {
        let found = peek_set(&ctx.keys, ctx.db, src).is_some_and(|s| s.contains(member));
        return ctx.out.int(i64::from(found));
    }
    let Ok(Some(set)) = lookup(&mut ctx.keys, ctx.db, src, false) else {
        return ctx.out.int(0);
    };
    if !set.remove(member) {
        return ctx.out.int(0);
    }
    let emptied = set.is_empty();
    if emptied {
        ctx.keys.delete(ctx.db, src);
    }
    ctx.modified(src);
    ctx.notify(ev::SET, "srem", src);
    if emptied {
        ctx.notify(ev::GENERIC, "del", src);
    }
    let added = match lookup(&mut ctx.keys, ctx.db, dst, false) {
        Ok(Some(set)) => set.insert(member, max),
        _ => {
            let mut set = Set::for_member(member);
            set.insert(member, max);
            ctx.keys.set(ctx.db, dst, Value::Set(set));
            true
        }
    };
    if added {
        ctx.modified(dst);
        ctx.notify(ev::SET, "sadd", dst);
    }
    ctx.out.int(1);
}

/// What an intersection is for.
enum InterMode<'a> {
    /// SINTER / SMEMBERS: reply the members.
    Reply,
    /// SINTERSTORE: store them under this key and reply their number.
    Store(&'a [u8]),
    /// SINTERCARD: reply their number, counting at most this many (0: no
    /// limit).
    Card(usize),
}

/// SINTER key [key ...] (and SMEMBERS key): the members common to all the
/// sets; a missing key is an empty set.
fn sinter(ctx: &mut Ctx<'_>, args: Args<'_>) {
    sinter_generic(ctx, &names_from(args, 1), InterMode::Reply);
}

/// SINTERSTORE destination key [key ...]: stores the intersection (deleting
/// the destination when it is empty); replies its size.
fn sinterstore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    sinter_generic(ctx, &names_from(args, 2), InterMode::Store(args.get(1)));
}

/// Positions of SINTERCARD's keys: `numkeys` of them after it, or none when
/// `numkeys` is invalid (the command then fails before touching keys).
fn sintercard_keys(args: Args<'_>) -> Vec<usize> {
    match numkeys(args) {
        Ok(n) => (2..2 + n).collect(),
        Err(_) => Vec::new(),
    }
}

/// SINTERCARD's `numkeys`, or the error to reply.
fn numkeys(args: Args<'_>) -> Result<usize, &'static str> {
    let n = parse_i64(args.get(1)).filter(|&n| n >= 1).ok_or(NUMKEYS)?;
    match usize::try_from(n) {
        Ok(n) if n <= args.len() - 2 => Ok(n),
        _ => Err(TOO_MANY_KEYS),
    }
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]: the size of the
/// intersection, counting stopping at `limit` when it is not 0.
fn sintercard(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let n = match numkeys(args) {
        Ok(n) => n,
        Err(e) => return ctx.out.error(e),
    };
    let mut limit = 0;
    let mut i = 2 + n;
    while i < args.len() {
        match args.try_get(i + 1) {
            Some(value) if is(args.get(i), "limit") => {
                match parse_i64(value).and_then(|l| usize::try_from(l).ok()) {
                    Some(l) => limit = l,
                    None => return ctx.out.error(LIMIT_NEGATIVE),
                }
                i += 2;
            }
            _ => return ctx.out.error(errors::SYNTAX),
        }
    }
    let names: Vec<&[u8]> = (2..2 + n).map(|i| args.get(i)).collect();
    sinter_generic(ctx, &names, InterMode::Card(limit));
}

/// The intersection of the sets under `names`, used as `mode` says.
fn sinter_generic(ctx: &mut Ctx<'_>, names: &[&[u8]], mode: InterMode<'_>) {
    let missing = match load_sets(ctx, names) {
        Ok(m) => m,
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
    };
    let sets: Vec<&Set> = if missing {
        Vec::new()
    } else {
        names
            .iter()
            .filter_map(|n| peek_set(&ctx.keys, ctx.db, n))
            .collect()
    };
    match mode {
        InterMode::Reply => {
            if let [only] = sets[..] {
                return reply_members(ctx.out, only);
            }
            let mut found = Vec::new();
            Set::intersect_each(&sets, |m| {
                found.push(m);
                true
            });
            ctx.out.set(found.len());
            for m in found {
                reply_member(ctx.out, m);
            }
        }
        InterMode::Card(limit) => {
            let mut n = 0usize;
            Set::intersect_each(&sets, |_| {
                n += 1;
                limit == 0 || n < limit
            });
            ctx.out.int(n as i64);
        }
        InterMode::Store(dst) => {
            let max = max_intset(ctx);
            let mut result = Set::new();
            Set::intersect_each(&sets, |m| {
                result.insert_member(m, max);
                true
            });
            store_result(ctx, dst, result, "sinterstore");
        }
    }
}

/// Stores a computed set under `dst`, replacing whatever was there, or
/// deletes `dst` when the set is empty; replies the set's size. `event`
/// is the command's keyspace event.
fn store_result(ctx: &mut Ctx<'_>, dst: &[u8], set: Set, event: &str) {
    let len = set.len();
    if len > 0 {
        ctx.keys.set(ctx.db, dst, Value::Set(set));
        ctx.modified(dst);
        ctx.notify(ev::SET, event, dst);
    } else if ctx.keys.delete(ctx.db, dst) {
        ctx.modified(dst);
        ctx.notify(ev::GENERIC, "del", dst);
    }
    ctx.out.int(len as i64);
}

/// SUNION / SDIFF.
#[derive(Clone, Copy)]
enum SetOp {
    Union,
    Diff,
}

/// SUNION key [key ...]: the members of any of the sets.
fn sunion(ctx: &mut Ctx<'_>, args: Args<'_>) {
    union_diff_generic(ctx, &names_from(args, 1), None, SetOp::Union);
}

/// SUNIONSTORE destination key [key ...]: stores the union (deleting the
/// destination when it is empty); replies its size.
fn sunionstore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    union_diff_generic(ctx, &names_from(args, 2), Some(args.get(1)), SetOp::Union);
}

/// SDIFF key [key ...]: the members of the first set that are in none of
/// the others.
fn sdiff(ctx: &mut Ctx<'_>, args: Args<'_>) {
    union_diff_generic(ctx, &names_from(args, 1), None, SetOp::Diff);
}

/// SDIFFSTORE destination key [key ...]: stores the difference (deleting
/// the destination when it is empty); replies its size.
fn sdiffstore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    union_diff_generic(ctx, &names_from(args, 2), Some(args.get(1)), SetOp::Diff);
}

/// Computes the union or difference of the sets under `names`, then
/// replies it or stores it under `dst`.
fn union_diff_generic(ctx: &mut Ctx<'_>, names: &[&[u8]], dst: Option<&[u8]>, op: SetOp) {
    if let Err(WrongType) = load_sets(ctx, names) {
        return ctx.out.error(errors::WRONGTYPE);
    }
    let max = max_intset(ctx);
    let sets: Vec<Option<&Set>> = names
        .iter()
        .map(|n| peek_set(&ctx.keys, ctx.db, n))
        .collect();
    let result = match op {
        SetOp::Union => Set::union(sets.iter().flatten().copied(), max),
        SetOp::Diff => match sets.split_first() {
            Some((Some(first), rest)) => {
                let others: Vec<&Set> = rest.iter().flatten().copied().collect();
                Set::difference(first, &others, max)
            }
            _ => Set::new(),
        },
    };
    match dst {
        None => reply_members(ctx.out, &result),
        Some(dst) => {
            let event = match op {
                SetOp::Union => "sunionstore",
                SetOp::Diff => "sdiffstore",
            };
            store_result(ctx, dst, result, event);
        }
    }
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]: one step of an
/// incremental walk of the set; an intset is returned whole with cursor 0.
fn sscan(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    if parse_cursor(args.get(2)).is_none() {
        return ctx.out.error("ERR invalid cursor");
    }
    match lookup(&mut ctx.keys, ctx.db, key, true) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(None) => {
            ctx.out.array(2);
            ctx.out.bulk(b"0");
            return ctx.out.array(0);
        }
        Ok(Some(_)) => {}
    }
    // Redis parses the options only once it has the value.
    let Some(opts) = parse_scan_args(ctx, args, 2, false) else {
        return;
    };
    let Some(set) = peek_set(&ctx.keys, ctx.db, key) else {
        return ctx.out.error(errors::WRONGTYPE);
    };
    let mut found: Vec<Vec<u8>> = Vec::new();
    let mut buf = itoa::Buffer::new();
    let next = set.scan(opts.cursor, opts.count, |m| {
        let bytes = m.as_bytes(&mut buf);
        if opts.matches(bytes) {
            found.push(bytes.to_vec());
        }
    });
    ctx.out.array(2);
    ctx.out.bulk(itoa::Buffer::new().format(next).as_bytes());
    ctx.out.array(found.len());
    for m in &found {
        ctx.out.bulk(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vireo_resp::OwnedArgs;

    fn args(line: &str) -> OwnedArgs {
        OwnedArgs::from_slices(line.split(' '))
    }

    #[test]
    fn sintercard_key_positions() {
        let keys = |l: &str| sintercard_keys(args(l).as_args());
        assert_eq!(keys("sintercard 2 a b"), vec![2, 3]);
        assert_eq!(keys("sintercard 1 a limit 3"), vec![2]);
        assert_eq!(keys("sintercard 2 a limit"), vec![2, 3]);
        assert!(keys("sintercard 0 a").is_empty());
        assert!(keys("sintercard 3 a b").is_empty());
        assert!(keys("sintercard x a").is_empty());
        assert!(keys("sintercard -1 a").is_empty());
    }

    #[test]
    fn numkeys_errors() {
        let n = |l: &str| numkeys(args(l).as_args());
        assert_eq!(n("sintercard 0 a"), Err(NUMKEYS));
        assert_eq!(n("sintercard abc a"), Err(NUMKEYS));
        assert_eq!(n("sintercard 2 a"), Err(TOO_MANY_KEYS));
        assert_eq!(n("sintercard 9223372036854775807 a"), Err(TOO_MANY_KEYS));
        assert_eq!(n("sintercard 1 a"), Ok(1));
    }
}
