//! Blocking pops: BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP on lists and
//! BZPOPMIN, BZPOPMAX, BZMPOP on sorted sets (the blocking halves of
//! Redis's t_list.c and t_zset.c).
//!
//! Each command first behaves like its non-blocking form on the first
//! non-empty key; when every key is empty it registers a wait
//! ([`crate::exec::blocking`]) — or, inside a transaction, replies null at once.
//! [`Op`]'s [`BlockedOp`] implementation is how a waiting client gets
//! served when one of its keys receives elements.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;

use vireo_resp::number::{parse_f64, parse_f64_lenient, parse_i64};
use vireo_resp::{Args, ReplyBuf};
use vireo_store::clock::now_ms;
use vireo_store::value::ValueRef;
use vireo_store::{Key, Keys};

use super::list::{end_event, move_element, notify_popped, numkeys_range, pop_elements, End};
use super::shared::{pop_effect, Pop};
use super::zset::pop_members;
use super::{errors, flags::*, is, spec, CommandSpec, Ctx, KeySpec};
use crate::exec::blocking::{self, BlockedOp, Served, Waiter};
use crate::exec::notify::{self, class as ev};
use crate::server::Server;

/// Every argument but the last (the timeout) is a key.
const KEYS_THEN_TIMEOUT: KeySpec = KeySpec::Range {
    first: 1,
    last: -2,
    step: 1,
};

/// Source and destination keys at 1 and 2.
const SRC_DST: KeySpec = KeySpec::Range {
    first: 1,
    last: 2,
    step: 1,
};

/// `timeout numkeys key [key ...]`: keys follow the count at argument 2.
const NUMKEYS_AT_2: KeySpec = KeySpec::Custom {
    first: 0,
    last: 0,
    step: 0,
    find: mpop_keys,
};

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec(
        "blpop",
        -3,
        WRITE | NOSCRIPT | BLOCKING,
        KEYS_THEN_TIMEOUT,
        blpop,
    ),
    spec(
        "brpop",
        -3,
        WRITE | NOSCRIPT | BLOCKING,
        KEYS_THEN_TIMEOUT,
        brpop,
    ),
    spec(
        "blmove",
        6,
        WRITE | DENYOOM | NOSCRIPT | BLOCKING,
        SRC_DST,
        blmove,
    ),
    spec(
        "brpoplpush",
        4,
        WRITE | DENYOOM | NOSCRIPT | BLOCKING,
        SRC_DST,
        brpoplpush,
    ),
    spec("blmpop", -5, WRITE | BLOCKING, NUMKEYS_AT_2, blmpop),
    spec(
        "bzpopmin",
        -3,
        WRITE | NOSCRIPT | BLOCKING | FAST,
        KEYS_THEN_TIMEOUT,
        bzpopmin,
    ),
    spec(
        "bzpopmax",
        -3,
        WRITE | NOSCRIPT | BLOCKING | FAST,
        KEYS_THEN_TIMEOUT,
        bzpopmax,
    ),
    spec("bzmpop", -5, WRITE | BLOCKING, NUMKEYS_AT_2, bzmpop),
];

/// What serving a waiting client does.
#[derive(Debug)]
pub enum Op {
    /// Pops from the key that became ready.
    Pop(Pop),
    /// Moves an element from the ready key to `dst`, replying the element
    /// (BLMOVE, BRPOPLPUSH; `rpoplpush` for the latter).
    Move {
        dst: Key,
        from: End,
        to: End,
        rpoplpush: bool,
    },
}

impl Op {
    /// True if a key holding `v` can serve this wait; a wait stays blocked
    /// while its key holds another type, as in Redis.
    fn accepts(&self, v: ValueRef) -> bool {
        match self {
            Op::Pop(Pop::ZSet { .. }) => matches!(v, ValueRef::ZSet(_)),
            Op::Pop(Pop::List { .. }) | Op::Move { .. } => matches!(v, ValueRef::List(_)),
        }
    }
}

/// The command a move of one element propagates as: RPOPLPUSH for
/// BRPOPLPUSH, LMOVE for BLMOVE, as Redis rewrites them.
fn move_effect(src: &[u8], dst: &[u8], from: End, to: End, rpoplpush: bool) -> Vec<Vec<u8>> {
    if rpoplpush {
        return vec![b"RPOPLPUSH".to_vec(), src.to_vec(), dst.to_vec()];
    }
    let side = |e: End| match e {
        End::Left => b"LEFT".to_vec(),
        End::Right => b"RIGHT".to_vec(),
    };
    vec![
        b"LMOVE".to_vec(),
        src.to_vec(),
        dst.to_vec(),
        side(from),
        side(to),
    ]
}

/// BLPOP key [key ...] timeout: pops the head of the first non-empty list,
/// replying `[key, element]`, or waits up to `timeout` seconds for one.
fn blpop(ctx: &mut Ctx<'_>, args: Args<'_>) {
    pop_keys_then_timeout(
        ctx,
        args,
        Pop::List {
            end: End::Left,
            count: None,
        },
    );
}

/// BRPOP key [key ...] timeout: BLPOP from the tail.
fn brpop(ctx: &mut Ctx<'_>, args: Args<'_>) {
    pop_keys_then_timeout(
        ctx,
        args,
        Pop::List {
            end: End::Right,
            count: None,
        },
    );
}

/// BZPOPMIN key [key ...] timeout: pops the lowest-scored member of the
/// first non-empty sorted set, replying `[key, member, score]`, or waits.
fn bzpopmin(ctx: &mut Ctx<'_>, args: Args<'_>) {
    pop_keys_then_timeout(
        ctx,
        args,
        Pop::ZSet {
            max: false,
            count: None,
        },
    );
}

/// BZPOPMAX key [key ...] timeout: BZPOPMIN for the highest score.
fn bzpopmax(ctx: &mut Ctx<'_>, args: Args<'_>) {
    pop_keys_then_timeout(
        ctx,
        args,
        Pop::ZSet {
            max: true,
            count: None,
        },
    );
}

/// The `key [key ...] timeout` commands.
fn pop_keys_then_timeout(ctx: &mut Ctx<'_>, args: Args<'_>, pop: Pop) {
    let last = args.len() - 1;
    let Some(deadline) = timeout_arg(ctx, args.get(last)) else {
        return;
    };
    pop_or_block(ctx, args, 1..last, pop, deadline);
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]: pops up
/// to `count` elements from the first non-empty list, replying
/// `[key, [elements]]`, or waits.
fn blmpop(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let side = |a: &[u8]| {
        if is(a, "left") {
            Some(End::Left)
        } else if is(a, "right") {
            Some(End::Right)
        } else {
            None
        }
    };
    let Some((keys, end, count)) = mpop_args(ctx, args, side) else {
        return;
    };
    let Some(deadline) = timeout_arg(ctx, args.get(1)) else {
        return;
    };
    let count = Some(count);
    pop_or_block(ctx, args, keys, Pop::List { end, count }, deadline);
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]: pops up to
/// `count` members from the first non-empty sorted set, replying
/// `[key, [[member, score], ...]]`, or waits.
fn bzmpop(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let side = |a: &[u8]| {
        if is(a, "min") {
            Some(false)
        } else if is(a, "max") {
            Some(true)
        } else {
            None
        }
    };
    let Some((keys, max, count)) = mpop_args(ctx, args, side) else {
        return;
    };
    let Some(deadline) = timeout_arg(ctx, args.get(1)) else {
        return;
    };
    let count = Some(count);
    pop_or_block(ctx, args, keys, Pop::ZSet { max, count }, deadline);
}

/// Key finder of BLMPOP/BZMPOP: none when the arguments are malformed (the
/// command then fails before touching any key).
fn mpop_keys(args: Args<'_>) -> Vec<usize> {
    numkeys_range(args, 2)
        .map(Iterator::collect)
        .unwrap_or_default()
}

/// Parses `numkeys key ... where [COUNT count]` of BLMPOP/BZMPOP in
/// Redis's order, `side` reading the `where` keyword. Replies the error
/// and returns None on bad input.
fn mpop_args<W>(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    side: impl Fn(&[u8]) -> Option<W>,
) -> Option<(Range<usize>, W, usize)> {
    if parse_i64(args.get(2)).is_none_or(|n| n < 1) {
        ctx.out.error("ERR numkeys should be greater than 0");
        return None;
    }
    let Some(keys) = numkeys_range(args, 2) else {
        ctx.out.error(errors::SYNTAX);
        return None;
    };
    let Some(w) = side(args.get(keys.end)) else {
        ctx.out.error(errors::SYNTAX);
        return None;
    };
    let mut count = None;
    let mut i = keys.end + 1;
    while i < args.len() {
        if count.is_none() && is(args.get(i), "count") && i + 1 < args.len() {
            match parse_i64(args.get(i + 1)) {
                Some(c) if c >= 1 => count = Some(usize::try_from(c).unwrap_or(usize::MAX)),
                _ => {
                    ctx.out.error("ERR count should be greater than 0");
                    return None;
                }
            }
            i += 2;
        } else {
            ctx.out.error(errors::SYNTAX);
            return None;
        }
    }
    Some((keys, w, count.unwrap_or(1)))
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout: LMOVE, or
/// waits for `source` to receive an element and then moves it.
fn blmove(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(from) = end_arg(ctx, args.get(3)) else {
        return;
    };
    let Some(to) = end_arg(ctx, args.get(4)) else {
        return;
    };
    let Some(deadline) = timeout_arg(ctx, args.get(5)) else {
        return;
    };
    move_or_block(ctx, args, from, to, deadline);
}

/// BRPOPLPUSH source destination timeout: BLMOVE source destination RIGHT
/// LEFT timeout.
fn brpoplpush(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(deadline) = timeout_arg(ctx, args.get(3)) else {
        return;
    };
    move_or_block(ctx, args, End::Right, End::Left, deadline);
}

/// Parses LEFT|RIGHT, replying a syntax error otherwise.
fn end_arg(ctx: &mut Ctx<'_>, arg: &[u8]) -> Option<End> {
    if is(arg, "left") {
        Some(End::Left)
    } else if is(arg, "right") {
        Some(End::Right)
    } else {
        ctx.out.error(errors::SYNTAX);
        None
    }
}

/// Reads a blocking timeout argument, replying Redis's error if invalid.
fn timeout_arg(ctx: &mut Ctx<'_>, arg: &[u8]) -> Option<u64> {
    match parse_timeout(arg, now_ms()) {
        Ok(d) => Some(d),
        Err(e) => {
            ctx.out.error(e);
            None
        }
    }
}

/// Parses a timeout in seconds as Redis's `getTimeoutFromObjectOrReply`
/// does: a float in strtold syntax, rounded up to whole milliseconds, 0
/// meaning forever. Returns the deadline in Unix ms (0 for none). The
/// arithmetic is in doubles where Redis uses long doubles, which only
/// matters within rounding distance of 2^63 ms.
fn parse_timeout(arg: &[u8], now_ms: u64) -> Result<u64, &'static str> {
    const NOT_FLOAT: &str = "ERR timeout is not a float or out of range";
    const NEGATIVE: &str = "ERR timeout is negative";
    // Redis's limit on a long double's text, and C's isspace.
    let Some(&first) = arg.first() else {
        return Err(NOT_FLOAT);
    };
    if arg.len() >= 5 * 1024 || matches!(first, b' ' | b'\t'..=b'\r') || arg.contains(&0) {
        return Err(NOT_FLOAT);
    }
    let secs = match parse_f64(arg) {
        Some(v) => v,
        // Past a double's range: strtold's wider range still parses it. Huge
        // values turn negative when Redis converts them to an integer, tiny
        // ones round up to 1 ms (or to 0 when negative).
        None => match parse_f64_lenient(arg).ok_or(NOT_FLOAT)? {
            v if v.is_infinite() => v,
            _ if first == b'-' => -0.0,
            _ => f64::MIN_POSITIVE,
        },
    };
    let ms = (secs * 1000.0).ceil();
    // -0.0 passes, like Redis's cast of it; so does anything an i64 holds.
    if !(0.0..9_223_372_036_854_775_808.0).contains(&ms) {
        return Err(NEGATIVE);
    }
    let ms = ms as u64;
    Ok(if ms == 0 {
        0
    } else {
        now_ms.saturating_add(ms)
    })
}

/// Pops per `pop` from the first non-empty key among `keys` (argument
/// positions); when all are empty, waits on them until `deadline`, or
/// replies null inside a transaction.
fn pop_or_block(ctx: &mut Ctx<'_>, args: Args<'_>, keys: Range<usize>, pop: Pop, deadline: u64) {
    for i in keys.clone() {
        let key = args.get(i);
        match pop_into(&mut ctx.keys, ctx.db, key, pop, ctx.out) {
            Err(()) => return ctx.out.error(errors::WRONGTYPE),
            Ok(None) => {}
            Ok(Some(n)) => {
                ctx.propagate(&pop_effect(pop, key, n));
                ctx.modified(key);
                let (class, event) = pop_event(pop);
                ctx.notify(class, event, key);
                if !ctx.keys.contains(ctx.db, key) {
                    ctx.notify(ev::GENERIC, "del", key);
                }
                return;
            }
        }
    }
    if ctx.deny_blocking {
        return ctx.out.null_array();
    }
    block(ctx, args, keys, Op::Pop(pop), deadline);
}

/// LMOVE from `source` to `destination` (arguments 1 and 2) if the source
/// has elements, else waits for it until `deadline` (or replies null inside
/// a transaction).
fn move_or_block(ctx: &mut Ctx<'_>, args: Args<'_>, from: End, to: End, deadline: u64) {
    let (src, dst) = (args.get(1), args.get(2));
    let rpoplpush = is(args.get(0), "brpoplpush");
    match ctx.keys.get_mut(ctx.db, src) {
        Some(e) if !matches!(e.value(), ValueRef::List(_)) => {
            return ctx.out.error(errors::WRONGTYPE)
        }
        Some(_) => {}
        None if ctx.deny_blocking => return ctx.out.null(),
        None => {
            let op = Op::Move {
                dst: dst.into(),
                from,
                to,
                rpoplpush,
            };
            return block(ctx, args, 1..2, op, deadline);
        }
    }
    match move_element(&mut ctx.keys, ctx.db, src, dst, from, to) {
        Err(()) => ctx.out.error(errors::WRONGTYPE),
        Ok(None) => ctx.out.null(),
        Ok(Some(v)) => {
            ctx.out.bulk(&v);
            ctx.propagate(&move_effect(src, dst, from, to, rpoplpush));
            ctx.modified(src);
            ctx.modified(dst);
            ctx.notify(ev::LIST, end_event(to, "lpush", "rpush"), dst);
            notify_popped(ctx, ctx.db, src, from);
            ctx.signal_ready(dst);
        }
    }
}

/// Registers the calling client as waiting on the keys at argument
/// positions `keys`; its connection stops executing input until the wait
/// ends.
fn block(ctx: &mut Ctx<'_>, args: Args<'_>, keys: Range<usize>, op: Op, deadline: u64) {
    let mut seen = HashSet::new();
    let keys: Vec<Key> = keys
        .map(|i| args.get(i))
        .filter(|k| seen.insert(*k))
        .map(Key::from)
        .collect();
    let waiter = Waiter::new(
        ctx.session.shared.clone(),
        ctx.db,
        keys,
        op,
        ctx.out.protocol(),
        deadline,
    );
    blocking::block(ctx, args, waiter);
}

/// Pops per `pop` from `key` and writes the reply; Ok(Some) is the number
/// of elements popped. Ok(None) when the key does not exist; Err when it
/// holds another type.
fn pop_into(
    keys: &mut Keys<'_>,
    db: usize,
    key: &[u8],
    pop: Pop,
    out: &mut ReplyBuf,
) -> Result<Option<usize>, ()> {
    let popped = match pop {
        Pop::List { end, count } => {
            let Some(items) = pop_elements(keys, db, key, end, count.unwrap_or(1))? else {
                return Ok(None);
            };
            let Some(first) = items.first() else {
                return Ok(None);
            };
            out.array(2);
            out.bulk(key);
            if count.is_none() {
                out.bulk(first);
            } else {
                out.array(items.len());
                for item in &items {
                    out.bulk(item);
                }
            }
            items.len()
        }
        Pop::ZSet { max, count } => {
            let Some(items) = pop_members(keys, db, key, max, count.unwrap_or(1))? else {
                return Ok(None);
            };
            if items.is_empty() {
                return Ok(None);
            }
            if count.is_none() {
                out.array(1 + 2 * items.len());
                out.bulk(key);
                for (member, score) in &items {
                    out.bulk(member);
                    out.double(*score);
                }
            } else {
                out.array(2);
                out.bulk(key);
                out.array(items.len());
                for (member, score) in &items {
                    out.array(2);
                    out.bulk(member);
                    out.double(*score);
                }
            }
            items.len()
        }
    };
    Ok(Some(popped))
}

impl BlockedOp for Op {
    fn destination(&self) -> Option<&[u8]> {
        match self {
            Op::Move { dst, .. } => Some(dst),
            Op::Pop(_) => None,
        }
    }

    fn serve(
        &self,
        server: &Server,
        keys: &mut Keys<'_>,
        w: &Arc<Waiter>,
        key: &[u8],
        ready: &mut Vec<(usize, Key)>,
        dirty: &mut u64,
    ) -> Served {
        let db = w.db;
        if !keys
            .get_mut(db, key)
            .is_some_and(|e| self.accepts(e.value()))
        {
            return Served::Skipped;
        }
        let mut out = ReplyBuf::new(w.proto);
        match self {
            Op::Pop(pop) => {
                if !server.blocking.claim(&server.keyspace, w) {
                    return Served::Skipped;
                }
                match pop_into(keys, db, key, *pop, &mut out) {
                    Ok(Some(n)) => {
                        feed_served(server, db, &pop_effect(*pop, key, n));
                        changed(keys, db, key, dirty);
                        let (class, event) = pop_event(*pop);
                        served_events(server, keys, db, key, &[(class, event, key)]);
                    }
                    // Checked above: the key holds elements of the right type.
                    Ok(None) | Err(()) => out.null_array(),
                }
            }
            Op::Move {
                dst,
                from,
                to,
                rpoplpush,
            } => {
                if !keys.try_hold(dst) {
                    return Served::Deferred;
                }
                let dst_is_list = keys
                    .get_mut(db, dst)
                    .is_none_or(|e| matches!(e.value(), ValueRef::List(_)));
                if !server.blocking.claim(&server.keyspace, w) {
                    return Served::Skipped;
                }
                // A destination of another type fails the waiter (with nothing
                // popped) and ends its wait, as in Redis.
                let moved = if dst_is_list {
                    move_element(keys, db, key, dst, *from, *to)
                } else {
                    Err(())
                };
                match moved {
                    Ok(Some(v)) => {
                        out.bulk(&v);
                        feed_served(server, db, &move_effect(key, dst, *from, *to, *rpoplpush));
                        changed(keys, db, key, dirty);
                        changed(keys, db, dst, dirty);
                        let events = [
                            (ev::LIST, end_event(*to, "lpush", "rpush"), &dst[..]),
                            (ev::LIST, end_event(*from, "lpop", "rpop"), key),
                        ];
                        served_events(server, keys, db, key, &events);
                        blocking::mark_ready(server, ready, db, dst);
                    }
                    _ => out.error(errors::WRONGTYPE),
                }
            }
        }
        blocking::deliver(server, w, out.as_bytes().to_vec(), false);
        // Tracking clients hear of the change after the served reply, as
        // Redis sends the served client's own invalidation after it.
        crate::exec::tracking::invalidate_key(server, None, key);
        if let Op::Move { dst, .. } = self {
            crate::exec::tracking::invalidate_key(server, None, dst);
        }
        Served::Done
    }
}

/// Logs what serving a waiter did, as its own unit, while the view still
/// holds the keys' shards.
fn feed_served(server: &Server, db: usize, cmd: &[Vec<u8>]) {
    server.aof.feed_command(db, cmd);
}

/// The event of a pop: `lpop`/`rpop` or `zpopmin`/`zpopmax`.
fn pop_event(pop: Pop) -> (u32, &'static str) {
    match pop {
        Pop::List { end, .. } => (ev::LIST, end_event(end, "lpop", "rpop")),
        Pop::ZSet { max, .. } => (ev::ZSET, if max { "zpopmax" } else { "zpopmin" }),
    }
}

/// Publishes the events of serving a waiter from `src` (no client caused
/// them on this thread), then `del` if `src` emptied.
fn served_events(
    server: &Server,
    keys: &mut Keys<'_>,
    db: usize,
    src: &[u8],
    events: &[(u32, &str, &[u8])],
) {
    if notify::flags(server) == 0 {
        return;
    }
    for &(class, event, key) in events {
        notify::publish_event(server, None, class, event, db, key);
    }
    if !keys.contains(db, src) {
        notify::publish_event(server, None, ev::GENERIC, "del", db, src);
    }
}

/// Records a write made while serving a waiter: WATCHers of the key are
/// told, and the change is counted.
fn changed(keys: &mut Keys<'_>, db: usize, key: &[u8], dirty: &mut u64) {
    keys.signal_modified(db, key);
    *dirty += 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_like_redis() {
        let now = 1_000_000;
        assert_eq!(parse_timeout(b"0", now), Ok(0));
        assert_eq!(parse_timeout(b"1", now), Ok(now + 1000));
        assert_eq!(parse_timeout(b"0.001", now), Ok(now + 1));
        assert_eq!(parse_timeout(b"0.0001", now), Ok(now + 1));
        assert_eq!(parse_timeout(b"1e-20", now), Ok(now + 1));
        assert_eq!(parse_timeout(b"1e-400", now), Ok(now + 1));
        assert_eq!(parse_timeout(b"1.5e3", now), Ok(now + 1_500_000));
        assert_eq!(parse_timeout(b"0x10", now), Ok(now + 16_000));
        assert_eq!(parse_timeout(b"+1", now), Ok(now + 1000));
        // Rounded up to -0: no timeout at all, as in Redis.
        assert_eq!(parse_timeout(b"-0", now), Ok(0));
        assert_eq!(parse_timeout(b"-0.0001", now), Ok(0));
        assert_eq!(parse_timeout(b"-1e-400", now), Ok(0));
        // Enormous but convertible: never times out in practice.
        let huge = 9_000_000_000_000_000_000;
        assert_eq!(parse_timeout(b"9e15", now), Ok(now + huge));
        let negative = Err("ERR timeout is negative");
        for t in ["-1", "-inf", "inf", "1e400", "0x7FFFFFFFFFFFFF", "-0.001"] {
            assert_eq!(parse_timeout(t.as_bytes(), now), negative, "{t}");
        }
        let not_float = Err("ERR timeout is not a float or out of range");
        for t in ["", " 1", "1 ", "nan", "abc", "1\0", "\t1"] {
            assert_eq!(parse_timeout(t.as_bytes(), now), not_float, "{t:?}");
        }
    }

    #[test]
    fn mpop_key_positions() {
        let args = |v: &[&str]| vireo_resp::OwnedArgs::from_slices(v.iter().map(|s| s.as_bytes()));
        let a = args(&["blmpop", "0", "2", "a", "b", "left"]);
        assert_eq!(mpop_keys(a.as_args()), vec![3, 4]);
        let a = args(&["blmpop", "0", "2", "a", "b"]);
        assert!(mpop_keys(a.as_args()).is_empty());
        for n in ["0", "-1", "x", "9223372036854775807"] {
            let a = args(&["blmpop", "0", n, "a", "left"]);
            assert!(mpop_keys(a.as_args()).is_empty(), "{n}");
        }
    }
}
