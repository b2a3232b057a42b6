//! Replication memory and loading: the shared replication buffer (one copy
//! of the stream for the backlog and every replica, INFO's
//! `mem_total_replication_buffers` / `mem_clients_slaves` /
//! `repl_backlog_histlen`, a lagging replica making the backlog outgrow
//! its size and partial resyncs using it, `client-output-buffer-limit
//! replica` measured on the shared buffer), and a replica's
//! `repl-diskless-load swapdb` (the old data kept when the load fails,
//! served meanwhile when the master's history is the same).

mod common;

use common::{eventually, start_logged, wait_log};

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use common::{err, info_field, ok, q, Server};

fn num(c: &mut redis::Connection, field: &str) -> u64 {
    info_field(c, field)
        .parse()
        .unwrap_or_else(|_| panic!("INFO {field} is a number"))
}

/// A diskless master whose transfers take 100 seconds (ten keys, a delay
/// per key) and start once `replicas` replicas wait, so they stay attached
/// at the transfer's cut, holding the stream, for that long.
fn slow_master(backlog: &str, limit: &str, replicas: usize) -> (Server, redis::Connection) {
    let s = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    for (k, v) in [
        ("repl-diskless-sync", "yes"),
        ("repl-diskless-sync-delay", "60"),
        ("repl-diskless-sync-max-replicas", &replicas.to_string()),
        ("repl-backlog-size", backlog),
        ("client-output-buffer-limit", limit),
        ("repl-ping-replica-period", "3600"),
    ] {
        ok(&mut c, &["CONFIG", "SET", k, v]);
    }
    ok(&mut c, &["DEBUG", "POPULATE", "10"]);
    ok(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "10000000"]);
    (s, c)
}

/// A raw replica reading diskless transfers: `PSYNC ? -1` on its own
/// connection, never reading.
fn waiting_replica(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.write_all(b"REPLCONF capa eof capa psync2\r\nPSYNC ? -1\r\n")
        .unwrap();
    s
}

fn connected(c: &mut redis::Connection) -> u64 {
    num(c, "connected_slaves")
}

/// Writes `n` values of 16 KiB.
fn write_16k(c: &mut redis::Connection, n: usize) {
    let value = "v".repeat(16 * 1024);
    for i in 0..n {
        ok(c, &["SET", &format!("big:{i}"), &value]);
    }
}

/// The stream's bytes reach the buffer a moment after the writes.
fn wait_offset_past(c: &mut redis::Connection, offset: u64) {
    eventually("the stream to take the writes", || {
        num(c, "master_repl_offset") >= offset
    });
}

fn replica_omems(c: &mut redis::Connection) -> Vec<u64> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("replica")
        .query(c)
        .unwrap();
    list.lines()
        .map(|l| {
            let omem = l.split(' ').find_map(|f| f.strip_prefix("omem="));
            omem.and_then(|n| n.parse().ok()).expect("an omem field")
        })
        .collect()
}

#[test]
fn replicas_share_one_buffer_that_shrinks_when_none_needs_it() {
    let (s, mut c) = slow_master("16384", "replica 0 0 0", 2);
    let a = waiting_replica(s.port);
    let b = waiting_replica(s.port);
    eventually("both replicas attached", || connected(&mut c) == 2);
    write_16k(&mut c, 64);
    wait_offset_past(&mut c, 1 << 20);
    let total = num(&mut c, "mem_total_replication_buffers");
    assert!(
        (1 << 20..3 << 19).contains(&total),
        "one copy of 1 MiB, not two: {total}"
    );
    assert_eq!(num(&mut c, "mem_clients_slaves"), total - 16384);
    assert_eq!(num(&mut c, "mem_replication_backlog"), 16384);
    let omems = replica_omems(&mut c);
    assert_eq!(omems.len(), 2);
    assert!(omems.iter().all(|&m| m >= 1 << 20 && m <= total));
    assert!(num(&mut c, "repl_backlog_histlen") >= 1 << 20);
    // One replica gone: the other still needs every block.
    drop(a);
    eventually("one replica left", || connected(&mut c) == 1);
    assert_eq!(num(&mut c, "mem_total_replication_buffers"), total);
    // None left: the backlog keeps about its size.
    drop(b);
    eventually("no replica left", || connected(&mut c) == 0);
    let after = num(&mut c, "mem_total_replication_buffers");
    assert!(after < 64 * 1024, "trimmed to the backlog: {after}");
    assert_eq!(num(&mut c, "mem_clients_slaves"), 0);
    assert!(num(&mut c, "repl_backlog_histlen") < 64 * 1024);
}

#[test]
fn a_lagging_replica_grows_the_backlog_and_others_continue_from_it() {
    let (s, mut c) = slow_master("16384", "replica 0 0 0", 1);
    let _lagging = waiting_replica(s.port);
    eventually("the replica attached", || connected(&mut c) == 1);
    let start = num(&mut c, "master_repl_offset");
    write_16k(&mut c, 64);
    wait_offset_past(&mut c, start + (1 << 20));
    let first = num(&mut c, "repl_backlog_first_byte_offset");
    assert!(first <= start + 1, "nothing the replica needs was dropped");
    assert!(num(&mut c, "repl_backlog_histlen") > 1 << 20);
    // A replica that has the stream up to `start` continues from there,
    // far beyond repl-backlog-size.
    let replid = info_field(&mut c, "master_replid");
    let mut other = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    other
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(other, "PSYNC {replid} {}\r\n", start + 1).unwrap();
    let mut line = String::new();
    BufReader::new(&other).read_line(&mut line).unwrap();
    assert_eq!(line.trim_end(), format!("+CONTINUE {replid}"));
    assert_eq!(info_field(&mut c, "sync_partial_ok"), "1");
}

#[test]
fn the_output_limit_is_measured_on_the_shared_buffer() {
    // A hard limit of 128 KiB (above the backlog's 16 KiB): a replica
    // holding more of the buffer is cut off, and the backlog shrinks.
    let (s, mut c) = slow_master("16384", "replica 131072 0 0", 1);
    let _lagging = waiting_replica(s.port);
    eventually("the replica attached", || connected(&mut c) == 1);
    write_16k(&mut c, 16);
    eventually("the replica cut off", || connected(&mut c) == 0);
    ok(&mut c, &["SET", "after", "1"]);
    eventually("the backlog trimmed", || {
        num(&mut c, "repl_backlog_histlen") < 64 * 1024
    });
    // A hard limit below repl-backlog-size counts as repl-backlog-size.
    let (s, mut c) = slow_master("1mb", "replica 65536 0 0", 1);
    let _lagging = waiting_replica(s.port);
    eventually("the replica attached", || connected(&mut c) == 1);
    let start = num(&mut c, "master_repl_offset");
    write_16k(&mut c, 32);
    wait_offset_past(&mut c, start + (1 << 19));
    assert_eq!(connected(&mut c), 1, "512 KiB is within the backlog size");
}

#[test]
fn a_replica_that_caught_up_holds_one_small_block() {
    let master = Server::start(&[]);
    let replica = Server::start(&[]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    ok(&mut m, &["CONFIG", "SET", "repl-backlog-size", "16384"]);
    ok(&mut m, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    ok(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    eventually("the link up", || {
        info_field(&mut r, "master_link_status") == "up"
    });
    ok(&mut m, &["SET", "key", &"x".repeat(256 * 1024)]);
    eventually("the replica caught up", || {
        num(&mut r, "master_repl_offset") == num(&mut m, "master_repl_offset")
    });
    eventually("its share of the buffer back to one block", || {
        replica_omems(&mut m)[0] < 64 * 1024
    });
}

fn dbsize(c: &mut redis::Connection) -> u64 {
    redis::cmd("DBSIZE").query(c).unwrap()
}

/// A diskless master with `keys` keys and a replica
/// (`repl-diskless-load swapdb`) holding other data.
fn swapdb_pair(keys: &str) -> (Server, Server, PathBuf) {
    let master = Server::start(&["--enable-debug-command", "yes"]);
    let (replica, log) = start_logged(&["--repl-diskless-load", "swapdb"]);
    let mut m = master.conn();
    ok(&mut m, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    ok(&mut m, &["DEBUG", "POPULATE", keys, "master"]);
    let mut r = replica.conn();
    ok(&mut r, &["DEBUG", "POPULATE", "200", "replica"]);
    ok(&mut r, &["SET", "mykey", "myvalue"]);
    (master, replica, log)
}

#[test]
fn a_failed_swapdb_load_keeps_the_old_data() {
    let (master, replica, log) = swapdb_pair("1000");
    let (mut m, mut r) = (master.conn(), replica.conn());
    // 1000 keys at 10 ms each: the transfer is still running when cut.
    ok(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "10000"]);
    ok(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    eventually("the replica loading", || {
        info_field(&mut r, "loading") == "1"
    });
    assert_eq!(info_field(&mut r, "async_loading"), "0");
    assert!(err(&mut r, &["GET", "mykey"]).starts_with("LOADING"));
    ok(&mut m, &["CONFIG", "SET", "repl-diskless-sync-delay", "5"]);
    ok(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]);
    eventually("the load to stop", || info_field(&mut r, "loading") == "0");
    wait_log(&log, "Discarding temporary DB in background");
    assert_eq!(
        q(&mut r, &["GET", "mykey"]).unwrap(),
        redis::Value::BulkString(b"myvalue".to_vec())
    );
    assert_eq!(dbsize(&mut r), 201);
    // The next sync succeeds and swaps the master's data in.
    ok(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    eventually("the link up", || {
        info_field(&mut r, "master_link_status") == "up"
    });
    wait_log(&log, "Swapping active DB with loaded DB");
    assert_eq!(q(&mut r, &["GET", "mykey"]).unwrap(), redis::Value::Nil);
    assert_eq!(dbsize(&mut r), 1000);
}

#[test]
fn a_swapdb_load_of_the_same_history_serves_the_old_data_meanwhile() {
    let (master, replica, log) = swapdb_pair("10");
    let (mut m, mut r) = (master.conn(), replica.conn());
    ok(&mut r, &["CONFIG", "SET", "replica-read-only", "no"]);
    ok(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    eventually("the link up", || {
        info_field(&mut r, "master_link_status") == "up"
    });
    ok(&mut r, &["DEBUG", "POPULATE", "2000", "replica"]);
    ok(&mut r, &["SET", "mykey", "myvalue"]);
    ok(&mut m, &["DEBUG", "POPULATE", "2000", "master"]);
    // The next full sync continues the same history: the backlog no
    // longer holds the replica's offset.
    ok(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "10000"]);
    ok(&mut m, &["CONFIG", "SET", "repl-backlog-size", "16384"]);
    ok(&mut m, &["MULTI"]);
    ok(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]);
    for i in 0..10 {
        ok(&mut m, &["SET", &format!("filler{i}"), &"A".repeat(16384)]);
    }
    ok(&mut m, &["EXEC"]);
    eventually("the replica loading aside", || {
        info_field(&mut r, "async_loading") == "1"
    });
    assert_eq!(info_field(&mut r, "loading"), "0");
    assert_eq!(
        q(&mut r, &["GET", "mykey"]).unwrap(),
        redis::Value::BulkString(b"myvalue".to_vec())
    );
    assert_eq!(dbsize(&mut r), 2011);
    assert!(err(&mut r, &["CONFIG", "SET", "appendonly", "no"]).starts_with("LOADING"));
    assert!(err(&mut r, &["REPLICAOF", "NO", "ONE"]).starts_with("LOADING"));
    ok(&mut m, &["CONFIG", "SET", "repl-diskless-sync-delay", "5"]);
    ok(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]);
    eventually("the load to stop", || {
        info_field(&mut r, "async_loading") == "0"
    });
    wait_log(&log, "Discarding temporary DB in background");
    assert_eq!(dbsize(&mut r), 2011);
    assert_eq!(
        q(&mut r, &["GET", "mykey"]).unwrap(),
        redis::Value::BulkString(b"myvalue".to_vec())
    );
}
