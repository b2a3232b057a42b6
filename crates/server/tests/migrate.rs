//! MIGRATE between two Vireo servers and from Vireo to redis-server: keys
//! move with their TTLs, COPY and REPLACE, KEYS, AUTH, the target's errors,
//! connection failures, and the connection cache INFO reports.

mod common;

use common::diff::start_redis_with;
use common::{err, info_field, ok, q, Server};
use redis::Value;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

#[test]
fn keys_move_and_copy_between_servers() {
    let a = Server::start(&["--save", ""]);
    let b = Server::start(&["--save", ""]);
    let (mut ca, mut cb) = (a.conn(), b.conn());
    let port = b.port.to_string();
    ok(&mut ca, &["SET", "k", "v"]);
    ok(&mut ca, &["PEXPIRE", "k", "100000"]);
    ok(&mut ca, &["RPUSH", "list", "a", "b", "c"]);
    assert_eq!(info_field(&mut ca, "migrate_cached_sockets"), "0");
    let r = ok(&mut ca, &["MIGRATE", "127.0.0.1", &port, "k", "3", "5000"]);
    assert_eq!(r, Value::Okay);
    assert_eq!(info_field(&mut ca, "migrate_cached_sockets"), "1");
    assert_eq!(ok(&mut ca, &["EXISTS", "k"]), Value::Int(0));
    ok(&mut cb, &["SELECT", "3"]);
    assert_eq!(ok(&mut cb, &["GET", "k"]), bulk("v"));
    match ok(&mut cb, &["PTTL", "k"]) {
        Value::Int(t) => assert!(t > 90_000 && t <= 100_000, "{t}"),
        other => panic!("{other:?}"),
    }
    // COPY keeps the source; the target refuses an existing key without
    // REPLACE.
    let r = ok(
        &mut ca,
        &["MIGRATE", "127.0.0.1", &port, "list", "3", "5000", "COPY"],
    );
    assert_eq!(r, Value::Okay);
    assert_eq!(ok(&mut ca, &["LLEN", "list"]), Value::Int(3));
    let e = err(
        &mut ca,
        &["MIGRATE", "127.0.0.1", &port, "list", "3", "5000", "COPY"],
    );
    assert!(
        e.starts_with("ERR Target instance replied with error: BUSYKEY"),
        "{e}"
    );
    ok(&mut ca, &["RPUSH", "list", "d"]);
    let r = ok(
        &mut ca,
        &[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "list",
            "3",
            "5000",
            "REPLACE",
        ],
    );
    assert_eq!(r, Value::Okay);
    assert_eq!(ok(&mut cb, &["LLEN", "list"]), Value::Int(4));
    // Nothing to move.
    let r = q(
        &mut ca,
        &["MIGRATE", "127.0.0.1", &port, "nokey", "3", "5000"],
    )
    .unwrap();
    assert_eq!(r, Value::SimpleString("NOKEY".into()));
}

#[test]
fn keys_option_moves_only_acknowledged_keys() {
    let a = Server::start(&["--save", ""]);
    let b = Server::start(&["--save", ""]);
    let (mut ca, mut cb) = (a.conn(), b.conn());
    let port = b.port.to_string();
    ok(&mut ca, &["MSET", "a", "1", "b", "2", "c", "3", "d", "4"]);
    ok(&mut cb, &["MSET", "c", "_"]);
    let e = err(
        &mut ca,
        &[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "",
            "0",
            "5000",
            "KEYS",
            "a",
            "b",
            "c",
            "d",
            "x",
        ],
    );
    assert!(e.contains("BUSYKEY"), "{e}");
    assert_eq!(ok(&mut ca, &["DBSIZE"]), Value::Int(1));
    assert_eq!(ok(&mut ca, &["GET", "c"]), bulk("3"));
    assert_eq!(ok(&mut cb, &["DBSIZE"]), Value::Int(4));
    let e = err(
        &mut ca,
        &["MIGRATE", "127.0.0.1", &port, "c", "0", "5000", "KEYS", "c"],
    );
    assert!(e.contains("must be set to the empty string"), "{e}");
    let e = err(
        &mut ca,
        &["MIGRATE", "127.0.0.1", &port, "c", "0", "5000", "BOGUS"],
    );
    assert_eq!(e, "ERR syntax error");
}

#[test]
fn auth_and_connection_errors() {
    let a = Server::start(&["--save", ""]);
    let b = Server::start(&["--save", "", "--requirepass", "foobar"]);
    let mut ca = a.conn();
    let port = b.port.to_string();
    ok(&mut ca, &["SET", "k", "v"]);
    let e = err(
        &mut ca,
        &[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "k",
            "0",
            "5000",
            "AUTH",
            "nope",
        ],
    );
    assert!(e.contains("WRONGPASS"), "{e}");
    let r = ok(
        &mut ca,
        &[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "k",
            "0",
            "5000",
            "AUTH",
            "foobar",
        ],
    );
    assert_eq!(r, Value::Okay);
    ok(&mut ca, &["SET", "k", "v"]);
    let closed = common::free_port().to_string();
    let e = err(&mut ca, &["MIGRATE", "127.0.0.1", &closed, "k", "0", "500"]);
    assert!(e.starts_with("IOERR"), "{e}");
    assert_eq!(ok(&mut ca, &["EXISTS", "k"]), Value::Int(1));
}

#[test]
fn vireo_migrates_into_redis() {
    if !common::diff::redis_server_available() {
        return;
    }
    let redis = start_redis_with(&[]);
    let a = Server::start(&["--save", ""]);
    let mut ca = a.conn();
    ok(&mut ca, &["HSET", "h", "f", "v", "g", "w"]);
    ok(&mut ca, &["ZADD", "z", "1.5", "m"]);
    let port = redis.port.to_string();
    let r = ok(
        &mut ca,
        &[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "",
            "0",
            "5000",
            "KEYS",
            "h",
            "z",
        ],
    );
    assert_eq!(r, Value::Okay);
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port)).unwrap();
    let mut cr = client.get_connection().unwrap();
    assert_eq!(ok(&mut cr, &["HGET", "h", "g"]), bulk("w"));
    assert_eq!(ok(&mut cr, &["ZSCORE", "z", "m"]), bulk("1.5"));
}

/// A target that does not answer within the timeout fails MIGRATE with
/// IOERR after one wait, not two: a timeout is not retried on a new
/// connection (Redis's rule), so the key stays here.
#[test]
fn a_silent_target_times_out_once() {
    let a = Server::start(&["--save", ""]);
    let b = Server::start(&["--save", "", "--enable-debug-command", "yes"]);
    let mut ca = a.conn();
    let port = b.port.to_string();
    ok(&mut ca, &["SET", "k", "v"]);
    // DEBUG SLEEP stops the target (it holds every key) for 1.5 s.
    let sleeper = std::thread::spawn({
        let mut cb = b.conn();
        move || q(&mut cb, &["DEBUG", "SLEEP", "1.5"])
    });
    std::thread::sleep(std::time::Duration::from_millis(100));
    let started = std::time::Instant::now();
    let e = err(&mut ca, &["MIGRATE", "127.0.0.1", &port, "k", "0", "500"]);
    let waited = started.elapsed();
    assert!(e.starts_with("IOERR error or timeout"), "{e}");
    assert!(waited < std::time::Duration::from_millis(900), "{waited:?}");
    assert_eq!(ok(&mut ca, &["EXISTS", "k"]), Value::Int(1));
    sleeper.join().unwrap().unwrap();
}
