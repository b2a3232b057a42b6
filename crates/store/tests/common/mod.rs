//! A throwaway redis-server for differential tests of store-level
//! algorithms (HLL and GEO), and a minimal RESP2 client to drive it.
//!
//! [`Redis::start`] returns `None`, after printing a note, when no
//! `redis-server` is on PATH, so the tests that use it skip gracefully.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A reply, decoded.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+...`
    Status(String),
    /// `-...` (without the dash)
    Error(String),
    /// `:...`
    Int(i64),
    /// `$...`; `None` for the null bulk.
    Bulk(Option<Vec<u8>>),
    /// `*...`; `None` for the null array.
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The bytes of a bulk reply (panics otherwise: a test failure).
    pub fn bytes(self) -> Vec<u8> {
        match self {
            Reply::Bulk(Some(b)) => b,
            other => panic!("expected a bulk reply, got {other:?}"),
        }
    }

    /// The value of an integer reply (panics otherwise).
    pub fn int(self) -> i64 {
        match self {
            Reply::Int(i) => i,
            other => panic!("expected an integer reply, got {other:?}"),
        }
    }

    /// The elements of an array reply (panics otherwise).
    pub fn array(self) -> Vec<Reply> {
        match self {
            Reply::Array(Some(a)) => a,
            other => panic!("expected an array reply, got {other:?}"),
        }
    }

    /// A bulk reply's text (panics otherwise).
    pub fn text(self) -> String {
        String::from_utf8(self.bytes()).expect("utf-8 reply")
    }
}

/// A redis-server child process on a free port, with one connection.
pub struct Redis {
    _server: Server,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// The child process, killed and reaped when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local address").port()
}

impl Redis {
    /// Starts redis-server, or returns `None` (with a note) when it is
    /// not installed.
    pub fn start(test: &str) -> Option<Redis> {
        if Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("note: redis-server not on PATH; skipping differential test {test}");
            return None;
        }
        let port = free_port();
        let server = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map(Server)
            .expect("spawn redis-server");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
                s.set_read_timeout(Some(Duration::from_secs(30)))
                    .expect("timeout");
                let mut r = Redis {
                    _server: server,
                    reader: BufReader::new(s.try_clone().expect("clone socket")),
                    writer: s,
                };
                if r.cmd(&[b"PING"]) == Reply::Status("PONG".into()) {
                    return Some(r);
                }
                return None;
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends one command and returns its reply.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            let a = a.as_ref();
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&out).expect("write command");
        self.read_reply()
    }

    /// Shorthand for commands whose arguments are all text.
    pub fn cmd_str(&mut self, line: &str) -> Reply {
        let args: Vec<&str> = line.split(' ').collect();
        self.cmd(&args)
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.reader.read_line(&mut l).expect("read reply line");
        assert!(l.ends_with("\r\n"), "truncated reply {l:?}");
        l.truncate(l.len() - 2);
        l
    }

    fn read_reply(&mut self) -> Reply {
        let l = self.line();
        let (kind, rest) = l.split_at(1);
        let n = || rest.parse::<i64>().expect("length");
        match kind {
            "+" => Reply::Status(rest.to_owned()),
            "-" => Reply::Error(rest.to_owned()),
            ":" => Reply::Int(n()),
            "$" if n() < 0 => Reply::Bulk(None),
            "$" => {
                let mut b = vec![0u8; n() as usize + 2];
                self.reader.read_exact(&mut b).expect("read bulk");
                b.truncate(b.len() - 2);
                Reply::Bulk(Some(b))
            }
            "*" if n() < 0 => Reply::Array(None),
            "*" => Reply::Array(Some((0..n()).map(|_| self.read_reply()).collect())),
            _ => panic!("unexpected reply {l:?}"),
        }
    }
}
