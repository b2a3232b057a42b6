//! The acceptor thread: listens on every `bind` address (for `port` and
//! `tls-port`) and on `unixsocket`, enforces `maxclients`, and hands each
//! new connection to a worker in turn. A connection accepted on the TLS
//! port is handed over with its handshake not yet begun: it runs on the
//! worker, which never waits for it (`net/tls.rs`).
//!
//! CONFIG SET `port`, `tls-port` and `bind` rebind at run time as Redis
//! 7.0 does: the
//! acceptor closes its TCP listeners and binds the new ones from the
//! configuration ([`rebind`]); when that fails CONFIG SET puts the old
//! values back and rebinds again, so the server keeps listening where it
//! did. The acceptor owns the sockets, so a rebind is a request it
//! answers between two polls.

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;

use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token, Waker};
use socket2::{Domain, Protocol, SockRef, Socket, TcpKeepalive, Type};

use crate::net::conn::Stream;
use crate::net::tls::TlsStream;
use crate::net::worker::Msg;
use crate::security::tls::AuthClients;
use crate::server::Server;

const WAKER: Token = Token(usize::MAX);

/// What changed, for a rebind: the reply tells which error Redis gives.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Rebind {
    /// `port`: the plaintext listeners only.
    Port,
    /// `tls-port`: the TLS listeners only.
    TlsPort,
    /// `bind`: the plaintext and TLS listeners.
    Bind,
    /// SHUTDOWN: every listener closed, none bound again.
    Close,
}

/// A rebind request and where its outcome goes.
type Request = (Rebind, Sender<Result<(), String>>);

/// The acceptor's mailbox for rebinds, and its wake-up handle.
struct Mailbox {
    requests: Mutex<Option<Receiver<Request>>>,
    sender: Sender<Request>,
    waker: Arc<Waker>,
}

static MAILBOX: OnceLock<Mailbox> = OnceLock::new();

/// Rebinds the listeners from the configuration now in force (after
/// CONFIG SET `port` or `bind`). Err is Redis's reason: "Unable to listen
/// on this port. Check server logs." or "Failed to bind to specified
/// addresses.". The old listeners are closed either way, as in Redis; the
/// caller restores the old values and rebinds again.
pub fn rebind(what: Rebind) -> Result<(), String> {
    let Some(mailbox) = MAILBOX.get() else {
        return Err("the acceptor is not running".into());
    };
    let (tx, rx) = crossbeam_channel::bounded(1);
    mailbox
        .sender
        .send((what, tx))
        .map_err(|_| "the acceptor stopped".to_string())?;
    let _ = mailbox.waker.wake();
    rx.recv_timeout(Duration::from_secs(10))
        .map_err(|_| "the acceptor did not answer".to_string())?
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
/// rebinds).
pub fn create_poll() -> io::Result<(Poll, Arc<Waker>)> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let (sender, receiver) = crossbeam_channel::unbounded();
    let _ = MAILBOX.set(Mailbox {
        requests: Mutex::new(Some(receiver)),
        sender,
        waker: waker.clone(),
    });
    Ok((poll, waker))
}

/// Registers every listener with the acceptor's poller: TCP ones first,
/// then TLS ones, then the unix socket. Returns the first TLS token and
/// the unix socket's.
fn register_all(poll: &Poll, listeners: &mut Listeners) -> (usize, Token) {
    for (i, l) in listeners.tcp.iter_mut().enumerate() {
        if let Err(e) = poll.registry().register(l, Token(i), Interest::READABLE) {
            tracing::error!("cannot poll listener: {e}");
        }
    }
    let first_tls = listeners.tcp.len();
    for (i, l) in listeners.tls.iter_mut().enumerate() {
        if let Err(e) = poll
            .registry()
            .register(l, Token(first_tls + i), Interest::READABLE)
        {
            tracing::error!("cannot poll TLS listener: {e}");
        }
    }
    let unix_token = Token(first_tls + listeners.tls.len());
    if let Some(l) = listeners.unix.as_mut() {
        let _ = poll.registry().register(l, unix_token, Interest::READABLE);
    }
    (first_tls, unix_token)
}

/// Takes every listener off the poller (before the token layout changes).
fn deregister_all(poll: &Poll, listeners: &mut Listeners) {
    for l in listeners.tcp.iter_mut().chain(listeners.tls.iter_mut()) {
        let _ = poll.registry().deregister(l);
    }
    if let Some(l) = listeners.unix.as_mut() {
        let _ = poll.registry().deregister(l);
    }
}

/// Serves one rebind on the acceptor thread: closes the TCP (and for a
/// `bind` change, TLS) listeners and binds them again from the
/// configuration (every listener, and none again, for `Close`). Port 0
/// leaves no plaintext listener, as in Redis.
fn serve_rebind(server: &Server, listeners: &mut Listeners, what: Rebind) -> Result<(), String> {
    if what == Rebind::Close {
        listeners.tcp.clear();
        listeners.tls.clear();
        listeners.unix = None;
        return Ok(());
    }
    let plain = what != Rebind::TlsPort;
    let tls = what != Rebind::Port;
    if plain {
        listeners.tcp.clear();
    }
    if tls {
        listeners.tls.clear();
    }
    let failed = |e: io::Error| {
        tracing::warn!("{e}");
        if what == Rebind::Bind {
            tracing::warn!("Failed to bind");
            "Failed to bind to specified addresses.".to_string()
        } else {
            "Unable to listen on this port. Check server logs.".to_string()
        }
    };
    let port = server.config.port();
    if plain && port != 0 {
        listeners.tcp = bind_port(server, port).map_err(failed)?;
    }
    if tls {
        let tls_port = server
            .config
            .get_one("tls-port")
            .and_then(|p| p.parse::<u16>().ok())
            .unwrap_or(0);
        if tls_port != 0 {
            listeners.tls = bind_port(server, tls_port).map_err(|e| {
                if plain {
                    listeners.tcp.clear();
                }
                failed(e)
            })?;
        }
    }
    if let Some(l) = listeners.tcp.first().or(listeners.tls.first()) {
        let port = l.local_addr().map(|a| a.port()).unwrap_or(0);
        server.bound_port.store(u64::from(port), Ordering::Relaxed);
    }
    Ok(())
}

/// Closes every listener before a shutdown goes on (Redis's
/// `closeListeningSockets`): once the SHUTDOWN client sees its connection
/// close, new connections are refused, never accepted and dropped.
pub fn close_listeners() {
    if let Err(e) = rebind(Rebind::Close) {
        tracing::debug!("closing the listeners: {e}");
    }
}

/// Accepts connections until shutdown.
pub fn run(server: Arc<Server>, mut listeners: Listeners, mut poll: Poll) {
    let (mut first_tls, mut unix_token) = register_all(&poll, &mut listeners);
    let requests = MAILBOX.get().and_then(|m| m.requests.lock().take());
    let mut events = Events::with_capacity(64);
    let mut next_worker = 0usize;
    while !server.shutting_down.load(Ordering::Acquire) {
        if poll
            .poll(&mut events, Some(Duration::from_millis(500)))
            .is_err()
        {
            continue;
        }
        for (what, reply) in requests.iter().flat_map(|r| r.try_iter()) {
            deregister_all(&poll, &mut listeners);
            let _ = reply.send(serve_rebind(&server, &mut listeners, what));
            (first_tls, unix_token) = register_all(&poll, &mut listeners);
        }
        for ev in events.iter() {
            let t = ev.token();
            if t == WAKER || (t != unix_token && t.0 >= first_tls + listeners.tls.len()) {
                continue;
            }
            loop {
                let accepted = if t == unix_token {
                    match listeners.unix.as_ref().map(|l| l.accept()) {
                        Some(Ok((s, _))) => {
                            let path = server.config.unixsocket().unwrap_or_default();
                            Ok((Stream::Unix(s), format!("{path}:0"), path, true))
                        }
                        Some(Err(e)) => Err(e),
                        None => break,
                    }
                } else if t.0 >= first_tls {
                    match listeners.tls[t.0 - first_tls].accept() {
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
                    match listeners.tcp[t.0].accept() {
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
