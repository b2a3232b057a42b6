//! The command table and what every command handler shares.
//!
//! One file per command family, as Redis has one `t_*.c` per type. Each
//! family exports a `COMMANDS` slice of [`CommandSpec`]; [`table`] merges
//! them into the single table that names, arities, flags and key positions
//! come from (dispatch, locking, COMMAND and MULTI all read it).

pub mod acl;
pub mod aof;
pub mod bitops;
pub mod blocking;
pub mod client;
pub mod cluster;
pub mod command;
pub mod config;
pub mod connection;
pub mod debug;
pub mod docs;
pub mod dump;
pub mod expire;
pub mod function;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod info;
pub mod keys;
pub mod list;
pub mod lolwut;
pub mod module;
pub mod multi;
pub mod pubsub;
pub mod replication;
pub mod script;
pub mod server;
pub mod set;
pub mod shared;
pub mod sort;
pub mod sql;
pub mod stream;
pub mod string;
pub mod zset;

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::OnceLock;

use vireo_resp::number::parse_i64;
use vireo_resp::{Args, ReplyBuf};
use vireo_store::Keys;

use crate::exec::notify::hook;
use crate::net::session::Session;
use crate::server::Server;

/// A command implementation. It reads its arguments (already checked for
/// arity), works on the locked keyspace view in `ctx.keys`, and writes
/// exactly one reply to `ctx.out`.
pub type Handler = fn(&mut Ctx<'_>, Args<'_>);

/// Which keys a command touches, which decides what it locks.
#[derive(Clone, Copy)]
pub enum KeySpec {
    /// No keys: nothing is locked.
    None,
    /// Keys at argument positions `first`, `first + step`, … up to `last`
    /// (negative `last` counts from the end, -1 being the last argument),
    /// Redis's legacy (first, last, step) triple.
    Range { first: i32, last: i32, step: i32 },
    /// Keys found by a function over the arguments (returns their indices),
    /// for commands like ZUNIONSTORE whose key count is an argument. The
    /// triple is what COMMAND reports.
    Custom {
        first: i32,
        last: i32,
        step: i32,
        find: fn(Args<'_>) -> Vec<usize>,
    },
    /// Needs a frozen view of the whole keyspace (KEYS, FLUSHALL, SWAPDB):
    /// every shard is locked.
    All,
    /// Walks the keyspace one shard at a time (SCAN, DBSIZE); inside a
    /// transaction it is treated as [`KeySpec::All`].
    Dynamic,
    /// EXEC: the keys of the queued commands plus the WATCHed keys.
    Queued,
}

/// Command flags, with the names COMMAND INFO prints.
pub mod flags {
    pub const WRITE: u32 = 1;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    pub const FAST: u32 = 1 << 11;
    pub const NO_AUTH: u32 = 1 << 12;
    pub const MAY_REPLICATE: u32 = 1 << 13;
    pub const NO_MULTI: u32 = 1 << 14;
    pub const ALLOW_BUSY: u32 = 1 << 15;
    pub const SENTINEL: u32 = 1 << 16;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 17;
    pub const NO_ASYNC_LOADING: u32 = 1 << 18;
    /// Refused unless `enable-debug-command` (DEBUG) allows the client.
    pub const PROTECTED: u32 = 1 << 19;
    /// Not a Redis flag (COMMAND INFO does not show it): the command runs
    /// a script, whose keys a transaction cannot know in advance.
    pub const SCRIPT: u32 = 1 << 20;
    /// Redis's hidden `CMD_TOUCHES_ARBITRARY_KEYS` (SCAN, RANDOMKEY): the
    /// command may lazily expire keys it did not name, and those deletions
    /// propagate one by one, never wrapped in MULTI/EXEC.
    pub const TOUCHES_ARBITRARY_KEYS: u32 = 1 << 21;
    /// Redis's `asking` flag (RESTORE-ASKING): in a cluster the command
    /// may reach a slot being imported. Shown by COMMAND INFO only.
    pub const ASKING: u32 = 1 << 22;

    /// Flag bits with their COMMAND INFO names, in Redis's order.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (ASKING, "asking"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (MAY_REPLICATE, "may_replicate"),
        (SENTINEL, "sentinel"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (PROTECTED, "protected"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// One entry of the command table.
pub struct CommandSpec {
    /// Lower-case name; subcommands are written `parent|sub` as Redis does.
    pub name: &'static str,
    /// Redis arity: N means exactly N arguments including the name, -N at
    /// least N.
    pub arity: i32,
    /// Bits from [`flags`].
    pub flags: u32,
    /// The keys it touches.
    pub keys: KeySpec,
    /// The implementation (unused for containers with subcommands).
    pub handler: Handler,
    /// Subcommands (CONFIG GET, CLIENT LIST, …); empty for plain commands.
    pub subcommands: &'static [CommandSpec],
    /// Where the arguments naming members of the key's hash, set or sorted
    /// set are (HSET's fields, SADD's and ZADD's members), as (first, step)
    /// to the last argument: the worker's look-ahead prefetches where they
    /// live in a big collection. `None` for every other command.
    pub members: Option<(u8, u8)>,
    /// The keys COMMAND GETKEYS reports when [`CommandSpec::keys`] cannot
    /// list them before the command runs (SORT locks every shard, since
    /// its BY and GET keys are only known while it runs, yet reports its
    /// sorted key and STORE destination like Redis's `sortGetKeys`).
    pub getkeys: Option<fn(Args<'_>) -> Vec<usize>>,
    /// The flags this invocation runs with, when they depend on the
    /// arguments (a script's flags replace EVAL's, Redis's
    /// `getCommandFlags`): given the server, the caller's worker, the
    /// arguments and [`CommandSpec::flags`].
    pub flags_fn: Option<FlagsFn>,
}

/// See [`CommandSpec::flags_fn`].
pub type FlagsFn = fn(&Server, usize, Args<'_>, u32) -> u32;

impl CommandSpec {
    /// True if `n` arguments (including the name) satisfy the arity.
    pub fn arity_ok(&self, n: usize) -> bool {
        let n = n as i64;
        let a = self.arity as i64;
        (a >= 0 && n == a) || (a < 0 && n >= -a)
    }

    /// True if the flag bit is set.
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// The same command with member arguments at `first`, `first + step`,
    /// … (see [`CommandSpec::members`]).
    pub const fn with_members(mut self, first: u8, step: u8) -> Self {
        self.members = Some((first, step));
        self
    }

    /// The same command with COMMAND GETKEYS answered by `find` (see
    /// [`CommandSpec::getkeys`]).
    pub const fn with_getkeys(mut self, find: fn(Args<'_>) -> Vec<usize>) -> Self {
        self.getkeys = Some(find);
        self
    }

    /// The same command with its flags computed per call by `f` (see
    /// [`CommandSpec::flags_fn`]).
    pub const fn with_flags_fn(mut self, f: FlagsFn) -> Self {
        self.flags_fn = Some(f);
        self
    }

    /// The flags this invocation runs with.
    pub fn flags_for(&self, server: &Server, worker: usize, args: Args<'_>) -> u32 {
        match self.flags_fn {
            Some(f) => f(server, worker, args, self.flags),
            None => self.flags,
        }
    }

    /// The keys COMMAND GETKEYS reports for `args`.
    pub fn reported_keys(&self, args: Args<'_>) -> Vec<usize> {
        match self.getkeys {
            Some(find) => find(args),
            None => self.key_indices(args),
        }
    }

    /// The subcommand's own name (after `|`).
    pub fn short_name(&self) -> &'static str {
        self.name.rsplit('|').next().unwrap_or(self.name)
    }

    /// Argument indices of the keys in `args`, per [`KeySpec`].
    pub fn key_indices(&self, args: Args<'_>) -> Vec<usize> {
        match self.keys {
            KeySpec::Range { first, last, step } => range_keys(args.len(), first, last, step),
            KeySpec::Custom { find, .. } => find(args),
            KeySpec::None | KeySpec::All | KeySpec::Dynamic | KeySpec::Queued => Vec::new(),
        }
    }
}

/// Expands a (first, last, step) triple over `argc` arguments.
fn range_keys(argc: usize, first: i32, last: i32, step: i32) -> Vec<usize> {
    key_range(argc, first, last, step).collect()
}

/// The argument indices a (first, last, step) triple names over `argc`
/// arguments, without allocating (the dispatcher locks from it directly).
pub fn key_range(
    argc: usize,
    first: i32,
    last: i32,
    step: i32,
) -> impl Iterator<Item = usize> + Clone {
    let valid = first > 0 && step > 0;
    let last = if last < 0 {
        argc as i64 + last as i64
    } else {
        last as i64
    };
    // An invalid triple names no keys: `1..=0` is empty.
    let (first, last) = if valid {
        (first as i64, last.min(argc as i64 - 1))
    } else {
        (1, 0)
    };
    (first..=last)
        .step_by(step.max(1) as usize)
        .map(|i| i as usize)
}

/// Shorthand for a table entry; most fields are positional in the families.
pub const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys,
        handler,
        subcommands: &[],
        members: None,
        getkeys: None,
        flags_fn: None,
    }
}

/// A container command (CONFIG, CLIENT, …) dispatching on its first argument.
pub const fn container(
    name: &'static str,
    arity: i32,
    flags: u32,
    subcommands: &'static [CommandSpec],
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys: KeySpec::None,
        handler: no_handler,
        subcommands,
        members: None,
        getkeys: None,
        flags_fn: None,
    }
}

/// Key triple for the common "one key at argument 1" case.
pub const KEY1: KeySpec = KeySpec::Range {
    first: 1,
    last: 1,
    step: 1,
};

/// Key triple for "every argument from 1 is a key".
pub const ALL_ARGS_KEYS: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 1,
};

fn no_handler(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    ctx.out
        .error("ERR internal error: container command without subcommand");
}

/// A command found in the table: its spec and its dense index (for
/// per-command statistics).
#[derive(Clone, Copy)]
pub struct CmdRef {
    pub spec: &'static CommandSpec,
    pub id: usize,
}

/// A command looked up recently: its table's address, and the name's
/// bytes exactly as the client sent them ([`packed_name`]).
type Recent = Option<(usize, (usize, u128), CmdRef)>;

thread_local! {
    /// The two names this thread looked up last, most recent first:
    /// pipelines and benchmarks repeat a command or two. Two, because the
    /// worker's look-ahead looks a batch's commands up before they run, so
    /// a GET/SET mix alternates even where the batch does not. The bytes
    /// are compared exactly (clients send a command's name the same way
    /// each time), as one word: comparing case-insensitively with the
    /// table's names cost 79 instructions a lookup (callgrind, pipelined
    /// GET), a table lookup about 250.
    static RECENT_LOOKUPS: Cell<[Recent; 2]> = const { Cell::new([None, None]) };
}

/// A name of up to 16 bytes (every command's but a few subcommands') as
/// its length and one value that tells apart any two names of that length;
/// `None` for longer names. Two overlapping reads cover the name, without
/// copying it.
#[inline]
fn packed_name(name: &[u8]) -> Option<(usize, u128)> {
    let n = name.len();
    let word = |at: usize| u128::from(u32::from_le_bytes(name[at..at + 4].try_into().unwrap()));
    let long = |at: usize| u128::from(u64::from_le_bytes(name[at..at + 8].try_into().unwrap()));
    let packed = match n {
        0 => 0,
        1..=3 => u128::from(name[0]) | u128::from(name[n / 2]) << 8 | u128::from(name[n - 1]) << 16,
        4..=8 => word(0) | word(n - 4) << 32,
        9..=16 => long(0) | long(n - 8) << 64,
        _ => return None,
    };
    Some((n, packed))
}

/// The merged command table.
pub struct Table {
    by_name: HashMap<&'static str, CmdRef, ahash::RandomState>,
    /// Every command and subcommand, indexed by id.
    pub all: Vec<&'static CommandSpec>,
}

impl Table {
    fn build() -> Table {
        let families: &[&'static [CommandSpec]] = &[
            acl::COMMANDS,
            aof::COMMANDS,
            bitops::COMMANDS,
            blocking::COMMANDS,
            client::COMMANDS,
            cluster::COMMANDS,
            command::COMMANDS,
            config::COMMANDS,
            connection::COMMANDS,
            debug::COMMANDS,
            dump::COMMANDS,
            expire::COMMANDS,
            function::COMMANDS,
            geo::COMMANDS,
            hash::COMMANDS,
            hll::COMMANDS,
            info::COMMANDS,
            keys::COMMANDS,
            list::COMMANDS,
            lolwut::COMMANDS,
            module::COMMANDS,
            multi::COMMANDS,
            pubsub::COMMANDS,
            script::COMMANDS,
            replication::COMMANDS,
            server::COMMANDS,
            sort::COMMANDS,
            sql::COMMANDS,
            set::COMMANDS,
            stream::COMMANDS,
            string::COMMANDS,
            zset::COMMANDS,
        ];
        let mut t = Table {
            by_name: HashMap::default(),
            all: Vec::new(),
        };
        for fam in families {
            for spec in fam.iter() {
                t.add(spec);
                for sub in spec.subcommands {
                    t.add(sub);
                }
            }
        }
        t
    }

    fn add(&mut self, spec: &'static CommandSpec) {
        let id = self.all.len();
        self.all.push(spec);
        let prev = self.by_name.insert(spec.name, CmdRef { spec, id });
        assert!(prev.is_none(), "command {} defined twice", spec.name);
    }

    /// Looks a command up by the name a client sends, case-insensitively.
    /// A subcommand's own name (`config|get`) is none, as in Redis: it is
    /// reached through its container ([`Table::lookup_sub`]) or by
    /// [`Table::lookup_full`].
    pub fn lookup(&self, name: &[u8]) -> Option<CmdRef> {
        let table = self as *const Table as usize;
        let packed = packed_name(name);
        let recent = RECENT_LOOKUPS.get();
        let matches = |r: Recent| r.filter(|&(t, p, _)| t == table && Some(p) == packed);
        if let Some((_, _, cmd)) = matches(recent[0]) {
            return Some(cmd);
        }
        if let Some((_, _, cmd)) = matches(recent[1]) {
            RECENT_LOOKUPS.set([recent[1], recent[0]]);
            return Some(cmd);
        }
        if name.contains(&b'|') {
            return None;
        }
        let found = match RENAMES.get() {
            Some(renames) => match renames.get(&name.to_ascii_lowercase()) {
                Some(renamed) => (*renamed)?,
                None => self.find(name)?,
            },
            None => self.find(name)?,
        };
        if let Some(packed) = packed {
            RECENT_LOOKUPS.set([Some((table, packed, found)), recent[0]]);
        }
        Some(found)
    }

    /// A command or subcommand by its full name (`get`, `config|get`),
    /// case-insensitively: what COMMAND INFO, COMMAND DOCS and LATENCY
    /// HISTOGRAM accept.
    pub fn lookup_full(&self, name: &[u8]) -> Option<CmdRef> {
        self.find(name)
    }

    /// Looks up `parent|sub` for a container command.
    pub fn lookup_sub(&self, parent: &CommandSpec, sub: &[u8]) -> Option<CmdRef> {
        let mut name = Vec::with_capacity(parent.name.len() + 1 + sub.len());
        name.extend_from_slice(parent.name.as_bytes());
        name.push(b'|');
        name.extend_from_slice(sub);
        self.find(&name)
    }

    /// The table's entry for `name` (any case), without the recent-lookup
    /// cache.
    fn find(&self, name: &[u8]) -> Option<CmdRef> {
        let mut buf = [0u8; 32];
        if name.len() > buf.len() {
            return None;
        }
        let lower = &mut buf[..name.len()];
        lower.copy_from_slice(name);
        lower.make_ascii_lowercase();
        let s = std::str::from_utf8(lower).ok()?;
        self.by_name.get(s).copied()
    }

    /// Top-level commands (no subcommands), in table order.
    pub fn top_level(&self) -> impl Iterator<Item = &'static CommandSpec> + '_ {
        self.all.iter().copied().filter(|s| !s.name.contains('|'))
    }
}

/// Client-visible names changed by `rename-command`: a lower-case name
/// maps to the command it now runs, or to None when it was renamed away.
pub type Renames = HashMap<Vec<u8>, Option<CmdRef>>;

static RENAMES: OnceLock<Renames> = OnceLock::new();

/// Applies `rename-command` directives in order (an empty new name
/// removes the command), as Redis does while reading its config; Err is
/// Redis's message for the first bad one.
pub fn rename_table(directives: &[(String, String)]) -> Result<Renames, String> {
    let t = table();
    let mut renames = Renames::new();
    let current = |renames: &Renames, name: &[u8]| match renames.get(name) {
        Some(found) => *found,
        None => t.find(name).filter(|c| !c.spec.name.contains('|')),
    };
    for (old, new) in directives {
        let old = old.to_ascii_lowercase().into_bytes();
        let new = new.to_ascii_lowercase().into_bytes();
        let cmd = current(&renames, &old).ok_or("No such command in rename-command")?;
        renames.insert(old, None);
        if !new.is_empty() {
            if current(&renames, &new).is_some() {
                return Err("Target command name already exists".into());
            }
            renames.insert(new, Some(cmd));
        }
    }
    Ok(renames)
}

/// Installs the start-up `rename-command` table; call once, before any
/// client is served.
pub fn install_renames(renames: Renames) {
    if !renames.is_empty() && RENAMES.set(renames).is_err() {
        tracing::warn!("rename-command: the renames were installed already");
    }
}

/// The process-wide command table.
pub fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(Table::build)
}

/// Everything a handler works with for one command.
pub struct Ctx<'a> {
    /// Shared server state.
    pub server: &'a Server,
    /// The calling connection's state.
    pub session: &'a mut Session,
    /// Where the reply goes.
    pub out: &'a mut ReplyBuf,
    /// The locked keyspace view.
    pub keys: Keys<'a>,
    /// The selected database (kept in step with `session.db`).
    pub db: usize,
    /// Changes made, for `rdb_changes_since_last_save`.
    pub dirty: u64,
    /// Keys that received elements clients may be blocked waiting for
    /// (Redis's `signalKeyAsReady`), as (db, key).
    pub ready: Vec<(usize, Box<[u8]>)>,
    /// Blocking commands must not block (inside EXEC): they reply as if
    /// they timed out at once, like Redis's CLIENT_DENY_BLOCKING.
    pub deny_blocking: bool,
    /// The command runs inside EXEC (Redis's `server.in_exec`): what would
    /// start a background job schedules it instead.
    pub in_exec: bool,
    /// How the running command propagates when it is not as executed
    /// (Redis's `rewriteClientCommandVector` / `alsoPropagate`): filled by
    /// [`Ctx::propagate`], None for "as executed".
    pub effects: Option<Vec<crate::persist::aof::Op>>,
    /// How many of the keys `keys` found expired were announced (keyspace
    /// notifications, tracking), see [`crate::exec::notify::flush_pending`].
    pub expired_announced: usize,
    /// The hook word ([`crate::exec::notify::hooks`]) as loaded when the
    /// command started: its one load serves every hook the command passes.
    pub hooks: u32,
}

impl Ctx<'_> {
    /// Records a write to `key`: wakes WATCHers and counts a change, as
    /// Redis's `signalModifiedKey` plus `server.dirty++`.
    #[inline]
    pub fn modified(&mut self, key: &[u8]) {
        self.keys.signal_modified(self.db, key);
        self.dirty += 1;
        if !self.server.blocking.is_empty() || self.hooks & hook::TRACKING != 0 {
            self.modified_listened(key);
        }
    }

    /// [`Ctx::modified`]'s part for when someone listens: blocked stream
    /// readers, tracking clients.
    #[inline(never)]
    fn modified_listened(&mut self, key: &[u8]) {
        if !self.server.blocking.is_empty() && !self.holds_stream(key) {
            // A stream deleted or overwritten: its group readers must learn
            // (Redis signals the key from its delete and overwrite paths).
            self.signal_ready(key);
        }
        self.invalidate(key);
    }

    /// Whether `key` holds a stream, without side effects.
    fn holds_stream(&mut self, key: &[u8]) -> bool {
        self.keys
            .get_read_no_touch(self.db, key)
            .is_some_and(|e| matches!(e.value(), vireo_store::ValueRef::Stream(_)))
    }

    /// Logs nothing for the running command but what [`Ctx::propagate`]
    /// records (Redis's `preventCommandPropagation`: XREADGROUP and XCLAIM
    /// log their effects only).
    pub fn prevent_propagation(&mut self) {
        self.effects.get_or_insert_with(Vec::new);
    }

    /// Tells clients tracking `key` (CLIENT TRACKING) that it changed; part
    /// of [`Ctx::modified`], for the writes that count their changes apart.
    #[inline]
    pub fn invalidate(&mut self, key: &[u8]) {
        if self.hooks & hook::TRACKING != 0 {
            let mut local = crate::exec::pubsub::Local {
                session: self.session,
                out: self.out,
            };
            crate::exec::tracking::invalidate_key(self.server, Some(&mut local), key);
        }
    }

    /// Publishes keyspace event `event` of class `class` (bits of
    /// [`crate::exec::notify::class`]) for `key` of the current database,
    /// as Redis's `notifyKeyspaceEvent`. With the class off it costs a test
    /// of the command's hook word.
    #[inline]
    pub fn notify(&mut self, class: u32, event: &str, key: &[u8]) {
        self.notify_in(self.db, class, event, key);
    }

    /// [`Ctx::notify`] for a key of database `db` (MOVE, COPY … DB).
    #[inline]
    pub fn notify_in(&mut self, db: usize, class: u32, event: &str, key: &[u8]) {
        if self.hooks & class != 0 {
            crate::exec::notify::command_event(self, class, event, db, key);
        }
    }

    /// Records that `key` received elements (LPUSH, ZADD, …), so clients
    /// blocked on it get served once this command finishes.
    pub fn signal_ready(&mut self, key: &[u8]) {
        self.signal_ready_in(self.db, key);
    }

    /// [`Ctx::signal_ready`] for a key of database `db` (MOVE, COPY ... DB,
    /// SWAPDB).
    pub fn signal_ready_in(&mut self, db: usize, key: &[u8]) {
        crate::exec::blocking::mark_ready(self.server, &mut self.ready, db, key);
    }

    /// Propagates the running command as `cmd` instead of as executed (one
    /// call per resulting command: SPOP with a count propagates an SREM per
    /// member). Only effects that changed the dataset are to be recorded.
    /// A no-op while nothing consumes effects.
    pub fn propagate<A: AsRef<[u8]>>(&mut self, cmd: &[A]) {
        self.propagate_in(self.db, cmd);
    }

    /// [`Ctx::propagate`] for a command applying to database `db`.
    pub fn propagate_in<A: AsRef<[u8]>>(&mut self, db: usize, cmd: &[A]) {
        if !self.server.aof.is_collecting() {
            return;
        }
        let mut bytes = Vec::new();
        crate::persist::aof::reader::encode(&mut bytes, cmd);
        self.effects.get_or_insert_with(Vec::new).push((db, bytes));
    }

    /// Propagates `cmd` to replicas only, never to the AOF (PUBLISH, as
    /// Redis's `forceCommandPropagation(c, PROPAGATE_REPL)`). A no-op,
    /// one load, while no replication stream exists.
    pub fn propagate_to_replicas<A: AsRef<[u8]>>(&mut self, cmd: &[A]) {
        if !self.server.aof.is_replicating() {
            return;
        }
        let bytes = crate::persist::aof::feed::encode_repl_only(cmd);
        self.effects
            .get_or_insert_with(Vec::new)
            .push((self.db, bytes));
    }

    /// Propagates the running command as a deletion of `key` (DEL, or
    /// UNLINK when `lazy`), as Redis does for GETDEL, SPOP of a whole set
    /// and expiries already in the past.
    pub fn propagate_del(&mut self, key: &[u8], lazy: bool) {
        let cmd: &[u8] = if lazy { b"UNLINK" } else { b"DEL" };
        self.propagate(&[cmd, key]);
    }

    /// Propagates the running command as `SET key value PXAT at_ms`
    /// (Redis 7.0's form for every SET with a relative or absolute TTL).
    pub fn propagate_set_pxat(&mut self, key: &[u8], value: &[u8], at_ms: u64) {
        let mut num = itoa::Buffer::new();
        self.propagate(&[b"SET", key, value, b"PXAT", num.format(at_ms).as_bytes()]);
    }

    /// Propagates the running command as `PEXPIREAT key at_ms` plus
    /// `extra` arguments (EXPIRE's NX/XX/GT/LT options).
    pub fn propagate_pexpireat(&mut self, key: &[u8], at_ms: u64, extra: &[&[u8]]) {
        let mut num = itoa::Buffer::new();
        let mut cmd: Vec<&[u8]> = vec![b"PEXPIREAT", key, num.format(at_ms).as_bytes()];
        cmd.extend_from_slice(extra);
        self.propagate(&cmd);
    }

    /// Parses an integer argument, replying Redis's error if it is not one.
    pub fn int_arg(&mut self, arg: &[u8]) -> Option<i64> {
        let v = parse_i64(arg);
        if v.is_none() {
            self.out.error(errors::NOT_INT);
        }
        v
    }
}

/// Redis's error strings shared by many commands.
pub mod errors {
    pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    pub const SYNTAX: &str = "ERR syntax error";
    pub const NOT_INT: &str = "ERR value is not an integer or out of range";
    pub const NOT_FLOAT: &str = "ERR value is not a valid float";
    pub const OVERFLOW: &str = "ERR increment or decrement would overflow";
    pub const NO_SUCH_KEY: &str = "ERR no such key";
    pub const DB_RANGE: &str = "ERR DB index is out of range";
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
pub fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

/// Lossy text form of an argument for error messages.
pub fn text(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_key_expansion() {
        assert_eq!(range_keys(3, 1, 1, 1), vec![1]);
        assert_eq!(range_keys(5, 1, -1, 1), vec![1, 2, 3, 4]);
        assert_eq!(range_keys(5, 1, -1, 2), vec![1, 3]);
        assert_eq!(range_keys(1, 1, -1, 1), Vec::<usize>::new());
        assert_eq!(range_keys(3, 0, 0, 0), Vec::<usize>::new());
    }

    #[test]
    fn table_has_unique_lowercase_names_and_lookup_ignores_case() {
        let t = table();
        for s in &t.all {
            assert_eq!(s.name, s.name.to_ascii_lowercase());
        }
        assert_eq!(t.lookup(b"GeT").unwrap().spec.name, "get");
        assert!(t.lookup(b"nosuchcommand").is_none());
        let cfg = t.lookup(b"config").unwrap().spec;
        assert_eq!(t.lookup_sub(cfg, b"GET").unwrap().spec.name, "config|get");
        // A subcommand's full name is not a command a client can send,
        // whether or not it was looked up just before.
        assert!(t.lookup(b"config|get").is_none());
        assert_eq!(
            t.lookup_full(b"CONFIG|GET").unwrap().spec.name,
            "config|get"
        );
        assert_eq!(t.lookup_full(b"get").unwrap().spec.name, "get");
    }

    #[test]
    fn repeated_lookups_answer_as_the_table_does() {
        // The recent-lookups cache must not answer for a name that differs
        // from the ones it holds, whatever the case or the length.
        let t = table();
        let names: [&[u8]; 23] = [
            b"set",
            b"SET",
            b"sEt",
            b"setex",
            b"se",
            b"get",
            b"GET",
            b"x",
            b"zpopmin",
            b"zpopmax",
            b"ZPOPMAX",
            b"lpush",
            b"lpushx",
            b"getrange",
            b"getset",
            b"mset",
            b"msetnx",
            b"ttl",
            b"tll",
            b"zrangebyscore",
            b"ZRANGEBYSCORE",
            b"zrevrangebyscore",
            b"",
        ];
        let mut rng = fastrand::Rng::with_seed(3);
        for _ in 0..2000 {
            let name = names[rng.usize(..names.len())];
            let want = std::str::from_utf8(name).unwrap().to_ascii_lowercase();
            let got = t.lookup(name).map(|c| (c.spec.name, c.id));
            let expected = t.by_name.get(want.as_str()).map(|c| (c.spec.name, c.id));
            assert_eq!(got, expected, "{want}");
        }
    }

    #[test]
    fn packed_names_differ_when_the_names_do() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..100_000 {
            let len = rng.usize(..=17);
            let a: Vec<u8> = (0..len).map(|_| rng.u8(b'a'..=b'd')).collect();
            let mut b = a.clone();
            if len > 0 && rng.bool() {
                let i = rng.usize(..len);
                b[i] = rng.u8(b'a'..=b'd');
            }
            match (packed_name(&a), packed_name(&b)) {
                (Some(x), Some(y)) => assert_eq!(x == y, a == b, "{a:?} {b:?}"),
                (x, y) => assert!(len > 16 && x.is_none() && y.is_none()),
            }
        }
    }
}
