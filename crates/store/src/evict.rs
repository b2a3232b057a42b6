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

use crate::dict::prefetch_read;
use crate::key_table::{real_tag, HandSpan};
use crate::keyspace::{Entry, Keyspace, Shard};

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

/// A candidate for eviction: where its entry is and how good it is, with
/// no copy of the key. Eviction finds the entry again from the table's
/// handles alone, by its tag and block address (see
/// [`crate::key_table::KeyTable::position_of_addr`]).
#[derive(Clone, Copy, Debug, Default)]
struct Candidate {
    score: u64,
    /// The entry's block address ([`Entry::addr`]). A key deleted or
    /// evicted since it was sampled (another pool may hold it too) may have
    /// left its block to a new key, which is then evicted in its place if
    /// it has the same tag in the same table: as rare as two keys sharing
    /// their shard and 16-bit tag, and any key may go under the allkeys
    /// policies (the volatile ones check for a TTL first).
    addr: usize,
    /// The key's shard, database and tag in the key table (see
    /// [`Entry::table_tag`]).
    shard: u32,
    db: u32,
    tag: u32,
}

/// The pool's candidates: a short array kept sorted by insertion, which
/// moves a few 32-byte candidates per offer.
#[derive(Default)]
struct Candidates {
    /// The first `held` are sorted by ascending score: the best is last.
    /// The others have address 0, which no entry has.
    sorted: [Candidate; POOL_SIZE],
    held: usize,
    /// Keys offered so far (tells a round whether it found any).
    offered: u64,
}

impl Candidates {
    /// Adds a sampled entry, keeping only the [`POOL_SIZE`] best.
    fn offer(&mut self, score: u64, (shard, db): (usize, usize), e: &Entry) {
        self.offered += 1;
        if self.held == POOL_SIZE && score <= self.sorted[0].score {
            // Worse than everything held (an older entry for the same key
            // may stay: it is checked again before eviction anyway).
            return;
        }
        let addr = e.addr();
        // All slots, without stopping at a match, which the compiler turns
        // into a few wide compares: most offers find none.
        if self
            .sorted
            .iter()
            .fold(false, |seen, c| seen | (c.addr == addr))
        {
            // Sampled again: its score is fresher now.
            self.remove(addr);
        }
        self.insert(Candidate {
            score,
            addr,
            shard: shard as u32,
            db: db as u32,
            tag: real_tag(e),
        });
    }

    /// Puts `new` in its place by score, before the candidates of equal
    /// score, as Redis does (of a tie, the one sampled first goes first);
    /// when all slots are held, the worst makes room, `new` being better.
    fn insert(&mut self, new: Candidate) {
        let sorted = &mut self.sorted;
        if self.held < POOL_SIZE {
            let mut at = self.held;
            while at > 0 && sorted[at - 1].score >= new.score {
                sorted[at] = sorted[at - 1];
                at -= 1;
            }
            sorted[at] = new;
            self.held += 1;
        } else {
            let mut at = 0;
            while at + 1 < POOL_SIZE && sorted[at + 1].score < new.score {
                sorted[at] = sorted[at + 1];
                at += 1;
            }
            sorted[at] = new;
        }
    }

    /// Takes out the held candidate for the entry at `addr`.
    fn remove(&mut self, addr: usize) {
        let held = &mut self.sorted[..self.held];
        if let Some(i) = held.iter().position(|c| c.addr == addr) {
            held.copy_within(i + 1.., i);
            self.held -= 1;
            self.sorted[self.held] = Candidate::default();
        }
    }

    /// Takes out the best candidate.
    fn pop_best(&mut self) -> Option<Candidate> {
        self.held = self.held.checked_sub(1)?;
        Some(std::mem::take(&mut self.sorted[self.held]))
    }

    /// Forgets every candidate.
    fn clear(&mut self) {
        self.sorted = Default::default();
        self.held = 0;
    }

    /// The candidates held, worst first.
    #[cfg(test)]
    fn held(&self) -> &[Candidate] {
        &self.sorted[..self.held]
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
            cands: Candidates::default(),
            // Pools used side by side start on different shards.
            hand: Hand {
                shard: rng.usize(..),
                db: 0,
                cursor: 0,
                ahead: None,
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
        self.cands.clear();
        self.hand.ahead = None;
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
        self.cands.held
    }

    /// True when no candidate is held.
    pub fn is_empty(&self) -> bool {
        self.cands.held == 0
    }
}

/// Where a sampling hand stands: the next tag of a database of a shard.
#[derive(Clone, Copy, Debug)]
struct Hand {
    /// The shard, of any number (a new pool's is random): see
    /// [`Hand::shard`].
    shard: usize,
    db: usize,
    /// The position in the key table where the next step starts (see
    /// [`crate::key_table::KeyTable::hand_step`]).
    cursor: usize,
    /// The step before `cursor`, taken but not yet sampled: a round steps
    /// the hand for the next one, which finds the entries it reads loaded.
    ahead: Option<HandSpan>,
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
        self.ahead = None;
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
            if pool.paid_for > 0 && !pool.is_empty() {
                // An earlier round's samples cover this eviction.
                pool.paid_for -= 1;
            } else {
                // A shard smaller than the round yields fewer samples,
                // which pay for fewer evictions (one at least, as before).
                let taken = self.sample_round(policy, per_round, decay, pool);
                pool.paid_for = (taken / samples).clamp(1, EVICTIONS_PER_ROUND) - 1;
                if taken == 0 && pool.is_empty() {
                    return None;
                }
            }
            // The best candidate that still qualifies goes.
            while let Some(c) = pool.cands.pop_best() {
                let evicted = self.evict_candidate(policy, c, on_evicted);
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
        c: Candidate,
        on_evicted: &mut dyn FnMut(usize, &[u8]),
    ) -> Option<Evicted> {
        let mut shard = self.try_lock_shard(c.shard as usize)?;
        let db = c.db as usize;
        let keys = &shard.dbs[db].keys;
        // It may be gone since it was sampled. Any key qualifies under an
        // allkeys policy.
        let at = keys.position_of_addr(c.tag, c.addr)?;
        if policy.volatile_only() && keys.at(at)?.expire_at().is_none() {
            return None;
        }
        Some(shard.evict_at(db, at, on_evicted))
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
            // The clock accesses are stamped with (a worker's pipelined
            // commands share readings of it): reading the system clock
            // every round was about 1% of a worker's time under a SET load
            // at the limit.
            now_ms: crate::clock::command_now_ms(),
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
    /// hand reaches every part of every table once per turn.
    ///
    /// Reading a sampled key's access clock is a miss to memory, and was
    /// most of the time spent evicting. So under LRU a round reads and
    /// offers only keys of its oldest access generation when it can tell
    /// (see `key_table.rs` and [`HandSpan::reads`]): about a quarter of
    /// what it samples under a steady SET load (1.2 keys per eviction, of
    /// 5 sampled). And each round takes the hand's
    /// next step too and starts loading the entries the next round will
    /// read, which are ready by the time it comes (a few commands later).
    fn sample_at_hand(&self, rank: Ranking, samples: usize, pool: &mut EvictionPool) -> usize {
        let shards = self.shard_count();
        // Under LRU a round reads at most the samples of one eviction when
        // it can tell the older keys.
        let oldest_only =
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
                let span = pool.hand.ahead.take().unwrap_or_else(|| {
                    let (span, next) = keys.hand_step(pool.hand.cursor, samples);
                    pool.hand.cursor = next;
                    span
                });
                if pool.hand.cursor == 0 {
                    // That was the table's last step.
                    pool.hand.db += 1;
                } else {
                    let (next_span, next) = keys.hand_step(pool.hand.cursor, samples);
                    pool.hand.cursor = next;
                    // Hints: the table may change before the next round.
                    next_span.reads(oldest_only).0.for_each(|at| {
                        if let Some(e) = keys.at(at) {
                            e.prefetch();
                        }
                    });
                    pool.hand.ahead = Some(next_span);
                }
                let (reads, min_age) = span.reads(oldest_only);
                for at in reads {
                    // A key read since the hand passed is younger now.
                    match keys.aged_at(at) {
                        Some((e, age)) if age >= min_age => {
                            pool.cands.offer(rank.score(e), (i, db), e);
                        }
                        _ => {}
                    }
                }
                let sampled = span.entries();
                if sampled > 0 {
                    return sampled;
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
                let at = if policy.volatile_only() {
                    table
                        .volatile
                        .random(&mut pool.rng)
                        .and_then(|hash| table.keys.probe(hash, |e| e.expire_at().is_some()))
                } else {
                    table.keys.random_position(&mut pool.rng)
                };
                if let Some(at) = at {
                    evicted = Some(shard.evict_at(db, at, on_evicted));
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
        shard.dbs[db].keys.at(at)?;
        Some(shard.evict_at(db, at, on_evicted))
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

impl Shard {
    /// Removes the entry at (occupied) position `at` of `db`'s table for
    /// eviction, signalling its key's watchers and telling `on_evicted`
    /// while the shard is still locked (the AOF logs the deletion in its
    /// place among the commands on that key).
    fn evict_at(
        &mut self,
        db: usize,
        at: usize,
        on_evicted: &mut dyn FnMut(usize, &[u8]),
    ) -> Evicted {
        let entry = self.remove_entry_at(db, at, None);
        self.signal(db, entry.key());
        on_evicted(db, entry.key());
        self.stats.evicted_keys += 1;
        Evicted { db, entry }
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
        // Kept alive: a live entry's address names it.
        let entries: Vec<Entry> = (0..40)
            .map(|i| Entry::with_key_value(format!("k{i}").as_bytes(), v(), None))
            .collect();
        for (i, e) in (0u64..).zip(&entries) {
            pool.cands.offer(i * 7 % 41, (0, 0), e);
        }
        assert_eq!(pool.len(), POOL_SIZE);
        let scores = |pool: &EvictionPool| -> Vec<u64> {
            pool.cands.held().iter().map(|c| c.score).collect()
        };
        assert!(scores(&pool).windows(2).all(|w| w[0] <= w[1]));
        // The 16 highest of 40 distinct scores 0..41 (minus one) are kept.
        assert!(scores(&pool)[0] >= 40 - POOL_SIZE as u64);
        // Too low a score for a full pool is ignored; a tie with the best
        // goes before it; the worst makes room.
        let worst = scores(&pool)[0];
        pool.cands.offer(worst, (0, 0), &entries[0]);
        assert_eq!(scores(&pool)[0], worst);
        let best = *pool.cands.held().last().unwrap();
        pool.cands.offer(best.score, (3, 1), &entries[1]);
        assert!(scores(&pool)[0] > worst);
        assert_eq!(pool.cands.pop_best().unwrap().addr, best.addr);
        let tie = pool.cands.pop_best().unwrap();
        assert_eq!((tie.score, tie.shard, tie.db), (best.score, 3, 1));
        assert_eq!(tie.addr, entries[1].addr());
        assert_eq!(pool.len(), POOL_SIZE - 2);
        // An entry offered again is held once, at its new score.
        let held = |pool: &EvictionPool, e: &Entry| {
            pool.cands
                .held()
                .iter()
                .filter(|c| c.addr == e.addr())
                .count()
        };
        let second = pool.cands.held()[POOL_SIZE - 4].addr;
        let second = entries.iter().find(|e| e.addr() == second).unwrap();
        pool.cands.offer(best.score + 1, (0, 0), second);
        assert_eq!(held(&pool, second), 1);
        assert_eq!(pool.len(), POOL_SIZE - 2);
        pool.cands.offer(best.score, (0, 0), &entries[2]);
        assert_eq!(held(&pool, &entries[2]), 1);
        assert_eq!(pool.len(), POOL_SIZE - 1);
        assert_eq!(pool.cands.pop_best().unwrap().addr, second.addr());
        pool.clear();
        assert!(pool.is_empty());
        assert!(pool.cands.pop_best().is_none());
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

    /// A round's step taken ahead names positions: the table may shrink
    /// under it before the next round reads them.
    #[test]
    fn a_step_taken_ahead_survives_its_table_shrinking() {
        let ks = numbered(1, 1, 400);
        let mut pool = EvictionPool::default();
        ks.sample_round(Policy::AllKeysLru, 30, 0, &mut pool);
        let ahead = pool.hand.ahead.expect("a round steps the hand ahead");
        // Most keys go and the table shrinks under that step: its
        // positions now name empty slots or lie past the table's end.
        let mut k = ks.lock_all();
        for i in 0..390 {
            assert!(k.delete(0, format!("k{i}").as_bytes()));
        }
        drop(k);
        pool.cands.clear();
        assert_eq!(pool.hand.ahead, Some(ahead));
        // The round counts the keys the step saw when it was taken.
        let sampled = ks.sample_round(Policy::AllKeysLru, 30, 0, &mut pool);
        assert_eq!(sampled, ahead.entries());
        let shard = ks.try_lock_shard(0).unwrap();
        for c in pool.cands.held() {
            let at = shard.dbs[0].keys.position_of_addr(c.tag, c.addr);
            assert!(at.is_some(), "a candidate that is not in the table");
        }
        drop(shard);
        // Eviction goes on to the last key.
        let mut gone = 0;
        while ks
            .evict_one(Policy::AllKeysLru, 5, &mut pool, &mut |_, _| {})
            .is_some()
        {
            gone += 1;
        }
        assert_eq!(gone, 10);
    }

    /// Candidates name their entries by address and tag only: after their
    /// table has grown through resizes (every entry moved), each is still
    /// found, and one whose key was deleted is not.
    #[test]
    fn candidates_are_found_after_their_table_changes() {
        let ks = numbered(1, 1, 40);
        let mut pool = EvictionPool::default();
        ks.sample_round(Policy::AllKeysLru, 40, 0, &mut pool);
        assert_eq!(pool.len(), POOL_SIZE);
        let key_of = |addr: usize| {
            let shard = ks.try_lock_shard(0).unwrap();
            let e = shard.dbs[0].keys.iter().find(|e| e.addr() == addr);
            e.unwrap().key().to_vec()
        };
        let held: Vec<(Candidate, Vec<u8>)> = pool
            .cands
            .held()
            .iter()
            .map(|&c| (c, key_of(c.addr)))
            .collect();
        let mut k = ks.lock_all();
        for i in 40..2000 {
            k.set(0, format!("k{i}").as_bytes(), v());
        }
        let deleted: Vec<&[u8]> = held.iter().step_by(2).map(|(_, key)| &key[..]).collect();
        for key in &deleted {
            assert!(k.delete(0, key));
        }
        drop(k);
        for (c, key) in &held {
            let gone = ks.evict_candidate(Policy::AllKeysLru, *c, &mut |_, _| {});
            let want = (!deleted.contains(&&key[..])).then_some(&key[..]);
            assert_eq!(gone.as_ref().map(|e| e.entry.key()), want);
        }
        assert_eq!(ks.db_sizes()[0].0, 2000 - POOL_SIZE);
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
