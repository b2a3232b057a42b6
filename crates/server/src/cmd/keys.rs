//! Generic keyspace commands, whatever the value type (Redis's db.c and
//! the OBJECT command of object.c): DEL, UNLINK, EXISTS, TYPE, KEYS, SCAN,
//! RANDOMKEY, RENAME, RENAMENX, MOVE, COPY, TOUCH, DBSIZE, FLUSHDB,
//! FLUSHALL, SWAPDB and OBJECT.

use crate::exec::notify::class as ev;
use vireo_resp::number::parse_i64;
use vireo_resp::{Args, ReplyBuf};
use vireo_store::glob::glob_match;
use vireo_store::keyspace::Flushed;
use vireo_store::{Entry, Key, StrRef, ValueRef};

use super::shared::{parse_scan_args, reply_help};
use super::{
    container, errors, flags::*, is, spec, CommandSpec, Ctx, KeySpec, ALL_ARGS_KEYS, KEY1,
};

/// Keys at arguments 1 and 2 (RENAME, COPY).
const KEYS_1_2: KeySpec = KeySpec::Range {
    first: 1,
    last: 2,
    step: 1,
};

/// The key of an OBJECT subcommand, at argument 2.
const KEY2: KeySpec = KeySpec::Range {
    first: 2,
    last: 2,
    step: 1,
};

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec("del", -2, WRITE, ALL_ARGS_KEYS, del),
    spec("unlink", -2, WRITE | FAST, ALL_ARGS_KEYS, unlink),
    spec("exists", -2, READONLY | FAST, ALL_ARGS_KEYS, exists),
    spec("type", 2, READONLY | FAST, KEY1, type_cmd),
    spec("keys", 2, READONLY, KeySpec::All, keys),
    spec(
        "scan",
        -2,
        READONLY | TOUCHES_ARBITRARY_KEYS,
        KeySpec::Dynamic,
        scan,
    ),
    spec(
        "randomkey",
        1,
        READONLY | TOUCHES_ARBITRARY_KEYS,
        KeySpec::All,
        randomkey,
    ),
    spec("rename", 3, WRITE, KEYS_1_2, rename),
    spec("renamenx", 3, WRITE | FAST, KEYS_1_2, renamenx),
    spec("move", 3, WRITE | FAST, KEY1, move_cmd),
    spec("copy", -3, WRITE | DENYOOM, KEYS_1_2, copy),
    spec("touch", -2, READONLY | FAST, ALL_ARGS_KEYS, touch),
    spec("dbsize", 1, READONLY | FAST, KeySpec::Dynamic, dbsize),
    spec("flushdb", -1, WRITE, KeySpec::All, flushdb),
    spec("flushall", -1, WRITE, KeySpec::All, flushall),
    spec("swapdb", 3, WRITE | FAST, KeySpec::All, swapdb),
    container("object", -2, 0, OBJECT_SUBCOMMANDS),
];

const OBJECT_SUBCOMMANDS: &[CommandSpec] = &[
    spec("object|encoding", 3, READONLY, KEY2, object_encoding),
    spec("object|freq", 3, READONLY, KEY2, object_freq),
    spec("object|idletime", 3, READONLY, KEY2, object_idletime),
    spec("object|refcount", 3, READONLY, KEY2, object_refcount),
    spec(
        "object|help",
        2,
        LOADING | STALE,
        KeySpec::None,
        object_help,
    ),
];

const SAME_OBJECT: &str = "ERR source and destination objects are the same";
const INT32_RANGE: &str =
    "ERR value is out of range, value must between -2147483648 and 2147483647";

/// Records a write to `key` in database `db`, which may not be the selected
/// one (MOVE, COPY ... DB).
fn modified_in(ctx: &mut Ctx<'_>, db: usize, key: &[u8]) {
    ctx.keys.signal_modified(db, key);
    ctx.dirty += 1;
    ctx.invalidate(key);
}

/// Parses a 32-bit integer argument as Redis's `getIntFromObject`: None for
/// a non-integer, Some(Err) for an integer outside the 32-bit range.
fn parse_i32(arg: &[u8]) -> Option<Result<i32, ()>> {
    parse_i64(arg).map(|v| i32::try_from(v).map_err(|_| ()))
}

/// A database index argument (MOVE, COPY ... DB): replies Redis's error and
/// returns None unless it is an integer naming an existing database.
fn db_index_arg(ctx: &mut Ctx<'_>, arg: &[u8]) -> Option<usize> {
    match parse_i32(arg) {
        None => ctx.out.error(errors::NOT_INT),
        Some(Err(())) => ctx.out.error(INT32_RANGE),
        Some(Ok(id)) => match usize::try_from(id) {
            Ok(id) if id < ctx.server.keyspace.databases() => return Some(id),
            _ => ctx.out.error(errors::DB_RANGE),
        },
    }
    None
}

/// DEL key [key ...]: removes the keys and replies how many existed. Big
/// values are freed in the background when `lazyfree-lazy-user-del` is on.
fn del(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let lazy = ctx.server.config.lazyfree_lazy_user_del();
    delete_keys(ctx, args, lazy);
}

/// UNLINK key [key ...]: DEL that frees big values on the background
/// thread, so it returns at once whatever their size.
fn unlink(ctx: &mut Ctx<'_>, args: Args<'_>) {
    delete_keys(ctx, args, true);
}

fn delete_keys(ctx: &mut Ctx<'_>, args: Args<'_>, lazy: bool) {
    let mut deleted = 0;
    for key in args.iter().skip(1) {
        if let Some(entry) = ctx.keys.remove(ctx.db, key) {
            if lazy {
                ctx.server.lazyfree.free_value(entry.into_value());
            }
            ctx.modified(key);
            ctx.notify(ev::GENERIC, "del", key);
            deleted += 1;
        }
    }
    ctx.out.int(deleted);
}

/// EXISTS key [key ...]: how many of the keys exist, a key named twice
/// counting twice. Does not update the keys' access time.
fn exists(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let mut count = 0;
    for key in args.iter().skip(1) {
        if ctx.keys.get_read_no_touch(ctx.db, key).is_some() {
            count += 1;
        }
    }
    ctx.out.int(count);
}

/// TYPE key: the type name of the value as a status reply, `none` when the
/// key does not exist. Does not update the key's access time.
fn type_cmd(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let name = match ctx.keys.get_read_no_touch(ctx.db, args.get(1)) {
        Some(e) => e.value().type_name(),
        None => "none",
    };
    ctx.out.simple(name);
}

/// KEYS pattern: every live key of the database matching the glob pattern,
/// in no particular order.
fn keys(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let pattern = args.get(1);
    let all = pattern == b"*";
    let out = &mut *ctx.out;
    let header = out.deferred();
    let mut n = 0;
    ctx.keys.for_each_key(ctx.db, |key, _| {
        if all || glob_match(pattern, key, false) {
            out.bulk(key);
            n += 1;
        }
    });
    out.fill_deferred_array(header, n);
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]: one step of an
/// incremental walk of the database; replies the next cursor (0 when done)
/// and the keys visited that pass the filters. Every key present for the
/// whole walk is returned at least once.
fn scan(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(opts) = parse_scan_args(ctx, args, 1, true) else {
        return;
    };
    let mut found: Vec<Key> = Vec::new();
    let server = ctx.server;
    let lazy = server.config.lazyfree_lazy_expire();
    // Each key found expired is deleted, and its DEL propagated on its own
    // (not in a MULTI, as Redis 7.0), under its shard's lock.
    let mut expired = |db: usize, key: &[u8]| {
        crate::persist::aof::log_deletion(server, db, key, lazy);
        crate::exec::notify::key_gone(server, "expired", db, key);
    };
    let next = ctx.keys.scan(
        ctx.db,
        opts.cursor,
        opts.count,
        |key, entry| {
            let type_ok = opts
                .type_name
                .is_none_or(|t| t.eq_ignore_ascii_case(entry.value().type_name().as_bytes()));
            if type_ok && opts.matches(key) {
                found.push(key.into());
            }
        },
        &mut expired,
    );
    let out = &mut *ctx.out;
    out.array(2);
    out.bulk(itoa::Buffer::new().format(next).as_bytes());
    out.array(found.len());
    for key in &found {
        out.bulk(key);
    }
}

/// RANDOMKEY: a random live key of the database, or null when it is empty.
fn randomkey(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let mut rng = fastrand::Rng::new();
    match ctx.keys.random_key(ctx.db, &mut rng) {
        Some(key) => ctx.out.bulk(&key),
        None => ctx.out.null(),
    }
}

/// RENAME key newkey: moves the value (and its TTL) to `newkey`, replacing
/// whatever was there; "no such key" if `key` is missing.
fn rename(ctx: &mut Ctx<'_>, args: Args<'_>) {
    rename_generic(ctx, args, false);
}

/// RENAMENX key newkey: RENAME unless `newkey` exists; replies 1 if renamed,
/// 0 if not.
fn renamenx(ctx: &mut Ctx<'_>, args: Args<'_>) {
    rename_generic(ctx, args, true);
}

fn rename_generic(ctx: &mut Ctx<'_>, args: Args<'_>, nx: bool) {
    let (src, dst) = (args.get(1), args.get(2));
    // RENAMENX replies whether it renamed; RENAME always OK.
    let done = |out: &mut ReplyBuf, renamed: bool| {
        if nx {
            out.int(i64::from(renamed));
        } else {
            out.ok();
        }
    };
    if ctx.keys.get_mut(ctx.db, src).is_none() {
        return ctx.out.error(errors::NO_SUCH_KEY);
    }
    // Renaming a key to itself changes nothing but still needs it to exist.
    if src == dst {
        return done(ctx.out, false);
    }
    if nx && ctx.keys.get_mut(ctx.db, dst).is_some() {
        return done(ctx.out, false);
    }
    let Some(entry) = ctx.keys.remove(ctx.db, src) else {
        return ctx.out.error(errors::NO_SUCH_KEY);
    };
    ctx.keys.set_entry(ctx.db, dst, entry);
    // One change for both keys, as Redis counts it.
    ctx.keys.signal_modified(ctx.db, src);
    ctx.invalidate(src);
    ctx.modified(dst);
    ctx.notify(ev::GENERIC, "rename_from", src);
    ctx.notify(ev::GENERIC, "rename_to", dst);
    ctx.signal_ready(dst);
    done(ctx.out, true);
}

/// MOVE key db: moves the key (with its TTL) to another database; replies 1
/// if moved, 0 if it is missing here or already exists there.
fn move_cmd(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    let Some(dst) = db_index_arg(ctx, args.get(2)) else {
        return;
    };
    if dst == ctx.db {
        return ctx.out.error(SAME_OBJECT);
    }
    if ctx.keys.get_mut(ctx.db, key).is_none() || !ctx.keys.move_key(ctx.db, dst, key) {
        return ctx.out.int(0);
    }
    ctx.keys.signal_modified(dst, key);
    ctx.modified(key);
    ctx.notify(ev::GENERIC, "move_from", key);
    ctx.notify_in(dst, ev::GENERIC, "move_to", key);
    ctx.signal_ready_in(dst, key);
    ctx.out.int(1);
}

/// COPY source destination [DB db] [REPLACE]: copies the value and its TTL
/// to `destination` (in `db` if given); replies 1 if copied, 0 if the source
/// is missing or the destination exists without REPLACE.
fn copy(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let (src, dst) = (args.get(1), args.get(2));
    let mut dst_db = ctx.db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        let opt = args.get(i);
        if is(opt, "replace") {
            replace = true;
        } else if let (true, Some(db)) = (is(opt, "db"), args.try_get(i + 1)) {
            let Some(db) = db_index_arg(ctx, db) else {
                return;
            };
            dst_db = db;
            i += 1;
        } else {
            return ctx.out.error(errors::SYNTAX);
        }
        i += 1;
    }
    if dst_db == ctx.db && src == dst {
        return ctx.out.error(SAME_OBJECT);
    }
    // The copy is a new object: fresh access time and counter.
    let copied = match ctx.keys.get_read(ctx.db, src) {
        Some(e) => Entry::with_key_value(dst, e.value().to_value(), e.expire_at()),
        None => return ctx.out.int(0),
    };
    if ctx.keys.get_mut(dst_db, dst).is_some() {
        if !replace {
            return ctx.out.int(0);
        }
        ctx.keys.delete(dst_db, dst);
    }
    ctx.keys.set_entry(dst_db, dst, copied);
    modified_in(ctx, dst_db, dst);
    ctx.notify_in(dst_db, ev::GENERIC, "copy_to", dst);
    ctx.signal_ready_in(dst_db, dst);
    ctx.out.int(1);
}

/// TOUCH key [key ...]: records an access to each key (even for a
/// CLIENT NO-TOUCH client) and replies how many exist.
fn touch(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let mut count = 0;
    for key in args.iter().skip(1) {
        if ctx.keys.touch(ctx.db, key) {
            count += 1;
        }
    }
    ctx.out.int(count);
}

/// DBSIZE: the number of keys in the database (including expired keys not
/// reclaimed yet, as in Redis).
fn dbsize(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let n = ctx.keys.db_len(ctx.db);
    ctx.out.int(i64::try_from(n).unwrap_or(i64::MAX));
}

/// Parses FLUSHDB/FLUSHALL's optional `ASYNC|SYNC`; true means free the
/// data in the background, the default coming from
/// `lazyfree-lazy-user-flush`. Replies the error and returns None on bad
/// input.
fn flush_is_async(ctx: &mut Ctx<'_>, args: Args<'_>) -> Option<bool> {
    match args.len() {
        1 => return Some(ctx.server.config.lazyfree_lazy_user_flush()),
        2 if is(args.get(1), "async") => return Some(true),
        2 if is(args.get(1), "sync") => return Some(false),
        _ => ctx.out.error(errors::SYNTAX),
    }
    None
}

/// Frees flushed tables, on the lazy free thread when `lazy`. Returns how
/// many keys they held.
fn free_flushed(ctx: &Ctx<'_>, flushed: Vec<Flushed>, lazy: bool) -> u64 {
    let keys: usize = flushed.iter().map(Flushed::key_count).sum();
    if lazy {
        ctx.server.lazyfree.free_tables(flushed);
    }
    u64::try_from(keys).unwrap_or(u64::MAX)
}

/// FLUSHDB [ASYNC|SYNC]: deletes every key of the selected database.
fn flushdb(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(lazy) = flush_is_async(ctx, args) else {
        return;
    };
    let flushed = vec![ctx.keys.flush_db(ctx.db)];
    crate::exec::blocking::signal_waited(ctx, &[ctx.db]);
    ctx.dirty += free_flushed(ctx, flushed, lazy);
    // Propagated even when the database was empty, as Redis forces it.
    let args: Vec<&[u8]> = args.iter().collect();
    ctx.propagate(&args);
    invalidate_all(ctx);
    ctx.out.ok();
}

/// Tells every tracking client that everything changed (a flush).
fn invalidate_all(ctx: &mut Ctx<'_>) {
    if crate::exec::tracking::active(ctx.server) || ctx.server.tracking.key_count() > 0 {
        let mut local = crate::exec::pubsub::Local {
            session: ctx.session,
            out: ctx.out,
        };
        crate::exec::tracking::invalidate_all(ctx.server, &mut local);
    }
}

/// FLUSHALL [ASYNC|SYNC]: deletes every key of every database.
fn flushall(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(lazy) = flush_is_async(ctx, args) else {
        return;
    };
    crate::persist::rdb::supersede_running_save(ctx.server);
    ctx.server.repl.diskless.abort_running();
    let flushed = (0..ctx.server.keyspace.databases())
        .map(|db| ctx.keys.flush_db(db))
        .collect();
    let all: Vec<usize> = (0..ctx.server.keyspace.databases()).collect();
    crate::exec::blocking::signal_waited(ctx, &all);
    // Redis counts one change more than the keys removed, so that even an
    // empty FLUSHALL counts as a change.
    ctx.dirty += free_flushed(ctx, flushed, lazy) + 1;
    crate::persist::rdb::save_after_flushall(ctx.server, ctx.dirty);
    invalidate_all(ctx);
    ctx.out.ok();
}

/// SWAPDB index1 index2: exchanges the contents of two databases, so that
/// clients connected to one see the other's keys.
fn swapdb(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let mut ids = [0usize; 2];
    let mut out_of_range = false;
    for (slot, (arg, which)) in ids
        .iter_mut()
        .zip([(args.get(1), "first"), (args.get(2), "second")])
    {
        let Some(Ok(id)) = parse_i32(arg) else {
            return ctx.out.error(&format!("ERR invalid {which} DB index"));
        };
        match usize::try_from(id) {
            Ok(id) if id < ctx.server.keyspace.databases() => *slot = id,
            _ => out_of_range = true,
        }
    }
    if out_of_range {
        return ctx.out.error(errors::DB_RANGE);
    }
    if ids[0] != ids[1] {
        ctx.keys.swap_db(ids[0], ids[1]);
        crate::exec::blocking::signal_waited(ctx, &ids);
    }
    ctx.dirty += 1;
    ctx.out.ok();
}

/// Looks up OBJECT's key without recording an access (nor a `keymiss`
/// event, as in Redis); replies null and returns None when it is missing.
fn object_entry<'k>(ctx: &'k mut Ctx<'_>, args: Args<'_>) -> Option<&'k mut Entry> {
    let entry = ctx.keys.get_read_unreported(ctx.db, args.get(2));
    if entry.is_none() {
        ctx.out.null();
    }
    entry
}

/// The maxmemory policy selects LFU eviction (`allkeys-lfu`, `volatile-lfu`).
fn lfu_policy(ctx: &Ctx<'_>) -> bool {
    ctx.server.config.maxmemory_policy().ends_with("-lfu")
}

/// OBJECT ENCODING key: the internal representation of the value (`int`,
/// `embstr`, `raw`, …), null if the key is missing.
fn object_encoding(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if let Some(e) = object_entry(ctx, args) {
        let name = e.value().encoding_name();
        ctx.out.bulk(name.as_bytes());
    }
}

/// OBJECT FREQ key: the key's logarithmic access counter after decay; an
/// error unless the maxmemory policy is an LFU one.
fn object_freq(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let now = ctx.keys.now();
    let decay = ctx.server.keyspace.lfu_tuning().decay_minutes;
    let Some(freq) = object_entry(ctx, args).map(|e| e.lfu_freq(now, decay)) else {
        return;
    };
    if !lfu_policy(ctx) {
        return ctx.out.error(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when \
             switching between policies at runtime LRU and LFU data will take some time to adjust.",
        );
    }
    ctx.out.int(i64::from(freq));
}

/// OBJECT IDLETIME key: seconds since the key was last accessed; an error
/// under an LFU maxmemory policy, as in Redis (Vireo tracks both, but keeps
/// Redis's replies).
fn object_idletime(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let now = ctx.keys.now();
    let Some(idle) = object_entry(ctx, args).map(|e| e.idle_secs(now)) else {
        return;
    };
    if lfu_policy(ctx) {
        return ctx.out.error(
            "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching \
             between policies at runtime LRU and LFU data will take some time to adjust.",
        );
    }
    ctx.out.int(i64::try_from(idle).unwrap_or(i64::MAX));
}

/// Redis shares one object among all keys holding an integer in this range
/// (unless maxmemory evicts by LRU/LFU, which needs per-key metadata).
const SHARED_INTEGERS: std::ops::Range<i64> = 0..10_000;

/// The reference count Redis gives to shared objects.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// OBJECT REFCOUNT key: how many references the value has. Vireo never
/// shares values, so this is 1, except that integers Redis would store as
/// shared objects (0..=9999, when maxmemory is off or does not evict by
/// LRU/LFU) report Redis's shared count, 2147483647, as clients and tests
/// expect.
fn object_refcount(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(small_int) = object_entry(ctx, args).map(
        |e| matches!(e.value(), ValueRef::Str(StrRef::Int(n)) if SHARED_INTEGERS.contains(&n)),
    ) else {
        return;
    };
    let config = &ctx.server.config;
    let policy = config.maxmemory_policy();
    let shared = config.maxmemory() == 0 || !(policy.ends_with("-lru") || policy.ends_with("-lfu"));
    ctx.out.int(if small_int && shared {
        SHARED_REFCOUNT
    } else {
        1
    });
}

/// OBJECT HELP: lists the OBJECT subcommands.
fn object_help(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    reply_help(
        ctx,
        "OBJECT",
        &[
            "ENCODING <key>",
            "    Return the internal encoding of the value stored at <key>.",
            "FREQ <key>",
            "    Return the logarithmic access frequency counter of <key> (LFU policies only).",
            "IDLETIME <key>",
            "    Return the number of seconds since <key> was last accessed (not under LFU policies).",
            "REFCOUNT <key>",
            "    Return the reference count of the value stored at <key>.",
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int32_arguments() {
        assert_eq!(parse_i32(b"7"), Some(Ok(7)));
        assert_eq!(parse_i32(b"-2147483648"), Some(Ok(i32::MIN)));
        assert_eq!(parse_i32(b"2147483648"), Some(Err(())));
        assert_eq!(parse_i32(b"x"), None);
    }

    #[test]
    fn table_entries() {
        let t = super::super::table();
        let obj = t.lookup(b"object").unwrap().spec;
        assert_eq!(t.lookup_sub(obj, b"freq").unwrap().spec.name, "object|freq");
        assert!(t.lookup(b"unlink").unwrap().spec.has(FAST));
        assert!(t.lookup(b"flushall").unwrap().spec.has(WRITE));
    }
}
