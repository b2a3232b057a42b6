//! Hash commands (Redis's `t_hash.c`): HSET HSETNX HMSET HGET HMGET HDEL
//! HLEN HSTRLEN HEXISTS HKEYS HVALS HGETALL HINCRBY HINCRBYFLOAT HRANDFIELD
//! HSCAN.
//!
//! Values are [`Hash`]es, `listpack`-encoded while they are small and
//! `hashtable`-encoded once they outgrow `hash-max-listpack-entries` /
//! `hash-max-listpack-value` (read from the hot config on every write). A
//! key never holds an empty hash: HDEL removes the key with its last field,
//! and writes to a missing key build the hash before storing it.

use crate::exec::notify::class as ev;
use vireo_resp::number::parse_i64;
use vireo_resp::{Args, Protocol, ReplyBuf};
use vireo_store::hash::{Hash, HashLimits};
use vireo_store::long_double::{
    add_long_doubles, check_long_double, LongDoubleError, LongDoubleKind,
};
use vireo_store::{Keys, Value, ValueRef};

use super::shared::{parse_cursor, parse_scan_args};
use super::{errors, flags::*, is, spec, CommandSpec, Ctx, KEY1};

/// This family's commands, with Redis 7.0's arities, flags and key triples.
pub const COMMANDS: &[CommandSpec] = &[
    spec("hset", -4, WRITE | DENYOOM | FAST, KEY1, hset).with_members(2, 2),
    spec("hmset", -4, WRITE | DENYOOM | FAST, KEY1, hmset).with_members(2, 2),
    spec("hsetnx", 4, WRITE | DENYOOM | FAST, KEY1, hsetnx).with_members(2, 2),
    spec("hget", 3, READONLY | FAST, KEY1, hget).with_members(2, 1),
    spec("hmget", -3, READONLY | FAST, KEY1, hmget).with_members(2, 1),
    spec("hdel", -3, WRITE | FAST, KEY1, hdel).with_members(2, 1),
    spec("hlen", 2, READONLY | FAST, KEY1, hlen),
    spec("hstrlen", 3, READONLY | FAST, KEY1, hstrlen).with_members(2, 1),
    spec("hexists", 3, READONLY | FAST, KEY1, hexists).with_members(2, 1),
    spec("hkeys", 2, READONLY, KEY1, hkeys),
    spec("hvals", 2, READONLY, KEY1, hvals),
    spec("hgetall", 2, READONLY, KEY1, hgetall),
    spec("hincrby", 4, WRITE | DENYOOM | FAST, KEY1, hincrby).with_members(2, 2),
    spec(
        "hincrbyfloat",
        4,
        WRITE | DENYOOM | FAST,
        KEY1,
        hincrbyfloat,
    )
    .with_members(2, 2),
    spec("hrandfield", -2, READONLY, KEY1, hrandfield),
    spec("hscan", -3, READONLY, KEY1, hscan),
];

/// Random picks are generated in batches of this many, checking the reply
/// size in between (Redis's `HRANDFIELD_RANDOM_SAMPLE_LIMIT`).
const RANDOM_BATCH: usize = 1000;

/// The key exists but does not hold a hash: the caller replies WRONGTYPE.
struct WrongType;

/// The hash stored under `key` for reading (counts a keyspace hit or miss):
/// `Ok(None)` when missing, `Err(WrongType)` for another type.
fn read_hash<'k>(
    keys: &'k mut Keys<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'k Hash>, WrongType> {
    match keys.get_read(db, key) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::Hash(h) => Ok(Some(h)),
            _ => Err(WrongType),
        },
    }
}

/// The configured listpack → hashtable conversion thresholds.
fn limits(ctx: &Ctx<'_>) -> HashLimits {
    ctx.server.config.hot.hash_limits()
}

/// Runs `f` on the hash at `key` for writing. A missing key gets a new
/// hash, stored only if `f` leaves it non-empty (so a failed write never
/// creates an empty key). Err when the key holds another type.
fn with_hash<R>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    f: impl FnOnce(&mut Hash, &mut ReplyBuf) -> R,
) -> Result<R, WrongType> {
    match ctx.keys.get_mut(ctx.db, key) {
        Some(e) => match e.object_mut() {
            Some(Value::Hash(h)) => Ok(f(h, ctx.out)),
            _ => Err(WrongType),
        },
        None => {
            let mut h = Hash::new();
            let r = f(&mut h, ctx.out);
            if !h.is_empty() {
                ctx.keys.set(ctx.db, key, Value::Hash(h));
            }
            Ok(r)
        }
    }
}

/// Looks the hash at args[1] up for reading and hands it to `f`; replies
/// `missing` for a missing key and WRONGTYPE for another type.
fn read_or(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    missing: impl FnOnce(&mut ReplyBuf),
    f: impl FnOnce(&Hash, &mut ReplyBuf),
) {
    match read_hash(&mut ctx.keys, ctx.db, args.get(1)) {
        Ok(Some(h)) => f(h, ctx.out),
        Ok(None) => missing(ctx.out),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// Shared body of HSET and HMSET: sets every field/value pair and returns
/// how many fields were new, or None after replying an error.
fn set_pairs(ctx: &mut Ctx<'_>, args: Args<'_>) -> Option<i64> {
    if args.len() % 2 == 1 {
        let name = String::from_utf8_lossy(args.get(0)).to_ascii_lowercase();
        ctx.out.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
        return None;
    }
    let key = args.get(1);
    let limits = limits(ctx);
    let pairs = (args.len() - 2) / 2;
    let added = with_hash(ctx, key, |h, _| {
        (0..pairs)
            .filter(|i| h.set(args.get(2 + 2 * i), args.get(3 + 2 * i), limits))
            .count()
    });
    match added {
        Ok(added) => {
            ctx.modified(key);
            ctx.notify(ev::HASH, "hset", key);
            ctx.dirty += pairs as u64 - 1;
            Some(added as i64)
        }
        Err(WrongType) => {
            ctx.out.error(errors::WRONGTYPE);
            None
        }
    }
}

/// HSET key field value [field value ...]: sets the fields, replying how
/// many of them were new.
fn hset(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if let Some(added) = set_pairs(ctx, args) {
        ctx.out.int(added);
    }
}

/// HMSET key field value [field value ...]: HSET replying OK (deprecated
/// form).
fn hmset(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if set_pairs(ctx, args).is_some() {
        ctx.out.ok();
    }
}

/// HSETNX key field value: sets the field only if it does not exist;
/// replies 1 if it was set, 0 otherwise.
fn hsetnx(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let (key, field, value) = (args.get(1), args.get(2), args.get(3));
    let limits = limits(ctx);
    let set = with_hash(ctx, key, |h, _| {
        !h.contains(field) && h.set(field, value, limits)
    });
    match set {
        Ok(true) => {
            ctx.modified(key);
            ctx.notify(ev::HASH, "hset", key);
            ctx.out.int(1);
        }
        Ok(false) => ctx.out.int(0),
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// HGET key field: the field's value, or null.
fn hget(ctx: &mut Ctx<'_>, args: Args<'_>) {
    read_or(ctx, args, ReplyBuf::null, |h, out| {
        match h.get(args.get(2)) {
            Some(v) => out.bulk(v),
            None => out.null(),
        }
    });
}

/// HMGET key field [field ...]: each field's value or null (all nulls for
/// a missing key).
fn hmget(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let fields = args.len() - 2;
    let each = |h: Option<&Hash>, out: &mut ReplyBuf| {
        out.array(fields);
        for f in args.iter().skip(2) {
            match h.and_then(|h| h.get(f)) {
                Some(v) => out.bulk(v),
                None => out.null(),
            }
        }
    };
    read_or(
        ctx,
        args,
        |out| each(None, out),
        |h, out| each(Some(h), out),
    );
}

/// HDEL key field [field ...]: removes the fields, replying how many
/// existed; the key goes with the last field.
fn hdel(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    let (removed, emptied) = match ctx.keys.get_mut(ctx.db, key) {
        None => return ctx.out.int(0),
        Some(e) => match e.object_mut() {
            Some(Value::Hash(h)) => {
                let mut removed = 0;
                for f in args.iter().skip(2) {
                    removed += i64::from(h.remove(f));
                    if h.is_empty() {
                        break;
                    }
                }
                (removed, h.is_empty())
            }
            _ => return ctx.out.error(errors::WRONGTYPE),
        },
    };
    if emptied {
        ctx.keys.delete(ctx.db, key);
    }
    if removed > 0 {
        ctx.modified(key);
        ctx.notify(ev::HASH, "hdel", key);
        if emptied {
            ctx.notify(ev::GENERIC, "del", key);
        }
        ctx.dirty += removed as u64 - 1;
    }
    ctx.out.int(removed);
}

/// HLEN key: the number of fields (0 for a missing key).
fn hlen(ctx: &mut Ctx<'_>, args: Args<'_>) {
    read_or(
        ctx,
        args,
        |out| out.int(0),
        |h, out| out.int(h.len() as i64),
    );
}

/// HSTRLEN key field: the length of the field's value (0 when missing).
fn hstrlen(ctx: &mut Ctx<'_>, args: Args<'_>) {
    read_or(
        ctx,
        args,
        |out| out.int(0),
        |h, out| out.int(h.get(args.get(2)).map_or(0, |v| v.len() as i64)),
    );
}

/// HEXISTS key field: 1 if the field exists, else 0.
fn hexists(ctx: &mut Ctx<'_>, args: Args<'_>) {
    read_or(
        ctx,
        args,
        |out| out.int(0),
        |h, out| out.int(i64::from(h.contains(args.get(2)))),
    );
}

/// What HKEYS, HVALS and HGETALL reply for each pair.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parts {
    Fields,
    Values,
    Both,
}

/// Shared body of HKEYS, HVALS and HGETALL (a map in RESP3).
fn get_all(ctx: &mut Ctx<'_>, args: Args<'_>, parts: Parts) {
    let header = |out: &mut ReplyBuf, n: usize| match parts {
        Parts::Both => out.map(n),
        Parts::Fields | Parts::Values => out.array(n),
    };
    read_or(
        ctx,
        args,
        |out| header(out, 0),
        |h, out| {
            header(out, h.len());
            for (f, v) in h.iter() {
                if parts != Parts::Values {
                    out.bulk(f);
                }
                if parts != Parts::Fields {
                    out.bulk(v);
                }
            }
        },
    );
}

/// HKEYS key: every field.
fn hkeys(ctx: &mut Ctx<'_>, args: Args<'_>) {
    get_all(ctx, args, Parts::Fields);
}

/// HVALS key: every value.
fn hvals(ctx: &mut Ctx<'_>, args: Args<'_>) {
    get_all(ctx, args, Parts::Values);
}

/// HGETALL key: every field and value (a map in RESP3).
fn hgetall(ctx: &mut Ctx<'_>, args: Args<'_>) {
    get_all(ctx, args, Parts::Both);
}

/// Outcome of a HINCRBY-style update computed from the old value.
enum Incr {
    /// Store this integer and reply it as an integer (HINCRBY).
    Int(i64),
    /// Store this text and reply it as a bulk string (HINCRBYFLOAT).
    Text(Vec<u8>),
    /// Reply this error and change nothing.
    Fail(&'static str),
}

/// Shared body of HINCRBY and HINCRBYFLOAT: `next` computes the new value
/// from the old one (None when the field is missing); the new value is
/// stored (converting the encoding if it is too long) and replied.
fn incr_field(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    event: &str,
    next: impl FnOnce(Option<&[u8]>) -> Incr,
) {
    let (key, field) = (args.get(1), args.get(2));
    let limits = limits(ctx);
    // HINCRBYFLOAT propagates as HSET of the result (float sums are not
    // reproducible everywhere); HINCRBY as executed.
    let mut stored = None;
    let res = with_hash(ctx, key, |h, out| match next(h.get(field)) {
        Incr::Int(n) => {
            h.set(field, itoa::Buffer::new().format(n).as_bytes(), limits);
            out.int(n);
            true
        }
        Incr::Text(text) => {
            h.set(field, &text, limits);
            out.bulk(&text);
            stored = Some(text);
            true
        }
        Incr::Fail(msg) => {
            out.error(msg);
            false
        }
    });
    if let Some(text) = stored {
        ctx.propagate(&[b"HSET", key, field, &text]);
    }
    match res {
        Ok(true) => {
            ctx.modified(key);
            ctx.notify(ev::HASH, event, key);
        }
        Ok(false) => {}
        Err(WrongType) => ctx.out.error(errors::WRONGTYPE),
    }
}

/// HINCRBY key field increment: adds an integer to the field (0 when
/// missing) and replies the new value; errors if the value is not an
/// integer or the sum overflows.
fn hincrby(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(incr) = ctx.int_arg(args.get(3)) else {
        return;
    };
    incr_field(ctx, args, "hincrby", |old| {
        let old = match old.map(parse_i64) {
            None => 0,
            Some(Some(n)) => n,
            Some(None) => return Incr::Fail("ERR hash value is not an integer"),
        };
        match old.checked_add(incr) {
            Some(n) => Incr::Int(n),
            None => Incr::Fail(errors::OVERFLOW),
        }
    });
}

/// HINCRBYFLOAT key field increment: adds a float to the field (0 when
/// missing), stores and replies the result as Redis prints long doubles.
fn hincrbyfloat(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let incr = args.get(3);
    let Some(kind) = check_long_double(incr) else {
        return ctx.out.error(errors::NOT_FLOAT);
    };
    if kind == LongDoubleKind::Infinite {
        return ctx.out.error("ERR value is NaN or Infinity");
    }
    incr_field(ctx, args, "hincrbyfloat", |old| {
        let old = old.unwrap_or(b"0");
        if check_long_double(old).is_none() {
            return Incr::Fail("ERR hash value is not a float");
        }
        match add_long_doubles(old, incr) {
            Ok(text) => Incr::Text(text),
            Err(LongDoubleError::NotFinite) => {
                Incr::Fail("ERR increment would produce NaN or Infinity")
            }
            Err(LongDoubleError::Unprintable) => Incr::Fail("ERR hash value is not a float"),
        }
    });
}

/// Writes one HRANDFIELD pick: the field, then its value when asked for
/// (the two wrapped in a pair array in RESP3).
fn reply_pick(out: &mut ReplyBuf, with_values: bool, f: &[u8], v: &[u8]) {
    if with_values && out.protocol() == Protocol::Resp3 {
        out.array(2);
    }
    out.bulk(f);
    if with_values {
        out.bulk(v);
    }
}

/// HRANDFIELD key [count [WITHVALUES]]: one random field (null for a
/// missing key), or with a count that many distinct fields (negative: that
/// many picks, repeats allowed), optionally with values (pairs in RESP3).
fn hrandfield(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let mut rng = fastrand::Rng::new();
    if args.len() == 2 {
        return read_or(ctx, args, ReplyBuf::null, |h, out| {
            h.random_pairs(&mut rng, 1, |f, _| out.bulk(f));
        });
    }
    let Some(count) = ctx.int_arg(args.get(2)) else {
        return;
    };
    if count == i64::MIN {
        return ctx.out.error(&format!(
            "ERR value is out of range, value must between {} and {}",
            -i64::MAX,
            i64::MAX
        ));
    }
    let with_values = match args.try_get(3) {
        None => false,
        Some(opt) if args.len() == 4 && is(opt, "withvalues") => true,
        Some(_) => return ctx.out.error(errors::SYNTAX),
    };
    if with_values && !(-i64::MAX / 2..=i64::MAX / 2).contains(&count) {
        return ctx.out.error("ERR value is out of range");
    }
    let n = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    // A huge negative count must not exhaust memory: past the budget the
    // reply is cut and the connection closed, as Redis closes a client
    // over its output buffer limit.
    let budget = super::shared::reply_budget(ctx);
    let mut over_limit = false;
    read_or(
        ctx,
        args,
        |out| out.array(0),
        |h, out| {
            let picks = if count < 0 { n } else { n.min(h.len()) };
            let flat = with_values && out.protocol() != Protocol::Resp3;
            out.array(if flat { picks.saturating_mul(2) } else { picks });
            if count >= 0 {
                return h.random_distinct(&mut rng, n, |f, v| reply_pick(out, with_values, f, v));
            }
            let mut left = n;
            while left > 0 && !over_limit {
                let batch = left.min(RANDOM_BATCH);
                h.random_pairs(&mut rng, batch, |f, v| reply_pick(out, with_values, f, v));
                left -= batch;
                over_limit = out.len() > budget;
            }
        },
    );
    if over_limit {
        ctx.session.close_after_reply = true;
    }
}

/// HSCAN key cursor [MATCH pattern] [COUNT count]: one step of a field
/// iteration, replying the next cursor and the matching fields with their
/// values. Listpack-encoded hashes are returned whole with cursor 0.
fn hscan(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if parse_cursor(args.get(2)).is_none() {
        return ctx.out.error("ERR invalid cursor");
    }
    // Redis looks the key up before parsing the options: a missing key or
    // another type wins over an option error, so the latter is written
    // first and withdrawn if needed.
    let mark = ctx.out.mark();
    let opts = parse_scan_args(ctx, args, 2, false);
    match read_hash(&mut ctx.keys, ctx.db, args.get(1)) {
        Ok(Some(h)) => {
            let Some(opts) = opts else {
                return;
            };
            // The items are copied into one buffer (the cursor, known last,
            // is replied first).
            let mut bytes = Vec::new();
            let mut ends = Vec::new();
            let next = h.scan(opts.cursor, opts.count, |f, v| {
                if opts.matches(f) {
                    for item in [f, v] {
                        bytes.extend_from_slice(item);
                        ends.push(bytes.len());
                    }
                }
            });
            let mut start = 0;
            let items: Vec<&[u8]> = ends
                .iter()
                .map(|&end| {
                    let item = &bytes[start..end];
                    start = end;
                    item
                })
                .collect();
            reply_scan(ctx.out, next, &items);
        }
        Ok(None) => {
            ctx.out.truncate(mark);
            reply_scan(ctx.out, 0, &[]);
        }
        Err(WrongType) => {
            ctx.out.truncate(mark);
            ctx.out.error(errors::WRONGTYPE);
        }
    }
}

/// Replies a SCAN-family result: the cursor as a bulk string, then the
/// items.
fn reply_scan(out: &mut ReplyBuf, cursor: u64, items: &[&[u8]]) {
    out.array(2);
    out.bulk(itoa::Buffer::new().format(cursor).as_bytes());
    out.array(items.len());
    for item in items {
        out.bulk(item);
    }
}
