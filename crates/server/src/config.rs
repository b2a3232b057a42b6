//! Server configuration: Redis's parameter table, `redis.conf` parsing,
//! redis-server style command-line options, and the CONFIG GET / SET /
//! REWRITE logic.
//!
//! Every Redis 7.0 parameter is known by name (and its old aliases) so that
//! clients, tools and Redis's own test suite can read and set it. Values are
//! stored in their canonical printed form (what CONFIG GET shows); the few
//! read on hot paths are mirrored into atomics in [`HotConfig`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};

use parking_lot::RwLock;
use vireo_store::glob::glob_match;

use crate::server::REDIS_VERSION;

mod cmdline;

/// How a parameter's value is checked and printed.
#[derive(Clone, Copy)]
enum Kind {
    /// `yes` / `no`.
    Bool,
    /// An integer within bounds.
    Int(i64, i64),
    /// A byte count with optional k/kb/m/mb/g/gb units, printed in bytes.
    Mem(u64, u64),
    /// One of these words.
    Enum(&'static [&'static str]),
    /// Any string.
    Str,
    /// Checked and normalised by [`normalise_special`].
    Special,
}

/// One configuration parameter.
struct Param {
    name: &'static str,
    aliases: &'static [&'static str],
    kind: Kind,
    default: &'static str,
    mutable: bool,
}

const fn p(name: &'static str, kind: Kind, default: &'static str) -> Param {
    Param {
        name,
        aliases: &[],
        kind,
        default,
        mutable: true,
    }
}

const fn fixed(name: &'static str, kind: Kind, default: &'static str) -> Param {
    Param {
        name,
        aliases: &[],
        kind,
        default,
        mutable: false,
    }
}

const fn alias(
    name: &'static str,
    aliases: &'static [&'static str],
    kind: Kind,
    default: &'static str,
) -> Param {
    Param {
        name,
        aliases,
        kind,
        default,
        mutable: true,
    }
}

const B: Kind = Kind::Bool;
const S: Kind = Kind::Str;
const X: Kind = Kind::Special;
const I32: i64 = i32::MAX as i64;
const fn int(min: i64, max: i64) -> Kind {
    Kind::Int(min, max)
}
const fn mem(min: u64) -> Kind {
    Kind::Mem(min, u64::MAX >> 1)
}
const NONNEG: Kind = Kind::Int(0, I32);
const YES_NO_LOCAL: Kind = Kind::Enum(&["no", "yes", "local"]);
const SHUTDOWN_ON: Kind = Kind::Special;

/// Every parameter Redis 7.0 knows, in roughly redis.conf's order.
/// Debugging parameters Redis hides from `CONFIG GET` patterns: only asked
/// for by their exact name do they answer (Redis's `HIDDEN_CONFIG`).
/// Vireo's own `threads` spelling of `io-threads` is hidden the same way:
/// Redis has no such name, and its suite sets every listed name.
const HIDDEN_PARAMS: [&str; 6] = [
    "threads",
    "watchdog-period",
    "rdb-key-save-delay",
    "key-load-delay",
    "loading-process-events-interval-bytes",
    "use-exit-on-panic",
];

static PARAMS: &[Param] = &[
    // Network and general.
    // Rebound at run time by CONFIG SET (net/listener.rs). Redis 7.0's
    // built-in default is every interface (its redis.conf narrows it to
    // loopback); protected mode guards the others.
    p("bind", X, "* -::*"),
    p("bind-source-addr", S, ""),
    p("port", int(0, 65535), "6379"),
    fixed("tcp-backlog", NONNEG, "511"),
    fixed("unixsocket", S, ""),
    fixed("unixsocketperm", X, "0"),
    p("timeout", NONNEG, "0"),
    p("tcp-keepalive", NONNEG, "300"),
    p("protected-mode", B, "yes"),
    fixed("daemonize", B, "no"),
    fixed(
        "supervised",
        Kind::Enum(&["no", "upstart", "systemd", "auto"]),
        "no",
    ),
    fixed("pidfile", S, ""),
    p(
        "loglevel",
        Kind::Enum(&["debug", "verbose", "notice", "warning"]),
        "notice",
    ),
    fixed("logfile", S, ""),
    fixed("syslog-enabled", B, "no"),
    fixed("syslog-ident", S, "redis"),
    fixed(
        "syslog-facility",
        Kind::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
        ]),
        "local0",
    ),
    p("crash-log-enabled", B, "yes"),
    p("crash-memcheck-enabled", B, "yes"),
    // The software watchdog (ops/watchdog.rs), in milliseconds.
    p("watchdog-period", NONNEG, "0"),
    // Redis exits instead of aborting on a failed assertion; Vireo refuses
    // bad input without panicking, so the choice has nothing to change.
    p("use-exit-on-panic", B, "no"),
    fixed("databases", int(1, I32), "16"),
    fixed("always-show-logo", B, "no"),
    fixed("set-proc-title", B, "yes"),
    p(
        "proc-title-template",
        S,
        "{title} {listen-addr} {server-mode}",
    ),
    fixed("enable-protected-configs", YES_NO_LOCAL, "no"),
    fixed("enable-debug-command", YES_NO_LOCAL, "no"),
    fixed("enable-module-command", YES_NO_LOCAL, "no"),
    // Snapshotting.
    p("save", X, "3600 1 300 100 60 10000"),
    p("stop-writes-on-bgsave-error", B, "yes"),
    p("rdbcompression", B, "yes"),
    p("rdbchecksum", B, "yes"),
    p(
        "sanitize-dump-payload",
        Kind::Enum(&["no", "yes", "clients"]),
        "no",
    ),
    p("dbfilename", S, "dump.rdb"),
    p("rdb-del-sync-files", B, "no"),
    p("dir", X, ""),
    p("rdb-key-save-delay", int(i64::MIN, i64::MAX), "0"),
    p("key-load-delay", int(i64::MIN, i64::MAX), "0"),
    // How often a loading Redis serves clients; Vireo's workers serve them
    // throughout a load (with -LOADING), whatever its value.
    p(
        "loading-process-events-interval-bytes",
        int(1024, I32),
        "2097152",
    ),
    // Replication.
    Param {
        name: "replicaof",
        aliases: &["slaveof"],
        kind: X,
        default: "",
        mutable: false,
    },
    p("masterauth", S, ""),
    p("masteruser", S, ""),
    alias(
        "replica-serve-stale-data",
        &["slave-serve-stale-data"],
        B,
        "yes",
    ),
    alias("replica-read-only", &["slave-read-only"], B, "yes"),
    p("repl-diskless-sync", B, "yes"),
    p("repl-diskless-sync-delay", NONNEG, "5"),
    p("repl-diskless-sync-max-replicas", NONNEG, "0"),
    p(
        "repl-diskless-load",
        Kind::Enum(&["disabled", "on-empty-db", "swapdb"]),
        "disabled",
    ),
    alias(
        "repl-ping-replica-period",
        &["repl-ping-slave-period"],
        int(1, I32),
        "10",
    ),
    p("repl-timeout", int(1, I32), "60"),
    p("repl-disable-tcp-nodelay", B, "no"),
    p("repl-backlog-size", mem(1), "1048576"),
    p("repl-backlog-ttl", NONNEG, "3600"),
    alias("replica-priority", &["slave-priority"], NONNEG, "100"),
    p("replica-announced", B, "yes"),
    alias(
        "min-replicas-to-write",
        &["min-slaves-to-write"],
        NONNEG,
        "0",
    ),
    alias(
        "min-replicas-max-lag",
        &["min-slaves-max-lag"],
        NONNEG,
        "10",
    ),
    alias("replica-announce-ip", &["slave-announce-ip"], S, ""),
    alias(
        "replica-announce-port",
        &["slave-announce-port"],
        int(0, 65535),
        "0",
    ),
    alias(
        "replica-ignore-maxmemory",
        &["slave-ignore-maxmemory"],
        B,
        "yes",
    ),
    alias("replica-lazy-flush", &["slave-lazy-flush"], B, "no"),
    p("replica-ignore-disk-write-errors", B, "no"),
    p(
        "propagation-error-behavior",
        Kind::Enum(&["ignore", "panic", "panic-on-replicas"]),
        "ignore",
    ),
    // Keys tracking, security.
    p("tracking-table-max-keys", int(0, I32), "1000000"),
    p("acllog-max-len", NONNEG, "128"),
    fixed("aclfile", S, ""),
    p(
        "acl-pubsub-default",
        Kind::Enum(&["allchannels", "resetchannels"]),
        "resetchannels",
    ),
    p("requirepass", S, ""),
    // Clients and memory.
    p("maxclients", int(1, I32), "10000"),
    p("maxmemory", mem(0), "0"),
    p(
        "maxmemory-policy",
        Kind::Enum(&[
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "noeviction",
        ]),
        "noeviction",
    ),
    p("maxmemory-samples", int(1, 64), "5"),
    p("maxmemory-eviction-tenacity", int(0, 100), "10"),
    p("maxmemory-clients", X, "0"),
    p("lazyfree-lazy-eviction", B, "no"),
    p("lazyfree-lazy-expire", B, "no"),
    p("lazyfree-lazy-server-del", B, "no"),
    p("lazyfree-lazy-user-del", B, "no"),
    p("lazyfree-lazy-user-flush", B, "no"),
    p(
        "oom-score-adj",
        Kind::Enum(&["no", "yes", "relative", "absolute"]),
        "no",
    ),
    p("oom-score-adj-values", X, "0 200 800"),
    fixed("disable-thp", B, "yes"),
    // Append only file.
    p("appendonly", B, "no"),
    fixed("appendfilename", S, "appendonly.aof"),
    fixed("appenddirname", S, "appendonlydir"),
    p(
        "appendfsync",
        Kind::Enum(&["always", "everysec", "no"]),
        "everysec",
    ),
    p("no-appendfsync-on-rewrite", B, "no"),
    p("auto-aof-rewrite-percentage", NONNEG, "100"),
    p("auto-aof-rewrite-min-size", mem(0), "67108864"),
    p("aof-load-truncated", B, "yes"),
    p("aof-use-rdb-preamble", B, "yes"),
    p("aof-timestamp-enabled", B, "no"),
    p("aof-rewrite-incremental-fsync", B, "yes"),
    p("rdb-save-incremental-fsync", B, "yes"),
    // Scripting and shutdown.
    alias("busy-reply-threshold", &["lua-time-limit"], NONNEG, "5000"),
    // SQL databases (not Redis parameters): how long one statement may run
    // (ms, 0 for no limit), and whether database files may live outside `dir`.
    p("sql-time-limit", NONNEG, "5000"),
    p("sql-allow-any-path", B, "no"),
    p("shutdown-timeout", NONNEG, "10"),
    p("shutdown-on-sigint", SHUTDOWN_ON, "default"),
    p("shutdown-on-sigterm", SHUTDOWN_ON, "default"),
    // Cluster.
    fixed("cluster-enabled", B, "no"),
    fixed("cluster-config-file", S, "nodes.conf"),
    p("cluster-node-timeout", NONNEG, "15000"),
    fixed("cluster-port", int(0, 65535), "0"),
    alias(
        "cluster-replica-validity-factor",
        &["cluster-slave-validity-factor"],
        NONNEG,
        "10",
    ),
    p("cluster-migration-barrier", NONNEG, "1"),
    p("cluster-allow-replica-migration", B, "yes"),
    p("cluster-require-full-coverage", B, "yes"),
    alias(
        "cluster-replica-no-failover",
        &["cluster-slave-no-failover"],
        B,
        "no",
    ),
    p("cluster-allow-reads-when-down", B, "no"),
    p("cluster-allow-pubsubshard-when-down", B, "yes"),
    p("cluster-announce-ip", S, ""),
    p("cluster-announce-hostname", S, ""),
    p("cluster-announce-port", int(0, 65535), "0"),
    p("cluster-announce-bus-port", int(0, 65535), "0"),
    p("cluster-announce-tls-port", int(0, 65535), "0"),
    p(
        "cluster-preferred-endpoint-type",
        Kind::Enum(&["ip", "hostname", "unknown-endpoint"]),
        "ip",
    ),
    p("cluster-link-sendbuf-limit", mem(0), "0"),
    // Slow log, latency, notifications.
    p("slowlog-log-slower-than", int(-1, i64::MAX), "10000"),
    p("slowlog-max-len", NONNEG, "128"),
    p("latency-monitor-threshold", int(0, i64::MAX), "0"),
    p("latency-tracking", B, "yes"),
    p("latency-tracking-info-percentiles", X, "50 99 99.9"),
    p("notify-keyspace-events", X, ""),
    // Data structure encodings.
    alias(
        "hash-max-listpack-entries",
        &["hash-max-ziplist-entries"],
        mem(0),
        "512",
    ),
    alias(
        "hash-max-listpack-value",
        &["hash-max-ziplist-value"],
        mem(0),
        "64",
    ),
    alias(
        "list-max-listpack-size",
        &["list-max-ziplist-size"],
        int(i32::MIN as i64, I32),
        "-2",
    ),
    p("list-compress-depth", NONNEG, "0"),
    p("set-max-intset-entries", mem(0), "512"),
    alias(
        "zset-max-listpack-entries",
        &["zset-max-ziplist-entries"],
        mem(0),
        "128",
    ),
    alias(
        "zset-max-listpack-value",
        &["zset-max-ziplist-value"],
        mem(0),
        "64",
    ),
    p("hll-sparse-max-bytes", mem(0), "3000"),
    p("stream-node-max-bytes", mem(0), "4096"),
    p("stream-node-max-entries", int(0, i64::MAX), "100"),
    p("activerehashing", B, "yes"),
    // Clients' buffers and protocol limits.
    p(
        "client-output-buffer-limit",
        X,
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
    ),
    p("client-query-buffer-limit", mem(1024 * 1024), "1073741824"),
    p("proto-max-bulk-len", mem(1024 * 1024), "536870912"),
    p("hz", int(0, I32), "10"),
    p("dynamic-hz", B, "yes"),
    p("active-expire-effort", int(1, 10), "1"),
    // `--threads N` is Vireo's own spelling of the worker count.
    Param {
        name: "io-threads",
        aliases: &["threads"],
        kind: int(0, 128),
        default: "0",
        mutable: false,
    },
    fixed("io-threads-do-reads", B, "no"),
    // Active defragmentation and allocator.
    p("activedefrag", B, "no"),
    p("active-defrag-ignore-bytes", mem(1), "104857600"),
    p("active-defrag-threshold-lower", int(0, 1000), "10"),
    p("active-defrag-threshold-upper", int(0, 1000), "100"),
    p("active-defrag-cycle-min", int(1, 99), "1"),
    p("active-defrag-cycle-max", int(1, 99), "25"),
    p("active-defrag-max-scan-fields", int(1, i64::MAX), "1000"),
    p("jemalloc-bg-thread", B, "yes"),
    fixed("server_cpulist", S, ""),
    fixed("bio_cpulist", S, ""),
    fixed("aof_rewrite_cpulist", S, ""),
    fixed("bgsave_cpulist", S, ""),
    p("ignore-warnings", S, ""),
    p("lfu-log-factor", NONNEG, "10"),
    p("lfu-decay-time", NONNEG, "1"),
    // TLS (accepted so configs carry over; Vireo has no TLS listener yet).
    p("tls-port", int(0, 65535), "0"),
    p("tls-cert-file", S, ""),
    p("tls-key-file", S, ""),
    p("tls-key-file-pass", S, ""),
    p("tls-client-cert-file", S, ""),
    p("tls-client-key-file", S, ""),
    p("tls-client-key-file-pass", S, ""),
    p("tls-dh-params-file", S, ""),
    p("tls-ca-cert-file", S, ""),
    p("tls-ca-cert-dir", S, ""),
    p("tls-protocols", S, ""),
    p("tls-ciphers", S, ""),
    p("tls-ciphersuites", S, ""),
    p(
        "tls-auth-clients",
        Kind::Enum(&["no", "yes", "optional"]),
        "yes",
    ),
    p("tls-replication", B, "no"),
    p("tls-cluster", B, "no"),
    p("tls-prefer-server-ciphers", B, "no"),
    p("tls-session-caching", B, "yes"),
    p("tls-session-cache-size", NONNEG, "20480"),
    p("tls-session-cache-timeout", NONNEG, "300"),
];

/// Looks a parameter up by name or alias (case-insensitive).
fn find(name: &str) -> Option<&'static Param> {
    let lower = name.to_ascii_lowercase();
    PARAMS
        .iter()
        .find(|p| p.name == lower || p.aliases.contains(&lower.as_str()))
}

/// Limits for one client class of `client-output-buffer-limit`.
#[derive(Default)]
pub struct OutputBufferLimit {
    pub hard: AtomicU64,
    pub soft: AtomicU64,
    pub soft_seconds: AtomicU64,
}

/// Mirrors of values read on hot paths, kept in step with every change.
#[derive(Default)]
pub struct HotConfig {
    pub proto_max_bulk_len: AtomicU64,
    pub client_query_buffer_limit: AtomicU64,
    pub maxclients: AtomicU64,
    pub timeout: AtomicU64,
    pub tcp_keepalive: AtomicU64,
    pub slowlog_log_slower_than: AtomicI64,
    pub slowlog_max_len: AtomicU64,
    pub maxmemory: AtomicU64,
    pub hz: AtomicU64,
    pub latency_monitor_threshold: AtomicU64,
    /// `latency-tracking`: per-command latency histograms are recorded.
    pub latency_tracking: AtomicBool,
    /// `tracking-table-max-keys` (0: no limit).
    pub tracking_table_max_keys: AtomicU64,
    /// The hook word: `notify-keyspace-events` as class bits
    /// ([`crate::exec::notify::class`]) plus [`crate::exec::notify::hook`]
    /// bits; zero while nothing listens (see [`crate::exec::notify::hooks`]).
    pub hooks: AtomicU32,
    /// Not a Redis parameter (Redis toggles it with DEBUG); on by default.
    pub active_expire_enabled: AtomicBool,
    /// DEBUG SET-SKIP-CHECKSUM-VALIDATION: RDB files and RESTORE payloads
    /// load without checking their CRC64.
    pub skip_checksum_validation: AtomicBool,
    /// normal, replica, pubsub.
    pub client_output_buffer_limits: [OutputBufferLimit; 3],
    pub lazyfree_lazy_user_del: AtomicBool,
    pub lazyfree_lazy_user_flush: AtomicBool,
    pub lazyfree_lazy_eviction: AtomicBool,
    pub lazyfree_lazy_expire: AtomicBool,
    /// `maxmemory-clients`: bytes, or a percentage of `maxmemory` stored
    /// negated (Redis's own encoding); 0 is off.
    pub maxmemory_clients: AtomicI64,
    pub maxmemory_samples: AtomicU64,
    /// `maxmemory-policy` as its index in [`vireo_store::Policy::ALL`]
    /// (read by every command while memory is over the limit).
    pub maxmemory_policy: AtomicU8,
    pub maxmemory_eviction_tenacity: AtomicU64,
    pub lfu_log_factor: AtomicU64,
    pub lfu_decay_time: AtomicU64,
    pub list_max_listpack_size: AtomicI64,
    pub list_compress_depth: AtomicU64,
    pub hash_max_listpack_entries: AtomicU64,
    pub hash_max_listpack_value: AtomicU64,
    pub set_max_intset_entries: AtomicU64,
    pub zset_max_listpack_entries: AtomicU64,
    pub zset_max_listpack_value: AtomicU64,
    /// `hll-sparse-max-bytes`, read by every PFADD and PFMERGE.
    pub hll_sparse_max_bytes: AtomicU64,
    pub stream_node_max_bytes: AtomicU64,
    pub stream_node_max_entries: AtomicU64,
    /// `busy-reply-threshold` (ms): when a running script starts getting
    /// other clients `-BUSY`.
    pub busy_reply_threshold: AtomicU64,
    /// `min-replicas-to-write` and `min-replicas-max-lag`: writes are
    /// refused while fewer good replicas are connected (Vireo has none).
    pub min_replicas_to_write: AtomicU64,
    pub min_replicas_max_lag: AtomicU64,
    /// `sql-time-limit` (ms, 0: none): an SQL statement running longer is
    /// interrupted.
    pub sql_time_limit: AtomicU64,
}

/// A size threshold as usize (saturating on 32-bit targets).
fn threshold(a: &AtomicU64) -> usize {
    usize::try_from(a.load(Ordering::Relaxed)).unwrap_or(usize::MAX)
}

impl HotConfig {
    /// `hash-max-listpack-entries|value`.
    pub fn hash_limits(&self) -> vireo_store::hash::HashLimits {
        vireo_store::hash::HashLimits {
            max_entries: threshold(&self.hash_max_listpack_entries),
            max_value: threshold(&self.hash_max_listpack_value),
        }
    }

    /// `hll-sparse-max-bytes`.
    pub fn hll_sparse_max_bytes(&self) -> usize {
        threshold(&self.hll_sparse_max_bytes)
    }

    /// `zset-max-listpack-entries|value`.
    pub fn zset_limits(&self) -> vireo_store::zset::Limits {
        vireo_store::zset::Limits {
            max_entries: threshold(&self.zset_max_listpack_entries),
            max_value: threshold(&self.zset_max_listpack_value),
        }
    }

    /// `stream-node-max-bytes|entries`.
    pub fn stream_node_limits(&self) -> vireo_store::stream::NodeLimits {
        vireo_store::stream::NodeLimits {
            max_bytes: self.stream_node_max_bytes.load(Ordering::Relaxed),
            max_entries: self.stream_node_max_entries.load(Ordering::Relaxed),
        }
    }
}

/// The server's configuration, shared by all threads.
pub struct Config {
    values: RwLock<HashMap<&'static str, String>>,
    /// The config file given at start-up, for CONFIG REWRITE.
    file: Option<PathBuf>,
    /// Hot-path mirrors.
    pub hot: HotConfig,
    /// `user` directives (name then rules), validated, loaded into the
    /// ACL at start-up.
    pub user_lines: Vec<Vec<Vec<u8>>>,
    /// `rename-command` directives (old name, new name), in order.
    pub renames: Vec<(String, String)>,
    /// `loadmodule` directives (path then arguments): start-up refuses
    /// them, as no module can be loaded (`cmd::module`).
    pub load_modules: Vec<Vec<String>>,
    /// How many module options (`name.option value` lines) the config
    /// gave: with no module to claim them, start-up stops.
    pub module_configs: usize,
}

impl Default for Config {
    fn default() -> Self {
        let values = PARAMS
            .iter()
            .map(|p| (p.name, p.default.to_string()))
            .collect();
        let c = Config {
            values: RwLock::new(values),
            file: None,
            hot: HotConfig::default(),
            user_lines: Vec::new(),
            renames: Vec::new(),
            load_modules: Vec::new(),
            module_configs: 0,
        };
        c.hot.active_expire_enabled.store(true, Ordering::Relaxed);
        c.refresh_hot();
        c
    }
}

/// The parameters Redis marks MULTI_ARG_CONFIG: a config line may give
/// them any number of arguments (they check the count themselves).
const MULTI_ARG: &[&str] = &[
    "save",
    "client-output-buffer-limit",
    "oom-score-adj-values",
    "bind",
    "replicaof",
    "latency-tracking-info-percentiles",
    "shutdown-on-sigint",
    "shutdown-on-sigterm",
];

/// The error `redis-server` prints for a bad config file line.
fn fatal(line_no: usize, line: &str, reason: &str) -> String {
    format!(
        "\n*** FATAL CONFIG FILE ERROR (Redis {REDIS_VERSION}) ***\nReading the configuration file, at line {line_no}\n>>> '{}'\n{reason}",
        line.trim()
    )
}

impl Config {
    /// Builds the configuration from redis-server style arguments (program
    /// name excluded): an optional config file (`-` for stdin) followed by
    /// `--name value …` options. Err is the message to print before exiting.
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let mut config = Config::default();
        let line = cmdline::parse(args);
        let mut text = String::new();
        if let Some(file) = &line.file {
            let path = PathBuf::from(file);
            text = std::fs::read_to_string(&path).map_err(|e| {
                format!(
                    "Fatal error, can't open config file '{file}': {}",
                    io_reason(&e)
                )
            })?;
            config.file = Some(std::fs::canonicalize(&path).unwrap_or(path));
        }
        if line.stdin {
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| e.to_string())?;
        }
        // The options are config lines after the file's, as in Redis.
        text.push('\n');
        text.push_str(&line.options);
        let mut seen_save = false;
        for (i, line) in text.lines().enumerate() {
            if is_comment(line) {
                continue;
            }
            let words = split_args(line)
                .ok_or_else(|| fatal(i + 1, line, "Unbalanced quotes in configuration line"))?;
            config
                .apply_line(&words, &mut seen_save, 0)
                .map_err(|e| fatal(i + 1, line, &e))?;
        }
        config.refresh_hot();
        Ok(config)
    }

    /// Applies one directive from a file or the command line.
    fn apply_line(
        &mut self,
        words: &[String],
        seen_save: &mut bool,
        depth: usize,
    ) -> Result<(), String> {
        let Some(name) = words.first() else {
            return Ok(());
        };
        if name.starts_with('#') {
            return Ok(());
        }
        if name.eq_ignore_ascii_case("include") && words.len() == 2 {
            if depth > 16 {
                return Err("Too many nested includes".into());
            }
            let content = std::fs::read_to_string(&words[1]).map_err(|e| {
                format!(
                    "Fatal error, can't open config file '{}': {}",
                    words[1],
                    io_reason(&e)
                )
            })?;
            for line in content.lines().filter(|l| !is_comment(l)) {
                let w = split_args(line).ok_or("Unbalanced quotes in configuration line")?;
                self.apply_line(&w, seen_save, depth + 1)?;
            }
            return Ok(());
        }
        if name.eq_ignore_ascii_case("user") && words.len() >= 2 {
            let line = crate::security::users::validate_config_line(&words[1..], &self.user_lines)?;
            self.user_lines.push(line);
            return Ok(());
        }
        if name.eq_ignore_ascii_case("rename-command") && words.len() == 3 {
            self.renames.push((words[1].clone(), words[2].clone()));
            crate::cmd::rename_table(&self.renames)?;
            return Ok(());
        }
        if name.eq_ignore_ascii_case("loadmodule") && words.len() >= 2 {
            self.load_modules.push(words[1..].to_vec());
            return Ok(());
        }
        if name.eq_ignore_ascii_case("rename-command") || name.eq_ignore_ascii_case("loadmodule") {
            return Err("Bad directive or wrong number of arguments".into());
        }
        let Some(param) = find(name) else {
            // As Redis, an unknown dotted name is a module's option, kept
            // for a module that would declare it.
            if name.contains('.') {
                if words.len() < 2 {
                    return Err("Module config specified without value".into());
                }
                self.module_configs += 1;
                return Ok(());
            }
            return Err("Bad directive or wrong number of arguments".into());
        };
        let raw = words[1..].join(" ");
        if param.name == "save" {
            // The first `save` line replaces the defaults, later ones add.
            let value = normalise(param, &raw)?;
            let mut values = self.values.write();
            let cur = values.get_mut("save").expect("save exists");
            if !*seen_save || value.is_empty() || cur.is_empty() {
                *cur = value;
            } else {
                cur.push(' ');
                cur.push_str(&value);
            }
            *seen_save = true;
            return Ok(());
        }
        // Only Redis's MULTI_ARG configs take other than one argument.
        if words.len() != 2 && !MULTI_ARG.contains(&param.name) {
            return Err("wrong number of arguments".into());
        }
        let value = normalise(param, &raw)?;
        if param.name == "dir" {
            std::env::set_current_dir(&value).map_err(|e| io_reason(&e))?;
        }
        self.values.write().insert(param.name, value);
        Ok(())
    }

    /// CONFIG GET: (name, value) for every parameter whose name or alias
    /// matches one of the patterns (exact names without glob characters
    /// are looked up directly, so aliases answer under the asked name).
    pub fn get(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let values = self.values.read();
        let mut out: Vec<(String, String)> = Vec::new();
        let mut push = |name: &str, p: &Param| {
            if !out.iter().any(|(n, _)| n == name) {
                out.push((name.to_string(), self.display(p, &values)));
            }
        };
        for pat in patterns {
            let pat_s = String::from_utf8_lossy(pat).to_ascii_lowercase();
            if !pat_s.contains(['*', '?', '[']) {
                if let Some(p) = find(&pat_s) {
                    push(&pat_s, p);
                }
                continue;
            }
            for p in PARAMS.iter().filter(|p| !HIDDEN_PARAMS.contains(&p.name)) {
                for name in std::iter::once(&p.name).chain(p.aliases.iter()) {
                    if !HIDDEN_PARAMS.contains(name) && glob_match(pat, name.as_bytes(), true) {
                        push(name, p);
                    }
                }
            }
        }
        out
    }

    fn display(&self, p: &Param, values: &HashMap<&'static str, String>) -> String {
        match p.name {
            "dir" => std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            "io-threads" => self.io_threads_effective().to_string(),
            "notify-keyspace-events" => {
                crate::exec::notify::format(self.hot.hooks.load(Ordering::Relaxed))
            }
            _ => values.get(p.name).cloned().unwrap_or_default(),
        }
    }

    /// The printed value of one parameter (by name or alias).
    pub fn get_one(&self, name: &str) -> Option<String> {
        let p = find(name)?;
        Some(self.display(p, &self.values.read()))
    }

    /// Records the master REPLICAOF follows (`host port`, or empty for
    /// none), so CONFIG REWRITE writes the `replicaof` line Redis writes
    /// and a restarted replica follows the same master.
    pub fn record_replicaof(&self, value: String) {
        self.values.write().insert("replicaof", value);
    }

    /// CONFIG SET with one or more pairs: all are validated first, then all
    /// are applied, or none. Err is Redis's exact error reply.
    pub fn set(&self, pairs: &[(&[u8], &[u8])]) -> Result<(), String> {
        let mut staged: Vec<(&'static Param, String)> = Vec::new();
        for (name, value) in pairs {
            let name_s = String::from_utf8_lossy(name).into_owned();
            let Some(param) = find(&name_s) else {
                return Err(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{name_s}'"
                ));
            };
            let failed = |reason: &str| {
                format!(
                    "ERR CONFIG SET failed (possibly related to argument '{name_s}') - {reason}"
                )
            };
            if !param.mutable {
                return Err(failed("can't set immutable config"));
            }
            if staged.iter().any(|(p, _)| std::ptr::eq(*p, param)) {
                return Err(failed("duplicate parameter"));
            }
            let value = String::from_utf8_lossy(value).into_owned();
            let v = normalise(param, &value).map_err(|e| failed(&e))?;
            let v = if param.name == "client-output-buffer-limit" {
                merge_output_limits(&self.values.read()[param.name], &v)
            } else {
                v
            };
            if param.name == "dir" {
                if let Err(e) = std::env::set_current_dir(&v) {
                    return Err(failed(&io_reason(&e)));
                }
            }
            staged.push((param, v));
        }
        {
            let mut values = self.values.write();
            for (param, v) in staged {
                values.insert(param.name, v);
            }
        }
        self.refresh_hot();
        Ok(())
    }

    /// CONFIG REWRITE: rewrites the start-up config file, keeping comments
    /// and unknown lines, updating changed directives in place, dropping
    /// directives now at their default and appending the rest; the ACL
    /// users become its `user` lines (`users` empty: every `user` line
    /// goes, as Redis does when an ACL file holds them). `force_all` (DEBUG
    /// CONFIG-REWRITE-FORCE-ALL) writes parameters at their defaults too.
    pub fn rewrite_with_users(&self, users: &[String], force_all: bool) -> Result<(), String> {
        self.rewrite_file(force_all, users)
    }

    /// Rewrites the config file; `force_all` keeps directives at their
    /// defaults too.
    fn rewrite_file(&self, force_all: bool, users: &[String]) -> Result<(), String> {
        let Some(path) = &self.file else {
            return Err("ERR The server is running without a config file".into());
        };
        let old = std::fs::read_to_string(path).unwrap_or_default();
        let values = self.values.read();
        let mut written: Vec<&'static str> = Vec::new();
        let mut out = String::new();
        let mut users_written = false;
        for line in old.lines() {
            let words = split_args(line).unwrap_or_default();
            if words
                .first()
                .is_some_and(|w| w.eq_ignore_ascii_case("user"))
            {
                if !users_written {
                    users.iter().for_each(|u| {
                        out.push_str(u);
                        out.push('\n');
                    });
                    users_written = true;
                }
                continue;
            }
            let param = words
                .first()
                .filter(|w| !w.starts_with('#'))
                .and_then(|w| find(w));
            let Some(p) = param else {
                out.push_str(line);
                out.push('\n');
                continue;
            };
            if written.contains(&p.name) {
                continue;
            }
            written.push(p.name);
            if let Some(l) = self.rewrite_line(p, &values, force_all) {
                out.push_str(&l);
                out.push('\n');
            }
        }
        let mut appended = false;
        for p in PARAMS {
            if written.contains(&p.name)
                || (!force_all && values.get(p.name).map(String::as_str) == Some(p.default))
                || p.name == "dir"
            {
                continue;
            }
            if !appended {
                out.push_str("# Generated by CONFIG REWRITE\n");
                appended = true;
            }
            if let Some(l) = self.rewrite_line(p, &values, force_all) {
                out.push_str(&l);
                out.push('\n');
            }
        }
        if !users_written {
            users.iter().for_each(|u| {
                out.push_str(u);
                out.push('\n');
            });
        }
        let tmp = path.with_extension("tmp-rewrite");
        std::fs::write(&tmp, out)
            .and_then(|_| std::fs::rename(&tmp, path))
            .map_err(|e| format!("ERR Rewriting config file: {}", io_reason(&e)))
    }

    /// The directive for `p`, or None when it is at its default (unless
    /// `force_all`).
    fn rewrite_line(
        &self,
        p: &Param,
        values: &HashMap<&'static str, String>,
        force_all: bool,
    ) -> Option<String> {
        let v = self.display(p, values);
        if !force_all && p.name != "dir" && v == p.default {
            return None;
        }
        if p.name == "save" {
            if v.is_empty() {
                return Some("save \"\"".into());
            }
            let parts: Vec<&str> = v.split(' ').collect();
            return Some(
                parts
                    .chunks(2)
                    .map(|c| format!("save {}", c.join(" ")))
                    .collect::<Vec<_>>()
                    .join("\n"),
            );
        }
        if p.name == "replicaof" {
            // No master: no line, even when forced (Redis writes none).
            if v.is_empty() {
                return None;
            }
            // Two arguments, as Redis writes them.
            let words: Vec<String> = v.split_whitespace().map(quote).collect();
            return Some(format!("replicaof {}", words.join(" ")));
        }
        Some(format!("{} {}", p.name, quote(&v)))
    }

    /// The config file given at start-up.
    pub fn config_file(&self) -> Option<PathBuf> {
        self.file.clone()
    }

    fn raw(&self, name: &str) -> String {
        self.values.read().get(name).cloned().unwrap_or_default()
    }

    fn num(&self, name: &str) -> i64 {
        self.raw(name).parse().unwrap_or(0)
    }

    /// A yes/no parameter by name.
    pub fn flag(&self, name: &str) -> bool {
        self.raw(name) == "yes"
    }

    /// Re-reads every hot-path mirror from the table.
    fn refresh_hot(&self) {
        crate::ops::log::set_level(&self.raw("loglevel"));
        crate::ops::crash::set_enabled(self.flag("crash-log-enabled"));
        crate::ops::watchdog::set_period(self.num("watchdog-period").max(0) as u64);
        let h = &self.hot;
        let u = |n: &str| self.num(n).max(0) as u64;
        h.proto_max_bulk_len
            .store(u("proto-max-bulk-len"), Ordering::Relaxed);
        h.client_query_buffer_limit
            .store(u("client-query-buffer-limit"), Ordering::Relaxed);
        h.maxclients.store(u("maxclients"), Ordering::Relaxed);
        h.timeout.store(u("timeout"), Ordering::Relaxed);
        h.tcp_keepalive.store(u("tcp-keepalive"), Ordering::Relaxed);
        h.slowlog_log_slower_than
            .store(self.num("slowlog-log-slower-than"), Ordering::Relaxed);
        h.slowlog_max_len
            .store(u("slowlog-max-len"), Ordering::Relaxed);
        h.maxmemory.store(u("maxmemory"), Ordering::Relaxed);
        h.hz.store(u("hz").clamp(1, 500), Ordering::Relaxed);
        h.latency_monitor_threshold
            .store(u("latency-monitor-threshold"), Ordering::Relaxed);
        h.latency_tracking
            .store(self.flag("latency-tracking"), Ordering::Relaxed);
        h.tracking_table_max_keys
            .store(u("tracking-table-max-keys"), Ordering::Relaxed);
        let events = crate::exec::notify::parse(&self.raw("notify-keyspace-events"));
        crate::exec::notify::set_classes(&h.hooks, events.unwrap_or(0));
        h.lazyfree_lazy_user_del
            .store(self.flag("lazyfree-lazy-user-del"), Ordering::Relaxed);
        h.lazyfree_lazy_user_flush
            .store(self.flag("lazyfree-lazy-user-flush"), Ordering::Relaxed);
        h.lazyfree_lazy_eviction
            .store(self.flag("lazyfree-lazy-eviction"), Ordering::Relaxed);
        h.lazyfree_lazy_expire
            .store(self.flag("lazyfree-lazy-expire"), Ordering::Relaxed);
        let clients = self.raw("maxmemory-clients");
        let clients = match clients.strip_suffix('%') {
            Some(pct) => pct.parse::<i64>().map(|v| -v),
            None => clients.parse::<i64>(),
        };
        h.maxmemory_clients
            .store(clients.unwrap_or(0), Ordering::Relaxed);
        h.maxmemory_samples
            .store(u("maxmemory-samples"), Ordering::Relaxed);
        let policy = vireo_store::Policy::parse(&self.raw("maxmemory-policy"));
        let index = vireo_store::Policy::ALL
            .iter()
            .position(|p| Some(*p) == policy);
        h.maxmemory_policy
            .store(index.unwrap_or(0) as u8, Ordering::Relaxed);
        h.maxmemory_eviction_tenacity
            .store(u("maxmemory-eviction-tenacity"), Ordering::Relaxed);
        h.lfu_log_factor
            .store(u("lfu-log-factor"), Ordering::Relaxed);
        h.lfu_decay_time
            .store(u("lfu-decay-time"), Ordering::Relaxed);
        h.list_max_listpack_size
            .store(self.num("list-max-listpack-size"), Ordering::Relaxed);
        h.list_compress_depth
            .store(u("list-compress-depth"), Ordering::Relaxed);
        h.hash_max_listpack_entries
            .store(u("hash-max-listpack-entries"), Ordering::Relaxed);
        h.hash_max_listpack_value
            .store(u("hash-max-listpack-value"), Ordering::Relaxed);
        h.set_max_intset_entries
            .store(u("set-max-intset-entries"), Ordering::Relaxed);
        h.zset_max_listpack_entries
            .store(u("zset-max-listpack-entries"), Ordering::Relaxed);
        h.zset_max_listpack_value
            .store(u("zset-max-listpack-value"), Ordering::Relaxed);
        h.hll_sparse_max_bytes
            .store(u("hll-sparse-max-bytes"), Ordering::Relaxed);
        h.stream_node_max_bytes
            .store(u("stream-node-max-bytes"), Ordering::Relaxed);
        h.stream_node_max_entries
            .store(u("stream-node-max-entries"), Ordering::Relaxed);
        h.busy_reply_threshold
            .store(u("busy-reply-threshold"), Ordering::Relaxed);
        h.min_replicas_to_write
            .store(u("min-replicas-to-write"), Ordering::Relaxed);
        h.min_replicas_max_lag
            .store(u("min-replicas-max-lag"), Ordering::Relaxed);
        h.sql_time_limit
            .store(u("sql-time-limit"), Ordering::Relaxed);
        vireo_sql::path::set_allow_any_path(self.flag("sql-allow-any-path"));
        let limits = self.raw("client-output-buffer-limit");
        let words: Vec<&str> = limits.split(' ').collect();
        for c in words.chunks(4).filter(|c| c.len() == 4) {
            let idx = match c[0] {
                "normal" => 0,
                "slave" | "replica" => 1,
                _ => 2,
            };
            let l = &h.client_output_buffer_limits[idx];
            l.hard.store(c[1].parse().unwrap_or(0), Ordering::Relaxed);
            l.soft.store(c[2].parse().unwrap_or(0), Ordering::Relaxed);
            l.soft_seconds
                .store(c[3].parse().unwrap_or(0), Ordering::Relaxed);
        }
    }

    /// `port`.
    pub fn port(&self) -> u16 {
        self.num("port") as u16
    }
    /// `bind` addresses (a leading `-` marks an optional one).
    pub fn bind(&self) -> Vec<String> {
        self.raw("bind")
            .split_whitespace()
            .map(String::from)
            .collect()
    }
    /// `unixsocket`, if set.
    pub fn unixsocket(&self) -> Option<String> {
        Some(self.raw("unixsocket")).filter(|s| !s.is_empty())
    }
    /// `unixsocketperm` (octal in the file).
    pub fn unixsocketperm(&self) -> u32 {
        u32::from_str_radix(&self.raw("unixsocketperm"), 8).unwrap_or(0)
    }
    /// `tcp-backlog`.
    pub fn tcp_backlog(&self) -> u32 {
        self.num("tcp-backlog") as u32
    }
    /// `io-threads` as configured; 0 means one worker per core.
    pub fn io_threads(&self) -> usize {
        self.num("io-threads") as usize
    }
    /// The number of worker threads actually used.
    fn io_threads_effective(&self) -> usize {
        match self.io_threads() {
            0 => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            n => n,
        }
    }
    /// `rdb-key-save-delay`: microseconds a save waits per key written
    /// (a testing aid, as in Redis; 0 or less: none).
    pub fn rdb_key_save_delay_us(&self) -> u64 {
        u64::try_from(self.num("rdb-key-save-delay")).unwrap_or(0)
    }
    /// `databases`.
    pub fn databases(&self) -> usize {
        self.num("databases") as usize
    }
    /// `acllog-max-len`.
    pub fn acllog_max_len(&self) -> usize {
        usize::try_from(self.num("acllog-max-len")).unwrap_or(0)
    }
    /// `acl-pubsub-default allchannels`: new users may use every channel.
    pub fn acl_pubsub_all(&self) -> bool {
        self.raw("acl-pubsub-default") == "allchannels"
    }
    /// `aclfile` (empty: none).
    pub fn aclfile(&self) -> String {
        self.raw("aclfile")
    }
    /// `requirepass`, when one is set.
    pub fn requirepass(&self) -> Option<Vec<u8>> {
        Some(self.raw("requirepass"))
            .filter(|s| !s.is_empty())
            .map(String::into_bytes)
    }
    /// `loglevel`.
    pub fn loglevel(&self) -> String {
        self.raw("loglevel")
    }
    /// `enable-debug-command`: `no`, `yes` or `local`.
    pub fn enable_debug_command(&self) -> String {
        self.raw("enable-debug-command")
    }
    /// `enable-module-command`: `no`, `yes` or `local`.
    pub fn enable_module_command(&self) -> String {
        self.raw("enable-module-command")
    }
    /// `logfile` (empty: standard output).
    pub fn logfile(&self) -> String {
        self.raw("logfile")
    }
    /// `dir` (the working directory).
    pub fn dir(&self) -> String {
        self.get_one("dir").unwrap_or_default()
    }
    /// `dbfilename`.
    pub fn dbfilename(&self) -> String {
        self.raw("dbfilename")
    }
    /// `maxmemory-policy`.
    pub fn maxmemory_policy(&self) -> String {
        self.raw("maxmemory-policy")
    }
    /// `maxmemory-policy`, parsed (the table only accepts valid names).
    pub fn eviction_policy(&self) -> vireo_store::Policy {
        let index = self.hot.maxmemory_policy.load(Ordering::Relaxed);
        let all = vireo_store::Policy::ALL;
        all[usize::from(index) % all.len()]
    }
    /// `maxmemory` in bytes (0: no limit).
    pub fn maxmemory(&self) -> u64 {
        self.hot.maxmemory.load(Ordering::Relaxed)
    }
    /// `lazyfree-lazy-user-flush`.
    pub fn lazyfree_lazy_user_flush(&self) -> bool {
        self.hot.lazyfree_lazy_user_flush.load(Ordering::Relaxed)
    }
    /// `lazyfree-lazy-user-del`.
    pub fn lazyfree_lazy_user_del(&self) -> bool {
        self.hot.lazyfree_lazy_user_del.load(Ordering::Relaxed)
    }
    /// The client eviction limit in bytes that `maxmemory-clients` works
    /// out to, 0 when client eviction is off: a percentage counts only
    /// while `maxmemory` is set, and any limit is raised to at least
    /// 128 KiB so that a bad setting cannot cut every client off (as
    /// Redis's `getClientEvictionLimit`).
    pub fn client_eviction_limit(&self) -> u64 {
        const MIN: u64 = 128 * 1024;
        let v = self.hot.maxmemory_clients.load(Ordering::Relaxed);
        let maxmemory = self.maxmemory();
        let limit = if v < 0 && maxmemory > 0 {
            (maxmemory as f64 * (-v) as f64 / 100.0) as u64
        } else if v > 0 {
            v as u64
        } else {
            return 0;
        };
        limit.max(MIN)
    }
    /// `appendonly`.
    pub fn appendonly(&self) -> bool {
        self.flag("appendonly")
    }
    /// `appendfilename`: the prefix of the AOF files' names.
    pub fn appendfilename(&self) -> String {
        self.raw("appendfilename")
    }
    /// `appenddirname`: the AOF directory, relative to `dir`.
    pub fn appenddirname(&self) -> String {
        self.raw("appenddirname")
    }
    /// `appendfsync`: `always`, `everysec` or `no`.
    pub fn appendfsync(&self) -> String {
        self.raw("appendfsync")
    }
    /// `aof-load-truncated`.
    pub fn aof_load_truncated(&self) -> bool {
        self.flag("aof-load-truncated")
    }
    /// `aof-timestamp-enabled`: `#TS:` annotations in the AOF.
    pub fn aof_timestamp_enabled(&self) -> bool {
        self.flag("aof-timestamp-enabled")
    }
    /// `aof-use-rdb-preamble`.
    pub fn aof_use_rdb_preamble(&self) -> bool {
        self.flag("aof-use-rdb-preamble")
    }
    /// `auto-aof-rewrite-percentage` and `auto-aof-rewrite-min-size`.
    pub fn auto_aof_rewrite(&self) -> (u64, u64) {
        (
            self.num("auto-aof-rewrite-percentage").max(0) as u64,
            self.num("auto-aof-rewrite-min-size").max(0) as u64,
        )
    }
    /// `lazyfree-lazy-expire`: expired keys propagate as UNLINK, not DEL.
    pub fn lazyfree_lazy_expire(&self) -> bool {
        self.flag("lazyfree-lazy-expire")
    }
    /// `save` points as (seconds, changes).
    pub fn save_params(&self) -> Vec<(u64, u64)> {
        let v = self.raw("save");
        let n: Vec<u64> = v
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        n.chunks(2)
            .filter(|c| c.len() == 2)
            .map(|c| (c[0], c[1]))
            .collect()
    }
    /// How RDB files and RESTORE payloads are turned into values: the
    /// encoding thresholds (`*-max-listpack-*`, `set-max-intset-entries`),
    /// `databases`, `rdbchecksum`, and which access clock keys keep.
    pub fn rdb_load_options(&self) -> vireo_store::rdb::LoadOptions {
        let h = &self.hot;
        vireo_store::rdb::LoadOptions {
            hash: h.hash_limits(),
            zset: h.zset_limits(),
            set_max_intset_entries: threshold(&h.set_max_intset_entries),
            list_fill: h.list_max_listpack_size.load(Ordering::Relaxed),
            databases: self.databases(),
            verify_checksum: self.flag("rdbchecksum")
                && !h.skip_checksum_validation.load(Ordering::Relaxed),
            skip_payload_checksum: h.skip_checksum_validation.load(Ordering::Relaxed),
            lfu: self.maxmemory_policy().ends_with("-lfu"),
            // Files are always checked in full (RESTORE decides per call).
            salvage: false,
        }
    }
    /// How values are written to RDB files: `rdbcompression`, and idle
    /// times or access counters when `maxmemory-policy` is an LRU or LFU one.
    pub fn rdb_encode_options(&self) -> vireo_store::rdb::EncodeOptions {
        let policy = self.maxmemory_policy();
        vireo_store::rdb::EncodeOptions {
            compress: self.flag("rdbcompression"),
            lru_idle: policy.ends_with("-lru"),
            lfu_freq: policy.ends_with("-lfu"),
        }
    }
    /// `daemonize`.
    pub fn daemonize(&self) -> bool {
        self.flag("daemonize")
    }
    /// `pidfile`.
    pub fn pidfile(&self) -> String {
        self.raw("pidfile")
    }
}

/// strerror-style text of an I/O error, as Redis prints it.
pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "Permission denied".into(),
        _ => e.to_string(),
    }
}

/// Quotes a value for a config file line when it needs it.
fn quote(v: &str) -> String {
    if !v.is_empty() && !v.contains([' ', '"', '\'', '\\', '\t']) {
        return v.to_string();
    }
    let mut s = String::from("\"");
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\t' => s.push_str("\\t"),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// A comment line of a config file: Redis skips lines whose first
/// non-blank character is `#` before splitting them, so quotes in comments
/// are never parsed.
fn is_comment(line: &str) -> bool {
    line.trim_start().starts_with('#')
}

/// Parses a memory value with Redis's units (k, kb, m, mb, g, gb).
pub fn parse_memory(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let (num, mul) = [
        ("gb", 1u64 << 30),
        ("g", 1_000_000_000),
        ("mb", 1 << 20),
        ("m", 1_000_000),
        ("kb", 1 << 10),
        ("k", 1000),
        ("b", 1),
    ]
    .iter()
    .find_map(|(suffix, mul)| lower.strip_suffix(suffix).map(|n| (n.to_string(), *mul)))
    .unwrap_or((lower.clone(), 1));
    let n: u64 = vireo_resp::number::parse_u64(num.as_bytes())?;
    n.checked_mul(mul)
}

/// Validates `raw` for `p` and returns its canonical printed form; Err is
/// the reason shown after "CONFIG SET failed … - " or in a fatal file error.
fn normalise(p: &Param, raw: &str) -> Result<String, String> {
    match p.kind {
        Kind::Bool => match raw.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int(min, max) => {
            let v: i64 = match vireo_resp::number::parse_i64(raw.as_bytes()) {
                Some(v) => v,
                None => parse_memory(raw)
                    .map(|v| v as i64)
                    .ok_or("argument couldn't be parsed into an integer")?,
            };
            if v < min || v > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(v.to_string())
        }
        Kind::Mem(min, max) => {
            let v = parse_memory(raw).ok_or("argument must be a memory value")?;
            if v < min || v > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(v.to_string())
        }
        Kind::Enum(opts) => {
            let lower = raw.to_ascii_lowercase();
            if opts.contains(&lower.as_str()) {
                Ok(lower)
            } else {
                Err(format!(
                    "argument(s) must be one of the following: {}",
                    opts.join(", ")
                ))
            }
        }
        Kind::Str => Ok(raw.to_string()),
        Kind::Special => normalise_special(p.name, raw),
    }
}

fn normalise_special(name: &str, raw: &str) -> Result<String, String> {
    let words: Vec<&str> = raw.split_whitespace().collect();
    match name {
        "save" => {
            if !words.len().is_multiple_of(2) {
                return Err("Invalid save parameters".into());
            }
            for w in &words {
                if vireo_resp::number::parse_i64(w.as_bytes()).is_none_or(|v| v < 0) {
                    return Err("Invalid save parameters".into());
                }
            }
            Ok(words.join(" "))
        }
        "bind" => {
            // Empty: no TCP listener at all, as in Redis.
            if words.len() > 16 {
                return Err("Too many bind addresses specified.".into());
            }
            Ok(words.join(" "))
        }
        "replicaof" => match words[..] {
            [no, one] if no.eq_ignore_ascii_case("no") && one.eq_ignore_ascii_case("one") => {
                Ok(String::new())
            }
            [host, port] => match vireo_resp::number::parse_i64(port.as_bytes()) {
                Some(p) if (0..=65535).contains(&p) => Ok(format!("{host} {p}")),
                _ => Err("Invalid master port".into()),
            },
            _ => Err("wrong number of arguments".into()),
        },
        "dir" => {
            if raw.is_empty() {
                return Err("No such file or directory".into());
            }
            Ok(raw.to_string())
        }
        "unixsocketperm" => match u32::from_str_radix(raw, 8) {
            Ok(v) if v <= 0o777 => Ok(raw.to_string()),
            _ => Err("Invalid socket file permissions".into()),
        },
        "client-output-buffer-limit" => {
            if !words.len().is_multiple_of(4) || words.is_empty() {
                return Err("Wrong number of arguments in buffer limit configuration.".into());
            }
            let mut out = Vec::new();
            for c in words.chunks(4) {
                let class = match c[0].to_ascii_lowercase().as_str() {
                    "normal" => "normal",
                    "slave" | "replica" => "slave",
                    "pubsub" => "pubsub",
                    _ => {
                        return Err(
                            "Invalid client class specified in buffer limit configuration.".into(),
                        )
                    }
                };
                let hard = parse_memory(c[1]);
                let soft = parse_memory(c[2]);
                let secs = vireo_resp::number::parse_i64(c[3].as_bytes()).filter(|v| *v >= 0);
                match (hard, soft, secs) {
                    (Some(h), Some(s), Some(t)) => out.push(format!("{class} {h} {s} {t}")),
                    _ => return Err("Error in hard, soft or soft_seconds setting in buffer limit configuration.".into()),
                }
            }
            Ok(out.join(" "))
        }
        "notify-keyspace-events" => keyspace_events(raw),
        "oom-score-adj-values" => {
            let ok = words.len() == 3
                && words.iter().all(|w| {
                    vireo_resp::number::parse_i64(w.as_bytes())
                        .is_some_and(|v| (-2000..=2000).contains(&v))
                });
            if ok {
                Ok(words.join(" "))
            } else {
                Err("Invalid oom-score-adj-values, elements must be between -2000 and 2000.".into())
            }
        }
        "latency-tracking-info-percentiles" => {
            let mut shown = Vec::with_capacity(words.len());
            for w in &words {
                match w.parse::<f64>() {
                    Ok(v) if (0.0..=100.0).contains(&v) => shown.push(percentile_text(v)),
                    _ => return Err("latency-tracking-info-percentiles parameter should be between 0.0 and 100.0".into()),
                }
            }
            Ok(shown.join(" "))
        }
        "maxmemory-clients" => {
            const BAD: &str = "argument must be a memory or percent value";
            if let Some(bytes) = parse_memory(raw) {
                return match i64::try_from(bytes) {
                    Ok(v) => Ok(v.to_string()),
                    Err(_) => Err(format!(
                        "argument must be between -100 and {} inclusive",
                        i64::MAX
                    )),
                };
            }
            // A percentage of maxmemory: `N%` with N a plain non-negative
            // integer; 0% is the same as 0 (off).
            let pct = raw.strip_suffix('%').filter(|p| !p.is_empty()).ok_or(BAD)?;
            match vireo_resp::number::parse_i64(pct.as_bytes()) {
                Some(0) => Ok("0".into()),
                Some(v) if (1..=100).contains(&v) => Ok(format!("{v}%")),
                Some(v) if v > 100 => {
                    Err("percentage argument must be less or equal to 100".into())
                }
                _ => Err(BAD.into()),
            }
        }
        "shutdown-on-sigint" | "shutdown-on-sigterm" => {
            const OPTS: &[&str] = &["default", "save", "nosave", "now", "force"];
            let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
            if lower.is_empty() || lower.iter().any(|w| !OPTS.contains(&w.as_str())) {
                return Err(format!(
                    "argument(s) must be one of the following: {}",
                    OPTS.join(", ")
                ));
            }
            if lower.iter().any(|w| w == "save") && lower.iter().any(|w| w == "nosave") {
                return Err("shutdown options SAVE and NOSAVE can't be used simultaneously".into());
            }
            // Redis keeps a set of flags and prints them in its table's
            // order; none set is `default`.
            let set: Vec<&str> = OPTS[1..]
                .iter()
                .copied()
                .filter(|o| lower.iter().any(|w| w == o))
                .collect();
            Ok(if set.is_empty() {
                "default".into()
            } else {
                set.join(" ")
            })
        }
        _ => Ok(raw.to_string()),
    }
}

/// A `notify-keyspace-events` class string in a form that keeps every
/// class (CONFIG GET prints Redis's own form, which may drop `n`).
fn keyspace_events(raw: &str) -> Result<String, String> {
    crate::exec::notify::parse(raw)
        .map(crate::exec::notify::letters)
        .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into())
}

/// CONFIG SET client-output-buffer-limit changes only the classes named.
fn merge_output_limits(current: &str, update: &str) -> String {
    let mut classes: Vec<Vec<String>> = current
        .split(' ')
        .collect::<Vec<_>>()
        .chunks(4)
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    for u in update.split(' ').collect::<Vec<_>>().chunks(4) {
        if let Some(c) = classes.iter_mut().find(|c| c[0] == u[0]) {
            *c = u.iter().map(|s| s.to_string()).collect();
        }
    }
    classes
        .iter()
        .map(|c| c.join(" "))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Splits a config line into words like Redis's `sdssplitargs`: spaces
/// separate, "double quotes" take \n \r \t \b \a \\ \" \xHH escapes,
/// 'single quotes' take only \'. None on unbalanced quotes.
pub fn split_args(line: &str) -> Option<Vec<String>> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            return Some(out);
        }
        let mut cur: Vec<u8> = Vec::new();
        let (mut in_dq, mut in_sq) = (false, false);
        loop {
            if in_dq {
                let c = *b.get(i)?;
                if c == b'\\'
                    && i + 3 < b.len()
                    && b[i + 1] == b'x'
                    && b[i + 2].is_ascii_hexdigit()
                    && b[i + 3].is_ascii_hexdigit()
                {
                    let hex = std::str::from_utf8(&b[i + 2..i + 4]).ok()?;
                    cur.push(u8::from_str_radix(hex, 16).ok()?);
                    i += 3;
                } else if c == b'\\' && i + 1 < b.len() {
                    i += 1;
                    cur.push(match b[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < b.len() && !b[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                let c = *b.get(i)?;
                if c == b'\\' && i + 1 < b.len() && b[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < b.len() && !b[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                match b.get(i) {
                    None => break,
                    Some(c) if c.is_ascii_whitespace() => break,
                    Some(b'"') => in_dq = true,
                    Some(b'\'') => in_sq = true,
                    Some(&c) => cur.push(c),
                }
            }
            i += 1;
        }
        out.push(String::from_utf8_lossy(&cur).into_owned());
    }
}

/// A percentile as Redis shows it in CONFIG GET: `%f` with trailing zeros
/// and a bare `.` removed (`50.0` → `50`, `99.9` → `99.9`).
fn percentile_text(v: f64) -> String {
    let text = format!("{v:.6}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn percentiles_show_as_redis_prints_them() {
        assert_eq!(percentile_text(0.0), "0");
        assert_eq!(percentile_text(50.0), "50");
        assert_eq!(percentile_text(99.9), "99.9");
        assert_eq!(percentile_text(99.9999), "99.9999");
        assert_eq!(percentile_text(10.0), "10");
    }

    #[test]
    fn defaults_and_cli_options() {
        let c =
            Config::from_args(&args(&["--port", "7000", "--save", "--maxmemory", "1mb"])).unwrap();
        assert_eq!(c.port(), 7000);
        assert_eq!(c.get_one("save").unwrap(), "");
        assert_eq!(c.get_one("maxmemory").unwrap(), "1048576");
        assert_eq!(c.hot.maxmemory.load(Ordering::Relaxed), 1048576);
        assert_eq!(c.databases(), 16);
    }

    #[test]
    fn file_parsing_and_fatal_errors() {
        let dir = std::env::temp_dir().join(format!("vireo-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("a.conf");
        std::fs::write(
            &f,
            "# comment\n  # option \"include\" won't be rewritten\nport 7001\nrequirepass \"se cret\"\nsave 10 1\nsave 20 2\n",
        )
        .unwrap();
        let c = Config::from_args(&args(&[f.to_str().unwrap(), "--timeout", "5"])).unwrap();
        assert_eq!(c.port(), 7001);
        assert_eq!(c.requirepass().unwrap(), b"se cret");
        assert_eq!(c.save_params(), vec![(10, 1), (20, 2)]);
        assert_eq!(c.hot.timeout.load(Ordering::Relaxed), 5);
        std::fs::write(&f, "port 1\nport abc\n").unwrap();
        let e = Config::from_args(&args(&[f.to_str().unwrap()]))
            .err()
            .unwrap();
        assert!(
            e.contains("at line 2") && e.contains(">>> 'port abc'") && e.contains("integer"),
            "{e}"
        );
        std::fs::write(&f, "nosuchdirective 1\n").unwrap();
        let e = Config::from_args(&args(&[f.to_str().unwrap()]))
            .err()
            .unwrap();
        assert!(
            e.contains("Bad directive or wrong number of arguments"),
            "{e}"
        );
        let e = Config::from_args(&args(&["/nonexistent/x.conf"]))
            .err()
            .unwrap();
        assert_eq!(
            e,
            "Fatal error, can't open config file '/nonexistent/x.conf': No such file or directory"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn config_get_globs_and_aliases() {
        let c = Config::default();
        let r = c.get(&[b"maxmemory*"]);
        assert!(r.iter().any(|(n, _)| n == "maxmemory-policy"));
        assert!(r.iter().any(|(n, v)| n == "maxmemory" && v == "0"));
        let r = c.get(&[b"hash-max-ziplist-entries"]);
        assert_eq!(
            r,
            vec![("hash-max-ziplist-entries".to_string(), "512".to_string())]
        );
        assert!(c.get(&[b"nosuch"]).is_empty());
        let r = c.get(&[b"PORT", b"port"]);
        assert_eq!(r.len(), 1);
        // Hidden from patterns, there for their exact names.
        for hidden in HIDDEN_PARAMS {
            assert!(c.get(&[b"*"]).iter().all(|(n, _)| n != hidden));
            assert_eq!(c.get(&[hidden.as_bytes()]).len(), 1, "{hidden}");
        }
    }

    #[test]
    fn config_set_validates_all_before_applying() {
        let c = Config::default();
        let e = c
            .set(&[(b"maxmemory", b"10mb"), (b"maxmemory-policy", b"bogus")])
            .unwrap_err();
        assert!(e.starts_with("ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of"));
        assert_eq!(c.get_one("maxmemory").unwrap(), "0");
        c.set(&[(b"maxmemory", b"10mb"), (b"hz", b"20")]).unwrap();
        assert_eq!(c.get_one("maxmemory").unwrap(), "10485760");
        assert_eq!(c.hot.hz.load(Ordering::Relaxed), 20);
        assert_eq!(
            c.set(&[(b"daemonize", b"yes")]).unwrap_err(),
            "ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config"
        );
        assert_eq!(
            c.set(&[(b"foo", b"1")]).unwrap_err(),
            "ERR Unknown option or number of arguments for CONFIG SET - 'foo'"
        );
        assert!(c
            .set(&[(b"hz", b"1"), (b"HZ", b"2")])
            .unwrap_err()
            .ends_with("duplicate parameter"));
        assert!(c
            .set(&[(b"maxmemory", b"lots")])
            .unwrap_err()
            .ends_with("argument must be a memory value"));
        assert!(c.set(&[(b"save", b"1 2 3")]).is_err());
        c.set(&[(b"client-output-buffer-limit", b"normal 1mb 2mb 3")])
            .unwrap();
        assert_eq!(
            c.get_one("client-output-buffer-limit").unwrap(),
            "normal 1048576 2097152 3 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        assert_eq!(
            c.hot.client_output_buffer_limits[0]
                .hard
                .load(Ordering::Relaxed),
            1048576
        );
        c.set(&[(b"notify-keyspace-events", b"KEA")]).unwrap();
        assert_eq!(c.get_one("notify-keyspace-events").unwrap(), "AKE");
    }

    #[test]
    fn rewrite_replaces_user_lines_with_the_users() {
        let dir = std::env::temp_dir().join(format!("vireo-rwu-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("u.conf");
        std::fs::write(&f, "port 7003\nuser a on\n# note\nuser b off\n").unwrap();
        let c = Config::from_args(&args(&[f.to_str().unwrap()])).unwrap();
        assert_eq!(c.user_lines.len(), 2);
        let users = [
            "user a on nopass ~* &* +@all".to_string(),
            "user c off".to_string(),
        ];
        c.rewrite_with_users(&users, false).unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        assert_eq!(
            text,
            "port 7003\nuser a on nopass ~* &* +@all\nuser c off\n# note\n"
        );
        c.rewrite_with_users(&[], false).unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        assert_eq!(text, "port 7003\n# note\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rename_command_lines_are_checked_in_order() {
        let renames = |pairs: &[(&str, &str)]| {
            crate::cmd::rename_table(
                &pairs
                    .iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect::<Vec<_>>(),
            )
        };
        let t = renames(&[("SET", "myset"), ("myset", "other"), ("get", "")]).unwrap();
        assert!(t[b"set".as_slice()].is_none() && t[b"get".as_slice()].is_none());
        assert_eq!(t[b"other".as_slice()].unwrap().spec.name, "set");
        assert_eq!(
            renames(&[("set", "x"), ("set", "y")]).err().unwrap(),
            "No such command in rename-command"
        );
        assert_eq!(
            renames(&[("get", "set")]).err().unwrap(),
            "Target command name already exists"
        );
    }

    #[test]
    fn rewrite_round_trip() {
        let dir = std::env::temp_dir().join(format!("vireo-rw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("r.conf");
        std::fs::write(&f, "# keep me\nport 7002\nmaxclients 50\n").unwrap();
        let c = Config::from_args(&args(&[f.to_str().unwrap()])).unwrap();
        c.set(&[(b"maxclients", b"10000"), (b"timeout", b"7")])
            .unwrap();
        c.rewrite_with_users(&[], false).unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            text.contains("# keep me") && text.contains("port 7002") && text.contains("timeout 7")
        );
        assert!(!text.contains("maxclients"), "{text}");
        let again = Config::from_args(&args(&[f.to_str().unwrap()])).unwrap();
        assert_eq!(again.hot.timeout.load(Ordering::Relaxed), 7);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            Config::default()
                .rewrite_with_users(&[], false)
                .unwrap_err(),
            "ERR The server is running without a config file"
        );
    }

    /// The master REPLICAOF follows is rewritten as Redis's two-argument
    /// line, read back as the same master, and dropped once none is.
    #[test]
    fn rewrite_writes_the_master_followed() {
        let dir = std::env::temp_dir().join(format!("vireo-rw-repl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("r.conf");
        std::fs::write(&f, "port 7003\n").unwrap();
        let c = Config::from_args(&args(&[f.to_str().unwrap()])).unwrap();
        c.record_replicaof("127.0.0.1 6380".into());
        c.rewrite_with_users(&[], false).unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(text.contains("\nreplicaof 127.0.0.1 6380\n"), "{text}");
        let again = Config::from_args(&args(&[f.to_str().unwrap()])).unwrap();
        assert_eq!(
            again.get_one("replicaof").as_deref(),
            Some("127.0.0.1 6380")
        );
        c.record_replicaof(String::new());
        c.rewrite_with_users(&[], false).unwrap();
        assert!(!std::fs::read_to_string(&f).unwrap().contains("replicaof"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn split_args_quoting() {
        assert_eq!(
            split_args("a \"b c\" 'd\\'e'").unwrap(),
            vec!["a", "b c", "d'e"]
        );
        assert_eq!(split_args("x \"\\x41\\n\"").unwrap(), vec!["x", "A\n"]);
        assert!(split_args("\"unterminated").is_none());
        assert!(split_args("\"a\"b").is_none());
        assert_eq!(split_args("   ").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("1KB"), Some(1024));
        assert_eq!(parse_memory("2gb"), Some(2 << 30));
        assert_eq!(parse_memory("x"), None);
        assert_eq!(parse_memory("-1"), None);
    }
}
