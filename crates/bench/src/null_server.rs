//! The null server: a tiny RESP server that parses each command and answers
//! with a constant reply, doing no other work.
//!
//! What it measures is the ceiling of the machine for a request/reply
//! protocol over loopback: the cost of the system calls, the kernel's TCP
//! path and RESP framing alone. A real server's throughput stated as a
//! fraction of this ceiling tells how much of its time goes to actual work.
//!
//! Replies: `GET` gets a fixed bulk string of `--data-size` bytes (so reads
//! move realistic bytes), `LRANGE key 0 N` an array of N + 1 of them (so
//! redis-benchmark's LRANGE tests get replies of a real server's size),
//! `PING` gets `+PONG`, `HELLO` a minimal map,
//! `CONFIG` an empty array (so tools that query settings on start carry
//! on), `QUIT` `+OK` then a close, and anything else `+OK`. One command
//! name can be configured to get an error reply instead, to test how
//! clients report errors.

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Longest accepted inline command or bulk argument, to bound memory.
const MAX_ARG: usize = 512 * 1024 * 1024;
/// Most elements in an `LRANGE` reply, and most bytes, to bound memory
/// whatever `--data-size` is.
const MAX_LRANGE: usize = 100_000;
const MAX_LRANGE_BYTES: usize = 64 << 20;
const LISTENER: Token = Token(usize::MAX);

/// How the null server listens and answers.
#[derive(Debug, Clone)]
pub struct NullConfig {
    /// Address to bind (port 0 picks a free port).
    pub addr: SocketAddr,
    /// Worker threads, each with its own event loop.
    pub threads: usize,
    /// Size of the bulk string returned to `GET`.
    pub get_size: usize,
    /// Command (case-insensitive) answered with an error reply.
    pub error_command: Option<String>,
}

/// A running null server; stops when [`NullServer::stop`] is called or the
/// handle is dropped.
pub struct NullServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    commands: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl NullServer {
    /// Binds and starts the worker threads.
    pub fn start(cfg: &NullConfig) -> io::Result<NullServer> {
        let listener = std::net::TcpListener::bind(cfg.addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let commands = Arc::new(AtomicU64::new(0));
        let replies = Arc::new(Replies::new(cfg));
        let mut threads = Vec::new();
        for i in 0..cfg.threads.max(1) {
            let l = TcpListener::from_std(listener.try_clone()?);
            let (stop, commands, replies) = (stop.clone(), commands.clone(), replies.clone());
            threads.push(
                thread::Builder::new()
                    .name(format!("null-{i}"))
                    .spawn(move || {
                        if let Err(e) = serve(l, &stop, &commands, &replies) {
                            eprintln!("null server thread {i}: {e}");
                        }
                    })?,
            );
        }
        Ok(NullServer {
            addr,
            stop,
            commands,
            threads,
        })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Commands answered so far.
    pub fn commands(&self) -> u64 {
        self.commands.load(Ordering::Relaxed)
    }

    /// Stops the workers and waits for them.
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Blocks until the server stops (it only stops when told to, so in
    /// practice until the process is killed).
    pub fn wait(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl std::ops::Drop for NullServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Precomputed reply bytes.
struct Replies {
    get: Vec<u8>,
    error_command: Option<Vec<u8>>,
    error: Vec<u8>,
}

impl Replies {
    fn new(cfg: &NullConfig) -> Self {
        let mut get = format!("${}\r\n", cfg.get_size).into_bytes();
        get.extend(std::iter::repeat_n(b'x', cfg.get_size));
        get.extend_from_slice(b"\r\n");
        let name = cfg.error_command.as_deref().unwrap_or("");
        Replies {
            get,
            error_command: cfg.error_command.as_ref().map(|c| c.as_bytes().to_vec()),
            error: format!("-ERR null server rejects '{name}'\r\n").into_bytes(),
        }
    }

    /// Appends the reply to one command; returns false when the connection
    /// should close after writing.
    fn answer(&self, cmd: &Command<'_>, out: &mut Vec<u8>) -> bool {
        let name = cmd.name;
        if self
            .error_command
            .as_ref()
            .is_some_and(|e| e.eq_ignore_ascii_case(name))
        {
            out.extend_from_slice(&self.error);
        } else if name.eq_ignore_ascii_case(b"GET") {
            out.extend_from_slice(&self.get);
        } else if name.eq_ignore_ascii_case(b"LRANGE") {
            let stop = cmd
                .arg3
                .and_then(|a| std::str::from_utf8(a).ok()?.parse::<usize>().ok());
            let most = MAX_LRANGE.min(MAX_LRANGE_BYTES / self.get.len());
            let n = stop.map_or(0, |s| s.saturating_add(1).min(most));
            // Writing to a Vec cannot fail.
            let _ = write!(out, "*{n}\r\n");
            for _ in 0..n {
                out.extend_from_slice(&self.get);
            }
        } else if name.eq_ignore_ascii_case(b"PING") {
            out.extend_from_slice(b"+PONG\r\n");
        } else if name.eq_ignore_ascii_case(b"HELLO") {
            if cmd.arg1 == Some(b"3") {
                out.extend_from_slice(b"%1\r\n$5\r\nproto\r\n:3\r\n");
            } else {
                out.extend_from_slice(b"*2\r\n$5\r\nproto\r\n:2\r\n");
            }
        } else if name.eq_ignore_ascii_case(b"CONFIG") {
            out.extend_from_slice(b"*0\r\n");
        } else if name.eq_ignore_ascii_case(b"QUIT") {
            out.extend_from_slice(b"+OK\r\n");
            return false;
        } else {
            out.extend_from_slice(b"+OK\r\n");
        }
        true
    }
}

/// The parts of a command the null server looks at.
#[derive(Debug, PartialEq, Eq)]
pub struct Command<'a> {
    /// The command name as sent.
    pub name: &'a [u8],
    /// The first argument, if any.
    pub arg1: Option<&'a [u8]>,
    /// The third argument, if any (`LRANGE`'s stop).
    pub arg3: Option<&'a [u8]>,
}

/// Parses one command (RESP multibulk or inline) at the start of `buf`.
/// `Ok(None)` means more bytes are needed; `Ok(Some((cmd, used)))` gives
/// the command and its length in bytes. Empty inline lines and empty
/// multibulks are skipped by returning a command with an empty name.
pub fn parse_command(buf: &[u8]) -> Result<Option<(Command<'_>, usize)>, String> {
    let Some(first) = buf.first() else {
        return Ok(None);
    };
    if *first != b'*' {
        let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
            if buf.len() > 64 * 1024 {
                return Err("inline command too long".into());
            }
            return Ok(None);
        };
        let line = &buf[..nl];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut words = line
            .split(|b| *b == b' ' || *b == b'\t')
            .filter(|w| !w.is_empty());
        let name = words.next().unwrap_or(b"");
        let arg1 = words.next();
        let arg3 = words.nth(1);
        return Ok(Some((Command { name, arg1, arg3 }, nl + 1)));
    }
    let Some((argc, mut pos)) = header(buf, 0, b'*')? else {
        return Ok(None);
    };
    let mut name: &[u8] = b"";
    let (mut arg1, mut arg3) = (None, None);
    for i in 0..argc {
        let Some((len, at)) = header(buf, pos, b'$')? else {
            return Ok(None);
        };
        let end = at + len;
        if buf.len() < end + 2 {
            return Ok(None);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err("bulk argument not followed by CRLF".into());
        }
        match i {
            0 => name = &buf[at..end],
            1 => arg1 = Some(&buf[at..end]),
            3 => arg3 = Some(&buf[at..end]),
            _ => {}
        }
        pos = end + 2;
    }
    Ok(Some((Command { name, arg1, arg3 }, pos)))
}

/// Parses `<kind><n>\r\n` at `pos`; returns `n` and the position after it.
fn header(buf: &[u8], pos: usize, kind: u8) -> Result<Option<(usize, usize)>, String> {
    let rest = &buf[pos..];
    let Some(nl) = rest.iter().take(32).position(|&b| b == b'\n') else {
        if rest.len() >= 32 {
            return Err("length line too long".into());
        }
        return Ok(None);
    };
    if rest[0] != kind || nl < 2 || rest[nl - 1] != b'\r' {
        return Err(format!("expected '{}'", kind as char));
    }
    let n: usize = std::str::from_utf8(&rest[1..nl - 1])
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n <= MAX_ARG)
        .ok_or_else(|| "invalid length".to_string())?;
    Ok(Some((n, pos + nl + 1)))
}

struct Client {
    stream: TcpStream,
    rbuf: Vec<u8>,
    rlen: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    closing: bool,
}

fn serve(
    mut listener: TcpListener,
    stop: &AtomicBool,
    commands: &AtomicU64,
    replies: &Replies,
) -> io::Result<()> {
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut events = Events::with_capacity(256);
    let mut clients: Vec<Option<Client>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match poll.poll(&mut events, Some(Duration::from_millis(100))) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        for ev in events.iter() {
            if ev.token() == LISTENER {
                loop {
                    match listener.accept() {
                        Ok((mut s, _)) => {
                            let _ = s.set_nodelay(true);
                            let slot =
                                clients.iter().position(Option::is_none).unwrap_or_else(|| {
                                    clients.push(None);
                                    clients.len() - 1
                                });
                            poll.registry().register(
                                &mut s,
                                Token(slot),
                                Interest::READABLE | Interest::WRITABLE,
                            )?;
                            clients[slot] = Some(Client {
                                stream: s,
                                rbuf: vec![0; 16 * 1024],
                                rlen: 0,
                                wbuf: Vec::with_capacity(16 * 1024),
                                wpos: 0,
                                closing: false,
                            });
                        }
                        // Another thread took it, or the backlog is empty.
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        // Out of descriptors and the like: try again later.
                        Err(_) => break,
                    }
                }
                continue;
            }
            let slot = ev.token().0;
            let Some(c) = clients.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            if !handle(c, commands, replies) {
                let mut c = clients[slot].take().expect("client present");
                let _ = poll.registry().deregister(&mut c.stream);
            }
        }
    }
    Ok(())
}

/// Reads, answers and writes for one ready client; false when it is gone.
fn handle(c: &mut Client, commands: &AtomicU64, replies: &Replies) -> bool {
    loop {
        if c.rlen == c.rbuf.len() {
            let n = c.rbuf.len() * 2;
            c.rbuf.resize(n, 0);
        }
        match c.stream.read(&mut c.rbuf[c.rlen..]) {
            Ok(0) => return false,
            Ok(n) => {
                c.rlen += n;
                let mut pos = 0;
                let mut answered = 0;
                while !c.closing {
                    match parse_command(&c.rbuf[pos..c.rlen]) {
                        Ok(Some((cmd, used))) => {
                            pos += used;
                            if !cmd.name.is_empty() {
                                answered += 1;
                                if !replies.answer(&cmd, &mut c.wbuf) {
                                    c.closing = true;
                                }
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            c.wbuf.extend_from_slice(
                                format!("-ERR Protocol error: {e}\r\n").as_bytes(),
                            );
                            c.closing = true;
                        }
                    }
                }
                commands.fetch_add(answered, Ordering::Relaxed);
                c.rbuf.copy_within(pos..c.rlen, 0);
                c.rlen -= pos;
                if c.closing {
                    c.rlen = 0;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    while c.wpos < c.wbuf.len() {
        match c.stream.write(&c.wbuf[c.wpos..]) {
            Ok(0) => return false,
            Ok(n) => c.wpos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    c.wbuf.clear();
    c.wpos = 0;
    !c.closing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_multibulk_and_inline() {
        let (c, n) = parse_command(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nrest")
            .unwrap()
            .unwrap();
        assert_eq!((c.name, c.arg1, n), (&b"GET"[..], Some(&b"k"[..]), 20));
        let (c, n) = parse_command(b"PING\r\n").unwrap().unwrap();
        assert_eq!((c.name, c.arg1, n), (&b"PING"[..], None, 6));
        let (c, _) = parse_command(b"hello  3\n").unwrap().unwrap();
        assert_eq!(c.arg1, Some(&b"3"[..]));
        let (c, _) = parse_command(b"*4\r\n$6\r\nLRANGE\r\n$1\r\nk\r\n$1\r\n0\r\n$2\r\n99\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((c.arg1, c.arg3), (Some(&b"k"[..]), Some(&b"99"[..])));
        let (c, _) = parse_command(b"LRANGE k 0 2\r\n").unwrap().unwrap();
        assert_eq!(c.arg3, Some(&b"2"[..]));
        assert!(parse_command(b"*2\r\n$3\r\nGET\r\n$1\r\n")
            .unwrap()
            .is_none());
        assert!(parse_command(b"*2\r\n$3\r\nGE").unwrap().is_none());
        assert!(parse_command(b"PIN").unwrap().is_none());
        assert!(parse_command(b"*1\r\n:3\r\n").is_err());
        assert!(parse_command(b"*1\r\n$3\r\nGETXX").is_err());
    }

    #[test]
    fn answers() {
        let r = Replies::new(&NullConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            threads: 1,
            get_size: 3,
            error_command: Some("flushall".into()),
        });
        let mut out = Vec::new();
        let cmd = |name: &'static [u8]| Command {
            name,
            arg1: None,
            arg3: None,
        };
        assert!(r.answer(&cmd(b"get"), &mut out));
        assert!(r.answer(&cmd(b"SET"), &mut out));
        assert!(r.answer(&cmd(b"FLUSHALL"), &mut out));
        assert!(!r.answer(&cmd(b"quit"), &mut out));
        assert_eq!(
            out,
            b"$3\r\nxxx\r\n+OK\r\n-ERR null server rejects 'flushall'\r\n+OK\r\n".to_vec()
        );
        let lrange = |stop: &'static [u8]| {
            let mut out = Vec::new();
            let cmd = Command {
                name: b"lrange",
                arg1: Some(b"k"),
                arg3: Some(stop),
            };
            assert!(r.answer(&cmd, &mut out));
            out
        };
        assert_eq!(lrange(b"1"), b"*2\r\n$3\r\nxxx\r\n$3\r\nxxx\r\n".to_vec());
        assert_eq!(lrange(b"-1"), b"*0\r\n".to_vec(), "only 0..N is modelled");
        let huge = lrange(b"99999999999");
        assert!(huge.starts_with(format!("*{MAX_LRANGE}\r\n").as_bytes()));
        // Big values: the reply's bytes are capped too.
        let big = Replies::new(&NullConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            threads: 1,
            get_size: 1 << 20,
            error_command: None,
        });
        let mut out = Vec::new();
        let cmd = Command {
            name: b"LRANGE",
            arg1: Some(b"k"),
            arg3: Some(b"99999"),
        };
        assert!(big.answer(&cmd, &mut out));
        assert!(out.starts_with(b"*63\r\n"), "64 MiB of 1 MiB bulks");
        assert!(out.len() <= MAX_LRANGE_BYTES);
    }
}
