//! Replication, master side: SYNC/PSYNC full resynchronisation, the
//! replication stream, the backlog, ROLE, INFO replication and WAIT.
//!
//! The stream is the AOF's effects stream. Dispatch collects each
//! command's effects while the AOF logs *or* a replica is attached
//! ([`crate::persist::aof::Aof::is_collecting`]), and the AOF writer
//! thread, which merges every worker's units into one order, hands each
//! merged run to [`feed_stream`] as well as to the file. So replicas get
//! exactly the bytes the log gets: MULTI/EXEC around transactions, SELECT
//! when the database changes, expirations and evictions as DEL/UNLINK.
//!
//! A full sync ([`master`]) takes a point-in-time snapshot without fork.
//! Its cut, with every shard locked, also marks the feed
//! ([`crate::persist::aof::Aof::mark_replica_cut`]); once the writer has
//! streamed every unit before the cut it attaches the replica ([`attach`]),
//! whose stream starts there: nothing is lost or applied twice, and the
//! first unit after the cut begins with SELECT. The stream bytes gather in
//! the shared replication buffer ([`buffer`]), which is also the backlog,
//! while the RDB is sent; each replica is a cursor into it, bounded by
//! `client-output-buffer-limit replica`.
//!
//! A replica ([`replica`]) follows its master on a link thread that applies
//! the master's stream through the normal dispatch. Its own stream (for
//! its backlog and its replicas, chained replication) is then the master's
//! stream verbatim, fed by that thread ([`feed_from_master`]); the AOF
//! writer's effects are not streamed while this server follows a master.
//! Its replication id and offset are its master's, which is what PSYNC2
//! needs: a replica can partially resynchronise with its master after a
//! dropped link, and its siblings with it once it is promoted.

pub mod buffer;
pub mod failover;
pub mod master;
pub mod replica;
mod swapdb;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::exec::blocking::Waiter;
use crate::server::Server;
use buffer::ReplBuffer;
use master::Replica;

/// The stream bytes of a keep-alive PING.
const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
/// The stream bytes asking replicas for their offset (WAIT).
const GETACK: &[u8] = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";

/// Replication state shared by every thread.
pub struct Repl {
    ids: Mutex<ReplIds>,
    stream: Mutex<Stream>,
    /// `master_repl_offset`, mirrored out of the lock for WAIT.
    offset: AtomicU64,
    /// Clients blocked in WAIT: (wait, offset to reach, replicas needed).
    waits: Mutex<Vec<(Arc<Waiter>, u64, usize)>>,
    /// This server follows a master (REPLICAOF host port).
    following: AtomicBool,
    /// The link to the master, while following one.
    link: Mutex<Option<Arc<replica::MasterLink>>>,
    /// The replication id and offset (this server's own) describe a master
    /// history a PSYNC may continue (Redis's cached master).
    cached_master: AtomicBool,
    /// Full resyncs served, partial resyncs accepted and refused (INFO
    /// `sync_full`, `sync_partial_ok`, `sync_partial_err`).
    sync_stats: [AtomicU64; 3],
    /// Keys clients of a writable replica wrote, which this server expires
    /// itself (its master knows nothing of them): Redis's
    /// `slaveKeysWithExpire`.
    local_keys: Mutex<std::collections::HashSet<(usize, vireo_store::Key)>>,
    /// Held by the master link around applying a command and streaming it,
    /// and by a replica's full sync around its cut, so that on a replica
    /// the cut and the stream offset agree.
    apply: Mutex<()>,
    /// Replicas waiting for the next diskless transfer.
    pub diskless: master::DisklessQueue,
    /// The stream's database an RDB loaded at start-up recorded
    /// (`repl-stream-db`): a master link continuing that history starts
    /// in it.
    restored_stream_db: std::sync::atomic::AtomicUsize,
    /// FAILOVER's state (`master_failover_state`).
    pub failover: failover::Failover,
    /// The buffer's [`ReplBuffer::not_counted`], mirrored out of the lock
    /// for eviction, which reads it whenever memory is over `maxmemory`.
    not_counted: std::sync::atomic::AtomicUsize,
}

/// The replication aux fields of an RDB (Redis's `rdbSaveInfo`): the
/// history the data belongs to and where in it the snapshot was cut.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SaveInfo {
    /// `repl-stream-db`.
    pub stream_db: usize,
    /// `repl-id`.
    pub replid: String,
    /// `repl-offset`.
    pub offset: u64,
}

/// The replication ids INFO and PSYNC report.
struct ReplIds {
    replid: String,
    replid2: String,
    second_offset: i64,
}

/// The stream's state, changed by the AOF writer and the replica threads.
struct Stream {
    /// The backlog, and what attached replicas have not sent yet.
    backlog: Option<ReplBuffer>,
    /// Replicas past their cut, in attach order.
    replicas: Vec<Arc<Replica>>,
    /// Full syncs in progress plus replicas attached: effects are
    /// collected while it is above zero.
    users: usize,
    last_ping: Instant,
    /// Since when `users` is zero (Redis's `repl_no_slaves_since`): a
    /// master frees its backlog `repl-backlog-ttl` seconds after.
    no_replicas_since: Instant,
}

impl Stream {
    /// Drops the backlog's oldest blocks no attached replica needs.
    fn trim(&mut self) {
        let oldest = self.replicas.iter().map(|r| r.cursor()).min();
        if let Some(buffer) = self.backlog.as_mut() {
            buffer.trim(oldest);
        }
    }
}

impl Default for Repl {
    fn default() -> Self {
        Repl {
            ids: Mutex::new(ReplIds {
                replid: random_replid(),
                replid2: "0".repeat(40),
                second_offset: -1,
            }),
            stream: Mutex::new(Stream {
                backlog: None,
                replicas: Vec::new(),
                users: 0,
                last_ping: Instant::now(),
                no_replicas_since: Instant::now(),
            }),
            offset: AtomicU64::new(0),
            waits: Mutex::new(Vec::new()),
            following: AtomicBool::new(false),
            link: Mutex::new(None),
            cached_master: AtomicBool::new(false),
            local_keys: Mutex::new(Default::default()),
            sync_stats: Default::default(),
            apply: Mutex::new(()),
            diskless: Default::default(),
            restored_stream_db: Default::default(),
            failover: Default::default(),
            not_counted: Default::default(),
        }
    }
}

/// 40 random hex digits, as Redis's `getRandomHexChars`.
fn random_replid() -> String {
    let mut rng = fastrand::Rng::new();
    (0..40)
        .map(|_| char::from_digit(rng.u32(..16), 16).unwrap_or('0'))
        .collect()
}

impl Repl {
    /// The current replication id (`master_replid`).
    pub fn replid(&self) -> String {
        self.ids.lock().replid.clone()
    }

    /// `master_repl_offset`: stream bytes produced since start.
    pub fn offset(&self) -> u64 {
        self.offset.load(Ordering::SeqCst)
    }

    /// On a master feeding replicas, waits (at most 100 ms, normally the
    /// AOF writer's batch delay) until every write acknowledged so far is
    /// in the stream, so that [`Repl::offset`] read next covers them. The
    /// writer thread feeds the stream in batches; without this, INFO,
    /// ROLE and WAIT could report an offset behind writes a client has
    /// seen acknowledged, and a replica "in sync" by the offsets (Redis's
    /// tests wait so) would still lack them.
    pub fn settle(&self, server: &Server) {
        if !self.is_replica() && server.aof.is_replicating() {
            server
                .aof
                .wait_written(std::time::Duration::from_millis(100));
        }
    }

    /// DEBUG CHANGE-REPL-ID: a new id, and no secondary one.
    pub fn change_replid(&self) {
        let mut ids = self.ids.lock();
        ids.replid = random_replid();
        ids.replid2 = "0".repeat(40);
        ids.second_offset = -1;
    }

    /// The replicas attached now.
    pub fn replicas(&self) -> Vec<Arc<Replica>> {
        self.stream.lock().replicas.clone()
    }

    /// Replicas online that acknowledged within `max_lag` seconds
    /// (`min-replicas-max-lag`).
    pub fn good_replicas(&self, max_lag: u64) -> usize {
        let s = self.stream.lock();
        s.replicas
            .iter()
            .filter(|r| r.is_online() && r.lag_secs() <= max_lag)
            .count()
    }

    /// How many attached replicas acknowledged `offset` (WAIT).
    pub fn acked(&self, offset: u64) -> usize {
        let s = self.stream.lock();
        s.replicas
            .iter()
            .filter(|r| r.ack_offset() >= offset)
            .count()
    }

    /// For a shutdown: how many replicas there are, how many of them have
    /// not acknowledged the whole stream, and Redis's log line for each
    /// lagging one attached to the stream (one still in its full sync
    /// lags too, unnamed: its link is not attached yet).
    pub fn lagging_replicas(&self) -> (usize, usize, Vec<String>) {
        let offset = self.offset();
        let s = self.stream.lock();
        let lines: Vec<String> = s
            .replicas
            .iter()
            .filter(|r| r.ack_offset() != offset)
            .map(|r| r.lag_report(offset))
            .collect();
        let syncing = s.users.saturating_sub(s.replicas.len());
        (s.replicas.len() + syncing, lines.len() + syncing, lines)
    }

    /// Asks every replica for its offset, in the stream (WAIT).
    pub fn request_acks(&self, server: &Server) {
        let mut s = self.stream.lock();
        if !s.replicas.is_empty() {
            self.append(&mut s, GETACK, server);
        }
    }

    /// Replication buffer bytes `maxmemory` leaves out (see
    /// [`ReplBuffer::not_counted`]).
    pub fn not_counted_memory(&self) -> usize {
        self.not_counted.load(Ordering::Relaxed)
    }

    /// Trims the backlog ([`Stream::trim`]) and mirrors what is left out
    /// of `maxmemory` after it.
    fn trim(&self, s: &mut Stream) {
        s.trim();
        self.publish_not_counted(s);
    }

    /// Mirrors the buffer's [`ReplBuffer::not_counted`] after a change.
    fn publish_not_counted(&self, s: &Stream) {
        let bytes = s.backlog.as_ref().map_or(0, ReplBuffer::not_counted);
        self.not_counted.store(bytes, Ordering::Relaxed);
    }

    /// Appends stream bytes to the shared buffer and wakes every attached
    /// replica. When that took a new block, as Redis, checks the
    /// replicas' output limits (closing those past theirs) and trims the
    /// backlog.
    fn append(&self, s: &mut Stream, bytes: &[u8], server: &Server) {
        let Some(buffer) = s.backlog.as_mut() else {
            return;
        };
        let new_block = buffer.feed(bytes);
        self.offset.store(buffer.offset(), Ordering::SeqCst);
        if new_block {
            buffer.set_backlog_size(backlog_size(server));
            for r in &s.replicas {
                let held = buffer.held_by(r.cursor());
                r.client.omem.store(held, Ordering::Relaxed);
                r.check_output_limit(held, buffer.backlog_size(), server);
            }
            // Those cut off stop holding the buffer now, not when their
            // threads notice.
            s.replicas.retain(|r| !r.is_closed());
            self.trim(s);
        }
        for r in &s.replicas {
            r.wake();
        }
    }

    /// Copies into `out` at most `max` stream bytes `r` has not sent, and
    /// moves its cursor past them (its sender writes them next). Trims
    /// the backlog when that releases a block.
    pub(crate) fn take_for(&self, r: &Replica, max: usize, out: &mut Vec<u8>) {
        let mut s = self.stream.lock();
        let Some(buffer) = s.backlog.as_ref() else {
            return;
        };
        let next = buffer.read(r.cursor(), max, out);
        r.set_cursor(next);
        r.client.omem.store(buffer.held_by(next), Ordering::Relaxed);
        self.trim(&mut s);
    }

    /// `mem_total_replication_buffers`, and its split between the backlog
    /// and the replicas as Redis reports it (`mem_replication_backlog`,
    /// `mem_clients_slaves`): what exceeds `repl-backlog-size` counts as
    /// the replicas' while any is attached.
    pub fn buffer_memory(&self) -> [usize; 3] {
        let s = self.stream.lock();
        let Some(buffer) = s.backlog.as_ref() else {
            return [0; 3];
        };
        let (total, size) = (buffer.mem(), buffer.backlog_size());
        if !s.replicas.is_empty() && total > size {
            [total, size, total - size]
        } else {
            [total, total, 0]
        }
    }

    /// The replication info a snapshot cut now records, as Redis's
    /// `rdbPopulateSaveInfo`: on a replica its master's history (the caller
    /// holds [`Repl::hold_stream`], so the offset is exact), on a master
    /// with a backlog its own at `offset` (the stream position of the
    /// cut). None when there is no history to continue.
    pub fn save_info(&self, offset: u64) -> Option<SaveInfo> {
        let (stream_db, offset) = match self.link() {
            Some(link) => (link.stream_db.load(Ordering::Relaxed), self.offset()),
            None if self.stream.lock().backlog.is_some() => (0, offset),
            None => return None,
        };
        Some(SaveInfo {
            stream_db,
            replid: self.replid(),
            offset,
        })
    }

    /// Holds a replica's master link between two commands (a save's cut
    /// must see the data and the offset agree); None on a master.
    pub fn hold_stream(&self) -> Option<parking_lot::MutexGuard<'_, ()>> {
        self.is_replica().then(|| self.apply.lock())
    }

    /// Start-up loaded an RDB recording `info` (Redis's
    /// `loadDataFromDisk`): a replica takes the history as its own, to
    /// continue it with PSYNC; a master keeps it as its secondary id, so
    /// its former replicas can continue with it.
    pub fn restore_history(&self, server: &Server, info: &SaveInfo, will_follow: bool) {
        let mut ids = self.ids.lock();
        if will_follow {
            ids.replid = info.replid.clone();
            self.restored_stream_db
                .store(info.stream_db, Ordering::Relaxed);
        } else {
            ids.replid2 = info.replid.clone();
            ids.second_offset = info.offset as i64 + 1;
        }
        drop(ids);
        self.offset.store(info.offset, Ordering::SeqCst);
        let mut s = self.stream.lock();
        s.backlog = Some(ReplBuffer::new(backlog_size(server), info.offset));
        s.no_replicas_since = Instant::now();
        server.aof.set_replicating(true);
    }

    /// INFO's `sync_full`, `sync_partial_ok` and `sync_partial_err`.
    pub fn sync_stats(&self) -> [u64; 3] {
        self.sync_stats
            .each_ref()
            .map(|s| s.load(Ordering::Relaxed))
    }

    /// CONFIG RESETSTAT zeroes the sync counters, as Redis's does.
    pub fn reset_sync_stats(&self) {
        for s in &self.sync_stats {
            s.store(0, Ordering::Relaxed);
        }
    }

    /// Counts a full resync served.
    fn count_full_sync(&self) {
        self.sync_stats[0].fetch_add(1, Ordering::Relaxed);
    }

    /// True while this server follows a master.
    pub fn is_replica(&self) -> bool {
        self.following.load(Ordering::Acquire)
    }

    /// The link to the master, while following one.
    pub fn link(&self) -> Option<Arc<replica::MasterLink>> {
        self.link.lock().clone()
    }

    /// The secondary id and the offset it is valid up to (PSYNC2).
    fn secondary(&self) -> (String, i64) {
        let ids = self.ids.lock();
        (ids.replid2.clone(), ids.second_offset)
    }

    /// A new history begins at the master's `replid` and `offset` (a full
    /// sync finished): no secondary id, an empty backlog at `offset`, and
    /// this server's own replicas must sync again.
    fn reset_history(&self, server: &Server, replid: &str, offset: u64) {
        {
            let mut ids = self.ids.lock();
            ids.replid = replid.to_string();
            ids.replid2 = "0".repeat(40);
            ids.second_offset = -1;
        }
        let mut s = self.stream.lock();
        s.backlog = Some(ReplBuffer::new(backlog_size(server), offset));
        self.publish_not_counted(&s);
        // Once promoted, this server's own writes feed the backlog.
        server.aof.set_replicating(true);
        self.offset.store(offset, Ordering::SeqCst);
        for r in s.replicas.drain(..) {
            r.close();
        }
    }

    /// The master changed its replication id on a partial resync (it was
    /// promoted): the old id stays valid as the secondary one up to here.
    fn adopt_replid(&self, replid: &str) {
        let mut ids = self.ids.lock();
        ids.replid2 = std::mem::replace(&mut ids.replid, replid.to_string());
        ids.second_offset = self.offset() as i64 + 1;
    }

    /// This server stops following (REPLICAOF NO ONE): a new id, with the
    /// old one kept as the secondary id so that replicas of the same
    /// master can continue with it (Redis's `shiftReplicationId`).
    fn shift_replid(&self) {
        let mut ids = self.ids.lock();
        ids.replid2 = std::mem::replace(&mut ids.replid, random_replid());
        ids.second_offset = self.offset() as i64 + 1;
        tracing::warn!(
            "Setting secondary replication ID to {}, valid up to offset: {}. New replication ID is {}",
            ids.replid2,
            ids.second_offset,
            ids.replid
        );
    }

    /// Closes the links of this server's replicas (they sync again). On a
    /// replica turning master, the backlog's time to live starts now, as
    /// Redis's: a promoted replica keeps its history for replicas that
    /// connect after the failover.
    fn disconnect_replicas(&self) {
        let mut s = self.stream.lock();
        for r in &s.replicas {
            r.close();
        }
        s.no_replicas_since = Instant::now();
    }

    /// Adds the INFO replication fields, in Redis's order.
    pub fn info_fields(&self, server: &Server) -> Vec<(String, String)> {
        self.settle(server);
        let mut f: Vec<(String, String)> = Vec::new();
        let link = self.link();
        let mut kv = |k: &str, v: String| f.push((k.to_string(), v));
        match &link {
            Some(link) => {
                kv("role", "slave".into());
                for (k, v) in link.info_fields(server) {
                    kv(k, v);
                }
            }
            None => kv("role", "master".into()),
        }
        let hot = &server.config.hot;
        let min_write = hot.min_replicas_to_write.load(Ordering::Relaxed);
        let max_lag = hot.min_replicas_max_lag.load(Ordering::Relaxed);
        let good = (min_write > 0 && max_lag > 0).then(|| self.good_replicas(max_lag));
        let s = self.stream.lock();
        kv("connected_slaves", s.replicas.len().to_string());
        if let Some(good) = good {
            kv("min_slaves_good_slaves", good.to_string());
        }
        for (i, r) in s.replicas.iter().enumerate() {
            kv(&format!("slave{i}"), r.info_line(self.offset()));
        }
        kv("master_failover_state", self.failover.state_name().into());
        let ids = self.ids.lock();
        kv("master_replid", ids.replid.clone());
        kv("master_replid2", ids.replid2.clone());
        kv("master_repl_offset", self.offset().to_string());
        kv("second_repl_offset", ids.second_offset.to_string());
        let (active, size, first, histlen) = match &s.backlog {
            Some(b) => (
                1,
                b.backlog_size() as u64,
                b.first_byte_offset(),
                b.histlen(),
            ),
            None => (0, backlog_size(server) as u64, 0, 0),
        };
        kv("repl_backlog_active", active.to_string());
        kv("repl_backlog_size", size.to_string());
        kv("repl_backlog_first_byte_offset", first.to_string());
        kv("repl_backlog_histlen", histlen.to_string());
        f
    }
}

/// `repl-backlog-size` in bytes.
fn backlog_size(server: &Server) -> usize {
    config_u64(server, "repl-backlog-size").unwrap_or(1 << 20) as usize
}

/// A numeric parameter as CONFIG GET reports it.
/// Whether a socket error only means "not now" (a timeout, or EINTR after
/// SIGSTOP/SIGCONT): the replication links retry those.
fn retry_later(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
    matches!(e.kind(), WouldBlock | TimedOut | Interrupted)
}

fn config_u64(server: &Server, name: &str) -> Option<u64> {
    server.config.get_one(name)?.parse().ok()
}

/// Gives the AOF writer's merged units to the replication stream (called
/// by the writer only, so the stream keeps the writer's order). A replica
/// streams its master's bytes instead ([`feed_from_master`]).
pub fn feed_stream(server: &Server, bytes: &[u8]) {
    let repl = &server.repl;
    if repl.is_replica() {
        return;
    }
    let mut s = repl.stream.lock();
    repl.append(&mut s, bytes, server);
}

/// Sends `cmd` to the replicas as it is, in no database and not to the AOF
/// (DEBUG REPLICATE, for testing divergence). A replica passes on only its
/// master's stream.
pub fn feed_command(server: &Server, cmd: &[&[u8]]) {
    let repl = &server.repl;
    if repl.is_replica() {
        return;
    }
    let mut bytes = Vec::new();
    crate::persist::aof::reader::encode(&mut bytes, cmd);
    let mut s = repl.stream.lock();
    repl.append(&mut s, &bytes, server);
}

/// A master restarting on a dump that recorded its history found `key`
/// expired: the deletion goes to the restored backlog (SELECT first when
/// `selected` differs), as Redis's load propagates it, so a replica
/// continuing the history deletes the key too.
pub fn feed_load_deletion(server: &Server, selected: &mut Option<usize>, db: usize, key: &[u8]) {
    let mut bytes = Vec::new();
    if *selected != Some(db) {
        let mut num = itoa::Buffer::new();
        crate::persist::aof::reader::encode(
            &mut bytes,
            &[&b"SELECT"[..], num.format(db).as_bytes()],
        );
        *selected = Some(db);
    }
    let del: &[u8] = if server.config.lazyfree_lazy_expire() {
        b"UNLINK"
    } else {
        b"DEL"
    };
    crate::persist::aof::reader::encode(&mut bytes, &[del, key]);
    let repl = &server.repl;
    let mut s = repl.stream.lock();
    repl.append(&mut s, &bytes, server);
}

/// A replica applied `bytes` of its master's stream: they go on, verbatim,
/// to its backlog and its own replicas (created at the first byte if a
/// partial resync found none).
fn feed_from_master(server: &Server, bytes: &[u8]) {
    let repl = &server.repl;
    let mut s = repl.stream.lock();
    if s.backlog.is_none() {
        s.backlog = Some(ReplBuffer::new(backlog_size(server), repl.offset()));
        server.aof.set_replicating(true);
    }
    repl.append(&mut s, bytes, server);
}

/// The reply a replica gets for SYNC or PSYNC when this server cannot
/// serve one now: a replica whose own master link is down.
pub fn sync_refusal(server: &Server) -> Option<&'static str> {
    if server.repl.failover.is_active() {
        return Some("NOMASTERLINK Can't SYNC while failing over");
    }
    let link = server.repl.link()?;
    (!link.is_connected()).then_some("NOMASTERLINK Can't SYNC while not connected with my master")
}

/// Attaches `replica` for a partial resync from stream offset `psync_offset`
/// (the first byte it lacks) if `replid` names this history and the backlog
/// still holds that offset, as Redis's `masterTryPartialResynchronization`:
/// queues `+CONTINUE <replid>` and the backlog from there. False (logged)
/// when a full resync is needed.
pub fn try_continue(
    server: &Server,
    replica: &Arc<Replica>,
    replid: &str,
    psync_offset: i64,
) -> bool {
    let repl = &server.repl;
    let name = replica.name();
    let (id, (id2, second_offset)) = (repl.replid(), repl.secondary());
    let known = replid.eq_ignore_ascii_case(&id)
        || (replid.eq_ignore_ascii_case(&id2) && psync_offset <= second_offset);
    if !known {
        if replid != "?" {
            repl.sync_stats[2].fetch_add(1, Ordering::Relaxed);
        }
        if replid == "?" {
            tracing::info!("Full resync requested by replica {name}");
        } else if !replid.eq_ignore_ascii_case(&id) && !replid.eq_ignore_ascii_case(&id2) {
            tracing::info!("Partial resynchronization not accepted: Replication ID mismatch (Replica asked for '{replid}', my replication IDs are '{id}' and '{id2}')");
        } else {
            tracing::info!("Partial resynchronization not accepted: Requested offset for second ID was {psync_offset}, but I can reply up to {second_offset}");
        }
        return false;
    }
    let mut s = repl.stream.lock();
    let from = u64::try_from(psync_offset).ok();
    let held = match (&s.backlog, from) {
        (Some(b), Some(from)) if b.holds(from) => Some(from),
        _ => None,
    };
    let Some(from) = held else {
        tracing::info!("Unable to partial resync with replica {name} for lack of backlog (Replica request was: {psync_offset}).");
        if psync_offset > repl.offset() as i64 {
            tracing::warn!("Warning: replica {name} tried to PSYNC with an offset that is greater than the master replication offset.");
        }
        repl.sync_stats[2].fetch_add(1, Ordering::Relaxed);
        return false;
    };
    let len = repl.offset() + 1 - from;
    repl.sync_stats[1].fetch_add(1, Ordering::Relaxed);
    replica.continue_from(from, &repl.replid());
    s.replicas.push(replica.clone());
    drop(s);
    tracing::info!("Partial resynchronization request from {name} accepted. Sending {len} bytes of backlog starting from offset {psync_offset}.");
    true
}

/// A full sync is starting: effects must be collected from before its
/// cut on.
pub fn sync_started(server: &Server) {
    let mut s = server.repl.stream.lock();
    s.users += 1;
    server.aof.set_replicating(true);
}

/// Attaches `replica` at the stream's current offset (the writer calls this
/// at the replica's cut). Creates the backlog with the first replica, as
/// Redis does. Returns the offset the replica starts at.
pub fn attach(server: &Server, replica: Arc<Replica>) -> u64 {
    let repl = &server.repl;
    let mut s = repl.stream.lock();
    if s.backlog.is_none() {
        if !repl.is_replica() {
            // As Redis's: a backlog made from scratch starts a new history
            // (none before it can be continued).
            repl.change_replid();
            let ids = repl.ids.lock();
            tracing::info!(
                "Replication backlog created, my new replication IDs are '{}' and '{}'",
                ids.replid,
                ids.replid2
            );
        }
        let offset = repl.offset();
        s.backlog = Some(ReplBuffer::new(backlog_size(server), offset));
    }
    let offset = repl.offset();
    replica.start_at(offset);
    s.replicas.push(replica);
    offset
}

/// Closes the link of replica client `client_id` now, if it is one
/// attached to the stream (CLIENT KILL): its replica sees the link drop
/// at once, as Redis closes a killed replica before its next reply.
pub fn close_replica_link(server: &Server, client_id: u64) {
    let mut s = server.repl.stream.lock();
    if let Some(r) = s.replicas.iter().find(|r| r.client.id == client_id) {
        r.close();
        // As Redis frees a killed replica at once, it stops holding the
        // shared buffer now (INFO `mem_clients_slaves` right after CLIENT
        // KILL shows it), not when its threads notice.
        s.replicas.retain(|r| !r.is_closed());
        server.repl.trim(&mut s);
    }
}

/// Takes the links seen closed out of the stream at once, so they stop
/// holding the shared buffer (and counting as connected) before their
/// threads end, which may wait for a snapshot to finish.
pub fn forget_closed(server: &Server) {
    let mut s = server.repl.stream.lock();
    s.replicas.retain(|r| !r.is_closed());
    server.repl.trim(&mut s);
}

/// A replica (or a full sync that never attached) is gone. Effects stay
/// collected while a backlog exists: a replica may come back for a partial
/// resync, and the backlog must hold every write since it left.
pub fn detach(server: &Server, client_id: u64) {
    let mut s = server.repl.stream.lock();
    s.replicas.retain(|r| r.client.id != client_id);
    server.repl.trim(&mut s);
    s.users = s.users.saturating_sub(1);
    if s.users == 0 {
        s.no_replicas_since = Instant::now();
        if s.backlog.is_none() {
            server.aof.set_replicating(false);
        }
    }
}

/// Frees the backlog of a master that has had no replica for more than
/// `repl-backlog-ttl` seconds (0: never), as Redis's `replicationCron`:
/// with a new replication id and no secondary one, since writes from now
/// on leave the offset where it is and no replica may continue this
/// history past them. A replica keeps its backlog (it may be promoted).
pub fn free_idle_backlog(server: &Server) {
    let repl = &server.repl;
    let ttl = config_u64(server, "repl-backlog-ttl").unwrap_or(3600);
    if ttl == 0 || repl.is_replica() {
        return;
    }
    let mut s = repl.stream.lock();
    if s.users > 0 || s.backlog.is_none() || s.no_replicas_since.elapsed().as_secs() <= ttl {
        return;
    }
    repl.change_replid();
    s.backlog = None;
    server.aof.set_replicating(false);
    tracing::info!("Replication backlog freed after {ttl} seconds without connected replicas.");
}

/// Registers a client blocked in WAIT until `needed` replicas acknowledge
/// `target`, and asks the replicas for their offsets.
pub fn wait_for_acks(server: &Server, waiter: Arc<Waiter>, target: u64, needed: usize) {
    server.repl.waits.lock().push((waiter, target, needed));
    server.repl.request_acks(server);
}

/// A replica acknowledged an offset: ends the WAITs now satisfied (and
/// forgets those that ended otherwise).
pub fn acked(server: &Server) {
    let repl = &server.repl;
    let mut waits = repl.waits.lock();
    waits.retain(|(w, target, needed)| {
        if w.is_claimed() {
            return false;
        }
        let n = repl.acked(*target);
        if n < *needed {
            return true;
        }
        if server.blocking.claim(&server.keyspace, w) {
            let reply = format!(":{n}\r\n").into_bytes();
            crate::exec::blocking::deliver(server, w, reply, false);
        }
        false
    });
}

/// Sends a PING down the stream if `repl-ping-replica-period` seconds went
/// by since the last one and replicas are attached. A replica sends none:
/// its stream is its master's, byte for byte (its own PINGs would put its
/// offset ahead of its master's, and its replicas could not continue with
/// the master after a promotion).
pub fn ping_if_due(server: &Server) {
    let period = config_u64(server, "repl-ping-replica-period").unwrap_or(10);
    let repl = &server.repl;
    if repl.is_replica() || repl.failover.holds_pings() {
        return;
    }
    let mut s = repl.stream.lock();
    if s.replicas.is_empty() || s.last_ping.elapsed() < Duration::from_secs(period) {
        return;
    }
    s.last_ping = Instant::now();
    repl.append(&mut s, PING, server);
}
