//! Redis's portable `lrand48()` (its `rand.c`): a 48-bit linear
//! congruential generator behind `math.random`. Redis 7.0 never reseeds it
//! between scripts (only `math.randomseed` does): its state starts at
//! `0x1234ABCD330E` when the server starts and runs on across scripts.
//!
//! Redis has one generator per process and runs one script at a time.
//! Here each run takes the process's state when it starts and hands its
//! own back when it ends ([`Rand48::take_shared`], [`Rand48::give_back`]),
//! so runs one after the other — on any worker, in the EVAL or the
//! FUNCTION VM, before or after SCRIPT FLUSH makes a VM anew — draw one
//! sequence, and a seeded run stays deterministic whatever runs beside
//! it. Runs that overlap on different workers start from the same state
//! (of those that drew, the last to end decides where the sequence goes
//! on).

use std::sync::atomic::{AtomicU64, Ordering};

/// Multiplier of the 48-bit LCG (`a` in `x' = a*x + c mod 2^48`).
const MULTIPLIER: u64 = 0x5_DEEC_E66D;
/// Increment of the LCG.
const INCREMENT: u64 = 0xB;
/// Low 16 bits every seed gets, as in POSIX `srand48`.
const SEED_LOW: u64 = 0x330E;
/// Mask of the 48 state bits.
const MASK: u64 = (1 << 48) - 1;

/// Largest value [`Rand48::next`] can return plus one (`REDIS_LRAND48_MAX`
/// is `INT32_MAX`; Redis computes `lrand48() % MAX`).
pub const RAND48_MAX: u32 = i32::MAX as u32;

/// State before any seeding (Redis's `X2:X1:X0` initial words).
const INITIAL_STATE: u64 = 0x1234_ABCD_330E;

/// The process's generator between runs (see the module comment).
static SHARED_STATE: AtomicU64 = AtomicU64::new(INITIAL_STATE);

/// The generator state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rand48 {
    /// The 48 bits of state.
    state: u64,
}

impl Default for Rand48 {
    /// The generator as the server starts it (never seeded).
    fn default() -> Self {
        Rand48 {
            state: INITIAL_STATE,
        }
    }
}

impl Rand48 {
    /// The process's generator as the last run left it.
    pub fn take_shared() -> Rand48 {
        Rand48 {
            state: SHARED_STATE.load(Ordering::Acquire),
        }
    }

    /// Makes this state the process's, for the next run to go on from.
    pub fn give_back(&self) {
        SHARED_STATE.store(self.state, Ordering::Release);
    }

    /// Reseeds: the high 32 state bits are the seed, the low 16 are 0x330E.
    pub fn seed(&mut self, seed: i32) {
        self.state = ((u64::from(seed as u32) << 16) | SEED_LOW) & MASK;
    }

    /// The next value in `0..2^31` (the top 31 bits of the new state).
    pub fn next(&mut self) -> u32 {
        self.state = (self.state.wrapping_mul(MULTIPLIER).wrapping_add(INCREMENT)) & MASK;
        (self.state >> 17) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Rand48 {
        /// A generator seeded as `srand48(seed)`.
        pub(crate) fn new(seed: i32) -> Self {
            let mut r = Rand48::default();
            r.seed(seed);
            r
        }
    }

    /// The values after `redisSrand48(0)` and `redisSrand48(-7)`, as Redis's
    /// `rand.c` computes them (compiled and run once to get these).
    #[test]
    fn matches_redis_lrand48() {
        let mut r = Rand48::new(0);
        let got: Vec<u32> = (0..5).map(|_| r.next()).collect();
        assert_eq!(
            got,
            vec![366850414, 1610402240, 206956554, 1869309841, 1239749840]
        );
        let mut r = Rand48::new(-7);
        let got: Vec<u32> = (0..3).map(|_| r.next()).collect();
        assert_eq!(got, vec![161516272, 1756144977, 1991260049]);
    }

    /// The unseeded sequence Redis starts with.
    #[test]
    fn matches_redis_initial_state() {
        let mut r = Rand48::default();
        let got: Vec<u32> = (0..3).map(|_| r.next()).collect();
        assert_eq!(got, vec![851401618, 1804928587, 758783491]);
    }

    /// Reseeding restarts the sequence.
    #[test]
    fn reseed_restarts() {
        let mut r = Rand48::new(42);
        let a = r.next();
        r.seed(42);
        assert_eq!(r.next(), a);
    }
}
