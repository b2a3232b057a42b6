//! SCRIPT DEBUG (the Lua debugger) against the real server: the session
//! protocol with the `redis` crate (each debugger command answers one
//! array of status lines), SYNC keeping writes, YES undoing them, the
//! end of a session, a client that disconnects, the same transcript as a
//! real redis-server (skipped without one), and `redis-cli --ldb-sync-mode`
//! driving it (skipped without redis-cli).

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{err, ok};
use redis::Value;

/// The status lines of a debugger reply.
fn lines(v: Value) -> Vec<String> {
    match v {
        Value::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Value::SimpleString(s) => s,
                other => panic!("not a status line: {other:?}"),
            })
            .collect(),
        other => panic!("not a debugger reply: {other:?}"),
    }
}

/// Sends a debugger command, returns its lines.
fn dbg(con: &mut redis::Connection, words: &[&str]) -> Vec<String> {
    let mut cmd = redis::cmd(words[0]);
    for w in &words[1..] {
        cmd.arg(*w);
    }
    lines(cmd.query(con).expect("debugger reply"))
}

/// Starts a session on `script` with `keys`, returns the first stop.
fn start(con: &mut redis::Connection, mode: &str, script: &str, keys: &[&str]) -> Vec<String> {
    assert_eq!(ok(con, &["SCRIPT", "DEBUG", mode]), Value::Okay);
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(keys.len());
    for k in keys {
        cmd.arg(*k);
    }
    lines(cmd.query(con).expect("first stop"))
}

const SCRIPT: &str = "local a = redis.call('incr', KEYS[1])\n\
                      local t = {1, 'x'}\n\
                      redis.debug('a is', a, t)\n\
                      redis.breakpoint()\n\
                      return a\n";

#[test]
fn sync_session_steps_prints_and_keeps_writes() {
    let server = common::Server::start(&["--threads", "2"]);
    let mut con = server.conn();
    assert_eq!(
        start(&mut con, "sync", SCRIPT, &["n"]),
        [
            "* Stopped at 1, stop reason = step over",
            "-> 1   local a = redis.call('incr', KEYS[1])"
        ]
    );
    // Another client (on the other worker) still gets answers that need
    // no shard.
    let mut other = server.conn();
    assert_eq!(
        ok(&mut other, &["PING"]),
        Value::SimpleString("PONG".into())
    );
    assert_eq!(
        dbg(&mut con, &["s"]),
        [
            "<redis> incr n",
            "<reply> 1",
            "* Stopped at 2, stop reason = step over",
            "-> 2   local t = {1, 'x'}"
        ]
    );
    assert_eq!(dbg(&mut con, &["print"]), ["<value> a = 1"]);
    assert_eq!(dbg(&mut con, &["p", "KEYS"]), ["<value> {\"n\"}"]);
    assert_eq!(dbg(&mut con, &["p", "zz"]), ["No such variable."]);
    assert_eq!(
        dbg(&mut con, &["l", "1", "0"]),
        ["   1   local a = redis.call('incr', KEYS[1])"]
    );
    assert_eq!(
        dbg(&mut con, &["b", "5"]),
        ["   4   redis.breakpoint()", "  #5   return a"]
    );
    assert_eq!(dbg(&mut con, &["e", "40 + 2"]), ["<retval> 42"]);
    assert_eq!(
        dbg(&mut con, &["r", "get", "n"]),
        ["<redis> get n", "<reply> \"1\""]
    );
    assert_eq!(
        dbg(&mut con, &["c"]),
        [
            "<debug> line 3: \"a is\", 1, {1; \"x\"}",
            "* Stopped at 5, stop reason = redis.breakpoint() called",
            "->#5   return a"
        ]
    );
    assert_eq!(dbg(&mut con, &["c"]), ["<endsession>"]);
    assert_eq!(con.recv_response().unwrap(), Value::Int(1));
    // The connection is closed after the script's reply; the write stays.
    assert!(con.recv_response().is_err());
    let mut check = server.conn();
    assert_eq!(
        ok(&mut check, &["GET", "n"]),
        Value::BulkString(b"1".to_vec())
    );
}

#[test]
fn yes_session_undoes_writes_and_refuses_what_it_cannot_undo() {
    let server = common::Server::start(&["--appendonly", "yes"]);
    let mut con = server.conn();
    assert_eq!(ok(&mut con, &["SET", "kept", "old"]), Value::Okay);
    assert_eq!(ok(&mut con, &["RPUSH", "list", "a"]), Value::Int(1));
    let script = "redis.call('set','kept','new')\n\
                  redis.call('rpush','list','b')\n\
                  redis.call('set','fresh','1')\n\
                  redis.call('del','list')\n\
                  local f = redis.pcall('flushall')\n\
                  return {redis.call('get','kept'), redis.call('exists','list'), f['err']}";
    start(&mut con, "yes", script, &[]);
    assert_eq!(dbg(&mut con, &["c"]), ["<endsession>"]);
    // Inside the session the writes were seen; FLUSHALL could not be undone.
    assert_eq!(
        con.recv_response().unwrap(),
        Value::Array(vec![
            Value::BulkString(b"new".to_vec()),
            Value::Int(0),
            Value::BulkString(
                b"ERR This write command can not be undone, so it is not allowed in a SCRIPT DEBUG YES session: use SCRIPT DEBUG SYNC".to_vec()
            ),
        ])
    );
    let mut check = server.conn();
    assert_eq!(
        ok(&mut check, &["GET", "kept"]),
        Value::BulkString(b"old".to_vec())
    );
    assert_eq!(
        ok(&mut check, &["LRANGE", "list", "0", "-1"]),
        Value::Array(vec![Value::BulkString(b"a".to_vec())])
    );
    assert_eq!(ok(&mut check, &["EXISTS", "fresh"]), Value::Int(0));
    // Nor did the session's writes reach the AOF: a later write does.
    assert_eq!(ok(&mut check, &["SET", "marker", "1"]), Value::Okay);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let aof = aof_bytes(&server.dir);
        if aof.windows(6).any(|w| w == b"marker") {
            assert!(!aof.windows(5).any(|w| w == b"fresh"));
            assert!(!aof.windows(3).any(|w| w == b"new"));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "marker never logged");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Every AOF byte under the server's directory.
fn aof_bytes(dir: &std::path::Path) -> Vec<u8> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|x| x == "aof") {
                out.extend(std::fs::read(path).unwrap_or_default());
            }
        }
    }
    out
}

#[test]
fn abort_errors_and_modes_are_checked() {
    let server = common::Server::start(&[]);
    let mut con = server.conn();
    assert_eq!(
        err(&mut con, &["SCRIPT", "DEBUG", "maybe"]),
        "ERR Use SCRIPT DEBUG YES/SYNC/NO"
    );
    assert_eq!(ok(&mut con, &["SCRIPT", "DEBUG", "sync"]), Value::Okay);
    assert_eq!(
        err(&mut con, &["EVALSHA", &"a".repeat(40), "0"]),
        "ERR Please use EVAL instead of EVALSHA for debugging"
    );
    assert_eq!(ok(&mut con, &["SCRIPT", "DEBUG", "no"]), Value::Okay);
    assert_eq!(ok(&mut con, &["EVAL", "return 7", "0"]), Value::Int(7));
    start(&mut con, "sync", "local x = 1\nreturn x", &[]);
    assert_eq!(
        dbg(&mut con, &["nosuch"]),
        ["<error> Unknown Redis Lua debugger command or wrong number of arguments."]
    );
    match redis::cmd("abort").query::<Value>(&mut con) {
        Ok(v) => assert_eq!(lines(v), ["<endsession>"]),
        Err(e) => panic!("{e}"),
    }
    let reply = format!("{:?}", con.recv_response());
    assert!(reply.contains("script aborted for user request"), "{reply}");
}

#[test]
fn a_disconnected_client_lets_the_script_finish() {
    let server = common::Server::start(&[]);
    let mut con = server.conn();
    start(
        &mut con,
        "sync",
        "redis.call('set','left','1')\nredis.breakpoint()\nredis.call('set','done','1')",
        &[],
    );
    drop(con);
    let mut check = server.conn();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while ok(&mut check, &["EXISTS", "done"]) != Value::Int(1) {
        assert!(
            std::time::Instant::now() < deadline,
            "script never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(ok(&mut check, &["EXISTS", "left"]), Value::Int(1));
}

/// Sends raw commands one by one and returns the bytes of their replies,
/// up to the end of the session (its last lines, then the script's reply).
fn transcript(port: u16, cmds: &[&[&str]]) -> Vec<u8> {
    let mut raw = common::diff::Raw::connect(port);
    let mut out = Vec::new();
    for c in cmds {
        let args: Vec<Vec<u8>> = c.iter().map(|a| a.as_bytes().to_vec()).collect();
        let reply = raw.send(&args);
        let ended = reply.windows(12).any(|w| w == b"<endsession>");
        out.extend(reply);
        if ended {
            out.extend(raw.read_reply());
            return out;
        }
    }
    panic!("the session did not end: {}", String::from_utf8_lossy(&out));
}

/// The transcript as text with object addresses (`function@0x…`), which
/// differ between any two runs, blanked.
fn without_addresses(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::new();
    let mut rest = &text[..];
    while let Some(at) = rest.find("@0x") {
        out.push_str(&rest[..at + 3]);
        rest = rest[at + 3..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
    }
    out.push_str(rest);
    out
}

#[test]
fn session_transcript_matches_redis() {
    if !common::diff::redis_server_available() {
        return;
    }
    let redis = common::diff::start_redis();
    let vireo = common::Server::start(&[]);
    let script = "local function f(x)\n  return x * 2\nend\n\
                  local r = f(3)\n\
                  redis.call('set','big',string.rep('y',300))\n\
                  redis.call('get','big')\n\
                  redis.pcall('lpush','big','x')\n\
                  redis.pcall('cluster','reset')\n\
                  redis.setresp(3)\n\
                  redis.call('hgetall','none')\n\
                  return {r, 1.5}\n";
    let session: &[&[&str]] = &[
        &["script", "debug", "sync"],
        &["eval", script, "0"],
        &["help"],
        &["s"],
        &["s"],
        &["trace"],
        &["s"],
        &["print"],
        &["whole"],
        &["b", "9"],
        &["b"],
        &["b", "x"],
        &["b", "-9"],
        &["maxlen"],
        &["e", "{1, {a=2}}"],
        &["e", "err("],
        &["s"],
        &["s"],
        &["s"],
        &["s"],
        &["s"],
        &["s"],
        &["m", "0"],
        &["s"],
        &["s"],
        &["s"],
        &["s"],
    ];
    let theirs = without_addresses(&transcript(redis.port, session));
    let ours = without_addresses(&transcript(vireo.port, session));
    assert_eq!(ours, theirs);
}

#[test]
fn redis_cli_ldb_sync_mode_drives_a_session() {
    if Command::new("redis-cli").arg("--version").output().is_err() {
        eprintln!("note: redis-cli is not installed; skipping");
        return;
    }
    let server = common::Server::start(&[]);
    let file = server_dir_file(
        &server,
        "debugged.lua",
        "local a = redis.call('incr', KEYS[1])\nredis.debug('a is', a)\nreturn a\n",
    );
    let mut child = Command::new("redis-cli")
        .args(["-p", &server.port.to_string(), "--ldb-sync-mode", "--eval"])
        .arg(&file)
        .arg("counter")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"s\np a\nc\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "* Stopped at 1, stop reason = step over",
        "<redis> incr counter",
        "<reply> 1",
        "<value> 1",
        "<debug> line 2: \"a is\", 1",
        "(integer) 1",
        "(Lua debugging session ended)",
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} missing from:\n{text}"
        );
    }
    let mut con = server.conn();
    assert_eq!(
        ok(&mut con, &["GET", "counter"]),
        Value::BulkString(b"1".to_vec())
    );
}

/// Writes `text` to a file in the server's directory, returning its path.
fn server_dir_file(server: &common::Server, name: &str, text: &str) -> std::path::PathBuf {
    let path = server.dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}
