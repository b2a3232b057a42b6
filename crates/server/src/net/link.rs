//! A client connection handed to threads of its own, in blocking I/O (a
//! replica's link after SYNC or PSYNC): a plain socket, or the socket with
//! the TLS session it was accepted with.
//!
//! Two threads use a link at once, one reading and one writing, through
//! `&Link`. A TLS session is one state machine for both directions, so it
//! sits behind a mutex: the reader waits for socket bytes without holding
//! it and locks only to decrypt them; the writer holds it while it
//! encrypts and sends, which also keeps records from the two threads
//! (an alert, a key update) from interleaving on the socket.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};

use parking_lot::Mutex;
use rustls::ServerConnection;
use socket2::Socket;

/// Bytes read from the socket per TLS read.
const TLS_READ_CHUNK: usize = 16 * 1024;

/// A connection in blocking mode.
pub enum Link {
    Plain(Socket),
    Tls(Box<TlsLink>),
}

/// The TLS half of [`Link`].
pub struct TlsLink {
    sock: TcpStream,
    session: Mutex<ServerConnection>,
}

impl Link {
    /// A TLS link on `sock` (made blocking) continuing `session`.
    pub fn tls(sock: TcpStream, session: ServerConnection) -> io::Result<Link> {
        sock.set_nonblocking(false)?;
        Ok(Link::Tls(Box::new(TlsLink {
            sock,
            session: Mutex::new(session),
        })))
    }

    /// Bounds how long a write may block (`repl-timeout` while an RDB is
    /// streamed); None: forever. TLS links keep blocking writes: a record
    /// cut off by a timeout could not be retried.
    pub fn set_write_timeout(&self, timeout: Option<std::time::Duration>) -> io::Result<()> {
        match self {
            Link::Plain(s) => s.set_write_timeout(timeout),
            Link::Tls(_) => Ok(()),
        }
    }

    /// Shuts the socket down, which ends a read or write blocked on it.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Link::Plain(s) => s.shutdown(how),
            Link::Tls(t) => t.sock.shutdown(how),
        }
    }
}

impl TlsLink {
    /// Sends every record the session has ready; the caller holds the lock.
    fn send_records(&self, session: &mut ServerConnection) -> io::Result<()> {
        while session.wants_write() {
            session.write_tls(&mut &self.sock)?;
        }
        Ok(())
    }

    fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut raw = vec![0u8; TLS_READ_CHUNK];
        loop {
            match self.session.lock().reader().read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            let n = (&self.sock).read(&mut raw)?;
            if n == 0 {
                return Ok(0);
            }
            let mut session = self.session.lock();
            let mut bytes = &raw[..n];
            while !bytes.is_empty() {
                session.read_tls(&mut bytes)?;
                session
                    .process_new_packets()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            }
            self.send_records(&mut session)?;
        }
    }

    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        let mut session = self.session.lock();
        let mut rest = buf;
        while !rest.is_empty() {
            let n = session.writer().write(rest)?;
            self.send_records(&mut session)?;
            rest = &rest[n..];
        }
        Ok(buf.len())
    }
}

impl Read for &Link {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Link::Plain(s) => (&*s).read(buf),
            Link::Tls(t) => t.read(buf),
        }
    }
}

impl Write for &Link {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Link::Plain(s) => (&*s).write(buf),
            Link::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
