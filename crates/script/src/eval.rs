//! EVAL's interpreter and script cache (Redis's `eval.c`).
//!
//! Each body is compiled once, keyed by the lowercase hex SHA1 of the whole
//! body (shebang included), and kept until SCRIPT FLUSH, which replaces the
//! whole VM as Redis does. A run sets the `KEYS` and `ARGV` globals and
//! calls the compiled chunk; errors name the script by its SHA1.

use crate::shebang::{parse_script_shebang, ScriptFlags};
use crate::vm::{set_frozen_raw, Vm, VmKind};
use crate::{sha1_hex, Host, RunResult, ScriptError};
use mlua::{ffi, ChunkMode, Function, Lua, Table};
use std::collections::HashMap;
use std::os::raw::c_int;
use vireo_resp::ReplyBuf;

/// A cached script.
struct Script {
    /// The body as given (for replication and AOF, which send EVAL).
    body: Vec<u8>,
    /// Its shebang flags.
    flags: ScriptFlags,
    /// The compiled chunk (Redis's `f_<sha>`).
    function: Function,
}

/// One worker's EVAL engine: a sandboxed VM and its script cache.
pub struct EvalEngine {
    /// The interpreter.
    vm: Vm,
    /// Scripts by SHA1 (lowercase hex).
    scripts: HashMap<String, Script>,
    /// Bytes of cached bodies and SHAs (INFO `used_memory_scripts_eval`).
    scripts_bytes: usize,
    /// Lua heap limit given at creation (kept for SCRIPT FLUSH).
    memory_limit: usize,
}

impl EvalEngine {
    /// A fresh engine whose Lua heap may grow to `memory_limit` bytes (0:
    /// unlimited).
    pub fn new(memory_limit: usize) -> Result<EvalEngine, String> {
        let vm = Vm::new(VmKind::Eval, memory_limit).map_err(|e| e.to_string())?;
        Ok(EvalEngine {
            vm,
            scripts: HashMap::new(),
            scripts_bytes: 0,
            memory_limit,
        })
    }

    /// Compiles and caches `body` (SCRIPT LOAD, and EVAL of a new body);
    /// returns its SHA1. Errors are reply texts (bad shebang, `ERR Error
    /// compiling script (new function): user_script:1: ...`).
    pub fn load(&mut self, body: &[u8]) -> Result<String, String> {
        let sha = sha1_hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let shebang = parse_script_shebang(body)?;
        let function = self
            .vm
            .lua
            .load(&body[shebang.len..])
            .set_name("@user_script")
            .set_mode(ChunkMode::Text)
            .into_function()
            .map_err(|e| {
                format!(
                    "ERR Error compiling script (new function): {}",
                    crate::luaerr::plain_message(&e)
                )
            })?;
        self.scripts_bytes += body.len() + sha.len();
        self.scripts.insert(
            sha.clone(),
            Script {
                body: body.to_vec(),
                flags: shebang.flags,
                function,
            },
        );
        Ok(sha)
    }

    /// Whether a script with this SHA1 is cached (any letter case).
    pub fn exists(&self, sha: &[u8]) -> bool {
        self.find(sha).is_some()
    }

    /// The flags of a cached script (to derive command flags before
    /// running, like Redis's `evalGetCommandFlags`).
    pub fn flags(&self, sha: &[u8]) -> Option<ScriptFlags> {
        self.find(sha).map(|s| s.flags)
    }

    /// The body of a cached script.
    pub fn body(&self, sha: &[u8]) -> Option<&[u8]> {
        self.find(sha).map(|s| s.body.as_slice())
    }

    /// Looks a script up by SHA1 in any letter case.
    fn find(&self, sha: &[u8]) -> Option<&Script> {
        let mut lower = [0; 40];
        self.scripts.get(lowercase_sha(sha, &mut lower)?)
    }

    /// SCRIPT FLUSH: forgets every script and starts a new VM (so
    /// configuration changes such as `cjson.encode_max_depth` are reset).
    pub fn flush(&mut self) -> Result<(), String> {
        *self = EvalEngine::new(self.memory_limit)?;
        Ok(())
    }

    /// Number of cached scripts (INFO `number_of_cached_scripts`).
    pub fn script_count(&self) -> usize {
        self.scripts.len()
    }

    /// Bytes of cached bodies (INFO `used_memory_scripts_eval`).
    pub fn scripts_memory(&self) -> usize {
        self.scripts_bytes
    }

    /// Bytes of the Lua heap (INFO `used_memory_vm_eval`).
    pub fn vm_memory(&self) -> usize {
        self.vm.used_memory()
    }

    /// EVAL: compiles `body` if new, then runs it with `keys`/`args` and
    /// writes its reply to `out`.
    pub fn eval(
        &mut self,
        body: &[u8],
        keys: &[&[u8]],
        args: &[&[u8]],
        host: &mut dyn Host,
        out: &mut ReplyBuf,
    ) -> RunResult {
        let sha = self.load(body).map_err(ScriptError::plain)?;
        self.run(&sha, keys, args, host, out)
    }

    /// EVALSHA: runs a cached script, or fails with `NOSCRIPT No matching
    /// script. Please use EVAL.`.
    pub fn evalsha(
        &mut self,
        sha: &[u8],
        keys: &[&[u8]],
        args: &[&[u8]],
        host: &mut dyn Host,
        out: &mut ReplyBuf,
    ) -> RunResult {
        let mut lower = [0; 40];
        match lowercase_sha(sha, &mut lower) {
            Some(sha) => self.run(sha, keys, args, host, out),
            None => Err(no_script()),
        }
    }

    /// Runs the cached script `sha` under the Lua debugger (`SCRIPT
    /// DEBUG`): it stops at its first line and then as the debugging
    /// client asks, talking to it over `channel`; a script that runs
    /// `time_limit` without stopping is stopped. The session ends with
    /// `<endsession>` on the channel; the script's reply (or error) is
    /// then the caller's to send, after which Redis closes the connection.
    pub fn debug_evalsha(
        &mut self,
        sha: &str,
        (keys, args): (&[&[u8]], &[&[u8]]),
        host: &mut dyn Host,
        (channel, time_limit): (Box<dyn crate::DebugChannel>, std::time::Duration),
        out: &mut ReplyBuf,
    ) -> RunResult {
        let body = self.body(sha.as_bytes()).ok_or_else(|| {
            ScriptError::plain("NOSCRIPT No matching script. Please use EVAL.".to_owned())
        })?;
        let session = crate::ldb::Ldb::new(body, channel, time_limit);
        self.vm.lua.set_app_data(session);
        self.vm.set_debug_hook(true);
        let weak = self.vm.lua.weak();
        crate::host::with_run(&self.vm.lua, |s| s.debugger = Some(weak));
        let result = self.run(sha, keys, args, host, out);
        crate::host::with_run(&self.vm.lua, |s| s.debugger = None);
        self.vm.set_debug_hook(false);
        if let Some(mut session) = self.vm.lua.remove_app_data::<crate::ldb::Ldb>() {
            session.end();
        }
        result
    }

    /// Sets `KEYS`/`ARGV` and runs the cached script `sha`.
    fn run(
        &mut self,
        sha: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
        host: &mut dyn Host,
        out: &mut ReplyBuf,
    ) -> RunResult {
        let script = self.scripts.get(sha).ok_or_else(no_script)?;
        set_keys_and_argv(&self.vm.lua, keys, args)
            .map_err(|e| ScriptError::plain(format!("ERR {}", crate::luaerr::plain_message(&e))))?;
        self.vm.run(&script.function, None, sha, host, out)
    }
}

/// EVALSHA's error for a SHA1 not in the cache.
fn no_script() -> ScriptError {
    ScriptError::plain("NOSCRIPT No matching script. Please use EVAL.".to_owned())
}

/// `sha` in lowercase, written into `buf`, when it can be a cache key (40
/// ASCII bytes); without allocating, as EVALSHA looks its script up more
/// than once per call.
fn lowercase_sha<'a>(sha: &[u8], buf: &'a mut [u8; 40]) -> Option<&'a str> {
    if sha.len() != 40 || !sha.is_ascii() {
        return None;
    }
    for (to, from) in buf.iter_mut().zip(sha) {
        *to = from.to_ascii_lowercase();
    }
    std::str::from_utf8(buf).ok()
}

/// Sets the globals `KEYS` and `ARGV` (frozen like every global) to arrays
/// of `keys` and `args`. One protected call of raw Lua API calls: through
/// mlua's safe API each table, string and the two freeze toggles cost a
/// protected call of their own, most of an EVALSHA's overhead.
fn set_keys_and_argv(lua: &Lua, keys: &[&[u8]], args: &[&[u8]]) -> mlua::Result<()> {
    // SAFETY: `exec_raw` runs the closure as a Lua C function under
    // `lua_pcall`, with LUA_MINSTACK (20) free slots; it uses at most four.
    // The closure owns nothing that needs dropping, so a Lua error raised
    // inside it (only an allocation failure can) unwinds over no pending
    // destructor. The globals table stays frozen on every exit but that
    // error, after which the script does not run.
    unsafe {
        lua.exec_raw::<()>((), |state| {
            ffi::lua_pushvalue(state, ffi::LUA_GLOBALSINDEX);
            set_frozen_raw(state, false);
            for (name, items) in [(c"KEYS", keys), (c"ARGV", args)] {
                ffi::lua_pushstring(state, name.as_ptr());
                push_string_array(state, items);
                ffi::lua_rawset(state, -3);
            }
            set_frozen_raw(state, true);
            ffi::lua_pop(state, 1);
        })
    }
}

/// FCALL's `keys` and `args` tables, made in one protected call (see
/// [`set_keys_and_argv`]).
pub(crate) fn string_arrays(
    lua: &Lua,
    keys: &[&[u8]],
    args: &[&[u8]],
) -> mlua::Result<(Table, Table)> {
    // SAFETY: as in `set_keys_and_argv`: two slots used, nothing to drop.
    unsafe {
        lua.exec_raw((), |state| {
            push_string_array(state, keys);
            push_string_array(state, args);
        })
    }
}

/// Pushes a new array of `items` as Lua strings.
///
/// # Safety
/// `state` must be a Lua state with a free stack slot, inside a protected
/// call (allocation can raise a Lua error).
unsafe fn push_string_array(state: *mut ffi::lua_State, items: &[&[u8]]) {
    ffi::lua_createtable(state, c_int::try_from(items.len()).unwrap_or(0), 0);
    for (i, item) in items.iter().enumerate() {
        ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
        ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
    }
}
