//! SHUTDOWN and SIGTERM on a master with a lagging replica (Redis 7.0's
//! `shutdown-timeout`): the master holds writes back and waits for the
//! replica to catch up, or for the timeout, logging Redis's lines; SHUTDOWN
//! NOW and `shutdown-on-sigterm now` do not wait; SHUTDOWN ABORT and a
//! failed shutdown answer every client blocked in SHUTDOWN with Redis's
//! error and writes resume. The replica is held with SIGSTOP.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{eventually, info_field, log_has, ok, start_logged, wait_log, Server};

/// A master and a replica following it, both logging to files.
struct Pair {
    master: Server,
    mlog: std::path::PathBuf,
    replica: Server,
}

impl Pair {
    /// `master_args` configure the master.
    fn start(master_args: &[&str]) -> Pair {
        let (master, mlog) = start_logged(master_args);
        let (replica, _) = start_logged(&[]);
        let mut rc = replica.conn();
        ok(
            &mut rc,
            &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
        );
        eventually("the link to come up", || {
            info_field(&mut rc, "master_link_status") == "up"
        });
        Pair {
            master,
            mlog,
            replica,
        }
    }

    /// Sends `sig` (`-STOP`, `-CONT`, `-TERM`) to the replica or master.
    fn signal(server: &Server, sig: &str) {
        let status = std::process::Command::new("kill")
            .args([sig, &server.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Stops the replica once it acknowledged everything, then writes `k`
    /// on the master: the replica lags by that write.
    fn make_replica_lag(&self) {
        let mut mc = self.master.conn();
        ok(&mut mc, &["SET", "k", "1"]);
        assert_eq!(ok(&mut mc, &["WAIT", "1", "0"]), redis::Value::Int(1));
        Pair::signal(&self.replica, "-STOP");
        ok(&mut mc, &["INCR", "k"]);
    }
}

/// Waits until `server`'s process ends.
fn wait_exit(server: &mut Server) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.child().try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A raw connection that sent one command and waits for its reply.
struct Pending {
    r: BufReader<TcpStream>,
}

impl Pending {
    fn send(port: u16, words: &[&str]) -> Pending {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut cmd = format!("*{}\r\n", words.len());
        for w in words {
            cmd.push_str(&format!("${}\r\n{w}\r\n", w.len()));
        }
        s.write_all(cmd.as_bytes()).unwrap();
        Pending {
            r: BufReader::new(s),
        }
    }

    /// The reply line, or "" when the connection closed.
    fn reply(mut self) -> String {
        let mut line = String::new();
        let _ = self.r.read_line(&mut line);
        line.trim_end().to_string()
    }

    /// True if no reply came within `wait`.
    fn still_waiting(&mut self, wait: Duration) -> bool {
        self.r.get_ref().set_read_timeout(Some(wait)).unwrap();
        let mut line = String::new();
        let waiting = matches!(self.r.read_line(&mut line), Err(e)
            if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut));
        self.r
            .get_ref()
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        waiting
    }
}

fn blocked_shutdown_clients(mc: &mut redis::Connection, n: &str) {
    eventually("the SHUTDOWN clients to block", || {
        info_field(mc, "blocked_clients") == n
    });
}

#[test]
fn sigterm_waits_for_a_lagging_replica_holding_writes_back() {
    let mut pair = Pair::start(&["--shutdown-timeout", "300"]);
    pair.make_replica_lag();
    Pair::signal(&pair.master, "-TERM");
    let mut mc = pair.master.conn();
    // The field appears once the signal has been handled, which is not yet
    // when `kill` returns.
    eventually("the shutdown to wait", || {
        let info: String = redis::cmd("INFO").arg("server").query(&mut mc).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("shutdown_in_milliseconds:"))
            .and_then(|ms| ms.trim().parse::<u64>().ok())
            .is_some_and(|ms| ms > 0)
    });
    wait_log(&pair.mlog, "Waiting for replicas before shutting down.");
    // Writes wait; reads are served.
    let mut write = Pending::send(pair.master.port, &["SET", "late", "x"]);
    assert!(write.still_waiting(Duration::from_millis(300)));
    assert_eq!(
        ok(&mut mc, &["GET", "k"]),
        redis::Value::BulkString(b"2".to_vec())
    );
    Pair::signal(&pair.replica, "-CONT");
    wait_exit(&mut pair.master);
    assert_eq!(write.reply(), "", "the held write never ran");
    let log = std::fs::read_to_string(&pair.mlog).unwrap();
    assert!(log.contains("1 of 1 replicas are in sync when shutting down."));
    assert!(!log.contains("Lagging replica"));
    assert!(log.contains("ready to exit, bye bye"));
    let mut rc = pair.replica.conn();
    assert_eq!(
        ok(&mut rc, &["GET", "k"]),
        redis::Value::BulkString(b"2".to_vec())
    );
}

#[test]
fn shutdown_gives_up_on_a_replica_after_shutdown_timeout() {
    let mut pair = Pair::start(&["--shutdown-timeout", "1"]);
    pair.make_replica_lag();
    let blocked = Pending::send(pair.master.port, &["SHUTDOWN"]);
    wait_exit(&mut pair.master);
    assert_eq!(blocked.reply(), "", "SHUTDOWN closes the connection");
    let log = std::fs::read_to_string(&pair.mlog).unwrap();
    let lagging = format!(
        "Lagging replica 127.0.0.1:{} reported offset ",
        pair.replica.port
    );
    assert!(log.contains(&lagging), "{log}");
    assert!(log.contains("0 of 1 replicas are in sync when shutting down."));
    Pair::signal(&pair.replica, "-CONT");
}

#[test]
fn now_and_shutdown_on_sigterm_now_do_not_wait() {
    let mut pair = Pair::start(&["--shutdown-timeout", "300"]);
    pair.make_replica_lag();
    let mut mc = pair.master.conn();
    assert_eq!(
        common::err(&mut mc, &["SHUTDOWN", "ABORT"]),
        "ERR No shutdown in progress."
    );
    ok(
        &mut mc,
        &["CONFIG", "SET", "shutdown-on-sigterm", "nosave now"],
    );
    Pair::signal(&pair.master, "-TERM");
    wait_exit(&mut pair.master);
    assert!(log_has(
        &pair.mlog,
        "0 of 1 replicas are in sync when shutting down."
    ));
    assert!(!log_has(
        &pair.mlog,
        "Waiting for replicas before shutting down."
    ));
    Pair::signal(&pair.replica, "-CONT");

    let mut pair = Pair::start(&["--shutdown-timeout", "300"]);
    pair.make_replica_lag();
    let blocked = Pending::send(pair.master.port, &["SHUTDOWN", "NOW", "NOSAVE"]);
    wait_exit(&mut pair.master);
    assert_eq!(blocked.reply(), "");
    assert!(!log_has(
        &pair.mlog,
        "Waiting for replicas before shutting down."
    ));
    Pair::signal(&pair.replica, "-CONT");
}

#[test]
fn abort_and_failure_answer_every_blocked_shutdown() {
    let pair = Pair::start(&[]);
    pair.make_replica_lag();
    let port = pair.master.port;
    let mut mc = pair.master.conn();
    let (rd1, rd2) = (
        Pending::send(port, &["SHUTDOWN"]),
        Pending::send(port, &["SHUTDOWN"]),
    );
    blocked_shutdown_clients(&mut mc, "2");
    assert_eq!(ok(&mut mc, &["SHUTDOWN", "ABORT"]), redis::Value::Okay);
    for rd in [rd1, rd2] {
        assert_eq!(rd.reply(), "-ERR Errors trying to SHUTDOWN. Check logs.");
    }
    wait_log(&pair.mlog, "Shutdown manually aborted.");
    let info: String = redis::cmd("INFO").arg("server").query(&mut mc).unwrap();
    assert!(!info.contains("shutdown_in_milliseconds"), "{info}");
    ok(&mut mc, &["SET", "writes", "resume"]);

    // A slow first AOF keeps the server from exiting once the replica
    // caught up: the shutdown fails.
    let (rd1, rd2) = (
        Pending::send(port, &["SHUTDOWN"]),
        Pending::send(port, &["SHUTDOWN"]),
    );
    blocked_shutdown_clients(&mut mc, "2");
    ok(
        &mut mc,
        &["CONFIG", "SET", "rdb-key-save-delay", "30000000"],
    );
    ok(&mut mc, &["CONFIG", "SET", "appendonly", "yes"]);
    Pair::signal(&pair.replica, "-CONT");
    for rd in [rd1, rd2] {
        assert_eq!(rd.reply(), "-ERR Errors trying to SHUTDOWN. Check logs.");
    }
    let log = std::fs::read_to_string(&pair.mlog).unwrap();
    assert!(log.contains("1 of 1 replicas are in sync when shutting down."));
    assert!(log.contains("Writing initial AOF, can't exit."));
    assert!(
        log.contains("Errors trying to shut down the server. Check the logs for more information.")
    );
    ok(&mut mc, &["SET", "writes", "resume again"]);
    // FORCE exits anyway, stopping the rewrite.
    let mut master = pair.master;
    let _ = common::q(&mut mc, &["SHUTDOWN", "NOSAVE", "FORCE"]);
    wait_exit(&mut master);
    assert!(log_has(&pair.mlog, "Writing initial AOF. Exit anyway."));
}
