//! Running Lua scripts and functions inside the server (Redis's `script.c`
//! and the run-time halves of `eval.c` and `functions.c`).
//!
//! **Engines per thread.** `vireo_script`'s engines are not `Send`: every
//! thread that runs scripts (the workers, the AOF loader) owns an
//! [`EvalEngine`] and a [`FunctionEngine`] in a thread-local. What must be
//! the same everywhere — the EVAL script cache and the function libraries —
//! lives in one [`Registry`] under a lock, with version counters; before a
//! thread runs or inspects anything it compares the versions (two atomic
//! loads) and, when they moved, brings its engines up to date from the
//! registry. A change (SCRIPT LOAD/FLUSH, an EVAL of a new body, FUNCTION
//! LOAD/DELETE/FLUSH/RESTORE) is in the registry before its command
//! replies, so every later command on any worker sees it. Whatever INFO
//! and FUNCTION STATS report comes from the registry and from figures each
//! thread publishes, never from another thread's engine.
//!
//! **Locking.** A script runs inside its command with the shards of its
//! declared keys locked (the command table's `KeySpec::Custom` from
//! `numkeys`), so scripts on different keys run in parallel on every core.
//! A script may also touch keys it did not declare (standalone Redis
//! allows it). Before each `redis.call` the host makes sure the view holds
//! the shards the command needs: a shard above every held one is waited
//! for (ascending order, as every command locks, so no deadlock), a lower
//! one is only tried. If that try fails and the script has not yet run a
//! command with visible effects (a write or a publish), the run is
//! abandoned — its reply discarded — and the script starts over with every
//! shard locked; the script is remembered on this thread and later runs
//! lock everything from the start. A script's first run on the server
//! locks every shard anyway and records whether the script kept to its
//! declared keys; only scripts that did run with just those locked, so
//! the retry below is left for scripts whose keys change from run to run. Only when a script that already wrote
//! meets a busy lower shard does it wait, by retrying, for up to
//! [`UNDECLARED_WAIT`]; past that the call fails with an error asking for
//! the key to be declared (waiting longer could deadlock with a command
//! waiting for a shard the script holds). Inside MULTI/EXEC scripts make
//! the transaction lock every shard (`flags::SCRIPT`).
//!
//! **Effects.** The commands a script runs go through `dispatch::call`,
//! which records each one's effects in the session's AOF unit: a script
//! whose run wrote more than once reaches the AOF as MULTI … EXEC, as Redis
//! 7.0 propagates it; the script command itself is never propagated.
//! `redis.set_repl` sends a command's effects to the AOF only or to
//! replicas only (marked in the unit, split by the AOF writer), or keeps
//! them out of the unit (`REPL_NONE`).
//!
//! **Busy scripts.** Past `busy-reply-threshold` a run is *timed out*: the
//! server answers `-BUSY` to every command not flagged `allow-busy`
//! (`dispatch::run` checks [`Scripts::busy_error`]), other workers go on
//! answering, and the script's own worker serves its other connections
//! from the Lua hook (`net::worker::serve_while_busy`). SCRIPT KILL and
//! FUNCTION KILL set the run's kill flag, which the hook reads.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use vireo_resp::{Args, Protocol, ReplyBuf};
use vireo_script::{EvalEngine, FunctionEngine, Host, Interrupt, LogLevel, ReplFlags, ScriptFlags};

use crate::cmd::{flags, Ctx, KeySpec};
use crate::exec::dispatch;
use crate::exec::script_debug::{self, DebugMode, SocketChannel};
use crate::persist::aof::feed::Destination;
use crate::server::Server;

/// Longest a script that already wrote waits for the shard of a key it
/// did not declare, held by another command (see the module comment).
pub const UNDECLARED_WAIT: Duration = Duration::from_secs(1);

/// The refusal of a command once its run must start over with every
/// shard locked (never seen by the client: that run's reply is dropped).
const RESTARTED: &str = "ERR script restarted";

/// Lua heap limit of each engine: a script allocating more fails with
/// `not enough memory` instead of taking the server's memory.
const VM_MEMORY_LIMIT: usize = 1 << 30;

/// How long FUNCTION LOAD lets a library's top-level code run (Redis's
/// `LOAD_TIMEOUT_MS`).
pub const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// Redis's BUSY reply while an EVAL script runs too long.
pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// Redis's BUSY reply while a function runs too long.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// The shared script cache and function libraries.
#[derive(Default)]
struct Registry {
    /// Bumped by SCRIPT FLUSH: engines of an older generation start over.
    eval_generation: u64,
    /// This generation's script bodies, in the order they were added.
    bodies: Vec<Arc<[u8]>>,
    /// SHA1s of `bodies`.
    shas: HashSet<String>,
    /// Bytes of bodies and SHAs (INFO `used_memory_scripts_eval`).
    bodies_bytes: usize,
    /// Function libraries: name → code.
    libraries: BTreeMap<String, Arc<[u8]>>,
    /// Functions the libraries register (INFO `number_of_functions`).
    function_count: usize,
}

/// Run states of a [`RunSlot`].
const IDLE: u8 = 0;
const RUNNING: u8 = 1;
const TIMED_OUT: u8 = 2;

/// What other threads may know of the script one thread runs.
#[derive(Default)]
pub struct RunSlot {
    /// IDLE, RUNNING or TIMED_OUT.
    state: AtomicU8,
    /// The run is an EVAL (not an FCALL).
    eval: AtomicBool,
    /// The run called a write command (it can no longer be killed).
    wrote: AtomicBool,
    /// SCRIPT KILL / FUNCTION KILL asked it to stop.
    kill: AtomicBool,
    /// Bytes of this thread's EVAL Lua heap.
    eval_vm: AtomicUsize,
    /// Bytes of this thread's FUNCTION Lua heap.
    function_vm: AtomicUsize,
    /// Once timed out: the script's name, its command and start.
    timed_out_run: Mutex<Option<TimedOutRun>>,
}

/// A timed-out run as FUNCTION STATS shows it: name, command, start.
type TimedOutRun = (String, Vec<Vec<u8>>, Instant);

/// Script state shared by every thread (one per server).
pub struct Scripts {
    registry: Mutex<Registry>,
    /// Changes of the eval half of the registry.
    eval_version: AtomicU64,
    /// Changes of the function half of the registry.
    function_version: AtomicU64,
    /// One slot per worker, plus one for other threads (AOF loading).
    slots: Vec<RunSlot>,
    /// Runs in the TIMED_OUT state.
    timed_out: AtomicUsize,
    /// Mirrors for INFO without taking the registry lock.
    cached_scripts: AtomicUsize,
    scripts_bytes: AtomicUsize,
    libraries: AtomicUsize,
    functions: AtomicUsize,
    libraries_bytes: AtomicUsize,
    /// Scripts (by SHA, functions by `f:` and name) whose run with every
    /// shard locked touched only the keys they declared: later runs lock
    /// just those.
    declared_only: parking_lot::RwLock<HashSet<String>>,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may call `noscript`
    /// commands (Redis's `script_disable_deny_script`, for tests).
    pub deny_disabled: AtomicBool,
}

impl Scripts {
    /// State for `threads` workers.
    pub fn new(threads: usize) -> Scripts {
        Scripts {
            registry: Mutex::new(Registry::default()),
            eval_version: AtomicU64::new(0),
            function_version: AtomicU64::new(0),
            slots: (0..threads + 1).map(|_| RunSlot::default()).collect(),
            timed_out: AtomicUsize::new(0),
            cached_scripts: AtomicUsize::new(0),
            scripts_bytes: AtomicUsize::new(0),
            libraries: AtomicUsize::new(0),
            functions: AtomicUsize::new(0),
            libraries_bytes: AtomicUsize::new(0),
            declared_only: Default::default(),
            deny_disabled: AtomicBool::new(false),
        }
    }

    /// The slot of worker `worker` (other threads share the last one).
    fn slot(&self, worker: usize) -> &RunSlot {
        &self.slots[worker.min(self.slots.len() - 1)]
    }

    /// The `-BUSY` error to answer while a script is timed out, if one is.
    pub fn busy_error(&self) -> Option<&'static str> {
        if self.timed_out.load(Ordering::Acquire) == 0 {
            return None;
        }
        let eval = self
            .slots
            .iter()
            .find(|s| s.state.load(Ordering::Acquire) == TIMED_OUT)
            .is_none_or(|s| s.eval.load(Ordering::Acquire));
        Some(if eval { BUSY_EVAL } else { BUSY_FUNCTION })
    }

    /// SCRIPT KILL (`eval`) or FUNCTION KILL: the reply, after flagging the
    /// timed-out run to stop (Redis's `scriptKill`).
    pub fn kill(&self, eval: bool) -> Result<(), &'static str> {
        let Some(slot) = self
            .slots
            .iter()
            .find(|s| s.state.load(Ordering::Acquire) == TIMED_OUT)
        else {
            return Err("NOTBUSY No scripts in execution right now.");
        };
        if slot.wrote.load(Ordering::Acquire) {
            return Err("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.");
        }
        let is_eval = slot.eval.load(Ordering::Acquire);
        if eval && !is_eval {
            return Err(BUSY_FUNCTION);
        }
        if !eval && is_eval {
            return Err(BUSY_EVAL);
        }
        slot.kill.store(true, Ordering::Release);
        Ok(())
    }

    /// The timed-out function's name, command and run time so far (ms),
    /// for FUNCTION STATS.
    pub fn running_function(&self) -> Option<(String, Vec<Vec<u8>>, u64)> {
        self.slots
            .iter()
            .filter(|s| {
                s.state.load(Ordering::Acquire) == TIMED_OUT && !s.eval.load(Ordering::Acquire)
            })
            .find_map(|s| {
                let run = s.timed_out_run.lock();
                let (name, command, start) = run.as_ref()?;
                Some((
                    name.clone(),
                    command.clone(),
                    start.elapsed().as_millis() as u64,
                ))
            })
    }

    /// INFO figures: (cached scripts, their bytes, EVAL VM bytes).
    pub fn eval_stats(&self) -> (usize, usize, usize) {
        let vm = self
            .slots
            .iter()
            .map(|s| s.eval_vm.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        (
            self.cached_scripts.load(Ordering::Relaxed),
            self.scripts_bytes.load(Ordering::Relaxed),
            vm,
        )
    }

    /// INFO figures: (libraries, functions, library code bytes, FUNCTION VM
    /// bytes).
    pub fn function_stats(&self) -> (usize, usize, usize, usize) {
        let vm = self
            .slots
            .iter()
            .map(|s| s.function_vm.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        (
            self.libraries.load(Ordering::Relaxed),
            self.functions.load(Ordering::Relaxed),
            self.libraries_bytes.load(Ordering::Relaxed),
            vm,
        )
    }

    /// The libraries' code, by name (FUNCTION DUMP, RDB, AOF rewrite).
    pub fn library_codes(&self) -> Vec<Arc<[u8]>> {
        self.registry.lock().libraries.values().cloned().collect()
    }

    /// Updates the INFO mirrors after a change of the registry.
    fn publish(&self, reg: &Registry) {
        self.cached_scripts.store(reg.shas.len(), Ordering::Relaxed);
        self.scripts_bytes
            .store(reg.bodies_bytes, Ordering::Relaxed);
        self.libraries.store(reg.libraries.len(), Ordering::Relaxed);
        self.functions.store(reg.function_count, Ordering::Relaxed);
        self.libraries_bytes.store(
            reg.libraries.values().map(|c| c.len()).sum(),
            Ordering::Relaxed,
        );
    }
}

/// One thread's engines and how far they follow the registry.
struct Engines {
    eval: EvalEngine,
    /// Registry generation and number of bodies `eval` holds.
    eval_generation: u64,
    eval_loaded: usize,
    /// `Scripts::eval_version` when `eval` was last brought up to date.
    eval_seen: u64,
    functions: FunctionEngine,
    /// `Scripts::function_version` `functions` reflects.
    function_seen: u64,
    /// Scripts (by SHA, functions by `f:` and name) that touched keys they
    /// did not declare: they lock every shard from the start.
    undeclared: HashSet<String>,
}

thread_local! {
    /// This thread's engines, made on first use.
    static ENGINES: RefCell<Option<Engines>> = const { RefCell::new(None) };
}

/// A host for library code at FUNCTION LOAD: it can only log.
struct LoadHost;

impl Host for LoadHost {
    fn call(&mut self, _args: Args<'_>, _resp: Protocol) -> &[u8] {
        b"-ERR redis.call can not be used on FUNCTION LOAD\r\n"
    }
    fn acl_check(&mut self, _args: Args<'_>) -> Option<bool> {
        None
    }
    fn log(&mut self, level: LogLevel, message: &[u8]) {
        script_log(level, message);
    }
    fn set_repl(&mut self, _flags: ReplFlags) {}
    fn interrupt(&mut self) -> Interrupt {
        Interrupt::Continue
    }
}

/// `redis.log`: a line in the server log at Redis's level.
fn script_log(level: LogLevel, message: &[u8]) {
    let text = String::from_utf8_lossy(message);
    match level {
        LogLevel::Debug | LogLevel::Verbose => tracing::debug!("{text}"),
        LogLevel::Notice => tracing::info!("{text}"),
        LogLevel::Warning => tracing::warn!("{text}"),
    }
}

impl Engines {
    fn new() -> Result<Engines, String> {
        Ok(Engines {
            eval: EvalEngine::new(VM_MEMORY_LIMIT)?,
            eval_generation: 0,
            eval_loaded: 0,
            eval_seen: 0,
            functions: FunctionEngine::new(VM_MEMORY_LIMIT)?,
            function_seen: 0,
            undeclared: HashSet::new(),
        })
    }

    /// Brings both engines up to date with the registry.
    fn sync(&mut self, scripts: &Scripts) -> Result<(), String> {
        if scripts.eval_version.load(Ordering::Acquire) != self.eval_seen {
            let reg = scripts.registry.lock();
            self.sync_eval(&reg)?;
            self.eval_seen = scripts.eval_version.load(Ordering::Acquire);
        }
        if scripts.function_version.load(Ordering::Acquire) != self.function_seen {
            let reg = scripts.registry.lock();
            self.functions = build_functions(reg.libraries.values())?;
            self.function_seen = scripts.function_version.load(Ordering::Acquire);
        }
        Ok(())
    }

    /// Loads the bodies added since the last sync (all of them after a
    /// flush).
    fn sync_eval(&mut self, reg: &Registry) -> Result<(), String> {
        if reg.eval_generation != self.eval_generation {
            self.eval.flush()?;
            self.undeclared.clear();
            self.eval_generation = reg.eval_generation;
            self.eval_loaded = 0;
        }
        for body in &reg.bodies[self.eval_loaded.min(reg.bodies.len())..] {
            self.eval.load(body)?;
        }
        self.eval_loaded = reg.bodies.len();
        Ok(())
    }

    /// Publishes this thread's VM sizes for INFO.
    fn publish_memory(&self, slot: &RunSlot) {
        slot.eval_vm.store(self.eval.vm_memory(), Ordering::Relaxed);
        slot.function_vm
            .store(self.functions.vm_memory(), Ordering::Relaxed);
    }
}

/// A function engine holding `libraries` (errors are load errors).
fn build_functions<'a>(
    libraries: impl Iterator<Item = &'a Arc<[u8]>>,
) -> Result<FunctionEngine, String> {
    let mut engine = FunctionEngine::new(VM_MEMORY_LIMIT)?;
    for code in libraries {
        engine.load(code, false, Duration::ZERO, &mut LoadHost)?;
    }
    Ok(engine)
}

/// Runs `f` with this thread's engines, up to date with the registry.
/// Errors when they cannot be made, or are in use (a script running on
/// this thread: only `allow-busy` commands run then, and none of them
/// needs the engines).
fn with_engines<R>(
    server: &Server,
    worker: usize,
    f: impl FnOnce(&mut Engines) -> R,
) -> Result<R, String> {
    ENGINES.with(|cell| {
        let mut guard = cell
            .try_borrow_mut()
            .map_err(|_| "ERR a script is already running on this thread".to_owned())?;
        if guard.is_none() {
            *guard = Some(Engines::new()?);
        }
        let engines = guard.as_mut().expect("made above");
        engines.sync(&server.scripts)?;
        let result = f(engines);
        engines.publish_memory(server.scripts.slot(worker));
        Ok(result)
    })
}

/// SCRIPT LOAD and EVAL of a body: caches it here and in the registry;
/// returns its SHA1.
fn load_script(server: &Server, engines: &mut Engines, body: &[u8]) -> Result<String, String> {
    let sha = vireo_script::sha1_hex(body);
    if engines.eval.exists(sha.as_bytes()) {
        return Ok(sha);
    }
    engines.eval.load(body)?;
    let scripts = &server.scripts;
    let mut reg = scripts.registry.lock();
    if reg.eval_generation != engines.eval_generation {
        // A flush came in between: start over from the registry.
        engines.sync_eval(&reg)?;
        engines.eval.load(body)?;
    }
    if reg.shas.insert(sha.clone()) {
        reg.bodies_bytes += body.len() + sha.len();
        reg.bodies.push(body.into());
        scripts.eval_version.fetch_add(1, Ordering::AcqRel);
        scripts.publish(&reg);
    }
    Ok(sha)
}

/// SCRIPT LOAD: the SHA1 of the cached body.
pub fn script_load(ctx: &mut Ctx<'_>, body: &[u8]) -> Result<String, String> {
    let server = ctx.server;
    with_engines(server, ctx.session.shared.worker, |e| {
        load_script(server, e, body)
    })?
}

/// SCRIPT EXISTS: whether each SHA1 is cached (any letter case).
pub fn script_exists(server: &Server, shas: impl Iterator<Item = Vec<u8>>) -> Vec<bool> {
    let reg = server.scripts.registry.lock();
    shas.map(|s| {
        reg.shas
            .contains(&String::from_utf8_lossy(&s).to_ascii_lowercase())
    })
    .collect()
}

/// SCRIPT FLUSH: empties the cache on every thread.
pub fn script_flush(server: &Server) {
    let scripts = &server.scripts;
    let mut reg = scripts.registry.lock();
    reg.eval_generation += 1;
    reg.bodies = Vec::new();
    reg.shas = HashSet::new();
    reg.bodies_bytes = 0;
    scripts.eval_version.fetch_add(1, Ordering::AcqRel);
    scripts.publish(&reg);
}

/// How FUNCTION RESTORE merges a payload's libraries with the loaded ones.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RestorePolicy {
    /// Fail if a library exists already.
    Append,
    /// Replace libraries of the same names.
    Replace,
    /// Drop every library first.
    Flush,
}

/// Installs a new set of libraries after checking they load together;
/// `apply` computes it from the current one under the registry lock.
fn change_libraries(
    server: &Server,
    worker: usize,
    apply: impl FnOnce(&BTreeMap<String, Arc<[u8]>>) -> Result<BTreeMap<String, Arc<[u8]>>, String>,
) -> Result<(), String> {
    let scripts = &server.scripts;
    let mut reg = scripts.registry.lock();
    let libraries = apply(&reg.libraries)?;
    let engine = build_functions(libraries.values())?;
    reg.function_count = engine.function_count();
    reg.libraries = libraries;
    let version = scripts.function_version.fetch_add(1, Ordering::AcqRel) + 1;
    scripts.publish(&reg);
    drop(reg);
    // This thread adopts the engine it built (others rebuild on next use);
    // it may be busy only if a caller runs this from inside a script.
    ENGINES.with(|cell| {
        if let Ok(mut guard) = cell.try_borrow_mut() {
            if let Some(engines) = guard.as_mut() {
                if engines.function_seen + 1 == version {
                    engines.functions = engine;
                    engines.function_seen = version;
                    engines.publish_memory(server.scripts.slot(worker));
                }
            }
        }
    });
    Ok(())
}

/// FUNCTION LOAD [REPLACE]: the library's name.
pub fn function_load(
    server: &Server,
    worker: usize,
    code: &[u8],
    replace: bool,
) -> Result<String, String> {
    // Validate in this thread's engine first (Redis's errors, with the
    // load timeout), then install everywhere.
    let name = with_engines(server, worker, |e| {
        let mut probe = build_functions(std::iter::empty())?;
        let name = probe.load(code, true, LOAD_TIMEOUT, &mut LoadHost)?;
        if !replace && e.functions.library(&name).is_some() {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        Ok(name)
    })??;
    change_libraries(server, worker, |current| {
        if !replace && current.contains_key(&name) {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        let mut next = current.clone();
        next.insert(name.clone(), code.into());
        Ok(next)
    })?;
    Ok(name)
}

/// FUNCTION DELETE: false when there is no such library.
pub fn function_delete(server: &Server, worker: usize, name: &str) -> Result<bool, String> {
    let mut found = false;
    change_libraries(server, worker, |current| {
        let mut next = current.clone();
        found = next.remove(name).is_some();
        Ok(next)
    })?;
    Ok(found)
}

/// FUNCTION FLUSH: drops every library.
pub fn function_flush(server: &Server, worker: usize) {
    let _ = change_libraries(server, worker, |_| Ok(BTreeMap::new()));
}

/// FUNCTION RESTORE: merges `codes` (each a library's code) per `policy`.
pub fn function_restore(
    server: &Server,
    worker: usize,
    codes: Vec<Vec<u8>>,
    policy: RestorePolicy,
) -> Result<(), String> {
    // The payload's libraries must load on their own first.
    let incoming = {
        let mut probe = build_functions(std::iter::empty())?;
        let mut named = BTreeMap::new();
        for code in codes {
            let name = probe.load(&code, false, Duration::ZERO, &mut LoadHost)?;
            named.insert(name, Arc::<[u8]>::from(code));
        }
        named
    };
    change_libraries(server, worker, |current| {
        let mut next = if policy == RestorePolicy::Flush {
            BTreeMap::new()
        } else {
            current.clone()
        };
        for (name, code) in incoming {
            if policy == RestorePolicy::Append && next.contains_key(&name) {
                return Err(format!("ERR Library {name} already exists"));
            }
            next.insert(name, code);
        }
        Ok(next)
    })
}

/// Loads a library read from an RDB file or AOF base: `replace` lets it
/// replace a loaded library of the same name, as Redis's RDB loading
/// allows duplicates only when asked (DEBUG RELOAD MERGE).
pub fn function_load_persisted(server: &Server, code: &[u8], replace: bool) -> Result<(), String> {
    let name =
        build_functions(std::iter::empty())?.load(code, false, Duration::ZERO, &mut LoadHost)?;
    change_libraries(server, usize::MAX, |current| {
        if !replace && current.contains_key(&name) {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        let mut next = current.clone();
        next.insert(name, code.into());
        Ok(next)
    })
}

/// A view of the libraries for FUNCTION LIST / STATS.
pub struct LibraryView {
    /// Library name.
    pub name: String,
    /// Its code.
    pub code: Vec<u8>,
    /// (name, description, flags) of each function.
    pub functions: Vec<(String, Option<String>, ScriptFlags)>,
}

/// The libraries as this thread's engine holds them (up to date).
pub fn libraries(server: &Server, worker: usize) -> Result<Vec<LibraryView>, String> {
    with_engines(server, worker, |e| {
        e.functions
            .libraries()
            .map(|lib| LibraryView {
                name: lib.name.clone(),
                code: lib.code.clone(),
                functions: lib
                    .functions
                    .iter()
                    .map(|f| (f.name.clone(), f.description.clone(), f.flags))
                    .collect(),
            })
            .collect()
    })
}

/// Which kind of script a command runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// EVAL / EVAL_RO: the body is `args[1]`.
    Eval,
    /// EVALSHA / EVALSHA_RO: the SHA1 is `args[1]`.
    EvalSha,
    /// FCALL / FCALL_RO: the function name is `args[1]`.
    Fcall,
}

/// The declared keys of a script command: `args[3..3 + numkeys]`, or None
/// when `numkeys` is invalid.
pub fn declared_keys(args: Args<'_>) -> Option<std::ops::Range<usize>> {
    let n = vireo_resp::number::parse_i64(args.try_get(2)?)?;
    let n = usize::try_from(n).ok()?;
    (n <= args.len().saturating_sub(3)).then_some(3..3 + n)
}

/// The command flags a script command runs with, from its script's flags
/// (Redis's `evalGetCommandFlags` / `fcallGetCommandFlags`): a script with
/// a shebang or a function declares whether it writes and may run out of
/// memory; EVAL without a shebang keeps the command's own flags.
pub fn command_flags(server: &Server, worker: usize, kind: Kind, args: Args<'_>, base: u32) -> u32 {
    let Some(name) = args.try_get(1) else {
        return base;
    };
    let script_flags = match kind {
        Kind::Eval => vireo_script::parse_script_shebang(name)
            .ok()
            .map(|s| s.flags),
        Kind::EvalSha => with_engines(server, worker, |e| e.eval.flags(name))
            .ok()
            .flatten(),
        Kind::Fcall => with_engines(server, worker, |e| {
            e.functions.function(name).map(|(_, f)| f.flags)
        })
        .ok()
        .flatten(),
    };
    match script_flags {
        Some(f) if !f.eval_compat_mode => script_command_flags(base, f),
        _ => base,
    }
}

/// Redis's `scriptFlagsToCmdFlags`.
fn script_command_flags(base: u32, f: ScriptFlags) -> u32 {
    let mut flags = base & !(flags::STALE | flags::DENYOOM | flags::WRITE | flags::MAY_REPLICATE);
    if !(f.allow_oom || f.no_writes) {
        flags |= flags::DENYOOM;
    }
    if !f.no_writes {
        flags |= flags::WRITE;
    }
    if f.allow_stale {
        flags |= flags::STALE;
    }
    flags
}

/// How the host treats the commands of one run.
#[derive(Clone, Copy)]
struct RunMode {
    /// EVAL_RO/FCALL_RO, or a `no-writes` script: writes are refused.
    read_only: bool,
    /// `allow-oom`: no OOM refusals.
    allow_oom: bool,
    /// `maxmemory` was exceeded when the run started.
    oom_at_start: bool,
    /// A SCRIPT DEBUG YES session: writes are undone when the run ends
    /// and never propagated (see `exec::script_debug`).
    forked_debug: bool,
}

/// The refusal, in a SCRIPT DEBUG YES session, of a write whose keys
/// cannot be saved for undoing (FLUSHALL, SWAPDB, MOVE, COPY …).
const FORKED_DEBUG_WRITE: &str = "ERR This write command can not be undone, so it is not allowed in a SCRIPT DEBUG YES session: use SCRIPT DEBUG SYNC";

/// The server side of one script run.
struct ScriptHost<'h, 'c> {
    ctx: &'h mut Ctx<'c>,
    /// The script command's arguments.
    args: Args<'h>,
    mode: RunMode,
    slot: &'h RunSlot,
    /// Where the script's writes go (`redis.set_repl`).
    repl: ReplFlags,
    /// A write command was called (Redis's SCRIPT_WRITE_DIRTY).
    wrote: bool,
    /// A command with effects outside the run was called (a write or a
    /// publish): the run can no longer start over.
    effects: bool,
    /// The run needs a shard it could not take: start over with all.
    restart: bool,
    /// The keys the script declared (KEYS, or FCALL's keys).
    declared: &'h [&'h [u8]],
    /// A command touched a key the script did not declare.
    strayed: bool,
    started: Instant,
    threshold: Duration,
    timed_out: bool,
    /// The script's name for the slow-script log line.
    name: String,
    /// Reply buffer the script's commands write into.
    scratch: ReplyBuf,
    /// The last call was refused before running (for the Lua debugger).
    refused: bool,
    /// A SCRIPT DEBUG YES session's undo log: each key a write touched, as
    /// it was before its first write (None: absent).
    undo: Vec<(usize, Box<[u8]>, Option<vireo_store::Entry>)>,
}

impl ScriptHost<'_, '_> {
    /// Makes the view hold shard `idx`, or says why not.
    fn hold(&mut self, idx: usize) -> Result<(), &'static str> {
        let keys = &mut self.ctx.keys;
        if keys.holds_shard(idx) || keys.hold_shard_ascending(idx) || keys.try_hold_shard(idx) {
            return Ok(());
        }
        if !self.effects {
            self.restart = true;
            return Err(RESTARTED);
        }
        let deadline = Instant::now() + UNDECLARED_WAIT;
        while Instant::now() < deadline {
            std::thread::yield_now();
            if self.ctx.keys.try_hold_shard(idx) {
                return Ok(());
            }
        }
        Err("ERR the script accessed a key it did not declare, whose shard stayed busy; declare every key the script uses")
    }

    /// Makes the view hold what `cmd` will touch.
    fn hold_for(&mut self, cmd: crate::cmd::CmdRef, args: Args<'_>) -> Result<(), &'static str> {
        let ks = &self.ctx.server.keyspace;
        match cmd.spec.keys {
            KeySpec::None => Ok(()),
            KeySpec::All | KeySpec::Dynamic | KeySpec::Queued => {
                self.strayed = true;
                if self.ctx.keys.holds_all() {
                    return Ok(());
                }
                (0..ks.shard_count()).try_for_each(|i| self.hold(i))
            }
            KeySpec::Range { .. } | KeySpec::Custom { .. } => {
                cmd.spec.key_indices(args).into_iter().try_for_each(|i| {
                    let key = args.get(i);
                    if !self.declared.contains(&key) {
                        self.strayed = true;
                    }
                    self.hold(ks.shard_of(key))
                })
            }
        }
    }

    /// Redis's `scriptCall` checks after the ACL's: writes refused in
    /// read-only runs and SCRIPT DEBUG YES sessions, then the first write
    /// refused on a read-only replica, for persistence errors or missing
    /// replicas, OOM.
    fn refusal(&self, spec: &crate::cmd::CommandSpec) -> Option<String> {
        let writes = spec.has(flags::WRITE);
        if self.mode.forked_debug && writes && !undoable(spec) {
            return Some(FORKED_DEBUG_WRITE.into());
        }
        if self.mode.read_only && spec.has(flags::WRITE | flags::MAY_REPLICATE) {
            return Some("ERR Write commands are not allowed from read-only scripts.".into());
        }
        if writes && !self.wrote {
            if read_only_replica(self.ctx.server, self.ctx.session) {
                return Some(READONLY_REPLICA.into());
            }
            if let Some(msg) = dispatch::disk_error(self.ctx.server) {
                return Some(msg);
            }
            if let Some(msg) = dispatch::replicas_error(self.ctx.server) {
                return Some(msg.to_owned());
            }
        }
        if !self.mode.allow_oom
            && self.mode.oom_at_start
            && !self.wrote
            && spec.has(flags::DENYOOM)
            && self.ctx.server.config.maxmemory() > 0
        {
            return Some("OOM command not allowed when used memory > 'maxmemory'.".into());
        }
        None
    }

    /// Runs `cmd` through the ordinary call path, its reply into `scratch`.
    fn execute(&mut self, cmd: crate::cmd::CmdRef, args: Args<'_>, resp: Protocol) {
        let destination = self.destination();
        let ctx = &mut *self.ctx;
        self.scratch.clear();
        self.scratch.set_protocol(resp);
        std::mem::swap(ctx.out, &mut self.scratch);
        let deny_blocking = std::mem::replace(&mut ctx.deny_blocking, true);
        let in_script = std::mem::replace(&mut ctx.session.in_script, true);
        let hidden = !(self.repl.aof || self.repl.replicas) || self.mode.forked_debug;
        let hidden_unit = hidden.then(|| std::mem::take(&mut ctx.session.aof_unit));
        let destination = ctx.session.aof_unit.set_destination(destination);
        let dirty = ctx.dirty;
        dispatch::call(ctx, cmd, args);
        self.track_declared_keys(cmd.spec);
        let ctx = &mut *self.ctx;
        match hidden_unit {
            Some(unit) => ctx.session.aof_unit = unit,
            None => {
                ctx.session.aof_unit.set_destination(destination);
            }
        }
        if ctx.dirty > dirty {
            self.effects = true;
        }
        ctx.session.in_script = in_script;
        ctx.deny_blocking = deny_blocking;
        std::mem::swap(ctx.out, &mut self.scratch);
    }
}

impl ScriptHost<'_, '_> {
    /// Where the effects of the next command go (`redis.set_repl`; with
    /// neither destination they are not recorded at all).
    fn destination(&self) -> Destination {
        match (self.repl.aof, self.repl.replicas) {
            (true, false) => Destination::LogOnly,
            (false, true) => Destination::ReplicasOnly,
            _ => Destination::Both,
        }
    }

    /// Saves, before a write in a SCRIPT DEBUG YES session, the keys it
    /// names as they are (first write to each only).
    fn save_for_undo(&mut self, spec: &crate::cmd::CommandSpec, args: Args<'_>) {
        let db = self.ctx.db;
        for i in spec.key_indices(args) {
            let key = args.get(i);
            if self.undo.iter().any(|(d, k, _)| *d == db && **k == *key) {
                continue;
            }
            let before = self.ctx.keys.get_read_unreported(db, key).cloned();
            self.undo.push((db, key.into(), before));
        }
    }

    /// Puts back every key a SCRIPT DEBUG YES session wrote.
    fn undo_writes(&mut self) {
        for (db, key, before) in std::mem::take(&mut self.undo).into_iter().rev() {
            self.ctx.keys.delete(db, &key);
            if let Some(entry) = before {
                self.ctx.keys.set_entry(db, &key, entry);
            }
        }
    }
}

/// Whether a write can be undone from the keys its key specs name: not
/// when it reaches the whole keyspace or keys of another database.
fn undoable(spec: &crate::cmd::CommandSpec) -> bool {
    matches!(spec.keys, KeySpec::Range { .. } | KeySpec::Custom { .. })
        && !matches!(spec.name, "move" | "copy" | "swapdb")
}

impl ScriptHost<'_, '_> {
    /// Client-side caching of a script's reads, as Redis 7.0 does it: when
    /// a command the script runs reads, the caller tracks every key the
    /// script declared (not the keys that command named).
    fn track_declared_keys(&mut self, spec: &crate::cmd::CommandSpec) {
        let ctx = &*self.ctx;
        if ctx.hooks & crate::exec::notify::hook::TRACKING == 0
            || !spec.has(flags::READONLY)
            || spec.has(flags::PUBSUB)
        {
            return;
        }
        let keys = self.declared.iter().map(|k| (*k).into());
        crate::exec::tracking::remember_keys(ctx.server, ctx.session, keys);
    }
}

impl ScriptHost<'_, '_> {
    /// Redis's `scriptCall` checks, then the locks `cmd` needs: the
    /// command to run, or the text of its refusal (counted as Redis counts
    /// it).
    fn refusal_before_run(
        &mut self,
        args: Args<'_>,
    ) -> Result<crate::cmd::CmdRef, std::borrow::Cow<'static, str>> {
        if self.restart {
            return Err(RESTARTED.into());
        }
        let cmd = match dispatch::lookup(args) {
            Ok(c) => c,
            Err(dispatch::LookupError::Unknown) => {
                return Err("ERR Unknown Redis command called from script".into())
            }
            Err(dispatch::LookupError::Arity(cmd)) => {
                count_rejected(self.ctx, Some(cmd));
                return Err("ERR Wrong number of args calling Redis command from script".into());
            }
        };
        // Redis's order: not-in-scripts, stale replica, ACLs, then the
        // write and memory refusals.
        let refused = self.noscript_refusal(cmd.spec).or_else(|| {
            crate::security::script_command_denied(self.ctx.server, self.ctx.session, cmd, args)
                .or_else(|| self.refusal(cmd.spec))
        });
        if let Some(msg) = refused {
            count_rejected(self.ctx, Some(cmd));
            self.ctx.server.count_error(msg.as_bytes());
            return Err(msg.into());
        }
        self.hold_for(cmd, args)?;
        if cmd.spec.has(flags::WRITE) {
            self.wrote = true;
            self.slot.wrote.store(true, Ordering::Release);
            if self.mode.forked_debug {
                self.save_for_undo(cmd.spec, args);
            }
        }
        if cmd
            .spec
            .has(flags::WRITE | flags::MAY_REPLICATE | flags::PUBSUB)
        {
            self.effects = true;
        }
        Ok(cmd)
    }

    /// The refusals before the ACL check: `noscript` commands (unless
    /// DEBUG SET-DISABLE-DENY-SCRIPTS), and commands not flagged `stale`
    /// on a replica that may not serve stale data (Redis's
    /// `scriptVerifyAllowStale`).
    fn noscript_refusal(&self, spec: &crate::cmd::CommandSpec) -> Option<String> {
        let server = self.ctx.server;
        if spec.has(flags::NOSCRIPT) && !server.scripts.deny_disabled.load(Ordering::Relaxed) {
            return Some("ERR This Redis command is not allowed from script".into());
        }
        if !spec.has(flags::STALE) && dispatch::serving_stale_refused(server) {
            return Some("ERR Can not execute the command on a stale replica".into());
        }
        None
    }
}

impl Host for ScriptHost<'_, '_> {
    fn call(&mut self, args: Args<'_>, resp: Protocol) -> &[u8] {
        // Every refusal is an error reply in `scratch`; the command's own
        // reply clears the mark.
        self.refused = true;
        match self.refusal_before_run(args) {
            Ok(cmd) => {
                self.execute(cmd, args, resp);
                self.refused = false;
            }
            Err(msg) => {
                self.scratch.clear();
                self.scratch.error(&msg);
            }
        }
        self.scratch.as_bytes()
    }

    fn last_call_refused(&self) -> bool {
        self.refused
    }

    fn acl_check(&mut self, args: Args<'_>) -> Option<bool> {
        let cmd = match dispatch::lookup(args) {
            Ok(c) | Err(dispatch::LookupError::Arity(c)) => c,
            Err(dispatch::LookupError::Unknown) => return None,
        };
        Some(crate::security::allowed(
            self.ctx.server,
            self.ctx.session,
            cmd,
            args,
        ))
    }

    fn log(&mut self, level: LogLevel, message: &[u8]) {
        script_log(level, message);
    }

    fn set_repl(&mut self, flags: ReplFlags) {
        self.repl = flags;
    }

    fn interrupt(&mut self) -> Interrupt {
        if self.restart {
            return Interrupt::Kill;
        }
        if !self.timed_out && self.started.elapsed() >= self.threshold {
            self.timed_out = true;
            *self.slot.timed_out_run.lock() = Some((
                self.name.clone(),
                self.args.iter().map(<[u8]>::to_vec).collect(),
                self.started,
            ));
            self.slot.state.store(TIMED_OUT, Ordering::Release);
            self.ctx
                .server
                .scripts
                .timed_out
                .fetch_add(1, Ordering::AcqRel);
            let kill = if self.slot.eval.load(Ordering::Relaxed) {
                "SCRIPT KILL"
            } else {
                "FUNCTION KILL"
            };
            tracing::warn!(
                "Slow script detected: still in execution after {} milliseconds. You can try killing the script using the {kill} command. Script name is: {}.",
                self.started.elapsed().as_millis(),
                self.name
            );
        }
        if self.timed_out {
            crate::net::worker::serve_while_busy();
        }
        if self.slot.kill.load(Ordering::Acquire) {
            Interrupt::Kill
        } else {
            Interrupt::Continue
        }
    }
}

/// Counts a command refused inside a script (Redis's
/// `incrCommandStatsOnError` with ERROR_COMMAND_REJECTED).
fn count_rejected(ctx: &Ctx<'_>, cmd: Option<crate::cmd::CmdRef>) {
    if let Some(c) = cmd {
        ctx.server.worker_stats[ctx.session.shared.worker].per_command[c.id]
            .rejected
            .fetch_add(1, Ordering::Relaxed);
    }
}

/// Marks the slot running for the duration of a run, and clears it
/// however the run ends.
struct SlotGuard<'a> {
    scripts: &'a Scripts,
    slot: &'a RunSlot,
}

impl<'a> SlotGuard<'a> {
    fn enter(scripts: &'a Scripts, slot: &'a RunSlot, eval: bool) -> SlotGuard<'a> {
        slot.eval.store(eval, Ordering::Release);
        slot.wrote.store(false, Ordering::Release);
        slot.kill.store(false, Ordering::Release);
        slot.state.store(RUNNING, Ordering::Release);
        SlotGuard { scripts, slot }
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        if self.slot.state.swap(IDLE, Ordering::AcqRel) == TIMED_OUT {
            *self.slot.timed_out_run.lock() = None;
            self.scripts.timed_out.fetch_sub(1, Ordering::AcqRel);
        }
        self.slot.kill.store(false, Ordering::Release);
    }
}

/// What a script command asks to run, resolved in the engines.
struct Target {
    /// The SHA1 (EVAL, EVALSHA) or function name.
    name: String,
    flags: ScriptFlags,
}

/// Parses `numkeys` with Redis's errors (FCALL words a non-number its
/// own way).
fn numkeys(ctx: &mut Ctx<'_>, args: Args<'_>, kind: Kind) -> Option<usize> {
    let Some(n) = vireo_resp::number::parse_i64(args.get(2)) else {
        ctx.out.error(match kind {
            Kind::Fcall => "ERR Bad number of keys provided",
            _ => crate::cmd::errors::NOT_INT,
        });
        return None;
    };
    if n > args.len() as i64 - 3 {
        ctx.out
            .error("ERR Number of keys can't be greater than number of args");
        return None;
    }
    if n < 0 {
        ctx.out.error("ERR Number of keys can't be negative");
        return None;
    }
    Some(n as usize)
}

/// EVAL, EVALSHA, FCALL and their `_RO` forms.
pub fn run_command(ctx: &mut Ctx<'_>, args: Args<'_>, kind: Kind, ro: bool) {
    match ctx.session.script_debug {
        Some(mode) if kind == Kind::Eval => run_debugged(ctx, args, ro, mode),
        Some(_) if kind == Kind::EvalSha && args.get(1).len() == 40 => {
            if ctx.server.monitor_count.load(Ordering::Relaxed) > 0 {
                crate::exec::monitor::feed_monitors(ctx.server, ctx.session, ctx.db, args);
            }
            ctx.out
                .error("ERR Please use EVAL instead of EVALSHA for debugging");
        }
        _ => run_with(ctx, args, kind, ro, None),
    }
}

/// EVAL under the Lua debugger (after SCRIPT DEBUG YES|SYNC): see
/// `exec::script_debug`; the connection closes once the script's reply is
/// sent. (EVALSHA is refused in debug mode, as in Redis.)
fn run_debugged(ctx: &mut Ctx<'_>, args: Args<'_>, ro: bool, mode: DebugMode) {
    // What this client was sent before must reach it before the session.
    let mut channel = SocketChannel::new(ctx.session.shared.fd);
    if !ctx.out.is_empty() {
        let _ = vireo_script::DebugChannel::write_all(&mut channel, ctx.out.as_bytes());
        ctx.out.clear();
    }
    let limit = match ctx
        .server
        .config
        .hot
        .busy_reply_threshold
        .load(Ordering::Relaxed)
    {
        0 => script_debug::DEFAULT_TIME_LIMIT,
        ms => Duration::from_millis(ms),
    };
    let (start, end) = match mode {
        DebugMode::Sync => ("synchronous", "ended"),
        DebugMode::Forked => ("undoing (YES)", "ended, its writes undone"),
    };
    tracing::warn!("Redis {start} debugging eval session started");
    run_with(
        ctx,
        args,
        Kind::Eval,
        ro,
        Some((mode, Box::new(channel), limit)),
    );
    tracing::warn!("Redis debugging eval session {end}");
    ctx.session.script_debug = None;
    ctx.session.close_after_reply = true;
}

/// A debugging session's mode, the client's channel and the time limit.
type Debugger = (DebugMode, Box<dyn vireo_script::DebugChannel>, Duration);

/// Runs a script command, under the debugger when `debug` is given.
fn run_with(ctx: &mut Ctx<'_>, args: Args<'_>, kind: Kind, ro: bool, debug: Option<Debugger>) {
    if ctx.server.monitor_count.load(Ordering::Relaxed) > 0 {
        // Redis feeds MONITOR here so the script's commands follow it.
        crate::exec::monitor::feed_monitors(ctx.server, ctx.session, ctx.db, args);
    }
    if kind == Kind::EvalSha && args.get(1).len() != 40 {
        return ctx
            .out
            .error("NOSCRIPT No matching script. Please use EVAL.");
    }
    if kind == Kind::Fcall && !function_exists(ctx, args.get(1)) {
        return ctx.out.error("ERR Function not found");
    }
    let Some(n) = numkeys(ctx, args, kind) else {
        return;
    };
    let keys: Vec<&[u8]> = (3..3 + n).map(|i| args.get(i)).collect();
    let argv: Vec<&[u8]> = (3 + n..args.len()).map(|i| args.get(i)).collect();
    let server = ctx.server;
    let worker = ctx.session.shared.worker;
    let result = with_engines(server, worker, |engines| {
        let target = match resolve(server, engines, kind, args.get(1)) {
            Ok(t) => t,
            Err(e) => return Err(e),
        };
        if let Some(e) = prepare_error(server, ctx.session, &target.flags, ro) {
            return Err(e);
        }
        run_target(
            ctx,
            engines,
            (kind, ro, args),
            &target,
            (&keys, &argv),
            debug,
        );
        Ok(())
    });
    match result {
        Ok(Ok(())) => {}
        Ok(Err(e)) | Err(e) => ctx.out.error(&e),
    }
    // The commands the script ran were propagated one by one; the script
    // command itself is not.
    ctx.effects = Some(Vec::new());
}

/// Whether function `name` exists (FCALL checks it before `numkeys`).
fn function_exists(ctx: &Ctx<'_>, name: &[u8]) -> bool {
    with_engines(ctx.server, ctx.session.shared.worker, |e| {
        e.functions.function(name).is_some()
    })
    .unwrap_or(false)
}

/// Finds the script or function to run.
fn resolve(
    server: &Server,
    engines: &mut Engines,
    kind: Kind,
    name: &[u8],
) -> Result<Target, String> {
    match kind {
        Kind::Eval => {
            let sha = load_script(server, engines, name)?;
            let flags = engines.eval.flags(sha.as_bytes()).unwrap_or_default();
            Ok(Target { name: sha, flags })
        }
        Kind::EvalSha => {
            let flags = engines
                .eval
                .flags(name)
                .ok_or_else(|| "NOSCRIPT No matching script. Please use EVAL.".to_owned())?;
            Ok(Target {
                name: String::from_utf8_lossy(name).to_ascii_lowercase(),
                flags,
            })
        }
        Kind::Fcall => {
            let (_, f) = engines
                .functions
                .function(name)
                .ok_or_else(|| "ERR Function not found".to_owned())?;
            Ok(Target {
                name: f.name.clone(),
                flags: f.flags,
            })
        }
    }
}

/// What a write inside a script gets on a read-only replica (Redis's
/// `shared.roslaveerr`).
const READONLY_REPLICA: &str = "READONLY You can't write against a read only replica.";

/// Whether writes of `session`'s scripts are refused because this server
/// is a read-only replica (its master's link, and the AOF being loaded,
/// are obeyed: Redis's `mustObeyClient`).
fn read_only_replica(server: &Server, session: &crate::net::session::Session) -> bool {
    !(session.from_master || session.replaying)
        && server.repl.is_replica()
        && server.config.flag("replica-read-only")
}

/// Redis's `scriptPrepareForRun` refusals. EVAL and EVALSHA are flagged
/// `stale`, so a script without a shebang meets the stale replica here;
/// the others were refused MASTERDOWN by the dispatch already, unless
/// queued in a transaction.
fn prepare_error(
    server: &Server,
    session: &crate::net::session::Session,
    f: &ScriptFlags,
    ro: bool,
) -> Option<String> {
    let stale = dispatch::serving_stale_refused(server);
    if f.eval_compat_mode {
        return stale.then(|| {
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
                .to_owned()
        });
    }
    if stale && !f.allow_stale {
        return Some("MASTERDOWN Link with MASTER is down, replica-serve-stale-data is set to 'no' and 'allow-stale' flag is not set on the script.".to_owned());
    }
    let obeyed = session.from_master || session.replaying;
    if !f.no_writes {
        if read_only_replica(server, session) {
            return Some("READONLY Can not run script with write flag on readonly replica".into());
        }
        if let Some(kind) = dispatch::disk_error_kind(server).filter(|_| !obeyed) {
            return Some(match kind {
                dispatch::DiskError::Rdb => "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts.".to_owned(),
                dispatch::DiskError::Aof(e) => format!("MISCONF Redis is configured to persist data to AOF, but it's currently unable to persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts. AOF error: {e}"),
            });
        }
        if ro {
            return Some("ERR Can not execute a script with write flag using *_ro command.".into());
        }
        if let Some(msg) = dispatch::replicas_error(server) {
            return Some(msg.to_owned());
        }
    }
    if server.config.maxmemory() > 0 && over_maxmemory(server) && !(f.allow_oom || f.no_writes) {
        return Some("OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'".into());
    }
    None
}

/// Whether memory is over `maxmemory` (after the eviction dispatch did).
fn over_maxmemory(server: &Server) -> bool {
    let limit = server.config.maxmemory();
    limit > 0 && crate::memory::alloc::used_memory() as u64 > limit
}

/// Runs the resolved script, starting over with every shard locked when
/// it reaches a busy shard it did not declare before writing.
fn run_target(
    ctx: &mut Ctx<'_>,
    engines: &mut Engines,
    (kind, ro, args): (Kind, bool, Args<'_>),
    target: &Target,
    (keys, argv): (&[&[u8]], &[&[u8]]),
    mut debug: Option<Debugger>,
) {
    let server = ctx.server;
    let memo = match kind {
        Kind::Fcall => format!("f:{}", target.name),
        _ => target.name.clone(),
    };
    // A script's first run (server-wide) holds every shard, and tells
    // whether it keeps to its declared keys: only then do later runs lock
    // just those, so a script that touches other keys never has to wait
    // for a lower shard after it wrote (see the module comment).
    let declared_only = server.scripts.declared_only.read().contains(&memo);
    // A debugged script holds everything: it may stop for as long as its
    // client wants, and must never have to start over.
    if (!declared_only || engines.undeclared.contains(&memo) || debug.is_some())
        && !lock_everything(ctx)
    {
        return busy_while_locking(ctx);
    }
    let mode = RunMode {
        read_only: ro || (!target.flags.eval_compat_mode && target.flags.no_writes),
        allow_oom: !target.flags.eval_compat_mode && target.flags.allow_oom,
        oom_at_start: over_maxmemory(server),
        forked_debug: matches!(debug, Some((DebugMode::Forked, ..))),
    };
    let slot = server.scripts.slot(ctx.session.shared.worker);
    let db = ctx.db;
    let session_db = ctx.session.db;
    let (ready_before, dirty_before) = (ctx.ready.len(), ctx.dirty);
    loop {
        let mark = ctx.out.mark();
        let _guard = SlotGuard::enter(&server.scripts, slot, kind != Kind::Fcall);
        let mut host = ScriptHost {
            ctx: &mut *ctx,
            args,
            mode,
            slot,
            repl: ReplFlags {
                aof: true,
                replicas: true,
            },
            wrote: false,
            effects: false,
            restart: false,
            declared: keys,
            strayed: false,
            started: Instant::now(),
            threshold: Duration::from_millis(
                server
                    .config
                    .hot
                    .busy_reply_threshold
                    .load(Ordering::Relaxed),
            ),
            timed_out: false,
            name: target.name.clone(),
            scratch: ReplyBuf::new(Protocol::Resp2),
            refused: false,
            undo: Vec::new(),
        };
        let mut out = ReplyBuf::new(host.ctx.out.protocol());
        let result = match (kind, debug.take()) {
            (Kind::Eval | Kind::EvalSha, Some((_, channel, limit))) => engines.eval.debug_evalsha(
                &target.name,
                (keys, argv),
                &mut host,
                (channel, limit),
                &mut out,
            ),
            (Kind::Eval | Kind::EvalSha, None) => {
                engines
                    .eval
                    .evalsha(target.name.as_bytes(), keys, argv, &mut host, &mut out)
            }
            (Kind::Fcall, _) => {
                engines
                    .functions
                    .call(target.name.as_bytes(), keys, argv, &mut host, &mut out)
            }
        };
        if host.mode.forked_debug {
            host.undo_writes();
            // Nothing happened: no blocked client may be served.
            host.ctx.ready.truncate(ready_before);
            host.ctx.dirty = dirty_before;
        }
        let restart = host.restart;
        let strayed = host.strayed;
        drop(host);
        if !declared_only && !strayed && !restart {
            server.scripts.declared_only.write().insert(memo.clone());
        } else if strayed {
            engines.undeclared.insert(memo.clone());
        }
        // A script's SELECT stays inside it.
        ctx.db = db;
        ctx.session.db = session_db;
        ctx.session.shared.db.store(db, Ordering::Relaxed);
        if restart && !ctx.keys.holds_all() {
            ctx.out.truncate(mark);
            engines.undeclared.insert(memo.clone());
            if !lock_everything(ctx) {
                return busy_while_locking(ctx);
            }
            continue;
        }
        match result {
            Ok(()) => ctx.out.raw(out.as_bytes()),
            Err(e) => {
                // A command's error the script raised was counted when the
                // command failed.
                ctx.session.error_counted = e.ignore_stats;
                ctx.out.error(&e.message);
            }
        }
        return;
    }
}

/// Replaces the command's view with one holding every shard; false (and
/// nothing held) when another thread's script, holding a shard, went past
/// its busy threshold meanwhile.
fn lock_everything(ctx: &mut Ctx<'_>) -> bool {
    if ctx.keys.holds_all() {
        return true;
    }
    let scripts = &ctx.server.scripts;
    let ks = &ctx.server.keyspace;
    ctx.keys = ks.lock_shards([]);
    match ks.lock_all_unless(|| scripts.busy_error().is_some()) {
        Some(keys) => {
            ctx.keys = keys;
            ctx.keys.set_no_touch(ctx.session.no_touch);
            true
        }
        None => false,
    }
}

/// The reply of a script command that gave up waiting for every shard
/// because another script became busy: Redis would have answered BUSY.
fn busy_while_locking(ctx: &mut Ctx<'_>) {
    let busy = ctx.server.scripts.busy_error().unwrap_or(BUSY_EVAL);
    ctx.out.error(busy);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_flags_replace_the_command_flags() {
        let base = flags::NOSCRIPT | flags::MAY_REPLICATE | flags::STALE;
        let none = ScriptFlags::default();
        assert_eq!(
            script_command_flags(base, none),
            flags::NOSCRIPT | flags::DENYOOM | flags::WRITE
        );
        let ro = ScriptFlags {
            no_writes: true,
            allow_stale: true,
            ..Default::default()
        };
        assert_eq!(
            script_command_flags(base, ro),
            flags::NOSCRIPT | flags::STALE
        );
        let oom = ScriptFlags {
            allow_oom: true,
            ..Default::default()
        };
        assert_eq!(
            script_command_flags(base, oom),
            flags::NOSCRIPT | flags::WRITE
        );
    }

    #[test]
    fn declared_keys_follow_numkeys() {
        let owned = vireo_resp::OwnedArgs::from_slices(["eval", "s", "2", "a", "b", "c"]);
        assert_eq!(declared_keys(owned.as_args()), Some(3..5));
        let owned = vireo_resp::OwnedArgs::from_slices(["eval", "s", "4", "a", "b", "c"]);
        assert_eq!(declared_keys(owned.as_args()), None);
        let owned = vireo_resp::OwnedArgs::from_slices(["eval", "s", "-1"]);
        assert_eq!(declared_keys(owned.as_args()), None);
        let owned = vireo_resp::OwnedArgs::from_slices(["eval", "s", "x"]);
        assert_eq!(declared_keys(owned.as_args()), None);
    }

    #[test]
    fn kill_needs_a_timed_out_script_that_did_not_write() {
        let s = Scripts::new(1);
        assert_eq!(
            s.kill(true),
            Err("NOTBUSY No scripts in execution right now.")
        );
        let slot = s.slot(0);
        let _g = SlotGuard::enter(&s, slot, true);
        slot.state.store(TIMED_OUT, Ordering::Release);
        s.timed_out.fetch_add(1, Ordering::AcqRel);
        assert_eq!(s.busy_error(), Some(BUSY_EVAL));
        assert_eq!(s.kill(false), Err(BUSY_EVAL));
        slot.wrote.store(true, Ordering::Release);
        assert!(s.kill(true).unwrap_err().starts_with("UNKILLABLE"));
        slot.wrote.store(false, Ordering::Release);
        assert_eq!(s.kill(true), Ok(()));
        assert!(slot.kill.load(Ordering::Acquire));
        drop(_g);
        assert_eq!(s.busy_error(), None);
        assert_eq!(s.timed_out.load(Ordering::Acquire), 0);
    }
}
