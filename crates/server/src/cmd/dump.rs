//! DUMP and RESTORE (Redis's `cluster.c` serialisation commands): a value
//! moved between servers as an RDB-encoded payload.
//!
//! The payload is the value's RDB type byte and encoding, the RDB version
//! (two little-endian bytes) and a CRC64 of all that (eight bytes), so Vireo
//! and Redis 7.0 accept each other's payloads. RESTORE validates payloads
//! fully (Redis's `sanitize-dump-payload yes`): a damaged one is refused
//! with an error instead of being stored.

use crate::exec::notify::class as ev;
use vireo_resp::Args;
use vireo_store::rdb::{dump_payload, restore_payload, PayloadError};
use vireo_store::Entry;

use super::{errors, flags::*, is, spec, CommandSpec, Ctx, KEY1};

/// The DUMP/RESTORE family's table entries.
pub const COMMANDS: &[CommandSpec] = &[
    spec("dump", 2, READONLY, KEY1, dump),
    spec("restore", -4, WRITE | DENYOOM, KEY1, restore),
];

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
    let value = match restore_payload(args.get(3), &ctx.server.config.rdb_load_options()) {
        Ok(v) => v,
        Err(PayloadError::VersionOrChecksum) => {
            return ctx
                .out
                .error("ERR DUMP payload version or checksum are wrong")
        }
        Err(PayloadError::BadData(_)) => return ctx.out.error("ERR Bad data format"),
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
