//! SQL databases as keys (`REDISQL.*`): every command against the real
//! binary, reply shapes, errors, the type's duties (COPY, RENAME, MOVE,
//! DUMP/RESTORE, RDB, AOF, MULTI, scripts, notifications, memory) and
//! persistence across a crash.

mod common;

use common::{err, ok, q, Server};
use redis::Value;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn done(n: i64) -> Value {
    Value::Array(vec![Value::SimpleString("DONE".into()), Value::Int(n)])
}

fn rows(rows: Vec<Vec<Value>>) -> Value {
    Value::Array(rows.into_iter().map(Value::Array).collect())
}

/// A database `db` with table `foo(a INT, b TEXT)` holding (1,'x'), (2,NULL).
fn with_foo(con: &mut redis::Connection) {
    assert_eq!(ok(con, &["REDISQL.CREATE_DB", "db"]), Value::Okay);
    assert_eq!(
        ok(
            con,
            &["REDISQL.EXEC", "db", "CREATE TABLE foo(a INT, b TEXT)"]
        ),
        done(0)
    );
    assert_eq!(
        ok(
            con,
            &[
                "REDISQL.EXEC",
                "db",
                "INSERT INTO foo VALUES(1, 'x'), (2, NULL)"
            ]
        ),
        done(2)
    );
}

fn select_foo(con: &mut redis::Connection, key: &str) -> Value {
    ok(
        con,
        &["REDISQL.QUERY", key, "SELECT a, b FROM foo ORDER BY a"],
    )
}

fn foo_rows() -> Value {
    rows(vec![
        vec![Value::Int(1), bulk("x")],
        vec![Value::Int(2), Value::Nil],
    ])
}

#[test]
fn exec_and_query_reply_in_redisql_shapes() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    with_foo(&mut con);
    assert_eq!(select_foo(&mut con, "db"), foo_rows());
    // REAL is a double (a bulk string in RESP2), BLOB a bulk string.
    assert_eq!(
        ok(
            &mut con,
            &["REDISQL.EXEC", "db", "SELECT 1.5, x'00ff', NULL, -7"]
        ),
        rows(vec![vec![
            bulk("1.5"),
            Value::BulkString(vec![0, 255]),
            Value::Nil,
            Value::Int(-7)
        ]])
    );
    // An empty result is DONE 0; several statements add their changes up.
    assert_eq!(
        ok(
            &mut con,
            &["REDISQL.QUERY", "db", "SELECT * FROM foo WHERE a > 9"]
        ),
        done(0)
    );
    assert_eq!(
        ok(
            &mut con,
            &[
                "REDISQL.EXEC",
                "db",
                "CREATE TABLE t2(x); INSERT INTO t2 VALUES(1); INSERT INTO t2 VALUES(2)"
            ]
        ),
        done(2)
    );
    assert_eq!(
        ok(&mut con, &["TYPE", "db"]),
        Value::SimpleString("vireo-sql".into())
    );
    assert_eq!(ok(&mut con, &["OBJECT", "ENCODING", "db"]), bulk("raw"));
    let mem: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("db")
        .query(&mut con)
        .unwrap();
    assert!(mem > 1000, "MEMORY USAGE counts SQLite's pages: {mem}");
    // The .NOW forms are the same commands.
    assert_eq!(
        ok(
            &mut con,
            &["REDISQL.QUERY.NOW", "db", "SELECT a, b FROM foo ORDER BY a"]
        ),
        foo_rows()
    );
    assert_eq!(
        ok(&mut con, &["REDISQL.EXEC.NOW", "db", "DELETE FROM t2"]),
        done(2)
    );
}

#[test]
fn errors_are_redisql_and_sqlite_messages() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    with_foo(&mut con);
    assert_eq!(
        err(&mut con, &["REDISQL.EXEC", "db", "SELEC 1"]),
        "near \"SELEC\": syntax error"
    );
    assert_eq!(
        err(&mut con, &["REDISQL.EXEC", "db", "SELECT * FROM nope"]),
        "no such table: nope"
    );
    assert_eq!(
        err(
            &mut con,
            &["REDISQL.QUERY", "db", "INSERT INTO foo VALUES(3, 'y')"]
        ),
        "Statement is not read only but it may modify the database, use `EXEC_STATEMENT` instead."
    );
    assert_eq!(
        err(&mut con, &["REDISQL.EXEC", "missing", "SELECT 1"]),
        "ERR - Error the key is empty"
    );
    ok(&mut con, &["SET", "s", "1"]);
    assert!(err(&mut con, &["REDISQL.EXEC", "s", "SELECT 1"]).starts_with("WRONGTYPE"));
    assert!(err(&mut con, &["REDISQL.CREATE_DB", "s"]).starts_with("WRONGTYPE"));
    assert!(err(&mut con, &["REDISQL.CREATE_DB", "db"]).starts_with("WRONGTYPE"));
    assert_eq!(
        err(&mut con, &["REDISQL.CREATE_DB", "x", "a", "b"]),
        "Wrong number of arguments, it accepts 2 or 3"
    );
    assert!(err(&mut con, &["REDISQL.EXEC", "db"]).contains("wrong number of arguments"));
    // Nothing failed left a trace: the data is as it was.
    assert_eq!(select_foo(&mut con, "db"), foo_rows());
}

#[test]
fn statements_are_created_run_updated_and_deleted() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    with_foo(&mut con);
    let create =
        |c: &mut redis::Connection, cmd: &str, name: &str, sql: &str| q(c, &[cmd, "db", name, sql]);
    assert_eq!(
        create(
            &mut con,
            "REDISQL.CREATE_STATEMENT",
            "ins",
            "INSERT INTO foo VALUES(?1, ?2)"
        )
        .unwrap(),
        Value::Okay
    );
    assert_eq!(
        err(
            &mut con,
            &["REDISQL.CREATE_STATEMENT", "db", "ins", "SELECT 1"]
        ),
        "Impossible to overwrite it with this command, try with UPDATE_STATEMENT"
    );
    assert_eq!(
        ok(
            &mut con,
            &["REDISQL.EXEC_STATEMENT", "db", "ins", "3", "three"]
        ),
        done(1)
    );
    assert_eq!(
        ok(
            &mut con,
            &["REDISQL.EXEC_STATEMENT.NOW", "db", "ins", "4", ""]
        ),
        done(1)
    );
    assert!(
        err(&mut con, &["REDISQL.EXEC_STATEMENT", "db", "ins", "5"]).starts_with("RediSQL MISUSE")
    );
    assert!(err(
        &mut con,
        &["REDISQL.QUERY_STATEMENT", "db", "ins", "5", "x"]
    )
    .starts_with("Statement is not read only"));
    create(
        &mut con,
        "REDISQL.CREATE_STATEMENT",
        "get",
        "SELECT b FROM foo WHERE a = ?1",
    )
    .unwrap();
    assert_eq!(
        ok(&mut con, &["REDISQL.QUERY_STATEMENT", "db", "get", "3"]),
        rows(vec![vec![bulk("three")]])
    );
    assert_eq!(
        ok(&mut con, &["REDISQL.QUERY_STATEMENT", "db", "get", "9"]),
        done(0)
    );
    assert_eq!(
        create(
            &mut con,
            "REDISQL.UPDATE_STATEMENT",
            "get",
            "SELECT a FROM foo WHERE b = ?1"
        )
        .unwrap(),
        Value::Okay
    );
    assert_eq!(
        ok(&mut con, &["REDISQL.QUERY_STATEMENT.NOW", "db", "get", "x"]),
        rows(vec![vec![Value::Int(1)]])
    );
    assert_eq!(
        err(
            &mut con,
            &["REDISQL.UPDATE_STATEMENT", "db", "nope", "SELECT 1"]
        ),
        "The statement is not present in the database, impossible to update it."
    );
    assert_eq!(
        ok(&mut con, &["REDISQL.DELETE_STATEMENT", "db", "get"]),
        Value::Okay
    );
    assert_eq!(
        err(&mut con, &["REDISQL.DELETE_STATEMENT", "db", "get"]),
        "The statement is not present in the database, impossible to delete it."
    );
    assert_eq!(
        err(&mut con, &["REDISQL.EXEC_STATEMENT", "db", "get", "1"]),
        "The statement is not present in the database"
    );
    assert!(err(
        &mut con,
        &["REDISQL.CREATE_STATEMENT", "db", "bad", "SELEC"]
    )
    .contains("syntax error"));
}

#[test]
fn query_into_appends_rows_to_a_stream() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    with_foo(&mut con);
    let Value::Array(reply) = ok(
        &mut con,
        &[
            "REDISQL.QUERY.INTO",
            "st",
            "db",
            "SELECT a, b FROM foo ORDER BY a",
        ],
    ) else {
        panic!("array expected")
    };
    assert_eq!(reply[0], bulk("st"));
    assert_eq!(reply[3], Value::Int(2));
    let entries: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg("st")
        .arg("-")
        .arg("+")
        .query(&mut con)
        .unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].1, ["int:a", "1", "text:b", "x"]);
    assert_eq!(entries[1].1, ["int:a", "2", "null:b", "(null)"]);
    assert_eq!(reply[1], bulk(&entries[0].0));
    assert_eq!(reply[2], bulk(&entries[1].0));
    // Empty results add nothing; a statement with arguments works the same.
    assert_eq!(
        ok(
            &mut con,
            &[
                "REDISQL.QUERY.INTO",
                "st",
                "db",
                "SELECT a FROM foo WHERE a > 5"
            ]
        ),
        done(0)
    );
    q(
        &mut con,
        &[
            "REDISQL.CREATE_STATEMENT",
            "db",
            "sel",
            "SELECT a FROM foo WHERE a = ?1",
        ],
    )
    .unwrap();
    ok(
        &mut con,
        &["REDISQL.QUERY_STATEMENT.INTO", "st", "db", "sel", "2"],
    );
    let len: i64 = redis::cmd("XLEN").arg("st").query(&mut con).unwrap();
    assert_eq!(len, 3);
    assert!(err(
        &mut con,
        &["REDISQL.QUERY.INTO", "st", "db", "DELETE FROM foo"]
    )
    .starts_with("Statement is not read only"));
    ok(&mut con, &["SET", "notstream", "1"]);
    assert!(err(
        &mut con,
        &["REDISQL.QUERY.INTO", "notstream", "db", "SELECT 1"]
    )
    .starts_with("WRONGTYPE"));
}

#[test]
fn copies_renames_moves_and_deletes_are_whole_databases() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    with_foo(&mut con);
    // REDISQL.COPY replaces the destination's content.
    ok(&mut con, &["REDISQL.CREATE_DB", "dst"]);
    assert_eq!(ok(&mut con, &["REDISQL.COPY", "db", "dst"]), Value::Okay);
    assert_eq!(select_foo(&mut con, "dst"), foo_rows());
    assert_eq!(
        err(&mut con, &["REDISQL.COPY", "db", "nodst"]),
        "Error in opening the DESTINATION database"
    );
    // Redis's COPY makes an independent database.
    assert_eq!(ok(&mut con, &["COPY", "db", "db2"]), Value::Int(1));
    ok(&mut con, &["REDISQL.EXEC", "db", "DELETE FROM foo"]);
    assert_eq!(select_foo(&mut con, "db2"), foo_rows());
    assert_eq!(
        ok(
            &mut con,
            &["REDISQL.QUERY", "db", "SELECT count(*) FROM foo"]
        ),
        rows(vec![vec![Value::Int(0)]])
    );
    ok(&mut con, &["RENAME", "db2", "db3"]);
    assert_eq!(select_foo(&mut con, "db3"), foo_rows());
    assert_eq!(ok(&mut con, &["MOVE", "db3", "1"]), Value::Int(1));
    ok(&mut con, &["SELECT", "1"]);
    assert_eq!(select_foo(&mut con, "db3"), foo_rows());
    assert_eq!(ok(&mut con, &["DEL", "db3"]), Value::Int(1));
    assert_eq!(
        err(&mut con, &["REDISQL.QUERY", "db3", "SELECT 1"]),
        "ERR - Error the key is empty"
    );
}

#[test]
fn dump_and_restore_carry_data_and_statements() {
    let srv = Server::start(&["--enable-debug-command", "yes"]);
    let mut con = srv.conn();
    with_foo(&mut con);
    q(
        &mut con,
        &[
            "REDISQL.CREATE_STATEMENT",
            "db",
            "all",
            "SELECT a, b FROM foo ORDER BY a",
        ],
    )
    .unwrap();
    let payload: Vec<u8> = redis::cmd("DUMP").arg("db").query(&mut con).unwrap();
    let restored: Value = redis::cmd("RESTORE")
        .arg("copy")
        .arg(0)
        .arg(&payload)
        .query(&mut con)
        .unwrap();
    assert_eq!(restored, Value::Okay);
    assert_eq!(
        ok(&mut con, &["REDISQL.QUERY_STATEMENT", "copy", "all"]),
        foo_rows()
    );
    // Damaged payloads are refused, never loaded half-way.
    let mut bad = payload.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0xff;
    let r: redis::RedisResult<Value> = redis::cmd("RESTORE")
        .arg("bad")
        .arg(0)
        .arg(&bad)
        .query(&mut con);
    assert!(r.is_err());
    for cut in [1, 10, payload.len() / 3] {
        let r: redis::RedisResult<Value> = redis::cmd("RESTORE")
            .arg("bad")
            .arg(0)
            .arg(&payload[..cut])
            .query(&mut con);
        assert!(r.is_err());
    }
    ok(&mut con, &["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1"]);
    let r: redis::RedisResult<Value> = redis::cmd("RESTORE")
        .arg("bad")
        .arg(0)
        .arg(&bad)
        .query(&mut con);
    assert!(
        r.is_err(),
        "a corrupt image is refused even without the checksum"
    );
    assert_eq!(ok(&mut con, &["EXISTS", "bad"]), Value::Int(0));
}

#[test]
fn rdb_keeps_databases_across_restarts_and_redis_refuses_the_file() {
    let srv = Server::start(&["--enable-debug-command", "yes"]);
    let mut con = srv.conn();
    with_foo(&mut con);
    q(
        &mut con,
        &[
            "REDISQL.CREATE_STATEMENT",
            "db",
            "all",
            "SELECT a, b FROM foo ORDER BY a",
        ],
    )
    .unwrap();
    ok(&mut con, &["SET", "plain", "v"]);
    ok(&mut con, &["DEBUG", "RELOAD"]);
    assert_eq!(
        ok(&mut con, &["REDISQL.QUERY_STATEMENT", "db", "all"]),
        foo_rows()
    );
    ok(&mut con, &["SAVE"]);
    let dir = srv.kill_keep_dir();
    let rdb = std::fs::read(dir.join("dump.rdb")).unwrap();
    let srv = Server::start_in(dir.clone(), &[]);
    let mut con = srv.conn();
    assert_eq!(
        ok(&mut con, &["REDISQL.QUERY_STATEMENT", "db", "all"]),
        foo_rows()
    );
    assert_eq!(ok(&mut con, &["GET", "plain"]), bulk("v"));
    redis_refuses(&rdb);
}

/// redis-server, which has no `vireo-sql` module, refuses the RDB file
/// with its own error naming the module type.
fn redis_refuses(rdb: &[u8]) {
    let Ok(path) = which("redis-server") else {
        eprintln!("note: redis-server not installed; skipping its refusal of the RDB file");
        return;
    };
    let dir = common::fresh_dir();
    std::fs::write(dir.join("dump.rdb"), rdb).unwrap();
    let out = std::process::Command::new(path)
        .args(["--port", &common::free_port().to_string(), "--dir"])
        .arg(&dir)
        .args(["--save", "", "--appendonly", "no"])
        .output()
        .unwrap();
    // It stops at once (its check-rdb report follows, with its exit code).
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        log.contains(
            "The RDB file contains module data I can't load: no matching module type 'vireo-sql'"
        ),
        "{log}"
    );
    assert!(!log.contains("Ready to accept connections"), "{log}");
    let _ = std::fs::remove_dir_all(dir);
}

fn which(name: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .find(|f| f.is_file())
        })
        .ok_or(())
}

#[test]
fn aof_with_fsync_always_survives_a_crash_and_a_rewrite() {
    let srv = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut con = srv.conn();
    with_foo(&mut con);
    q(
        &mut con,
        &[
            "REDISQL.CREATE_STATEMENT",
            "db",
            "ins",
            "INSERT INTO foo VALUES(?1, ?2)",
        ],
    )
    .unwrap();
    ok(&mut con, &["REDISQL.EXEC_STATEMENT", "db", "ins", "3", "z"]);
    ok(
        &mut con,
        &[
            "REDISQL.QUERY.INTO",
            "st",
            "db",
            "SELECT a FROM foo WHERE a = 1",
        ],
    );
    let want = ok(
        &mut con,
        &["REDISQL.QUERY", "db", "SELECT a, b FROM foo ORDER BY a"],
    );
    let stream = ok(&mut con, &["XRANGE", "st", "-", "+"]);
    // kill -9: only what appendfsync always wrote survives.
    let srv = Server::start_in(
        srv.kill_keep_dir(),
        &["--appendonly", "yes", "--appendfsync", "always"],
    );
    let mut con = srv.conn();
    assert_eq!(
        ok(
            &mut con,
            &["REDISQL.QUERY", "db", "SELECT a, b FROM foo ORDER BY a"]
        ),
        want
    );
    assert_eq!(ok(&mut con, &["XRANGE", "st", "-", "+"]), stream);
    assert_eq!(
        ok(&mut con, &["REDISQL.EXEC_STATEMENT", "db", "ins", "4", "w"]),
        done(1)
    );
    // A rewrite stores the database whole; replay after it still agrees.
    ok(&mut con, &["BGREWRITEAOF"]);
    wait_rewrite(&mut con);
    ok(
        &mut con,
        &["REDISQL.EXEC", "db", "DELETE FROM foo WHERE a = 1"],
    );
    let want = ok(
        &mut con,
        &["REDISQL.QUERY", "db", "SELECT a, b FROM foo ORDER BY a"],
    );
    let srv = Server::start_in(srv.kill_keep_dir(), &["--appendonly", "yes"]);
    let mut con = srv.conn();
    assert_eq!(
        ok(
            &mut con,
            &["REDISQL.QUERY", "db", "SELECT a, b FROM foo ORDER BY a"]
        ),
        want
    );
    // The named statement came back with the database.
    assert_eq!(
        ok(&mut con, &["REDISQL.EXEC_STATEMENT", "db", "ins", "9", "n"]),
        done(1)
    );
}

fn wait_rewrite(con: &mut redis::Connection) {
    for _ in 0..600 {
        if common::info_field(con, "aof_rewrite_in_progress") == "0"
            && common::info_field(con, "aof_rewrite_scheduled") == "0"
        {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("AOF rewrite did not finish");
}

#[test]
fn transactions_and_scripts_run_sql_commands() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    with_foo(&mut con);
    let (a, b): (Value, Value) = redis::pipe()
        .atomic()
        .cmd("REDISQL.EXEC")
        .arg("db")
        .arg("INSERT INTO foo VALUES(5, 'five')")
        .cmd("REDISQL.QUERY")
        .arg("db")
        .arg("SELECT b FROM foo WHERE a = 5")
        .query(&mut con)
        .unwrap();
    assert_eq!(a, done(1));
    assert_eq!(b, rows(vec![vec![bulk("five")]]));
    let script = "redis.call('REDISQL.EXEC', KEYS[1], \"INSERT INTO foo VALUES(6, 'six')\") \
                  return redis.call('REDISQL.QUERY', KEYS[1], 'SELECT count(*) FROM foo')";
    let v: Value = redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg("db")
        .query(&mut con)
        .unwrap();
    assert_eq!(v, rows(vec![vec![Value::Int(4)]]));
}

#[test]
fn keyspace_events_name_the_commands() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    ok(
        &mut con,
        &["CONFIG", "SET", "notify-keyspace-events", "KEd"],
    );
    let mut sub = srv.conn();
    redis::cmd("PSUBSCRIBE")
        .arg("__keyevent@0__:*")
        .exec(&mut sub)
        .unwrap();
    with_foo(&mut con);
    let mut events = Vec::new();
    for _ in 0..3 {
        let (Value::Push { data, .. } | Value::Array(data)) = sub.recv_response().unwrap() else {
            panic!("push expected")
        };
        events.push(data[2].clone());
    }
    assert_eq!(
        events,
        vec![
            bulk("__keyevent@0__:redisql.create_db"),
            bulk("__keyevent@0__:redisql.exec"),
            bulk("__keyevent@0__:redisql.exec")
        ]
    );
}

#[test]
fn a_runaway_query_is_interrupted_and_holds_up_no_other_key() {
    let srv = Server::start(&["--sql-time-limit", "1500"]);
    let mut con = srv.conn();
    with_foo(&mut con);
    let forever =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
    let (tx, rx) = std::sync::mpsc::channel();
    let client = srv.client();
    let slow = std::thread::spawn(move || {
        let mut c = client.get_connection().unwrap();
        let r = err(&mut c, &["REDISQL.QUERY", "db", forever]);
        tx.send("query done").unwrap();
        r
    });
    // Wait until the query runs, then work on many keys (some share the
    // database key's shard) and another database: all of it finishes
    // while the query still runs.
    std::thread::sleep(std::time::Duration::from_millis(200));
    for i in 0..200 {
        ok(&mut con, &["SET", &format!("k{i}"), "v"]);
    }
    ok(&mut con, &["REDISQL.CREATE_DB", "other"]);
    assert_eq!(
        ok(&mut con, &["REDISQL.QUERY", "other", "SELECT 1"]),
        rows(vec![vec![Value::Int(1)]])
    );
    assert!(
        rx.try_recv().is_err(),
        "the other keys waited for the query"
    );
    assert_eq!(
        slow.join().unwrap(),
        "It was impossible to return the whole result before the timeout expired."
    );
    assert_eq!(select_foo(&mut con, "db"), foo_rows());
}

#[test]
fn file_databases_stay_under_dir() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    assert_eq!(
        ok(&mut con, &["REDISQL.CREATE_DB", "f", "data.sqlite"]),
        Value::Okay
    );
    ok(
        &mut con,
        &[
            "REDISQL.EXEC",
            "f",
            "CREATE TABLE foo(a INT, b TEXT); INSERT INTO foo VALUES(1, 'x'), (2, NULL)",
        ],
    );
    assert!(srv.dir.join("data.sqlite").is_file());
    assert!(err(&mut con, &["REDISQL.CREATE_DB", "g", "../escape.sqlite"]).contains("outside dir"));
    assert!(
        err(&mut con, &["REDISQL.CREATE_DB", "g", "/tmp/escape.sqlite"]).contains("outside dir")
    );
    std::fs::write(srv.dir.join("junk.sqlite"), vec![7u8; 5000]).unwrap();
    assert!(err(&mut con, &["REDISQL.CREATE_DB", "g", "junk.sqlite"]).starts_with("ERR"));
    assert_eq!(ok(&mut con, &["EXISTS", "g"]), Value::Int(0));
    ok(&mut con, &["SAVE"]);
    let srv = Server::start_in(srv.kill_keep_dir(), &[]);
    let mut con = srv.conn();
    assert_eq!(select_foo(&mut con, "f"), foo_rows());
}

#[test]
fn used_memory_counts_sqlite_and_statistics_count_calls() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["REDISQL.CREATE_DB", "db"]);
    ok(&mut con, &["REDISQL.EXEC", "db", "CREATE TABLE t(x BLOB)"]);
    let before: u64 = common::info_field(&mut con, "used_memory").parse().unwrap();
    ok(&mut con, &["REDISQL.EXEC", "db", "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c LIMIT 2000) INSERT INTO t SELECT randomblob(4000) FROM c"]);
    let after: u64 = common::info_field(&mut con, "used_memory").parse().unwrap();
    assert!(
        after > before + 6_000_000,
        "SQLite's 8 MB not in used_memory: {before} -> {after}"
    );
    let Value::Array(stats) = ok(&mut con, &["REDISQL.STATISTICS"]) else {
        panic!()
    };
    assert_eq!(stats.len(), 33);
    assert_eq!(
        stats[0],
        Value::Array(vec![bulk("CREATE_DB"), Value::Int(1)])
    );
    assert_eq!(stats[3], Value::Array(vec![bulk("EXEC"), Value::Int(2)]));
    let Value::BulkString(v) = ok(&mut con, &["REDISQL.VERSION"]) else {
        panic!()
    };
    assert!(String::from_utf8_lossy(&v).contains("SQLite 3."));
}

#[test]
fn resp3_clients_get_doubles_and_a_statistics_map() {
    let srv = Server::start(&[]);
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", srv.port)).unwrap();
    let mut con = client.get_connection().unwrap();
    ok(&mut con, &["REDISQL.CREATE_DB", "db"]);
    assert_eq!(
        ok(
            &mut con,
            &["REDISQL.QUERY", "db", "SELECT 0.25, 'a', 3, NULL"]
        ),
        rows(vec![vec![
            Value::Double(0.25),
            bulk("a"),
            Value::Int(3),
            Value::Nil
        ]])
    );
    let Value::Map(stats) = ok(&mut con, &["REDISQL.STATISTICS"]) else {
        panic!("a map expected")
    };
    assert_eq!(stats.len(), 33);
    assert_eq!(stats[0], (bulk("CREATE_DB"), Value::Int(1)));
}

/// A query that never ends by itself.
const FOREVER: &str =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";

/// A raw connection that started [`FOREVER`] on `db`, with its client id.
fn start_forever(port: u16) -> (std::net::TcpStream, i64) {
    use std::io::{BufRead, BufReader, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"CLIENT ID\r\n").unwrap();
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    let id = line.trim_start_matches(':').trim().parse().unwrap();
    let cmd = format!(
        "*3\r\n$13\r\nREDISQL.QUERY\r\n$2\r\ndb\r\n${}\r\n{FOREVER}\r\n",
        FOREVER.len()
    );
    s.write_all(cmd.as_bytes()).unwrap();
    (s, id)
}

/// Waits until REDISQL.STATISTICS counts `n` failed QUERY calls.
fn wait_query_errors(con: &mut redis::Connection, n: i64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let Value::Array(stats) = ok(con, &["REDISQL.STATISTICS"]) else {
            panic!()
        };
        if stats[8] == Value::Array(vec![bulk("QUERY ERR"), Value::Int(n)]) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "query not interrupted: {:?}",
            stats[8]
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_query_stops_when_its_client_disconnects_is_killed_or_the_server_stops() {
    // No time limit: only the client's fate can stop these queries. Two
    // workers take connections in turn, so a connection opened right after
    // the query's is served while the query occupies its worker.
    let mut srv = Server::start(&["--sql-time-limit", "0", "--io-threads", "2"]);
    let mut con = srv.conn();
    with_foo(&mut con);
    let (s, _) = start_forever(srv.port);
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(s);
    wait_query_errors(&mut con, 1);
    // The database is usable, for reads and writes.
    assert_eq!(select_foo(&mut con, "db"), foo_rows());
    assert_eq!(
        ok(
            &mut con,
            &["REDISQL.EXEC", "db", "INSERT INTO foo VALUES(3, 'y')"]
        ),
        done(1)
    );
    let (_s, id) = start_forever(srv.port);
    let mut other = srv.conn();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        ok(&mut other, &["CLIENT", "KILL", "ID", &id.to_string()]),
        Value::Int(1)
    );
    wait_query_errors(&mut other, 2);
    let (_s, _) = start_forever(srv.port);
    let mut other = srv.conn();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let _ = q(&mut other, &["SHUTDOWN", "NOSAVE"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while srv.child().try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the running query held up SHUTDOWN"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn reads_of_one_database_overlap_and_a_file_database_writes_beside_them() {
    // Each query runs to the 1.5 s time limit. Two workers take
    // connections in turn, so the two queries run on different threads.
    let srv = Server::start(&["--sql-time-limit", "1500", "--io-threads", "2"]);
    let mut con = srv.conn();
    with_foo(&mut con);
    ok(&mut con, &["REDISQL.CREATE_DB", "f", "f.db"]);
    ok(&mut con, &["REDISQL.EXEC", "f", "CREATE TABLE t(a)"]);
    let query = |key: &'static str| {
        let client = srv.client();
        std::thread::spawn(move || {
            let mut c = client.get_connection().unwrap();
            err(&mut c, &["REDISQL.QUERY", key, FOREVER]);
            std::time::Instant::now()
        })
    };
    let started = std::time::Instant::now();
    let (a, b) = (query("db"), query("db"));
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    // One after the other they would take 3 s; together about 1.5 s.
    let last = a.max(b) - started;
    assert!(
        last < std::time::Duration::from_millis(2800),
        "the two reads did not overlap: {last:?}"
    );
    // A write to a file database (WAL) completes while a read of it runs.
    let (tx, rx) = std::sync::mpsc::channel();
    let client = srv.client();
    let read = std::thread::spawn(move || {
        let mut c = client.get_connection().unwrap();
        err(&mut c, &["REDISQL.QUERY", "f", FOREVER]);
        tx.send(()).unwrap();
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        ok(&mut con, &["REDISQL.EXEC", "f", "INSERT INTO t VALUES(1)"]),
        done(1)
    );
    assert!(rx.try_recv().is_err(), "the write waited for the read");
    read.join().unwrap();
    assert_eq!(
        ok(&mut con, &["REDISQL.QUERY", "f", "SELECT count(*) FROM t"]),
        rows(vec![vec![Value::Int(1)]])
    );
}
