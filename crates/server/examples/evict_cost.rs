//! What eviction adds to a SET, without the network: nanoseconds per SET
//! of a new key into a keyspace that grows (no limit), against per SET
//! plus the eviction of one key from a keyspace kept full, each over
//! 2M random keys of a 10M space with 100-byte values, as the maxmemory
//! benchmark's load. Far steadier than the benchmark over TCP, so it can
//! tell builds apart by a few percent.
//!
//! Usage: `cargo run --release --example evict_cost [POLICY [limited]]`
//! (default allkeys-lru; `limited` skips the growing keyspace).

use std::time::Instant;

use vireo_store::value::{StrValue, Value};
use vireo_store::{EvictionPool, Keyspace, Policy};

#[global_allocator]
static GLOBAL: vireo_server::memory::alloc::Counting = vireo_server::memory::alloc::Counting;

/// Keys kept in the full keyspace: about 100 MB, as under `maxmemory 100mb`.
const FULL: u64 = 800_000;
/// SETs timed per run.
const OPS: u64 = 2_000_000;
/// The key space the SETs pick from.
const SPACE: u64 = 10_000_000;

fn key(i: u64) -> Vec<u8> {
    format!("key:{i:012}").into_bytes()
}

/// Stores `key`; true if it was new.
fn set(ks: &Keyspace, key: &[u8]) -> bool {
    let value = Value::Str(StrValue::from_bytes(&[b'x'; 100]));
    !ks.lock_keys([key]).set(0, key, value)
}

/// Nanoseconds per SET into an empty keyspace that grows.
fn growing(rng: &mut fastrand::Rng) -> f64 {
    let ks = Keyspace::new(16, 1024);
    let t = Instant::now();
    for _ in 0..OPS {
        set(&ks, &key(rng.u64(..SPACE)));
    }
    t.elapsed().as_nanos() as f64 / OPS as f64
}

/// Nanoseconds per SET into a full keyspace, each new key evicting one.
fn full(rng: &mut fastrand::Rng, policy: Policy) -> f64 {
    let ks = Keyspace::new(16, 1024);
    for i in 0..FULL {
        set(&ks, &key(SPACE + i));
    }
    let mut pool = EvictionPool::default();
    let t = Instant::now();
    for _ in 0..OPS {
        if set(&ks, &key(rng.u64(..SPACE))) {
            drop(ks.evict_one(policy, 5, &mut pool, &mut |_, _| {}));
        }
    }
    t.elapsed().as_nanos() as f64 / OPS as f64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "allkeys-lru".into());
    let policy = Policy::parse(&name).expect("a maxmemory-policy name");
    let limited_only = args.next().is_some_and(|a| a == "limited");
    let mut rng = fastrand::Rng::with_seed(7);
    for round in 1..=3 {
        let unlimited = if limited_only { 0.0 } else { growing(&mut rng) };
        let limited = full(&mut rng, policy);
        println!("round {round}: unlimited {unlimited:.0} ns/op, limited {limited:.0} ns/op");
    }
}
