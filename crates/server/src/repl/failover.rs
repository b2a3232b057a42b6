//! FAILOVER, Redis 7.0's coordinated failover: a master hands its role to
//! one of its replicas without losing a write.
//!
//! The steps, as Redis takes them:
//! 1. `FAILOVER [TO host port [FORCE]] [TIMEOUT ms]` pauses writes (a pause
//!    of its own, which CLIENT UNPAUSE does not lift) and enters
//!    `waiting-for-sync`.
//! 2. A thread checks every 100 ms whether the target (or, without TO, any
//!    replica) acknowledged the whole stream. When one has, or when the
//!    timeout passed with FORCE, the state becomes `failover-in-progress`
//!    and this server follows the target ([`super::replica::follow`]).
//! 3. The link thread then sends `PSYNC <replid> <offset> FAILOVER`; the
//!    target, whose history is ours, promotes itself
//!    ([`accept_failover_psync`]) and answers `+CONTINUE`. Any other answer
//!    aborts: this server becomes a master again ([`psync_answered`]).
//! 4. The pause ends with the failover, whichever way it ends.
//!
//! A timeout without FORCE, and FAILOVER ABORT, end it too.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use vireo_resp::number::parse_i64;
use vireo_resp::Args;
use vireo_store::clock::now_ms;

use crate::server::Server;

/// `master_failover_state` values.
const NO_FAILOVER: u8 = 0;
const WAIT_FOR_SYNC: u8 = 1;
const IN_PROGRESS: u8 = 2;

/// How often the waiting state checks the replicas' offsets (Redis runs
/// its replication cron every 100 ms while failing over).
const TICK: Duration = Duration::from_millis(100);

/// The failover state of this server (part of [`super::Repl`]).
#[derive(Default)]
pub struct Failover {
    state: AtomicU8,
    plan: Mutex<Plan>,
    /// Bumped by each FAILOVER: a waiting thread of an earlier one ends.
    generation: AtomicU64,
}

/// What the running failover aims at.
#[derive(Default, Clone)]
struct Plan {
    /// The replica to promote; chosen when caught up if FAILOVER named none.
    target: Option<(String, u16)>,
    /// Unix ms at which waiting ends (0: never).
    deadline_ms: u64,
    force: bool,
}

/// A parsed FAILOVER command.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// FAILOVER ABORT.
    Abort,
    /// FAILOVER [TO host port [FORCE]] [TIMEOUT ms].
    Start {
        target: Option<(String, i64)>,
        timeout_ms: i64,
        force: bool,
    },
}

/// Parses FAILOVER's arguments as Redis does: ABORT only alone; TO, FORCE
/// and TIMEOUT at most once each, in any order. Err is the error reply.
pub fn parse(args: Args<'_>) -> Result<Request, &'static str> {
    let word = |i: usize, w: &str| args.get(i).eq_ignore_ascii_case(w.as_bytes());
    if args.len() == 2 && word(1, "abort") {
        return Ok(Request::Abort);
    }
    let (mut target, mut timeout_ms, mut force) = (None, 0, false);
    let mut i = 1;
    while i < args.len() {
        if word(i, "timeout") && i + 1 < args.len() && timeout_ms == 0 {
            timeout_ms = parse_i64(args.get(i + 1)).ok_or(crate::cmd::errors::NOT_INT)?;
            if timeout_ms <= 0 {
                return Err("ERR FAILOVER timeout must be greater than 0");
            }
            i += 2;
        } else if word(i, "to") && i + 2 < args.len() && target.is_none() {
            let port = parse_i64(args.get(i + 2)).ok_or(crate::cmd::errors::NOT_INT)?;
            let host = String::from_utf8_lossy(args.get(i + 1)).into_owned();
            target = Some((host, port));
            i += 3;
        } else if word(i, "force") && !force {
            force = true;
            i += 1;
        } else {
            return Err(crate::cmd::errors::SYNTAX);
        }
    }
    Ok(Request::Start {
        target,
        timeout_ms,
        force,
    })
}

impl Failover {
    /// `master_failover_state` for INFO replication.
    pub fn state_name(&self) -> &'static str {
        match self.state.load(Ordering::Acquire) {
            NO_FAILOVER => "no-failover",
            WAIT_FOR_SYNC => "waiting-for-sync",
            _ => "failover-in-progress",
        }
    }

    /// True while a failover runs (REPLICAOF, SYNC and PSYNC are refused).
    pub fn is_active(&self) -> bool {
        self.state.load(Ordering::Acquire) != NO_FAILOVER
    }

    /// True once this server follows the target to hand it the role: its
    /// PSYNC carries FAILOVER.
    pub fn in_progress(&self) -> bool {
        self.state.load(Ordering::Acquire) == IN_PROGRESS
    }

    /// A failover with a timeout waits with no keep-alive PINGs in the
    /// stream (they would move the offset replicas must reach), as Redis.
    pub fn holds_pings(&self) -> bool {
        self.state.load(Ordering::Acquire) == WAIT_FOR_SYNC && self.plan.lock().deadline_ms != 0
    }
}

/// FAILOVER [TO host port [FORCE]] [TIMEOUT ms]: checks the request
/// against this server's state in Redis's order, pauses writes and starts
/// waiting for a replica to catch up. Err is the error reply.
pub fn start(
    server: &Arc<Server>,
    target: Option<(String, i64)>,
    timeout_ms: i64,
    force: bool,
) -> Result<(), &'static str> {
    let repl = &server.repl;
    let fo = &repl.failover;
    let mut plan = fo.plan.lock();
    if fo.is_active() {
        return Err("ERR FAILOVER already in progress.");
    }
    if repl.is_replica() {
        return Err("ERR FAILOVER is not valid when server is a replica.");
    }
    let replicas = repl.replicas();
    if replicas.is_empty() {
        return Err("ERR FAILOVER requires connected replicas.");
    }
    if force && (timeout_ms == 0 || target.is_none()) {
        return Err(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        );
    }
    let target = match target {
        Some((host, port)) => {
            let found = replicas
                .iter()
                .find(|r| r.ip.eq_ignore_ascii_case(&host) && i64::from(r.port) == port);
            let Some(replica) = found else {
                return Err("ERR FAILOVER target HOST and PORT is not a replica.");
            };
            if !replica.is_online() {
                return Err("ERR FAILOVER target replica is not online.");
            }
            tracing::info!("FAILOVER requested to {host}:{port}.");
            Some((host, replica.port))
        }
        None => {
            tracing::info!("FAILOVER requested to any replica.");
            None
        }
    };
    *plan = Plan {
        target,
        deadline_ms: if timeout_ms > 0 {
            now_ms() + timeout_ms as u64
        } else {
            0
        },
        force,
    };
    fo.state.store(WAIT_FOR_SYNC, Ordering::Release);
    server.pause.set_failover(&server.keyspace, true);
    let generation = fo.generation.fetch_add(1, Ordering::SeqCst) + 1;
    drop(plan);
    let s = server.clone();
    let spawned = std::thread::Builder::new()
        .name("vireo-failover".into())
        .spawn(move || wait_for_sync(&s, generation));
    if spawned.is_err() {
        abort(server, "Unable to start the failover thread");
    }
    Ok(())
}

/// Ends a failover that did not complete, as Redis's `abortFailover`: a
/// server already following the target becomes a master again. False when
/// no failover runs.
pub fn abort(server: &Server, why: &str) -> bool {
    let fo = &server.repl.failover;
    // Under the plan's lock: the waiting thread cannot hand over meanwhile.
    let mut plan = fo.plan.lock();
    if !fo.is_active() {
        return false;
    }
    match &plan.target {
        Some((host, port)) => tracing::info!("FAILOVER to {host}:{port} aborted: {why}"),
        None => tracing::info!("FAILOVER to any replica aborted: {why}"),
    }
    let following = fo.in_progress();
    *plan = Plan::default();
    fo.state.store(NO_FAILOVER, Ordering::Release);
    drop(plan);
    if following {
        super::replica::unfollow(server);
    }
    resume_writes(server);
    true
}

/// The failover succeeded: its state is cleared and writes resume.
fn clear(server: &Server) {
    let fo = &server.repl.failover;
    *fo.plan.lock() = Plan::default();
    fo.state.store(NO_FAILOVER, Ordering::Release);
    resume_writes(server);
}

/// Lifts the failover's write pause and wakes the clients it held.
fn resume_writes(server: &Server) {
    server.pause.set_failover(&server.keyspace, false);
    server.wake_all();
}

/// The link thread of a failing-over server got the target's answer to
/// `PSYNC ... FAILOVER`: accepted (a partial or full resync) ends the
/// failover; anything else aborts it.
pub fn psync_answered(server: &Server, accepted: bool) {
    if !server.repl.failover.in_progress() {
        return;
    }
    if accepted {
        clear(server);
    } else {
        abort(server, "Failover target rejected psync request");
    }
}

/// The waiting thread: every [`TICK`], the timeout (failing over anyway
/// with FORCE) and the replicas' acknowledged offsets.
fn wait_for_sync(server: &Arc<Server>, generation: u64) {
    let fo = &server.repl.failover;
    loop {
        std::thread::sleep(TICK);
        if server.shutting_down.load(Ordering::Acquire) {
            return;
        }
        let plan = fo.plan.lock();
        if fo.generation.load(Ordering::SeqCst) != generation
            || fo.state.load(Ordering::Acquire) != WAIT_FOR_SYNC
        {
            return;
        }
        let plan_now = plan.clone();
        drop(plan);
        if plan_now.deadline_ms != 0 && now_ms() >= plan_now.deadline_ms {
            if let (true, Some((host, port))) = (plan_now.force, &plan_now.target) {
                tracing::info!("FAILOVER to {host}:{port} time out exceeded, failing over.");
                hand_over(server, generation);
            } else {
                abort(server, "Replica never caught up before timeout");
            }
            return;
        }
        if let Some((host, port)) = caught_up(server, plan_now.target.as_ref()) {
            tracing::info!("Failover target {host}:{port} is synced, failing over.");
            fo.plan.lock().target = Some((host, port));
            hand_over(server, generation);
            return;
        }
    }
}

/// The replica that acknowledged every byte of the stream: the target, or
/// without one the first such replica.
fn caught_up(server: &Server, target: Option<&(String, u16)>) -> Option<(String, u16)> {
    // The offset must include writes acknowledged before the pause.
    server.repl.settle(server);
    let offset = server.repl.offset();
    server
        .repl
        .replicas()
        .into_iter()
        .find(|r| {
            r.ack_offset() == offset
                && target.is_none_or(|(h, p)| r.ip.eq_ignore_ascii_case(h) && r.port == *p)
        })
        .map(|r| match target {
            Some(t) => t.clone(),
            None => (r.ip.clone(), r.port),
        })
}

/// `failover-in-progress`: follow the target, whose link sends PSYNC
/// FAILOVER.
fn hand_over(server: &Arc<Server>, generation: u64) {
    let fo = &server.repl.failover;
    let plan = fo.plan.lock();
    if fo.generation.load(Ordering::SeqCst) != generation
        || fo.state.load(Ordering::Acquire) != WAIT_FOR_SYNC
    {
        return;
    }
    let Some((host, port)) = plan.target.clone() else {
        return;
    };
    server.aof.wait_written(Duration::from_secs(1));
    fo.state.store(IN_PROGRESS, Ordering::Release);
    drop(plan);
    super::replica::follow(server, &host, port);
}

/// The target side of PSYNC FAILOVER (Redis's `syncCommand`): a replica
/// whose history is the requester's becomes a master. Err is the error
/// reply.
pub fn accept_failover_psync(
    server: &Server,
    replid: &[u8],
    requester: &str,
) -> Result<(), &'static str> {
    let replid = String::from_utf8_lossy(replid);
    tracing::warn!("Failover request received for replid {replid}.");
    if !server.repl.is_replica() {
        return Err("ERR PSYNC FAILOVER can't be sent to a master.");
    }
    if !replid.eq_ignore_ascii_case(&server.repl.replid()) {
        return Err("ERR PSYNC FAILOVER replid must match my replid.");
    }
    super::replica::unfollow(server);
    tracing::info!("MASTER MODE enabled (failover request from '{requester}')");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(words: &[&str]) -> Result<Request, &'static str> {
        let mut bytes = Vec::new();
        let argv: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        crate::persist::aof::reader::encode(&mut bytes, &argv);
        let mut parser = vireo_resp::Parser::new();
        parser
            .parse(&bytes, &vireo_resp::ParseLimits::default())
            .unwrap()
            .unwrap();
        parse(parser.args(&bytes))
    }

    #[test]
    fn arguments_as_redis_reads_them() {
        assert_eq!(parsed(&["FAILOVER", "abort"]), Ok(Request::Abort));
        assert_eq!(
            parsed(&["failover", "TO", "h", "7", "force", "timeout", "5"]),
            Ok(Request::Start {
                target: Some(("h".into(), 7)),
                timeout_ms: 5,
                force: true
            })
        );
        assert_eq!(
            parsed(&["failover"]),
            Ok(Request::Start {
                target: None,
                timeout_ms: 0,
                force: false
            })
        );
        let syntax = Err(crate::cmd::errors::SYNTAX);
        assert_eq!(parsed(&["failover", "abort", "timeout", "5"]), syntax);
        assert_eq!(
            parsed(&["failover", "timeout", "5", "timeout", "6"]),
            syntax
        );
        assert_eq!(parsed(&["failover", "to", "h"]), syntax);
        assert_eq!(parsed(&["failover", "force", "force"]), syntax);
        assert_eq!(
            parsed(&["failover", "to", "h", "port"]),
            Err(crate::cmd::errors::NOT_INT)
        );
        assert_eq!(
            parsed(&["failover", "timeout", "0"]),
            Err("ERR FAILOVER timeout must be greater than 0")
        );
    }

    /// Random words from FAILOVER's vocabulary: an error or a request,
    /// never a panic, and a request only from well-formed input.
    #[test]
    fn random_arguments_never_panic() {
        let words = ["to", "TO", "force", "timeout", "abort", "7", "-1", "x", "0"];
        let mut rng = fastrand::Rng::with_seed(28);
        for _ in 0..3000 {
            let mut argv = vec!["failover"];
            for _ in 0..rng.usize(0..7) {
                argv.push(words[rng.usize(..words.len())]);
            }
            if let Ok(Request::Start { timeout_ms, .. }) = parsed(&argv) {
                assert!(timeout_ms >= 0);
            }
        }
    }
}
