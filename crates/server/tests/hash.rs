//! Hash commands against the real binary: replies, encodings and their
//! conversions, RESP3 shapes and the exact error strings of Redis 7.0.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{err, ok, raw_exchange, Server};
use redis::{Connection, Value};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn int(n: i64) -> Value {
    Value::Int(n)
}

fn bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| bulk(s)).collect())
}

/// The strings of an array reply.
fn strings(v: Value) -> Vec<String> {
    match v {
        Value::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Value::BulkString(b) => String::from_utf8(b).unwrap(),
                other => panic!("not a bulk string: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

fn encoding(con: &mut Connection, key: &str) -> String {
    match ok(con, &["OBJECT", "ENCODING", key]) {
        Value::BulkString(b) => String::from_utf8(b).unwrap(),
        v => panic!("OBJECT ENCODING replied {v:?}"),
    }
}

#[test]
fn set_get_and_friends() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        ok(&mut c, &["HSET", "h", "b", "1", "a", "2", "b", "3"]),
        int(2)
    );
    assert_eq!(ok(&mut c, &["HSET", "h", "a", "4", "c", ""]), int(1));
    assert_eq!(ok(&mut c, &["HGET", "h", "b"]), bulk("3"));
    assert_eq!(ok(&mut c, &["HGET", "h", "zz"]), Value::Nil);
    assert_eq!(ok(&mut c, &["HGET", "nokey", "a"]), Value::Nil);
    assert_eq!(ok(&mut c, &["HLEN", "h"]), int(3));
    assert_eq!(ok(&mut c, &["HLEN", "nokey"]), int(0));
    assert_eq!(ok(&mut c, &["HMSET", "h", "d", "5"]), Value::Okay);
    assert_eq!(ok(&mut c, &["HSETNX", "h", "d", "x"]), int(0));
    assert_eq!(ok(&mut c, &["HSETNX", "h", "e", "x"]), int(1));
    assert_eq!(ok(&mut c, &["HSETNX", "new", "f", "v"]), int(1));
    assert_eq!(
        ok(&mut c, &["HMGET", "h", "a", "zz", "c"]),
        Value::Array(vec![bulk("4"), Value::Nil, bulk("")])
    );
    assert_eq!(
        ok(&mut c, &["HMGET", "nokey", "a", "b"]),
        Value::Array(vec![Value::Nil, Value::Nil])
    );
    assert_eq!(ok(&mut c, &["HSTRLEN", "h", "d"]), int(1));
    assert_eq!(ok(&mut c, &["HSTRLEN", "h", "zz"]), int(0));
    assert_eq!(ok(&mut c, &["HSTRLEN", "nokey", "zz"]), int(0));
    assert_eq!(ok(&mut c, &["HEXISTS", "h", "a"]), int(1));
    assert_eq!(ok(&mut c, &["HEXISTS", "h", "zz"]), int(0));
    assert_eq!(ok(&mut c, &["HEXISTS", "nokey", "a"]), int(0));
    // Small hashes keep insertion order, like Redis's listpack.
    assert_eq!(
        ok(&mut c, &["HKEYS", "h"]),
        bulks(&["b", "a", "c", "d", "e"])
    );
    assert_eq!(
        ok(&mut c, &["HVALS", "h"]),
        bulks(&["3", "4", "", "5", "x"])
    );
    assert_eq!(
        ok(&mut c, &["HGETALL", "h"]),
        bulks(&["b", "3", "a", "4", "c", "", "d", "5", "e", "x"])
    );
    assert_eq!(ok(&mut c, &["HKEYS", "nokey"]), Value::Array(vec![]));
    assert_eq!(ok(&mut c, &["HGETALL", "nokey"]), Value::Array(vec![]));
    assert_eq!(
        ok(&mut c, &["TYPE", "h"]),
        Value::SimpleString("hash".into())
    );
}

#[test]
fn hdel_removes_fields_and_the_emptied_key() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(ok(&mut c, &["HDEL", "h", "a", "zz", "a"]), int(1));
    assert_eq!(ok(&mut c, &["HDEL", "nokey", "a"]), int(0));
    assert_eq!(ok(&mut c, &["HDEL", "h", "b", "c", "b", "zz"]), int(2));
    assert_eq!(ok(&mut c, &["EXISTS", "h"]), int(0));
}

#[test]
fn arity_and_wrong_type_errors() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        err(&mut c, &["HSET", "h", "a", "1", "b"]),
        "ERR wrong number of arguments for 'hset' command"
    );
    assert_eq!(
        err(&mut c, &["HMSET", "h", "a", "1", "b"]),
        "ERR wrong number of arguments for 'hmset' command"
    );
    assert_eq!(ok(&mut c, &["EXISTS", "h"]), int(0));
    ok(&mut c, &["SET", "s", "x"]);
    let cmds: &[&[&str]] = &[
        &["HSET", "s", "a", "1"],
        &["HMSET", "s", "a", "1"],
        &["HSETNX", "s", "a", "1"],
        &["HGET", "s", "a"],
        &["HMGET", "s", "a"],
        &["HDEL", "s", "a"],
        &["HLEN", "s"],
        &["HSTRLEN", "s", "a"],
        &["HEXISTS", "s", "a"],
        &["HKEYS", "s"],
        &["HVALS", "s"],
        &["HGETALL", "s"],
        &["HINCRBY", "s", "a", "1"],
        &["HINCRBYFLOAT", "s", "a", "1"],
        &["HRANDFIELD", "s"],
        &["HRANDFIELD", "s", "0"],
        &["HRANDFIELD", "s", "-5", "WITHVALUES"],
        &["HSCAN", "s", "0"],
        &["HSCAN", "s", "0", "COUNT", "0"],
    ];
    for cmd in cmds {
        assert_eq!(err(&mut c, cmd), WRONGTYPE, "{cmd:?}");
    }
    assert_eq!(ok(&mut c, &["GET", "s"]), bulk("x"));
}

#[test]
fn hincrby_and_hincrbyfloat() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok(&mut c, &["HINCRBY", "h", "n", "5"]), int(5));
    assert_eq!(ok(&mut c, &["HINCRBY", "h", "n", "-7"]), int(-2));
    assert_eq!(
        ok(&mut c, &["HINCRBY", "h", "big", "17179869184"]),
        int(17179869184)
    );
    ok(
        &mut c,
        &[
            "HSET",
            "h",
            "s",
            " 11",
            "t",
            "11 ",
            "max",
            "9223372036854775807",
        ],
    );
    for f in ["s", "t"] {
        assert_eq!(
            err(&mut c, &["HINCRBY", "h", f, "1"]),
            "ERR hash value is not an integer"
        );
        assert_eq!(
            err(&mut c, &["HINCRBYFLOAT", "h", f, "1"]),
            "ERR hash value is not a float"
        );
    }
    assert_eq!(
        err(&mut c, &["HINCRBY", "h", "max", "1"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        err(&mut c, &["HINCRBY", "h", "n", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        ok(&mut c, &["HINCRBYFLOAT", "h", "f", "10.5"]),
        bulk("10.5")
    );
    assert_eq!(ok(&mut c, &["HINCRBYFLOAT", "h", "f", "0.1"]), bulk("10.6"));
    assert_eq!(ok(&mut c, &["HINCRBYFLOAT", "h", "n", "2.5"]), bulk("0.5"));
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "h", "f", "x"]),
        "ERR value is not a valid float"
    );
    for bad in ["inf", "-inf", "+inf"] {
        assert_eq!(
            err(&mut c, &["HINCRBYFLOAT", "h", "f", bad]),
            "ERR value is NaN or Infinity"
        );
    }
    ok(&mut c, &["HSET", "h", "nul", "1\u{0}2"]);
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "h", "nul", "1"]),
        "ERR hash value is not a float"
    );
    // Long double arithmetic, as Redis: beyond f64's range is fine.
    ok(&mut c, &["HSET", "h", "huge", "1.7e308"]);
    let redis::Value::BulkString(sum) = ok(&mut c, &["HINCRBYFLOAT", "h", "huge", "1.7e308"])
    else {
        panic!("not a bulk string");
    };
    assert_eq!(sum.len(), 309);
    assert!(sum.starts_with(b"34000000000000000000627355605"));
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "h", "huge", "1e5000"]),
        "ERR value is not a valid float"
    );
    ok(&mut c, &["HSET", "h", "edge", "1.1e4932"]);
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "h", "edge", "1.1e4932"]),
        "ERR increment would produce NaN or Infinity"
    );
    // Errors on a missing key leave no key behind.
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "nokey", "f", "inf"]),
        "ERR value is NaN or Infinity"
    );
    assert_eq!(ok(&mut c, &["EXISTS", "nokey"]), int(0));
}

#[test]
fn encodings_convert_at_the_configured_thresholds() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &["CONFIG", "SET", "hash-max-listpack-entries", "4"]);
    ok(&mut c, &["CONFIG", "SET", "hash-max-ziplist-value", "8"]);
    ok(
        &mut c,
        &["HSET", "h", "a", "1", "b", "2", "c", "3", "d", "4"],
    );
    assert_eq!(encoding(&mut c, "h"), "listpack");
    ok(&mut c, &["HSET", "h", "e", "5"]);
    assert_eq!(encoding(&mut c, "h"), "hashtable");
    // Never converted back.
    ok(&mut c, &["HDEL", "h", "a", "b", "c", "d"]);
    assert_eq!(encoding(&mut c, "h"), "hashtable");
    assert_eq!(ok(&mut c, &["HGETALL", "h"]), bulks(&["e", "5"]));

    ok(&mut c, &["HSET", "v", "a", "12345678"]);
    assert_eq!(encoding(&mut c, "v"), "listpack");
    ok(&mut c, &["HSET", "v", "b", "123456789"]);
    assert_eq!(encoding(&mut c, "v"), "hashtable");

    ok(&mut c, &["HSET", "fl", "x", "1"]);
    ok(&mut c, &["HINCRBYFLOAT", "fl", "x", "0.5"]);
    assert_eq!(encoding(&mut c, "fl"), "listpack");
    ok(&mut c, &["HINCRBYFLOAT", "fl", "x", "1000.0000001"]);
    assert_eq!(encoding(&mut c, "fl"), "hashtable");

    // Generic commands carry the encoding along.
    ok(&mut c, &["HSET", "small", "a", "1"]);
    assert_eq!(ok(&mut c, &["COPY", "h", "h2"]), int(1));
    assert_eq!(encoding(&mut c, "h2"), "hashtable");
    ok(&mut c, &["RENAME", "small", "small2"]);
    assert_eq!(encoding(&mut c, "small2"), "listpack");
    assert_eq!(ok(&mut c, &["MOVE", "small2", "1"]), int(1));
    ok(&mut c, &["SELECT", "1"]);
    assert_eq!(ok(&mut c, &["HGET", "small2", "a"]), bulk("1"));
    match ok(&mut c, &["MEMORY", "USAGE", "small2"]) {
        Value::Int(n) => assert!(n > 0),
        v => panic!("MEMORY USAGE replied {v:?}"),
    }
    ok(&mut c, &["SELECT", "0"]);
    let scan = ok(&mut c, &["SCAN", "0", "TYPE", "hash", "COUNT", "1000"]);
    let Value::Array(mut parts) = scan else {
        panic!("SCAN replied {scan:?}")
    };
    let mut keys = strings(parts.pop().unwrap());
    keys.sort();
    assert_eq!(keys, ["fl", "h", "h2", "v"]);
}

#[test]
fn hrandfield_counts() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok(&mut c, &["HRANDFIELD", "nokey"]), Value::Nil);
    assert_eq!(
        ok(&mut c, &["HRANDFIELD", "nokey", "5"]),
        Value::Array(vec![])
    );
    for (encoding_cfg, expect) in [("128", "listpack"), ("0", "hashtable")] {
        ok(&mut c, &["DEL", "h"]);
        ok(
            &mut c,
            &["CONFIG", "SET", "hash-max-listpack-entries", encoding_cfg],
        );
        for i in 0..10 {
            ok(&mut c, &["HSET", "h", &format!("f{i}"), &format!("v{i}")]);
        }
        assert_eq!(encoding(&mut c, "h"), expect);
        let one = strings(Value::Array(vec![ok(&mut c, &["HRANDFIELD", "h"])]));
        assert!(one[0].starts_with('f'));
        assert_eq!(ok(&mut c, &["HRANDFIELD", "h", "0"]), Value::Array(vec![]));
        for n in [1usize, 2, 5, 8, 10, 20] {
            let got = strings(ok(&mut c, &["HRANDFIELD", "h", &n.to_string()]));
            assert_eq!(got.len(), n.min(10));
            assert_eq!(got.iter().collect::<HashSet<_>>().len(), n.min(10));
            let got = strings(ok(
                &mut c,
                &["HRANDFIELD", "h", &n.to_string(), "WITHVALUES"],
            ));
            assert_eq!(got.len(), 2 * n.min(10));
            for pair in got.chunks(2) {
                assert_eq!(pair[0][1..], pair[1][1..]);
            }
        }
        // The whole hash in insertion order when listpack-encoded.
        if expect == "listpack" {
            let all = strings(ok(&mut c, &["HRANDFIELD", "h", "10"]));
            let keys = strings(ok(&mut c, &["HKEYS", "h"]));
            assert_eq!(all, keys);
        }
        let got = strings(ok(&mut c, &["HRANDFIELD", "h", "-1001"]));
        assert_eq!(got.len(), 1001);
        assert_eq!(got.iter().collect::<HashSet<_>>().len(), 10);
        let got = strings(ok(&mut c, &["HRANDFIELD", "h", "-3", "withvalues"]));
        assert_eq!(got.len(), 6);
    }
    assert_eq!(
        err(&mut c, &["HRANDFIELD", "h", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(
        err(
            &mut c,
            &["HRANDFIELD", "h", "-9223372036854770000", "WITHVALUES"]
        ),
        "ERR value is out of range"
    );
    assert_eq!(
        err(&mut c, &["HRANDFIELD", "h", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, &["HRANDFIELD", "h", "1", "foo"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["HRANDFIELD", "h", "1", "withvalues", "x"]),
        "ERR syntax error"
    );
}

#[test]
fn resp3_shapes() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    ok(&mut c, &["HSET", "one", "a", "1"]);
    let script = b"HELLO 3\r\nPING\r\nHGETALL h\r\nHGETALL nokey\r\nHRANDFIELD h 2 WITHVALUES\r\nHRANDFIELD one -2 WITHVALUES\r\nHRANDFIELD h 5\r\nHKEYS h\r\nHRANDFIELD nokey\r\nQUIT\r\n";
    let out = raw_exchange(srv.port, script, Duration::from_secs(5));
    let text = String::from_utf8_lossy(&out);
    let (_, body) = text.split_once("+PONG\r\n").expect("PING reply");
    let expected = concat!(
        "%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n",
        "%0\r\n",
        "*2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
        "*2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n",
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        "_\r\n",
        "+OK\r\n",
    );
    assert_eq!(body, expected);
}

#[test]
fn hscan_small_and_big() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        ok(&mut c, &["HSCAN", "nokey", "0"]),
        Value::Array(vec![bulk("0"), Value::Array(vec![])])
    );
    // A missing key wins over bad options; a bad cursor does not.
    assert_eq!(
        ok(&mut c, &["HSCAN", "nokey", "0", "COUNT", "0"]),
        Value::Array(vec![bulk("0"), Value::Array(vec![])])
    );
    assert_eq!(err(&mut c, &["HSCAN", "nokey", "x"]), "ERR invalid cursor");
    ok(&mut c, &["HSET", "h", "a", "1", "b", "2", "ab", "3"]);
    // Listpack: everything in one call, cursor 0, whatever the cursor.
    assert_eq!(
        ok(&mut c, &["HSCAN", "h", "123", "COUNT", "1"]),
        Value::Array(vec![bulk("0"), bulks(&["a", "1", "b", "2", "ab", "3"])])
    );
    assert_eq!(
        ok(&mut c, &["HSCAN", "h", "0", "MATCH", "a*"]),
        Value::Array(vec![bulk("0"), bulks(&["a", "1", "ab", "3"])])
    );
    assert_eq!(
        err(&mut c, &["HSCAN", "h", "0", "COUNT", "0"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["HSCAN", "h", "0", "MATCH"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["HSCAN", "h", "0", "TYPE", "x"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["HSCAN", "h", "0", "COUNT", "x"]),
        "ERR value is not an integer or out of range"
    );

    for i in 0..1000 {
        ok(&mut c, &["HSET", "big", &format!("f{i}"), &format!("{i}")]);
    }
    assert_eq!(encoding(&mut c, "big"), "hashtable");
    let mut cursor = "0".to_string();
    let mut seen = HashSet::new();
    let mut calls = 0;
    loop {
        let reply = ok(
            &mut c,
            &["HSCAN", "big", &cursor, "COUNT", "20", "MATCH", "f1*"],
        );
        let Value::Array(mut parts) = reply else {
            panic!()
        };
        let items = strings(parts.pop().unwrap());
        cursor = strings(Value::Array(parts)).pop().unwrap();
        for pair in items.chunks(2) {
            assert_eq!(pair[0][1..], pair[1][..]);
            assert!(pair[0].starts_with("f1"));
            seen.insert(pair[0].clone());
        }
        calls += 1;
        if cursor == "0" {
            break;
        }
    }
    assert!(calls > 1);
    assert_eq!(seen.len(), 111);
}

#[test]
fn transactions_and_watch() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut other = srv.conn();
    ok(&mut c, &["HSET", "h", "a", "1"]);
    ok(&mut c, &["WATCH", "h"]);
    ok(&mut other, &["HINCRBY", "h", "a", "1"]);
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["HSET", "h", "b", "2"]);
    assert_eq!(ok(&mut c, &["EXEC"]), Value::Nil);
    assert_eq!(ok(&mut c, &["HGET", "h", "a"]), bulk("2"));
    assert_eq!(ok(&mut c, &["HEXISTS", "h", "b"]), int(0));
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["HSET", "h", "b", "2"]);
    ok(&mut c, &["HINCRBY", "h", "b", "5"]);
    ok(&mut c, &["HGETALL", "h"]);
    assert_eq!(
        ok(&mut c, &["EXEC"]),
        Value::Array(vec![int(1), int(7), bulks(&["a", "2", "b", "7"])])
    );
}

#[test]
fn huge_negative_hrandfield_is_cut_and_closed() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &["HSET", "h", "a", "1"]);
    ok(&mut c, &["CONFIG", "SET", "proto-max-bulk-len", "1mb"]);
    let out = raw_exchange(
        srv.port,
        b"HRANDFIELD h -9223372036854775807\r\nPING\r\n",
        Duration::from_secs(30),
    );
    assert!(out.starts_with(b"*9223372036854775807\r\n$1\r\na\r\n"));
    assert!(out.len() > 1 << 20 && out.len() < 2 << 20, "{}", out.len());
    assert!(!out.ends_with(b"+PONG\r\n"));
    assert_eq!(ok(&mut c, &["PING"]), Value::SimpleString("PONG".into()));
}
