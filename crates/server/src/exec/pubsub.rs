//! Pub/Sub at run time: who is subscribed to what, and the fan-out of a
//! published message to every worker (Redis's `pubsub.c` minus the
//! command parsing, which is in `cmd/pubsub.rs`).
//!
//! Design:
//! - The server-wide registry ([`PubSub`]) maps a channel to its
//!   subscribers, each named by (worker, client id). Channels are spread
//!   over [`SHARDS`] read-write locks by hash, so publishers on different
//!   workers only share a lock when they publish to channels of one shard,
//!   and then only for reading. Patterns live in one read-write lock that
//!   PUBLISH does not even look at while there are none (an atomic count).
//! - A subscriber's own copy of its subscriptions ([`ClientSubs`]) lives in
//!   its session: only its worker touches it, and it drives UNSUBSCRIBE
//!   without arguments, CLIENT LIST's counts and the cleanup at RESET or
//!   disconnect.
//! - A message is encoded once per publish (per pattern for pattern
//!   subscribers) as a RESP2 array, shared by an `Arc`, and queued to each
//!   worker that has receivers with the ids of those receivers
//!   ([`crate::net::worker::Msg::Push`]). The worker writes it into each
//!   connection's output, turning the `*` into RESP3's `>` for RESP3
//!   clients, and applies `client-output-buffer-limit pubsub`: the
//!   publisher never waits for a subscriber. A worker's queue is FIFO, so
//!   the messages one publisher sends reach each subscriber in order.
//! - The publishing client itself (a RESP3 subscriber, or a keyspace
//!   notification caused by its own command) gets its copy directly in its
//!   output buffer, before the command's reply, as in Redis.
//! - Pushes survive CLIENT REPLY OFF/SKIP (Redis's CLIENT_PUSHING): a push
//!   written while replies are off waits in [`Session::held_pushes`] and is
//!   put back after dispatch drops the command's reply.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use vireo_resp::{Protocol, ReplyBuf};
use vireo_store::glob::glob_match;

use crate::net::client::cflags;
use crate::net::session::{ReplyMode, Session};
use crate::net::worker::Msg;
use crate::server::Server;

/// Channel registry shards (a power of two).
const SHARDS: usize = 64;

/// A subscribed client, as other threads address it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subscriber {
    /// The worker owning the connection.
    pub worker: usize,
    /// The client id.
    pub id: u64,
}

type SubMap = HashMap<Box<[u8]>, Vec<Subscriber>, ahash::RandomState>;

/// Channel name → subscribers, sharded by the name's hash.
struct ChannelMap {
    shards: Box<[RwLock<SubMap>]>,
    hasher: ahash::RandomState,
    /// Channels with at least one subscriber.
    len: AtomicUsize,
}

impl ChannelMap {
    fn new() -> Self {
        ChannelMap {
            shards: (0..SHARDS)
                .map(|_| RwLock::new(SubMap::default()))
                .collect(),
            hasher: ahash::RandomState::new(),
            len: AtomicUsize::new(0),
        }
    }

    fn shard(&self, channel: &[u8]) -> &RwLock<SubMap> {
        let h = self.hasher.hash_one(channel) as usize;
        &self.shards[h & (SHARDS - 1)]
    }

    fn add(&self, channel: &[u8], sub: Subscriber) {
        let mut map = self.shard(channel).write();
        let list = map.entry(channel.into()).or_insert_with(|| {
            self.len.fetch_add(1, Ordering::Relaxed);
            Vec::new()
        });
        list.push(sub);
    }

    fn remove(&self, channel: &[u8], id: u64) {
        remove_subscriber(&mut self.shard(channel).write(), &self.len, channel, id);
    }

    /// Subscribers of `channel` (none: an empty list).
    fn count(&self, channel: &[u8]) -> usize {
        self.shard(channel).read().get(channel).map_or(0, Vec::len)
    }

    /// Channel names matching `pattern` (all without one).
    fn names(&self, pattern: Option<&[u8]>) -> Vec<Box<[u8]>> {
        let mut names = Vec::new();
        for shard in self.shards.iter() {
            let map = shard.read();
            names.extend(
                map.keys()
                    .filter(|c| pattern.is_none_or(|p| glob_match(p, c, false)))
                    .cloned(),
            );
        }
        names
    }
}

/// Takes client `id` off `name`'s list, dropping the entry once empty (so
/// abandoned channels cost nothing) and keeping `len` in step.
fn remove_subscriber(map: &mut SubMap, len: &AtomicUsize, name: &[u8], id: u64) {
    let Some(list) = map.get_mut(name) else {
        return;
    };
    if let Some(i) = list.iter().position(|s| s.id == id) {
        list.remove(i);
    }
    if list.is_empty() {
        map.remove(name);
        len.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The server-wide Pub/Sub registry.
pub struct PubSub {
    channels: ChannelMap,
    shard_channels: ChannelMap,
    patterns: RwLock<SubMap>,
    /// Distinct patterns with a subscriber (PUBSUB NUMPAT); PUBLISH skips
    /// the pattern lock while it is 0.
    pattern_len: AtomicUsize,
}

impl Default for PubSub {
    fn default() -> Self {
        PubSub {
            channels: ChannelMap::new(),
            shard_channels: ChannelMap::new(),
            patterns: RwLock::new(SubMap::default()),
            pattern_len: AtomicUsize::new(0),
        }
    }
}

impl PubSub {
    /// Channels with subscribers (INFO `pubsub_channels`).
    pub fn channel_count(&self) -> usize {
        self.channels.len.load(Ordering::Relaxed)
    }

    /// Distinct patterns with subscribers (`pubsub_patterns`, NUMPAT).
    pub fn pattern_count(&self) -> usize {
        self.pattern_len.load(Ordering::Relaxed)
    }

    /// Shard channels with subscribers (`pubsubshard_channels`).
    pub fn shard_channel_count(&self) -> usize {
        self.shard_channels.len.load(Ordering::Relaxed)
    }

    fn map(&self, kind: Kind) -> &ChannelMap {
        match kind {
            Kind::Global => &self.channels,
            Kind::Shard => &self.shard_channels,
        }
    }

    /// Subscribers of `channel` (PUBSUB NUMSUB / SHARDNUMSUB).
    pub fn subscribers(&self, kind: Kind, channel: &[u8]) -> usize {
        self.map(kind).count(channel)
    }

    /// Every subscription of the clients `ids`, as (client id, channel or
    /// pattern, is a pattern): a walk of the whole registry, for the rare
    /// ACL change that revokes channels.
    pub fn subscriptions_of(&self, ids: &[u64]) -> Vec<(u64, Box<[u8]>, bool)> {
        let mut found = Vec::new();
        let mut collect = |map: &SubMap, is_pattern: bool| {
            for (name, subs) in map {
                for s in subs.iter().filter(|s| ids.contains(&s.id)) {
                    found.push((s.id, name.clone(), is_pattern));
                }
            }
        };
        for shard in self
            .channels
            .shards
            .iter()
            .chain(self.shard_channels.shards.iter())
        {
            collect(&shard.read(), false);
        }
        collect(&self.patterns.read(), true);
        found
    }

    /// Active channels matching `pattern` (PUBSUB CHANNELS / SHARDCHANNELS).
    pub fn channel_names(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Box<[u8]>> {
        self.map(kind).names(pattern)
    }
}

/// Plain channels or shard channels (SSUBSCRIBE): separate name spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE / PUBLISH.
    Global,
    /// SSUBSCRIBE / SPUBLISH.
    Shard,
}

impl Kind {
    fn subscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Global => b"subscribe",
            Kind::Shard => b"ssubscribe",
        }
    }

    fn unsubscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Global => b"unsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }

    fn message_word(self) -> &'static [u8] {
        match self {
            Kind::Global => b"message",
            Kind::Shard => b"smessage",
        }
    }
}

/// One client's subscriptions (Redis's `c->pubsub_channels`,
/// `pubsub_patterns`, `pubsubshard_channels`).
#[derive(Default)]
pub struct ClientSubs {
    channels: HashSet<Box<[u8]>, ahash::RandomState>,
    patterns: HashSet<Box<[u8]>, ahash::RandomState>,
    shard_channels: HashSet<Box<[u8]>, ahash::RandomState>,
}

impl ClientSubs {
    /// True when subscribed to anything (Redis's CLIENT_PUBSUB).
    #[inline]
    pub fn active(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard_channels.is_empty())
    }

    /// Channels plus patterns: the count SUBSCRIBE and PSUBSCRIBE report.
    fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Global => self.channels.len() + self.patterns.len(),
            Kind::Shard => self.shard_channels.len(),
        }
    }

    fn set(&mut self, kind: Kind) -> &mut HashSet<Box<[u8]>, ahash::RandomState> {
        match kind {
            Kind::Global => &mut self.channels,
            Kind::Shard => &mut self.shard_channels,
        }
    }

    /// Bytes the subscription sets hold, for client memory accounting.
    pub fn memory(&self) -> usize {
        let sets = [&self.channels, &self.patterns, &self.shard_channels];
        // Accounted after every batch: a client that never subscribed
        // costs one test.
        if sets.iter().all(|s| s.capacity() == 0) {
            return 0;
        }
        sets.iter()
            .map(|s| {
                s.capacity() * std::mem::size_of::<Box<[u8]>>()
                    + s.iter().map(|c| c.len()).sum::<usize>()
            })
            .sum()
    }
}

/// The connection a command runs for, when a push may be for it.
pub struct Local<'a> {
    /// Its session (id, subscriptions, CLIENT REPLY mode).
    pub session: &'a mut Session,
    /// Its output buffer.
    pub out: &'a mut ReplyBuf,
}

/// Appends a push encoded as a RESP2 array (`*n…`) to `out`, as RESP3's
/// `>n…` when `out` speaks RESP3.
pub fn write_push(out: &mut ReplyBuf, encoded: &[u8]) {
    match (out.protocol(), encoded.split_first()) {
        (Protocol::Resp3, Some((b'*', rest))) => {
            out.raw(b">");
            out.raw(rest);
        }
        _ => out.raw(encoded),
    }
}

impl Local<'_> {
    /// Writes a push to this connection, keeping it aside while CLIENT
    /// REPLY drops this command's reply (see [`restore_held_pushes`]).
    pub fn push(&mut self, encoded: &[u8]) {
        match self.session.reply_mode {
            ReplyMode::On | ReplyMode::SkipNext => write_push(self.out, encoded),
            ReplyMode::Off | ReplyMode::Skipping => {
                let mut held = ReplyBuf::new(self.out.protocol());
                write_push(&mut held, encoded);
                self.session.held_pushes.extend_from_slice(held.as_bytes());
            }
        }
    }
}

/// Puts back the pushes a command wrote while its reply was being dropped
/// (called by dispatch after CLIENT REPLY OFF/SKIP truncated the reply).
#[inline]
pub fn restore_held_pushes(session: &mut Session, out: &mut ReplyBuf) {
    if !session.held_pushes.is_empty() {
        out.raw(&session.held_pushes);
        session.held_pushes.clear();
    }
}

/// The error a RESP2 client in subscribed mode gets for a command other
/// than the subscribe family, PING, QUIT and RESET (None: allowed).
pub fn subscribed_mode_rejection(spec: &crate::cmd::CommandSpec) -> Option<String> {
    const ALLOWED: &[&str] = &[
        "ping",
        "subscribe",
        "ssubscribe",
        "unsubscribe",
        "sunsubscribe",
        "psubscribe",
        "punsubscribe",
        "quit",
        "reset",
    ];
    (!ALLOWED.contains(&spec.name)).then(|| {
        format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        )
    })
}

/// Encodes `parts` as a RESP2 array of bulk strings.
pub fn encode_array(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = ReplyBuf::new(Protocol::Resp2);
    out.array(parts.len());
    for p in parts {
        out.bulk(p);
    }
    out.as_bytes().to_vec()
}

/// `[word, name, count]`, the (un)subscribe confirmation; no name is a
/// null (UNSUBSCRIBE without subscriptions).
fn confirmation(proto: Protocol, word: &[u8], name: Option<&[u8]>, count: usize) -> Vec<u8> {
    let mut out = ReplyBuf::new(proto);
    out.array(3);
    out.bulk(word);
    match name {
        Some(n) => out.bulk(n),
        None => out.null(),
    }
    out.int(count as i64);
    out.as_bytes().to_vec()
}

/// Marks the connection subscribed or not (CLIENT LIST flag `P`, the
/// counts) after its subscriptions changed.
fn sync_shared(session: &Session) {
    let subs = &session.subs;
    let shared = &session.shared;
    shared.set_flag(cflags::PUBSUB, subs.active());
    shared.sub.store(subs.channels.len(), Ordering::Relaxed);
    shared.psub.store(subs.patterns.len(), Ordering::Relaxed);
    shared
        .ssub
        .store(subs.shard_channels.len(), Ordering::Relaxed);
}

fn me(session: &Session) -> Subscriber {
    Subscriber {
        worker: session.shared.worker,
        id: session.id,
    }
}

/// SUBSCRIBE / SSUBSCRIBE of one channel, confirming it to the client.
pub fn subscribe(server: &Server, local: &mut Local<'_>, kind: Kind, channel: &[u8]) {
    let sub = me(local.session);
    if local.session.subs.set(kind).insert(channel.into()) {
        server.pubsub.map(kind).add(channel, sub);
    }
    sync_shared(local.session);
    let count = local.session.subs.count(kind);
    let msg = confirmation(
        local.out.protocol(),
        kind.subscribe_word(),
        Some(channel),
        count,
    );
    local.push(&msg);
}

/// UNSUBSCRIBE / SUNSUBSCRIBE of one channel, confirming it.
pub fn unsubscribe(server: &Server, local: &mut Local<'_>, kind: Kind, channel: &[u8]) {
    if local.session.subs.set(kind).remove(channel) {
        server.pubsub.map(kind).remove(channel, local.session.id);
    }
    sync_shared(local.session);
    let count = local.session.subs.count(kind);
    let msg = confirmation(
        local.out.protocol(),
        kind.unsubscribe_word(),
        Some(channel),
        count,
    );
    local.push(&msg);
}

/// UNSUBSCRIBE / SUNSUBSCRIBE without arguments: every channel of the
/// kind, each confirmed, or one null confirmation when there were none.
pub fn unsubscribe_all(server: &Server, local: &mut Local<'_>, kind: Kind) {
    let channels: Vec<Box<[u8]>> = local.session.subs.set(kind).iter().cloned().collect();
    if channels.is_empty() {
        let count = local.session.subs.count(kind);
        let msg = confirmation(local.out.protocol(), kind.unsubscribe_word(), None, count);
        return local.push(&msg);
    }
    for c in channels {
        unsubscribe(server, local, kind, &c);
    }
}

/// PSUBSCRIBE of one pattern, confirming it.
pub fn psubscribe(server: &Server, local: &mut Local<'_>, pattern: &[u8]) {
    let sub = me(local.session);
    if local.session.subs.patterns.insert(pattern.into()) {
        let mut map = server.pubsub.patterns.write();
        let list = map.entry(pattern.into()).or_insert_with(|| {
            server.pubsub.pattern_len.fetch_add(1, Ordering::Relaxed);
            Vec::new()
        });
        list.push(sub);
    }
    sync_shared(local.session);
    let count = local.session.subs.count(Kind::Global);
    let msg = confirmation(local.out.protocol(), b"psubscribe", Some(pattern), count);
    local.push(&msg);
}

/// PUNSUBSCRIBE of one pattern, confirming it.
pub fn punsubscribe(server: &Server, local: &mut Local<'_>, pattern: &[u8]) {
    if local.session.subs.patterns.remove(pattern) {
        forget_pattern(server, pattern, local.session.id);
    }
    sync_shared(local.session);
    let count = local.session.subs.count(Kind::Global);
    let msg = confirmation(local.out.protocol(), b"punsubscribe", Some(pattern), count);
    local.push(&msg);
}

/// PUNSUBSCRIBE without arguments.
pub fn punsubscribe_all(server: &Server, local: &mut Local<'_>) {
    let patterns: Vec<Box<[u8]>> = local.session.subs.patterns.iter().cloned().collect();
    if patterns.is_empty() {
        let count = local.session.subs.count(Kind::Global);
        let msg = confirmation(local.out.protocol(), b"punsubscribe", None, count);
        return local.push(&msg);
    }
    for p in patterns {
        punsubscribe(server, local, &p);
    }
}

fn forget_pattern(server: &Server, pattern: &[u8], id: u64) {
    let ps = &server.pubsub;
    remove_subscriber(&mut ps.patterns.write(), &ps.pattern_len, pattern, id);
}

/// Drops every subscription of a client without telling it (RESET,
/// disconnect).
pub fn forget_client(server: &Server, session: &mut Session) {
    if !session.subs.active() {
        return;
    }
    let subs = std::mem::take(&mut session.subs);
    for c in &subs.channels {
        server.pubsub.channels.remove(c, session.id);
    }
    for c in &subs.shard_channels {
        server.pubsub.shard_channels.remove(c, session.id);
    }
    for p in &subs.patterns {
        forget_pattern(server, p, session.id);
    }
    sync_shared(session);
}

/// Gathers receivers per worker and sends each worker one message per
/// encoded push; the publishing client's own copy goes straight to its
/// output.
struct Fanout<'s, 'l, 'c> {
    server: &'s Server,
    local: Option<&'l mut Local<'c>>,
    by_worker: Vec<Vec<u64>>,
}

impl Fanout<'_, '_, '_> {
    /// Delivers `encoded` to `subs`; returns how many received it.
    fn deliver(&mut self, subs: &[Subscriber], encoded: &Arc<[u8]>) -> usize {
        let own = self.local.as_ref().map(|l| l.session.id);
        for s in subs {
            if Some(s.id) == own {
                if let Some(l) = self.local.as_mut() {
                    l.push(encoded);
                }
            } else if let Some(ids) = self.by_worker.get_mut(s.worker) {
                ids.push(s.id);
            }
        }
        for (worker, ids) in self.by_worker.iter_mut().enumerate() {
            if !ids.is_empty() {
                let ids = std::mem::take(ids);
                self.server.notify(
                    worker,
                    Msg::Push {
                        ids,
                        encoded: encoded.clone(),
                    },
                );
            }
        }
        subs.len()
    }
}

/// PUBLISH / SPUBLISH (and keyspace notifications): sends `message` on
/// `channel` to its subscribers and, for plain channels, to the clients
/// whose patterns match it. Returns the number of receivers as Redis counts
/// them (a client once per channel subscription and once per matching
/// pattern). `local` is the publishing connection, which gets its own copy
/// before its reply.
pub fn publish(
    server: &Server,
    local: Option<&mut Local<'_>>,
    kind: Kind,
    channel: &[u8],
    message: &[u8],
) -> usize {
    let ps = &server.pubsub;
    let workers = server.workers.get().map_or(0, Vec::len);
    let mut fan = Fanout {
        server,
        local,
        by_worker: vec![Vec::new(); workers],
    };
    let mut receivers = 0;
    {
        let map = ps.map(kind).shard(channel).read();
        if let Some(subs) = map.get(channel) {
            let encoded: Arc<[u8]> = encode_array(&[kind.message_word(), channel, message]).into();
            receivers += fan.deliver(subs, &encoded);
        }
    }
    if kind == Kind::Global && ps.pattern_len.load(Ordering::Relaxed) > 0 {
        let patterns = ps.patterns.read();
        for (pattern, subs) in patterns.iter() {
            if glob_match(pattern, channel, false) {
                let encoded: Arc<[u8]> =
                    encode_array(&[b"pmessage", pattern, channel, message]).into();
                receivers += fan.deliver(subs, &encoded);
            }
        }
    }
    receivers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_switch_to_resp3_framing() {
        let enc = encode_array(&[b"message", b"ch", b"hi"]);
        assert_eq!(enc, b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
        let mut out = ReplyBuf::new(Protocol::Resp3);
        write_push(&mut out, &enc);
        assert_eq!(
            out.as_bytes(),
            b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"
        );
        let mut out = ReplyBuf::new(Protocol::Resp2);
        write_push(&mut out, &enc);
        assert_eq!(out.as_bytes(), &enc[..]);
    }

    #[test]
    fn confirmations_match_redis_shapes() {
        let c = confirmation(Protocol::Resp2, b"unsubscribe", None, 0);
        assert_eq!(c, b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n");
        let c = confirmation(Protocol::Resp3, b"subscribe", Some(b"a"), 2);
        assert_eq!(c, b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:2\r\n");
        let c = confirmation(Protocol::Resp3, b"punsubscribe", None, 0);
        assert_eq!(c, b"*3\r\n$12\r\npunsubscribe\r\n_\r\n:0\r\n");
    }

    #[test]
    fn channel_map_counts_and_drops_empty_channels() {
        let m = ChannelMap::new();
        let a = Subscriber { worker: 0, id: 1 };
        let b = Subscriber { worker: 1, id: 2 };
        m.add(b"x", a);
        m.add(b"x", b);
        m.add(b"y", a);
        assert_eq!(m.len.load(Ordering::Relaxed), 2);
        assert_eq!(m.count(b"x"), 2);
        m.remove(b"x", 1);
        assert_eq!(m.count(b"x"), 1);
        m.remove(b"x", 2);
        m.remove(b"x", 2);
        assert_eq!(m.count(b"x"), 0);
        assert_eq!(m.len.load(Ordering::Relaxed), 1);
        let mut names = m.names(None);
        names.sort();
        assert_eq!(names, vec![Box::from(&b"y"[..])]);
        assert!(m.names(Some(b"z*")).is_empty());
        assert_eq!(m.names(Some(b"?")).len(), 1);
    }
}
