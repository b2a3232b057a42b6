//! Set commands against the real binary: replies, encodings and their
//! conversions, random members, set algebra, SSCAN and the exact error
//! strings of Redis 7.0.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use common::{err, ok, Server};
use redis::{Connection, Value};

const SYNTAX: &str = "ERR syntax error";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn int(con: &mut Connection, args: &[&str]) -> i64 {
    match ok(con, args) {
        Value::Int(n) => n,
        v => panic!("{args:?} replied {v:?}"),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
        Value::SimpleString(s) => s.clone(),
        v => panic!("not a string: {v:?}"),
    }
}

/// The members of an array (or set) reply, in reply order.
fn list(con: &mut Connection, args: &[&str]) -> Vec<String> {
    match ok(con, args) {
        Value::Array(items) | Value::Set(items) => items.iter().map(text).collect(),
        v => panic!("{args:?} replied {v:?}"),
    }
}

fn sorted(con: &mut Connection, args: &[&str]) -> Vec<String> {
    let mut v = list(con, args);
    v.sort();
    v
}

fn strs(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn encoding(con: &mut Connection, key: &str) -> String {
    text(&ok(con, &["OBJECT", "ENCODING", key]))
}

fn sadd(con: &mut Connection, key: &str, members: &[&str]) -> i64 {
    let mut args = vec!["SADD", key];
    args.extend_from_slice(members);
    int(con, &args)
}

#[test]
fn add_remove_and_membership() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(sadd(&mut c, "s", &["a", "b", "a", "c"]), 3);
    assert_eq!(sadd(&mut c, "s", &["a", "d"]), 1);
    assert_eq!(int(&mut c, &["SCARD", "s"]), 4);
    assert_eq!(int(&mut c, &["SCARD", "nosuch"]), 0);
    assert_eq!(int(&mut c, &["SISMEMBER", "s", "a"]), 1);
    assert_eq!(int(&mut c, &["SISMEMBER", "s", "z"]), 0);
    assert_eq!(int(&mut c, &["SISMEMBER", "nosuch", "a"]), 0);
    assert_eq!(
        ok(&mut c, &["SMISMEMBER", "s", "a", "z", "d"]),
        Value::Array(vec![Value::Int(1), Value::Int(0), Value::Int(1)])
    );
    assert_eq!(
        ok(&mut c, &["SMISMEMBER", "nosuch", "a", "b"]),
        Value::Array(vec![Value::Int(0), Value::Int(0)])
    );
    assert_eq!(int(&mut c, &["SREM", "s", "a", "z", "b"]), 2);
    assert_eq!(int(&mut c, &["SREM", "nosuch", "a"]), 0);
    assert_eq!(sorted(&mut c, &["SMEMBERS", "s"]), strs(&["c", "d"]));
    // The key goes away with its last member.
    assert_eq!(int(&mut c, &["SREM", "s", "c", "d", "e"]), 2);
    assert_eq!(int(&mut c, &["EXISTS", "s"]), 0);
    assert_eq!(list(&mut c, &["SMEMBERS", "s"]), Vec::<String>::new());
    // Empty members are members too.
    assert_eq!(sadd(&mut c, "e", &[""]), 1);
    assert_eq!(int(&mut c, &["SISMEMBER", "e", ""]), 1);
    assert_eq!(
        err(&mut c, &["SADD", "s"]),
        "ERR wrong number of arguments for 'sadd' command"
    );
}

#[test]
fn intsets_are_sorted_and_convert_like_redis() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(sadd(&mut c, "i", &["5", "-3", "100", "0", "70000"]), 5);
    assert_eq!(encoding(&mut c, "i"), "intset");
    assert_eq!(
        list(&mut c, &["SMEMBERS", "i"]),
        strs(&["-3", "0", "5", "100", "70000"])
    );
    assert_eq!(sadd(&mut c, "i", &["-9223372036854775808"]), 1);
    assert_eq!(list(&mut c, &["SMEMBERS", "i"])[0], "-9223372036854775808");
    // Not canonical integers: the set becomes a hashtable, for good.
    assert_eq!(sadd(&mut c, "i", &["01"]), 1);
    assert_eq!(encoding(&mut c, "i"), "hashtable");
    assert_eq!(int(&mut c, &["SREM", "i", "01"]), 1);
    assert_eq!(encoding(&mut c, "i"), "hashtable");
    assert_eq!(int(&mut c, &["SISMEMBER", "i", "70000"]), 1);
    // A first member that is not an integer starts a hashtable.
    sadd(&mut c, "h", &["x"]);
    assert_eq!(encoding(&mut c, "h"), "hashtable");

    // Size threshold, read from the configuration at each write.
    ok(&mut c, &["CONFIG", "SET", "set-max-intset-entries", "4"]);
    sadd(&mut c, "n", &["1", "2", "3", "4"]);
    assert_eq!(encoding(&mut c, "n"), "intset");
    sadd(&mut c, "n", &["5"]);
    assert_eq!(encoding(&mut c, "n"), "hashtable");
    ok(&mut c, &["CONFIG", "SET", "set-max-intset-entries", "512"]);
    let many: Vec<String> = (0..513).map(|i| i.to_string()).collect();
    let refs: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
    sadd(&mut c, "big", &refs[..512]);
    assert_eq!(encoding(&mut c, "big"), "intset");
    sadd(&mut c, "big", &refs[512..]);
    assert_eq!(encoding(&mut c, "big"), "hashtable");
    assert_eq!(int(&mut c, &["SCARD", "big"]), 513);
}

#[test]
fn wrong_type_everywhere() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok(&mut c, &["SET", "str", "x"]);
    sadd(&mut c, "s", &["a"]);
    let cmds: &[&[&str]] = &[
        &["SADD", "str", "a"],
        &["SREM", "str", "a"],
        &["SMEMBERS", "str"],
        &["SISMEMBER", "str", "a"],
        &["SMISMEMBER", "str", "a"],
        &["SCARD", "str"],
        &["SPOP", "str"],
        &["SPOP", "str", "2"],
        &["SRANDMEMBER", "str"],
        &["SRANDMEMBER", "str", "2"],
        &["SMOVE", "str", "s", "a"],
        &["SMOVE", "s", "str", "a"],
        &["SINTER", "s", "str"],
        &["SINTER", "nosuch", "str"],
        &["SINTERCARD", "2", "s", "str"],
        &["SINTERSTORE", "d", "s", "str"],
        &["SUNION", "s", "str"],
        &["SUNIONSTORE", "d", "str"],
        &["SDIFF", "s", "str"],
        &["SDIFF", "nosuch", "str"],
        &["SDIFFSTORE", "d", "s", "str"],
        &["SSCAN", "str", "0"],
        &["SSCAN", "str", "0", "COUNT", "0"],
    ];
    for cmd in cmds {
        assert_eq!(err(&mut c, cmd), WRONGTYPE, "{cmd:?}");
    }
    // Nothing was stored by the failed STORE commands.
    assert_eq!(int(&mut c, &["EXISTS", "d"]), 0);
    // SMOVE from a missing key answers 0 before looking at the types.
    assert_eq!(int(&mut c, &["SMOVE", "nosuch", "str", "a"]), 0);
}

#[test]
fn spop_forms_and_errors() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok(&mut c, &["SPOP", "nosuch"]), Value::Nil);
    assert_eq!(list(&mut c, &["SPOP", "nosuch", "3"]), Vec::<String>::new());
    assert_eq!(
        err(&mut c, &["SPOP", "nosuch", "-1"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(
        err(&mut c, &["SPOP", "nosuch", "x"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(err(&mut c, &["SPOP", "nosuch", "1", "2"]), SYNTAX);

    let all = ["1", "2", "3", "a", "b"];
    sadd(&mut c, "s", &all);
    assert_eq!(list(&mut c, &["SPOP", "s", "0"]), Vec::<String>::new());
    let one = text(&ok(&mut c, &["SPOP", "s"]));
    assert!(all.contains(&one.as_str()));
    let two = list(&mut c, &["SPOP", "s", "2"]);
    assert_eq!(two.len(), 2);
    let rest = sorted(&mut c, &["SMEMBERS", "s"]);
    let mut seen: Vec<String> = [vec![one], two, rest].concat();
    seen.sort();
    assert_eq!(seen, strs(&all));
    // A count covering the set pops everything and deletes the key; an
    // intset comes out sorted.
    sadd(&mut c, "i", &["3", "1", "2"]);
    assert_eq!(
        list(&mut c, &["SPOP", "i", "9223372036854775807"]),
        strs(&["1", "2", "3"])
    );
    assert_eq!(int(&mut c, &["EXISTS", "i"]), 0);
    sadd(&mut c, "i", &["7"]);
    assert_eq!(text(&ok(&mut c, &["SPOP", "i"])), "7");
    assert_eq!(int(&mut c, &["EXISTS", "i"]), 0);

    // Both of Redis's strategies for large counts return distinct members
    // and leave the rest.
    for count in [3, 18, 19] {
        let members: Vec<String> = (0..20).map(|i| i.to_string()).collect();
        let refs: Vec<&str> = members.iter().map(|s| s.as_str()).collect();
        sadd(&mut c, "p", &refs);
        let popped = list(&mut c, &["SPOP", "p", &count.to_string()]);
        let left = list(&mut c, &["SMEMBERS", "p"]);
        let mut union: BTreeSet<String> = popped.iter().cloned().collect();
        assert_eq!(union.len(), count);
        union.extend(left.iter().cloned());
        assert_eq!(union.len(), 20);
        assert_eq!(left.len(), 20 - count);
        ok(&mut c, &["DEL", "p"]);
    }
}

#[test]
fn srandmember_counts() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok(&mut c, &["SRANDMEMBER", "nosuch"]), Value::Nil);
    assert_eq!(
        list(&mut c, &["SRANDMEMBER", "nosuch", "5"]),
        Vec::<String>::new()
    );
    assert_eq!(err(&mut c, &["SRANDMEMBER", "nosuch", "x"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["SRANDMEMBER", "nosuch", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(err(&mut c, &["SRANDMEMBER", "k", "1", "2"]), SYNTAX);

    let words: Vec<String> = (0..30).map(|i| format!("w{i}")).collect();
    let refs: Vec<&str> = words.iter().map(|s| s.as_str()).collect();
    sadd(&mut c, "s", &refs);
    assert_eq!(
        list(&mut c, &["SRANDMEMBER", "s", "0"]),
        Vec::<String>::new()
    );
    for count in [1usize, 5, 15, 29, 30, 100] {
        let got = list(&mut c, &["SRANDMEMBER", "s", &count.to_string()]);
        let distinct: BTreeSet<&String> = got.iter().collect();
        assert_eq!(got.len(), count.min(30));
        assert_eq!(distinct.len(), got.len());
        assert!(got.iter().all(|m| words.contains(m)));
    }
    let got = list(&mut c, &["SRANDMEMBER", "s", "-100"]);
    assert_eq!(got.len(), 100);
    assert!(got.iter().all(|m| words.contains(m)));
    // Roughly uniform: every member shows up in 3000 draws.
    let got = list(&mut c, &["SRANDMEMBER", "s", "-3000"]);
    let mut hist: HashMap<&String, usize> = HashMap::new();
    for m in &got {
        *hist.entry(m).or_default() += 1;
    }
    assert_eq!(hist.len(), 30);
    assert!(hist.values().all(|&n| n > 30), "{hist:?}");
    // The whole intset comes in ascending order.
    sadd(&mut c, "i", &["3", "-1", "2"]);
    assert_eq!(
        list(&mut c, &["SRANDMEMBER", "i", "3"]),
        strs(&["-1", "2", "3"])
    );
    assert_eq!(int(&mut c, &["SCARD", "s"]), 30);
}

#[test]
fn srandmember_huge_negative_count_is_bounded() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    sadd(&mut c, "s", &["a", "b"]);
    ok(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1mb 1mb 0",
        ],
    );
    // The reply is cut at the output limit and the client disconnected,
    // instead of the server trying to build 2^63 members.
    let reply = common::raw_exchange(
        srv.port,
        b"*3\r\n$11\r\nSRANDMEMBER\r\n$1\r\ns\r\n$20\r\n-9223372036854775807\r\n",
        Duration::from_secs(20),
    );
    assert!(reply.len() < 4 << 20, "{} bytes", reply.len());
    assert!(
        reply.is_empty() || reply.starts_with(b"*9223372036854775807\r\n"),
        "{:?}",
        String::from_utf8_lossy(&reply[..reply.len().min(100)])
    );
    let mut c2 = srv.conn();
    assert_eq!(int(&mut c2, &["SCARD", "s"]), 2);
}

#[test]
fn smove_cases() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    sadd(&mut c, "src", &["1", "2"]);
    sadd(&mut c, "dst", &["x"]);
    assert_eq!(int(&mut c, &["SMOVE", "src", "dst", "1"]), 1);
    assert_eq!(int(&mut c, &["SMOVE", "src", "dst", "9"]), 0);
    assert_eq!(sorted(&mut c, &["SMEMBERS", "dst"]), strs(&["1", "x"]));
    // Into a new key, which is created with the member's encoding.
    assert_eq!(int(&mut c, &["SMOVE", "src", "new", "2"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "src"]), 0);
    assert_eq!(encoding(&mut c, "new"), "intset");
    // Already in the destination: still 1, removed from the source.
    sadd(&mut c, "a", &["m", "n"]);
    sadd(&mut c, "b", &["m"]);
    assert_eq!(int(&mut c, &["SMOVE", "a", "b", "m"]), 1);
    assert_eq!(list(&mut c, &["SMEMBERS", "a"]), strs(&["n"]));
    // Same key: membership only.
    assert_eq!(int(&mut c, &["SMOVE", "a", "a", "n"]), 1);
    assert_eq!(int(&mut c, &["SMOVE", "a", "a", "zz"]), 0);
    assert_eq!(int(&mut c, &["SCARD", "a"]), 1);
    assert_eq!(int(&mut c, &["SMOVE", "nosuch", "a", "n"]), 0);
}

#[test]
fn intersections() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    sadd(&mut c, "a", &["1", "2", "3", "4", "5"]);
    sadd(&mut c, "b", &["5", "4", "3", "x"]);
    sadd(&mut c, "c", &["3", "4", "9"]);
    assert_eq!(
        sorted(&mut c, &["SINTER", "a", "b", "c"]),
        strs(&["3", "4"])
    );
    // The smallest set is an intset: ascending order.
    assert_eq!(list(&mut c, &["SINTER", "a", "c"]), strs(&["3", "4"]));
    assert_eq!(
        list(&mut c, &["SINTER", "a", "nosuch"]),
        Vec::<String>::new()
    );
    assert_eq!(
        list(&mut c, &["SINTER", "a"]),
        strs(&["1", "2", "3", "4", "5"])
    );

    assert_eq!(int(&mut c, &["SINTERCARD", "2", "a", "b"]), 3);
    assert_eq!(int(&mut c, &["SINTERCARD", "2", "a", "b", "LIMIT", "2"]), 2);
    assert_eq!(int(&mut c, &["SINTERCARD", "2", "a", "b", "limit", "0"]), 3);
    assert_eq!(int(&mut c, &["SINTERCARD", "2", "a", "nosuch"]), 0);
    assert_eq!(int(&mut c, &["SINTERCARD", "1", "a", "LIMIT", "3"]), 3);
    let e = |c: &mut Connection, args: &[&str]| err(c, args);
    assert_eq!(
        e(&mut c, &["SINTERCARD", "0", "a"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        e(&mut c, &["SINTERCARD", "x", "a"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        e(&mut c, &["SINTERCARD", "3", "a", "b"]),
        "ERR Number of keys can't be greater than number of args"
    );
    assert_eq!(
        e(&mut c, &["SINTERCARD", "1", "a", "LIMIT", "-1"]),
        "ERR LIMIT can't be negative"
    );
    assert_eq!(
        e(&mut c, &["SINTERCARD", "1", "a", "LIMIT", "x"]),
        "ERR LIMIT can't be negative"
    );
    assert_eq!(e(&mut c, &["SINTERCARD", "1", "a", "LIMIT"]), SYNTAX);
    assert_eq!(e(&mut c, &["SINTERCARD", "1", "a", "b"]), SYNTAX);
    assert_eq!(
        list(
            &mut c,
            &[
                "COMMAND",
                "GETKEYS",
                "SINTERCARD",
                "2",
                "a",
                "b",
                "LIMIT",
                "1"
            ]
        ),
        strs(&["a", "b"])
    );

    // STORE: overwrites any type, drops the TTL, deletes on empty.
    ok(&mut c, &["SET", "d", "string"]);
    ok(&mut c, &["EXPIRE", "d", "100"]);
    assert_eq!(int(&mut c, &["SINTERSTORE", "d", "a", "b"]), 3);
    assert_eq!(list(&mut c, &["SMEMBERS", "d"]), strs(&["3", "4", "5"]));
    assert_eq!(encoding(&mut c, "d"), "intset");
    assert_eq!(int(&mut c, &["TTL", "d"]), -1);
    assert_eq!(int(&mut c, &["SINTERSTORE", "d", "a", "nosuch"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "d"]), 0);
    assert_eq!(int(&mut c, &["SINTERSTORE", "d", "a", "x"]), 0);
    // The destination may be one of the sources.
    assert_eq!(int(&mut c, &["SINTERSTORE", "a", "a", "c"]), 2);
    assert_eq!(list(&mut c, &["SMEMBERS", "a"]), strs(&["3", "4"]));
}

#[test]
fn unions_and_differences() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    sadd(&mut c, "a", &["1", "2", "3"]);
    sadd(&mut c, "b", &["3", "4", "x"]);
    sadd(&mut c, "i", &["5", "4"]);
    assert_eq!(
        sorted(&mut c, &["SUNION", "a", "b", "nosuch"]),
        strs(&["1", "2", "3", "4", "x"])
    );
    assert_eq!(
        list(&mut c, &["SUNION", "i", "a"]),
        strs(&["1", "2", "3", "4", "5"])
    );
    assert_eq!(list(&mut c, &["SDIFF", "a", "b"]), strs(&["1", "2"]));
    assert_eq!(sorted(&mut c, &["SDIFF", "b", "a"]), strs(&["4", "x"]));
    assert_eq!(
        list(&mut c, &["SDIFF", "nosuch", "a"]),
        Vec::<String>::new()
    );
    assert_eq!(list(&mut c, &["SDIFF", "a", "a"]), Vec::<String>::new());
    assert_eq!(
        list(&mut c, &["SDIFF", "a", "nosuch"]),
        strs(&["1", "2", "3"])
    );

    // Integer results out of hashtables are stored as intsets, as Redis
    // builds them.
    assert_eq!(int(&mut c, &["SDIFFSTORE", "d", "b", "a"]), 2);
    assert_eq!(encoding(&mut c, "d"), "hashtable");
    sadd(&mut c, "onlyx", &["x"]);
    assert_eq!(int(&mut c, &["SDIFFSTORE", "d", "b", "onlyx"]), 2);
    assert_eq!(encoding(&mut c, "d"), "intset");
    assert_eq!(list(&mut c, &["SMEMBERS", "d"]), strs(&["3", "4"]));
    assert_eq!(int(&mut c, &["SUNIONSTORE", "u", "a", "i"]), 5);
    assert_eq!(encoding(&mut c, "u"), "intset");
    assert_eq!(int(&mut c, &["SUNIONSTORE", "u", "nosuch"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "u"]), 0);
    assert_eq!(int(&mut c, &["SDIFFSTORE", "a", "a", "i"]), 3);
    assert_eq!(int(&mut c, &["SDIFFSTORE", "a", "a", "a"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "a"]), 0);
}

#[test]
fn sscan_walks_every_member() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let scan = |c: &mut Connection, args: &[&str]| -> (String, Vec<String>) {
        match ok(c, args) {
            Value::Array(v) if v.len() == 2 => {
                let members = match &v[1] {
                    Value::Array(m) => m.iter().map(text).collect(),
                    o => panic!("{o:?}"),
                };
                (text(&v[0]), members)
            }
            v => panic!("{v:?}"),
        }
    };
    assert_eq!(
        scan(&mut c, &["SSCAN", "nosuch", "0"]),
        ("0".into(), vec![])
    );
    // Options are only parsed when the key exists, as in Redis.
    assert_eq!(
        scan(&mut c, &["SSCAN", "nosuch", "0", "COUNT", "0"]),
        ("0".into(), vec![])
    );
    assert_eq!(err(&mut c, &["SSCAN", "nosuch", "x"]), "ERR invalid cursor");

    sadd(&mut c, "i", &["3", "1", "22", "2"]);
    assert_eq!(
        scan(&mut c, &["SSCAN", "i", "0", "COUNT", "1"]),
        ("0".into(), strs(&["1", "2", "3", "22"]))
    );
    assert_eq!(
        scan(&mut c, &["SSCAN", "i", "0", "MATCH", "2*"]),
        ("0".into(), strs(&["2", "22"]))
    );
    assert_eq!(err(&mut c, &["SSCAN", "i", "0", "COUNT", "0"]), SYNTAX);
    assert_eq!(err(&mut c, &["SSCAN", "i", "0", "TYPE", "set"]), SYNTAX);
    assert_eq!(err(&mut c, &["SSCAN", "i", "0", "COUNT"]), SYNTAX);

    let members: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
    for chunk in members.chunks(100) {
        let refs: Vec<&str> = chunk.iter().map(|s| s.as_str()).collect();
        sadd(&mut c, "h", &refs);
    }
    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let (next, got) = scan(&mut c, &["SSCAN", "h", &cursor, "COUNT", "20"]);
        seen.extend(got);
        calls += 1;
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert!(calls > 10);
    assert_eq!(seen.len(), 1000);
    let (_, got) = scan(
        &mut c,
        &["SSCAN", "h", "0", "MATCH", "m99*", "COUNT", "5000"],
    );
    assert_eq!(got.len(), 11);
}

#[test]
fn generic_commands_work_on_sets() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    sadd(&mut c, "s", &["1", "2"]);
    sadd(&mut c, "h", &["a", "b"]);
    assert_eq!(text(&ok(&mut c, &["TYPE", "s"])), "set");
    assert_eq!(int(&mut c, &["COPY", "s", "s2"]), 1);
    assert_eq!(encoding(&mut c, "s2"), "intset");
    assert_eq!(int(&mut c, &["COPY", "h", "h2"]), 1);
    assert_eq!(encoding(&mut c, "h2"), "hashtable");
    sadd(&mut c, "h2", &["c"]);
    assert_eq!(int(&mut c, &["SCARD", "h"]), 2);
    ok(&mut c, &["RENAME", "h2", "h3"]);
    assert_eq!(sorted(&mut c, &["SMEMBERS", "h3"]), strs(&["a", "b", "c"]));
    assert_eq!(int(&mut c, &["MOVE", "h3", "1"]), 1);
    ok(&mut c, &["SELECT", "1"]);
    assert_eq!(int(&mut c, &["SCARD", "h3"]), 3);
    ok(&mut c, &["SELECT", "0"]);
    match ok(&mut c, &["SCAN", "0", "TYPE", "set", "COUNT", "100"]) {
        Value::Array(v) => {
            let mut keys: Vec<String> = match &v[1] {
                Value::Array(k) => k.iter().map(text).collect(),
                o => panic!("{o:?}"),
            };
            keys.sort();
            assert_eq!(keys, strs(&["h", "s", "s2"]));
        }
        v => panic!("{v:?}"),
    }
    assert!(int(&mut c, &["MEMORY", "USAGE", "h"]) > 0);
}

#[test]
fn resp3_replies_sets() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    sadd(&mut c, "i", &["2", "1"]);
    let out = common::raw_exchange(
        srv.port,
        b"HELLO 3\r\nSMEMBERS i\r\nSPOP i 0\r\nSRANDMEMBER i 5\r\nSUNION i\r\nQUIT\r\n",
        Duration::from_secs(5),
    );
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.contains("~2\r\n$1\r\n1\r\n$1\r\n2\r\n~0\r\n*2\r\n$1\r\n1\r\n$1\r\n2\r\n~2\r\n"),
        "{text}"
    );
}
