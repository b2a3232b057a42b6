//! The `redis` table scripts see, and Redis's `math.random`.
//!
//! Every function keeps Redis 7.0's argument checks and error texts
//! (`script_lua.c`, `eval.c`): errors raised as tables (`{err="ERR ..."}`)
//! where Redis uses `luaPushError`, as strings where it uses `luaL_error`.

use crate::host::{HostPtr, LogLevel, ReplFlags, RunState};
use crate::luaerr::{self, raise_table, Raise};
use crate::vm::VmKind;
use crate::{convert, Reply};
use mlua::{Lua, MultiValue, Result, Table, Value, Variadic};
use vireo_resp::{Args, Protocol};

/// `redis.REDIS_VERSION`.
pub const REDIS_VERSION: &str = "7.0.15";
/// `redis.REDIS_VERSION_NUM` (`0x00MMmmpp`).
pub const REDIS_VERSION_NUM: u32 = 0x00_07_00_0f;

/// Builds the `redis` table of a VM of `kind`.
pub(crate) fn redis_table(lua: &Lua, kind: VmKind) -> Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "call",
        lua.create_function(|lua, args: Variadic<Value>| redis_call(lua, &args, true))?,
    )?;
    t.raw_set(
        "pcall",
        lua.create_function(|lua, args: Variadic<Value>| redis_call(lua, &args, false))?,
    )?;
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
    lua.app_data_ref::<RunState>()
        .and_then(|s| s.host())
        .ok_or_else(|| {
            raise_table(format!("{what} can only be called inside a script invocation").as_bytes())
        })
}

/// Packs the call's arguments into the run state's scratch buffers
/// (`luaArgsToRedisArgv`): numbers as `%.17g`, strings as they are; any
/// other type is Redis's error.
fn pack_args(lua: &Lua, args: &[Value]) -> Result<()> {
    if args.is_empty() {
        return Err(raise_table(
            b"Please specify at least one argument for this redis lib call",
        ));
    }
    let mut state = lua.app_data_mut::<RunState>().ok_or_else(|| {
        raise_table(b"redis.call/pcall can only be called inside a script invocation")
    })?;
    let state = &mut *state;
    state.arg_bytes.clear();
    state.arg_ranges.clear();
    for arg in args {
        let start = state.arg_bytes.len();
        match arg {
            Value::Number(n) => state
                .arg_bytes
                .extend_from_slice(crate::numfmt::format_g(*n, 17).as_bytes()),
            Value::Integer(i) => state.arg_bytes.extend_from_slice(i.to_string().as_bytes()),
            Value::String(s) => state.arg_bytes.extend_from_slice(&s.as_bytes()),
            _ => {
                return Err(raise_table(
                    b"Lua redis lib command arguments must be strings or integers",
                ))
            }
        }
        state.arg_ranges.push((start, state.arg_bytes.len()));
    }
    Ok(())
}

/// Runs `f` with the packed arguments as [`Args`].
fn with_packed_args<R>(lua: &Lua, f: impl FnOnce(Args<'_>, Protocol) -> R) -> Option<R> {
    let state = lua.app_data_ref::<RunState>()?;
    Some(f(
        Args::new(&state.arg_bytes, &state.arg_ranges),
        state.resp,
    ))
}

/// `redis.call` (`raise`) and `redis.pcall`.
fn redis_call(lua: &Lua, args: &[Value], raise: bool) -> Result<Value> {
    let host = running_host(lua, "redis.call/pcall")?;
    if let Err(e) = pack_args(lua, args) {
        return raise_or_return(lua, e, raise);
    }
    // The run state stays borrowed (shared) while the host runs the command:
    // the host never re-enters this VM.
    let reply = with_packed_args(lua, |args, resp| {
        crate::ldb::log_call(lua, args);
        host.with(|h| h.call(args, resp))
    })
    .unwrap_or_else(|| Reply::Error(b"ERR script run state missing".to_vec()));
    let refused = matches!(reply, Reply::Error(_)) && host.with(|h| h.last_call_refused());
    crate::ldb::log_reply(lua, &reply, refused);
    if let Reply::Error(text) = &reply {
        let mut err = b"-".to_vec();
        err.extend_from_slice(text);
        let e = Raise::Table {
            err: luaerr::error_table_text(&err),
            ignore_stats: true,
        }
        .into_error();
        return raise_or_return(lua, e, raise);
    }
    convert::reply_to_lua(lua, &reply)
}

/// `redis.call` raises its error; `redis.pcall` returns it as a value.
fn raise_or_return(lua: &Lua, err: mlua::Error, raise: bool) -> Result<Value> {
    if raise {
        Err(err)
    } else {
        luaerr::normalize(lua, Value::Error(Box::new(err)))
    }
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
    if let Some(host) = lua.app_data_ref::<RunState>().and_then(|s| s.host()) {
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
    if let Some(mut state) = lua.app_data_mut::<RunState>() {
        state.resp = proto;
    }
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
    pack_args(lua, &args)?;
    match with_packed_args(lua, |args, _| host.with(|h| h.acl_check(args))).flatten() {
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
    let mut state = lua.app_data_mut::<RunState>();
    match state.as_deref_mut() {
        Some(s) if s.running() => {
            let max = crate::rand48::RAND48_MAX;
            Ok(f64::from(s.rng.next() % max) / f64::from(max))
        }
        _ => Err(luaerr::lua_error(
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
    let running = lua.app_data_ref::<RunState>().is_some_and(|s| s.running());
    if !running {
        return Err(luaerr::lua_error(
            lua,
            "math.randomseed can only be called inside a script invocation",
        ));
    }
    let seed = luaerr::check_int(lua, &args, 1)?;
    if let Some(mut state) = lua.app_data_mut::<RunState>() {
        state.rng.seed(seed);
    }
    Ok(())
}
