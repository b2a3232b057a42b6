//! The append-only file, in Redis 7.0's multi-part layout: a directory
//! (`appenddirname`) holding a base file, incremental files and the
//! manifest that lists them.
//!
//! Commands reach the AOF through [`Aof::feed`], called by dispatch while
//! the command still holds its shard locks: each execution unit gets a
//! sequence number there, so the order of the log is the order of the
//! effects on every key, and a cut taken with every shard locked (a
//! rewrite) splits the stream exactly at a number. Units are staged per
//! worker and merged by number by the writer thread ([`run_writer`]; see
//! [`feed`] for why that order is right); with `appendfsync always` it
//! fsyncs once for everything pending (group commit) and workers hold the
//! replies of those commands back until then ([`Aof::synced`]), without
//! blocking their threads.
//!
//! A rewrite ([`rewrite`]) opens a new incremental file at a cut and writes
//! a new base from the data at that same cut, then swaps the manifest.

pub mod check;
pub mod feed;
pub mod load;
pub mod manifest;
pub mod reader;
pub mod rewrite;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::server::Server;
pub use feed::Unit;
use feed::{Merger, Slot};
use manifest::Manifest;

/// `appendfsync` policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    /// fsync before acknowledging (group commit).
    Always,
    /// fsync once a second in the background.
    EverySec,
    /// Leave it to the operating system.
    No,
}

impl Fsync {
    fn parse(s: &str) -> Fsync {
        match s {
            "always" => Fsync::Always,
            "no" => Fsync::No,
            _ => Fsync::EverySec,
        }
    }
}

/// AOF states, as Redis's `aof_state`.
const OFF: u8 = 0;
const ON: u8 = 1;
/// Enabled at run time, waiting for the first rewrite to write the base:
/// nothing is logged until its cut.
const WAIT_REWRITE: u8 = 2;

/// Under `appendfsync everysec|no` the writer lets fed units gather for up
/// to this long before writing them out (Redis writes once per event-loop
/// iteration, which batches the same way).
const BATCH_DELAY: Duration = Duration::from_millis(1);

/// One effect of a command for the log: the database it applies to and the
/// command, RESP-encoded.
pub type Op = (usize, Vec<u8>);

/// What happens at a point of the feed (a sequence number), taken while
/// every shard is locked.
pub enum Cut {
    /// A rewrite's cut: the units from here on go to this new incremental
    /// file; with None (appendonly no), the file is closed once the units
    /// before are written, and the units after it are dropped.
    File(Option<File>),
    /// A replica's snapshot: called once every unit before the cut has
    /// gone to the replication stream, so the stream's offset then is the
    /// snapshot's (see [`crate::repl`]).
    Replica(Box<dyn FnOnce() + Send>),
}

/// What the writer must do next (the units themselves wait in slots).
#[derive(Default)]
struct Feed {
    /// A slot went from empty to holding units since the writer's last
    /// take.
    fed: bool,
    /// In the order they happened: at `.0`, what [`Cut`] `.1` says.
    events: Vec<(u64, Cut)>,
    /// Write and sync what is left, then end the writer thread (shutdown).
    stop: bool,
}

impl Feed {
    /// Something must be done at once: an event, or shutdown.
    fn urgent(&self) -> bool {
        !self.events.is_empty() || self.stop
    }

    /// The writer has nothing to do until woken: no slot was fed since its
    /// last take, nothing is urgent, and `merger` holds no unit it took.
    /// (A unit numbered after a round read its bound, but staged before
    /// the round took the slots, is taken and then held back by the bound;
    /// its feed found the slot non-empty, so it set no `fed`: without the
    /// merger check the writer would sleep on it, and under `appendfsync
    /// always` its client's reply with it.)
    fn idle(&self, merger: &Merger) -> bool {
        !self.fed && !self.urgent() && merger.is_empty()
    }
}

/// The AOF's shared state.
pub struct Aof {
    state: AtomicU8,
    /// Effects are collected and fed: the log is on, or replicas are
    /// attached (the one load dispatch pays per command).
    collecting: AtomicBool,
    /// Replicas are attached (see [`Aof::set_replicating`]).
    replicating: AtomicBool,
    fsync: AtomicU8,
    /// The next unit's sequence number (see [`feed`]).
    seq: AtomicU64,
    /// Staged units: one slot per worker, then one for other threads.
    slots: Box<[Slot]>,
    /// Bytes the writer holds between taking units and writing them (its
    /// merge queues and output buffer), published once per round.
    writer_held: AtomicUsize,
    feed: Mutex<Feed>,
    feed_cond: Condvar,
    /// Units known to be durable as the policy asks: replies of commands
    /// whose units are numbered below this may be sent.
    synced: AtomicU64,
    /// Per worker: it holds replies waiting for `synced` to advance.
    waiting: Vec<AtomicBool>,
    /// The manifest in force (None until the AOF is opened).
    pub manifest: Mutex<Option<Manifest>>,
    /// The file the writer appends to.
    file: Mutex<Option<File>>,
    /// Requests for the background thread (rewrite).
    bg: Mutex<BgState>,
    bg_cond: Condvar,
    /// Sizes for `auto-aof-rewrite-*`: all files now, base after the last
    /// rewrite.
    current_size: AtomicU64,
    base_size: AtomicU64,
    rewrite_in_progress: AtomicBool,
    /// Set to stop the running rewrite (`appendonly no`): Redis kills its
    /// rewrite child then.
    rewrite_cancel: AtomicBool,
    /// `appendonly yes` at run time until its first rewrite completes: the
    /// files do not hold the dataset yet (Redis's `AOF_WAIT_REWRITE`, which
    /// lasts until that rewrite is done; the state here turns on at its
    /// cut).
    first_base_pending: AtomicBool,
    rewrite_started_ms: AtomicU64,
    last_rewrite_secs: AtomicI64,
    last_rewrite_ok: AtomicBool,
    rewrites: AtomicU64,
    rewrites_failed_in_a_row: AtomicU64,
    /// The OS error of the last failed write or background fsync, 0 once
    /// a write succeeds again: writes are refused meanwhile (MISCONF).
    write_errno: AtomicI32,
}

#[derive(Default)]
struct BgState {
    rewrite_requested: bool,
}

impl Aof {
    /// AOF state for `workers` worker threads, off until [`open_at_start`].
    pub fn new(workers: usize) -> Self {
        Aof {
            state: AtomicU8::new(OFF),
            collecting: AtomicBool::new(false),
            replicating: AtomicBool::new(false),
            fsync: AtomicU8::new(Fsync::EverySec as u8),
            seq: AtomicU64::new(0),
            slots: (0..=workers).map(|_| Slot::default()).collect(),
            writer_held: AtomicUsize::new(0),
            feed: Mutex::new(Feed::default()),
            feed_cond: Condvar::new(),
            synced: AtomicU64::new(0),
            waiting: (0..workers).map(|_| AtomicBool::new(false)).collect(),
            manifest: Mutex::new(None),
            file: Mutex::new(None),
            bg: Mutex::new(BgState::default()),
            bg_cond: Condvar::new(),
            current_size: AtomicU64::new(0),
            base_size: AtomicU64::new(0),
            rewrite_in_progress: AtomicBool::new(false),
            rewrite_cancel: AtomicBool::new(false),
            first_base_pending: AtomicBool::new(false),
            rewrite_started_ms: AtomicU64::new(0),
            last_rewrite_secs: AtomicI64::new(-1),
            last_rewrite_ok: AtomicBool::new(true),
            rewrites: AtomicU64::new(0),
            rewrites_failed_in_a_row: AtomicU64::new(0),
            write_errno: AtomicI32::new(0),
        }
    }

    /// True when commands are being logged: dispatch only collects effects
    /// then.
    #[inline]
    pub fn is_logging(&self) -> bool {
        self.state.load(Ordering::Relaxed) == ON
    }

    /// True when commands' effects are fed: to the log, to replicas, or
    /// both. Dispatch and handlers collect effects only then.
    #[inline]
    pub fn is_collecting(&self) -> bool {
        self.collecting.load(Ordering::Relaxed)
    }

    /// True while the replication stream takes effects (replicas attached
    /// or a backlog kept): replication-only commands are fed only then.
    #[inline]
    pub fn is_replicating(&self) -> bool {
        self.replicating.load(Ordering::Relaxed)
    }

    /// Turns feeding for replication on or off (the log keeps its own
    /// state).
    pub fn set_replicating(&self, on: bool) {
        self.replicating.store(on, Ordering::SeqCst);
        self.refresh_collecting();
    }

    /// Changes the log's state, keeping `collecting` in step.
    fn set_state(&self, state: u8) {
        self.state.store(state, Ordering::SeqCst);
        self.refresh_collecting();
    }

    /// A rewrite's cut made the base `appendonly yes` waited for: the log
    /// is on from here (called at the cut, every shard locked).
    fn start_logging_after_first_rewrite(&self) {
        let _ = self
            .state
            .compare_exchange(WAIT_REWRITE, ON, Ordering::SeqCst, Ordering::SeqCst);
        self.refresh_collecting();
    }

    fn refresh_collecting(&self) {
        let on = self.is_logging() || self.replicating.load(Ordering::SeqCst);
        self.collecting.store(on, Ordering::SeqCst);
    }

    /// Marks a cut in the feed for a replica's snapshot: `at_stream` runs
    /// on the writer thread once every unit fed so far is in the
    /// replication stream, and the stream's next unit starts with SELECT.
    /// Must be called with every shard locked.
    pub fn mark_replica_cut(&self, at_stream: Box<dyn FnOnce() + Send>) {
        let mut f = self.feed.lock();
        let at = self.seq.load(Ordering::SeqCst);
        f.events.push((at, Cut::Replica(at_stream)));
        drop(f);
        self.feed_cond.notify_one();
    }

    /// True when `appendonly` is on (logging, or waiting for the base).
    pub fn is_enabled(&self) -> bool {
        self.state.load(Ordering::Relaxed) != OFF
    }

    /// The `appendfsync` policy in force.
    pub fn fsync_policy(&self) -> Fsync {
        match self.fsync.load(Ordering::Relaxed) {
            x if x == Fsync::Always as u8 => Fsync::Always,
            x if x == Fsync::No as u8 => Fsync::No,
            _ => Fsync::EverySec,
        }
    }

    /// Re-reads `appendfsync` (start-up, CONFIG SET).
    pub fn refresh_policy(&self, server: &Server) {
        let p = Fsync::parse(&server.config.appendfsync());
        self.fsync.store(p as u8, Ordering::Relaxed);
    }

    /// Appends one execution unit's effects (a command, or a transaction,
    /// see [`Unit`]) to the log through staging slot `slot` (the worker's
    /// index; any index is correct, its own is uncontended), and clears
    /// it. Must be called with the unit's shard locks still held: the unit
    /// takes its place in the log's order here. Returns what a reply must
    /// wait for under `appendfsync always` (0: nothing).
    pub fn feed(&self, slot: usize, unit: &mut Unit) -> u64 {
        if unit.is_empty() {
            return 0;
        }
        if !self.is_collecting() {
            unit.clear();
            return 0;
        }
        let slot = &self.slots[slot.min(self.slots.len() - 1)];
        let (seq, was_empty) = slot.stage(unit, || self.seq.fetch_add(1, Ordering::SeqCst));
        if was_empty {
            // The writer sleeps until a slot gets units (see `run_writer`).
            self.feed.lock().fed = true;
            self.feed_cond.notify_one();
        }
        if self.is_logging() && self.fsync_policy() == Fsync::Always {
            seq + 1
        } else {
            0
        }
    }

    /// [`Aof::feed`] of a unit of one command, from a thread that is not a
    /// worker (active expiry) or outside dispatch (serving a blocked
    /// client): through the shared slot.
    pub fn feed_command<A: AsRef<[u8]>>(&self, db: usize, cmd: &[A]) -> u64 {
        if !self.is_collecting() {
            return 0;
        }
        let mut unit = Unit::default();
        unit.push_command(db, cmd);
        self.feed(self.slots.len() - 1, &mut unit)
    }

    /// Waits until every unit fed so far is written to the file (DEBUG
    /// LOADAOF reads the file back); false if that took over `timeout`.
    pub fn wait_written(&self, timeout: Duration) -> bool {
        let target = self.seq.load(Ordering::SeqCst);
        self.feed.lock().fed = true;
        self.feed_cond.notify_one();
        let deadline = Instant::now() + timeout;
        while self.synced() < target {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// The unit number up to which replies may be sent.
    pub fn synced(&self) -> u64 {
        self.synced.load(Ordering::SeqCst)
    }

    /// Under `appendfsync always`, what a reply sent now must wait for:
    /// every unit fed so far; 0 otherwise.
    pub fn wait_offset_now(&self) -> u64 {
        if self.is_logging() && self.fsync_policy() == Fsync::Always {
            self.seq.load(Ordering::SeqCst)
        } else {
            0
        }
    }

    /// Worker `worker` holds replies until `synced` passes `offset`: true
    /// if it must wait (it will be woken then), false if it already has.
    pub fn must_wait(&self, worker: usize, offset: u64) -> bool {
        if offset <= self.synced() {
            return false;
        }
        self.waiting[worker].store(true, Ordering::SeqCst);
        // Re-checked after announcing the wait, so a sync that raced with
        // the announcement cannot be missed.
        offset > self.synced()
    }

    /// Why writes are refused, as C's `strerror` words it: the last write
    /// or fsync of the log failed and no write has succeeded since (Redis
    /// refuses writes then too, and retries). None while the AOF is off.
    pub fn write_error(&self) -> Option<String> {
        let errno = self.write_errno.load(Ordering::Relaxed);
        if errno == 0 || !self.is_enabled() {
            return None;
        }
        let text = std::io::Error::from_raw_os_error(errno).to_string();
        // Rust appends " (os error N)" to strerror's text.
        Some(match text.rfind(" (os error") {
            Some(cut) => text[..cut].to_string(),
            None => text,
        })
    }

    /// Whether a write or fsync has failed since the last good write: the
    /// fast half of [`Aof::write_error`], for every write command's check.
    #[inline]
    pub fn has_write_error(&self) -> bool {
        self.write_errno.load(Ordering::Relaxed) != 0
    }

    /// Records a failed write or fsync (see [`Aof::write_error`]).
    fn record_write_error(&self, e: &std::io::Error) {
        let errno = e.raw_os_error().unwrap_or(libc::EIO);
        if self.write_errno.swap(errno, Ordering::Relaxed) == 0 {
            tracing::warn!("Error writing to the AOF file: {e}");
        }
    }

    /// Asks the background thread for a rewrite; false if one is running.
    /// Unless `scheduled` (a snapshot is running, the rewrite waits for
    /// it), the rewrite counts as in progress from here on, as Redis's
    /// does once BGREWRITEAOF has forked: a client polling INFO's
    /// `aof_rewrite_in_progress` right after the reply sees it running.
    pub fn request_rewrite(&self, scheduled: bool) -> bool {
        if scheduled {
            if self.rewrite_in_progress.load(Ordering::SeqCst) {
                return false;
            }
        } else if self.rewrite_in_progress.swap(true, Ordering::SeqCst) {
            return false;
        } else {
            let now = vireo_store::clock::now_ms();
            self.rewrite_started_ms.store(now, Ordering::Relaxed);
        }
        self.bg.lock().rewrite_requested = true;
        self.bg_cond.notify_one();
        true
    }

    /// Whether the running rewrite was told to stop.
    pub(crate) fn rewrite_cancelled(&self) -> bool {
        self.rewrite_cancel.load(Ordering::Acquire)
    }

    /// Bytes of commands on their way to the log and the replication
    /// stream, staged by the workers or held by the writer: Vireo's form
    /// of Redis's `aof_buf`, which `maxmemory` leaves out. Zero while
    /// nothing is collected.
    pub fn buffered_bytes(&self) -> usize {
        if !self.is_collecting() {
            return 0;
        }
        let staged: usize = self.slots.iter().map(Slot::held).sum();
        staged + self.writer_held.load(Ordering::Relaxed)
    }

    /// The writer's part of [`Aof::buffered_bytes`], after a change.
    fn publish_writer_held(&self, merger: &Merger, data_capacity: usize) {
        let held = merger.held() + data_capacity;
        self.writer_held.store(held, Ordering::Relaxed);
    }

    /// True while a rewrite runs.
    pub fn rewrite_in_progress(&self) -> bool {
        self.rewrite_in_progress.load(Ordering::SeqCst)
    }

    /// True while the AOF, just enabled, waits for its first rewrite to
    /// complete the base: stopping now would leave no log of the dataset.
    pub fn is_writing_first_file(&self) -> bool {
        self.first_base_pending.load(Ordering::SeqCst)
    }

    /// A rewrite completed: the files hold the dataset.
    pub(crate) fn base_written(&self) {
        self.first_base_pending.store(false, Ordering::SeqCst);
    }

    /// Stops the running rewrite (Redis kills its rewrite child), which
    /// then fails at its next pacing point.
    pub fn cancel_rewrite(&self) {
        if self.rewrite_in_progress() {
            self.rewrite_cancel.store(true, Ordering::Release);
        }
    }

    /// INFO persistence's `aof_*` fields, in Redis's order.
    pub fn info_fields(&self) -> Vec<(&'static str, String)> {
        let now = vireo_store::clock::now_ms();
        let running = self.rewrite_in_progress();
        let current = if running {
            ((now.saturating_sub(self.rewrite_started_ms.load(Ordering::Relaxed))) / 1000) as i64
        } else {
            -1
        };
        let ok = |b: bool| if b { "ok" } else { "err" }.to_string();
        let scheduled = self.bg.lock().rewrite_requested && !running;
        vec![
            ("aof_enabled", u8::from(self.is_enabled()).to_string()),
            ("aof_rewrite_in_progress", u8::from(running).to_string()),
            ("aof_rewrite_scheduled", u8::from(scheduled).to_string()),
            (
                "aof_last_rewrite_time_sec",
                self.last_rewrite_secs.load(Ordering::Relaxed).to_string(),
            ),
            ("aof_current_rewrite_time_sec", current.to_string()),
            (
                "aof_last_bgrewrite_status",
                ok(self.last_rewrite_ok.load(Ordering::Relaxed)),
            ),
            (
                "aof_rewrites",
                self.rewrites.load(Ordering::Relaxed).to_string(),
            ),
            (
                "aof_rewrites_consecutive_failures",
                self.rewrites_failed_in_a_row
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            ("aof_last_write_status", ok(self.write_error().is_none())),
            ("aof_last_cow_size", "0".into()),
            ("module_fork_in_progress", "0".into()),
            ("module_fork_last_cow_size", "0".into()),
        ]
    }

    /// The extra fields INFO shows while the AOF is on, as Redis does.
    pub fn info_sizes(&self) -> Vec<(&'static str, String)> {
        if !self.is_enabled() {
            return Vec::new();
        }
        let pending: usize = self.slots.iter().map(Slot::len).sum();
        vec![
            (
                "aof_current_size",
                self.current_size.load(Ordering::Relaxed).to_string(),
            ),
            (
                "aof_base_size",
                self.base_size.load(Ordering::Relaxed).to_string(),
            ),
            ("aof_pending_rewrite", "0".into()),
            ("aof_buffer_length", pending.to_string()),
            ("aof_pending_bio_fsync", "0".into()),
            ("aof_delayed_fsync", "0".into()),
        ]
    }
}

/// Logs a key the server deleted by itself (active expiry, eviction) as
/// DEL, or UNLINK when `lazy`, as Redis's `propagateDeletion`. Must be
/// called while the key's shard is still locked, so the deletion takes its
/// place among the commands on that key.
pub fn log_deletion(server: &Server, db: usize, key: &[u8], lazy: bool) {
    let name: &[u8] = if lazy { b"UNLINK" } else { b"DEL" };
    server.aof.feed_command(db, &[name, key]);
}

/// The AOF directory.
pub fn dir_path(server: &Server) -> PathBuf {
    PathBuf::from(server.config.appenddirname())
}

/// Writes `manifest` atomically (temporary file, fsync, rename, fsync of
/// the directory), as Redis's `persistAofManifest`.
pub fn persist_manifest(server: &Server, manifest: &Manifest) -> std::io::Result<()> {
    let dir = dir_path(server);
    let name = format!("{}.manifest", server.config.appendfilename());
    let tmp = dir.join(format!("temp-{name}"));
    let mut f = File::create(&tmp)?;
    f.write_all(manifest.format().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(&name))?;
    fsync_dir(&dir)
}

/// Makes renames and creations in `dir` durable.
fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Opens `name` in the AOF directory for appending.
fn open_append(server: &Server, name: &str) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir_path(server).join(name))
}

/// Total size of the base and incremental files of `m`.
fn files_size(server: &Server, m: &Manifest) -> u64 {
    let dir = dir_path(server);
    m.load_order()
        .filter_map(|f| std::fs::metadata(dir.join(&f.name)).ok())
        .map(|md| md.len())
        .sum()
}

/// Start-up with `appendonly yes`, after loading: creates the directory,
/// a base file when there is none (from the data loaded so far), opens the
/// last incremental file (or a new one) and persists the manifest, as
/// Redis's `aofOpenIfNeededOnServerStart`. Err is fatal.
pub fn open_at_start(server: &Server, loaded: Option<Manifest>) -> Result<(), String> {
    let aof = &server.aof;
    aof.refresh_policy(server);
    let dir = dir_path(server);
    std::fs::create_dir_all(&dir).map_err(|e| {
        format!(
            "Can't open or create append-only dir {}: {e}",
            dir.display()
        )
    })?;
    let mut m = loaded.unwrap_or_default();
    let prefix = server.config.appendfilename();
    if m.base.is_none() && m.incr.is_empty() {
        let format = rewrite::base_format(server);
        let name = m.new_base(&prefix, format == rewrite::BaseFormat::Rdb);
        rewrite::write_base(server, &dir.join(&name), format, || {})
            .map_err(|e| format!("Can't create the AOF base file {name}: {e}"))?;
        tracing::info!("Creating AOF base file {name} on server start");
    }
    let (name, created) = match m.incr.last() {
        Some(f) => (f.name.clone(), false),
        None => (m.new_incr(&prefix), true),
    };
    let file = open_append(server, &name)
        .map_err(|e| format!("Can't open the append-only file {name}: {e}"))?;
    persist_manifest(server, &m).map_err(|e| format!("Can't persist the AOF manifest: {e}"))?;
    if created {
        tracing::info!("Creating AOF incr file {name} on server start");
    } else {
        tracing::info!("Opening AOF incr file {name} on server start");
    }
    let base = m
        .base
        .as_ref()
        .and_then(|b| std::fs::metadata(dir.join(&b.name)).ok())
        .map_or(0, |md| md.len());
    aof.base_size.store(base, Ordering::Relaxed);
    aof.current_size
        .store(files_size(server, &m), Ordering::Relaxed);
    *aof.manifest.lock() = Some(m);
    *aof.file.lock() = Some(file);
    aof.set_state(ON);
    Ok(())
}

/// CONFIG SET appendonly / appendfsync took effect: turn the AOF on (its
/// base comes from a rewrite, as Redis's `startAppendOnly`) or off
/// (pending bytes are written and synced first).
/// `in_exec`: CONFIG SET ran inside EXEC, where Redis schedules the
/// rewrite (and says so in the log).
pub fn config_changed(server: &Server, in_exec: bool) {
    let aof = &server.aof;
    aof.refresh_policy(server);
    let want = server.config.appendonly();
    let state = aof.state.load(Ordering::SeqCst);
    if want && state == OFF {
        if std::fs::create_dir_all(dir_path(server)).is_err() {
            tracing::warn!("Can't create the append-only directory");
        }
        aof.set_state(WAIT_REWRITE);
        aof.first_base_pending.store(true, Ordering::SeqCst);
        let snapshot = server.keyspace.snapshot_in_progress();
        if snapshot {
            tracing::info!("AOF was enabled but there is already another background operation. An AOF background was scheduled to start when possible.");
        } else if in_exec {
            tracing::info!("AOF was enabled during a transaction. An AOF background was scheduled to start when possible.");
        }
        aof.request_rewrite(snapshot || in_exec);
    } else if !want && state != OFF {
        if aof.rewrite_in_progress() {
            // Redis's words, though what stops is a thread of ours.
            tracing::info!("Killing running AOF rewrite child: {}", std::process::id());
            aof.cancel_rewrite();
        }
        aof.set_state(OFF);
        aof.base_written();
        let mut f = aof.feed.lock();
        let at = aof.seq.load(Ordering::SeqCst);
        f.events.push((at, Cut::File(None)));
        drop(f);
        aof.feed_cond.notify_one();
    }
}

/// The writer thread: takes the units staged in the slots, merges them
/// into the log's order ([`Merger`]), writes them to the current
/// incremental file, switching files at a rewrite's cut, fsyncs per
/// policy, and wakes the workers that hold replies for the fsync. Runs
/// until shutdown; what is fed before then is written and synced.
///
/// A failed write keeps the bytes not written and retries them, before
/// anything newer, with the next batch or after a second (writes are
/// refused meanwhile, see [`Aof::write_error`]); they go to whichever file
/// is current then, as Redis's retained buffer does. Under `appendfsync
/// always` a failed write or fsync ends the process, as in Redis: the
/// commands already ran and their replies must not claim durability.
pub fn run_writer(server: Arc<Server>) {
    let aof = &server.aof;
    let mut last_fsync = Instant::now();
    let mut dirty_since_fsync = false;
    let mut merger = Merger::new(aof.slots.len());
    // The second of the last `#TS:` annotation.
    let mut stamped_second = 0;
    // Merged bytes not yet written: empty after every successful round.
    let mut data: Vec<u8> = Vec::new();
    loop {
        let (events, stop) = {
            let mut f = aof.feed.lock();
            if !data.is_empty() {
                if f.idle(&merger) {
                    aof.feed_cond.wait_for(&mut f, Duration::from_secs(1));
                }
            } else if aof.fsync_policy() != Fsync::Always && f.fed && !f.urgent() {
                // No one waits for these units: let a batch gather so one
                // write() carries many commands (perf: a write per few
                // commands, and waking this thread per command, cost the
                // workers a fifth of their throughput under everysec).
                let deadline = Instant::now() + BATCH_DELAY;
                while !f.urgent() && !aof.feed_cond.wait_until(&mut f, deadline).timed_out() {}
            } else {
                while f.idle(&merger) {
                    let wait = if dirty_since_fsync {
                        Duration::from_secs(1).saturating_sub(last_fsync.elapsed())
                    } else {
                        Duration::from_millis(100)
                    };
                    if wait.is_zero() {
                        break;
                    }
                    aof.feed_cond.wait_for(&mut f, wait);
                }
            }
            f.fed = false;
            (std::mem::take(&mut f.events), f.stop)
        };
        // Read before taking the slots: every unit numbered below it is
        // staged by now (see `feed`).
        let limit = aof.seq.load(Ordering::SeqCst);
        merger.take(&aof.slots);
        aof.publish_writer_held(&merger, data.capacity());
        let policy = aof.fsync_policy();
        let mut file_slot = aof.file.lock();
        let mut wrote = 0usize;
        for (at, cut) in events {
            emit_and_replicate(&server, &mut merger, at, &mut data, &mut stamped_second);
            let done = write_out(aof, file_slot.as_mut(), &data);
            data.drain(..done);
            wrote += done;
            match cut {
                Cut::Replica(at_stream) => {
                    at_stream();
                    merger.selected_db = None;
                    continue;
                }
                Cut::File(Some(new_file)) => {
                    // A rewrite's cut: the units from `at` on go to the new
                    // incremental file, which starts without a SELECT.
                    if let Some(old) = file_slot.as_mut() {
                        let _ = old.sync_data();
                    }
                    *file_slot = Some(new_file);
                }
                Cut::File(None) => {
                    // appendonly no: what was fed before is synced, the
                    // file closed, and anything left unwritten dropped.
                    if let Some(Err(e)) = file_slot.as_mut().map(|f| f.sync_data()) {
                        aof.record_write_error(&e);
                    }
                    *file_slot = None;
                    data.clear();
                }
            }
            merger.selected_db = None;
            last_fsync = Instant::now();
            dirty_since_fsync = false;
        }
        emit_and_replicate(&server, &mut merger, limit, &mut data, &mut stamped_second);
        let done = write_out(aof, file_slot.as_mut(), &data);
        data.drain(..done);
        if data.is_empty() {
            data.shrink_to(feed::KEPT_CAPACITY);
        }
        wrote += done;
        if wrote > 0 {
            dirty_since_fsync = true;
            aof.current_size.fetch_add(wrote as u64, Ordering::Relaxed);
        }
        if !data.is_empty() && policy == Fsync::Always {
            tracing::error!("Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting...");
            std::process::exit(1);
        }
        let due = match policy {
            Fsync::Always => dirty_since_fsync,
            Fsync::EverySec => dirty_since_fsync && last_fsync.elapsed() >= Duration::from_secs(1),
            Fsync::No => false,
        };
        if due || (stop && dirty_since_fsync) {
            if let Some(Err(e)) = file_slot.as_mut().map(|f| f.sync_data()) {
                if policy == Fsync::Always {
                    tracing::error!("Can't persist AOF for fsync error when the AOF fsync policy is 'always': {e}. Exiting...");
                    std::process::exit(1);
                }
                aof.record_write_error(&e);
            }
            last_fsync = Instant::now();
            dirty_since_fsync = false;
        }
        drop(file_slot);
        if data.is_empty() {
            aof.synced.store(limit, Ordering::SeqCst);
        }
        aof.publish_writer_held(&merger, data.capacity());
        wake_waiting_workers(&server);
        if stop && merger.is_empty() && aof.slots.iter().all(|s| s.len() == 0) {
            return;
        }
    }
}

/// Appends to `data` the units numbered below `bound` and gives the same
/// bytes to the replication stream.
fn emit_and_replicate(
    server: &Server,
    merger: &mut Merger,
    bound: u64,
    data: &mut Vec<u8>,
    stamped_second: &mut u64,
) {
    let before = data.len();
    let marked = merger.emit_until(bound, data);
    if data.len() == before {
        return;
    }
    if marked {
        let mut run = data.split_off(before);
        let stream = feed::split_marked(&mut run);
        data.extend_from_slice(&run);
        crate::repl::feed_stream(server, &stream);
    } else {
        crate::repl::feed_stream(server, &data[before..]);
        // Redis's `aof-timestamp-enabled`: the first write of each second
        // is preceded by `#TS:<unix seconds>`, in the file only (replicas
        // never see it).
        let now = vireo_store::clock::now_ms() / 1000;
        if now > *stamped_second && server.config.aof_timestamp_enabled() {
            *stamped_second = now;
            let stamp = timestamp_annotation(now);
            data.splice(before..before, stamp.into_bytes());
        }
    }
}

/// An AOF timestamp annotation line (`#TS:<unix seconds>`), which loading
/// skips and `redis-check-aof --truncate-to-timestamp` cuts at.
pub(crate) fn timestamp_annotation(unix_seconds: u64) -> String {
    format!("#TS:{unix_seconds}\r\n")
}

/// Ends the writer thread once everything fed is written and synced
/// (shutdown, after the workers stopped).
pub fn stop_writer(server: &Server) {
    server.aof.feed.lock().stop = true;
    server.aof.feed_cond.notify_one();
}

/// Writes `data` to the AOF file, continuing after short writes; returns
/// how many bytes were written (all of them unless a write failed, which
/// is recorded for INFO and MISCONF). Without a file (the AOF was turned
/// off) the bytes count as written: they have nowhere to go.
fn write_out(aof: &Aof, file: Option<&mut File>, data: &[u8]) -> usize {
    let Some(file) = file else {
        return data.len();
    };
    let mut done = 0;
    while done < data.len() {
        match file.write(&data[done..]) {
            Ok(0) => {
                aof.record_write_error(&std::io::Error::from_raw_os_error(libc::ENOSPC));
                return done;
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                aof.record_write_error(&e);
                return done;
            }
        }
    }
    if !data.is_empty() && aof.write_errno.swap(0, Ordering::Relaxed) != 0 {
        tracing::warn!("AOF write error looks solved, Redis can write again.");
    }
    done
}

fn wake_waiting_workers(server: &Server) {
    for (i, flag) in server.aof.waiting.iter().enumerate() {
        if flag.swap(false, Ordering::SeqCst) {
            server.notify(i, crate::net::worker::Msg::Wake);
        }
    }
}

/// The background thread: runs requested rewrites (BGREWRITEAOF, CONFIG
/// SET appendonly yes) and the automatic ones `auto-aof-rewrite-*` asks
/// for.
pub fn run_background(server: Arc<Server>) {
    // Rewrites are snapshots: they yield the CPU to the workers.
    crate::persist::rdb::run_when_idle();
    let aof = &server.aof;
    while !server.shutting_down.load(Ordering::Acquire) {
        let requested = {
            let mut bg = aof.bg.lock();
            if !bg.rewrite_requested {
                aof.bg_cond.wait_for(&mut bg, Duration::from_millis(100));
            }
            std::mem::take(&mut bg.rewrite_requested)
        };
        if server.shutting_down.load(Ordering::Acquire) {
            return;
        }
        if requested || auto_rewrite_due(&server) {
            rewrite::run(&server);
        }
    }
}

/// `auto-aof-rewrite-percentage`: the AOF grew by that many percent over
/// its size after the last rewrite, and is at least the minimum size.
fn auto_rewrite_due(server: &Server) -> bool {
    let aof = &server.aof;
    if !aof.is_logging() {
        return false;
    }
    let (perc, min) = server.config.auto_aof_rewrite();
    let current = aof.current_size.load(Ordering::Relaxed);
    if perc == 0 || current < min {
        return false;
    }
    let base = aof.base_size.load(Ordering::Relaxed).max(1);
    let growth = (current.saturating_sub(base)) * 100 / base;
    if growth >= perc {
        tracing::info!("Starting automatic rewriting of AOF on {growth}% growth");
        return true;
    }
    false
}

/// Redis's message for a file that is truncated mid-command, used by the
/// loader and by `check-aof`.
pub fn short_read_advice(file: &str) -> String {
    format!(
        "Unexpected end of file reading the append only file {file}. You can: \
         1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. \
         2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The interleaving that once held `appendfsync always` replies
    /// forever: a unit staged behind another one between the writer
    /// reading its bound and taking the slots.
    #[test]
    fn the_writer_does_not_sleep_on_a_unit_it_took_but_could_not_write() {
        let slots = [Slot::default()];
        let mut merger = Merger::new(1);
        let mut feed = Feed::default();
        let mut seq = 0;
        let mut stage = |slot: &Slot, feed: &mut Feed| {
            let mut unit = Unit::default();
            unit.push_command(0, &["SET", "k", "v"]);
            let (_, was_empty) = slot.stage(&mut unit, || {
                seq += 1;
                seq - 1
            });
            feed.fed |= was_empty;
        };
        stage(&slots[0], &mut feed);
        // The writer's round: clears `fed`, reads its bound (one unit)...
        assert!(!feed.idle(&merger));
        feed.fed = false;
        let bound = 1;
        // ... a second unit is staged behind the first, setting no `fed` ...
        stage(&slots[0], &mut feed);
        assert!(!feed.fed);
        // ... and the round takes both but may write only the first.
        merger.take(&slots);
        let mut out = Vec::new();
        merger.emit_until(bound, &mut out);
        assert!(!out.is_empty());
        assert!(!feed.idle(&merger), "the writer must go round again");
        out.clear();
        merger.emit_until(2, &mut out);
        assert!(!out.is_empty());
        assert!(feed.idle(&merger));
    }
}
