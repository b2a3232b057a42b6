//! Generic keyspace commands against the real server: DEL, UNLINK, EXISTS,
//! TYPE, KEYS, SCAN, RANDOMKEY, RENAME(NX), MOVE, COPY, TOUCH, DBSIZE,
//! FLUSHDB, FLUSHALL, SWAPDB, OBJECT.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::q;
use redis::Value;

/// Runs a command that must succeed.
fn ok(con: &mut redis::Connection, args: &[&str]) -> Value {
    q(con, args).unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// Runs a command that must fail; returns the full error line ("ERR ...").
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

fn bulk(v: &[u8]) -> Value {
    Value::BulkString(v.to_vec())
}

fn status(s: &str) -> Value {
    Value::SimpleString(s.into())
}

/// The elements of an array reply as byte strings, sorted.
fn sorted_strings(v: Value) -> Vec<Vec<u8>> {
    let Value::Array(items) = v else {
        panic!("expected an array, got {v:?}");
    };
    let mut out: Vec<Vec<u8>> = items
        .into_iter()
        .map(|i| match i {
            Value::BulkString(b) => b,
            other => panic!("expected a bulk string, got {other:?}"),
        })
        .collect();
    out.sort();
    out
}

fn strings(list: &[&str]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = list.iter().map(|s| s.as_bytes().to_vec()).collect();
    v.sort();
    v
}

#[test]
fn del_unlink_exists_touch_count_keys() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["SET", "a", "1"]);
    ok(&mut con, &["SET", "b", "2"]);
    ok(&mut con, &["SET", "c", "3"]);
    assert_eq!(int(&mut con, &["EXISTS", "a", "a", "b", "nokey"]), 3);
    assert_eq!(int(&mut con, &["TOUCH", "a", "a", "nokey"]), 2);
    assert_eq!(int(&mut con, &["DEL", "a", "nokey", "a"]), 1);
    assert_eq!(int(&mut con, &["EXISTS", "a"]), 0);
    assert_eq!(int(&mut con, &["UNLINK", "b", "c", "b"]), 2);
    assert_eq!(int(&mut con, &["DBSIZE"]), 0);
    assert_eq!(int(&mut con, &["DEL", "nokey"]), 0);
    assert_eq!(
        err(&mut con, &["DEL"]),
        "ERR wrong number of arguments for 'del' command"
    );
    assert_eq!(
        err(&mut con, &["EXISTS"]),
        "ERR wrong number of arguments for 'exists' command"
    );
}

#[test]
fn type_and_keys_patterns() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    for k in ["foo", "foobar", "fxo", "bar", "hello", "hallo", "hillo", ""] {
        ok(&mut con, &["SET", k, "v"]);
    }
    assert_eq!(ok(&mut con, &["TYPE", "foo"]), status("string"));
    assert_eq!(ok(&mut con, &["TYPE", "nokey"]), status("none"));
    let all = sorted_strings(ok(&mut con, &["KEYS", "*"]));
    assert_eq!(
        all,
        strings(&["foo", "foobar", "fxo", "bar", "hello", "hallo", "hillo", ""])
    );
    assert_eq!(
        sorted_strings(ok(&mut con, &["KEYS", "f*"])),
        strings(&["foo", "foobar", "fxo"])
    );
    assert_eq!(
        sorted_strings(ok(&mut con, &["KEYS", "f?o"])),
        strings(&["foo", "fxo"])
    );
    assert_eq!(
        sorted_strings(ok(&mut con, &["KEYS", "h[ae]llo"])),
        strings(&["hello", "hallo"])
    );
    assert_eq!(
        sorted_strings(ok(&mut con, &["KEYS", "h[^e]llo"])),
        strings(&["hallo", "hillo"])
    );
    assert_eq!(
        sorted_strings(ok(&mut con, &["KEYS", "nomatch*"])),
        strings(&[])
    );
    // KEYS only sees the selected database.
    ok(&mut con, &["SELECT", "1"]);
    assert_eq!(sorted_strings(ok(&mut con, &["KEYS", "*"])), strings(&[]));
}

/// Runs a full SCAN with the given options, checking the reply shape.
fn scan_all(con: &mut redis::Connection, opts: &[&str]) -> HashSet<Vec<u8>> {
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    for _ in 0..100_000 {
        let mut args = vec!["SCAN", cursor.as_str()];
        args.extend_from_slice(opts);
        let Value::Array(mut parts) = ok(con, &args) else {
            panic!("SCAN reply is not an array");
        };
        assert_eq!(parts.len(), 2);
        let keys = parts.pop().unwrap();
        let Value::BulkString(next) = parts.pop().unwrap() else {
            panic!("SCAN cursor is not a bulk string");
        };
        seen.extend(sorted_strings(keys));
        cursor = String::from_utf8(next).unwrap();
        if cursor == "0" {
            return seen;
        }
    }
    panic!("SCAN did not terminate");
}

#[test]
fn scan_walks_everything_with_filters() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("SET").arg(format!("key:{i}")).arg(i).ignore();
    }
    for i in 0..50 {
        pipe.cmd("SET").arg(format!("other:{i}")).arg(i).ignore();
    }
    pipe.query::<()>(&mut con).unwrap();
    assert_eq!(scan_all(&mut con, &[]).len(), 1050);
    assert_eq!(scan_all(&mut con, &["COUNT", "7"]).len(), 1050);
    assert_eq!(scan_all(&mut con, &["COUNT", "100000"]).len(), 1050);
    let others = scan_all(&mut con, &["MATCH", "other:*", "COUNT", "3"]);
    assert_eq!(others.len(), 50);
    assert!(others.iter().all(|k| k.starts_with(b"other:")));
    assert_eq!(scan_all(&mut con, &["MATCH", "*"]).len(), 1050);
    assert_eq!(scan_all(&mut con, &["TYPE", "STRING"]).len(), 1050);
    assert_eq!(scan_all(&mut con, &["TYPE", "hash"]).len(), 0);
    assert_eq!(
        scan_all(&mut con, &["type", "nosuchtype", "match", "key:*"]).len(),
        0
    );
    // Cursors are parsed like Redis's strtoul: "" is 0, "-1" wraps.
    let Value::Array(parts) = ok(&mut con, &["SCAN", "", "COUNT", "2000"]) else {
        panic!("array expected");
    };
    assert_eq!(parts[0], bulk(b"0"));
    assert_eq!(sorted_strings(parts[1].clone()).len(), 1050);
    assert!(matches!(ok(&mut con, &["SCAN", "-1"]), Value::Array(_)));
    assert!(matches!(
        ok(&mut con, &["SCAN", "18446744073709551615"]),
        Value::Array(_)
    ));
    for bad in ["18446744073709551616", "x", " 1", "1 ", "-", "1.5"] {
        assert_eq!(
            err(&mut con, &["SCAN", bad]),
            "ERR invalid cursor",
            "cursor {bad:?}"
        );
    }
    assert_eq!(
        err(&mut con, &["SCAN", "0", "COUNT", "0"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut con, &["SCAN", "0", "COUNT", "-1"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut con, &["SCAN", "0", "COUNT", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(err(&mut con, &["SCAN", "0", "MATCH"]), "ERR syntax error");
    assert_eq!(
        err(&mut con, &["SCAN", "0", "FOO", "bar"]),
        "ERR syntax error"
    );
    assert_eq!(err(&mut con, &["SCAN", "x", "FOO"]), "ERR invalid cursor");
}

#[test]
fn scan_and_keys_inside_a_transaction() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["SET", "a", "1"]);
    ok(&mut con, &["SET", "b", "2"]);
    ok(&mut con, &["MULTI"]);
    ok(&mut con, &["SCAN", "0", "COUNT", "100"]);
    ok(&mut con, &["KEYS", "*"]);
    ok(&mut con, &["DBSIZE"]);
    ok(&mut con, &["RANDOMKEY"]);
    let Value::Array(replies) = ok(&mut con, &["EXEC"]) else {
        panic!("EXEC reply");
    };
    let Value::Array(scan) = &replies[0] else {
        panic!("SCAN reply");
    };
    assert_eq!(sorted_strings(scan[1].clone()), strings(&["a", "b"]));
    assert_eq!(sorted_strings(replies[1].clone()), strings(&["a", "b"]));
    assert_eq!(replies[2], Value::Int(2));
    assert!(matches!(&replies[3], Value::BulkString(k) if k == b"a" || k == b"b"));
}

#[test]
fn randomkey_and_dbsize() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    assert_eq!(ok(&mut con, &["RANDOMKEY"]), Value::Nil);
    assert_eq!(int(&mut con, &["DBSIZE"]), 0);
    for k in ["x", "y", "z"] {
        ok(&mut con, &["SET", k, "1"]);
    }
    assert_eq!(int(&mut con, &["DBSIZE"]), 3);
    let mut seen = HashSet::new();
    for _ in 0..200 {
        let Value::BulkString(k) = ok(&mut con, &["RANDOMKEY"]) else {
            panic!("RANDOMKEY reply");
        };
        seen.insert(k);
    }
    assert_eq!(seen, strings(&["x", "y", "z"]).into_iter().collect());
    assert_eq!(
        err(&mut con, &["DBSIZE", "x"]),
        "ERR wrong number of arguments for 'dbsize' command"
    );
}

#[test]
fn rename_and_renamenx() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    assert_eq!(err(&mut con, &["RENAME", "nokey", "b"]), "ERR no such key");
    assert_eq!(
        err(&mut con, &["RENAME", "nokey", "nokey"]),
        "ERR no such key"
    );
    assert_eq!(
        err(&mut con, &["RENAMENX", "nokey", "b"]),
        "ERR no such key"
    );
    ok(&mut con, &["SET", "a", "hello"]);
    assert_eq!(ok(&mut con, &["RENAME", "a", "a"]), Value::Okay);
    assert_eq!(int(&mut con, &["RENAMENX", "a", "a"]), 0);
    assert_eq!(ok(&mut con, &["GET", "a"]), bulk(b"hello"));

    ok(&mut con, &["EXPIRE", "a", "100"]);
    assert_eq!(ok(&mut con, &["RENAME", "a", "b"]), Value::Okay);
    assert_eq!(int(&mut con, &["EXISTS", "a"]), 0);
    assert_eq!(ok(&mut con, &["GET", "b"]), bulk(b"hello"));
    let ttl = int(&mut con, &["TTL", "b"]);
    assert!(
        (99..=100).contains(&ttl),
        "TTL kept across RENAME, got {ttl}"
    );

    // RENAME replaces the destination, TTL included.
    ok(&mut con, &["SET", "c", "other"]);
    ok(&mut con, &["EXPIRE", "c", "500"]);
    ok(&mut con, &["SET", "d", "plain"]);
    assert_eq!(ok(&mut con, &["RENAME", "d", "c"]), Value::Okay);
    assert_eq!(ok(&mut con, &["GET", "c"]), bulk(b"plain"));
    assert_eq!(int(&mut con, &["TTL", "c"]), -1);

    assert_eq!(int(&mut con, &["RENAMENX", "b", "c"]), 0);
    assert_eq!(ok(&mut con, &["GET", "b"]), bulk(b"hello"));
    assert_eq!(int(&mut con, &["RENAMENX", "b", "e"]), 1);
    assert_eq!(ok(&mut con, &["GET", "e"]), bulk(b"hello"));
    assert_eq!(int(&mut con, &["EXISTS", "b"]), 0);
    assert_eq!(int(&mut con, &["DBSIZE"]), 2);
}

#[test]
fn move_between_databases() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["SET", "k", "v"]);
    assert_eq!(
        err(&mut con, &["MOVE", "k", "0"]),
        "ERR source and destination objects are the same"
    );
    assert_eq!(
        err(&mut con, &["MOVE", "nokey", "0"]),
        "ERR source and destination objects are the same"
    );
    assert_eq!(
        err(&mut con, &["MOVE", "k", "16"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        err(&mut con, &["MOVE", "k", "-1"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        err(&mut con, &["MOVE", "k", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut con, &["MOVE", "k", "4294967297"]),
        "ERR value is out of range, value must between -2147483648 and 2147483647"
    );
    assert_eq!(int(&mut con, &["MOVE", "nokey", "1"]), 0);
    ok(&mut con, &["PEXPIRE", "k", "100000"]);
    assert_eq!(int(&mut con, &["MOVE", "k", "1"]), 1);
    assert_eq!(int(&mut con, &["EXISTS", "k"]), 0);
    ok(&mut con, &["SET", "k", "v0"]);
    // The destination already has it: nothing moves.
    ok(&mut con, &["SELECT", "1"]);
    assert_eq!(int(&mut con, &["MOVE", "k", "0"]), 0);
    assert_eq!(ok(&mut con, &["GET", "k"]), bulk(b"v"));
    let pttl = int(&mut con, &["PTTL", "k"]);
    assert!(
        pttl > 90_000 && pttl <= 100_000,
        "TTL kept across MOVE, got {pttl}"
    );
}

#[test]
fn copy_with_options() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["SET", "src", "value"]);
    assert_eq!(
        err(&mut con, &["COPY", "src", "src"]),
        "ERR source and destination objects are the same"
    );
    assert_eq!(
        err(&mut con, &["COPY", "nokey", "nokey"]),
        "ERR source and destination objects are the same"
    );
    assert_eq!(
        err(&mut con, &["COPY", "src", "dst", "DB"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut con, &["COPY", "src", "dst", "FOO"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut con, &["COPY", "src", "dst", "DB", "16"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        err(&mut con, &["COPY", "src", "dst", "DB", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut con, &["COPY", "src", "dst", "DB", "99999999999"]),
        "ERR value is out of range, value must between -2147483648 and 2147483647"
    );
    assert_eq!(int(&mut con, &["COPY", "nokey", "dst"]), 0);

    ok(&mut con, &["EXPIRE", "src", "1000"]);
    assert_eq!(int(&mut con, &["COPY", "src", "dst"]), 1);
    assert_eq!(ok(&mut con, &["GET", "dst"]), bulk(b"value"));
    assert!(int(&mut con, &["TTL", "dst"]) > 990, "TTL copied");
    // The copy is independent of the source.
    ok(&mut con, &["SET", "src", "changed"]);
    assert_eq!(ok(&mut con, &["GET", "dst"]), bulk(b"value"));

    assert_eq!(int(&mut con, &["COPY", "src", "dst"]), 0);
    assert_eq!(int(&mut con, &["COPY", "src", "dst", "REPLACE"]), 1);
    assert_eq!(ok(&mut con, &["GET", "dst"]), bulk(b"changed"));
    assert_eq!(int(&mut con, &["TTL", "dst"]), -1);

    // Same key name, other database; last DB option wins.
    assert_eq!(
        int(
            &mut con,
            &["COPY", "src", "src", "db", "2", "DB", "3", "replace", "replace"]
        ),
        1
    );
    ok(&mut con, &["SELECT", "3"]);
    assert_eq!(ok(&mut con, &["GET", "src"]), bulk(b"changed"));
    ok(&mut con, &["SELECT", "2"]);
    assert_eq!(int(&mut con, &["EXISTS", "src"]), 0);
}

#[test]
fn flushdb_flushall_and_swapdb() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    for db in ["0", "1", "2"] {
        ok(&mut con, &["SELECT", db]);
        for i in 0..20 {
            ok(&mut con, &["SET", &format!("k{i}"), db]);
        }
    }
    assert_eq!(err(&mut con, &["FLUSHDB", "foo"]), "ERR syntax error");
    assert_eq!(
        err(&mut con, &["FLUSHDB", "ASYNC", "x"]),
        "ERR syntax error"
    );
    assert_eq!(err(&mut con, &["FLUSHALL", "foo"]), "ERR syntax error");

    // db 2 is selected.
    assert_eq!(ok(&mut con, &["SWAPDB", "0", "2"]), Value::Okay);
    assert_eq!(ok(&mut con, &["GET", "k0"]), bulk(b"0"));
    assert_eq!(ok(&mut con, &["SWAPDB", "1", "1"]), Value::Okay);
    assert_eq!(
        err(&mut con, &["SWAPDB", "x", "1"]),
        "ERR invalid first DB index"
    );
    assert_eq!(
        err(&mut con, &["SWAPDB", "1", "x"]),
        "ERR invalid second DB index"
    );
    assert_eq!(
        err(&mut con, &["SWAPDB", "99999999999", "1"]),
        "ERR invalid first DB index"
    );
    assert_eq!(
        err(&mut con, &["SWAPDB", "16", "x"]),
        "ERR invalid second DB index"
    );
    assert_eq!(
        err(&mut con, &["SWAPDB", "0", "16"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        err(&mut con, &["SWAPDB", "-1", "0"]),
        "ERR DB index is out of range"
    );

    assert_eq!(ok(&mut con, &["FLUSHDB", "sync"]), Value::Okay);
    assert_eq!(int(&mut con, &["DBSIZE"]), 0);
    ok(&mut con, &["SELECT", "1"]);
    assert_eq!(int(&mut con, &["DBSIZE"]), 20);
    assert_eq!(ok(&mut con, &["FLUSHDB", "ASYNC"]), Value::Okay);
    assert_eq!(int(&mut con, &["DBSIZE"]), 0);
    ok(&mut con, &["SELECT", "0"]);
    assert_eq!(int(&mut con, &["DBSIZE"]), 20);
    assert_eq!(ok(&mut con, &["FLUSHALL"]), Value::Okay);
    assert_eq!(int(&mut con, &["DBSIZE"]), 0);
    ok(&mut con, &["SET", "a", "1"]);
    ok(&mut con, &["SELECT", "5"]);
    ok(&mut con, &["SET", "b", "1"]);
    assert_eq!(ok(&mut con, &["FLUSHALL", "ASYNC"]), Value::Okay);
    assert_eq!(int(&mut con, &["DBSIZE"]), 0);
    ok(&mut con, &["SELECT", "0"]);
    assert_eq!(int(&mut con, &["DBSIZE"]), 0);
}

#[test]
fn writes_abort_transactions_watching_the_keys() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    let mut other = srv.conn();
    let cases: &[&[&str]] = &[
        &["DEL", "w"],
        &["RENAME", "w", "w2"],
        &["RENAME", "src", "w"],
        &["COPY", "src", "w", "REPLACE"],
        &["MOVE", "w", "1"],
        &["FLUSHDB"],
        &["FLUSHALL"],
        &["SWAPDB", "0", "1"],
    ];
    for case in cases {
        ok(&mut other, &["FLUSHALL"]);
        ok(&mut other, &["SET", "w", "1"]);
        ok(&mut other, &["SET", "src", "1"]);
        ok(&mut con, &["WATCH", "w"]);
        ok(&mut other, case);
        ok(&mut con, &["MULTI"]);
        ok(&mut con, &["GET", "w"]);
        assert_eq!(
            ok(&mut con, &["EXEC"]),
            Value::Nil,
            "{case:?} must abort the transaction"
        );
    }
    // Reads do not.
    ok(&mut other, &["SET", "w", "1"]);
    ok(&mut con, &["WATCH", "w"]);
    for read in [
        &["EXISTS", "w"][..],
        &["TYPE", "w"],
        &["TOUCH", "w"],
        &["OBJECT", "ENCODING", "w"],
        &["KEYS", "*"],
    ] {
        ok(&mut other, read);
    }
    ok(&mut con, &["MULTI"]);
    ok(&mut con, &["GET", "w"]);
    assert_eq!(ok(&mut con, &["EXEC"]), Value::Array(vec![bulk(b"1")]));
}

#[test]
fn object_encoding_refcount_and_help() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["SET", "int", "12345"]);
    ok(&mut con, &["SET", "small", "42"]);
    ok(&mut con, &["SET", "emb", "hello"]);
    ok(&mut con, &["SET", "raw", &"x".repeat(100)]);
    assert_eq!(ok(&mut con, &["OBJECT", "ENCODING", "int"]), bulk(b"int"));
    assert_eq!(
        ok(&mut con, &["object", "encoding", "emb"]),
        bulk(b"embstr")
    );
    assert_eq!(ok(&mut con, &["OBJECT", "ENCODING", "raw"]), bulk(b"raw"));
    assert_eq!(ok(&mut con, &["OBJECT", "ENCODING", "nokey"]), Value::Nil);
    assert_eq!(int(&mut con, &["OBJECT", "REFCOUNT", "emb"]), 1);
    assert_eq!(int(&mut con, &["OBJECT", "REFCOUNT", "int"]), 1);
    assert_eq!(int(&mut con, &["OBJECT", "REFCOUNT", "small"]), 2147483647);
    assert_eq!(ok(&mut con, &["OBJECT", "REFCOUNT", "nokey"]), Value::Nil);
    assert_eq!(ok(&mut con, &["OBJECT", "IDLETIME", "nokey"]), Value::Nil);
    assert_eq!(ok(&mut con, &["OBJECT", "FREQ", "nokey"]), Value::Nil);
    assert_eq!(
        err(&mut con, &["OBJECT", "FREQ", "emb"]),
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when \
         switching between policies at runtime LRU and LFU data will take some time to adjust."
    );
    assert_eq!(
        err(&mut con, &["OBJECT"]),
        "ERR wrong number of arguments for 'object' command"
    );
    assert_eq!(
        err(&mut con, &["OBJECT", "ENCODING"]),
        "ERR wrong number of arguments for 'object|encoding' command"
    );
    assert_eq!(
        err(&mut con, &["OBJECT", "foo"]),
        "ERR unknown subcommand 'foo'. Try OBJECT HELP."
    );
    let Value::Array(help) = ok(&mut con, &["OBJECT", "HELP"]) else {
        panic!("HELP reply");
    };
    assert_eq!(
        help.first(),
        Some(&status(
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
        ))
    );
    for sub in [
        "ENCODING <key>",
        "FREQ <key>",
        "IDLETIME <key>",
        "REFCOUNT <key>",
        "HELP",
    ] {
        assert!(help.contains(&status(sub)), "help lists {sub}");
    }
    assert_eq!(help.last(), Some(&status("    Prints this help.")));
}

#[test]
fn object_idletime_tracks_accesses() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["SET", "k", "v"]);
    ok(&mut con, &["SET", "t", "v"]);
    assert!(int(&mut con, &["OBJECT", "IDLETIME", "k"]) <= 1);
    std::thread::sleep(Duration::from_millis(2200));
    // Inspecting a key is not an access.
    for args in [
        &["TTL", "k"][..],
        &["TYPE", "k"],
        &["EXISTS", "k"],
        &["OBJECT", "ENCODING", "k"],
    ] {
        ok(&mut con, args);
    }
    assert!(int(&mut con, &["OBJECT", "IDLETIME", "k"]) >= 2);
    ok(&mut con, &["GET", "k"]);
    assert!(int(&mut con, &["OBJECT", "IDLETIME", "k"]) <= 1);
    assert!(int(&mut con, &["OBJECT", "IDLETIME", "t"]) >= 2);
    assert_eq!(int(&mut con, &["TOUCH", "t"]), 1);
    assert!(int(&mut con, &["OBJECT", "IDLETIME", "t"]) <= 1);
}

#[test]
fn object_freq_under_an_lfu_policy() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    ok(
        &mut con,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
    );
    ok(&mut con, &["SET", "k", "v"]);
    assert_eq!(
        int(&mut con, &["OBJECT", "FREQ", "k"]),
        5,
        "new keys start at LFU_INIT_VAL"
    );
    for _ in 0..200 {
        ok(&mut con, &["GET", "k"]);
    }
    let freq = int(&mut con, &["OBJECT", "FREQ", "k"]);
    assert!(
        freq > 5 && freq < 255,
        "counter grows logarithmically, got {freq}"
    );
    assert_eq!(
        err(&mut con, &["OBJECT", "IDLETIME", "k"]),
        "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching \
         between policies at runtime LRU and LFU data will take some time to adjust."
    );
    ok(
        &mut con,
        &["CONFIG", "SET", "maxmemory-policy", "volatile-lru"],
    );
    // As in Redis, an entry keeps one clock, the policy's: after a switch
    // the idle time is meaningful once the key has been accessed.
    ok(&mut con, &["GET", "k"]);
    assert!(int(&mut con, &["OBJECT", "IDLETIME", "k"]) <= 1);
}
