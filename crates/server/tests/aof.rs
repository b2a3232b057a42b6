//! The append-only file end to end: restarts through the AOF, what the log
//! holds (absolute expiries), torn tails, rewrites under load, files moving
//! between Vireo and redis-server 7.0 both ways, crash durability of
//! `appendfsync always` and `everysec`, and `vireo check-aof`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{q, Server};
use redis::Value;

/// A fresh empty directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let d = std::env::temp_dir().join(format!("vireo-aof-{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Starts Vireo with the AOF on in `dir`.
fn start_aof(dir: &Path, extra: &[&str]) -> Server {
    let dir = dir.to_str().unwrap();
    let mut args = vec!["--dir", dir, "--appendonly", "yes"];
    args.extend_from_slice(extra);
    Server::start(&args)
}

/// SHUTDOWN and wait for the process to exit.
fn shutdown(mut srv: Server) {
    let mut con = srv.conn();
    let _ = q(&mut con, &["SHUTDOWN", "NOSAVE"]);
    let _ = srv.child().wait();
}

/// A database's contents: key → (type, contents, absolute expiry).
type Image = BTreeMap<Vec<u8>, (String, Vec<Vec<u8>>, i64)>;

/// Everything a database holds, in a comparable form: per key its type,
/// contents (collections sorted where order does not matter) and absolute
/// expiry.
fn dump(con: &mut redis::Connection, db: usize) -> Image {
    q(con, &["SELECT", &db.to_string()]).unwrap();
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(con).unwrap();
    let mut out = BTreeMap::new();
    for k in keys {
        let t: String = redis::cmd("TYPE").arg(&k).query(con).unwrap();
        let mut items: Vec<Vec<u8>> = match t.as_str() {
            "string" => vec![redis::cmd("GET").arg(&k).query(con).unwrap()],
            "list" => redis::cmd("LRANGE")
                .arg(&k)
                .arg(0)
                .arg(-1)
                .query(con)
                .unwrap(),
            "hash" => redis::cmd("HGETALL").arg(&k).query(con).unwrap(),
            "set" => redis::cmd("SMEMBERS").arg(&k).query(con).unwrap(),
            "zset" => redis::cmd("ZRANGE")
                .arg(&k)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query(con)
                .unwrap(),
            other => panic!("unexpected type {other}"),
        };
        if t == "set" {
            items.sort();
        }
        if t == "hash" {
            let mut pairs: Vec<Vec<Vec<u8>>> = items.chunks(2).map(|c| c.to_vec()).collect();
            pairs.sort();
            items = pairs.concat();
        }
        let at: i64 = redis::cmd("PEXPIRETIME").arg(&k).query(con).unwrap();
        out.insert(k, (t, items, at));
    }
    q(con, &["SELECT", "0"]).unwrap();
    out
}

/// Every value type and encoding, a few TTLs, in databases 0 and 3.
fn write_dataset(con: &mut redis::Connection) {
    let cmds: &[&[&str]] = &[
        &["SET", "str", "hello"],
        &["SET", "int", "12345"],
        &["SET", "ttl", "v", "EX", "1000"],
        &["SETEX", "setex", "500", "v"],
        &["INCRBYFLOAT", "float", "1.5"],
        &["INCRBYFLOAT", "float", "0.25"],
        &["RPUSH", "list", "a", "b", "c", "1", "2"],
        &["LPUSH", "list", "z"],
        &["HSET", "hash", "f1", "v1", "f2", "2"],
        &["HINCRBYFLOAT", "hash", "f3", "2.5"],
        &["SADD", "intset", "1", "2", "3"],
        &["SADD", "set", "x", "y", "z"],
        &["SREM", "set", "y"],
        &["ZADD", "zset", "1", "a", "2.5", "b", "-inf", "c"],
        &["EXPIRE", "list", "3000"],
        &["PEXPIREAT", "hash", "99999999999999"],
        &["SELECT", "3"],
        &["SET", "db3", "three"],
        &["RPUSH", "db3list", "x"],
        &["SELECT", "0"],
        &["MULTI"],
        &["INCR", "counter"],
        &["INCR", "counter"],
        &["EXEC"],
        &["SET", "gone", "x"],
        &["DEL", "gone"],
        &["SET", "nx", "1", "NX"],
        &["SET", "nx", "2", "NX"],
    ];
    for c in cmds {
        q(con, c).unwrap();
    }
    let big: Vec<String> = (0..300).map(|i| format!("member-{i}")).collect();
    let mut c = redis::cmd("SADD");
    c.arg("bigset");
    for m in &big {
        c.arg(m);
    }
    let _: i64 = c.query(con).unwrap();
    let mut c = redis::cmd("RPUSH");
    c.arg("biglist");
    for m in &big {
        c.arg(m);
    }
    let _: i64 = c.query(con).unwrap();
    let mut c = redis::cmd("HSET");
    c.arg("bighash");
    for m in &big {
        c.arg(m).arg(m.len());
    }
    let _: i64 = c.query(con).unwrap();
    let mut c = redis::cmd("ZADD");
    c.arg("bigzset");
    for (i, m) in big.iter().enumerate() {
        c.arg(i as f64 / 3.0).arg(m);
    }
    let _: i64 = c.query(con).unwrap();
}

fn dump_all(con: &mut redis::Connection) -> Vec<Image> {
    vec![dump(con, 0), dump(con, 3)]
}

/// Reads every file of the AOF directory listed by the manifest, in order.
fn aof_text(dir: &Path) -> String {
    let d = dir.join("appendonlydir");
    let manifest = std::fs::read_to_string(d.join("appendonly.aof.manifest")).unwrap();
    let mut text = String::new();
    for line in manifest.lines() {
        let name = line.split_whitespace().nth(1).unwrap();
        text.push_str(&String::from_utf8_lossy(
            &std::fs::read(d.join(name)).unwrap(),
        ));
    }
    text
}

/// The last incremental file's path.
fn last_incr(dir: &Path) -> PathBuf {
    let d = dir.join("appendonlydir");
    let manifest = std::fs::read_to_string(d.join("appendonly.aof.manifest")).unwrap();
    let name = manifest
        .lines()
        .rfind(|l| l.ends_with("type i"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .to_string();
    d.join(name)
}

fn info_field(con: &mut redis::Connection, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg("persistence").query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .trim()
        .to_string()
}

fn wait_rewrite_done(con: &mut redis::Connection, rewrites: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if info_field(con, "aof_rewrite_in_progress") == "0"
            && info_field(con, "aof_rewrites").parse::<u64>().unwrap() >= rewrites
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("rewrite did not finish");
}

#[test]
fn every_type_survives_a_restart_through_the_aof() {
    let dir = temp_dir("types");
    let srv = start_aof(
        &dir,
        &["--appendfsync", "always", "--aof-use-rdb-preamble", "no"],
    );
    let mut con = srv.conn();
    write_dataset(&mut con);
    let before = dump_all(&mut con);
    assert_eq!(info_field(&mut con, "aof_enabled"), "1");
    shutdown(srv);
    let manifest =
        std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap();
    assert_eq!(
        manifest,
        "file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    let mut srv = start_aof(&dir, &["--aof-use-rdb-preamble", "no"]);
    let mut con = srv.conn();
    assert_eq!(dump_all(&mut con), before);
    // Rewrites, to a base of commands and to an RDB base: the same data
    // after each restart.
    for (preamble, base) in [("no", "2.base.aof"), ("yes", "3.base.rdb")] {
        q(
            &mut con,
            &["CONFIG", "SET", "aof-use-rdb-preamble", preamble],
        )
        .unwrap();
        assert_eq!(
            q(&mut con, &["BGREWRITEAOF"]).unwrap(),
            Value::SimpleString("Background append only file rewriting started".into())
        );
        wait_rewrite_done(&mut con, 1);
        shutdown(srv);
        let manifest =
            std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap();
        assert!(
            manifest.starts_with(&format!("file appendonly.aof.{base}")),
            "{manifest}"
        );
        srv = start_aof(&dir, &[]);
        con = srv.conn();
        assert_eq!(dump_all(&mut con), before);
    }
    drop(con);
    shutdown(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn expiries_and_non_deterministic_commands_are_logged_as_their_effects() {
    let dir = temp_dir("effects");
    let srv = start_aof(
        &dir,
        &["--appendfsync", "always", "--enable-debug-command", "yes"],
    );
    let mut con = srv.conn();
    // `gone` below must expire on access: the active cycle's deletion would
    // reach the file on its own, after the reply the test reads it by.
    q(&mut con, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap();
    for c in [
        &["SET", "a", "1", "EX", "100"][..],
        &["SETEX", "b", "100", "v"],
        &["SET", "c", "v"],
        &["EXPIRE", "c", "100", "NX"],
        &["GETEX", "c", "PX", "5000"],
        &["SADD", "s", "only"],
        &["SPOP", "s"],
        &["INCRBYFLOAT", "f", "0.5"],
        &["RPUSH", "l", "x"],
        &["BLPOP", "l", "0"],
        &["SET", "gone", "v", "PX", "1"],
    ] {
        q(&mut con, c).unwrap();
    }
    // A transaction with several writes is one MULTI/EXEC unit; one with a
    // single write is just that command; SELECT precedes a change of
    // database.
    for c in [
        &["MULTI"][..],
        &["SET", "m1", "1"],
        &["GET", "m1"],
        &["SET", "m2", "2"],
        &["EXEC"],
        &["MULTI"],
        &["SET", "solo", "1"],
        &["EXEC"],
        &["SELECT", "2"],
        &["SET", "in2", "x"],
        &["SELECT", "0"],
    ] {
        q(&mut con, c).unwrap();
    }
    // A failed conditional write and a read change nothing: not logged.
    q(&mut con, &["SET", "a", "2", "NX"]).unwrap();
    q(&mut con, &["GET", "a"]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    // The expired key is deleted on access, and that deletion is logged.
    assert_eq!(q(&mut con, &["GET", "gone"]).unwrap(), Value::Nil);
    let text = aof_text(&dir);
    for relative in [
        "$2\r\nEX\r\n",
        "SETEX",
        "$6\r\nEXPIRE\r\n",
        "GETEX",
        "SPOP",
        "INCRBYFLOAT",
        "BLPOP",
    ] {
        assert!(!text.contains(relative), "{relative} logged as is:\n{text}");
    }
    for effect in [
        "PXAT",
        "PEXPIREAT",
        "SREM",
        "KEEPTTL",
        "LPOP",
        "$3\r\nDEL\r\n$4\r\ngone",
    ] {
        assert!(text.contains(effect), "{effect} missing:\n{text}");
    }
    assert_eq!(text.matches("$3\r\nSET\r\n$1\r\na\r\n").count(), 1);
    assert!(text.contains(
        "*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$2\r\nm1\r\n$1\r\n1\r\n\
         *3\r\n$3\r\nSET\r\n$2\r\nm2\r\n$1\r\n2\r\n*1\r\n$4\r\nEXEC\r\n"
    ));
    assert_eq!(text.matches("MULTI").count(), 1, "{text}");
    assert!(text.contains("*2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n*3\r\n$3\r\nSET\r\n$3\r\nin2"));
    let before = dump(&mut con, 0);
    drop(con);
    drop(srv); // kill -9: `always` has everything on disk already.
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    assert_eq!(dump(&mut con, 0), before);
    let _ = std::fs::remove_dir_all(&dir);
}

/// GEO and HyperLogLog writes propagate as Redis's do: GEOADD as the ZADD
/// it runs, a search's STORE as executed, PFCOUNT only when it refreshed
/// the cached count, PFDEBUG TODENSE only when it converted; and the
/// values they leave come back after a restart.
#[test]
fn geo_and_hll_writes_are_logged_as_redis_logs_them() {
    let dir = temp_dir("geohll");
    let srv = start_aof(&dir, &["--appendfsync", "always"]);
    let mut con = srv.conn();
    for c in [
        &["GEOADD", "g", "CH", "13.361389", "38.115556", "Palermo"][..],
        &["GEOADD", "g", "NX", "13.361389", "38.115556", "Palermo"],
        &["GEORADIUS", "g", "13", "38", "100", "km", "STORE", "near"],
        &["PFADD", "h", "a", "b"],
        &["PFCOUNT", "h"],
        &["PFCOUNT", "h"],
        &["PFCOUNT", "h", "other"],
        &["PFDEBUG", "TODENSE", "h"],
        &["PFDEBUG", "TODENSE", "h"],
    ] {
        q(&mut con, c).unwrap();
    }
    let text = aof_text(&dir);
    assert!(
        text.contains("*5\r\n$4\r\nzadd\r\n$1\r\ng\r\n$2\r\nCH\r\n$16\r\n3479099956230698\r\n$7\r\nPalermo\r\n"),
        "{text}"
    );
    assert_eq!(
        text.matches("zadd").count(),
        1,
        "the NX no-op is not logged:\n{text}"
    );
    assert!(!text.contains("GEOADD"), "{text}");
    assert!(text.contains("$9\r\nGEORADIUS\r\n"), "{text}");
    assert_eq!(text.matches("PFCOUNT").count(), 1, "{text}");
    assert_eq!(text.matches("TODENSE").count(), 1, "{text}");
    let before = dump(&mut con, 0);
    let h = q(&mut con, &["GET", "h"]).unwrap();
    drop(con);
    drop(srv);
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    assert_eq!(dump(&mut con, 0), before);
    assert_eq!(
        q(&mut con, &["GET", "h"]).unwrap(),
        h,
        "cached count and encoding replayed"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The lazy expirations of RANDOMKEY and SCAN are logged one DEL at a
/// time, never as a MULTI/EXEC block (Redis's CMD_TOUCHES_ARBITRARY_KEYS),
/// and announced as `expired` events.
#[test]
fn lazy_expirations_of_randomkey_and_scan_are_not_a_transaction() {
    for command in ["RANDOMKEY", "SCAN"] {
        let dir = temp_dir(&command.to_lowercase());
        let srv = start_aof(
            &dir,
            &["--appendfsync", "always", "--enable-debug-command", "yes"],
        );
        let mut con = srv.conn();
        q(&mut con, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap();
        q(&mut con, &["CONFIG", "SET", "notify-keyspace-events", "Ex"]).unwrap();
        let mut events = srv.conn();
        events
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut pubsub = events.as_pubsub();
        pubsub.subscribe("__keyevent@0__:expired").unwrap();
        q(&mut con, &["SET", "foo1", "bar", "PX", "1"]).unwrap();
        q(&mut con, &["SET", "foo2", "bar", "PX", "1"]).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        match command {
            "SCAN" => {
                let reply = q(&mut con, &["SCAN", "0"]).unwrap();
                assert_eq!(
                    reply,
                    Value::Array(vec![Value::BulkString(b"0".to_vec()), Value::Array(vec![])])
                );
            }
            _ => assert_eq!(q(&mut con, &[command]).unwrap(), Value::Nil),
        }
        let mut gone: Vec<String> = (0..2)
            .map(|_| pubsub.get_message().unwrap().get_payload().unwrap())
            .collect();
        gone.sort();
        assert_eq!(gone, ["foo1", "foo2"], "{command}");
        // SCAN's deletions reach the AOF writer on their own, with no
        // reply waiting for them.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let tail = loop {
            let text = aof_text(&dir);
            let tail = text[text.rfind("bar").unwrap()..].to_string();
            let dels = tail.matches("$3\r\nDEL\r\n").count();
            if dels >= 2 || std::time::Instant::now() > deadline {
                break tail;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(!tail.contains("MULTI"), "{command}: {tail}");
        assert_eq!(
            tail.matches("$3\r\nDEL\r\n").count(),
            2,
            "{command}: {tail}"
        );
    }
}

/// Runs Vireo with the AOF on in `dir`, expecting it to exit by itself
/// (start-up refused): whether it exited successfully, and its output. A
/// server that starts serving instead is killed after a while.
fn run_to_exit(dir: &Path, extra: &[&str]) -> (bool, String) {
    let port = common::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vireo"))
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--dir", dir.to_str().unwrap(), "--appendonly", "yes"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let log =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), log)
}

#[test]
fn a_torn_tail_is_truncated_or_refused_per_aof_load_truncated() {
    let dir = temp_dir("torn");
    let srv = start_aof(&dir, &["--appendfsync", "always"]);
    let mut con = srv.conn();
    q(&mut con, &["SET", "k", "v"]).unwrap();
    q(&mut con, &["RPUSH", "l", "1", "2"]).unwrap();
    drop(con);
    drop(srv);
    let incr = last_incr(&dir);
    let good_len = std::fs::metadata(&incr).unwrap().len();
    let mut data = std::fs::read(&incr).unwrap();
    data.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$5\r\nhal");
    std::fs::write(&incr, &data).unwrap();

    // aof-load-truncated no: start-up fails.
    let (ok, _) = run_to_exit(&dir, &["--aof-load-truncated", "no"]);
    assert!(!ok);
    assert_eq!(std::fs::metadata(&incr).unwrap().len(), data.len() as u64);

    // yes: the tail is cut off and everything before it is there.
    let srv = start_aof(&dir, &["--aof-load-truncated", "yes"]);
    let mut con = srv.conn();
    assert_eq!(
        q(&mut con, &["GET", "k"]).unwrap(),
        Value::BulkString(b"v".to_vec())
    );
    assert_eq!(q(&mut con, &["LLEN", "l"]).unwrap(), Value::Int(2));
    assert_eq!(q(&mut con, &["EXISTS", "x"]).unwrap(), Value::Int(0));
    assert_eq!(std::fs::metadata(&incr).unwrap().len(), good_len);
    drop(con);
    drop(srv);

    // Garbage in the middle stops start-up whatever the setting.
    let mut data = std::fs::read(&incr).unwrap();
    let tail = data.split_off(10);
    data.extend_from_slice(b"garbage\r\n");
    data.extend_from_slice(&tail);
    std::fs::write(&incr, &data).unwrap();
    let (ok, log) = run_to_exit(&dir, &[]);
    assert!(!ok);
    assert!(
        log.contains("Bad file format reading the append only file"),
        "{log}"
    );
    assert!(log.contains("appendonly.aof.1.incr.aof"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unfinished_transaction_at_the_tail_is_reverted() {
    let dir = temp_dir("multi-tail");
    let srv = start_aof(&dir, &["--appendfsync", "always"]);
    let mut con = srv.conn();
    q(&mut con, &["SET", "k", "v"]).unwrap();
    drop(con);
    drop(srv);
    let incr = last_incr(&dir);
    let good_len = std::fs::metadata(&incr).unwrap().len();
    let mut data = std::fs::read(&incr).unwrap();
    // Complete commands, but no EXEC: the transaction never happened.
    data.extend_from_slice(b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\nq\r\n$1\r\n1\r\n");
    std::fs::write(&incr, &data).unwrap();
    let (ok, log) = run_to_exit(&dir, &["--aof-load-truncated", "no"]);
    assert!(!ok, "{log}");
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    assert_eq!(q(&mut con, &["EXISTS", "k", "q"]).unwrap(), Value::Int(1));
    assert_eq!(std::fs::metadata(&incr).unwrap().len(), good_len);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_aof_reports_and_fixes_a_torn_tail() {
    let dir = temp_dir("check");
    let f = dir.join("plain.aof");
    let good = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n*1\r\n$4\r\nEXEC\r\n";
    let mut data = good.to_vec();
    data.extend_from_slice(b"*2\r\n$4\r\nINCR\r\n$1");
    std::fs::write(&f, &data).unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_vireo"))
            .arg("check-aof")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&[f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains(&format!("ok_up_to={}", good.len())), "{text}");
    assert!(
        text.contains("is not valid. Use the --fix option"),
        "{text}"
    );
    let out = run(&["--fix", f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Successfully truncated AOF"), "{text}");
    assert_eq!(std::fs::read(&f).unwrap(), good);
    let out = run(&[f.to_str().unwrap()]);
    assert!(out.status.success());
    // A transaction without EXEC at the end is cut before its MULTI.
    std::fs::write(&f, &good[..good.len() - 14]).unwrap();
    let out = run(&["--fix", "--yes", f.to_str().unwrap()]);
    assert!(out.status.success());
    assert_eq!(std::fs::read(&f).unwrap(), &good[..27]);

    // A multi-part set through its manifest.
    let srv = start_aof(&dir, &["--appendfsync", "always"]);
    let mut con = srv.conn();
    q(&mut con, &["SET", "a", "b"]).unwrap();
    drop(con);
    drop(srv);
    let manifest = dir.join("appendonlydir/appendonly.aof.manifest");
    let out = run(&[manifest.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("All AOF files and manifest are valid"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writers INCR their own counters and RPUSH to a shared list until told
/// to stop.
fn spawn_writers(port: u16, n: usize, stop: Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<()>> {
    (0..n)
        .map(|i| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
                let mut con = client.get_connection().unwrap();
                let mut j = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let _: i64 = redis::cmd("INCR")
                        .arg(format!("c{i}"))
                        .query(&mut con)
                        .unwrap();
                    let _: i64 = redis::cmd("RPUSH")
                        .arg("shared")
                        .arg(j)
                        .query(&mut con)
                        .unwrap();
                    let _: () = redis::cmd("SET")
                        .arg(format!("k{i}:{}", j % 50))
                        .arg(j)
                        .arg("PX")
                        .arg(1_000_000)
                        .query(&mut con)
                        .unwrap();
                    j += 1;
                }
            })
        })
        .collect()
}

/// Clients on different workers change the same few keys at once, with
/// order-sensitive commands (APPEND, SET, LPUSH, SETRANGE) in both
/// databases 0 and 3, pipelined and in transactions: the log must hold
/// them in the order they ran, so a restart through it shows exactly the
/// same data.
#[test]
fn concurrent_writers_on_the_same_keys_restart_to_the_same_data() {
    let dir = temp_dir("same-keys");
    let srv = start_aof(&dir, &["--threads", "4"]);
    let port = srv.port;
    let clients: Vec<_> = (0..6)
        .map(|c| {
            std::thread::spawn(move || {
                let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
                let mut con = client.get_connection().unwrap();
                for round in 0..150 {
                    let mut p = redis::pipe();
                    for j in 0..8 {
                        let key = (round + j) % 5;
                        let tag = format!("{c}:{round}:{j},");
                        p.cmd("APPEND").arg(format!("a{key}")).arg(&tag).ignore();
                        p.cmd("SET").arg(format!("s{key}")).arg(&tag).ignore();
                        p.cmd("LPUSH").arg("l").arg(&tag).ignore();
                    }
                    p.cmd("SELECT").arg(3).ignore();
                    p.cmd("SETRANGE")
                        .arg("r")
                        .arg(round % 7)
                        .arg(format!("{c}"))
                        .ignore();
                    p.cmd("APPEND").arg("a0").arg(format!("{c}")).ignore();
                    p.cmd("SELECT").arg(0).ignore();
                    let () = p.query(&mut con).unwrap();
                    // A transaction across both databases.
                    let mut t = redis::pipe();
                    t.atomic()
                        .cmd("APPEND")
                        .arg("a1")
                        .arg(format!("<{c}"))
                        .ignore()
                        .cmd("SELECT")
                        .arg(3)
                        .ignore()
                        .cmd("APPEND")
                        .arg("a1")
                        .arg(format!("{c}>"))
                        .ignore()
                        .cmd("SELECT")
                        .arg(0)
                        .ignore();
                    let () = t.query(&mut con).unwrap();
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let mut con = srv.conn();
    let before = dump_all(&mut con);
    assert_eq!(before[0].len(), 11, "a0..a4, s0..s4 and l");
    shutdown(srv);
    let srv = start_aof(&dir, &["--threads", "4"]);
    let mut con = srv.conn();
    assert_eq!(dump_all(&mut con), before);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bgrewriteaof_under_concurrent_writes_then_restart_gives_the_same_data() {
    let dir = temp_dir("rewrite");
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    write_dataset(&mut con);
    let stop = Arc::new(AtomicBool::new(false));
    let writers = spawn_writers(srv.port, 3, stop.clone());
    std::thread::sleep(Duration::from_millis(200));
    q(&mut con, &["BGREWRITEAOF"]).unwrap();
    wait_rewrite_done(&mut con, 1);
    std::thread::sleep(Duration::from_millis(200));
    q(&mut con, &["BGREWRITEAOF"]).unwrap();
    wait_rewrite_done(&mut con, 2);
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let before = dump_all(&mut con);
    assert!(before[0].contains_key(&b"shared"[..]));
    shutdown(srv);
    let manifest =
        std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap();
    assert_eq!(
        manifest,
        "file appendonly.aof.3.base.rdb seq 3 type b\nfile appendonly.aof.3.incr.aof seq 3 type i\n"
    );
    let names: Vec<String> = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "old files are deleted: {names:?}");
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    assert_eq!(dump_all(&mut con), before);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn config_set_appendonly_yes_writes_a_base_of_the_existing_data() {
    let dir = temp_dir("enable");
    let srv = Server::start(&["--dir", dir.to_str().unwrap()]);
    let mut con = srv.conn();
    write_dataset(&mut con);
    assert_eq!(info_field(&mut con, "aof_enabled"), "0");
    q(&mut con, &["CONFIG", "SET", "appendonly", "yes"]).unwrap();
    wait_rewrite_done(&mut con, 1);
    q(&mut con, &["SET", "after", "1"]).unwrap();
    let before = dump_all(&mut con);
    shutdown(srv);
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    assert_eq!(dump_all(&mut con), before);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts redis-server with its AOF in `dir` (no RDB preamble, so the base
/// is commands).
fn start_redis_aof(dir: &Path) -> (std::process::Child, u16) {
    let port = common::free_port();
    let mut child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--dir", dir.to_str().unwrap(), "--appendonly", "yes"])
        .args(["--aof-use-rdb-preamble", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server must be installed");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        // Past -LOADING too: the AOF is loaded.
        let loaded = common::answers_ping(port) && q(&mut redis_conn(port), &["PING"]).is_ok();
        if loaded {
            return (child, port);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("redis-server did not start");
}

fn redis_conn(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap()
}

#[test]
fn aof_directories_move_between_redis_and_vireo() {
    // Redis writes, Vireo loads.
    let dir = temp_dir("interop");
    let (mut child, port) = start_redis_aof(&dir);
    let mut con = redis_conn(port);
    write_dataset(&mut con);
    q(&mut con, &["SPOP", "set"]).unwrap();
    let from_redis = dump_all(&mut con);
    let _ = q(&mut con, &["SHUTDOWN", "NOSAVE"]);
    let _ = child.wait();
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    assert_eq!(dump_all(&mut con), from_redis);

    // Vireo appends (and rewrites), Redis loads.
    q(&mut con, &["RPUSH", "list", "more"]).unwrap();
    q(&mut con, &["SPOP", "bigset", "3"]).unwrap();
    q(&mut con, &["EXPIRE", "str", "5000"]).unwrap();
    let from_vireo = dump_all(&mut con);
    shutdown(srv);
    let (mut child, port) = start_redis_aof(&dir);
    let mut con = redis_conn(port);
    assert_eq!(dump_all(&mut con), from_vireo);
    let _ = q(&mut con, &["SHUTDOWN", "NOSAVE"]);
    let _ = child.wait();

    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    q(&mut con, &["BGREWRITEAOF"]).unwrap();
    wait_rewrite_done(&mut con, 1);
    q(&mut con, &["SET", "after-rewrite", "1"]).unwrap();
    let rewritten = dump_all(&mut con);
    shutdown(srv);
    let (mut child, port) = start_redis_aof(&dir);
    let mut con = redis_conn(port);
    assert_eq!(dump_all(&mut con), rewritten);
    let _ = q(&mut con, &["SHUTDOWN", "NOSAVE"]);
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Acknowledged (time, value) pairs of one writer.
type Acked = Vec<(Instant, i64)>;

/// Writers INCR their own counter and record every acknowledged value with
/// the time it was acknowledged; the server is killed with SIGKILL mid-way.
/// Returns, per writer, the acknowledged history and the kill time.
fn crash_run(dir: &Path, fsync: &str, writers: usize) -> (Vec<Acked>, Instant) {
    let mut srv = start_aof(dir, &["--appendfsync", fsync]);
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::new(Mutex::new(vec![Vec::new(); writers]));
    let port = srv.port;
    let handles: Vec<_> = (0..writers)
        .map(|i| {
            let stop = stop.clone();
            let acked = acked.clone();
            std::thread::spawn(move || {
                let mut con = redis_conn(port);
                while !stop.load(Ordering::Relaxed) {
                    match redis::cmd("INCR")
                        .arg(format!("n{i}"))
                        .query::<i64>(&mut con)
                    {
                        Ok(v) => acked.lock().unwrap()[i].push((Instant::now(), v)),
                        Err(_) => break,
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(400));
    srv.child().kill().unwrap();
    let killed = Instant::now();
    let _ = srv.child().wait();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    (acked, killed)
}

/// Under `appendfsync always` every reply waits for its command to be
/// written and synced; with many pipelining clients, units staged while
/// the writer is between reading its bound and taking the slots must
/// still be written in the next round (a writer that slept on them held
/// those replies forever). Each pipeline must be answered within seconds.
#[test]
fn appendfsync_always_answers_every_pipeline_under_load() {
    let dir = temp_dir("always-load");
    let srv = start_aof(&dir, &["--appendfsync", "always", "--threads", "2"]);
    let port = srv.port;
    let deadline = Instant::now() + Duration::from_secs(4);
    let handles: Vec<_> = (0..12)
        .map(|i| {
            std::thread::spawn(move || {
                let mut con = redis_conn(port);
                con.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut pipelines = 0u64;
                while Instant::now() < deadline {
                    let mut p = redis::pipe();
                    for j in 0..16 {
                        p.cmd("SET")
                            .arg(format!("k{i}:{j}"))
                            .arg(pipelines)
                            .ignore();
                    }
                    if let Err(e) = p.query::<()>(&mut con) {
                        panic!("client {i}: pipeline {pipelines} got no reply: {e}");
                    }
                    pipelines += 1;
                }
                pipelines
            })
        })
        .collect();
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(total > 100, "only {total} pipelines answered");
    shutdown(srv);
}

#[test]
fn appendfsync_always_keeps_every_acknowledged_write_across_kill_9() {
    for round in 0..3 {
        let dir = temp_dir(&format!("always{round}"));
        let (acked, _) = crash_run(&dir, "always", 4);
        let srv = start_aof(&dir, &[]);
        let mut con = srv.conn();
        for (i, history) in acked.iter().enumerate() {
            let last = history.last().map_or(0, |&(_, v)| v);
            assert!(last > 0, "writer {i} made progress");
            let got: Option<i64> = redis::cmd("GET")
                .arg(format!("n{i}"))
                .query(&mut con)
                .unwrap();
            assert!(
                got.unwrap_or(0) >= last,
                "round {round} writer {i}: acknowledged {last}, restored {got:?}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn appendfsync_everysec_loses_at_most_about_two_seconds() {
    let dir = temp_dir("everysec");
    let (acked, killed) = crash_run(&dir, "everysec", 2);
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    for (i, history) in acked.iter().enumerate() {
        let got: i64 = redis::cmd("GET")
            .arg(format!("n{i}"))
            .query::<Option<i64>>(&mut con)
            .unwrap()
            .unwrap_or(0);
        // Everything acknowledged two seconds before the kill survives.
        let floor = history
            .iter()
            .take_while(|(t, _)| killed.duration_since(*t) > Duration::from_secs(2))
            .last()
            .map_or(0, |&(_, v)| v);
        assert!(got >= floor, "writer {i}: restored {got} < {floor}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_aof_rewrites_itself_when_it_grows_past_the_configured_size() {
    let dir = temp_dir("auto");
    let srv = start_aof(
        &dir,
        &[
            "--auto-aof-rewrite-min-size",
            "64kb",
            "--auto-aof-rewrite-percentage",
            "100",
        ],
    );
    let mut con = srv.conn();
    // The same key overwritten: the log grows, the data does not.
    let value = "x".repeat(1000);
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(&mut con, "aof_rewrites") == "0"
        && info_field(&mut con, "aof_rewrite_in_progress") == "0"
    {
        assert!(Instant::now() < deadline, "no automatic rewrite");
        for _ in 0..10 {
            q(&mut con, &["SET", "k", &value]).unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    wait_rewrite_done(&mut con, 1);
    let size: u64 = info_field(&mut con, "aof_current_size").parse().unwrap();
    assert!(size < 64 * 1024, "compacted, now {size} bytes");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Field names of INFO persistence, in order.
fn persistence_fields(con: &mut redis::Connection) -> Vec<String> {
    let info: String = redis::cmd("INFO").arg("persistence").query(con).unwrap();
    info.lines()
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string()))
        .collect()
}

#[test]
fn info_persistence_shows_redis_aof_fields_with_the_aof_on() {
    let dir = temp_dir("info-vireo");
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    let ours = persistence_fields(&mut con);
    let rdir = temp_dir("info-redis");
    let (mut child, port) = start_redis_aof(&rdir);
    let mut rcon = redis_conn(port);
    let theirs = persistence_fields(&mut rcon);
    let _ = q(&mut rcon, &["SHUTDOWN", "NOSAVE"]);
    let _ = child.wait();
    let aof = |v: &[String]| -> Vec<String> {
        v.iter()
            .filter(|f| f.starts_with("aof_") || f.starts_with("module_fork"))
            .cloned()
            .collect()
    };
    assert_eq!(aof(&ours), aof(&theirs));
    assert_eq!(info_field(&mut con, "aof_enabled"), "1");
    assert_eq!(info_field(&mut con, "aof_last_write_status"), "ok");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&rdir);
}

#[test]
fn loading_ignores_maxmemory_as_redis_does() {
    let dir = temp_dir("maxmem");
    let srv = start_aof(&dir, &["--aof-use-rdb-preamble", "no"]);
    let mut con = srv.conn();
    write_dataset(&mut con);
    let before = dump_all(&mut con);
    shutdown(srv);
    // Far below what the data needs: replayed writes are not refused.
    let srv = start_aof(&dir, &["--maxmemory", "1mb"]);
    let mut con = srv.conn();
    assert_eq!(dump_all(&mut con), before);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn keys_removed_by_active_expiry_are_logged_as_deletions() {
    let dir = temp_dir("active-expire");
    let srv = start_aof(&dir, &["--appendfsync", "always"]);
    let mut con = srv.conn();
    q(&mut con, &["SET", "short", "v", "PX", "30"]).unwrap();
    // DBSIZE counts keys not yet reclaimed: 0 once the cycle removed it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while q(&mut con, &["DBSIZE"]).unwrap() != Value::Int(0) {
        assert!(Instant::now() < deadline, "active expiry did not run");
        std::thread::sleep(Duration::from_millis(20));
    }
    q(&mut con, &["SET", "sync", "1"]).unwrap();
    let text = aof_text(&dir);
    assert!(
        text.contains("*2\r\n$3\r\nDEL\r\n$5\r\nshort\r\n"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_single_file_aof_of_redis_6_is_migrated_into_the_directory() {
    let dir = temp_dir("upgrade");
    let mut old = Vec::new();
    for c in [
        &["SELECT", "0"][..],
        &["SET", "old", "style"],
        &["RPUSH", "l", "a", "b"],
    ] {
        old.extend_from_slice(format!("*{}\r\n", c.len()).as_bytes());
        for a in c {
            old.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    std::fs::write(dir.join("appendonly.aof"), &old).unwrap();
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    assert_eq!(
        q(&mut con, &["GET", "old"]).unwrap(),
        Value::BulkString(b"style".to_vec())
    );
    assert_eq!(q(&mut con, &["LLEN", "l"]).unwrap(), Value::Int(2));
    q(&mut con, &["SET", "new", "1"]).unwrap();
    shutdown(srv);
    assert!(!dir.join("appendonly.aof").exists());
    let manifest =
        std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap();
    assert_eq!(
        manifest,
        "file appendonly.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    assert_eq!(
        q(&mut con, &["EXISTS", "old", "l", "new"]).unwrap(),
        Value::Int(3)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `args` until it succeeds, for up to ten seconds.
fn until_ok(con: &mut redis::Connection, args: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while q(con, args).is_err() {
        assert!(Instant::now() < deadline, "{args:?} kept failing");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_failing_aof_write_refuses_writes_until_a_write_succeeds_again() {
    let dir = temp_dir("write-error");
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    assert_eq!(q(&mut con, &["SET", "a", "1"]).unwrap(), Value::Okay);
    // The next rewrite's incremental file is /dev/full: writes to it fail.
    let full = dir.join("appendonlydir/appendonly.aof.2.incr.aof");
    std::os::unix::fs::symlink("/dev/full", &full).unwrap();
    q(&mut con, &["BGREWRITEAOF"]).unwrap();
    wait_rewrite_done(&mut con, 1);
    // The command ran; its log write fails afterwards, and from then on
    // writes (and PING, as in Redis) are refused while reads are served.
    assert_eq!(q(&mut con, &["SET", "b", "2"]).unwrap(), Value::Okay);
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        match q(&mut con, &["SET", "c", "3"]) {
            Err(e) => break format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
            Ok(_) => assert!(Instant::now() < deadline, "writes were never refused"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        refused,
        "MISCONF Errors writing to the AOF file: No space left on device"
    );
    assert!(q(&mut con, &["PING"]).is_err());
    assert_eq!(info_field(&mut con, "aof_last_write_status"), "err");
    assert_eq!(
        q(&mut con, &["GET", "a"]).unwrap(),
        Value::BulkString(b"1".to_vec())
    );
    // The next rewrite opens a working file: the retained bytes go there
    // and writes are accepted again.
    std::fs::remove_file(&full).unwrap();
    q(&mut con, &["BGREWRITEAOF"]).unwrap();
    wait_rewrite_done(&mut con, 2);
    until_ok(&mut con, &["SET", "c", "3"]);
    assert_eq!(info_field(&mut con, "aof_last_write_status"), "ok");
    shutdown(srv);
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    let values: Vec<Option<String>> = redis::cmd("MGET")
        .arg(&["a", "b", "c"][..])
        .query(&mut con)
        .unwrap();
    assert_eq!(values, ["1", "2", "3"].map(|v| Some(v.to_string())));
}

#[test]
fn a_failing_aof_write_under_appendfsync_always_stops_the_server() {
    let dir = temp_dir("write-error-always");
    let mut srv = start_aof(&dir, &["--appendfsync", "always"]);
    let mut con = srv.conn();
    assert_eq!(q(&mut con, &["SET", "a", "1"]).unwrap(), Value::Okay);
    let full = dir.join("appendonlydir/appendonly.aof.2.incr.aof");
    std::os::unix::fs::symlink("/dev/full", &full).unwrap();
    q(&mut con, &["BGREWRITEAOF"]).unwrap();
    wait_rewrite_done(&mut con, 1);
    // Never acknowledged: the server exits instead (Redis's contract).
    assert!(q(&mut con, &["SET", "b", "2"]).is_err());
    let status = srv.child().wait().unwrap();
    assert_eq!(status.code(), Some(1));
}

/// `aof-timestamp-enabled`: the incremental file starts with a `#TS:`
/// annotation, so does a rewritten command base, and both load back.
#[test]
fn timestamp_annotations_open_the_files_and_load_back() {
    let dir = temp_dir("timestamps");
    let srv = start_aof(
        &dir,
        &[
            "--aof-timestamp-enabled",
            "yes",
            "--aof-use-rdb-preamble",
            "no",
        ],
    );
    let mut con = srv.conn();
    q(&mut con, &["SET", "foo", "bar"]).unwrap();
    let starts_stamped = |path: &Path| {
        let text = std::fs::read_to_string(path).unwrap();
        let first = text.lines().next().unwrap_or_default().to_owned();
        first
            .strip_prefix("#TS:")
            .is_some_and(|s| s.parse::<u64>().is_ok())
    };
    // The writer thread logs in batches: wait for the SET to land.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::fs::metadata(last_incr(&dir)).map_or(0, |m| m.len()) == 0 {
        assert!(std::time::Instant::now() < deadline, "nothing logged");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(starts_stamped(&last_incr(&dir)), "{}", aof_text(&dir));
    let rewrites: u64 = info_field(&mut con, "aof_rewrites").parse().unwrap();
    q(&mut con, &["BGREWRITEAOF"]).unwrap();
    wait_rewrite_done(&mut con, rewrites + 1);
    let base = dir.join("appendonlydir/appendonly.aof.2.base.aof");
    assert!(starts_stamped(&base), "{}", aof_text(&dir));
    shutdown(srv);
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    assert_eq!(
        q(&mut con, &["GET", "foo"]).unwrap(),
        Value::BulkString(b"bar".to_vec())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Redis's `checkAlreadyExpired`: while the AOF loads, an EXPIRE into the
/// past only sets the TTL, and nothing expires on lookup, so the commands
/// after it still write to the key; it is gone once loading is done.
#[test]
fn a_past_expire_in_the_aof_keeps_the_key_until_loading_ends() {
    let dir = temp_dir("past-expire");
    let aof_dir = dir.join("appendonlydir");
    std::fs::create_dir_all(&aof_dir).unwrap();
    let mut log = Vec::new();
    for c in [
        &["RPUSH", "list", "foo"][..],
        &["PEXPIREAT", "list", "1000"],
        &["RPUSH", "list", "bar"],
    ] {
        log.extend_from_slice(format!("*{}\r\n", c.len()).as_bytes());
        for a in c {
            log.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    std::fs::write(aof_dir.join("appendonly.aof.1.incr.aof"), &log).unwrap();
    std::fs::write(
        aof_dir.join("appendonly.aof.manifest"),
        "file appendonly.aof.1.incr.aof seq 1 type i\n",
    )
    .unwrap();
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    assert_eq!(q(&mut con, &["LLEN", "list"]).unwrap(), Value::Int(0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// BGREWRITEAOF counts as in progress from its reply on, as Redis's fork
/// does: INFO says so at once, and a second one is refused with Redis's
/// error until it is done.
#[test]
fn a_rewrite_is_in_progress_as_soon_as_bgrewriteaof_answers() {
    let dir = temp_dir("in-progress");
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    for i in 0..200 {
        q(&mut con, &["SET", &format!("k{i}"), "v"]).unwrap();
    }
    q(&mut con, &["CONFIG", "SET", "rdb-key-save-delay", "2000"]).unwrap();
    let rewrites: u64 = info_field(&mut con, "aof_rewrites").parse().unwrap();
    q(&mut con, &["BGREWRITEAOF"]).unwrap();
    assert_eq!(info_field(&mut con, "aof_rewrite_in_progress"), "1");
    let again = q(&mut con, &["BGREWRITEAOF"]).unwrap_err();
    assert!(
        again
            .to_string()
            .contains("Background append only file rewriting already in progress"),
        "{again}"
    );
    q(&mut con, &["CONFIG", "SET", "rdb-key-save-delay", "0"]).unwrap();
    wait_rewrite_done(&mut con, rewrites + 1);
    assert_eq!(info_field(&mut con, "aof_rewrite_in_progress"), "0");
    shutdown(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `CONFIG SET appendonly no` stops a running rewrite, as Redis kills its
/// rewrite child, however slow `rdb-key-save-delay` makes it; the temporary
/// file goes, and turning the AOF on again rewrites afresh.
#[test]
fn turning_the_aof_off_stops_a_running_rewrite() {
    let dir = temp_dir("cancel");
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    q(&mut con, &["SET", "k", "v"]).unwrap();
    q(
        &mut con,
        &["CONFIG", "SET", "rdb-key-save-delay", "10000000"],
    )
    .unwrap();
    q(&mut con, &["BGREWRITEAOF"]).unwrap();
    q(&mut con, &["CONFIG", "SET", "appendonly", "no"]).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while info_field(&mut con, "aof_rewrite_in_progress") != "0" {
        assert!(
            std::time::Instant::now() < deadline,
            "the rewrite kept running"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let temps = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("temp-")
        })
        .count();
    assert_eq!(temps, 0);
    q(&mut con, &["CONFIG", "SET", "rdb-key-save-delay", "0"]).unwrap();
    let rewrites: u64 = info_field(&mut con, "aof_rewrites").parse().unwrap();
    q(&mut con, &["CONFIG", "SET", "appendonly", "yes"]).unwrap();
    wait_rewrite_done(&mut con, rewrites + 1);
    shutdown(srv);
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    assert_eq!(
        q(&mut con, &["GET", "k"]).unwrap(),
        Value::BulkString(b"v".to_vec())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Inside EXEC, BGREWRITEAOF is scheduled rather than started, as Redis
/// says in its reply; the rewrite then runs.
#[test]
fn bgrewriteaof_inside_exec_is_scheduled() {
    let dir = temp_dir("exec-scheduled");
    let srv = start_aof(&dir, &[]);
    let mut con = srv.conn();
    let rewrites: u64 = info_field(&mut con, "aof_rewrites").parse().unwrap();
    let (set, rewrite): (String, String) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("foo")
        .arg("bar")
        .cmd("BGREWRITEAOF")
        .query(&mut con)
        .unwrap();
    assert_eq!(set, "OK");
    assert_eq!(rewrite, "Background append only file rewriting scheduled");
    wait_rewrite_done(&mut con, rewrites + 1);
    shutdown(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
