//! Streams against the real server: blocking readers woken across worker
//! threads, the ways a blocked group reader is released, persistence (AOF
//! replay of generated IDs and group effects, AOF rewrite, RDB reload), and
//! DUMP/RESTORE both ways with a real redis-server.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{err, info_field, ok, q, Server};
use redis::Value;

/// A server with four worker threads, so readers and writers land on
/// different threads.
fn server(extra: &[&str]) -> Server {
    let mut args = vec!["--io-threads", "4"];
    args.extend_from_slice(extra);
    Server::start(&args)
}

/// Waits (up to 10 s) until INFO reports `n` blocked clients.
fn wait_blocked(con: &mut redis::Connection, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(con, "blocked_clients") != n.to_string() {
        assert!(
            Instant::now() < deadline,
            "never reached {n} blocked clients"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

fn bulk(v: &str) -> Value {
    Value::BulkString(v.as_bytes().to_vec())
}

/// `[[key, [[id, [f, v]]]]]`, an XREAD reply of one entry.
fn one_entry(key: &str, id: &str, f: &str, v: &str) -> Value {
    Value::Array(vec![Value::Array(vec![
        bulk(key),
        Value::Array(vec![Value::Array(vec![
            bulk(id),
            Value::Array(vec![bulk(f), bulk(v)]),
        ])]),
    ])])
}

#[test]
fn an_xadd_wakes_readers_blocked_on_every_worker() {
    let srv = server(&[]);
    let mut admin = srv.conn();
    ok(&mut admin, &["XADD", "s", "1-0", "a", "1"]);
    let readers: Vec<_> = (0..8)
        .map(|i| {
            let mut con = srv.conn();
            thread::spawn(move || {
                let args = if i % 2 == 0 {
                    vec!["XREAD", "BLOCK", "0", "STREAMS", "other", "s", "0", "$"]
                } else {
                    vec!["XREAD", "COUNT", "5", "BLOCK", "0", "STREAMS", "s", "1-0"]
                };
                ok(&mut con, &args)
            })
        })
        .collect();
    wait_blocked(&mut admin, 8);
    ok(&mut admin, &["XADD", "s", "2-0", "b", "2"]);
    for r in readers {
        assert_eq!(r.join().unwrap(), one_entry("s", "2-0", "b", "2"));
    }
    wait_blocked(&mut admin, 0);
}

#[test]
fn group_readers_share_new_entries_and_see_them_pending() {
    let srv = server(&[]);
    let mut admin = srv.conn();
    ok(&mut admin, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let readers: Vec<_> = ["alice", "bob"]
        .into_iter()
        .map(|name| {
            let mut con = srv.conn();
            thread::spawn(move || {
                let args = [
                    "XREADGROUP",
                    "GROUP",
                    "g",
                    name,
                    "BLOCK",
                    "0",
                    "STREAMS",
                    "s",
                    ">",
                ];
                ok(&mut con, &args)
            })
        })
        .collect();
    wait_blocked(&mut admin, 2);
    ok(&mut admin, &["XADD", "s", "1-0", "f", "1"]);
    ok(&mut admin, &["XADD", "s", "2-0", "f", "2"]);
    let got: Vec<Value> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    // Each entry went to exactly one reader.
    let mut ids: Vec<String> = got
        .iter()
        .map(|v| format!("{v:?}"))
        .map(|s| {
            if s.contains("1-0") {
                "1-0".into()
            } else {
                "2-0".into()
            }
        })
        .collect();
    ids.sort();
    assert_eq!(ids, ["1-0", "2-0"]);
    let summary = ok(&mut admin, &["XPENDING", "s", "g"]);
    let Value::Array(items) = summary else {
        panic!("{summary:?}")
    };
    assert_eq!(items[0], Value::Int(2));
}

#[test]
fn blocked_group_readers_are_released_with_redis_errors() {
    let srv = server(&[]);
    let mut admin = srv.conn();
    let start = |srv: &Server| {
        let mut con = srv.conn();
        thread::spawn(move || {
            let args = [
                "XREADGROUP",
                "GROUP",
                "g",
                "c",
                "BLOCK",
                "0",
                "STREAMS",
                "s",
                ">",
            ];
            q(&mut con, &args)
                .map(|v| format!("{v:?}"))
                .unwrap_or_else(|e| e.to_string())
        })
    };
    let setups: [&[&str]; 4] = [
        &["XGROUP", "DESTROY", "s", "g"],
        &["DEL", "s"],
        &["SET", "s", "x"],
        &["FLUSHALL"],
    ];
    let expected = [
        "NOGROUP",
        "the stream key no longer exists",
        "the stream key no longer exists",
        "the stream key no longer exists",
    ];
    for (action, want) in setups.iter().zip(expected) {
        ok(&mut admin, &["DEL", "s"]);
        ok(&mut admin, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        let reader = start(&srv);
        wait_blocked(&mut admin, 1);
        ok(&mut admin, action);
        let reply = reader.join().unwrap();
        assert!(reply.contains(want), "{action:?}: {reply}");
    }
    // A stream that expires (found so by a lookup) releases them too.
    ok(&mut admin, &["DEL", "s"]);
    ok(&mut admin, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let reader = start(&srv);
    wait_blocked(&mut admin, 1);
    ok(&mut admin, &["PEXPIRE", "s", "30"]);
    thread::sleep(Duration::from_millis(60));
    ok(&mut admin, &["EXISTS", "s"]);
    let reply = reader.join().unwrap();
    assert!(reply.contains("no longer exists"), "expired: {reply}");

    // A plain reader keeps waiting when the key goes, and is served by the
    // stream created next.
    ok(&mut admin, &["DEL", "s"]);
    ok(&mut admin, &["XADD", "s", "5-0", "a", "b"]);
    let mut con = srv.conn();
    let reader = thread::spawn(move || ok(&mut con, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]));
    wait_blocked(&mut admin, 1);
    ok(&mut admin, &["DEL", "s"]);
    thread::sleep(Duration::from_millis(50));
    ok(&mut admin, &["XADD", "s", "6-0", "c", "d"]);
    assert_eq!(reader.join().unwrap(), one_entry("s", "6-0", "c", "d"));
}

#[test]
fn blocking_reads_time_out_and_never_block_inside_multi() {
    let srv = server(&[]);
    let mut con = srv.conn();
    let t = Instant::now();
    let v = ok(&mut con, &["XREAD", "BLOCK", "100", "STREAMS", "s", "$"]);
    assert_eq!(v, Value::Nil);
    assert!(t.elapsed() >= Duration::from_millis(100));
    ok(&mut con, &["MULTI"]);
    ok(&mut con, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    assert_eq!(ok(&mut con, &["EXEC"]), Value::Array(vec![Value::Nil]));
    assert!(err(&mut con, &["XREAD", "BLOCK", "-1", "STREAMS", "s", "$"]).contains("negative"));
}

/// XINFO STREAM FULL of `key`, with every group and pending entry.
fn full(con: &mut redis::Connection, key: &str) -> Value {
    ok(con, &["XINFO", "STREAM", key, "FULL", "COUNT", "0"])
}

/// [`full`] without consumers' seen-times, which a replayed log sets to
/// the time of replay (in Redis too: the AOF does not carry them).
fn full_unseen(con: &mut redis::Connection, key: &str) -> Value {
    fn blank(v: Value) -> Value {
        let Value::Array(items) = v else {
            return v;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut after_seen = false;
        for item in items {
            out.push(if after_seen {
                Value::Int(0)
            } else {
                blank(item)
            });
            after_seen = matches!(out.last(), Some(Value::BulkString(b)) if b == b"seen-time");
        }
        Value::Array(out)
    }
    blank(full(con, key))
}

/// What the servers of the persistence test run with: the node size
/// [`build`] sets, so that replayed XADDs cut nodes where the originals did.
/// Every write reaches the log before its reply (the servers are killed).
const NODES: [&str; 6] = [
    "--stream-node-max-entries",
    "10",
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
];

/// A stream with generated IDs, deletions, trimming, groups, consumers
/// with and without pending entries, and a NOACK reader.
fn build(con: &mut redis::Connection) {
    // Small nodes, so that approximate trimming removes some.
    ok(con, &["CONFIG", "SET", "stream-node-max-entries", "10"]);
    for i in 0..50 {
        ok(
            con,
            &["XADD", "s", "MAXLEN", "~", "30", "*", "n", &i.to_string()],
        );
    }
    ok(con, &["XDEL", "s", "0-1"]);
    ok(con, &["XGROUP", "CREATE", "s", "g1", "0"]);
    ok(
        con,
        &["XGROUP", "CREATE", "s", "g2", "$", "ENTRIESREAD", "3"],
    );
    ok(
        con,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "alice",
            "COUNT",
            "7",
            "STREAMS",
            "s",
            ">",
        ],
    );
    ok(
        con,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "bob",
            "NOACK",
            "COUNT",
            "3",
            "STREAMS",
            "s",
            ">",
        ],
    );
    ok(con, &["XGROUP", "CREATECONSUMER", "s", "g2", "carol"]);
    ok(
        con,
        &["XAUTOCLAIM", "s", "g1", "dave", "0", "0", "COUNT", "2"],
    );
    ok(con, &["XADD", "empty", "MAXLEN", "0", "*", "x", "y"]);
    ok(
        con,
        &[
            "XSETID",
            "empty",
            "99-9",
            "ENTRIESADDED",
            "42",
            "MAXDELETEDID",
            "98-0",
        ],
    );
}

#[test]
fn streams_survive_aof_replay_rewrite_and_rdb_reload() {
    let srv = Server::start(&NODES);
    let mut con = srv.conn();
    build(&mut con);
    assert_eq!(
        ok(&mut con, &["XLEN", "s"]),
        Value::Int(30),
        "trimmed by whole nodes"
    );
    let before = (full_unseen(&mut con, "s"), full(&mut con, "empty"));
    let dir = srv.kill_keep_dir();

    // Replaying the log: generated IDs, trims and group effects.
    let srv = Server::start_in(dir, &NODES);
    let mut con = srv.conn();
    assert_eq!(
        (full_unseen(&mut con, "s"), full(&mut con, "empty")),
        before
    );

    // The rewritten log rebuilds the same.
    ok(&mut con, &["BGREWRITEAOF"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(&mut con, "aof_rewrite_in_progress") != "0"
        || info_field(&mut con, "aof_rewrites") == "0"
    {
        assert!(Instant::now() < deadline, "rewrite never finished");
        thread::sleep(Duration::from_millis(20));
    }
    let dir = srv.kill_keep_dir();
    let srv = Server::start_in(dir, &NODES);
    let mut con = srv.conn();
    assert_eq!(
        (full_unseen(&mut con, "s"), full(&mut con, "empty")),
        before
    );

    // An RDB file keeps even the seen-times.
    let exact = full(&mut con, "s");
    ok(&mut con, &["SAVE"]);
    let dir = srv.kill_keep_dir();
    let srv = Server::start_in(dir, &NODES[..2]);
    let mut con = srv.conn();
    assert_eq!(full(&mut con, "s"), exact);
    assert_eq!(full(&mut con, "empty"), before.1);
    assert_eq!(
        ok(&mut con, &["TYPE", "s"]),
        Value::SimpleString("stream".into())
    );
    assert_eq!(ok(&mut con, &["OBJECT", "ENCODING", "s"]), bulk("stream"));
}

/// True when a real redis-server can be started (else the test prints a
/// note and returns).
fn have_redis() -> bool {
    let found = std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .is_ok();
    if !found {
        eprintln!("note: redis-server not installed; skipping the interop test");
    }
    found
}

#[test]
fn dump_and_restore_work_both_ways_with_redis() {
    if !have_redis() {
        return;
    }
    let redis = common::diff::start_redis();
    let rclient = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port)).unwrap();
    let mut r = rclient.get_connection().unwrap();
    let srv = Server::start(&[]);
    let mut v = srv.conn();

    // Redis's payload, with groups and pending entries, into Vireo.
    build(&mut r);
    for key in ["s", "empty"] {
        let payload: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut r).unwrap();
        let _: () = redis::cmd("RESTORE")
            .arg(key)
            .arg(0)
            .arg(&payload)
            .query(&mut v)
            .unwrap();
        assert_eq!(full(&mut v, key), full(&mut r, key), "{key} into Vireo");
    }

    // Vireo's own stream into Redis.
    ok(&mut v, &["DEL", "s", "empty"]);
    build(&mut v);
    ok(&mut r, &["DEL", "s", "empty"]);
    for key in ["s", "empty"] {
        let payload: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut v).unwrap();
        let _: () = redis::cmd("RESTORE")
            .arg(key)
            .arg(0)
            .arg(&payload)
            .query(&mut r)
            .unwrap();
        assert_eq!(full(&mut r, key), full(&mut v, key), "{key} into Redis");
    }

    // A corrupt payload is refused, never loaded.
    let mut payload: Vec<u8> = redis::cmd("DUMP").arg("s").query(&mut r).unwrap();
    let mid = payload.len() / 2;
    payload[mid] ^= 0x55;
    let res: redis::RedisResult<()> = redis::cmd("RESTORE")
        .arg("bad")
        .arg(0)
        .arg(&payload)
        .query(&mut v);
    assert!(res.is_err());
    assert_eq!(ok(&mut v, &["EXISTS", "bad"]), Value::Int(0));
}

#[test]
fn type_scan_copy_rename_move_and_memory_know_streams() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["XADD", "s", "1-0", "a", "b"]);
    ok(&mut con, &["XGROUP", "CREATE", "s", "g", "0"]);
    ok(&mut con, &["SET", "str", "x"]);
    let scan = ok(&mut con, &["SCAN", "0", "TYPE", "stream", "COUNT", "100"]);
    assert_eq!(
        scan,
        Value::Array(vec![bulk("0"), Value::Array(vec![bulk("s")])])
    );
    assert_eq!(ok(&mut con, &["COPY", "s", "c"]), Value::Int(1));
    ok(&mut con, &["RENAME", "c", "r"]);
    assert_eq!(full(&mut con, "r"), full(&mut con, "s"));
    assert_eq!(ok(&mut con, &["MOVE", "r", "1"]), Value::Int(1));
    ok(&mut con, &["SELECT", "1"]);
    assert_eq!(ok(&mut con, &["XLEN", "r"]), Value::Int(1));
    let Value::Int(bytes) = ok(&mut con, &["MEMORY", "USAGE", "r"]) else {
        panic!("MEMORY USAGE is an integer");
    };
    assert!(bytes > 0);
    ok(&mut con, &["SELECT", "0"]);
    assert!(err(&mut con, &["XADD", "str", "*", "a", "b"]).starts_with("WRONGTYPE"));
    assert!(err(&mut con, &["XLEN", "str"]).starts_with("WRONGTYPE"));
}

#[test]
fn rdb_files_load_both_ways_with_redis() {
    if !have_redis() {
        return;
    }
    // Redis writes, Vireo loads.
    let dir = common::fresh_dir();
    let d = dir.to_str().unwrap();
    let redis = common::diff::start_redis_with(&["--dir", d, "--dbfilename", "dump.rdb"]);
    let rclient = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port)).unwrap();
    let mut r = rclient.get_connection().unwrap();
    build(&mut r);
    ok(&mut r, &["SAVE"]);
    let expected = (full(&mut r, "s"), full(&mut r, "empty"));
    drop(redis);
    let srv = Server::start_in(dir, &[]);
    let mut v = srv.conn();
    assert_eq!((full(&mut v, "s"), full(&mut v, "empty")), expected);

    // Vireo writes, Redis loads.
    ok(&mut v, &["XADD", "s", "*", "more", "entries"]);
    ok(&mut v, &["SAVE"]);
    let expected = (full(&mut v, "s"), full(&mut v, "empty"));
    let dir = srv.kill_keep_dir();
    let d = dir.to_str().unwrap();
    let redis = common::diff::start_redis_with(&["--dir", d, "--dbfilename", "dump.rdb"]);
    let rclient = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port)).unwrap();
    let mut r = rclient.get_connection().unwrap();
    assert_eq!((full(&mut r, "s"), full(&mut r, "empty")), expected);
}
