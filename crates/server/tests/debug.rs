//! DEBUG: the gate of `enable-debug-command`, digests equal to Redis's for
//! the same dataset (differential, skipped without redis-server), RELOAD
//! and LOADAOF keeping the dataset, POPULATE, OBJECT and PROTOCOL.

mod common;

use common::diff::{start_redis_with, Raw};
use common::{err, ok, q, Server};

/// Arguments as byte vectors for a raw connection.
fn cmd(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

/// The status text of a `+...` reply.
fn status(reply: &[u8]) -> String {
    String::from_utf8_lossy(reply)
        .trim_start_matches('+')
        .trim_end()
        .to_string()
}

/// Builds the same mixed dataset (every type, integers and binary strings,
/// big and small encodings, TTLs, two databases) on a raw connection.
fn load_dataset(c: &mut Raw, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut run = |args: Vec<String>| {
        let args: Vec<Vec<u8>> = args.into_iter().map(String::into_bytes).collect();
        c.send(&args);
    };
    for db in ["0", "3"] {
        run(vec!["SELECT".into(), db.into()]);
        for i in 0..40 {
            let n = rng.usize(1..200);
            match rng.u8(0..6) {
                0 => run(vec![
                    "SET".into(),
                    format!("s{i}"),
                    format!("v{}", rng.u64(..)),
                ]),
                1 => run(vec!["SET".into(), format!("n{i}"), rng.i64(..).to_string()]),
                2 => {
                    let mut a = vec!["RPUSH".into(), format!("l{i}")];
                    a.extend((0..n).map(|j| {
                        if j % 3 == 0 {
                            j.to_string()
                        } else {
                            format!("e{j}")
                        }
                    }));
                    run(a);
                }
                3 => {
                    let mut a = vec!["SADD".into(), format!("t{i}")];
                    a.extend((0..n).map(|j| {
                        if i % 2 == 0 {
                            j.to_string()
                        } else {
                            format!("m{j}")
                        }
                    }));
                    run(a);
                }
                4 => {
                    let mut a = vec!["ZADD".into(), format!("z{i}")];
                    for j in 0..n {
                        a.push(format!("{}", rng.f64() * 1000.0 - 500.0));
                        a.push(format!("m{j}"));
                    }
                    run(a);
                }
                _ => {
                    let mut a = vec!["HSET".into(), format!("h{i}")];
                    for j in 0..n {
                        a.push(format!("f{j}"));
                        a.push(format!("v{}", rng.u32(..)));
                    }
                    run(a);
                }
            }
            if i % 7 == 0 {
                run(vec!["EXPIRE".into(), format!("s{i}"), "1000".into()]);
            }
        }
    }
    run(vec!["SELECT".into(), "0".into()]);
}

#[test]
fn digests_match_redis_for_the_same_dataset() {
    if !common::diff::redis_server_available() {
        return;
    }
    let redis = start_redis_with(&["--enable-debug-command", "yes"]);
    let vireo = Server::start(&["--enable-debug-command", "yes", "--save", ""]);
    let mut r = Raw::connect(redis.port);
    let mut v = Raw::connect(vireo.port);
    for seed in 0..3 {
        r.send(&cmd(&["FLUSHALL"]));
        v.send(&cmd(&["FLUSHALL"]));
        assert_eq!(
            status(&v.send(&cmd(&["DEBUG", "DIGEST"]))),
            "0".repeat(40),
            "an empty dataset digests to zeros"
        );
        load_dataset(&mut r, seed);
        load_dataset(&mut v, seed);
        let want = r.send(&cmd(&["DEBUG", "DIGEST"]));
        assert_eq!(v.send(&cmd(&["DEBUG", "DIGEST"])), want, "seed {seed}");
        let keys = [
            "DEBUG",
            "DIGEST-VALUE",
            "s0",
            "l1",
            "t2",
            "z3",
            "h4",
            "missing",
        ];
        let want = r.send(&cmd(&keys));
        assert_eq!(v.send(&cmd(&keys)), want, "seed {seed}");
    }
}

#[test]
fn debug_is_refused_unless_enabled() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let e = err(&mut c, &["DEBUG", "DIGEST"]);
    assert!(e.starts_with("ERR DEBUG command not allowed."), "{e}");
    let s = Server::start(&["--enable-debug-command", "local"]);
    let mut c = s.conn();
    ok(&mut c, &["DEBUG", "DIGEST"]);
}

#[test]
fn reload_and_loadaof_keep_the_dataset() {
    let s = Server::start(&["--enable-debug-command", "yes", "--appendonly", "yes"]);
    let mut c = s.conn();
    ok(&mut c, &["DEBUG", "POPULATE", "1000", "k", "10"]);
    ok(&mut c, &["RPUSH", "list", "a", "b", "1"]);
    ok(&mut c, &["ZADD", "z", "1.5", "x"]);
    let digest = |c: &mut redis::Connection| format!("{:?}", q(c, &["DEBUG", "DIGEST"]).unwrap());
    let before = digest(&mut c);
    assert_eq!(ok(&mut c, &["DBSIZE"]), redis::Value::Int(1002));
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(digest(&mut c), before);
    // POPULATE is not propagated (as in Redis), so the AOF check uses
    // keys written by ordinary commands.
    ok(&mut c, &["FLUSHALL"]);
    ok(&mut c, &["MSET", "a", "1", "b", "2"]);
    ok(&mut c, &["SADD", "set", "x", "y"]);
    ok(&mut c, &["PEXPIRE", "a", "100000"]);
    let logged = digest(&mut c);
    ok(&mut c, &["DEBUG", "LOADAOF"]);
    assert_eq!(digest(&mut c), logged);
    assert_eq!(ok(&mut c, &["DBSIZE"]), redis::Value::Int(3));
    let e = err(&mut c, &["DEBUG", "RELOAD", "BOGUS"]);
    assert_eq!(
        e,
        "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options."
    );
}

/// DEBUG RELOAD empties the libraries with the keys (Redis's emptyData);
/// NOFLUSH then finds the library loaded and fails, and MERGE lets the
/// file's copy replace it.
#[test]
fn reload_replaces_function_libraries_only_when_merging() {
    let s = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let lib = "#!lua name=test\nredis.register_function('test', function() return 'hello' end)";
    ok(&mut c, &["FUNCTION", "LOAD", lib]);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(
        ok(&mut c, &["FCALL", "test", "0"]),
        redis::Value::BulkString(b"hello".to_vec())
    );
    assert_eq!(
        err(&mut c, &["DEBUG", "RELOAD", "NOFLUSH"]),
        "ERR Error trying to load the RDB dump"
    );
    ok(&mut c, &["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"]);
    assert_eq!(
        ok(&mut c, &["FCALL", "test", "0"]),
        redis::Value::BulkString(b"hello".to_vec())
    );
}

#[test]
fn populate_object_protocol_and_sleep() {
    let s = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    ok(&mut c, &["SET", "key:1", "mine"]);
    ok(&mut c, &["DEBUG", "POPULATE", "3"]);
    assert_eq!(
        ok(&mut c, &["GET", "key:1"]),
        redis::Value::BulkString(b"mine".to_vec())
    );
    assert_eq!(
        ok(&mut c, &["GET", "key:2"]),
        redis::Value::BulkString(b"value:2".to_vec())
    );
    ok(&mut c, &["DEBUG", "POPULATE", "2", "p", "3"]);
    assert_eq!(
        ok(&mut c, &["GET", "p:1"]),
        redis::Value::BulkString(b"val".to_vec())
    );
    let e = err(&mut c, &["DEBUG", "POPULATE", "-1"]);
    assert_eq!(e, "ERR value is out of range, must be positive");
    let line = match ok(&mut c, &["DEBUG", "OBJECT", "key:2"]) {
        redis::Value::SimpleString(s) => s,
        other => panic!("{other:?}"),
    };
    assert!(
        line.contains("encoding:embstr serializedlength:8 lru:"),
        "{line}"
    );
    assert_eq!(
        err(&mut c, &["DEBUG", "OBJECT", "nokey"]),
        "ERR no such key"
    );
    assert_eq!(
        ok(&mut c, &["DEBUG", "PROTOCOL", "integer"]),
        redis::Value::Int(12345)
    );
    assert!(
        err(&mut c, &["DEBUG", "PROTOCOL", "nope"]).starts_with("ERR Wrong protocol type name.")
    );
    let start = std::time::Instant::now();
    ok(&mut c, &["DEBUG", "SLEEP", "0.2"]);
    assert!(start.elapsed() >= std::time::Duration::from_millis(200));
    assert_eq!(err(&mut c, &["DEBUG", "ERROR", "MYERR x\ny"]), "MYERR x y");
}
