//! From parsed arguments to a reply: command lookup, arity and auth checks,
//! MULTI queuing, CLIENT PAUSE, shard locking, and the bookkeeping around
//! every call (stats, slow log, MONITOR, CLIENT REPLY). Redis splits this
//! between `processCommand` and `call`; so do we.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

use vireo_resp::{Args, ReplyBuf};
use vireo_store::clock::{command_end_us, command_start_us, now_us};
use vireo_store::Keys;

use crate::cmd::{flags, key_range, table, CmdRef, CommandSpec, Ctx, KeySpec};
use crate::net::session::{ReplyMode, Session};
use crate::ops::metrics::hist_bucket;
use crate::server::{bump, Server, SlowlogEntry};

/// What happened to a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Executed (or rejected, or queued): its reply is in the buffer.
    Done,
    /// Held back by CLIENT PAUSE: run it again later.
    Postponed,
    /// Waiting for keys (BLPOP …): its reply comes later, and the client's
    /// further input waits for it.
    Blocked,
}

/// The table's (lower-case) name of command `name`, None if there is no
/// such command: the AOF loader refuses an unknown command before
/// replaying anything of it.
pub fn command_name(name: &[u8]) -> Option<&'static str> {
    table().lookup(name).map(|c| c.spec.name)
}

/// Handles one command from a client; `known` is the table entry for its
/// name when the caller looked it up already (the pipeline look-ahead).
pub fn run(
    server: &Server,
    session: &mut Session,
    out: &mut ReplyBuf,
    args: Args<'_>,
    known: Option<CmdRef>,
) -> Outcome {
    let cmd = match resolve(args, known) {
        Ok(c) => c,
        Err((found, msg)) => {
            // A known command with the wrong arity counts as rejected.
            reject(server, session, out, found, &msg);
            return Outcome::Done;
        }
    };
    let spec = cmd.spec;
    if !session.authenticated && !spec.has(flags::NO_AUTH) {
        reject(
            server,
            session,
            out,
            Some(cmd),
            "NOAUTH Authentication required.",
        );
        return Outcome::Done;
    }
    if let Some(msg) = crate::security::command_denied(server, session, cmd, args) {
        reject(server, session, out, Some(cmd), &msg);
        return Outcome::Done;
    }
    if let Some(msg) = busy_rejection(server, session, spec) {
        reject(server, session, out, Some(cmd), msg);
        return Outcome::Done;
    }
    // Replaying the AOF recreates data that fitted: no memory limit then,
    // as Redis ignores maxmemory while loading.
    // One load of the hook word serves every hook of this command.
    let hooks = crate::exec::notify::hooks(server);
    let oom = if session.replaying || session.from_master {
        None
    } else {
        oom_rejection(server, session, out, cmd, args, hooks)
    };
    if let Some(msg) = oom {
        reject(server, session, out, Some(cmd), msg);
        return Outcome::Done;
    }
    if let Some(msg) = persistence_rejection(server, session, cmd, args) {
        reject(server, session, out, Some(cmd), &msg);
        return Outcome::Done;
    }
    if session.subs.active() && out.protocol() == vireo_resp::Protocol::Resp2 {
        if let Some(msg) = crate::exec::pubsub::subscribed_mode_rejection(spec) {
            reject(server, session, out, Some(cmd), &msg);
            return Outcome::Done;
        }
    }
    if session.in_multi()
        && !matches!(
            spec.name,
            "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
        )
    {
        if spec.has(flags::NO_MULTI) {
            reject(
                server,
                session,
                out,
                Some(cmd),
                "ERR Command not allowed inside a transaction",
            );
        } else {
            let multi = session.multi.as_mut().expect("in multi");
            multi.queue.push((cmd, args.to_owned()));
            multi.args_mem += args
                .iter()
                .map(|a| a.len() + 2 * std::mem::size_of::<usize>())
                .sum::<usize>();
            session
                .shared
                .multi_len
                .store(multi.queue.len(), Ordering::Relaxed);
            out.simple("QUEUED");
        }
        return Outcome::Done;
    }
    if !session.replaying && !session.from_master && is_paused_for(server, session, cmd, args) {
        return Outcome::Postponed;
    }
    let Some(mut keys) = lock_for(server, session, cmd, args) else {
        // A script holding a shard this command waited for is now busy.
        let msg = busy_rejection(server, session, spec).unwrap_or(crate::exec::script::BUSY_EVAL);
        reject(server, session, out, Some(cmd), msg);
        return Outcome::Done;
    };
    // CLIENT NO-TOUCH: this client's lookups leave access times alone.
    keys.set_no_touch(session.no_touch);
    // A replica's master decides when keys expire: its DEL follows. While
    // the AOF loads, nothing expires either (Redis's `keyIsExpired`): the
    // log's own DELs say when keys went, and a key given a past TTL by a
    // logged EXPIRE may still be written to by the commands after it.
    keys.set_ttl_blind(session.from_master || session.replaying);
    if hooks != 0 {
        record_for_events(&mut keys, hooks);
    }
    let replaying = session.replaying;
    let deny_blocking = replaying || session.from_master;
    let mut ctx = Ctx {
        server,
        db: session.db,
        session,
        out,
        keys,
        dirty: 0,
        ready: Vec::new(),
        // The AOF's fake client and a master never wait (Redis asserts
        // they cannot).
        deny_blocking,
        in_exec: false,
        effects: None,
        expired_announced: 0,
        hooks,
    };
    if ctx.session.reply_mode == ReplyMode::SkipNext {
        ctx.session.reply_mode = ReplyMode::Skipping;
    }
    // A logical mark (stable across socket writes), not a length: earlier
    // pipelined replies may still be pending when CLIENT REPLY drops this one.
    let mark = ctx.out.mark();
    // A writable replica expires the TTLs its own clients set.
    let local_ttls = (server.repl.is_replica() && !ctx.session.from_master)
        .then(|| crate::repl::replica::key_ttls(&ctx.keys, ctx.db, spec, args));
    call(&mut ctx, cmd, args);
    if let Some(before) = local_ttls.filter(|_| ctx.dirty > 0) {
        crate::repl::replica::note_local_ttls(server, &ctx.keys, ctx.db, before);
    }
    // The unit's effects reach the AOF while its locks are held, so the
    // log's order is the order of effects on every key.
    if !ctx.session.aof_unit.is_empty() {
        let slot = ctx.session.shared.worker;
        let wait = server.aof.feed(slot, &mut ctx.session.aof_unit);
        ctx.session.aof_wait = ctx.session.aof_wait.max(wait);
    }
    // Clients blocked on keys this command filled are served before
    // anything else runs, under the same locks, at the time of serving (a
    // key that expired while a transaction slept is deleted, not served:
    // Redis updates its cached time there too).
    let deferred = if ctx.ready.is_empty() {
        Vec::new()
    } else {
        ctx.keys.refresh_clock();
        crate::exec::blocking::serve_ready(server, &mut ctx.keys, &mut ctx.ready, &mut ctx.dirty)
    };
    // Keys the services found expired are deleted: logged after the unit.
    if server.aof.is_collecting() && !replaying {
        let lazy = server.config.lazyfree_lazy_expire();
        for (db, key) in ctx.keys.take_expired() {
            crate::persist::aof::log_deletion(server, db, &key, lazy);
        }
    }
    let mut dirty = ctx.dirty;
    drop(ctx);
    if !deferred.is_empty() {
        dirty += crate::exec::blocking::serve_deferred(server, deferred);
    }
    if dirty > 0 {
        crate::server::bump(&server.worker_stats[session.shared.worker].dirty, dirty);
    }
    if session.blocked.is_some() {
        // CLIENT REPLY applies to the reply that ends the wait.
        return Outcome::Blocked;
    }
    match session.reply_mode {
        ReplyMode::Off => out.truncate(mark),
        ReplyMode::Skipping => {
            out.truncate(mark);
            session.reply_mode = ReplyMode::On;
        }
        ReplyMode::On | ReplyMode::SkipNext => {}
    }
    crate::exec::pubsub::restore_held_pushes(session, out);
    // CLIENT CACHING is only set while this client tracks.
    if hooks & crate::exec::notify::hook::TRACKING != 0 {
        crate::exec::tracking::command_done(session, spec.name);
        let mut local = crate::exec::pubsub::Local { session, out };
        crate::exec::tracking::after_command(server, &mut local);
    }
    Outcome::Done
}

/// Why [`lookup`] found no command to run.
pub enum LookupError {
    /// No such command or subcommand.
    Unknown,
    /// The command exists but not with this many arguments.
    Arity(CmdRef),
}

/// Finds the command (and subcommand) `args` name and checks its arity, as
/// Redis's `lookupCommand` plus the arity check (scripts word the errors
/// their own way).
pub fn lookup(args: Args<'_>) -> Result<CmdRef, LookupError> {
    let t = table();
    let mut cmd = t.lookup(args.get(0)).ok_or(LookupError::Unknown)?;
    if !cmd.spec.subcommands.is_empty() && args.len() >= 2 {
        cmd = t
            .lookup_sub(cmd.spec, args.get(1))
            .ok_or(LookupError::Unknown)?;
    }
    if !cmd.spec.arity_ok(args.len()) {
        return Err(LookupError::Arity(cmd));
    }
    Ok(cmd)
}

/// Asks the command's keyspace view to record what the classes on in
/// `hooks` report apart from the command: created keys (`n`), read misses
/// (`m`).
fn record_for_events(keys: &mut Keys<'_>, hooks: u32) {
    use crate::exec::notify::class;
    if hooks & class::NEW != 0 {
        keys.record_created();
    }
    if hooks & class::KEY_MISS != 0 {
        keys.record_misses();
    }
}

/// Finds the command (and subcommand) and checks its arity; Err is the
/// error reply, with the command when it exists (a wrong arity). `known`
/// is the table's entry for the name when the caller looked it up already.
fn resolve(args: Args<'_>, known: Option<CmdRef>) -> Result<CmdRef, (Option<CmdRef>, String)> {
    let t = table();
    let name = args.get(0);
    let Some(mut cmd) = known.or_else(|| t.lookup(name)) else {
        let mut shown = String::new();
        for a in args.iter().skip(1) {
            if shown.len() >= 128 {
                break;
            }
            let room = 128 - shown.len();
            let a = String::from_utf8_lossy(a);
            let a: String = a.chars().take(room).collect();
            shown.push_str(&format!("'{a}' "));
        }
        let name: String = String::from_utf8_lossy(name).chars().take(128).collect();
        return Err((
            None,
            format!("ERR unknown command '{name}', with args beginning with: {shown}"),
        ));
    };
    if !cmd.spec.subcommands.is_empty() && args.len() >= 2 {
        let sub = args.get(1);
        cmd = match t.lookup_sub(cmd.spec, sub) {
            Some(c) => c,
            None => {
                let sub: String = String::from_utf8_lossy(sub).chars().take(128).collect();
                let name = cmd.spec.name.to_ascii_uppercase();
                return Err((
                    None,
                    format!("ERR unknown subcommand '{sub}'. Try {name} HELP."),
                ));
            }
        };
    }
    if !cmd.spec.arity_ok(args.len()) {
        let msg = format!(
            "ERR wrong number of arguments for '{}' command",
            cmd.spec.name
        );
        return Err((Some(cmd), msg));
    }
    Ok(cmd)
}

/// Replies an error for a command that was not executed, flagging an open
/// transaction so EXEC aborts (Redis's `rejectCommand`).
fn reject(
    server: &Server,
    session: &mut Session,
    out: &mut ReplyBuf,
    cmd: Option<CmdRef>,
    msg: &str,
) {
    if let Some(m) = session.multi.as_mut() {
        m.aborted = true;
    }
    if let Some(c) = cmd {
        stats_of(server, session, c)
            .rejected
            .fetch_add(1, Ordering::Relaxed);
    }
    server.count_error(msg.as_bytes());
    if cmd.is_some_and(|c| c.spec.name == "exec") && session.in_multi() {
        // Redis's execCommandAbort: a refused EXEC drops the whole
        // transaction (OOM, a busy script, a failed save, …).
        crate::exec::multi::discard_transaction(server, session);
        out.error(&format!(
            "EXECABORT Transaction discarded because of: {msg}"
        ));
        return;
    }
    out.error(msg);
}

fn stats_of<'s>(server: &'s Server, session: &Session, cmd: CmdRef) -> &'s crate::server::CmdStat {
    &server.worker_stats[session.shared.worker].per_command[cmd.id]
}

/// Under `maxmemory`, evicts what the policy allows (Redis's
/// `performEvictions` at command start); if memory stays over the limit
/// with nothing left to evict, refuses commands that may grow memory (EXEC
/// when any queued command may) and anything queued into a transaction.
fn oom_rejection(
    server: &Server,
    session: &Session,
    out: &mut ReplyBuf,
    cmd: CmdRef,
    args: Args<'_>,
    hooks: u32,
) -> Option<&'static str> {
    if server.config.hot.maxmemory.load(Ordering::Relaxed) == 0 {
        return None;
    }
    // Clients go before keys, as in Redis's processCommand: memory their
    // buffers hold past `maxmemory-clients` is not the dataset's to pay.
    if server.config.hot.maxmemory_clients.load(Ordering::Relaxed) != 0 {
        crate::memory::client_evict::evict_clients(server);
    }
    let evict = || crate::memory::evict::perform_evictions(server);
    // Invalidations of the keys evicted reach this client ahead of its reply.
    let result = if hooks & crate::exec::notify::hook::TRACKING != 0 {
        crate::exec::tracking::with_early_delivery(session.id, out, evict)
    } else {
        evict()
    };
    if result != crate::memory::evict::EvictResult::Fail {
        return None;
    }
    let name = cmd.spec.name;
    let reject = has_flag_or_queued(server, session, cmd, args, flags::DENYOOM)
        // Queuing itself takes memory without bound.
        || (session.in_multi() && !matches!(name, "exec" | "discard" | "quit" | "reset"));
    reject.then_some("OOM command not allowed when used memory > 'maxmemory'.")
}

/// Redis's refusals for persistence reasons: writes (and PING) while the
/// last background save failed under `stop-writes-on-bgsave-error`, and
/// anything not flagged `loading` while the dataset loads.
fn persistence_rejection(
    server: &Server,
    session: &Session,
    cmd: CmdRef,
    args: Args<'_>,
) -> Option<std::borrow::Cow<'static, str>> {
    let spec = cmd.spec;
    if session.from_master {
        return None;
    }
    let writes = has_flag_or_queued(server, session, cmd, args, flags::WRITE);
    if writes || spec.name == "ping" {
        if let Some(msg) = disk_error(server) {
            return Some(msg.into());
        }
    }
    if writes && !session.replaying {
        if let Some(msg) = replicas_error(server) {
            return Some(msg.into());
        }
    }
    if server.repl.is_replica() {
        if let Some(msg) = replica_rejection(server, session, cmd, args, writes) {
            return Some(msg.into());
        }
    }
    loading_rejection(server, session, spec).map(Into::into)
}

/// LOADING for a command not flagged `loading` while the dataset loads
/// (the AOF's own replay runs then, of course), or flagged
/// `no-async-loading` while a replica loads its master's data aside.
fn loading_rejection(
    server: &Server,
    session: &Session,
    spec: &CommandSpec,
) -> Option<&'static str> {
    let refused = if server.rdb.async_loading.load(Ordering::Acquire) {
        spec.has(flags::NO_ASYNC_LOADING)
    } else {
        server.rdb.loading.load(Ordering::Acquire) && !spec.has(flags::LOADING)
    };
    (refused && !session.replaying).then_some("LOADING Redis is loading the dataset in memory")
}

/// What a replica refuses to its clients: writes when `replica-read-only`
/// (READONLY), and commands not flagged `stale` while the link to the
/// master is down and `replica-serve-stale-data` is off (MASTERDOWN). A
/// script command is `stale` when its script says `allow-stale` (its
/// flags as [`CommandSpec::flags_for`] gives them), EXEC when every
/// command it queued is.
fn replica_rejection(
    server: &Server,
    session: &Session,
    cmd: CmdRef,
    args: Args<'_>,
    writes: bool,
) -> Option<&'static str> {
    if writes && server.config.flag("replica-read-only") {
        return Some("READONLY You can't write against a read only replica.");
    }
    let worker = session.shared.worker;
    let stale_ok = |c: CmdRef, a: Args<'_>| c.spec.flags_for(server, worker, a) & flags::STALE != 0;
    let all_stale_ok = stale_ok(cmd, args)
        && !(cmd.spec.name == "exec"
            && session
                .multi
                .as_ref()
                .is_some_and(|m| m.queue.iter().any(|(c, a)| !stale_ok(*c, a.as_args()))));
    (!all_stale_ok && serving_stale_refused(server)).then_some(
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
    )
}

/// Whether this server is a replica whose link to its master is down
/// while `replica-serve-stale-data` is off: commands not flagged `stale`
/// are refused, from clients and from scripts.
pub fn serving_stale_refused(server: &Server) -> bool {
    server.repl.is_replica()
        && !server.repl.link().is_some_and(|l| l.is_connected())
        && !server.config.flag("replica-serve-stale-data")
}

/// NOREPLICAS while `min-replicas-to-write` asks a master for more good
/// replicas (online, acknowledged within `min-replicas-max-lag` seconds)
/// than it has.
pub fn replicas_error(server: &Server) -> Option<&'static str> {
    let hot = &server.config.hot;
    let wanted = hot.min_replicas_to_write.load(Ordering::Relaxed);
    let lag = hot.min_replicas_max_lag.load(Ordering::Relaxed);
    (wanted > 0
        && lag > 0
        && !server.repl.is_replica()
        && (server.repl.good_replicas(lag) as u64) < wanted)
        .then_some("NOREPLICAS Not enough good replicas to write.")
}

/// Why writes are refused for persistence reasons (Redis's
/// `writeCommandsDeniedByDiskError`).
pub enum DiskError {
    /// The last background save failed (`stop-writes-on-bgsave-error`).
    Rdb,
    /// Writing the AOF failed, with the error.
    Aof(String),
}

/// The persistence failure that refuses writes now, if any.
#[inline]
pub fn disk_error_kind(server: &Server) -> Option<DiskError> {
    // Nearly always neither a save nor an AOF write has failed: two atomic
    // loads, inline, where the full check cost ~85 instructions per write
    // (callgrind, pipelined SET).
    if server.rdb.last_bgsave_ok.load(Ordering::Relaxed) && !server.aof.has_write_error() {
        return None;
    }
    failed_persistence(server)
}

/// [`disk_error_kind`] once a save or an AOF write has failed.
#[cold]
fn failed_persistence(server: &Server) -> Option<DiskError> {
    if crate::persist::rdb::writes_denied(server) {
        return Some(DiskError::Rdb);
    }
    server
        .aof
        .write_error()
        .map(|e| DiskError::Aof(e.to_string()))
}

/// The MISCONF error a write gets now, if any.
#[inline]
pub fn disk_error(server: &Server) -> Option<String> {
    Some(match disk_error_kind(server)? {
        DiskError::Rdb => "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.".to_owned(),
        DiskError::Aof(error) => format!("MISCONF Errors writing to the AOF file: {error}"),
    })
}

/// CLIENT PAUSE WRITE holds back commands that may write; PAUSE ALL holds
/// back everything but the commands that lift or inspect the pause.
fn is_paused_for(server: &Server, session: &Session, cmd: CmdRef, args: Args<'_>) -> bool {
    let mode = server.pause.active();
    if mode == 0 {
        return false;
    }
    let spec = cmd.spec;
    if matches!(spec.name, "client|unpause" | "client|pause") {
        return false;
    }
    if mode == 2 {
        return true;
    }
    has_flag_or_queued(
        server,
        session,
        cmd,
        args,
        flags::WRITE | flags::MAY_REPLICATE,
    )
}

/// Whether `cmd` has any of the `flags` bits or, for EXEC, any command
/// queued in the transaction does (Redis judges an EXEC by its contents
/// for OOM, MISCONF and CLIENT PAUSE WRITE). Scripts' flags depend on the
/// script (`CommandSpec::flags_for`).
fn has_flag_or_queued(
    server: &Server,
    session: &Session,
    cmd: CmdRef,
    args: Args<'_>,
    flags: u32,
) -> bool {
    let worker = session.shared.worker;
    cmd.spec.flags_for(server, worker, args) & flags != 0
        || (cmd.spec.name == "exec"
            && session.multi.as_ref().is_some_and(|m| {
                m.queue
                    .iter()
                    .any(|(c, a)| c.spec.flags_for(server, worker, a.as_args()) & flags != 0)
            }))
}

/// Locks what the command needs, in ascending shard order; `None` when a
/// script holding a shard it waits for goes past its busy threshold (the
/// command is then refused with `-BUSY`, and the worker goes on serving
/// its other clients instead of waiting for the script's end).
fn lock_for<'a>(
    server: &'a Server,
    session: &Session,
    cmd: CmdRef,
    args: Args<'_>,
) -> Option<Keys<'a>> {
    let ks = &server.keyspace;
    let busy = || busy_rejection(server, session, cmd.spec).is_some();
    Some(match cmd.spec.keys {
        KeySpec::None => ks.lock_shards([]),
        KeySpec::All => return ks.lock_all_unless(busy),
        KeySpec::Dynamic => ks.lock_dynamic(),
        KeySpec::Range { first, last, step } => {
            let shards = key_range(args.len(), first, last, step).map(|i| ks.shard_of(args.get(i)));
            return ks.lock_shards_unless(shards, busy);
        }
        KeySpec::Custom { find, .. } => {
            let shards = find(args).into_iter().map(|i| ks.shard_of(args.get(i)));
            return ks.lock_shards_unless(shards, busy);
        }
        KeySpec::Queued => {
            let mut shards: Vec<usize> = session
                .watched
                .iter()
                .map(|(_, k)| ks.shard_of(k))
                .collect();
            let queue = session
                .multi
                .as_ref()
                .map(|m| m.queue.as_slice())
                .unwrap_or_default();
            for (c, a) in queue {
                if c.spec.has(flags::SCRIPT) {
                    // A script may reach undeclared keys, and a transaction
                    // cannot start over: it holds everything.
                    return ks.lock_all_unless(busy);
                }
                match c.spec.keys {
                    KeySpec::All | KeySpec::Dynamic | KeySpec::Queued => {
                        return ks.lock_all_unless(busy)
                    }
                    KeySpec::None => {}
                    KeySpec::Range { .. } | KeySpec::Custom { .. } => {
                        let a = a.as_args();
                        shards.extend(
                            c.spec
                                .key_indices(a)
                                .into_iter()
                                .map(|i| ks.shard_of(a.get(i))),
                        );
                    }
                }
            }
            return ks.lock_shards_unless(shards, busy);
        }
    })
}

/// The `-BUSY` refusal while a script runs past `busy-reply-threshold`:
/// every command but the `allow-busy` ones, and on the script's own
/// thread even those when they lock shards (the script holds its shards).
fn busy_rejection(server: &Server, session: &Session, spec: &CommandSpec) -> Option<&'static str> {
    let allowed = spec.has(flags::ALLOW_BUSY)
        && (matches!(spec.keys, KeySpec::None) || !crate::net::worker::serving_while_busy());
    if allowed {
        return None;
    }
    let msg = server.scripts.busy_error()?;
    // A script from the AOF being loaded: Redis checks LOADING first.
    Some(loading_rejection(server, session, spec).unwrap_or(msg))
}

/// Runs one command with its locks held, and does the bookkeeping Redis's
/// `call()` does. EXEC calls this for each queued command.
pub fn call(ctx: &mut Ctx<'_>, cmd: CmdRef, args: Args<'_>) {
    let spec = cmd.spec;
    let server = ctx.server;
    ctx.session.shared.set_last_cmd(spec);
    // `mark` rolls the reply back (logical position, see ReplyBuf::mark);
    // `reply_at` is where it starts among the pending bytes.
    let mark = ctx.out.mark();
    let reply_at = ctx.out.len();
    let start = command_start_us();
    let dirty_before = ctx.dirty;
    // (Almost always None already: assigning would drop it through a call.)
    if ctx.effects.is_some() {
        ctx.effects = None;
    }
    let result = catch_unwind(AssertUnwindSafe(|| (spec.handler)(ctx, args)));
    let elapsed_us = command_end_us().saturating_sub(start);
    signal_expired(ctx);
    let hooks = ctx.hooks;
    if hooks != 0 {
        crate::exec::notify::flush_pending(ctx);
        let tracking = hooks & crate::exec::notify::hook::TRACKING != 0;
        // Scripts track differently (Redis's call()): a read inside one
        // remembers the script's declared keys (ScriptHost::execute), and
        // EVAL_RO / FCALL_RO themselves remember nothing.
        if tracking
            && spec.has(flags::READONLY)
            && !spec.has(flags::PUBSUB | flags::SCRIPT)
            && !ctx.session.in_script
        {
            let keys = spec
                .reported_keys(args)
                .into_iter()
                .map(|i| args.get(i).into());
            crate::exec::tracking::remember_keys(server, ctx.session, keys);
        }
    }
    // A replayed AOF (DEBUG LOADAOF) is not logged again.
    if server.aof.is_collecting() && !ctx.session.replaying {
        collect_effects(ctx, cmd, args, dirty_before);
        ctx.expired_announced = 0;
    }
    if result.is_err() {
        tracing::error!(
            command = spec.name,
            "command handler panicked; replied with an error"
        );
        ctx.out.truncate(mark);
        ctx.out
            .error("ERR internal error while executing the command");
        // A command that failed does not stay blocked.
        crate::exec::blocking::abandon(server, ctx.session);
    }
    // A command that blocked gets its latency and slow log entry when it
    // completes ([`finish_blocked`]).
    let blocked = ctx.session.blocked.as_mut().map(|b| {
        b.cmd = Some(cmd);
        b.exec_us = elapsed_us;
    });
    let wstats = &server.worker_stats[ctx.session.shared.worker];
    bump(&wstats.commands, 1);
    let st = &wstats.per_command[cmd.id];
    bump(&st.calls, 1);
    bump(&st.usec, elapsed_us);
    if blocked.is_none() && server.config.hot.latency_tracking.load(Ordering::Relaxed) {
        bump(&st.latency[hist_bucket(elapsed_us)], 1);
    }
    let event = if spec.has(flags::FAST) {
        "fast-command"
    } else {
        "command"
    };
    crate::ops::metrics::sample_latency(server, event, elapsed_us / 1000);
    if ctx.out.as_bytes().get(reply_at) == Some(&b'-') {
        bump(&st.failed, 1);
        // A script failing with the error of a command it ran: that error
        // was counted already (Redis's ignore_error_stats_update).
        if !std::mem::take(&mut ctx.session.error_counted) {
            server.count_error(&ctx.out.as_bytes()[reply_at..]);
        }
    }
    // Redis stops buffering replies for a client past its output buffer
    // limit (it is closed ASAP): dropping this reply keeps a pipeline or an
    // EXEC of big replies from growing memory past the limit.
    if crate::net::conn::output_limit_reached(server, ctx.session, ctx.out.len()) {
        ctx.out.truncate(mark);
    }
    ctx.session.shared.db.store(ctx.db, Ordering::Relaxed);
    if blocked.is_none() && !spec.has(flags::SKIP_SLOWLOG) {
        slowlog_maybe_push(server, ctx.session, args, elapsed_us);
    }
    if server.monitor_count.load(Ordering::Relaxed) > 0
        && !spec.has(flags::SKIP_MONITOR)
        && !spec.has(flags::ADMIN)
    {
        crate::exec::monitor::feed_monitors(server, ctx.session, ctx.db, args);
    }
}

/// Keys the command found expired (and deleted) become ready for the
/// clients waiting on them: a stream gone with its groups releases its
/// group readers, as Redis's delete path signals it.
fn signal_expired(ctx: &mut Ctx<'_>) {
    if ctx.server.blocking.is_empty() || ctx.keys.expired().is_empty() {
        return;
    }
    for (db, key) in ctx.keys.expired().to_vec() {
        crate::exec::blocking::mark_ready(ctx.server, &mut ctx.ready, db, &key);
    }
}

/// Adds what the command just run changed to the execution unit's
/// effects, as Redis's `call()` decides what to propagate: first the
/// deletions of keys found expired, then the command's own rewritten form,
/// or the command as executed when it changed the dataset (EXEC's queued
/// commands are collected one by one, never EXEC itself).
fn collect_effects(ctx: &mut Ctx<'_>, cmd: CmdRef, args: Args<'_>, dirty_before: u64) {
    let expired = ctx.keys.take_expired();
    if !expired.is_empty() {
        // Run directly (not from EXEC or a script, which set deny_blocking),
        // such a command's expirations are not one transaction.
        if cmd.spec.has(flags::TOUCHES_ARBITRARY_KEYS)
            && !ctx.deny_blocking
            && ctx.session.aof_unit.is_empty()
        {
            ctx.session.aof_unit.unwrapped();
        }
        let name: &[u8] = if ctx.server.config.lazyfree_lazy_expire() {
            b"UNLINK"
        } else {
            b"DEL"
        };
        for (db, key) in expired {
            ctx.session.aof_unit.push_command(db, &[name, &key]);
        }
    }
    match ctx.effects.take() {
        Some(ops) => {
            for (db, bytes) in ops {
                ctx.session.aof_unit.push_encoded(db, &bytes);
            }
        }
        None if ctx.dirty > dirty_before && cmd.spec.name != "exec" => {
            // The database the command ran in (SELECT inside MULTI changes
            // ctx.db only for the commands after it).
            ctx.session.aof_unit.push_args(ctx.db, args);
        }
        None => {}
    }
}

/// Completes a command that waited for keys once its reply is known
/// (served, timed out, or CLIENT UNBLOCK): the reply goes out unless CLIENT
/// REPLY says otherwise, and the statistics Redis records at unblocking
/// (errors, latency, slow log) are. `failed` counts it as failed even
/// without an error reply.
pub fn finish_blocked(
    server: &Server,
    session: &mut Session,
    out: &mut ReplyBuf,
    blocked: crate::exec::blocking::Blocked,
    reply: &[u8],
    failed: bool,
) {
    if let Some(cmd) = blocked.cmd {
        let st = stats_of(server, session, cmd);
        let is_error = reply.first() == Some(&b'-');
        if is_error {
            server.count_error(reply);
        }
        if is_error || failed {
            bump(&st.failed, 1);
        }
        if server.config.hot.latency_tracking.load(Ordering::Relaxed) {
            bump(&st.latency[hist_bucket(blocked.exec_us)], 1);
        }
        if !cmd.spec.has(flags::SKIP_SLOWLOG) {
            slowlog_maybe_push(server, session, blocked.args.as_args(), blocked.exec_us);
        }
    }
    match session.reply_mode {
        ReplyMode::Off => {}
        ReplyMode::Skipping => session.reply_mode = ReplyMode::On,
        ReplyMode::On | ReplyMode::SkipNext => out.raw(reply),
    }
}

/// Longest argument list a slow log entry keeps, and longest argument.
const SLOWLOG_MAX_ARGS: usize = 32;
const SLOWLOG_MAX_ARG_LEN: usize = 128;

fn slowlog_maybe_push(server: &Server, session: &Session, args: Args<'_>, us: u64) {
    let threshold = server
        .config
        .hot
        .slowlog_log_slower_than
        .load(Ordering::Relaxed);
    if threshold < 0 || us < threshold as u64 {
        return;
    }
    let mut kept = Vec::new();
    let argc = args.len();
    let hidden = crate::exec::redact::redacted_positions(args);
    for (i, a) in args.iter().enumerate() {
        let a = if hidden.contains(&i) {
            crate::exec::redact::REDACTED
        } else {
            a
        };
        if i == SLOWLOG_MAX_ARGS - 1 && argc > SLOWLOG_MAX_ARGS {
            kept.push(format!("... ({} more arguments)", argc - SLOWLOG_MAX_ARGS + 1).into_bytes());
            break;
        }
        if a.len() > SLOWLOG_MAX_ARG_LEN {
            let mut v = a[..SLOWLOG_MAX_ARG_LEN].to_vec();
            v.extend_from_slice(
                format!("... ({} more bytes)", a.len() - SLOWLOG_MAX_ARG_LEN).as_bytes(),
            );
            kept.push(v);
        } else {
            kept.push(a.to_vec());
        }
    }
    let entry = SlowlogEntry {
        id: server.slowlog.next_id.fetch_add(1, Ordering::Relaxed),
        time_s: now_us() / 1_000_000,
        duration_us: us,
        args: kept,
        addr: session.shared.addr.clone(),
        name: session.shared.name_string(),
    };
    let max = server.config.hot.slowlog_max_len.load(Ordering::Relaxed) as usize;
    let mut log = server.slowlog.entries.lock();
    log.push_front(entry);
    while log.len() > max {
        log.pop_back();
    }
}

/// Cleans up after a client disconnects: WATCH registrations, MONITOR, a
/// wait for keys, subscriptions.
pub fn on_disconnect(server: &Server, session: &mut Session) {
    crate::exec::pubsub::forget_client(server, session);
    crate::exec::tracking::disable(server, session);
    crate::exec::blocking::abandon(server, session);
    crate::exec::multi::unwatch_all(server, session);
    crate::exec::monitor::stop_monitor(server, session);
}
