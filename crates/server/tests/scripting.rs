//! Scripts and functions in the running server: the script cache and the
//! libraries seen from every worker, locks made of scripts (redis-py's
//! `Lock`), atomicity of scripts touching undeclared keys, effects in the
//! AOF, BUSY and SCRIPT KILL, persistence of libraries.

mod common;

use std::time::{Duration, Instant};

use common::{q, Server};
use redis::{Commands, Value};

/// redis-py's `Lock.release` script (compare and delete).
const RELEASE: &str = "local token = redis.call('get', KEYS[1])\n\
    if not token or token ~= ARGV[1] then return 0 end\n\
    redis.call('del', KEYS[1])\n\
    return 1";

/// The scripts and libraries one connection loads are there for every
/// other connection, whatever worker it lands on.
#[test]
fn script_cache_and_libraries_are_shared_by_every_worker() {
    let server = Server::start(&["--io-threads", "4"]);
    let mut first = server.conn();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("return ARGV[1]")
        .query(&mut first)
        .unwrap();
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=lib\nredis.register_function('echo', function(k, a) return a[1] end)")
        .query(&mut first)
        .unwrap();
    let mut conns: Vec<_> = (0..8).map(|_| server.conn()).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        let got: String = redis::cmd("EVALSHA")
            .arg(&sha)
            .arg(0)
            .arg(i)
            .query(c)
            .unwrap();
        assert_eq!(got, i.to_string());
        let got: String = redis::cmd("FCALL")
            .arg("echo")
            .arg(0)
            .arg(i)
            .query(c)
            .unwrap();
        assert_eq!(got, i.to_string());
    }
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut first).unwrap();
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query(&mut first)
        .unwrap();
    for c in &mut conns {
        let err = redis::cmd("EVALSHA")
            .arg(&sha)
            .arg(0)
            .query::<String>(c)
            .unwrap_err();
        assert_eq!(err.code(), Some("NOSCRIPT"));
        let exists: Vec<i64> = redis::cmd("SCRIPT")
            .arg("EXISTS")
            .arg(&sha)
            .query(c)
            .unwrap();
        assert_eq!(exists, [0]);
        let err = redis::cmd("FCALL")
            .arg("echo")
            .arg(0)
            .query::<String>(c)
            .unwrap_err();
        assert!(err.to_string().contains("Function not found"), "{err}");
    }
}

/// redis-py's `Lock`: SET NX PX to acquire, compare-and-delete by EVALSHA
/// to release, from clients on different workers. At most one holds the
/// lock at any time, and every release is by the holder.
#[test]
fn lock_in_the_style_of_redis_py_between_workers() {
    let server = Server::start(&["--io-threads", "4"]);
    let release_sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(RELEASE)
        .query(&mut server.conn())
        .unwrap();
    let threads: Vec<_> = (0..6)
        .map(|t| {
            let mut con = server.conn();
            let sha = release_sha.clone();
            std::thread::spawn(move || {
                let mut acquired = 0;
                for i in 0..150 {
                    let token = format!("{t}-{i}");
                    let got: Option<String> = redis::cmd("SET")
                        .arg("lock:res")
                        .arg(&token)
                        .arg("NX")
                        .arg("PX")
                        .arg(10_000)
                        .query(&mut con)
                        .unwrap();
                    if got.is_none() {
                        // Someone else's token: releasing it must fail.
                        let released: i64 = redis::cmd("EVALSHA")
                            .arg(&sha)
                            .arg(1)
                            .arg("lock:res")
                            .arg(&token)
                            .query(&mut con)
                            .unwrap();
                        assert_eq!(released, 0);
                        continue;
                    }
                    acquired += 1;
                    // Inside the critical section: a counter no one else
                    // may change meanwhile.
                    let before: i64 = con.incr("lock:count", 1).unwrap();
                    let after: i64 = con.get("lock:count").unwrap();
                    assert_eq!(before, after, "two holders at once");
                    let released: i64 = redis::cmd("EVALSHA")
                        .arg(&sha)
                        .arg(1)
                        .arg("lock:res")
                        .arg(&token)
                        .query(&mut con)
                        .unwrap();
                    assert_eq!(released, 1);
                }
                acquired
            })
        })
        .collect();
    let total: i64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let count: i64 = server.conn().get("lock:count").unwrap();
    assert_eq!(count, total);
    assert!(total > 0);
}

/// Scripts that touch keys they did not declare stay atomic while other
/// clients write the same keys: each script moves one unit from one key to
/// the other, so the sum never changes and no unit is lost.
#[test]
fn scripts_on_undeclared_keys_stay_atomic() {
    let server = Server::start(&["--io-threads", "4"]);
    let script = "local a = redis.call('decr', 'undeclared:a')\n\
        redis.call('incr', 'undeclared:b')\n\
        return a";
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let mut con = server.conn();
            std::thread::spawn(move || {
                for _ in 0..300 {
                    if t % 2 == 0 {
                        let _: i64 = redis::cmd("EVAL")
                            .arg(script)
                            .arg(0)
                            .query(&mut con)
                            .unwrap();
                    } else {
                        // A transaction doing the same, locking both keys.
                        let (_a, _b): (i64, i64) = redis::pipe()
                            .atomic()
                            .decr("undeclared:a", 1)
                            .incr("undeclared:b", 1)
                            .query(&mut con)
                            .unwrap();
                    }
                }
            })
        })
        .collect();
    let mut watcher = server.conn();
    let deadline = Instant::now() + Duration::from_secs(60);
    while writers.iter().any(|w| !w.is_finished()) && Instant::now() < deadline {
        let (a, b): (Option<i64>, Option<i64>) = redis::pipe()
            .atomic()
            .get("undeclared:a")
            .get("undeclared:b")
            .query(&mut watcher)
            .unwrap();
        assert_eq!(
            a.unwrap_or(0) + b.unwrap_or(0),
            0,
            "a script was seen half-done"
        );
    }
    for w in writers {
        w.join().unwrap();
    }
    let a: i64 = watcher.get("undeclared:a").unwrap();
    let b: i64 = watcher.get("undeclared:b").unwrap();
    assert_eq!((a, b), (-1200, 1200));
}

/// A script's writes reach the AOF as the commands it ran, wrapped in
/// MULTI/EXEC when there are several; `redis.set_repl` keeps some out.
#[test]
fn script_effects_reach_the_aof_as_a_transaction() {
    let server = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut con = server.conn();
    let _: Value = redis::cmd("EVAL")
        .arg("redis.call('set', KEYS[1], 'v'); redis.call('incr', 'n'); redis.call('get', 'n')")
        .arg(1)
        .arg("k")
        .query(&mut con)
        .unwrap();
    let _: Value = redis::cmd("EVAL")
        .arg("redis.set_repl(redis.REPL_NONE); redis.call('set', 'hidden', 1); redis.set_repl(redis.REPL_ALL); redis.call('set', 'shown', 1)")
        .arg(0)
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=l\nredis.register_function('f', function(k) return redis.call('set', k[1], 'x') end)")
        .query(&mut con)
        .unwrap();
    let aof_dir = server.dir.join("appendonlydir");
    let mut text = String::new();
    for entry in std::fs::read_dir(&aof_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with(".incr.aof") {
            text = String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
        }
    }
    let words: Vec<&str> = text
        .split("\r\n")
        .filter(|l| !l.starts_with(['*', '$']))
        .collect();
    let joined = words.join(" ");
    assert!(
        joined.contains("MULTI set k v incr n EXEC"),
        "script effects not wrapped: {joined}"
    );
    assert!(!joined.contains("EVAL"), "{joined}");
    assert!(!joined.contains("hidden"), "{joined}");
    assert!(joined.contains("set shown 1"), "{joined}");
    assert!(joined.contains("FUNCTION LOAD"), "{joined}");
    // The AOF replays: the data and the library come back.
    let dir = server.kill_keep_dir();
    let server = Server::start_in(dir, &["--appendonly", "yes"]);
    let mut con = server.conn();
    let n: i64 = con.get("n").unwrap();
    assert_eq!(n, 1);
    let got: String = redis::cmd("FCALL")
        .arg("f")
        .arg(1)
        .arg("z")
        .query(&mut con)
        .unwrap();
    assert_eq!(got, "OK");
}

/// Past busy-reply-threshold other clients get BUSY; SCRIPT KILL stops a
/// script that has not written, whichever worker each client is on.
#[test]
fn busy_script_answers_busy_and_dies_by_script_kill() {
    let server = Server::start(&["--io-threads", "2", "--busy-reply-threshold", "50"]);
    let client = server.client();
    let runner = std::thread::spawn(move || {
        let mut con = client.get_connection().unwrap();
        redis::cmd("EVAL")
            .arg("while true do end")
            .arg(0)
            .query::<Value>(&mut con)
            .unwrap_err()
    });
    // Several connections, so both workers are asked.
    let mut others: Vec<_> = (0..4).map(|_| server.conn()).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut busy = 0;
    while busy < others.len() && Instant::now() < deadline {
        busy = 0;
        for c in &mut others {
            match q(c, &["PING"]) {
                Err(e) if e.code() == Some("BUSY") => busy += 1,
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(busy, others.len(), "every connection answers BUSY");
    let err = q(&mut others[0], &["FUNCTION", "KILL"]).unwrap_err();
    assert_eq!(err.code(), Some("BUSY"));
    assert_eq!(q(&mut others[1], &["SCRIPT", "KILL"]).unwrap(), Value::Okay);
    let err = runner.join().unwrap();
    assert!(err.to_string().contains("Script killed by user"), "{err}");
    assert_eq!(
        q(&mut others[2], &["PING"]).unwrap(),
        Value::SimpleString("PONG".into())
    );
    let err = q(&mut others[3], &["SCRIPT", "KILL"]).unwrap_err();
    assert_eq!(err.code(), Some("NOTBUSY"));
}

/// A script that wrote cannot be killed.
#[test]
fn script_that_wrote_is_unkillable() {
    let server = Server::start(&["--busy-reply-threshold", "50"]);
    let client = server.client();
    let runner = std::thread::spawn(move || {
        let mut con = client.get_connection().unwrap();
        redis::cmd("EVAL")
            .arg("redis.call('set', 'w', 1) local t = redis.call('time')[1] + 1 while tonumber(redis.call('time')[1]) <= tonumber(t) do end return 'done'")
            .arg(0)
            .query::<String>(&mut con)
    });
    let mut con = server.conn();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match q(&mut con, &["SCRIPT", "KILL"]) {
            Err(e) if e.code() == Some("UNKILLABLE") => break,
            _ if Instant::now() > deadline => panic!("never UNKILLABLE"),
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    assert_eq!(runner.join().unwrap().unwrap(), "done");
}

/// Libraries survive a restart through the RDB file, and FUNCTION DUMP /
/// RESTORE move them between servers.
#[test]
fn libraries_persist_and_restore() {
    let server = Server::start(&[]);
    let mut con = server.conn();
    let code = "#!lua name=keep\nredis.register_function{function_name='kept', callback=function() return 'still here' end, flags={'no-writes'}, description='d'}";
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(code)
        .query(&mut con)
        .unwrap();
    let payload: Vec<u8> = redis::cmd("FUNCTION").arg("DUMP").query(&mut con).unwrap();
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    drop(con);
    let dir = server.kill_keep_dir();
    let server = Server::start_in(dir, &[]);
    let mut con = server.conn();
    let got: String = redis::cmd("FCALL_RO")
        .arg("kept")
        .arg(0)
        .query(&mut con)
        .unwrap();
    assert_eq!(got, "still here");
    let err = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .query::<()>(&mut con)
        .unwrap_err();
    assert!(
        err.to_string().contains("Library keep already exists"),
        "{err}"
    );
    let _: () = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .arg("REPLACE")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("FUNCTION").arg("FLUSH").query(&mut con).unwrap();
    let _: () = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .query(&mut con)
        .unwrap();
    let list: Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("WITHCODE")
        .query(&mut con)
        .unwrap();
    assert!(format!("{list:?}").contains("still here"));
    let mut bad = payload.clone();
    bad[2] ^= 1;
    let err = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&bad)
        .query::<()>(&mut con)
        .unwrap_err();
    assert!(err
        .to_string()
        .contains("payload version or checksum are wrong"));
}

/// Libraries saved by redis-server load in Vireo, and Vireo's load in
/// redis-server (RDB files and FUNCTION DUMP payloads).
#[test]
fn libraries_move_between_vireo_and_redis() {
    if std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("redis-server not on PATH: skipped");
        return;
    }
    let redis = common::diff::start_redis();
    let mut r = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=fromredis\nredis.register_function('fr', function() return 'redis made me, and my code is long enough to compress' end)")
        .query(&mut r)
        .unwrap();
    let payload: Vec<u8> = redis::cmd("FUNCTION").arg("DUMP").query(&mut r).unwrap();
    let vireo = Server::start(&[]);
    let mut v = vireo.conn();
    let _: () = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .query(&mut v)
        .unwrap();
    let got: String = redis::cmd("FCALL").arg("fr").arg(0).query(&mut v).unwrap();
    assert!(got.starts_with("redis made me"));
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=fromvireo\nredis.register_function('fv', function() return 'vireo made me' end)")
        .query(&mut v)
        .unwrap();
    let back: Vec<u8> = redis::cmd("FUNCTION").arg("DUMP").query(&mut v).unwrap();
    let _: () = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&back)
        .arg("FLUSH")
        .query(&mut r)
        .unwrap();
    let got: String = redis::cmd("FCALL").arg("fv").arg(0).query(&mut r).unwrap();
    assert_eq!(got, "vireo made me");
    // Vireo's RDB file in redis-server.
    let _: () = redis::cmd("SAVE").query(&mut v).unwrap();
    let dir = vireo.kill_keep_dir();
    let loaded = common::diff::start_redis_with(&[
        "--dir",
        dir.to_str().unwrap(),
        "--dbfilename",
        "dump.rdb",
    ]);
    let mut l = redis::Client::open(format!("redis://127.0.0.1:{}/", loaded.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let got: String = redis::cmd("FCALL").arg("fv").arg(0).query(&mut l).unwrap();
    assert_eq!(got, "vireo made me");
}

/// MONITOR shows the script command, then the commands it ran as
/// `[db lua]`.
#[test]
fn monitor_shows_script_commands() {
    let server = Server::start(&[]);
    let mut mon = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    use std::io::{Read, Write};
    mon.write_all(b"MONITOR\r\n").unwrap();
    mon.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 5];
    mon.read_exact(&mut buf).unwrap();
    let mut con = server.conn();
    let _: Value = redis::cmd("EVAL")
        .arg("return redis.call('set', KEYS[1], ARGV[1])")
        .arg(1)
        .arg("mk")
        .arg("mv")
        .query(&mut con)
        .unwrap();
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut chunk = [0u8; 512];
    while !seen.contains("lua]") && Instant::now() < deadline {
        let n = mon.read(&mut chunk).unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk[..n]));
    }
    let eval_at = seen.find("\"EVAL\"").expect("EVAL line");
    let lua_at = seen
        .find("[0 lua] \"set\" \"mk\" \"mv\"")
        .expect("lua line");
    assert!(eval_at < lua_at, "{seen}");
}

/// `math.random` draws from one generator for the whole server, as Redis's
/// single one: scripts run one after the other on different workers never
/// repeat each other's values, and SCRIPT FLUSH (new VMs) does not restart
/// the sequence; a seeded script stays deterministic.
#[test]
fn math_random_goes_on_across_workers_and_flushes() {
    let server = Server::start(&["--io-threads", "4"]);
    let draw = |con: &mut redis::Connection| -> String {
        redis::cmd("EVAL")
            .arg("return tostring(math.random())")
            .arg(0)
            .query(con)
            .unwrap()
    };
    let mut seen = std::collections::HashSet::new();
    for round in 0..3 {
        // Fresh connections land on the workers in turn.
        for _ in 0..4 {
            let value = draw(&mut server.conn());
            assert!(
                seen.insert(value.clone()),
                "{value} repeated in round {round}"
            );
        }
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut server.conn())
            .unwrap();
    }
    let seeded = |con: &mut redis::Connection| -> String {
        redis::cmd("EVAL")
            .arg("math.randomseed(ARGV[1]) return tostring(math.random())")
            .arg(0)
            .arg(42)
            .query(con)
            .unwrap()
    };
    assert_eq!(seeded(&mut server.conn()), seeded(&mut server.conn()));
}
