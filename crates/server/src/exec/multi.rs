//! A session's transaction state outside the commands that change it:
//! leaving MULTI and dropping WATCH registrations, which EXEC, DISCARD and
//! RESET do as commands and the dispatcher, the AOF loader and disconnects
//! do on their own (Redis's multi.c keeps these beside the commands; here
//! they sit below the command families so that nothing imports a family).

use std::sync::atomic::Ordering;

use vireo_store::Keys;

use crate::net::client::cflags;
use crate::net::session::{MultiState, Session};
use crate::server::Server;

/// Ends the transaction state without running it; returns what was queued.
pub fn leave_multi(session: &mut Session) -> Option<MultiState> {
    session.shared.set_flag(cflags::MULTI, false);
    session.shared.multi_mem.store(0, Ordering::Relaxed);
    session.multi.take()
}

/// Drops the session's WATCH registrations through an already locked view.
pub fn unwatch_in(keys: &mut Keys<'_>, session: &mut Session) {
    for (db, key) in session.watched.drain(..) {
        keys.unwatch(db, &key, &session.watch_dirty);
    }
    session.watch_dirty.store(false, Ordering::Release);
    session.shared.watch_count.store(0, Ordering::Relaxed);
}

/// Drops the session's WATCH registrations, locking what they need (for
/// disconnects, outside any command).
pub fn unwatch_all(server: &Server, session: &mut Session) {
    if session.watched.is_empty() {
        return;
    }
    let ks = &server.keyspace;
    let mut keys = ks.lock_shards(session.watched.iter().map(|(_, k)| ks.shard_of(k)));
    unwatch_in(&mut keys, session);
}

/// Drops an open transaction and its WATCHes outside any command (EXEC
/// refused before it runs).
pub fn discard_transaction(server: &Server, session: &mut Session) {
    leave_multi(session);
    unwatch_all(server, session);
}

/// Discards an open transaction and its WATCHes (RESET).
pub fn reset(keys: &mut Keys<'_>, session: &mut Session) {
    leave_multi(session);
    unwatch_in(keys, session);
}
