//! The acceptor thread: listens on every `bind` address (for `port` and
//! `tls-port`) and on `unixsocket`, enforces `maxclients`, and hands each
//! new connection to a worker in turn. A connection accepted on the TLS
//! port is handed over with its handshake not yet begun: it runs on the
//! worker, which never waits for it (`net/tls.rs`).
//!
//! CONFIG SET port / tls-port binds the new listeners on the caller's
//! thread (so its reply can say whether that worked) and hands them over
//! through [`Control`]; the acceptor adopts them and closes the old ones
//! when its waker fires, and the caller waits for that, so the old port is
//! free when CONFIG SET replies (the suite moves one port from TLS to
//! plaintext and back). Connections accepted before stay open, as in
//! Redis.

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use parking_lot::Mutex;
use socket2::{Domain, Protocol, SockRef, Socket, TcpKeepalive, Type};

use crate::net::conn::Stream;
use crate::net::tls::TlsStream;
use crate::net::worker::Msg;
use crate::security::tls::AuthClients;
use crate::server::Server;

const WAKER: Token = Token(usize::MAX);
const UNIX: Token = Token(usize::MAX - 1);
/// Tokens of the TLS listeners start here; the plaintext ones from 0.
const FIRST_TLS: usize = 1 << 20;

/// Which of the TCP ports a listener serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortKind {
    /// `port`: plaintext.
    Plain,
    /// `tls-port`.
    Tls,
}

/// Listener changes requested while the server runs, for the acceptor.
#[derive(Default)]
pub struct Control {
    /// Listeners bound for a new `port` (empty: none), replacing the
    /// acceptor's plaintext ones.
    new_plain: Mutex<Option<Vec<TcpListener>>>,
    /// The same for `tls-port`.
    new_tls: Mutex<Option<Vec<TcpListener>>>,
    /// Wakes the acceptor to adopt them.
    waker: OnceLock<Arc<Waker>>,
}

impl Control {
    fn slot(&self, kind: PortKind) -> &Mutex<Option<Vec<TcpListener>>> {
        match kind {
            PortKind::Plain => &self.new_plain,
            PortKind::Tls => &self.new_tls,
        }
    }
}

/// How long [`change_port`] waits for the acceptor to close the old
/// listeners (it wakes at once; this bounds a stuck acceptor).
const ADOPT_WAIT: Duration = Duration::from_secs(2);

/// Makes `port` the `kind` port: binds it on every `bind` address (0: no
/// listener), has the acceptor swap its listeners of that kind for these,
/// and waits until it did (Redis's `changeListenPort`). On Err (already
/// logged) the old listeners stay.
pub fn change_port(server: &Server, kind: PortKind, port: u16) -> io::Result<()> {
    let listeners = match port {
        0 => Vec::new(),
        p => bind_port(server, p).inspect_err(|e| tracing::warn!("{e}"))?,
    };
    let slot = server.listeners.slot(kind);
    *slot.lock() = Some(listeners);
    let Some(waker) = server.listeners.waker.get() else {
        return Ok(());
    };
    waker.wake()?;
    let deadline = std::time::Instant::now() + ADOPT_WAIT;
    while slot.lock().is_some() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Listening sockets, bound before the server reports it is ready.
pub struct Listeners {
    tcp: Vec<TcpListener>,
    /// The `tls-port` listeners: connections accepted there speak TLS.
    tls: Vec<TcpListener>,
    unix: Option<UnixListener>,
}

impl Listeners {
    /// Binds every configured address, for `port` and for `tls-port`. An
    /// address written with a leading `-` is optional (Redis's syntax):
    /// failing to bind it is not fatal. Port 0 means no plaintext TCP
    /// listener when there is a unix socket or a TLS port, as in Redis;
    /// alone, it binds a free port (tests).
    pub fn bind(server: &Server) -> io::Result<Listeners> {
        let port = server.config.port();
        let tls_port = server
            .config
            .get_one("tls-port")
            .and_then(|p| p.parse::<u16>().ok())
            .unwrap_or(0);
        let mut tcp = Vec::new();
        if port != 0 || (server.config.unixsocket().is_none() && tls_port == 0) {
            tcp = bind_port(server, port)?;
        }
        let tls = if tls_port != 0 {
            bind_port(server, tls_port)?
        } else {
            Vec::new()
        };
        // INFO's tcp_port and the banner show the TLS port when there is no
        // plaintext one, as Redis's `port ? port : tls_port`.
        if let Some(l) = tcp.first().or(tls.first()) {
            server
                .bound_port
                .store(l.local_addr()?.port() as u64, Ordering::Relaxed);
        }
        let unix = match server.config.unixsocket() {
            Some(path) => {
                let _ = std::fs::remove_file(&path);
                let l = UnixListener::bind(&path)?;
                let perm = server.config.unixsocketperm();
                if perm != 0 {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(perm))?;
                }
                Some(l)
            }
            None => None,
        };
        Ok(Listeners { tcp, tls, unix })
    }
}

/// One listener per `bind` address on `port` (0: a free port, the same
/// for every address).
fn bind_port(server: &Server, port: u16) -> io::Result<Vec<TcpListener>> {
    let backlog = server.config.tcp_backlog() as i32;
    let mut tcp: Vec<TcpListener> = Vec::new();
    for addr in server.config.bind() {
        let (optional, host) = match addr.strip_prefix('-') {
            Some(h) => (true, h),
            None => (false, addr.as_str()),
        };
        let ip: IpAddr = match host {
            "*" => "0.0.0.0".parse().expect("valid"),
            "::*" => "::".parse().expect("valid"),
            h => match h.parse() {
                Ok(ip) => ip,
                Err(_) if optional => continue,
                Err(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("Invalid bind address '{h}'"),
                    ))
                }
            },
        };
        // With port 0 (tests), every address shares the port the first got.
        let use_port = match tcp.first() {
            Some(l) if port == 0 => l.local_addr()?.port(),
            _ => port,
        };
        match bind_tcp(SocketAddr::new(ip, use_port), backlog) {
            Ok(l) => tcp.push(l),
            Err(_) if optional => {}
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("Could not create server TCP listening socket {host}:{use_port}: {e}"),
                ))
            }
        }
    }
    Ok(tcp)
}

fn bind_tcp(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    if addr.is_ipv6() {
        sock.set_only_v6(true)?;
    }
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    sock.listen(backlog)?;
    Ok(TcpListener::from_std(sock.into()))
}

/// Creates the acceptor's poller and its wake-up handle (for shutdown and
/// [`change_port`]).
pub fn create_poll(server: &Server) -> io::Result<(Poll, Arc<Waker>)> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let _ = server.listeners.waker.set(waker.clone());
    Ok((poll, waker))
}

/// Starts polling `listeners` for connections, the first with token
/// `first`.
fn register_all(registry: &Registry, listeners: &mut [TcpListener], first: usize) {
    for (i, l) in listeners.iter_mut().enumerate() {
        if let Err(e) = registry.register(l, Token(first + i), Interest::READABLE) {
            tracing::error!("cannot poll listener: {e}");
        }
    }
}

/// Replaces listeners with those [`change_port`] bound, if any (dropping
/// the old ones closes them), and keeps INFO's `tcp_port` right.
fn adopt_new(server: &Server, registry: &Registry, listeners: &mut Listeners) {
    for (kind, own, first) in [
        (PortKind::Plain, &mut listeners.tcp, 0),
        (PortKind::Tls, &mut listeners.tls, FIRST_TLS),
    ] {
        // Held while swapping: change_port's wait ends once the old
        // listeners are closed.
        let mut slot = server.listeners.slot(kind).lock();
        let Some(mut new) = slot.take() else {
            continue;
        };
        for l in own.iter_mut() {
            let _ = registry.deregister(l);
        }
        register_all(registry, &mut new, first);
        *own = new;
    }
    let bound = listeners.tcp.first().or(listeners.tls.first());
    if let Some(addr) = bound.and_then(|l| l.local_addr().ok()) {
        server
            .bound_port
            .store(u64::from(addr.port()), Ordering::Relaxed);
    }
}

/// Accepts connections until shutdown.
pub fn run(server: Arc<Server>, mut listeners: Listeners, mut poll: Poll) {
    register_all(poll.registry(), &mut listeners.tcp, 0);
    register_all(poll.registry(), &mut listeners.tls, FIRST_TLS);
    if let Some(l) = listeners.unix.as_mut() {
        let _ = poll.registry().register(l, UNIX, Interest::READABLE);
    }
    let mut events = Events::with_capacity(64);
    let mut next_worker = 0usize;
    while !server.shutting_down.load(Ordering::Acquire) {
        if poll
            .poll(&mut events, Some(Duration::from_millis(500)))
            .is_err()
        {
            continue;
        }
        for ev in events.iter() {
            let t = ev.token();
            if t == WAKER {
                adopt_new(&server, poll.registry(), &mut listeners);
                continue;
            }
            loop {
                let accepted = if t == UNIX {
                    match listeners.unix.as_ref().map(|l| l.accept()) {
                        Some(Ok((s, _))) => {
                            let path = server.config.unixsocket().unwrap_or_default();
                            Ok((Stream::Unix(s), format!("{path}:0"), path, true))
                        }
                        Some(Err(e)) => Err(e),
                        None => break,
                    }
                } else if t.0 >= FIRST_TLS {
                    // A listener closed by a port change may still have an
                    // event in this batch.
                    let Some(l) = listeners.tls.get(t.0 - FIRST_TLS) else {
                        break;
                    };
                    match l.accept() {
                        Ok((s, peer)) => {
                            let local = s.local_addr().map(|a| a.to_string()).unwrap_or_default();
                            configure_tcp(&server, &s);
                            match start_tls(&server, s) {
                                Some(tls) => Ok((Stream::Tls(tls), peer.to_string(), local, false)),
                                None => continue,
                            }
                        }
                        Err(e) => Err(e),
                    }
                } else {
                    let Some(l) = listeners.tcp.get(t.0) else {
                        break;
                    };
                    match l.accept() {
                        Ok((s, peer)) => {
                            let local = s.local_addr().map(|a| a.to_string()).unwrap_or_default();
                            configure_tcp(&server, &s);
                            Ok((Stream::Tcp(s), peer.to_string(), local, false))
                        }
                        Err(e) => Err(e),
                    }
                };
                match accepted {
                    Ok((stream, addr, laddr, unix)) => {
                        hand_out(&server, stream, addr, laddr, unix, &mut next_worker);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        break;
                    }
                }
            }
        }
    }
}

/// Wraps a socket accepted on the TLS port in the server side of a
/// handshake, with the configuration in force and `tls-auth-clients` as it
/// is now. None (the socket is dropped, the reason logged) when TLS cannot
/// accept it.
fn start_tls(server: &Server, sock: mio::net::TcpStream) -> Option<Box<TlsStream>> {
    let auth = AuthClients::from_config(&server.config);
    let config = server
        .tls
        .context()
        .ok_or("TLS is not configured")
        .and_then(|ctx| ctx.for_accept(auth));
    let started = config
        .map_err(|e| e.to_string())
        .and_then(|c| TlsStream::new(sock, c).map_err(|e| e.to_string()));
    match started {
        Ok(tls) => Some(Box::new(tls)),
        Err(e) => {
            tracing::warn!("Error accepting a client connection: {e}");
            None
        }
    }
}

fn configure_tcp(server: &Server, s: &mio::net::TcpStream) {
    let _ = s.set_nodelay(true);
    let secs = server.config.hot.tcp_keepalive.load(Ordering::Relaxed);
    if secs > 0 {
        let ka = TcpKeepalive::new().with_time(Duration::from_secs(secs));
        let _ = SockRef::from(s).set_tcp_keepalive(&ka);
    }
}

fn hand_out(
    server: &Server,
    mut stream: Stream,
    addr: String,
    laddr: String,
    unix: bool,
    next: &mut usize,
) {
    if crate::security::protected_mode_refuses(server, &addr, unix) {
        let _ = stream.write(crate::security::PROTECTED_MODE_DENIED.as_bytes());
        server
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        return;
    }
    server
        .stats
        .total_connections_received
        .fetch_add(1, Ordering::Relaxed);
    let maxclients = server.config.hot.maxclients.load(Ordering::Relaxed) as usize;
    // The slot is claimed here, not when a worker adopts the connection, so
    // a burst of connections cannot overshoot the limit.
    if !server.clients.try_reserve(maxclients) {
        // Best effort, as Redis: the socket is fresh, so this fits its buffer.
        let _ = stream.write(b"-ERR max number of clients reached\r\n");
        server
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        return;
    }
    let fd = stream.raw_fd();
    let workers = server
        .workers
        .get()
        .expect("workers started before accepting");
    let w = *next % workers.len();
    *next = next.wrapping_add(1);
    workers[w].send(Msg::NewConn {
        stream,
        addr,
        laddr,
        fd,
        unix,
    });
}
