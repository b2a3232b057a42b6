//! INFO (Redis's `genRedisInfoString`): the server's state as `field:value`
//! lines grouped in `# Section`s, with Redis 7.0's section and field names
//! and order. Fields of subsystems Vireo does not have (replication links,
//! forks, Lua, modules, defragmentation) report Redis's idle values.

use std::fmt::{Display, Write as _};
use std::sync::atomic::Ordering;

use vireo_resp::Args;
use vireo_store::clock::{now_ms, now_us};

use super::{flags::*, spec, table, CommandSpec, Ctx, KeySpec};
use crate::net::client::cflags;
use crate::ops::metrics::{sum_workers, total_system_memory, Histogram, MemoryReport, Rate};
use crate::server::{Server, REDIS_VERSION, VIREO_VERSION};

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[spec(
    "info",
    -1,
    LOADING | STALE | SENTINEL,
    KeySpec::None,
    info,
)];

/// Writes one section's lines.
type SectionFn = fn(&Server, &mut Lines<'_>);

/// The sections, in output order: name, the `# Title` they print, whether
/// a plain INFO (or INFO default) includes them, and their writer.
const SECTIONS: &[(&str, &str, bool, SectionFn)] = &[
    ("server", "Server", true, server_section),
    ("clients", "Clients", true, clients_section),
    ("memory", "Memory", true, memory_section),
    ("persistence", "Persistence", true, persistence_section),
    ("stats", "Stats", true, stats_section),
    ("replication", "Replication", true, replication_section),
    ("cpu", "CPU", true, cpu_section),
    ("modules", "Modules", true, |_, _| {}),
    ("commandstats", "Commandstats", false, commandstats_section),
    ("errorstats", "Errorstats", true, errorstats_section),
    ("latencystats", "Latencystats", false, latencystats_section),
    ("cluster", "Cluster", true, |_, w| {
        w.kv("cluster_enabled", 0)
    }),
    ("keyspace", "Keyspace", true, keyspace_section),
];

/// INFO [section ...]: the report for the named sections (case-insensitive;
/// `all` and `everything` select every section, `default` or no argument
/// the default ones, unknown names nothing), as a bulk string (a verbatim
/// string in RESP3).
fn info(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let names: Vec<&[u8]> = args.iter().skip(1).collect();
    // In a transaction that holds shards (MULTI … DBSIZE or SET … INFO …
    // EXEC), the keyspace's counts are read through the held guards:
    // locking those shards again would hang this worker and, with it,
    // every client waiting for them.
    let held = ctx
        .keys
        .holds_any()
        .then(|| (ctx.keys.stats(), ctx.keys.db_sizes()));
    HELD_READINGS.set(held);
    let text = render(ctx.server, &selected_sections(&names));
    HELD_READINGS.take();
    ctx.out.verbatim("txt", text.as_bytes());
}

/// The keyspace's counters and per-database sizes, read once.
type Readings = (vireo_store::ShardStats, Vec<(usize, usize)>);

thread_local! {
    /// The keyspace readings of an INFO run inside a view holding shards
    /// (see [`info`]); None: the sections lock the shards themselves.
    static HELD_READINGS: std::cell::Cell<Option<Readings>> = const { std::cell::Cell::new(None) };
}

/// The keyspace's counters, from [`HELD_READINGS`] when set.
fn keyspace_stats(server: &Server) -> vireo_store::ShardStats {
    let held = HELD_READINGS.take();
    let stats = held.as_ref().map(|(s, _)| *s);
    HELD_READINGS.set(held);
    stats.unwrap_or_else(|| server.keyspace.stats())
}

/// Per database (keys, keys with a TTL), from [`HELD_READINGS`] when set.
fn keyspace_sizes(server: &Server) -> Vec<(usize, usize)> {
    let held = HELD_READINGS.take();
    let sizes = held.as_ref().map(|(_, d)| d.clone());
    HELD_READINGS.set(held);
    sizes.unwrap_or_else(|| server.keyspace.db_sizes())
}

/// `INFO all`'s text, for the crash report.
pub fn report_all(server: &Server) -> String {
    render(server, &selected_sections(&[b"all"]))
}

/// Which of [`SECTIONS`] the arguments ask for.
fn selected_sections(names: &[&[u8]]) -> Vec<bool> {
    let defaults = || SECTIONS.iter().map(|s| s.2);
    if names.is_empty() {
        return defaults().collect();
    }
    let mut on = vec![false; SECTIONS.len()];
    for n in names {
        if super::is(n, "all") || super::is(n, "everything") {
            on.iter_mut().for_each(|b| *b = true);
        } else if super::is(n, "default") {
            on.iter_mut().zip(defaults()).for_each(|(b, d)| *b |= d);
        } else if let Some(i) = SECTIONS.iter().position(|s| super::is(n, s.0)) {
            on[i] = true;
        }
    }
    on
}

/// The INFO text for the selected sections: each is its header and its
/// lines, CRLF-terminated, with an empty line between sections.
///
/// The text grows as it is written, as Redis's does: `used_memory` is read
/// part-way and counts it, so a buffer reserved whole up front (4 KiB)
/// would show as memory over `maxmemory` that Redis never reports.
fn render(server: &Server, on: &[bool]) -> String {
    let mut out = String::new();
    for (i, ((_, title, _, write_lines), _)) in
        SECTIONS.iter().zip(on).filter(|(_, on)| **on).enumerate()
    {
        if i > 0 {
            out.push_str("\r\n");
        }
        let _ = write!(out, "# {title}\r\n");
        write_lines(server, &mut Lines(&mut out));
    }
    out
}

/// Appends `field:value` lines.
struct Lines<'a>(&'a mut String);

impl Lines<'_> {
    fn kv(&mut self, field: &str, value: impl Display) {
        let _ = write!(self.0, "{field}:{value}\r\n");
    }

    /// Several fields that are always zero here.
    fn zeros(&mut self, fields: &[&str]) {
        for f in fields {
            self.kv(f, 0);
        }
    }
}

/// A byte count the way Redis's `bytesToHuman` prints it.
fn bytes_to_human(n: u64) -> String {
    if n < 1024 {
        return format!("{n}B");
    }
    for (i, unit) in ['K', 'M', 'G', 'T', 'P'].into_iter().enumerate() {
        let base = 1u64 << (10 * (i + 1));
        if n / base < 1024 {
            return format!("{:.2}{unit}", n as f64 / base as f64);
        }
    }
    format!("{n}B")
}

/// A stable build id derived from the Vireo version (FNV-1a).
fn build_id() -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in VIREO_VERSION.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:x}")
}

/// `sysname release machine`, like `uname -srm`.
fn os_name() -> String {
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_owned()).ok();
    let sys = read("/proc/sys/kernel/ostype").unwrap_or_else(|| std::env::consts::OS.to_owned());
    match read("/proc/sys/kernel/osrelease") {
        Some(rel) => format!("{sys} {rel} {}", std::env::consts::ARCH),
        None => format!("{sys} {}", std::env::consts::ARCH),
    }
}

fn server_section(server: &Server, w: &mut Lines<'_>) {
    let now = now_us();
    let uptime = server.uptime_s();
    let hz = server.config.hot.hz.load(Ordering::Relaxed);
    let workers = server.worker_stats.len();
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    w.kv("redis_version", REDIS_VERSION);
    w.kv("redis_git_sha1", "00000000");
    w.kv("redis_git_dirty", 0);
    w.kv("redis_build_id", build_id());
    w.kv("redis_mode", "standalone");
    w.kv("os", os_name());
    w.kv("arch_bits", usize::BITS);
    w.kv("monotonic_clock", "POSIX clock_gettime");
    w.kv(
        "multiplexing_api",
        if cfg!(target_os = "linux") {
            "epoll"
        } else {
            "kqueue"
        },
    );
    w.kv("atomicvar_api", "c11-builtin");
    w.kv("gcc_version", "0.0.0");
    w.kv("process_id", std::process::id());
    w.kv("process_supervised", "no");
    w.kv("run_id", &server.run_id);
    w.kv("tcp_port", server.bound_port.load(Ordering::Relaxed));
    w.kv("server_time_usec", now);
    w.kv("uptime_in_seconds", uptime);
    w.kv("uptime_in_days", uptime / 86_400);
    w.kv("hz", hz);
    w.kv("configured_hz", hz);
    // Redis's LRU clock: seconds, in 24 bits.
    w.kv("lru_clock", (now / 1_000_000) & ((1 << 24) - 1));
    w.kv("executable", exe);
    let config_file = server.config.config_file().map(|p| p.display().to_string());
    w.kv("config_file", config_file.unwrap_or_default());
    w.kv("io_threads_active", u8::from(workers > 1));
    if let Some(ms) = server.shutdown.remaining_ms() {
        w.kv("shutdown_in_milliseconds", ms);
    }
    w.kv("vireo_version", VIREO_VERSION);
}

fn clients_section(server: &Server, w: &mut Lines<'_>) {
    let clients = server.clients.snapshot();
    let monitors = clients
        .iter()
        .filter(|c| c.flags.load(Ordering::Relaxed) & (cflags::MONITOR | cflags::REPLICA) != 0)
        .count();
    let max_in = clients
        .iter()
        .map(|c| c.qbuf.load(Ordering::Relaxed) + c.qbuf_free.load(Ordering::Relaxed))
        .max()
        .unwrap_or(0);
    let max_out = clients
        .iter()
        .map(|c| c.omem.load(Ordering::Relaxed))
        .max()
        .unwrap_or(0);
    // Redis counts replicas and MONITOR clients (its replicas too) apart
    // from connected clients.
    w.kv("connected_clients", clients.len() - monitors);
    w.kv("cluster_connections", 0);
    w.kv(
        "maxclients",
        server.config.hot.maxclients.load(Ordering::Relaxed),
    );
    w.kv("client_recent_max_input_buffer", max_in);
    w.kv("client_recent_max_output_buffer", max_out);
    // Redis counts clients held back by CLIENT PAUSE as blocked too.
    let blocked = clients
        .iter()
        .filter(|c| c.flags.load(Ordering::Relaxed) & cflags::BLOCKED != 0)
        .count();
    w.kv("blocked_clients", blocked);
    w.kv("tracking_clients", server.tracking.client_count());
    w.kv("clients_in_timeout_table", server.blocking.with_deadline());
}

/// `a / b` with two decimals, 0 when `b` is 0.
fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        "0.00".into()
    } else {
        format!("{:.2}", a as f64 / b as f64)
    }
}

fn memory_section(server: &Server, w: &mut Lines<'_>) {
    let m = MemoryReport::collect(server);
    let maxmemory = server.config.hot.maxmemory.load(Ordering::Relaxed);
    let total = total_system_memory();
    w.kv("used_memory", m.used);
    w.kv("used_memory_human", bytes_to_human(m.used));
    w.kv("used_memory_rss", m.rss);
    w.kv("used_memory_rss_human", bytes_to_human(m.rss));
    w.kv("used_memory_peak", m.peak);
    w.kv("used_memory_peak_human", bytes_to_human(m.peak));
    w.kv(
        "used_memory_peak_perc",
        format!("{}%", ratio(m.used * 100, m.peak)),
    );
    w.kv("used_memory_overhead", m.overhead);
    w.kv("used_memory_startup", m.startup);
    w.kv("used_memory_dataset", m.dataset());
    w.kv(
        "used_memory_dataset_perc",
        format!(
            "{}%",
            ratio(m.dataset() * 100, m.used.saturating_sub(m.startup))
        ),
    );
    let active = m.active;
    w.kv("allocator_allocated", m.used);
    w.kv("allocator_active", active);
    w.kv("allocator_resident", active);
    w.kv("total_system_memory", total);
    w.kv("total_system_memory_human", bytes_to_human(total));
    let (scripts, scripts_bytes, vm_eval) = server.scripts.eval_stats();
    let (libraries, functions, functions_bytes, vm_functions) = server.scripts.function_stats();
    w.kv("used_memory_lua", vm_eval);
    w.kv("used_memory_vm_eval", vm_eval);
    w.kv("used_memory_lua_human", bytes_to_human(vm_eval as u64));
    w.kv("used_memory_scripts_eval", scripts_bytes);
    w.kv("number_of_cached_scripts", scripts);
    w.kv("number_of_functions", functions);
    w.kv("number_of_libraries", libraries);
    w.kv("used_memory_vm_functions", vm_functions);
    w.kv("used_memory_vm_total", vm_eval + vm_functions);
    w.kv(
        "used_memory_vm_total_human",
        bytes_to_human((vm_eval + vm_functions) as u64),
    );
    w.kv("used_memory_functions", functions_bytes);
    w.kv("used_memory_scripts", scripts_bytes + functions_bytes);
    w.kv(
        "used_memory_scripts_human",
        bytes_to_human((scripts_bytes + functions_bytes) as u64),
    );
    w.kv("maxmemory", maxmemory);
    w.kv("maxmemory_human", bytes_to_human(maxmemory));
    w.kv("maxmemory_policy", server.config.maxmemory_policy());
    let frag_bytes = m.rss as i64 - m.used as i64;
    w.kv("allocator_frag_ratio", ratio(active, m.used));
    w.kv("allocator_frag_bytes", active as i64 - m.used as i64);
    w.kv("allocator_rss_ratio", "1.00");
    w.kv("allocator_rss_bytes", 0);
    w.kv("rss_overhead_ratio", ratio(m.rss, active));
    w.kv("rss_overhead_bytes", m.rss as i64 - active as i64);
    w.kv("mem_fragmentation_ratio", ratio(m.rss, m.used));
    w.kv("mem_fragmentation_bytes", frag_bytes);
    w.kv(
        "mem_not_counted_for_evict",
        crate::memory::evict::not_counted(server),
    );
    let [repl_total, repl_backlog, repl_replicas] = server.repl.buffer_memory();
    w.kv("mem_replication_backlog", repl_backlog);
    w.kv("mem_total_replication_buffers", repl_total);
    w.kv("mem_clients_slaves", repl_replicas);
    w.kv("mem_clients_normal", m.clients);
    w.zeros(&["mem_cluster_links", "mem_aof_buffer"]);
    w.kv("mem_allocator", "mimalloc");
    w.kv("active_defrag_running", 0);
    w.kv(
        "lazyfree_pending_objects",
        server.lazyfree.pending_objects(),
    );
    w.kv("lazyfreed_objects", server.lazyfree.freed_objects());
}

fn persistence_section(server: &Server, w: &mut Lines<'_>) {
    let rdb = &server.rdb;
    let loading = rdb.loading.load(Ordering::Relaxed);
    let bgsave = rdb.bgsave_in_progress.load(Ordering::Relaxed);
    let snapshot = server.keyspace.snapshot_in_progress();
    w.kv("loading", u8::from(loading));
    w.kv(
        "async_loading",
        u8::from(rdb.async_loading.load(Ordering::Relaxed)),
    );
    // No fork, so no copy-on-write pages: these stay zero.
    w.zeros(&[
        "current_cow_peak",
        "current_cow_size",
        "current_cow_size_age",
    ]);
    let (done, total) = if snapshot {
        (
            rdb.keys_processed.load(Ordering::Relaxed),
            rdb.keys_total.load(Ordering::Relaxed),
        )
    } else {
        (0, 0)
    };
    let perc = if total > 0 {
        done as f64 * 100.0 / total as f64
    } else {
        0.0
    };
    w.kv("current_fork_perc", format!("{perc:.2}"));
    w.kv("current_save_keys_processed", done);
    w.kv("current_save_keys_total", total);
    w.kv("rdb_changes_since_last_save", server.dirty());
    w.kv("rdb_bgsave_in_progress", u8::from(bgsave));
    w.kv(
        "rdb_last_save_time",
        server.lastsave_s.load(Ordering::Relaxed),
    );
    let ok = rdb.last_bgsave_ok.load(Ordering::Relaxed);
    w.kv("rdb_last_bgsave_status", if ok { "ok" } else { "err" });
    w.kv(
        "rdb_last_bgsave_time_sec",
        rdb.last_bgsave_time_sec.load(Ordering::Relaxed),
    );
    let current = if bgsave {
        (now_ms().saturating_sub(rdb.bgsave_started_ms.load(Ordering::Relaxed)) / 1000) as i64
    } else {
        -1
    };
    w.kv("rdb_current_bgsave_time_sec", current);
    w.kv("rdb_saves", rdb.saves.load(Ordering::Relaxed));
    w.kv("rdb_last_cow_size", 0);
    w.kv(
        "rdb_last_load_keys_expired",
        rdb.last_load_keys_expired.load(Ordering::Relaxed),
    );
    w.kv(
        "rdb_last_load_keys_loaded",
        rdb.last_load_keys_loaded.load(Ordering::Relaxed),
    );
    for (field, value) in server
        .aof
        .info_fields()
        .into_iter()
        .chain(server.aof.info_sizes())
    {
        w.kv(field, value);
    }
    if loading {
        loading_fields(server, w);
    }
}

/// Progress of a load in progress, Redis's way (ETA from the rate so far).
fn loading_fields(server: &Server, w: &mut Lines<'_>) {
    let rdb = &server.rdb;
    let total = rdb.loading_total_bytes.load(Ordering::Relaxed);
    let loaded = rdb.loading_loaded_bytes.load(Ordering::Relaxed).min(total);
    let start = rdb.loading_start_s.load(Ordering::Relaxed);
    let perc = if total > 0 {
        loaded as f64 * 100.0 / total as f64
    } else {
        0.0
    };
    let elapsed = (now_ms() / 1000).saturating_sub(start);
    let eta = if elapsed == 0 {
        1
    } else {
        elapsed * (total - loaded).max(1) / (loaded + 1)
    };
    w.kv("loading_start_time", start);
    w.kv("loading_total_bytes", total);
    w.kv("loading_rdb_used_mem", 0);
    w.kv("loading_loaded_bytes", loaded);
    w.kv("loading_loaded_perc", format!("{perc:.2}"));
    w.kv("loading_eta_seconds", eta);
}

fn stats_section(server: &Server, w: &mut Lines<'_>) {
    let ws = &server.worker_stats;
    let st = &server.stats;
    let ks = keyspace_stats(server);
    let rates = &server.metrics.rates;
    let kbps = |r: Rate| format!("{:.2}", rates.get(r) as f64 / 1024.0);
    w.kv(
        "total_connections_received",
        st.total_connections_received.load(Ordering::Relaxed),
    );
    w.kv("total_commands_processed", sum_workers(ws, |w| &w.commands));
    w.kv("instantaneous_ops_per_sec", rates.get(Rate::Commands));
    w.kv(
        "total_net_input_bytes",
        sum_workers(ws, |w| &w.net_input_bytes),
    );
    w.kv(
        "total_net_output_bytes",
        sum_workers(ws, |w| &w.net_output_bytes),
    );
    w.zeros(&["total_net_repl_input_bytes", "total_net_repl_output_bytes"]);
    w.kv("instantaneous_input_kbps", kbps(Rate::NetInput));
    w.kv("instantaneous_output_kbps", kbps(Rate::NetOutput));
    w.kv("instantaneous_input_repl_kbps", "0.00");
    w.kv("instantaneous_output_repl_kbps", "0.00");
    w.kv(
        "rejected_connections",
        st.rejected_connections.load(Ordering::Relaxed),
    );
    let [full, partial_ok, partial_err] = server.repl.sync_stats();
    w.kv("sync_full", full);
    w.kv("sync_partial_ok", partial_ok);
    w.kv("sync_partial_err", partial_err);
    w.kv("expired_keys", ks.expired_keys);
    w.kv("expired_stale_perc", "0.00");
    w.zeros(&[
        "expired_time_cap_reached_count",
        "expire_cycle_cpu_milliseconds",
    ]);
    w.kv("evicted_keys", ks.evicted_keys);
    w.kv("evicted_clients", server.client_eviction.evicted());
    w.kv(
        "total_eviction_exceeded_time",
        server.evictor.total_exceeded_ms(),
    );
    w.kv(
        "current_eviction_exceeded_time",
        server.evictor.current_exceeded_ms(),
    );
    w.kv("keyspace_hits", ks.keyspace_hits);
    w.kv("keyspace_misses", ks.keyspace_misses);
    w.kv("pubsub_channels", server.pubsub.channel_count());
    w.kv("pubsub_patterns", server.pubsub.pattern_count());
    w.kv("pubsubshard_channels", server.pubsub.shard_channel_count());
    // Vireo never forks: a background snapshot's cut stands for the fork
    // (BGSAVE and save points, AOF rewrites, replicas' full syncs), its
    // duration for the fork time; see `persist::forks`.
    w.kv("latest_fork_usec", server.forks.latest_us());
    w.kv("total_forks", server.forks.total());
    w.kv("migrate_cached_sockets", crate::net::outbound::cached());
    w.zeros(&[
        "slave_expires_tracked_keys",
        "active_defrag_hits",
        "active_defrag_misses",
        "active_defrag_key_hits",
        "active_defrag_key_misses",
        "total_active_defrag_time",
        "current_active_defrag_time",
    ]);
    w.kv("tracking_total_keys", server.tracking.key_count());
    w.kv("tracking_total_items", server.tracking.item_count());
    w.kv("tracking_total_prefixes", server.tracking.prefix_count());
    w.zeros(&["unexpected_error_replies"]);
    w.kv(
        "total_error_replies",
        st.total_error_replies.load(Ordering::Relaxed),
    );
    w.kv("dump_payload_sanitizations", 0);
    w.kv(
        "total_reads_processed",
        sum_workers(ws, |w| &w.reads_processed),
    );
    w.kv(
        "total_writes_processed",
        sum_workers(ws, |w| &w.writes_processed),
    );
    w.zeros(&[
        "io_threaded_reads_processed",
        "io_threaded_writes_processed",
        "reply_buffer_shrinks",
        "reply_buffer_expands",
    ]);
}

fn replication_section(server: &Server, w: &mut Lines<'_>) {
    for (k, v) in server.repl.info_fields(server) {
        w.kv(&k, v);
    }
}

/// (user, system) CPU seconds from a /proc `stat` file: the process's own
/// (`children` false) or its reaped children's.
fn cpu_times(path: &str, children: bool) -> (f64, f64) {
    // Linux reports these in USER_HZ, which is 100 on every platform we run on.
    const TICKS: f64 = 100.0;
    let Ok(stat) = std::fs::read_to_string(path) else {
        return (0.0, 0.0);
    };
    // Fields after the parenthesised command name, which may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let at = if children { 13 } else { 11 };
    let get = |i: usize| f.get(i).copied().unwrap_or(0.0) / TICKS;
    (get(at), get(at + 1))
}

fn cpu_section(_server: &Server, w: &mut Lines<'_>) {
    let (user, sys) = cpu_times("/proc/self/stat", false);
    let (cuser, csys) = cpu_times("/proc/self/stat", true);
    // The thread running this command stands in for Redis's main thread.
    let (tuser, tsys) = cpu_times("/proc/thread-self/stat", false);
    w.kv("used_cpu_sys", format!("{sys:.6}"));
    w.kv("used_cpu_user", format!("{user:.6}"));
    w.kv("used_cpu_sys_children", format!("{csys:.6}"));
    w.kv("used_cpu_user_children", format!("{cuser:.6}"));
    w.kv("used_cpu_sys_main_thread", format!("{tsys:.6}"));
    w.kv("used_cpu_user_main_thread", format!("{tuser:.6}"));
}

/// Per-command counters summed over the workers.
struct CmdTotals {
    calls: u64,
    usec: u64,
    rejected: u64,
    failed: u64,
}

fn cmd_totals(server: &Server, id: usize) -> CmdTotals {
    let sum = |f: fn(&crate::server::CmdStat) -> &std::sync::atomic::AtomicU64| {
        server
            .worker_stats
            .iter()
            .map(|w| f(&w.per_command[id]).load(Ordering::Relaxed))
            .sum()
    };
    CmdTotals {
        calls: sum(|s| &s.calls),
        usec: sum(|s| &s.usec),
        rejected: sum(|s| &s.rejected),
        failed: sum(|s| &s.failed),
    }
}

fn commandstats_section(server: &Server, w: &mut Lines<'_>) {
    for (id, spec) in table().all.iter().enumerate() {
        let t = cmd_totals(server, id);
        if t.calls == 0 && t.rejected == 0 && t.failed == 0 {
            continue;
        }
        let per_call = if t.calls == 0 {
            0.0
        } else {
            t.usec as f64 / t.calls as f64
        };
        w.kv(
            &format!("cmdstat_{}", spec.name),
            format!(
                "calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}",
                t.calls, t.usec, t.rejected, t.failed
            ),
        );
    }
}

fn errorstats_section(server: &Server, w: &mut Lines<'_>) {
    let mut errors: Vec<(String, u64)> = server
        .stats
        .errors
        .lock()
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    errors.sort();
    for (code, n) in errors {
        w.kv(&format!("errorstat_{code}"), format!("count={n}"));
    }
}

fn latencystats_section(server: &Server, w: &mut Lines<'_>) {
    let percentiles: Vec<f64> = server
        .config
        .get_one("latency-tracking-info-percentiles")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    for (id, spec) in table().all.iter().enumerate() {
        let mut h = Histogram::default();
        for ws in &server.worker_stats {
            h.add(&ws.per_command[id].latency);
        }
        if h.total() == 0 {
            continue;
        }
        let parts: Vec<String> = percentiles
            .iter()
            .map(|&p| format!("p{p}={:.3}", h.percentile_us(p)))
            .collect();
        w.kv(
            &format!("latency_percentiles_usec_{}", spec.name),
            parts.join(","),
        );
    }
}

fn keyspace_section(server: &Server, w: &mut Lines<'_>) {
    for (db, (keys, expires)) in keyspace_sizes(server).into_iter().enumerate() {
        if keys > 0 {
            w.kv(
                &format!("db{db}"),
                format!("keys={keys},expires={expires},avg_ttl=0"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(on: &[bool]) -> Vec<&'static str> {
        SECTIONS
            .iter()
            .zip(on)
            .filter(|(_, b)| **b)
            .map(|(s, _)| s.0)
            .collect()
    }

    #[test]
    fn section_selection() {
        let default = names(&selected_sections(&[]));
        assert!(default.contains(&"server") && default.contains(&"keyspace"));
        assert!(!default.contains(&"commandstats") && !default.contains(&"latencystats"));
        assert_eq!(names(&selected_sections(&[b"default"])), default);
        assert_eq!(names(&selected_sections(&[b"ALL"])).len(), SECTIONS.len());
        assert_eq!(
            names(&selected_sections(&[b"everything"])).len(),
            SECTIONS.len()
        );
        assert_eq!(names(&selected_sections(&[b"nosuch"])), Vec::<&str>::new());
        assert_eq!(
            names(&selected_sections(&[b"keyspace", b"Server", b"server"])),
            vec!["server", "keyspace"]
        );
        let mut with_cmd = default.clone();
        with_cmd.insert(8, "commandstats");
        assert_eq!(
            names(&selected_sections(&[b"commandstats", b"default"])),
            with_cmd
        );
    }

    #[test]
    fn human_bytes() {
        assert_eq!(bytes_to_human(0), "0B");
        assert_eq!(bytes_to_human(1023), "1023B");
        assert_eq!(bytes_to_human(1024), "1.00K");
        assert_eq!(bytes_to_human(941_280), "919.22K");
        assert_eq!(bytes_to_human(7_061_504), "6.73M");
        assert_eq!(bytes_to_human(25_276_502_016), "23.54G");
        assert_eq!(bytes_to_human(1 << 40), "1.00T");
        assert_eq!(bytes_to_human(1 << 50), "1.00P");
        assert_eq!(bytes_to_human(u64::MAX), format!("{}B", u64::MAX));
    }

    #[test]
    fn cpu_times_parse_proc_stat() {
        let (u, s) = cpu_times("/proc/self/stat", false);
        assert!(u >= 0.0 && s >= 0.0);
        assert_eq!(cpu_times("/nonexistent", false), (0.0, 0.0));
    }

    #[test]
    fn build_id_is_stable_hex() {
        assert_eq!(build_id(), build_id());
        assert!(build_id().chars().all(|c| c.is_ascii_hexdigit()));
    }
}
