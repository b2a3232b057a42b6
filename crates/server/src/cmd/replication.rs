//! Replication commands: SYNC, PSYNC, REPLCONF, ROLE, WAIT on the master
//! side, REPLICAOF/SLAVEOF on the replica side, FAILOVER between them. The links themselves live
//! in [`crate::repl`]; these handlers check arguments, record what a
//! replica announces, ask the worker to hand its connection over, and
//! start or stop following a master.

use std::sync::Arc;

use vireo_resp::number::parse_i64;
use vireo_resp::Args;
use vireo_store::clock::now_ms;

use super::{errors, flags::*, is, spec, text, CommandSpec, Ctx, KeySpec};
use crate::exec::blocking::{BlockedOp, Served, Waiter};
use crate::repl::master::SyncKind;
use crate::server::Server;

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec(
        "sync",
        1,
        ADMIN | NOSCRIPT | NO_MULTI | NO_ASYNC_LOADING,
        KeySpec::None,
        sync,
    ),
    spec(
        "psync",
        -3,
        ADMIN | NOSCRIPT | NO_MULTI | NO_ASYNC_LOADING,
        KeySpec::None,
        psync,
    ),
    spec(
        "replconf",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY,
        KeySpec::None,
        replconf,
    ),
    spec(
        "role",
        1,
        NOSCRIPT | LOADING | STALE | FAST | SENTINEL,
        KeySpec::None,
        role,
    ),
    spec("wait", 3, NOSCRIPT, KeySpec::None, wait),
    spec(
        "replicaof",
        3,
        ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING,
        KeySpec::None,
        replicaof,
    ),
    spec(
        "slaveof",
        3,
        ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING,
        KeySpec::None,
        replicaof,
    ),
    spec(
        "failover",
        -1,
        ADMIN | NOSCRIPT | STALE,
        KeySpec::None,
        failover,
    ),
];

fn sync(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    if let Some(msg) = sync_refusal(ctx) {
        return ctx.out.error(msg);
    }
    ctx.session.repl.handoff = Some(SyncKind::Sync);
}

/// Why this client may not sync now: the server's reasons, or a filtered
/// RDB asked by a client that cannot read one streamed (Redis sends
/// filtered RDBs only over the socket, never through the RDB file).
fn sync_refusal(ctx: &Ctx<'_>) -> Option<&'static str> {
    crate::repl::sync_refusal(ctx.server).or_else(|| {
        let repl = &ctx.session.repl;
        (repl.filter.is_filtered() && !repl.capa_eof)
            .then_some("ERR Filtered replica requires EOF capability")
    })
}

/// PSYNC replid offset: the link decides between a partial and a full
/// resync once it owns the connection.
fn psync(ctx: &mut Ctx<'_>, args: Args<'_>) {
    // PSYNC replid offset FAILOVER: the master hands its role over.
    if args.len() > 3 && is(args.get(3), "failover") {
        let requester = ctx.session.shared.info_line();
        let promoted =
            crate::repl::failover::accept_failover_psync(ctx.server, args.get(1), &requester);
        if let Err(e) = promoted {
            return ctx.out.error(e);
        }
    }
    if let Some(msg) = sync_refusal(ctx) {
        return ctx.out.error(msg);
    }
    let Some(offset) = parse_i64(args.get(2)) else {
        return ctx.out.error(errors::NOT_INT);
    };
    ctx.session.repl.handoff = Some(SyncKind::Psync {
        replid: text(args.get(1)),
        offset,
    });
}

/// REPLICAOF host port | NO ONE (and its old name SLAVEOF).
fn replicaof(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let (host, port) = (args.get(1), args.get(2));
    if ctx.server.repl.failover.is_active() {
        return ctx
            .out
            .error("ERR REPLICAOF not allowed while failing over.");
    }
    let requester = ctx.session.shared.info_line();
    if is(host, "no") && is(port, "one") {
        if crate::repl::replica::unfollow(ctx.server) {
            tracing::info!("MASTER MODE enabled (user request from '{requester}')");
        }
        return ctx.out.ok();
    }
    let port = match parse_i64(port) {
        Some(p) if (0..=65535).contains(&p) => p as u16,
        _ => return ctx.out.error("ERR Invalid master port"),
    };
    let host = text(host);
    if !crate::repl::replica::follow(&ctx.server.arc(), &host, port) {
        return ctx.out.simple("OK Already connected to specified master");
    }
    tracing::info!("REPLICAOF {host}:{port} enabled (user request from '{requester}')");
    ctx.out.ok();
}

/// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]: a coordinated
/// failover to a replica ([`crate::repl::failover`]).
fn failover(ctx: &mut Ctx<'_>, args: Args<'_>) {
    use crate::repl::failover::{self, Request};
    let started = match failover::parse(args) {
        Err(e) => Err(e),
        Ok(Request::Abort) => {
            if failover::abort(ctx.server, "Failover manually aborted") {
                Ok(())
            } else {
                Err("ERR No failover in progress.")
            }
        }
        Ok(Request::Start {
            target,
            timeout_ms,
            force,
        }) => failover::start(&ctx.server.arc(), target, timeout_ms, force),
    };
    match started {
        Ok(()) => ctx.out.ok(),
        Err(e) => ctx.out.error(e),
    }
}

/// REPLCONF option value...: what a replica announces before PSYNC. ACK
/// and GETACK from a client that is not a replica link get no reply, as
/// in Redis.
fn replconf(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if args.len().is_multiple_of(2) {
        return ctx.out.error(errors::SYNTAX);
    }
    for i in (1..args.len()).step_by(2) {
        let (opt, value) = (args.get(i), args.get(i + 1));
        if is(opt, "listening-port") {
            let Some(port) = parse_i64(value) else {
                return ctx.out.error(errors::NOT_INT);
            };
            ctx.session.repl.listening_port = port.clamp(0, u16::MAX as i64) as u16;
        } else if is(opt, "ip-address") {
            if value.len() >= 46 {
                return ctx.out.error("ERR REPLCONF ip-address provided by replica instance is too long: 46 bytes maximum.");
            }
            ctx.session.repl.ip_address = Some(text(value));
        } else if is(opt, "ack") || is(opt, "getack") {
            return;
        } else if is(opt, "capa") {
            ctx.session.repl.capa_eof |= is(value, "eof");
        } else if is(opt, "rdb-only") {
            match parse_i64(value) {
                None => return ctx.out.error(errors::NOT_INT),
                Some(v @ 0..=1) => ctx.session.repl.rdb_only = v == 1,
                Some(_) => {
                    return ctx
                        .out
                        .error("ERR value is out of range, value must between 0 and 1")
                }
            }
        } else if is(opt, "rdb-filter-only") {
            if let Err(e) = ctx.session.repl.filter.apply(&text(value)) {
                return ctx.out.error(&e);
            }
        } else {
            return ctx
                .out
                .error(&format!("ERR Unrecognized REPLCONF option: {}", text(opt)));
        }
    }
    ctx.out.ok();
}

/// ROLE of a master: its offset and the online replicas as
/// [ip, port, acked offset], the numbers as bulk strings like Redis. Of a
/// replica: its master, the link's state and the offset applied (-1 while
/// not connected).
fn role(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    if let Some(link) = ctx.server.repl.link() {
        ctx.out.array(5);
        ctx.out.bulk(b"slave");
        ctx.out.bulk(link.host.as_bytes());
        ctx.out.int(i64::from(link.port));
        ctx.out.bulk(link.state_name().as_bytes());
        let offset = if link.is_connected() {
            ctx.server.repl.offset() as i64
        } else {
            -1
        };
        return ctx.out.int(offset);
    }
    let replicas: Vec<_> = ctx
        .server
        .repl
        .replicas()
        .into_iter()
        .filter(|r| r.is_online())
        .collect();
    ctx.server.repl.settle(ctx.server);
    ctx.out.array(3);
    ctx.out.bulk(b"master");
    ctx.out.int(ctx.server.repl.offset() as i64);
    ctx.out.array(replicas.len());
    for r in replicas {
        ctx.out.array(3);
        ctx.out.bulk(r.ip.as_bytes());
        ctx.out.bulk(r.port.to_string().as_bytes());
        ctx.out.bulk(r.ack_offset().to_string().as_bytes());
    }
}

/// WAIT numreplicas timeout: how many replicas acknowledged the writes made
/// so far, waiting up to `timeout` ms (0: forever) for `numreplicas`.
fn wait(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if ctx.server.repl.is_replica() {
        // Its GETACK would enter a stream that must stay its master's.
        return ctx.out.error("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.");
    }
    let Some(needed) = parse_i64(args.get(1)) else {
        return ctx.out.error(errors::NOT_INT);
    };
    let timeout = match parse_i64(args.get(2)) {
        None => {
            return ctx
                .out
                .error("ERR timeout is not an integer or out of range")
        }
        Some(t) if t < 0 => return ctx.out.error("ERR timeout is negative"),
        Some(t) => t as u64,
    };
    let server = ctx.server;
    if server.repl.replicas().is_empty() {
        return ctx.out.int(0);
    }
    // The target covers this client's writes (and maybe others').
    server.repl.settle(server);
    let target = server.repl.offset();
    let acked = server.repl.acked(target);
    if acked as i64 >= needed || ctx.session.in_multi() || ctx.deny_blocking {
        return ctx.out.int(acked as i64);
    }
    let deadline = if timeout == 0 { 0 } else { now_ms() + timeout };
    let op = WaitAcks {
        server: server.arc(),
        target,
    };
    let waiter = Waiter::new(
        ctx.session.shared.clone(),
        ctx.db,
        Vec::new(),
        op,
        ctx.out.protocol(),
        deadline,
    );
    let waiter = crate::exec::blocking::block(ctx, args, waiter);
    crate::repl::wait_for_acks(server, waiter, target, needed.max(0) as usize);
}

/// A client blocked in WAIT: its reply is the count of replicas that
/// acknowledged `target`, whenever the wait ends.
struct WaitAcks {
    server: Arc<Server>,
    target: u64,
}

impl BlockedOp for WaitAcks {
    fn destination(&self) -> Option<&[u8]> {
        None
    }

    fn serve(
        &self,
        _server: &Server,
        _keys: &mut vireo_store::Keys<'_>,
        _w: &Arc<Waiter>,
        _key: &[u8],
        _ready: &mut Vec<(usize, vireo_store::Key)>,
        _dirty: &mut u64,
    ) -> Served {
        // Not waiting on any key: never served through one.
        Served::Skipped
    }

    fn timeout_reply(&self) -> Option<Vec<u8>> {
        let n = self.server.repl.acked(self.target);
        Some(format!(":{n}\r\n").into_bytes())
    }
}
