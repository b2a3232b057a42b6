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

use crate::exec::blocking::Waiter;
use crate::exec::dispatch::{self, Outcome};
use crate::net::client::cflags;
use crate::net::link::Link;
use crate::net::lookahead::LookAhead;
use crate::net::session::Session;
use crate::net::tls::TlsStream;
use crate::server::{bump, Server, WorkerStats};

/// Bytes read per `read` call, Redis's PROTO_IOBUF_LEN.
const READ_CHUNK: usize = 16 * 1024;
/// The first read of a connection without a buffer (new, or idle and
/// released).
const FIRST_READ: usize = 1024;
/// Reads per readiness event before other clients get a turn.
const READS_PER_TURN: usize = 16;
/// An idle input buffer larger than this is given back.
const IDLE_BUFFER_MAX: usize = 64 * 1024;

/// A client's transport: a TCP or unix-domain socket, or TLS over TCP.
/// The plain variants do exactly what a socket does; only `Tls` has a
/// record layer in between (`net/tls.rs`).
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<TlsStream>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
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
            Stream::Tls(s) => s.socket_mut().register(registry, token, interest),
        }
    }

    /// The connection in blocking mode, for threads of its own (a replica
    /// link); deregister it first. A TLS connection keeps its session.
    pub fn into_link(self) -> io::Result<Link> {
        let fd: std::os::fd::OwnedFd = match self {
            Stream::Tcp(s) => s.into(),
            Stream::Unix(s) => s.into(),
            Stream::Tls(s) => {
                let (sock, session) = s.into_parts();
                let fd: std::os::fd::OwnedFd = sock.into();
                return Link::tls(std::net::TcpStream::from(fd), session);
            }
        };
        let socket = socket2::Socket::from(fd);
        socket.set_nonblocking(false)?;
        Ok(Link::Plain(socket))
    }

    /// Removes the socket from the poller before it is dropped.
    pub fn deregister(&mut self, registry: &Registry) {
        let _ = match self {
            Stream::Tcp(s) => s.deregister(registry),
            Stream::Unix(s) => s.deregister(registry),
            Stream::Tls(s) => s.socket_mut().deregister(registry),
        };
    }

    /// The socket's file descriptor (CLIENT LIST's `fd`).
    pub fn raw_fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tls(s) => s.socket().as_raw_fd(),
        }
    }

    /// Whether the last read emptied the socket, given that it was
    /// `short` (returned less than the space offered).
    fn drained(&self, short: bool) -> bool {
        match self {
            Stream::Tls(s) => s.drained(),
            Stream::Tcp(_) | Stream::Unix(_) => short,
        }
    }

    /// True for a TLS connection whose handshake outlived its time.
    pub fn handshake_expired(&self, now: Instant) -> bool {
        match self {
            Stream::Tls(s) => s.handshake_expired(now),
            Stream::Tcp(_) | Stream::Unix(_) => false,
        }
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

    /// Frees the buffer when it holds nothing (a connection gone idle).
    fn release_if_empty(&mut self) {
        if self.len() == 0 {
            self.buf = Vec::new();
            self.start = 0;
            self.end = 0;
        }
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
    /// Close at once, discarding pending output: the peer closed, the
    /// socket failed, or the client was killed (CLIENT KILL, output limit).
    Gone,
    /// We decided to close (QUIT, protocol error, limits, kill).
    Done,
}

/// A client connection.
pub struct Conn {
    pub stream: Stream,
    input: InputBuf,
    parser: Parser,
    /// The current batch's commands, parsed ahead.
    /// Allocated by the first pipelined batch, dropped when the
    /// connection goes idle (it is most of an idle connection's memory).
    lookahead: Option<Box<LookAhead>>,
    pub out: ReplyBuf,
    pub session: Session,
    /// Input is held back by CLIENT PAUSE.
    pub paused: bool,
}

impl Conn {
    /// Wraps an accepted socket.
    pub fn new(stream: Stream, mut session: Session) -> Self {
        session.tls = matches!(stream, Stream::Tls(_));
        Conn {
            stream,
            input: InputBuf::new(),
            parser: Parser::new(),
            lookahead: None,
            out: ReplyBuf::new(Protocol::Resp2),
            session,
            paused: false,
        }
    }

    /// Reads what the socket has (up to a fair share) and runs every
    /// complete command. Returns Ok(true) if more input may be waiting.
    ///
    /// `trust_short_reads`: the caller got a readiness event without EOF or
    /// error, so a read shorter than the space offered emptied the socket's
    /// receive queue and anything arriving later (data or EOF) raises a new
    /// edge-triggered event; the read that would only say EAGAIN is skipped
    /// (it was one syscall in three under a pipelined load). Without it
    /// (an EOF already flagged, a new connection, a resumed client) reading
    /// goes on until the socket says it is empty. A TLS stream's short
    /// read proves nothing about its socket: it says itself when both are
    /// empty (`Stream::drained`).
    pub fn on_readable(
        &mut self,
        server: &Server,
        stats: &WorkerStats,
        trust_short_reads: bool,
    ) -> Result<bool, Close> {
        for _ in 0..READS_PER_TURN {
            if self.session.close_after_reply || self.paused {
                return Ok(false);
            }
            // Room for a large bulk being received, but never more than the
            // client already sent (nor 1 MiB): a declared length alone must
            // not make us allocate (and touch) memory.
            let cap = self.input.len().clamp(READ_CHUNK, 1024 * 1024);
            let want = if self.input.buf.capacity() == 0 {
                // A new or idle connection's first read: most clients send
                // a short command and wait, and an idle connection should
                // not hold a whole read chunk (the next read grows it).
                FIRST_READ
            } else {
                self.parser.bytes_wanted().clamp(READ_CHUNK, cap)
            };
            let space = self.input.space(want);
            let room = space.len();
            match self.stream.read(space) {
                Ok(0) => return Err(Close::Gone),
                Ok(n) => {
                    self.input.end += n;
                    bump(&stats.net_input_bytes, n as u64);
                    bump(&stats.reads_processed, 1);
                    self.process_input(server)?;
                    if trust_short_reads && self.stream.drained(n < room) {
                        self.shrink_if_idle();
                        return Ok(false);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.shrink_if_idle();
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Close::Gone),
            }
        }
        Ok(true)
    }

    /// Parses and executes every complete command in the input buffer.
    /// Input received but not run yet (what a replica sent after SYNC or
    /// PSYNC, handed to its link).
    pub fn unread_input(&self) -> Vec<u8> {
        self.input.buf[self.input.start..self.input.end].to_vec()
    }

    pub fn process_input(&mut self, server: &Server) -> Result<(), Close> {
        let limits = ParseLimits {
            max_bulk_len: server.config.hot.proto_max_bulk_len.load(Ordering::Relaxed) as usize,
            // Redis 7.0 accepts any multibulk count up to INT_MAX; memory
            // still follows the bytes received (the parser reserves little).
            max_multibulk_len: i32::MAX as usize,
            ..ParseLimits::default()
        };
        let mut consumed = 0;
        let mut prefetched = 0;
        // Commands of this batch run back to back: they share clock reads.
        vireo_store::clock::break_chain();
        let data = &self.input.buf[self.input.start..self.input.end];
        // As in Redis, the commands of a batch are still in the query
        // buffer while they run (CLIENT LIST's `qbuf` shows them).
        self.session
            .shared
            .qbuf
            .store(data.len(), Ordering::Relaxed);
        // The look-ahead's key hashes, found again by the commands it saw.
        let hashes = vireo_store::hash_memo::Scope::open(data);
        if let Some(la) = &mut self.lookahead {
            la.clear();
        }
        // A killed client (CLIENT KILL, output buffer limit) runs nothing more.
        // A blocked client's input waits for its command to complete.
        // After SYNC or PSYNC the rest of the input (a replica's pipelined
        // REPLCONF ACK) belongs to the replication link, which takes it over.
        while !self.session.close_after_reply
            && !self.session.shared.killed.load(Ordering::Relaxed)
            && self.session.blocked.is_none()
            && self.session.repl.handoff.is_none()
        {
            let rest = &data[consumed..];
            if rest.is_empty() {
                break;
            }
            // Parsed ahead for an authenticated client: one that RESET
            // logged out meanwhile has its commands parsed under the
            // parser's limits for the unauthenticated.
            let peeked = match &mut self.lookahead {
                Some(la) if self.session.authenticated => la.take(data, consumed),
                Some(la) => {
                    la.clear();
                    None
                }
                None => None,
            };
            let (n, args, known) = match peeked {
                Some(p) => (p.len, p.args, p.cmd),
                None => {
                    // Until AUTH succeeds, Redis caps multibulk counts at 10
                    // and bulk lengths at 16 KiB, so an unauthenticated peer
                    // cannot make the server buffer much.
                    self.parser.set_unauthenticated(!self.session.authenticated);
                    match self.parser.parse(rest, &limits) {
                        Ok(Some(n)) => {
                            // More input behind this command (a pipeline),
                            // or a command that may name several keys (an
                            // MSET): keys worth prefetching, where a lone
                            // key's miss would overlap with nothing.
                            let mut known = None;
                            if consumed >= prefetched
                                && (n < rest.len() || self.parser.args(rest).len() > 3)
                            {
                                let la = self
                                    .lookahead
                                    .get_or_insert_with(|| Box::new(LookAhead::new()));
                                prefetched = la.look(
                                    server,
                                    self.session.db,
                                    data,
                                    consumed,
                                    &hashes,
                                    self.session.authenticated.then_some(limits.max_bulk_len),
                                );
                                // This command was looked at first.
                                known = la.take(data, consumed).and_then(|p| p.cmd);
                            }
                            (n, self.parser.args(rest), known)
                        }
                        Ok(None) => break,
                        Err(e) => {
                            self.out.error(&format!("ERR {}", e.message));
                            server.count_error(b"ERR");
                            self.session.close_after_reply = true;
                            consumed = data.len();
                            continue;
                        }
                    }
                }
            };
            if !args.is_empty() {
                match dispatch::run(server, &mut self.session, &mut self.out, args, known) {
                    Outcome::Done => {
                        // With `maxmemory-clients` on, a client is checked
                        // after every command, as Redis checks before the
                        // next one: one whose command took it over the
                        // limit is cut off before running more of its
                        // pipeline.
                        if server.config.hot.maxmemory_clients.load(Ordering::Relaxed) != 0 {
                            self.account(server);
                            crate::memory::client_evict::evict_clients(server);
                        }
                    }
                    Outcome::Postponed => {
                        self.paused = true;
                        self.session.shared.set_flag(cflags::BLOCKED, true);
                        self.parser.reset();
                        break;
                    }
                    Outcome::Blocked => {
                        consumed += n;
                        break;
                    }
                }
            }
            consumed += n;
        }
        drop(hashes);
        self.input.consume(consumed);
        if self.session.shared.killed.load(Ordering::Relaxed) {
            return Err(Close::Gone);
        }
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
        self.account(server);
        Ok(())
    }

    /// Gives back a big command's input and argument memory once the
    /// socket is drained and the command ran.
    fn shrink_if_idle(&mut self) {
        self.input.shrink_if_idle();
        self.parser.shrink_if_idle();
    }

    /// Gives back every buffer an idle connection holds (input, parser
    /// arguments, an empty output buffer), as Redis frees the query buffer
    /// of a client idle for two seconds: 10,000 idle connections cost
    /// 19 KB each while they kept a 16 KB read buffer. The buffers are
    /// allocated again by the connection's next command.
    pub fn release_idle_buffers(&mut self) {
        self.lookahead = None;
        self.input.release_if_empty();
        self.parser.release_if_idle();
        if self.out.is_empty() {
            self.out.shrink_to(0);
        }
    }

    /// True while the connection holds a buffer that
    /// [`Conn::release_idle_buffers`] would give back, so housekeeping
    /// visits an idle connection once, not every tick.
    pub fn holds_idle_buffers(&self) -> bool {
        self.lookahead.is_some()
            || self.input.buf.capacity() > 0
            || self.parser.memory() > 0
            || (self.out.is_empty() && self.out.capacity() > 0)
    }

    /// Bytes this connection holds, counted as Redis's
    /// `getClientMemoryUsage` counts a client: the query buffer and the
    /// output buffer as allocated, the connection's own structure, the
    /// argument list (the arguments themselves are slices of the query
    /// buffer), the queued transaction and the WATCH list.
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<Conn>()
            + self.input.buf.capacity()
            + self.parser.memory()
            + self.out.capacity()
            + self.session.multi_memory()
            + self.session.subs.memory()
    }

    /// Publishes [`Self::memory_usage`] to the client registry (CLIENT LIST
    /// `tot-mem`, the `maxmemory-clients` total); true when it grew.
    pub fn account(&self, server: &Server) -> bool {
        let shared = &self.session.shared;
        shared
            .multi_mem
            .store(self.session.multi_memory(), Ordering::Relaxed);
        server.clients.account(shared, self.memory_usage())
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
                    bump(&stats.net_output_bytes, n as u64);
                    bump(&stats.writes_processed, 1);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Close::Gone),
            }
        }
        // TLS records encrypted from output already consumed may still
        // wait for the socket.
        if let Stream::Tls(s) = &mut self.stream {
            s.flush_pending().map_err(|_| Close::Gone)?;
        }
        if self.out.is_empty() && self.out.capacity() > READ_CHUNK {
            // Give back the memory of big replies once they are sent. What
            // outgrew one chunk is what Redis holds past its fixed reply
            // buffer, in blocks it frees as they are written: kept here,
            // it would stay in `used_memory` and make the next command
            // evict keys for it (a burst of tracking invalidations to
            // clients that cache the evicted keys drained the keyspace).
            self.out.shrink_to(0);
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

    /// True while a command of this connection waits for keys.
    pub fn is_blocked(&self) -> bool {
        self.session.blocked.is_some()
    }

    /// Completes the command blocked on `waiter` with `reply`; false if
    /// that is not this connection's current wait.
    pub fn finish_blocked(
        &mut self,
        server: &Server,
        waiter: &Arc<Waiter>,
        reply: &[u8],
        failed: bool,
    ) -> bool {
        match self.session.blocked.take() {
            Some(b) if Arc::ptr_eq(&b.waiter, waiter) => {
                dispatch::finish_blocked(
                    server,
                    &mut self.session,
                    &mut self.out,
                    b,
                    reply,
                    failed,
                );
                true
            }
            other => {
                self.session.blocked = other;
                false
            }
        }
    }

    /// Shared view of this client, for the registry.
    pub fn shared(&self) -> &Arc<crate::net::client::ClientShared> {
        &self.session.shared
    }
}

/// Enforces `client-output-buffer-limit` for the client's class (normal,
/// MONITOR ones included, or pubsub, as in Redis) with `used` bytes of pending output: past the hard
/// limit, or over the soft limit for longer than its seconds, the client is
/// flagged to be closed at once, counted and logged, like Redis's
/// `closeClientOnOutputBufferLimitReached`. Returns true while the client is
/// flagged (for any reason, CLIENT KILL included): its replies are to be
/// dropped and the connection closed without flushing.
pub fn output_limit_reached(server: &Server, session: &mut Session, used: usize) -> bool {
    let shared = &session.shared;
    if shared.killed.load(Ordering::Relaxed) {
        return true;
    }
    // Redis's client classes: subscribed clients are `pubsub` (2), the
    // rest `normal` (0) until replication brings `replica`.
    let class = if shared.flags.load(Ordering::Relaxed) & cflags::PUBSUB != 0 {
        2
    } else {
        0
    };
    let lim = &server.config.hot.client_output_buffer_limits[class];
    let hard = lim.hard.load(Ordering::Relaxed) as usize;
    let soft = lim.soft.load(Ordering::Relaxed) as usize;
    let over = if hard > 0 && used >= hard {
        true
    } else if soft > 0 && used >= soft {
        // Whole seconds of the wall clock, as Redis counts them
        // (`server.unixtime`): the client goes between `soft_seconds` and
        // one second more after it went over.
        let now = vireo_store::clock::now_ms() / 1000;
        let since = *session.obuf_soft_since.get_or_insert(now);
        now.saturating_sub(since) > lim.soft_seconds.load(Ordering::Relaxed)
    } else {
        session.obuf_soft_since = None;
        false
    };
    if over {
        tracing::warn!(
            client = session.id,
            "client scheduled to be closed ASAP for overcoming of output buffer limits"
        );
        server
            .stats
            .client_output_buffer_limit_disconnections
            .fetch_add(1, Ordering::Relaxed);
        shared.killed.store(true, Ordering::Relaxed);
    }
    over
}
