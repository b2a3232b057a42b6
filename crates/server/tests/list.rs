//! Integration tests of the list commands against the real binary.

mod common;

use common::q;
use redis::Value;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| bulk(s)).collect())
}

fn err(r: redis::RedisResult<Value>) -> String {
    let e = r.expect_err("expected an error");
    format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or(""))
        .trim()
        .to_string()
}

#[test]
fn pushes_pops_and_ranges() {
    let srv = common::Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        q(&mut c, &["RPUSH", "l", "a", "b", "c"]).unwrap(),
        Value::Int(3)
    );
    assert_eq!(q(&mut c, &["LPUSH", "l", "1", "2"]).unwrap(), Value::Int(5));
    assert_eq!(
        q(&mut c, &["LRANGE", "l", "0", "-1"]).unwrap(),
        bulks(&["2", "1", "a", "b", "c"])
    );
    assert_eq!(
        q(&mut c, &["LRANGE", "l", "-2", "100"]).unwrap(),
        bulks(&["b", "c"])
    );
    assert_eq!(q(&mut c, &["LRANGE", "l", "3", "1"]).unwrap(), bulks(&[]));
    assert_eq!(q(&mut c, &["LPOP", "l"]).unwrap(), bulk("2"));
    assert_eq!(q(&mut c, &["RPOP", "l", "2"]).unwrap(), bulks(&["c", "b"]));
    assert_eq!(q(&mut c, &["LPOP", "l", "0"]).unwrap(), bulks(&[]));
    assert_eq!(q(&mut c, &["LLEN", "l"]).unwrap(), Value::Int(2));
    assert_eq!(q(&mut c, &["LPOP", "l", "10"]).unwrap(), bulks(&["1", "a"]));
    // The emptied list is gone.
    assert_eq!(q(&mut c, &["EXISTS", "l"]).unwrap(), Value::Int(0));
    assert_eq!(q(&mut c, &["LPOP", "l"]).unwrap(), Value::Nil);
    assert_eq!(q(&mut c, &["LPOP", "l", "3"]).unwrap(), Value::Nil);
    assert_eq!(q(&mut c, &["LPUSHX", "l", "x"]).unwrap(), Value::Int(0));
    assert_eq!(q(&mut c, &["EXISTS", "l"]).unwrap(), Value::Int(0));
    assert_eq!(
        err(q(&mut c, &["LPOP", "l", "-1"])),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(
        err(q(&mut c, &["LPOP", "l", "1", "2"])),
        "ERR wrong number of arguments for 'lpop' command"
    );
}

#[test]
fn wrong_types_and_encoding() {
    let srv = common::Server::start(&[]);
    let mut c = srv.conn();
    q(&mut c, &["SET", "s", "x"]).unwrap();
    for cmd in [
        &["LPUSH", "s", "a"][..],
        &["LLEN", "s"],
        &["LRANGE", "s", "0", "1"],
        &["LPOP", "s"],
        &["LINDEX", "s", "0"],
        &["LMOVE", "s", "d", "LEFT", "LEFT"],
        &["LPOS", "s", "a"],
    ] {
        assert!(err(q(&mut c, cmd)).starts_with("WRONGTYPE"), "{cmd:?}");
    }
    q(&mut c, &["RPUSH", "l", "a"]).unwrap();
    assert_eq!(
        q(&mut c, &["TYPE", "l"]).unwrap(),
        Value::SimpleString("list".into())
    );
    assert_eq!(
        q(&mut c, &["OBJECT", "ENCODING", "l"]).unwrap(),
        bulk("quicklist")
    );
    // LMOVE onto a wrong-type destination changes nothing.
    assert!(err(q(&mut c, &["LMOVE", "l", "s", "LEFT", "LEFT"])).starts_with("WRONGTYPE"));
    assert_eq!(q(&mut c, &["LLEN", "l"]).unwrap(), Value::Int(1));
    // COPY and RENAME carry lists.
    assert_eq!(q(&mut c, &["COPY", "l", "l2"]).unwrap(), Value::Int(1));
    q(&mut c, &["RENAME", "l2", "l3"]).unwrap();
    assert_eq!(
        q(&mut c, &["LRANGE", "l3", "0", "-1"]).unwrap(),
        bulks(&["a"])
    );
}

#[test]
fn edits() {
    let srv = common::Server::start(&[]);
    let mut c = srv.conn();
    q(&mut c, &["RPUSH", "l", "a", "b", "a", "c", "a"]).unwrap();
    assert_eq!(
        q(&mut c, &["LINSERT", "l", "BEFORE", "c", "x"]).unwrap(),
        Value::Int(6)
    );
    assert_eq!(
        q(&mut c, &["LINSERT", "l", "after", "zz", "x"]).unwrap(),
        Value::Int(-1)
    );
    assert_eq!(
        q(&mut c, &["LINSERT", "nokey", "after", "a", "x"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        err(q(&mut c, &["LINSERT", "l", "middle", "a", "x"])),
        "ERR syntax error"
    );
    assert_eq!(q(&mut c, &["LREM", "l", "-2", "a"]).unwrap(), Value::Int(2));
    assert_eq!(
        q(&mut c, &["LRANGE", "l", "0", "-1"]).unwrap(),
        bulks(&["a", "b", "x", "c"])
    );
    assert_eq!(q(&mut c, &["LSET", "l", "-1", "z"]).unwrap(), Value::Okay);
    assert_eq!(
        err(q(&mut c, &["LSET", "l", "4", "z"])),
        "ERR index out of range"
    );
    assert_eq!(
        err(q(&mut c, &["LSET", "nokey", "0", "z"])),
        "ERR no such key"
    );
    assert_eq!(q(&mut c, &["LINDEX", "l", "-1"]).unwrap(), bulk("z"));
    assert_eq!(q(&mut c, &["LINDEX", "l", "9"]).unwrap(), Value::Nil);
    assert_eq!(q(&mut c, &["LTRIM", "l", "1", "-2"]).unwrap(), Value::Okay);
    assert_eq!(
        q(&mut c, &["LRANGE", "l", "0", "-1"]).unwrap(),
        bulks(&["b", "x"])
    );
    assert_eq!(q(&mut c, &["LTRIM", "l", "5", "1"]).unwrap(), Value::Okay);
    assert_eq!(q(&mut c, &["EXISTS", "l"]).unwrap(), Value::Int(0));
}

#[test]
fn lpos_options() {
    let srv = common::Server::start(&[]);
    let mut c = srv.conn();
    q(
        &mut c,
        &["RPUSH", "l", "a", "b", "c", "1", "2", "3", "c", "c"],
    )
    .unwrap();
    assert_eq!(q(&mut c, &["LPOS", "l", "c"]).unwrap(), Value::Int(2));
    assert_eq!(
        q(&mut c, &["LPOS", "l", "c", "RANK", "2"]).unwrap(),
        Value::Int(6)
    );
    assert_eq!(
        q(&mut c, &["LPOS", "l", "c", "RANK", "-1"]).unwrap(),
        Value::Int(7)
    );
    assert_eq!(
        q(&mut c, &["LPOS", "l", "c", "COUNT", "0"]).unwrap(),
        Value::Array(vec![Value::Int(2), Value::Int(6), Value::Int(7)])
    );
    assert_eq!(
        q(&mut c, &["LPOS", "l", "c", "COUNT", "2", "RANK", "-1"]).unwrap(),
        Value::Array(vec![Value::Int(7), Value::Int(6)])
    );
    assert_eq!(
        q(&mut c, &["LPOS", "l", "c", "MAXLEN", "2"]).unwrap(),
        Value::Nil
    );
    assert_eq!(q(&mut c, &["LPOS", "l", "2"]).unwrap(), Value::Int(4));
    assert_eq!(
        q(&mut c, &["LPOS", "nokey", "2", "COUNT", "1"]).unwrap(),
        bulks(&[])
    );
    assert_eq!(
        err(q(&mut c, &["LPOS", "l", "c", "RANK", "0"])),
        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"
    );
    assert_eq!(
        err(q(&mut c, &["LPOS", "l", "c", "COUNT", "-1"])),
        "ERR COUNT can't be negative"
    );
    assert_eq!(
        err(q(&mut c, &["LPOS", "l", "c", "MAXLEN", "x"])),
        "ERR MAXLEN can't be negative"
    );
    assert_eq!(
        err(q(&mut c, &["LPOS", "l", "c", "RANK"])),
        "ERR syntax error"
    );
}

#[test]
fn moves_and_multi_pop() {
    let srv = common::Server::start(&[]);
    let mut c = srv.conn();
    q(&mut c, &["RPUSH", "src", "1", "2", "3"]).unwrap();
    assert_eq!(q(&mut c, &["RPOPLPUSH", "src", "dst"]).unwrap(), bulk("3"));
    assert_eq!(
        q(&mut c, &["LMOVE", "src", "dst", "LEFT", "RIGHT"]).unwrap(),
        bulk("1")
    );
    assert_eq!(
        q(&mut c, &["LRANGE", "dst", "0", "-1"]).unwrap(),
        bulks(&["3", "1"])
    );
    // Rotation of a one-element list onto itself keeps it.
    assert_eq!(
        q(&mut c, &["LMOVE", "src", "src", "LEFT", "RIGHT"]).unwrap(),
        bulk("2")
    );
    assert_eq!(
        q(&mut c, &["LRANGE", "src", "0", "-1"]).unwrap(),
        bulks(&["2"])
    );
    assert_eq!(
        q(&mut c, &["LMOVE", "nokey", "dst", "LEFT", "RIGHT"]).unwrap(),
        Value::Nil
    );
    assert_eq!(
        err(q(&mut c, &["LMOVE", "src", "dst", "UP", "LEFT"])),
        "ERR syntax error"
    );
    assert_eq!(
        q(
            &mut c,
            &["LMPOP", "3", "nokey", "dst", "src", "RIGHT", "COUNT", "5"]
        )
        .unwrap(),
        Value::Array(vec![bulk("dst"), bulks(&["1", "3"])])
    );
    assert_eq!(q(&mut c, &["EXISTS", "dst"]).unwrap(), Value::Int(0));
    assert_eq!(
        q(&mut c, &["LMPOP", "1", "src", "LEFT"]).unwrap(),
        Value::Array(vec![bulk("src"), bulks(&["2"])])
    );
    assert_eq!(
        q(&mut c, &["LMPOP", "1", "src", "LEFT"]).unwrap(),
        Value::Nil
    );
    assert_eq!(
        err(q(&mut c, &["LMPOP", "0", "src", "LEFT"])),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(q(&mut c, &["LMPOP", "5", "src", "LEFT"])),
        "ERR syntax error"
    );
    assert_eq!(
        err(q(&mut c, &["LMPOP", "1", "src", "LEFT", "COUNT", "0"])),
        "ERR count should be greater than 0"
    );
}

#[test]
fn big_lists_span_many_nodes() {
    let srv = common::Server::start(&[]);
    let mut c = srv.conn();
    q(&mut c, &["CONFIG", "SET", "list-max-listpack-size", "4"]).unwrap();
    for i in 0..500 {
        let v = i.to_string();
        let side = if i % 2 == 0 { "LPUSH" } else { "RPUSH" };
        q(&mut c, &[side, "big", &v]).unwrap();
    }
    assert_eq!(q(&mut c, &["LLEN", "big"]).unwrap(), Value::Int(500));
    assert_eq!(q(&mut c, &["LINDEX", "big", "0"]).unwrap(), bulk("498"));
    assert_eq!(q(&mut c, &["LINDEX", "big", "-1"]).unwrap(), bulk("499"));
    assert_eq!(q(&mut c, &["LINDEX", "big", "250"]).unwrap(), bulk("1"));
    assert_eq!(
        q(&mut c, &["LSET", "big", "250", "mid"]).unwrap(),
        Value::Okay
    );
    assert_eq!(q(&mut c, &["LPOS", "big", "mid"]).unwrap(), Value::Int(250));
    assert_eq!(
        q(&mut c, &["LREM", "big", "0", "mid"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        q(&mut c, &["LTRIM", "big", "100", "199"]).unwrap(),
        Value::Okay
    );
    assert_eq!(q(&mut c, &["LLEN", "big"]).unwrap(), Value::Int(100));
    assert_eq!(q(&mut c, &["LINDEX", "big", "0"]).unwrap(), bulk("298"));
    let usage = q(&mut c, &["MEMORY", "USAGE", "big"]).unwrap();
    assert!(matches!(usage, Value::Int(n) if n > 100), "{usage:?}");
}
