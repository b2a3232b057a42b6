//! REPLCONF rdb-only and rdb-filter-only, what `redis-cli --rdb`,
//! `--functions-rdb` and `--replica` ask a master for: an RDB holding
//! only the function libraries (or nothing), always streamed over the
//! socket in `$EOF:` framing, and for rdb-only clients the end of the
//! link once it is sent. Replies are compared with a real `redis-server`
//! when one is installed.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use common::diff::{redis_server_available, start_redis, Raw};
use common::{fresh_dir, ok, Server};

const LIBRARY: &str =
    "#!lua name=lib1\nredis.register_function('func1', function() return 123 end)";

/// A client that asks the master for an RDB, reading its side of the link.
struct Link {
    r: BufReader<TcpStream>,
}

impl Link {
    fn open(port: u16) -> Link {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Link {
            r: BufReader::new(s),
        }
    }

    /// Sends an inline command and returns its one-line reply.
    fn cmd(&mut self, line: &str) -> String {
        self.r
            .get_mut()
            .write_all(format!("{line}\r\n").as_bytes())
            .unwrap();
        self.line()
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).expect("a line from the master");
        l.trim_end().to_string()
    }

    /// SYNC, then the RDB between `$EOF:<mark>` and the mark.
    fn sync_streamed(&mut self) -> Vec<u8> {
        let mut head = self.cmd("SYNC");
        while head.is_empty() {
            head = self.line();
        }
        let mark = head
            .strip_prefix("$EOF:")
            .unwrap_or_else(|| panic!("expected an EOF-marked bulk, got {head:?}"))
            .to_string();
        let mut rdb = Vec::new();
        while !rdb.ends_with(mark.as_bytes()) {
            let mut byte = [0u8];
            self.r.read_exact(&mut byte).expect("the RDB");
            rdb.push(byte[0]);
        }
        rdb.truncate(rdb.len() - mark.len());
        rdb
    }

    /// The next command of the stream, its name lowercased.
    fn command(&mut self) -> Vec<String> {
        let head = self.line();
        let n: usize = head
            .strip_prefix('*')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("expected a multibulk, got {head:?}"));
        let mut args = Vec::new();
        for i in 0..n {
            let len: usize = self.line()[1..].parse().unwrap();
            let mut arg = vec![0; len + 2];
            self.r.read_exact(&mut arg).unwrap();
            arg.truncate(len);
            let arg = String::from_utf8_lossy(&arg).into_owned();
            args.push(if i == 0 { arg.to_lowercase() } else { arg });
        }
        args
    }

    /// True once the master closed the link.
    fn closed(&mut self) -> bool {
        let mut byte = [0u8];
        matches!(self.r.read(&mut byte), Ok(0))
    }
}

/// A master holding one library and some keys, with diskless sync as
/// given.
fn master(diskless: &str) -> (Server, redis::Connection) {
    let s = Server::start(&[
        "--repl-diskless-sync",
        diskless,
        "--repl-diskless-sync-delay",
        "0",
        "--repl-ping-replica-period",
        "3600",
    ]);
    let mut c = s.conn();
    ok(&mut c, &["FUNCTION", "LOAD", LIBRARY]);
    ok(&mut c, &["MSET", "key-in-data", "1", "other", "2"]);
    (s, c)
}

/// Starts a server on `rdb` and returns (FUNCTION LIST's library names,
/// DBSIZE).
fn load(rdb: &[u8]) -> (Vec<String>, i64) {
    let dir = fresh_dir();
    std::fs::write(dir.join("dump.rdb"), rdb).unwrap();
    let s = Server::start_in(dir, &[]);
    let mut c = s.conn();
    let list: Vec<Vec<redis::Value>> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query(&mut c)
        .expect("FUNCTION LIST");
    let names = list
        .iter()
        .map(|lib| match &lib[1] {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("library name: {other:?}"),
        })
        .collect();
    let size: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    (names, size)
}

#[test]
fn functions_only_rdb_holds_the_libraries_and_the_link_ends() {
    // A disk-based master still streams a filtered RDB: it never goes
    // through the RDB file.
    for diskless in ["no", "yes"] {
        let (s, _c) = master(diskless);
        let mut link = Link::open(s.port);
        assert_eq!(link.cmd("REPLCONF capa eof"), "+OK");
        assert_eq!(link.cmd("REPLCONF rdb-only 1"), "+OK");
        assert_eq!(link.cmd("REPLCONF rdb-filter-only functions"), "+OK");
        let rdb = link.sync_streamed();
        assert!(link.closed(), "an rdb-only link ends after the RDB");
        assert!(rdb.starts_with(b"REDIS0010"));
        assert!(!rdb.windows(11).any(|w| w == b"key-in-data"));
        assert_eq!(load(&rdb), (vec!["lib1".to_string()], 0), "{diskless}");
    }
}

#[test]
fn an_empty_filter_sends_an_empty_rdb_then_the_stream() {
    let (s, mut c) = master("no");
    let mut link = Link::open(s.port);
    assert_eq!(link.cmd("REPLCONF capa eof"), "+OK");
    assert_eq!(link.cmd("REPLCONF rdb-filter-only \"\""), "+OK");
    let rdb = link.sync_streamed();
    assert_eq!(load(&rdb), (vec![], 0));
    link.r.get_mut().write_all(b"REPLCONF ACK 0\r\n").unwrap();
    ok(&mut c, &["SET", "after", "1"]);
    assert_eq!(link.command(), ["select", "0"]);
    assert_eq!(link.command(), ["set", "after", "1"]);
}

/// The REPLCONF and SYNC replies around filters, byte for byte as
/// redis-server gives them.
fn filter_replies(port: u16) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut send = |raw: &mut Raw, args: &[&str]| {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        out.push(raw.send(&args));
    };
    let mut raw = Raw::connect(port);
    send(&mut raw, &["REPLCONF", "rdb-only", "2"]);
    send(&mut raw, &["REPLCONF", "rdb-only", "x"]);
    send(&mut raw, &["REPLCONF", "rdb-filter-only", "functions foo"]);
    send(&mut raw, &["REPLCONF", "rdb-filter-only", "\"unbalanced"]);
    send(&mut raw, &["REPLCONF", "rdb-filter-only", "FUNCTIONS"]);
    // Filtered, without `capa eof`.
    send(&mut raw, &["SYNC"]);
    send(&mut raw, &["PSYNC", "?", "-1"]);
    out
}

#[test]
fn filter_errors_as_redis_gives_them() {
    let s = Server::start(&[]);
    let ours = filter_replies(s.port);
    assert_eq!(
        String::from_utf8_lossy(&ours[2]),
        "-ERR Unsupported rdb-filter-only option: foo\r\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&ours[5]),
        "-ERR Filtered replica requires EOF capability\r\n"
    );
    if !redis_server_available() {
        return;
    }
    let redis = start_redis();
    assert_eq!(ours, filter_replies(redis.port));
}

#[test]
fn redis_cli_functions_rdb_gets_the_libraries() {
    let found = Command::new("redis-cli").arg("--version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        eprintln!("note: redis-cli is not on PATH; skipping");
        return;
    }
    let (s, _c) = master("no");
    let path = s.dir.join("cli.rdb");
    let out = Command::new("redis-cli")
        .args(["-p", &s.port.to_string(), "--functions-rdb"])
        .arg(&path)
        .output()
        .expect("redis-cli");
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Transfer finished with success"), "{text}");
    let rdb = std::fs::read(&path).unwrap();
    assert_eq!(load(&rdb), (vec!["lib1".to_string()], 0));
}
