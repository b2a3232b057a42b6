//! The acceptor thread: listens on every `bind` address (and `unixsocket`),
//! enforces `maxclients`, and hands each new connection to a worker in
//! turn.

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token, Waker};
use socket2::{Domain, Protocol, SockRef, Socket, TcpKeepalive, Type};

use crate::net::conn::Stream;
use crate::net::worker::Msg;
use crate::server::Server;

const WAKER: Token = Token(usize::MAX);

/// Listening sockets, bound before the server reports it is ready.
pub struct Listeners {
    tcp: Vec<TcpListener>,
    unix: Option<UnixListener>,
}

impl Listeners {
    /// Binds every configured address. An address written with a leading
    /// `-` is optional (Redis's syntax): failing to bind it is not fatal.
    pub fn bind(server: &Server) -> io::Result<Listeners> {
        let port = server.config.port();
        let backlog = server.config.tcp_backlog() as i32;
        let mut tcp = Vec::new();
        if port != 0 || server.config.unixsocket().is_none() {
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
                // With port 0 (tests), every address must share the port the first got.
                let use_port = if port == 0 && !tcp.is_empty() {
                    server.bound_port.load(Ordering::Relaxed) as u16
                } else {
                    port
                };
                match bind_tcp(SocketAddr::new(ip, use_port), backlog) {
                    Ok(l) => {
                        if tcp.is_empty() {
                            let p = l.local_addr()?.port();
                            server.bound_port.store(p as u64, Ordering::Relaxed);
                        }
                        tcp.push(l);
                    }
                    Err(_) if optional => {}
                    Err(e) => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!(
                            "Could not create server TCP listening socket {host}:{use_port}: {e}"
                        ),
                        ))
                    }
                }
            }
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
        Ok(Listeners { tcp, unix })
    }
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

/// Creates the acceptor's poller and its wake-up handle (for shutdown).
pub fn create_poll() -> io::Result<(Poll, Arc<Waker>)> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    Ok((poll, waker))
}

/// Accepts connections until shutdown.
pub fn run(server: Arc<Server>, mut listeners: Listeners, mut poll: Poll) {
    for (i, l) in listeners.tcp.iter_mut().enumerate() {
        if let Err(e) = poll.registry().register(l, Token(i), Interest::READABLE) {
            tracing::error!("cannot poll listener: {e}");
        }
    }
    let unix_token = Token(listeners.tcp.len());
    if let Some(l) = listeners.unix.as_mut() {
        let _ = poll.registry().register(l, unix_token, Interest::READABLE);
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
    let fd = match &stream {
        Stream::Tcp(s) => s.as_raw_fd(),
        Stream::Unix(s) => s.as_raw_fd(),
    };
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
