//! RDB persistence end to end: SAVE/BGSAVE and restart, point-in-time
//! snapshots under concurrent writes, save on SHUTDOWN and SIGTERM, INFO
//! persistence, MISCONF after a failed save, -LOADING, and dump files
//! moving between Vireo and Debian's redis-server in both directions.

mod common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{dataset, err, info_field, ok, Server};
use redis::{Connection, Value};

/// Fills db 0 and db 3 with every type in both its small and its large
/// encoding, plus strings of every kind and keys with a TTL.
fn fill_every_type(con: &mut Connection) {
    for db in ["0", "3"] {
        ok(con, &["SELECT", db]);
        let long = "x".repeat(100);
        let compressible = "ab".repeat(25_000);
        ok(con, &["SET", "s:raw", &long]);
        ok(con, &["SET", "s:int", "12345"]);
        ok(con, &["SET", "s:neg", "-7000000000"]);
        ok(con, &["SET", "s:big", &compressible]);
        ok(con, &["SET", "s:empty", ""]);
        ok(con, &["SET", "s:ttl", "v", "EX", "1000"]);
        ok(con, &["RPUSH", "l:small", "a", "1", "b", "-2", ""]);
        for chunk in (0..2000).collect::<Vec<_>>().chunks(500) {
            let mut c = redis::cmd("RPUSH");
            c.arg("l:big");
            for i in chunk {
                c.arg(format!("item-{i}"));
            }
            c.query::<()>(con).unwrap();
        }
        ok(con, &["RPUSH", "l:huge-elements", &"y".repeat(10_000), "z"]);
        ok(con, &["HSET", "h:small", "f1", "v1", "f2", "2", "f3", ""]);
        let mut c = redis::cmd("HSET");
        c.arg("h:big");
        for i in 0..700 {
            c.arg(format!("field-{i}")).arg(format!("value-{i}"));
        }
        c.query::<()>(con).unwrap();
        ok(con, &["PEXPIRE", "h:big", "500000"]);
        ok(
            con,
            &["SADD", "set:ints", "1", "-5", "300", "70000", "5000000000"],
        );
        let mut c = redis::cmd("SADD");
        c.arg("set:big-ints");
        for i in 0..1000 {
            c.arg(i * 7);
        }
        c.query::<()>(con).unwrap();
        ok(con, &["SADD", "set:strs", "a", "b", "c"]);
        let mut c = redis::cmd("SADD");
        c.arg("set:big-strs");
        for i in 0..700 {
            c.arg(format!("m{i}"));
        }
        c.query::<()>(con).unwrap();
        ok(
            con,
            &[
                "ZADD", "z:small", "1", "a", "-2.5", "b", "inf", "c", "-inf", "d",
            ],
        );
        let mut c = redis::cmd("ZADD");
        c.arg("z:big");
        for i in 0..300 {
            c.arg(format!("{}.25", i)).arg(format!("member-{i}"));
        }
        c.query::<()>(con).unwrap();
    }
    ok(con, &["SELECT", "0"]);
}

/// OBJECT ENCODING of every key in db 0 and 3.
fn encodings(con: &mut Connection) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for db in ["0", "3"] {
        ok(con, &["SELECT", db]);
        let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(con).unwrap();
        keys.sort();
        for k in keys {
            let enc: String = redis::cmd("OBJECT")
                .arg("ENCODING")
                .arg(&k)
                .query(con)
                .unwrap();
            out.push((format!("{db} {k}"), enc));
        }
    }
    ok(con, &["SELECT", "0"]);
    out
}

/// Waits (generously) until no background save runs.
fn wait_bgsave_done(con: &mut Connection) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_field(con, "rdb_bgsave_in_progress") != "0" {
        assert!(Instant::now() < deadline, "BGSAVE did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn save_and_restart_keeps_every_type_encoding_and_ttl() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    fill_every_type(&mut con);
    let before = dataset(srv.port);
    let enc_before = encodings(&mut con);
    assert_eq!(ok(&mut con, &["SAVE"]), Value::Okay);
    assert_eq!(info_field(&mut con, "rdb_changes_since_last_save"), "0");
    assert_eq!(info_field(&mut con, "rdb_saves"), "1");
    let dir = srv.kill_keep_dir();
    let srv = Server::start_in(dir, &[]);
    let mut con = srv.conn();
    assert_eq!(dataset(srv.port), before);
    assert_eq!(encodings(&mut con), enc_before);
    let keys = before.len().to_string();
    assert_eq!(info_field(&mut con, "rdb_last_load_keys_loaded"), keys);
    let ttl: i64 = redis::cmd("TTL").arg("s:ttl").query(&mut con).unwrap();
    assert!((990..=1000).contains(&ttl), "ttl {ttl}");
}

#[test]
fn expired_keys_are_not_loaded() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["SET", "short", "v", "PX", "300"]);
    ok(&mut con, &["SET", "long", "v"]);
    ok(&mut con, &["SAVE"]);
    std::thread::sleep(Duration::from_millis(400));
    let srv = Server::start_in(srv.kill_keep_dir(), &[]);
    let mut con = srv.conn();
    assert_eq!(ok(&mut con, &["DBSIZE"]), Value::Int(1));
    assert_eq!(info_field(&mut con, "rdb_last_load_keys_expired"), "1");
}

/// A BGSAVE taken while a client rewrites every key in a fixed order, round
/// after round, must hold one instant's state: along that order the values
/// never increase and span at most two adjacent rounds.
#[test]
fn bgsave_under_writes_is_a_point_in_time_image() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    const KEYS: usize = 20_000;
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(1000) {
        let mut c = redis::cmd("MSET");
        for i in chunk {
            c.arg(format!("k{i}")).arg(0);
        }
        c.query::<()>(&mut con).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let mut con = srv.conn();
        std::thread::spawn(move || {
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                round += 1;
                let mut pipe = redis::pipe();
                for i in 0..KEYS {
                    pipe.cmd("SET").arg(format!("k{i}")).arg(round).ignore();
                    if i % 500 == 499 {
                        pipe.query::<()>(&mut con).unwrap();
                        pipe = redis::pipe();
                    }
                }
            }
            round
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        ok(&mut con, &["BGSAVE"]),
        Value::SimpleString("Background saving started".into())
    );
    assert_eq!(
        err(&mut con, &["BGSAVE"]),
        "ERR Background save already in progress"
    );
    wait_bgsave_done(&mut con);
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    assert!(rounds >= 2, "the writer must have been writing");
    assert_eq!(info_field(&mut con, "rdb_last_bgsave_status"), "ok");
    let srv = Server::start_in(srv.kill_keep_dir(), &[]);
    let mut con = srv.conn();
    let mut c = redis::cmd("MGET");
    for i in 0..KEYS {
        c.arg(format!("k{i}"));
    }
    let vals: Vec<u64> = c.query(&mut con).unwrap();
    assert!(
        vals.windows(2).all(|w| w[0] >= w[1]),
        "the image is not one instant's state"
    );
    assert!(vals[0] - vals[KEYS - 1] <= 1);
}

#[test]
fn bgsave_options_and_errors() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    assert_eq!(err(&mut con, &["BGSAVE", "NOW"]), "ERR syntax error");
    assert_eq!(
        err(&mut con, &["BGSAVE", "SCHEDULE", "x"]),
        "ERR syntax error"
    );
    ok(&mut con, &["MULTI"]);
    assert_eq!(
        err(&mut con, &["SAVE"]),
        "ERR Command not allowed inside a transaction"
    );
    ok(&mut con, &["DISCARD"]);
    // Inside a transaction a BGSAVE is scheduled, as in Redis.
    ok(&mut con, &["MULTI"]);
    ok(&mut con, &["SET", "k", "v"]);
    ok(&mut con, &["BGSAVE"]);
    let replies = ok(&mut con, &["EXEC"]);
    assert_eq!(
        replies,
        Value::Array(vec![
            Value::Okay,
            Value::SimpleString("Background saving scheduled".into())
        ])
    );
    // Cron picks the scheduled save up.
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut con, "rdb_saves") != "1" {
        assert!(Instant::now() < deadline, "scheduled BGSAVE never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(srv.dir.join("dump.rdb").exists());
    let lastsave: u64 = redis::cmd("LASTSAVE").query(&mut con).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(now - lastsave <= 2);
}

#[test]
fn save_points_trigger_a_background_save() {
    let srv = Server::start(&["--save", "1 3"]);
    let mut con = srv.conn();
    for i in 0..3 {
        ok(&mut con, &["SET", &format!("k{i}"), "v"]);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut con, "rdb_saves") == "0" {
        assert!(Instant::now() < deadline, "save point never fired");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info_field(&mut con, "rdb_changes_since_last_save"), "0");
}

#[test]
fn shutdown_saves_only_when_asked_or_configured() {
    // Default save points: SHUTDOWN saves.
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["SET", "a", "1"]);
    let _ = common::q(&mut con, &["SHUTDOWN"]);
    let dir = srv.kill_keep_dir();
    assert!(dir.join("dump.rdb").exists());
    let srv = Server::start_in(dir, &["--save", ""]);
    let mut con = srv.conn();
    assert_eq!(
        ok(&mut con, &["GET", "a"]),
        Value::BulkString(b"1".to_vec())
    );
    // No save points: SHUTDOWN does not save, SHUTDOWN SAVE does, and
    // SHUTDOWN NOSAVE never does.
    ok(&mut con, &["SET", "a", "2"]);
    let _ = common::q(&mut con, &["SHUTDOWN"]);
    let srv = Server::start_in(srv.kill_keep_dir(), &["--save", ""]);
    let mut con = srv.conn();
    assert_eq!(
        ok(&mut con, &["GET", "a"]),
        Value::BulkString(b"1".to_vec())
    );
    ok(&mut con, &["SET", "a", "3"]);
    let _ = common::q(&mut con, &["SHUTDOWN", "SAVE"]);
    let srv = Server::start_in(srv.kill_keep_dir(), &[]);
    let mut con = srv.conn();
    assert_eq!(
        ok(&mut con, &["GET", "a"]),
        Value::BulkString(b"3".to_vec())
    );
    ok(&mut con, &["SET", "a", "4"]);
    let _ = common::q(&mut con, &["SHUTDOWN", "NOSAVE"]);
    let srv = Server::start_in(srv.kill_keep_dir(), &[]);
    let mut con = srv.conn();
    assert_eq!(
        ok(&mut con, &["GET", "a"]),
        Value::BulkString(b"3".to_vec())
    );
}

#[test]
fn sigterm_saves_and_exits_cleanly() {
    let mut srv = Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["SET", "a", "sig"]);
    let status = Command::new("kill")
        .args(["-TERM", &srv.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(s) = srv.child().try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "{exit:?}");
    let srv = Server::start_in(srv.kill_keep_dir(), &[]);
    let mut con = srv.conn();
    assert_eq!(
        ok(&mut con, &["GET", "a"]),
        Value::BulkString(b"sig".to_vec())
    );
}

#[test]
fn failed_bgsave_stops_writes_with_misconf() {
    let srv = Server::start(&["--enable-protected-configs", "yes"]);
    let mut con = srv.conn();
    // Save into a directory that vanishes: creating the file fails.
    let doomed = common::fresh_dir();
    ok(
        &mut con,
        &["CONFIG", "SET", "dir", doomed.to_str().unwrap()],
    );
    std::fs::remove_dir_all(&doomed).unwrap();
    let reply = common::q(&mut con, &["BGSAVE"]);
    if reply.is_ok() {
        wait_bgsave_done(&mut con);
    }
    assert_eq!(info_field(&mut con, "rdb_last_bgsave_status"), "err");
    let misconf = err(&mut con, &["SET", "k", "v"]);
    assert!(
        misconf.starts_with("MISCONF Redis is configured to save RDB snapshots"),
        "{misconf}"
    );
    assert!(err(&mut con, &["PING"]).starts_with("MISCONF"));
    assert_eq!(ok(&mut con, &["GET", "k"]), Value::Nil);
    // Turning the option off lets writes through again.
    ok(
        &mut con,
        &["CONFIG", "SET", "stop-writes-on-bgsave-error", "no"],
    );
    assert_eq!(ok(&mut con, &["SET", "k", "v"]), Value::Okay);
    assert_eq!(err(&mut con, &["SAVE"]), "ERR ");
}

#[test]
fn vireo_dump_loads_into_redis_server() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    fill_every_type(&mut con);
    let expected = dataset(srv.port);
    ok(&mut con, &["SAVE"]);
    let dir = srv.kill_keep_dir();
    let redis = start_redis_on(&dir);
    assert_eq!(dataset(redis.port), expected);
    drop(redis);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn redis_server_dump_loads_into_vireo() {
    let dir = common::fresh_dir();
    let redis = start_redis_on(&dir);
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port)).unwrap();
    let mut con = client.get_connection().unwrap();
    fill_every_type(&mut con);
    let expected = dataset(redis.port);
    ok(&mut con, &["SAVE"]);
    drop(redis);
    let srv = Server::start_in(dir, &[]);
    assert_eq!(dataset(srv.port), expected);
}

#[test]
fn commands_answer_loading_while_a_big_dump_loads() {
    // A dump big enough to take a moment to load.
    let dir = common::fresh_dir();
    let redis = start_redis_on(&dir);
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port)).unwrap();
    let mut con = client.get_connection().unwrap();
    ok(&mut con, &["DEBUG", "POPULATE", "2000000"]);
    ok(&mut con, &["SAVE"]);
    drop(redis);
    let (_child, mut raw) = spawn_without_waiting(&dir, &[]);
    let get = |raw: &mut common::diff::Raw| raw.send(&[b"GET".to_vec(), b"key:7".to_vec()]);
    let first = get(&mut raw);
    assert_eq!(
        first,
        b"-LOADING Redis is loading the dataset in memory\r\n".to_vec(),
        "a 2M-key dump loads in no time?"
    );
    let info = raw.send(&[b"INFO".to_vec(), b"persistence".to_vec()]);
    let info = String::from_utf8_lossy(&info).into_owned();
    assert!(info.contains("loading:1"), "{info}");
    assert!(info.contains("loading_loaded_perc:"), "{info}");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let reply = get(&mut raw);
        if !reply.starts_with(b"-LOADING") {
            assert_eq!(reply, b"$7\r\nvalue:7\r\n".to_vec());
            break;
        }
        assert!(Instant::now() < deadline, "load never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(raw.send(&[b"DBSIZE".to_vec()]), b":2000000\r\n".to_vec());
    let _ = std::fs::remove_dir_all(dir);
}

/// Starts Vireo in `dir` and connects as soon as it accepts connections,
/// without waiting for its data to load (Server::start would).
fn spawn_without_waiting(dir: &std::path::Path, extra: &[&str]) -> (KillOnDrop, common::diff::Raw) {
    let port = common::free_port();
    let child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_vireo"))
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
            .arg(dir)
            .args(extra)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            if s.local_addr().unwrap().port() != port {
                drop(s);
                return (child, common::diff::Raw::connect(port));
            }
        }
        assert!(Instant::now() < deadline, "vireo did not start");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn commands_answer_loading_while_a_big_aof_replays() {
    let srv = Server::start(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    let mut con = srv.conn();
    for chunk in 0..1000 {
        let mut c = redis::cmd("MSET");
        for i in 0..1000 {
            c.arg(format!("k{}", chunk * 1000 + i)).arg(i);
        }
        c.query::<()>(&mut con).unwrap();
    }
    // SHUTDOWN writes out what the AOF has not yet written: a kill could
    // lose the last MSET, acknowledged within the writer's batching window
    // (under everysec the reply does not wait for the write, as Redis's
    // does not wait while an fsync is running).
    assert!(redis::cmd("SHUTDOWN").query::<()>(&mut con).is_err());
    let dir = srv.kill_keep_dir();
    let (_child, mut raw) = spawn_without_waiting(&dir, &["--appendonly", "yes"]);
    let first = raw.send(&[b"GET".to_vec(), b"k1".to_vec()]);
    assert_eq!(
        first,
        b"-LOADING Redis is loading the dataset in memory\r\n".to_vec(),
        "a 1M-key AOF replays in no time?"
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while raw.send(&[b"DBSIZE".to_vec()]).starts_with(b"-LOADING") {
        assert!(Instant::now() < deadline, "replay never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(raw.send(&[b"DBSIZE".to_vec()]), b":1000000\r\n".to_vec());
    assert_eq!(
        raw.send(&[b"GET".to_vec(), b"k1".to_vec()]),
        b"$1\r\n1\r\n".to_vec()
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A process killed when the test ends, failed or not (an orphan would hold
/// the test's output pipe open).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts Debian's redis-server in `dir` (its dump file is dump.rdb there).
fn start_redis_on(dir: &std::path::Path) -> common::diff::Redis {
    common::diff::start_redis_with(&[
        "--dir",
        dir.to_str().unwrap(),
        "--save",
        "",
        "--appendonly",
        "no",
        "--enable-debug-command",
        "yes",
    ])
}

/// Sets `n` keys with pipelined MSETs.
fn fill_keys(con: &mut Connection, n: usize) {
    let mut c = redis::cmd("MSET");
    for i in 0..n {
        c.arg(format!("k{i}")).arg(i);
    }
    c.query::<()>(con).unwrap();
}

#[test]
fn flushall_saves_the_empty_dataset_when_save_points_exist() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    fill_keys(&mut con, 100);
    ok(&mut con, &["SAVE"]);
    ok(&mut con, &["SET", "later", "1"]);
    assert_eq!(info_field(&mut con, "rdb_saves"), "1");
    ok(&mut con, &["FLUSHALL"]);
    assert_eq!(info_field(&mut con, "rdb_saves"), "2");
    assert_eq!(info_field(&mut con, "rdb_changes_since_last_save"), "0");
    let srv = Server::start_in(srv.kill_keep_dir(), &[]);
    let mut con = srv.conn();
    assert_eq!(ok(&mut con, &["DBSIZE"]), Value::Int(0));

    // A BGSAVE still being written is dropped, not renamed over the empty
    // dump, and does not count as a failed save.
    fill_keys(&mut con, 1000);
    ok(&mut con, &["CONFIG", "SET", "rdb-key-save-delay", "3000"]);
    ok(&mut con, &["BGSAVE"]);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(info_field(&mut con, "rdb_bgsave_in_progress"), "1");
    ok(&mut con, &["FLUSHALL"]);
    wait_bgsave_done(&mut con);
    assert_eq!(info_field(&mut con, "rdb_last_bgsave_status"), "ok");
    let srv = Server::start_in(srv.kill_keep_dir(), &[]);
    let mut con = srv.conn();
    assert_eq!(ok(&mut con, &["DBSIZE"]), Value::Int(0));
}

#[test]
fn flushall_without_save_points_leaves_the_dump_alone() {
    let srv = Server::start(&["--save", ""]);
    let mut con = srv.conn();
    fill_keys(&mut con, 100);
    ok(&mut con, &["SAVE"]);
    ok(&mut con, &["FLUSHALL"]);
    assert_eq!(info_field(&mut con, "rdb_saves"), "1");
    let srv = Server::start_in(srv.kill_keep_dir(), &["--save", ""]);
    let mut con = srv.conn();
    assert_eq!(ok(&mut con, &["DBSIZE"]), Value::Int(100));
}

/// The names of the server process's threads.
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .map(|name| name.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_snapshot_that_finishes_no_shard_for_a_second_gets_a_helper() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    // 20 keys a shard, each held back 0.1 s by the writer: the driver,
    // waiting for the writer, finishes a shard every two seconds.
    fill_keys(&mut con, 20_000);
    ok(&mut con, &["CONFIG", "SET", "rdb-key-save-delay", "100000"]);
    assert!(!thread_names(srv.pid())
        .iter()
        .any(|n| n == "vireo-snap-help"));
    ok(&mut con, &["BGSAVE"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !thread_names(srv.pid())
        .iter()
        .any(|n| n == "vireo-snap-help")
    {
        assert!(
            Instant::now() < deadline,
            "no helper for a stalled snapshot"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info_field(&mut con, "rdb_bgsave_in_progress"), "1");
}

/// INFO's `total_forks` counts background snapshots (Vireo's stand-in for
/// Redis's forks): BGSAVE and BGREWRITEAOF count, SAVE does not; CONFIG
/// RESETSTAT zeroes it.
#[test]
fn total_forks_counts_background_snapshots() {
    let srv = common::Server::start(&["--save", ""]);
    let mut con = srv.conn();
    let forks = |con: &mut redis::Connection| -> u64 {
        common::info_field(con, "total_forks").parse().unwrap()
    };
    assert_eq!(forks(&mut con), 0);
    common::ok(&mut con, &["SET", "k", "v"]);
    common::ok(&mut con, &["SAVE"]);
    assert_eq!(forks(&mut con), 0, "SAVE runs in the foreground");
    let _ = common::q(&mut con, &["BGSAVE"]).unwrap();
    common::eventually("the BGSAVE to count", || forks(&mut con) == 1);
    common::eventually("the BGSAVE to end", || {
        common::info_field(&mut con, "rdb_bgsave_in_progress") == "0"
    });
    let _ = common::q(&mut con, &["BGREWRITEAOF"]).unwrap();
    common::eventually("the rewrite to count", || forks(&mut con) == 2);
    common::eventually("the rewrite to end", || {
        common::info_field(&mut con, "aof_rewrite_in_progress") == "0"
    });
    let usec: u64 = common::info_field(&mut con, "latest_fork_usec")
        .parse()
        .unwrap();
    assert!(usec > 0, "the cut's time");
    common::ok(&mut con, &["CONFIG", "RESETSTAT"]);
    assert_eq!(forks(&mut con), 0);
}
