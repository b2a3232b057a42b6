//! One replica link on the master: its full sync and then its share of the
//! stream.
//!
//! When a client sends SYNC or PSYNC its worker hands the socket over
//! ([`start`]); from then on two threads own the link, in blocking I/O: the
//! sender makes the snapshot (an RDB file in the working directory, from a
//! cut without fork), sends it as one bulk, then writes the stream bytes
//! that gather in the replica's buffer; the reader takes REPLCONF ACK from
//! the replica. The stream bytes are not copied per replica: the link is
//! a cursor into the shared replication buffer ([`super::buffer`]), and
//! the sender copies one batch at a time from there. The client stays in
//! the client registry (CLIENT LIST flag `S`) until the link ends.
//! Whichever thread sees the link fail shuts the socket down, which ends
//! the other.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use vireo_resp::{ParseLimits, Parser};
use vireo_store::clock::now_ms;

use crate::net::client::{cflags, ClientShared};
use crate::net::link::Link;
use crate::persist::aof::rewrite::{write_base, write_base_to, BaseFormat};
use crate::server::Server;

mod diskless;
pub use diskless::Queue as DisklessQueue;

/// How the replica asked to synchronise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyncKind {
    /// SYNC: the RDB bulk and the stream, no preamble.
    Sync,
    /// PSYNC replid offset: `+CONTINUE` and the backlog from `offset` when
    /// this server's history has it, else `+FULLRESYNC <replid> <offset>`
    /// and a full sync.
    Psync { replid: String, offset: i64 },
}

/// What REPLCONF told about a client before it asked to sync, kept in its
/// session.
#[derive(Debug, Default)]
pub struct ClientRepl {
    /// REPLCONF listening-port.
    pub listening_port: u16,
    /// REPLCONF ip-address.
    pub ip_address: Option<String>,
    /// SYNC or PSYNC ran: the worker hands the connection over.
    pub handoff: Option<SyncKind>,
    /// REPLCONF capa eof: the replica reads a diskless (EOF-marked) RDB.
    pub capa_eof: bool,
    /// REPLCONF rdb-only 1: the client wants the RDB and no stream after
    /// it (`redis-cli --rdb`); the link ends once the RDB is sent.
    pub rdb_only: bool,
    /// REPLCONF rdb-filter-only: the parts of the RDB it wants.
    pub filter: RdbFilter,
}

/// What REPLCONF rdb-filter-only asks of a replica's RDB. Redis 7.0 knows
/// one include filter, `functions`: any filter leaves the data out, and
/// the function libraries too unless it names them (`redis-cli
/// --functions-rdb`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RdbFilter {
    /// No filter: the whole dataset.
    #[default]
    Everything,
    /// `rdb-filter-only functions`: the libraries, no keys.
    FunctionsOnly,
    /// `rdb-filter-only ""`: an RDB with neither (`redis-cli --replica`,
    /// which wants only the stream).
    Nothing,
}

impl RdbFilter {
    /// Applies `REPLCONF rdb-filter-only <value>` (space-separated
    /// filters, quoted as config lines are). As in Redis, an unknown
    /// filter is refused after the filter was already narrowed: the error
    /// leaves it that way.
    pub fn apply(&mut self, value: &str) -> Result<(), String> {
        let filters = crate::config::split_args(value)
            .ok_or_else(|| "ERR Missing rdb-filter-only values".to_string())?;
        *self = RdbFilter::Nothing;
        for f in filters {
            if !f.eq_ignore_ascii_case("functions") {
                return Err(format!("ERR Unsupported rdb-filter-only option: {f}"));
            }
            *self = RdbFilter::FunctionsOnly;
        }
        Ok(())
    }

    /// True when the RDB is not the whole dataset: it is then sent over
    /// the socket only, never through the RDB file.
    pub fn is_filtered(self) -> bool {
        self != RdbFilter::Everything
    }
}

/// Link states, for INFO's `state=`.
const WAIT_BGSAVE: u8 = 0;
const SEND_BULK: u8 = 1;
const ONLINE: u8 = 2;

/// A replica link, shared by its threads and the stream.
pub struct Replica {
    /// The replica's entry in the client registry.
    pub client: Arc<ClientShared>,
    /// The address the replica announced, for INFO and ROLE.
    pub ip: String,
    pub port: u16,
    socket: Link,
    out: Mutex<Outbox>,
    cond: Condvar,
    state: AtomicU8,
    ack_offset: AtomicU64,
    ack_ms: AtomicU64,
    /// The stream offset of the next byte to send (0 until the link is
    /// attached to the stream).
    cursor: AtomicU64,
    closed: AtomicBool,
    /// The replica announced `capa eof`.
    capa_eof: bool,
    /// REPLCONF rdb-only 1: the link ends once the RDB is sent.
    rdb_only: bool,
    /// REPLCONF rdb-filter-only.
    filter: RdbFilter,
    /// A diskless transfer's outcome for this replica (`diskless::PENDING`…).
    rdb_outcome: AtomicU8,
    /// The replica sent a REPLCONF ACK (a diskless transfer waits for the
    /// first before streaming).
    got_ack: AtomicBool,
}

/// The sender's side of the link, besides the shared stream.
#[derive(Default)]
struct Outbox {
    /// Set at the cut: the stream offset the replica starts at.
    start: Option<u64>,
    /// Bytes that go before the stream: replies still pending when the
    /// client asked to sync, `+CONTINUE`.
    pre: Vec<u8>,
    /// The stream grew since the sender last looked.
    woken: bool,
    /// Since when the output buffer is over the soft limit.
    soft_since: Option<Instant>,
}

impl Replica {
    /// True once the RDB is sent and the replica follows the stream.
    pub fn is_online(&self) -> bool {
        self.state.load(Ordering::Relaxed) == ONLINE
    }

    /// The offset the replica last acknowledged (REPLCONF ACK).
    pub fn ack_offset(&self) -> u64 {
        self.ack_offset.load(Ordering::SeqCst)
    }

    /// Called at the cut: the replica's stream starts after `offset`.
    pub(super) fn start_at(&self, offset: u64) {
        self.set_cursor(offset + 1);
        self.out.lock().start = Some(offset);
        self.cond.notify_all();
    }

    /// The stream offset of the next byte to send.
    pub(super) fn cursor(&self) -> u64 {
        self.cursor.load(Ordering::SeqCst)
    }

    /// Moves the cursor (under the stream's lock).
    pub(super) fn set_cursor(&self, cursor: u64) {
        self.cursor.store(cursor, Ordering::SeqCst);
    }

    /// Tells the sender the stream grew.
    pub(super) fn wake(&self) {
        self.out.lock().woken = true;
        self.cond.notify_all();
    }

    /// Closes the link if `used` bytes of output buffer pass
    /// `client-output-buffer-limit replica`. As in Redis, a hard limit
    /// below `backlog_size` counts as `backlog_size`: the replica shares
    /// the backlog's memory, and a partial resync must not be cut off at
    /// once.
    pub(super) fn check_output_limit(&self, used: usize, backlog_size: usize, server: &Server) {
        if self.is_closed() {
            return;
        }
        let used = used as u64;
        let limits = &server.config.hot.client_output_buffer_limits[1];
        let hard = match limits.hard.load(Ordering::Relaxed) {
            0 => 0,
            hard => hard.max(backlog_size as u64),
        };
        let soft = limits.soft.load(Ordering::Relaxed);
        let soft_secs = limits.soft_seconds.load(Ordering::Relaxed);
        let mut out = self.out.lock();
        let over_soft_long = if soft > 0 && used >= soft {
            let since = *out.soft_since.get_or_insert_with(Instant::now);
            since.elapsed() > Duration::from_secs(soft_secs)
        } else {
            out.soft_since = None;
            false
        };
        drop(out);
        if (hard > 0 && used >= hard) || over_soft_long {
            tracing::warn!(
                "Client {} scheduled to be closed ASAP for overcoming of output buffer limits.",
                self.client.info_line()
            );
            self.close();
        }
    }

    /// `ip:port` as Redis names a replica in its log lines.
    pub(super) fn name(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }

    /// A partial resync: the link is online from stream offset `from`
    /// (the first byte the replica lacks), with `+CONTINUE <replid>`
    /// queued first (after any reply still pending). Called under the
    /// stream's lock.
    pub(super) fn continue_from(&self, from: u64, replid: &str) {
        self.set_cursor(from);
        let mut out = self.out.lock();
        out.pre
            .extend_from_slice(format!("+CONTINUE {replid}\r\n").as_bytes());
        out.woken = true;
        out.start = Some(from - 1);
        self.ack_offset.store(0, Ordering::SeqCst);
        self.state.store(ONLINE, Ordering::Relaxed);
        drop(out);
        self.cond.notify_all();
    }

    /// Ends the link: both threads see the socket shut.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
        self.cond.notify_all();
    }

    /// True once the link is being torn down; a replica CLIENT KILL
    /// marked is closed here, by whichever thread looks first.
    pub(super) fn is_closed(&self) -> bool {
        if self.closed.load(Ordering::SeqCst) {
            return true;
        }
        let killed = self.client.killed.load(Ordering::Relaxed);
        if killed {
            self.close();
        }
        killed
    }

    /// Seconds since the replica's last acknowledgement.
    pub(super) fn lag_secs(&self) -> u64 {
        now_ms().saturating_sub(self.ack_ms.load(Ordering::Relaxed)) / 1000
    }

    /// Redis's name of the link's state.
    fn state_name(&self) -> &'static str {
        match self.state.load(Ordering::Relaxed) {
            WAIT_BGSAVE => "wait_bgsave",
            SEND_BULK => "send_bulk",
            _ => "online",
        }
    }

    /// Redis's log line for a replica behind `master_offset` at shutdown.
    pub(super) fn lag_report(&self, master_offset: u64) -> String {
        let lag = if self.is_online() { self.lag_secs() } else { 0 };
        format!(
            "Lagging replica {} reported offset {} behind master, lag={lag}, state={}.",
            self.name(),
            master_offset as i64 - self.ack_offset() as i64,
            self.state_name()
        )
    }

    /// The INFO `slaveN` value.
    pub(super) fn info_line(&self, _master_offset: u64) -> String {
        let state = self.state_name();
        let lag = self.lag_secs();
        format!(
            "ip={},port={},state={state},offset={},lag={lag}",
            self.ip,
            self.port,
            self.ack_offset()
        )
    }
}

/// Takes over a connection that asked to sync: `io.0` is output the
/// worker had not written yet (replies before SYNC), `io.1` input it had
/// not run (what the replica pipelined after SYNC). Starts the link's
/// threads; on failure the client is dropped.
pub fn start(
    server: &Arc<Server>,
    socket: Link,
    client: Arc<ClientShared>,
    conf: &ClientRepl,
    kind: SyncKind,
    io: (Vec<u8>, Vec<u8>),
) {
    let (pending, unread) = io;
    let ip = conf.ip_address.clone().unwrap_or_else(|| {
        let addr = &client.addr;
        addr.rsplit_once(':')
            .map_or(addr.as_str(), |(ip, _)| ip)
            .to_string()
    });
    client.flags.fetch_or(cflags::REPLICA, Ordering::Relaxed);
    let replica = Arc::new(Replica {
        client,
        ip,
        port: conf.listening_port,
        socket,
        out: Mutex::new(Outbox::default()),
        cond: Condvar::new(),
        state: AtomicU8::new(WAIT_BGSAVE),
        ack_offset: AtomicU64::new(0),
        ack_ms: AtomicU64::new(now_ms()),
        cursor: AtomicU64::new(0),
        closed: AtomicBool::new(false),
        capa_eof: conf.capa_eof,
        rdb_only: conf.rdb_only,
        filter: conf.filter,
        rdb_outcome: AtomicU8::new(diskless::PENDING),
        got_ack: AtomicBool::new(false),
    });
    super::sync_started(server);
    let (s, r) = (server.clone(), replica.clone());
    let sender = std::thread::Builder::new()
        .name("vireo-repl-send".into())
        .spawn(move || run_sender(&s, &r, kind, (pending, unread)));
    if sender.is_err() {
        finish(server, &replica);
    }
}

/// The sender thread: a partial resync or a full sync, then the stream,
/// until the link ends.
fn run_sender(server: &Arc<Server>, r: &Arc<Replica>, kind: SyncKind, io: (Vec<u8>, Vec<u8>)) {
    let (pending, unread) = io;
    let name = r.name();
    tracing::info!("Replica {name} asks for synchronization");
    // Replies to what the replica pipelined before SYNC (its REPLCONFs)
    // come before the sync's own preamble.
    if !pending.is_empty() && (&r.socket).write_all(&pending).is_err() {
        r.close();
    }
    let reader = {
        let (s, r) = (server.clone(), r.clone());
        std::thread::Builder::new()
            .name("vireo-repl-read".into())
            .spawn(move || run_reader(&s, &r, unread))
    };
    let continued = match &kind {
        SyncKind::Psync { replid, offset } => super::try_continue(server, r, replid, *offset),
        SyncKind::Sync => false,
    };
    if reader.is_ok() && continued {
        stream(server, r);
    } else if reader.is_ok() {
        match full_sync(server, r, &kind) {
            Err(e) => tracing::warn!("SYNC failed for replica {name}: {e}"),
            Ok(()) if r.rdb_only => tracing::info!(
                "RDB transfer completed, rdb only replica ({name}) should be disconnected asap"
            ),
            Ok(()) => {
                tracing::info!("Synchronization with replica {name} succeeded");
                stream(server, r);
            }
        }
    }
    r.close();
    if let Ok(reader) = reader {
        let _ = reader.join();
    }
    tracing::info!("Connection with replica {name} lost.");
    finish(server, r);
}

/// Takes the link out of the stream and the client registry.
fn finish(server: &Server, r: &Replica) {
    super::detach(server, r.client.id);
    server.clients.unaccount(&r.client);
    server.clients.remove(r.client.id);
}

/// A full sync: diskless when this server is configured for it and the
/// replica reads EOF-marked transfers, else through a file. A filtered
/// RDB is always diskless (SYNC refused it without `capa eof`), so the
/// RDB file never holds a filtered dataset.
fn full_sync(server: &Arc<Server>, r: &Arc<Replica>, kind: &SyncKind) -> std::io::Result<()> {
    if r.capa_eof && (server.config.flag("repl-diskless-sync") || r.filter.is_filtered()) {
        return diskless::sync(server, r, kind);
    }
    disk_sync(server, r, kind)
}

/// A full sync through a file, in Redis's order: `+FULLRESYNC` as soon as
/// the snapshot's cut is taken (Redis sends it when its fork starts), a
/// newline every second while the file is written (the replica's
/// keep-alive, as Redis's `replicationCron` sends to replicas waiting for
/// a disk save), then the RDB bulk once the file is complete.
fn disk_sync(server: &Arc<Server>, r: &Arc<Replica>, kind: &SyncKind) -> std::io::Result<()> {
    tracing::info!("Starting BGSAVE for SYNC with target: disk");
    server.repl.count_full_sync();
    let path = PathBuf::from(format!(
        "temp-repl-{}-{}.rdb",
        std::process::id(),
        r.client.id
    ));
    let sent = std::thread::scope(|scope| {
        let saver =
            scope.spawn(|| snapshot_to(server, std::slice::from_ref(r), Target::File(&path)));
        let announced = announce_while_saving(server, r, kind, || saver.is_finished());
        let saved = saver
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the snapshot failed")));
        saved?;
        if !announced? {
            announce_full_resync(server, r, kind, wait_for_cut(r)?)?;
        }
        send_file(r, &path)
    });
    let _ = std::fs::remove_file(&path);
    sent?;
    r.state.store(ONLINE, Ordering::Relaxed);
    Ok(())
}

/// While the snapshot file is written (until `saved`): announces the full
/// resync once the cut's offset is known, and sends a keep-alive newline
/// every second. True if the announcement went out.
fn announce_while_saving(
    server: &Server,
    r: &Replica,
    kind: &SyncKind,
    saved: impl Fn() -> bool,
) -> std::io::Result<bool> {
    let mut announced = false;
    let mut last_newline = Instant::now();
    while !saved() {
        if r.is_closed() {
            return Err(std::io::Error::other("link closed"));
        }
        let cut = r.out.lock().start;
        if let (false, Some(offset)) = (announced, cut) {
            announce_full_resync(server, r, kind, offset)?;
            announced = true;
        } else if last_newline.elapsed() >= Duration::from_secs(1) {
            (&r.socket).write_all(b"\n")?;
            last_newline = Instant::now();
        }
        let mut out = r.out.lock();
        if announced || out.start.is_none() {
            r.cond.wait_for(&mut out, Duration::from_millis(50));
        }
    }
    Ok(announced)
}

/// `+FULLRESYNC <replid> <offset>` for PSYNC (SYNC gets no preamble).
fn announce_full_resync(
    server: &Server,
    r: &Replica,
    kind: &SyncKind,
    offset: u64,
) -> std::io::Result<()> {
    if matches!(kind, SyncKind::Psync { .. }) {
        let replid = server.repl.replid();
        write!(&r.socket, "+FULLRESYNC {replid} {offset}\r\n")?;
    }
    Ok(())
}

/// The RDB file as one bulk.
fn send_file(r: &Replica, path: &Path) -> std::io::Result<()> {
    r.state.store(SEND_BULK, Ordering::Relaxed);
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut sock = &r.socket;
    write!(sock, "${len}\r\n")?;
    std::io::copy(&mut file, &mut sock)?;
    Ok(())
}

/// Where a full sync's snapshot goes.
enum Target<'a> {
    File(&'a Path),
    Sockets(&'a mut (dyn Write + Send)),
}

/// Writes the RDB of a cut to `target`; the cut attaches `replicas` to
/// the stream. Waits while another snapshot runs. INFO shows a background
/// save in progress meanwhile, as Redis's fork for SYNC is one. On a
/// replica the stream is the master's, fed by the link thread: the cut
/// holds that thread between two commands and attaches at once.
fn snapshot_to(
    server: &Arc<Server>,
    replicas: &[Arc<Replica>],
    mut target: Target<'_>,
) -> std::io::Result<()> {
    let saving = &server.rdb.bgsave_in_progress;
    loop {
        if replicas.iter().all(|r| r.is_closed()) {
            return Err(std::io::Error::other("link closed"));
        }
        let mut cut_taken = false;
        let asked = Instant::now();
        let applying = server.repl.is_replica().then(|| server.repl.apply.lock());
        let at_cut = || {
            cut_taken = true;
            crate::persist::forks::started(server, asked.elapsed());
            saving.store(true, Ordering::Release);
            attach_at_cut(server, replicas, applying);
        };
        let written = match &mut target {
            Target::File(path) => write_base(server, path, BaseFormat::Rdb, at_cut),
            Target::Sockets(out) => write_base_to(server, *out, BaseFormat::Rdb, at_cut),
        };
        if cut_taken {
            saving.store(false, Ordering::Release);
        }
        match written {
            Ok(_) => return Ok(()),
            Err(e) if cut_taken => return Err(e),
            // Another snapshot holds the keyspace: try again shortly.
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// At a cut (every shard locked): attaches `replicas` to the stream from
/// there. On a master the AOF writer attaches them once it reaches the
/// cut; on a replica `applying` holds its link thread between two
/// commands, and they attach at once.
fn attach_at_cut(
    server: &Arc<Server>,
    replicas: &[Arc<Replica>],
    applying: Option<parking_lot::MutexGuard<'_, ()>>,
) {
    let attach_all = {
        let (s, links) = (server.clone(), replicas.to_vec());
        move || {
            for link in links.into_iter().filter(|r| !r.is_closed()) {
                super::attach(&s, link);
            }
        }
    };
    if let Some(held) = applying {
        attach_all();
        drop(held);
    } else {
        server.aof.mark_replica_cut(Box::new(attach_all));
    }
}

/// The RDB of a filtered sync (which never holds data): taken at a cut
/// where `r` attaches to the stream, with every shard locked for the
/// moment it takes to read the libraries, without walking the keyspace.
fn filtered_rdb(server: &Arc<Server>, r: &Arc<Replica>) -> Vec<u8> {
    let applying = server.repl.is_replica().then(|| server.repl.apply.lock());
    let all = server.keyspace.lock_all();
    attach_at_cut(server, std::slice::from_ref(r), applying);
    let functions = if r.filter == RdbFilter::FunctionsOnly {
        let opts = vireo_store::rdb::EncodeOptions::default();
        crate::persist::rdb::function_records(server, &opts)
    } else {
        Vec::new()
    };
    drop(all);
    crate::persist::aof::rewrite::rdb_image(&functions)
}

/// The stream offset the replica starts at, once the writer reached its
/// cut.
fn wait_for_cut(r: &Replica) -> std::io::Result<u64> {
    let mut out = r.out.lock();
    loop {
        if let Some(start) = out.start {
            return Ok(start);
        }
        if r.closed.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("link closed"));
        }
        r.cond.wait_for(&mut out, Duration::from_millis(100));
    }
}

/// The most stream bytes the sender copies out of the shared buffer at
/// once.
const BATCH: usize = 256 * 1024;

/// Writes the stream to the replica as it gathers, with keep-alive PINGs.
fn stream(server: &Server, r: &Replica) {
    let mut batch = Vec::new();
    while !r.closed.load(Ordering::SeqCst)
        && !server.shutting_down.load(Ordering::Acquire)
        && !r.client.killed.load(Ordering::Relaxed)
    {
        {
            let mut out = r.out.lock();
            if !out.woken && out.pre.is_empty() {
                r.cond.wait_for(&mut out, Duration::from_millis(100));
            }
            out.woken = false;
            std::mem::swap(&mut out.pre, &mut batch);
        }
        server.repl.take_for(r, BATCH, &mut batch);
        if batch.is_empty() {
            super::ping_if_due(server);
            continue;
        }
        if (&r.socket).write_all(&batch).is_err() {
            return;
        }
        if batch.len() >= BATCH {
            // More may be waiting: look again without sleeping.
            r.out.lock().woken = true;
            batch.clear();
        } else {
            // Caught up: the batch's memory goes back.
            batch = Vec::new();
        }
    }
}

/// The reader thread: REPLCONF ACK and GETACK answers from the replica,
/// starting with what it sent right after SYNC (`buf`).
fn run_reader(server: &Server, r: &Replica, mut buf: Vec<u8>) {
    let mut chunk = [0u8; 4096];
    let mut parser = Parser::new();
    let limits = ParseLimits::default();
    'link: loop {
        loop {
            match parser.parse(&buf, &limits) {
                Ok(Some(used)) => {
                    on_command(server, r, parser.args(&buf).iter().collect());
                    buf.drain(..used);
                }
                Ok(None) => break,
                Err(_) => break 'link,
            }
        }
        let n = match (&r.socket).read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        r.client
            .last_interaction_ms
            .store(now_ms(), Ordering::Relaxed);
    }
    r.close();
    super::forget_closed(server);
}

/// A command from the replica: REPLCONF ACK <offset> records its offset;
/// anything else is ignored, as Redis ignores a replica's replies.
fn on_command(server: &Server, r: &Replica, args: Vec<&[u8]>) {
    let Some(offset) = ack_offset(&args) else {
        return;
    };
    r.ack_offset.fetch_max(offset, Ordering::SeqCst);
    r.ack_ms.store(now_ms(), Ordering::Relaxed);
    r.got_ack.store(true, Ordering::SeqCst);
    super::acked(server);
}

/// The offset of a `REPLCONF ACK <offset> ...` command, None for anything
/// else.
fn ack_offset(args: &[&[u8]]) -> Option<u64> {
    let [cmd, sub, offset, ..] = args[..] else {
        return None;
    };
    if !cmd.eq_ignore_ascii_case(b"replconf") || !sub.eq_ignore_ascii_case(b"ack") {
        return None;
    }
    std::str::from_utf8(offset).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_replconf_ack_carries_an_offset() {
        assert_eq!(ack_offset(&[b"REPLCONF", b"ACK", b"1234"]), Some(1234));
        assert_eq!(
            ack_offset(&[b"replconf", b"ack", b"7", b"FACK", b"3"]),
            Some(7)
        );
        assert_eq!(ack_offset(&[b"REPLCONF", b"GETACK", b"*"]), None);
        assert_eq!(ack_offset(&[b"REPLCONF", b"ACK", b"-1"]), None);
        assert_eq!(ack_offset(&[b"REPLCONF", b"ACK"]), None);
        assert_eq!(ack_offset(&[b"PING"]), None);
    }

    /// Random bytes through the reader's parser and the ACK check: no
    /// panic, and only well-formed ACKs yield an offset.
    #[test]
    fn random_input_from_a_replica_never_panics() {
        let mut rng = fastrand::Rng::with_seed(28);
        let pieces: [&[u8]; 8] = [
            b"*3\r\n",
            b"$8\r\nREPLCONF\r\n",
            b"$3\r\nACK\r\n",
            b"$2\r\n42\r\n",
            b"\r\n",
            b"$-1\r\n",
            b"*-5\r\n",
            b"garbage",
        ];
        let limits = ParseLimits::default();
        for _ in 0..2000 {
            let mut buf = Vec::new();
            for _ in 0..rng.usize(0..12) {
                if rng.bool() {
                    buf.extend_from_slice(pieces[rng.usize(..pieces.len())]);
                } else {
                    buf.push(rng.u8(..));
                }
            }
            let mut parser = Parser::new();
            while let Ok(Some(used)) = parser.parse(&buf, &limits) {
                let args: Vec<&[u8]> = parser.args(&buf).iter().collect();
                if let Some(n) = ack_offset(&args) {
                    assert_eq!(std::str::from_utf8(args[2]).unwrap().parse(), Ok(n));
                }
                buf.drain(..used);
            }
        }
    }
}
