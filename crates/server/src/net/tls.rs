//! A TLS server connection over a non-blocking socket: the record layer
//! between a client's socket and its [`crate::net::conn::Conn`].
//!
//! `TlsStream` reads and writes plaintext like a socket does (`Read`,
//! `Write`, `WouldBlock` when it must wait), so the connection's parser
//! and output buffer work unchanged; the handshake runs inside the first
//! reads and writes. Nothing here blocks: a peer that stalls its handshake
//! costs the worker nothing, and housekeeping closes it once
//! [`HANDSHAKE_TIMEOUT`] has passed ([`TlsStream::handshake_expired`]).
//!
//! Bytes rustls has decrypted but the connection has not read yet, or
//! records it has encrypted but the socket would not take, are invisible
//! to the poller: the connection stops reading only when both rustls and
//! the socket are empty ([`TlsStream::drained`], the TLS form of
//! `Conn::on_readable`'s short reads), and `Conn::flush` pushes pending
//! records after its output is empty ([`TlsStream::flush_pending`]).

use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use rustls::{ServerConfig, ServerConnection};

/// How long a client may take to complete its handshake. Redis has no such
/// limit (a silent peer holds a client slot until `timeout`); a few
/// seconds cover any real client on a slow link.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A TLS server connection on an accepted socket.
pub struct TlsStream {
    sock: TcpStream,
    tls: ServerConnection,
    accepted: Instant,
    /// Plaintext rustls holds decrypted and not yet read.
    buffered: usize,
    /// The last socket read returned less than it asked for.
    socket_drained: bool,
}

/// The socket as rustls reads it, noting whether a read came back short.
struct NoteShort<'a> {
    sock: &'a mut TcpStream,
    short: bool,
}

impl Read for NoteShort<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.sock.read(buf)?;
        self.short = n < buf.len();
        Ok(n)
    }
}

impl TlsStream {
    /// Starts the server side of a handshake on `sock` with `config`.
    pub fn new(sock: TcpStream, config: Arc<ServerConfig>) -> io::Result<TlsStream> {
        let tls = ServerConnection::new(config).map_err(io::Error::other)?;
        Ok(TlsStream {
            sock,
            tls,
            accepted: Instant::now(),
            buffered: 0,
            socket_drained: false,
        })
    }

    /// The socket and the session, for a blocking link of its own
    /// (`net/link.rs`).
    pub fn into_parts(self) -> (TcpStream, ServerConnection) {
        (self.sock, self.tls)
    }

    /// The socket underneath, for registration with the poller.
    pub fn socket_mut(&mut self) -> &mut TcpStream {
        &mut self.sock
    }

    /// The socket underneath.
    pub fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// True when the last read emptied both rustls's plaintext and the
    /// socket's receive queue (its read came back short): anything more
    /// raises a new readiness event, so reading again would only be told
    /// `WouldBlock` (the TLS form of `Conn::on_readable`'s short reads).
    pub fn drained(&self) -> bool {
        self.socket_drained && self.buffered == 0
    }

    /// True when the handshake is still running `HANDSHAKE_TIMEOUT` after
    /// the connection was accepted.
    pub fn handshake_expired(&self, now: Instant) -> bool {
        self.tls.is_handshaking() && now.duration_since(self.accepted) >= HANDSHAKE_TIMEOUT
    }

    /// Writes encrypted records until rustls has none left or the socket
    /// would block (`WouldBlock` is returned then).
    fn send_records(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            if self.tls.write_tls(&mut self.sock)? == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
        }
        Ok(())
    }

    /// Pushes records that earlier writes left pending; Ok when the rest
    /// must wait for the socket to be writable again.
    pub fn flush_pending(&mut self) -> io::Result<()> {
        match self.send_records() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            other => other,
        }
    }

    /// Handles a record-layer or handshake error: a TLS peer is told why
    /// (the alert rustls prepared), bytes that were never TLS (plaintext
    /// sent to the TLS port) get no answer, and a failed handshake is
    /// logged as Redis logs it.
    fn fail(&mut self, err: rustls::Error) -> io::Error {
        if !matches!(err, rustls::Error::InvalidMessage(_)) {
            let _ = self.flush_pending();
        }
        if self.tls.is_handshaking() {
            tracing::warn!("Error accepting a client connection: {err}");
        }
        io::Error::new(io::ErrorKind::InvalidData, err)
    }
}

impl Read for TlsStream {
    /// Plaintext the client sent: what rustls holds decrypted, else what
    /// the socket has, decrypted (answering handshake messages on the
    /// way). Ok(0) at the end of the stream.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.tls.reader().read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Ok(n) => {
                    self.buffered = self.buffered.saturating_sub(n);
                    return Ok(n);
                }
                done => return done,
            }
            let mut sock = NoteShort {
                sock: &mut self.sock,
                short: false,
            };
            let got = self.tls.read_tls(&mut sock);
            self.socket_drained = sock.short;
            if got? == 0 {
                return Ok(0);
            }
            match self.tls.process_new_packets() {
                Ok(state) => self.buffered = state.plaintext_bytes_to_read(),
                Err(e) => return Err(self.fail(e)),
            }
            // Handshake replies; what the socket does not take now goes
            // out at the next flush.
            self.flush_pending()?;
        }
    }
}

impl Write for TlsStream {
    /// Encrypts as much of `buf` as rustls buffers and sends what the
    /// socket takes; `WouldBlock` while earlier records are still pending.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send_records()?;
        let n = self.tls.writer().write(buf)?;
        self.flush_pending()?;
        if n == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_pending()
    }
}
