//! HyperLogLog commands through the real server: values are strings in
//! Redis's format, counts are close, the cache lives in the header,
//! PFMERGE unions, corrupt and foreign values get Redis's errors, and
//! `hll-sparse-max-bytes` decides the encoding.

mod common;

use common::{err, ok, q, Server};
use redis::Value;

fn get(con: &mut redis::Connection, key: &str) -> Vec<u8> {
    match ok(con, &["GET", key]) {
        Value::BulkString(b) => b,
        other => panic!("GET {key}: {other:?}"),
    }
}

fn int(con: &mut redis::Connection, args: &[&str]) -> i64 {
    match ok(con, args) {
        Value::Int(n) => n,
        other => panic!("{args:?}: {other:?}"),
    }
}

fn pfadd_range(con: &mut redis::Connection, key: &str, range: std::ops::Range<u32>) {
    let mut c = redis::cmd("PFADD");
    c.arg(key);
    for i in range {
        c.arg(format!("element:{i}"));
    }
    let _: i64 = c.query(con).unwrap();
}

#[test]
fn hlls_are_plain_strings_in_redis_format() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    assert_eq!(
        int(&mut con, &["PFADD", "h"]),
        1,
        "PFADD with no elements creates"
    );
    assert_eq!(int(&mut con, &["PFADD", "h"]), 0);
    assert_eq!(
        ok(&mut con, &["TYPE", "h"]),
        Value::SimpleString("string".into())
    );
    assert_eq!(
        ok(&mut con, &["OBJECT", "ENCODING", "h"]),
        Value::BulkString(b"raw".to_vec())
    );
    let v = get(&mut con, "h");
    assert_eq!(&v[..5], b"HYLL\x01", "a new HLL is sparse");
    assert_eq!(int(&mut con, &["PFADD", "h", "a", "b", "c"]), 1);
    assert_eq!(int(&mut con, &["PFADD", "h", "a", "b", "c"]), 0);
    assert_eq!(int(&mut con, &["PFCOUNT", "h"]), 3);
    // SET of the bytes makes the same HLL elsewhere.
    let bytes = get(&mut con, "h");
    let _: () = redis::cmd("SET")
        .arg("copy")
        .arg(&bytes)
        .query(&mut con)
        .unwrap();
    assert_eq!(int(&mut con, &["PFCOUNT", "copy"]), 3);
}

#[test]
fn counts_are_close_and_the_cache_is_kept_in_the_header() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    pfadd_range(&mut con, "h", 0..20_000);
    let stale = get(&mut con, "h");
    assert_ne!(stale[15] & 0x80, 0, "PFADD marks the cached count stale");
    let n = int(&mut con, &["PFCOUNT", "h"]);
    assert!((n - 20_000).abs() < 20_000 * 2 / 100, "estimate {n}");
    let cached = get(&mut con, "h");
    assert_eq!(cached[15] & 0x80, 0, "PFCOUNT caches the count");
    assert_eq!(
        u64::from_le_bytes(cached[8..16].try_into().unwrap()),
        n as u64
    );
    assert_eq!(&cached[16..], &stale[16..], "only the header changed");
    assert_eq!(
        ok(&mut con, &["PFDEBUG", "ENCODING", "h"]),
        Value::SimpleString("dense".into())
    );
}

#[test]
fn unions_count_and_merge() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    pfadd_range(&mut con, "a", 0..1000);
    pfadd_range(&mut con, "b", 500..1500);
    let (a, b) = (get(&mut con, "a"), get(&mut con, "b"));
    let union = int(&mut con, &["PFCOUNT", "a", "b", "missing"]);
    assert!((union - 1500).abs() < 30, "union {union}");
    // Counting several keys writes nothing.
    assert_eq!((get(&mut con, "a"), get(&mut con, "b")), (a, b));
    assert_eq!(ok(&mut con, &["PFMERGE", "u", "a", "b"]), Value::Okay);
    assert_eq!(int(&mut con, &["PFCOUNT", "u"]), union);
    // The destination is one of the merged HLLs.
    pfadd_range(&mut con, "d", 2000..2100);
    assert_eq!(ok(&mut con, &["PFMERGE", "d", "a"]), Value::Okay);
    let merged = int(&mut con, &["PFCOUNT", "d"]);
    assert!((merged - 1100).abs() < 30, "merged {merged}");
    assert_eq!(ok(&mut con, &["PFMERGE", "empty"]), Value::Okay);
    assert_eq!(int(&mut con, &["PFCOUNT", "empty"]), 0);
}

#[test]
fn foreign_and_corrupt_values_get_redis_errors() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["SET", "s", "not an hll"]);
    ok(&mut con, &["SET", "n", "12345"]);
    ok(&mut con, &["RPUSH", "l", "x"]);
    let not_hll = "WRONGTYPE Key is not a valid HyperLogLog string value.";
    for c in [
        &["PFADD", "s", "a"][..],
        &["PFCOUNT", "n"],
        &["PFCOUNT", "h", "s"],
        &["PFMERGE", "s"],
        &["PFDEBUG", "ENCODING", "s"],
    ] {
        assert_eq!(err(&mut con, c), not_hll, "{c:?}");
    }
    assert!(err(&mut con, &["PFADD", "l", "a"]).starts_with("WRONGTYPE Operation"));
    assert!(err(&mut con, &["PFMERGE", "d", "l"]).starts_with("WRONGTYPE Operation"));
    // A sparse HLL whose opcodes cover too many registers.
    ok(&mut con, &["PFADD", "bad", "a", "b"]);
    ok(&mut con, &["APPEND", "bad", "\x7f\x7f"]);
    let corrupt = "INVALIDOBJ Corrupted HLL object detected";
    assert_eq!(err(&mut con, &["PFCOUNT", "bad"]), corrupt);
    assert_eq!(err(&mut con, &["PFCOUNT", "bad", "s2"]), corrupt);
    assert_eq!(err(&mut con, &["PFMERGE", "x", "bad"]), corrupt);
    assert_eq!(
        err(&mut con, &["PFDEBUG", "GETREG", "nokey"]),
        "ERR The specified key does not exist"
    );
    ok(&mut con, &["PFADD", "h", "a"]);
    assert_eq!(
        err(&mut con, &["PFDEBUG", "what", "h"]),
        "ERR Unknown PFDEBUG subcommand 'what'"
    );
    // The server survives all of it.
    assert_eq!(ok(&mut con, &["PING"]), Value::SimpleString("PONG".into()));
}

#[test]
fn sparse_max_bytes_decides_when_an_hll_turns_dense() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["CONFIG", "SET", "hll-sparse-max-bytes", "100"]);
    pfadd_range(&mut con, "h", 0..50);
    assert_eq!(
        ok(&mut con, &["PFDEBUG", "ENCODING", "h"]),
        Value::SimpleString("dense".into())
    );
    assert_eq!(get(&mut con, "h").len(), 12304);
    ok(&mut con, &["CONFIG", "SET", "hll-sparse-max-bytes", "3000"]);
    pfadd_range(&mut con, "s", 0..50);
    assert_eq!(
        ok(&mut con, &["PFDEBUG", "ENCODING", "s"]),
        Value::SimpleString("sparse".into())
    );
    let decoded = ok(&mut con, &["PFDEBUG", "DECODE", "s"]);
    assert!(
        matches!(decoded, Value::BulkString(ref t) if t.starts_with(b"Z:") || t.starts_with(b"z:") || t.starts_with(b"v:"))
    );
    assert_eq!(int(&mut con, &["PFDEBUG", "TODENSE", "s"]), 1);
    assert_eq!(int(&mut con, &["PFDEBUG", "TODENSE", "s"]), 0);
    assert_eq!(
        err(&mut con, &["PFDEBUG", "DECODE", "s"]),
        "ERR HLL encoding is not sparse"
    );
    let regs = ok(&mut con, &["PFDEBUG", "GETREG", "s"]);
    assert!(matches!(regs, Value::Array(ref r) if r.len() == 16384));
    // Both encodings estimate the same.
    assert_eq!(
        int(&mut con, &["PFCOUNT", "s"]),
        int(&mut con, &["PFCOUNT", "h"])
    );
}

#[test]
fn pfadd_keeps_the_ttl_and_pfselftest_passes() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["PFADD", "h", "a"]);
    ok(&mut con, &["EXPIRE", "h", "1000"]);
    ok(&mut con, &["PFADD", "h", "b"]);
    assert!(int(&mut con, &["TTL", "h"]) > 0);
    assert_eq!(q(&mut con, &["PFSELFTEST"]).unwrap(), Value::Okay);
}
