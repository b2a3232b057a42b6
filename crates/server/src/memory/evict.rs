//! `maxmemory` enforcement (Redis's `performEvictions`): before a command
//! runs, while used memory (less what Redis leaves out, [`not_counted`])
//! is over the limit, keys are evicted by `maxmemory-policy` until as many
//! bytes as it was over are freed, or until the time budget
//! `maxmemory-eviction-tenacity` allows is spent (cron then carries on
//! until an attempt ends, as Redis's eviction time proc does). When
//! nothing can be evicted, commands that may grow memory are refused (see
//! `dispatch`).
//!
//! As in Redis, what a deletion freed is measured around the deletion
//! alone: the bytes its propagation (AOF, replicas), keyspace
//! notifications and client tracking invalidations take are not set
//! against it, or a large enough set of those would make each eviction
//! cost more than it frees and drain the keyspace. Those buffers are
//! freed when their bytes go out; the next check sees what is left. The
//! measure is the evicting thread's own allocations and frees
//! ([`thread_net_bytes`]), so other threads working meanwhile do not
//! disturb it; every 16 keys the total is read again, and eviction stops
//! early when it is already under the limit (other workers evict at the
//! same time, and the lazy free thread frees behind).
//!
//! Eviction runs with no shard lock held and takes shards one at a time
//! with `try_lock` (see `vireo_store::evict`), so it respects the
//! ascending-order locking protocol and never touches the keys of a
//! command or transaction that is running.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};
use vireo_store::clock::now_us;
use vireo_store::{EvictionPool, Policy};

use crate::memory::alloc::{thread_net_bytes, used_memory};
use crate::server::Server;

/// What [`perform_evictions`] achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictResult {
    /// Memory is under the limit (or there is no limit).
    Ok,
    /// Still over the limit, but the time budget ran out while keys were
    /// still evictable: cron continues, commands are not refused.
    Running,
    /// Over the limit and nothing more can be evicted.
    Fail,
}

/// Number of candidate pools: more than the threads that evict at once.
const POOLS: usize = 8;

/// Eviction state shared by all threads.
#[derive(Default)]
pub struct Evictor {
    /// Candidate pools. A thread evicting takes the first free one from a
    /// start of its own, so workers over the limit at the same time evict
    /// side by side instead of queueing on one lock, each pool with its
    /// own shard cursor and candidates.
    pools: [Mutex<EvictionPool>; POOLS],
    /// When the current period over the limit began (µs since the epoch),
    /// 0 when under it.
    exceeded_since_us: AtomicU64,
    /// Total µs of earlier periods over the limit.
    exceeded_total_us: AtomicU64,
    /// The last attempt ran out of time with keys left to evict: cron
    /// carries on (Redis's `isEvictionProcRunning`).
    carrying_on: AtomicBool,
}

impl Evictor {
    /// `current_eviction_exceeded_time` in ms: how long memory has been
    /// over the limit without eviction bringing it back.
    pub fn current_exceeded_ms(&self) -> u64 {
        match self.exceeded_since_us.load(Ordering::Relaxed) {
            0 => 0,
            since => now_us().saturating_sub(since) / 1000,
        }
    }

    /// `total_eviction_exceeded_time` in ms, the current period included.
    pub fn total_exceeded_ms(&self) -> u64 {
        self.exceeded_total_us.load(Ordering::Relaxed) / 1000 + self.current_exceeded_ms()
    }

    /// Zeroes the exceeded-time total (CONFIG RESETSTAT).
    pub fn reset_stats(&self) {
        self.exceeded_total_us.store(0, Ordering::Relaxed);
    }

    /// True while cron should carry on an eviction a command's time budget
    /// cut short.
    pub fn carrying_on(&self) -> bool {
        self.carrying_on.load(Ordering::Relaxed)
    }

    fn record(&self, result: EvictResult) {
        let running = result == EvictResult::Running;
        if self.carrying_on.load(Ordering::Relaxed) != running {
            self.carrying_on.store(running, Ordering::Relaxed);
        }
        let since = self.exceeded_since_us.load(Ordering::Relaxed);
        // The clock is read only when a period starts or ends, not on every
        // command of a write load that keeps memory at the limit.
        let now = || now_us().max(1);
        match result {
            // Only the thread that ends the period adds it to the total.
            EvictResult::Ok
                if since != 0
                    && self
                        .exceeded_since_us
                        .compare_exchange(since, 0, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok() =>
            {
                self.exceeded_total_us
                    .fetch_add(now().saturating_sub(since), Ordering::Relaxed);
            }
            EvictResult::Running | EvictResult::Fail if since == 0 => {
                let _ = self.exceeded_since_us.compare_exchange(
                    0,
                    now(),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            _ => {}
        }
    }

    /// Forgets the pooled candidates (the policy changed).
    pub fn clear_pool(&self) {
        for pool in &self.pools {
            pool.lock().clear();
        }
    }

    /// A pool for this thread: its own when free, else the next free one,
    /// else (all taken) its own once released.
    fn lock_pool(&self) -> MutexGuard<'_, EvictionPool> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static OWN: usize = NEXT.fetch_add(1, Ordering::Relaxed) % POOLS;
        }
        let own = OWN.with(|own| *own);
        (0..POOLS)
            .find_map(|k| self.pools[(own + k) % POOLS].try_lock())
            .unwrap_or_else(|| self.pools[own].lock())
    }
}

/// How long one call may spend evicting (Redis's `evictionTimeLimitUs`):
/// 50 µs per tenacity step up to 10, then 15% more per step, unlimited at
/// 100.
pub fn time_limit(tenacity: u64) -> Option<Duration> {
    match tenacity {
        0..=10 => Some(Duration::from_micros(50 * tenacity)),
        11..=99 => Some(Duration::from_micros(
            (500.0 * 1.15f64.powi(tenacity as i32 - 10)) as u64,
        )),
        _ => None,
    }
}

/// Memory `maxmemory` leaves out (Redis's
/// `freeMemoryGetNotCountedMemory`, INFO `mem_not_counted_for_evict`):
/// replication buffers beyond the backlog's size, and commands on their
/// way to the AOF and the replication stream. Evicting keys would not
/// bring these down, and the deletions add to them.
pub fn not_counted(server: &Server) -> u64 {
    (server.repl.not_counted_memory() + server.aof.buffered_bytes()) as u64
}

/// Used memory as `maxmemory` counts it, and by how much it is over
/// `limit` (Redis's `getMaxmemoryState`). What is left out is only worked
/// out when the total is over the limit.
fn over_limit(server: &Server, limit: u64) -> Option<u64> {
    let used = used_memory() as u64;
    if used <= limit {
        return None;
    }
    let counted = used.saturating_sub(not_counted(server));
    counted.checked_sub(limit).filter(|&over| over > 0)
}

/// CONFIG SET maxmemory (Redis's `updateMaxmemory`): warns when the new
/// limit is below what is used, and has cron make an eviction attempt (a
/// command of a transaction setting it evicts nothing before EXEC ends).
pub fn limit_changed(server: &Server) {
    let limit = server.config.hot.maxmemory.load(Ordering::Relaxed);
    if limit == 0 {
        return;
    }
    let used = (used_memory() as u64).saturating_sub(not_counted(server));
    if limit < used {
        tracing::warn!("WARNING: the new maxmemory value set via CONFIG SET ({limit}) is smaller than the current memory usage ({used}). This will result in key eviction and/or the inability to accept new write commands depending on the maxmemory-policy.");
    }
    server.evictor.carrying_on.store(true, Ordering::Relaxed);
}

/// Evicts keys while memory is over `maxmemory`; see the module docs.
pub fn perform_evictions(server: &Server) -> EvictResult {
    let limit = server.config.hot.maxmemory.load(Ordering::Relaxed);
    if limit == 0 {
        return EvictResult::Ok;
    }
    // While clients are paused the dataset must stay as it is.
    if server.pause.active() != 0 {
        return EvictResult::Ok;
    }
    let result = match over_limit(server, limit) {
        None => EvictResult::Ok,
        Some(to_free) => {
            let result = evict(server, to_free, limit);
            // Invalidations for the evicted keys go out now.
            crate::exec::tracking::broadcast(server, None);
            result
        }
    };
    server.evictor.record(result);
    result
}

/// Evicts keys until their deletions freed `to_free` bytes (or memory is
/// found under `limit`).
fn evict(server: &Server, to_free: u64, limit: u64) -> EvictResult {
    let config = &server.config;
    let policy = config.eviction_policy();
    if policy == Policy::NoEviction {
        return EvictResult::Fail;
    }
    let samples = config.hot.maxmemory_samples.load(Ordering::Relaxed) as usize;
    let budget = time_limit(
        config
            .hot
            .maxmemory_eviction_tenacity
            .load(Ordering::Relaxed),
    );
    let lazy = config.hot.lazyfree_lazy_eviction.load(Ordering::Relaxed);
    // Most calls evict a key or two and return, so the clock only starts
    // at the first check (after 16 keys): a budget of n µs allows n µs
    // plus the time of 16 evictions.
    let mut start = None;
    let mut over_budget =
        || budget.is_some_and(|b| start.get_or_insert_with(Instant::now).elapsed() >= b);
    let mut pool = server.evictor.lock_pool();
    let mut evicted = 0u64;
    let mut freed = 0i64;
    while freed < to_free as i64 {
        // Bytes this thread took for the deletion's log and notifications.
        let mut side_effects = 0isize;
        let mut log = |db: usize, key: &[u8]| {
            let before = thread_net_bytes();
            crate::persist::aof::log_deletion(server, db, key, lazy);
            crate::exec::notify::key_gone(server, "evicted", db, key);
            side_effects += thread_net_bytes().wrapping_sub(before);
        };
        let before = thread_net_bytes();
        let Some(ev) = server
            .keyspace
            .evict_one(policy, samples, &mut pool, &mut log)
        else {
            drop(pool);
            return wait_for_lazy_free(server, limit, budget);
        };
        // A value handed to the lazy free thread counts as freed: Redis
        // counts it only once the thread got to it, and meanwhile evicts
        // key after key (every one, with big values) for memory already on
        // its way out.
        let mut deferred = 0;
        if lazy {
            let value = ev.entry.into_value();
            let bytes = value.heap_bytes() as i64;
            if server.lazyfree.free_value(value) {
                deferred = bytes;
            }
        } else {
            drop(ev);
        }
        let net = thread_net_bytes().wrapping_sub(before);
        freed += side_effects.wrapping_sub(net) as i64 + deferred;
        evicted += 1;
        if evicted.is_multiple_of(16) {
            if over_limit(server, limit).is_none() {
                break;
            }
            if over_budget() {
                return EvictResult::Running;
            }
        }
    }
    EvictResult::Ok
}

/// Nothing is left to evict: values still queued for the lazy free thread
/// may bring memory under the limit, so wait for them a little (within the
/// time budget) before giving up.
fn wait_for_lazy_free(server: &Server, limit: u64, budget: Option<Duration>) -> EvictResult {
    let budget = budget.unwrap_or(Duration::from_millis(1));
    let start = Instant::now();
    while server.lazyfree.pending_objects() > 0 && start.elapsed() < budget {
        if over_limit(server, limit).is_none() {
            return EvictResult::Ok;
        }
        std::thread::sleep(budget.min(Duration::from_millis(1)));
    }
    EvictResult::Fail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_evicting_passes_over_the_pools_others_hold() {
        let evictor = Evictor::default();
        let held: Vec<_> = (0..POOLS).map(|_| evictor.lock_pool()).collect();
        for (i, a) in held.iter().enumerate() {
            for b in &held[i + 1..] {
                assert!(!std::ptr::eq(&**a, &**b), "one pool handed out twice");
            }
        }
    }

    #[test]
    fn tenacity_maps_to_redis_time_limits() {
        assert_eq!(time_limit(0), Some(Duration::ZERO));
        assert_eq!(time_limit(10), Some(Duration::from_micros(500)));
        assert_eq!(time_limit(11), Some(Duration::from_micros(575)));
        // About two minutes at 99, unlimited at 100.
        let t99 = time_limit(99).unwrap().as_secs();
        assert!((100..=150).contains(&t99), "{t99}");
        assert_eq!(time_limit(100), None);
    }
}
