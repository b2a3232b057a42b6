//! Shared helpers for integration tests: start the real `vireo` binary on a
//! free port and connect to it with the `redis` crate.
#![allow(dead_code)]

pub mod diff;

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a test waits for any reply before failing.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(120);

/// A running server process, killed when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
    /// The server's own working directory (`dir`), removed when dropped.
    pub dir: PathBuf,
}

/// A fresh empty directory for one server's files (dump, AOF).
pub fn fresh_dir() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "vireo-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create test dir");
    dir
}

/// A TCP port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Whether a server on `port` answers PING (with PONG, or an error such as
/// NOAUTH, but not -LOADING: a server still loading its data is not ready). A bare successful connect is not enough: on loopback, connecting
/// to a free port in the ephemeral range can succeed as a TCP self-connect
/// (source port == destination port), which once let a test start talking
/// before the server existed; a self-connected socket echoes `PING` back.
pub fn answers_ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    if s.local_addr().map(|a| a.port()).ok() == Some(port) {
        return false;
    }
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut reply = [0u8; 8];
    s.write_all(b"PING\r\n").is_ok()
        && s.read_exact(&mut reply[..1]).is_ok()
        && (reply[0] == b'+'
            || (reply[0] == b'-' && s.read_exact(&mut reply[1..]).is_ok() && &reply != b"-LOADING"))
}

impl Server {
    /// Starts `vireo --port P --bind 127.0.0.1 --dir <fresh dir>` plus
    /// `extra` arguments and waits until it accepts connections.
    pub fn start(extra: &[&str]) -> Server {
        Server::start_in(fresh_dir(), extra)
    }

    /// Like [`Server::start`] with `dir` as the working directory (to
    /// restart on the files a previous server left).
    pub fn start_in(dir: PathBuf, extra: &[&str]) -> Server {
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new(env!("CARGO_BIN_EXE_vireo"))
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .arg("--dir")
                .arg(&dir)
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("spawn vireo");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if answers_ping(port) {
                    return Server { child, port, dir };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("vireo did not start");
    }

    /// A new connection whose replies time out after two minutes, so a server
    /// that stops answering fails the test instead of hanging the run.
    pub fn conn(&self) -> redis::Connection {
        let con = self.client().get_connection().expect("connect");
        con.set_read_timeout(Some(REPLY_TIMEOUT))
            .expect("read timeout");
        con
    }

    /// A client for this server.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).expect("client")
    }

    /// The server's process id (to read its memory use from /proc).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The child process (to check exit status).
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Server {
    /// Kills the process (SIGKILL) and returns its directory, keeping the
    /// files for a restart.
    pub fn kill_keep_dir(mut self) -> PathBuf {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::take(&mut self.dir)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !self.dir.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Runs a command and returns the raw reply (errors as `Err`).
pub fn q(con: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
}

/// Sends raw bytes on a fresh socket and reads until `expect_len` bytes
/// arrived or the server closed the connection.
pub fn raw_exchange(port: u16, bytes: &[u8], timeout: Duration) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(timeout)).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    out
}

/// Runs a command that must succeed.
pub fn ok(con: &mut redis::Connection, args: &[&str]) -> redis::Value {
    q(con, args).unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// Runs a command that must fail; returns "CODE detail".
pub fn err(con: &mut redis::Connection, args: &[&str]) -> String {
    match q(con, args) {
        Ok(v) => panic!("{args:?} should fail, got {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

/// One INFO field's value.
pub fn info_field(con: &mut redis::Connection, field: &str) -> String {
    let info: String = redis::cmd("INFO")
        .arg("everything")
        .query(con)
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("INFO has no {field}"))
        .to_string()
}

/// The whole dataset of a server in a canonical, comparable form:
/// "db key" → "type: contents [ttl]" with unordered collections sorted.
/// Works against Vireo and redis-server alike (interop tests).
pub fn dataset(port: u16) -> std::collections::BTreeMap<String, String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let mut con = client.get_connection().expect("connect");
    let mut out = std::collections::BTreeMap::new();
    for db in 0..16 {
        redis::cmd("SELECT")
            .arg(db)
            .query::<()>(&mut con)
            .expect("SELECT");
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut con).expect("KEYS");
        for key in keys {
            let kind: String = redis::cmd("TYPE").arg(&key).query(&mut con).expect("TYPE");
            let mut read = |c: &str, extra: &[&str]| -> Vec<Vec<u8>> {
                let mut cmd = redis::cmd(c);
                cmd.arg(&key);
                for e in extra {
                    cmd.arg(*e);
                }
                cmd.query(&mut con).expect("read")
            };
            let mut items = match kind.as_str() {
                "string" => read("GETRANGE", &["0", "-1"]),
                "list" => read("LRANGE", &["0", "-1"]),
                "set" => read("SMEMBERS", &[]),
                "hash" => read("HGETALL", &[]),
                "zset" => read("ZRANGE", &["0", "-1", "WITHSCORES"]),
                other => panic!("unexpected type {other}"),
            };
            match kind.as_str() {
                "set" => items.sort(),
                "hash" => {
                    let mut pairs: Vec<Vec<u8>> = items
                        .chunks(2)
                        .map(|p| [&p[0][..], b"=", &p[1][..]].concat())
                        .collect();
                    pairs.sort();
                    items = pairs;
                }
                _ => {}
            }
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut con).expect("PTTL");
            let shown: Vec<String> = items
                .iter()
                .map(|i| String::from_utf8_lossy(i).into_owned())
                .collect();
            out.insert(
                format!("{db} {}", String::from_utf8_lossy(&key)),
                format!("{kind}: {shown:?}{}", if ttl > 0 { " ttl" } else { "" }),
            );
        }
    }
    out
}

/// Polls `f` until it holds, for up to thirty seconds (a loaded machine
/// needs them), failing the test with `what` otherwise.
pub fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A Vireo server with DEBUG enabled, logging to a file in its own
/// directory: the server and the log's path.
pub fn start_logged(extra: &[&str]) -> (Server, PathBuf) {
    let dir = fresh_dir();
    let log = dir.join("vireo.log");
    let mut args = vec![
        "--logfile",
        log.to_str().unwrap(),
        "--enable-debug-command",
        "yes",
    ];
    args.extend_from_slice(extra);
    (Server::start_in(dir, &args), log)
}

/// Whether the log at `log` holds `text`.
pub fn log_has(log: &std::path::Path, text: &str) -> bool {
    std::fs::read_to_string(log).is_ok_and(|l| l.contains(text))
}

/// Reads the log at `path` until it holds `needle` (a server writes it
/// from other threads, or as it dies), for up to thirty seconds, and
/// returns it: the caller asserts on what it holds.
pub fn wait_for_log(path: &std::path::Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the log at `log` holds `text`.
pub fn wait_log(log: &std::path::Path, text: &str) {
    assert!(
        wait_for_log(log, text).contains(text),
        "timed out waiting for log line {text:?}"
    );
}
