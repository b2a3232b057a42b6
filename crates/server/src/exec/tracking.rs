//! Client-side caching support (Redis's `tracking.c`): which clients read
//! which keys, and the invalidation messages they get when those keys
//! change.
//!
//! Design:
//! - The invalidation table maps a key name (any database, as in Redis) to
//!   the ids of the clients that read it while tracking. It is split over
//!   [`SHARDS`] mutexes by the key's hash; an entry is dropped when its key
//!   is invalidated, so a key is reported once per read.
//! - What other threads need of a tracking client (its worker, redirect
//!   target, NOLOOP, BCAST) is in a registry by id; the connection's own
//!   options (OPTIN/OPTOUT, CLIENT CACHING, prefixes) stay in its session.
//! - BCAST clients register prefixes; a modified key matching a prefix is
//!   queued on it, and the queue is broadcast, one message per client and
//!   prefix, when the command that changed it ends (Redis does it before
//!   sleeping; the grouping per command is what clients see the same).
//! - An invalidation for the client whose command caused it is held until
//!   that command's reply is written (Redis's pending invalidations), so
//!   it never lands inside a reply.
//! - Messages reach another client through its worker's queue, as Pub/Sub
//!   messages do, formatted for the receiver: a RESP3 push
//!   `["invalidate", keys]`, or a `__redis__:invalidate` message for a
//!   RESP2 client subscribed in redirect mode.
//! - Nothing of this runs while no client tracks: every hook starts with one
//!   relaxed load of the hook word, whose `TRACKING` bit
//!   ([`crate::exec::notify::hook`]) is set while the client count is not
//!   zero (both change under the trackers' lock).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use vireo_resp::{Protocol, ReplyBuf};

use crate::exec::notify::hook;
use crate::exec::pubsub::Local;
use crate::net::client::cflags;
use crate::net::session::Session;
use crate::net::worker::Msg;
use crate::server::Server;

/// Invalidation table shards (a power of two).
const SHARDS: usize = 16;

type Key = Box<[u8]>;

/// One shard of the invalidation table: key → ids of the clients that read it.
type TableShard = HashMap<Key, HashSet<u64>, ahash::RandomState>;

/// What other threads need to know of a tracking client.
#[derive(Clone, Copy)]
struct Tracker {
    worker: usize,
    /// Client the invalidations go to instead (0: none).
    redirect: u64,
    noloop: bool,
    bcast: bool,
    resp3: bool,
}

/// A BCAST prefix: its clients and the keys changed since the last
/// broadcast, each with the client that changed it last (0: none).
#[derive(Default)]
struct Prefix {
    clients: Vec<u64>,
    pending: BTreeMap<Key, u64>,
}

/// The server-wide tracking state.
pub struct Tracking {
    /// Clients with tracking on (INFO `tracking_clients`).
    clients: AtomicUsize,
    trackers: RwLock<HashMap<u64, Tracker, ahash::RandomState>>,
    table: Box<[Mutex<TableShard>]>,
    hasher: ahash::RandomState,
    keys: AtomicUsize,
    items: AtomicUsize,
    prefixes: Mutex<BTreeMap<Key, Prefix>>,
    prefix_count: AtomicUsize,
    /// Some prefix has keys waiting to be broadcast.
    bcast_pending: AtomicBool,
}

impl Default for Tracking {
    fn default() -> Self {
        Tracking {
            clients: AtomicUsize::new(0),
            trackers: RwLock::default(),
            table: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: ahash::RandomState::new(),
            keys: AtomicUsize::new(0),
            items: AtomicUsize::new(0),
            prefixes: Mutex::default(),
            prefix_count: AtomicUsize::new(0),
            bcast_pending: AtomicBool::new(false),
        }
    }
}

impl Tracking {
    /// Clients with tracking on.
    pub fn client_count(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }
    /// Keys in the invalidation table (`tracking_total_keys`).
    pub fn key_count(&self) -> usize {
        self.keys.load(Ordering::Relaxed)
    }
    /// (key, client) pairs in the table (`tracking_total_items`).
    pub fn item_count(&self) -> usize {
        self.items.load(Ordering::Relaxed)
    }
    /// BCAST prefixes in use (`tracking_total_prefixes`).
    pub fn prefix_count(&self) -> usize {
        self.prefix_count.load(Ordering::Relaxed)
    }

    fn shard(&self, key: &[u8]) -> &Mutex<TableShard> {
        &self.table[self.hasher.hash_one(key) as usize & (SHARDS - 1)]
    }

    /// Takes `key` out of the table: the clients that read it.
    fn take(&self, key: &[u8]) -> Option<HashSet<u64>> {
        let ids = self.shard(key).lock().remove(key)?;
        self.keys.fetch_sub(1, Ordering::Relaxed);
        self.items.fetch_sub(ids.len(), Ordering::Relaxed);
        Some(ids)
    }
}

/// One connection's tracking options (the rest is in [`Tracking`]).
#[derive(Default)]
pub struct ClientTracking {
    on: bool,
    bcast: bool,
    optin: bool,
    optout: bool,
    noloop: bool,
    /// CLIENT CACHING was given for the next command.
    caching: bool,
    redirect: u64,
    prefixes: Vec<Key>,
    /// Invalidations for this client caused by its running command, sent
    /// after its reply (None: the flush's null invalidation).
    pending: Vec<Option<Key>>,
}

/// True while some client tracks: the hooks' one check.
#[inline]
pub fn active(server: &Server) -> bool {
    crate::exec::notify::hooks(server) & hook::TRACKING != 0
}

/// Counts a client in (`delta` 1) or out (-1) of tracking and keeps the
/// hook word's TRACKING bit equal to "the count is not zero". The caller
/// holds the trackers' write lock, so counts and bit change in one order.
fn count_client(server: &Server, delta: isize) {
    let tr = &server.tracking;
    let now = if delta > 0 {
        tr.clients.fetch_add(1, Ordering::Relaxed) + 1
    } else {
        tr.clients.fetch_sub(1, Ordering::Relaxed) - 1
    };
    crate::exec::notify::set_hook(server, hook::TRACKING, now > 0);
}

/// Options of CLIENT TRACKING ON.
pub struct Options {
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    pub prefixes: Vec<Key>,
}

/// Checks CLIENT TRACKING ON's options against each other and the client's
/// state; Err is Redis's error.
pub fn check_options(session: &Session, o: &Options) -> Result<(), String> {
    let t = &session.tracking;
    if !o.bcast && !o.prefixes.is_empty() {
        return Err("ERR PREFIX option requires BCAST mode to be enabled".into());
    }
    if t.on && t.bcast != o.bcast {
        return Err("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.".into());
    }
    if o.bcast && (o.optin || o.optout) {
        return Err("ERR OPTIN and OPTOUT are not compatible with BCAST".into());
    }
    if o.optin && o.optout {
        return Err("ERR You can't specify both OPTIN mode and OPTOUT mode".into());
    }
    if (o.optin && t.optout) || (o.optout && t.optin) {
        return Err("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.".into());
    }
    if o.bcast {
        check_prefix_collisions(&t.prefixes, &o.prefixes)?;
    }
    Ok(())
}

/// Redis's `checkPrefixCollisionsOrReply`: a new prefix may not be a
/// prefix of, or start with, one the client has or another new one.
fn check_prefix_collisions(have: &[Key], new: &[Key]) -> Result<(), String> {
    let overlap = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, p) in new.iter().enumerate() {
        if let Some(h) = have.iter().find(|h| overlap(h, p)) {
            return Err(format!("ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.", text(p), text(h)));
        }
        if let Some(q) = new[i + 1..].iter().find(|q| overlap(q, p)) {
            return Err(format!("ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.", text(p), text(q)));
        }
    }
    Ok(())
}

/// CLIENT TRACKING ON (options already checked).
pub fn enable(server: &Server, session: &mut Session, o: Options) {
    let tr = &server.tracking;
    let t = &mut session.tracking;
    let newly = !t.on;
    t.on = true;
    t.bcast = o.bcast;
    t.optin = o.optin;
    t.optout = o.optout;
    t.noloop = o.noloop;
    t.redirect = o.redirect;
    if o.bcast {
        let new = if o.prefixes.is_empty() {
            vec![Key::from(&b""[..])]
        } else {
            o.prefixes
        };
        let mut table = tr.prefixes.lock();
        for p in new {
            if t.prefixes.contains(&p) {
                continue;
            }
            let entry = table.entry(p.clone()).or_default();
            entry.clients.push(session.id);
            t.prefixes.push(p);
        }
        tr.prefix_count.store(table.len(), Ordering::Relaxed);
    }
    let tracker = Tracker {
        worker: session.shared.worker,
        redirect: o.redirect,
        noloop: o.noloop,
        bcast: o.bcast,
        resp3: session.shared.resp.load(Ordering::Relaxed) == 3,
    };
    {
        let mut trackers = tr.trackers.write();
        trackers.insert(session.id, tracker);
        if newly {
            count_client(server, 1);
        }
    }
    let shared = &session.shared;
    shared.set_flag(cflags::TRACKING, true);
    shared.set_flag(cflags::TRACKING_BCAST, o.bcast);
    shared.set_flag(cflags::TRACKING_BROKEN_REDIR, false);
    shared.redir.store(o.redirect as i64, Ordering::Relaxed);
}

/// CLIENT TRACKING OFF, RESET and disconnect.
pub fn disable(server: &Server, session: &mut Session) {
    let t = std::mem::take(&mut session.tracking);
    if !t.on {
        return;
    }
    let tr = &server.tracking;
    if t.bcast {
        let mut table = tr.prefixes.lock();
        for p in &t.prefixes {
            if let Some(entry) = table.get_mut(p) {
                entry.clients.retain(|&id| id != session.id);
                if entry.clients.is_empty() {
                    table.remove(p);
                }
            }
        }
        tr.prefix_count.store(table.len(), Ordering::Relaxed);
    }
    {
        let mut trackers = tr.trackers.write();
        trackers.remove(&session.id);
        count_client(server, -1);
    }
    let shared = &session.shared;
    for f in [
        cflags::TRACKING,
        cflags::TRACKING_BCAST,
        cflags::TRACKING_BROKEN_REDIR,
    ] {
        shared.set_flag(f, false);
    }
    shared.redir.store(-1, Ordering::Relaxed);
}

/// The client switched protocol (HELLO): its pushes change form.
pub fn protocol_changed(server: &Server, session: &Session, resp3: bool) {
    if session.tracking.on {
        if let Some(t) = server.tracking.trackers.write().get_mut(&session.id) {
            t.resp3 = resp3;
        }
    }
}

/// CLIENT CACHING YES|NO; Err is Redis's error.
pub fn set_caching(session: &mut Session, yes: bool) -> Result<(), &'static str> {
    let t = &mut session.tracking;
    if !t.on {
        return Err("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    }
    match (yes, t.optin, t.optout) {
        (true, true, _) | (false, _, true) => {
            t.caching = true;
            Ok(())
        }
        (true, false, _) => {
            Err("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
        }
        (false, _, false) => {
            Err("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
        }
    }
}

/// After each command but CLIENT CACHING itself (and not inside MULTI),
/// CLIENT CACHING's effect ends.
pub fn command_done(session: &mut Session, spec_name: &str) {
    if session.tracking.caching && !session.in_multi() && spec_name != "client|caching" {
        session.tracking.caching = false;
    }
}

/// CLIENT GETREDIR's answer.
pub fn redirect_of(session: &Session) -> i64 {
    let t = &session.tracking;
    if t.on {
        t.redirect as i64
    } else {
        -1
    }
}

/// CLIENT TRACKINGINFO's flags and prefixes.
pub fn info(session: &Session) -> (Vec<&'static str>, Vec<Key>) {
    let t = &session.tracking;
    let mut flags = vec![if t.on { "on" } else { "off" }];
    let broken = session.shared.flags.load(Ordering::Relaxed) & cflags::TRACKING_BROKEN_REDIR != 0;
    for (on, name) in [
        (t.bcast, "bcast"),
        (t.optin, "optin"),
        (t.optin && t.caching, "caching-yes"),
        (t.optout, "optout"),
        (t.optout && t.caching, "caching-no"),
        (t.noloop, "noloop"),
        (broken, "broken_redirect"),
    ] {
        if on {
            flags.push(name);
        }
    }
    let mut prefixes = t.prefixes.clone();
    prefixes.sort();
    (flags, prefixes)
}

/// After a read-only command of a tracking (not BCAST) client: remembers
/// the keys it read, unless OPTIN without CACHING YES or OPTOUT with
/// CACHING NO (Redis's `trackingRememberKeys`).
pub fn remember_keys(server: &Server, session: &Session, keys: impl Iterator<Item = Key>) {
    let t = &session.tracking;
    if !t.on || t.bcast || (t.optin && !t.caching) || (t.optout && t.caching) {
        return;
    }
    let tr = &server.tracking;
    for key in keys {
        let mut shard = tr.shard(&key).lock();
        let ids = shard.entry(key).or_insert_with(|| {
            tr.keys.fetch_add(1, Ordering::Relaxed);
            HashSet::default()
        });
        if ids.insert(session.id) {
            tr.items.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Keeps the table within `tracking-table-max-keys`: keys beyond it are
/// invalidated now, as if they had changed.
fn limit_table(server: &Server) {
    let max = server
        .config
        .hot
        .tracking_table_max_keys
        .load(Ordering::Relaxed) as usize;
    let tr = &server.tracking;
    if max == 0 {
        return;
    }
    let mut shard_at = 0;
    while tr.key_count() > max && shard_at < SHARDS {
        let victim = tr.table[shard_at].lock().keys().next().cloned();
        match victim {
            Some(key) => invalidate_key(server, None, &key),
            None => shard_at += 1,
        }
    }
}

/// A key changed (Redis's `trackingInvalidateKey`): tells the clients that
/// read it, and queues it for the BCAST prefixes it matches. `local` is
/// the client whose command changed it.
pub fn invalidate_key(server: &Server, mut local: Option<&mut Local<'_>>, key: &[u8]) {
    if !active(server) {
        return;
    }
    let tr = &server.tracking;
    let me = local.as_ref().map_or(0, |l| l.session.id);
    if tr.prefix_count() > 0 {
        queue_for_prefixes(server, key, me);
    }
    let Some(ids) = tr.take(key) else {
        return;
    };
    let trackers = tr.trackers.read().clone_for(&ids);
    for (id, t) in trackers {
        if t.bcast || (t.noloop && id == me) {
            continue;
        }
        let one = single_key(key);
        if id == me {
            if let Some(l) = local.as_deref_mut() {
                l.session.tracking.pending.push(Some(key.into()));
                continue;
            }
        }
        send(server, local.as_deref_mut(), id, &t, &one);
    }
}

/// Lookups of several trackers under one read lock.
trait CloneFor {
    fn clone_for(&self, ids: &HashSet<u64>) -> Vec<(u64, Tracker)>;
}

impl CloneFor for HashMap<u64, Tracker, ahash::RandomState> {
    fn clone_for(&self, ids: &HashSet<u64>) -> Vec<(u64, Tracker)> {
        ids.iter()
            .filter_map(|id| self.get(id).map(|t| (*id, *t)))
            .collect()
    }
}

/// The key list of an invalidation of one key.
fn single_key(key: &[u8]) -> Payload {
    Payload::Keys(vec![key.into()])
}

/// What an invalidation says.
enum Payload {
    Keys(Vec<Key>),
    /// Everything (FLUSHDB / FLUSHALL): a null in the tracking client's
    /// protocol.
    Flush {
        resp3: bool,
    },
}

impl Payload {
    fn encode_into(&self, out: &mut ReplyBuf) {
        match self {
            Payload::Keys(keys) => {
                out.array(keys.len());
                for k in keys {
                    out.bulk(k);
                }
            }
            Payload::Flush { resp3: true } => out.raw(b"_\r\n"),
            Payload::Flush { resp3: false } => out.raw(b"$-1\r\n"),
        }
    }
}

/// Sends an invalidation meant for tracking client `id` (Redis's
/// `sendTrackingMessage`): to its redirect target if it has one, to itself
/// if it speaks RESP3; nothing otherwise.
fn send(server: &Server, local: Option<&mut Local<'_>>, id: u64, t: &Tracker, payload: &Payload) {
    let me = local.as_ref().map(|l| l.session.id);
    if t.redirect != 0 {
        // A target that is closing (QUIT answered, killed) counts as gone,
        // as it is in Redis, which closes it before running anything else.
        let closing = cflags::CLOSE_AFTER_REPLY;
        let target = server.clients.get(t.redirect).filter(|c| {
            c.flags.load(Ordering::Relaxed) & closing == 0 && !c.killed.load(Ordering::Relaxed)
        });
        let Some(target) = target else {
            return redirect_broken(server, local, id, t);
        };
        let resp3 = target.resp.load(Ordering::Relaxed) == 3;
        let subscribed = target.flags.load(Ordering::Relaxed) & cflags::PUBSUB != 0;
        let Some(bytes) = encode(payload, resp3, resp3 || subscribed) else {
            return;
        };
        return deliver(server, local, target.worker, target.id, me, bytes);
    }
    if let Some(bytes) = encode(payload, t.resp3, false) {
        deliver(server, local, t.worker, id, me, bytes);
    }
}

/// The message for a receiver: RESP3's push, the `__redis__:invalidate`
/// Pub/Sub message for a subscribed RESP2 receiver (`via_pubsub`), or
/// nothing for a RESP2 client that cannot take it.
fn encode(payload: &Payload, resp3: bool, reachable: bool) -> Option<Vec<u8>> {
    let mut out = ReplyBuf::new(Protocol::Resp2);
    if resp3 {
        out.array(2);
        out.bulk(b"invalidate");
    } else if reachable {
        out.array(3);
        out.bulk(b"message");
        out.bulk(b"__redis__:invalidate");
    } else {
        return None;
    }
    payload.encode_into(&mut out);
    Some(out.as_bytes().to_vec())
}

/// The redirect target is gone: the tracking client is flagged `R` and, in
/// RESP3, told with a `tracking-redir-broken` push.
fn redirect_broken(server: &Server, local: Option<&mut Local<'_>>, id: u64, t: &Tracker) {
    let me = local.as_ref().map(|l| l.session.id);
    if let Some(c) = server.clients.get(id) {
        c.set_flag(cflags::TRACKING_BROKEN_REDIR, true);
    }
    if t.resp3 {
        let mut out = ReplyBuf::new(Protocol::Resp2);
        out.array(2);
        out.bulk(b"tracking-redir-broken");
        out.int(t.redirect as i64);
        deliver(server, local, t.worker, id, me, out.as_bytes().to_vec());
    }
}

thread_local! {
    /// The client this thread is about to run a command for, and the
    /// invalidations for it found before the command starts (keys evicted
    /// to make room for it), which go before its reply as in Redis.
    static EARLY: std::cell::RefCell<(u64, Vec<Vec<u8>>)> = const {
        std::cell::RefCell::new((0, Vec::new()))
    };
}

/// Runs `f` (the eviction before a command of client `id`) so that
/// invalidations it causes for that client are written to `out` right
/// after, ahead of the command's reply.
pub fn with_early_delivery<R>(id: u64, out: &mut ReplyBuf, f: impl FnOnce() -> R) -> R {
    EARLY.with(|e| e.borrow_mut().0 = id);
    let r = f();
    let early = EARLY.with(|e| {
        let mut e = e.borrow_mut();
        e.0 = 0;
        std::mem::take(&mut e.1)
    });
    for bytes in early {
        crate::exec::pubsub::write_push(out, &bytes);
    }
    r
}

fn deliver(
    server: &Server,
    local: Option<&mut Local<'_>>,
    worker: usize,
    id: u64,
    me: Option<u64>,
    bytes: Vec<u8>,
) {
    let early = local.is_none()
        && EARLY.with(|e| {
            let mut e = e.borrow_mut();
            let mine = e.0 == id && id != 0;
            if mine {
                e.1.push(bytes.clone());
            }
            mine
        });
    if early {
        return;
    }
    match local {
        Some(l) if me == Some(id) => l.push(&bytes),
        _ => server.notify(
            worker,
            Msg::Push {
                ids: vec![id],
                encoded: Arc::from(bytes),
            },
        ),
    }
}

/// FLUSHDB / FLUSHALL: every tracking client gets the null invalidation
/// (the caller after its reply) and the table is emptied, even of the keys
/// of clients that stopped tracking.
pub fn invalidate_all(server: &Server, local: &mut Local<'_>) {
    let tr = &server.tracking;
    let trackers: Vec<(u64, Tracker)> = tr.trackers.read().iter().map(|(k, v)| (*k, *v)).collect();
    for (id, t) in trackers {
        if id == local.session.id {
            local.session.tracking.pending.push(None);
        } else {
            send(
                server,
                Some(local),
                id,
                &t,
                &Payload::Flush { resp3: t.resp3 },
            );
        }
    }
    for shard in tr.table.iter() {
        let mut map = shard.lock();
        tr.keys.fetch_sub(map.len(), Ordering::Relaxed);
        tr.items
            .fetch_sub(map.values().map(HashSet::len).sum(), Ordering::Relaxed);
        map.clear();
    }
}

fn queue_for_prefixes(server: &Server, key: &[u8], modifier: u64) {
    let tr = &server.tracking;
    let mut table = tr.prefixes.lock();
    let mut queued = false;
    for (prefix, state) in table.iter_mut() {
        if key.starts_with(prefix) {
            state.pending.insert(key.into(), modifier);
            queued = true;
        }
    }
    if queued {
        tr.bcast_pending.store(true, Ordering::Relaxed);
    }
}

/// Ends a command (or EXEC) of `local`: sends the invalidations its own
/// changes caused it, after its reply, and broadcasts what the BCAST
/// prefixes collected.
pub fn after_command(server: &Server, local: &mut Local<'_>) {
    if !local.session.tracking.pending.is_empty() {
        let pending = std::mem::take(&mut local.session.tracking.pending);
        let id = local.session.id;
        let tracker = server.tracking.trackers.read().get(&id).copied();
        if let Some(t) = tracker {
            for p in pending {
                let payload = match p {
                    Some(k) => Payload::Keys(vec![k]),
                    None => Payload::Flush { resp3: t.resp3 },
                };
                send(server, Some(local), id, &t, &payload);
            }
        }
    }
    broadcast(server, Some(local));
    limit_table(server);
}

/// Sends every BCAST prefix's collected keys to its clients: one message
/// per client and prefix, without the keys a NOLOOP client changed itself.
pub fn broadcast(server: &Server, mut local: Option<&mut Local<'_>>) {
    let tr = &server.tracking;
    if !tr.bcast_pending.swap(false, Ordering::Relaxed) {
        return;
    }
    let batches: Vec<(Vec<u64>, BTreeMap<Key, u64>)> = tr
        .prefixes
        .lock()
        .values_mut()
        .filter(|p| !p.pending.is_empty())
        .map(|p| (p.clients.clone(), std::mem::take(&mut p.pending)))
        .collect();
    let trackers = tr.trackers.read().clone();
    for (clients, keys) in batches {
        for id in clients {
            let Some(t) = trackers.get(&id) else {
                continue;
            };
            let list: Vec<Key> = keys
                .iter()
                .filter(|(_, &by)| !(t.noloop && by == id))
                .map(|(k, _)| k.clone())
                .collect();
            if !list.is_empty() {
                send(server, local.as_deref_mut(), id, t, &Payload::Keys(list));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(v: &[&str]) -> Vec<Key> {
        v.iter().map(|s| Key::from(s.as_bytes())).collect()
    }

    #[test]
    fn prefix_collisions_are_refused_like_redis() {
        assert!(check_prefix_collisions(&keys(&["a"]), &keys(&["b"])).is_ok());
        let e = check_prefix_collisions(&keys(&["foo"]), &keys(&["fo"])).unwrap_err();
        assert_eq!(e, "ERR Prefix 'fo' overlaps with an existing prefix 'foo'. Prefixes for a single client must not overlap.");
        let e = check_prefix_collisions(&[], &keys(&["ab", "abc"])).unwrap_err();
        assert_eq!(e, "ERR Prefix 'ab' overlaps with another provided prefix 'abc'. Prefixes for a single client must not overlap.");
    }

    #[test]
    fn invalidations_take_the_receivers_form() {
        let p = single_key(b"k");
        assert_eq!(
            encode(&p, true, true).unwrap(),
            b"*2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
        );
        assert_eq!(
            encode(&p, false, true).unwrap(),
            b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n"
        );
        assert!(encode(&p, false, false).is_none());
        let flush = Payload::Flush { resp3: false };
        assert!(encode(&flush, true, true).unwrap().ends_with(b"$-1\r\n"));
    }
}
