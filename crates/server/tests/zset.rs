//! Sorted set commands against the real binary: replies, options, exact
//! error strings of Redis 7.0, both encodings and the conversions between
//! them, RESP3 shapes, and the generic commands on zset keys.

mod common;

use common::{q, Server};
use redis::{Connection, Value};

const SYNTAX: &str = "ERR syntax error";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| bulk(s)).collect())
}

fn int(n: i64) -> Value {
    Value::Int(n)
}

fn ok(con: &mut Connection, args: &[&str]) -> Value {
    q(con, args).unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

fn err(con: &mut Connection, args: &[&str]) -> String {
    match q(con, args) {
        Ok(v) => panic!("{args:?} should fail, got {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

fn encoding(con: &mut Connection, key: &str) -> Value {
    ok(con, &["OBJECT", "ENCODING", key])
}

#[test]
fn zadd_options_and_errors() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok(&mut c, &["ZADD", "z", "1", "a", "2", "b"]), int(2));
    assert_eq!(ok(&mut c, &["ZADD", "z", "NX", "5", "a", "3", "c"]), int(1));
    assert_eq!(ok(&mut c, &["ZSCORE", "z", "a"]), bulk("1"));
    assert_eq!(
        ok(&mut c, &["ZADD", "z", "XX", "CH", "5", "a", "9", "new"]),
        int(1)
    );
    assert_eq!(ok(&mut c, &["ZSCORE", "z", "new"]), Value::Nil);
    assert_eq!(
        ok(&mut c, &["ZADD", "z", "GT", "CH", "1", "a", "6", "b"]),
        int(1)
    );
    assert_eq!(
        ok(&mut c, &["ZADD", "z", "LT", "CH", "7", "a", "1", "b"]),
        int(1)
    );
    assert_eq!(
        ok(&mut c, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        bulks(&["b", "1", "c", "3", "a", "5"])
    );
    assert_eq!(ok(&mut c, &["ZADD", "z", "INCR", "2.5", "a"]), bulk("7.5"));
    assert_eq!(
        ok(&mut c, &["ZADD", "z", "NX", "INCR", "1", "a"]),
        Value::Nil
    );
    assert_eq!(
        ok(&mut c, &["ZADD", "z", "GT", "INCR", "-1", "a"]),
        Value::Nil
    );
    assert_eq!(ok(&mut c, &["ZADD", "missing", "XX", "1", "a"]), int(0));
    assert_eq!(
        ok(&mut c, &["ZADD", "missing", "XX", "INCR", "1", "a"]),
        Value::Nil
    );
    assert_eq!(ok(&mut c, &["EXISTS", "missing"]), int(0));

    assert_eq!(
        err(&mut c, &["ZADD", "z", "NX", "XX", "1", "a"]),
        "ERR XX and NX options at the same time are not compatible"
    );
    for opts in [["GT", "LT"], ["GT", "NX"], ["NX", "LT"]] {
        assert_eq!(
            err(&mut c, &["ZADD", "z", opts[0], opts[1], "1", "a"]),
            "ERR GT, LT, and/or NX options at the same time are not compatible"
        );
    }
    assert_eq!(
        err(&mut c, &["ZADD", "z", "INCR", "1", "a", "2", "b"]),
        "ERR INCR option supports a single increment-element pair"
    );
    assert_eq!(err(&mut c, &["ZADD", "z", "1", "a", "2"]), SYNTAX);
    assert_eq!(err(&mut c, &["ZADD", "z", "CH", "1"]), SYNTAX);
    assert_eq!(err(&mut c, &["ZADD", "z", "nan", "a"]), NOT_FLOAT);
    assert_eq!(err(&mut c, &["ZADD", "z", "1", "a", "x", "b"]), NOT_FLOAT);
    assert_eq!(ok(&mut c, &["ZSCORE", "z", "b"]), bulk("1"));
    ok(&mut c, &["ZADD", "inf", "inf", "m"]);
    assert_eq!(
        err(&mut c, &["ZINCRBY", "inf", "-inf", "m"]),
        "ERR resulting score is not a number (NaN)"
    );
    assert_eq!(ok(&mut c, &["ZSCORE", "inf", "m"]), bulk("inf"));
    ok(&mut c, &["SET", "s", "x"]);
    assert_eq!(err(&mut c, &["ZADD", "s", "1", "a"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["ZADD", "s", "x", "a"]), NOT_FLOAT);
}

#[test]
fn zincrby_and_score_formatting() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        ok(&mut c, &["ZINCRBY", "z", "1.1", "a"]),
        bulk("1.1000000000000001")
    );
    assert_eq!(ok(&mut c, &["ZINCRBY", "z", "-1.1", "a"]), bulk("0"));
    assert_eq!(ok(&mut c, &["ZINCRBY", "z", "1e20", "b"]), bulk("1e+20"));
    assert_eq!(err(&mut c, &["ZINCRBY", "z", "abc", "b"]), NOT_FLOAT);
    assert_eq!(
        ok(&mut c, &["ZMSCORE", "z", "a", "nope", "b"]),
        Value::Array(vec![bulk("0"), Value::Nil, bulk("1e+20")])
    );
    assert_eq!(
        ok(&mut c, &["ZMSCORE", "none", "a"]),
        Value::Array(vec![Value::Nil])
    );
}

#[test]
fn ranges_by_rank_score_and_lex() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(
        &mut c,
        &[
            "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
        ],
    );
    assert_eq!(
        ok(&mut c, &["ZRANGE", "z", "1", "-2"]),
        bulks(&["b", "c", "d"])
    );
    assert_eq!(
        ok(&mut c, &["ZRANGE", "z", "0", "1", "REV"]),
        bulks(&["e", "d"])
    );
    assert_eq!(
        ok(&mut c, &["ZREVRANGE", "z", "-2", "-1", "WITHSCORES"]),
        bulks(&["b", "2", "a", "1"])
    );
    assert_eq!(
        ok(
            &mut c,
            &["ZRANGE", "z", "(1", "4", "BYSCORE", "LIMIT", "1", "2"]
        ),
        bulks(&["c", "d"])
    );
    assert_eq!(
        ok(
            &mut c,
            &["ZRANGE", "z", "+inf", "(2", "BYSCORE", "REV", "LIMIT", "1", "-1"]
        ),
        bulks(&["d", "c"])
    );
    assert_eq!(
        ok(
            &mut c,
            &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "2"]
        ),
        bulks(&[])
    );
    assert_eq!(
        ok(&mut c, &["ZREVRANGEBYSCORE", "z", "3", "1", "WITHSCORES"]),
        bulks(&["c", "3", "b", "2", "a", "1"])
    );
    assert_eq!(ok(&mut c, &["ZCOUNT", "z", "(1", "(5"]), int(3));
    assert_eq!(ok(&mut c, &["ZRANK", "z", "c"]), int(2));
    assert_eq!(ok(&mut c, &["ZREVRANK", "z", "c"]), int(2));
    assert_eq!(ok(&mut c, &["ZRANK", "z", "zz"]), Value::Nil);
    assert_eq!(
        err(&mut c, &["ZRANGEBYSCORE", "z", "x", "1"]),
        "ERR min or max is not a float"
    );
    assert_eq!(
        err(&mut c, &["ZRANGE", "z", "0", "1", "LIMIT", "0", "1"]),
        "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
    );
    assert_eq!(
        err(&mut c, &["ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES"]),
        "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
    );
    assert_eq!(
        err(&mut c, &["ZRANGE", "z", "0", "1", "BYSCORE", "BYLEX"]),
        SYNTAX
    );
    assert_eq!(err(&mut c, &["ZRANGE", "z", "a", "1"]), NOT_INT);

    ok(
        &mut c,
        &["ZADD", "l", "0", "a", "0", "b", "0", "c", "0", "d"],
    );
    assert_eq!(
        ok(&mut c, &["ZRANGEBYLEX", "l", "(a", "[c"]),
        bulks(&["b", "c"])
    );
    assert_eq!(
        ok(
            &mut c,
            &["ZREVRANGEBYLEX", "l", "+", "-", "LIMIT", "1", "2"]
        ),
        bulks(&["c", "b"])
    );
    assert_eq!(ok(&mut c, &["ZLEXCOUNT", "l", "-", "(c"]), int(2));
    assert_eq!(ok(&mut c, &["ZLEXCOUNT", "l", "+", "-"]), int(0));
    assert_eq!(
        err(&mut c, &["ZLEXCOUNT", "l", "a", "+"]),
        "ERR min or max not valid string range item"
    );
    assert_eq!(ok(&mut c, &["ZREMRANGEBYLEX", "l", "[b", "(d"]), int(2));
    assert_eq!(ok(&mut c, &["ZRANGE", "l", "0", "-1"]), bulks(&["a", "d"]));
}

#[test]
fn removals_delete_empty_keys() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(
        &mut c,
        &["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"],
    );
    assert_eq!(ok(&mut c, &["ZREMRANGEBYRANK", "z", "1", "2"]), int(2));
    assert_eq!(ok(&mut c, &["ZREMRANGEBYSCORE", "z", "(1", "+inf"]), int(1));
    assert_eq!(ok(&mut c, &["ZREM", "z", "x", "a", "a"]), int(1));
    assert_eq!(ok(&mut c, &["EXISTS", "z"]), int(0));
    assert_eq!(ok(&mut c, &["ZREM", "z", "a"]), int(0));
    assert_eq!(ok(&mut c, &["ZCARD", "z"]), int(0));
}

#[test]
fn pops() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(ok(&mut c, &["ZPOPMIN", "z"]), bulks(&["a", "1"]));
    assert_eq!(
        ok(&mut c, &["ZPOPMAX", "z", "5"]),
        bulks(&["c", "3", "b", "2"])
    );
    assert_eq!(ok(&mut c, &["EXISTS", "z"]), int(0));
    assert_eq!(ok(&mut c, &["ZPOPMIN", "z"]), bulks(&[]));
    assert_eq!(
        err(&mut c, &["ZPOPMIN", "z", "-1"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(err(&mut c, &["ZPOPMIN", "z", "1", "2"]), SYNTAX);
    ok(&mut c, &["ZADD", "y", "1", "a", "2", "b"]);
    assert_eq!(
        ok(&mut c, &["ZMPOP", "2", "z", "y", "MAX", "COUNT", "1"]),
        Value::Array(vec![bulk("y"), Value::Array(vec![bulks(&["b", "2"])])])
    );
    assert_eq!(ok(&mut c, &["ZMPOP", "1", "z", "MIN"]), Value::Nil);
    assert_eq!(
        err(&mut c, &["ZMPOP", "0", "z", "MIN"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(&mut c, &["ZMPOP", "1", "z", "MIN", "COUNT", "0"]),
        "ERR count should be greater than 0"
    );
    assert_eq!(err(&mut c, &["ZMPOP", "2", "z", "MIN"]), SYNTAX);
    assert_eq!(err(&mut c, &["ZMPOP", "1", "z", "MID"]), SYNTAX);
}

#[test]
fn set_operations_accept_sets() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &["ZADD", "a", "1", "x", "2", "y"]);
    ok(&mut c, &["ZADD", "b", "10", "y", "20", "z"]);
    ok(&mut c, &["SADD", "s", "x", "z"]);
    assert_eq!(
        ok(&mut c, &["ZUNION", "2", "a", "b", "WITHSCORES"]),
        bulks(&["x", "1", "y", "12", "z", "20"])
    );
    assert_eq!(
        ok(
            &mut c,
            &["ZINTER", "2", "a", "b", "AGGREGATE", "MAX", "WITHSCORES"]
        ),
        bulks(&["y", "10"])
    );
    assert_eq!(
        ok(
            &mut c,
            &["ZUNION", "2", "a", "s", "WEIGHTS", "2", "3", "WITHSCORES"]
        ),
        bulks(&["z", "3", "y", "4", "x", "5"])
    );
    assert_eq!(ok(&mut c, &["ZDIFF", "2", "a", "s"]), bulks(&["y"]));
    assert_eq!(ok(&mut c, &["ZINTERCARD", "3", "a", "b", "s"]), int(0));
    assert_eq!(
        ok(&mut c, &["ZINTERCARD", "2", "a", "b", "LIMIT", "5"]),
        int(1)
    );
    assert_eq!(
        ok(&mut c, &["ZUNIONSTORE", "d", "3", "a", "b", "s"]),
        int(3)
    );
    assert_eq!(
        ok(&mut c, &["ZRANGE", "d", "0", "-1", "WITHSCORES"]),
        bulks(&["x", "2", "y", "12", "z", "21"])
    );
    assert_eq!(ok(&mut c, &["ZINTERSTORE", "d", "2", "a", "nokey"]), int(0));
    assert_eq!(ok(&mut c, &["EXISTS", "d"]), int(0));
    assert_eq!(ok(&mut c, &["ZDIFFSTORE", "d", "1", "a"]), int(2));
    assert_eq!(
        err(&mut c, &["ZUNION", "0", "a"]),
        "ERR at least 1 input key is needed for 'zunion' command"
    );
    assert_eq!(
        err(&mut c, &["ZINTERSTORE", "d", "0", "a"]),
        "ERR at least 1 input key is needed for 'zinterstore' command"
    );
    assert_eq!(err(&mut c, &["ZUNION", "3", "a", "b"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["ZUNION", "2", "a", "b", "WEIGHTS", "1", "x"]),
        "ERR weight value is not a float"
    );
    assert_eq!(
        err(&mut c, &["ZDIFF", "2", "a", "b", "WEIGHTS", "1", "2"]),
        SYNTAX
    );
    assert_eq!(
        err(&mut c, &["ZUNIONSTORE", "d", "1", "a", "WITHSCORES"]),
        SYNTAX
    );
    assert_eq!(
        err(&mut c, &["ZINTERCARD", "1", "a", "LIMIT", "-1"]),
        "ERR LIMIT can't be negative"
    );
    ok(&mut c, &["SET", "str", "v"]);
    assert_eq!(err(&mut c, &["ZUNION", "2", "a", "str"]), WRONGTYPE);
}

#[test]
fn encodings_convert_at_the_configured_limits() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &["CONFIG", "SET", "zset-max-listpack-entries", "4"]);
    for i in 0..4 {
        ok(&mut c, &["ZADD", "z", &i.to_string(), &format!("m{i}")]);
    }
    assert_eq!(encoding(&mut c, "z"), bulk("listpack"));
    ok(&mut c, &["ZADD", "z", "9", "m9"]);
    assert_eq!(encoding(&mut c, "z"), bulk("skiplist"));
    ok(&mut c, &["ZREMRANGEBYRANK", "z", "0", "2"]);
    assert_eq!(encoding(&mut c, "z"), bulk("skiplist"));
    // A stored result is encoded by its own size.
    ok(&mut c, &["ZUNIONSTORE", "u", "1", "z"]);
    assert_eq!(encoding(&mut c, "u"), bulk("listpack"));
    ok(&mut c, &["ZRANGESTORE", "r", "z", "0", "-1"]);
    assert_eq!(encoding(&mut c, "r"), bulk("listpack"));
    let long = "x".repeat(65);
    ok(&mut c, &["ZADD", "long", "1", &long]);
    assert_eq!(encoding(&mut c, "long"), bulk("skiplist"));
    ok(&mut c, &["ZADD", "short", "1", "a"]);
    ok(&mut c, &["ZADD", "short", "1", &long]);
    assert_eq!(encoding(&mut c, "short"), bulk("skiplist"));
    ok(&mut c, &["CONFIG", "SET", "zset-max-ziplist-entries", "0"]);
    ok(&mut c, &["ZADD", "zero", "1", "a"]);
    assert_eq!(encoding(&mut c, "zero"), bulk("skiplist"));
}

#[test]
fn big_sets_rank_and_scan() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let n = 2000;
    let mut cmd = redis::cmd("ZADD");
    cmd.arg("big");
    for i in 0..n {
        cmd.arg(i).arg(format!("m{i:05}"));
    }
    let _: i64 = cmd.query(&mut c).unwrap();
    assert_eq!(encoding(&mut c, "big"), bulk("skiplist"));
    assert_eq!(ok(&mut c, &["ZRANK", "big", "m01234"]), int(1234));
    assert_eq!(
        ok(&mut c, &["ZREVRANK", "big", "m01234"]),
        int(n - 1 - 1234)
    );
    assert_eq!(
        ok(&mut c, &["ZRANGE", "big", "1000", "1001"]),
        bulks(&["m01000", "m01001"])
    );
    assert_eq!(ok(&mut c, &["ZCOUNT", "big", "(10", "20"]), int(10));
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    loop {
        let Value::Array(parts) = ok(&mut c, &["ZSCAN", "big", &cursor, "COUNT", "100"]) else {
            panic!("bad ZSCAN reply");
        };
        let Value::BulkString(next) = &parts[0] else {
            panic!()
        };
        let Value::Array(items) = &parts[1] else {
            panic!()
        };
        for pair in items.chunks(2) {
            if let Value::BulkString(m) = &pair[0] {
                seen.insert(m.clone());
            }
        }
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), n as usize);
    assert_eq!(
        ok(&mut c, &["ZREMRANGEBYSCORE", "big", "100", "+inf"]),
        int(n - 100)
    );
    assert_eq!(ok(&mut c, &["ZCARD", "big"]), int(100));
    assert_eq!(ok(&mut c, &["ZPOPMAX", "big"]), bulks(&["m00099", "99"]));
}

#[test]
fn zrandmember_counts() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(
        ok(&mut c, &["ZRANDMEMBER", "z", "10", "WITHSCORES"]),
        bulks(&["c", "3", "b", "2", "a", "1"])
    );
    let Value::Array(v) = ok(&mut c, &["ZRANDMEMBER", "z", "-7"]) else {
        panic!()
    };
    assert_eq!(v.len(), 7);
    let Value::Array(v) = ok(&mut c, &["ZRANDMEMBER", "z", "2"]) else {
        panic!()
    };
    assert_eq!(v.len(), 2);
    assert_ne!(v[0], v[1]);
    assert_eq!(ok(&mut c, &["ZRANDMEMBER", "nokey"]), Value::Nil);
    assert_eq!(ok(&mut c, &["ZRANDMEMBER", "nokey", "3"]), bulks(&[]));
    assert_eq!(err(&mut c, &["ZRANDMEMBER", "z", "-9223372036854775808"]), "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
    assert_eq!(
        err(
            &mut c,
            &["ZRANDMEMBER", "z", "-9223372036854770000", "WITHSCORES"]
        ),
        "ERR value is out of range"
    );
    assert_eq!(err(&mut c, &["ZRANDMEMBER", "z", "1", "WITHSCORE"]), SYNTAX);
}

#[test]
fn resp3_shapes() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &["HELLO", "3"]);
    ok(&mut c, &["ZADD", "z", "1", "a", "2.5", "b"]);
    let pair = |m: &str, s: f64| Value::Array(vec![bulk(m), Value::Double(s)]);
    assert_eq!(
        ok(&mut c, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        Value::Array(vec![pair("a", 1.0), pair("b", 2.5)])
    );
    assert_eq!(ok(&mut c, &["ZSCORE", "z", "b"]), Value::Double(2.5));
    assert_eq!(
        ok(&mut c, &["ZPOPMIN", "z"]),
        Value::Array(vec![bulk("a"), Value::Double(1.0)])
    );
    assert_eq!(
        ok(&mut c, &["ZPOPMIN", "z", "1"]),
        Value::Array(vec![pair("b", 2.5)])
    );
}

#[test]
fn generic_commands_on_zsets() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    assert_eq!(
        ok(&mut c, &["TYPE", "z"]),
        Value::SimpleString("zset".into())
    );
    assert_eq!(ok(&mut c, &["COPY", "z", "z2"]), int(1));
    ok(&mut c, &["ZADD", "z2", "3", "c"]);
    assert_eq!(ok(&mut c, &["ZCARD", "z"]), int(2));
    ok(&mut c, &["RENAME", "z2", "z3"]);
    assert_eq!(ok(&mut c, &["ZCARD", "z3"]), int(3));
    assert_eq!(ok(&mut c, &["MOVE", "z3", "1"]), int(1));
    let Value::Int(mem) = ok(&mut c, &["MEMORY", "USAGE", "z"]) else {
        panic!()
    };
    assert!(mem > 0);
    let Value::Array(scan) = ok(&mut c, &["SCAN", "0", "TYPE", "zset"]) else {
        panic!()
    };
    assert_eq!(scan[1], bulks(&["z"]));
}
