//! The crash report and the software watchdog (ops/crash.rs,
//! ops/watchdog.rs): what lands in the log, and how the process ends; and
//! the OOM score the process asks the kernel for (ops/oom.rs).

mod common;

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use common::{ok, q, start_logged as start, wait_for_log, Server};

/// Waits for the process to end and returns the signal that ended it.
fn ending_signal(server: &mut Server) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = server.child().try_wait() {
            return status.signal();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn debug_segfault_writes_the_report_and_dies_of_sigsegv() {
    let (mut server, log) = start(&[]);
    let mut con = server.conn();
    assert!(q(&mut con, &["DEBUG", "SEGFAULT"]).is_err());
    assert_eq!(ending_signal(&mut server), Some(libc::SIGSEGV));
    let text = wait_for_log(&log, "BUG REPORT END");
    assert!(text.contains("crashed by signal: 11"), "{text}");
    assert!(text.contains("------ STACK TRACE ------"), "{text}");
    // The frame of DEBUG's handler carries Redis's name for it.
    assert!(text.contains(" debugCommand\n"), "{text}");
    assert!(text.contains("------ INFO OUTPUT ------"), "{text}");
    assert!(text.contains("redis_version:7.0.15"), "{text}");
    assert!(text.contains("------ CLIENT LIST OUTPUT ------"), "{text}");
}

#[test]
fn sigabrt_from_outside_names_the_sender() {
    let (mut server, log) = start(&[]);
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(server.pid() as i32, libc::SIGABRT) };
    assert_eq!(ending_signal(&mut server), Some(libc::SIGABRT));
    let text = wait_for_log(&log, "BUG REPORT END");
    assert!(text.contains("crashed by signal: 6, si_code: 0"), "{text}");
    assert!(
        text.contains(&format!("Killed by PID: {}", std::process::id())),
        "{text}"
    );
}

#[test]
fn crash_log_disabled_dies_without_a_report() {
    let (mut server, log) = start(&["--crash-log-enabled", "no"]);
    let mut con = server.conn();
    ok(&mut con, &["CONFIG", "SET", "crash-log-enabled", "no"]);
    assert!(q(&mut con, &["DEBUG", "SEGFAULT"]).is_err());
    assert_eq!(ending_signal(&mut server), Some(libc::SIGSEGV));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!text.contains("crashed by signal"), "{text}");
}

#[test]
fn debug_panic_reports_and_exits_with_use_exit_on_panic() {
    let (mut server, log) = start(&["--use-exit-on-panic", "yes"]);
    let mut con = server.conn();
    assert!(q(&mut con, &["DEBUG", "PANIC"]).is_err());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Ok(Some(status)) = server.child().try_wait() {
            break status;
        }
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(1));
    let text = wait_for_log(&log, "BUG REPORT END");
    assert!(
        text.contains("Guru Meditation: DEBUG PANIC called"),
        "{text}"
    );
    assert!(text.contains("------ STACK TRACE ------"), "{text}");
    // The handlers were removed before exiting: one report only.
    assert!(!text.contains("crashed by signal"), "{text}");
}

#[test]
fn watchdog_logs_the_stalled_stack() {
    let (server, log) = start(&[]);
    let mut con = server.conn();
    ok(&mut con, &["CONFIG", "SET", "watchdog-period", "200"]);
    ok(&mut con, &["DEBUG", "SLEEP", "1"]);
    let text = wait_for_log(&log, "debugCommand");
    assert!(text.contains("--- WATCHDOG TIMER EXPIRED ---"), "{text}");
    assert!(text.contains("cmd::debug::sleep"), "{text}");
    // The server carries on.
    ok(&mut con, &["PING"]);
    // Hidden from patterns, as in Redis, but readable by name.
    let all = q(&mut con, &["CONFIG", "GET", "*"]).unwrap();
    assert!(!format!("{all:?}").contains("watchdog-period"));
    let one = q(&mut con, &["CONFIG", "GET", "watchdog-period"]).unwrap();
    assert!(format!("{one:?}").contains("200"), "{one:?}");
}

/// The server's `/proc/<pid>/oom_score_adj`.
fn oom_score(server: &Server) -> i64 {
    let path = format!("/proc/{}/oom_score_adj", server.pid());
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn oom_score_adj_follows_mode_and_role() {
    let (server, _log) = start(&[]);
    let mut con = server.conn();
    let base = oom_score(&server);
    ok(
        &mut con,
        &["CONFIG", "SET", "oom-score-adj-values", "10 20 30"],
    );
    assert_eq!(oom_score(&server), base, "untouched while off");
    ok(&mut con, &["CONFIG", "SET", "oom-score-adj", "yes"]);
    assert_eq!(oom_score(&server), base + 10);
    ok(&mut con, &["REPLICAOF", "127.0.0.1", "1"]);
    assert_eq!(oom_score(&server), base + 20);
    ok(&mut con, &["REPLICAOF", "NO", "ONE"]);
    assert_eq!(oom_score(&server), base + 10);
    ok(&mut con, &["CONFIG", "SET", "oom-score-adj", "absolute"]);
    assert_eq!(oom_score(&server), 10);
    ok(&mut con, &["CONFIG", "SET", "oom-score-adj", "no"]);
    assert_eq!(oom_score(&server), base);
}
