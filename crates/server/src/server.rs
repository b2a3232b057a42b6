//! State shared by every thread of the server.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use parking_lot::Mutex;
use vireo_store::clock::now_ms;
use vireo_store::Keyspace;

use crate::cmd::table;
use crate::config::Config;
use crate::net::client::ClientRegistry;
use crate::net::worker::WorkerHandle;
use crate::ops::metrics::{Metrics, HIST_BUCKETS};

/// Version reported by INFO and HELLO (the Redis version we match).
pub const REDIS_VERSION: &str = "7.0.15";
/// Vireo's own version.
pub const VIREO_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Counters of one command (INFO commandstats).
#[derive(Default)]
pub struct CmdStat {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
    pub rejected: AtomicU64,
    pub failed: AtomicU64,
    /// Latency histogram (LATENCY HISTOGRAM, INFO latencystats), see
    /// [`crate::ops::metrics::hist_bucket`].
    pub latency: [AtomicU64; HIST_BUCKETS],
}

/// Adds `n` to a counter that only one thread writes. A plain load and
/// store is enough (readers on other threads see a recent value) and avoids
/// the locked read-modify-write a `fetch_add` costs on every command.
#[inline]
pub fn bump(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// Counters owned by one worker thread: written only by it (so they never
/// bounce between cores), summed by INFO.
pub struct WorkerStats {
    pub commands: AtomicU64,
    /// Keyspace changes made by this worker's clients.
    pub dirty: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    /// Socket reads that returned data (INFO `total_reads_processed`).
    pub reads_processed: AtomicU64,
    /// Socket writes that sent data (INFO `total_writes_processed`).
    pub writes_processed: AtomicU64,
    /// Indexed by command id (see [`crate::cmd::CmdRef`]).
    pub per_command: Vec<CmdStat>,
}

impl WorkerStats {
    fn new() -> Self {
        WorkerStats {
            commands: AtomicU64::new(0),
            dirty: AtomicU64::new(0),
            net_input_bytes: AtomicU64::new(0),
            net_output_bytes: AtomicU64::new(0),
            reads_processed: AtomicU64::new(0),
            writes_processed: AtomicU64::new(0),
            per_command: (0..table().all.len()).map(|_| CmdStat::default()).collect(),
        }
    }

    fn reset(&self) {
        for c in [
            &self.commands,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.reads_processed,
            &self.writes_processed,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        for s in &self.per_command {
            for c in [&s.calls, &s.usec, &s.rejected, &s.failed]
                .into_iter()
                .chain(&s.latency)
            {
                c.store(0, Ordering::Relaxed);
            }
        }
    }
}

/// Server-wide counters that change rarely enough to share.
#[derive(Default)]
pub struct GlobalStats {
    pub total_connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub total_error_replies: AtomicU64,
    pub client_qbuf_limit_disconnections: AtomicU64,
    pub client_output_buffer_limit_disconnections: AtomicU64,
    /// Error replies by their first word (INFO errorstats).
    pub errors: Mutex<HashMap<String, u64>>,
}

/// One SLOWLOG entry.
#[derive(Clone)]
pub struct SlowlogEntry {
    pub id: u64,
    pub time_s: u64,
    pub duration_us: u64,
    pub args: Vec<Vec<u8>>,
    pub addr: String,
    pub name: String,
}

/// The slow log (SLOWLOG GET/LEN/RESET).
#[derive(Default)]
pub struct SlowLog {
    pub entries: Mutex<VecDeque<SlowlogEntry>>,
    pub next_id: AtomicU64,
}

/// CLIENT PAUSE state.
#[derive(Default)]
pub struct Pause {
    /// 0: not paused, 1: writes paused, 2: everything paused.
    pub mode: AtomicU8,
    /// Unix ms at which the pause ends by itself.
    pub until_ms: AtomicU64,
    /// Holders of a write pause of their own, one bit each ([`HOLD_FAILOVER`],
    /// [`HOLD_SHUTDOWN`]): CLIENT UNPAUSE does not lift them.
    holds: AtomicU8,
}

/// A FAILOVER holds writes back until it ends (Redis's
/// `PAUSE_DURING_FAILOVER`).
pub const HOLD_FAILOVER: u8 = 1;
/// A shutdown waiting for its replicas holds writes back (Redis's
/// `PAUSE_DURING_SHUTDOWN`).
pub const HOLD_SHUTDOWN: u8 = 2;

impl Pause {
    /// The pause mode in force now (expired pauses read as none).
    pub fn active(&self) -> u8 {
        let held = u8::from(self.holds.load(Ordering::Acquire) != 0);
        let mode = self.mode.load(Ordering::Acquire);
        if mode != 0 && now_ms() >= self.until_ms.load(Ordering::Acquire) {
            self.mode.store(0, Ordering::Release);
            return held;
        }
        mode.max(held)
    }

    /// Starts or ends the failover's write pause; expiry stops with it.
    pub fn set_failover(&self, keyspace: &Keyspace, on: bool) {
        self.set_hold(keyspace, HOLD_FAILOVER, on);
    }

    /// Starts or ends `holder`'s write pause (a `HOLD_*` bit); expiry
    /// stops while any holds writes.
    pub fn set_hold(&self, keyspace: &Keyspace, holder: u8, on: bool) {
        if on {
            self.holds.fetch_or(holder, Ordering::AcqRel);
        } else {
            self.holds.fetch_and(!holder, Ordering::AcqRel);
        }
        let client_end = if self.mode.load(Ordering::Acquire) != 0 {
            self.until_ms.load(Ordering::Acquire)
        } else {
            0
        };
        keyspace.pause_expiry_until(self.expiry_end(client_end));
    }

    /// Until when expiry must stop, given a CLIENT PAUSE ending at
    /// `client_end`: forever while a holder holds writes.
    pub fn expiry_end(&self, client_end: u64) -> u64 {
        if self.holds.load(Ordering::Acquire) != 0 {
            u64::MAX
        } else {
            client_end
        }
    }
}

/// Keyspace shards (a power of two).
const SHARDS: usize = 1024;

/// Everything the threads share.
pub struct Server {
    pub config: Config,
    pub keyspace: Keyspace,
    /// Clients blocked on keys (BLPOP and friends).
    pub blocking: crate::exec::blocking::Registry,
    pub clients: ClientRegistry,
    pub stats: GlobalStats,
    pub worker_stats: Vec<Arc<WorkerStats>>,
    /// Handles to wake and message worker threads; set once they start.
    pub workers: OnceLock<Vec<WorkerHandle>>,
    pub slowlog: SlowLog,
    pub pause: Pause,
    /// Clients in MONITOR mode: (worker, client id).
    pub monitors: Mutex<Vec<(usize, u64)>>,
    /// Fast check for the common case of no monitors.
    pub monitor_count: AtomicUsize,
    /// Sum of the workers' change counters at the last save; the changes
    /// since then are [`Server::dirty`].
    pub dirty_at_last_save: AtomicU64,
    pub lastsave_s: AtomicU64,
    /// Set when the server is stopping.
    pub shutting_down: AtomicBool,
    /// A shutdown waiting for its replicas (`shutdown-timeout`).
    pub shutdown: crate::ops::shutdown::Shutdown,
    pub started: Instant,
    pub started_ms: u64,
    pub run_id: String,
    /// Address the TCP listener actually bound (useful with port 0).
    /// DEBUG PAUSE-CRON: the periodic jobs (active expiry, save points,
    /// eviction) are suspended.
    pub cron_paused: AtomicBool,
    pub bound_port: AtomicU64,
    /// Peak of the allocator's byte count.
    pub used_memory_peak: AtomicU64,
    /// Latency monitor, instantaneous rates, startup memory.
    pub metrics: Metrics,
    /// Snapshot and loading state (SAVE, BGSAVE, INFO persistence).
    pub rdb: crate::persist::rdb::RdbState,
    /// This server's own `Arc`, for commands that start background work.
    self_ref: OnceLock<Weak<Server>>,
    /// The append-only file.
    pub aof: crate::persist::aof::Aof,
    /// The background thread that frees big values.
    pub lazyfree: Arc<crate::memory::lazyfree::LazyFree>,
    /// `maxmemory` eviction state.
    pub evictor: crate::memory::evict::Evictor,
    /// Background snapshots started, INFO's `total_forks` (see
    /// [`crate::persist::forks`]).
    pub forks: crate::persist::forks::ForkStats,
    /// `maxmemory-clients` eviction state.
    pub client_eviction: crate::memory::client_evict::ClientEviction,
    /// Pub/Sub channels and patterns.
    pub pubsub: crate::exec::pubsub::PubSub,
    /// CLIENT TRACKING's invalidation table and prefixes.
    pub tracking: crate::exec::tracking::Tracking,
    /// The script cache, function libraries and running scripts.
    pub scripts: crate::exec::script::Scripts,
    /// Replication: the stream, its backlog and the replicas.
    pub repl: crate::repl::Repl,
    /// ACL users and the ACL log.
    pub security: crate::security::Security,
    /// The TLS configuration in force (`tls-*` parameters).
    pub tls: crate::security::tls::Tls,
}

impl Server {
    /// Shared state for `threads` workers.
    pub fn new(config: Config, threads: usize) -> Self {
        let databases = config.databases();
        let now = now_ms();
        let lazyfree = Arc::new(crate::memory::lazyfree::LazyFree::start());
        let server = Server {
            blocking: crate::exec::blocking::Registry::new(SHARDS),
            keyspace: Keyspace::new(databases, SHARDS),
            config,
            clients: ClientRegistry::default(),
            stats: GlobalStats::default(),
            worker_stats: (0..threads).map(|_| Arc::new(WorkerStats::new())).collect(),
            workers: OnceLock::new(),
            slowlog: SlowLog::default(),
            pause: Pause::default(),
            monitors: Mutex::new(Vec::new()),
            monitor_count: AtomicUsize::new(0),
            dirty_at_last_save: AtomicU64::new(0),
            lastsave_s: AtomicU64::new(now / 1000),
            shutting_down: AtomicBool::new(false),
            shutdown: Default::default(),
            started: Instant::now(),
            started_ms: now,
            run_id: random_run_id(),
            cron_paused: AtomicBool::new(false),
            bound_port: AtomicU64::new(0),
            used_memory_peak: AtomicU64::new(0),
            metrics: Metrics::new(),
            rdb: crate::persist::rdb::RdbState::default(),
            self_ref: OnceLock::new(),
            aof: crate::persist::aof::Aof::new(threads),
            lazyfree: lazyfree.clone(),
            evictor: crate::memory::evict::Evictor::default(),
            forks: Default::default(),
            client_eviction: Default::default(),
            pubsub: Default::default(),
            tracking: Default::default(),
            scripts: crate::exec::script::Scripts::new(threads),
            repl: Default::default(),
            security: Default::default(),
            tls: Default::default(),
        };
        server.keyspace.set_background_free(Box::new(move |v| {
            lazyfree.free_value(v);
        }));
        server.apply_keyspace_config();
        server
    }

    /// Passes the parameters the keyspace applies by itself (which access
    /// clock entries keep and the LFU tuning, `lazyfree-lazy-expire`,
    /// `lazyfree-lazy-server-del`) on to it; called at start and after
    /// every CONFIG SET.
    pub fn apply_keyspace_config(&self) {
        let h = &self.config.hot;
        self.keyspace
            .set_lfu_tuning(vireo_store::keyspace::LfuTuning {
                lfu: self.config.maxmemory_policy().ends_with("-lfu"),
                log_factor: h.lfu_log_factor.load(Ordering::Relaxed) as u32,
                decay_minutes: h.lfu_decay_time.load(Ordering::Relaxed) as u32,
            });
        self.keyspace
            .set_lazy_expire(h.lazyfree_lazy_expire.load(Ordering::Relaxed));
        self.keyspace
            .set_lazy_server_del(self.config.flag("lazyfree-lazy-server-del"));
    }

    /// Wraps the server in the `Arc` every thread shares, remembering it so
    /// that [`Server::arc`] works from a `&Server`.
    pub fn into_arc(self) -> Arc<Server> {
        let arc = Arc::new(self);
        let _ = arc.self_ref.set(Arc::downgrade(&arc));
        arc
    }

    /// The shared handle of this server (made by [`Server::into_arc`]).
    ///
    /// # Panics
    /// If the server was not made with [`Server::into_arc`].
    pub fn arc(&self) -> Arc<Server> {
        self.self_ref
            .get()
            .and_then(Weak::upgrade)
            .expect("the server is shared through Server::into_arc")
    }

    /// Zeroes the statistics CONFIG RESETSTAT resets.
    pub fn reset_stats(&self) {
        for w in &self.worker_stats {
            w.reset();
        }
        self.keyspace.reset_stats();
        self.lazyfree.reset_stats();
        self.evictor.reset_stats();
        self.forks.reset();
        self.client_eviction.reset_stats();
        self.repl.reset_sync_stats();
        for c in [
            &self.stats.total_connections_received,
            &self.stats.rejected_connections,
            &self.stats.total_error_replies,
            &self.stats.client_qbuf_limit_disconnections,
            &self.stats.client_output_buffer_limit_disconnections,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        self.stats.errors.lock().clear();
    }

    /// Counts an error reply by its first word (`ERR`, `WRONGTYPE`, …).
    pub fn count_error(&self, reply: &[u8]) {
        let body = reply.strip_prefix(b"-").unwrap_or(reply);
        let end = body
            .iter()
            .position(|&b| b == b' ' || b == b'\r')
            .unwrap_or(body.len());
        let code = String::from_utf8_lossy(&body[..end]).into_owned();
        self.stats
            .total_error_replies
            .fetch_add(1, Ordering::Relaxed);
        let mut errors = self.stats.errors.lock();
        // Redis caps the distinct error codes it tracks at 128.
        if errors.len() < 128 || errors.contains_key(&code) {
            *errors.entry(code).or_insert(0) += 1;
        }
    }

    /// Wakes every worker (shutdown, unpause).
    pub fn wake_all(&self) {
        if let Some(ws) = self.workers.get() {
            for w in ws {
                w.wake();
            }
        }
    }

    /// Tells the worker owning `client` to look at its messages.
    pub fn notify(&self, worker: usize, msg: crate::net::worker::Msg) {
        if let Some(w) = self.workers.get().and_then(|ws| ws.get(worker)) {
            crate::net::worker::send_to(w, worker, msg);
        }
    }

    /// Changes since the last save (`rdb_changes_since_last_save`).
    pub fn dirty(&self) -> u64 {
        self.total_dirty()
            .saturating_sub(self.dirty_at_last_save.load(Ordering::Relaxed))
    }

    /// Changes since start.
    pub fn total_dirty(&self) -> u64 {
        self.worker_stats
            .iter()
            .map(|w| w.dirty.load(Ordering::Relaxed))
            .sum()
    }

    /// What SHUTDOWN (or SIGTERM) does before the server stops: holds every
    /// client's further commands back (so no write is acknowledged after the
    /// final save and then lost), saves when `save` says so, closes the
    /// listeners and sets the stop flag. On a failed save the hold is lifted, the server keeps
    /// running and Err says why, unless `force`.
    pub fn prepare_shutdown(&self, save: ShutdownSave, force: bool) -> Result<(), String> {
        let must_save = match save {
            ShutdownSave::Save => true,
            ShutdownSave::NoSave => false,
            ShutdownSave::Default => !self.config.save_params().is_empty(),
        };
        self.pause.until_ms.store(u64::MAX, Ordering::Release);
        self.pause.mode.store(2, Ordering::Release);
        if must_save {
            tracing::info!("Saving the final RDB snapshot before exiting.");
            if let Err(e) = crate::persist::rdb::save(&self.arc()) {
                if !force {
                    tracing::warn!("Error trying to save the DB, can't exit: {e}");
                    self.pause.mode.store(0, Ordering::Release);
                    self.wake_all();
                    return Err(crate::ops::shutdown::FAILED.into());
                }
                tracing::warn!("Error trying to save the DB. Exit anyway: {e}");
            }
        }
        crate::net::listener::close_listeners();
        self.shutting_down.store(true, Ordering::Release);
        self.wake_all();
        Ok(())
    }

    /// Seconds since start.
    pub fn uptime_s(&self) -> u64 {
        self.started.elapsed().as_secs()
    }
}

/// Whether SHUTDOWN saves first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownSave {
    /// SHUTDOWN SAVE: always.
    Save,
    /// SHUTDOWN NOSAVE: never.
    NoSave,
    /// Plain SHUTDOWN or SIGTERM: when `save` points are configured.
    Default,
}

/// 40 hex characters, like Redis's run id.
fn random_run_id() -> String {
    let mut rng = fastrand::Rng::new();
    (0..40)
        .map(|_| char::from_digit(rng.u32(..16), 16).unwrap_or('0'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The failover's write pause is independent of CLIENT PAUSE: it
    /// outlives an expired client pause and holds expiry until it ends.
    #[test]
    fn the_failover_pause_outlives_client_pauses() {
        let pause = Pause::default();
        let keyspace = Keyspace::new(1, 1);
        assert_eq!(pause.active(), 0);
        pause.set_failover(&keyspace, true);
        assert_eq!(pause.active(), 1);
        // A CLIENT PAUSE ALL that already ended leaves the write pause.
        pause.mode.store(2, Ordering::Release);
        pause.until_ms.store(1, Ordering::Release);
        assert_eq!(pause.active(), 1);
        assert_eq!(pause.expiry_end(0), u64::MAX);
        // A stricter client pause in force wins while it lasts.
        pause.mode.store(2, Ordering::Release);
        pause.until_ms.store(u64::MAX, Ordering::Release);
        assert_eq!(pause.active(), 2);
        pause.mode.store(0, Ordering::Release);
        pause.set_failover(&keyspace, false);
        assert_eq!(pause.active(), 0);
        assert_eq!(pause.expiry_end(42), 42);
    }
}
