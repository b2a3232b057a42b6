//! Background housekeeping, Redis's `serverCron` minus what runs per
//! connection: active expiry, `save` points and scheduled BGSAVEs, eviction,
//! memory statistics and the sampled instantaneous rates.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::memory::alloc;
use crate::server::Server;

/// Runs until shutdown, `hz` times a second.
pub fn run(server: Arc<Server>) {
    while !server.shutting_down.load(Ordering::Acquire) {
        let hz = server.config.hot.hz.load(Ordering::Relaxed).clamp(1, 500);
        let period = Duration::from_micros(1_000_000 / hz);
        let start = Instant::now();
        if server.cron_paused.load(Ordering::Relaxed) {
            std::thread::sleep(period);
            continue;
        }
        if server
            .config
            .hot
            .active_expire_enabled
            .load(Ordering::Relaxed)
        {
            // Redis spends at most 25% of each cron period on active expiry.
            let lazy = server.config.lazyfree_lazy_expire();
            // Expired keys clients wait on: their waiters learn (a group
            // reader of an expired stream is released, as in Redis).
            let mut waited = Vec::new();
            server
                .keyspace
                .active_expire_cycle(period / 4, &mut |db, key| {
                    crate::persist::aof::log_deletion(&server, db, key, lazy);
                    crate::exec::notify::key_gone(&server, "expired", db, key);
                    if server.blocking.has_waiters(&server.keyspace, db, key) {
                        waited.push((db, vireo_store::Key::from(key)));
                    }
                });
            crate::exec::tracking::broadcast(&server, None);
            if !waited.is_empty() {
                crate::exec::blocking::serve_deferred(&server, waited);
            }
            let ms = start.elapsed().as_millis() as u64;
            crate::ops::metrics::sample_latency(&server, "expire-cycle", ms);
        }
        crate::repl::replica::expire_local_keys(&server);
        crate::repl::free_idle_backlog(&server);
        crate::ops::shutdown::cron(&server);
        crate::persist::rdb::cron(&server);
        crate::net::outbound::close_idle();
        // Catches up on client memory the workers have not acted on yet
        // (before keys, as Redis evicts clients first).
        crate::memory::client_evict::evict_clients(&server);
        // Carries on an eviction a command's time budget cut short (only
        // then: otherwise keys go when a command finds memory over the
        // limit, as in Redis).
        if server.evictor.carrying_on() {
            crate::memory::evict::perform_evictions(&server);
        }
        let used = alloc::used_memory() as u64;
        server.used_memory_peak.fetch_max(used, Ordering::Relaxed);
        server.metrics.rates.sample_if_due(&server.worker_stats);
        if let Some(rest) = period.checked_sub(start.elapsed()) {
            std::thread::sleep(rest);
        }
    }
}
