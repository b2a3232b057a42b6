//! RDB persistence at run time: SAVE and BGSAVE without fork, `save`
//! points, and loading the dump at start-up. The file format itself lives
//! in [`vireo_store::rdb`].
//!
//! A save is a point-in-time snapshot ([`vireo_store::snapshot`]): the cut
//! is taken with every shard locked for an instant; from then on a write
//! keeps the cut's version of the entry it changes, while the save's driver
//! thread serializes shard after shard and the serialized chunks are
//! written to `temp-<pid>-<n>.rdb` by a writer thread, which checksums them
//! in order, syncs and renames the file over `dbfilename`. Workers keep
//! serving throughout; a SAVE only holds up its own connection's worker.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vireo_store::clock::now_ms;
use vireo_store::keyspace::Entry;
use vireo_store::rdb::{self, EncodeOptions, Item, Loader};
use vireo_store::snapshot::{ShardVisitor, SnapshotBusy};

use crate::repl::SaveInfo;
use crate::server::{Server, REDIS_VERSION};

/// How many serialized shards may wait for the writer. Bounds the memory a
/// snapshot costs beyond the data (about 16/1024 of the dataset's
/// serialized size) and throttles the threads serializing when the disk
/// is slower than they are.
pub(crate) const CHUNKS_IN_FLIGHT: usize = 16;

/// Redis waits this long before retrying a failed automatic BGSAVE
/// (`CONFIG_BGSAVE_RETRY_DELAY`).
const BGSAVE_RETRY_DELAY_MS: u64 = 5_000;

/// The persistence state INFO reports and the commands consult.
pub struct RdbState {
    /// A background save is running (`rdb_bgsave_in_progress`).
    pub bgsave_in_progress: AtomicBool,
    /// When the running save started (Unix ms).
    pub bgsave_started_ms: AtomicU64,
    /// The last background save succeeded (`rdb_last_bgsave_status`).
    pub last_bgsave_ok: AtomicBool,
    /// Duration of the last background save in seconds, -1 before any.
    pub last_bgsave_time_sec: AtomicI64,
    /// A BGSAVE SCHEDULE (or one asked for inside a transaction) waits for
    /// the running snapshot to end.
    pub scheduled: AtomicBool,
    /// When the last automatic save was tried (Unix ms), to space retries.
    pub last_try_ms: AtomicU64,
    /// Successful saves since start (`rdb_saves`).
    pub saves: AtomicU64,
    /// Keys serialized so far and in all by the running save.
    pub keys_processed: AtomicU64,
    pub keys_total: AtomicU64,
    /// The dataset is being loaded: commands without the `loading` flag
    /// answer -LOADING.
    pub loading: AtomicBool,
    /// A replica loads its master's data aside while clients are served
    /// the old (`repl-diskless-load swapdb` continuing the same history):
    /// only commands flagged `no-async-loading` answer -LOADING.
    pub async_loading: AtomicBool,
    pub loading_start_s: AtomicU64,
    pub loading_total_bytes: AtomicU64,
    pub loading_loaded_bytes: Arc<AtomicU64>,
    /// Keys the last load inserted and skipped as already expired.
    pub last_load_keys_loaded: AtomicU64,
    pub last_load_keys_expired: AtomicU64,
    /// Numbers temporary file names so two saves never share one.
    temp_seq: AtomicU64,
    /// Numbers the saves' cuts in order (taken with every shard locked).
    cut_seq: AtomicU64,
    /// Saves whose cut is numbered below this were superseded by a
    /// FLUSHALL and must neither serialize more nor replace the dump.
    superseded_below: AtomicU64,
    /// Held while a dump is installed, so a superseded save cannot rename
    /// its file over a newer one.
    installing: parking_lot::Mutex<()>,
    /// The running snapshot's progress as cron last saw it.
    watch: parking_lot::Mutex<SnapshotWatch>,
}

/// A running snapshot's progress, for [`help_starved_snapshot`].
#[derive(Default)]
struct SnapshotWatch {
    /// Which snapshot, its shards left when last seen, and since when
    /// (Unix ms).
    snapshot: u64,
    left: usize,
    since_ms: u64,
    /// A helper was started for this snapshot.
    helped: bool,
}

/// A snapshot that finishes no shard for this long is taken to be starved.
const STARVED_AFTER_MS: u64 = 1_000;

impl Default for RdbState {
    fn default() -> Self {
        RdbState {
            bgsave_in_progress: AtomicBool::new(false),
            bgsave_started_ms: AtomicU64::new(0),
            last_bgsave_ok: AtomicBool::new(true),
            last_bgsave_time_sec: AtomicI64::new(-1),
            scheduled: AtomicBool::new(false),
            last_try_ms: AtomicU64::new(0),
            saves: AtomicU64::new(0),
            keys_processed: AtomicU64::new(0),
            keys_total: AtomicU64::new(0),
            loading: AtomicBool::new(false),
            async_loading: AtomicBool::new(false),
            loading_start_s: AtomicU64::new(0),
            loading_total_bytes: AtomicU64::new(0),
            loading_loaded_bytes: Arc::new(AtomicU64::new(0)),
            last_load_keys_loaded: AtomicU64::new(0),
            last_load_keys_expired: AtomicU64::new(0),
            temp_seq: AtomicU64::new(0),
            cut_seq: AtomicU64::new(0),
            superseded_below: AtomicU64::new(0),
            installing: parking_lot::Mutex::new(()),
            watch: parking_lot::Mutex::default(),
        }
    }
}

/// Why a save did not happen.
#[derive(Debug)]
pub enum SaveError {
    /// Another snapshot (a BGSAVE or an AOF rewrite) is running.
    Busy,
    /// Writing the file failed.
    Io(io::Error),
}

impl From<io::Error> for SaveError {
    fn from(e: io::Error) -> Self {
        SaveError::Io(e)
    }
}

impl From<SnapshotBusy> for SaveError {
    fn from(_: SnapshotBusy) -> Self {
        SaveError::Busy
    }
}

impl std::fmt::Display for SaveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SaveError::Busy => f.write_str("a snapshot is already in progress"),
            SaveError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// The path of the dump file (`dir` is the working directory, so
/// `dbfilename` is relative to it, as in Redis).
pub fn dump_path(server: &Server) -> PathBuf {
    PathBuf::from(server.config.dbfilename())
}

/// One serialized shard on its way to the writer thread.
struct Chunk {
    bytes: Vec<u8>,
    keys: u64,
}

/// Serializes each shard handed over by the snapshot into one chunk for
/// the writer thread.
struct ChunkVisitor {
    chunks: SyncSender<Chunk>,
    /// The number of the save's cut (set at the cut, before any visit).
    cut: AtomicU64,
    opts: EncodeOptions,
    now_ms: u64,
    server: Arc<Server>,
}

impl ShardVisitor for ChunkVisitor {
    fn select_db(&self, out: &mut Vec<u8>, db: usize) {
        rdb::write_select_db(out, db);
    }

    fn entry(&self, out: &mut Vec<u8>, _db: usize, key: &[u8], entry: &Entry) -> bool {
        if self.superseded() {
            return false;
        }
        rdb::write_entry(out, key, entry, self.now_ms, &self.opts);
        true
    }

    fn emit(&self, bytes: Vec<u8>, keys: u64) {
        if self.superseded() {
            return;
        }
        self.server
            .rdb
            .keys_processed
            .fetch_add(keys, Ordering::Relaxed);
        // The writer only goes away after a write error; the save has failed
        // then and the chunk has nowhere to go.
        let _ = self.chunks.send(Chunk { bytes, keys });
    }
}

impl ChunkVisitor {
    /// A FLUSHALL came after this save's cut: nothing more to write.
    fn superseded(&self) -> bool {
        let below = self.server.rdb.superseded_below.load(Ordering::Acquire);
        self.cut.load(Ordering::Relaxed) < below
    }
}

/// Starts a snapshot of every database into the dump file. Returns once the
/// cut is taken; the returned receiver yields the outcome when the file is
/// complete.
///
/// The writer thread starts before the cut: from the cut on, a FLUSHDB or
/// SWAPDB serializes the shards it empties and hands the chunks over
/// through a bounded channel while holding every shard lock, so the
/// consumer must not need anything that waits for those locks to start.
fn start_snapshot(server: &Arc<Server>) -> Result<Receiver<SaveOutcome>, SaveError> {
    let state = &server.rdb;
    let seq = state.temp_seq.fetch_add(1, Ordering::Relaxed);
    let temp = PathBuf::from(format!("temp-{}-{seq}.rdb", std::process::id()));
    let file = File::create(&temp)?;
    let cleanup = temp.clone();
    let (tx, rx) = sync_channel(CHUNKS_IN_FLIGHT);
    // The cut's number and change count, or `None` when no cut was taken
    // and the writer must discard the file.
    let (cut_tx, cut_rx) = sync_channel::<Option<(u64, u64, CutRepl)>>(1);
    let (done_tx, done_rx) = sync_channel(1);
    let writer = server.clone();
    let spawned = std::thread::Builder::new()
        .name("vireo-rdb-writer".into())
        .spawn(move || {
            run_when_idle();
            let Ok(Some((cut, dirty_at_cut, repl))) = cut_rx.recv() else {
                let _ = std::fs::remove_file(&temp);
                return;
            };
            let mut superseded = false;
            let result = write_file(&writer, file, rx, &temp, repl.resolve()).and_then(|()| {
                let _installing = writer.rdb.installing.lock();
                superseded = cut < writer.rdb.superseded_below.load(Ordering::Acquire);
                if superseded {
                    std::fs::remove_file(&temp)
                } else {
                    std::fs::rename(&temp, dump_path(&writer))
                        .and_then(|()| sync_dir(Path::new(".")))
                }
            });
            if result.is_err() {
                let _ = std::fs::remove_file(&temp);
            }
            let _ = done_tx.send(SaveOutcome {
                result,
                dirty_at_cut,
                superseded,
            });
        });
    if let Err(e) = spawned {
        let _ = std::fs::remove_file(cleanup);
        return Err(e.into());
    }
    let visitor = Arc::new(ChunkVisitor {
        chunks: tx,
        cut: AtomicU64::new(0),
        opts: server.config.rdb_encode_options(),
        now_ms: now_ms(),
        server: server.clone(),
    });
    let (mut cut, mut dirty_at_cut) = (0, 0);
    let mut repl = CutRepl::Known(None);
    let holding = server.repl.hold_stream();
    let started = server.keyspace.begin_snapshot(visitor.clone(), || {
        repl = CutRepl::at_cut(server);
        cut = state.cut_seq.fetch_add(1, Ordering::Relaxed);
        visitor.cut.store(cut, Ordering::Relaxed);
        dirty_at_cut = server.total_dirty();
        // No shard can be visited while the cut holds them all.
        state.keys_processed.store(0, Ordering::Relaxed);
        // The function libraries come before the databases, as Redis
        // writes them; the channel is empty yet, so this cannot block.
        let functions = function_records(server, &visitor.opts);
        if !functions.is_empty() {
            let _ = visitor.chunks.send(Chunk {
                bytes: functions,
                keys: 0,
            });
        }
    });
    drop(holding);
    let keys_at_cut = match started {
        Ok(keys) => keys,
        Err(busy) => {
            let _ = cut_tx.send(None);
            return Err(busy.into());
        }
    };
    let _ = cut_tx.send(Some((cut, dirty_at_cut, repl)));
    state
        .keys_total
        .store(keys_at_cut as u64, Ordering::Relaxed);
    let driver = server.clone();
    let driving = std::thread::Builder::new()
        .name("vireo-snapshot".into())
        .spawn(move || {
            run_when_idle();
            driver.keyspace.drive_snapshot()
        });
    if driving.is_err() {
        // Without a driver the snapshot would wait for commands to touch
        // every shard; finish it here instead.
        server.keyspace.drive_snapshot();
    }
    Ok(done_rx)
}

/// The replication info of a save's cut. On a master the stream offset
/// of the cut is known only once the AOF writer has streamed every unit
/// before it, so it arrives later.
enum CutRepl {
    Known(Option<SaveInfo>),
    AtStream(SaveInfo, Receiver<u64>),
}

/// How long a save waits for the stream to reach its cut (the writer may
/// be stopping at shutdown: the dump is then written without the info).
const STREAM_CUT_WAIT: Duration = Duration::from_secs(2);

impl CutRepl {
    /// Taken at the cut, every shard locked (on a replica, its master
    /// link held too).
    fn at_cut(server: &Arc<Server>) -> CutRepl {
        let info = server.repl.save_info(server.repl.offset());
        match info {
            Some(info) if !server.repl.is_replica() => {
                let (tx, rx) = sync_channel(1);
                let repl = server.clone();
                server.aof.mark_replica_cut(Box::new(move || {
                    let _ = tx.send(repl.repl.offset());
                }));
                CutRepl::AtStream(info, rx)
            }
            info => CutRepl::Known(info),
        }
    }

    /// The info to write.
    fn resolve(self) -> Option<SaveInfo> {
        match self {
            CutRepl::Known(info) => info,
            CutRepl::AtStream(info, rx) => {
                let offset = rx.recv_timeout(STREAM_CUT_WAIT).ok()?;
                Some(SaveInfo { offset, ..info })
            }
        }
    }
}

/// What a finished snapshot reports to whoever waits for it.
struct SaveOutcome {
    result: io::Result<()>,
    dirty_at_cut: u64,
    /// A FLUSHALL saved a newer (empty) dataset while this one was being
    /// written, so the file was dropped.
    superseded: bool,
}

/// Writes header and aux fields, every chunk as it arrives, then the end
/// marker and checksum; syncs the file.
fn write_file(
    server: &Server,
    file: File,
    chunks: Receiver<Chunk>,
    temp: &Path,
    repl: Option<SaveInfo>,
) -> io::Result<()> {
    let checksum = server.config.flag("rdbchecksum");
    let delay_us = server.config.rdb_key_save_delay_us();
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let mut crc = 0u64;
    let mut emit = |w: &mut BufWriter<File>, bytes: &[u8]| -> io::Result<()> {
        if checksum {
            crc = rdb::crc64(crc, bytes);
        }
        w.write_all(bytes)
    };
    let mut head = Vec::new();
    rdb::write_header(&mut head);
    for (k, v) in aux_fields(repl) {
        rdb::write_aux(&mut head, k.as_bytes(), v.as_bytes());
    }
    emit(&mut w, &head)?;
    // The channel closes when every shard was visited (the visitor, and with
    // it the sender, is dropped by the last shard that held it).
    for chunk in chunks {
        emit(&mut w, &chunk.bytes)?;
        if delay_us > 0 {
            // Here rather than per key in the visitor: no shard lock is held.
            std::thread::sleep(std::time::Duration::from_micros(
                delay_us.saturating_mul(chunk.keys),
            ));
        }
    }
    let mut tail = Vec::new();
    rdb::write_eof(&mut tail);
    emit(&mut w, &tail)?;
    w.write_all(&crc.to_le_bytes())?;
    let file = w.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    tracing::debug!("snapshot written to {}", temp.display());
    Ok(())
}

/// The aux fields Redis 7.0 writes at the top of a dump, with the
/// replication ones when there is a history to continue.
fn aux_fields(repl: Option<SaveInfo>) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        ("redis-ver", REDIS_VERSION.to_string()),
        ("redis-bits", (usize::BITS).to_string()),
        ("ctime", (now_ms() / 1000).to_string()),
        ("used-mem", crate::memory::alloc::used_memory().to_string()),
    ];
    if let Some(info) = repl {
        fields.push(("repl-stream-db", info.stream_db.to_string()));
        fields.push(("repl-id", info.replid));
        fields.push(("repl-offset", info.offset.to_string()));
    }
    fields.push(("aof-base", "0".to_string()));
    fields
}

/// Makes a rename durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Records a finished save: on success the changes up to the cut count as
/// saved (later ones stay dirty, as with Redis's `dirty_before_bgsave`).
fn finish(server: &Server, outcome: &SaveOutcome, background: bool) {
    let state = &server.rdb;
    if outcome.superseded {
        // Redis kills the child without marking an error (SIGUSR1).
        tracing::warn!("Background saving superseded by FLUSHALL");
        return;
    }
    match &outcome.result {
        Ok(()) => {
            server
                .dirty_at_last_save
                .fetch_max(outcome.dirty_at_cut, Ordering::Relaxed);
            server.lastsave_s.store(now_ms() / 1000, Ordering::Relaxed);
            state.saves.fetch_add(1, Ordering::Relaxed);
            if background {
                state.last_bgsave_ok.store(true, Ordering::Relaxed);
            }
            tracing::info!(
                "{}",
                if background {
                    "Background saving terminated with success"
                } else {
                    "DB saved on disk"
                }
            );
        }
        Err(e) => {
            if background {
                state.last_bgsave_ok.store(false, Ordering::Relaxed);
            }
            tracing::warn!("Failed saving the DB: {e}");
        }
    }
}

/// SAVE (and SHUTDOWN's final save): snapshots and waits for the file. A
/// snapshot already running (a BGSAVE or an AOF rewrite) is waited for
/// first, as Redis's synchronous save would simply follow it.
pub fn save(server: &Arc<Server>) -> Result<(), SaveError> {
    let done = loop {
        while server.keyspace.snapshot_in_progress() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        match start_snapshot(server) {
            Err(SaveError::Busy) => continue,
            other => break other?,
        }
    };
    let outcome = done
        .recv()
        .map_err(|_| io::Error::other("the snapshot writer vanished"))?;
    finish(server, &outcome, false);
    outcome.result.map_err(SaveError::Io)
}

/// FLUSHALL, before emptying the databases: a running BGSAVE would write
/// (and the next restart bring back) the keys being flushed, so it stops
/// serializing and its file is dropped, as Redis kills its child. With save
/// points FLUSHALL saves the empty dataset itself, which supersedes a
/// running SAVE too; without, a SAVE completes with the data of its cut, as
/// if it had run just before. Called with every shard locked, so no other
/// save can take its cut meanwhile.
pub fn supersede_running_save(server: &Server) {
    let state = &server.rdb;
    if state.bgsave_in_progress.load(Ordering::Acquire) || !server.config.save_params().is_empty() {
        state
            .superseded_below
            .store(state.cut_seq.load(Ordering::Relaxed), Ordering::Release);
    }
}

/// FLUSHALL, after emptying the databases: with save points configured the
/// empty dataset is saved at once, as Redis does. Every shard is still
/// locked and empty, so the file is written directly. `flush_dirty` is the
/// FLUSHALL's own change count, which the save covers too.
pub fn save_after_flushall(server: &Server, flush_dirty: u64) {
    if server.config.save_params().is_empty() {
        return;
    }
    let state = &server.rdb;
    let seq = state.temp_seq.fetch_add(1, Ordering::Relaxed);
    let temp = PathBuf::from(format!("temp-{}-{seq}.rdb", std::process::id()));
    let (no_chunks, chunks) = sync_channel(0);
    drop(no_chunks);
    let installing = state.installing.lock();
    let result = File::create(&temp)
        .and_then(|file| {
            write_file(
                server,
                file,
                chunks,
                &temp,
                server.repl.save_info(server.repl.offset()),
            )
        })
        .and_then(|()| std::fs::rename(&temp, dump_path(server)))
        .and_then(|()| sync_dir(Path::new(".")));
    drop(installing);
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    let ok = result.is_ok();
    let outcome = SaveOutcome {
        result,
        dirty_at_cut: server.total_dirty() + flush_dirty,
        superseded: false,
    };
    finish(server, &outcome, false);
    if ok {
        // Redis's synchronous save clears a failed background save's MISCONF.
        state.last_bgsave_ok.store(true, Ordering::Relaxed);
    }
}

/// BGSAVE: starts a snapshot and returns at once; a thread records the
/// outcome when the file is complete.
pub fn bgsave(server: &Arc<Server>) -> Result<(), SaveError> {
    let state = &server.rdb;
    state.last_try_ms.store(now_ms(), Ordering::Relaxed);
    let asked = Instant::now();
    let done = match start_snapshot(server) {
        Ok(done) => {
            crate::persist::forks::started(server, asked.elapsed());
            done
        }
        // Redis's forked child would fail to create the file: the save
        // counts as a failed background save (writes may be refused).
        Err(SaveError::Io(e)) => {
            state.last_bgsave_ok.store(false, Ordering::Relaxed);
            tracing::warn!("Background saving error: {e}");
            return Ok(());
        }
        Err(busy) => return Err(busy),
    };
    let start = Instant::now();
    state.bgsave_in_progress.store(true, Ordering::Release);
    state.bgsave_started_ms.store(now_ms(), Ordering::Relaxed);
    tracing::info!("Background saving started");
    let s = server.clone();
    let spawned = std::thread::Builder::new()
        .name("vireo-bgsave".into())
        .spawn(move || {
            let outcome = done.recv().unwrap_or_else(|_| SaveOutcome {
                result: Err(io::Error::other("the snapshot writer vanished")),
                dirty_at_cut: 0,
                superseded: false,
            });
            finish(&s, &outcome, true);
            s.rdb
                .last_bgsave_time_sec
                .store(start.elapsed().as_secs() as i64, Ordering::Relaxed);
            s.rdb.bgsave_in_progress.store(false, Ordering::Release);
        });
    if let Err(e) = spawned {
        state.bgsave_in_progress.store(false, Ordering::Release);
        return Err(e.into());
    }
    Ok(())
}

/// Called by cron about once a second: runs a scheduled BGSAVE once no
/// snapshot runs, and a save point's BGSAVE when one is due (after a failed
/// save, only every few seconds, as Redis does).
pub fn cron(server: &Arc<Server>) {
    if server.keyspace.snapshot_in_progress() {
        help_starved_snapshot(server);
        return;
    }
    let state = &server.rdb;
    if state.scheduled.swap(false, Ordering::AcqRel) {
        if let Err(e) = bgsave(server) {
            tracing::warn!("scheduled BGSAVE failed to start: {e}");
        }
        return;
    }
    let now = now_ms();
    let dirty = server.dirty();
    let since_save_s = (now / 1000).saturating_sub(server.lastsave_s.load(Ordering::Relaxed));
    let may_retry = state.last_bgsave_ok.load(Ordering::Relaxed)
        || now.saturating_sub(state.last_try_ms.load(Ordering::Relaxed)) > BGSAVE_RETRY_DELAY_MS;
    let due = server
        .config
        .save_params()
        .into_iter()
        .find(|&(secs, changes)| dirty >= changes && since_save_s >= secs);
    if let (Some((secs, changes)), true) = (due, may_retry) {
        tracing::info!("{changes} changes in {secs} seconds. Saving...");
        if let Err(e) = bgsave(server) {
            tracing::warn!("BGSAVE failed to start: {e}");
        }
    }
}

/// Snapshot threads run only on idle CPU ([`run_when_idle`]); on a server
/// whose CPUs never idle they would get a sliver and a save could take
/// many times longer. When a running snapshot (a save or an AOF rewrite)
/// finishes no shard for [`STARVED_AFTER_MS`], a helper at an ordinary
/// (if lowered) priority drives it alongside until it is done.
fn help_starved_snapshot(server: &Arc<Server>) {
    let (snapshot, left) = server.keyspace.snapshot_progress();
    let now = now_ms();
    let mut watch = server.rdb.watch.lock();
    if snapshot != watch.snapshot {
        // The next snapshot began before cron saw the last one end.
        *watch = SnapshotWatch {
            snapshot,
            ..SnapshotWatch::default()
        };
    }
    if left != watch.left {
        watch.left = left;
        watch.since_ms = now;
        return;
    }
    if watch.helped || now.saturating_sub(watch.since_ms) < STARVED_AFTER_MS {
        return;
    }
    watch.helped = true;
    tracing::info!("the snapshot gets no idle CPU; driving it at a normal priority");
    let helper = server.clone();
    let spawned = std::thread::Builder::new()
        .name("vireo-snap-help".into())
        .spawn(move || {
            // SAFETY: gettid and setpriority take plain integers and touch
            // no memory of ours; PRIO_PROCESS with a thread id changes that
            // thread only.
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
            }
            helper.keyspace.drive_snapshot();
        });
    if let Err(e) = spawned {
        tracing::warn!("could not start a snapshot helper: {e}");
    }
}

/// True when writes must be refused because the last background save
/// failed (`stop-writes-on-bgsave-error` with save points configured).
pub fn writes_denied(server: &Server) -> bool {
    !server.rdb.last_bgsave_ok.load(Ordering::Relaxed)
        && server.config.flag("stop-writes-on-bgsave-error")
        && !server.config.save_params().is_empty()
}

/// Counts bytes as the loader reads them, for INFO's loading progress.
struct CountingReader<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Keys a load inserted and skipped, and the replication info its aux
/// fields recorded.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoadStats {
    pub loaded: u64,
    pub expired: u64,
    /// Keys left out because their value was empty (Redis skips them).
    pub empty_skipped: u64,
    /// `repl-id`, `repl-offset` and `repl-stream-db`, when all three are
    /// there and valid.
    pub repl: Option<SaveInfo>,
}

/// Gathers the replication aux fields of a load.
#[derive(Default)]
struct ReplAux {
    replid: Option<String>,
    offset: Option<u64>,
    stream_db: Option<usize>,
}

impl ReplAux {
    fn take(&mut self, key: &[u8], value: &[u8]) {
        let text = std::str::from_utf8(value).ok();
        match key {
            b"repl-id" => self.replid = text.filter(|t| t.len() == 40).map(str::to_string),
            b"repl-offset" => self.offset = text.and_then(|t| t.parse().ok()),
            b"repl-stream-db" => self.stream_db = text.and_then(|t| t.parse().ok()),
            _ => {}
        }
    }

    /// The info, if complete (Redis ignores an offset or db of -1).
    fn info(self) -> Option<SaveInfo> {
        self.info_ref()
    }

    fn info_ref(&self) -> Option<SaveInfo> {
        Some(SaveInfo {
            replid: self.replid.clone()?,
            offset: self.offset?,
            stream_db: self.stream_db?,
        })
    }
}

/// Loads an RDB stream into the keyspace (start-up, an AOF's RDB base, a
/// replica's full sync). Keys already past their expiry are skipped on a
/// master; a replica keeps them until its master deletes them, as Redis
/// does. A key that exists is replaced. Also returns the offset just past
/// the RDB image (an AOF base may go on with commands).
pub fn load_stream(server: &Server, reader: impl Read) -> Result<(LoadStats, u64), String> {
    load_stream_merging(server, reader, false)
}

/// [`load_stream`], where `replace_functions` lets a library in the stream
/// replace a loaded one of the same name (Redis's `RDBFLAGS_ALLOW_DUP`,
/// DEBUG RELOAD MERGE); without it such a library fails the load.
pub fn load_stream_merging(
    server: &Server,
    reader: impl Read,
    replace_functions: bool,
) -> Result<(LoadStats, u64), String> {
    load_items(server, reader, replace_functions, None, None).map_err(|e| e.to_string())
}

/// Where a replica's `repl-diskless-load swapdb` load puts what it reads
/// (Redis's temporary databases and functions context): a keyspace of the
/// main one's shape and the function libraries' code, installed only once
/// the whole load succeeded.
pub struct Staging<'a> {
    /// Receives the keys.
    pub keyspace: &'a vireo_store::Keyspace,
    /// The libraries' code, in the stream's order.
    pub functions: Vec<Vec<u8>>,
}

/// [`load_stream`] into `staging` instead of the live dataset.
pub fn load_stream_staged(
    server: &Server,
    reader: impl Read,
    staging: &mut Staging<'_>,
) -> Result<(LoadStats, u64), String> {
    load_items(server, reader, false, None, Some(staging)).map_err(|e| e.to_string())
}

/// Why loading a dump stopped.
enum LoadFailure {
    /// The loader could not read the data: damaged, cut short, or not RDB.
    Rdb(vireo_store::rdb::RdbError),
    /// Something else (a function library that does not load).
    Other(String),
}

impl std::fmt::Display for LoadFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadFailure::Rdb(e) => e.fmt(f),
            LoadFailure::Other(m) => f.write_str(m),
        }
    }
}

/// Start-up's restoring of the history a dump recorded (Redis's
/// `loadDataFromDisk` with `RDBFLAGS_FEED_REPL`): the history is taken
/// once the aux fields are read, before any key, so that on a master the
/// deletions of keys found expired go to the backlog after it.
struct Restore {
    /// `replicaof` is configured: the history is this replica's own.
    will_follow: bool,
    done: bool,
    /// A master took a history: expired keys' deletions go to its backlog.
    feeding: bool,
    /// The database the backlog's deletions last selected.
    selected: Option<usize>,
}

impl Restore {
    /// Takes the history, once, if the aux fields recorded one.
    fn begin(&mut self, server: &Server, aux: &ReplAux) {
        if !self.done {
            self.done = true;
            if let Some(info) = aux.info_ref() {
                server.repl.restore_history(server, &info, self.will_follow);
                self.feeding = !self.will_follow;
            }
        }
    }

    /// A key found expired at load: its deletion goes to a master's
    /// restored backlog.
    fn expired(&mut self, server: &Server, db: usize, key: &[u8]) {
        if self.feeding {
            crate::repl::feed_load_deletion(server, &mut self.selected, db, key);
        }
    }
}

fn load_items(
    server: &Server,
    reader: impl Read,
    replace_functions: bool,
    mut restore: Option<&mut Restore>,
    mut staging: Option<&mut Staging<'_>>,
) -> Result<(LoadStats, u64), LoadFailure> {
    let state = &server.rdb;
    let reader = CountingReader {
        inner: io::BufReader::with_capacity(1 << 20, reader),
        count: state.loading_loaded_bytes.clone(),
    };
    let mut loader =
        Loader::with_options(reader, server.config.rdb_load_options()).map_err(LoadFailure::Rdb)?;
    let mut stats = LoadStats::default();
    let mut repl_aux = ReplAux::default();
    let now = now_ms();
    let keep_expired = server.repl.is_replica();
    let delay = KeyLoadDelay::configured(server);
    let target = staging.as_ref().map_or(&server.keyspace, |s| s.keyspace);
    while let Some(item) = loader.next().map_err(LoadFailure::Rdb)? {
        log_empty_keys(&loader, &mut stats.empty_skipped);
        match item {
            Item::Aux { key, value } => {
                log_aux(&key, &value);
                repl_aux.take(&key, &value);
            }
            Item::Entry { db, key, entry } => {
                if let Some(r) = restore.as_deref_mut() {
                    r.begin(server, &repl_aux);
                }
                if !keep_expired && entry.expire_at().is_some_and(|at| at <= now) {
                    stats.expired += 1;
                    if let Some(r) = restore.as_deref_mut() {
                        r.expired(server, db, &key);
                    }
                    continue;
                }
                let mut keys = target.lock_keys([&key[..]]);
                keys.set_entry(db, &key, entry);
                drop(keys);
                delay.after_key();
                stats.loaded += 1;
                if stats.loaded % PROGRESS_EVERY_KEYS == 0 {
                    log_progress(state, stats.loaded);
                }
            }
            Item::Function { code } => match staging.as_deref_mut() {
                Some(staging) => staging.functions.push(code),
                None => {
                    crate::exec::script::function_load_persisted(server, &code, replace_functions)
                        .map_err(|e| LoadFailure::Other(format!("Failed loading library: {e}")))?;
                }
            },
            Item::ResizeDb { .. } | Item::ModuleAux { .. } => {}
        }
    }
    log_empty_keys(&loader, &mut stats.empty_skipped);
    if let Some(r) = restore {
        r.begin(server, &repl_aux);
    }
    stats.repl = repl_aux.info();
    Ok((stats, loader.offset()))
}

/// `key-load-delay`, a testing knob: microseconds to wait after each key
/// loaded; a negative -N waits one microsecond after one key in N on
/// average (Redis's `debugDelay`).
struct KeyLoadDelay(i64);

impl KeyLoadDelay {
    fn configured(server: &Server) -> Self {
        let micros = server.config.get_one("key-load-delay");
        KeyLoadDelay(micros.and_then(|m| m.parse().ok()).unwrap_or(0))
    }

    fn after_key(&self) {
        let micros = match self.0 {
            0 => return,
            n if n < 0 => u64::from(fastrand::u64(..n.unsigned_abs()) == 0),
            n => n as u64,
        };
        if micros > 0 {
            std::thread::sleep(Duration::from_micros(micros));
        }
    }
}

/// Logs the keys the loader skipped as empty since the last call (it
/// names the first ten, as Redis logs ten), and counts them all.
fn log_empty_keys<R: Read>(loader: &Loader<R>, counted: &mut u64) {
    let named = loader.empty_key_names();
    for key in named.iter().skip(*counted as usize) {
        let key = String::from_utf8_lossy(key);
        tracing::warn!("rdbLoadObject skipping empty key: {key}");
    }
    *counted = loader.empty_keys_skipped();
}

/// Logs the end of a load as Redis does: a warning when empty keys were
/// left out.
fn log_load_done(stats: &LoadStats) {
    let (loaded, expired, empty) = (stats.loaded, stats.expired, stats.empty_skipped);
    if empty > 0 {
        tracing::warn!(
            "Done loading RDB, keys loaded: {loaded}, keys expired: {expired}, empty keys skipped: {empty}."
        );
    } else {
        tracing::info!("Done loading RDB, keys loaded: {loaded}, keys expired: {expired}.");
    }
}

/// Start-up found the dump damaged: logs what failed as Redis's loader
/// words it, prints the file checker's report (Redis runs
/// redis-check-rdb on the file at this point) and returns the fatal line.
/// Other failures (not RDB at all, I/O) keep their own message.
fn report_damaged_dump(path: &Path, e: &vireo_store::rdb::RdbError) -> Option<String> {
    use vireo_store::rdb::ErrorKind;
    let reason = match &e.kind {
        ErrorKind::Corrupt(m) => m.clone(),
        ErrorKind::ChecksumMismatch { stored, computed } => {
            tracing::warn!(
                "Wrong RDB checksum expected: ({stored:x}) got: ({computed:x}). Aborting now."
            );
            "RDB CRC error".into()
        }
        ErrorKind::UnexpectedEof => {
            tracing::warn!("Short read or OOM loading DB. Unrecoverable error, aborting now.");
            "Unexpected EOF reading RDB file".into()
        }
        _ => return None,
    };
    tracing::warn!(
        "Internal error in RDB reading offset {}, function at rdb.c:0 -> {reason}",
        e.offset
    );
    crate::persist::check_rdb::report(&path.to_string_lossy());
    Some("Terminating server after rdb file reading failure.".into())
}

/// The function libraries as RDB records (Redis's `rdbSaveFunctions`).
pub fn function_records(server: &Server, opts: &EncodeOptions) -> Vec<u8> {
    let mut out = Vec::new();
    for code in server.scripts.library_codes() {
        rdb::write_function(&mut out, &code, opts);
    }
    out
}

/// How often (in keys) a load considers logging its progress.
const PROGRESS_EVERY_KEYS: u64 = 1 << 20;

/// Logs how far a big load got, so an operator watching the log of a
/// server answering -LOADING sees it move.
fn log_progress(state: &RdbState, keys: u64) {
    let total = state.loading_total_bytes.load(Ordering::Relaxed);
    let done = state.loading_loaded_bytes.load(Ordering::Relaxed);
    if total > 0 {
        let perc = done.min(total) as f64 * 100.0 / total as f64;
        tracing::info!("Loading RDB: {keys} keys, {perc:.1}% of the file");
    }
}

/// Logs what the aux fields tell about the file, as Redis does.
fn log_aux(key: &[u8], value: &[u8]) {
    let value = String::from_utf8_lossy(value);
    match key {
        b"redis-ver" => tracing::info!("Loading RDB produced by version {value}"),
        b"ctime" => {
            if let Ok(t) = value.parse::<u64>() {
                let age = (now_ms() / 1000).saturating_sub(t);
                tracing::info!("RDB age {age} seconds");
            }
        }
        b"used-mem" => {
            if let Ok(m) = value.parse::<u64>() {
                tracing::info!(
                    "RDB memory usage when created {:.2} Mb",
                    m as f64 / 1048576.0
                );
            }
        }
        _ => {}
    }
}

/// Loads the dump file into the running server (DEBUG RELOAD): keys in
/// the file replace those of the same name, libraries too when `merge`.
/// Err says what failed.
pub fn load_dump(server: &Server, merge: bool) -> Result<(), String> {
    let path = dump_path(server);
    let file = File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (stats, _) = load_stream_merging(server, file, merge)?;
    log_load_done(&stats);
    Ok(())
}

/// Whether start-up loads the dump file: it exists and the AOF, which
/// takes precedence as in Redis, is off.
pub fn dump_wanted_at_startup(server: &Server) -> bool {
    !server.config.appendonly() && dump_path(server).exists()
}

/// Loads the dump file at start-up if there is one. While it runs,
/// [`RdbState::loading`] makes commands answer -LOADING. Err is the fatal
/// message; the server must not start serving a partial dataset.
pub fn load_at_startup(server: &Server) -> Result<(), String> {
    if !dump_wanted_at_startup(server) {
        return Ok(());
    }
    let path = dump_path(server);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("Fatal error loading the DB: {e}. Exiting.")),
    };
    let state = &server.rdb;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    state.loading_total_bytes.store(size, Ordering::Relaxed);
    state.loading_loaded_bytes.store(0, Ordering::Relaxed);
    state
        .loading_start_s
        .store(now_ms() / 1000, Ordering::Relaxed);
    let start = Instant::now();
    let mut restore = Restore {
        will_follow: !server
            .config
            .get_one("replicaof")
            .unwrap_or_default()
            .trim()
            .is_empty(),
        done: false,
        feeding: false,
        selected: None,
    };
    let result = load_items(server, file, false, Some(&mut restore), None).map(|(stats, _)| stats);
    state.loading.store(false, Ordering::Release);
    let stats = result.map_err(|e| {
        match &e {
            LoadFailure::Rdb(rdb_error) => report_damaged_dump(&path, rdb_error),
            LoadFailure::Other(_) => None,
        }
        .unwrap_or_else(|| {
            format!(
                "Fatal error loading the DB {}: {e}. Exiting.",
                path.display()
            )
        })
    })?;
    state
        .last_load_keys_loaded
        .store(stats.loaded, Ordering::Relaxed);
    state
        .last_load_keys_expired
        .store(stats.expired, Ordering::Relaxed);
    log_load_done(&stats);
    tracing::info!(
        "DB loaded from disk: {:.3} seconds",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Makes the calling thread run only on a CPU nothing else wants
/// (Linux's `SCHED_IDLE`), for the threads that serialize and write a
/// snapshot: on a busy server the snapshot takes longer instead of taking
/// throughput from clients. A lower nice value is not enough: a worker
/// woken by its client then still waits for the snapshot thread's time
/// slice to end, while a `SCHED_IDLE` thread gives way at once. On a
/// server whose CPUs never idle, cron starts a helper
/// ([`help_starved_snapshot`]) so the snapshot still finishes.
pub(crate) fn run_when_idle() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param that outlives the call; pid 0
    // means the calling thread on Linux.
    let done = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if done != 0 {
        tracing::debug!("could not lower the snapshot thread's priority");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The replication aux fields count only when all three are there and
    /// well formed; random values never panic.
    #[test]
    fn replication_aux_fields_need_an_id_an_offset_and_a_db() {
        let id = "a".repeat(40);
        let mut aux = ReplAux::default();
        aux.take(b"repl-id", id.as_bytes());
        aux.take(b"repl-offset", b"123");
        aux.take(b"repl-stream-db", b"3");
        let info = aux.info().expect("complete");
        assert_eq!(
            (info.replid.as_str(), info.offset, info.stream_db),
            (&id[..], 123, 3)
        );
        let mut aux = ReplAux::default();
        aux.take(b"repl-id", id.as_bytes());
        aux.take(b"repl-offset", b"-1");
        aux.take(b"repl-stream-db", b"0");
        assert!(aux.info().is_none(), "an offset of -1 is no history");
        let mut rng = fastrand::Rng::with_seed(3);
        for _ in 0..2000 {
            let mut aux = ReplAux::default();
            for key in [&b"repl-id"[..], b"repl-offset", b"repl-stream-db"] {
                let value: Vec<u8> = (0..rng.usize(0..45)).map(|_| rng.u8(..)).collect();
                aux.take(key, &value);
            }
            if let Some(info) = aux.info() {
                assert_eq!(info.replid.len(), 40);
            }
        }
    }

    /// The scheduling policy of the calling thread.
    fn thread_policy() -> i32 {
        // SAFETY: plain integer argument; pid 0 is the calling thread.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn snapshot_threads_yield_to_the_workers() {
        let before = thread_policy();
        let lowered = std::thread::spawn(|| {
            run_when_idle();
            thread_policy()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, libc::SCHED_IDLE);
        assert_eq!(thread_policy(), before, "only the calling thread changes");
    }
}
