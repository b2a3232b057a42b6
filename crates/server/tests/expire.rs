//! Key expiry against the real server: EXPIRE, PEXPIRE, EXPIREAT,
//! PEXPIREAT (with NX/XX/GT/LT), TTL, PTTL, EXPIRETIME, PEXPIRETIME,
//! PERSIST, and keys disappearing lazily and actively.

mod common;

use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::q;
use redis::Value;

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

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn ttl_family_reports_and_persist_clears() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    for cmd in ["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"] {
        assert_eq!(int(&mut con, &[cmd, "nokey"]), -2, "{cmd} of a missing key");
    }
    ok(&mut con, &["SET", "k", "v"]);
    for cmd in ["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"] {
        assert_eq!(int(&mut con, &[cmd, "k"]), -1, "{cmd} of a persistent key");
    }
    assert_eq!(int(&mut con, &["PERSIST", "k"]), 0);
    assert_eq!(int(&mut con, &["PERSIST", "nokey"]), 0);

    let before = now_ms();
    assert_eq!(int(&mut con, &["EXPIRE", "k", "100"]), 1);
    let after = now_ms();
    let ttl = int(&mut con, &["TTL", "k"]);
    assert!((99..=100).contains(&ttl), "TTL {ttl}");
    let pttl = int(&mut con, &["PTTL", "k"]);
    assert!(pttl > 95_000 && pttl <= 100_000, "PTTL {pttl}");
    let at = int(&mut con, &["PEXPIRETIME", "k"]);
    assert!(
        at >= before + 100_000 && at <= after + 100_000,
        "PEXPIRETIME {at}"
    );
    assert_eq!(int(&mut con, &["EXPIRETIME", "k"]), (at + 500) / 1000);

    assert_eq!(int(&mut con, &["PERSIST", "k"]), 1);
    assert_eq!(int(&mut con, &["TTL", "k"]), -1);
    assert_eq!(int(&mut con, &["PERSIST", "k"]), 0);

    // TTL rounds to the nearest second.
    ok(&mut con, &["PEXPIRE", "k", "1800"]);
    assert_eq!(int(&mut con, &["TTL", "k"]), 2);
    ok(&mut con, &["PEXPIRE", "k", "1200"]);
    assert_eq!(int(&mut con, &["TTL", "k"]), 1);

    // Absolute forms.
    let in_an_hour = now_ms() / 1000 + 3600;
    assert_eq!(
        int(&mut con, &["EXPIREAT", "k", &in_an_hour.to_string()]),
        1
    );
    assert_eq!(int(&mut con, &["EXPIRETIME", "k"]), in_an_hour);
    assert_eq!(int(&mut con, &["PEXPIRETIME", "k"]), in_an_hour * 1000);
    let ms = now_ms() + 7_777_777;
    assert_eq!(int(&mut con, &["PEXPIREAT", "k", &ms.to_string()]), 1);
    assert_eq!(int(&mut con, &["PEXPIRETIME", "k"]), ms);

    // The largest representable time.
    assert_eq!(int(&mut con, &["PEXPIREAT", "k", "9223372036854775807"]), 1);
    assert_eq!(int(&mut con, &["PEXPIRETIME", "k"]), i64::MAX);
    assert_eq!(int(&mut con, &["EXPIRETIME", "k"]), 9_223_372_036_854_776);
    assert_eq!(int(&mut con, &["EXISTS", "k"]), 1);
}

#[test]
fn expire_on_missing_keys_and_past_times() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    for cmd in ["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"] {
        assert_eq!(
            int(&mut con, &[cmd, "nokey", "100"]),
            0,
            "{cmd} of a missing key"
        );
        assert_eq!(
            int(&mut con, &[cmd, "nokey", "0"]),
            0,
            "{cmd} of a missing key, past time"
        );
    }
    for (cmd, past) in [
        ("EXPIRE", "-1"),
        ("PEXPIRE", "0"),
        ("EXPIREAT", "1"),
        ("PEXPIREAT", "-100"),
    ] {
        ok(&mut con, &["SET", "k", "v"]);
        assert_eq!(int(&mut con, &[cmd, "k", past]), 1, "{cmd} {past} deletes");
        assert_eq!(int(&mut con, &["EXISTS", "k"]), 0, "{cmd} {past} deletes");
    }
    // Deleting by a past time is a write: it aborts a transaction watching the key.
    let mut other = srv.conn();
    ok(&mut con, &["SET", "w", "v"]);
    ok(&mut con, &["WATCH", "w"]);
    ok(&mut other, &["EXPIRE", "w", "-5"]);
    ok(&mut con, &["MULTI"]);
    ok(&mut con, &["PING"]);
    assert_eq!(ok(&mut con, &["EXEC"]), Value::Nil);
    // So is setting a TTL.
    ok(&mut con, &["SET", "w", "v"]);
    ok(&mut con, &["WATCH", "w"]);
    ok(&mut other, &["EXPIRE", "w", "500"]);
    ok(&mut con, &["MULTI"]);
    ok(&mut con, &["PING"]);
    assert_eq!(ok(&mut con, &["EXEC"]), Value::Nil);
}

#[test]
fn nx_xx_gt_lt_conditions() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["SET", "k", "v"]);
    // A persistent key counts as an infinite TTL.
    assert_eq!(int(&mut con, &["EXPIRE", "k", "100", "XX"]), 0);
    assert_eq!(int(&mut con, &["EXPIRE", "k", "100", "GT"]), 0);
    assert_eq!(int(&mut con, &["EXPIRE", "k", "-1", "GT"]), 0);
    assert_eq!(int(&mut con, &["TTL", "k"]), -1);
    assert_eq!(int(&mut con, &["EXPIRE", "k", "100", "LT"]), 1);
    assert_eq!(int(&mut con, &["EXPIRE", "k", "50", "NX"]), 0);
    assert_eq!(int(&mut con, &["EXPIRE", "k", "200", "gt"]), 1);
    assert_eq!(int(&mut con, &["TTL", "k"]), 200);
    assert_eq!(int(&mut con, &["EXPIRE", "k", "150", "GT"]), 0);
    assert_eq!(int(&mut con, &["EXPIRE", "k", "300", "LT"]), 0);
    assert_eq!(int(&mut con, &["EXPIRE", "k", "150", "XX", "LT"]), 1);
    assert_eq!(int(&mut con, &["TTL", "k"]), 150);
    // Absolute times, so no clock tick between commands can make the two
    // expiries differ.
    assert_eq!(int(&mut con, &["PEXPIREAT", "k", "33000000000000"]), 1);
    assert_eq!(
        int(&mut con, &["PEXPIREAT", "k", "33000000000000", "GT"]),
        0,
        "equal is not greater"
    );
    assert_eq!(
        int(&mut con, &["PEXPIREAT", "k", "33000000000000", "LT"]),
        0,
        "equal is not less"
    );
    assert_eq!(int(&mut con, &["PEXPIRE", "k", "150000", "XX"]), 1);
    assert_eq!(int(&mut con, &["PEXPIRE", "k", "160000", "xx", "gt"]), 1);
    assert_eq!(int(&mut con, &["PERSIST", "k"]), 1);
    assert_eq!(int(&mut con, &["EXPIRE", "k", "10", "NX"]), 1);
    assert_eq!(int(&mut con, &["TTL", "k"]), 10);
}

#[test]
fn expire_argument_errors() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["SET", "k", "v"]);
    let nx_msg = "ERR NX and XX, GT or LT options at the same time are not compatible";
    for opts in [["NX", "XX"], ["nx", "GT"], ["LT", "nx"]] {
        let mut args = vec!["EXPIRE", "k", "10"];
        args.extend_from_slice(&opts);
        assert_eq!(err(&mut con, &args), nx_msg);
    }
    assert_eq!(
        err(&mut con, &["EXPIRE", "k", "10", "GT", "LT"]),
        "ERR GT and LT options at the same time are not compatible"
    );
    assert_eq!(
        err(&mut con, &["EXPIRE", "k", "10", "foo"]),
        "ERR Unsupported option foo"
    );
    // Options are checked before the time.
    assert_eq!(
        err(&mut con, &["EXPIRE", "k", "x", "foo"]),
        "ERR Unsupported option foo"
    );
    assert_eq!(
        err(&mut con, &["EXPIRE", "k", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut con, &["PEXPIRE", "k", "1.5"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut con, &["EXPIRE", "k", "9223372036854775807"]),
        "ERR invalid expire time in 'expire' command"
    );
    assert_eq!(
        err(&mut con, &["EXPIRE", "k", "9223372036854775"]),
        "ERR invalid expire time in 'expire' command"
    );
    assert_eq!(
        err(&mut con, &["PEXPIRE", "k", "9223372036854775807"]),
        "ERR invalid expire time in 'pexpire' command"
    );
    assert_eq!(
        err(&mut con, &["EXPIREAT", "k", "-9223372036854775808"]),
        "ERR invalid expire time in 'expireat' command"
    );
    assert_eq!(
        err(&mut con, &["EXPIREAT", "nokey", "9223372036854775807"]),
        "ERR invalid expire time in 'expireat' command"
    );
    assert_eq!(
        err(&mut con, &["EXPIRE", "k"]),
        "ERR wrong number of arguments for 'expire' command"
    );
    assert_eq!(
        err(&mut con, &["TTL", "k", "x"]),
        "ERR wrong number of arguments for 'ttl' command"
    );
    // Nothing above changed the key.
    assert_eq!(int(&mut con, &["TTL", "k"]), -1);
}

/// Once its time passed a key is gone for every command, whether or not the
/// active cycle reclaimed it yet.
#[test]
fn expired_keys_disappear_lazily() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["SET", "k", "v"]);
    ok(&mut con, &["SET", "ttl", "v"]);
    assert_eq!(int(&mut con, &["PEXPIRE", "k", "100"]), 1);
    assert_eq!(int(&mut con, &["PEXPIRE", "ttl", "100"]), 1);
    assert_eq!(
        ok(&mut con, &["GET", "k"]),
        Value::BulkString(b"v".to_vec())
    );
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(ok(&mut con, &["GET", "k"]), Value::Nil);
    assert_eq!(int(&mut con, &["EXISTS", "k"]), 0);
    assert_eq!(int(&mut con, &["TTL", "ttl"]), -2);
    assert_eq!(int(&mut con, &["PERSIST", "ttl"]), 0);
    assert_eq!(int(&mut con, &["EXPIRE", "ttl", "100"]), 0);
}

/// Inside EXEC the time for expiry decisions stays at EXEC's start (Redis
/// 7.0's `fixed_time_expire`): a key that expires while the transaction
/// sleeps is still found, PTTL counts from the clock (0), and a client
/// blocked on the key is not served it afterwards: the key is deleted when
/// the transaction ends and the client keeps waiting.
#[test]
fn transactions_see_a_fixed_time_and_blocked_clients_the_real_one() {
    let srv = common::Server::start(&["--enable-debug-command", "yes"]);
    let mut con = srv.conn();
    ok(&mut con, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    // A raw connection: BRPOP is sent and its reply never read.
    let mut blocked = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    blocked
        .write_all(b"*3\r\n$5\r\nBRPOP\r\n$4\r\nlist\r\n$1\r\n0\r\n")
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while common::info_field(&mut con, "blocked_clients") != "1" {
        assert!(Instant::now() < deadline, "BRPOP did not block");
        std::thread::sleep(Duration::from_millis(10));
    }
    let reply: Value = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("k")
        .arg("v")
        .arg("PX")
        .arg(100)
        .cmd("RPUSH")
        .arg("list")
        .arg("x")
        .cmd("PEXPIRE")
        .arg("list")
        .arg(100)
        .cmd("DEBUG")
        .arg("SLEEP")
        .arg("0.2")
        .cmd("GET")
        .arg("k")
        .cmd("PTTL")
        .arg("k")
        .query(&mut con)
        .unwrap();
    let Value::Array(items) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(items[4], Value::BulkString(b"v".to_vec()));
    assert_eq!(items[5], Value::Int(0));
    assert_eq!(ok(&mut con, &["GET", "k"]), Value::Nil);
    assert_eq!(int(&mut con, &["EXISTS", "list"]), 0);
    assert_eq!(common::info_field(&mut con, "blocked_clients"), "1");
    drop(blocked);
}

#[test]
fn expired_keys_disappear_actively() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    let mut pipe = redis::pipe();
    for i in 0..500 {
        let key = format!("volatile:{i}");
        pipe.cmd("SET").arg(&key).arg("v").ignore();
        pipe.cmd("PEXPIRE").arg(&key).arg(50).ignore();
    }
    pipe.cmd("SET").arg("keep").arg("v").ignore();
    pipe.query::<()>(&mut con).unwrap();
    assert!(int(&mut con, &["DBSIZE"]) > 1);
    // DBSIZE does not look keys up, so only the active cycle can shrink it.
    std::thread::sleep(Duration::from_millis(1500));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut size = int(&mut con, &["DBSIZE"]);
    while size > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        size = int(&mut con, &["DBSIZE"]);
    }
    assert_eq!(size, 1, "expired keys were not reclaimed actively");
    assert_eq!(int(&mut con, &["EXISTS", "keep"]), 1);
}
