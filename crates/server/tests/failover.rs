//! FAILOVER between Vireo processes on loopback: the master hands its role
//! to a caught-up replica (which continues the history with a partial
//! resync), a timeout without FORCE or ABORT leaves everything as it was,
//! and the error replies equal redis-server's (skipped without it).

mod common;

use common::eventually;

use std::process::Command;
use std::time::{Duration, Instant};

use common::diff::{redis_server_available, start_redis, Raw};
use common::{err, info_field, ok, q, Server};

/// A master and two replicas following it, fully synced.
fn trio() -> (Server, Server, Server) {
    let master = Server::start(&["--save", ""]);
    let port = master.port.to_string();
    let replicas =
        [0, 1].map(|_| Server::start(&["--save", "", "--replicaof", "127.0.0.1", &port]));
    let mut m = master.conn();
    eventually("two online replicas", || {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut m).unwrap();
        info.lines()
            .filter(|l| l.starts_with("slave") && l.contains("state=online"))
            .count()
            == 2
    });
    let [a, b] = replicas;
    (master, a, b)
}

fn role(con: &mut redis::Connection) -> String {
    info_field(con, "role")
}

fn signal(server: &Server, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn failover_to_a_replica_swaps_the_roles_without_a_full_sync() {
    let (master, target, other) = trio();
    let mut m = master.conn();
    for i in 0..200 {
        ok(&mut m, &["SET", &format!("k{i}"), "v"]);
    }
    let mut t = target.conn();
    let full_before = info_field(&mut t, "sync_full");
    ok(
        &mut m,
        &["FAILOVER", "TO", "127.0.0.1", &target.port.to_string()],
    );
    eventually("the failover to end", || {
        info_field(&mut m, "master_failover_state") == "no-failover"
    });
    assert_eq!(role(&mut m), "slave");
    assert_eq!(info_field(&mut m, "master_port"), target.port.to_string());
    assert_eq!(role(&mut t), "master");
    assert_eq!(info_field(&mut t, "sync_partial_ok"), "1");
    assert_eq!(info_field(&mut t, "sync_full"), full_before);
    // The new master takes writes, and its old master follows them.
    ok(&mut t, &["SET", "after", "1"]);
    eventually("the old master to get the write", || {
        q(&mut m, &["GET", "after"]).ok() == Some(redis::Value::BulkString(b"1".to_vec()))
    });
    assert!(err(&mut m, &["SET", "x", "1"]).starts_with("READONLY"));
    // The other replica moves over with a partial resync too.
    let mut o = other.conn();
    ok(
        &mut o,
        &["REPLICAOF", "127.0.0.1", &target.port.to_string()],
    );
    let target_port = target.port.to_string();
    eventually("the other replica to follow the new master", || {
        info_field(&mut o, "master_port") == target_port
            && info_field(&mut o, "master_link_status") == "up"
    });
    ok(&mut t, &["SET", "after", "2"]);
    eventually("the other replica to get the new master's writes", || {
        q(&mut o, &["GET", "after"]).ok() == Some(redis::Value::BulkString(b"2".to_vec()))
    });
    assert_eq!(info_field(&mut t, "sync_partial_ok"), "2");
    assert_eq!(info_field(&mut t, "sync_full"), full_before);
}

#[test]
fn a_failover_that_times_out_or_is_aborted_changes_nothing() {
    let (master, stopped, _other) = trio();
    let mut m = master.conn();
    signal(&stopped, "-STOP");
    ok(&mut m, &["SET", "k", "1"]);
    let target = stopped.port.to_string();
    ok(
        &mut m,
        &["FAILOVER", "TO", "127.0.0.1", &target, "TIMEOUT", "300"],
    );
    assert_eq!(
        info_field(&mut m, "master_failover_state"),
        "waiting-for-sync"
    );
    // Reads go on while writes wait.
    ok(&mut m, &["GET", "k"]);
    assert_eq!(
        err(&mut m, &["FAILOVER"]),
        "ERR FAILOVER already in progress."
    );
    assert_eq!(
        err(&mut m, &["REPLICAOF", "NO", "ONE"]),
        "ERR REPLICAOF not allowed while failing over."
    );
    eventually("the timeout", || {
        info_field(&mut m, "master_failover_state") == "no-failover"
    });
    assert_eq!(role(&mut m), "master");
    ok(&mut m, &["SET", "k", "2"]);

    // ABORT lifts the pause: a write held back by it completes.
    ok(
        &mut m,
        &["FAILOVER", "TO", "127.0.0.1", &target, "TIMEOUT", "60000"],
    );
    let writer = {
        let client = master.client();
        std::thread::spawn(move || {
            let mut c = client.get_connection().unwrap();
            let started = Instant::now();
            ok(&mut c, &["SET", "held", "1"]);
            started.elapsed()
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    ok(&mut m, &["FAILOVER", "ABORT"]);
    assert!(writer.join().unwrap() >= Duration::from_millis(250));
    assert_eq!(info_field(&mut m, "master_failover_state"), "no-failover");
    assert_eq!(
        err(&mut m, &["FAILOVER", "ABORT"]),
        "ERR No failover in progress."
    );
    signal(&stopped, "-CONT");
    assert_eq!(role(&mut m), "master");
}

#[test]
fn a_replica_refuses_failover() {
    let (master, replica, _other) = trio();
    let mut r = replica.conn();
    assert_eq!(
        err(&mut r, &["FAILOVER"]),
        "ERR FAILOVER is not valid when server is a replica."
    );
    // PSYNC FAILOVER with another history is refused; to a master too.
    assert_eq!(
        err(&mut r, &["PSYNC", &"0".repeat(40), "1", "FAILOVER"]),
        "ERR PSYNC FAILOVER replid must match my replid."
    );
    let mut m = master.conn();
    assert_eq!(
        err(&mut m, &["PSYNC", "?", "-1", "FAILOVER"]),
        "ERR PSYNC FAILOVER can't be sent to a master."
    );
    assert_eq!(
        err(&mut m, &["FAILOVER", "TO", "127.0.0.1", "1"]),
        "ERR FAILOVER target HOST and PORT is not a replica."
    );
}

/// The argument errors of a master without replicas, byte for byte.
#[test]
fn failover_errors_equal_redis_server() {
    if !redis_server_available() {
        return;
    }
    let redis = start_redis();
    let vireo = Server::start(&["--save", ""]);
    let (mut a, mut b) = (Raw::connect(vireo.port), Raw::connect(redis.port));
    let cases: &[&[&str]] = &[
        &["FAILOVER"],
        &["FAILOVER", "ABORT"],
        &["FAILOVER", "abort", "TIMEOUT", "5"],
        &["FAILOVER", "TIMEOUT", "0"],
        &["FAILOVER", "TIMEOUT", "-5"],
        &["FAILOVER", "TIMEOUT", "x"],
        &["FAILOVER", "TIMEOUT", "5", "TIMEOUT", "6"],
        &["FAILOVER", "TO", "h"],
        &["FAILOVER", "TO", "h", "port"],
        &["FAILOVER", "TO", "h", "1", "TO", "h", "2"],
        &["FAILOVER", "FORCE"],
        &["FAILOVER", "FORCE", "FORCE"],
        &["FAILOVER", "FORCE", "TIMEOUT", "100"],
        &["FAILOVER", "TO", "h", "1", "FORCE"],
        &["FAILOVER", "bogus"],
        &["PSYNC", "?", "-1", "FAILOVER"],
    ];
    for case in cases {
        let args: Vec<Vec<u8>> = case.iter().map(|w| w.as_bytes().to_vec()).collect();
        assert_eq!(
            String::from_utf8_lossy(&a.send(&args)),
            String::from_utf8_lossy(&b.send(&args)),
            "{case:?}"
        );
    }
}
