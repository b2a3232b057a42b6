//! Consumer group commands: XGROUP (CREATE, SETID, DESTROY,
//! CREATECONSUMER, DELCONSUMER, HELP), XACK, XPENDING, XCLAIM and
//! XAUTOCLAIM, as Redis 7.0's `t_stream.c` has them.
//!
//! XCLAIM and XAUTOCLAIM are logged by their effects, as Redis logs them:
//! one idempotent `XCLAIM key group consumer 0 id TIME t RETRYCOUNT n FORCE
//! JUSTID LASTID last` per pending entry claimed or dropped (an entry whose
//! stream entry is gone is dropped by the replayed XCLAIM too), and `XGROUP
//! SETID` when only the group's last ID moved.

use vireo_resp::Args;
use vireo_store::stream::{AutoclaimParams, BoundKind, ClaimParams, Group, Nack, Stream, StreamId};

use super::{
    bound, count_arg, id_text, int_or, no_group, read_stream, reply_entry, reply_id, strict_id,
    strict_ids, write_stream, Ctx, WrongType,
};
use super::{now_i64, CommandSpec, DENYOOM, EV_STREAM, LOADING, STALE, WRITE};
use crate::cmd::shared::{reply_help, subcommand_syntax_error};
use crate::cmd::{container, errors, is, spec, KeySpec};

/// The key of XGROUP's subcommands is argument 2.
const KEY2: KeySpec = KeySpec::Range {
    first: 2,
    last: 2,
    step: 1,
};

/// XGROUP and its subcommands (one handler, as in Redis).
pub const XGROUP: CommandSpec = container(
    "xgroup",
    -2,
    0,
    &[
        // In the order Redis's COMMAND lists them.
        spec("xgroup|destroy", 4, WRITE, KEY2, xgroup),
        spec("xgroup|delconsumer", 5, WRITE, KEY2, xgroup),
        spec("xgroup|create", -5, WRITE | DENYOOM, KEY2, xgroup),
        spec("xgroup|createconsumer", 5, WRITE | DENYOOM, KEY2, xgroup),
        spec("xgroup|setid", -5, WRITE, KEY2, xgroup),
        spec(
            "xgroup|help",
            2,
            LOADING | STALE,
            KeySpec::None,
            xgroup_help,
        ),
    ],
);

/// The `XCLAIM` that recreates a pending entry exactly (consumer, delivery
/// time and count) and raises the group's last ID to `last_id`.
pub(super) fn xclaim_effect(
    key: &[u8],
    group: &[u8],
    id: StreamId,
    nack: &Nack,
    last_id: StreamId,
) -> Vec<Vec<u8>> {
    let mut n = itoa::Buffer::new();
    vec![
        b"XCLAIM".to_vec(),
        key.to_vec(),
        group.to_vec(),
        nack.consumer().to_vec(),
        b"0".to_vec(),
        id_text(id),
        b"TIME".to_vec(),
        n.format(nack.delivery_time).as_bytes().to_vec(),
        b"RETRYCOUNT".to_vec(),
        n.format(nack.delivery_count).as_bytes().to_vec(),
        b"FORCE".to_vec(),
        b"JUSTID".to_vec(),
        b"LASTID".to_vec(),
        id_text(last_id),
    ]
}

/// The `XGROUP SETID` that sets a group's last ID and entries-read.
pub(super) fn setid_effect(key: &[u8], group: &[u8], g: &Group) -> Vec<Vec<u8>> {
    let read = g.entries_read.map_or(-1, |n| n as i64);
    vec![
        b"XGROUP".to_vec(),
        b"SETID".to_vec(),
        key.to_vec(),
        group.to_vec(),
        id_text(g.last_id),
        b"ENTRIESREAD".to_vec(),
        itoa::Buffer::new().format(read).as_bytes().to_vec(),
    ]
}

/// XGROUP HELP.
fn xgroup_help(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    reply_help(
        ctx,
        "XGROUP",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    );
}

/// XGROUP's options after the ID (CREATE: MKSTREAM, ENTRIESREAD; SETID:
/// ENTRIESREAD): (mkstream, entries_read), None after replying an error.
fn group_options(ctx: &mut Ctx<'_>, args: Args<'_>) -> Option<(bool, Option<u64>)> {
    let sub = args.get(1);
    let (create, setid) = (is(sub, "create"), is(sub, "setid"));
    let (mut mkstream, mut entries_read) = (false, None);
    let mut i = 5;
    while i < args.len() {
        if create && is(args.get(i), "mkstream") {
            mkstream = true;
            i += 1;
        } else if (create || setid) && is(args.get(i), "entriesread") && i + 1 < args.len() {
            let n = ctx.int_arg(args.get(i + 1))?;
            if n < 0 && n != -1 {
                ctx.out
                    .error("ERR value for ENTRIESREAD must be positive or -1");
                return None;
            }
            entries_read = u64::try_from(n).ok();
            i += 2;
        } else {
            subcommand_syntax_error(ctx, args);
            return None;
        }
    }
    Some((mkstream, entries_read))
}

/// XGROUP CREATE / SETID / DESTROY / CREATECONSUMER / DELCONSUMER, in the
/// order of checks of Redis's `xgroupCommand`.
fn xgroup(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some((mkstream, entries_read)) = group_options(ctx, args) else {
        return;
    };
    let (sub, key, name) = (args.get(1), args.get(2), args.get(3));
    let exists = match write_stream(&mut ctx.keys, ctx.db, key) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(s) => s.map(|s| s.group(name).is_some()),
    };
    if !mkstream {
        let Some(has_group) = exists else {
            return ctx.out.error("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.");
        };
        let needs_group = ["setid", "createconsumer", "delconsumer"]
            .iter()
            .any(|s| is(sub, s));
        if !has_group && needs_group {
            return ctx.out.error(&format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                String::from_utf8_lossy(name),
                String::from_utf8_lossy(key)
            ));
        }
    }
    let argc = args.len();
    if is(sub, "create") && (5..=8).contains(&argc) {
        create(ctx, args, exists.is_some(), entries_read);
    } else if is(sub, "setid") && (argc == 5 || argc == 7) {
        setid(ctx, args, entries_read);
    } else if is(sub, "destroy") && argc == 4 {
        destroy(ctx, key, name);
    } else if is(sub, "createconsumer") && argc == 5 {
        let created = with_group(ctx, key, name, |g| {
            g.create_consumer(args.get(4), now_i64())
        });
        if created == Some(true) {
            ctx.dirty += 1;
            ctx.notify(EV_STREAM, "xgroup-createconsumer", key);
        }
        ctx.out.int(i64::from(created == Some(true)));
    } else if is(sub, "delconsumer") && argc == 5 {
        let pending = with_group(ctx, key, name, |g| g.delete_consumer(args.get(4))).flatten();
        if pending.is_some() {
            ctx.dirty += 1;
            ctx.notify(EV_STREAM, "xgroup-delconsumer", key);
        }
        ctx.out.int(pending.unwrap_or(0) as i64);
    } else {
        subcommand_syntax_error(ctx, args);
    }
}

/// Runs `f` on group `name` of the stream at `key` (both checked to exist).
fn with_group<R>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    name: &[u8],
    f: impl FnOnce(&mut Group) -> R,
) -> Option<R> {
    let s = write_stream(&mut ctx.keys, ctx.db, key).ok()??;
    s.group_mut(name).map(f)
}

/// XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n].
fn create(ctx: &mut Ctx<'_>, args: Args<'_>, exists: bool, entries_read: Option<u64>) {
    let (key, name) = (args.get(2), args.get(3));
    let id = if args.get(4) == b"$" {
        match write_stream(&mut ctx.keys, ctx.db, key) {
            Ok(Some(s)) => s.last_id(),
            _ => StreamId::MIN,
        }
    } else {
        match strict_id(ctx, args.get(4)) {
            Some(id) => id,
            None => return,
        }
    };
    if !exists {
        ctx.keys.set(
            ctx.db,
            key,
            vireo_store::Value::Stream(Box::new(Stream::new())),
        );
        ctx.modified(key);
    }
    let Ok(Some(s)) = write_stream(&mut ctx.keys, ctx.db, key) else {
        return ctx.out.error(errors::WRONGTYPE);
    };
    match s.create_group(name, id, entries_read) {
        Ok(()) => {
            ctx.out.ok();
            ctx.dirty += 1;
            ctx.notify(EV_STREAM, "xgroup-create", key);
        }
        Err(e) => ctx.out.error(e.message()),
    }
}

/// XGROUP SETID key group id|$ [ENTRIESREAD n].
fn setid(ctx: &mut Ctx<'_>, args: Args<'_>, entries_read: Option<u64>) {
    let (key, name) = (args.get(2), args.get(3));
    let id = if args.get(4) == b"$" {
        match write_stream(&mut ctx.keys, ctx.db, key) {
            Ok(Some(s)) => s.last_id(),
            _ => StreamId::MIN,
        }
    } else {
        match StreamId::parse(args.get(4), 0) {
            Ok(id) => id,
            Err(e) => return ctx.out.error(e.message()),
        }
    };
    with_group(ctx, key, name, |g| {
        g.last_id = id;
        g.entries_read = entries_read;
    });
    ctx.out.ok();
    ctx.dirty += 1;
    ctx.notify(EV_STREAM, "xgroup-setid", key);
}

/// XGROUP DESTROY key group: readers blocked on the group are woken (with
/// `-NOGROUP`).
fn destroy(ctx: &mut Ctx<'_>, key: &[u8], name: &[u8]) {
    let destroyed = match write_stream(&mut ctx.keys, ctx.db, key) {
        Ok(Some(s)) => s.destroy_group(name),
        _ => false,
    };
    if destroyed {
        ctx.out.int(1);
        ctx.dirty += 1;
        ctx.notify(EV_STREAM, "xgroup-destroy", key);
        ctx.signal_ready(key);
    } else {
        ctx.out.int(0);
    }
}

/// XACK key group id [id ...]: acknowledges pending entries, replying how
/// many were pending.
pub(super) fn xack(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let (key, name) = (args.get(1), args.get(2));
    match read_stream(&mut ctx.keys, ctx.db, key) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(s) if s.is_none_or(|s| s.group(name).is_none()) => return ctx.out.int(0),
        Ok(_) => {}
    }
    let Some(ids) = strict_ids(ctx, args, 3) else {
        return;
    };
    let acked = with_group(ctx, key, name, |g| {
        ids.iter().filter(|&&id| g.ack(id)).count()
    });
    let acked = acked.unwrap_or(0);
    ctx.dirty += acked as u64;
    ctx.out.int(acked as i64);
}

/// XPENDING key group [[IDLE min-idle] start end count [consumer]].
pub(super) fn xpending(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let argc = args.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        return ctx.out.error(errors::SYNTAX);
    }
    let mut range = None;
    if argc >= 6 {
        let mut at = 3;
        let mut min_idle = 0;
        if is(args.get(3), "idle") {
            let Some(n) = ctx.int_arg(args.get(4)) else {
                return;
            };
            if argc < 8 {
                return ctx.out.error(errors::SYNTAX);
            }
            min_idle = n;
            at += 2;
        }
        let Some(count) = count_arg(ctx, args.get(at + 2)) else {
            return;
        };
        let Some(start) = bound(ctx, args.get(at), BoundKind::Start) else {
            return;
        };
        let Some(end) = bound(ctx, args.get(at + 1), BoundKind::End) else {
            return;
        };
        let consumer = (at + 3 < argc).then(|| args.get(at + 3));
        range = Some((start, end, count, min_idle, consumer));
    }
    let (key, name) = (args.get(1), args.get(2));
    let s = match read_stream(&mut ctx.keys, ctx.db, key) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(s) => s,
    };
    let Some(g) = s.and_then(|s| s.group(name)) else {
        return no_group(ctx, key, name, "");
    };
    let out = &mut *ctx.out;
    let Some((start, end, count, min_idle, consumer)) = range else {
        out.array(4);
        out.int(g.pending_len() as i64);
        let Some((first, last)) = g.pending_bounds() else {
            out.null();
            out.null();
            return out.null_array();
        };
        reply_id(out, first);
        reply_id(out, last);
        let owners: Vec<_> = g.consumers().filter(|(_, c)| c.pending_len() > 0).collect();
        out.array(owners.len());
        for (cname, c) in owners {
            out.array(2);
            out.bulk(cname);
            out.bulk_int(c.pending_len() as i64);
        }
        return;
    };
    let now = now_i64();
    let entries: Box<dyn Iterator<Item = (StreamId, &Nack)>> = match consumer {
        Some(c) => match g.consumer_pending(c, start, end) {
            Some(it) => Box::new(it),
            None => return out.array(0),
        },
        None => Box::new(g.pending(start, end)),
    };
    let len = out.deferred();
    let mut n = 0;
    for (id, nack) in entries
        .filter(|(_, nack)| min_idle == 0 || now - nack.delivery_time >= min_idle)
        .take(count)
    {
        out.array(4);
        reply_id(out, id);
        out.bulk(nack.consumer());
        out.int((now - nack.delivery_time).max(0));
        out.int(nack.delivery_count as i64);
        n += 1;
    }
    out.fill_deferred_array(len, n);
}

/// Looks up the stream and group of XCLAIM / XAUTOCLAIM, replying
/// WRONGTYPE or NOGROUP; true when both exist.
fn claim_target(ctx: &mut Ctx<'_>, key: &[u8], name: &[u8]) -> bool {
    match read_stream(&mut ctx.keys, ctx.db, key) {
        Err(WrongType) => {
            ctx.out.error(errors::WRONGTYPE);
            false
        }
        Ok(s) if s.is_some_and(|s| s.group(name).is_some()) => true,
        Ok(_) => {
            no_group(ctx, key, name, "");
            false
        }
    }
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms]
/// [TIME unix-ms] [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID id].
pub(super) fn xclaim(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let (key, name, consumer) = (args.get(1), args.get(2), args.get(3));
    if !claim_target(ctx, key, name) {
        return;
    }
    let Some(min_idle) = int_or(
        ctx,
        args.get(4),
        "ERR Invalid min-idle-time argument for XCLAIM",
    ) else {
        return;
    };
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match StreamId::parse_strict(args.get(j), 0) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = now_i64();
    let mut params = ClaimParams {
        min_idle: min_idle.max(0),
        ..ClaimParams::default()
    };
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args.get(j);
        if is(opt, "force") {
            params.force = true;
        } else if is(opt, "justid") {
            params.justid = true;
        } else if is(opt, "idle") && more > 0 {
            j += 1;
            let msg = "ERR Invalid IDLE option argument for XCLAIM";
            let Some(idle) = int_or(ctx, args.get(j), msg) else {
                return;
            };
            params.delivery_time = Some(now.saturating_sub(idle));
        } else if is(opt, "time") && more > 0 {
            j += 1;
            let msg = "ERR Invalid TIME option argument for XCLAIM";
            let Some(t) = int_or(ctx, args.get(j), msg) else {
                return;
            };
            params.delivery_time = Some(t);
        } else if is(opt, "retrycount") && more > 0 {
            j += 1;
            let msg = "ERR Invalid RETRYCOUNT option argument for XCLAIM";
            let Some(n) = int_or(ctx, args.get(j), msg) else {
                return;
            };
            params.retry_count = u64::try_from(n).ok();
        } else if is(opt, "lastid") && more > 0 {
            j += 1;
            let Some(id) = strict_id(ctx, args.get(j)) else {
                return;
            };
            params.last_id = Some(id);
        } else {
            return ctx.out.error(&format!(
                "ERR Unrecognized XCLAIM option '{}'",
                String::from_utf8_lossy(opt)
            ));
        }
        j += 1;
    }
    ctx.prevent_propagation();
    let Ok(Some(s)) = write_stream(&mut ctx.keys, ctx.db, key) else {
        return ctx.out.error(errors::WRONGTYPE);
    };
    let Some(report) = s.claim(name, consumer, &ids, &params, now) else {
        return no_group(ctx, key, name, "");
    };
    ctx.out.array(report.claimed.len());
    reply_claimed(ctx.out, s, &report.claimed, params.justid);
    let Some(g) = s.group(name) else {
        return;
    };
    let mut effects = claim_effects(key, name, g, &report.claimed, &report.deleted);
    if effects.is_empty() && report.last_id_raised {
        effects.push(setid_effect(key, name, g));
    }
    ctx.dirty += effects.len() as u64;
    for cmd in effects {
        ctx.propagate(&cmd);
    }
    notify_consumer_created(ctx, key, report.consumer_created);
}

/// The `xgroup-createconsumer` event of a consumer a command created by
/// naming it (XCLAIM, XAUTOCLAIM, XREADGROUP), as Redis's
/// `streamCreateConsumer` publishes it.
pub(super) fn notify_consumer_created(ctx: &mut Ctx<'_>, key: &[u8], created: bool) {
    if created {
        ctx.notify(EV_STREAM, "xgroup-createconsumer", key);
    }
}

/// Replies claimed entries (or just their IDs).
fn reply_claimed(out: &mut vireo_resp::ReplyBuf, s: &Stream, ids: &[StreamId], justid: bool) {
    for &id in ids {
        match s.get(id) {
            Some(e) if !justid => reply_entry(out, &e),
            _ => reply_id(out, id),
        }
    }
}

/// The XCLAIMs logging claimed and dropped pending entries.
fn claim_effects(
    key: &[u8],
    name: &[u8],
    g: &Group,
    claimed: &[StreamId],
    deleted: &[(StreamId, Nack)],
) -> Vec<Vec<Vec<u8>>> {
    let mut effects: Vec<_> = deleted
        .iter()
        .map(|(id, nack)| xclaim_effect(key, name, *id, nack, g.last_id))
        .collect();
    for &id in claimed {
        if let Some(nack) = g.nack(id) {
            effects.push(xclaim_effect(key, name, id, nack, g.last_id));
        }
    }
    effects
}

/// XAUTOCLAIM's largest COUNT (Redis bounds it so its buffers' sizes
/// cannot overflow).
const AUTOCLAIM_MAX_COUNT: i64 = i64::MAX / 16;

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count]
/// [JUSTID]: replies `[next-start, claimed, deleted-ids]`.
pub(super) fn xautoclaim(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let (key, name, consumer) = (args.get(1), args.get(2), args.get(3));
    let msg = "ERR Invalid min-idle-time argument for XAUTOCLAIM";
    let Some(min_idle) = int_or(ctx, args.get(4), msg) else {
        return;
    };
    let Some(start) = bound(ctx, args.get(5), BoundKind::Start) else {
        return;
    };
    let (mut count, mut justid) = (100u64, false);
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if is(args.get(j), "count") && more > 0 {
            match parse_count(args.get(j + 1)) {
                Some(n) => count = n,
                None => return ctx.out.error("ERR COUNT must be > 0"),
            }
            j += 1;
        } else if is(args.get(j), "justid") {
            justid = true;
        } else {
            return ctx.out.error(errors::SYNTAX);
        }
        j += 1;
    }
    if !claim_target(ctx, key, name) {
        return;
    }
    ctx.prevent_propagation();
    let params = AutoclaimParams {
        start,
        count,
        min_idle: min_idle.max(0),
        justid,
    };
    let Ok(Some(s)) = write_stream(&mut ctx.keys, ctx.db, key) else {
        return ctx.out.error(errors::WRONGTYPE);
    };
    let Some(report) = s.autoclaim(name, consumer, &params, now_i64()) else {
        return no_group(ctx, key, name, "");
    };
    let out = &mut *ctx.out;
    out.array(3);
    reply_id(out, report.next);
    out.array(report.claimed.len());
    reply_claimed(out, s, &report.claimed, justid);
    out.array(report.deleted.len());
    for (id, _) in &report.deleted {
        reply_id(out, *id);
    }
    let Some(g) = s.group(name) else {
        return;
    };
    let effects = claim_effects(key, name, g, &report.claimed, &report.deleted);
    ctx.dirty += effects.len() as u64;
    for cmd in effects {
        ctx.propagate(&cmd);
    }
    notify_consumer_created(ctx, key, report.consumer_created);
}

/// XAUTOCLAIM's COUNT: 1 up to [`AUTOCLAIM_MAX_COUNT`].
fn parse_count(arg: &[u8]) -> Option<u64> {
    vireo_resp::number::parse_i64(arg)
        .filter(|n| (1..=AUTOCLAIM_MAX_COUNT).contains(n))
        .map(|n| n as u64)
}
