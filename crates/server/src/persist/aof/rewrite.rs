//! AOF rewrite (compaction): a new base file holding the data as commands,
//! and a new incremental file that takes every command after the cut.
//!
//! The cut is a point-in-time snapshot ([`vireo_store::snapshot`]), taken
//! with every shard locked: there the new incremental file is created and
//! listed in the manifest, and the writer is told to switch to it at
//! exactly the current feed position, so each command lands wholly before
//! (old files) or after (new file) the cut. The base is written from the
//! shards as they were at that same cut, while commands keep running; when
//! it is complete and synced, the manifest names it and drops the files it
//! replaces. No fork, and writers are never blocked for the whole rewrite.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::Ordering;

use std::sync::Arc;
use std::time::Instant;

use vireo_resp::number::format_double;
use vireo_store::keyspace::Entry;
use vireo_store::rdb;
use vireo_store::snapshot::ShardVisitor;
use vireo_store::value::ValueRef;

use super::manifest::Manifest;
use super::reader::encode;
use super::{dir_path, persist_manifest, Aof};
use crate::server::Server;

/// Items per command for collections, Redis's `AOF_REWRITE_ITEMS_PER_CMD`.
const ITEMS_PER_CMD: usize = 64;

/// Appends the commands that recreate `key` (value, then expiry) to `out`.
pub fn write_entry(out: &mut Vec<u8>, key: &[u8], entry: &Entry) {
    let mut num = itoa::Buffer::new();
    match entry.value() {
        ValueRef::Str(s) => {
            let mut scratch = itoa::Buffer::new();
            encode(out, &[b"SET", key, s.as_bytes(&mut scratch)]);
        }
        ValueRef::List(l) => batched(out, b"RPUSH", key, l.iter().map(|e| e.to_vec())),
        ValueRef::Set(s) => batched(
            out,
            b"SADD",
            key,
            s.iter()
                .map(|m| m.as_bytes(&mut itoa::Buffer::new()).to_vec()),
        ),
        ValueRef::Hash(h) => {
            let mut it = h.iter().peekable();
            while it.peek().is_some() {
                let mut cmd: Vec<Vec<u8>> = vec![b"HMSET".to_vec(), key.to_vec()];
                for (f, v) in it.by_ref().take(ITEMS_PER_CMD) {
                    cmd.push(f.to_vec());
                    cmd.push(v.to_vec());
                }
                encode(out, &cmd);
            }
        }
        ValueRef::ZSet(z) => {
            let mut it = z.iter().peekable();
            while it.peek().is_some() {
                let mut cmd: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), key.to_vec()];
                for (m, score) in it.by_ref().take(ITEMS_PER_CMD) {
                    cmd.push(format_double(score).into_bytes());
                    cmd.push(m.to_vec());
                }
                encode(out, &cmd);
            }
        }
        ValueRef::Stream(s) => write_stream(out, key, s),
        // A module value (an SQL database) comes back whole: a RESTORE of
        // its DUMP payload.
        ValueRef::Module(_) => {
            let payload = rdb::dump_payload(entry.value(), &rdb::EncodeOptions::default());
            encode(out, &[&b"RESTORE"[..], key, b"0", &payload]);
        }
    }
    if let Some(at) = entry.expire_at() {
        encode(out, &[b"PEXPIREAT", key, num.format(at).as_bytes()]);
    }
}

/// The commands that rebuild a stream, as Redis's `rewriteStreamObject`
/// writes them: an XADD per entry (an empty stream is made by adding and
/// trimming away an entry), XSETID with the last ID, added-entries counter
/// and largest deleted ID, then per group an XGROUP CREATE with its last ID
/// and entries-read, and per consumer its pending entries as XCLAIMs (or
/// an XGROUP CREATECONSUMER when it has none).
fn write_stream(out: &mut Vec<u8>, key: &[u8], s: &vireo_store::stream::Stream) {
    use vireo_store::stream::StreamId;
    let id = |id: StreamId| id.to_string().into_bytes();
    let num = |n: i64| n.to_string().into_bytes();
    if s.is_empty() {
        encode(
            out,
            &[&b"XADD"[..], key, b"MAXLEN", b"0", b"0-1", b"x", b"y"],
        );
    }
    for e in s.range(StreamId::MIN, StreamId::MAX, false) {
        let mut cmd: Vec<&[u8]> = vec![b"XADD", key];
        let text = id(e.id);
        cmd.push(&text);
        for (f, v) in e.fields() {
            cmd.push(f);
            cmd.push(v);
        }
        encode(out, &cmd);
    }
    let (last, added, max_deleted) = (
        id(s.last_id()),
        num(s.entries_added() as i64),
        id(s.max_deleted_id()),
    );
    encode(
        out,
        &[
            &b"XSETID"[..],
            key,
            &last,
            b"ENTRIESADDED",
            &added,
            b"MAXDELETEDID",
            &max_deleted,
        ],
    );
    for (name, g) in s.groups() {
        let (last, read) = (id(g.last_id), num(g.entries_read.map_or(-1, |n| n as i64)));
        encode(
            out,
            &[
                &b"XGROUP"[..],
                b"CREATE",
                key,
                name,
                &last,
                b"ENTRIESREAD",
                &read,
            ],
        );
        for (consumer, c) in g.consumers() {
            if c.pending_len() == 0 {
                encode(
                    out,
                    &[&b"XGROUP"[..], b"CREATECONSUMER", key, name, consumer],
                );
                continue;
            }
            let pending = g.consumer_pending(consumer, StreamId::MIN, StreamId::MAX);
            for (pid, nack) in pending.into_iter().flatten() {
                let (pid, time, count) = (
                    id(pid),
                    num(nack.delivery_time),
                    num(nack.delivery_count as i64),
                );
                encode(
                    out,
                    &[
                        &b"XCLAIM"[..],
                        key,
                        name,
                        consumer,
                        b"0",
                        &pid,
                        b"TIME",
                        &time,
                        b"RETRYCOUNT",
                        &count,
                        b"JUSTID",
                        b"FORCE",
                    ],
                );
            }
        }
    }
}

/// `<cmd> key item…` commands of at most [`ITEMS_PER_CMD`] items each.
fn batched(out: &mut Vec<u8>, cmd: &[u8], key: &[u8], items: impl Iterator<Item = Vec<u8>>) {
    let mut items = items.peekable();
    while items.peek().is_some() {
        let mut c: Vec<Vec<u8>> = vec![cmd.to_vec(), key.to_vec()];
        c.extend(items.by_ref().take(ITEMS_PER_CMD));
        encode(out, &c);
    }
}

/// Runs one rewrite (called on the AOF background thread), recording the
/// outcome for INFO.
pub fn run(server: &Server) {
    let aof = &server.aof;
    if server.keyspace.snapshot_in_progress() {
        // A BGSAVE is running: the rewrite starts once it is done, as Redis
        // schedules it.
        aof.bg.lock().rewrite_requested = true;
        std::thread::sleep(std::time::Duration::from_millis(50));
        return;
    }
    // Only this (background) thread runs rewrites; BGREWRITEAOF may have
    // marked this one in progress already.
    if !aof.rewrite_in_progress.swap(true, Ordering::SeqCst) {
        let now = vireo_store::clock::now_ms();
        aof.rewrite_started_ms.store(now, Ordering::Relaxed);
    }
    let now = aof.rewrite_started_ms.load(Ordering::Relaxed);
    let result = rewrite(server, aof);
    let secs = (vireo_store::clock::now_ms().saturating_sub(now) / 1000) as i64;
    aof.last_rewrite_secs.store(secs, Ordering::Relaxed);
    match result {
        Ok(()) => {
            tracing::info!("Background AOF rewrite finished successfully");
            aof.base_written();
            aof.last_rewrite_ok.store(true, Ordering::Relaxed);
            aof.rewrites.fetch_add(1, Ordering::Relaxed);
            aof.rewrites_failed_in_a_row.store(0, Ordering::Relaxed);
        }
        Err(e) => {
            tracing::warn!("Background AOF rewrite failed: {e}");
            aof.last_rewrite_ok.store(false, Ordering::Relaxed);
            aof.rewrites_failed_in_a_row.fetch_add(1, Ordering::Relaxed);
        }
    }
    aof.rewrite_cancel.store(false, Ordering::Release);
    aof.rewrite_in_progress.store(false, Ordering::SeqCst);
}

/// The base file's format.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum BaseFormat {
    /// Commands (`.base.aof`, `aof-use-rdb-preamble no`).
    Commands,
    /// An RDB image (`.base.rdb`), Redis 7.0's default.
    Rdb,
}

/// The snapshot visitor of a base file: serializes each shard, as it was
/// at the cut, and hands the buffer to the thread writing the file. Keys
/// already expired at the cut are left out, as Redis's rewrite does.
struct BaseChunks {
    /// Serialized pieces and how many keys each holds.
    tx: crossbeam_channel::Sender<(Vec<u8>, u64)>,
    now_ms: u64,
    format: BaseFormat,
}

impl ShardVisitor for BaseChunks {
    fn select_db(&self, out: &mut Vec<u8>, db: usize) {
        match self.format {
            BaseFormat::Commands => {
                encode(out, &[b"SELECT", itoa::Buffer::new().format(db).as_bytes()])
            }
            BaseFormat::Rdb => rdb::write_select_db(out, db),
        }
    }

    fn entry(&self, out: &mut Vec<u8>, _db: usize, key: &[u8], entry: &Entry) -> bool {
        if entry.expire_at().is_some_and(|at| at < self.now_ms) {
            return false;
        }
        match self.format {
            BaseFormat::Commands => write_entry(out, key, entry),
            BaseFormat::Rdb => {
                rdb::write_entry(out, key, entry, self.now_ms, &rdb::EncodeOptions::default())
            }
        }
        true
    }

    fn emit(&self, bytes: Vec<u8>, keys: u64) {
        // Fails only once the writer gave up (a cancelled rewrite).
        let _ = self.tx.send((bytes, keys));
    }
}

/// After writing `keys` keys: waits `rdb-key-save-delay` per key (the
/// suite's way to make a rewrite slow), and fails once the rewrite is
/// cancelled, checking at least every 10 ms.
fn pace(server: &Server, keys: u64) -> std::io::Result<()> {
    let cancelled = || {
        if server.aof.rewrite_cancelled() {
            Err(std::io::Error::other("the rewrite was cancelled"))
        } else {
            Ok(())
        }
    };
    let mut wait = std::time::Duration::from_micros(
        server.config.rdb_key_save_delay_us().saturating_mul(keys),
    );
    let slice = std::time::Duration::from_millis(10);
    while !wait.is_zero() {
        cancelled()?;
        let step = wait.min(slice);
        std::thread::sleep(step);
        wait -= step;
    }
    cancelled()
}

/// Writes a base file of the data at a point-in-time cut to `path`
/// (synced), running `at_cut` at the cut with every shard locked. Returns
/// the file's size. A file that could not be completed is removed.
pub fn write_base(
    server: &Server,
    path: &Path,
    format: BaseFormat,
    at_cut: impl FnOnce(),
) -> std::io::Result<u64> {
    let written = File::create(path).and_then(|file| {
        let mut w = BufWriter::with_capacity(1 << 20, file);
        let size = write_base_to(server, &mut w, format, at_cut)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(size)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(path);
    }
    written
}

/// Writes the data at a point-in-time cut to `out` (a file, or replica
/// sockets for a diskless sync), running `at_cut` at the cut with every
/// shard locked. Commands keep running meanwhile (the shards keep the
/// cut's version of what they change) while this thread serializes shard
/// after shard. Returns the bytes written.
pub fn write_base_to(
    server: &Server,
    out: &mut (dyn Write + Send),
    format: BaseFormat,
    at_cut: impl FnOnce(),
) -> std::io::Result<u64> {
    let ks = &server.keyspace;
    let (tx, rx) = crossbeam_channel::bounded(crate::persist::rdb::CHUNKS_IN_FLIGHT);
    let now_ms = vireo_store::clock::now_ms();
    let functions_tx = tx.clone();
    let visitor = Arc::new(BaseChunks { tx, now_ms, format });
    // `move`: the sender must go with the closure, or the writer would wait
    // for it forever.
    let at_cut = move || {
        at_cut();
        // The libraries open the base: FUNCTION LOAD commands, or RDB
        // function records (the channel is empty at the cut).
        let functions = match format {
            BaseFormat::Rdb => {
                crate::persist::rdb::function_records(server, &rdb::EncodeOptions::default())
            }
            BaseFormat::Commands => {
                let mut out = Vec::new();
                for code in server.scripts.library_codes() {
                    encode(&mut out, &[&b"FUNCTION"[..], b"LOAD", &code]);
                }
                out
            }
        };
        if !functions.is_empty() {
            let _ = functions_tx.send((functions, 0));
        }
    };
    if ks.begin_snapshot(visitor, at_cut).is_err() {
        return Err(std::io::Error::other(
            "another snapshot is in progress; the rewrite is scheduled",
        ));
    }
    std::thread::scope(|s| {
        let writer = s.spawn(|| -> std::io::Result<u64> {
            crate::persist::rdb::run_when_idle();
            let w = out;
            let mut size = 0;
            let mut crc = 0;
            let mut put = |w: &mut (dyn Write + Send), bytes: &[u8]| -> std::io::Result<()> {
                if format == BaseFormat::Rdb {
                    crc = rdb::crc64(crc, bytes);
                }
                size += bytes.len() as u64;
                w.write_all(bytes)
            };
            if format == BaseFormat::Rdb {
                put(w, &rdb_head(now_ms))?;
            } else if server.config.aof_timestamp_enabled() {
                let stamp = super::timestamp_annotation(now_ms / 1000);
                put(w, stamp.as_bytes())?;
            }
            // The channel closes when the last shard is done (its visitor,
            // and with it the sender, is dropped). Owned here: if this
            // writer gives up, the snapshot's sends fail instead of waiting.
            let rx = rx;
            for (buf, keys) in rx.iter() {
                put(w, &buf)?;
                pace(server, keys)?;
            }
            if format == BaseFormat::Rdb {
                let mut tail = Vec::new();
                rdb::write_eof(&mut tail);
                put(w, &tail)?;
                let sum = crc.to_le_bytes();
                size += 8;
                w.write_all(&sum)?;
            }
            w.flush()?;
            Ok(size)
        });
        ks.drive_snapshot();
        writer
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("base writer panicked")))
    })
}

/// The header and aux fields that open a base file in RDB form.
fn rdb_head(now_ms: u64) -> Vec<u8> {
    let mut head = Vec::new();
    rdb::write_header(&mut head);
    let ctime = (now_ms / 1000).to_string();
    for (k, v) in [
        (&b"redis-ver"[..], crate::server::REDIS_VERSION.as_bytes()),
        (b"redis-bits", b"64"),
        (b"ctime", ctime.as_bytes()),
        (b"aof-base", b"1"),
    ] {
        rdb::write_aux(&mut head, k, v);
    }
    head
}

/// A whole RDB with no keys, holding only `records` (function records)
/// between the header and the checksum: the filtered RDB a replica asks
/// for with REPLCONF rdb-filter-only.
pub fn rdb_image(records: &[u8]) -> Vec<u8> {
    let mut out = rdb_head(vireo_store::clock::now_ms());
    out.extend_from_slice(records);
    rdb::write_eof(&mut out);
    let crc = rdb::crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The base format `aof-use-rdb-preamble` asks for.
pub fn base_format(server: &Server) -> BaseFormat {
    if server.config.aof_use_rdb_preamble() {
        BaseFormat::Rdb
    } else {
        BaseFormat::Commands
    }
}

/// The cut: runs while every shard is locked. Lists a new incremental file
/// in the manifest and tells the writer to switch to it at the current
/// feed position; with the AOF off (a BGREWRITEAOF anyway) only a base is
/// made.
fn at_cut(server: &Server, m: &mut Manifest, prefix: &str) -> std::io::Result<bool> {
    let aof = &server.aof;
    if !aof.is_enabled() {
        return Ok(false);
    }
    let dir = dir_path(server);
    let incr = m.new_incr(prefix);
    let file = File::options()
        .create(true)
        .append(true)
        .open(dir.join(&incr))?;
    persist_manifest(server, m)?;
    tracing::info!("Creating AOF incr file {incr} on background rewrite");
    let mut f = aof.feed.lock();
    // Every shard is locked: the units numbered below this ran before the
    // cut, the others will run after it.
    let at = aof.seq.load(Ordering::SeqCst);
    f.events.push((at, super::Cut::File(Some(file))));
    aof.feed_cond.notify_one();
    aof.start_logging_after_first_rewrite();
    drop(f);
    *aof.manifest.lock() = Some(m.clone());
    Ok(true)
}

fn rewrite(server: &Server, aof: &Aof) -> std::io::Result<()> {
    let dir = dir_path(server);
    std::fs::create_dir_all(&dir)?;
    let prefix = server.config.appendfilename();
    let tmp = dir.join(format!("temp-rewriteaof-bg-{}.aof", std::process::id()));
    let mut m = aof.manifest.lock().clone().unwrap_or_default();
    let format = base_format(server);
    let mut cut = None;
    let asked = Instant::now();
    let written = write_base(server, &tmp, format, || {
        cut = Some(at_cut(server, &mut m, &prefix));
        crate::persist::forks::started(server, asked.elapsed());
    });
    let logging = cut.unwrap_or(Ok(false))?;
    let base_len = written?;
    let base = m.new_base(&prefix, format == BaseFormat::Rdb);
    m.retire_incr(logging);
    std::fs::rename(&tmp, dir.join(&base))?;
    persist_manifest(server, &m)?;
    for old in std::mem::take(&mut m.history) {
        tracing::info!("Removing the history file {} in the background", old.name);
        let _ = std::fs::remove_file(dir.join(&old.name));
    }
    persist_manifest(server, &m)?;
    let incr_len = m
        .incr
        .last()
        .and_then(|f| std::fs::metadata(dir.join(&f.name)).ok())
        .map_or(0, |md| md.len());
    // Growth for the next automatic rewrite counts from here, the commands
    // logged during this one included (Redis's `aof_rewrite_base_size`).
    aof.current_size
        .store(base_len + incr_len, Ordering::Relaxed);
    aof.base_size.store(base_len + incr_len, Ordering::Relaxed);
    *aof.manifest.lock() = Some(m);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persist::aof::reader::CommandReader;
    use vireo_store::value::{StrValue, Value};

    #[test]
    fn entries_become_commands_in_batches_with_absolute_expiry() {
        let mut out = Vec::new();
        let e = Entry::new(Value::Str(StrValue::from_bytes(b"12"))).with_expire(Some(1234));
        write_entry(&mut out, b"k", &e);
        let mut r = CommandReader::new(&out[..], 0);
        assert_eq!(
            r.next_command().unwrap().unwrap(),
            vec![b"SET".to_vec(), b"k".to_vec(), b"12".to_vec()]
        );
        assert_eq!(
            r.next_command().unwrap().unwrap(),
            vec![b"PEXPIREAT".to_vec(), b"k".to_vec(), b"1234".to_vec()]
        );
        assert_eq!(r.next_command().unwrap(), None);

        let mut out = Vec::new();
        let items: Vec<Vec<u8>> = (0..130).map(|i| format!("e{i}").into_bytes()).collect();
        batched(&mut out, b"RPUSH", b"l", items.clone().into_iter());
        let mut r = CommandReader::new(&out[..], 0);
        let mut seen = Vec::new();
        let mut sizes = Vec::new();
        while let Some(c) = r.next_command().unwrap() {
            assert_eq!(&c[..2], &[b"RPUSH".to_vec(), b"l".to_vec()]);
            sizes.push(c.len() - 2);
            seen.extend(c.into_iter().skip(2));
        }
        assert_eq!(sizes, [64, 64, 2]);
        assert_eq!(seen, items);
    }
}
