//! The replica side: following a master (REPLICAOF host port).
//!
//! One link thread per master, in blocking I/O, does what Redis's
//! `syncWithMaster`, `readSyncBulkPayload` and the master client do:
//! connect; the handshake (PING, AUTH with `masteruser`/`masterauth`,
//! REPLCONF listening-port / ip-address / capa eof psync2); PSYNC with this
//! server's replication id and offset when it holds a master's history
//! (Redis's cached master), else `PSYNC ? -1`; on `+FULLRESYNC` the RDB
//! bulk (`$<len>` or the diskless `$EOF:<40-byte mark>` form) to a file or
//! straight into the keyspace (`repl-diskless-load`); then the stream,
//! applied through the normal dispatch as the master client (no replies,
//! except `REPLCONF ACK <offset>` every second and on GETACK) and passed on
//! verbatim to this server's own backlog and replicas. When the link
//! drops, the thread reconnects and asks to continue where it stopped.
//! Every step logs Redis's own line: operators and Redis's test suite wait
//! for them.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use vireo_resp::{Args, ParseLimits, Parser, Protocol, ReplyBuf};
use vireo_store::clock::now_ms;

use crate::net::client::{cflags, ClientShared};
use crate::net::link::{Link, SharedLink};
use crate::net::session::Session;
use crate::server::Server;

/// Link states, Redis's `repl_state` as ROLE names them.
const CONNECT: u8 = 0;
const CONNECTING: u8 = 1;
const HANDSHAKE: u8 = 2;
const TRANSFER: u8 = 3;
const CONNECTED: u8 = 4;

/// The size of a replication id, and of the diskless EOF mark.
const RUN_ID_SIZE: usize = 40;
/// Longest status line accepted from a master during the handshake.
const MAX_LINE: usize = 4096;
/// Redis's `repl_syncio_timeout`: each handshake step must answer within it.
const SYNCIO_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the stream loop wakes up when the master is quiet (ACKs,
/// timeouts, REPLICAOF changes).
const TICK: Duration = Duration::from_millis(100);

/// The link to a master, shared by its thread, INFO, ROLE and REPLICAOF.
pub struct MasterLink {
    /// The master's address as REPLICAOF named it.
    pub host: String,
    pub port: u16,
    state: AtomicU8,
    /// REPLICAOF changed or the server stops: the thread ends.
    stop: AtomicBool,
    /// The connected link, so [`MasterLink::stop`] can interrupt a read.
    socket: Mutex<Option<Arc<Link>>>,
    /// The master client while the link is up (CLIENT LIST flag `M`).
    client: Mutex<Option<Arc<ClientShared>>>,
    /// Unix ms of the last byte from the master.
    last_io_ms: AtomicU64,
    /// Unix ms the link went down (0: never up).
    down_since_ms: AtomicU64,
    /// The RDB transfer: announced size (-1 with an EOF mark) and bytes read.
    transfer_size: AtomicI64,
    transfer_read: AtomicU64,
    /// Stream bytes read from the master (`slave_read_repl_offset`).
    read_offset: AtomicU64,
    /// The database the master's stream last selected: a partial resync
    /// goes on in it (the master sends no SELECT then), as Redis's cached
    /// master keeps its database.
    pub(super) stream_db: AtomicUsize,
}

impl MasterLink {
    /// True once the master's data is loaded and its stream followed.
    pub fn is_connected(&self) -> bool {
        self.state.load(Ordering::Acquire) == CONNECTED
    }

    /// ROLE's state word.
    pub fn state_name(&self) -> &'static str {
        match self.state.load(Ordering::Acquire) {
            CONNECT => "connect",
            CONNECTING => "connecting",
            HANDSHAKE => "handshake",
            TRANSFER => "sync",
            _ => "connected",
        }
    }

    /// Ends the link: the thread sees the flag or its socket shut.
    fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(s) = self.socket.lock().as_ref() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn set_state(&self, state: u8) {
        self.state.store(state, Ordering::Release);
    }

    /// Seconds since `ms`, as INFO prints them.
    fn secs_since(ms: u64) -> u64 {
        now_ms().saturating_sub(ms) / 1000
    }

    /// The INFO replication fields a replica prints after `role`.
    pub(super) fn info_fields(&self, server: &Server) -> Vec<(&'static str, String)> {
        let connected = self.is_connected();
        let offset = server.repl.offset();
        let read = self.read_offset.load(Ordering::Relaxed).max(offset);
        let last_io = if self.client.lock().is_some() {
            Self::secs_since(self.last_io_ms.load(Ordering::Relaxed)) as i64
        } else {
            -1
        };
        let state = self.state.load(Ordering::Acquire);
        let mut f = vec![
            ("master_host", self.host.clone()),
            ("master_port", self.port.to_string()),
            (
                "master_link_status",
                if connected { "up" } else { "down" }.into(),
            ),
            ("master_last_io_seconds_ago", last_io.to_string()),
            (
                "master_sync_in_progress",
                u8::from(state == TRANSFER).to_string(),
            ),
            ("slave_read_repl_offset", read.to_string()),
            ("slave_repl_offset", offset.to_string()),
        ];
        if state == TRANSFER {
            let size = self.transfer_size.load(Ordering::Relaxed);
            let done = self.transfer_read.load(Ordering::Relaxed) as i64;
            let perc = if size > 0 {
                done as f64 * 100.0 / size as f64
            } else {
                0.0
            };
            f.push(("master_sync_total_bytes", size.to_string()));
            f.push(("master_sync_read_bytes", done.to_string()));
            f.push(("master_sync_left_bytes", (size - done).to_string()));
            f.push(("master_sync_perc", format!("{perc:.2}")));
            f.push((
                "master_sync_last_io_seconds_ago",
                Self::secs_since(self.last_io_ms.load(Ordering::Relaxed)).to_string(),
            ));
        }
        if !connected {
            let since = self.down_since_ms.load(Ordering::Relaxed);
            let down = if since == 0 {
                -1
            } else {
                Self::secs_since(since) as i64
            };
            f.push(("master_link_down_since_seconds", down.to_string()));
        }
        let conf = |name: &str| server.config.get_one(name).unwrap_or_default();
        let yes = |name: &str| u8::from(server.config.flag(name)).to_string();
        f.push(("slave_priority", conf("replica-priority")));
        f.push(("slave_read_only", yes("replica-read-only")));
        f.push(("replica_announced", yes("replica-announced")));
        f
    }
}

/// Makes this server a replica of `host:port` (REPLICAOF, or `replicaof`
/// at start-up), ending any link to another master. Returns false, doing
/// nothing, when it already follows that master.
pub fn follow(server: &Arc<Server>, host: &str, port: u16) -> bool {
    let repl = &server.repl;
    let mut slot = repl.link.lock();
    if let Some(old) = slot.as_ref() {
        if old.host.eq_ignore_ascii_case(host) && old.port == port {
            tracing::info!("REPLICAOF would result into synchronization with the master we are already connected with. No operation performed.");
            return false;
        }
        old.stop();
        // Once the lock is ours the old link applies nothing more; what it
        // applied is a history the new master may continue (PSYNC2), as
        // Redis caches the master it leaves.
        drop(repl.apply.lock());
        if old.is_connected() {
            tracing::info!("Caching the disconnected master state.");
            repl.cached_master.store(true, Ordering::SeqCst);
        }
    }
    let was_master = slot.is_none();
    // A partial resync with the new master goes on in the database the
    // stream applied last, as Redis's cached master keeps its own.
    let stream_db = slot.as_ref().map_or_else(
        || repl.restored_stream_db.load(Ordering::Relaxed),
        |old| old.stream_db.load(Ordering::Relaxed),
    );
    crate::exec::blocking::unblock_all_for_role_change(server);
    let link = Arc::new(MasterLink {
        host: host.to_string(),
        port,
        state: AtomicU8::new(CONNECT),
        stop: AtomicBool::new(false),
        socket: Mutex::new(None),
        client: Mutex::new(None),
        last_io_ms: AtomicU64::new(now_ms()),
        down_since_ms: AtomicU64::new(0),
        transfer_size: AtomicI64::new(-1),
        transfer_read: AtomicU64::new(0),
        read_offset: AtomicU64::new(0),
        stream_db: AtomicUsize::new(stream_db),
    });
    *slot = Some(link.clone());
    server.config.record_replicaof(format!("{host} {port}"));
    repl.following.store(true, Ordering::Release);
    server.keyspace.set_replica_expiry(true);
    crate::ops::log::set_replica_role(true);
    let _ = crate::ops::oom::apply(&server.config, true);
    drop(slot);
    if was_master {
        tracing::info!("Before turning into a replica, using my own master parameters to synthesize a cached master: I may be able to synchronize with the new master with just a partial transfer.");
        repl.cached_master.store(true, Ordering::SeqCst);
    }
    tracing::info!("Connecting to MASTER {host}:{port}");
    let s = server.clone();
    let spawned = std::thread::Builder::new()
        .name("vireo-repl-master".into())
        .spawn(move || run(&s, &link));
    if let Err(e) = spawned {
        tracing::warn!("Unable to start the replication thread: {e}");
    }
    true
}

/// REPLICAOF NO ONE: stops following; the history goes on under a new id,
/// with the master's kept as the secondary one (PSYNC2), and this server's
/// replicas sync again. False when it was no replica.
pub fn unfollow(server: &Server) -> bool {
    let repl = &server.repl;
    let Some(link) = repl.link.lock().take() else {
        return false;
    };
    link.stop();
    server.config.record_replicaof(String::new());
    // The link thread applies a command and streams it under this lock:
    // once held, no command of the old master is half-applied.
    let applying = repl.apply.lock();
    // The master's commands applied so far are in the stream already: the
    // AOF writer must hand them on (and they be dropped) before this
    // server's own writes start feeding the stream.
    server.aof.wait_written(Duration::from_secs(1));
    repl.following.store(false, Ordering::Release);
    // The replicas that continue with this server are in whatever database
    // the old master's stream selected: its own stream starts with SELECT.
    server.aof.mark_replica_cut(Box::new(|| {}));
    server.keyspace.set_replica_expiry(false);
    crate::ops::log::set_replica_role(false);
    let _ = crate::ops::oom::apply(&server.config, false);
    if repl.cached_master.swap(false, Ordering::SeqCst) {
        tracing::info!("Discarding previously cached master state.");
    }
    repl.shift_replid();
    repl.disconnect_replicas();
    drop(applying);
    true
}

/// The TTLs of the keys a command names, read before it runs on a
/// replica for one of its own clients (its key shards are held).
pub fn key_ttls(
    keys: &vireo_store::Keys<'_>,
    db: usize,
    spec: &crate::cmd::CommandSpec,
    args: Args<'_>,
) -> Vec<(vireo_store::Key, Option<u64>)> {
    use crate::cmd::KeySpec;
    if !matches!(spec.keys, KeySpec::Range { .. } | KeySpec::Custom { .. }) {
        return Vec::new();
    }
    spec.key_indices(args)
        .into_iter()
        .map(|i| {
            let key = args.get(i);
            let ttl = keys.peek(db, key).and_then(|e| e.expire_at());
            (vireo_store::Key::from(key), ttl)
        })
        .collect()
}

/// A client of a writable replica ran a write: the keys whose TTL it set
/// (compared with `before`, from [`key_ttls`]) are expired by this server
/// ([`expire_local_keys`]), as Redis's `rememberSlaveKeyWithExpire`.
pub fn note_local_ttls(
    server: &Server,
    keys: &vireo_store::Keys<'_>,
    db: usize,
    before: Vec<(vireo_store::Key, Option<u64>)>,
) {
    let set: Vec<_> = before
        .into_iter()
        .filter(|(key, ttl)| {
            let now = keys.peek(db, key).and_then(|e| e.expire_at());
            now.is_some() && now != *ttl
        })
        .map(|(key, _)| (db, key))
        .collect();
    if !set.is_empty() {
        server.repl.local_keys.lock().extend(set);
    }
}

/// Deletes the keys written on this replica whose TTL passed (cron); keys
/// gone or without a TTL are forgotten.
pub fn expire_local_keys(server: &Server) {
    let repl = &server.repl;
    if !repl.is_replica() {
        repl.local_keys.lock().clear();
        return;
    }
    let keys: Vec<_> = repl.local_keys.lock().drain().collect();
    let mut keep = Vec::new();
    for (db, key) in keys {
        let mut view = server.keyspace.lock_keys([&key[..]]);
        let has_ttl = view
            .get_mut(db, &key)
            .is_some_and(|e| e.expire_at().is_some());
        drop(view.take_expired());
        if has_ttl {
            keep.push((db, key));
        }
    }
    repl.local_keys.lock().extend(keep);
}

/// Starts following the master `replicaof` names in the configuration, if
/// any (called once the dataset is loaded).
pub fn follow_configured(server: &Arc<Server>) {
    let conf = server.config.get_one("replicaof").unwrap_or_default();
    let mut words = conf.split_whitespace();
    if let (Some(host), Some(port)) = (words.next(), words.next()) {
        match port.parse() {
            Ok(port) => {
                follow(server, host, port);
            }
            Err(_) => tracing::warn!("Invalid master port in replicaof: {port}"),
        }
    }
}

/// The link thread: syncs, follows the stream, and reconnects after a
/// failure (once a second, as Redis's replication cron does) until the
/// link is stopped.
fn run(server: &Arc<Server>, link: &Arc<MasterLink>) {
    let mut reconnecting = false;
    while live(server, link) {
        if reconnecting {
            tracing::info!("Connecting to MASTER {}:{}", link.host, link.port);
        }
        match sync_with_master(server, link) {
            Ok(conn) => {
                follow_stream(server, link, conn);
                lose_master(server, link);
                if live(server, link) {
                    tracing::info!("Reconnecting to MASTER {}:{}", link.host, link.port);
                    reconnecting = false;
                    continue;
                }
            }
            Err(e) => {
                if let Some(msg) = e {
                    tracing::warn!("{msg}");
                }
                link.set_state(CONNECT);
                *link.socket.lock() = None;
            }
        }
        reconnecting = true;
        let retry = Instant::now();
        while live(server, link) && retry.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(TICK);
        }
    }
    *link.socket.lock() = None;
}

/// True while the link should keep trying.
fn live(server: &Server, link: &MasterLink) -> bool {
    !link.stop.load(Ordering::SeqCst) && !server.shutting_down.load(Ordering::Acquire)
}

/// The link to the master dropped after it was up: Redis caches the master
/// to continue with PSYNC later.
fn lose_master(server: &Server, link: &MasterLink) {
    if let Some(client) = link.client.lock().take() {
        server.clients.unaccount(&client);
        server.clients.remove(client.id);
    }
    *link.socket.lock() = None;
    link.set_state(CONNECT);
    link.down_since_ms.store(now_ms(), Ordering::Relaxed);
    if link.stop.load(Ordering::SeqCst) {
        return;
    }
    tracing::warn!("Connection with master lost.");
    tracing::info!("Caching the disconnected master state.");
    server.repl.cached_master.store(true, Ordering::SeqCst);
}

/// A connected master link, past its sync: one link (plain, or TLS with
/// `tls-replication`), read through a buffer and written directly.
struct Conn {
    reader: BufReader<SharedLink>,
    writer: SharedLink,
}

/// Why a sync attempt failed: the line to log, or None when it was
/// logged already (or the link was stopped).
type SyncError = Option<String>;

/// Connects, does the handshake and the PSYNC, and receives the data.
fn sync_with_master(server: &Arc<Server>, link: &MasterLink) -> Result<Conn, SyncError> {
    tracing::info!("MASTER <-> REPLICA sync started");
    link.set_state(CONNECTING);
    let stream = Arc::new(connect(server, link)?);
    *link.socket.lock() = Some(stream.clone());
    if !live(server, link) {
        return Err(None);
    }
    tracing::info!("Non blocking connect for SYNC fired the event.");
    link.set_state(HANDSHAKE);
    // A master that goes quiet during the handshake times out after
    // `repl-timeout`, as Redis's cron judges it.
    let _ = stream.socket().set_read_timeout(Some(repl_timeout(server)));
    let _ = stream.socket().set_write_timeout(Some(SYNCIO_TIMEOUT));
    let mut conn = Conn {
        reader: BufReader::with_capacity(64 * 1024, SharedLink(stream.clone())),
        writer: SharedLink(stream),
    };
    handshake(server, &mut conn)?;
    match psync(server, link, &mut conn)? {
        Psync::Continue => {
            tracing::info!("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.");
        }
        Psync::Full { replid, offset } => {
            receive_rdb(server, link, &mut conn, &replid)?;
            if !live(server, link) {
                // REPLICAOF changed during the load: the history is not
                // this master's any more.
                return Err(None);
            }
            link.stream_db.store(0, Ordering::Relaxed);
            server
                .repl
                .reset_history(server, &replid, offset.max(0) as u64);
            tracing::info!("MASTER <-> REPLICA sync: Finished with success");
            // The log must describe the new dataset: a rewrite starts it
            // from it, as Redis's `restartAOFAfterSYNC`.
            if server.aof.is_enabled() {
                server
                    .aof
                    .request_rewrite(server.keyspace.snapshot_in_progress());
            }
        }
    }
    link.read_offset
        .store(server.repl.offset(), Ordering::Relaxed);
    attach_master_client(server, link, &conn);
    link.set_state(CONNECTED);
    send_ack(server, &mut conn.writer).map_err(|e| Some(e.to_string()))?;
    Ok(conn)
}

/// `repl-timeout`.
fn repl_timeout(server: &Server) -> Duration {
    Duration::from_secs(super::config_u64(server, "repl-timeout").unwrap_or(60))
}

/// Opens the connection within `repl-timeout`: TCP, then with
/// `tls-replication` the TLS handshake, this server presenting its client
/// certificate and checking the master's against its CA (Redis's
/// `connCreateTLS` link).
fn connect(server: &Server, link: &MasterLink) -> Result<Link, SyncError> {
    let timeout = repl_timeout(server);
    let addrs = (link.host.as_str(), link.port)
        .to_socket_addrs()
        .map_err(|e| Some(format!("Unable to connect to MASTER: {e}")))?;
    let source = server.config.get_one("bind-source-addr");
    let mut last = None;
    for addr in addrs {
        match crate::net::link::connect_from(&addr, source.as_deref(), timeout) {
            Ok(s) => {
                let _ = s.set_nodelay(!server.config.flag("repl-disable-tcp-nodelay"));
                return secure(server, link, s, timeout)
                    .map_err(|e| Some(format!("Error condition on socket for SYNC: {e}")));
            }
            Err(e) => last = Some(e),
        }
    }
    let why = last.map_or_else(|| "no address".to_string(), |e| e.to_string());
    Err(Some(format!("Error condition on socket for SYNC: {why}")))
}

/// The link on a connected socket: plain, or TLS with `tls-replication`,
/// the handshake bounded by `timeout`.
fn secure(
    server: &Server,
    link: &MasterLink,
    sock: TcpStream,
    timeout: Duration,
) -> io::Result<Link> {
    if !server.config.flag("tls-replication") {
        return Ok(Link::plain(sock));
    }
    let config = server.tls.client_config().ok_or_else(|| {
        io::Error::other("TLS is not configured (tls-ca-cert-file or tls-ca-cert-dir)")
    })?;
    sock.set_read_timeout(Some(timeout))?;
    sock.set_write_timeout(Some(timeout))?;
    Link::connect_tls(sock, config, &link.host)
}

/// PING, AUTH, REPLCONF: Redis's handshake, with its log lines.
fn handshake(server: &Server, conn: &mut Conn) -> Result<(), SyncError> {
    let write_err = |e: io::Error| {
        Some(format!(
            "Sending command to master in replication handshake: -Writing to master: {e}"
        ))
    };
    send(&mut conn.writer, &[b"PING"]).map_err(write_err)?;
    let pong = reply_line(conn)?;
    let tolerated = ["-NOAUTH", "-NOPERM", "-ERR operation not permitted"];
    if !pong.starts_with('+') && !tolerated.iter().any(|t| pong.starts_with(t)) {
        return Err(Some(format!("Error reply to PING from master: '{pong}'")));
    }
    tracing::info!("Master replied to PING, replication can continue...");
    let conf = |name: &str| server.config.get_one(name).unwrap_or_default();
    let auth = conf("masterauth");
    let user = conf("masteruser");
    if !auth.is_empty() {
        let mut args: Vec<&[u8]> = vec![b"AUTH"];
        if !user.is_empty() {
            args.push(user.as_bytes());
        }
        args.push(auth.as_bytes());
        send(&mut conn.writer, &args).map_err(write_err)?;
    }
    // Over TLS, the port replicas of this one would use is its TLS port.
    let announced = super::config_u64(server, "replica-announce-port").filter(|&p| p > 0);
    let tls_port = super::config_u64(server, "tls-port")
        .filter(|&p| p > 0 && server.config.flag("tls-replication"));
    let port = announced
        .or(tls_port)
        .unwrap_or_else(|| server.bound_port.load(Ordering::Relaxed))
        .to_string();
    send(
        &mut conn.writer,
        &[b"REPLCONF", b"listening-port", port.as_bytes()],
    )
    .map_err(write_err)?;
    let ip = conf("replica-announce-ip");
    if !ip.is_empty() {
        send(
            &mut conn.writer,
            &[b"REPLCONF", b"ip-address", ip.as_bytes()],
        )
        .map_err(write_err)?;
    }
    send(
        &mut conn.writer,
        &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"],
    )
    .map_err(write_err)?;
    if !auth.is_empty() {
        let reply = reply_line(conn)?;
        if reply.starts_with('-') {
            return Err(Some(format!("Unable to AUTH to MASTER: {reply}")));
        }
    }
    let mut replconf = vec!["listening-port"];
    if !ip.is_empty() {
        replconf.push("ip-address");
    }
    replconf.push("capa");
    for what in replconf {
        let reply = reply_line(conn)?;
        if reply.starts_with('-') {
            tracing::info!("(Non critical) Master does not understand REPLCONF {what}: {reply}");
        }
    }
    Ok(())
}

/// What the master answered to PSYNC.
enum Psync {
    /// `+CONTINUE`: the stream goes on from this server's offset.
    Continue,
    /// `+FULLRESYNC` (or SYNC): the RDB follows; the stream starts at
    /// `offset` of history `replid`.
    Full { replid: String, offset: i64 },
}

/// Sends PSYNC (falling back to SYNC for a master that refuses it) and
/// reads the answer, as Redis's `slaveTryPartialResynchronization`.
fn psync(server: &Server, link: &MasterLink, conn: &mut Conn) -> Result<Psync, SyncError> {
    let repl = &server.repl;
    let cached = repl.cached_master.load(Ordering::SeqCst);
    let (replid, offset) = if cached {
        let (id, off) = (repl.replid(), (repl.offset() + 1).to_string());
        tracing::info!("Trying a partial resynchronization (request {id}:{off}).");
        (id, off)
    } else {
        tracing::info!("Partial resynchronization not possible (no cached master)");
        ("?".to_string(), "-1".to_string())
    };
    // A master handing its role over asks its target to take it.
    let mut cmd: Vec<&[u8]> = vec![b"PSYNC", replid.as_bytes(), offset.as_bytes()];
    if repl.failover.in_progress() {
        cmd.push(b"FAILOVER");
    }
    if let Err(e) = send(&mut conn.writer, &cmd) {
        super::failover::abort(server, "Write error to failover target");
        return Err(Some(format!(
            "Unable to send PSYNC to master: -Writing to master: {e}"
        )));
    }
    let reply = loop {
        // Newlines are keep-alives while the master prepares.
        let line = reply_line(conn)?;
        if !line.is_empty() {
            break line;
        }
    };
    let accepted = reply.starts_with("+FULLRESYNC") || reply.starts_with("+CONTINUE");
    // Any other answer to PSYNC FAILOVER ends the failover, and this link.
    super::failover::psync_answered(server, accepted);
    if !accepted && !live(server, link) {
        return Err(None);
    }
    if let Some(rest) = reply.strip_prefix("+FULLRESYNC") {
        return Ok(full_resync_reply(rest));
    }
    if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        tracing::info!("Successful partial resynchronization with master.");
        let new_id = rest.trim();
        if new_id.len() == RUN_ID_SIZE && new_id != repl.replid() {
            tracing::warn!("Master replication ID changed to {new_id}");
            repl.adopt_replid(new_id);
            repl.disconnect_replicas();
        }
        return Ok(Psync::Continue);
    }
    if reply.starts_with("-NOMASTERLINK") || reply.starts_with("-LOADING") {
        return Err(Some(format!(
            "Master is currently unable to PSYNC but should be in the future: {reply}"
        )));
    }
    if reply.starts_with("-ERR") {
        tracing::info!("Master does not support PSYNC or is in error state (reply: {reply})");
    } else {
        tracing::warn!("Unexpected reply to PSYNC from master: {reply}");
    }
    tracing::info!("Retrying with SYNC...");
    conn.writer
        .write_all(b"SYNC\r\n")
        .map_err(|e| Some(format!("I/O error writing to MASTER: {e}")))?;
    Ok(Psync::Full {
        replid: "0".repeat(RUN_ID_SIZE),
        offset: -1,
    })
}

/// Parses what follows `+FULLRESYNC`: ` <replid> <offset>`.
fn full_resync_reply(rest: &str) -> Psync {
    let mut words = rest.split_whitespace();
    let parsed = match (words.next(), words.next().map(str::parse::<i64>)) {
        (Some(id), Some(Ok(off))) if id.len() == RUN_ID_SIZE => Some((id.to_string(), off)),
        _ => None,
    };
    match parsed {
        Some((replid, offset)) => {
            tracing::info!("Full resync from master: {replid}:{offset}");
            Psync::Full { replid, offset }
        }
        None => {
            tracing::warn!("Master replied with wrong +FULLRESYNC syntax.");
            Psync::Full {
                replid: "0".repeat(RUN_ID_SIZE),
                offset: -1,
            }
        }
    }
}

/// How the RDB payload is delimited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    /// `$<len>`: exactly that many bytes.
    Len(u64),
    /// `$EOF:<mark>`: bytes until the 40-byte mark (diskless masters).
    Mark([u8; RUN_ID_SIZE]),
}

/// Parses the bulk header line of a full sync (without its CRLF):
/// Ok(None) for an empty keep-alive line, Err(the line to log) for an
/// error or anything not a bulk header.
pub fn parse_bulk_header(line: &[u8]) -> Result<Option<Payload>, String> {
    let text = String::from_utf8_lossy(line);
    match line.first() {
        None => Ok(None),
        Some(b'-') => Err(format!(
            "MASTER aborted replication with an error: {}",
            &text[1..]
        )),
        Some(b'$') => {
            if let Some(mark) = line.strip_prefix(b"$EOF:") {
                if mark.len() >= RUN_ID_SIZE {
                    let mut m = [0u8; RUN_ID_SIZE];
                    m.copy_from_slice(&mark[..RUN_ID_SIZE]);
                    return Ok(Some(Payload::Mark(m)));
                }
            }
            match text[1..].parse::<u64>() {
                Ok(n) => Ok(Some(Payload::Len(n))),
                Err(_) => Err(format!("Bad bulk length from MASTER: '{text}'")),
            }
        }
        Some(_) => Err(format!("Bad protocol from MASTER, the first byte is not '$' (we received '{text}'), are you sure the host and port are right?")),
    }
}

/// Reads the RDB payload of a full sync from the master's stream and
/// nothing past it: ends after `Len` bytes, or before the EOF mark once
/// the bytes read so far end with it (a diskless master sends nothing
/// after the mark until the replica's first ACK). Holds back at most the
/// mark's 40 bytes, so memory stays bounded whatever the master sends.
pub struct PayloadReader<R> {
    inner: R,
    kind: Payload,
    /// Bytes read from `inner` so far.
    read: u64,
    /// Mark form: the last bytes read, not yet given out (at most 40).
    held: Vec<u8>,
    done: bool,
    /// Counter of bytes read, for INFO's transfer progress.
    progress: Option<Arc<AtomicU64>>,
}

impl<R: Read> PayloadReader<R> {
    /// A reader of the payload `kind` announces.
    pub fn new(inner: R, kind: Payload) -> Self {
        PayloadReader {
            inner,
            kind,
            read: 0,
            held: Vec::new(),
            done: false,
            progress: None,
        }
    }

    /// True once the whole payload (and its mark) was read and given out.
    pub fn finished(&self) -> bool {
        self.done && self.held.is_empty()
    }

    fn count(&mut self, n: usize) {
        self.read += n as u64;
        if let Some(p) = &self.progress {
            p.store(self.read, Ordering::Relaxed);
        }
    }

    fn read_len(&mut self, len: u64, out: &mut [u8]) -> io::Result<usize> {
        let left = len - self.read;
        if left == 0 {
            self.done = true;
            return Ok(0);
        }
        let want = out.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut out[..want])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.count(n);
        self.done = self.read == len;
        Ok(n)
    }

    fn read_mark(&mut self, mark: [u8; RUN_ID_SIZE], out: &mut [u8]) -> io::Result<usize> {
        loop {
            // Until the mark is seen, the last 40 bytes may be (part of) it.
            let keep = if self.done { 0 } else { RUN_ID_SIZE };
            let give = self.held.len().saturating_sub(keep).min(out.len());
            if give > 0 {
                out[..give].copy_from_slice(&self.held[..give]);
                self.held.drain(..give);
                return Ok(give);
            }
            if self.done {
                return Ok(0);
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.inner.read(&mut chunk)?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            self.count(n);
            self.held.extend_from_slice(&chunk[..n]);
            if self.held.ends_with(&mark) {
                self.done = true;
                self.held.truncate(self.held.len() - RUN_ID_SIZE);
            }
        }
    }
}

impl<R: Read> Read for PayloadReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        match self.kind {
            Payload::Len(len) => self.read_len(len, out),
            Payload::Mark(mark) => self.read_mark(mark, out),
        }
    }
}

/// Receives the RDB of a full sync and loads it, to disk first or
/// straight from the socket (`repl-diskless-load`).
/// `replid` is the master's: a swapdb load of the same history serves the
/// old data meanwhile.
fn receive_rdb(
    server: &Server,
    link: &MasterLink,
    conn: &mut Conn,
    replid: &str,
) -> Result<(), SyncError> {
    link.set_state(TRANSFER);
    link.transfer_size.store(-1, Ordering::Relaxed);
    link.transfer_read.store(0, Ordering::Relaxed);
    let _ = conn
        .writer
        .0
        .socket()
        .set_read_timeout(Some(repl_timeout(server)));
    let diskless = use_diskless_load(server);
    let target = if diskless { "to parser" } else { "to disk" };
    let kind = loop {
        let line = read_line(&mut conn.reader).map_err(|e| Some(transfer_error(&e)))?;
        link.last_io_ms.store(now_ms(), Ordering::Relaxed);
        if let Some(kind) = parse_bulk_header(&line).map_err(Some)? {
            break kind;
        }
    };
    match &kind {
        Payload::Len(n) => {
            link.transfer_size.store(*n as i64, Ordering::Relaxed);
            tracing::info!("MASTER <-> REPLICA sync: receiving {n} bytes from master {target}");
        }
        Payload::Mark(_) => {
            link.transfer_size.store(0, Ordering::Relaxed);
            tracing::info!(
                "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF {target}"
            );
        }
    }
    let mut payload = PayloadReader::new(&mut conn.reader, kind);
    payload.progress = Some(Arc::new(AtomicU64::new(0)));
    if diskless && load_mode(server) == "swapdb" {
        let same_history = server.repl.replid().eq_ignore_ascii_case(replid);
        super::swapdb::load_aside(server, &mut payload, same_history)
    } else if diskless {
        load_from_socket(server, &mut payload)
    } else {
        let path = save_payload(server, link, &mut payload)?;
        load_file(server, &path)
    }
}

/// `repl-diskless-load`.
fn load_mode(server: &Server) -> String {
    server
        .config
        .get_one("repl-diskless-load")
        .unwrap_or_default()
}

/// Redis's `useDisklessLoad`.
fn use_diskless_load(server: &Server) -> bool {
    match load_mode(server).as_str() {
        "swapdb" => true,
        "on-empty-db" => server
            .keyspace
            .db_sizes()
            .iter()
            .all(|(keys, _)| *keys == 0),
        _ => false,
    }
}

/// The log line for a failed read of the transfer.
fn transfer_error(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => "Timeout receiving bulk data from MASTER... If the problem persists try to set the 'repl-timeout' parameter in redis.conf to a larger value.".into(),
        io::ErrorKind::UnexpectedEof => "I/O error trying to sync with MASTER: connection lost".into(),
        _ => format!("I/O error trying to sync with MASTER: {e}"),
    }
}

/// Writes the payload to a temporary file, then renames it over
/// `dbfilename` (the replica's dump is now the master's data).
fn save_payload<R: Read>(
    server: &Server,
    link: &MasterLink,
    payload: &mut PayloadReader<R>,
) -> Result<PathBuf, SyncError> {
    let tmp = PathBuf::from(format!(
        "temp-{}.{}.rdb",
        now_ms() / 1000,
        std::process::id()
    ));
    let result = (|| -> Result<(), SyncError> {
        let mut file = std::fs::File::create(&tmp).map_err(|e| {
            Some(format!(
                "Opening the temp file needed for MASTER <-> REPLICA synchronization: {e}"
            ))
        })?;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match payload.read(&mut buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                read => read.map_err(|e| Some(transfer_error(&e)))?,
            };
            if n == 0 {
                break;
            }
            link.last_io_ms.store(now_ms(), Ordering::Relaxed);
            if let Some(p) = &payload.progress {
                link.transfer_read
                    .store(p.load(Ordering::Relaxed), Ordering::Relaxed);
            }
            file.write_all(&buf[..n]).map_err(|e| {
                Some(format!("Write error or short write writing to the DB dump file needed for MASTER <-> REPLICA synchronization: {e}"))
            })?;
        }
        file.sync_all().map_err(|e| {
            Some(format!("Failed trying to sync the temp DB to disk in MASTER <-> REPLICA synchronization: {e}"))
        })
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let dump = crate::persist::rdb::dump_path(server);
    std::fs::rename(&tmp, &dump).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Some(format!(
            "Failed trying to rename the temp DB into {} in MASTER <-> REPLICA synchronization: {e}",
            dump.display()
        ))
    })?;
    Ok(dump)
}

/// Empties the dataset and this server's replicas before loading the
/// master's data (Redis's `replicationAttachToNewMaster` and `emptyData`).
fn flush_old_data(server: &Server) {
    attach_to_new_master(server);
    tracing::info!("MASTER <-> REPLICA sync: Flushing old data");
    free_all(server, &server.keyspace);
    crate::exec::script::function_flush(server, 0);
}

/// The master's data replaces this server's: the history it cached is
/// no longer one to continue, and its own replicas must sync again
/// (Redis's `replicationAttachToNewMaster`).
pub(super) fn attach_to_new_master(server: &Server) {
    let repl = &server.repl;
    if repl.cached_master.swap(false, Ordering::SeqCst) {
        tracing::info!("Discarding previously cached master state.");
    }
    repl.disconnect_replicas();
}

/// Empties every database of `keyspace`, freeing the data in the
/// background.
pub(super) fn free_all(server: &Server, keyspace: &vireo_store::Keyspace) {
    let mut keys = keyspace.lock_all();
    let flushed = (0..keyspace.databases())
        .map(|db| keys.flush_db(db))
        .collect();
    drop(keys);
    server.lazyfree.free_tables(flushed);
}

/// Loads the received dump file.
fn load_file(server: &Server, path: &std::path::Path) -> Result<(), SyncError> {
    flush_old_data(server);
    tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
    let loaded = std::fs::File::open(path)
        .map_err(|e| e.to_string())
        .and_then(|f| load(server, f));
    loaded.map_err(|e| {
        Some(format!(
            "Failed trying to load the MASTER synchronization DB from disk: {e}"
        ))
    })
}

/// Loads the payload as it arrives; a failed load leaves the dataset empty.
fn load_from_socket<R: Read>(
    server: &Server,
    payload: &mut PayloadReader<R>,
) -> Result<(), SyncError> {
    flush_old_data(server);
    tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
    let result = load(server, &mut *payload).and_then(|()| read_to_mark(payload));
    result.map_err(|e| {
        tracing::warn!("Failed trying to load the MASTER synchronization DB from socket: {e}");
        // Remove the half-loaded data, as Redis does.
        free_all(server, &server.keyspace);
        None
    })
}

/// After the loader stopped at the RDB's end, reads what remains up to
/// the transfer's end (nothing, from a sound master) and checks its mark.
pub(super) fn read_to_mark<R: Read>(payload: &mut PayloadReader<R>) -> Result<(), String> {
    let rest = io::copy(&mut *payload, &mut io::sink());
    if rest.is_err() || !payload.finished() {
        return Err("Replication stream EOF marker is broken".into());
    }
    Ok(())
}

/// Loads an RDB stream while clients get -LOADING.
fn load(server: &Server, reader: impl Read) -> Result<(), String> {
    load_flagged(server, &server.rdb.loading, || {
        crate::persist::rdb::load_stream(server, reader)
    })
}

/// Runs the RDB load `run` with `flag` (`loading` or `async_loading`) set
/// and the loading progress reset, and logs its outcome.
pub(super) fn load_flagged(
    server: &Server,
    flag: &AtomicBool,
    run: impl FnOnce() -> Result<(crate::persist::rdb::LoadStats, u64), String>,
) -> Result<(), String> {
    let state = &server.rdb;
    state.loading_loaded_bytes.store(0, Ordering::Relaxed);
    state
        .loading_start_s
        .store(now_ms() / 1000, Ordering::Relaxed);
    flag.store(true, Ordering::Release);
    let result = run();
    flag.store(false, Ordering::Release);
    let (stats, _) = result.inspect_err(|e| {
        let at = state.loading_loaded_bytes.load(Ordering::Relaxed);
        tracing::warn!("Internal error in RDB reading offset {at}, function at rdb.c:0 -> {e}");
    })?;
    tracing::info!(
        "Done loading RDB, keys loaded: {}, keys expired: {}.",
        stats.loaded,
        stats.expired
    );
    Ok(())
}

/// Registers the master client (CLIENT LIST flag `M`).
fn attach_master_client(server: &Server, link: &MasterLink, conn: &Conn) {
    let stream = conn.writer.0.socket();
    let text = |a: io::Result<socket2::SockAddr>| {
        a.ok()
            .and_then(|a| a.as_socket())
            .map(|a| a.to_string())
            .unwrap_or_default()
    };
    let addr = text(stream.peer_addr());
    let laddr = text(stream.local_addr());
    let client = Arc::new(ClientShared::new(
        server.clients.next_id(),
        addr,
        laddr,
        stream.as_raw_fd(),
        0,
        false,
    ));
    client.set_flag(cflags::MASTER, true);
    // Counted like any connection, so that removing it frees its own slot.
    server.clients.try_reserve(usize::MAX);
    server.clients.add(client.clone());
    *link.client.lock() = Some(client);
}

/// Sends `REPLCONF ACK <offset>` (the offset of the stream applied).
fn send_ack(server: &Server, writer: &mut SharedLink) -> io::Result<()> {
    let offset = server.repl.offset().to_string();
    send(writer, &[b"REPLCONF", b"ACK", offset.as_bytes()])
}

/// Follows the master's stream until the link fails or is stopped:
/// applies each command as the master client and streams it on once it
/// (or its whole transaction) is applied; ACKs every second.
fn follow_stream(server: &Arc<Server>, link: &MasterLink, mut conn: Conn) {
    let _ = conn.writer.0.socket().set_read_timeout(Some(TICK));
    let Some(client) = link.client.lock().clone() else {
        return;
    };
    let mut session = Session::new(client.clone(), true);
    session.from_master = true;
    session.db = link.stream_db.load(Ordering::Relaxed);
    let mut out = ReplyBuf::new(Protocol::Resp2);
    let mut parser = Parser::new();
    // Applied bytes not yet streamed on (an open transaction), then bytes
    // not yet parsed.
    let mut buf: Vec<u8> = Vec::new();
    let mut parsed = 0;
    let mut last_ack = Instant::now();
    let timeout = repl_timeout(server);
    link.last_io_ms.store(now_ms(), Ordering::Relaxed);
    while live(server, link) && !client.killed.load(Ordering::Relaxed) {
        if last_ack.elapsed() >= Duration::from_secs(1) {
            last_ack = Instant::now();
            if send_ack(server, &mut conn.writer).is_err() {
                break;
            }
        }
        let idle = now_ms().saturating_sub(link.last_io_ms.load(Ordering::Relaxed));
        if idle > timeout.as_millis() as u64 {
            tracing::warn!("MASTER timeout: no data nor PING received...");
            break;
        }
        let mut chunk = [0u8; 16 * 1024];
        let n = match conn.reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            // A socket with a timeout returns EINTR after SIGSTOP/SIGCONT.
            Err(e) if super::retry_later(&e) => continue,
            Err(_) => break,
        };
        link.last_io_ms.store(now_ms(), Ordering::Relaxed);
        client
            .last_interaction_ms
            .store(now_ms(), Ordering::Relaxed);
        link.read_offset.fetch_add(n as u64, Ordering::Relaxed);
        buf.extend_from_slice(&chunk[..n]);
        let applied = apply_buffered(
            server,
            link,
            &mut session,
            &mut out,
            &mut parser,
            &mut buf,
            &mut parsed,
            &mut conn.writer,
        );
        match applied {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                tracing::warn!("Protocol error from master: {e}");
                break;
            }
        }
    }
    if session.in_multi() {
        crate::exec::multi::discard_transaction(server, &mut session);
    }
    link.stream_db.store(session.db, Ordering::Relaxed);
    crate::exec::dispatch::on_disconnect(server, &mut session);
}

/// Applies every complete command in `buf[*parsed..]`. Bytes stay in `buf`
/// until streamed on: after each command applied outside a transaction,
/// everything applied goes to this server's backlog and replicas. False
/// when the link was stopped.
#[allow(clippy::too_many_arguments)]
fn apply_buffered(
    server: &Server,
    link: &MasterLink,
    session: &mut Session,
    out: &mut ReplyBuf,
    parser: &mut Parser,
    buf: &mut Vec<u8>,
    parsed: &mut usize,
    writer: &mut SharedLink,
) -> Result<bool, String> {
    let limits = ParseLimits::default();
    loop {
        let used = match parser.parse(&buf[*parsed..], &limits) {
            Ok(Some(used)) => used,
            Ok(None) => return Ok(true),
            Err(e) => return Err(format!("{e:?}")),
        };
        let applying = server.repl.apply.lock();
        // Checked under the lock: once REPLICAOF stopped this link and took
        // the lock, nothing more of this master is applied.
        if link.stop.load(Ordering::SeqCst) {
            return Ok(false);
        }
        let args = parser.args(&buf[*parsed..]);
        let getack = is_getack(args);
        if !args.is_empty() && !getack {
            crate::exec::dispatch::run(server, session, out, args, None);
            if out.as_bytes().first() == Some(&b'-') {
                log_error_to_master(args, out.as_bytes());
            }
            out.clear();
        }
        *parsed += used;
        if !session.in_multi() {
            super::feed_from_master(server, &buf[..*parsed]);
            buf.drain(..*parsed);
            *parsed = 0;
            // A save's cut (under `apply`) records it as repl-stream-db.
            link.stream_db.store(session.db, Ordering::Relaxed);
        }
        drop(applying);
        if getack {
            // The offset up to and with the GETACK itself, as Redis's
            // reply to it is sent once the command is processed.
            send_ack(server, writer).map_err(|e| e.to_string())?;
        }
    }
}

/// A command from the master failed here: the data may now differ from
/// the master's. Redis logs it loudly (its reply is never sent).
fn log_error_to_master(args: Args<'_>, reply: &[u8]) {
    let error = String::from_utf8_lossy(&reply[1..reply.len().min(4097)]);
    let error = error.trim_end();
    let name = crate::exec::dispatch::command_name(args.get(0)).unwrap_or("<unknown>");
    tracing::warn!("== CRITICAL == This replica is sending an error to its master: '{error}' after processing the command '{name}'");
}

/// True for `REPLCONF GETACK ...`.
fn is_getack(args: Args<'_>) -> bool {
    args.len() >= 2
        && args.get(0).eq_ignore_ascii_case(b"replconf")
        && args.get(1).eq_ignore_ascii_case(b"getack")
}

/// Writes one command in RESP.
fn send(writer: &mut impl Write, args: &[&[u8]]) -> io::Result<()> {
    let mut cmd = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        cmd.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        cmd.extend_from_slice(a);
        cmd.extend_from_slice(b"\r\n");
    }
    writer.write_all(&cmd)
}

/// Reads one reply line of the handshake (Redis's
/// `receiveSynchronousResponse`).
fn reply_line(conn: &mut Conn) -> Result<String, SyncError> {
    read_line(&mut conn.reader)
        .map(|l| String::from_utf8_lossy(&l).into_owned())
        .map_err(|e| {
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) {
                return Some("Timeout connecting to the MASTER...".to_string());
            }
            tracing::warn!("Failed to read response from the server: {e}");
            Some("Master did not respond to command during SYNC handshake".to_string())
        })
}

/// Reads a line ending in LF, without its CR LF, of at most [`MAX_LINE`]
/// bytes (a longer one is an error: memory stays bounded).
fn read_line(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    let n = reader
        .by_ref()
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut line)?;
    if n == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    if line.last() != Some(&b'\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "line too long or cut",
        ));
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(mut r: impl Read, chunk: usize) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; chunk];
        loop {
            let n = r.read(&mut buf)?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    #[test]
    fn bulk_headers_as_redis_reads_them() {
        assert_eq!(parse_bulk_header(b""), Ok(None));
        assert_eq!(parse_bulk_header(b"$12"), Ok(Some(Payload::Len(12))));
        let mark = [b'a'; 40];
        let mut line = b"$EOF:".to_vec();
        line.extend_from_slice(&mark);
        assert_eq!(parse_bulk_header(&line), Ok(Some(Payload::Mark(mark))));
        assert_eq!(
            parse_bulk_header(b"-ERR no"),
            Err("MASTER aborted replication with an error: ERR no".into())
        );
        assert!(parse_bulk_header(b"+OK").unwrap_err().starts_with(
            "Bad protocol from MASTER, the first byte is not '$' (we received '+OK')"
        ));
        assert!(parse_bulk_header(b"$EOF:short").is_err());
        assert!(parse_bulk_header(b"$-3").is_err());
    }

    #[test]
    fn a_sized_payload_stops_at_its_length() {
        let data = b"0123456789tail".to_vec();
        let mut src = &data[..];
        let got = read_all(PayloadReader::new(&mut src, Payload::Len(10)), 3).unwrap();
        assert_eq!(got, b"0123456789");
        assert_eq!(src, b"tail");
    }

    #[test]
    fn a_truncated_payload_is_an_error() {
        let data = b"01234".to_vec();
        let err = read_all(PayloadReader::new(&data[..], Payload::Len(10)), 4).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        let mark = [b'm'; 40];
        let err = read_all(PayloadReader::new(&data[..], Payload::Mark(mark)), 4).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    /// Random payloads, marks and read sizes: the reader gives out exactly
    /// the payload whatever the chunking on either side.
    #[test]
    fn a_marked_payload_ends_before_its_mark() {
        let mut rng = fastrand::Rng::with_seed(28);
        for _ in 0..500 {
            let mut mark = [0u8; 40];
            mark.iter_mut().for_each(|b| *b = rng.u8(b'a'..=b'z'));
            let body: Vec<u8> = (0..rng.usize(0..300)).map(|_| rng.u8(..)).collect();
            let mut wire = body.clone();
            wire.extend_from_slice(&mark);
            let inner = Chunked {
                data: wire,
                pos: 0,
                max: rng.usize(1..70),
            };
            let reader = PayloadReader::new(inner, Payload::Mark(mark));
            assert_eq!(read_all(reader, rng.usize(1..90)).unwrap(), body);
        }
    }

    /// Random bytes as a bulk header and a payload: errors, never a panic
    /// or more than the bytes given.
    #[test]
    fn random_input_from_a_master_never_panics() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2000 {
            let line: Vec<u8> = (0..rng.usize(0..60))
                .map(|_| {
                    if rng.bool() {
                        b"$EOF:-0123456789"[rng.usize(..16)]
                    } else {
                        rng.u8(..)
                    }
                })
                .collect();
            let kind = match parse_bulk_header(&line) {
                Ok(Some(kind)) => kind,
                _ => Payload::Mark([b'x'; 40]),
            };
            let data: Vec<u8> = (0..rng.usize(0..200)).map(|_| rng.u8(..)).collect();
            if let Ok(got) = read_all(PayloadReader::new(&data[..], kind), rng.usize(1..50)) {
                assert!(got.len() <= data.len());
            }
        }
    }

    #[test]
    fn handshake_lines_are_bounded() {
        let mut ok = &b"+PONG\r\nnext"[..];
        assert_eq!(read_line(&mut ok).unwrap(), b"+PONG");
        let long = vec![b'a'; MAX_LINE + 10];
        assert!(read_line(&mut &long[..]).is_err());
        assert!(read_line(&mut &b""[..]).is_err());
    }

    #[test]
    fn fullresync_replies() {
        let id = "a".repeat(40);
        match full_resync_reply(&format!(" {id} 1234")) {
            Psync::Full { replid, offset } => assert_eq!((replid, offset), (id, 1234)),
            Psync::Continue => panic!("not a continue"),
        }
        match full_resync_reply(" short 12") {
            Psync::Full { offset, .. } => assert_eq!(offset, -1),
            Psync::Continue => panic!("not a continue"),
        }
    }

    /// A reader giving out at most `max` bytes per call.
    struct Chunked {
        data: Vec<u8>,
        pos: usize,
        max: usize,
    }

    impl Read for Chunked {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = out.len().min(self.max).min(self.data.len() - self.pos);
            out[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }
}
