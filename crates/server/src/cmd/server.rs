//! Server commands: TIME, SAVE, BGSAVE, LASTSAVE, SHUTDOWN, MONITOR, SLOWLOG, MEMORY and
//! LATENCY (Redis's server.c, slowlog.c, object.c and latency.c).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use vireo_resp::number::parse_i64;
use vireo_resp::Args;
use vireo_store::clock::{now_ms, now_us};

use super::shared::{reply_help, subcommand_syntax_error};
use super::{container, errors, flags::*, is, spec, table, text, CommandSpec, Ctx, KeySpec};
use crate::exec::blocking::{BlockedOp, Served, Waiter};
use crate::exec::monitor;
use crate::ops::metrics::{Histogram, LatencySeries, MemoryReport};
use crate::ops::shutdown;
use crate::persist::rdb;
use crate::server::{Server, ShutdownSave};

const ADMIN_NS: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec("time", 1, LOADING | STALE | FAST, KeySpec::None, time),
    spec(
        "lastsave",
        1,
        LOADING | STALE | FAST,
        KeySpec::None,
        lastsave,
    ),
    spec(
        "save",
        1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI,
        KeySpec::None,
        save,
    ),
    spec(
        "bgsave",
        -1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
        KeySpec::None,
        bgsave,
    ),
    spec(
        "shutdown",
        -1,
        ADMIN_NS | NO_MULTI | ALLOW_BUSY,
        KeySpec::None,
        shutdown,
    ),
    spec("monitor", 1, ADMIN_NS, KeySpec::None, monitor),
    container(
        "slowlog",
        -2,
        0,
        &[
            spec(
                "slowlog|get",
                -2,
                ADMIN | LOADING | STALE,
                KeySpec::None,
                slowlog_get,
            ),
            spec(
                "slowlog|len",
                2,
                ADMIN | LOADING | STALE,
                KeySpec::None,
                slowlog_len,
            ),
            spec(
                "slowlog|reset",
                2,
                ADMIN | LOADING | STALE,
                KeySpec::None,
                slowlog_reset,
            ),
            spec(
                "slowlog|help",
                2,
                LOADING | STALE,
                KeySpec::None,
                slowlog_help,
            ),
        ],
    ),
    container(
        "memory",
        -2,
        0,
        &[
            spec(
                "memory|usage",
                -3,
                READONLY,
                KeySpec::Range {
                    first: 2,
                    last: 2,
                    step: 1,
                },
                memory_usage,
            ),
            spec("memory|stats", 2, 0, KeySpec::None, memory_stats),
            spec("memory|doctor", 2, 0, KeySpec::None, memory_doctor),
            spec(
                "memory|malloc-stats",
                2,
                0,
                KeySpec::None,
                memory_malloc_stats,
            ),
            spec("memory|purge", 2, 0, KeySpec::None, memory_purge),
            spec(
                "memory|help",
                2,
                LOADING | STALE,
                KeySpec::None,
                memory_help,
            ),
        ],
    ),
    container(
        "latency",
        -2,
        0,
        &[
            spec("latency|latest", 2, ADMIN_NS, KeySpec::None, latency_latest),
            spec(
                "latency|history",
                3,
                ADMIN_NS,
                KeySpec::None,
                latency_history,
            ),
            spec("latency|reset", -2, ADMIN_NS, KeySpec::None, latency_reset),
            spec("latency|graph", 3, ADMIN_NS, KeySpec::None, latency_graph),
            spec("latency|doctor", 2, ADMIN_NS, KeySpec::None, latency_doctor),
            spec(
                "latency|histogram",
                -2,
                ADMIN_NS,
                KeySpec::None,
                latency_histogram,
            ),
            spec(
                "latency|help",
                2,
                LOADING | STALE,
                KeySpec::None,
                latency_help,
            ),
        ],
    ),
];

/// TIME: the server's clock as [seconds, microseconds].
fn time(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let us = now_us();
    ctx.out.array(2);
    ctx.out.bulk_int((us / 1_000_000) as i64);
    ctx.out.bulk_int((us % 1_000_000) as i64);
}

/// LASTSAVE: Unix time of the last successful save (the start time until
/// one happens).
fn lastsave(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    ctx.out
        .int(ctx.server.lastsave_s.load(Ordering::Relaxed) as i64);
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: stops the server; the
/// caller gets no reply, just the closed connection. While replicas lag
/// (and unless NOW), the caller blocks until they catch up or
/// `shutdown-timeout` passes ([`shutdown::request`]); ABORT cancels such a
/// wait.
fn shutdown(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let mut flags = shutdown::Flags::default();
    let (mut nosave, mut save, mut abort) = (false, false, false);
    for a in args.iter().skip(1) {
        if is(a, "nosave") {
            nosave = true;
        } else if is(a, "save") {
            save = true;
        } else if is(a, "now") {
            flags.now = true;
        } else if is(a, "force") {
            flags.force = true;
        } else if is(a, "abort") {
            abort = true;
        } else {
            return ctx.out.error(errors::SYNTAX);
        }
    }
    let other = nosave || save || flags.now || flags.force;
    if (abort && other) || (nosave && save) {
        return ctx.out.error(errors::SYNTAX);
    }
    if abort {
        return match shutdown::abort(ctx.server) {
            true => ctx.out.ok(),
            false => ctx.out.error("ERR No shutdown in progress."),
        };
    }
    if !flags.now && ctx.deny_blocking {
        return ctx
            .out
            .error("ERR SHUTDOWN without NOW or ABORT isn't allowed for DENY BLOCKING client");
    }
    flags.save = if save {
        ShutdownSave::Save
    } else if nosave {
        ShutdownSave::NoSave
    } else {
        ShutdownSave::Default
    };
    let server = ctx.server;
    let outcome = shutdown::request(server, flags, || {
        let waiter = Waiter::new(
            ctx.session.shared.clone(),
            ctx.db,
            Vec::new(),
            WaitShutdown,
            ctx.out.protocol(),
            0,
        );
        Some(crate::exec::blocking::block(ctx, args, waiter))
    });
    match outcome {
        shutdown::Outcome::Stopping => ctx.session.close_after_reply = true,
        shutdown::Outcome::Pending => {}
        shutdown::Outcome::Failed => ctx.out.error(&format!("ERR {}", shutdown::FAILED)),
    }
}

/// A client blocked in SHUTDOWN: the server stops (closing its
/// connection) or the shutdown fails and it gets the error.
struct WaitShutdown;

impl BlockedOp for WaitShutdown {
    fn destination(&self) -> Option<&[u8]> {
        None
    }

    fn serve(
        &self,
        _server: &Server,
        _keys: &mut vireo_store::Keys<'_>,
        _w: &Arc<Waiter>,
        _key: &[u8],
        _ready: &mut Vec<(usize, vireo_store::Key)>,
        _dirty: &mut u64,
    ) -> Served {
        // Not waiting on any key: never served through one.
        Served::Skipped
    }
}

/// SAVE: writes the dump file and replies when it is on disk. Unlike
/// Redis's, it does not stop the other clients: the snapshot is taken
/// at one instant while they go on.
fn save(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    if ctx.server.rdb.bgsave_in_progress.load(Ordering::Acquire) {
        return ctx.out.error("ERR Background save already in progress");
    }
    match rdb::save(&ctx.server.arc()) {
        Ok(()) => ctx.out.ok(),
        // Redis replies a bare "-ERR" and logs the reason.
        Err(_) => ctx.out.error("ERR"),
    }
}

/// BGSAVE's reply while another snapshot (an AOF rewrite's) runs.
const BGSAVE_BUSY: &str = "ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.";

/// BGSAVE [SCHEDULE]: starts a background save. With SCHEDULE (or inside a
/// transaction, whose locks the snapshot's cut must not wait on) it is
/// scheduled when another snapshot runs.
fn bgsave(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let schedule = match args.len() {
        1 => false,
        2 if is(args.get(1), "schedule") => true,
        _ => return ctx.out.error(errors::SYNTAX),
    };
    let state = &ctx.server.rdb;
    if state.bgsave_in_progress.load(Ordering::Acquire) {
        return ctx.out.error("ERR Background save already in progress");
    }
    let in_exec = ctx.deny_blocking;
    if in_exec || ctx.server.keyspace.snapshot_in_progress() {
        if schedule || in_exec {
            state.scheduled.store(true, Ordering::Release);
            return ctx.out.simple("Background saving scheduled");
        }
        return ctx.out.error(BGSAVE_BUSY);
    }
    match rdb::bgsave(&ctx.server.arc()) {
        Ok(()) => ctx.out.simple("Background saving started"),
        Err(rdb::SaveError::Busy) if schedule => {
            state.scheduled.store(true, Ordering::Release);
            ctx.out.simple("Background saving scheduled")
        }
        Err(rdb::SaveError::Busy) => ctx.out.error(BGSAVE_BUSY),
        Err(rdb::SaveError::Io(e)) => ctx.out.error(&format!("ERR Background save failed: {e}")),
    }
}

/// MONITOR: from now on this connection receives every command the server
/// runs. A repeated MONITOR is ignored without a reply, as in Redis.
fn monitor(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    if monitor::start_monitor(ctx.server, ctx.session) {
        ctx.out.ok();
    }
}

/// SLOWLOG GET [count]: the newest `count` entries (10 by default, -1 for
/// all), each [id, timestamp, µs, args, client address, client name].
fn slowlog_get(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if args.len() > 3 {
        return subcommand_syntax_error(ctx, args);
    }
    let count = if args.len() == 3 {
        match parse_i64(args.get(2)) {
            Some(n) if n >= -1 => n,
            _ => {
                return ctx
                    .out
                    .error("ERR count should be greater than or equal to -1")
            }
        }
    } else {
        10
    };
    let log = ctx.server.slowlog.entries.lock();
    let n = if count == -1 {
        log.len()
    } else {
        usize::try_from(count).unwrap_or(usize::MAX).min(log.len())
    };
    let out = &mut *ctx.out;
    out.array(n);
    for e in log.iter().take(n) {
        out.array(6);
        out.int(e.id as i64);
        out.int(e.time_s as i64);
        out.int(e.duration_us as i64);
        out.array(e.args.len());
        for a in &e.args {
            out.bulk(a);
        }
        out.bulk(e.addr.as_bytes());
        out.bulk(e.name.as_bytes());
    }
}

/// SLOWLOG LEN: the number of entries.
fn slowlog_len(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let n = ctx.server.slowlog.entries.lock().len();
    ctx.out.int(n as i64);
}

/// SLOWLOG RESET: drops every entry.
fn slowlog_reset(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    ctx.server.slowlog.entries.lock().clear();
    ctx.out.ok();
}

/// SLOWLOG HELP.
fn slowlog_help(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    reply_help(
        ctx,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
}

/// MEMORY USAGE key [SAMPLES count]: an estimate of the bytes the key and
/// its value take (the value's heap, the key and the entry), or null if the
/// key does not exist. Values are measured exactly, so SAMPLES is only
/// validated.
fn memory_usage(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let mut i = 3;
    while i < args.len() {
        if is(args.get(i), "samples") && i + 1 < args.len() {
            let Some(n) = ctx.int_arg(args.get(i + 1)) else {
                return;
            };
            if n < 0 {
                return ctx.out.error(errors::SYNTAX);
            }
            i += 2;
        } else {
            return ctx.out.error(errors::SYNTAX);
        }
    }
    let key = args.get(2);
    // Like Redis's direct dictionary lookup: no access time update.
    ctx.keys.set_no_touch(true);
    let size = ctx.keys.get_mut(ctx.db, key).map(|e| {
        // The table slot (hash, chain link, entry pointer), then the block.
        16 + e.heap_bytes()
    });
    ctx.keys.set_no_touch(ctx.session.no_touch);
    match size {
        Some(n) => ctx.out.int(n as i64),
        None => ctx.out.null(),
    }
}

/// MEMORY STATS: the memory report as a map, with Redis's field names.
fn memory_stats(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let m = MemoryReport::collect(ctx.server);
    // Redis computes these ratios in single precision.
    let ratio = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            (a as f32 / b as f32) as f64
        }
    };
    let out = &mut *ctx.out;
    // 27 fixed fields plus one per non-empty database.
    out.map(27 + m.dbs.len());
    let ints = [
        ("peak.allocated", m.peak),
        ("total.allocated", m.used),
        ("startup.allocated", m.startup),
        ("replication.backlog", 0),
        ("clients.slaves", 0),
        ("clients.normal", m.clients),
        ("cluster.links", 0),
        ("aof.buffer", 0),
        ("lua.caches", 0),
        ("functions.caches", 0),
    ];
    for (k, v) in ints {
        out.bulk(k.as_bytes());
        out.int(v as i64);
    }
    for d in &m.dbs {
        out.bulk(format!("db.{}", d.db).as_bytes());
        out.map(3);
        out.bulk(b"overhead.hashtable.main");
        out.int(d.main_overhead as i64);
        out.bulk(b"overhead.hashtable.expires");
        out.int(d.expires_overhead as i64);
        out.bulk(b"overhead.hashtable.slot-to-keys");
        out.int(0);
    }
    out.bulk(b"overhead.total");
    out.int(m.overhead as i64);
    out.bulk(b"keys.count");
    out.int(m.keys as i64);
    out.bulk(b"keys.bytes-per-key");
    out.int(
        m.used
            .saturating_sub(m.startup)
            .checked_div(m.keys)
            .unwrap_or(0) as i64,
    );
    out.bulk(b"dataset.bytes");
    out.int(m.dataset() as i64);
    out.bulk(b"dataset.percentage");
    out.double(ratio(m.dataset(), m.used.saturating_sub(m.startup)) * 100.0);
    out.bulk(b"peak.percentage");
    out.double(ratio(m.used, m.peak) * 100.0);
    // mimalloc's committed memory is both "active" and "resident" (see
    // MemoryReport::active).
    out.bulk(b"allocator.allocated");
    out.int(m.used as i64);
    out.bulk(b"allocator.active");
    out.int(m.active as i64);
    out.bulk(b"allocator.resident");
    out.int(m.active as i64);
    let frag_bytes = m.rss as i64 - m.used as i64;
    for (k, r, b) in [
        (
            "allocator-fragmentation",
            ratio(m.active, m.used),
            m.active as i64 - m.used as i64,
        ),
        ("allocator-rss", 1.0, 0),
        (
            "rss-overhead",
            ratio(m.rss, m.active),
            m.rss as i64 - m.active as i64,
        ),
    ] {
        out.bulk(format!("{k}.ratio").as_bytes());
        out.double(r);
        out.bulk(format!("{k}.bytes").as_bytes());
        out.int(b);
    }
    out.bulk(b"fragmentation");
    out.double(ratio(m.rss, m.used));
    out.bulk(b"fragmentation.bytes");
    out.int(frag_bytes);
}

/// MEMORY DOCTOR: a short written assessment of the memory report.
fn memory_doctor(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let report = memory_doctor_report(&MemoryReport::collect(ctx.server));
    ctx.out.verbatim("txt", report.as_bytes());
}

/// The MEMORY DOCTOR text for a memory report.
fn memory_doctor_report(m: &MemoryReport) -> String {
    const SMALL: u64 = 5 << 20;
    if m.used < SMALL {
        return "This instance is empty or uses very little memory: there is nothing to diagnose yet.\n".into();
    }
    let mut issues = Vec::new();
    if m.peak as f64 > m.used as f64 * 1.5 {
        issues.push(format!(
            "Peak memory: the peak ({} bytes) is more than 150% of the memory in use now ({} bytes); \
             the allocator may keep the difference as fragmentation.",
            m.peak, m.used
        ));
    }
    if m.rss > 10 << 20 && m.rss as f64 > m.used as f64 * 1.4 {
        issues.push(format!(
            "High fragmentation: the resident set ({} bytes) is {:.2} times the memory allocated.",
            m.rss,
            m.rss as f64 / m.used as f64
        ));
    }
    if m.clients > 200 << 10 && m.clients > m.used / 4 {
        issues.push(format!(
            "Big client buffers: client input and output buffers hold {} bytes.",
            m.clients
        ));
    }
    if issues.is_empty() {
        return "No memory problems were detected in this instance.\n".into();
    }
    let mut s = String::from("Memory issues detected:\n\n");
    for i in issues {
        let _ = writeln!(s, " * {i}");
    }
    s
}

/// MEMORY MALLOC-STATS: what Redis answers for an allocator without a
/// statistics report.
fn memory_malloc_stats(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    ctx.out
        .verbatim("txt", b"Stats not supported for the current allocator");
}

/// MEMORY PURGE: returns this worker's free allocator pages to the system.
fn memory_purge(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    crate::memory::alloc::purge_thread_heap();
    ctx.out.ok();
}

/// MEMORY HELP.
fn memory_help(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    reply_help(
        ctx,
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
}

/// LATENCY LATEST: for each event, [name, time of the latest spike, its
/// latency in ms, the all-time maximum].
fn latency_latest(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let events = ctx.server.metrics.latency.snapshot();
    ctx.out.array(events.len());
    for (name, s) in events {
        let (t, ms) = s.samples.back().copied().unwrap_or_default();
        ctx.out.array(4);
        ctx.out.bulk(name.as_bytes());
        ctx.out.int(t as i64);
        ctx.out.int(ms as i64);
        ctx.out.int(s.max as i64);
    }
}

/// LATENCY HISTORY event: the event's [time, latency ms] samples, oldest
/// first (empty for an unknown event).
fn latency_history(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let series = ctx
        .server
        .metrics
        .latency
        .series(args.get(2))
        .unwrap_or_default();
    ctx.out.array(series.samples.len());
    for (t, ms) in series.samples {
        ctx.out.array(2);
        ctx.out.int(t as i64);
        ctx.out.int(ms as i64);
    }
}

/// LATENCY RESET [event ...]: forgets the named events (all without
/// arguments); replies how many were dropped.
fn latency_reset(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let lm = &ctx.server.metrics.latency;
    let n = if args.len() == 2 {
        lm.reset_all()
    } else {
        args.iter().skip(2).filter(|e| lm.reset_event(e)).count()
    };
    ctx.out.int(n as i64);
}

/// LATENCY GRAPH event: an ASCII graph of the event's samples.
fn latency_graph(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let event = args.get(2);
    match ctx.server.metrics.latency.series(event) {
        Some(s) if !s.samples.is_empty() => {
            let graph = latency_graph_text(&text(event), &s, now_ms() / 1000);
            ctx.out.verbatim("txt", graph.as_bytes());
        }
        _ => {
            let msg = format!("ERR No samples available for event '{}'", text(event));
            ctx.out.error(&msg);
        }
    }
}

/// Columns of a latency graph.
const GRAPH_COLS: usize = 80;
/// Rows of a latency graph's plot area.
const GRAPH_ROWS: usize = 4;

/// How long ago `t` was, as the graph labels it: `12s`, `5m`, `3h`, `2d`.
fn ago_label(now_s: u64, t: u64) -> String {
    let e = now_s.saturating_sub(t);
    match e {
        0..=59 => format!("{e}s"),
        60..=3599 => format!("{}m", e / 60),
        3600..=86_399 => format!("{}h", e / 3600),
        _ => format!("{}d", e / 86_400),
    }
}

/// Renders a latency series the way Redis's LATENCY GRAPH does: a header,
/// a rule, then for every 80 samples a 4-row column chart scaled between
/// the lowest and highest sample (`_`, `o`, `#` mark a column's top, `|`
/// fills below), a blank line, and each column's age written vertically.
fn latency_graph_text(event: &str, s: &LatencySeries, now_s: u64) -> String {
    let values: Vec<u64> = s.samples.iter().map(|&(_, ms)| ms).collect();
    let labels: Vec<Vec<u8>> = s
        .samples
        .iter()
        .map(|&(t, _)| ago_label(now_s, t).into_bytes())
        .collect();
    let min = values.iter().copied().min().unwrap_or(0);
    let max = values.iter().copied().max().unwrap_or(0);
    let mut g = format!(
        "{event} - high {max} ms, low {min} ms (all time high {} ms)\n",
        s.max
    );
    g.push_str(&"-".repeat(GRAPH_COLS));
    g.push('\n');
    const TOPS: [u8; 3] = [b'_', b'o', b'#'];
    let steps = (TOPS.len() * GRAPH_ROWS) as i64;
    let range = match max - min {
        0 => 1.0,
        r => r as f64,
    };
    let step_of = |v: u64| {
        let scaled = ((v - min) as f64 * steps as f64).trunc();
        ((scaled / range) as i64).clamp(0, steps - 1)
    };
    let mut first = true;
    for (vals, labs) in values.chunks(GRAPH_COLS).zip(labels.chunks(GRAPH_COLS)) {
        if !first {
            g.push('\n');
        }
        first = false;
        for row in 0..GRAPH_ROWS as i64 {
            let line: Vec<u8> = vals
                .iter()
                .map(|&v| {
                    let idx = step_of(v) - (GRAPH_ROWS as i64 - row - 1) * TOPS.len() as i64;
                    match usize::try_from(idx) {
                        Ok(i) if i < TOPS.len() => TOPS[i],
                        Ok(_) => b'|',
                        Err(_) => b' ',
                    }
                })
                .collect();
            g.push_str(&String::from_utf8_lossy(&line));
            g.push('\n');
        }
        g.push_str(&" ".repeat(vals.len()));
        g.push('\n');
        let tallest = labs.iter().map(Vec::len).max().unwrap_or(0);
        for i in 0..tallest {
            let line: String = labs
                .iter()
                .map(|l| l.get(i).map_or(' ', |&c| c as char))
                .collect();
            g.push_str(&line);
            g.push('\n');
        }
    }
    g
}

/// LATENCY DOCTOR: a written analysis of the recorded latency events.
fn latency_doctor(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let threshold = ctx
        .server
        .config
        .hot
        .latency_monitor_threshold
        .load(Ordering::Relaxed);
    let events = ctx.server.metrics.latency.snapshot();
    let report = latency_doctor_report(threshold, &events, now_ms() / 1000);
    ctx.out.verbatim("txt", report.as_bytes());
}

/// The LATENCY DOCTOR text: per event the number of spikes, their average
/// and mean deviation, how often they happen and the worst one.
fn latency_doctor_report(threshold: u64, events: &[(&str, LatencySeries)], now_s: u64) -> String {
    if events.is_empty() {
        return if threshold == 0 {
            "Latency monitoring is disabled in this instance. Use \
             \"CONFIG SET latency-monitor-threshold <milliseconds>\" to enable it.\n"
                .into()
        } else {
            "No latency spike was observed during the lifetime of this instance.\n".into()
        };
    }
    let mut s = String::from("Latency spikes were observed in this instance:\n\n");
    for (i, (name, series)) in events.iter().enumerate() {
        let n = series.samples.len().max(1) as f64;
        let avg = series.samples.iter().map(|&(_, ms)| ms as f64).sum::<f64>() / n;
        let mad = series
            .samples
            .iter()
            .map(|&(_, ms)| (ms as f64 - avg).abs())
            .sum::<f64>()
            / n;
        let oldest = series.samples.front().map_or(now_s, |&(t, _)| t);
        let period = now_s.saturating_sub(oldest) as f64 / n;
        let _ = writeln!(
            s,
            "{}. {name}: {} latency spikes (average {}ms, mean deviation {}ms, period {period:.2} sec). \
             Worst all time event {}ms.",
            i + 1,
            series.samples.len(),
            avg as u64,
            mad as u64,
            series.max
        );
    }
    s.push_str(
        "\nCheck SLOWLOG GET for the commands that ran slowly, and consider splitting very large \
         values: deleting, expiring or evicting them blocks the server.\n",
    );
    s
}

/// LATENCY HISTOGRAM [command ...]: per command (all that ran, or the named
/// ones with their subcommands), the number of calls and the cumulative
/// distribution of their latency in power-of-two µs buckets.
fn latency_histogram(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let t = table();
    let workers = &ctx.server.worker_stats;
    let histogram_of = |id: usize| {
        let mut h = Histogram::default();
        for w in workers {
            h.add(&w.per_command[id].latency);
        }
        h
    };
    let mut ids = Vec::new();
    if args.len() == 2 {
        ids.extend(0..t.all.len());
    } else {
        for name in args.iter().skip(2) {
            let Some(c) = t.lookup_full(name) else {
                continue;
            };
            ids.push(c.id);
            ids.extend(
                c.spec
                    .subcommands
                    .iter()
                    .filter_map(|s| t.lookup_full(s.name.as_bytes()))
                    .map(|s| s.id),
            );
        }
    }
    let found: Vec<(usize, Histogram)> = ids
        .into_iter()
        .map(|id| (id, histogram_of(id)))
        .filter(|(_, h)| h.total() > 0)
        .collect();
    let out = &mut *ctx.out;
    out.map(found.len());
    for (id, h) in found {
        out.bulk(t.all[id].name.as_bytes());
        out.map(2);
        out.bulk(b"calls");
        out.int(h.total() as i64);
        out.bulk(b"histogram_usec");
        let cdf = h.cumulative();
        out.map(cdf.len());
        for (us, n) in cdf {
            out.int(us as i64);
            out.int(n as i64);
        }
    }
}

/// LATENCY HELP.
fn latency_help(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    reply_help(
        ctx,
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn graph_matches_redis_layout() {
        let s = LatencySeries {
            samples: VecDeque::from(vec![(97, 50), (98, 20), (99, 30)]),
            max: 50,
        };
        let g = latency_graph_text("command", &s, 100);
        let want = format!(
            "command - high 50 ms, low 20 ms (all time high 50 ms)\n{}\n#  \n|  \n| o\n|_|\n   \n321\nsss\n",
            "-".repeat(80)
        );
        assert_eq!(g, want);
    }

    #[test]
    fn graph_of_equal_samples_and_wrapping() {
        let s = LatencySeries {
            samples: (0..81).map(|i| (1000 + i, 7)).collect(),
            max: 9,
        };
        let g = latency_graph_text("e", &s, 1080);
        let lines: Vec<&str> = g.lines().collect();
        assert_eq!(lines[0], "e - high 7 ms, low 7 ms (all time high 9 ms)");
        // Every sample is the minimum: a `_` on the bottom row.
        assert_eq!(lines[5], "_".repeat(80));
        assert_eq!(lines[2], " ".repeat(80));
        // The 81st sample starts a second block after an empty line.
        assert!(g.contains("\n\n \n \n \n_\n \n0\ns\n"));
    }

    #[test]
    fn ages_use_the_largest_unit() {
        assert_eq!(ago_label(100, 100), "0s");
        assert_eq!(ago_label(100, 41), "59s");
        assert_eq!(ago_label(1000, 100), "15m");
        assert_eq!(ago_label(10_000, 100), "2h");
        assert_eq!(ago_label(1_000_000, 100), "11d");
        assert_eq!(ago_label(5, 100), "0s");
    }

    #[test]
    fn latency_doctor_texts() {
        assert!(latency_doctor_report(0, &[], 0).contains("disabled"));
        assert!(latency_doctor_report(5, &[], 0).contains("No latency spike"));
        let s = LatencySeries {
            samples: VecDeque::from(vec![(97, 50), (98, 20), (99, 30)]),
            max: 50,
        };
        let r = latency_doctor_report(1, &[("command", s)], 101);
        assert!(r.contains(
            "1. command: 3 latency spikes (average 33ms, mean deviation 11ms, period 1.33 sec). \
             Worst all time event 50ms."
        ));
    }

    #[test]
    fn memory_doctor_texts() {
        let mut m = MemoryReport::default();
        assert!(memory_doctor_report(&m).contains("very little memory"));
        m.used = 100 << 20;
        m.peak = m.used;
        m.rss = m.used;
        assert!(memory_doctor_report(&m).contains("No memory problems"));
        m.peak = 300 << 20;
        m.rss = 200 << 20;
        let r = memory_doctor_report(&m);
        assert!(r.contains("Peak memory") && r.contains("High fragmentation"));
    }
}
