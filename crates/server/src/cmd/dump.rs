//! DUMP, RESTORE (and RESTORE-ASKING) and MIGRATE (Redis's `cluster.c`
//! serialisation commands): a value moved between servers as an
//! RDB-encoded payload.
//!
//! The payload is the value's RDB type byte and encoding, the RDB version
//! (two little-endian bytes) and a CRC64 of all that (eight bytes), so Vireo
//! and Redis 7.0 accept each other's payloads. RESTORE validates payloads
//! fully, whatever `sanitize-dump-payload` says: a damaged one is refused
//! with an error instead of being stored. The one difference the setting
//! makes is where Redis itself would skip the deep check (`no`, or
//! `clients` for the master's and the AOF's RESTOREs) and store a blob
//! whose frame looks sound: Redis would crash later on such a value, and
//! Vireo instead keeps what is sound in it (the entries of a listpack up to
//! the damage, a stream's sound nodes; `LoadOptions::salvage`).

use crate::exec::notify::class as ev;
use std::time::Duration;

use vireo_resp::Args;
use vireo_store::rdb::{dump_payload, restore_payload, PayloadError};
use vireo_store::Entry;

use super::{errors, flags::*, is, spec, text, CommandSpec, Ctx, KeySpec, KEY1};
use crate::net::outbound;

/// The DUMP/RESTORE family's table entries.
pub const COMMANDS: &[CommandSpec] = &[
    spec("dump", 2, READONLY, KEY1, dump),
    spec("restore", -4, WRITE | DENYOOM, KEY1, restore),
    // RESTORE as a cluster node sends it while migrating (Redis's table
    // has it without cluster support too, and it runs as RESTORE).
    spec(
        "restore-asking",
        -4,
        WRITE | DENYOOM | ASKING,
        KEY1,
        restore,
    ),
    spec("migrate", -6, WRITE, MIGRATE_KEYS, migrate),
];

/// MIGRATE's reply when the target cannot be reached (or the TLS handshake
/// with it fails).
const CONNECT_FAILED: &str = "IOERR error or timeout connecting to the client";

/// MIGRATE's keys: argument 3, or everything after KEYS when it is empty.
const MIGRATE_KEYS: KeySpec = KeySpec::Custom {
    first: 3,
    last: 3,
    step: 1,
    find: migrate_keys,
};

/// The arguments MIGRATE names as keys (Redis's `migrateGetKeys`).
fn migrate_keys(args: Args<'_>) -> Vec<usize> {
    // AUTH's password and AUTH2's user and password may read "KEYS".
    let mut keys_at = None;
    let mut i = 6;
    while i < args.len() {
        let a = args.get(i);
        if is(a, "auth") {
            i += 1;
        } else if is(a, "auth2") {
            i += 2;
        } else if is(a, "keys") {
            keys_at = Some(i);
            break;
        }
        i += 1;
    }
    match keys_at {
        Some(i) if args.get(3).is_empty() => (i + 1..args.len()).collect(),
        _ => vec![3],
    }
}

/// MIGRATE's parsed options.
struct MigrateOpts<'a> {
    copy: bool,
    replace: bool,
    auth: Option<(Option<&'a [u8]>, &'a [u8])>,
    /// Index of the first key and how many.
    keys: (usize, usize),
}

/// Parses MIGRATE's options from argument 6, replying the error.
fn migrate_opts<'a>(ctx: &mut Ctx<'_>, args: Args<'a>) -> Option<MigrateOpts<'a>> {
    let mut o = MigrateOpts {
        copy: false,
        replace: false,
        auth: None,
        keys: (3, 1),
    };
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let a = args.get(j);
        if is(a, "copy") {
            o.copy = true;
        } else if is(a, "replace") {
            o.replace = true;
        } else if is(a, "auth") && more >= 1 {
            o.auth = Some((None, args.get(j + 1)));
            j += 1;
        } else if is(a, "auth2") && more >= 2 {
            o.auth = Some((Some(args.get(j + 1)), args.get(j + 2)));
            j += 2;
        } else if is(a, "keys") {
            if !args.get(3).is_empty() {
                ctx.out.error(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                );
                return None;
            }
            o.keys = (j + 1, args.len() - j - 1);
            break;
        } else {
            ctx.out.error(errors::SYNTAX);
            return None;
        }
        j += 1;
    }
    Some(o)
}

/// Appends one command in RESP to `buf`.
fn write_command(buf: &mut Vec<u8>, parts: &[&[u8]]) {
    buf.extend_from_slice(format!("*{}\r\n", parts.len()).as_bytes());
    for p in parts {
        buf.extend_from_slice(format!("${}\r\n", p.len()).as_bytes());
        buf.extend_from_slice(p);
        buf.extend_from_slice(b"\r\n");
    }
}

/// How a MIGRATE exchange with the target failed.
enum Exchange {
    /// The socket failed or timed out while writing (true) or reading.
    Io { writing: bool, timed_out: bool },
    /// The target answered with an error.
    Target(String),
}

/// A socket error of the exchange, telling a timeout from a broken link.
fn io_failure(e: &std::io::Error, writing: bool) -> Exchange {
    let timed_out = matches!(
        e.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    );
    Exchange::Io { writing, timed_out }
}

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH
/// password] [AUTH2 username password] [KEYS key ...]: moves (or with
/// COPY copies) keys to another server with RESTORE, over a cached
/// connection; the moved keys are deleted here and propagated as one DEL.
/// Like Redis, the command waits for the target (its shards stay locked
/// meanwhile), at most `timeout` ms per network step.
fn migrate(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(o) = migrate_opts(ctx, args) else {
        return;
    };
    let Some(timeout) = ctx.int_arg(args.get(5)) else {
        return;
    };
    let Some(dbid) = ctx.int_arg(args.get(4)) else {
        return;
    };
    let timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });
    let opts = vireo_store::rdb::EncodeOptions {
        compress: ctx.server.config.rdb_encode_options().compress,
        ..Default::default()
    };
    let now = ctx.keys.now();
    // Each existing key with its RESTORE TTL and payload.
    let mut found: Vec<(&[u8], u64, Vec<u8>)> = Vec::new();
    for i in o.keys.0..o.keys.0 + o.keys.1 {
        let key = args.get(i);
        if let Some(e) = ctx.keys.get_read(ctx.db, key) {
            let ttl = e.expire_at().map_or(0, |at| at.saturating_sub(now).max(1));
            found.push((key, ttl, dump_payload(e.value(), &opts)));
        }
    }
    if found.is_empty() {
        return ctx.out.simple("NOKEY");
    }
    let (host, port) = (text(args.get(1)), text(args.get(2)));
    // With tls-cluster, MIGRATE speaks TLS (Redis 7.0's migrateGetSocket).
    let tls = if ctx.server.config.flag("tls-cluster") {
        match ctx.server.tls.client_config() {
            Some(c) => Some(c),
            None => return ctx.out.error(CONNECT_FAILED),
        }
    } else {
        None
    };
    let mut retried = false;
    loop {
        let mut conn = match outbound::take(&host, &port, timeout, tls.clone()) {
            Ok(c) => c,
            Err(_) => return ctx.out.error(CONNECT_FAILED),
        };
        match migrate_exchange(&mut conn, &o, dbid, &found) {
            Ok(acked) => {
                conn.selected_db = Some(dbid);
                outbound::put_back(&host, &port, conn);
                delete_acked(ctx, &o, &found, acked);
                return ctx.out.ok();
            }
            Err((acked, Exchange::Target(msg))) => {
                conn.selected_db = None;
                outbound::put_back(&host, &port, conn);
                delete_acked(ctx, &o, &found, acked);
                return ctx
                    .out
                    .error(&format!("ERR Target instance replied with error: {msg}"));
            }
            Err((acked, Exchange::Io { writing, timed_out })) => {
                // A broken cached connection is retried once on a new one,
                // when nothing was acknowledged yet; a target too slow to
                // answer is not (Redis's ETIMEDOUT rule: a retry would
                // double the wait the caller asked for).
                if acked.is_empty() && !retried && !timed_out {
                    retried = true;
                    continue;
                }
                delete_acked(ctx, &o, &found, acked);
                let what = if writing { "writing" } else { "reading" };
                return ctx
                    .out
                    .error(&format!("IOERR error or timeout {what} to target instance"));
            }
        }
    }
}

/// Sends AUTH, SELECT and the RESTOREs, and reads their replies. Ok is the
/// keys the target acknowledged; Err carries those too.
#[allow(clippy::type_complexity)]
fn migrate_exchange(
    conn: &mut outbound::Outbound,
    o: &MigrateOpts<'_>,
    dbid: i64,
    found: &[(&[u8], u64, Vec<u8>)],
) -> Result<Vec<usize>, (Vec<usize>, Exchange)> {
    let mut buf = Vec::new();
    if let Some((user, pass)) = o.auth {
        match user {
            Some(u) => write_command(&mut buf, &[b"AUTH", u, pass]),
            None => write_command(&mut buf, &[b"AUTH", pass]),
        }
    }
    let select = conn.selected_db != Some(dbid);
    let db = dbid.to_string();
    if select {
        write_command(&mut buf, &[b"SELECT", db.as_bytes()]);
    }
    for (key, ttl, payload) in found {
        let ttl = ttl.to_string();
        let mut parts: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), payload];
        if o.replace {
            parts.push(b"REPLACE");
        }
        write_command(&mut buf, &parts);
    }
    if let Err(e) = conn.write_all(&buf) {
        return Err((Vec::new(), io_failure(&e, true)));
    }
    let read = |conn: &mut outbound::Outbound| conn.read_line(1024);
    // An AUTH or SELECT error fails every key; otherwise each RESTORE
    // reply decides for its own key (Redis deletes every acknowledged key
    // even when others were refused).
    let mut first_error = None;
    for _ in 0..usize::from(o.auth.is_some()) + usize::from(select) {
        match read(conn) {
            Ok(l) if l.starts_with('-') => {
                first_error.get_or_insert(l[1..].to_string());
            }
            Ok(_) => {}
            Err(e) => return Err((Vec::new(), io_failure(&e, false))),
        }
    }
    let setup_failed = first_error.is_some();
    let mut acked = Vec::new();
    for i in 0..found.len() {
        match read(conn) {
            Ok(l) if l.starts_with('-') => {
                first_error.get_or_insert(l[1..].to_string());
            }
            Ok(_) if !setup_failed => acked.push(i),
            Ok(_) => {}
            Err(e) => return Err((acked, io_failure(&e, false))),
        }
    }
    match first_error {
        Some(msg) => Err((acked, Exchange::Target(msg))),
        None => Ok(acked),
    }
}

/// Deletes the keys the target acknowledged (unless COPY) and propagates
/// them as one DEL (Redis rewrites MIGRATE so); nothing else propagates.
fn delete_acked(
    ctx: &mut Ctx<'_>,
    o: &MigrateOpts<'_>,
    found: &[(&[u8], u64, Vec<u8>)],
    acked: Vec<usize>,
) {
    if !o.copy && !acked.is_empty() {
        let mut del: Vec<&[u8]> = vec![b"DEL"];
        for i in acked {
            let key = found[i].0;
            ctx.keys.delete(ctx.db, key);
            ctx.modified(key);
            ctx.notify(ev::GENERIC, "del", key);
            del.push(key);
        }
        ctx.propagate(&del);
    } else {
        // Nothing changed here: nothing to propagate.
        ctx.prevent_propagation();
    }
}

/// DUMP key: the key's value serialised as a RESTORE payload (without its
/// TTL), or null if the key does not exist.
fn dump(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let opts = vireo_store::rdb::EncodeOptions {
        compress: ctx.server.config.rdb_encode_options().compress,
        ..Default::default()
    };
    match ctx.keys.get_read(ctx.db, args.get(1)) {
        Some(e) => {
            let payload = dump_payload(e.value(), &opts);
            ctx.out.bulk(&payload);
        }
        None => ctx.out.null(),
    }
}

/// RESTORE's options after the payload.
#[derive(Default)]
struct RestoreOpts {
    replace: bool,
    absttl: bool,
    idle: Option<u64>,
    freq: Option<u8>,
}

/// Parses `[REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]` from argument 4 on,
/// replying the error on bad input. IDLETIME and FREQ exclude each other.
fn restore_opts(ctx: &mut Ctx<'_>, args: Args<'_>) -> Option<RestoreOpts> {
    let mut o = RestoreOpts::default();
    let mut i = 4;
    while i < args.len() {
        let arg = args.get(i);
        let has_value = i + 1 < args.len();
        if is(arg, "replace") {
            o.replace = true;
        } else if is(arg, "absttl") {
            o.absttl = true;
        } else if is(arg, "idletime") && has_value && o.freq.is_none() {
            let v = ctx.int_arg(args.get(i + 1))?;
            let Ok(v) = u64::try_from(v) else {
                ctx.out.error("ERR Invalid IDLETIME value, must be >= 0");
                return None;
            };
            o.idle = Some(v);
            i += 1;
        } else if is(arg, "freq") && has_value && o.idle.is_none() {
            let v = ctx.int_arg(args.get(i + 1))?;
            let Ok(v) = u8::try_from(v) else {
                ctx.out
                    .error("ERR Invalid FREQ value, must be >= 0 and <= 255");
                return None;
            };
            o.freq = Some(v);
            i += 1;
        } else {
            ctx.out.error(errors::SYNTAX);
            return None;
        }
        i += 1;
    }
    Some(o)
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]:
/// creates `key` from a DUMP payload. `ttl` is in milliseconds, relative
/// unless ABSTTL, 0 for none; a TTL already in the past only deletes the
/// old key (with REPLACE). IDLETIME applies under a non-LFU
/// `maxmemory-policy`, FREQ under an LFU one, as in Redis.
/// Whether Redis would check this RESTORE's payload only shallowly:
/// `sanitize-dump-payload no`, or `clients` for a command that does not
/// come from a client (the master link, the AOF).
fn shallow_sanitization(ctx: &Ctx<'_>) -> bool {
    match ctx
        .server
        .config
        .get_one("sanitize-dump-payload")
        .as_deref()
    {
        Some("no") => true,
        Some("clients") => ctx.session.from_master || ctx.session.replaying,
        _ => false,
    }
}

fn restore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(o) = restore_opts(ctx, args) else {
        return;
    };
    let key = args.get(1);
    if !o.replace && ctx.keys.contains(ctx.db, key) {
        return ctx.out.error("BUSYKEY Target key name already exists.");
    }
    let Some(ttl) = ctx.int_arg(args.get(2)) else {
        return;
    };
    if ttl < 0 {
        return ctx.out.error("ERR Invalid TTL value, must be >= 0");
    }
    let opts = vireo_store::rdb::LoadOptions {
        salvage: shallow_sanitization(ctx),
        ..ctx.server.config.rdb_load_options()
    };
    let value = match restore_payload(args.get(3), &opts) {
        Ok(v) => v,
        Err(PayloadError::VersionOrChecksum) => {
            return ctx
                .out
                .error("ERR DUMP payload version or checksum are wrong")
        }
        Err(PayloadError::BadData(e)) => {
            // Redis logs why at verbose level in a RESTORE (rdbReportError).
            tracing::debug!("Internal error in RDB reading offset 0, function at rdb.c:0 -> {e}");
            return ctx.out.error("ERR Bad data format");
        }
    };
    let deleted = o.replace && ctx.keys.delete(ctx.db, key);
    let now = ctx.keys.now();
    let ttl = ttl as u64;
    let expire_at = match (ttl, o.absttl) {
        (0, _) => None,
        (t, true) => Some(t),
        (t, false) => Some(t.saturating_add(now)),
    };
    if expire_at.is_some_and(|at| at <= now) {
        if deleted {
            ctx.modified(key);
            ctx.notify(ev::GENERIC, "del", key);
            ctx.propagate_del(key, false);
        }
        return ctx.out.ok();
    }
    let lfu = ctx.server.config.maxmemory_policy().ends_with("-lfu");
    let mut entry = Entry::new(value).with_expire(expire_at);
    match (lfu, o.freq, o.idle) {
        (true, Some(f), _) => entry = entry.with_freq(f, now),
        (false, _, Some(s)) => entry = entry.with_idle(s, now),
        _ => {}
    }
    ctx.keys.set_entry(ctx.db, key, entry);
    ctx.modified(key);
    if let (Some(at), false) = (expire_at, o.absttl) {
        // Propagated with the absolute time, as Redis rewrites it.
        let mut rewritten: Vec<&[u8]> = args.iter().collect();
        let at = at.to_string();
        rewritten[2] = at.as_bytes();
        rewritten.push(b"ABSTTL");
        ctx.propagate(&rewritten);
    }
    ctx.notify(ev::GENERIC, "restore", key);
    ctx.signal_ready(key);
    ctx.out.ok();
}
