//! Diskless full sync (`repl-diskless-sync yes`, for replicas that
//! announced `capa eof`): the RDB goes straight to the replica sockets,
//! framed as `$EOF:<40 random chars>\r\n` … `<the same 40 chars>`, with no
//! file in between.
//!
//! Replicas asking for a full sync join a [`Queue`]. The first to join
//! leads: it waits `repl-diskless-sync-delay` seconds (or until
//! `repl-diskless-sync-max-replicas` replicas are waiting), and until any
//! transfer still running is over, then takes every waiting replica and
//! streams one snapshot to all of them at once ([`transfer`]); each
//! replica's own sender thread waits for the outcome. A replica that
//! fails (write error, or no progress for `repl-timeout`) is dropped
//! and the others go on. As in Redis, the command stream gathered during
//! the transfer is held back until the replica's first `REPLCONF ACK`,
//! so nothing follows the EOF mark on the wire before the replica has
//! loaded the RDB.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::{wait_for_cut, Replica, SyncKind, ONLINE};
use crate::server::Server;

/// The transfer's outcome for one replica, in `Replica::rdb_outcome`.
pub(super) const PENDING: u8 = 0;
pub(super) const SENT: u8 = 1;
pub(super) const FAILED: u8 = 2;

/// How long one socket write may block before the transfer checks
/// `repl-timeout` again.
const WRITE_POLL: Duration = Duration::from_millis(500);

/// Replicas waiting for the next diskless transfer.
#[derive(Default)]
pub struct Queue {
    state: Mutex<QueueState>,
    cond: Condvar,
    /// FLUSHALLs so far: a transfer begun before the last one stops.
    flushes: AtomicU64,
}

impl Queue {
    /// FLUSHALL: the transfer running stops at its next write, as Redis's
    /// FLUSHALL kills the RDB child; its replicas connect again and get
    /// the flushed dataset.
    pub fn abort_running(&self) {
        self.flushes.fetch_add(1, Ordering::SeqCst);
    }
}

#[derive(Default)]
struct QueueState {
    /// Replicas waiting, with whether they asked with PSYNC.
    waiting: Vec<(Arc<Replica>, bool)>,
    /// When the oldest waiting replica joined.
    since: Option<Instant>,
    /// One waiting replica's thread will start the next transfer.
    has_leader: bool,
    /// A transfer is streaming.
    running: bool,
}

/// A diskless full sync for `r`: joins the queue (leading the next
/// transfer if no one does) and waits for the RDB to be sent, or sends a
/// filtered RDB on its own; then, unless the client wants the RDB only,
/// waits for the replica's first ACK. Ok once the stream may flow.
pub(super) fn sync(server: &Arc<Server>, r: &Arc<Replica>, kind: &SyncKind) -> io::Result<()> {
    let psync = matches!(kind, SyncKind::Psync { .. });
    if r.filter.is_filtered() {
        send_filtered(server, r, psync)?;
    } else {
        send_shared(server, r, psync)?;
    }
    if r.rdb_only {
        return Ok(());
    }
    while !r.got_ack.load(Ordering::SeqCst) {
        if r.is_closed() {
            return Err(io::Error::other("link closed"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    r.state.store(ONLINE, Ordering::Relaxed);
    Ok(())
}

/// The RDB everyone waiting gets: joins the queue (leading the next
/// transfer if no one does) and waits for the transfer's outcome.
fn send_shared(server: &Arc<Server>, r: &Arc<Replica>, psync: bool) -> io::Result<()> {
    if join(server, r, psync) {
        lead(server);
    }
    while r.rdb_outcome.load(Ordering::SeqCst) == PENDING {
        if r.is_closed() {
            return Err(io::Error::other("link closed"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if r.rdb_outcome.load(Ordering::SeqCst) == FAILED {
        return Err(io::Error::other("diskless transfer failed"));
    }
    Ok(())
}

/// A filtered RDB (REPLCONF rdb-filter-only), made for `r` alone as Redis
/// makes one per set of filters: after `repl-diskless-sync-delay` when
/// diskless sync is on, at once when a filter alone forced the socket.
/// Holding no data, it takes no snapshot and shares no transfer.
fn send_filtered(server: &Arc<Server>, r: &Arc<Replica>, psync: bool) -> io::Result<()> {
    let delay = if server.config.flag("repl-diskless-sync") {
        sync_delay(server)
    } else {
        Duration::ZERO
    };
    if !delay.is_zero() {
        tracing::info!("Delay next BGSAVE for diskless SYNC");
        let since = Instant::now();
        while since.elapsed() < delay {
            if r.is_closed() {
                return Err(io::Error::other("link closed"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    tracing::info!("Starting BGSAVE for SYNC with target: replicas sockets");
    server.repl.count_full_sync();
    let rdb = super::filtered_rdb(server, r);
    let mut sink = FanOut {
        server,
        alive: vec![(r.clone(), psync)],
        mark: super::super::random_replid(),
        started: false,
        flushes: server.repl.diskless.flushes.load(Ordering::SeqCst),
    };
    let sent = sink.write_all(&rdb).and_then(|()| sink.finish());
    let _ = r.socket.set_write_timeout(None);
    sent?;
    tracing::info!("Streamed RDB transfer with replica {} succeeded (socket). Waiting for REPLCONF ACK from slave to enable streaming", r.name());
    Ok(())
}

/// Adds `r` to the queue, logging as Redis does; true if this thread is
/// to lead the next transfer.
fn join(server: &Server, r: &Arc<Replica>, psync: bool) -> bool {
    let queue = &server.repl.diskless;
    let mut q = queue.state.lock();
    if q.running {
        tracing::info!("Current BGSAVE has socket target. Waiting for next BGSAVE for SYNC");
    } else if sync_delay(server) > Duration::ZERO {
        tracing::info!("Delay next BGSAVE for diskless SYNC");
    }
    q.waiting.push((r.clone(), psync));
    q.since.get_or_insert_with(Instant::now);
    let lead = !q.has_leader;
    q.has_leader = true;
    queue.cond.notify_all();
    lead
}

/// `repl-diskless-sync-delay`.
fn sync_delay(server: &Server) -> Duration {
    Duration::from_secs(super::super::config_u64(server, "repl-diskless-sync-delay").unwrap_or(5))
}

/// Waits until the next transfer is due, takes the waiting replicas and
/// streams the snapshot to them.
fn lead(server: &Arc<Server>) {
    let queue = &server.repl.diskless;
    let batch = {
        let mut q = queue.state.lock();
        loop {
            let max = super::super::config_u64(server, "repl-diskless-sync-max-replicas")
                .unwrap_or(0) as usize;
            q.waiting.retain(|(r, _)| !r.is_closed());
            let waited = q.since.map_or(Duration::ZERO, |s| s.elapsed());
            let enough = max > 0 && q.waiting.len() >= max;
            if !q.running && (enough || waited >= sync_delay(server) || q.waiting.is_empty()) {
                break;
            }
            queue.cond.wait_for(&mut q, Duration::from_millis(100));
        }
        q.has_leader = false;
        q.since = None;
        q.running = !q.waiting.is_empty();
        std::mem::take(&mut q.waiting)
    };
    if batch.is_empty() {
        return;
    }
    transfer(server, &batch);
    queue.state.lock().running = false;
    queue.cond.notify_all();
}

/// Streams one snapshot to every replica of `batch` and records each
/// one's outcome.
fn transfer(server: &Arc<Server>, batch: &[(Arc<Replica>, bool)]) {
    tracing::info!("Starting BGSAVE for SYNC with target: replicas sockets");
    for _ in batch {
        server.repl.count_full_sync();
    }
    let mut sink = FanOut {
        server,
        alive: batch.to_vec(),
        mark: super::super::random_replid(),
        started: false,
        flushes: server.repl.diskless.flushes.load(Ordering::SeqCst),
    };
    // Redis names its fork child; the transfer runs in this process.
    tracing::info!(
        "Background RDB transfer started by pid {}",
        std::process::id()
    );
    let replicas: Vec<Arc<Replica>> = batch.iter().map(|(r, _)| r.clone()).collect();
    let written = super::snapshot_to(server, &replicas, super::Target::Sockets(&mut sink))
        .and_then(|()| sink.finish());
    let outcome = if written.is_ok() { SENT } else { FAILED };
    for (r, _) in &sink.alive {
        let _ = r.socket.set_write_timeout(None);
        if outcome == SENT {
            tracing::info!("Streamed RDB transfer with replica {} succeeded (socket). Waiting for REPLCONF ACK from slave to enable streaming", r.name());
        } else {
            r.close();
        }
        r.rdb_outcome.store(outcome, Ordering::SeqCst);
    }
    for (r, _) in batch {
        // Dropped on the way.
        let _ = r
            .rdb_outcome
            .compare_exchange(PENDING, FAILED, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// The snapshot's writer: every byte to every replica still up.
pub(super) struct FanOut<'a> {
    server: &'a Server,
    alive: Vec<(Arc<Replica>, bool)>,
    /// The EOF mark framing this transfer.
    mark: String,
    /// The preambles are sent (at the first write, once the cut's offset
    /// is known).
    started: bool,
    /// The FLUSHALL count when the transfer began.
    flushes: u64,
}

impl FanOut<'_> {
    /// Sends each replica its preamble: `+FULLRESYNC <replid> <offset>`
    /// for PSYNC, then `$EOF:<mark>`. The replica's state stays
    /// `wait_bgsave` until the transfer ends, as Redis's does while its
    /// child streams to sockets.
    fn start(&mut self) -> io::Result<()> {
        self.started = true;
        let repl = &self.server.repl;
        let mark = self.mark.clone();
        self.each(|r, psync| {
            let offset = wait_for_cut(r)?;
            // Read after the cut: attaching the first replica may have
            // started a new history.
            let replid = repl.replid();
            r.socket.set_write_timeout(Some(WRITE_POLL))?;
            let mut head = String::new();
            if psync {
                head.push_str(&format!("+FULLRESYNC {replid} {offset}\r\n"));
            }
            head.push_str(&format!("$EOF:{mark}\r\n"));
            Ok(head.into_bytes())
        })
    }

    /// The closing mark, and Redis's log line for the end of the transfer.
    fn finish(&mut self) -> io::Result<()> {
        if !self.started {
            self.start()?;
        }
        let mark = self.mark.clone().into_bytes();
        self.each(|_, _| Ok(mark.clone()))?;
        tracing::warn!(
            "Diskless rdb transfer, done reading from pipe, {} replicas still up.",
            self.alive.len()
        );
        Ok(())
    }

    /// Writes what `bytes_for` gives each replica still up, dropping those
    /// that fail; an error once none is left.
    fn each(
        &mut self,
        mut bytes_for: impl FnMut(&Replica, bool) -> io::Result<Vec<u8>>,
    ) -> io::Result<()> {
        let server = self.server;
        self.alive.retain(|(r, psync)| {
            let sent = bytes_for(r, *psync).and_then(|b| write_patiently(server, r, &b));
            if let Err(e) = &sent {
                if e.kind() == io::ErrorKind::TimedOut {
                    tracing::warn!("Disconnecting timedout replica (full sync): {}", r.name());
                } else {
                    tracing::warn!("Diskless rdb transfer, write error sending DB to replica: {e}");
                }
                r.close();
                r.rdb_outcome.store(FAILED, Ordering::SeqCst);
            }
            sent.is_ok()
        });
        if self.alive.is_empty() {
            tracing::warn!("Diskless rdb transfer, last replica dropped, killing fork child.");
            return Err(io::Error::other("every replica dropped"));
        }
        Ok(())
    }
}

impl Write for FanOut<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.server.repl.diskless.flushes.load(Ordering::SeqCst) != self.flushes {
            tracing::warn!("Diskless rdb transfer aborted: the dataset was flushed.");
            return Err(io::Error::other("the dataset was flushed"));
        }
        if !self.started {
            self.start()?;
        }
        self.each(|_, _| Ok(buf.to_vec()))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes all of `bytes` to the replica; TimedOut once a write made no
/// progress for `repl-timeout` seconds (the socket's own timeout is
/// [`WRITE_POLL`], so a changed `repl-timeout` is seen).
fn write_patiently(server: &Server, r: &Replica, bytes: &[u8]) -> io::Result<()> {
    let mut rest = bytes;
    let mut progress = Instant::now();
    while !rest.is_empty() {
        if r.is_closed() {
            return Err(io::Error::other("link closed"));
        }
        match (&r.socket).write(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                rest = &rest[n..];
                progress = Instant::now();
            }
            Err(e) if super::super::retry_later(&e) => {
                let timeout = super::super::config_u64(server, "repl-timeout").unwrap_or(60);
                if progress.elapsed() >= Duration::from_secs(timeout) {
                    return Err(io::ErrorKind::TimedOut.into());
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
