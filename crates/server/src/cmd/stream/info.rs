//! XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS and XINFO
//! HELP, with Redis 7.0's fields in its order (maps in RESP3).

use vireo_resp::{Args, ReplyBuf};
use vireo_store::stream::{Group, Stream, StreamId};

use super::{now_i64, read_stream, reply_entry, reply_id, reply_range, Ctx, WrongType};
use super::{CommandSpec, LOADING, READONLY, STALE};
use crate::cmd::shared::{reply_help, subcommand_syntax_error};
use crate::cmd::{container, errors, is, spec, KeySpec};

/// The key of XINFO's subcommands is argument 2.
const KEY2: KeySpec = KeySpec::Range {
    first: 2,
    last: 2,
    step: 1,
};

/// XINFO and its subcommands.
pub const XINFO: CommandSpec = container(
    "xinfo",
    -2,
    0,
    &[
        // In the order Redis's COMMAND lists them.
        spec("xinfo|groups", 3, READONLY, KEY2, xinfo),
        spec("xinfo|stream", -3, READONLY, KEY2, xinfo),
        spec("xinfo|consumers", 4, READONLY, KEY2, xinfo),
        spec("xinfo|help", 2, LOADING | STALE, KeySpec::None, help),
    ],
);

/// Entries (and pending entries) XINFO STREAM FULL shows by default.
const FULL_DEFAULT_COUNT: usize = 10;

/// XINFO HELP.
fn help(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    reply_help(
        ctx,
        "XINFO",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    );
}

/// The STREAM options: None for the summary, Some(count) for FULL (0: no
/// limit); Err after replying an error.
fn full_count(ctx: &mut Ctx<'_>, args: Args<'_>) -> Result<Option<usize>, ()> {
    let opts = args.len() - 3;
    if opts == 0 {
        return Ok(None);
    }
    let valid = (opts == 1 || opts == 3)
        && is(args.get(3), "full")
        && (opts == 1 || is(args.get(4), "count"));
    if !valid {
        subcommand_syntax_error(ctx, args);
        return Err(());
    }
    if opts == 1 {
        return Ok(Some(FULL_DEFAULT_COUNT));
    }
    let n = ctx.int_arg(args.get(5)).ok_or(())?;
    Ok(Some(if n < 0 {
        FULL_DEFAULT_COUNT
    } else {
        usize::try_from(n).unwrap_or(usize::MAX)
    }))
}

/// XINFO STREAM / GROUPS / CONSUMERS.
fn xinfo(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let sub = args.get(1);
    let full = if is(sub, "stream") {
        match full_count(ctx, args) {
            Ok(full) => full,
            Err(()) => return,
        }
    } else {
        None
    };
    let key = args.get(2);
    let s = match read_stream(&mut ctx.keys, ctx.db, key) {
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
        Ok(None) => return ctx.out.error(errors::NO_SUCH_KEY),
        Ok(Some(s)) => s,
    };
    if is(sub, "consumers") {
        let name = args.get(3);
        let Some(g) = s.group(name) else {
            return ctx.out.error(&format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                String::from_utf8_lossy(name),
                String::from_utf8_lossy(key)
            ));
        };
        consumers(ctx.out, g);
    } else if is(sub, "groups") {
        groups(ctx.out, s);
    } else if is(sub, "stream") {
        stream(ctx.out, s, full);
    } else {
        subcommand_syntax_error(ctx, args);
    }
}

/// XINFO CONSUMERS: name, pending count and idle time of each consumer.
fn consumers(out: &mut ReplyBuf, g: &Group) {
    let now = now_i64();
    out.array(g.consumer_count());
    for (name, c) in g.consumers() {
        out.map(3);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"pending");
        out.int(c.pending_len() as i64);
        out.bulk(b"idle");
        out.int((now - c.seen_time).max(0));
    }
}

/// A group's entries-read, or null when unknown.
fn entries_read(out: &mut ReplyBuf, g: &Group) {
    match g.entries_read {
        Some(n) => out.int(n as i64),
        None => out.null(),
    }
}

/// A group's lag, or null when it cannot be known.
fn lag(out: &mut ReplyBuf, s: &Stream, g: &Group) {
    match s.group_lag(g) {
        Some(n) => out.int(n),
        None => out.null(),
    }
}

/// XINFO GROUPS.
fn groups(out: &mut ReplyBuf, s: &Stream) {
    out.array(s.group_count());
    for (name, g) in s.groups() {
        out.map(6);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"consumers");
        out.int(g.consumer_count() as i64);
        out.bulk(b"pending");
        out.int(g.pending_len() as i64);
        out.bulk(b"last-delivered-id");
        reply_id(out, g.last_id);
        out.bulk(b"entries-read");
        entries_read(out, g);
        out.bulk(b"lag");
        lag(out, s, g);
    }
}

/// XINFO STREAM, the summary (`full` None) or FULL with a count limit.
fn stream(out: &mut ReplyBuf, s: &Stream, full: Option<usize>) {
    out.map(if full.is_some() { 9 } else { 10 });
    out.bulk(b"length");
    out.int(s.len() as i64);
    out.bulk(b"radix-tree-keys");
    out.int(s.node_count() as i64);
    out.bulk(b"radix-tree-nodes");
    out.int(s.radix_tree_nodes() as i64);
    out.bulk(b"last-generated-id");
    reply_id(out, s.last_id());
    out.bulk(b"max-deleted-entry-id");
    reply_id(out, s.max_deleted_id());
    out.bulk(b"entries-added");
    out.int(s.entries_added() as i64);
    out.bulk(b"recorded-first-entry-id");
    reply_id(out, s.first_id());
    let Some(count) = full else {
        out.bulk(b"groups");
        out.int(s.group_count() as i64);
        for (label, rev) in [(&b"first-entry"[..], false), (b"last-entry", true)] {
            out.bulk(label);
            match s.range(StreamId::MIN, StreamId::MAX, rev).next() {
                Some(e) => reply_entry(out, &e),
                None => out.null(),
            }
        }
        return;
    };
    out.bulk(b"entries");
    reply_range(out, s, StreamId::MIN, StreamId::MAX, count, false);
    out.bulk(b"groups");
    out.array(s.group_count());
    for (name, g) in s.groups() {
        full_group(out, s, name, g, count);
    }
}

/// One group of XINFO STREAM FULL, pending lists cut at `count` (0: all).
fn full_group(out: &mut ReplyBuf, s: &Stream, name: &[u8], g: &Group, count: usize) {
    let limit = if count == 0 { usize::MAX } else { count };
    out.map(7);
    out.bulk(b"name");
    out.bulk(name);
    out.bulk(b"last-delivered-id");
    reply_id(out, g.last_id);
    out.bulk(b"entries-read");
    entries_read(out, g);
    out.bulk(b"lag");
    lag(out, s, g);
    out.bulk(b"pel-count");
    out.int(g.pending_len() as i64);
    out.bulk(b"pending");
    out.array(g.pending_len().min(limit));
    for (id, nack) in g.pending(StreamId::MIN, StreamId::MAX).take(limit) {
        out.array(4);
        reply_id(out, id);
        out.bulk(nack.consumer());
        out.int(nack.delivery_time);
        out.int(nack.delivery_count as i64);
    }
    out.bulk(b"consumers");
    out.array(g.consumer_count());
    for (cname, c) in g.consumers() {
        out.map(4);
        out.bulk(b"name");
        out.bulk(cname);
        out.bulk(b"seen-time");
        out.int(c.seen_time);
        out.bulk(b"pel-count");
        out.int(c.pending_len() as i64);
        out.bulk(b"pending");
        out.array(c.pending_len().min(limit));
        let pending = g
            .consumer_pending(cname, StreamId::MIN, StreamId::MAX)
            .into_iter()
            .flatten()
            .take(limit);
        for (id, nack) in pending {
            out.array(3);
            reply_id(out, id);
            out.int(nack.delivery_time);
            out.int(nack.delivery_count as i64);
        }
    }
}
