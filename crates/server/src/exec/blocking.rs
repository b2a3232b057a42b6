//! Clients blocked on keys (BLPOP, BLMOVE, BZPOPMIN, …): the registry of
//! waiters, serving them when their keys receive elements, and every way a
//! wait ends (Redis's blocked.c).
//!
//! A blocking command that finds nothing to pop registers a [`Waiter`] under
//! each key it waits on *while it still holds those keys' shard locks*, and
//! its connection stops executing input (it keeps reading, to notice a
//! disconnect). A command that adds elements records the key as ready
//! ([`crate::cmd::Ctx::signal_ready`]); when the command, or the whole
//! transaction, ends, still under its locks, [`serve_ready`] hands the new
//! elements to the key's waiters in the order they blocked, as Redis does
//! before any other command runs. A push on one worker thread thus serves
//! a client of another.
//!
//! Exactly one party ends each wait: whoever [`Registry::claim`]s the
//! waiter — a pusher serving it, its worker on timeout, CLIENT UNBLOCK, or
//! its own disconnect. The claimer removes it from every queue and owns its
//! reply, which reaches the client's worker as [`Msg::Unblocked`].
//!
//! Lock order: keyspace shard locks first, then registry locks, never more
//! than one registry lock at a time (they are leaves).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use vireo_resp::{Args, OwnedArgs, Protocol, ReplyBuf};
use vireo_store::{Key, Keys, Keyspace};

use crate::cmd::{CmdRef, Ctx};
use crate::net::client::{cflags, ClientShared};
use crate::net::session::Session;
use crate::net::worker::Msg;
use crate::server::Server;

/// What serving a waiter does, implemented by the command family whose
/// command blocked (lists and sorted sets), so that the registry serves
/// waiters without knowing any family.
pub trait BlockedOp: Send + Sync {
    /// The key serving writes to besides the ready key (BLMOVE's
    /// destination), locked with it; None for pops.
    fn destination(&self) -> Option<&[u8]>;

    /// Serves waiter `w` from `key`, which holds elements, through the
    /// locked view of the command that made it ready: claims the waiter,
    /// does its operation and sends it the reply, recording keys its write
    /// made ready in `ready` and counting its writes in `dirty`.
    fn serve(
        &self,
        server: &Server,
        keys: &mut Keys<'_>,
        w: &Arc<Waiter>,
        key: &[u8],
        ready: &mut Vec<(usize, Key)>,
        dirty: &mut u64,
    ) -> Served;

    /// The reply when the wait times out, if not a null array (WAIT
    /// replies with its count).
    fn timeout_reply(&self) -> Option<Vec<u8>> {
        None
    }
}

/// Outcome of [`BlockedOp::serve`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// The waiter was claimed and its reply sent.
    Done,
    /// The waiter cannot be served from this key (other type, or someone
    /// else ended its wait): try the next one.
    Skipped,
    /// The waiter needs a shard this view cannot take now; serving the key
    /// must resume under other locks, this waiter first.
    Deferred,
}

/// One client's wait for elements on some keys.
pub struct Waiter {
    /// The blocked client (its id, worker and CLIENT LIST flags).
    pub client: Arc<ClientShared>,
    /// The database the keys belong to.
    pub db: usize,
    /// The keys waited on, without duplicates, in argument order.
    pub keys: Vec<Key>,
    /// What serving the waiter does.
    pub op: Box<dyn BlockedOp>,
    /// The client's protocol, for encoding its reply elsewhere.
    pub proto: Protocol,
    /// Unix ms after which the wait times out; 0 waits forever.
    pub deadline_ms: u64,
    claimed: AtomicBool,
}

impl Waiter {
    /// A waiter not registered yet.
    pub fn new(
        client: Arc<ClientShared>,
        db: usize,
        keys: Vec<Key>,
        op: impl BlockedOp + 'static,
        proto: Protocol,
        deadline_ms: u64,
    ) -> Self {
        Waiter {
            client,
            db,
            keys,
            op: Box::new(op),
            proto,
            deadline_ms,
            claimed: AtomicBool::new(false),
        }
    }

    /// True once someone took charge of ending this wait.
    pub fn is_claimed(&self) -> bool {
        self.claimed.load(Ordering::Acquire)
    }

    /// The reply of a wait that timed out (or CLIENT UNBLOCK TIMEOUT): a null
    /// array for every blocking command, as Redis replies.
    pub fn timeout_reply(&self) -> Vec<u8> {
        if let Some(reply) = self.op.timeout_reply() {
            return reply;
        }
        let mut out = ReplyBuf::new(self.proto);
        out.null_array();
        out.as_bytes().to_vec()
    }
}

/// What a session keeps while its command waits.
pub struct Blocked {
    /// The registered wait.
    pub waiter: Arc<Waiter>,
    /// The command's arguments, for the slow log once it completes.
    pub args: OwnedArgs,
    /// The command, set by the dispatcher, for its statistics.
    pub cmd: Option<CmdRef>,
    /// How long its first execution took, in µs.
    pub exec_us: u64,
}

/// Waiters of a keyspace shard's keys: key → waiters in blocking order
/// (waiters of every database, each knowing its own).
type Queues = HashMap<Key, VecDeque<Arc<Waiter>>>;

/// Every blocked client, indexed by key (per keyspace shard) and by id.
pub struct Registry {
    queues: Box<[Mutex<Queues>]>,
    by_client: Mutex<HashMap<u64, Arc<Waiter>>>,
    /// Waiters not yet claimed.
    count: AtomicUsize,
    /// Of those, the ones with a deadline (INFO `clients_in_timeout_table`).
    timed: AtomicUsize,
}

impl Registry {
    /// An empty registry for a keyspace of `shards` shards.
    pub fn new(shards: usize) -> Self {
        Registry {
            queues: (0..shards.max(1))
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
            by_client: Mutex::new(HashMap::new()),
            count: AtomicUsize::new(0),
            timed: AtomicUsize::new(0),
        }
    }

    fn queues_of(&self, ks: &Keyspace, key: &[u8]) -> &Mutex<Queues> {
        &self.queues[ks.shard_of(key) % self.queues.len()]
    }

    /// Number of clients blocked on keys.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// True when no client is blocked on keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of blocked clients whose wait has a deadline.
    pub fn with_deadline(&self) -> usize {
        self.timed.load(Ordering::Relaxed)
    }

    /// Registers `w` under each of its keys. The caller holds those keys'
    /// shard locks, so no push can slip between its check and this.
    pub fn block(&self, ks: &Keyspace, w: Arc<Waiter>) {
        for key in &w.keys {
            self.queues_of(ks, key)
                .lock()
                .entry(key.clone())
                .or_default()
                .push_back(w.clone());
        }
        w.client.set_flag(cflags::BLOCKED, true);
        self.count.fetch_add(1, Ordering::Relaxed);
        if w.deadline_ms != 0 {
            self.timed.fetch_add(1, Ordering::Relaxed);
        }
        self.by_client.lock().insert(w.client.id, w);
    }

    /// True if some client waits on `key` of `db`. Meaningful when the
    /// caller holds the key's shard lock.
    pub fn has_waiters(&self, ks: &Keyspace, db: usize, key: &[u8]) -> bool {
        !self.is_empty()
            && self
                .queues_of(ks, key)
                .lock()
                .get(key)
                .is_some_and(|q| q.iter().any(|w| w.db == db))
    }

    /// The first waiter on `key` of `db` that nobody claimed yet and that is
    /// not in `skip`.
    fn next_waiter(
        &self,
        ks: &Keyspace,
        db: usize,
        key: &[u8],
        skip: &[Arc<Waiter>],
    ) -> Option<Arc<Waiter>> {
        let queues = self.queues_of(ks, key).lock();
        queues
            .get(key)?
            .iter()
            .find(|w| w.db == db && !w.is_claimed() && !skip.iter().any(|s| Arc::ptr_eq(s, w)))
            .cloned()
    }

    /// The waiters' destination keys queued on `key` of `db` (BLMOVE).
    fn destinations(&self, ks: &Keyspace, db: usize, key: &[u8]) -> Vec<Key> {
        let queues = self.queues_of(ks, key).lock();
        queues
            .get(key)
            .map(|q| {
                q.iter()
                    .filter(|w| w.db == db)
                    .filter_map(|w| w.op.destination().map(Key::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Takes charge of ending `w`'s wait: true for exactly one caller, who
    /// must then deliver its reply. The waiter leaves every queue.
    pub fn claim(&self, ks: &Keyspace, w: &Arc<Waiter>) -> bool {
        if w.claimed.swap(true, Ordering::AcqRel) {
            return false;
        }
        for key in &w.keys {
            let mut queues = self.queues_of(ks, key).lock();
            if let Some(q) = queues.get_mut(&key[..]) {
                q.retain(|x| !Arc::ptr_eq(x, w));
                if q.is_empty() {
                    queues.remove(&key[..]);
                }
            }
        }
        {
            let mut by_client = self.by_client.lock();
            if by_client
                .get(&w.client.id)
                .is_some_and(|x| Arc::ptr_eq(x, w))
            {
                by_client.remove(&w.client.id);
            }
        }
        w.client.set_flag(cflags::BLOCKED, false);
        self.count.fetch_sub(1, Ordering::Relaxed);
        if w.deadline_ms != 0 {
            self.timed.fetch_sub(1, Ordering::Relaxed);
        }
        true
    }

    /// Every client waiting now.
    fn all_waiters(&self) -> Vec<Arc<Waiter>> {
        self.by_client.lock().values().cloned().collect()
    }

    /// The wait of client `id`, if it is blocked on keys.
    pub fn waiter_of(&self, id: u64) -> Option<Arc<Waiter>> {
        self.by_client.lock().get(&id).cloned()
    }

    /// The (db, key) pairs waited on in any of `dbs`.
    pub fn keys_in(&self, dbs: &[usize]) -> Vec<(usize, Key)> {
        let mut out = Vec::new();
        if self.is_empty() {
            return out;
        }
        for shard in self.queues.iter() {
            for (key, q) in shard.lock().iter() {
                for &db in dbs {
                    if q.iter().any(|w| w.db == db) {
                        out.push((db, key.clone()));
                    }
                }
            }
        }
        out
    }
}

/// Blocks the calling client on `waiter`'s keys (their shards are locked
/// by the running command): it is registered, and the session remembers
/// the command so its connection stops executing input until the wait
/// ends.
pub fn block(ctx: &mut Ctx<'_>, args: Args<'_>, waiter: Waiter) -> Arc<Waiter> {
    let waiter = Arc::new(waiter);
    ctx.server
        .blocking
        .block(&ctx.server.keyspace, waiter.clone());
    ctx.session.blocked = Some(Blocked {
        waiter: waiter.clone(),
        args: args.to_owned(),
        cmd: None,
        exec_us: 0,
    });
    waiter
}

/// Records that `key` of `db` received elements, if anyone waits on it
/// (Redis's `signalKeyAsReady`). The caller holds the key's shard lock.
pub fn mark_ready(server: &Server, ready: &mut Vec<(usize, Key)>, db: usize, key: &[u8]) {
    if ready.iter().any(|(d, k)| *d == db && &k[..] == key) {
        return;
    }
    if server.blocking.has_waiters(&server.keyspace, db, key) {
        ready.push((db, key.into()));
    }
}

/// Hands the claimed waiter's reply to its worker, which writes it and
/// resumes the client. `failed` counts the command as failed even when the
/// reply is not an error (CLIENT UNBLOCK does so, as Redis).
pub fn deliver(server: &Server, w: &Arc<Waiter>, reply: Vec<u8>, failed: bool) {
    server.notify(
        w.client.worker,
        Msg::Unblocked {
            waiter: w.clone(),
            reply,
            failed,
        },
    );
}

/// Serves the clients blocked on the `ready` keys (and on the keys those
/// services push into, for BLMOVE) through `keys`, the locked view of the
/// command that made them ready, counting the writes in `dirty`. Returns
/// the keys whose service needs a shard this view could not take: finish
/// them with [`serve_deferred`] once the view is released.
pub fn serve_ready(
    server: &Server,
    keys: &mut Keys<'_>,
    ready: &mut Vec<(usize, Key)>,
    dirty: &mut u64,
) -> Vec<(usize, Key)> {
    let mut deferred = Vec::new();
    loop {
        let batch = std::mem::take(ready);
        if batch.is_empty() {
            return deferred;
        }
        for (db, key) in batch {
            if !serve_key(server, keys, db, &key, ready, dirty) {
                deferred.push((db, key));
            }
        }
    }
}

/// Serves `key`'s waiters in blocking order while it has elements. False
/// if the next waiter needs a shard that could not be taken (its turn is
/// kept: nobody behind it is served first).
fn serve_key(
    server: &Server,
    keys: &mut Keys<'_>,
    db: usize,
    key: &[u8],
    ready: &mut Vec<(usize, Key)>,
    dirty: &mut u64,
) -> bool {
    let reg = &server.blocking;
    if !keys.contains(db, key) {
        serve_gone(server, keys, db, key, ready, dirty);
        return true;
    }
    let mut skipped = Vec::new();
    while keys.contains(db, key) {
        let Some(w) = reg.next_waiter(&server.keyspace, db, key, &skipped) else {
            break;
        };
        match w.op.serve(server, keys, &w, key, ready, dirty) {
            Served::Done => {}
            Served::Skipped => skipped.push(w),
            Served::Deferred => return false,
        }
    }
    true
}

/// Offers a key that no longer exists to each of its waiters once, in
/// blocking order: most keep waiting, but a waiter that depends on the key
/// itself (XREADGROUP's group went with its stream) ends its wait.
fn serve_gone(
    server: &Server,
    keys: &mut Keys<'_>,
    db: usize,
    key: &[u8],
    ready: &mut Vec<(usize, Key)>,
    dirty: &mut u64,
) {
    let waiters: Vec<Arc<Waiter>> = server
        .blocking
        .queues_of(&server.keyspace, key)
        .lock()
        .get(key)
        .map(|q| q.iter().filter(|w| w.db == db).cloned().collect())
        .unwrap_or_default();
    for w in waiters {
        if !w.is_claimed() {
            w.op.serve(server, keys, &w, key, ready, dirty);
        }
    }
}

/// Finishes services [`serve_ready`] could not do under the pusher's
/// locks: each key is locked again together with its waiters' destination
/// keys, in ascending order, and served. Returns the writes made.
pub fn serve_deferred(server: &Server, mut pending: Vec<(usize, Key)>) -> u64 {
    let ks = &server.keyspace;
    let mut dirty = 0;
    while !pending.is_empty() {
        let (db, key) = pending.remove(0);
        let mut shards = vec![ks.shard_of(&key)];
        shards.extend(
            server
                .blocking
                .destinations(ks, db, &key)
                .iter()
                .map(|d| ks.shard_of(d)),
        );
        let mut keys = ks.lock_shards(shards);
        let mut ready = vec![(db, key)];
        pending.extend(serve_ready(server, &mut keys, &mut ready, &mut dirty));
    }
    dirty
}

/// After SWAPDB, FLUSHDB or FLUSHALL: every waited-on key of the changed
/// databases becomes ready, so waiters see what is there now: elements to
/// serve (Redis's `scanDatabaseForReadyKeys`), or a stream gone from under
/// a group reader (`scanDatabaseForDeletedStreams`). The caller holds
/// every shard.
pub fn signal_waited(ctx: &mut Ctx<'_>, dbs: &[usize]) {
    for (db, key) in ctx.server.blocking.keys_in(dbs) {
        ctx.signal_ready_in(db, &key);
    }
}

/// Ends client `id`'s wait for CLIENT UNBLOCK: as a timeout, or with an
/// UNBLOCKED error. False if it is not blocked on keys.
pub fn unblock(server: &Server, id: u64, error: bool) -> bool {
    let Some(w) = server.blocking.waiter_of(id) else {
        return false;
    };
    if !server.blocking.claim(&server.keyspace, &w) {
        return false;
    }
    let reply = if error {
        b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n".to_vec()
    } else {
        w.timeout_reply()
    };
    deliver(server, &w, reply, true);
    true
}

/// Ends every wait with an UNBLOCKED error: the server turned into a
/// replica, so the keys they wait on now change only by its master's
/// hand (Redis's `disconnectAllBlockedClients`).
pub fn unblock_all_for_role_change(server: &Server) {
    for w in server.blocking.all_waiters() {
        if server.blocking.claim(&server.keyspace, &w) {
            let reply = b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n".to_vec();
            deliver(server, &w, reply, true);
        }
    }
}

/// Ends the session's wait if its deadline passed (called by its worker);
/// the timeout reply if this call ended it.
pub fn expire(server: &Server, session: &Session, now_ms: u64) -> Option<Vec<u8>> {
    let w = &session.blocked.as_ref()?.waiter;
    if w.deadline_ms == 0 || now_ms <= w.deadline_ms {
        return None;
    }
    server
        .blocking
        .claim(&server.keyspace, w)
        .then(|| w.timeout_reply())
}

/// Drops the session's wait: the client disconnected, or its command
/// failed after blocking.
pub fn abandon(server: &Server, session: &mut Session) {
    if let Some(b) = session.blocked.take() {
        server.blocking.claim(&server.keyspace, &b.waiter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::blocking::Op;
    use crate::cmd::shared::Pop;
    use crate::config::Config;
    use vireo_store::list::{End, List};
    use vireo_store::value::{Value, ValueRef};

    fn server() -> Server {
        Server::new(Config::default(), 1)
    }

    fn waiter(id: u64, keys: &[&[u8]], op: Op) -> Arc<Waiter> {
        let client = Arc::new(ClientShared::new(
            id,
            "a:1".into(),
            "b:2".into(),
            0,
            0,
            false,
        ));
        let keys = keys.iter().map(|k| Key::from(*k)).collect();
        Arc::new(Waiter::new(client, 0, keys, op, Protocol::Resp2, 0))
    }

    fn lpop() -> Op {
        Op::Pop(Pop::List {
            end: End::Left,
            count: None,
        })
    }

    #[test]
    fn claiming_is_exclusive_and_unregisters_every_key() {
        let srv = server();
        let ks = &srv.keyspace;
        let w = waiter(7, &[b"a", b"b"], lpop());
        srv.blocking.block(ks, w.clone());
        assert_eq!(srv.blocking.len(), 1);
        assert!(srv.blocking.has_waiters(ks, 0, b"b"));
        assert!(!srv.blocking.has_waiters(ks, 1, b"b"));
        assert!(w.client.flags.load(Ordering::Relaxed) & cflags::BLOCKED != 0);
        assert!(srv.blocking.waiter_of(7).is_some());
        assert_eq!(srv.blocking.keys_in(&[0]).len(), 2);
        assert!(srv.blocking.claim(ks, &w));
        assert!(!srv.blocking.claim(ks, &w));
        assert!(srv.blocking.is_empty());
        assert!(!srv.blocking.has_waiters(ks, 0, b"a"));
        assert!(srv.blocking.waiter_of(7).is_none());
        assert!(srv.blocking.keys_in(&[0]).is_empty());
        assert!(w.client.flags.load(Ordering::Relaxed) & cflags::BLOCKED == 0);
    }

    #[test]
    fn a_move_into_a_busy_shard_is_finished_later_keeping_its_turn() {
        let srv = server();
        let ks = &srv.keyspace;
        let src: &[u8] = b"src";
        let dst = (0..)
            .map(|i| format!("dst{i}").into_bytes())
            .find(|d| ks.shard_of(d) != ks.shard_of(src))
            .unwrap();
        let mover = waiter(
            1,
            &[src],
            Op::Move {
                dst: dst.as_slice().into(),
                from: End::Left,
                to: End::Right,
                rpoplpush: false,
            },
        );
        let popper = waiter(2, &[src], lpop());
        srv.blocking.block(ks, mover.clone());
        srv.blocking.block(ks, popper.clone());

        let mut keys = ks.lock_keys([src]);
        let mut list = List::new(-2);
        list.push(End::Right, b"x");
        keys.set(0, src, Value::List(list));
        // Another thread holds the destination's shard.
        let busy = ks.lock_keys([dst.as_slice()]);
        let (mut ready, mut dirty) = (vec![(0, Key::from(src))], 0);
        let deferred = serve_ready(&srv, &mut keys, &mut ready, &mut dirty);
        assert_eq!(deferred, vec![(0, Key::from(src))]);
        // Nobody behind the mover was served in its place.
        assert!(!mover.is_claimed() && !popper.is_claimed());
        drop(keys);
        drop(busy);

        assert_eq!(serve_deferred(&srv, deferred), 2);
        assert!(mover.is_claimed() && !popper.is_claimed());
        let mut keys = ks.lock_keys([src, dst.as_slice()]);
        assert!(!keys.contains(0, src));
        let Some(ValueRef::List(l)) = keys.get_mut(0, &dst).map(|e| e.value()) else {
            panic!("no destination list");
        };
        assert_eq!(l.len(), 1);
    }
}
