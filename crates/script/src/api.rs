//! The `redis` table scripts see, and Redis's `math.random`.
//!
//! Every function keeps Redis 7.0's argument checks and error texts
//! (`script_lua.c`, `eval.c`): errors raised as tables (`{err="ERR ..."}`)
//! where Redis uses `luaPushError`, as strings where it uses `luaL_error`.

use crate::host::{with_run, HostPtr, LogLevel, ReplFlags, SharedRun};
use crate::luaerr::{self, raise_table};
use crate::vm::VmKind;
use mlua::{Lua, MultiValue, Result, Table, Value, Variadic};
use vireo_resp::Protocol;

/// `redis.REDIS_VERSION`.
pub const REDIS_VERSION: &str = "7.0.15";
/// `redis.REDIS_VERSION_NUM` (`0x00MMmmpp`).
pub const REDIS_VERSION_NUM: u32 = 0x00_07_00_0f;

/// Builds the `redis` table of a VM of `kind` whose run state is `run`
/// (the one in its app data).
pub(crate) fn redis_table(lua: &Lua, kind: VmKind, run: &SharedRun) -> Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("call", crate::call::create(lua, run, true)?)?;
    t.raw_set("pcall", crate::call::create(lua, run, false)?)?;
    register_log(lua, &t)?;
    register_version(&t)?;
    t.raw_set("setresp", lua.create_function(setresp)?)?;
    t.raw_set("sha1hex", lua.create_function(sha1hex)?)?;
    t.raw_set("error_reply", lua.create_function(error_reply)?)?;
    t.raw_set("status_reply", lua.create_function(status_reply)?)?;
    t.raw_set("set_repl", lua.create_function(set_repl)?)?;
    for (name, value) in [
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        t.raw_set(name, value)?;
    }
    t.raw_set("acl_check_cmd", lua.create_function(acl_check_cmd)?)?;
    if kind == VmKind::Eval {
        // Outside a SCRIPT DEBUG session breakpoint returns false and
        // debug does nothing.
        t.raw_set(
            "breakpoint",
            lua.create_function(|lua, _: MultiValue| Ok(crate::ldb::breakpoint(lua)))?,
        )?;
        t.raw_set(
            "debug",
            lua.create_function(|lua, args: MultiValue| {
                crate::ldb::debug(lua, &args);
                Ok(())
            })?,
        )?;
        t.raw_set(
            "replicate_commands",
            lua.create_function(|_, _: MultiValue| Ok(true))?,
        )?;
    }
    Ok(t)
}

/// `redis.log` and the `LOG_*` levels.
pub(crate) fn register_log(lua: &Lua, t: &Table) -> Result<()> {
    t.raw_set("log", lua.create_function(log)?)?;
    for (name, value) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
    ] {
        t.raw_set(name, value)?;
    }
    Ok(())
}

/// `REDIS_VERSION` and `REDIS_VERSION_NUM`.
pub(crate) fn register_version(t: &Table) -> Result<()> {
    t.raw_set("REDIS_VERSION_NUM", REDIS_VERSION_NUM)?;
    t.raw_set("REDIS_VERSION", REDIS_VERSION)
}

/// The running host, or a raised `<what> can only be called inside a
/// script invocation`.
fn running_host(lua: &Lua, what: &str) -> Result<HostPtr> {
    with_run(lua, |s| s.host()).flatten().ok_or_else(|| {
        raise_table(format!("{what} can only be called inside a script invocation").as_bytes())
    })
}

/// `redis.sha1hex(s)`.
fn sha1hex(lua: &Lua, args: Variadic<Value>) -> Result<String> {
    if args.len() != 1 {
        return Err(raise_table(b"wrong number of arguments"));
    }
    let _ = lua;
    Ok(crate::sha1_hex(
        &luaerr::to_bytes(args.first()).unwrap_or_default(),
    ))
}

/// The single string argument of `error_reply`/`status_reply`, or
/// Redis's error table (returned, not raised).
fn single_string(lua: &Lua, args: &[Value]) -> Result<std::result::Result<mlua::String, Value>> {
    match args {
        [Value::String(s)] => Ok(Ok(s.clone())),
        _ => {
            let err = raise_table(b"wrong number or type of arguments");
            Ok(Err(luaerr::normalize(lua, Value::Error(Box::new(err)))?))
        }
    }
}

/// `redis.error_reply(msg)`: `{err=msg}` with Redis's code rules.
fn error_reply(lua: &Lua, args: Variadic<Value>) -> Result<Value> {
    let s = match single_string(lua, &args)? {
        Ok(s) => s,
        Err(e) => return Ok(e),
    };
    let bytes = s.as_bytes();
    let text = if bytes.starts_with(b"-") {
        bytes.to_vec()
    } else {
        [b"-", &bytes[..]].concat()
    };
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(luaerr::error_table_text(&text))?)?;
    Ok(Value::Table(t))
}

/// `redis.status_reply(msg)`: `{ok=msg}`.
fn status_reply(lua: &Lua, args: Variadic<Value>) -> Result<Value> {
    match single_string(lua, &args)? {
        Ok(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", s)?;
            Ok(Value::Table(t))
        }
        Err(e) => Ok(e),
    }
}

/// `redis.log(level, ...)`.
fn log(lua: &Lua, args: Variadic<Value>) -> Result<()> {
    if args.len() < 2 {
        return Err(raise_table(b"redis.log() requires two arguments or more."));
    }
    let Some(level) = luaerr::to_number(lua, args.first()) else {
        return Err(raise_table(b"First argument must be a number (log level)."));
    };
    let Some(level) = LogLevel::from_number(luaerr::c_double_to_i64(level) as i32 as i64) else {
        return Err(raise_table(b"Invalid debug level."));
    };
    let mut line = Vec::new();
    for (j, arg) in args.iter().enumerate().skip(1) {
        if let Some(bytes) = luaerr::to_bytes(Some(arg)) {
            if j != 1 {
                line.push(b' ');
            }
            line.extend_from_slice(&bytes);
        }
    }
    if let Some(host) = with_run(lua, |s| s.host()).flatten() {
        host.with(|h| h.log(level, &line));
    }
    Ok(())
}

/// `redis.setresp(2|3)`.
fn setresp(lua: &Lua, args: Variadic<Value>) -> Result<()> {
    running_host(lua, "redis.setresp")?;
    if args.len() != 1 {
        return Err(raise_table(b"redis.setresp() requires one argument."));
    }
    let resp =
        luaerr::to_number(lua, args.first()).map_or(0, |n| luaerr::c_double_to_i64(n) as i32);
    let proto = match resp {
        2 => Protocol::Resp2,
        3 => Protocol::Resp3,
        _ => return Err(raise_table(b"RESP version must be 2 or 3.")),
    };
    with_run(lua, |s| s.resp = proto);
    Ok(())
}

/// `redis.set_repl(flags)`.
fn set_repl(lua: &Lua, args: Variadic<Value>) -> Result<()> {
    let host = running_host(lua, "redis.set_repl")?;
    if args.len() != 1 {
        return Err(raise_table(b"redis.set_repl() requires two arguments."));
    }
    let flags =
        luaerr::to_number(lua, args.first()).map_or(0, |n| luaerr::c_double_to_i64(n) as i32);
    if flags & !3 != 0 {
        return Err(raise_table(
            b"Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
        ));
    }
    host.with(|h| {
        h.set_repl(ReplFlags {
            aof: flags & 1 != 0,
            replicas: flags & 2 != 0,
        })
    });
    Ok(())
}

/// `redis.acl_check_cmd(cmd, ...)`.
fn acl_check_cmd(lua: &Lua, args: Variadic<Value>) -> Result<bool> {
    let host = running_host(lua, "redis.acl_check_cmd")?;
    if args.is_empty() {
        return Err(raise_table(
            b"Please specify at least one argument for this redis lib call",
        ));
    }
    let mut packed = crate::host::ArgBuf::default();
    for arg in args.iter() {
        match arg {
            Value::Number(n) => packed.push_number(*n),
            Value::Integer(i) => packed.push_number(*i as f64),
            Value::String(s) => packed.push_bytes(&s.as_bytes()),
            _ => {
                return Err(raise_table(
                    b"Lua redis lib command arguments must be strings or integers",
                ))
            }
        }
    }
    match host.with(|h| h.acl_check(packed.args())) {
        Some(allowed) => Ok(allowed),
        None => Err(raise_table(
            b"Invalid command passed to redis.acl_check_cmd()",
        )),
    }
}

/// Replaces `math.random`/`math.randomseed` with Redis's, which draw from
/// the per-run [`crate::rand48::Rand48`].
pub(crate) fn replace_math_random(lua: &Lua) -> Result<()> {
    let math: Table = lua.globals().raw_get("math")?;
    math.raw_set("random", lua.create_function(math_random)?)?;
    math.raw_set("randomseed", lua.create_function(math_randomseed)?)?;
    Ok(())
}

/// Draws the next PRNG value, or Redis's error outside a script run.
fn next_random(lua: &Lua) -> Result<f64> {
    let max = crate::rand48::RAND48_MAX;
    let drawn = with_run(lua, |s| s.running().then(|| s.rng.next() % max)).flatten();
    match drawn {
        Some(r) => Ok(f64::from(r) / f64::from(max)),
        None => Err(luaerr::lua_error(
            lua,
            "math.random can only be called inside a script invocation",
        )),
    }
}

/// Redis's `math.random([m [, n]])`.
fn math_random(lua: &Lua, args: Variadic<Value>) -> Result<f64> {
    let r = next_random(lua)?;
    match args.len() {
        0 => Ok(r),
        1 => {
            let u = luaerr::check_int(lua, &args, 1)?;
            if u < 1 {
                return Err(luaerr::arg_error(lua, 1, "interval is empty"));
            }
            Ok((r * f64::from(u)).floor() + 1.0)
        }
        2 => {
            let l = luaerr::check_int(lua, &args, 1)?;
            let u = luaerr::check_int(lua, &args, 2)?;
            if l > u {
                return Err(luaerr::arg_error(lua, 2, "interval is empty"));
            }
            Ok((r * (f64::from(u) - f64::from(l) + 1.0)).floor() + f64::from(l))
        }
        _ => Err(luaerr::lua_error(lua, "wrong number of arguments")),
    }
}

/// Redis's `math.randomseed(n)`.
fn math_randomseed(lua: &Lua, args: Variadic<Value>) -> Result<()> {
    let running = with_run(lua, |s| s.running()).unwrap_or(false);
    if !running {
        return Err(luaerr::lua_error(
            lua,
            "math.randomseed can only be called inside a script invocation",
        ));
    }
    let seed = luaerr::check_int(lua, &args, 1)?;
    with_run(lua, |s| s.rng.seed(seed));
    Ok(())
}
