//! DEBUG (Redis's debug.c): the subcommands Redis's own test suite and
//! tools drive a server with — dataset digests, reloading the dump or the
//! AOF in place, DEBUG OBJECT, populating keys, test replies of every RESP3
//! type, and switches for active expiry, checksum validation and cron.
//!
//! Gated by `enable-debug-command` (`no`, `yes`, or `local` for loopback
//! and Unix-socket clients) as Redis 7.0 gates it. DEBUG locks no shards
//! itself; each subcommand takes what it needs, because RELOAD and LOADAOF
//! must not hold shard locks while a snapshot or the AOF writer works.
//!
//! Subcommands that inspect Redis's own C structures answer from Vireo's
//! closest equivalent: HTSTATS describes the key tables, MALLCTL answers as
//! a Redis built without jemalloc does, LISTPACK/QUICKLIST print nothing.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::Duration;

use sha1_smol::Sha1;
use vireo_resp::number::{parse_f64, parse_i64, write_double};
use vireo_resp::Args;
use vireo_store::value::ValueRef;
use vireo_store::Entry;

use super::shared::{protected_allowed, subcommand_syntax_error};
use super::{flags::*, is, spec, text, CommandSpec, Ctx, KeySpec};
use crate::persist::{aof, rdb};

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[spec(
    "debug",
    -2,
    ADMIN | NOSCRIPT | LOADING | STALE | PROTECTED,
    KeySpec::None,
    debug,
)];

/// Redis's refusal when `enable-debug-command` does not allow this client.
const NOT_ALLOWED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

/// DEBUG <subcommand> [args...].
fn debug(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if !allowed(ctx) {
        return ctx.out.error(NOT_ALLOWED);
    }
    let sub = text(args.get(1)).to_ascii_lowercase();
    let n = args.len();
    match (sub.as_str(), n) {
        ("help", 2) => help(ctx),
        ("digest", 2) => digest(ctx),
        ("digest-value", _) => digest_value(ctx, args),
        ("object", 3) => object(ctx, args),
        ("populate", 3..=5) => populate(ctx, args),
        ("reload", _) => reload(ctx, args),
        ("loadaof", 2) => loadaof(ctx),
        ("protocol", 3) => protocol(ctx, args.get(2)),
        ("sleep", 3) => sleep(ctx, args.get(2)),
        ("replicate", 3..) => {
            let cmd: Vec<&[u8]> = args.iter().skip(2).collect();
            crate::repl::feed_command(ctx.server, &cmd);
            ctx.out.ok();
        }
        ("log", 3) => {
            tracing::warn!("DEBUG LOG: {}", String::from_utf8_lossy(args.get(2)));
            ctx.out.ok();
        }
        ("error", 3) => {
            let msg: String = text(args.get(2))
                .chars()
                .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
                .collect();
            ctx.out.error(&msg);
        }
        ("set-active-expire", 3) => {
            let on = atoi(args.get(2)) != 0;
            let hot = &ctx.server.config.hot;
            hot.active_expire_enabled.store(on, Ordering::Relaxed);
            ctx.out.ok();
        }
        ("set-skip-checksum-validation", 3) => {
            let skip = atoi(args.get(2)) != 0;
            let hot = &ctx.server.config.hot;
            hot.skip_checksum_validation.store(skip, Ordering::Relaxed);
            ctx.out.ok();
        }
        ("quicklist-packed-threshold", 3) => packed_threshold(ctx, args.get(2)),
        ("pause-cron", 3) => {
            let paused = atoi(args.get(2)) != 0;
            ctx.server.cron_paused.store(paused, Ordering::Relaxed);
            ctx.out.ok();
        }
        // A switch of Redis internals Vireo does not have (its AOF flush
        // cannot be slowed): accepted, as a server without the feature in
        // question would be no different.
        ("aof-flush-sleep", 3) => ctx.out.ok(),
        ("set-disable-deny-scripts", 3) => {
            let disabled = atoi(args.get(2)) != 0;
            ctx.server
                .scripts
                .deny_disabled
                .store(disabled, Ordering::Relaxed);
            ctx.out.ok();
        }
        ("replybuffer", 4) => replybuffer(ctx, args),
        ("change-repl-id", 2) => {
            tracing::warn!("Changing replication IDs after receiving DEBUG change-repl-id");
            ctx.server.repl.change_replid();
            ctx.out.ok();
        }
        ("stringmatch-test", 2) => {
            stringmatch_test();
            ctx.out
                .simple("Apparently Redis did not crash: test passed");
        }
        ("structsize", 2) => structsize(ctx),
        ("htstats", 3) => htstats(ctx, args.get(2)),
        ("htstats-key", 3) => htstats_key(ctx, args.get(2)),
        ("config-rewrite-force-all", 2) => config_rewrite_force_all(ctx),
        ("client-eviction", 2) => client_eviction(ctx),
        ("listpack" | "quicklist" | "sdslen", 3..=4) => low_level(ctx, &sub, args.get(2)),
        ("segfault" | "panic" | "assert" | "oom", 2) => crash(ctx, &sub),
        ("leak", 3) | ("mallctl" | "mallctl-str", _) => {
            // A Redis built with libc malloc has no MALLCTL; LEAK is only
            // meaningful for its leak checker.
            if sub == "leak" {
                ctx.out.ok()
            } else {
                subcommand_syntax_error(ctx, args)
            }
        }
        _ => subcommand_syntax_error(ctx, args),
    }
}

/// Whether `enable-debug-command` lets this client run DEBUG.
fn allowed(ctx: &Ctx<'_>) -> bool {
    protected_allowed(ctx, &ctx.server.config.enable_debug_command())
}

/// C's `atoi`: leading digits with an optional sign, 0 when there are none.
fn atoi(arg: &[u8]) -> i64 {
    let s = text(arg);
    let s = s.trim_start();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let end = digits
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    let v = digits[..end].parse::<i64>().unwrap_or(0);
    if neg {
        -v
    } else {
        v
    }
}

/// DEBUG HELP.
fn help(ctx: &mut Ctx<'_>) {
    const LINES: &[&str] = &[
        "AOF-FLUSH-SLEEP <microsec>",
        "    Server will sleep before flushing the AOF, this is used for testing.",
        "ASSERT",
        "    Crash by assertion failed.",
        "CHANGE-REPL-ID",
        "    Change the replication IDs of the instance.",
        "    Dangerous: should be used only for testing the replication subsystem.",
        "CONFIG-REWRITE-FORCE-ALL",
        "    Like CONFIG REWRITE but writes all configuration options, including",
        "    keywords not listed in original configuration file or default values.",
        "DIGEST",
        "    Output a hex signature representing the current DB content.",
        "DIGEST-VALUE <key> [<key> ...]",
        "    Output a hex signature of the values of all the specified keys.",
        "ERROR <string>",
        "    Return a Redis protocol error with <string> as message. Useful for clients",
        "    unit tests to simulate Redis errors.",
        "LOG <message>",
        "    Write <message> to the server log.",
        "HTSTATS <dbid>",
        "    Return hash table statistics of the specified Redis database.",
        "HTSTATS-KEY <key>",
        "    Like HTSTATS but for the hash table stored at <key>'s value.",
        "LOADAOF",
        "    Flush the AOF buffers on disk and reload the AOF in memory.",
        "OBJECT <key>",
        "    Show low level info about `key` and associated value.",
        "OOM",
        "    Crash the server simulating an out-of-memory error.",
        "PANIC",
        "    Crash the server simulating a panic.",
        "POPULATE <count> [<prefix>] [<size>]",
        "    Create <count> string keys named key:<num>. If <prefix> is specified then",
        "    it is used instead of the 'key' prefix.",
        "PROTOCOL <type>",
        "    Reply with a test value of the specified type. <type> can be: string,",
        "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
        "    true, false.",
        "RELOAD [option ...]",
        "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
        "    * MERGE: conflicting keys will be loaded from RDB.",
        "    * NOFLUSH: the existing database will not be removed before load.",
        "    * NOSAVE: the database will be loaded from an existing RDB file.",
        "REPLICATE <string>",
        "    Replicates the provided string to replicas, allowing data divergence.",
        "SEGFAULT",
        "    Crash the server with sigsegv.",
        "SET-ACTIVE-EXPIRE <0|1>",
        "    Setting it to 0 disables expiring keys in background when they are not",
        "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
        "    default.",
        "QUICKLIST-PACKED-THRESHOLD <size>",
        "    Sets the threshold for elements to be inserted as plain vs packed nodes",
        "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
        "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
        "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
        "SLEEP <seconds>",
        "    Stop the server for <seconds>. Decimals allowed.",
        "STRINGMATCH-TEST",
        "    Run a fuzz tester against the stringmatchlen() function.",
        "STRUCTSIZE",
        "    Return the size of different Redis core C structures.",
        "CLIENT-EVICTION",
        "    Show low level client eviction pools info (maxmemory-clients).",
        "PAUSE-CRON <0|1>",
        "    Stop periodic cron job processing.",
        "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
        "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
        "REPLYBUFFER RESIZING <0|1>",
        "    Enable or disable the reply buffer resize cron job",
    ];
    super::shared::reply_help(ctx, "DEBUG", LINES);
}

/// Redis's digest step: XOR the SHA1 of `bytes` into `digest`.
fn xor_digest(digest: &mut [u8; 20], bytes: &[u8]) {
    let hash = Sha1::from(bytes).digest().bytes();
    for (d, h) in digest.iter_mut().zip(hash) {
        *d ^= h;
    }
}

/// Redis's order-dependent digest step: XOR in the SHA1 of `bytes`, then
/// replace the digest with its own SHA1.
fn mix_digest(digest: &mut [u8; 20], bytes: &[u8]) {
    xor_digest(digest, bytes);
    *digest = Sha1::from(&digest[..]).digest().bytes();
}

/// Redis's object type numbers (`OBJ_STRING` …), mixed into digests.
fn type_number(v: ValueRef<'_>) -> u32 {
    match v {
        ValueRef::Str(_) => 0,
        ValueRef::List(_) => 1,
        ValueRef::Set(_) => 2,
        ValueRef::ZSet(_) => 3,
        ValueRef::Hash(_) => 4,
        ValueRef::Stream(_) => 6,
        ValueRef::Module(_) => 5,
    }
}

/// Mixes a stream's entries into `digest` as Redis does: each entry's ID
/// as `ms.seq` (a dot, not a dash), then its fields and values; groups are
/// not part of the digest.
fn stream_digest(digest: &mut [u8; 20], s: &vireo_store::stream::Stream) {
    use vireo_store::stream::StreamId;
    for e in s.range(StreamId::MIN, StreamId::MAX, false) {
        mix_digest(digest, format!("{}.{}", e.id.ms, e.id.seq).as_bytes());
        for (field, value) in e.fields() {
            mix_digest(digest, field);
            mix_digest(digest, value);
        }
    }
}

/// Mixes a key's value (and whether it has a TTL) into `digest` exactly as
/// Redis's `xorObjectDigest` does, so digests compare across servers:
/// ordered types are mixed element by element, unordered ones XOR a
/// per-element digest so iteration order does not matter.
fn value_digest(digest: &mut [u8; 20], entry: &Entry) {
    let value = entry.value();
    mix_digest(digest, &type_number(value).to_be_bytes());
    let mut num = itoa::Buffer::new();
    match value {
        ValueRef::Str(s) => mix_digest(digest, s.as_bytes(&mut num)),
        ValueRef::List(l) => {
            for e in l.iter() {
                match e {
                    vireo_store::list::Elem::Int(i) => mix_digest(digest, num.format(i).as_bytes()),
                    vireo_store::list::Elem::Bytes(b) => mix_digest(digest, b),
                }
            }
        }
        ValueRef::Set(s) => {
            for m in s.iter() {
                match m {
                    vireo_store::set::Member::Int(i) => {
                        xor_digest(digest, num.format(i).as_bytes())
                    }
                    vireo_store::set::Member::Bytes(b) => xor_digest(digest, b),
                }
            }
        }
        ValueRef::ZSet(z) => {
            let mut score = Vec::new();
            for (member, s) in z.iter() {
                let mut element = [0u8; 20];
                mix_digest(&mut element, member);
                score.clear();
                // `%.17g`, which is also Redis's double reply text.
                write_double(&mut score, s);
                mix_digest(&mut element, &score);
                xor_digest(digest, &element);
            }
        }
        ValueRef::Hash(h) => {
            for (field, v) in h.iter() {
                let mut element = [0u8; 20];
                mix_digest(&mut element, field);
                mix_digest(&mut element, v);
                xor_digest(digest, &element);
            }
        }
        ValueRef::Stream(s) => stream_digest(digest, s),
        // A module value's digest is its serialized form (Redis asks the
        // module's digest callback).
        ValueRef::Module(m) => mix_digest(digest, &m.0.serialize()),
    }
    if entry.expire_at().is_some() {
        xor_digest(digest, b"!!expire!!");
    }
}

/// Lower-case hex of a digest.
fn hex(digest: &[u8; 20]) -> String {
    digest.iter().fold(String::with_capacity(40), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// DEBUG DIGEST: one digest of the whole dataset, 40 zeros when it is
/// empty (Redis's `computeDatasetDigest`).
fn digest(ctx: &mut Ctx<'_>) {
    let mut keys = ctx.server.keyspace.lock_all();
    let mut total = [0u8; 20];
    for db in 0..ctx.server.keyspace.databases() {
        let mut db_digest = [0u8; 20];
        let mut any = false;
        keys.for_each_key(db, |key, entry| {
            any = true;
            let mut d = [0u8; 20];
            mix_digest(&mut d, key);
            value_digest(&mut d, entry);
            xor_digest(&mut db_digest, &d);
        });
        if any {
            // The database number is mixed in before its keys; each key's
            // digest is hashed and XORed in (`xorDigest`), an
            // order-independent sum, so adding the sum at once is the same.
            mix_digest(&mut total, &(db as u32).to_be_bytes());
            for (t, d) in total.iter_mut().zip(db_digest) {
                *t ^= d;
            }
        }
    }
    ctx.out.simple(&hex(&total));
}

/// DEBUG DIGEST-VALUE key [key ...]: each key's value digest (40 zeros for
/// a missing key).
fn digest_value(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let names: Vec<&[u8]> = args.iter().skip(2).collect();
    let mut keys = ctx.server.keyspace.lock_keys(names.iter().copied());
    ctx.out.array(names.len());
    for key in names {
        let mut d = [0u8; 20];
        if let Some(entry) = keys.get_read_no_touch(ctx.db, key) {
            value_digest(&mut d, entry);
        }
        ctx.out.simple(&hex(&d));
    }
}

/// DEBUG OBJECT key: Redis's one-line description of the value.
fn object(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(2);
    let opts = ctx.server.config.rdb_encode_options();
    let now = vireo_store::clock::now_ms();
    let mut keys = ctx.server.keyspace.lock_keys([key]);
    // Redis looks the key up in the table itself: a key past its TTL that
    // is still there (on a replica, say) is found.
    keys.set_ttl_blind(true);
    let Some(entry) = keys.get_read_no_touch(ctx.db, key) else {
        return ctx.out.error("ERR no such key");
    };
    let value = entry.value();
    let mut encoded = Vec::new();
    vireo_store::rdb::encode_value(&mut encoded, value, &opts);
    let idle = entry.idle_secs(now);
    let mut line = format!(
        "Value at:{:p} refcount:1 encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{idle}",
        entry as *const Entry,
        value.encoding_name(),
        encoded.len().saturating_sub(1),
        (now / 1000).saturating_sub(idle) & ((1 << 24) - 1),
    );
    if let ValueRef::List(l) = value {
        let nodes = l.node_count().max(1);
        let _ = write!(
            line,
            " ql_nodes:{} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:0 ql_uncompressed_size:{}",
            l.node_count(),
            l.len() as f64 / nodes as f64,
            l.fill(),
            l.heap_bytes()
        );
    }
    ctx.out.simple(&line);
}

/// DEBUG POPULATE count [prefix] [size]: string keys `prefix:N` holding
/// `value:N` (cut or zero-padded to `size`), skipping keys that exist; not
/// propagated, as in Redis.
fn populate(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(count) = positive_arg(ctx, args.get(2)) else {
        return;
    };
    let size = match args.try_get(4) {
        Some(a) => match positive_arg(ctx, a) {
            Some(s) => Some(s as usize),
            None => return,
        },
        None => None,
    };
    let prefix = args.try_get(3).unwrap_or(b"key");
    let db = ctx.db;
    let mut keys = ctx.server.keyspace.lock_all();
    let mut num = itoa::Buffer::new();
    let mut key = Vec::new();
    let mut value = Vec::new();
    for j in 0..count {
        key.clear();
        key.extend_from_slice(prefix);
        key.push(b':');
        key.extend_from_slice(num.format(j).as_bytes());
        if keys.contains(db, &key) {
            continue;
        }
        value.clear();
        value.extend_from_slice(b"value:");
        value.extend_from_slice(num.format(j).as_bytes());
        if let Some(size) = size {
            value.resize(size, 0);
        }
        keys.set_str(db, &key, &value, None);
        keys.signal_modified(db, &key);
    }
    ctx.out.ok();
}

/// A count argument Redis reads with `getPositiveLongFromObjectOrReply`.
fn positive_arg(ctx: &mut Ctx<'_>, arg: &[u8]) -> Option<u64> {
    match parse_i64(arg) {
        Some(n) if n >= 0 => Some(n as u64),
        Some(_) => {
            ctx.out.error("ERR value is out of range, must be positive");
            None
        }
        None => {
            ctx.out.error("ERR value is not an integer or out of range");
            None
        }
    }
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: saves the dump, empties the
/// dataset and loads the dump back.
fn reload(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let (mut flush, mut save, mut merge) = (true, true, false);
    for opt in args.iter().skip(2) {
        if is(opt, "merge") {
            // Keys are replaced either way; MERGE lets libraries be too.
            merge = true;
        } else if is(opt, "noflush") {
            flush = false;
        } else if is(opt, "nosave") {
            save = false;
        } else {
            return ctx
                .out
                .error("ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.");
        }
    }
    if save {
        if let Err(e) = rdb::save(&ctx.server.arc()) {
            return ctx.out.error(&format!("ERR {e}"));
        }
    }
    if flush {
        empty_data(ctx);
        // Redis's emptyData drops the function libraries too.
        crate::exec::script::function_flush(ctx.server, ctx.session.shared.worker);
    }
    match rdb::load_dump(ctx.server, merge) {
        Ok(()) => {
            tracing::warn!("DB reloaded by DEBUG RELOAD");
            ctx.out.ok();
        }
        Err(e) => {
            tracing::warn!("{e}");
            ctx.out.error("ERR Error trying to load the RDB dump");
        }
    }
}

/// Removes every key of every database (Redis's `emptyData`), freeing the
/// tables on the lazy-free thread.
fn empty_data(ctx: &mut Ctx<'_>) {
    let mut keys = ctx.server.keyspace.lock_all();
    let flushed = (0..ctx.server.keyspace.databases())
        .map(|db| keys.flush_db(db))
        .collect();
    drop(keys);
    ctx.server.lazyfree.free_tables(flushed);
}

/// DEBUG LOADAOF: writes out what the AOF writer holds, empties the
/// dataset and replays the AOF.
fn loadaof(ctx: &mut Ctx<'_>) {
    let server = ctx.server;
    if server.aof.is_enabled() && !server.aof.wait_written(Duration::from_secs(10)) {
        return ctx.out.error("ERR the AOF writer did not catch up");
    }
    empty_data(ctx);
    // Other clients get -LOADING meanwhile, as at start-up.
    server.rdb.loading.store(true, Ordering::Release);
    let loaded = aof::load::load_at_start(server);
    server.rdb.loading.store(false, Ordering::Release);
    if let Err(e) = loaded {
        // Redis exits when the AOF it just wrote cannot be loaded back.
        tracing::warn!("{e}");
        std::process::exit(1);
    }
    tracing::warn!("Append Only File loaded by DEBUG LOADAOF");
    ctx.out.ok();
}

/// DEBUG PROTOCOL type: a test value of each RESP3 type.
fn protocol(ctx: &mut Ctx<'_>, name: &[u8]) {
    let out = &mut *ctx.out;
    match text(name).to_ascii_lowercase().as_str() {
        "string" => out.bulk(b"Hello World"),
        "integer" => out.int(12345),
        // Redis's test value, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        "double" => out.double(3.141),
        "bignum" => out.big_number("1234567999999999999999999999999999999"),
        "null" => out.null(),
        "array" => {
            out.array(3);
            (0..3).for_each(|j| out.int(j));
        }
        "set" => {
            out.set(3);
            (0..3).for_each(|j| out.int(j));
        }
        "map" => {
            out.map(3);
            for j in 0..3 {
                out.int(j);
                out.boolean(j == 1);
            }
        }
        "attrib" => {
            // Attributes exist in RESP3 only; the real reply follows.
            if out.protocol() == vireo_resp::Protocol::Resp3 {
                out.attribute(1);
                out.bulk(b"key-popularity");
                out.array(2);
                out.bulk(b"key:123");
                out.int(90);
            }
            out.bulk(b"Some real reply following the attribute");
        }
        "push" => {
            if out.protocol() == vireo_resp::Protocol::Resp2 {
                return out.error("ERR RESP2 is not supported by this command");
            }
            out.push(2);
            out.bulk(b"server-cpu-usage");
            out.int(42);
            out.bulk(b"Some real reply following the push reply");
        }
        "true" => out.boolean(true),
        "false" => out.boolean(false),
        "verbatim" => out.verbatim("txt", b"This is a verbatim\nstring"),
        _ => out.error("ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false"),
    }
}

/// DEBUG SLEEP seconds: stops the server, as Redis's single thread does,
/// by holding every shard while this worker sleeps (other workers answer
/// only commands that touch no keys meanwhile). Inside EXEC the
/// transaction already holds its shards, and taking them again would
/// deadlock: it just sleeps there.
fn sleep(ctx: &mut Ctx<'_>, arg: &[u8]) {
    let secs = parse_f64(arg).unwrap_or(0.0);
    let us = (secs * 1e6) as i64;
    let keys = (!ctx.deny_blocking).then(|| ctx.server.keyspace.lock_all());
    if us > 0 {
        std::thread::sleep(Duration::from_micros(us as u64));
    }
    drop(keys);
    ctx.out.ok();
}

/// DEBUG QUICKLIST-PACKED-THRESHOLD size: Redis's argument check (a memory
/// value from 1 byte to 4 GB). Vireo's list nodes have no separate plain
/// form for big elements (a big element is a node of its own), so the
/// threshold changes nothing else.
fn packed_threshold(ctx: &mut Ctx<'_>, arg: &[u8]) {
    match crate::config::parse_memory(&text(arg)) {
        Some(sz) if sz <= 1 << 32 => ctx.out.ok(),
        _ => ctx
            .out
            .error("ERR argument must be a memory value bigger than 1 and smaller than 4gb"),
    }
}

/// DEBUG REPLYBUFFER PEAK-RESET-TIME <never|reset|ms> | RESIZING <0|1>:
/// Vireo's reply buffers are not resized by cron, so both are accepted
/// after Redis's argument checks.
fn replybuffer(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let (what, value) = (args.get(2), args.get(3));
    if is(what, "peak-reset-time") {
        if !is(value, "never") && !is(value, "reset") && parse_i64(value).is_none() {
            return ctx.out.error("ERR value is not an integer or out of range");
        }
    } else if !is(what, "resizing") {
        return subcommand_syntax_error(ctx, args);
    }
    ctx.out.ok();
}

/// DEBUG STRINGMATCH-TEST: runs the glob matcher over random patterns and
/// strings (it must neither crash nor hang).
fn stringmatch_test() {
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let alphabet = b"*?[]^-\\abc";
    for _ in 0..100_000 {
        let pattern: Vec<u8> = (0..rng.usize(0..32))
            .map(|_| alphabet[rng.usize(0..alphabet.len())])
            .collect();
        let string: Vec<u8> = (0..rng.usize(0..32)).map(|_| rng.u8(..)).collect();
        let _ = vireo_store::glob::glob_match(&pattern, &string, false);
    }
}

/// DEBUG STRUCTSIZE: the sizes of the structures that play Redis's roles.
fn structsize(ctx: &mut Ctx<'_>) {
    let line = format!(
        "bits:64 entry:{} key:{} ",
        std::mem::size_of::<Entry>(),
        std::mem::size_of::<vireo_store::Key>()
    );
    ctx.out.bulk(line.as_bytes());
}

/// DEBUG HTSTATS dbid: the key table's statistics for a database.
fn htstats(ctx: &mut Ctx<'_>, arg: &[u8]) {
    let Some(db) = parse_i64(arg) else {
        return ctx.out.error("ERR value is not an integer or out of range");
    };
    let dbs = ctx.server.keyspace.databases();
    let Some(db) = usize::try_from(db).ok().filter(|&d| d < dbs) else {
        return ctx.out.error("ERR Out of range database");
    };
    let (keys, expires) = ctx.server.keyspace.db_sizes()[db];
    let stats = format!(
        "[Dictionary HT]\nHash table 0 stats (main hash table):\n table size: {keys}\n number of elements: {keys}\n[Expires HT]\nHash table 0 stats (main hash table):\n table size: {expires}\n number of elements: {expires}\n"
    );
    ctx.out.verbatim("txt", stats.as_bytes());
}

/// DEBUG HTSTATS-KEY key: hash table statistics of a value stored as a
/// hash table (a big hash, set or sorted set).
fn htstats_key(ctx: &mut Ctx<'_>, key: &[u8]) {
    let mut keys = ctx.server.keyspace.lock_keys([key]);
    let Some(entry) = keys.get_read_no_touch(ctx.db, key) else {
        return ctx.out.error("ERR no such key");
    };
    let value = entry.value();
    let table = matches!(value.encoding_name(), "hashtable" | "skiplist");
    if !table {
        return ctx.out.error(
            "ERR The value stored at the specified key is not represented using an hash table",
        );
    }
    let n = match value {
        ValueRef::Hash(h) => h.len(),
        ValueRef::Set(s) => s.len(),
        ValueRef::ZSet(z) => z.len(),
        _ => 0,
    };
    let stats = format!(
        "Hash table 0 stats (main hash table):\n table size: {n}\n number of elements: {n}\n"
    );
    ctx.out.verbatim("txt", stats.as_bytes());
}

/// DEBUG CONFIG-REWRITE-FORCE-ALL: CONFIG REWRITE writing every parameter.
fn config_rewrite_force_all(ctx: &mut Ctx<'_>) {
    let users = crate::security::config_user_lines(ctx.server);
    match ctx.server.config.rewrite_with_users(&users, true) {
        Ok(()) => ctx.out.ok(),
        Err(e) => ctx
            .out
            .error(&format!("ERR CONFIG-REWRITE-FORCE-ALL failed: {e}")),
    }
}

/// DEBUG CLIENT-EVICTION: Redis's error when client eviction is off, else
/// what the clients hold in all.
fn client_eviction(ctx: &mut Ctx<'_>) {
    if ctx
        .server
        .config
        .hot
        .maxmemory_clients
        .load(Ordering::Relaxed)
        == 0
    {
        return ctx.out.error("ERR maxmemory-clients is disabled.");
    }
    let total = ctx.server.clients.memory_total();
    let line = format!("all clients: tot-mem: {total}\n");
    ctx.out.verbatim("txt", line.as_bytes());
}

/// DEBUG LISTPACK / QUICKLIST / SDSLEN key: Redis prints C structures
/// Vireo does not have; it checks the key and the encoding as Redis does.
fn low_level(ctx: &mut Ctx<'_>, sub: &str, key: &[u8]) {
    let mut keys = ctx.server.keyspace.lock_keys([key]);
    let Some(entry) = keys.get_read_no_touch(ctx.db, key) else {
        return ctx.out.error("ERR no such key");
    };
    let encoding = entry.value().encoding_name();
    match sub {
        "listpack" if encoding != "listpack" => ctx.out.error("ERR Not a listpack encoded object."),
        "listpack" => ctx.out.simple("Listpack structure printed on stdout"),
        "quicklist" if encoding != "quicklist" => {
            ctx.out.error("ERR Not a quicklist encoded object.")
        }
        "quicklist" => ctx.out.simple("Quicklist structure printed on stdout"),
        _ if !matches!(entry.value(), ValueRef::Str(_)) || encoding == "int" => {
            ctx.out.error("ERR Not an sds encoded string.")
        }
        _ => {
            let len = match entry.value() {
                ValueRef::Str(v) => v.len(),
                _ => 0,
            };
            let line = format!(
                "key_sds_len:{}, key_sds_avail:0, key_zmalloc: {}, val_sds_len:{len}, val_sds_avail:0, val_zmalloc: {len}",
                key.len(),
                key.len()
            );
            ctx.out.simple(&line);
        }
    }
}

/// DEBUG SEGFAULT / PANIC / ASSERT / OOM: crash on purpose, as Redis
/// does, each ending in the crash report (`ops/crash.rs`): a real fault,
/// a software failure, a failed assertion, a failed allocation (its
/// abort() then reports SIGABRT).
fn crash(ctx: &mut Ctx<'_>, sub: &str) {
    match sub {
        "segfault" => crate::ops::crash::segfault(),
        "panic" => crate::ops::crash::software_failure(&[
            "------------------------------------------------".into(),
            "!!! Software Failure. Press left mouse button to continue".into(),
            format!(
                "Guru Meditation: DEBUG PANIC called at Unix time {} #{}:{}",
                vireo_store::clock::now_ms() / 1000,
                file!(),
                line!()
            ),
        ]),
        "assert" => {
            let client = ctx.session.shared.info_line();
            crate::ops::crash::software_failure(&[
                "=== ASSERTION FAILED CLIENT CONTEXT ===".into(),
                format!("client = {client}"),
                "=== ASSERTION FAILED ===".into(),
                format!("==> {}:{} 'DEBUG ASSERT' is not true", file!(), line!()),
            ])
        }
        _ => {
            // Half the address space cannot be had: the allocator fails
            // and the standard handler aborts.
            let layout = std::alloc::Layout::from_size_align(isize::MAX as usize / 2, 1)
                .unwrap_or(std::alloc::Layout::new::<u8>());
            // SAFETY: a non-zero-sized layout; the block is freed at once
            // in the unlikely case the allocation succeeds.
            unsafe {
                let block = std::alloc::alloc(layout);
                if block.is_null() {
                    std::alloc::handle_alloc_error(layout);
                }
                std::alloc::dealloc(block, layout);
            }
            ctx.out.ok();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_steps_match_redis_definitions() {
        // mixDigest of "a" into zeros: SHA1("a") then SHA1 of that.
        let mut d = [0u8; 20];
        mix_digest(&mut d, b"a");
        let first = Sha1::from(b"a").digest().bytes();
        assert_eq!(d, Sha1::from(&first[..]).digest().bytes());
        let mut x = [0u8; 20];
        xor_digest(&mut x, b"a");
        xor_digest(&mut x, b"a");
        assert_eq!(x, [0u8; 20]);
        assert_eq!(hex(&[0xab; 20]), "ab".repeat(20));
    }

    #[test]
    fn atoi_reads_leading_digits() {
        assert_eq!(atoi(b"1"), 1);
        assert_eq!(atoi(b"0"), 0);
        assert_eq!(atoi(b"12abc"), 12);
        assert_eq!(atoi(b"-3"), -3);
        assert_eq!(atoi(b"x"), 0);
    }
}
