//! One client connection: its socket, input buffer, parser, output buffer
//! and session. The worker owning it calls [`Conn::on_readable`] and
//! [`Conn::flush`]; everything here runs on that one thread.

use std::io::{self, Read, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use mio::event::Source;
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Registry, Token};
use vireo_resp::{ParseLimits, Parser, Protocol, ReplyBuf};

use crate::dispatch::{self, Outcome};
use crate::server::{Server, WorkerStats};
use crate::session::Session;

/// Bytes read per `read` call, Redis's PROTO_IOBUF_LEN.
const READ_CHUNK: usize = 16 * 1024;
/// Reads per readiness event before other clients get a turn.
const READS_PER_TURN: usize = 16;
/// An idle input buffer larger than this is shrunk back.
const IDLE_BUFFER_MAX: usize = 64 * 1024;

/// A TCP or unix-domain client socket.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Stream {
    /// Registers for both readiness kinds once; mio is edge-triggered, so
    /// this never needs re-registering.
    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        let interest = Interest::READABLE | Interest::WRITABLE;
        match self {
            Stream::Tcp(s) => s.register(registry, token, interest),
            Stream::Unix(s) => s.register(registry, token, interest),
        }
    }

    /// Removes the socket from the poller before it is dropped.
    pub fn deregister(&mut self, registry: &Registry) {
        let _ = match self {
            Stream::Tcp(s) => s.deregister(registry),
            Stream::Unix(s) => s.deregister(registry),
        };
    }
}

/// Input bytes: a buffer whose whole length is initialized once, with the
/// unconsumed data in `start..end`, so reads never zero memory.
struct InputBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl InputBuf {
    fn new() -> Self {
        InputBuf {
            buf: Vec::new(),
            start: 0,
            end: 0,
        }
    }

    fn len(&self) -> usize {
        self.end - self.start
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Free space after `end`, made at least `want` bytes by compacting or
    /// growing. Growth doubles, so memory follows bytes actually received
    /// (a large declared length alone does not allocate).
    fn space(&mut self, want: usize) -> &mut [u8] {
        if self.buf.len() - self.end < want {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() - self.end < want {
                let new_len = (self.buf.len() * 2).max(self.end + want);
                self.buf.resize(new_len, 0);
            }
        }
        &mut self.buf[self.end..]
    }

    fn shrink_if_idle(&mut self) {
        if self.len() == 0 && self.buf.len() > IDLE_BUFFER_MAX {
            self.buf = Vec::new();
            self.start = 0;
            self.end = 0;
        }
    }
}

/// Why a connection is being closed.
#[derive(Debug, PartialEq, Eq)]
pub enum Close {
    /// The peer closed or the socket failed.
    Gone,
    /// We decided to close (QUIT, protocol error, limits, kill).
    Done,
}

/// A client connection.
pub struct Conn {
    pub stream: Stream,
    input: InputBuf,
    parser: Parser,
    pub out: ReplyBuf,
    pub session: Session,
    /// Input is held back by CLIENT PAUSE.
    pub paused: bool,
    /// When the output buffer first went over the soft limit.
    soft_limit_since: Option<Instant>,
}

impl Conn {
    /// Wraps an accepted socket.
    pub fn new(stream: Stream, session: Session) -> Self {
        Conn {
            stream,
            input: InputBuf::new(),
            parser: Parser::new(),
            out: ReplyBuf::new(Protocol::Resp2),
            session,
            paused: false,
            soft_limit_since: None,
        }
    }

    /// Reads what the socket has (up to a fair share) and runs every
    /// complete command. Returns Ok(true) if more input may be waiting.
    pub fn on_readable(&mut self, server: &Server, stats: &WorkerStats) -> Result<bool, Close> {
        for _ in 0..READS_PER_TURN {
            if self.session.close_after_reply || self.paused {
                return Ok(false);
            }
            let want = self.parser.bytes_wanted().clamp(READ_CHUNK, 1024 * 1024);
            let space = self.input.space(want);
            match self.stream.read(space) {
                Ok(0) => return Err(Close::Gone),
                Ok(n) => {
                    self.input.end += n;
                    stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    stats.reads_processed.fetch_add(1, Ordering::Relaxed);
                    self.process_input(server)?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.input.shrink_if_idle();
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Close::Gone),
            }
        }
        Ok(true)
    }

    /// Parses and executes every complete command in the input buffer.
    pub fn process_input(&mut self, server: &Server) -> Result<(), Close> {
        let limits = ParseLimits {
            max_bulk_len: server.config.hot.proto_max_bulk_len.load(Ordering::Relaxed) as usize,
            ..ParseLimits::default()
        };
        let mut consumed = 0;
        let data = &self.input.buf[self.input.start..self.input.end];
        while !self.session.close_after_reply {
            let rest = &data[consumed..];
            if rest.is_empty() {
                break;
            }
            match self.parser.parse(rest, &limits) {
                Ok(Some(n)) => {
                    let args = self.parser.args(rest);
                    if !args.is_empty() {
                        if dispatch::run(server, &mut self.session, &mut self.out, args)
                            == Outcome::Postponed
                        {
                            self.paused = true;
                            self.parser.reset();
                            break;
                        }
                    }
                    consumed += n;
                }
                Ok(None) => break,
                Err(e) => {
                    self.out.error(&format!("ERR {}", e.message));
                    server.count_error(b"ERR");
                    self.session.close_after_reply = true;
                    consumed = data.len();
                }
            }
        }
        self.input.consume(consumed);
        let limit = server
            .config
            .hot
            .client_query_buffer_limit
            .load(Ordering::Relaxed) as usize;
        if self.input.len() > limit {
            tracing::warn!(
                client = self.session.id,
                "closing client that reached max query buffer length"
            );
            server
                .stats
                .client_qbuf_limit_disconnections
                .fetch_add(1, Ordering::Relaxed);
            return Err(Close::Done);
        }
        let shared = &self.session.shared;
        shared.qbuf.store(self.input.len(), Ordering::Relaxed);
        shared
            .qbuf_free
            .store(self.input.buf.len() - self.input.end, Ordering::Relaxed);
        Ok(())
    }

    /// Writes as much pending output as the socket takes. Err when the
    /// connection should be closed (peer gone, or everything was sent after
    /// QUIT / an error that closes).
    pub fn flush(&mut self, stats: &WorkerStats) -> Result<(), Close> {
        while !self.out.is_empty() {
            match self.stream.write(self.out.as_bytes()) {
                Ok(0) => return Err(Close::Gone),
                Ok(n) => {
                    self.out.consume(n);
                    stats
                        .net_output_bytes
                        .fetch_add(n as u64, Ordering::Relaxed);
                    stats.writes_processed.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Close::Gone),
            }
        }
        self.session
            .shared
            .omem
            .store(self.out.len(), Ordering::Relaxed);
        if self.out.is_empty() && self.session.close_after_reply {
            return Err(Close::Done);
        }
        Ok(())
    }

    /// Enforces `client-output-buffer-limit` for normal clients: past the
    /// hard limit, or over the soft limit for longer than its seconds, the
    /// client is dropped, as Redis does.
    pub fn output_over_limit(&mut self, server: &Server) -> bool {
        // MONITOR clients are "normal" for this purpose in Redis too.
        let lim = &server.config.hot.client_output_buffer_limits[0];
        let hard = lim.hard.load(Ordering::Relaxed) as usize;
        let soft = lim.soft.load(Ordering::Relaxed) as usize;
        let soft_secs = lim.soft_seconds.load(Ordering::Relaxed);
        let used = self.out.len();
        if hard > 0 && used >= hard {
            return true;
        }
        if soft > 0 && used >= soft {
            let since = *self.soft_limit_since.get_or_insert_with(Instant::now);
            if since.elapsed().as_secs() >= soft_secs {
                return true;
            }
        } else {
            self.soft_limit_since = None;
        }
        false
    }

    /// Shared view of this client, for the registry.
    pub fn shared(&self) -> &Arc<crate::client::ClientShared> {
        &self.session.shared
    }
}
