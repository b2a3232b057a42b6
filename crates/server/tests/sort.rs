//! SORT and SORT_RO against the real binary, over lists, sets and sorted
//! sets: BY and GET patterns (including `#`, `->` hash fields and constant
//! patterns), LIMIT, ASC/DESC, ALPHA, STORE, and Redis 7.0's errors.

mod common;

use common::{err, ok, Server};
use redis::{Connection, Value};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_DOUBLE: &str = "ERR One or more scores can't be converted into double";

/// An array reply as strings, nulls as "(nil)".
fn strs(con: &mut Connection, args: &[&str]) -> Vec<String> {
    match ok(con, args) {
        Value::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Value::BulkString(b) => String::from_utf8(b).unwrap(),
                Value::Nil => "(nil)".to_string(),
                other => panic!("unexpected item {other:?}"),
            })
            .collect(),
        other => panic!("{args:?} replied {other:?}"),
    }
}

fn line(s: &str) -> Vec<&str> {
    s.split(' ').collect()
}

/// Runs `SORT ...` given as one space-separated string.
fn sort(con: &mut Connection, cmd: &str) -> Vec<String> {
    strs(con, &line(cmd))
}

#[test]
fn numeric_and_alpha_sorting_of_every_type() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &line("RPUSH l 3 10 -1 2.5 10 0"));
    ok(&mut c, &line("SADD s 3 10 -1 7"));
    ok(&mut c, &line("SADD hs x 3 10"));
    ok(&mut c, &line("ZADD z 1 3 2 10 3 -1 4 2.5"));
    assert_eq!(sort(&mut c, "SORT l"), ["-1", "0", "2.5", "3", "10", "10"]);
    assert_eq!(
        sort(&mut c, "SORT l DESC"),
        ["10", "10", "3", "2.5", "0", "-1"]
    );
    assert_eq!(
        sort(&mut c, "SORT l ALPHA"),
        ["-1", "0", "10", "10", "2.5", "3"]
    );
    assert_eq!(
        sort(&mut c, "SORT_RO l ALPHA DESC LIMIT 1 2"),
        ["2.5", "10"]
    );
    assert_eq!(sort(&mut c, "SORT s"), ["-1", "3", "7", "10"]);
    assert_eq!(sort(&mut c, "SORT s ALPHA"), ["-1", "10", "3", "7"]);
    assert_eq!(sort(&mut c, "SORT z"), ["-1", "2.5", "3", "10"]);
    assert_eq!(sort(&mut c, "SORT hs ALPHA"), ["10", "3", "x"]);
    assert_eq!(err(&mut c, &line("SORT hs")), NOT_DOUBLE);
    assert_eq!(sort(&mut c, "SORT nokey"), Vec::<String>::new());
    ok(&mut c, &line("SET str x"));
    ok(&mut c, &line("HSET h a 1"));
    assert_eq!(err(&mut c, &line("SORT str")), WRONGTYPE);
    assert_eq!(err(&mut c, &line("SORT_RO h")), WRONGTYPE);
}

#[test]
fn limit_clamping() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &line("RPUSH l 5 4 3 2 1"));
    assert_eq!(sort(&mut c, "SORT l LIMIT 1 2"), ["2", "3"]);
    assert_eq!(sort(&mut c, "SORT l LIMIT -10 2"), ["1", "2"]);
    assert_eq!(sort(&mut c, "SORT l LIMIT 3 -1"), ["4", "5"]);
    assert_eq!(sort(&mut c, "SORT l LIMIT 3 100"), ["4", "5"]);
    assert_eq!(sort(&mut c, "SORT l LIMIT 5 1"), Vec::<String>::new());
    assert_eq!(sort(&mut c, "SORT l LIMIT 1 0"), Vec::<String>::new());
    assert_eq!(
        sort(
            &mut c,
            "SORT l LIMIT 9223372036854775807 9223372036854775807"
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        err(&mut c, &line("SORT l LIMIT x 1")),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(err(&mut c, &line("SORT l LIMIT 1")), "ERR syntax error");
}

#[test]
fn by_and_get_patterns() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &line("RPUSH l a b c d"));
    ok(&mut c, &line("MSET w_a 3 w_b 1 w_c 2 name_a A name_c C"));
    ok(&mut c, &line("HSET o_a f 10 g zz"));
    ok(&mut c, &line("HSET o_b f 5 g aa"));
    ok(&mut c, &line("HSET o_c f 7"));
    // Missing weights count as 0 (d), ties break on the element.
    assert_eq!(sort(&mut c, "SORT l BY w_*"), ["d", "b", "c", "a"]);
    assert_eq!(sort(&mut c, "SORT l BY o_*->f DESC"), ["a", "c", "b", "d"]);
    // ALPHA BY: missing values first, ties keep the list order.
    assert_eq!(sort(&mut c, "SORT l BY o_*->g ALPHA"), ["c", "d", "b", "a"]);
    // A constant BY keeps the collection's order.
    assert_eq!(sort(&mut c, "SORT l BY nosort"), ["a", "b", "c", "d"]);
    assert_eq!(sort(&mut c, "SORT l BY nosort DESC LIMIT 1 2"), ["c", "b"]);
    assert_eq!(
        sort(
            &mut c,
            "SORT l BY w_* GET # GET name_* GET o_*->g GET nopattern"
        ),
        [
            "d", "(nil)", "(nil)", "(nil)", //
            "b", "(nil)", "aa", "(nil)", //
            "c", "C", "(nil)", "(nil)", //
            "a", "A", "zz", "(nil)",
        ]
    );
    // GET of a hash without a field, or a field of a string: null.
    assert_eq!(
        sort(&mut c, "SORT l BY nosort GET o_* LIMIT 0 1"),
        ["(nil)"]
    );
    assert_eq!(
        sort(&mut c, "SORT l BY nosort GET w_*->f LIMIT 0 1"),
        ["(nil)"]
    );
    // Weights that are not numbers.
    ok(&mut c, &line("SET w_d x"));
    assert_eq!(err(&mut c, &line("SORT l BY w_*")), NOT_DOUBLE);
    assert_eq!(sort(&mut c, "SORT l BY w_* ALPHA"), ["b", "c", "a", "d"]);
    // Sorted sets without sorting: score order, reversed by DESC.
    ok(&mut c, &line("ZADD z 3 x 1 y 2 w"));
    assert_eq!(sort(&mut c, "SORT z BY nosort"), ["y", "w", "x"]);
    assert_eq!(sort(&mut c, "SORT z BY nosort DESC LIMIT 0 2"), ["x", "w"]);
}

#[test]
fn store_writes_a_list() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &line("SADD s c a b"));
    ok(&mut c, &line("SET dst old"));
    ok(&mut c, &line("EXPIRE dst 100"));
    assert_eq!(ok(&mut c, &line("SORT s ALPHA STORE dst")), Value::Int(3));
    assert_eq!(strs(&mut c, &line("LRANGE dst 0 -1")), ["a", "b", "c"]);
    assert_eq!(ok(&mut c, &line("TTL dst")), Value::Int(-1));
    // A set with a constant BY is sorted when stored.
    assert_eq!(
        ok(&mut c, &line("SORT s BY nosort STORE dst")),
        Value::Int(3)
    );
    assert_eq!(strs(&mut c, &line("LRANGE dst 0 -1")), ["a", "b", "c"]);
    // GET misses are stored as empty strings.
    ok(&mut c, &line("SET v_a 1"));
    assert_eq!(
        ok(&mut c, &line("SORT s ALPHA GET v_* GET # STORE dst")),
        Value::Int(6)
    );
    assert_eq!(
        strs(&mut c, &line("LRANGE dst 0 -1")),
        ["1", "a", "", "b", "", "c"]
    );
    // An empty result deletes the destination.
    assert_eq!(ok(&mut c, &line("SORT nokey STORE dst")), Value::Int(0));
    assert_eq!(ok(&mut c, &line("EXISTS dst")), Value::Int(0));
    assert_eq!(
        err(&mut c, &line("SORT_RO s STORE dst")),
        "ERR syntax error"
    );
    // The last STORE wins.
    assert_eq!(
        ok(&mut c, &line("SORT s ALPHA STORE d1 STORE d2")),
        Value::Int(3)
    );
    assert_eq!(ok(&mut c, &line("EXISTS d1 d2")), Value::Int(1));
    assert_eq!(strs(&mut c, &line("LRANGE d2 0 -1")), ["a", "b", "c"]);
}

#[test]
fn command_getkeys_and_errors() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        strs(&mut c, &line("COMMAND GETKEYS SORT abc STORE def")),
        ["abc", "def"]
    );
    assert_eq!(
        strs(
            &mut c,
            &line("COMMAND GETKEYS SORT abc STORE x STORE y BY z")
        ),
        ["abc", "y"]
    );
    assert_eq!(strs(&mut c, &line("COMMAND GETKEYS SORT_RO abc")), ["abc"]);
    assert_eq!(err(&mut c, &line("SORT l FOO")), "ERR syntax error");
    assert_eq!(err(&mut c, &line("SORT l BY")), "ERR syntax error");
    assert_eq!(err(&mut c, &line("SORT l GET")), "ERR syntax error");
    // Option errors come before the type check.
    ok(&mut c, &line("SET str x"));
    assert_eq!(err(&mut c, &line("SORT str FOO")), "ERR syntax error");
}

#[test]
fn sort_inside_transactions_reads_other_shards() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    for i in 0..50 {
        ok(&mut c, &["RPUSH", "l", &i.to_string()]);
        ok(&mut c, &["SET", &format!("w_{i}"), &(100 - i).to_string()]);
    }
    ok(&mut c, &line("MULTI"));
    ok(&mut c, &line("SORT l BY w_* LIMIT 0 3 GET w_*"));
    ok(&mut c, &line("SORT l BY w_* STORE out"));
    let exec = ok(&mut c, &line("EXEC"));
    let Value::Array(items) = exec else {
        panic!("EXEC replied {exec:?}")
    };
    assert_eq!(
        items[0],
        Value::Array(vec![
            Value::BulkString(b"51".to_vec()),
            Value::BulkString(b"52".to_vec()),
            Value::BulkString(b"53".to_vec()),
        ])
    );
    assert_eq!(items[1], Value::Int(50));
    assert_eq!(strs(&mut c, &line("LRANGE out 0 2")), ["49", "48", "47"]);
}
