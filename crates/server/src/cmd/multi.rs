//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH (Redis's multi.c).
//!
//! EXEC is locked with [`KeySpec::Queued`]: every shard a queued command or a
//! WATCHed key lives in is held for the whole transaction, so it is atomic
//! and isolated from other threads without a global lock.

use std::sync::atomic::Ordering;

use vireo_resp::Args;
use vireo_store::Keys;

use super::{flags::*, spec, CommandSpec, Ctx, KeySpec, ALL_ARGS_KEYS};
use crate::exec::dispatch;
use crate::exec::multi::{leave_multi, unwatch_in};
use crate::net::client::cflags;
use crate::net::session::{MultiState, Session};

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec(
        "multi",
        1,
        NOSCRIPT | LOADING | STALE | FAST | NO_MULTI | ALLOW_BUSY,
        KeySpec::None,
        multi,
    ),
    spec(
        "exec",
        1,
        NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG,
        KeySpec::Queued,
        exec,
    ),
    spec(
        "discard",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        KeySpec::Queued,
        discard,
    ),
    spec(
        "watch",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        ALL_ARGS_KEYS,
        watch,
    ),
    spec(
        "unwatch",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        KeySpec::Queued,
        unwatch,
    ),
];

/// MULTI: starts queuing commands.
fn multi(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    if ctx.session.in_multi() {
        ctx.out.error("ERR MULTI calls can not be nested");
        return;
    }
    ctx.session.multi = Some(MultiState::default());
    ctx.session.shared.set_flag(cflags::MULTI, true);
    ctx.session.shared.multi_len.store(0, Ordering::Relaxed);
    ctx.out.ok();
}

/// EXEC: runs the queued commands atomically, or aborts: EXECABORT after a
/// queuing error, a null reply when a WATCHed key changed or expired.
fn exec(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let Some(queued) = leave_multi(ctx.session) else {
        ctx.out.error("ERR EXEC without MULTI");
        return;
    };
    if queued.aborted {
        unwatch_in(&mut ctx.keys, ctx.session);
        ctx.out
            .error("EXECABORT Transaction discarded because of previous errors.");
        return;
    }
    if watched_key_changed(&mut ctx.keys, ctx.session) {
        unwatch_in(&mut ctx.keys, ctx.session);
        ctx.out.null_array();
        return;
    }
    unwatch_in(&mut ctx.keys, ctx.session);
    // Blocking commands run inside the transaction reply at once.
    ctx.deny_blocking = true;
    ctx.in_exec = true;
    ctx.out.array(queued.queue.len());
    // The view's clock stays at EXEC's start for every queued command, as
    // in Redis 7.0 (`fixed_time_expire`): a key the transaction sets to
    // expire during it is still there for the commands after.
    for (cmd, args) in &queued.queue {
        // The rules may have changed since the command was queued.
        let denied =
            crate::security::queued_command_denied(ctx.server, ctx.session, *cmd, args.as_args());
        if let Some(msg) = denied {
            ctx.server.count_error(msg.as_bytes());
            ctx.out.error(&msg);
            continue;
        }
        // A queued CONFIG SET or CLIENT TRACKING changes the next ones' hooks.
        ctx.hooks = crate::exec::notify::hooks(ctx.server);
        dispatch::call(ctx, *cmd, args.as_args());
    }
}

/// True when a WATCHed key was touched, or expired since WATCH (a key
/// already expired at WATCH time does not count, as in Redis 7.0).
fn watched_key_changed(keys: &mut Keys<'_>, session: &Session) -> bool {
    if session.watch_dirty.load(Ordering::Acquire) {
        return true;
    }
    session
        .watched
        .iter()
        .any(|(db, key)| keys.expired_since_watched(*db, key, &session.watch_dirty))
}

/// DISCARD: drops the queued commands and the WATCHes.
fn discard(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    if leave_multi(ctx.session).is_none() {
        ctx.out.error("ERR DISCARD without MULTI");
        return;
    }
    unwatch_in(&mut ctx.keys, ctx.session);
    ctx.out.ok();
}

/// WATCH: EXEC will abort if any of these keys changes before it runs.
fn watch(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if ctx.session.in_multi() {
        ctx.out.error("ERR WATCH inside MULTI is not allowed");
        return;
    }
    for key in args.iter().skip(1) {
        let db = ctx.db;
        if ctx
            .session
            .watched
            .iter()
            .any(|(d, k)| *d == db && &k[..] == key)
        {
            continue;
        }
        ctx.keys.watch(db, key, &ctx.session.watch_dirty);
        ctx.session.watched.push((db, key.into()));
    }
    ctx.session
        .shared
        .watch_count
        .store(ctx.session.watched.len(), Ordering::Relaxed);
    ctx.out.ok();
}

/// UNWATCH: forgets every WATCHed key.
fn unwatch(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    unwatch_in(&mut ctx.keys, ctx.session);
    ctx.out.ok();
}
