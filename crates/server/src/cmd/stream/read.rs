//! XREAD and XREADGROUP, and their blocking forms (Redis's `xreadCommand`
//! and `serveClientsBlockedOnStreamKey`).
//!
//! Both read every listed stream that has something past the given ID and
//! reply `[[key, entries], …]` (a map in RESP3). When none has, BLOCK makes
//! the client wait ([`StreamWait`]) on all the keys: an XADD to one of them
//! serves it from that key alone. A reader in a group that waits for `>`
//! compares with the group's last ID at serving time (other readers of the
//! group may have moved it), gets `-NOGROUP` once the group is destroyed and
//! `-UNBLOCKED` once the key is deleted or no longer holds a stream.
//!
//! XREADGROUP is never logged as executed: what it changed is logged as
//! Redis logs it, an `XCLAIM … FORCE JUSTID LASTID` per entry handed out
//! (or `XGROUP SETID … ENTRIESREAD` with NOACK), plus `XGROUP
//! CREATECONSUMER` when NOACK created the consumer.
//!
//! Inside a script BLOCK is refused where the parser meets it (Redis's
//! "xread command is not allowed with BLOCK option from scripts"); MULTI
//! only turns it into a non-blocking read.

use std::sync::Arc;

use vireo_resp::number::parse_i64;
use vireo_resp::{Args, Protocol, ReplyBuf};
use vireo_store::stream::{Stream, StreamId};
use vireo_store::{Key, Keys, Value};

use super::{no_group, now_i64, reply_entry, reply_range, Ctx, WrongType, EV_STREAM};
use super::{read_stream, spec, write_stream, CommandSpec, BLOCKING, READONLY, WRITE};
use crate::cmd::{errors, is, KeySpec};
use crate::exec::blocking::{self, BlockedOp, Served, Waiter};
use crate::exec::notify;
use crate::server::Server;

/// XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]
pub const XREAD: CommandSpec = spec("xread", -4, READONLY | BLOCKING, STREAM_KEYS, xread);

/// XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds]
/// [NOACK] STREAMS key [key ...] id [id ...]
pub const XREADGROUP: CommandSpec =
    spec("xreadgroup", -7, WRITE | BLOCKING, STREAM_KEYS, xreadgroup);

/// The keys are the first half of the arguments after STREAMS.
const STREAM_KEYS: KeySpec = KeySpec::Custom {
    first: 0,
    last: 0,
    step: 0,
    find: stream_keys,
};

/// Entries a blocked reader gets at most when it gave no COUNT (Redis's
/// `XREAD_BLOCKED_DEFAULT_COUNT`).
const BLOCKED_DEFAULT_COUNT: usize = 1000;

/// The parsed options of XREAD / XREADGROUP.
struct ReadArgs {
    /// BLOCK's deadline in Unix ms (0: forever); None without BLOCK.
    block: Option<u64>,
    /// COUNT (0: no limit).
    count: usize,
    /// Index of the first key.
    streams: usize,
    /// Number of keys.
    n: usize,
    /// Indices of the group and consumer names (XREADGROUP).
    group: Option<(usize, usize)>,
    noack: bool,
}

/// Parses the options as Redis's `xreadCommand` does, in its order of
/// errors.
fn parse(args: Args<'_>, xreadgroup: bool, from_script: bool) -> Result<ReadArgs, String> {
    let mut parsed = ReadArgs {
        block: None,
        count: 0,
        streams: 0,
        n: 0,
        group: None,
        noack: false,
    };
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let o = args.get(i);
        if is(o, "block") && more > 0 {
            if from_script {
                return Err(format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(args.get(0))
                ));
            }
            i += 1;
            parsed.block = Some(block_deadline(args.get(i))?);
        } else if is(o, "count") && more > 0 {
            i += 1;
            let n = parse_i64(args.get(i)).ok_or(errors::NOT_INT)?;
            parsed.count = usize::try_from(n.max(0)).unwrap_or(usize::MAX);
        } else if is(o, "streams") && more > 0 {
            parsed.streams = i + 1;
            let left = args.len() - parsed.streams;
            if !left.is_multiple_of(2) {
                return Err("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.".into());
            }
            parsed.n = left / 2;
            break;
        } else if is(o, "group") && more >= 2 {
            if !xreadgroup {
                return Err(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."
                        .into(),
                );
            }
            parsed.group = Some((i + 1, i + 2));
            i += 2;
        } else if is(o, "noack") {
            if !xreadgroup {
                return Err(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead."
                        .into(),
                );
            }
            parsed.noack = true;
        } else {
            return Err(errors::SYNTAX.into());
        }
        i += 1;
    }
    if parsed.streams == 0 {
        return Err(errors::SYNTAX.into());
    }
    if xreadgroup && parsed.group.is_none() {
        return Err("ERR Missing GROUP option for XREADGROUP".into());
    }
    Ok(parsed)
}

/// BLOCK's argument (milliseconds, 0 forever) as a deadline in Unix ms.
fn block_deadline(arg: &[u8]) -> Result<u64, String> {
    let ms = parse_i64(arg).ok_or("ERR timeout is not an integer or out of range")?;
    if ms < 0 {
        return Err("ERR timeout is negative".into());
    }
    Ok(match ms {
        0 => 0,
        ms => super::now().saturating_add(ms as u64),
    })
}

/// The key finder: none when the arguments do not parse (the command then
/// fails before touching a key).
fn stream_keys(args: Args<'_>) -> Vec<usize> {
    let xreadgroup = args.get(0).len() == "xreadgroup".len();
    parse(args, xreadgroup, false)
        .map(|p| (p.streams..p.streams + p.n).collect())
        .unwrap_or_default()
}

/// Where a stream is read from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum From {
    /// Entries above this ID (XREAD; XREADGROUP's history).
    After(StreamId),
    /// `>`: entries never delivered to the group.
    New,
}

/// XREAD.
fn xread(ctx: &mut Ctx<'_>, args: Args<'_>) {
    read_command(ctx, args, false);
}

/// XREADGROUP.
fn xreadgroup(ctx: &mut Ctx<'_>, args: Args<'_>) {
    read_command(ctx, args, true);
}

/// The group a read goes through.
#[derive(Clone)]
struct GroupRead {
    group: Box<[u8]>,
    consumer: Box<[u8]>,
    noack: bool,
}

/// The body of XREAD and XREADGROUP.
fn read_command(ctx: &mut Ctx<'_>, args: Args<'_>, xreadgroup: bool) {
    let p = match parse(args, xreadgroup, ctx.session.in_script) {
        Ok(p) => p,
        Err(e) => return ctx.out.error(&e),
    };
    if xreadgroup {
        // Only the effects are logged, never the command itself.
        ctx.prevent_propagation();
    }
    let group = p.group.map(|(g, c)| GroupRead {
        group: args.get(g).into(),
        consumer: args.get(c).into(),
        noack: p.noack,
    });
    let Some(froms) = parse_ids(ctx, args, &p, group.as_ref()) else {
        return;
    };
    let top = ctx.out.deferred();
    let mut served = 0;
    for (i, from) in froms.iter().enumerate() {
        let key = args.get(p.streams + i);
        if serve_sync(ctx, key, *from, p.count, group.as_ref()) {
            served += 1;
        }
    }
    if served > 0 {
        return match ctx.out.protocol() {
            Protocol::Resp2 => ctx.out.fill_deferred_array(top, served),
            _ => ctx.out.fill_deferred_map(top, served),
        };
    }
    // Nothing was written after the deferred length: it is simply dropped.
    match p.block {
        Some(deadline) if !ctx.deny_blocking => {
            block(ctx, args, &p, &froms, group, deadline);
        }
        _ => ctx.out.null_array(),
    }
}

/// Resolves each stream's ID argument (`$`, `>`, or an ID), checking types
/// and groups in Redis's order; None after replying an error.
fn parse_ids(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    p: &ReadArgs,
    group: Option<&GroupRead>,
) -> Option<Vec<From>> {
    let mut froms = Vec::with_capacity(p.n);
    for i in 0..p.n {
        let key = args.get(p.streams + i);
        let arg = args.get(p.streams + p.n + i);
        let s = match read_stream(&mut ctx.keys, ctx.db, key) {
            Ok(s) => s,
            Err(WrongType) => {
                ctx.out.error(errors::WRONGTYPE);
                return None;
            }
        };
        if let Some(g) = group {
            if s.is_none_or(|s| s.group(&g.group).is_none()) {
                no_group(ctx, key, &g.group, " in XREADGROUP with GROUP option");
                return None;
            }
        }
        let last = s.map_or(StreamId::MIN, |s| s.last_id());
        let from = if arg == b"$" {
            if group.is_some() {
                ctx.out.error("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.");
                return None;
            }
            From::After(last)
        } else if arg == b">" {
            if group.is_none() {
                ctx.out.error("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.");
                return None;
            }
            From::New
        } else {
            match super::strict_id(ctx, arg)? {
                // Redis marks `>` with the largest ID, so a reader in a
                // group that names that ID gets `>` too.
                StreamId::MAX if group.is_some() => From::New,
                id => From::After(id),
            }
        };
        froms.push(from);
    }
    Some(froms)
}

/// Serves `key` synchronously if it has something to give, writing
/// `key, entries` (a pair array in RESP2) into the reply; false otherwise.
fn serve_sync(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    from: From,
    count: usize,
    group: Option<&GroupRead>,
) -> bool {
    let Ok(Some(s)) = write_stream(&mut ctx.keys, ctx.db, key) else {
        return false;
    };
    let (start, history) = match (from, group) {
        (From::After(id), Some(_)) => (id, true),
        (From::After(id), None) => {
            if s.is_empty() || s.last_valid_id().is_none_or(|top| top <= id) {
                return false;
            }
            (id, false)
        }
        (From::New, Some(g)) => {
            let Some(gr) = s.group(&g.group) else {
                return false;
            };
            if s.is_empty() || !s.has_unread(gr) {
                return false;
            }
            (gr.last_id, false)
        }
        (From::New, None) => return false,
    };
    if ctx.out.protocol() == Protocol::Resp2 {
        ctx.out.array(2);
    }
    ctx.out.bulk(key);
    let mut effects = Vec::new();
    let created = match group {
        None => {
            let first = start.incr().unwrap_or(StreamId::MIN);
            reply_range(ctx.out, s, first, StreamId::MAX, count, false);
            false
        }
        Some(g) if history => reply_history(ctx.out, s, g, start, count),
        Some(g) => read_new(ctx.out, s, key, g, count, &mut effects),
    };
    if group.is_some() {
        ctx.dirty += 1;
    }
    super::group::notify_consumer_created(ctx, key, created);
    for cmd in effects {
        ctx.propagate(&cmd);
    }
    true
}

/// XREADGROUP with an ID: the consumer's own pending entries above `after`.
/// True if the consumer was created.
fn reply_history(
    out: &mut ReplyBuf,
    s: &mut Stream,
    g: &GroupRead,
    after: StreamId,
    count: usize,
) -> bool {
    let len = out.deferred();
    let mut n = 0;
    let report = s.read_group_history(
        &g.group,
        &g.consumer,
        after,
        count,
        now_i64(),
        |id, entry| {
            n += 1;
            match entry {
                Some(e) => reply_entry(out, &e),
                None => {
                    out.array(2);
                    super::reply_id(out, id);
                    out.null_array();
                }
            }
        },
    );
    out.fill_deferred_array(len, n);
    report.is_some_and(|r| r.consumer_created)
}

/// XREADGROUP with `>`: hands out entries the group never delivered,
/// recording the commands that log it in `effects`; true if it created
/// the consumer.
fn read_new(
    out: &mut ReplyBuf,
    s: &mut Stream,
    key: &[u8],
    g: &GroupRead,
    count: usize,
    effects: &mut Vec<Vec<Vec<u8>>>,
) -> bool {
    let before = s.group(&g.group).map(|gr| gr.last_id);
    let len = out.deferred();
    let mut ids = Vec::new();
    let report = s.read_group_new(&g.group, &g.consumer, count, g.noack, now_i64(), |e| {
        reply_entry(out, &e);
        ids.push(e.id);
    });
    out.fill_deferred_array(len, ids.len());
    let (Some(report), Some(gr)) = (report, s.group(&g.group)) else {
        return false;
    };
    if g.noack && report.consumer_created {
        effects.push(vec![
            b"XGROUP".to_vec(),
            b"CREATECONSUMER".to_vec(),
            key.to_vec(),
            g.group.to_vec(),
            g.consumer.to_vec(),
        ]);
    }
    if !g.noack {
        for id in ids {
            if let Some(nack) = gr.nack(id) {
                effects.push(super::group::xclaim_effect(key, &g.group, id, nack, id));
            }
        }
    } else if before != Some(gr.last_id) {
        effects.push(super::group::setid_effect(key, &g.group, gr));
    }
    report.consumer_created
}

/// Registers the client as waiting on the streams.
fn block(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    p: &ReadArgs,
    froms: &[From],
    group: Option<GroupRead>,
    deadline: u64,
) {
    let mut after: Vec<(Key, From)> = Vec::with_capacity(p.n);
    for (i, from) in froms.iter().enumerate() {
        let key = args.get(p.streams + i);
        // A key listed twice waits for its first ID, as in Redis.
        if !after.iter().any(|(k, _)| &k[..] == key) {
            after.push((Key::from(key), *from));
        }
    }
    let keys = after.iter().map(|(k, _)| k.clone()).collect();
    let count = if p.count == 0 {
        BLOCKED_DEFAULT_COUNT
    } else {
        p.count
    };
    let op = StreamWait {
        after,
        group,
        count,
    };
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

/// A client blocked in XREAD or XREADGROUP.
struct StreamWait {
    /// Each key with what it waits for.
    after: Vec<(Key, From)>,
    group: Option<GroupRead>,
    /// Most entries to hand out.
    count: usize,
}

impl BlockedOp for StreamWait {
    fn destination(&self) -> Option<&[u8]> {
        None
    }

    fn serve(
        &self,
        server: &Server,
        keys: &mut Keys<'_>,
        w: &Arc<Waiter>,
        key: &[u8],
        _ready: &mut Vec<(usize, Key)>,
        dirty: &mut u64,
    ) -> Served {
        let mut out = ReplyBuf::new(w.proto);
        let stream = match keys.get_mut(w.db, key).map(|e| e.object_mut()) {
            Some(Some(Value::Stream(s))) => Some(s),
            _ => None,
        };
        let Some(s) = stream else {
            // Deleted or replaced: a group reader's group went with it.
            if self.group.is_none() {
                return Served::Skipped;
            }
            out.error("UNBLOCKED the stream key no longer exists");
            return finish(server, w, out);
        };
        let Some(from) = self.after.iter().find(|(k, _)| &k[..] == key).map(|e| e.1) else {
            return Served::Skipped;
        };
        let gt = match (&self.group, from) {
            (Some(g), _) => {
                match s.group(&g.group) {
                    Some(gr) => gr.last_id,
                    None => {
                        out.error("NOGROUP the consumer group this client was blocked on no longer exists");
                        return finish(server, w, out);
                    }
                }
            }
            (None, From::After(id)) => id,
            (None, From::New) => return Served::Skipped,
        };
        if s.last_id() <= gt || !server.blocking.claim(&server.keyspace, w) {
            return Served::Skipped;
        }
        match w.proto {
            Protocol::Resp2 => {
                out.array(1);
                out.array(2);
            }
            _ => out.map(1),
        }
        out.bulk(key);
        let mut effects = Vec::new();
        match &self.group {
            None => {
                let first = gt.incr().unwrap_or(StreamId::MIN);
                reply_range(&mut out, s, first, StreamId::MAX, self.count, false);
            }
            Some(g) => {
                if read_new(&mut out, s, key, g, self.count, &mut effects) {
                    // Published as the served client's, as Redis does.
                    notify::publish_event(
                        server,
                        None,
                        EV_STREAM,
                        "xgroup-createconsumer",
                        w.db,
                        key,
                    );
                }
                *dirty += 1;
            }
        }
        for cmd in &effects {
            server.aof.feed_command(w.db, cmd);
        }
        blocking::deliver(server, w, out.as_bytes().to_vec(), false);
        Served::Done
    }
}

/// Ends `w`'s wait with the error in `out`, if nobody else ended it.
fn finish(server: &Server, w: &Arc<Waiter>, out: ReplyBuf) -> Served {
    if !server.blocking.claim(&server.keyspace, w) {
        return Served::Skipped;
    }
    blocking::deliver(server, w, out.as_bytes().to_vec(), true);
    Served::Done
}

#[cfg(test)]
mod tests {
    use super::*;
    use vireo_resp::OwnedArgs;

    fn args(v: &[&str]) -> OwnedArgs {
        OwnedArgs::from_slices(v.iter().map(|s| s.as_bytes()))
    }

    #[test]
    fn keys_are_the_first_half_after_streams() {
        let a = args(&["xread", "COUNT", "2", "STREAMS", "a", "b", "0", "0"]);
        assert_eq!(stream_keys(a.as_args()), vec![4, 5]);
        let a = args(&[
            "xreadgroup",
            "GROUP",
            "g",
            "c",
            "NOACK",
            "STREAMS",
            "s",
            ">",
        ]);
        assert_eq!(stream_keys(a.as_args()), vec![6]);
        // Malformed: no keys, the command fails before touching any.
        let a = args(&["xread", "STREAMS", "a", "b", "0"]);
        assert!(stream_keys(a.as_args()).is_empty());
    }

    #[test]
    fn options_fail_with_redis_errors_in_redis_order() {
        let err = |v: &[&str], group| parse(args(v).as_args(), group, false).err().unwrap();
        assert!(
            err(&["xread", "GROUP", "g", "c", "STREAMS", "s", "0"], false)
                .contains("only supported by XREADGROUP")
        );
        assert!(err(&["xread", "NOACK", "STREAMS", "s", "0"], false).contains("NOACK"));
        assert!(err(&["xread", "STREAMS", "a", "b", "0"], false).starts_with("ERR Unbalanced"));
        assert_eq!(err(&["xread", "COUNT", "1", "x"], false), errors::SYNTAX);
        assert_eq!(err(&["xread", "COUNT", "1"], false), errors::SYNTAX);
        assert_eq!(
            err(&["xread", "COUNT", "x", "STREAMS", "s", "0"], false),
            errors::NOT_INT
        );
        assert_eq!(
            err(&["xreadgroup", "COUNT", "1", "STREAMS", "s", "0"], true),
            "ERR Missing GROUP option for XREADGROUP"
        );
        assert_eq!(
            err(&["xread", "BLOCK", "-1", "STREAMS", "s", "0"], false),
            "ERR timeout is negative"
        );
        assert!(
            err(&["xread", "BLOCK", "1.5", "STREAMS", "s", "0"], false).contains("not an integer")
        );
    }

    #[test]
    fn block_is_refused_from_scripts_where_the_parser_meets_it() {
        let from_script = |v: &[&str]| parse(args(v).as_args(), v[0] == "xreadgroup", true);
        assert_eq!(
            from_script(&["xread", "BLOCK", "0", "STREAMS", "s"])
                .err()
                .unwrap(),
            "ERR xread command is not allowed with BLOCK option from scripts"
        );
        let group = [
            "xreadgroup",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ];
        assert!(from_script(&group)
            .err()
            .unwrap()
            .starts_with("ERR xreadgroup command"));
        assert!(from_script(&["xread", "STREAMS", "s", "$"]).is_ok());
    }

    #[test]
    fn block_zero_waits_forever_and_counts_clamp_at_zero() {
        let p = parse(
            args(&["xread", "BLOCK", "0", "COUNT", "-5", "STREAMS", "s", "$"]).as_args(),
            false,
            false,
        )
        .unwrap();
        assert_eq!(p.block, Some(0));
        assert_eq!(p.count, 0);
        assert_eq!((p.streams, p.n), (6, 1));
        let far = block_deadline(b"9223372036854775807").unwrap();
        assert!(far > i64::MAX as u64, "a huge BLOCK waits (almost) forever");
    }

    /// Random argument vectors never panic the parser or the key finder,
    /// and the keys found are always within the arguments.
    #[test]
    fn random_arguments_never_panic() {
        let words = [
            "STREAMS", "streams", "BLOCK", "COUNT", "GROUP", "NOACK", "0", "-1", "$", ">", "k",
            "1-1", "x",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let n = (seed % 9) as usize;
            let mut v = vec![if seed & 1 == 0 { "xread" } else { "xreadgroup" }];
            for i in 0..n {
                v.push(words[((seed >> (i * 4 + 8)) % words.len() as u64) as usize]);
            }
            let a = args(&v);
            let _ = parse(a.as_args(), v[0] == "xreadgroup", false);
            for k in stream_keys(a.as_args()) {
                assert!(k < v.len());
            }
        }
    }
}
