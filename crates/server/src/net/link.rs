//! A connection to another server in blocking I/O: a replica's link after
//! SYNC or PSYNC (on the master, two threads), the replica's own link to
//! its master, or a MIGRATE connection. It is a plain socket, or the socket
//! with a TLS session: the one a client was accepted with, or one this
//! server opened as a client ([`Link::connect_tls`], for `tls-replication`
//! and `tls-cluster`).
//!
//! Two threads may use a link at once, one reading and one writing,
//! through `&Link`. A TLS session is one state machine for both directions,
//! so it sits behind a mutex: the reader waits for socket bytes without
//! holding it and locks only to decrypt them; the writer holds it while it
//! encrypts and sends, which also keeps records from the two threads (an
//! alert, a key update) from interleaving on the socket.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, Connection};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

/// Connects to `addr` within `timeout`, from `source` (`bind-source-addr`)
/// when one is set. As Redis's best-effort binding: when the socket
/// cannot be bound there, or connecting from there fails, it connects
/// again without binding.
pub fn connect_from(
    addr: &SocketAddr,
    source: Option<&str>,
    timeout: Duration,
) -> io::Result<TcpStream> {
    if let Some(source) = source.filter(|s| !s.is_empty()) {
        if let Ok(sock) = connect_bound(addr, source, timeout) {
            return Ok(sock);
        }
    }
    TcpStream::connect_timeout(addr, timeout)
}

/// Connects to `addr` from the first address of `source` (a name or an
/// address) the socket binds to.
fn connect_bound(addr: &SocketAddr, source: &str, timeout: Duration) -> io::Result<TcpStream> {
    let sock = Socket::new(
        Domain::for_address(*addr),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    sock.set_reuse_address(true)?;
    let bound = (source, 0)
        .to_socket_addrs()?
        .any(|from| sock.bind(&from.into()).is_ok());
    if !bound {
        return Err(io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            "bind-source-addr",
        ));
    }
    sock.connect_timeout(&(*addr).into(), timeout)?;
    Ok(sock.into())
}

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
    session: Mutex<Connection>,
}

impl Link {
    /// A TLS link on `sock` (made blocking) continuing `session`, a server
    /// or client one.
    pub fn tls(sock: TcpStream, session: impl Into<Connection>) -> io::Result<Link> {
        sock.set_nonblocking(false)?;
        Ok(Link::Tls(Box::new(TlsLink {
            sock,
            session: Mutex::new(session.into()),
        })))
    }

    /// A plain link on a connected socket.
    pub fn plain(sock: TcpStream) -> Link {
        Link::Plain(Socket::from(sock))
    }

    /// Opens TLS as a client on the connected `sock` and completes the
    /// handshake within the socket's timeouts. `host` names the server for
    /// SNI; a name rustls cannot carry (not a DNS name or an address) is
    /// sent as `localhost`, which is harmless since outgoing links check the
    /// peer's chain and not its name (`security/tls.rs`, as Redis).
    pub fn connect_tls(sock: TcpStream, config: Arc<ClientConfig>, host: &str) -> io::Result<Link> {
        let name = ServerName::try_from(host.to_string())
            .unwrap_or_else(|_| ServerName::try_from("localhost").expect("valid name"));
        let mut session = ClientConnection::new(config, name).map_err(io::Error::other)?;
        while session.is_handshaking() {
            session.complete_io(&mut &sock)?;
        }
        Link::tls(sock, session)
    }

    /// The socket underneath (addresses, timeouts, descriptor).
    pub fn socket(&self) -> SockRef<'_> {
        match self {
            Link::Plain(s) => SockRef::from(s),
            Link::Tls(t) => SockRef::from(&t.sock),
        }
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
        self.socket().shutdown(how)
    }
}

impl TlsLink {
    /// Sends every record the session has ready; the caller holds the lock.
    fn send_records(&self, session: &mut Connection) -> io::Result<()> {
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

impl Read for Link {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A link owned by more than one holder (a reader and a writer, and a
/// handle to shut it down from another thread), read and written as a
/// stream.
#[derive(Clone)]
pub struct SharedLink(pub Arc<Link>);

impl Read for SharedLink {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self.0).read(buf)
    }
}

impl Write for SharedLink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.0).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
