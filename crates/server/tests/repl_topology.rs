//! Replication topologies Redis never completes: a replica of itself, and
//! two servers each a replica of the other. As in Redis, each link's
//! PSYNC is refused with -NOMASTERLINK (a replica not connected to its own
//! master serves no sync), so the links stay down, nothing is flushed, and
//! the data stays as it was; REPLICAOF NO ONE ends it. Also: a replica
//! that pipelines its REPLCONFs, PSYNC and a first ACK in one write, and a
//! chain whose middle replica adds nothing of its own to the stream.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{info_field, ok, q, Server};

fn get(con: &mut redis::Connection, key: &str) -> redis::Value {
    q(con, &["GET", key]).unwrap()
}

/// The link stays down for a while (several reconnection attempts).
fn stays_down(con: &mut redis::Connection) {
    for _ in 0..15 {
        assert_eq!(info_field(con, "master_link_status"), "down");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_replica_of_itself_keeps_its_data_and_never_syncs() {
    let s = Server::start(&["--save", ""]);
    let mut c = s.conn();
    ok(&mut c, &["SET", "k", "v"]);
    ok(&mut c, &["REPLICAOF", "127.0.0.1", &s.port.to_string()]);
    stays_down(&mut c);
    assert_eq!(get(&mut c, "k"), redis::Value::BulkString(b"v".to_vec()));
    assert_eq!(info_field(&mut c, "sync_full"), "0");
    ok(&mut c, &["REPLICAOF", "NO", "ONE"]);
    ok(&mut c, &["SET", "k", "w"]);
}

#[test]
fn two_servers_replicating_each_other_keep_their_data() {
    let (a, b) = (
        Server::start(&["--save", ""]),
        Server::start(&["--save", ""]),
    );
    let (mut ca, mut cb) = (a.conn(), b.conn());
    ok(&mut ca, &["SET", "a", "1"]);
    ok(&mut cb, &["SET", "b", "2"]);
    ok(&mut ca, &["REPLICAOF", "127.0.0.1", &b.port.to_string()]);
    ok(&mut cb, &["REPLICAOF", "127.0.0.1", &a.port.to_string()]);
    stays_down(&mut ca);
    assert_eq!(info_field(&mut cb, "master_link_status"), "down");
    assert_eq!(get(&mut ca, "a"), redis::Value::BulkString(b"1".to_vec()));
    assert_eq!(get(&mut cb, "b"), redis::Value::BulkString(b"2".to_vec()));
    // Breaking the loop lets the other side sync from the new master.
    ok(&mut ca, &["REPLICAOF", "NO", "ONE"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while info_field(&mut cb, "master_link_status") != "up" {
        assert!(std::time::Instant::now() < deadline, "b never synced");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(get(&mut cb, "a"), redis::Value::BulkString(b"1".to_vec()));
    assert_eq!(get(&mut cb, "b"), redis::Value::Nil);
}

#[test]
fn a_replica_may_pipeline_its_handshake_with_psync() {
    let s = Server::start(&["--save", ""]);
    let mut c = s.conn();
    ok(&mut c, &["SET", "k", "v"]);
    let mut sock = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    sock.write_all(
        b"REPLCONF listening-port 4321\r\nREPLCONF capa eof capa psync2\r\n\
          PSYNC ? -1\r\nREPLCONF ACK 5\r\n",
    )
    .unwrap();
    let mut r = BufReader::new(sock);
    let mut line = String::new();
    for want in ["+OK", "+OK"] {
        line.clear();
        r.read_line(&mut line).unwrap();
        assert_eq!(line.trim_end(), want);
    }
    line.clear();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("+FULLRESYNC "), "{line:?}");
    // The ACK sent with the PSYNC reached the link, as Redis counts a
    // replica's ACK from the moment it asked to sync.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut c).unwrap();
        if info.contains("port=4321") && info.contains("offset=5,") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{info}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_chained_replica_passes_on_its_masters_stream_and_nothing_else() {
    let master = Server::start(&["--save", "", "--repl-ping-replica-period", "100"]);
    let mid = Server::start(&[
        "--save",
        "",
        "--repl-ping-replica-period",
        "1",
        "--replicaof",
        "127.0.0.1",
        &master.port.to_string(),
    ]);
    let last = Server::start(&[
        "--save",
        "",
        "--replicaof",
        "127.0.0.1",
        &mid.port.to_string(),
    ]);
    let (mut m, mut r, mut l) = (master.conn(), mid.conn(), last.conn());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while info_field(&mut l, "master_link_status") != "up" {
        assert!(
            std::time::Instant::now() < deadline,
            "the chain never synced"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    ok(&mut m, &["INCR", "c"]);
    // Several of the middle replica's ping periods: it must send none of
    // its own, so every offset stays the master's.
    std::thread::sleep(Duration::from_millis(2500));
    let offset = |c: &mut redis::Connection| info_field(c, "master_repl_offset");
    let want = offset(&mut m);
    assert_eq!(offset(&mut r), want);
    assert_eq!(offset(&mut l), want);
    assert!(common::err(&mut r, &["WAIT", "1", "0"])
        .starts_with("ERR WAIT cannot be used with replica instances."));
}
