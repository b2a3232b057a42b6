//! String commands (GET/SET family, MGET/MSET, APPEND, ranges, counters,
//! INCRBYFLOAT, LCS) against the real binary: replies, options and the
//! exact error strings of Redis 7.0.

mod common;

use common::{err, ok, q, Server};
use redis::{Connection, Value};

const SYNTAX: &str = "ERR syntax error";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn int(n: i64) -> Value {
    Value::Int(n)
}

fn arr(items: Vec<Value>) -> Value {
    Value::Array(items)
}

fn pttl(con: &mut Connection, key: &str) -> i64 {
    match ok(con, &["PTTL", key]) {
        Value::Int(n) => n,
        v => panic!("PTTL replied {v:?}"),
    }
}

/// Stores a value of another type under `key`, with whichever non-string
/// type command the server has; false if it has none yet (WRONGTYPE checks
/// are then skipped).
fn make_non_string(con: &mut Connection, key: &str) -> bool {
    let attempts: [&[&str]; 4] = [
        &["RPUSH", key, "x"],
        &["SADD", key, "x"],
        &["HSET", key, "f", "x"],
        &["ZADD", key, "1", "x"],
    ];
    let made = attempts.iter().any(|a| q(con, a).is_ok());
    if !made {
        eprintln!("no non-string type available: WRONGTYPE checks skipped");
    }
    made
}

#[test]
fn get_and_set_basics() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok(&mut c, &["GET", "k"]), Value::Nil);
    assert_eq!(ok(&mut c, &["SET", "k", "v"]), Value::Okay);
    assert_eq!(ok(&mut c, &["GET", "k"]), bulk("v"));
    assert_eq!(ok(&mut c, &["SET", "k", "12345"]), Value::Okay);
    assert_eq!(ok(&mut c, &["GET", "k"]), bulk("12345"));
    assert_eq!(ok(&mut c, &["SET", "k", ""]), Value::Okay);
    assert_eq!(ok(&mut c, &["GET", "k"]), bulk(""));
    let binary = redis::cmd("SET")
        .arg("bin")
        .arg(&b"a\r\n\0b"[..])
        .query::<Value>(&mut c)
        .unwrap();
    assert_eq!(binary, Value::Okay);
    assert_eq!(
        ok(&mut c, &["GET", "bin"]),
        Value::BulkString(b"a\r\n\0b".to_vec())
    );
    assert_eq!(
        err(&mut c, &["GET"]),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        err(&mut c, &["GET", "a", "b"]),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        err(&mut c, &["SET", "k"]),
        "ERR wrong number of arguments for 'set' command"
    );
}

#[test]
fn set_conditions_and_get_option() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok(&mut c, &["SET", "k", "1", "XX"]), Value::Nil);
    assert_eq!(ok(&mut c, &["GET", "k"]), Value::Nil);
    assert_eq!(ok(&mut c, &["SET", "k", "1", "nx"]), Value::Okay);
    assert_eq!(ok(&mut c, &["SET", "k", "2", "NX"]), Value::Nil);
    assert_eq!(ok(&mut c, &["GET", "k"]), bulk("1"));
    assert_eq!(ok(&mut c, &["SET", "k", "3", "xx"]), Value::Okay);
    assert_eq!(ok(&mut c, &["SET", "k", "4", "GET"]), bulk("3"));
    assert_eq!(
        ok(&mut c, &["SET", "k", "5", "get", "GET", "xx", "XX"]),
        bulk("4")
    );
    // NX with GET is allowed in 7.0: the old value (or null) is replied.
    assert_eq!(ok(&mut c, &["SET", "k", "6", "NX", "GET"]), bulk("5"));
    assert_eq!(ok(&mut c, &["GET", "k"]), bulk("5"));
    assert_eq!(ok(&mut c, &["SET", "n", "1", "NX", "GET"]), Value::Nil);
    assert_eq!(ok(&mut c, &["GET", "n"]), bulk("1"));
    assert_eq!(ok(&mut c, &["SET", "x", "1", "XX", "GET"]), Value::Nil);
    assert_eq!(ok(&mut c, &["EXISTS", "x"]), int(0));
    assert_eq!(ok(&mut c, &["SET", "new", "v", "GET"]), Value::Nil);
    assert_eq!(ok(&mut c, &["GET", "new"]), bulk("v"));
    if make_non_string(&mut c, "other") {
        assert_eq!(err(&mut c, &["SET", "other", "v", "GET"]), WRONGTYPE);
        assert_eq!(err(&mut c, &["GET", "other"]), WRONGTYPE);
        // A plain SET overwrites any type.
        assert_eq!(ok(&mut c, &["SET", "other", "v"]), Value::Okay);
        assert_eq!(ok(&mut c, &["GET", "other"]), bulk("v"));
    }
}

#[test]
fn set_expire_options() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok(&mut c, &["SET", "k", "v", "EX", "100"]), Value::Okay);
    let t = pttl(&mut c, "k");
    assert!((90_000..=100_000).contains(&t), "{t}");
    assert_eq!(ok(&mut c, &["SET", "k", "v", "px", "50000"]), Value::Okay);
    let t = pttl(&mut c, "k");
    assert!((40_000..=50_000).contains(&t), "{t}");
    // The last of repeated expire options wins.
    assert_eq!(
        ok(&mut c, &["SET", "k", "v", "EX", "10", "ex", "1000"]),
        Value::Okay
    );
    assert!(pttl(&mut c, "k") > 900_000);
    // KEEPTTL keeps it, a plain SET drops it.
    assert_eq!(ok(&mut c, &["SET", "k", "w", "KEEPTTL"]), Value::Okay);
    assert!(pttl(&mut c, "k") > 900_000);
    assert_eq!(ok(&mut c, &["SET", "k", "w"]), Value::Okay);
    assert_eq!(pttl(&mut c, "k"), -1);
    // KEEPTTL on a new key: no TTL.
    assert_eq!(ok(&mut c, &["SET", "fresh", "w", "KEEPTTL"]), Value::Okay);
    assert_eq!(pttl(&mut c, "fresh"), -1);
    // Absolute times: far future, and the past (the key is gone at once).
    assert_eq!(
        ok(&mut c, &["SET", "k", "v", "EXAT", "9223372036854775"]),
        Value::Okay
    );
    assert!(pttl(&mut c, "k") > 1_000_000_000_000);
    assert_eq!(
        ok(&mut c, &["SET", "k", "v", "PXAT", "9223372036854775807"]),
        Value::Okay
    );
    assert!(pttl(&mut c, "k") > 1_000_000_000_000);
    assert_eq!(ok(&mut c, &["SET", "k", "v", "exat", "1"]), Value::Okay);
    assert_eq!(ok(&mut c, &["GET", "k"]), Value::Nil);
    assert_eq!(
        ok(&mut c, &["SET", "k", "v", "PXAT", "1", "GET"]),
        Value::Nil
    );
    assert_eq!(ok(&mut c, &["EXISTS", "k"]), int(0));
    // NX/XX combine with expire options.
    assert_eq!(
        ok(&mut c, &["SET", "k", "v", "NX", "EX", "100"]),
        Value::Okay
    );
    assert!(pttl(&mut c, "k") > 90_000);
    assert_eq!(ok(&mut c, &["SET", "k", "v", "NX", "EX", "5"]), Value::Nil);
    assert!(
        pttl(&mut c, "k") > 90_000,
        "a refused SET leaves the TTL alone"
    );
}

#[test]
fn set_errors() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    for bad in [
        &["SET", "k", "v", "NX", "XX"][..],
        &["SET", "k", "v", "XX", "NX"],
        &["SET", "k", "v", "EX", "10", "PX", "100"],
        &["SET", "k", "v", "PX", "10", "EXAT", "100"],
        &["SET", "k", "v", "EXAT", "10", "PXAT", "100"],
        &["SET", "k", "v", "EX", "10", "KEEPTTL"],
        &["SET", "k", "v", "KEEPTTL", "PXAT", "10"],
        &["SET", "k", "v", "EX"],
        &["SET", "k", "v", "PERSIST"],
        &["SET", "k", "v", "foo"],
        &["SET", "k", "v", "EX", "abc", "NX", "XX"],
    ] {
        assert_eq!(err(&mut c, bad), SYNTAX, "{bad:?}");
    }
    for bad in [
        &["SET", "k", "v", "EX", "0"][..],
        &["SET", "k", "v", "EX", "-1"],
        &["SET", "k", "v", "PX", "0"],
        &["SET", "k", "v", "EXAT", "0"],
        &["SET", "k", "v", "PXAT", "-5"],
        &["SET", "k", "v", "EX", "9223372036854775"],
        &["SET", "k", "v", "EX", "9223372036854775807"],
        &["SET", "k", "v", "PX", "9223372036854775807"],
        &["SET", "k", "v", "EXAT", "9223372036854776"],
    ] {
        assert_eq!(
            err(&mut c, bad),
            "ERR invalid expire time in 'set' command",
            "{bad:?}"
        );
    }
    for bad in [
        &["SET", "k", "v", "EX", "abc"][..],
        &["SET", "k", "v", "PX", "1.5"],
        &["SET", "k", "v", "EX", "99999999999999999999"],
    ] {
        assert_eq!(err(&mut c, bad), NOT_INT, "{bad:?}");
    }
    assert_eq!(
        ok(&mut c, &["EXISTS", "k"]),
        int(0),
        "failed SETs store nothing"
    );
    if make_non_string(&mut c, "other") {
        // The expire time is checked before the type.
        assert_eq!(
            err(&mut c, &["SET", "other", "v", "GET", "EX", "0"]),
            "ERR invalid expire time in 'set' command"
        );
        assert_eq!(err(&mut c, &["SET", "other", "v", "NX", "GET"]), WRONGTYPE);
    }
}

#[test]
fn setnx_setex_psetex_getset_getdel() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok(&mut c, &["SETNX", "k", "1"]), int(1));
    assert_eq!(ok(&mut c, &["SETNX", "k", "2"]), int(0));
    assert_eq!(ok(&mut c, &["GET", "k"]), bulk("1"));

    assert_eq!(ok(&mut c, &["SETEX", "k", "100", "v"]), Value::Okay);
    assert!((90_000..=100_000).contains(&pttl(&mut c, "k")));
    assert_eq!(ok(&mut c, &["GET", "k"]), bulk("v"));
    assert_eq!(ok(&mut c, &["PSETEX", "k", "100000", "w"]), Value::Okay);
    assert!((90_000..=100_000).contains(&pttl(&mut c, "k")));
    assert_eq!(
        err(&mut c, &["SETEX", "k", "0", "v"]),
        "ERR invalid expire time in 'setex' command"
    );
    assert_eq!(
        err(&mut c, &["SETEX", "k", "9223372036854775", "v"]),
        "ERR invalid expire time in 'setex' command"
    );
    assert_eq!(
        err(&mut c, &["PSETEX", "k", "-1", "v"]),
        "ERR invalid expire time in 'psetex' command"
    );
    assert_eq!(err(&mut c, &["SETEX", "k", "x", "v"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["SETEX", "k", "1"]),
        "ERR wrong number of arguments for 'setex' command"
    );

    // GETSET replies the old value and drops the TTL.
    assert_eq!(ok(&mut c, &["GETSET", "k", "x"]), bulk("w"));
    assert_eq!(pttl(&mut c, "k"), -1);
    assert_eq!(ok(&mut c, &["GETSET", "missing", "y"]), Value::Nil);
    assert_eq!(ok(&mut c, &["GET", "missing"]), bulk("y"));

    assert_eq!(ok(&mut c, &["GETDEL", "k"]), bulk("x"));
    assert_eq!(ok(&mut c, &["GETDEL", "k"]), Value::Nil);
    assert_eq!(ok(&mut c, &["EXISTS", "k"]), int(0));
    if make_non_string(&mut c, "other") {
        assert_eq!(err(&mut c, &["GETSET", "other", "v"]), WRONGTYPE);
        assert_eq!(err(&mut c, &["GETDEL", "other"]), WRONGTYPE);
        assert_eq!(ok(&mut c, &["SETNX", "other", "v"]), int(0));
        assert_eq!(ok(&mut c, &["SETEX", "other", "10", "v"]), Value::Okay);
        assert_eq!(ok(&mut c, &["GET", "other"]), bulk("v"));
    }
}

#[test]
fn getex_options_and_errors() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok(&mut c, &["GETEX", "k"]), Value::Nil);
    assert_eq!(
        ok(&mut c, &["GETEX", "k", "EX", "abc"]),
        Value::Nil,
        "a missing key is checked first"
    );
    ok(&mut c, &["SET", "k", "v"]);
    assert_eq!(ok(&mut c, &["GETEX", "k"]), bulk("v"));
    assert_eq!(pttl(&mut c, "k"), -1);
    assert_eq!(ok(&mut c, &["GETEX", "k", "EX", "100"]), bulk("v"));
    assert!((90_000..=100_000).contains(&pttl(&mut c, "k")));
    assert_eq!(ok(&mut c, &["GETEX", "k", "px", "50000"]), bulk("v"));
    assert!((40_000..=50_000).contains(&pttl(&mut c, "k")));
    assert_eq!(
        ok(&mut c, &["GETEX", "k", "EX", "5", "EX", "1000"]),
        bulk("v")
    );
    assert!(pttl(&mut c, "k") > 900_000);
    assert_eq!(ok(&mut c, &["GETEX", "k", "PERSIST"]), bulk("v"));
    assert_eq!(pttl(&mut c, "k"), -1);
    assert_eq!(
        ok(&mut c, &["GETEX", "k", "PXAT", "9223372036854775807"]),
        bulk("v")
    );
    assert!(pttl(&mut c, "k") > 1_000_000_000_000);
    assert_eq!(
        ok(&mut c, &["GETEX", "k", "EXAT", "9223372036854775"]),
        bulk("v")
    );
    assert!(pttl(&mut c, "k") > 1_000_000_000_000);
    // An absolute time in the past deletes the key after replying.
    assert_eq!(ok(&mut c, &["GETEX", "k", "EXAT", "1"]), bulk("v"));
    assert_eq!(ok(&mut c, &["EXISTS", "k"]), int(0));

    ok(&mut c, &["SET", "k", "v"]);
    for bad in [
        &["GETEX", "k", "EX", "10", "PERSIST"][..],
        &["GETEX", "k", "PERSIST", "EX", "10"],
        &["GETEX", "k", "EX", "10", "PX", "10"],
        &["GETEX", "k", "NX"],
        &["GETEX", "k", "XX"],
        &["GETEX", "k", "GET"],
        &["GETEX", "k", "KEEPTTL"],
        &["GETEX", "k", "EX"],
        &["GETEX", "k", "foo"],
        &["GETEX", "missing", "foo"],
    ] {
        assert_eq!(err(&mut c, bad), SYNTAX, "{bad:?}");
    }
    assert_eq!(err(&mut c, &["GETEX", "k", "EX", "abc"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["GETEX", "k", "EX", "0"]),
        "ERR invalid expire time in 'getex' command"
    );
    assert_eq!(
        err(&mut c, &["GETEX", "k", "PX", "-1"]),
        "ERR invalid expire time in 'getex' command"
    );
    assert_eq!(
        err(&mut c, &["GETEX", "k", "EX", "9223372036854775"]),
        "ERR invalid expire time in 'getex' command"
    );
    assert_eq!(pttl(&mut c, "k"), -1, "failed GETEX leave the TTL alone");
    if make_non_string(&mut c, "other") {
        assert_eq!(err(&mut c, &["GETEX", "other", "EX", "10"]), WRONGTYPE);
    }
}

#[test]
fn mget_mset_msetnx() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok(&mut c, &["MSET", "a", "1", "b", "2"]), Value::Okay);
    assert_eq!(
        ok(&mut c, &["MGET", "a", "nokey", "b"]),
        arr(vec![bulk("1"), Value::Nil, bulk("2")])
    );
    // Later pairs win for repeated keys; TTLs are dropped.
    ok(&mut c, &["SET", "t", "x", "EX", "100"]);
    assert_eq!(
        ok(&mut c, &["MSET", "a", "3", "a", "4", "t", "y"]),
        Value::Okay
    );
    assert_eq!(
        ok(&mut c, &["MGET", "a", "t"]),
        arr(vec![bulk("4"), bulk("y")])
    );
    assert_eq!(pttl(&mut c, "t"), -1);
    assert_eq!(
        err(&mut c, &["MSET", "a", "1", "b"]),
        "ERR wrong number of arguments for 'mset' command"
    );
    assert_eq!(
        err(&mut c, &["MSET", "a"]),
        "ERR wrong number of arguments for 'mset' command"
    );
    assert_eq!(
        err(&mut c, &["MSETNX", "a", "1", "b"]),
        "ERR wrong number of arguments for 'msetnx' command"
    );
    assert_eq!(
        err(&mut c, &["MGET"]),
        "ERR wrong number of arguments for 'mget' command"
    );

    assert_eq!(ok(&mut c, &["MSETNX", "x", "1", "a", "2"]), int(0));
    assert_eq!(
        ok(&mut c, &["MGET", "x", "a"]),
        arr(vec![Value::Nil, bulk("4")]),
        "all or nothing"
    );
    assert_eq!(ok(&mut c, &["MSETNX", "x", "1", "y", "2"]), int(1));
    assert_eq!(
        ok(&mut c, &["MGET", "x", "y"]),
        arr(vec![bulk("1"), bulk("2")])
    );
    if make_non_string(&mut c, "other") {
        assert_eq!(
            ok(&mut c, &["MGET", "other", "x"]),
            arr(vec![Value::Nil, bulk("1")])
        );
        assert_eq!(ok(&mut c, &["MSETNX", "other", "v", "z", "1"]), int(0));
        assert_eq!(ok(&mut c, &["MSET", "other", "v"]), Value::Okay);
        assert_eq!(ok(&mut c, &["GET", "other"]), bulk("v"));
    }
}

#[test]
fn append_and_strlen() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok(&mut c, &["STRLEN", "k"]), int(0));
    assert_eq!(ok(&mut c, &["APPEND", "k", "12"]), int(2));
    assert_eq!(ok(&mut c, &["APPEND", "k", "34"]), int(4));
    assert_eq!(ok(&mut c, &["GET", "k"]), bulk("1234"));
    assert_eq!(
        ok(&mut c, &["INCR", "k"]),
        int(1235),
        "still an integer after APPEND"
    );
    assert_eq!(ok(&mut c, &["APPEND", "k", "x"]), int(5));
    assert_eq!(ok(&mut c, &["STRLEN", "k"]), int(5));
    assert_eq!(ok(&mut c, &["SET", "n", "-120"]), Value::Okay);
    assert_eq!(ok(&mut c, &["STRLEN", "n"]), int(4));
    // Appending nothing to a missing key creates an empty string.
    assert_eq!(ok(&mut c, &["APPEND", "e", ""]), int(0));
    assert_eq!(ok(&mut c, &["EXISTS", "e"]), int(1));
    // APPEND keeps the TTL.
    ok(&mut c, &["SET", "t", "a", "EX", "100"]);
    assert_eq!(ok(&mut c, &["APPEND", "t", "b"]), int(2));
    assert!(pttl(&mut c, "t") > 90_000);
    if make_non_string(&mut c, "other") {
        assert_eq!(err(&mut c, &["APPEND", "other", "x"]), WRONGTYPE);
        assert_eq!(err(&mut c, &["STRLEN", "other"]), WRONGTYPE);
    }
}

#[test]
fn append_beyond_proto_max_bulk_len_is_refused() {
    let srv = Server::start(&["--proto-max-bulk-len", "1mb"]);
    let mut c = srv.conn();
    let half = "x".repeat(600 * 1024);
    assert_eq!(ok(&mut c, &["APPEND", "k", &half]), int(600 * 1024));
    assert_eq!(
        err(&mut c, &["APPEND", "k", &half]),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
    assert_eq!(ok(&mut c, &["STRLEN", "k"]), int(600 * 1024));
}

#[test]
fn getrange_and_substr() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &["SET", "s", "Hello World"]);
    for (start, end, want) in [
        ("0", "4", "Hello"),
        ("-5", "-1", "World"),
        ("0", "-1", "Hello World"),
        ("0", "100", "Hello World"),
        ("0", "-100", "H"),
        ("-100", "-50", "H"),
        ("-1", "-5", ""),
        ("5", "2", ""),
        ("11", "20", ""),
        ("-9223372036854775808", "9223372036854775807", "Hello World"),
    ] {
        assert_eq!(
            ok(&mut c, &["GETRANGE", "s", start, end]),
            bulk(want),
            "{start} {end}"
        );
    }
    assert_eq!(ok(&mut c, &["SUBSTR", "s", "6", "-1"]), bulk("World"));
    ok(&mut c, &["SET", "i", "12345"]);
    assert_eq!(ok(&mut c, &["GETRANGE", "i", "1", "2"]), bulk("23"));
    ok(&mut c, &["SET", "e", ""]);
    assert_eq!(ok(&mut c, &["GETRANGE", "e", "0", "-1"]), bulk(""));
    assert_eq!(ok(&mut c, &["GETRANGE", "nokey", "0", "1"]), bulk(""));
    assert_eq!(err(&mut c, &["GETRANGE", "s", "x", "1"]), NOT_INT);
    assert_eq!(err(&mut c, &["GETRANGE", "nokey", "0", "1.5"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["GETRANGE", "s", "0"]),
        "ERR wrong number of arguments for 'getrange' command"
    );
    if make_non_string(&mut c, "other") {
        assert_eq!(err(&mut c, &["GETRANGE", "other", "0", "1"]), WRONGTYPE);
        assert_eq!(
            err(&mut c, &["SUBSTR", "other", "x", "1"]),
            NOT_INT,
            "indexes are parsed first"
        );
    }
}

#[test]
fn setrange() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok(&mut c, &["SETRANGE", "k", "3", "ab"]), int(5));
    assert_eq!(
        ok(&mut c, &["GET", "k"]),
        Value::BulkString(b"\0\0\0ab".to_vec())
    );
    assert_eq!(ok(&mut c, &["SETRANGE", "k", "0", "xyz"]), int(5));
    assert_eq!(ok(&mut c, &["GET", "k"]), bulk("xyzab"));
    assert_eq!(ok(&mut c, &["SETRANGE", "k", "4", "123"]), int(7));
    assert_eq!(ok(&mut c, &["GET", "k"]), bulk("xyza123"));
    // An empty value changes nothing and replies the current length.
    assert_eq!(ok(&mut c, &["SETRANGE", "k", "100", ""]), int(7));
    assert_eq!(ok(&mut c, &["SETRANGE", "nokey", "5", ""]), int(0));
    assert_eq!(ok(&mut c, &["EXISTS", "nokey"]), int(0));
    // Works on integers and keeps the TTL.
    ok(&mut c, &["SET", "n", "1234", "EX", "100"]);
    assert_eq!(ok(&mut c, &["SETRANGE", "n", "1", "9"]), int(4));
    assert_eq!(ok(&mut c, &["GET", "n"]), bulk("1934"));
    assert!(pttl(&mut c, "n") > 90_000);

    assert_eq!(
        err(&mut c, &["SETRANGE", "k", "-1", "x"]),
        "ERR offset is out of range"
    );
    assert_eq!(err(&mut c, &["SETRANGE", "k", "x", "x"]), NOT_INT);
    let too_long = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
    assert_eq!(err(&mut c, &["SETRANGE", "k", "536870912", "x"]), too_long);
    assert_eq!(err(&mut c, &["SETRANGE", "k", "536870911", "xy"]), too_long);
    assert_eq!(
        err(&mut c, &["SETRANGE", "nokey", "536870912", "x"]),
        too_long
    );
    assert_eq!(
        err(&mut c, &["SETRANGE", "k", "9223372036854775807", "x"]),
        too_long
    );
    assert_eq!(ok(&mut c, &["SETRANGE", "k", "536870912", ""]), int(7));
    if make_non_string(&mut c, "other") {
        assert_eq!(err(&mut c, &["SETRANGE", "other", "1", "x"]), WRONGTYPE);
        assert_eq!(
            err(&mut c, &["SETRANGE", "other", "-1", "x"]),
            "ERR offset is out of range"
        );
        assert_eq!(err(&mut c, &["SETRANGE", "other", "x", "x"]), NOT_INT);
    }
}

#[test]
fn incr_decr_family() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok(&mut c, &["INCR", "n"]), int(1));
    assert_eq!(ok(&mut c, &["INCRBY", "n", "10"]), int(11));
    assert_eq!(ok(&mut c, &["DECR", "n"]), int(10));
    assert_eq!(ok(&mut c, &["DECRBY", "n", "-5"]), int(15));
    assert_eq!(ok(&mut c, &["DECRBY", "m", "3"]), int(-3));
    assert_eq!(ok(&mut c, &["GET", "n"]), bulk("15"));
    // The TTL survives.
    ok(&mut c, &["SET", "t", "5", "EX", "100"]);
    assert_eq!(ok(&mut c, &["INCR", "t"]), int(6));
    assert!(pttl(&mut c, "t") > 90_000);

    ok(&mut c, &["SET", "max", "9223372036854775807"]);
    let overflow = "ERR increment or decrement would overflow";
    assert_eq!(err(&mut c, &["INCR", "max"]), overflow);
    assert_eq!(err(&mut c, &["INCRBY", "max", "1"]), overflow);
    assert_eq!(
        ok(&mut c, &["DECRBY", "max", "9223372036854775807"]),
        int(0)
    );
    ok(&mut c, &["SET", "min", "-9223372036854775808"]);
    assert_eq!(err(&mut c, &["DECR", "min"]), overflow);
    assert_eq!(err(&mut c, &["INCRBY", "min", "-1"]), overflow);
    assert_eq!(ok(&mut c, &["GET", "min"]), bulk("-9223372036854775808"));
    assert_eq!(
        err(&mut c, &["DECRBY", "n", "-9223372036854775808"]),
        "ERR decrement would overflow"
    );
    assert_eq!(
        err(&mut c, &["DECRBY", "nokey", "-9223372036854775808"]),
        "ERR decrement would overflow"
    );
    assert_eq!(
        ok(&mut c, &["DECRBY", "nokey", "9223372036854775807"]),
        int(-9223372036854775807)
    );

    for value in [
        "abc",
        " 1",
        "1 ",
        "01",
        "+1",
        "1.0",
        "",
        "9223372036854775808",
    ] {
        ok(&mut c, &["SET", "s", value]);
        assert_eq!(err(&mut c, &["INCR", "s"]), NOT_INT, "{value:?}");
    }
    assert_eq!(err(&mut c, &["INCRBY", "n", "x"]), NOT_INT);
    assert_eq!(err(&mut c, &["INCRBY", "n", "1.5"]), NOT_INT);
    assert_eq!(err(&mut c, &["DECRBY", "n", ""]), NOT_INT);
    assert_eq!(
        ok(&mut c, &["GET", "n"]),
        bulk("15"),
        "failed commands change nothing"
    );
    if make_non_string(&mut c, "other") {
        for cmd in [
            &["INCR", "other"][..],
            &["DECR", "other"],
            &["INCRBY", "other", "1"],
            &["DECRBY", "other", "1"],
        ] {
            assert_eq!(err(&mut c, cmd), WRONGTYPE, "{cmd:?}");
        }
        assert_eq!(
            err(&mut c, &["INCRBY", "other", "x"]),
            NOT_INT,
            "the increment is parsed first"
        );
    }
}

#[test]
fn incrbyfloat() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok(&mut c, &["INCRBYFLOAT", "f", "10.5"]), bulk("10.5"));
    assert_eq!(ok(&mut c, &["INCRBYFLOAT", "f", "0.1"]), bulk("10.6"));
    assert_eq!(ok(&mut c, &["INCRBYFLOAT", "f", "-5.6"]), bulk("5"));
    assert_eq!(
        ok(&mut c, &["GET", "f"]),
        bulk("5"),
        "the printed form is stored"
    );
    assert_eq!(ok(&mut c, &["INCRBYFLOAT", "f", "5.0e3"]), bulk("5005"));
    assert_eq!(ok(&mut c, &["INCRBY", "f", "1"]), int(5006));
    ok(&mut c, &["SET", "g", "3.0"]);
    assert_eq!(ok(&mut c, &["INCRBYFLOAT", "g", "0"]), bulk("3"));
    assert_eq!(ok(&mut c, &["GET", "g"]), bulk("3"));
    ok(&mut c, &["SET", "g", "1"]);
    assert_eq!(ok(&mut c, &["INCRBYFLOAT", "g", "-1.5"]), bulk("-0.5"));
    assert_eq!(ok(&mut c, &["INCRBYFLOAT", "g", "0.5"]), bulk("0"));
    assert_eq!(ok(&mut c, &["INCRBYFLOAT", "h", "0x10"]), bulk("16"));
    assert_eq!(ok(&mut c, &["INCRBYFLOAT", "h", "1e2"]), bulk("116"));
    // The TTL survives.
    ok(&mut c, &["SET", "t", "1.5", "EX", "100"]);
    assert_eq!(ok(&mut c, &["INCRBYFLOAT", "t", "1"]), bulk("2.5"));
    assert!(pttl(&mut c, "t") > 90_000);

    let nan_inf = "ERR increment would produce NaN or Infinity";
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "f", "inf"]), nan_inf);
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "f", "-inf"]), nan_inf);
    // Long double arithmetic, as Redis: 1e400 is a number, 1e5000 is not.
    ok(&mut c, &["SET", "big", "0"]);
    let redis::Value::BulkString(sum) = ok(&mut c, &["INCRBYFLOAT", "big", "1e400"]) else {
        panic!("not a bulk string");
    };
    assert_eq!(sum.len(), 401);
    assert!(sum.starts_with(b"100000000000000000002818806839"));
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "big", "1e5000"]), NOT_FLOAT);
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "big", "infinity"]), nan_inf);
    for bad in ["abc", " 1", "1 ", "nan", "", "1.5.5", "1,5"] {
        assert_eq!(
            err(&mut c, &["INCRBYFLOAT", "f", bad]),
            NOT_FLOAT,
            "{bad:?}"
        );
    }
    ok(&mut c, &["SET", "s", "abc"]);
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "s", "1"]), NOT_FLOAT);
    assert_eq!(
        ok(&mut c, &["GET", "f"]),
        bulk("5006"),
        "failed commands change nothing"
    );
    if make_non_string(&mut c, "other") {
        assert_eq!(
            err(&mut c, &["INCRBYFLOAT", "other", "abc"]),
            WRONGTYPE,
            "the type is checked first"
        );
    }
}

/// The ranges LCS IDX replies: ((a_start, a_end), (b_start, b_end), len?).
fn lcs_match(a: (i64, i64), b: (i64, i64), len: Option<i64>) -> Value {
    let mut items = vec![arr(vec![int(a.0), int(a.1)]), arr(vec![int(b.0), int(b.1)])];
    items.extend(len.map(int));
    arr(items)
}

#[test]
fn lcs_replies_in_resp2() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &["MSET", "a", "ohmytext", "b", "mynewtext"]);
    assert_eq!(ok(&mut c, &["LCS", "a", "b"]), bulk("mytext"));
    assert_eq!(ok(&mut c, &["LCS", "a", "b", "LEN"]), int(6));
    let all = vec![
        lcs_match((4, 7), (5, 8), None),
        lcs_match((2, 3), (0, 1), None),
    ];
    assert_eq!(
        ok(&mut c, &["LCS", "a", "b", "IDX"]),
        arr(vec![bulk("matches"), arr(all), bulk("len"), int(6)])
    );
    assert_eq!(
        ok(
            &mut c,
            &["LCS", "a", "b", "idx", "minmatchlen", "4", "withmatchlen"]
        ),
        arr(vec![
            bulk("matches"),
            arr(vec![lcs_match((4, 7), (5, 8), Some(4))]),
            bulk("len"),
            int(6)
        ])
    );
    assert_eq!(
        ok(
            &mut c,
            &["LCS", "a", "b", "IDX", "MINMATCHLEN", "-5", "WITHMATCHLEN"]
        ),
        arr(vec![
            bulk("matches"),
            arr(vec![
                lcs_match((4, 7), (5, 8), Some(4)),
                lcs_match((2, 3), (0, 1), Some(2))
            ]),
            bulk("len"),
            int(6)
        ])
    );
    // Missing keys are empty strings.
    assert_eq!(ok(&mut c, &["LCS", "a", "nokey"]), bulk(""));
    assert_eq!(ok(&mut c, &["LCS", "nokey", "nokey2", "LEN"]), int(0));
    assert_eq!(
        ok(&mut c, &["LCS", "nokey", "b", "IDX"]),
        arr(vec![bulk("matches"), arr(vec![]), bulk("len"), int(0)])
    );
    // Integers are compared by their text.
    ok(&mut c, &["MSET", "i", "12345", "j", "2348"]);
    assert_eq!(ok(&mut c, &["LCS", "i", "j"]), bulk("234"));

    assert_eq!(
        err(&mut c, &["LCS", "a", "b", "IDX", "LEN"]),
        "ERR If you want both the length and indexes, please just use IDX."
    );
    assert_eq!(err(&mut c, &["LCS", "a", "b", "foo"]), SYNTAX);
    assert_eq!(err(&mut c, &["LCS", "a", "b", "MINMATCHLEN"]), SYNTAX);
    assert_eq!(err(&mut c, &["LCS", "a", "b", "LEN", "IDX", "foo"]), SYNTAX);
    assert_eq!(err(&mut c, &["LCS", "a", "b", "MINMATCHLEN", "x"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["LCS", "a"]),
        "ERR wrong number of arguments for 'lcs' command"
    );
    if make_non_string(&mut c, "other") {
        let msg = "ERR The specified keys must contain string values";
        assert_eq!(err(&mut c, &["LCS", "a", "other", "foo"]), msg);
        assert_eq!(err(&mut c, &["LCS", "other", "nokey"]), msg);
    }
}

#[test]
fn lcs_replies_in_resp3() {
    let srv = Server::start(&[]);
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", srv.port)).unwrap();
    let mut c = client.get_connection().unwrap();
    ok(&mut c, &["MSET", "a", "ohmytext", "b", "mynewtext"]);
    assert_eq!(
        ok(
            &mut c,
            &["LCS", "a", "b", "IDX", "MINMATCHLEN", "2", "WITHMATCHLEN"]
        ),
        Value::Map(vec![
            (
                bulk("matches"),
                arr(vec![
                    lcs_match((4, 7), (5, 8), Some(4)),
                    lcs_match((2, 3), (0, 1), Some(2))
                ])
            ),
            (bulk("len"), int(6)),
        ])
    );
    assert_eq!(ok(&mut c, &["LCS", "a", "b"]), bulk("mytext"));
    assert_eq!(ok(&mut c, &["GET", "nokey"]), Value::Nil);
    assert_eq!(
        ok(&mut c, &["MGET", "a", "nokey"]),
        arr(vec![bulk("ohmytext"), Value::Nil])
    );
    assert_eq!(
        ok(&mut c, &["INCRBYFLOAT", "f", "1.5"]),
        bulk("1.5"),
        "a bulk string, not a double"
    );
}

#[test]
fn lcs_refuses_tables_over_proto_max_bulk_len() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    // 12001 * 12001 cells of 4 bytes is over the default 512 MB.
    let long = "a".repeat(12_000);
    ok(&mut c, &["MSET", "x", &long, "y", &long]);
    assert_eq!(
        err(&mut c, &["LCS", "x", "y", "LEN"]),
        "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
    );
    // A moderately large pair still works.
    let mid = "ab".repeat(1_000);
    ok(&mut c, &["MSET", "x", &mid, "y", &mid]);
    assert_eq!(ok(&mut c, &["LCS", "x", "y", "LEN"]), int(2_000));
}

#[test]
fn string_commands_in_transactions_and_watch() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut other = srv.conn();
    ok(&mut c, &["WATCH", "k"]);
    ok(&mut other, &["INCR", "k"]);
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["SET", "k", "mine"]);
    assert_eq!(
        ok(&mut c, &["EXEC"]),
        Value::Nil,
        "INCR from another client aborts EXEC"
    );
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["SET", "k", "5", "GET"]);
    ok(&mut c, &["INCRBY", "k", "2"]);
    ok(&mut c, &["APPEND", "k", "x"]);
    assert_eq!(ok(&mut c, &["EXEC"]), arr(vec![bulk("1"), int(7), int(2)]));
}
