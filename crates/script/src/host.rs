//! The boundary between a running script and the server that runs it.
//!
//! The engine knows nothing of keys, locks or clients: everything a script
//! asks of the outside world goes through [`Host`], which the server
//! implements for the duration of one script run (holding whatever locks
//! the run needs). The engine keeps a type-erased pointer to that host in
//! the VM's app data while the script runs ([`RunState`]) and clears it
//! before returning, so Lua callbacks, which must be `'static`, can reach it.

use crate::rand48::Rand48;
use mlua::{Lua, WeakLua};
use std::cell::RefCell;
use std::ptr::NonNull;
use std::rc::Rc;
use vireo_resp::{Args, Protocol};

/// `redis.log` levels (Redis's `LL_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// `redis.LOG_DEBUG` (0).
    Debug,
    /// `redis.LOG_VERBOSE` (1).
    Verbose,
    /// `redis.LOG_NOTICE` (2).
    Notice,
    /// `redis.LOG_WARNING` (3).
    Warning,
}

impl LogLevel {
    /// The level for Redis's numeric value, if valid.
    pub fn from_number(n: i64) -> Option<LogLevel> {
        Some(match n {
            0 => LogLevel::Debug,
            1 => LogLevel::Verbose,
            2 => LogLevel::Notice,
            3 => LogLevel::Warning,
            _ => return None,
        })
    }
}

/// What the host wants after the periodic check ([`Host::interrupt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    /// Keep running.
    Continue,
    /// Abort the script now (SCRIPT KILL / FUNCTION KILL): it fails with
    /// `ERR Script killed by user with SCRIPT KILL...`, which `pcall`
    /// cannot catch.
    Kill,
}

/// `redis.set_repl` flags (Redis's `PROPAGATE_AOF` = 1, `PROPAGATE_REPL` =
/// 2): where the effects of the script's following writes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplFlags {
    /// Write to the AOF.
    pub aof: bool,
    /// Send to replicas.
    pub replicas: bool,
}

/// The server side of a script run.
pub trait Host {
    /// Runs one command for `redis.call`/`redis.pcall` (`args[0]` is the
    /// command name) and returns its reply as RESP bytes (exactly one
    /// reply), produced in protocol `resp` (the script's `redis.setresp`,
    /// RESP2 by default). Refusals (unknown command, `noscript` commands,
    /// writes in read-only scripts, ACL, OOM) are error replies with
    /// Redis's texts, e.g. `-ERR Unknown Redis command called from
    /// script\r\n`. The engine turns the bytes straight into Lua values
    /// (bytes that are not one well-formed reply become an error).
    fn call(&mut self, args: Args<'_>, resp: Protocol) -> &[u8];

    /// Whether the last [`Host::call`]'s error was a refusal (the command
    /// did not run: unknown, `noscript`, ACL, read-only, OOM …) rather
    /// than the command's own error reply. Only the Lua debugger asks (it
    /// logs the two differently, as Redis does).
    fn last_call_refused(&self) -> bool {
        false
    }

    /// `redis.acl_check_cmd`: whether the calling user may run `args`;
    /// `None` when the command does not exist.
    fn acl_check(&mut self, args: Args<'_>) -> Option<bool>;

    /// `redis.log`: one log line at `level` (the host filters by its
    /// verbosity).
    fn log(&mut self, level: LogLevel, message: &[u8]);

    /// `redis.set_repl`: where the script's next writes propagate.
    fn set_repl(&mut self, flags: ReplFlags);

    /// Called every [`crate::HOOK_INSTRUCTIONS`] Lua instructions while the
    /// script runs: the host may serve other clients (`-BUSY`) and decide to
    /// kill the script.
    fn interrupt(&mut self) -> Interrupt;
}

/// Type-erased pointer to the running host.
#[derive(Clone, Copy)]
pub(crate) struct HostPtr(NonNull<dyn Host + 'static>);

/// A VM's run state, shared by its app data (where mlua callbacks find
/// it) and the raw C functions `redis.call` and `redis.pcall` (which hold
/// a pointer to it as an upvalue: they cannot reach the app data).
pub(crate) type SharedRun = Rc<RefCell<RunState>>;

/// Runs `f` with the run state of `lua`; `None` when the VM has none or
/// it is borrowed already.
pub(crate) fn with_run<R>(lua: &Lua, f: impl FnOnce(&mut RunState) -> R) -> Option<R> {
    let shared = lua.app_data_ref::<SharedRun>()?;
    let mut state = shared.try_borrow_mut().ok()?;
    Some(f(&mut state))
}

/// Per-VM state of the current run.
pub(crate) struct RunState {
    /// The host of the running script; `None` between runs.
    host: Option<HostPtr>,
    /// Protocol `redis.call` replies use (`redis.setresp`).
    pub(crate) resp: Protocol,
    /// Set once the run was killed or timed out: the error every later
    /// instruction raises again, so `pcall` cannot swallow it.
    pub(crate) abort: Option<&'static str>,
    /// `math.random`'s generator during a run (taken from the process's
    /// at `begin`, given back at `end`: see `rand48`).
    pub(crate) rng: Rand48,
    /// `rng` as the run took it: a run that drew nothing gives nothing
    /// back, so it cannot undo the draws of a run that overlapped it.
    rng_taken: Rand48,
    /// Scratch buffer the arguments of `redis.call` are packed into.
    pub(crate) args: ArgBuf,
    /// While a library loads: when its code must have finished.
    pub(crate) load_deadline: Option<std::time::Instant>,
    /// During a SCRIPT DEBUG session: the VM, for the debugger's log of
    /// each `redis.call` (weak: the run state lives inside the VM).
    pub(crate) debugger: Option<WeakLua>,
}

impl Default for RunState {
    fn default() -> Self {
        RunState {
            host: None,
            resp: Protocol::Resp2,
            abort: None,
            rng: Rand48::default(),
            rng_taken: Rand48::default(),
            args: ArgBuf::default(),
            load_deadline: None,
            debugger: None,
        }
    }
}

/// A command's arguments as `redis.call` packs them (Redis's
/// `luaArgsToRedisArgv`): one byte buffer and the range of each argument,
/// reused from call to call.
#[derive(Default)]
pub(crate) struct ArgBuf {
    /// The arguments' bytes, one after the other.
    bytes: Vec<u8>,
    /// Each argument's range in `bytes`.
    ranges: Vec<(usize, usize)>,
}

impl ArgBuf {
    /// Forgets the arguments, keeping the buffers.
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.ranges.clear();
    }

    /// Appends a string argument.
    pub(crate) fn push_bytes(&mut self, bytes: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        self.ranges.push((start, self.bytes.len()));
    }

    /// Appends a number argument, as C's `%.17g` prints it (integers below
    /// 10^17 print as their digits, without the general formatter).
    pub(crate) fn push_number(&mut self, n: f64) {
        let start = self.bytes.len();
        if n.fract() == 0.0 && n.abs() < 1e17 && !(n == 0.0 && n.is_sign_negative()) {
            vireo_resp::number::write_i64(&mut self.bytes, n as i64);
        } else {
            self.bytes
                .extend_from_slice(crate::numfmt::format_g(n, 17).as_bytes());
        }
        self.ranges.push((start, self.bytes.len()));
    }

    /// The arguments.
    pub(crate) fn args(&self) -> Args<'_> {
        Args::new(&self.bytes, &self.ranges)
    }
}

impl RunState {
    /// Whether a script (or a library load) is running.
    pub(crate) fn running(&self) -> bool {
        self.host.is_some()
    }

    /// Starts a run with `host`, resetting the per-run state as Redis does
    /// (replies in RESP2 until `redis.setresp`).
    ///
    /// The pointer's lifetime is erased; [`RunGuard`] clears it before the
    /// borrow of `host` ends.
    pub(crate) fn begin(&mut self, host: &mut dyn Host) {
        let ptr: NonNull<dyn Host + '_> = NonNull::from(host);
        // SAFETY: only the lifetime bound of the trait object changes (same
        // layout). The pointer is stored for the duration of one run and
        // removed by `RunGuard::drop` before `run_with_host` returns, that is
        // before the `&mut dyn Host` it came from expires; it is only
        // dereferenced on this thread, by callbacks of this run.
        let ptr: NonNull<dyn Host + 'static> = unsafe { std::mem::transmute(ptr) };
        self.host = Some(HostPtr(ptr));
        self.resp = Protocol::Resp2;
        self.abort = None;
        self.rng = Rand48::take_shared();
        self.rng_taken = self.rng.clone();
    }

    /// Ends the run: forgets the host, hands the generator back.
    pub(crate) fn end(&mut self) {
        if self.rng != self.rng_taken {
            self.rng.give_back();
        }
        self.host = None;
        self.abort = None;
    }

    /// The running host, if any.
    pub(crate) fn host(&self) -> Option<HostPtr> {
        self.host
    }
}

impl HostPtr {
    /// Calls `f` with the host.
    ///
    /// Callers must not hold a borrow of the VM's [`RunState`]: the host
    /// never calls back into Lua and callbacks do not nest, but the host's
    /// [`Host::interrupt`] may serve other clients.
    pub(crate) fn with<R>(self, f: impl FnOnce(&mut dyn Host) -> R) -> R {
        // SAFETY: the pointer came from a live `&mut dyn Host` in
        // `RunState::begin` and is removed when the run ends; callbacks run
        // one at a time on the run's thread, so no other reference to the
        // host exists while `f` runs (the caller of the run is blocked in
        // Lua until the callback returns).
        let host = unsafe { &mut *self.0.as_ptr() };
        f(host)
    }
}
