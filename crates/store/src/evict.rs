//! Choosing keys to evict under `maxmemory`, as Redis's `evict.c` does:
//! the LRU, LFU and TTL policies sample a few keys at a time and keep the
//! best candidates seen so far in a small pool (Redis's `EVPOOL`), so the
//! choice approximates the exact one without ordering the keys; the random
//! policies pick a random key.
//!
//! Under the allkeys policies a round samples the keys that follow a hand
//! going round the key tables (hash order, so as good as random picks); under
//! LRU it reads only those of the oldest access generation among them, which
//! the key table keeps in each slot (see `key_table.rs`). Under the volatile
//! policies a round samples keys with a TTL from every database of the next
//! non-empty shard. The pool ranks them against the candidates of earlier
//! rounds (from other shards). Shards are only ever locked with
//! `try_lock`, one at a time, so eviction never waits behind a command (a
//! running MULTI/EXEC keeps its keys) and cannot take part in a lock
//! cycle.

use std::ops::Range;

use crate::dict::{hash_key, prefetch_read};
use crate::key_table::{KeyTable, SpanAges};
use crate::keyspace::{Entry, Key, Keyspace, Shard};

/// `maxmemory-policy`: which keys may be evicted and how they are ranked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Never evict: writes over the limit get an OOM error.
    NoEviction,
    /// Least recently used among all keys.
    AllKeysLru,
    /// Least frequently used among all keys.
    AllKeysLfu,
    /// Any key.
    AllKeysRandom,
    /// Least recently used among keys with a TTL.
    VolatileLru,
    /// Least frequently used among keys with a TTL.
    VolatileLfu,
    /// Any key with a TTL.
    VolatileRandom,
    /// The key with the nearest expiry time.
    VolatileTtl,
}

impl Policy {
    /// Every policy with its `maxmemory-policy` name, `noeviction` first
    /// (so index 0 means it: the server keeps the setting as an index).
    pub const ALL: [Policy; 8] = [
        Policy::NoEviction,
        Policy::AllKeysLru,
        Policy::AllKeysLfu,
        Policy::AllKeysRandom,
        Policy::VolatileLru,
        Policy::VolatileLfu,
        Policy::VolatileRandom,
        Policy::VolatileTtl,
    ];

    /// The policy's `maxmemory-policy` name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::NoEviction => "noeviction",
            Policy::AllKeysLru => "allkeys-lru",
            Policy::AllKeysLfu => "allkeys-lfu",
            Policy::AllKeysRandom => "allkeys-random",
            Policy::VolatileLru => "volatile-lru",
            Policy::VolatileLfu => "volatile-lfu",
            Policy::VolatileRandom => "volatile-random",
            Policy::VolatileTtl => "volatile-ttl",
        }
    }

    /// Parses a `maxmemory-policy` value (lower case, as CONFIG stores it).
    pub fn parse(name: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == name)
    }

    /// True when only keys with a TTL may be evicted.
    pub fn volatile_only(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    fn random(self) -> bool {
        matches!(self, Policy::AllKeysRandom | Policy::VolatileRandom)
    }

    /// How good an eviction candidate `e` is: the higher, the sooner it
    /// goes. LRU: idle milliseconds; LFU: 255 minus the decayed counter;
    /// TTL: the earlier the expiry, the higher.
    fn score(self, e: &Entry, now_ms: u64, decay_minutes: u32) -> u64 {
        match self {
            Policy::AllKeysLfu | Policy::VolatileLfu => {
                255 - u64::from(e.lfu_freq(now_ms, decay_minutes))
            }
            Policy::VolatileTtl => u64::MAX - e.expire_at().unwrap_or(u64::MAX),
            _ => e.idle_ms(now_ms),
        }
    }
}

/// How a sampling round ranks what it reads: by the policy, as of one
/// moment.
#[derive(Clone, Copy)]
struct Ranking {
    policy: Policy,
    now_ms: u64,
    decay_minutes: u32,
}

impl Ranking {
    /// `e`'s score (see [`Policy::score`]).
    fn score(self, e: &Entry) -> u64 {
        self.policy.score(e, self.now_ms, self.decay_minutes)
    }
}

/// How many candidates the pool keeps (Redis's `EVPOOL_SIZE`).
pub const POOL_SIZE: usize = 16;

/// Evictions one sampling round pays for: a round takes this many times
/// `maxmemory-samples` keys at once, and the evictions after it take the
/// pool's best without sampling again, so each evicted key still costs
/// `maxmemory-samples` samples, as in Redis. Fewer, longer rounds visit
/// the shards' locks and tables fewer times.
const EVICTIONS_PER_ROUND: usize = 3;

/// A candidate for eviction.
#[derive(Debug)]
struct Candidate {
    score: u64,
    /// The key's shard, so that evicting it need not hash the key to
    /// find it.
    shard: usize,
    db: usize,
    /// The key table's tag of the key (see [`Entry::table_tag`]), which
    /// tells most other keys apart without comparing bytes.
    tag: u32,
    key: Vec<u8>,
}

/// Candidates sorted by ascending score: the best is last.
#[derive(Default)]
struct Candidates {
    sorted: Vec<Candidate>,
    /// Keys offered so far (tells a round whether it found any).
    offered: u64,
    /// Buffers of candidates gone, for the next ones' keys: most sampled
    /// keys enter the pool for a while, and each would otherwise cost an
    /// allocation and a free.
    spare: Vec<Vec<u8>>,
}

impl Candidates {
    /// Adds a sampled entry, keeping only the [`POOL_SIZE`] best.
    fn offer(&mut self, score: u64, (shard, db): (usize, usize), e: &Entry) {
        let (tag, key) = (e.table_tag(), e.key());
        self.offered += 1;
        let sorted = &mut self.sorted;
        if sorted.len() == POOL_SIZE && score <= sorted[0].score {
            // Worse than everything held (an older entry for the same key
            // may stay: it is checked again before eviction anyway).
            return;
        }
        if let Some(i) = sorted
            .iter()
            .position(|c| c.tag == tag && c.db == db && *c.key == *key)
        {
            // Sampled again: its score is fresher now.
            self.spare.push(sorted.remove(i).key);
        } else if sorted.len() == POOL_SIZE {
            self.spare.push(sorted.remove(0).key);
        }
        let mut copy = self.spare.pop().unwrap_or_default();
        copy.clear();
        copy.extend_from_slice(key);
        let at = sorted.partition_point(|c| c.score <= score);
        sorted.insert(
            at,
            Candidate {
                score,
                shard,
                db,
                tag,
                key: copy,
            },
        );
    }
}

/// The best eviction candidates sampled so far, kept between rounds (and
/// between calls) so each round adds information instead of starting over.
/// The caller keeps one per keyspace behind a lock.
pub struct EvictionPool {
    cands: Candidates,
    /// Where the next sampling round starts: the allkeys policies sample
    /// the keys at the hand (see [`Keyspace::sample_at_hand`]); the others
    /// take only its shard, going round the shards one by one.
    hand: Hand,
    /// Evictions the last sampling round still pays for (see
    /// [`EVICTIONS_PER_ROUND`]).
    paid_for: usize,
    /// `allkeys-random`'s next two victims, picked ahead (see
    /// [`Keyspace::prepick_random`]): the next one's entry and the one
    /// after's table slot are being loaded.
    random_ready: Option<Pick>,
    random_pending: Option<Pick>,
    rng: fastrand::Rng,
}

impl Default for EvictionPool {
    fn default() -> Self {
        let mut rng = fastrand::Rng::new();
        EvictionPool {
            cands: Candidates {
                sorted: Vec::with_capacity(POOL_SIZE),
                offered: 0,
                spare: Vec::new(),
            },
            // Pools used side by side start on different shards.
            hand: Hand {
                shard: rng.usize(..),
                db: 0,
                cursor: 0,
            },
            paid_for: 0,
            random_ready: None,
            random_pending: None,
            rng,
        }
    }
}

impl EvictionPool {
    /// Forgets every candidate (the policy changed, or the data was flushed).
    pub fn clear(&mut self) {
        self.cands.sorted.clear();
        self.paid_for = 0;
        self.random_ready = None;
        self.random_pending = None;
    }

    /// The shard the round-robin walk over `n` shards visits next, moving
    /// the walk on by one.
    fn take_next_shard(&mut self, n: usize) -> usize {
        let i = self.hand.shard(n);
        self.hand.next_shard(n);
        i
    }

    /// Number of candidates held.
    pub fn len(&self) -> usize {
        self.cands.sorted.len()
    }

    /// True when no candidate is held.
    pub fn is_empty(&self) -> bool {
        self.cands.sorted.is_empty()
    }
}

/// Where a sampling hand stands: the next tag of a database of a shard.
#[derive(Clone, Copy, Debug)]
struct Hand {
    /// The shard, of any number (a new pool's is random): see
    /// [`Hand::shard`].
    shard: usize,
    db: usize,
    /// A [`KeyTable::walk`](crate::key_table::KeyTable::walk) cursor.
    cursor: u64,
}

impl Hand {
    /// The shard the hand is at, of `shards`.
    fn shard(&self, shards: usize) -> usize {
        self.shard % shards
    }

    /// The first key of the next shard (of `shards`).
    fn next_shard(&mut self, shards: usize) {
        self.shard = (self.shard(shards) + 1) % shards;
        self.db = 0;
        self.cursor = 0;
    }
}

/// An entry picked for eviction ahead of time, by where it was: shard,
/// database and position in the key table.
type Pick = (usize, usize, usize);

/// A key taken out of the keyspace by eviction; dropping it frees the value
/// (the caller may do that on another thread).
pub struct Evicted {
    /// The database it was in.
    pub db: usize,
    /// Its entry, which holds the key.
    pub entry: Entry,
}

impl Keyspace {
    /// Evicts one key chosen by `policy`, or returns None when no key can
    /// be evicted (none qualifies, or every qualifying shard is busy).
    /// Clients WATCHing the key are told, as for a delete.
    pub fn evict_one(
        &self,
        policy: Policy,
        samples: usize,
        pool: &mut EvictionPool,
        on_evicted: &mut dyn FnMut(usize, &[u8]),
    ) -> Option<Evicted> {
        match policy {
            Policy::NoEviction => None,
            p if p.random() => self.evict_random(p, pool, on_evicted),
            p => self.evict_pooled(p, samples.max(1), pool, on_evicted),
        }
    }

    /// Visits shards round-robin from the pool's cursor until `f` reports
    /// progress on one of them; false when a whole pass found nothing.
    fn visit_shards(
        &self,
        pool: &mut EvictionPool,
        mut f: impl FnMut(usize, &mut Shard, &mut EvictionPool) -> bool,
    ) -> bool {
        let n = self.shard_count();
        for _ in 0..n {
            let i = pool.take_next_shard(n);
            let Some(mut shard) = self.try_lock_shard(i) else {
                continue;
            };
            if f(i, &mut shard, pool) {
                return true;
            }
        }
        false
    }

    fn evict_pooled(
        &self,
        policy: Policy,
        samples: usize,
        pool: &mut EvictionPool,
        on_evicted: &mut dyn FnMut(usize, &[u8]),
    ) -> Option<Evicted> {
        let decay = self.lfu_tuning().decay_minutes;
        let per_round = samples * EVICTIONS_PER_ROUND;
        loop {
            if pool.paid_for > 0 && !pool.cands.sorted.is_empty() {
                // An earlier round's samples cover this eviction.
                pool.paid_for -= 1;
            } else {
                // A shard smaller than the round yields fewer samples,
                // which pay for fewer evictions (one at least, as before).
                let taken = self.sample_round(policy, per_round, decay, pool);
                pool.paid_for = (taken / samples).clamp(1, EVICTIONS_PER_ROUND) - 1;
                if taken == 0 && pool.cands.sorted.is_empty() {
                    return None;
                }
            }
            // The best candidate that still qualifies goes.
            while let Some(c) = pool.cands.sorted.pop() {
                let evicted = self.evict_candidate(policy, &c, on_evicted);
                pool.cands.spare.push(c.key);
                if evicted.is_some() {
                    return evicted;
                }
            }
            pool.paid_for = 0;
        }
    }

    /// Evicts candidate `c` if it still exists, still qualifies under
    /// `policy` and its shard is free.
    fn evict_candidate(
        &self,
        policy: Policy,
        c: &Candidate,
        on_evicted: &mut dyn FnMut(usize, &[u8]),
    ) -> Option<Evicted> {
        let mut shard = self.try_lock_shard(c.shard)?;
        let hash = hash_key(&c.key);
        // Any key qualifies under an allkeys policy: removing it is the one
        // lookup (it may be gone since it was sampled).
        let qualifies = !policy.volatile_only()
            || shard.dbs[c.db]
                .keys
                .get(hash, &c.key)
                .is_some_and(|e| e.expire_at().is_some());
        if !qualifies {
            return None;
        }
        shard.evict(c.db, hash, &c.key, on_evicted)
    }

    /// Samples about `samples` keys into the pool; returns how many it
    /// sampled (0 when a whole pass found nothing).
    fn sample_round(
        &self,
        policy: Policy,
        samples: usize,
        decay: u32,
        pool: &mut EvictionPool,
    ) -> usize {
        let rank = Ranking {
            policy,
            now_ms: crate::clock::now_ms(),
            decay_minutes: decay,
        };
        if policy.volatile_only() {
            self.sample_volatile(rank, samples, pool)
        } else {
            self.sample_at_hand(rank, samples, pool)
        }
    }

    /// Samples the `samples` keys that follow the pool's hand in its
    /// table, moving the hand past them, and returns how many it sampled;
    /// the hand goes round every table in turn. Slots are in hash order,
    /// so keys in a row are as unrelated in age and use as random picks
    /// (Redis samples consecutive buckets for the same reason), and the
    /// hand reaches every key once per turn.
    ///
    /// Reading a sampled key's access clock is a miss to memory, and was
    /// most of the time spent evicting. So under LRU a round reads and
    /// offers only keys of its oldest access generation (see
    /// `key_table.rs` and [`worth_reading`]), about a third of what it
    /// samples under a steady SET load. And the hand knows what it samples
    /// next: each round starts loading the entries the next round will
    /// read, which are ready by the time it comes (a few commands later).
    fn sample_at_hand(&self, rank: Ranking, samples: usize, pool: &mut EvictionPool) -> usize {
        let shards = self.shard_count();
        // Under LRU a round reads at most the samples of one eviction when
        // it can tell the older keys (see `worth_reading`).
        let lru_reads =
            (rank.policy == Policy::AllKeysLru).then_some((samples / EVICTIONS_PER_ROUND).max(1));
        // Every table once at most: a pass that finds no key ends the round.
        for _ in 0..=shards {
            let i = pool.hand.shard(shards);
            let Some(mut shard) = self.try_lock_shard(i) else {
                pool.hand.next_shard(shards);
                continue;
            };
            while pool.hand.db < shard.dbs.len() {
                let db = pool.hand.db;
                let keys = &mut shard.dbs[db].keys;
                let (span, next, ages) = keys.hand_step(pool.hand.cursor, samples);
                let keys = &*keys;
                for e in worth_reading(keys, span.clone(), ages, lru_reads) {
                    pool.cands.offer(rank.score(e), (i, db), e);
                }
                pool.hand.cursor = next;
                if next == 0 {
                    pool.hand.db += 1;
                } else {
                    // The next round starts where this one stopped, unless
                    // the table changes before it (these loads are hints).
                    let ahead = span.end..span.end + span.len();
                    let ahead_ages = keys.span_ages(ahead.clone());
                    worth_reading(keys, ahead, ahead_ages, lru_reads).for_each(Entry::prefetch);
                }
                if ages.entries > 0 {
                    return ages.entries;
                }
            }
            pool.hand.next_shard(shards);
        }
        0
    }

    /// Samples `samples` keys with a TTL from every database of the next
    /// shard that has some into the pool; returns how many it offered (0
    /// when a whole pass found nothing).
    fn sample_volatile(&self, rank: Ranking, samples: usize, pool: &mut EvictionPool) -> usize {
        let start = pool.cands.offered;
        self.visit_shards(pool, |i, shard, pool| {
            let before = pool.cands.offered;
            // A shard's tables (one per database) are cold by the time
            // eviction comes back to it; checking each for keys one by
            // one was a fifth of the time spent evicting.
            for table in shard.dbs.iter() {
                prefetch_read(&table.volatile);
            }
            for (db, table) in shard.dbs.iter().enumerate() {
                if table.volatile.is_empty() {
                    continue;
                }
                table.volatile.sample(&mut pool.rng, samples, |hash| {
                    table.keys.with_hash(hash, |e| {
                        if e.expire_at().is_some() {
                            pool.cands.offer(rank.score(e), (i, db), e);
                        }
                    });
                });
            }
            pool.cands.offered != before
        });
        (pool.cands.offered - start) as usize
    }

    fn evict_random(
        &self,
        policy: Policy,
        pool: &mut EvictionPool,
        on_evicted: &mut dyn FnMut(usize, &[u8]),
    ) -> Option<Evicted> {
        if policy == Policy::AllKeysRandom {
            let evicted = self.evict_prepicked(pool, on_evicted);
            self.prepick_random(pool);
            if evicted.is_some() {
                return evicted;
            }
        }
        let mut evicted = None;
        self.visit_shards(pool, |_, shard, pool| {
            for db in 0..shard.dbs.len() {
                let table = &shard.dbs[db];
                let key = if policy.volatile_only() {
                    let mut key = None;
                    if let Some(hash) = table.volatile.random(&mut pool.rng) {
                        table.keys.with_hash(hash, |e| {
                            if key.is_none() && e.expire_at().is_some() {
                                key = Some(Key::from(e.key()));
                            }
                        });
                    }
                    key
                } else {
                    (table.keys.random_entry(&mut pool.rng)).map(|e| Key::from(e.key()))
                };
                if let Some(key) = key {
                    evicted = shard.evict(db, hash_key(&key), &key, on_evicted);
                    return true;
                }
            }
            false
        });
        evicted
    }

    /// Evicts the entry [`Keyspace::prepick_random`] readied, or whatever
    /// now sits at its position (any entry at a random position is as
    /// random); None if its shard is busy or the position is gone.
    fn evict_prepicked(
        &self,
        pool: &mut EvictionPool,
        on_evicted: &mut dyn FnMut(usize, &[u8]),
    ) -> Option<Evicted> {
        let (i, db, at) = pool.random_ready.take()?;
        let mut shard = self.try_lock_shard(i)?;
        if db >= shard.dbs.len() {
            return None;
        }
        let key = Key::from(shard.dbs[db].keys.at(at)?.key());
        shard.evict(db, hash_key(&key), &key, on_evicted)
    }

    /// Picks `allkeys-random`'s victims two evictions ahead, as the
    /// round-robin walk would (the next shard's first non-empty database,
    /// a random position in it), and loads them in two steps: the table
    /// slot when picked, its entry one eviction later. With the keyspace
    /// far bigger than the cache both were misses to memory, one waiting
    /// for the other: reading the victim was 92% of `evict_one`'s time and
    /// 16% of a worker's under a SET load (perf).
    fn prepick_random(&self, pool: &mut EvictionPool) {
        if let Some((i, db, at)) = pool.random_pending.take() {
            if let Some(shard) = self.try_lock_shard(i) {
                if let Some(entry) = (db < shard.dbs.len())
                    .then(|| shard.dbs[db].keys.at(at))
                    .flatten()
                {
                    entry.prefetch();
                    pool.random_ready = Some((i, db, at));
                }
            }
        }
        let i = pool.take_next_shard(self.shard_count());
        let Some(shard) = self.try_lock_shard(i) else {
            return;
        };
        let Some((db, table)) = shard
            .dbs
            .iter()
            .enumerate()
            .find(|(_, t)| !t.keys.is_empty())
        else {
            return;
        };
        let Some(at) = table.keys.random_position(&mut pool.rng) else {
            return;
        };
        table.keys.prefetch_at(at);
        pool.random_pending = Some((i, db, at));
    }
}

/// The entries at positions `span` of `keys` (whose ages are `ages`) that
/// a sampling round reads.
/// Under LRU (`lru_reads`: how many at most), when the keys there are of
/// more than one access generation, those of the oldest one up to that
/// many: every other key was accessed after all of them. When they are all
/// of one generation (no key was read since the hand went by, or the hand
/// has not gone round yet), or under another policy, all of them.
fn worth_reading(
    keys: &KeyTable,
    span: Range<usize>,
    ages: SpanAges,
    lru_reads: Option<usize>,
) -> impl Iterator<Item = &Entry> {
    let only_oldest = lru_reads.filter(|_| ages.oldest > ages.youngest);
    keys.aged(span)
        .filter(move |&(_, age)| only_oldest.is_none() || age == ages.oldest)
        .map(|(e, _)| e)
        .take(only_oldest.unwrap_or(usize::MAX))
}

impl Shard {
    /// Removes `key` for eviction, signalling its watchers and telling
    /// `on_evicted` while the shard is still locked (the AOF logs the
    /// deletion in its place among the commands on that key).
    fn evict(
        &mut self,
        db: usize,
        hash: u64,
        key: &[u8],
        on_evicted: &mut dyn FnMut(usize, &[u8]),
    ) -> Option<Evicted> {
        let entry = self.remove_entry(db, hash, key)?;
        self.signal(db, key);
        on_evicted(db, key);
        self.stats.evicted_keys += 1;
        Some(Evicted { db, entry })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::LfuTuning;
    use crate::value::{StrValue, Value};

    fn v() -> Value {
        Value::Str(StrValue::from_bytes(b"v"))
    }

    fn evict_all(ks: &Keyspace, policy: Policy, samples: usize) -> Vec<Vec<u8>> {
        let mut pool = EvictionPool::default();
        std::iter::from_fn(|| ks.evict_one(policy, samples, &mut pool, &mut |_, _| {}))
            .map(|e| e.entry.key().to_vec())
            .collect()
    }

    #[test]
    fn policies_parse_and_noeviction_evicts_nothing() {
        for name in [
            "noeviction",
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
        ] {
            let p = Policy::parse(name).unwrap();
            assert_eq!(p.volatile_only(), name.starts_with("volatile"));
        }
        assert_eq!(Policy::parse("lru"), None);
        let ks = Keyspace::new(1, 4);
        ks.lock_all().set(0, b"a", v());
        assert!(evict_all(&ks, Policy::NoEviction, 5).is_empty());
        assert_eq!(ks.db_sizes()[0], (1, 0));
    }

    #[test]
    fn pool_keeps_the_best_candidates_sorted() {
        let mut pool = EvictionPool::default();
        let entry = |key: &[u8]| Entry::with_key_value(key, v(), None);
        for i in 0..40u64 {
            let e = entry(format!("k{i}").as_bytes());
            pool.cands.offer(i * 7 % 41, (0, 0), &e);
        }
        assert_eq!(pool.len(), POOL_SIZE);
        let scores: Vec<u64> = pool.cands.sorted.iter().map(|c| c.score).collect();
        assert!(scores.windows(2).all(|w| w[0] <= w[1]));
        // The 16 highest of 40 distinct scores 0..41 (minus one) are kept.
        assert!(scores[0] >= 40 - POOL_SIZE as u64);
        // Offering a key again never duplicates it: a score too low for a
        // full pool is ignored, a better one replaces the old.
        let best = pool.cands.sorted.last().unwrap().key.clone();
        let spare = pool.cands.spare.len();
        pool.cands.offer(0, (0, 0), &entry(&best));
        assert_eq!(
            pool.cands.sorted.iter().filter(|c| c.key == best).count(),
            1
        );
        let second = pool.cands.sorted[POOL_SIZE - 2].key.clone();
        pool.cands.offer(1000, (0, 0), &entry(&second));
        assert_eq!(
            pool.cands.sorted.iter().filter(|c| c.key == second).count(),
            1
        );
        assert_eq!(pool.cands.sorted.last().unwrap().key, second);
        pool.cands.offer(1001, (0, 0), &entry(&best));
        assert_eq!(pool.cands.sorted.last().unwrap().key, best);
        assert_eq!(pool.len(), POOL_SIZE);
        // Replaced candidates' buffers were reused, none added.
        assert_eq!(pool.cands.spare.len(), spare);
        pool.clear();
        assert!(pool.is_empty());
    }

    /// Stores keys 0..n whose last access was `n - i` seconds ago.
    fn aged_keys(ks: &Keyspace, n: u32) {
        let now = crate::clock::now_ms();
        let mut k = ks.lock_all();
        for i in 0..n {
            let key = format!("key:{i}");
            k.set(0, key.as_bytes(), v());
            k.get_mut(0, key.as_bytes())
                .unwrap()
                .set_access_for_test(now - u64::from(n - i) * 1000);
        }
    }

    #[test]
    fn lru_approximates_recency() {
        let ks = Keyspace::new(1, 16);
        aged_keys(&ks, 1000);
        let mut pool = EvictionPool::default();
        // The first half to go is mostly the older half; with 10 samples and
        // the pool, nearly all of it.
        let gone: Vec<usize> = (0..500)
            .map(|_| {
                ks.evict_one(Policy::AllKeysLru, 10, &mut pool, &mut |_, _| {})
                    .unwrap()
            })
            .map(|e| {
                std::str::from_utf8(&e.entry.key()[4..])
                    .unwrap()
                    .parse::<usize>()
                    .unwrap()
            })
            .collect();
        let old = gone.iter().filter(|&&i| i < 500).count();
        assert!(old > 400, "only {old} of 500 evicted keys were old");
        // Over a long run the very newest keys are the last to go.
        let rest = evict_all(&ks, Policy::AllKeysLru, 10);
        assert_eq!(rest.len(), 500);
        assert_eq!(ks.stats().evicted_keys, 1000);
    }

    #[test]
    fn lfu_prefers_rarely_used_keys() {
        let ks = Keyspace::new(1, 8);
        ks.set_lfu_tuning(LfuTuning {
            lfu: true,
            log_factor: 0,
            decay_minutes: 0,
        });
        let mut k = ks.lock_all();
        for i in 0..100 {
            let key = format!("k{i}");
            k.set(0, key.as_bytes(), v());
            if i % 2 == 0 {
                for _ in 0..10 {
                    k.get_read(0, key.as_bytes());
                }
            }
        }
        drop(k);
        let gone = evict_all(&ks, Policy::AllKeysLfu, 100);
        // Samples of 100 see every key: the 50 cold ones go first, exactly.
        for key in &gone[..50] {
            let i: usize = std::str::from_utf8(&key[1..]).unwrap().parse().unwrap();
            assert_eq!(i % 2, 1, "a hot key went before a cold one");
        }
    }

    #[test]
    fn lru_passes_over_keys_read_since_the_hand_went_by() {
        // Keys made and read within moments: their access clocks (whole
        // seconds) tie, and only the generations tell the read ones apart.
        let ks = numbered(1, 1, 300);
        // Four walks of the hand: two generations on.
        let mut pool = EvictionPool::default();
        let walks = |ks: &Keyspace| ks.try_lock_shard(0).unwrap().dbs[0].keys.passes;
        while walks(&ks) < 4 {
            ks.sample_round(Policy::AllKeysLru, 30, 0, &mut pool);
        }
        pool.clear();
        let mut k = ks.lock_all();
        for i in (0..300).step_by(3) {
            k.get_read(0, format!("k{i}").as_bytes());
        }
        drop(k);
        // About two more walks: every round samples some unread key.
        for _ in 0..100 {
            let e = ks.evict_one(Policy::AllKeysLru, 5, &mut pool, &mut |_, _| {});
            let e = e.unwrap();
            let key = e.entry.key();
            let i: usize = std::str::from_utf8(&key[1..]).unwrap().parse().unwrap();
            assert_ne!(i % 3, 0, "k{i}, read since, went before unread keys");
        }
    }

    /// A keyspace of `dbs` databases over `shards` shards holding keys
    /// `k0` to `k{n-1}` in database 0.
    fn numbered(dbs: usize, shards: usize, n: usize) -> Keyspace {
        let ks = Keyspace::new(dbs, shards);
        let mut k = ks.lock_all();
        for i in 0..n {
            k.set(0, format!("k{i}").as_bytes(), v());
        }
        drop(k);
        ks
    }

    /// A keyspace of three databases holding keys `k0` to `k{n-1}`, key
    /// `ki` in database `i % 3`.
    fn three_dbs(shards: usize, n: usize) -> Keyspace {
        let ks = Keyspace::new(3, shards);
        let mut k = ks.lock_all();
        for i in 0..n {
            k.set(i % 3, format!("k{i}").as_bytes(), v());
        }
        drop(k);
        ks
    }

    #[test]
    fn the_hand_samples_every_key_once_per_turn() {
        // One shard: the hand goes through its databases, then starts over.
        let ks = three_dbs(1, 500);
        let mut pool = EvictionPool::default();
        let mut offered = 0;
        for turn in 1..=2 {
            while pool.hand.db < 3 {
                offered += ks.sample_round(Policy::AllKeysLru, 7, 0, &mut pool);
            }
            assert_eq!(offered, 500 * turn);
            // The next round starts the next turn.
            pool.hand.db = 0;
            pool.hand.cursor = 0;
        }
        assert_eq!(pool.len(), POOL_SIZE);
    }

    #[test]
    fn volatile_policies_only_take_keys_with_a_ttl() {
        for policy in [
            Policy::VolatileLru,
            Policy::VolatileLfu,
            Policy::VolatileRandom,
            Policy::VolatileTtl,
        ] {
            let ks = Keyspace::new(2, 8);
            let mut k = ks.lock_all();
            let far = k.now() + 1_000_000;
            for i in 0..50u64 {
                k.set(1, format!("p{i}").as_bytes(), v());
                k.set(1, format!("t{i}").as_bytes(), v());
                k.set_expire(1, format!("t{i}").as_bytes(), far + i * 1000);
            }
            drop(k);
            let gone = evict_all(&ks, policy, 5);
            assert_eq!(gone.len(), 50, "{policy:?}");
            assert!(gone.iter().all(|k| k[0] == b't'), "{policy:?}");
            assert_eq!(ks.db_sizes()[1], (50, 0));
        }
    }

    #[test]
    fn volatile_ttl_takes_the_nearest_expiry_first() {
        // One shard: a round's sample covers every key, so the order is exact.
        let ks = Keyspace::new(1, 1);
        let mut k = ks.lock_all();
        let base = k.now() + 1_000_000;
        for i in 0..20u64 {
            k.set(0, format!("t{i:02}").as_bytes(), v());
            k.set_expire(0, format!("t{i:02}").as_bytes(), base + i * 1000);
        }
        drop(k);
        let gone = evict_all(&ks, Policy::VolatileTtl, 64);
        let want: Vec<Vec<u8>> = (0..20).map(|i| format!("t{i:02}").into_bytes()).collect();
        assert_eq!(gone, want);
    }

    #[test]
    fn random_eviction_empties_every_shard_and_db() {
        let ks = three_dbs(16, 90);
        assert_eq!(evict_all(&ks, Policy::AllKeysRandom, 5).len(), 90);
        assert!(ks.db_sizes().iter().all(|&(n, _)| n == 0));
    }

    /// Victims picked ahead stay only hints: when their keys are deleted
    /// (their positions now past the end or holding other keys) and the
    /// database swapped, eviction still takes only keys that exist, each
    /// once, until none is left.
    #[test]
    fn random_picks_made_ahead_survive_deletes_and_swaps() {
        let ks = numbered(2, 2, 100);
        let mut pool = EvictionPool::default();
        let mut evict = |ks: &Keyspace| {
            ks.evict_one(Policy::AllKeysRandom, 5, &mut pool, &mut |_, _| {})
                .map(|e| (e.db, e.entry.key().to_vec()))
        };
        let mut gone: Vec<_> = (0..3).map(|_| evict(&ks).expect("a key")).collect();
        let mut k = ks.lock_all();
        for i in 0..90 {
            k.delete(0, format!("k{i}").as_bytes());
        }
        k.set(1, b"other", v());
        k.swap_db(0, 1);
        drop(k);
        gone.extend(std::iter::from_fn(|| evict(&ks)));
        let mut keys: Vec<_> = gone[3..].iter().map(|(_, key)| key.clone()).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), gone.len() - 3, "a key evicted twice");
        let survivors = (90..100).filter(|i| {
            !gone[..3]
                .iter()
                .any(|(_, k)| *k == format!("k{i}").into_bytes())
        });
        assert_eq!(
            keys.len(),
            survivors.count() + 1,
            "the kept keys and 'other'"
        );
        assert!(ks.db_sizes().iter().all(|&(n, _)| n == 0));
    }

    /// Counts the keys of the shards a snapshot visits.
    #[derive(Default)]
    struct CountKeys(std::sync::atomic::AtomicUsize);

    impl crate::snapshot::ShardVisitor for CountKeys {
        fn select_db(&self, _out: &mut Vec<u8>, _db: usize) {}

        fn entry(&self, _out: &mut Vec<u8>, _db: usize, _key: &[u8], _entry: &Entry) -> bool {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            true
        }

        fn emit(&self, _bytes: Vec<u8>, _keys: u64) {}
    }

    #[test]
    fn a_snapshot_sees_keys_evicted_after_its_cut() {
        let ks = Keyspace::new(1, 16);
        let mut k = ks.lock_all();
        for i in 0..300 {
            k.set(0, format!("k{i}").as_bytes(), v());
        }
        drop(k);
        let seen = std::sync::Arc::new(CountKeys::default());
        ks.begin_snapshot(seen.clone(), || {}).unwrap();
        assert_eq!(evict_all(&ks, Policy::AllKeysLru, 5).len(), 300);
        ks.drive_snapshot();
        assert_eq!(seen.0.load(std::sync::atomic::Ordering::Relaxed), 300);
    }

    #[test]
    fn busy_shards_are_skipped_and_watchers_told() {
        let ks = Keyspace::new(1, 2);
        let a: &[u8] = b"a";
        let b = (0..)
            .map(|i| format!("b{i}").into_bytes())
            .find(|b| ks.shard_of(b) != ks.shard_of(a))
            .unwrap();
        let flag: crate::keyspace::WatchFlag = Default::default();
        let mut k = ks.lock_all();
        k.set(0, a, v());
        k.set(0, &b, v());
        k.watch(0, &b, &flag);
        drop(k);
        // A command holding `a`'s shard keeps `a`.
        let held = ks.lock_keys([a]);
        let gone = evict_all(&ks, Policy::AllKeysLru, 5);
        assert_eq!(gone, vec![b.clone()]);
        assert!(flag.load(std::sync::atomic::Ordering::Acquire));
        drop(held);
        assert_eq!(evict_all(&ks, Policy::AllKeysLru, 5), vec![a.to_vec()]);
    }
}
