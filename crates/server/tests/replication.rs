//! Replication, master side: a raw client doing SYNC/PSYNC sees the RDB
//! and then the write stream (the AOF's effects: SELECT, MULTI/EXEC,
//! rewritten commands); REPLCONF, ROLE, INFO replication and WAIT; a
//! replica that does not read is cut off; and redis-server 7.0 as a
//! replica of Vireo syncs the dataset and follows writes (skipped without
//! redis-server).

mod common;

use common::eventually;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::diff::redis_server_available;
use common::{err, fresh_dir, info_field, ok, q, Server};

/// A client that asked to sync, reading the master's side of the link.
struct Link {
    r: BufReader<TcpStream>,
}

impl Link {
    /// Sends `cmd` (SYNC or PSYNC ...) on a fresh connection.
    fn open(port: u16, cmd: &str) -> Link {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(format!("{cmd}\r\n").as_bytes()).unwrap();
        Link {
            r: BufReader::new(s),
        }
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).expect("a line from the master");
        l.trim_end().to_string()
    }

    /// The RDB payload `$<len>\r\n<bytes>`, after any keep-alive newlines.
    fn rdb(&mut self) -> Vec<u8> {
        let mut head = self.line();
        while head.is_empty() {
            head = self.line();
        }
        let len: usize = head
            .strip_prefix('$')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("expected a bulk length, got {head:?}"));
        let mut payload = vec![0; len];
        self.r.read_exact(&mut payload).unwrap();
        payload
    }

    /// The next command of the stream, its name lowercased.
    fn command(&mut self) -> Vec<String> {
        let head = self.line();
        let n: usize = head
            .strip_prefix('*')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("expected a multibulk, got {head:?}"));
        let mut args = Vec::new();
        for i in 0..n {
            let len: usize = self.line()[1..].parse().unwrap();
            let mut arg = vec![0; len + 2];
            self.r.read_exact(&mut arg).unwrap();
            arg.truncate(len);
            let arg = String::from_utf8_lossy(&arg).into_owned();
            args.push(if i == 0 { arg.to_lowercase() } else { arg });
        }
        args
    }

    /// Reads commands and checks them against `want` in order.
    fn expect(&mut self, want: &[&[&str]]) {
        for w in want {
            assert_eq!(self.command(), *w);
        }
    }
}

/// A server and a connection to it, with the master's keep-alive PINGs
/// pushed an hour away so that a link's stream holds only the writes.
fn master_without_pings() -> (Server, redis::Connection) {
    let s = Server::start(&[]);
    let mut c = s.conn();
    ok(
        &mut c,
        &["CONFIG", "SET", "repl-ping-replica-period", "3600"],
    );
    (s, c)
}

#[test]
fn sync_sends_the_snapshot_then_exactly_the_writes_after_it() {
    let (s, mut c) = master_without_pings();
    ok(&mut c, &["SET", "before-the-cut", "1"]);
    let mut link = Link::open(s.port, "SYNC");
    let rdb = link.rdb();
    assert!(rdb.starts_with(b"REDIS0010"), "an RDB file");
    assert!(
        rdb.windows(14).any(|w| w == b"before-the-cut"),
        "the snapshot holds the key written before SYNC"
    );
    ok(&mut c, &["SET", "foo", "bar"]);
    ok(&mut c, &["GET", "foo"]);
    ok(&mut c, &["SELECT", "9"]);
    ok(&mut c, &["RPUSH", "l", "a", "b"]);
    ok(&mut c, &["DEL", "missing"]);
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["INCR", "n"]);
    ok(&mut c, &["SELECT", "0"]);
    ok(&mut c, &["DEL", "foo"]);
    ok(&mut c, &["EXEC"]);
    ok(&mut c, &["SET", "t", "v", "EX", "100"]);
    link.expect(&[
        &["select", "0"],
        &["set", "foo", "bar"],
        &["select", "9"],
        &["rpush", "l", "a", "b"],
        &["multi"],
        &["incr", "n"],
        &["select", "0"],
        &["del", "foo"],
        &["exec"],
    ]);
    let set = link.command();
    assert_eq!(&set[..4], ["set", "t", "v", "PXAT"], "EX becomes PXAT");
    assert_eq!(info_field(&mut c, "connected_slaves"), "1");
    assert!(info_field(&mut c, "slave0").starts_with("ip=127.0.0.1,port=0,state=online"));
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
    assert!(list.contains("flags=S "), "{list}");
    let replicas: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("replica")
        .query(&mut c)
        .unwrap();
    assert_eq!(replicas.lines().count(), 1, "{replicas}");
    assert_eq!(info_field(&mut c, "connected_clients"), "1");
}

/// The offset ROLE and INFO report on a master covers every write already
/// acknowledged: the AOF writer thread feeds the stream in batches, and
/// reading the offset first lets it catch up (tests that wait for a
/// replica to reach the master's offset rely on it).
#[test]
fn reported_offsets_cover_acknowledged_writes() {
    let (s, mut c) = master_without_pings();
    let mut link = Link::open(s.port, "SYNC");
    link.rdb();
    let role_offset = |c: &mut redis::Connection| match ok(c, &["ROLE"]) {
        redis::Value::Array(v) => match v[1] {
            redis::Value::Int(n) => n,
            ref other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    let mut last = role_offset(&mut c);
    for i in 0..50 {
        ok(&mut c, &["SET", "k", &i.to_string()]);
        let now = role_offset(&mut c);
        assert!(now > last, "write {i}: ROLE offset {now} after {last}");
        ok(&mut c, &["INCR", "n"]);
        let info: i64 = info_field(&mut c, "master_repl_offset").parse().unwrap();
        assert!(info > now, "write {i}: INFO offset {info} after {now}");
        last = info;
    }
}

/// PUBLISH goes to replicas (alone, or in place inside a transaction)
/// and never to the AOF.
#[test]
fn publish_reaches_the_stream_and_not_the_aof() {
    let s = Server::start(&["--appendonly", "yes"]);
    let mut c = s.conn();
    ok(
        &mut c,
        &["CONFIG", "SET", "repl-ping-replica-period", "3600"],
    );
    let mut link = Link::open(s.port, "SYNC");
    link.rdb();
    ok(&mut c, &["PUBLISH", "ch", "alone"]);
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["PUBLISH", "ch", "inside"]);
    ok(&mut c, &["SET", "k", "v"]);
    ok(&mut c, &["EXEC"]);
    link.expect(&[
        &["select", "0"],
        &["publish", "ch", "alone"],
        &["multi"],
        &["publish", "ch", "inside"],
        &["set", "k", "v"],
        &["exec"],
    ]);
    let logged = incr_aof_text(&s.dir);
    assert!(logged.contains("set"), "{logged}");
    assert!(!logged.contains("publish"), "{logged}");
}

/// The `.incr.aof` files' text, lowercased.
fn incr_aof_text(dir: &std::path::Path) -> String {
    let mut logged = Vec::new();
    for entry in std::fs::read_dir(dir.join("appendonlydir")).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with(".incr.aof") {
            logged.extend(std::fs::read(path).unwrap());
        }
    }
    String::from_utf8_lossy(&logged).to_lowercase()
}

/// `redis.set_repl` sends each write of a script where it says: REPL_ALL
/// to both, REPL_AOF to the log only, REPL_REPLICA to the stream only,
/// REPL_NONE nowhere; the transaction around them reaches both.
#[test]
fn set_repl_sends_each_script_write_where_it_says() {
    let s = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    ok(
        &mut c,
        &["CONFIG", "SET", "repl-ping-replica-period", "3600"],
    );
    let mut link = Link::open(s.port, "SYNC");
    link.rdb();
    ok(
        &mut c,
        &[
            "EVAL",
            "redis.call('set','a','1') \
             redis.set_repl(redis.REPL_NONE) redis.call('set','b','2') \
             redis.set_repl(redis.REPL_AOF) redis.call('set','c','3') \
             redis.set_repl(redis.REPL_REPLICA) redis.call('set','r','5') \
             redis.set_repl(redis.REPL_ALL) redis.call('set','d','4')",
            "0",
        ],
    );
    link.expect(&[
        &["select", "0"],
        &["multi"],
        &["set", "a", "1"],
        &["set", "r", "5"],
        &["set", "d", "4"],
        &["exec"],
    ]);
    let logged = incr_aof_text(&s.dir);
    let words: Vec<&str> = logged
        .split("\r\n")
        .filter(|l| !l.starts_with(['*', '$']))
        .collect();
    assert!(
        words
            .join(" ")
            .contains("multi set a 1 set c 3 set d 4 exec"),
        "{logged}"
    );
    // After an AOF reload only a, c and d are there.
    let dir = s.kill_keep_dir();
    let s = Server::start_in(dir, &["--appendonly", "yes"]);
    let mut c = s.conn();
    assert_eq!(
        ok(&mut c, &["MGET", "a", "b", "c", "r", "d"]),
        redis::Value::Array(vec![
            redis::Value::BulkString(b"1".to_vec()),
            redis::Value::Nil,
            redis::Value::BulkString(b"3".to_vec()),
            redis::Value::Nil,
            redis::Value::BulkString(b"4".to_vec()),
        ])
    );
}

/// Replicas announcing `capa eof` that arrive within
/// `repl-diskless-sync-delay` share one snapshot, streamed to their
/// sockets between `$EOF:<mark>` and the mark; the stream follows once
/// each acknowledged.
#[test]
fn diskless_sync_streams_one_snapshot_to_the_replicas_that_wait_together() {
    let (s, mut c) = master_without_pings();
    ok(&mut c, &["CONFIG", "SET", "repl-diskless-sync-delay", "30"]);
    ok(
        &mut c,
        &["CONFIG", "SET", "repl-diskless-sync-max-replicas", "2"],
    );
    ok(&mut c, &["SET", "in-the-snapshot", "1"]);
    let started = Instant::now();
    let mut links: Vec<Link> = (0..2)
        .map(|_| {
            let mut link = Link::open(s.port, "REPLCONF capa eof capa psync2");
            assert_eq!(link.line(), "+OK");
            link.r.get_mut().write_all(b"PSYNC ? -1\r\n").unwrap();
            link
        })
        .collect();
    let mut marks = Vec::new();
    for link in &mut links {
        // The backlog, made for these first replicas, starts a new
        // history (as Redis's): its id is the one INFO shows now.
        let announced = link.line();
        let replid = info_field(&mut c, "master_replid");
        assert_eq!(announced, format!("+FULLRESYNC {replid} 0"));
        let head = link.line();
        let mark = head
            .strip_prefix("$EOF:")
            .expect("an EOF-marked bulk")
            .to_string();
        assert_eq!(mark.len(), 40);
        let mut rdb = Vec::new();
        while !rdb.ends_with(mark.as_bytes()) {
            let mut byte = [0u8];
            link.r.read_exact(&mut byte).unwrap();
            rdb.push(byte[0]);
        }
        assert!(rdb.starts_with(b"REDIS0010"));
        assert!(rdb.windows(15).any(|w| w == b"in-the-snapshot"));
        marks.push(mark);
    }
    assert_eq!(marks[0], marks[1], "one transfer for both");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the second replica ended the delay"
    );
    ok(&mut c, &["SET", "after", "2"]);
    for link in &mut links {
        link.r.get_mut().write_all(b"REPLCONF ACK 0\r\n").unwrap();
        link.expect(&[&["select", "0"], &["set", "after", "2"]]);
    }
    assert_eq!(info_field(&mut c, "sync_full"), "2");
    ok(&mut c, &["CONFIG", "RESETSTAT"]);
    assert_eq!(info_field(&mut c, "sync_full"), "0");
}

#[test]
fn expired_keys_reach_the_stream_as_deletions() {
    let s = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    ok(
        &mut c,
        &["CONFIG", "SET", "repl-ping-replica-period", "3600"],
    );
    ok(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let mut link = Link::open(s.port, "SYNC");
    link.rdb();
    ok(&mut c, &["SET", "k", "v", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(ok(&mut c, &["GET", "k"]), redis::Value::Nil);
    link.expect(&[&["select", "0"]]);
    assert_eq!(&link.command()[..3], ["set", "k", "v"]);
    link.expect(&[&["del", "k"]]);
}

#[test]
fn psync_gets_a_full_resync_at_the_cut_offset() {
    let (s, mut c) = master_without_pings();
    // A first replica makes the stream (and its offset) advance.
    let mut first = Link::open(s.port, "SYNC");
    first.rdb();
    ok(&mut c, &["SET", "a", "1"]);
    first.expect(&[&["select", "0"], &["set", "a", "1"]]);
    let offset = info_field(&mut c, "master_repl_offset");
    assert_ne!(offset, "0");
    let replid = info_field(&mut c, "master_replid");
    let mut link = Link::open(s.port, "PSYNC ? -1");
    assert_eq!(link.line(), format!("+FULLRESYNC {replid} {offset}"));
    link.rdb();
    ok(&mut c, &["SET", "b", "2"]);
    link.expect(&[&["select", "0"], &["set", "b", "2"]]);
    assert_eq!(info_field(&mut c, "connected_slaves"), "2");
    assert_eq!(info_field(&mut c, "repl_backlog_active"), "1");
    let role = ok(&mut c, &["ROLE"]);
    let redis::Value::Array(role) = role else {
        panic!("ROLE is an array: {role:?}")
    };
    assert_eq!(role[0], redis::Value::BulkString(b"master".to_vec()));
    assert!(matches!(role[1], redis::Value::Int(n) if n > 0));
}

#[test]
fn replconf_role_and_wait_without_replicas() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &["REPLCONF", "listening-port", "6380"]);
    ok(&mut c, &["REPLCONF", "capa", "eof", "capa", "psync2"]);
    assert_eq!(
        err(&mut c, &["REPLCONF", "nonsense", "1"]),
        "ERR Unrecognized REPLCONF option: nonsense"
    );
    assert_eq!(
        err(&mut c, &["REPLCONF", "listening-port"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["REPLCONF", "listening-port", "x"]),
        "ERR value is not an integer or out of range"
    );
    let role = ok(&mut c, &["ROLE"]);
    assert_eq!(
        role,
        redis::Value::Array(vec![
            redis::Value::BulkString(b"master".to_vec()),
            redis::Value::Int(0),
            redis::Value::Array(vec![]),
        ])
    );
    ok(&mut c, &["SET", "k", "v"]);
    let start = Instant::now();
    assert_eq!(ok(&mut c, &["WAIT", "1", "0"]), redis::Value::Int(0));
    assert!(start.elapsed() < Duration::from_secs(1));
    assert_eq!(err(&mut c, &["WAIT", "1", "-1"]), "ERR timeout is negative");
    assert_eq!(
        err(&mut c, &["WAIT", "x", "0"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(info_field(&mut c, "connected_slaves"), "0");
    assert_eq!(info_field(&mut c, "repl_backlog_active"), "0");
}

#[test]
fn wait_times_out_with_the_count_of_replicas_that_acknowledged() {
    let (s, mut c) = master_without_pings();
    let mut link = Link::open(s.port, "SYNC");
    link.rdb();
    ok(&mut c, &["SET", "k", "v"]);
    let start = Instant::now();
    assert_eq!(ok(&mut c, &["WAIT", "1", "200"]), redis::Value::Int(0));
    assert!(start.elapsed() >= Duration::from_millis(200));
    link.expect(&[
        &["select", "0"],
        &["set", "k", "v"],
        &["replconf", "GETACK", "*"],
    ]);
    // Acknowledging the offset ends a WAIT at once.
    let offset = info_field(&mut c, "master_repl_offset");
    let mut waiter = s.conn();
    let pending = std::thread::spawn(move || q(&mut waiter, &["WAIT", "1", "0"]));
    std::thread::sleep(Duration::from_millis(100));
    let ack = format!(
        "*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n${}\r\n{offset}\r\n",
        offset.len()
    );
    let mut s2 = link.r.get_ref().try_clone().unwrap();
    s2.write_all(ack.as_bytes()).unwrap();
    assert_eq!(pending.join().unwrap().unwrap(), redis::Value::Int(1));
}

#[test]
fn a_replica_that_does_not_read_is_cut_off_at_its_output_limit() {
    let (s, mut c) = master_without_pings();
    ok(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "replica 1mb 0 0",
        ],
    );
    let mut link = Link::open(s.port, "SYNC");
    link.rdb();
    let big = "x".repeat(64 * 1024);
    eventually("the replica to be dropped", || {
        ok(&mut c, &["SET", "big", &big]);
        info_field(&mut c, "connected_slaves") == "0"
    });
    assert_eq!(
        ok(&mut c, &["PING"]),
        redis::Value::SimpleString("PONG".into())
    );
}

/// Starts redis-server as a replica of `master_port`.
fn start_redis_replica(master_port: u16) -> common::diff::Redis {
    let dir = fresh_dir();
    common::diff::start_redis_with(&[
        "--replicaof",
        "127.0.0.1",
        &master_port.to_string(),
        "--enable-debug-command",
        "yes",
        "--dir",
        dir.to_str().unwrap(),
    ])
}

fn digest(c: &mut redis::Connection) -> String {
    match ok(c, &["DEBUG", "DIGEST"]) {
        redis::Value::SimpleString(s) => s,
        other => panic!("DEBUG DIGEST: {other:?}"),
    }
}

#[test]
fn redis_server_replicates_vireo() {
    if !redis_server_available() {
        return;
    }
    let s = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    ok(
        &mut c,
        &["CONFIG", "SET", "repl-ping-replica-period", "3600"],
    );
    for i in 0..500 {
        ok(&mut c, &["SET", &format!("s{i}"), &format!("v{i}")]);
    }
    ok(&mut c, &["RPUSH", "list", "a", "b", "c"]);
    ok(&mut c, &["HSET", "h", "f", "v", "g", "w"]);
    ok(&mut c, &["SELECT", "5"]);
    ok(&mut c, &["ZADD", "z", "1", "a", "2.5", "b"]);
    ok(&mut c, &["SADD", "set", "1", "2", "3"]);
    ok(&mut c, &["SET", "ttl", "x", "EX", "1000"]);
    let replica = start_redis_replica(s.port);
    let rclient = redis::Client::open(format!("redis://127.0.0.1:{}/", replica.port)).unwrap();
    let mut r = rclient.get_connection().unwrap();
    eventually("the replica's link to come up", || {
        info_field(&mut r, "master_link_status") == "up"
    });
    // Writes after the sync, in several databases and a transaction.
    for i in 0..200 {
        ok(&mut c, &["INCR", &format!("n{}", i % 7)]);
    }
    ok(&mut c, &["SELECT", "0"]);
    ok(&mut c, &["DEL", "s1", "s2"]);
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["LPUSH", "list", "z"]);
    ok(&mut c, &["SELECT", "5"]);
    ok(&mut c, &["SREM", "set", "2"]);
    ok(&mut c, &["EXEC"]);
    assert_eq!(ok(&mut c, &["WAIT", "1", "5000"]), redis::Value::Int(1));
    let want = digest(&mut c);
    assert_ne!(want, "0".repeat(40));
    assert_eq!(
        digest(&mut r),
        want,
        "the replica holds the master's dataset"
    );
    assert_eq!(info_field(&mut c, "connected_slaves"), "1");
    assert_eq!(
        info_field(&mut r, "master_repl_offset"),
        info_field(&mut c, "master_repl_offset"),
        "both count the same stream bytes"
    );
    let slave0 = info_field(&mut c, "slave0");
    assert!(
        slave0.contains(&format!("port={},state=online", replica.port)),
        "{slave0}"
    );
}

/// Writers keep going while redis-server makes its full sync: whatever ran
/// before the cut is in the RDB, whatever ran after is in the stream, and
/// nothing is in both (INCRs would count twice) or neither.
#[test]
fn a_full_sync_under_write_load_loses_and_repeats_nothing() {
    if !redis_server_available() {
        return;
    }
    let s = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    ok(
        &mut c,
        &["CONFIG", "SET", "repl-ping-replica-period", "3600"],
    );
    ok(&mut c, &["DEBUG", "POPULATE", "20000"]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|t| {
            let (mut w, stop) = (s.conn(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    ok(&mut w, &["INCR", &format!("counter:{}", i % 50)]);
                    ok(
                        &mut w,
                        &["SET", &format!("key:{t}:{}", i % 300), &i.to_string()],
                    );
                    if i.is_multiple_of(10) {
                        ok(&mut w, &["DEL", &format!("key:{i}")]);
                    }
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let replica = start_redis_replica(s.port);
    let rclient = redis::Client::open(format!("redis://127.0.0.1:{}/", replica.port)).unwrap();
    let mut r = rclient.get_connection().unwrap();
    eventually("the replica's link to come up", || {
        info_field(&mut r, "master_link_status") == "up"
    });
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(ok(&mut c, &["WAIT", "1", "5000"]), redis::Value::Int(1));
    assert_eq!(digest(&mut r), digest(&mut c));
}

/// A full sync through a file (`repl-diskless-sync no`) follows Redis's
/// order: `+FULLRESYNC` as soon as the snapshot is cut, newlines as
/// keep-alives while the file is written, then the RDB bulk.
#[test]
fn a_disk_sync_announces_the_full_resync_before_writing_the_file() {
    let (s, mut c) = master_without_pings();
    ok(&mut c, &["CONFIG", "SET", "repl-diskless-sync", "no"]);
    for i in 0..100 {
        ok(&mut c, &["SET", &format!("k{i}"), "v"]);
    }
    // 20 ms per key: the file takes two seconds at least.
    ok(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "20000"]);
    let mut link = Link::open(s.port, "PSYNC ? -1");
    let announced = link.line();
    assert!(announced.starts_with("+FULLRESYNC "), "{announced}");
    assert!(
        info_field(&mut c, "slave0").contains("state=wait_bgsave"),
        "the file is still being written"
    );
    let mut newlines = 0;
    let head = loop {
        let line = link.line();
        if !line.is_empty() {
            break line;
        }
        newlines += 1;
    };
    assert!(newlines >= 1, "a keep-alive newline every second");
    let len: usize = head[1..].parse().expect("the bulk length");
    let mut payload = vec![0; len];
    link.r.read_exact(&mut payload).unwrap();
    assert!(payload.starts_with(b"REDIS0010"));
    ok(&mut c, &["SET", "after", "sync"]);
    link.expect(&[&["select", "0"], &["set", "after", "sync"]]);
}
