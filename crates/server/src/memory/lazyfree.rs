//! Lazy freeing: big values and flushed databases are dropped on a
//! background thread, so deleting a key with millions of elements never
//! stalls the clients of the worker that deleted it (Redis's `lazyfree.c`
//! with its BIO thread).
//!
//! Only values whose freeing walks more than [`LAZYFREE_THRESHOLD`]
//! allocations go to the thread; for the rest, handing them over would
//! cost more than dropping them in place.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};

use vireo_store::keyspace::Flushed;
use vireo_store::Value;

/// Values whose free effort ([`Value::free_effort`]) exceeds this are freed
/// in the background (Redis's `LAZYFREE_THRESHOLD`).
pub const LAZYFREE_THRESHOLD: usize = 64;

/// One hand-over to the freeing thread.
struct Job {
    /// Held only to be dropped on the thread.
    garbage: Box<dyn Send>,
    /// Objects it counts for (`lazyfree_pending_objects`).
    objects: u64,
}

/// Counters shared with the freeing thread.
#[derive(Default)]
struct Counters {
    pending_objects: AtomicU64,
    freed_objects: AtomicU64,
}

impl Counters {
    /// Drops a job's garbage and counts it freed.
    fn free(&self, job: Job) {
        let Job { garbage, objects } = job;
        drop(garbage);
        self.pending_objects.fetch_sub(objects, Ordering::Relaxed);
        self.freed_objects.fetch_add(objects, Ordering::Relaxed);
    }
}

/// The background freer and its counters.
pub struct LazyFree {
    /// None when the thread could not be started: everything is freed in
    /// place then.
    tx: Option<Sender<Job>>,
    counters: std::sync::Arc<Counters>,
}

impl LazyFree {
    /// Starts the freeing thread; it ends when this is dropped.
    pub fn start() -> LazyFree {
        let counters = std::sync::Arc::new(Counters::default());
        let (tx, rx) = channel::<Job>();
        let c = counters.clone();
        let spawned = std::thread::Builder::new()
            .name("vireo-lazyfree".into())
            .spawn(move || {
                for job in rx {
                    c.free(job);
                }
            });
        LazyFree {
            tx: spawned.ok().map(|_| tx),
            counters,
        }
    }

    fn send(&self, job: Job) {
        let Some(tx) = &self.tx else {
            return drop(job);
        };
        self.counters
            .pending_objects
            .fetch_add(job.objects, Ordering::Relaxed);
        if let Err(e) = tx.send(job) {
            // The thread is gone: free here.
            self.counters.free(e.0);
        }
    }

    /// Frees `value`: on the background thread when it is big enough to
    /// be worth it (then returns true), here otherwise.
    pub fn free_value(&self, value: Value) -> bool {
        if value.free_effort() > LAZYFREE_THRESHOLD {
            self.send(Job {
                garbage: Box::new(value),
                objects: 1,
            });
            true
        } else {
            drop(value);
            false
        }
    }

    /// Frees flushed databases on the background thread; they count as
    /// one object per key, as in Redis.
    pub fn free_tables(&self, tables: Vec<Flushed>) {
        let objects = tables.iter().map(|t| t.key_count() as u64).sum();
        if objects > 0 {
            self.send(Job {
                garbage: Box::new(tables),
                objects,
            });
        }
    }

    /// Objects waiting to be freed (`lazyfree_pending_objects`).
    pub fn pending_objects(&self) -> u64 {
        self.counters.pending_objects.load(Ordering::Relaxed)
    }

    /// Objects freed so far (`lazyfreed_objects`).
    pub fn freed_objects(&self) -> u64 {
        self.counters.freed_objects.load(Ordering::Relaxed)
    }

    /// Zeroes `lazyfreed_objects` (CONFIG RESETSTAT).
    pub fn reset_stats(&self) {
        self.counters.freed_objects.store(0, Ordering::Relaxed);
    }
}
