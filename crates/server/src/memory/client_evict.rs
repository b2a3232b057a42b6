//! Client eviction: `maxmemory-clients` (Redis 7.0). When all clients
//! together hold more memory than the limit, the clients holding the most
//! are disconnected until the total is back under it.
//!
//! Every worker publishes what each of its clients holds (query buffer,
//! output buffer, queued transaction, WATCH list; see
//! [`crate::net::conn::Conn::memory_usage`]) to the client registry, which keeps
//! the total. Whoever sees the total at or over the limit (a worker after
//! serving a client, CONFIG SET, the cron thread) runs an eviction pass.
//!
//! Redis keeps clients in buckets by powers of two of their memory and
//! empties the biggest bucket first; a pass here sorts the candidates by
//! memory, which evicts in the same bucket order (and, within a bucket,
//! biggest first). As in Redis, clients with CLIENT NO-EVICT are never
//! evicted, though their memory counts towards the total. (Redis also
//! spares replication links; Vireo has none.)

use std::cmp::Reverse;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use vireo_store::clock::now_ms;

use crate::net::client::cflags;
use crate::net::worker::Msg;
use crate::server::Server;

/// After a pass that could not get under the limit (every remaining
/// client is NO-EVICT), passes are skipped for this long unless something
/// that could change the outcome happens ([`ClientEviction::changed`]).
const FUTILE_PAUSE_MS: u64 = 100;

/// Client eviction state and statistics.
#[derive(Default)]
pub struct ClientEviction {
    /// Clients disconnected so far (INFO `evicted_clients`).
    evicted: AtomicU64,
    /// One pass at a time, so that two threads seeing the same excess do
    /// not both evict for it.
    pass: Mutex<()>,
    /// Bumped by [`ClientEviction::changed`].
    generation: AtomicU64,
    /// The generation and time until which the last futile pass holds.
    futile_generation: AtomicU64,
    futile_until_ms: AtomicU64,
}

impl ClientEviction {
    /// Clients evicted since start or CONFIG RESETSTAT.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Zeroes `evicted_clients` (CONFIG RESETSTAT).
    pub fn reset_stats(&self) {
        self.evicted.store(0, Ordering::Relaxed);
    }

    /// Notes a change that may make eviction possible or necessary again
    /// (CONFIG SET of the limits, CLIENT NO-EVICT), so the next check runs
    /// a full pass even right after a futile one.
    pub fn changed(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
    }
}

/// Evicts clients while all clients together hold at least the
/// `maxmemory-clients` limit, biggest first; returns how many were
/// evicted. Cheap when eviction is off or the total is under the limit,
/// so workers call it whenever a client's memory was accounted.
///
/// Evicted clients leave the client registry at once (CLIENT LIST no
/// longer shows them, their `maxclients` slot is free) and are flagged
/// killed, so they run nothing more; their own worker closes the socket
/// without sending pending output.
pub fn evict_clients(server: &Server) -> usize {
    let limit = server.config.client_eviction_limit();
    if limit == 0 || server.clients.memory_total() < limit {
        return 0;
    }
    let ev = &server.client_eviction;
    let generation = ev.generation.load(Ordering::Relaxed);
    if ev.futile_generation.load(Ordering::Relaxed) == generation
        && now_ms() < ev.futile_until_ms.load(Ordering::Relaxed)
    {
        return 0;
    }
    let _pass = ev.pass.lock();
    let mut candidates: Vec<_> = server
        .clients
        .snapshot()
        .into_iter()
        .filter(|c| {
            c.flags.load(Ordering::Relaxed) & cflags::NO_EVICT == 0
                && !c.killed.load(Ordering::Relaxed)
        })
        .map(|c| (c.tot_mem.load(Ordering::Relaxed), c))
        .collect();
    candidates.sort_by_key(|(mem, c)| (Reverse(*mem), c.id));
    let mut evicted = 0;
    for (_, c) in candidates {
        if server.clients.memory_total() < limit {
            break;
        }
        let line = c.info_line();
        if c.killed.swap(true, Ordering::Relaxed) {
            continue;
        }
        tracing::info!("Evicting client: {line}");
        server.clients.unaccount(&c);
        server.clients.remove(c.id);
        ev.evicted.fetch_add(1, Ordering::Relaxed);
        server.notify(c.worker, Msg::Kill(c.id));
        evicted += 1;
    }
    if server.clients.memory_total() >= limit {
        if ev.futile_generation.swap(generation, Ordering::Relaxed) != generation
            || now_ms() >= ev.futile_until_ms.load(Ordering::Relaxed)
        {
            tracing::warn!("Over client maxmemory after evicting all evictable clients");
        }
        ev.futile_until_ms
            .store(now_ms() + FUTILE_PAUSE_MS, Ordering::Relaxed);
    }
    evicted
}
