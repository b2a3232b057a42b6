//! Blocking commands against the real server: BLPOP, BRPOP, BLMOVE,
//! BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP, CLIENT UNBLOCK, and the
//! blocked-client bookkeeping (INFO, CLIENT LIST). The server runs several
//! worker threads and connections are spread over them, so pushes on one
//! thread wake clients of another.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use common::q;
use redis::Value;

/// A server with four worker threads.
fn server() -> common::Server {
    common::Server::start(&["--io-threads", "4"])
}

fn ok(con: &mut redis::Connection, args: &[&str]) -> Value {
    q(con, args).unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

fn err(con: &mut redis::Connection, args: &[&str]) -> String {
    match q(con, args) {
        Ok(v) => panic!("{args:?} succeeded with {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

fn int(con: &mut redis::Connection, args: &[&str]) -> i64 {
    match ok(con, args) {
        Value::Int(n) => n,
        v => panic!("{args:?}: expected an integer, got {v:?}"),
    }
}

fn bulk(v: &str) -> Value {
    Value::BulkString(v.as_bytes().to_vec())
}

fn arr(items: Vec<Value>) -> Value {
    Value::Array(items)
}

/// A field of INFO's output.
fn info_field(con: &mut redis::Connection, field: &str) -> String {
    let Value::BulkString(b) = ok(con, &["INFO", "clients"]) else {
        panic!("INFO is a bulk string");
    };
    let text = String::from_utf8(b).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO"))
        .to_string()
}

/// Waits (up to 10 s) until INFO reports `n` blocked clients.
fn wait_blocked(con: &mut redis::Connection, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = info_field(con, "blocked_clients");
        if now == n.to_string() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "blocked_clients stuck at {now}, want {n}"
        );
        thread::sleep(Duration::from_millis(5));
    }
}

/// Runs a command on a new connection in a thread; the handle yields the
/// reply.
fn spawn(srv: &common::Server, args: &[&str]) -> thread::JoinHandle<redis::RedisResult<Value>> {
    let mut con = srv.conn();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    thread::spawn(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        q(&mut con, &a)
    })
}

/// A raw protocol connection, for exact bytes and pipelining.
struct Raw(TcpStream);

impl Raw {
    fn new(srv: &common::Server) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw(s)
    }

    fn send(&mut self, args: &[&str]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        self.0.write_all(&out).unwrap();
    }

    /// Reads exactly `want.len()` bytes and compares them.
    fn expect(&mut self, want: &str) {
        let mut buf = vec![0u8; want.len()];
        self.0.read_exact(&mut buf).unwrap();
        assert_eq!(String::from_utf8_lossy(&buf), want);
    }

    /// True if nothing arrives within `ms`.
    fn silent_for(&mut self, ms: u64) -> bool {
        self.0
            .set_read_timeout(Some(Duration::from_millis(ms)))
            .unwrap();
        let mut b = [0u8; 1];
        let silent = self.0.read(&mut b).is_err();
        self.0
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        silent
    }
}

#[test]
fn push_on_one_thread_wakes_clients_of_others_in_blocking_order() {
    let srv = server();
    let mut con = srv.conn();
    let mut waiting = Vec::new();
    for i in 0..6 {
        waiting.push(spawn(&srv, &["BLPOP", "none", "q", "0"]));
        wait_blocked(&mut con, i + 1);
    }
    assert_eq!(
        int(&mut con, &["RPUSH", "q", "a", "b", "c", "d", "e", "f"]),
        6
    );
    for (h, want) in waiting.into_iter().zip(["a", "b", "c", "d", "e", "f"]) {
        assert_eq!(h.join().unwrap().unwrap(), arr(vec![bulk("q"), bulk(want)]));
    }
    assert_eq!(int(&mut con, &["EXISTS", "q"]), 0);
    wait_blocked(&mut con, 0);
}

#[test]
fn a_push_serves_only_as_many_clients_as_elements() {
    let srv = server();
    let mut con = srv.conn();
    let first = spawn(&srv, &["BRPOP", "q", "0"]);
    wait_blocked(&mut con, 1);
    let second = spawn(&srv, &["BRPOP", "q", "0"]);
    wait_blocked(&mut con, 2);
    int(&mut con, &["LPUSH", "q", "x"]);
    assert_eq!(
        first.join().unwrap().unwrap(),
        arr(vec![bulk("q"), bulk("x")])
    );
    wait_blocked(&mut con, 1);
    int(&mut con, &["LPUSH", "q", "y"]);
    assert_eq!(
        second.join().unwrap().unwrap(),
        arr(vec![bulk("q"), bulk("y")])
    );
}

#[test]
fn data_already_there_is_popped_without_blocking() {
    let srv = server();
    let mut con = srv.conn();
    int(&mut con, &["RPUSH", "b", "1", "2"]);
    assert_eq!(
        ok(&mut con, &["BLPOP", "a", "b", "b", "0"]),
        arr(vec![bulk("b"), bulk("1")])
    );
    assert_eq!(
        ok(&mut con, &["BRPOP", "a", "b", "0"]),
        arr(vec![bulk("b"), bulk("2")])
    );
    ok(&mut con, &["SET", "s", "x"]);
    int(&mut con, &["RPUSH", "l", "1"]);
    // The first existing key decides: a wrong type is an error.
    assert!(err(&mut con, &["BLPOP", "missing", "s", "l", "0"]).starts_with("WRONGTYPE"));
    assert!(err(&mut con, &["BZPOPMIN", "s", "0"]).starts_with("WRONGTYPE"));
    assert!(err(&mut con, &["BLMOVE", "s", "d", "LEFT", "LEFT", "0"]).starts_with("WRONGTYPE"));
    assert!(err(&mut con, &["BRPOPLPUSH", "l", "s", "0"]).starts_with("WRONGTYPE"));
    assert_eq!(int(&mut con, &["LLEN", "l"]), 1);
}

#[test]
fn timeouts_have_sub_second_precision() {
    let srv = server();
    let mut con = srv.conn();
    let start = Instant::now();
    assert_eq!(ok(&mut con, &["BLPOP", "k", "0.2"]), Value::Nil);
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(200), "{took:?}");
    assert!(took < Duration::from_millis(1500), "{took:?}");
    let start = Instant::now();
    assert_eq!(ok(&mut con, &["BZPOPMAX", "k", "0.001"]), Value::Nil);
    assert_eq!(
        ok(&mut con, &["BLMOVE", "k", "d", "LEFT", "RIGHT", "0.05"]),
        Value::Nil
    );
    assert_eq!(
        ok(&mut con, &["BLMPOP", "0.05", "1", "k", "LEFT"]),
        Value::Nil
    );
    assert_eq!(
        ok(&mut con, &["BZMPOP", "0.05", "1", "k", "MIN"]),
        Value::Nil
    );
    assert!(start.elapsed() < Duration::from_millis(1500));
    assert_eq!(info_field(&mut con, "blocked_clients"), "0");
}

#[test]
fn timeout_replies_in_each_protocol() {
    let srv = server();
    let mut raw = Raw::new(&srv);
    raw.send(&["BRPOPLPUSH", "a", "b", "0.01"]);
    raw.expect("*-1\r\n");
    raw.send(&["HELLO", "3"]);
    raw.send(&["CLIENT", "REPLY", "SKIP"]);
    raw.send(&["PING"]);
    raw.send(&["BLPOP", "a", "0.01"]);
    // The HELLO map is long; skip to the end of it with a marker.
    raw.send(&["ECHO", "end"]);
    let mut seen = Vec::new();
    let mut b = [0u8; 1];
    while !seen.ends_with(b"_\r\n$3\r\nend\r\n") {
        raw.0.read_exact(&mut b).unwrap();
        seen.push(b[0]);
    }
    assert!(!String::from_utf8_lossy(&seen).contains("PONG"));
}

#[test]
fn zero_timeout_waits_until_served() {
    let srv = server();
    let mut con = srv.conn();
    let h = spawn(&srv, &["BZPOPMIN", "z", "0"]);
    wait_blocked(&mut con, 1);
    thread::sleep(Duration::from_millis(300));
    assert!(!h.is_finished());
    int(&mut con, &["ZADD", "z", "2", "b", "1", "a"]);
    assert_eq!(
        h.join().unwrap().unwrap(),
        arr(vec![bulk("z"), bulk("a"), bulk("1")])
    );
}

#[test]
fn timeout_argument_errors() {
    let srv = server();
    let mut con = srv.conn();
    for t in ["-1", "-inf", "inf", "1e400"] {
        assert_eq!(
            err(&mut con, &["BLPOP", "k", t]),
            "ERR timeout is negative",
            "{t}"
        );
    }
    for t in ["abc", "nan", " 1", ""] {
        assert_eq!(
            err(&mut con, &["BRPOP", "k", t]),
            "ERR timeout is not a float or out of range",
            "{t:?}"
        );
    }
    assert_eq!(
        err(&mut con, &["BLMOVE", "a", "b", "UP", "LEFT", "0"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut con, &["BLMPOP", "0", "0", "k", "LEFT"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(&mut con, &["BLMPOP", "0", "x", "k", "LEFT"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(&mut con, &["BLMPOP", "0", "2", "k", "LEFT"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut con, &["BZMPOP", "0", "1", "k", "LEFT"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut con, &["BZMPOP", "0", "1", "k", "MIN", "COUNT", "0"]),
        "ERR count should be greater than 0"
    );
    assert_eq!(
        err(
            &mut con,
            &["BLMPOP", "0", "1", "k", "LEFT", "COUNT", "1", "COUNT", "2"]
        ),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut con, &["BLMPOP", "-1", "1", "k", "LEFT"]),
        "ERR timeout is negative"
    );
    assert_eq!(
        err(
            &mut con,
            &["BLMPOP", "0", "9223372036854775807", "k", "LEFT"]
        ),
        "ERR syntax error"
    );
}

#[test]
fn blmpop_and_bzmpop_serve_counts_in_blocking_order() {
    let srv = server();
    let mut con = srv.conn();
    let a = spawn(
        &srv,
        &["BLMPOP", "0", "2", "l1", "l2", "LEFT", "COUNT", "2"],
    );
    wait_blocked(&mut con, 1);
    let b = spawn(
        &srv,
        &["BLMPOP", "0", "2", "l1", "l2", "RIGHT", "COUNT", "10"],
    );
    wait_blocked(&mut con, 2);
    int(&mut con, &["RPUSH", "l2", "1", "2", "3", "4", "5"]);
    assert_eq!(
        a.join().unwrap().unwrap(),
        arr(vec![bulk("l2"), arr(vec![bulk("1"), bulk("2")])])
    );
    assert_eq!(
        b.join().unwrap().unwrap(),
        arr(vec![bulk("l2"), arr(vec![bulk("5"), bulk("4"), bulk("3")])])
    );
    let z = spawn(&srv, &["BZMPOP", "0", "1", "z", "MAX", "COUNT", "2"]);
    wait_blocked(&mut con, 1);
    int(&mut con, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(
        z.join().unwrap().unwrap(),
        arr(vec![
            bulk("z"),
            arr(vec![
                arr(vec![bulk("c"), bulk("3")]),
                arr(vec![bulk("b"), bulk("2")])
            ])
        ])
    );
    assert_eq!(int(&mut con, &["ZCARD", "z"]), 1);
}

#[test]
fn blmove_chains_and_circles() {
    let srv = server();
    let mut con = srv.conn();
    // l1 -> l2 -> l3, each hop served by a different client.
    let a = spawn(&srv, &["BLMOVE", "l1", "l2", "RIGHT", "LEFT", "0"]);
    wait_blocked(&mut con, 1);
    let b = spawn(&srv, &["BLMOVE", "l2", "l3", "LEFT", "RIGHT", "0"]);
    wait_blocked(&mut con, 2);
    int(&mut con, &["RPUSH", "l1", "foo"]);
    assert_eq!(a.join().unwrap().unwrap(), bulk("foo"));
    assert_eq!(b.join().unwrap().unwrap(), bulk("foo"));
    assert_eq!(int(&mut con, &["EXISTS", "l1", "l2"]), 0);
    assert_eq!(
        ok(&mut con, &["LRANGE", "l3", "0", "-1"]),
        arr(vec![bulk("foo")])
    );
    // A circle ends where it started.
    let a = spawn(&srv, &["BRPOPLPUSH", "c1", "c2", "0"]);
    wait_blocked(&mut con, 1);
    let b = spawn(&srv, &["BRPOPLPUSH", "c2", "c1", "0"]);
    wait_blocked(&mut con, 2);
    int(&mut con, &["RPUSH", "c1", "x"]);
    a.join().unwrap().unwrap();
    b.join().unwrap().unwrap();
    assert_eq!(
        ok(&mut con, &["LRANGE", "c1", "0", "-1"]),
        arr(vec![bulk("x")])
    );
    assert_eq!(int(&mut con, &["EXISTS", "c2"]), 0);
    // A move into a list someone waits on serves that client too.
    let popper = spawn(&srv, &["BLPOP", "t", "0"]);
    wait_blocked(&mut con, 1);
    let mover = spawn(&srv, &["BLMOVE", "s", "t", "LEFT", "LEFT", "0"]);
    wait_blocked(&mut con, 2);
    int(&mut con, &["RPUSH", "s", "v"]);
    assert_eq!(mover.join().unwrap().unwrap(), bulk("v"));
    assert_eq!(
        popper.join().unwrap().unwrap(),
        arr(vec![bulk("t"), bulk("v")])
    );
    assert_eq!(int(&mut con, &["EXISTS", "s", "t"]), 0);
}

#[test]
fn blmove_to_a_key_of_another_type_fails_and_keeps_the_element() {
    let srv = server();
    let mut con = srv.conn();
    ok(&mut con, &["SET", "bad", "x"]);
    let a = spawn(&srv, &["BRPOPLPUSH", "src", "bad", "0"]);
    wait_blocked(&mut con, 1);
    let b = spawn(&srv, &["BRPOPLPUSH", "src", "good", "0"]);
    wait_blocked(&mut con, 2);
    int(&mut con, &["RPUSH", "src", "e"]);
    let e = a.join().unwrap().unwrap_err();
    assert_eq!(e.code(), Some("WRONGTYPE"));
    assert_eq!(b.join().unwrap().unwrap(), bulk("e"));
    assert_eq!(
        ok(&mut con, &["LRANGE", "good", "0", "-1"]),
        arr(vec![bulk("e")])
    );
}

#[test]
fn waiters_stay_blocked_while_the_key_has_another_type() {
    let srv = server();
    let mut con = srv.conn();
    let h = spawn(&srv, &["BLPOP", "k", "0"]);
    wait_blocked(&mut con, 1);
    int(&mut con, &["ZADD", "k", "1", "m"]);
    ok(&mut con, &["MULTI"]);
    ok(&mut con, &["LPUSH", "k2", "a"]);
    ok(&mut con, &["DEL", "k2"]);
    ok(&mut con, &["EXEC"]);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(info_field(&mut con, "blocked_clients"), "1");
    assert_eq!(int(&mut con, &["ZCARD", "k"]), 1);
    int(&mut con, &["DEL", "k"]);
    int(&mut con, &["RPUSH", "k", "v"]);
    assert_eq!(h.join().unwrap().unwrap(), arr(vec![bulk("k"), bulk("v")]));
}

#[test]
fn a_transaction_serves_waiters_after_exec_and_never_blocks() {
    let srv = server();
    let mut con = srv.conn();
    let h = spawn(&srv, &["BLPOP", "k", "0"]);
    wait_blocked(&mut con, 1);
    ok(&mut con, &["MULTI"]);
    ok(&mut con, &["LPUSH", "k", "a"]);
    ok(&mut con, &["LPUSH", "k", "b"]);
    ok(&mut con, &["EXEC"]);
    // The waiter sees the state after the whole transaction.
    assert_eq!(h.join().unwrap().unwrap(), arr(vec![bulk("k"), bulk("b")]));
    ok(&mut con, &["MULTI"]);
    for c in [
        &["BLPOP", "e", "0"][..],
        &["BRPOPLPUSH", "e", "f", "0"],
        &["BLMOVE", "e", "f", "LEFT", "LEFT", "0"],
        &["BZPOPMIN", "e", "0"],
        &["BLMPOP", "0", "1", "e", "LEFT"],
        &["BZMPOP", "0", "1", "e", "MIN"],
        &["BLPOP", "k", "0"],
    ] {
        ok(&mut con, c);
    }
    assert_eq!(
        ok(&mut con, &["EXEC"]),
        arr(vec![
            Value::Nil,
            Value::Nil,
            Value::Nil,
            Value::Nil,
            Value::Nil,
            Value::Nil,
            arr(vec![bulk("k"), bulk("a")]),
        ])
    );
    let mut raw = Raw::new(&srv);
    raw.send(&["MULTI"]);
    raw.send(&["BRPOPLPUSH", "e", "f", "0"]);
    raw.send(&["BLPOP", "e", "0"]);
    raw.send(&["EXEC"]);
    raw.expect("+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n$-1\r\n*-1\r\n");
}

#[test]
fn client_unblock_ends_waits() {
    let srv = server();
    let mut con = srv.conn();
    let mut blocked = srv.conn();
    let id = int(&mut blocked, &["CLIENT", "ID"]).to_string();
    let h = thread::spawn(move || q(&mut blocked, &["BLPOP", "k", "0"]).map(|v| (v, blocked)));
    wait_blocked(&mut con, 1);
    let list = ok(&mut con, &["CLIENT", "LIST", "ID", &id]);
    let Value::BulkString(line) = list else {
        panic!()
    };
    assert!(String::from_utf8_lossy(&line).contains("flags=b "));
    assert_eq!(int(&mut con, &["CLIENT", "UNBLOCK", &id]), 1);
    let (v, mut blocked) = h.join().unwrap().unwrap();
    assert_eq!(v, Value::Nil);
    assert_eq!(int(&mut con, &["CLIENT", "UNBLOCK", &id]), 0);
    let h = thread::spawn(move || q(&mut blocked, &["BZMPOP", "0", "1", "z", "MIN"]));
    wait_blocked(&mut con, 1);
    assert_eq!(int(&mut con, &["CLIENT", "UNBLOCK", &id, "ERROR"]), 1);
    let e = h.join().unwrap().unwrap_err();
    assert_eq!(e.code(), Some("UNBLOCKED"));
    assert_eq!(e.detail(), Some("client unblocked via CLIENT UNBLOCK"));
    assert_eq!(
        err(&mut con, &["CLIENT", "UNBLOCK", &id, "LATER"]),
        "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"
    );
    assert_eq!(
        err(&mut con, &["CLIENT", "UNBLOCK", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(int(&mut con, &["CLIENT", "UNBLOCK", "999999"]), 0);
    let Value::BulkString(stats) = ok(&mut con, &["INFO", "errorstats"]) else {
        panic!()
    };
    assert!(String::from_utf8_lossy(&stats).contains("errorstat_UNBLOCKED:count=1"));
}

#[test]
fn killed_or_disconnected_waiters_take_nothing() {
    let srv = server();
    let mut con = srv.conn();
    let mut victim = srv.conn();
    let id = int(&mut victim, &["CLIENT", "ID"]).to_string();
    let h = thread::spawn(move || q(&mut victim, &["BLPOP", "k", "0"]));
    wait_blocked(&mut con, 1);
    assert_eq!(int(&mut con, &["CLIENT", "KILL", "ID", &id]), 1);
    assert!(h.join().unwrap().is_err());
    wait_blocked(&mut con, 0);
    // A client that just goes away.
    let mut raw = Raw::new(&srv);
    raw.send(&["BLPOP", "k", "0"]);
    wait_blocked(&mut con, 1);
    drop(raw);
    wait_blocked(&mut con, 0);
    int(&mut con, &["RPUSH", "k", "v"]);
    assert_eq!(int(&mut con, &["LLEN", "k"]), 1);
}

#[test]
fn pipelined_commands_wait_behind_a_blocked_one() {
    let srv = server();
    let mut con = srv.conn();
    let mut raw = Raw::new(&srv);
    raw.send(&["BLPOP", "k", "0"]);
    raw.send(&["BLPOP", "k", "0"]);
    raw.send(&["PING"]);
    wait_blocked(&mut con, 1);
    assert!(raw.silent_for(100));
    int(&mut con, &["RPUSH", "k", "a"]);
    raw.expect("*2\r\n$1\r\nk\r\n$1\r\na\r\n");
    wait_blocked(&mut con, 1);
    int(&mut con, &["RPUSH", "k", "b"]);
    raw.expect("*2\r\n$1\r\nk\r\n$1\r\nb\r\n+PONG\r\n");
}

#[test]
fn new_keys_from_rename_move_and_swapdb_wake_waiters() {
    let srv = server();
    let mut con = srv.conn();
    let h = spawn(&srv, &["BLPOP", "dst", "0"]);
    wait_blocked(&mut con, 1);
    int(&mut con, &["RPUSH", "src", "a", "b"]);
    ok(&mut con, &["RENAME", "src", "dst"]);
    assert_eq!(
        h.join().unwrap().unwrap(),
        arr(vec![bulk("dst"), bulk("a")])
    );
    ok(&mut con, &["DEL", "dst"]);

    let h = spawn(&srv, &["BRPOP", "m", "0"]);
    wait_blocked(&mut con, 1);
    ok(&mut con, &["SELECT", "1"]);
    int(&mut con, &["RPUSH", "m", "x"]);
    assert_eq!(int(&mut con, &["MOVE", "m", "0"]), 1);
    assert_eq!(h.join().unwrap().unwrap(), arr(vec![bulk("m"), bulk("x")]));

    let h = spawn(&srv, &["BRPOP", "w", "0"]);
    wait_blocked(&mut con, 1);
    int(&mut con, &["RPUSH", "w", "y"]);
    ok(&mut con, &["SWAPDB", "0", "1"]);
    assert_eq!(h.join().unwrap().unwrap(), arr(vec![bulk("w"), bulk("y")]));
}

#[test]
fn watch_sees_writes_made_by_serving_a_waiter() {
    let srv = server();
    let mut con = srv.conn();
    let mut watcher = srv.conn();
    let h = spawn(&srv, &["BRPOPLPUSH", "src", "dst", "0"]);
    wait_blocked(&mut con, 1);
    ok(&mut watcher, &["WATCH", "dst"]);
    ok(&mut watcher, &["MULTI"]);
    ok(&mut watcher, &["PING"]);
    int(&mut con, &["LPUSH", "src", "e"]);
    assert_eq!(h.join().unwrap().unwrap(), bulk("e"));
    assert_eq!(ok(&mut watcher, &["EXEC"]), Value::Nil);
}

#[test]
fn blocked_command_stats_and_slowlog() {
    let srv = server();
    let mut con = srv.conn();
    ok(&mut con, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    let h = spawn(&srv, &["BLPOP", "k", "0"]);
    wait_blocked(&mut con, 1);
    ok(&mut con, &["SLOWLOG", "RESET"]);
    int(&mut con, &["RPUSH", "k", "v"]);
    h.join().unwrap().unwrap();
    // The blocked command is logged when it completes, after the reset.
    let Value::Array(entries) = ok(&mut con, &["SLOWLOG", "GET", "10"]) else {
        panic!()
    };
    let logged: Vec<String> = entries
        .iter()
        .map(|e| format!("{e:?}"))
        .filter(|e| e.contains("blpop") || e.contains("BLPOP"))
        .collect();
    assert_eq!(logged.len(), 1, "{entries:?}");
    let Value::BulkString(stats) = ok(&mut con, &["INFO", "commandstats"]) else {
        panic!()
    };
    let stats = String::from_utf8(stats).unwrap();
    assert!(stats.contains("cmdstat_blpop:calls=1,"), "{stats}");
}

#[test]
fn info_counts_blocked_clients_and_deadlines() {
    let srv = server();
    let mut con = srv.conn();
    let a = spawn(&srv, &["BLPOP", "x", "0"]);
    let b = spawn(&srv, &["BLPOP", "x", "100"]);
    wait_blocked(&mut con, 2);
    assert_eq!(info_field(&mut con, "clients_in_timeout_table"), "1");
    int(&mut con, &["RPUSH", "x", "1", "2"]);
    a.join().unwrap().unwrap();
    b.join().unwrap().unwrap();
    wait_blocked(&mut con, 0);
    assert_eq!(info_field(&mut con, "clients_in_timeout_table"), "0");
}

#[test]
fn many_clients_many_threads_no_element_lost_or_duplicated() {
    let srv = server();
    const POPPERS: usize = 8;
    const PER_POPPER: usize = 200;
    let poppers: Vec<_> = (0..POPPERS)
        .map(|i| {
            let mut con = srv.conn();
            thread::spawn(move || {
                let mut got = Vec::new();
                for _ in 0..PER_POPPER {
                    let v = if i % 2 == 0 {
                        q(&mut con, &["BLPOP", "q1", "q2", "0"]).unwrap()
                    } else {
                        q(&mut con, &["BRPOP", "q2", "q1", "0"]).unwrap()
                    };
                    let Value::Array(kv) = v else { panic!("{v:?}") };
                    let Value::BulkString(e) = &kv[1] else {
                        panic!()
                    };
                    got.push(String::from_utf8(e.clone()).unwrap());
                }
                got
            })
        })
        .collect();
    let pushers: Vec<_> = (0..4)
        .map(|p| {
            let mut con = srv.conn();
            thread::spawn(move || {
                for j in 0..(POPPERS * PER_POPPER / 4) {
                    let key = if j % 3 == 0 { "q1" } else { "q2" };
                    q(&mut con, &["RPUSH", key, &format!("{p}-{j}")]).unwrap();
                }
            })
        })
        .collect();
    for p in pushers {
        p.join().unwrap();
    }
    let mut all: Vec<String> = poppers
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(all.len(), POPPERS * PER_POPPER);
    all.sort();
    all.dedup();
    assert_eq!(all.len(), POPPERS * PER_POPPER);
    let mut con = srv.conn();
    assert_eq!(int(&mut con, &["EXISTS", "q1", "q2"]), 0);
}

#[test]
fn chained_moves_across_threads_lose_nothing() {
    let srv = server();
    // Movers shuttle elements q1 -> q2 -> q3 while pushers fill q1 and a
    // consumer drains q3: every element comes out exactly once.
    const N: usize = 300;
    let movers: Vec<_> = [("q1", "q2"), ("q1", "q2"), ("q2", "q3"), ("q2", "q3")]
        .into_iter()
        .map(|(s, d)| {
            let mut con = srv.conn();
            thread::spawn(move || {
                for _ in 0..N / 2 {
                    q(&mut con, &["BLMOVE", s, d, "LEFT", "RIGHT", "0"]).unwrap();
                }
            })
        })
        .collect();
    let consumer = {
        let mut con = srv.conn();
        thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..N {
                let Value::Array(kv) = q(&mut con, &["BLPOP", "q3", "0"]).unwrap() else {
                    panic!()
                };
                got.push(kv[1].clone());
            }
            got
        })
    };
    let mut con = srv.conn();
    for i in 0..N {
        int(&mut con, &["RPUSH", "q1", &i.to_string()]);
    }
    for m in movers {
        m.join().unwrap();
    }
    let got = consumer.join().unwrap();
    assert_eq!(got.len(), N);
    assert_eq!(int(&mut con, &["EXISTS", "q1", "q2", "q3"]), 0);
}
