//! Per-connection state that commands read and change (the part of Redis's
//! `client` struct that is not I/O).

use std::sync::Arc;

use vireo_resp::OwnedArgs;
use vireo_store::keyspace::WatchFlag;
use vireo_store::Key;

use crate::cmd::CmdRef;
use crate::net::client::ClientShared;

/// CLIENT REPLY mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    /// Replies are sent.
    On,
    /// Replies are dropped until CLIENT REPLY ON.
    Off,
    /// The next command's reply is dropped.
    SkipNext,
    /// This command's reply is dropped (SKIP took effect).
    Skipping,
}

/// A transaction being queued between MULTI and EXEC.
#[derive(Default)]
pub struct MultiState {
    /// Queued commands with owned copies of their arguments.
    pub queue: Vec<(CmdRef, OwnedArgs)>,
    /// A command failed to queue: EXEC must answer EXECABORT.
    pub aborted: bool,
    /// Bytes the queued arguments hold (argument bytes plus their ranges),
    /// for client memory accounting.
    pub args_mem: usize,
}

/// State of one client connection.
pub struct Session {
    /// Client id (CLIENT ID), also the key of the client registry.
    pub id: u64,
    /// Selected database.
    pub db: usize,
    /// False until AUTH succeeds when `requirepass` is set.
    pub authenticated: bool,
    /// The open transaction, if any.
    pub multi: Option<MultiState>,
    /// Keys WATCHed by this client, as (db, key).
    pub watched: Vec<(usize, Key)>,
    /// Set by the keyspace when a watched key changes.
    pub watch_dirty: WatchFlag,
    /// CLIENT REPLY state.
    pub reply_mode: ReplyMode,
    /// Close the connection once pending replies are written (QUIT, errors).
    pub close_after_reply: bool,
    /// CLIENT NO-EVICT.
    pub no_evict: bool,
    /// CLIENT NO-TOUCH.
    pub no_touch: bool,
    /// This connection is a MONITOR.
    pub monitor: bool,
    /// The command waiting for keys (BLPOP …); input is not executed
    /// meanwhile.
    pub blocked: Option<crate::exec::blocking::Blocked>,
    /// The Unix second the output buffer went over the soft
    /// `client-output-buffer-limit` (None while under it).
    pub obuf_soft_since: Option<u64>,
    /// What other threads may read or ask of this client.
    pub shared: Arc<ClientShared>,
    /// AOF offset that must be durable before this client's pending
    /// replies are sent (`appendfsync always`; 0: none).
    pub aof_wait: u64,
    /// The running execution unit's effects for the AOF (a command, or a
    /// transaction's commands), handed over by dispatch under the unit's
    /// locks; its buffer is reused from one command to the next.
    pub aof_unit: crate::persist::aof::Unit,
    /// The fake client replaying the AOF at start-up: not subject to
    /// `maxmemory` or CLIENT PAUSE, and never blocks.
    pub replaying: bool,
    /// The master client of a replica: its commands are applied without
    /// replies, and are exempt from the refusals meant for clients
    /// (READONLY, MASTERDOWN, OOM, MISCONF, CLIENT PAUSE); never blocks.
    pub from_master: bool,
    /// Pub/Sub subscriptions.
    pub subs: crate::exec::pubsub::ClientSubs,
    /// Pushes written while CLIENT REPLY drops replies, put back after the
    /// command (see [`crate::exec::pubsub::Local::push`]).
    pub held_pushes: Vec<u8>,
    /// CLIENT TRACKING state.
    pub tracking: crate::exec::tracking::ClientTracking,
    /// A script is running commands for this client (MONITOR shows them
    /// as `[db lua]`).
    pub in_script: bool,
    /// The error reply of the running command was counted already (a
    /// script failing with a command's error).
    pub error_counted: bool,
    /// What REPLCONF said, and whether SYNC/PSYNC asked for a hand-over.
    pub repl: crate::repl::master::ClientRepl,
    /// The ACL user (None: the default user), kept in step with
    /// `shared.user`.
    pub user: Option<Arc<crate::security::users::UserHandle>>,
    /// The ACL check's copy of the user's rules (refreshed when they change).
    pub acl_view: crate::security::users::RulesView,
    /// SCRIPT DEBUG YES/SYNC: this client's next EVAL runs under the Lua
    /// debugger.
    pub script_debug: Option<crate::exec::script_debug::DebugMode>,
    /// The connection is TLS (the Lua debugger talks to plain sockets only).
    pub tls: bool,
}

impl Session {
    /// A fresh session; `authenticated` is true when no password is set.
    pub fn new(shared: Arc<ClientShared>, authenticated: bool) -> Self {
        Session {
            id: shared.id,
            db: 0,
            authenticated,
            multi: None,
            watched: Vec::new(),
            watch_dirty: WatchFlag::default(),
            reply_mode: ReplyMode::On,
            close_after_reply: false,
            no_evict: false,
            no_touch: false,
            monitor: false,
            blocked: None,
            obuf_soft_since: None,
            shared,
            aof_wait: 0,
            aof_unit: crate::persist::aof::Unit::default(),
            replaying: false,
            from_master: false,
            subs: Default::default(),
            held_pushes: Vec::new(),
            tracking: Default::default(),
            in_script: false,
            error_counted: false,
            repl: Default::default(),
            user: None,
            acl_view: Default::default(),
            script_debug: None,
            tls: false,
        }
    }

    /// True inside MULTI.
    pub fn in_multi(&self) -> bool {
        self.multi.is_some()
    }

    /// Bytes the transaction being queued and the WATCH list hold, the
    /// per-client state Redis's `multiStateMemOverhead` counts.
    pub fn multi_memory(&self) -> usize {
        let queued = self.multi.as_ref().map_or(0, |m| {
            m.args_mem + m.queue.capacity() * std::mem::size_of::<(CmdRef, OwnedArgs)>()
        });
        let watched = self.watched.capacity() * std::mem::size_of::<(usize, Key)>();
        queued + watched
    }
}
