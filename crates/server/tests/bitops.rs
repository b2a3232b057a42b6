//! Bit commands (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD,
//! BITFIELD_RO) against the real binary: replies, edge cases and the exact
//! error strings of Redis 7.0.

mod common;

use common::{err, ok, Server};
use redis::{Connection, Value};

const SYNTAX: &str = "ERR syntax error";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BAD_BIT: &str = "ERR bit is not an integer or out of range";
const BAD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// Runs a command with binary arguments and returns the raw reply.
fn qb(con: &mut Connection, args: &[&[u8]]) -> redis::RedisResult<Value> {
    let mut c = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
}

/// Runs a command that must answer an integer.
fn int(con: &mut Connection, args: &[&str]) -> i64 {
    match ok(con, args) {
        Value::Int(n) => n,
        v => panic!("{args:?} replied {v:?}"),
    }
}

/// The raw bytes stored at `key`.
fn get(con: &mut Connection, key: &str) -> Vec<u8> {
    match ok(con, &["GET", key]) {
        Value::BulkString(b) => b,
        v => panic!("GET {key} replied {v:?}"),
    }
}

/// Stores raw bytes at `key`.
fn set(con: &mut Connection, key: &str, value: &[u8]) {
    qb(con, &[b"SET", key.as_bytes(), value]).unwrap();
}

/// A BITFIELD/BITFIELD_RO reply as integers, None for nulls.
fn fields(con: &mut Connection, args: &[&str]) -> Vec<Option<i64>> {
    match ok(con, args) {
        Value::Array(items) => items
            .into_iter()
            .map(|v| match v {
                Value::Int(n) => Some(n),
                Value::Nil => None,
                v => panic!("{args:?} item {v:?}"),
            })
            .collect(),
        v => panic!("{args:?} replied {v:?}"),
    }
}

#[test]
fn setbit_and_getbit() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    assert_eq!(int(&mut con, &["SETBIT", "k", "7", "1"]), 0);
    assert_eq!(get(&mut con, "k"), b"\x01");
    assert_eq!(int(&mut con, &["SETBIT", "k", "7", "1"]), 1);
    assert_eq!(int(&mut con, &["GETBIT", "k", "7"]), 1);
    assert_eq!(int(&mut con, &["GETBIT", "k", "6"]), 0);
    assert_eq!(int(&mut con, &["GETBIT", "k", "4294967295"]), 0);
    assert_eq!(int(&mut con, &["SETBIT", "k", "20", "1"]), 0);
    assert_eq!(get(&mut con, "k"), b"\x01\x00\x08");
    assert_eq!(int(&mut con, &["SETBIT", "k", "7", "0"]), 1);
    assert_eq!(get(&mut con, "k"), b"\x00\x00\x08");
    assert_eq!(
        ok(&mut con, &["OBJECT", "ENCODING", "k"]),
        Value::BulkString(b"raw".to_vec())
    );
    assert_eq!(int(&mut con, &["GETBIT", "missing", "0"]), 0);
    assert_eq!(int(&mut con, &["EXISTS", "missing"]), 0);

    // An integer-encoded string is read as its digits: '1' is 0b00110001.
    ok(&mut con, &["SET", "n", "1"]);
    let bits: Vec<i64> = (0..8)
        .map(|i| int(&mut con, &["GETBIT", "n", &i.to_string()]))
        .collect();
    assert_eq!(bits, [0, 0, 1, 1, 0, 0, 0, 1]);
    assert_eq!(int(&mut con, &["SETBIT", "n", "6", "1"]), 0);
    assert_eq!(get(&mut con, "n"), b"3");
    assert_eq!(
        ok(&mut con, &["OBJECT", "ENCODING", "n"]),
        Value::BulkString(b"raw".to_vec())
    );

    // The TTL survives an in-place edit.
    ok(&mut con, &["SET", "t", "a", "EX", "1000"]);
    int(&mut con, &["SETBIT", "t", "100", "1"]);
    assert!(int(&mut con, &["TTL", "t"]) > 0);
}

#[test]
fn setbit_and_getbit_errors() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    for off in ["-1", "4294967296", "x", "", "1.5", "#1"] {
        assert_eq!(
            err(&mut con, &["SETBIT", "k", off, "1"]),
            BAD_OFFSET,
            "{off}"
        );
        assert_eq!(err(&mut con, &["GETBIT", "k", off]), BAD_OFFSET, "{off}");
    }
    for v in ["2", "-1", "x", ""] {
        assert_eq!(err(&mut con, &["SETBIT", "k", "0", v]), BAD_BIT, "{v}");
    }
    assert_eq!(int(&mut con, &["EXISTS", "k"]), 0);
    ok(&mut con, &["RPUSH", "l", "x"]);
    assert_eq!(err(&mut con, &["SETBIT", "l", "0", "1"]), WRONGTYPE);
    assert_eq!(err(&mut con, &["GETBIT", "l", "0"]), WRONGTYPE);
    // The offset is checked before the type.
    assert_eq!(err(&mut con, &["GETBIT", "l", "-1"]), BAD_OFFSET);
    assert_eq!(
        err(&mut con, &["SETBIT", "k"]),
        "ERR wrong number of arguments for 'setbit' command"
    );
}

#[test]
fn offsets_are_limited_by_proto_max_bulk_len() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    ok(
        &mut con,
        &["CONFIG", "SET", "proto-max-bulk-len", "1048576"],
    );
    assert_eq!(err(&mut con, &["SETBIT", "k", "8388608", "1"]), BAD_OFFSET);
    assert_eq!(err(&mut con, &["GETBIT", "k", "8388608"]), BAD_OFFSET);
    assert_eq!(int(&mut con, &["SETBIT", "k", "8388607", "1"]), 0);
    assert_eq!(int(&mut con, &["STRLEN", "k"]), 1048576);
    assert_eq!(int(&mut con, &["BITCOUNT", "k"]), 1);
    assert_eq!(int(&mut con, &["BITPOS", "k", "1"]), 8388607);
    assert_eq!(
        err(&mut con, &["BITFIELD", "k", "GET", "u8", "#1048576"]),
        BAD_OFFSET
    );
    // A field may end a few bytes past the limit, as in Redis.
    assert_eq!(
        fields(&mut con, &["BITFIELD", "k", "SET", "i64", "8388607", "-1"]),
        [Some(i64::MIN)]
    );
    assert_eq!(int(&mut con, &["STRLEN", "k"]), 1048576 + 8);
}

#[test]
fn bitcount() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["SET", "s", "foobar"]);
    assert_eq!(int(&mut con, &["BITCOUNT", "s"]), 26);
    assert_eq!(int(&mut con, &["BITCOUNT", "s", "0", "0"]), 4);
    assert_eq!(int(&mut con, &["BITCOUNT", "s", "1", "1"]), 6);
    assert_eq!(int(&mut con, &["BITCOUNT", "s", "1", "1", "byte"]), 6);
    assert_eq!(int(&mut con, &["BITCOUNT", "s", "5", "30", "BIT"]), 17);
    assert_eq!(int(&mut con, &["BITCOUNT", "s", "-2", "-1"]), 7);
    assert_eq!(int(&mut con, &["BITCOUNT", "s", "-100", "100"]), 26);
    assert_eq!(int(&mut con, &["BITCOUNT", "s", "3", "2"]), 0);
    assert_eq!(int(&mut con, &["BITCOUNT", "s", "-1", "-5"]), 0);
    // Both negative but out of order: zero even before the unit is checked.
    assert_eq!(int(&mut con, &["BITCOUNT", "s", "-1", "-5", "junk"]), 0);
    assert_eq!(int(&mut con, &["BITCOUNT", "s", "-20", "-30"]), 0);
    assert_eq!(err(&mut con, &["BITCOUNT", "s", "0"]), SYNTAX);
    assert_eq!(err(&mut con, &["BITCOUNT", "s", "0", "1", "junk"]), SYNTAX);
    assert_eq!(
        err(&mut con, &["BITCOUNT", "s", "0", "1", "bit", "x"]),
        SYNTAX
    );
    assert_eq!(err(&mut con, &["BITCOUNT", "s", "x", "1"]), NOT_INT);
    assert_eq!(
        err(&mut con, &["BITCOUNT", "s", "0", "99999999999999999999"]),
        NOT_INT
    );
    // A missing key counts zero whatever the arguments.
    assert_eq!(int(&mut con, &["BITCOUNT", "none"]), 0);
    assert_eq!(int(&mut con, &["BITCOUNT", "none", "x"]), 0);
    assert_eq!(int(&mut con, &["BITCOUNT", "none", "a", "b", "c"]), 0);
    ok(&mut con, &["SET", "e", ""]);
    assert_eq!(int(&mut con, &["BITCOUNT", "e"]), 0);
    assert_eq!(int(&mut con, &["BITCOUNT", "e", "0", "-1", "bit"]), 0);
    ok(&mut con, &["SET", "n", "-1"]);
    // "-1" is 0x2d 0x31: 4 + 3 bits.
    assert_eq!(int(&mut con, &["BITCOUNT", "n"]), 7);
    ok(&mut con, &["RPUSH", "l", "x"]);
    assert_eq!(err(&mut con, &["BITCOUNT", "l"]), WRONGTYPE);
    assert_eq!(err(&mut con, &["BITCOUNT", "l", "x"]), WRONGTYPE);

    // A long string exercises the word-at-a-time counting.
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 37 % 251) as u8).collect();
    set(&mut con, "long", &data);
    let expect: u32 = data.iter().map(|b| b.count_ones()).sum();
    assert_eq!(int(&mut con, &["BITCOUNT", "long"]), i64::from(expect));
    let expect: u32 = data[3..=990].iter().map(|b| b.count_ones()).sum();
    assert_eq!(
        int(&mut con, &["BITCOUNT", "long", "3", "990"]),
        i64::from(expect)
    );
}

#[test]
fn bitpos() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    set(&mut con, "a", b"\xff\xf0\x00");
    assert_eq!(int(&mut con, &["BITPOS", "a", "0"]), 12);
    assert_eq!(int(&mut con, &["BITPOS", "a", "1"]), 0);
    assert_eq!(int(&mut con, &["BITPOS", "a", "1", "2"]), -1);
    set(&mut con, "b", b"\x00\xff\xf0");
    assert_eq!(int(&mut con, &["BITPOS", "b", "1", "0"]), 8);
    assert_eq!(int(&mut con, &["BITPOS", "b", "1", "2"]), 16);
    assert_eq!(int(&mut con, &["BITPOS", "b", "1", "2", "-1", "byte"]), 16);
    assert_eq!(int(&mut con, &["BITPOS", "b", "1", "7", "15", "bit"]), 8);
    assert_eq!(int(&mut con, &["BITPOS", "b", "0", "8", "-1", "BIT"]), 20);
    assert_eq!(int(&mut con, &["BITPOS", "b", "1", "-3", "-1", "bit"]), -1);

    // All ones: looking for 0 without an end finds the first bit after the
    // string; with an explicit end there is none.
    set(&mut con, "f", b"\xff\xff");
    assert_eq!(int(&mut con, &["BITPOS", "f", "0"]), 16);
    assert_eq!(int(&mut con, &["BITPOS", "f", "0", "1"]), 16);
    assert_eq!(int(&mut con, &["BITPOS", "f", "0", "3", "-1", "bit"]), -1);
    assert_eq!(int(&mut con, &["BITPOS", "f", "0", "0", "-1"]), -1);
    assert_eq!(int(&mut con, &["BITPOS", "f", "0", "3", "100", "bit"]), -1);

    // Missing key: an endless run of zeros.
    assert_eq!(int(&mut con, &["BITPOS", "none", "0"]), 0);
    assert_eq!(int(&mut con, &["BITPOS", "none", "1"]), -1);
    assert_eq!(
        int(&mut con, &["BITPOS", "none", "1", "x", "y", "z", "w"]),
        -1
    );
    // Empty string or empty range: -1 either way.
    ok(&mut con, &["SET", "e", ""]);
    assert_eq!(int(&mut con, &["BITPOS", "e", "0"]), -1);
    assert_eq!(int(&mut con, &["BITPOS", "f", "1", "1", "0"]), -1);

    assert_eq!(
        err(&mut con, &["BITPOS", "f", "2"]),
        "ERR The bit argument must be 1 or 0."
    );
    assert_eq!(
        err(&mut con, &["BITPOS", "none", "2"]),
        "ERR The bit argument must be 1 or 0."
    );
    assert_eq!(err(&mut con, &["BITPOS", "f", "x"]), NOT_INT);
    assert_eq!(err(&mut con, &["BITPOS", "f", "1", "x"]), NOT_INT);
    assert_eq!(err(&mut con, &["BITPOS", "f", "1", "0", "x"]), NOT_INT);
    // The unit is checked before the end.
    assert_eq!(
        err(&mut con, &["BITPOS", "f", "1", "0", "x", "junk"]),
        SYNTAX
    );
    assert_eq!(
        err(&mut con, &["BITPOS", "f", "1", "0", "1", "bit", "x"]),
        SYNTAX
    );
    ok(&mut con, &["RPUSH", "l", "x"]);
    assert_eq!(err(&mut con, &["BITPOS", "l", "1"]), WRONGTYPE);

    // Long strings: the match is found past whole skipped words.
    let mut data = vec![0u8; 300];
    data[257] = 0x04;
    set(&mut con, "z", &data);
    assert_eq!(int(&mut con, &["BITPOS", "z", "1"]), 257 * 8 + 5);
    assert_eq!(
        int(&mut con, &["BITPOS", "z", "1", "10", "-1"]),
        257 * 8 + 5
    );
    assert_eq!(
        int(&mut con, &["BITPOS", "z", "1", "0", "2061", "bit"]),
        2061
    );
    assert_eq!(
        int(&mut con, &["BITPOS", "z", "1", "2061", "2061", "bit"]),
        2061
    );
    assert_eq!(int(&mut con, &["BITPOS", "z", "1", "0", "2060", "bit"]), -1);
    assert_eq!(
        int(&mut con, &["BITPOS", "z", "1", "2062", "-1", "bit"]),
        -1
    );
    assert_eq!(
        int(&mut con, &["BITPOS", "z", "0", "2061", "-1", "bit"]),
        2062
    );
}

#[test]
fn bitop() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    set(&mut con, "a", b"\xff\x0f\x01");
    set(&mut con, "b", b"\x0f\xff");
    assert_eq!(int(&mut con, &["BITOP", "AND", "d", "a", "b"]), 3);
    assert_eq!(get(&mut con, "d"), b"\x0f\x0f\x00");
    assert_eq!(int(&mut con, &["BITOP", "or", "d", "a", "b"]), 3);
    assert_eq!(get(&mut con, "d"), b"\xff\xff\x01");
    assert_eq!(int(&mut con, &["BITOP", "Xor", "d", "a", "b"]), 3);
    assert_eq!(get(&mut con, "d"), b"\xf0\xf0\x01");
    assert_eq!(int(&mut con, &["BITOP", "NOT", "d", "b"]), 2);
    assert_eq!(get(&mut con, "d"), b"\xf0\x00");
    // Missing sources are empty strings; AND with one is all zeros.
    assert_eq!(int(&mut con, &["BITOP", "AND", "d", "a", "none"]), 3);
    assert_eq!(get(&mut con, "d"), b"\x00\x00\x00");
    assert_eq!(int(&mut con, &["BITOP", "AND", "d", "none", "a"]), 3);
    assert_eq!(get(&mut con, "d"), b"\x00\x00\x00");
    assert_eq!(int(&mut con, &["BITOP", "OR", "d", "none", "b"]), 2);
    assert_eq!(get(&mut con, "d"), b"\x0f\xff");
    // A source may be the destination; the same key may repeat.
    assert_eq!(int(&mut con, &["BITOP", "XOR", "d", "d", "d", "b"]), 2);
    assert_eq!(get(&mut con, "d"), b"\x0f\xff");
    // An empty result deletes the destination.
    assert_eq!(int(&mut con, &["BITOP", "OR", "d", "none", "none2"]), 0);
    assert_eq!(int(&mut con, &["EXISTS", "d"]), 0);
    assert_eq!(int(&mut con, &["BITOP", "NOT", "d", "none"]), 0);
    assert_eq!(int(&mut con, &["EXISTS", "d"]), 0);
    // Integer-encoded sources are their digits; the result is raw and the
    // destination loses its TTL and old type.
    ok(&mut con, &["SET", "n", "12"]);
    ok(&mut con, &["RPUSH", "l", "x"]);
    ok(&mut con, &["EXPIRE", "l", "1000"]);
    assert_eq!(int(&mut con, &["BITOP", "OR", "l", "n"]), 2);
    assert_eq!(get(&mut con, "l"), b"12");
    assert_eq!(int(&mut con, &["TTL", "l"]), -1);
    assert_eq!(
        ok(&mut con, &["OBJECT", "ENCODING", "l"]),
        Value::BulkString(b"raw".to_vec())
    );

    ok(&mut con, &["RPUSH", "list", "x"]);
    assert_eq!(
        err(&mut con, &["BITOP", "AND", "d", "a", "list"]),
        WRONGTYPE
    );
    assert_eq!(int(&mut con, &["EXISTS", "d"]), 0);
    assert_eq!(err(&mut con, &["BITOP", "NAND", "d", "a"]), SYNTAX);
    assert_eq!(
        err(&mut con, &["BITOP", "NOT", "d", "a", "b"]),
        "ERR BITOP NOT must be called with a single source key."
    );
    assert_eq!(
        err(&mut con, &["BITOP", "AND", "d"]),
        "ERR wrong number of arguments for 'bitop' command"
    );

    // Long inputs of different lengths.
    let x: Vec<u8> = (0..1003u32).map(|i| (i * 7) as u8).collect();
    let y: Vec<u8> = (0..517u32).map(|i| (i * 13 + 5) as u8).collect();
    set(&mut con, "x", &x);
    set(&mut con, "y", &y);
    let at = |v: &[u8], i: usize| v.get(i).copied().unwrap_or(0);
    for (op, f) in [
        ("AND", (|a, b| a & b) as fn(u8, u8) -> u8),
        ("OR", |a, b| a | b),
        ("XOR", |a, b| a ^ b),
    ] {
        assert_eq!(int(&mut con, &["BITOP", op, "r", "x", "y"]), 1003);
        let expect: Vec<u8> = (0..1003).map(|i| f(at(&x, i), at(&y, i))).collect();
        assert_eq!(get(&mut con, "r"), expect, "{op}");
    }
}

#[test]
fn bitfield() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    assert_eq!(
        fields(
            &mut con,
            &["BITFIELD", "k", "INCRBY", "i5", "100", "1", "GET", "u4", "0"]
        ),
        [Some(1), Some(0)]
    );
    assert_eq!(int(&mut con, &["STRLEN", "k"]), 14);
    assert_eq!(
        fields(
            &mut con,
            &["BITFIELD", "k", "SET", "u8", "#1", "255", "GET", "u8", "8"]
        ),
        [Some(0), Some(255)]
    );
    assert_eq!(
        fields(
            &mut con,
            &["BITFIELD", "k", "GET", "i8", "8", "GET", "u4", "8", "GET", "i64", "8"]
        ),
        [Some(-1), Some(15), Some(-72057594037927936)]
    );
    // Overflow policies apply to the operations after them.
    ok(&mut con, &["DEL", "k"]);
    assert_eq!(
        fields(
            &mut con,
            &[
                "BITFIELD", "k", "INCRBY", "u2", "0", "5", "OVERFLOW", "SAT", "INCRBY", "u2", "2",
                "5", "OVERFLOW", "FAIL", "INCRBY", "u2", "4", "5", "OVERFLOW", "wrap", "INCRBY",
                "i8", "8", "200"
            ]
        ),
        [Some(1), Some(3), None, Some(-56)]
    );
    assert_eq!(
        fields(
            &mut con,
            &["BITFIELD", "k", "OVERFLOW", "SAT", "SET", "i8", "16", "-1000"]
        ),
        [Some(0)]
    );
    assert_eq!(
        fields(&mut con, &["BITFIELD", "k", "GET", "i8", "16"]),
        [Some(-128)]
    );
    assert_eq!(
        fields(
            &mut con,
            &["BITFIELD", "k", "OVERFLOW", "SAT", "SET", "u8", "16", "-1"]
        ),
        [Some(128)]
    );
    assert_eq!(
        fields(&mut con, &["BITFIELD", "k", "GET", "u8", "16"]),
        [Some(255)]
    );
    assert_eq!(
        fields(
            &mut con,
            &[
                "BITFIELD",
                "k",
                "SET",
                "i64",
                "0",
                "9223372036854775807",
                "INCRBY",
                "i64",
                "0",
                "1"
            ]
        ),
        [Some(8127025903055142912), Some(i64::MIN)]
    );
    assert_eq!(
        fields(
            &mut con,
            &["BITFIELD", "k", "SET", "u63", "0", "-1", "GET", "u63", "0"]
        ),
        [Some(4611686018427387904), Some(i64::MAX)]
    );

    // Reads of a missing key are zeros and create nothing; no
    // subcommands at all answer an empty array.
    assert_eq!(
        fields(
            &mut con,
            &["BITFIELD", "m", "GET", "u8", "0", "GET", "i64", "1000"]
        ),
        [Some(0), Some(0)]
    );
    assert_eq!(fields(&mut con, &["BITFIELD", "m"]), []);
    assert_eq!(int(&mut con, &["EXISTS", "m"]), 0);
    // A write that fails under FAIL still creates the padded string.
    assert_eq!(
        fields(
            &mut con,
            &["BITFIELD", "m", "OVERFLOW", "FAIL", "SET", "u2", "0", "7"]
        ),
        [None]
    );
    assert_eq!(get(&mut con, "m"), b"\x00");
    // GET past the end of a string reads zeros.
    set(&mut con, "s", b"\xff");
    assert_eq!(
        fields(&mut con, &["BITFIELD", "s", "GET", "u8", "4"]),
        [Some(0xf0)]
    );
}

#[test]
fn bitfield_errors_and_ro() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    for ty in ["u64", "i65", "i0", "U8", "x8", "i", "u-1", "i08"] {
        assert_eq!(
            err(&mut con, &["BITFIELD", "k", "GET", ty, "0"]),
            BAD_TYPE,
            "{ty}"
        );
    }
    for off in ["-1", "x", "#x", "#-1", "4294967296", "#536870912"] {
        assert_eq!(
            err(&mut con, &["BITFIELD", "k", "GET", "u8", off]),
            BAD_OFFSET,
            "{off}"
        );
    }
    assert_eq!(
        err(&mut con, &["BITFIELD", "k", "SET", "u8", "0", "x"]),
        NOT_INT
    );
    assert_eq!(err(&mut con, &["BITFIELD", "k", "GET", "u8"]), SYNTAX);
    assert_eq!(err(&mut con, &["BITFIELD", "k", "SET", "u8", "0"]), SYNTAX);
    assert_eq!(err(&mut con, &["BITFIELD", "k", "FOO"]), SYNTAX);
    assert_eq!(err(&mut con, &["BITFIELD", "k", "OVERFLOW"]), SYNTAX);
    assert_eq!(
        err(
            &mut con,
            &["BITFIELD", "k", "OVERFLOW", "XYZ", "GET", "u8", "0"]
        ),
        "ERR Invalid OVERFLOW type specified"
    );
    // An error anywhere means nothing runs.
    assert_eq!(
        err(
            &mut con,
            &["BITFIELD", "k", "SET", "u8", "0", "1", "GET", "u64", "0"]
        ),
        BAD_TYPE
    );
    assert_eq!(int(&mut con, &["EXISTS", "k"]), 0);

    ok(&mut con, &["SET", "k", "A"]);
    assert_eq!(
        fields(
            &mut con,
            &["BITFIELD_RO", "k", "GET", "u8", "0", "GET", "u4", "#1"]
        ),
        [Some(65), Some(1)]
    );
    assert_eq!(fields(&mut con, &["BITFIELD_RO", "k"]), []);
    assert_eq!(
        err(&mut con, &["BITFIELD_RO", "k", "SET", "u8", "0", "1"]),
        "ERR BITFIELD_RO only supports the GET subcommand"
    );
    assert_eq!(
        err(&mut con, &["BITFIELD_RO", "k", "INCRBY", "u8", "0", "1"]),
        "ERR BITFIELD_RO only supports the GET subcommand"
    );
    // Parse errors come first.
    assert_eq!(
        err(&mut con, &["BITFIELD_RO", "k", "SET", "u64", "0", "1"]),
        BAD_TYPE
    );
    assert_eq!(get(&mut con, "k"), b"A");

    ok(&mut con, &["RPUSH", "l", "x"]);
    assert_eq!(
        err(&mut con, &["BITFIELD", "l", "GET", "u8", "0"]),
        WRONGTYPE
    );
    assert_eq!(
        err(&mut con, &["BITFIELD", "l", "SET", "u8", "0", "1"]),
        WRONGTYPE
    );
    assert_eq!(
        err(&mut con, &["BITFIELD_RO", "l", "GET", "u8", "0"]),
        WRONGTYPE
    );
    assert_eq!(err(&mut con, &["BITFIELD", "l"]), WRONGTYPE);
}

/// Writes that change nothing do not touch WATCHed keys; writes that do
/// abort the transaction.
#[test]
fn watch_sees_only_real_changes() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    let mut other = srv.conn();
    set(&mut con, "k", b"\x80");
    let watched_exec = |con: &mut Connection, other: &mut Connection, cmd: &[&str]| {
        ok(con, &["WATCH", "k"]);
        ok(other, cmd);
        ok(con, &["MULTI"]);
        ok(con, &["PING"]);
        ok(con, &["EXEC"]) != Value::Nil
    };
    assert!(watched_exec(
        &mut con,
        &mut other,
        &["SETBIT", "k", "0", "1"]
    ));
    assert!(watched_exec(
        &mut con,
        &mut other,
        &["SETBIT", "k", "1", "0"]
    ));
    assert!(!watched_exec(
        &mut con,
        &mut other,
        &["SETBIT", "k", "1", "1"]
    ));
    assert!(watched_exec(
        &mut con,
        &mut other,
        &["BITFIELD", "k", "SET", "u8", "0", "192"]
    ));
    assert!(watched_exec(
        &mut con,
        &mut other,
        &["BITFIELD", "k", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "100"]
    ));
    assert!(!watched_exec(
        &mut con,
        &mut other,
        &["BITFIELD", "k", "INCRBY", "u8", "0", "1"]
    ));
    // Growing the string is a change even when the written bits are zero.
    assert!(!watched_exec(
        &mut con,
        &mut other,
        &["SETBIT", "k", "100", "0"]
    ));
    assert!(!watched_exec(
        &mut con,
        &mut other,
        &["BITOP", "OR", "k", "k"]
    ));
}
