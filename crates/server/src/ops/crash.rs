//! The crash report, as Redis writes it to its log.
//!
//! On SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT (a bug, DEBUG SEGFAULT, a
//! `kill -ABRT`) the handler writes a report and the process then dies of
//! the same signal, so a core dump or a supervisor sees what Redis's would
//! see. DEBUG PANIC and DEBUG ASSERT write the same report after their own
//! first lines and then abort (or `_exit(1)` with `use-exit-on-panic`).
//! The report reads as Redis's: "Redis <version> crashed by signal", the
//! `------ STACK TRACE ------` block with the faulting instruction and a
//! symbolized backtrace, `------ INFO OUTPUT ------` with `INFO all`,
//! `------ CLIENT LIST OUTPUT ------`, and an empty modules block; tools
//! and Redis's suite grep for these.
//!
//! Frames whose function is a command's handler also name that command's
//! implementation as Redis names its C functions (`debugCommand` for
//! DEBUG), so a report says which command was running in the terms Redis
//! users know.
//!
//! Not done here: Redis's fast memory test (`crash-memcheck-enabled`
//! writes patterns over every anonymous mapping; Vireo has no memory test,
//! the parameter is accepted and changes nothing), its register dump and
//! its disassembly around the faulting instruction.
//!
//! `crash-log-enabled no` leaves the signals' previous dispositions in
//! place (the default: the process dies without a report).

use std::ffi::c_void;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use libc::c_int;

use super::log::{write_raw, write_warning};
use crate::server::{Server, REDIS_VERSION};

/// The signals that mean the process is broken.
const FATAL_SIGNALS: [c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGABRT,
];

/// Most frames a stack trace shows (Redis's limit too).
pub(crate) const MAX_FRAMES: usize = 100;

/// What the report needs from the rest of the server, given once at
/// start-up: `ops` does not see the command families, so the INFO text
/// and the handlers' names come from the caller.
pub struct Reporter {
    /// The server whose INFO and client list the report shows.
    pub server: Arc<Server>,
    /// `INFO all` as the INFO command writes it.
    pub info: fn(&Server) -> String,
    /// Every command handler's address and the name Redis gives the C
    /// function implementing that command (`debugCommand`).
    pub handlers: Vec<(usize, String)>,
}

static REPORTER: OnceLock<Reporter> = OnceLock::new();

/// The dispositions the fatal signals had before ours, restored by
/// `crash-log-enabled no` (Rust's own stack-overflow reporter among them).
static PREVIOUS: OnceLock<[libc::sigaction; 5]> = OnceLock::new();

/// A report has started: a second fault while writing one (or a second
/// thread crashing) does not start another header.
static REPORT_STARTED: AtomicBool = AtomicBool::new(false);

/// Remembers what the report shows and installs the handlers if
/// `crash-log-enabled` asks for them.
pub fn install(reporter: Reporter) {
    let enabled = reporter.server.config.flag("crash-log-enabled");
    // glibc's backtrace() loads the unwinder on its first call, which
    // allocates and takes the loader's lock: do it now, not in a handler.
    let mut warm = [std::ptr::null_mut::<c_void>(); 2];
    // SAFETY: the buffer is ours and its length is passed.
    unsafe { libc::backtrace(warm.as_mut_ptr(), warm.len() as c_int) };
    let _ = REPORTER.set(reporter);
    set_enabled(enabled);
}

/// `crash-log-enabled`: installs the report's handler for the fatal
/// signals, or puts their previous dispositions back.
pub fn set_enabled(on: bool) {
    if REPORTER.get().is_none() {
        return;
    }
    let previous = PREVIOUS.get_or_init(current_dispositions);
    for (sig, old) in FATAL_SIGNALS.iter().zip(previous) {
        // SAFETY: `sigaction` only reads the struct we pass; the handler
        // has the three-argument signature SA_SIGINFO calls for.
        unsafe {
            if on {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_fatal_signal as *const () as usize;
                // Redis's flags: the handler runs once (a fault inside it
                // then kills the process) and may be re-entered. Not on
                // the small alternate stack Rust gives each thread:
                // symbolizing frames needs more than it has, so a stack
                // overflow now ends without a report, as in Redis.
                act.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER | libc::SA_RESETHAND;
                libc::sigemptyset(&mut act.sa_mask);
                libc::sigaction(*sig, &act, std::ptr::null_mut());
            } else {
                libc::sigaction(*sig, old, std::ptr::null_mut());
            }
        }
    }
}

/// The fatal signals' dispositions now.
fn current_dispositions() -> [libc::sigaction; 5] {
    FATAL_SIGNALS.map(|sig| {
        // SAFETY: a null new action only reads the current one into `old`.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut old);
            old
        }
    })
}

/// The handler of the fatal signals.
///
/// SAFETY (async-signal safety): of what this does, only the final
/// `sigaction` and `raise` are async-signal-safe. Symbolizing frames,
/// formatting, rendering INFO and taking the log's lock allocate and may
/// take locks the interrupted thread holds. Redis's handler does the same
/// kinds of work (INFO, CLIENT LIST, symbol lookup) and for the same
/// reason: the process is going to die anyway, and a report that usually
/// comes out is worth the chance of a hang or a second fault. A second
/// fault kills the process at once (SA_RESETHAND put the default back),
/// and the log's lock is only waited for a bounded time. The raw pointers
/// read come from the kernel for this very signal.
extern "C" fn on_fatal_signal(sig: c_int, info: *mut libc::siginfo_t, uctx: *mut c_void) {
    begin_report();
    // SAFETY: the kernel passes a valid siginfo_t for SA_SIGINFO handlers;
    // the union fields read are the ones its si_code and signal define.
    let (code, addr, sender) = unsafe {
        let info = &*info;
        let sender = (info.si_code == libc::SI_USER).then(|| (info.si_pid(), info.si_uid()));
        (info.si_code, info.si_addr() as usize, sender)
    };
    write_warning(&format!(
        "Redis {REDIS_VERSION} crashed by signal: {sig}, si_code: {code}"
    ));
    if sig == libc::SIGSEGV || sig == libc::SIGBUS {
        write_warning(&format!("Accessing address: {addr:#x}"));
    }
    if let Some((pid, uid)) = sender.filter(|(pid, _)| *pid != -1) {
        write_warning(&format!("Killed by PID: {pid}, UID: {uid}"));
    }
    let eip = instruction_pointer(uctx);
    if let Some(eip) = eip {
        write_warning(&format!("Crashed running the instruction at: {eip:#x}"));
    }
    // A jump to an unmapped address: unwinding from there would fault
    // again, so only the instruction pointer is shown.
    let frames = if eip == Some(addr) {
        Vec::new()
    } else {
        backtrace_here(1)
    };
    write_raw(&stack_trace(eip, &frames));
    write_raw(&report_body());
    end_report();
    // SAFETY: async-signal-safe calls; the default disposition ends the
    // process with this signal, as if no handler had been installed.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// A software failure (DEBUG PANIC, DEBUG ASSERT): `lines` as warnings,
/// then the report, then the process ends as Redis's does: `_exit(1)`
/// with `use-exit-on-panic`, else `abort()` with the handlers removed
/// first, so the report is not written twice.
pub fn software_failure(lines: &[String]) -> ! {
    begin_report();
    for line in lines {
        write_warning(line);
    }
    let crash_log = REPORTER
        .get()
        .is_some_and(|r| r.server.config.flag("crash-log-enabled"));
    if crash_log {
        write_raw(&stack_trace(None, &backtrace_here(1)));
        write_raw(&report_body());
    }
    end_report();
    set_enabled(false);
    let exit = REPORTER
        .get()
        .is_some_and(|r| r.server.config.flag("use-exit-on-panic"));
    if exit {
        // SAFETY: ends the process at once; nothing after it runs.
        unsafe { libc::_exit(1) }
    }
    std::process::abort()
}

/// DEBUG SEGFAULT: a write to a read-only page, as Redis's, so the report
/// shows a genuine fault (signal 11, the address written).
pub fn segfault() -> ! {
    // SAFETY: a fresh private anonymous page mapped read-only; the
    // volatile write to it faults, and the fault's handler ends the
    // process (it never returns here). If the mapping fails the null
    // pointer faults the same way.
    unsafe {
        let page = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        let target = if page == libc::MAP_FAILED {
            std::ptr::null_mut()
        } else {
            page.cast::<u8>()
        };
        std::ptr::write_volatile(target, b'x');
    }
    // The write faulted; if a handler somehow returned, still crash.
    std::process::abort()
}

/// The report's first line, once per process.
fn begin_report() {
    if !REPORT_STARTED.swap(true, Ordering::AcqRel) {
        write_raw("\n\n=== VIREO BUG REPORT START: copy the log from here ===\n");
    }
}

/// The report's last block.
fn end_report() {
    write_raw(
        "\n=== VIREO BUG REPORT END: copy the log up to here ===\n\n\
         \x20      Please report the crash with this log on Vireo's issue tracker.\n\n",
    );
}

/// The return addresses of the current thread's stack, skipping this
/// function and `skip` more frames (never inlined, so that the count of
/// frames to skip holds).
#[inline(never)]
pub(crate) fn backtrace_here(skip: usize) -> Vec<usize> {
    let mut buf = [std::ptr::null_mut::<c_void>(); MAX_FRAMES];
    // SAFETY: the buffer is ours and its length is passed; glibc fills at
    // most that many entries and returns how many.
    let n = unsafe { libc::backtrace(buf.as_mut_ptr(), MAX_FRAMES as c_int) };
    let n = usize::try_from(n).unwrap_or(0);
    buf[..n]
        .iter()
        .skip(skip + 1)
        .map(|p| *p as usize)
        .collect()
}

/// The interrupted instruction's address, from the signal's context.
pub(crate) fn instruction_pointer(uctx: *mut c_void) -> Option<usize> {
    if uctx.is_null() {
        return None;
    }
    // SAFETY: for SA_SIGINFO handlers the kernel passes a valid ucontext_t
    // as the third argument; only its saved program counter is read.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    unsafe {
        let uc = &*(uctx as *const libc::ucontext_t);
        Some(uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize)
    }
    // SAFETY: as above.
    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    unsafe {
        let uc = &*(uctx as *const libc::ucontext_t);
        Some(uc.uc_mcontext.pc as usize)
    }
    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    None
}

/// The `------ STACK TRACE ------` block: the interrupted instruction
/// (`EIP:`) when known, then one line per frame.
pub(crate) fn stack_trace(eip: Option<usize>, frames: &[usize]) -> String {
    let mut out = String::from("\n------ STACK TRACE ------\n");
    if let Some(eip) = eip {
        out.push_str("EIP:\n");
        out.push_str(&frame_line(eip));
    }
    out.push_str("\nBacktrace:\n");
    for ip in frames {
        out.push_str(&frame_line(*ip));
    }
    out
}

/// One frame as `object(function+0xoffset)[0xaddress]`, the form glibc's
/// backtrace_symbols gives Redis, followed by Redis's name for the
/// command whose handler the function is.
pub(crate) fn frame_line(ip: usize) -> String {
    let mut name = None;
    // The last symbol resolved for an address is the function the
    // instruction is in; the ones before are functions inlined into it.
    backtrace::resolve(ip as *mut c_void, |symbol| {
        name = symbol.name().map(|n| format!("{n:#}"));
    });
    // The symbol's own start address is not reliable across the
    // resolver's backends; the unwinder's tables give the function's.
    // SAFETY: the unwinder only reads its tables; an address outside any
    // function gives null.
    let start = unsafe { _Unwind_FindEnclosingFunction(ip as *mut c_void) } as usize;
    let mut line = object_path(ip);
    line.push('(');
    if let Some(name) = &name {
        let _ = write!(line, "{name}+{:#x}", ip.wrapping_sub(start));
    }
    let _ = write!(line, ")[{ip:#x}]");
    if let Some(command) = (start != 0).then(|| command_function(start)).flatten() {
        let _ = write!(line, " {command}");
    }
    line.push('\n');
    line
}

extern "C" {
    /// libgcc's unwinder (linked by every Rust program): the start of the
    /// function holding `pc`, from its unwind tables.
    fn _Unwind_FindEnclosingFunction(pc: *mut c_void) -> *mut c_void;
}

/// The path of the executable or library holding `ip`.
fn object_path(ip: usize) -> String {
    // SAFETY: dladdr only reads the loader's tables and writes `info`; the
    // name it returns is a C string the loader owns for the object's life.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(ip as *const c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return String::new();
        }
        std::ffi::CStr::from_ptr(info.dli_fname)
            .to_string_lossy()
            .into_owned()
    }
}

/// Redis's name for the command whose handler starts at `addr`.
fn command_function(addr: usize) -> Option<&'static str> {
    let handlers = &REPORTER.get()?.handlers;
    handlers
        .iter()
        .find(|(a, _)| *a == addr)
        .map(|(_, name)| name.as_str())
}

/// The report's body after the stack trace: INFO, the client list, the
/// (empty) modules block.
fn report_body() -> String {
    let Some(reporter) = REPORTER.get() else {
        return String::new();
    };
    let server = &reporter.server;
    let mut out = String::from("\n------ INFO OUTPUT ------\n");
    out.push_str(&(reporter.info)(server));
    out.push_str("\n------ CLIENT LIST OUTPUT ------\n");
    for client in server.clients.snapshot() {
        out.push_str(&client.info_line());
        out.push('\n');
    }
    // Vireo loads no modules.
    out.push_str("\n------ MODULES INFO OUTPUT ------\n");
    out
}

/// The name Redis gives the C function implementing a command:
/// `debug` → `debugCommand`, `config|get` → `configGetCommand`,
/// `georadius_ro` → `georadiusroCommand`.
pub fn redis_function_name(command: &str) -> String {
    let mut out = String::with_capacity(command.len() + 7);
    let mut upper = false;
    for c in command.chars() {
        match c {
            '|' => upper = true,
            '_' | '-' => {}
            c if upper => {
                out.push(c.to_ascii_uppercase());
                upper = false;
            }
            c => out.push(c.to_ascii_lowercase()),
        }
    }
    out.push_str("Command");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_names_follow_redis() {
        assert_eq!(redis_function_name("debug"), "debugCommand");
        assert_eq!(redis_function_name("config|get"), "configGetCommand");
        assert_eq!(redis_function_name("georadius_ro"), "georadiusroCommand");
    }

    #[inline(never)]
    fn a_named_function() -> Vec<usize> {
        // Not a tail call, or this frame would be gone.
        let frames = backtrace_here(0);
        std::hint::black_box(frames)
    }

    #[test]
    fn a_stack_trace_names_its_functions() {
        let frames = a_named_function();
        assert!(!frames.is_empty());
        let text = stack_trace(Some(frames[0]), &frames);
        let (eip, backtrace) = text.split_once("\nBacktrace:\n").unwrap();
        assert!(
            eip.starts_with("\n------ STACK TRACE ------\nEIP:\n/"),
            "{text}"
        );
        // object(function+0xoffset)[0xaddress]
        let exe = std::env::current_exe().unwrap();
        let first = format!("{}(", exe.display());
        assert!(eip.contains(&first), "{text}");
        assert!(eip.contains("a_named_function+0x"), "{text}");
        assert!(
            backtrace.contains("a_stack_trace_names_its_functions"),
            "{text}"
        );
    }
}
