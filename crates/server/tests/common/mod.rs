//! Shared helpers for integration tests: start the real `vireo` binary on a
//! free port and connect to it with the `redis` crate.
#![allow(dead_code)]

pub mod diff;

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server process, killed when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
}

/// A TCP port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Whether a server on `port` answers PING (with PONG, or an error such as
/// NOAUTH). A bare successful connect is not enough: on loopback, connecting
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
    let mut first = [0u8; 1];
    s.write_all(b"PING\r\n").is_ok()
        && s.read_exact(&mut first).is_ok()
        && matches!(first[0], b'+' | b'-')
}

impl Server {
    /// Starts `vireo --port P --bind 127.0.0.1` plus `extra` arguments and
    /// waits until it accepts connections.
    pub fn start(extra: &[&str]) -> Server {
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new(env!("CARGO_BIN_EXE_vireo"))
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("spawn vireo");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if answers_ping(port) {
                    return Server { child, port };
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

    /// A new connection.
    pub fn conn(&self) -> redis::Connection {
        self.client().get_connection().expect("connect")
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

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
