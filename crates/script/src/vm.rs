//! One sandboxed Lua 5.1 VM, set up as Redis 7.0 sets up its interpreters.
//!
//! Loaded: the base library (minus `print`, `dofile`, `loadfile`,
//! `getfenv`, `setfenv`, `newproxy`), `table`, `string`, `math` (with
//! Redis's `math.random`), `cjson`, `cmsgpack`, `bit`, `struct` and the
//! `redis` table. Then every table reachable from the globals (and the
//! string metatable) is frozen: writing to any of them raises `Attempt to
//! modify a readonly table`, and reading an undefined global raises `Script
//! attempted to access nonexistent global variable '<name>'`.
//!
//! `pcall`, `xpcall` and `coroutine.resume` are thin Lua wrappers (chunk
//! [`INTERNAL_CHUNK`]) that turn errors raised by Rust callbacks back into
//! Redis's values (see `luaerr`); `pcall` returns a `redis.call` error's
//! text instead of its table, as Redis 7.0's `pcall` does.
//!
//! A run ([`Vm::run`]) installs the host, takes up the process's
//! `math.random` generator (`rand48`), calls the
//! function under a message handler that records where the error happened
//! (Redis's `__redis__err__handler`), and writes the result as a reply.

use crate::host::{with_run, Host, RunState, SharedRun};
use crate::luaerr::{self, Raise, INTERNAL_CHUNK};
use crate::{api, bit, cjson, cmsgpack, lstruct};
use mlua::{
    Function, HookTriggers, Lua, LuaOptions, MultiValue, Result, StdLib, Table, Value, VmState,
};
use std::collections::HashSet;
use std::os::raw::c_int;
use vireo_resp::ReplyBuf;

/// Lua instructions between two calls of [`Host::interrupt`] (Redis's
/// count hook period).
pub const HOOK_INSTRUCTIONS: u32 = 100_000;

/// Text of the error a killed script fails with.
pub(crate) const KILLED: &str = "Script killed by user with SCRIPT KILL...";

/// Text of the error a library load that runs too long fails with.
pub(crate) const LOAD_TIMEOUT: &str = "FUNCTION LOAD timeout";

/// Which interpreter a VM is: Redis keeps one for EVAL and one for
/// functions, with slightly different `redis` tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VmKind {
    /// The EVAL interpreter (adds `redis.breakpoint`, `redis.debug`,
    /// `redis.replicate_commands` and the `__redis__err__handler` global).
    Eval,
    /// The FUNCTION interpreter.
    Functions,
}

extern "C-unwind" {
    /// Patched Lua (vendor/lua-src): marks the table at `idx` read-only.
    fn lua_setfrozen(state: *mut mlua::ffi::lua_State, idx: c_int, frozen: c_int);
}

/// Freezes or unfreezes the table on top of the stack.
///
/// # Safety
/// The value at index -1 of `state` must be a table. (`lua_setfrozen`
/// neither allocates nor raises errors.)
pub(crate) unsafe fn set_frozen_raw(state: *mut mlua::ffi::lua_State, frozen: bool) {
    lua_setfrozen(state, -1, c_int::from(frozen));
}

/// Freezes or unfreezes one table.
pub(crate) fn set_frozen(lua: &Lua, table: &Table, frozen: bool) -> Result<()> {
    // SAFETY: `exec_raw` pushes `table` as the only argument, so index -1 is
    // a table, which is all `lua_setfrozen` requires; it neither allocates
    // nor raises errors, and `exec_raw` restores the stack afterwards.
    unsafe { lua.exec_raw::<()>(table, |state| set_frozen_raw(state, frozen)) }
}

/// Freezes `root`, every table reachable from it (values and metatables).
pub(crate) fn freeze_all(lua: &Lua, root: &Table) -> Result<()> {
    let mut seen = HashSet::new();
    let mut todo = vec![root.clone()];
    while let Some(t) = todo.pop() {
        if !seen.insert(t.to_pointer() as usize) {
            continue;
        }
        for pair in t.clone().pairs::<Value, Value>() {
            if let (_, Value::Table(inner)) = pair? {
                todo.push(inner);
            }
        }
        if let Some(mt) = t.metatable() {
            todo.push(mt);
        }
        set_frozen(lua, &t, true)?;
    }
    Ok(())
}

/// A sandboxed interpreter plus the handles a run needs.
pub(crate) struct Vm {
    /// The interpreter.
    pub(crate) lua: Lua,
    /// The message handler every run uses.
    handler: Function,
    /// `runner(handler, f, nargs, ...)`: calls `f` under `xpcall`.
    runner: Function,
    /// Lua heap limit (0: none).
    memory_limit: usize,
}

/// Lua side of the sandbox: wrappers that normalize caught errors, the
/// error handler and the runner. Arguments: raw `pcall`, `xpcall`,
/// `coroutine.resume`, `normalize(err, final)`, `locate()`.
const HELPERS: &str = r#"
local pcall, xpcall, resume, normalize, locate = ...
local type, tostring = type, tostring

local function pcall_tail(ok, ...)
  if ok then return ok, ... end
  local err = normalize((...), false)
  if type(err) == 'table' then
    local text = err.err
    if type(text) == 'string' or type(text) == 'number' then err = text end
  end
  return false, err
end
local function sandbox_pcall(...)
  return pcall_tail(pcall(...))
end

local function xpcall_tail(ok, ...)
  if not ok then normalize(nil, false) end
  return ok, ...
end
local function sandbox_xpcall(f, handler, ...)
  if handler == nil then return xpcall(f) end
  return xpcall_tail(xpcall(f, function(err) return handler(normalize(err, false)) end))
end

local function resume_tail(ok, ...)
  if ok then return ok, ... end
  return false, normalize((...), false)
end
local function sandbox_resume(co, ...)
  return resume_tail(resume(co, ...))
end

local function handler(err)
  err = normalize(err, true)
  local source, line = locate()
  if type(err) ~= 'table' then
    err = {err = 'ERR ' .. tostring(err)}
  end
  if source then
    err['source'] = source
    err['line'] = line
  end
  return err
end

local function runner(h, f, keys, args)
  if keys then
    return xpcall(function() return f(keys, args) end, h)
  end
  return xpcall(f, h)
end

return sandbox_pcall, sandbox_xpcall, sandbox_resume, handler, runner
"#;

impl Vm {
    /// Creates a sandboxed VM. `memory_limit` bounds the Lua heap (0 = no
    /// limit): an allocation beyond it fails the script with `not enough
    /// memory` instead of growing the process.
    pub(crate) fn new(kind: VmKind, memory_limit: usize) -> Result<Vm> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        let run = SharedRun::new(RunState::default().into());
        lua.set_app_data(run.clone());
        let globals = lua.globals();
        for name in [
            "print", "dofile", "loadfile", "getfenv", "setfenv", "newproxy", "module", "require",
            "package",
        ] {
            globals.raw_set(name, Value::Nil)?;
        }
        globals.raw_set("cjson", cjson::open(&lua)?)?;
        globals.raw_set("struct", lstruct::open(&lua)?)?;
        globals.raw_set("cmsgpack", cmsgpack::open(&lua)?)?;
        globals.raw_set("bit", bit::open(&lua)?)?;
        globals.raw_set("redis", api::redis_table(&lua, kind, &run)?)?;
        api::replace_math_random(&lua)?;
        let (handler, runner) = install_helpers(&lua, &globals)?;
        if kind == VmKind::Eval {
            globals.raw_set("__redis__err__handler", handler.clone())?;
        }
        globals.set_metatable(Some(error_metatable(&lua)?));
        freeze_all(&lua, &globals)?;
        let string_meta: Option<Table> = lua
            .load("return getmetatable('')")
            .set_name(INTERNAL_CHUNK)
            .eval()?;
        if let Some(mt) = string_meta {
            freeze_all(&lua, &mt)?;
        }
        install_hook(&lua);
        if memory_limit > 0 {
            lua.set_memory_limit(memory_limit)?;
        }
        Ok(Vm {
            lua,
            handler,
            runner,
            memory_limit,
        })
    }

    /// Switches between the ordinary count hook and the Lua debugger's
    /// line hook (`SCRIPT DEBUG` runs: every line, plus a count event to
    /// catch scripts that run too long without stopping).
    pub(crate) fn set_debug_hook(&self, debugging: bool) {
        if debugging {
            let triggers = HookTriggers::new()
                .every_line()
                .every_nth_instruction(HOOK_INSTRUCTIONS);
            self.lua
                .set_hook(triggers, |lua, debug| crate::ldb::hook(lua, &debug));
        } else {
            install_hook(&self.lua);
        }
    }

    /// Bytes the Lua heap uses.
    pub(crate) fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// Runs `f` for one script invocation and writes its reply to `out`.
    /// With `fn_args`, `f` is called as `f(keys, args)` (FCALL); without, it
    /// is called with no arguments (EVAL sets `KEYS`/`ARGV` itself).
    /// `name` is what error messages call the script (its SHA, or the
    /// function name).
    pub(crate) fn run(
        &self,
        f: &Function,
        fn_args: Option<(Table, Table)>,
        name: &str,
        host: &mut dyn Host,
        out: &mut ReplyBuf,
    ) -> crate::RunResult {
        let _guard = RunGuard::begin(&self.lua, host);
        let result = self.call_protected(f, fn_args);
        let script_resp = with_run(&self.lua, |s| s.resp).unwrap_or_default();
        match result {
            Ok(value) => match value.as_ref().map(error_field) {
                Some(Some(err)) => Err(crate::ScriptError {
                    message: err.0,
                    ignore_stats: err.1,
                }),
                _ => {
                    let mark = out.mark();
                    match crate::convert::write_lua_value(
                        value.unwrap_or(Value::Nil),
                        script_resp,
                        out,
                    ) {
                        Ok(()) => Ok(()),
                        Err(e) => {
                            out.truncate(mark);
                            Err(crate::ScriptError::plain(format!(
                                "ERR {}",
                                luaerr::plain_message(&e)
                            )))
                        }
                    }
                }
            },
            Err(failure) => {
                self.collect_if_near_limit();
                Err(failure.into_error(name))
            }
        }
    }

    /// After a failed run, frees what the script left behind when the heap
    /// is close to its limit: Lua 5.1 does not collect before reporting an
    /// allocation failure, so a script that ran out of memory would
    /// otherwise leave the next one none.
    fn collect_if_near_limit(&self) {
        if self.memory_limit > 0 && self.lua.used_memory() > self.memory_limit / 4 * 3 {
            // The collection itself needs a little memory (mlua calls it
            // through a protected C closure): lift the limit meanwhile.
            let _ = self.lua.set_memory_limit(0);
            let _ = self.lua.gc_collect();
            let _ = self.lua.set_memory_limit(self.memory_limit);
        }
    }

    /// Calls `f` under the error handler; the first result on success.
    fn call_protected(
        &self,
        f: &Function,
        fn_args: Option<(Table, Table)>,
    ) -> std::result::Result<Option<Value>, Failure> {
        let (keys, args) = match fn_args {
            Some((k, a)) => (Value::Table(k), Value::Table(a)),
            None => (Value::Nil, Value::Nil),
        };
        // The heap limit holds while the script's Lua code runs; Rust code
        // (our callbacks, the argument and result conversions) runs with it
        // relaxed, so mlua need not protect each allocation (vendor/mlua's
        // VIREO.md).
        let results: MultiValue = self
            .lua
            .with_memory_limit(|| {
                self.runner
                    .call((self.handler.clone(), f.clone(), keys, args))
            })
            .map_err(|e| Failure::Text(luaerr::plain_message(&e)))?;
        let mut results = results.into_iter();
        match results.next() {
            Some(Value::Boolean(true)) => Ok(results.next()),
            _ => Err(match results.next() {
                Some(Value::Table(t)) => Failure::Table(t),
                Some(Value::String(s)) => Failure::Text(s.to_string_lossy().to_string()),
                Some(other) => Failure::Text(format!("{other:?}")),
                None => Failure::Text("execution failure".to_owned()),
            }),
        }
    }

    /// Runs `f` with no host-visible effects allowed except logging, for
    /// FUNCTION LOAD (the host is still needed for `redis.log`).
    pub(crate) fn run_load(
        &self,
        f: &Function,
        host: &mut dyn Host,
    ) -> std::result::Result<(), String> {
        let _guard = RunGuard::begin(&self.lua, host);
        match self.call_protected(f, None) {
            Ok(_) => Ok(()),
            Err(Failure::Table(t)) => Err(error_info(&t).0),
            Err(Failure::Text(text)) => Err(format!("ERR {text}")),
        }
    }
}

/// How a protected call failed.
enum Failure {
    /// The handler's error table.
    Table(Table),
    /// A failure the handler did not see (out of memory, error in the
    /// handler).
    Text(String),
}

impl Failure {
    /// Redis's reply for a failed script named `name` (`luaCallFunction`).
    fn into_error(self, name: &str) -> crate::ScriptError {
        match self {
            Failure::Text(msg) => {
                let msg: String = msg.chars().take(100).collect();
                crate::ScriptError::plain(format!("Error running script {name}, {msg}"))
            }
            Failure::Table(t) => {
                let (msg, ignore_stats, place) = error_info(&t);
                let message = match place {
                    Some((source, line)) => format!("{msg} script: {name}, on {source}:{line}."),
                    None => msg,
                };
                crate::ScriptError {
                    message,
                    ignore_stats,
                }
            }
        }
    }
}

/// `luaExtractErrorInformation`: the `err` text, the stats flag and the
/// `source`/`line` place of an error table.
fn error_info(t: &Table) -> (String, bool, Option<(String, String)>) {
    let text = |key: &str| -> Option<String> {
        luaerr::to_bytes(t.get::<Value>(key).ok().as_ref())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let msg = text("err").unwrap_or_default();
    let ignore = matches!(
        t.get::<Value>("ignore_error_stats_update"),
        Ok(Value::Boolean(true))
    );
    let place = text("source").zip(text("line"));
    (msg, ignore, place)
}

/// If `value` is an error table (`{err="..."}`), its text and stats flag.
fn error_field(value: &Value) -> Option<(String, bool)> {
    let Value::Table(t) = value else { return None };
    match t.raw_get::<Value>("err").ok()? {
        Value::String(_) => {
            let (msg, ignore, _) = error_info(t);
            Some((msg, ignore))
        }
        _ => None,
    }
}

/// Clears the run state when a run ends, however it ends.
struct RunGuard<'a> {
    /// The VM whose run state was set.
    lua: &'a Lua,
}

impl<'a> RunGuard<'a> {
    /// Installs `host` as the running host of `lua`.
    fn begin(lua: &'a Lua, host: &mut dyn Host) -> RunGuard<'a> {
        with_run(lua, |s| s.begin(host));
        RunGuard { lua }
    }
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        with_run(self.lua, RunState::end);
    }
}

/// A metatable whose `__index` raises Redis's nonexistent-global error.
pub(crate) fn error_metatable(lua: &Lua) -> Result<Table> {
    let mt = lua.create_table()?;
    let index = lua.create_function(|lua, (_, name): (Value, Value)| -> Result<Value> {
        let name = luaerr::to_bytes(Some(&name)).unwrap_or_default();
        let mut msg = b"Script attempted to access nonexistent global variable '".to_vec();
        msg.extend_from_slice(&name);
        msg.push(b'\'');
        Err(luaerr::lua_error(lua, msg))
    })?;
    mt.raw_set("__index", index)?;
    Ok(mt)
}

/// Loads [`HELPERS`], installs the wrappers as globals and returns the
/// handler and the runner.
fn install_helpers(lua: &Lua, globals: &Table) -> Result<(Function, Function)> {
    let coroutine: Table = globals.raw_get("coroutine")?;
    let normalize = lua.create_function(|lua, (err, last): (Value, bool)| {
        let abort = with_run(lua, |s| s.abort).flatten();
        match abort {
            Some(msg) if !last => Err(luaerr::raise_table(msg.as_bytes())),
            _ => luaerr::normalize(lua, err),
        }
    })?;
    let locate = lua.create_function(|lua, ()| {
        let mut frames = luaerr::user_frames(lua, 1);
        let frame = match frames.next() {
            Some(f) if f.is_c => frames.next(),
            other => other,
        };
        Ok(match frame {
            Some(f) => (Some(f.source), Some(f.line)),
            None => (None, None),
        })
    })?;
    let (pcall, xpcall, resume, handler, runner): (
        Function,
        Function,
        Function,
        Function,
        Function,
    ) = lua.load(HELPERS).set_name(INTERNAL_CHUNK).call((
        globals.raw_get::<Function>("pcall")?,
        globals.raw_get::<Function>("xpcall")?,
        coroutine.raw_get::<Function>("resume")?,
        normalize,
        locate,
    ))?;
    globals.raw_set("pcall", pcall)?;
    globals.raw_set("xpcall", xpcall)?;
    coroutine.raw_set("resume", resume)?;
    Ok((handler, runner))
}

/// The count hook: asks the host every [`HOOK_INSTRUCTIONS`] whether to
/// go on, and keeps failing a run that was aborted.
fn install_hook(lua: &Lua) {
    let triggers = HookTriggers::new().every_nth_instruction(HOOK_INSTRUCTIONS);
    lua.set_hook(triggers, |lua, _| {
        let Some((host, abort, deadline)) = with_run(lua, |s| (s.host(), s.abort, s.load_deadline))
        else {
            return Ok(VmState::Continue);
        };
        if deadline.is_some_and(|d| std::time::Instant::now() > d) {
            with_run(lua, |s| s.abort = Some(LOAD_TIMEOUT));
            return Err(luaerr::raise_table(LOAD_TIMEOUT.as_bytes()));
        }
        if let Some(msg) = abort {
            return Err(luaerr::raise_table(msg.as_bytes()));
        }
        let Some(host) = host else {
            return Ok(VmState::Continue);
        };
        if host.with(|h| h.interrupt()) == crate::Interrupt::Kill {
            with_run(lua, |s| s.abort = Some(KILLED));
            return Err(Raise::Table {
                err: luaerr::error_table_text(KILLED.as_bytes()),
                ignore_stats: false,
            }
            .into_error());
        }
        Ok(VmState::Continue)
    });
}
