//! Connections this server opens to other servers for MIGRATE, cached per
//! target as Redis caches them (`migrateGetSocket`): a MIGRATE reuses the
//! connection of the previous one to the same host and port, and
//! remembers which database it selected there, so a batch of migrations
//! costs one connect. Cron closes the ones idle for ten seconds
//! (`MIGRATE_SOCKET_CACHE_TTL`); at most 64 are kept, the oldest dropped
//! first (`MIGRATE_SOCKET_CACHE_ITEMS`). With `tls-cluster` a new
//! connection speaks TLS, as Redis 7.0's `migrateGetSocket` opens its
//! connections with the cluster bus's transport.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustls::ClientConfig;

use crate::net::link::Link;

/// Idle time after which a cached connection is closed.
const TTL: Duration = Duration::from_secs(10);
/// Most connections kept.
const MAX_CACHED: usize = 64;

/// A connection to another server.
pub struct Outbound {
    reader: BufReader<Link>,
    /// The database the last successful MIGRATE selected (None: unknown,
    /// SELECT again).
    pub selected_db: Option<i64>,
    last_use: Instant,
}

impl Outbound {
    /// Writes all of `bytes` within the socket's write timeout.
    pub fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.reader.get_mut().write_all(bytes)
    }

    /// Reads one reply line (a status, error or integer reply), without its
    /// CRLF, within the read timeout. Replies longer than `max` are an error.
    pub fn read_line(&mut self, max: usize) -> io::Result<String> {
        let mut line = Vec::new();
        let n = Read::take(&mut self.reader, max as u64 + 2).read_until(b'\n', &mut line)?;
        if n == 0 || !line.ends_with(b"\n") {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short reply"));
        }
        while line.last().is_some_and(|&c| c == b'\n' || c == b'\r') {
            line.pop();
        }
        Ok(String::from_utf8_lossy(&line).into_owned())
    }

    /// Sets the read and write timeouts of the next exchange.
    pub fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        let s = self.reader.get_ref().socket();
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))
    }
}

/// The cache: `host:port` → connection.
fn cache() -> &'static Mutex<HashMap<String, Outbound>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Outbound>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Takes the cached connection to `host:port`, or connects within
/// `timeout` (and completes a TLS handshake with `tls`, when given, within
/// it too). The caller gives it back with [`put_back`] after a successful
/// exchange (a failed one just drops it, closing it).
pub fn take(
    host: &str,
    port: &str,
    timeout: Duration,
    tls: Option<Arc<ClientConfig>>,
) -> io::Result<Outbound> {
    let name = format!("{host}:{port}");
    if let Some(mut c) = cache().lock().remove(&name) {
        c.set_timeout(timeout)?;
        return Ok(c);
    }
    let addr = format!("{host}:{port}")
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
    let stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let link = match tls {
        Some(config) => Link::connect_tls(stream, config, host)?,
        None => Link::plain(stream),
    };
    Ok(Outbound {
        reader: BufReader::new(link),
        selected_db: None,
        last_use: Instant::now(),
    })
}

/// Returns a connection to the cache for the next MIGRATE to the same
/// target.
pub fn put_back(host: &str, port: &str, mut conn: Outbound) {
    conn.last_use = Instant::now();
    let mut cache = cache().lock();
    if cache.len() >= MAX_CACHED {
        let oldest = cache
            .iter()
            .min_by_key(|(_, c)| c.last_use)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            cache.remove(&k);
        }
    }
    cache.insert(format!("{host}:{port}"), conn);
}

/// Closes cached connections idle for longer than the TTL (cron).
pub fn close_idle() {
    let mut cache = cache().lock();
    if !cache.is_empty() {
        cache.retain(|_, c| c.last_use.elapsed() < TTL);
    }
}

/// Connections cached now (INFO `migrate_cached_sockets`).
pub fn cached() -> usize {
    cache().lock().len()
}
