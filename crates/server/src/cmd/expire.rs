//! Key expiry commands (the TTL part of Redis's expire.c and db.c):
//! EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, EXPIRETIME,
//! PEXPIRETIME and PERSIST. Keys whose time has passed are removed lazily
//! by the keyspace on access and actively by the cron.

use crate::exec::notify::class as ev;
use vireo_resp::Args;

use super::{flags::*, is, spec, text, CommandSpec, Ctx, KEY1};

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec("expire", -3, WRITE | FAST, KEY1, expire),
    spec("pexpire", -3, WRITE | FAST, KEY1, pexpire),
    spec("expireat", -3, WRITE | FAST, KEY1, expireat),
    spec("pexpireat", -3, WRITE | FAST, KEY1, pexpireat),
    spec("ttl", 2, READONLY | FAST, KEY1, ttl),
    spec("pttl", 2, READONLY | FAST, KEY1, pttl),
    spec("expiretime", 2, READONLY | FAST, KEY1, expiretime),
    spec("pexpiretime", 2, READONLY | FAST, KEY1, pexpiretime),
    spec("persist", 2, WRITE | FAST, KEY1, persist),
];

/// How one of the EXPIRE commands reads its time argument.
struct ExpireForm {
    /// The command name, for the overflow error.
    name: &'static str,
    /// Milliseconds per unit of the argument.
    unit_ms: i64,
    /// The argument is relative to now (EXPIRE, PEXPIRE) rather than a Unix
    /// time (EXPIREAT, PEXPIREAT).
    relative: bool,
}

/// EXPIRE key seconds [NX|XX|GT|LT]: sets a TTL in seconds; replies 1 if
/// set, 0 if the key is missing or the condition failed. A time already
/// past deletes the key.
fn expire(ctx: &mut Ctx<'_>, args: Args<'_>) {
    expire_generic(
        ctx,
        args,
        &ExpireForm {
            name: "expire",
            unit_ms: 1000,
            relative: true,
        },
    );
}

/// PEXPIRE key milliseconds [NX|XX|GT|LT]: EXPIRE with a TTL in
/// milliseconds.
fn pexpire(ctx: &mut Ctx<'_>, args: Args<'_>) {
    expire_generic(
        ctx,
        args,
        &ExpireForm {
            name: "pexpire",
            unit_ms: 1,
            relative: true,
        },
    );
}

/// EXPIREAT key unix-time-seconds [NX|XX|GT|LT]: EXPIRE with an absolute
/// Unix time in seconds.
fn expireat(ctx: &mut Ctx<'_>, args: Args<'_>) {
    expire_generic(
        ctx,
        args,
        &ExpireForm {
            name: "expireat",
            unit_ms: 1000,
            relative: false,
        },
    );
}

/// PEXPIREAT key unix-time-milliseconds [NX|XX|GT|LT]: EXPIRE with an
/// absolute Unix time in milliseconds.
fn pexpireat(ctx: &mut Ctx<'_>, args: Args<'_>) {
    expire_generic(
        ctx,
        args,
        &ExpireForm {
            name: "pexpireat",
            unit_ms: 1,
            relative: false,
        },
    );
}

/// The NX / XX / GT / LT conditions of the EXPIRE commands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Conditions {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl Conditions {
    /// Parses the options after the time argument; Err is the error reply.
    fn parse(args: Args<'_>) -> Result<Conditions, String> {
        let mut c = Conditions::default();
        for opt in args.iter().skip(3) {
            if is(opt, "nx") {
                c.nx = true;
            } else if is(opt, "xx") {
                c.xx = true;
            } else if is(opt, "gt") {
                c.gt = true;
            } else if is(opt, "lt") {
                c.lt = true;
            } else {
                return Err(format!("ERR Unsupported option {}", text(opt)));
            }
        }
        if c.nx && (c.xx || c.gt || c.lt) {
            return Err(
                "ERR NX and XX, GT or LT options at the same time are not compatible".into(),
            );
        }
        if c.gt && c.lt {
            return Err("ERR GT and LT options at the same time are not compatible".into());
        }
        Ok(c)
    }

    /// True if a new expiry `when` may replace `current` (None: the key is
    /// persistent, which GT and LT treat as an infinite TTL).
    fn allow(self, current: Option<i64>, when: i64) -> bool {
        match current {
            None => !self.xx && !self.gt,
            Some(cur) => !(self.nx || (self.gt && when <= cur) || (self.lt && when >= cur)),
        }
    }
}

/// The absolute expiry time in Unix ms for `value` in `form`'s unit, or
/// None if computing it overflows.
fn expire_time_ms(form: &ExpireForm, value: i64, now_ms: i64) -> Option<i64> {
    let ms = value.checked_mul(form.unit_ms)?;
    if form.relative {
        ms.checked_add(now_ms)
    } else {
        Some(ms)
    }
}

fn expire_generic(ctx: &mut Ctx<'_>, args: Args<'_>, form: &ExpireForm) {
    let key = args.get(1);
    let cond = match Conditions::parse(args) {
        Ok(c) => c,
        Err(e) => return ctx.out.error(&e),
    };
    let Some(value) = ctx.int_arg(args.get(2)) else {
        return;
    };
    let now = i64::try_from(ctx.keys.now()).unwrap_or(i64::MAX);
    let Some(when) = expire_time_ms(form, value, now) else {
        return ctx.out.error(&format!(
            "ERR invalid expire time in '{}' command",
            form.name
        ));
    };
    let Some(entry) = ctx.keys.get_mut(ctx.db, key) else {
        return ctx.out.int(0);
    };
    let current = entry
        .expire_at()
        .map(|t| i64::try_from(t).unwrap_or(i64::MAX));
    if !cond.allow(current, when) {
        return ctx.out.int(0);
    }
    let mut event = "del";
    // Redis's `checkAlreadyExpired`: a time already reached deletes the
    // key, except while loading the AOF, from a replica's master and on a
    // replica, where the key keeps the past TTL until a DEL says otherwise.
    let keep_past = ctx.keys.ttl_blind() || ctx.server.repl.is_replica();
    match u64::try_from(when) {
        Ok(at) if when > now || keep_past => {
            event = "expire";
            ctx.keys.set_expire(ctx.db, key, at);
            // Propagated as an absolute time, options kept.
            let opts: Vec<&[u8]> = args.iter().skip(3).collect();
            ctx.propagate_pexpireat(key, at, &opts);
        }
        // A time already reached deletes the key: a write like DEL.
        _ => {
            ctx.keys.delete_expired(ctx.db, key);
            let lazy = ctx.server.config.lazyfree_lazy_expire();
            ctx.propagate_del(key, lazy);
        }
    }
    ctx.modified(key);
    ctx.notify(ev::GENERIC, event, key);
    ctx.out.int(1);
}

/// TTL key: remaining time to live in seconds (rounded to the nearest), -1
/// if the key has no TTL, -2 if it does not exist.
fn ttl(ctx: &mut Ctx<'_>, args: Args<'_>) {
    ttl_generic(ctx, args, false, false);
}

/// PTTL key: TTL in milliseconds.
fn pttl(ctx: &mut Ctx<'_>, args: Args<'_>) {
    ttl_generic(ctx, args, true, false);
}

/// EXPIRETIME key: the absolute Unix time in seconds at which the key
/// expires, -1 if it has no TTL, -2 if it does not exist.
fn expiretime(ctx: &mut Ctx<'_>, args: Args<'_>) {
    ttl_generic(ctx, args, false, true);
}

/// PEXPIRETIME key: EXPIRETIME in milliseconds.
fn pexpiretime(ctx: &mut Ctx<'_>, args: Args<'_>) {
    ttl_generic(ctx, args, true, true);
}

/// Milliseconds to whole seconds, rounding half up as Redis does.
fn ms_to_secs_rounded(ms: u64) -> u64 {
    ms / 1000 + u64::from(ms % 1000 >= 500)
}

fn ttl_generic(ctx: &mut Ctx<'_>, args: Args<'_>, millis: bool, absolute: bool) {
    // Inspecting a TTL is not an access to the key.
    let Some(entry) = ctx.keys.get_read_no_touch(ctx.db, args.get(1)) else {
        return ctx.out.int(-2);
    };
    let Some(at) = entry.expire_at() else {
        return ctx.out.int(-1);
    };
    // What is left counts from the clock now, not from the transaction's
    // frozen time the lookup used (Redis reads mstime() here): inside a
    // MULTI that slept past the expiry, PTTL is 0 while GET still finds
    // the key.
    let ms = if absolute {
        at
    } else {
        at.saturating_sub(vireo_store::clock::now_ms())
    };
    let v = if millis { ms } else { ms_to_secs_rounded(ms) };
    ctx.out.int(i64::try_from(v).unwrap_or(i64::MAX));
}

/// PERSIST key: removes the key's TTL; replies 1 if it had one, 0 if not or
/// if the key does not exist.
fn persist(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    if ctx.keys.get_mut(ctx.db, key).is_some() && ctx.keys.persist(ctx.db, key) {
        ctx.modified(key);
        ctx.notify(ev::GENERIC, "persist", key);
        ctx.out.int(1);
    } else {
        ctx.out.int(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vireo_resp::OwnedArgs;

    fn parse(opts: &[&str]) -> Result<Conditions, String> {
        let mut all = vec!["expire", "k", "10"];
        all.extend_from_slice(opts);
        let owned = OwnedArgs::from_slices(all);
        Conditions::parse(owned.as_args())
    }

    #[test]
    fn option_combinations() {
        assert_eq!(parse(&[]), Ok(Conditions::default()));
        assert!(parse(&["xx", "GT"]).is_ok());
        assert!(parse(&["nx", "nx"]).is_ok());
        assert_eq!(parse(&["foo"]), Err("ERR Unsupported option foo".into()));
        for bad in [["nx", "xx"], ["gt", "nx"], ["nx", "lt"]] {
            assert!(parse(&bad)
                .unwrap_err()
                .starts_with("ERR NX and XX, GT or LT"));
        }
        assert!(parse(&["gt", "lt"])
            .unwrap_err()
            .starts_with("ERR GT and LT"));
    }

    #[test]
    fn conditions_treat_persistent_as_infinite() {
        let c = |o: &[&str]| parse(o).unwrap();
        assert!(c(&[]).allow(None, 5) && c(&[]).allow(Some(1), 5));
        assert!(c(&["nx"]).allow(None, 5) && !c(&["nx"]).allow(Some(1), 5));
        assert!(!c(&["xx"]).allow(None, 5) && c(&["xx"]).allow(Some(1), 5));
        assert!(!c(&["gt"]).allow(None, 5));
        assert!(c(&["gt"]).allow(Some(4), 5) && !c(&["gt"]).allow(Some(5), 5));
        assert!(c(&["lt"]).allow(None, 5));
        assert!(c(&["lt"]).allow(Some(6), 5) && !c(&["lt"]).allow(Some(5), 5));
        assert!(!c(&["xx", "lt"]).allow(None, 5));
    }

    #[test]
    fn expire_time_overflow() {
        let secs = ExpireForm {
            name: "expire",
            unit_ms: 1000,
            relative: true,
        };
        assert_eq!(expire_time_ms(&secs, 10, 1_000), Some(11_000));
        assert_eq!(expire_time_ms(&secs, i64::MAX / 1000, 1_000), None);
        assert_eq!(expire_time_ms(&secs, i64::MIN / 1000 - 1, 0), None);
        let abs_ms = ExpireForm {
            name: "pexpireat",
            unit_ms: 1,
            relative: false,
        };
        assert_eq!(expire_time_ms(&abs_ms, i64::MAX, 1_000), Some(i64::MAX));
        assert_eq!(expire_time_ms(&abs_ms, -5, 1_000), Some(-5));
    }

    #[test]
    fn ttl_rounding() {
        assert_eq!(ms_to_secs_rounded(1499), 1);
        assert_eq!(ms_to_secs_rounded(1500), 2);
        assert_eq!(ms_to_secs_rounded(0), 0);
        assert_eq!(ms_to_secs_rounded(u64::MAX), u64::MAX / 1000 + 1);
    }
}
