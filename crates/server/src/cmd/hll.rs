//! HyperLogLog commands (Redis's `hyperloglog.c`): PFADD, PFCOUNT, PFMERGE,
//! PFDEBUG and PFSELFTEST.
//!
//! An HLL is an ordinary string value in Redis's exact byte format
//! ([`vireo_store::hll`] owns the format and the algorithms), so TYPE says
//! `string` and GET, SET, DUMP/RESTORE and the RDB carry it unchanged.
//! Commands change the stored bytes in place, as Redis does: PFCOUNT of one
//! key rewrites the cached cardinality in the header when it was stale,
//! which makes that read-only command a write for propagation (the change
//! is counted as dirty and the key signalled, so it goes to the AOF as
//! executed); PFDEBUG GETREG and TODENSE count their encoding change the
//! same way. A value that is not a valid HLL gets Redis's `WRONGTYPE Key is
//! not a valid HyperLogLog string value.`, a corrupt sparse one its
//! `INVALIDOBJ` error; neither ever panics.

use vireo_resp::Args;
use vireo_store::hll::{self, HllError, Union};
use vireo_store::{Keys, StrRef, StrValue, Value, ValueRef};

use crate::exec::notify::class as ev;

use super::{errors, flags::*, is, spec, text, CommandSpec, Ctx, KeySpec, ALL_ARGS_KEYS, KEY1};

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec("pfadd", -2, WRITE | DENYOOM | FAST, KEY1, pfadd),
    spec(
        "pfcount",
        -2,
        READONLY | MAY_REPLICATE,
        ALL_ARGS_KEYS,
        pfcount,
    ),
    spec(
        "pfdebug",
        3,
        WRITE | DENYOOM | ADMIN,
        KeySpec::Range {
            first: 2,
            last: 2,
            step: 1,
        },
        pfdebug,
    ),
    spec("pfmerge", -2, WRITE | DENYOOM, ALL_ARGS_KEYS, pfmerge),
    spec("pfselftest", 1, ADMIN, KeySpec::None, pfselftest),
];

/// Checks that a value is an HLL (Redis's `isHLLObjectOrReply`): the error
/// reply when it is not. Integer-encoded strings are too short to be one.
fn check_hll(value: ValueRef<'_>) -> Result<(), &'static str> {
    match value {
        ValueRef::Str(StrRef::Bytes { data, .. }) => {
            hll::validate(data).map(drop).map_err(|e| e.message())
        }
        ValueRef::Str(StrRef::Int(_)) => Err(HllError::NotHll.message()),
        _ => Err(errors::WRONGTYPE),
    }
}

/// The HLL at `key` for reading (counting a keyspace hit or miss): None
/// when missing, Err with the reply when it is not an HLL.
fn read_hll<'k>(
    keys: &'k mut Keys<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'k [u8]>, &'static str> {
    let Some(entry) = keys.get_read(db, key) else {
        return Ok(None);
    };
    let value = entry.value();
    check_hll(value)?;
    match value {
        ValueRef::Str(StrRef::Bytes { data, .. }) => Ok(Some(data)),
        _ => Err(HllError::NotHll.message()),
    }
}

/// The HLL at `key` for changing in place: None when missing, Err with
/// the reply when it is not an HLL. Like Redis's `dbUnshareStringValue`,
/// a valid HLL becomes a `raw` string.
fn write_hll<'k>(
    keys: &'k mut Keys<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'k mut Vec<u8>>, &'static str> {
    let Some(entry) = keys.get_mut(db, key) else {
        return Ok(None);
    };
    check_hll(entry.value())?;
    entry
        .str_mut()
        .map(|s| Some(s.bytes_mut()))
        .ok_or(errors::WRONGTYPE)
}

/// A new HLL value as Redis creates it (a `raw` string).
fn hll_value(bytes: Vec<u8>) -> Value {
    Value::Str(StrValue::Bytes {
        data: bytes,
        raw: true,
    })
}

/// `hll-sparse-max-bytes`.
fn sparse_max_bytes(ctx: &Ctx<'_>) -> usize {
    ctx.server.config.hot.hll_sparse_max_bytes()
}

/// PFADD key [element ...]: adds the elements, creating the key when
/// missing; replies 1 if a register changed (or the key was created).
fn pfadd(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    let max = sparse_max_bytes(ctx);
    let elements = args.iter().skip(2);
    let changed = match write_hll(&mut ctx.keys, ctx.db, key) {
        Err(msg) => return ctx.out.error(msg),
        Ok(None) => {
            let value = hll::pfadd_new(elements, max);
            ctx.keys.set(ctx.db, key, hll_value(value));
            true
        }
        // On a corrupt value the registers set so far stay set, unsignalled,
        // as in Redis.
        Ok(Some(bytes)) => match hll::pfadd(bytes, elements, max) {
            Ok(changed) => changed,
            Err(e) => return ctx.out.error(e.message()),
        },
    };
    if changed {
        ctx.modified(key);
        ctx.notify(ev::STRING, "pfadd", key);
    }
    ctx.out.int(i64::from(changed));
}

/// PFCOUNT key [key ...]: the estimated cardinality of one HLL (cached in
/// its header) or of the union of several (nothing is written then).
/// Missing keys count as empty HLLs.
fn pfcount(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if args.len() > 2 {
        return match union_of(ctx, args.iter().skip(1)) {
            Ok(union) => ctx.out.int(union.cardinality() as i64),
            Err(msg) => ctx.out.error(msg),
        };
    }
    let key = args.get(1);
    // Redis looks the key up for reading (hit and miss statistics), then
    // takes it for writing to refresh the cache.
    if ctx.keys.get_read(ctx.db, key).is_none() {
        return ctx.out.int(0);
    }
    let counted = match write_hll(&mut ctx.keys, ctx.db, key) {
        Ok(Some(bytes)) => hll::count(bytes).map_err(|e| e.message()),
        Ok(None) => return ctx.out.int(0),
        Err(msg) => Err(msg),
    };
    match counted {
        Ok(count) => {
            if count.cache_updated {
                ctx.modified(key);
            }
            ctx.out.int(count.cardinality as i64);
        }
        Err(msg) => ctx.out.error(msg),
    }
}

/// The union of the HLLs at `keys` (missing keys are empty), or the error
/// reply for the first key that is not a valid HLL.
fn union_of<'a>(
    ctx: &mut Ctx<'_>,
    keys: impl Iterator<Item = &'a [u8]>,
) -> Result<Union, &'static str> {
    let mut union = Union::new();
    for key in keys {
        if let Some(bytes) = read_hll(&mut ctx.keys, ctx.db, key)? {
            union.merge(bytes).map_err(|e| e.message())?;
        }
    }
    Ok(union)
}

/// PFMERGE destkey [sourcekey ...]: stores the union of the destination
/// and the sources at the destination (created when missing); replies OK.
fn pfmerge(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let dest = args.get(1);
    let union = match union_of(ctx, args.iter().skip(1)) {
        Ok(union) => union,
        Err(msg) => return ctx.out.error(msg),
    };
    let max = sparse_max_bytes(ctx);
    let stored = match write_hll(&mut ctx.keys, ctx.db, dest) {
        Ok(Some(bytes)) => union.store_into(bytes, max).map_err(|e| e.message()),
        Ok(None) => {
            let mut bytes = hll::new_hll();
            let stored = union.store_into(&mut bytes, max);
            ctx.keys.set(ctx.db, dest, hll_value(bytes));
            stored.map_err(|e| e.message())
        }
        Err(msg) => Err(msg),
    };
    match stored {
        Ok(()) => {
            ctx.modified(dest);
            // Redis's event for a merge, a mass PFADD.
            ctx.notify(ev::STRING, "pfadd", dest);
            ctx.out.ok();
        }
        Err(msg) => ctx.out.error(msg),
    }
}

/// PFDEBUG <GETREG|DECODE|ENCODING|TODENSE> key: the registers, the sparse
/// opcodes as text, the encoding's name, or a conversion to dense (1 if it
/// was sparse). Conversions count as changes so they propagate.
fn pfdebug(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let (sub, key) = (args.get(1), args.get(2));
    let bytes = match write_hll(&mut ctx.keys, ctx.db, key) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return ctx.out.error("ERR The specified key does not exist"),
        Err(msg) => return ctx.out.error(msg),
    };
    let out = &mut *ctx.out;
    if is(sub, "getreg") {
        let registers = hll::to_dense(bytes).and_then(|converted| {
            ctx.dirty += u64::from(converted);
            hll::register_values(bytes)
        });
        match registers {
            Ok(registers) => {
                out.array(registers.len());
                for r in registers {
                    out.int(i64::from(r));
                }
            }
            Err(e) => out.error(e.message()),
        }
    } else if is(sub, "decode") {
        match hll::decode_sparse(bytes) {
            Ok(text) => out.bulk(text.as_bytes()),
            Err(e) => out.error(e.message()),
        }
    } else if is(sub, "encoding") {
        match hll::validate(bytes) {
            Ok(encoding) => out.simple(encoding.name()),
            Err(e) => out.error(e.message()),
        }
    } else if is(sub, "todense") {
        match hll::to_dense(bytes) {
            Ok(converted) => {
                ctx.dirty += u64::from(converted);
                out.int(i64::from(converted));
            }
            Err(e) => out.error(e.message()),
        }
    } else {
        out.error(&format!("ERR Unknown PFDEBUG subcommand '{}'", text(sub)));
    }
}

/// PFSELFTEST: checks the register access and the estimator's error on
/// ten million random elements; replies OK or Redis's `TESTFAILED` error.
fn pfselftest(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    match hll::selftest(sparse_max_bytes(ctx), fastrand::u64(..)) {
        Ok(()) => ctx.out.ok(),
        Err(msg) => ctx.out.error(&msg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_valid_hll_strings_pass_the_check() {
        let hll = hll::new_hll();
        let ok = ValueRef::Str(StrRef::Bytes {
            data: &hll,
            raw: false,
        });
        assert_eq!(check_hll(ok), Ok(()));
        let short = ValueRef::Str(StrRef::Bytes {
            data: b"HYLL",
            raw: false,
        });
        assert_eq!(check_hll(short), Err(HllError::NotHll.message()));
        assert_eq!(
            check_hll(ValueRef::Str(StrRef::Int(7))),
            Err(HllError::NotHll.message())
        );
    }

    #[test]
    fn command_flags_follow_redis() {
        let find = |name: &str| COMMANDS.iter().find(|c| c.name == name).unwrap();
        assert!(find("pfcount").has(READONLY) && find("pfcount").has(MAY_REPLICATE));
        assert!(find("pfdebug").has(ADMIN) && find("pfdebug").has(WRITE));
        assert!(find("pfadd").has(FAST));
        assert_eq!(find("pfselftest").arity, 1);
    }
}
