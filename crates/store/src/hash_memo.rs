//! Key hashes the pipeline look-ahead computed, found again by address.
//!
//! A worker about to run a batch of pipelined commands hashes their keys
//! to prefetch them; running each command then hashed the same key twice
//! more (to pick the shard to lock, and to look it up): three `ahash`
//! calls per key where one does. The look-ahead now records each hash
//! here under the key's address and length, and [`key_hash`] answers from
//! the record when asked about the same bytes.
//!
//! Identity by address is sound because a [`Scope`] borrows the request
//! buffer the keys live in for as long as records can be found: while it
//! lives, the buffer can be neither changed nor freed, so a slice with a
//! recorded address and length can only be those same, unchanged bytes.
//! When the scope ends, every record it made is forgotten (a generation
//! number, so forgetting costs nothing per record).

use std::cell::Cell;
use std::marker::PhantomData;

use crate::dict::hash_key;

/// Records kept per thread: a look-ahead batch's keys (32) with room for
/// collisions of the direct-mapped index.
const RECORDS: usize = 64;

/// One remembered hash.
#[derive(Clone, Copy)]
struct Record {
    addr: usize,
    len: usize,
    /// The scope that made it; stale once that scope ended.
    generation: u64,
    hash: u64,
}

const EMPTY: Record = Record {
    addr: 0,
    len: 0,
    generation: 0,
    hash: 0,
};

thread_local! {
    /// Odd while a scope is open on this thread; every scope gets its own.
    static GENERATION: Cell<u64> = const { Cell::new(0) };
    static MEMO: [Cell<Record>; RECORDS] = const { [const { Cell::new(EMPTY) }; RECORDS] };
}

/// Where `addr`'s record lives: keys in a request buffer are at least a
/// few bytes apart, so their addresses' low bits spread them.
#[inline]
fn slot_of(addr: usize) -> usize {
    (addr >> 2) % RECORDS
}

/// While alive, hashes recorded for slices of the borrowed buffer are
/// found by [`key_hash`]. Not `Send`: the records are per thread.
pub struct Scope<'buf> {
    generation: u64,
    _buffer: PhantomData<(&'buf [u8], *const ())>,
}

impl<'buf> Scope<'buf> {
    /// Opens a scope over `buffer`, the bytes whose slices will be recorded.
    /// A scope opened inside another (not expected) just makes the outer
    /// one's records unfindable.
    pub fn open(buffer: &'buf [u8]) -> Self {
        let _ = buffer;
        let generation = GENERATION.with(|g| {
            let next = (g.get() | 1) + 2;
            g.set(next);
            next
        });
        Scope {
            generation,
            _buffer: PhantomData,
        }
    }

    /// Records that `key`, a slice of this scope's buffer, hashes to `hash`
    /// (as [`hash_key`] computes it).
    #[inline]
    pub fn remember(&self, key: &'buf [u8], hash: u64) {
        debug_assert_eq!(hash, hash_key(key));
        record(key, self.generation, hash);
    }
}

/// Stores `hash` as `key`'s, for the scope with `generation`.
#[inline]
fn record(key: &[u8], generation: u64, hash: u64) {
    let addr = key.as_ptr() as usize;
    MEMO.with(|m| {
        m[slot_of(addr)].set(Record {
            addr,
            len: key.len(),
            generation,
            hash,
        })
    });
}

impl Drop for Scope<'_> {
    /// Makes the scope's records unfindable: no scope is open afterwards.
    fn drop(&mut self) {
        GENERATION.with(|g| g.set((g.get() + 1) & !1));
    }
}

/// `key`'s hash, as [`hash_key`] computes it, from the record an open
/// [`Scope`] made for these bytes when there is one.
#[inline]
pub fn key_hash(key: &[u8]) -> u64 {
    let generation = GENERATION.with(Cell::get);
    if generation & 1 == 1 {
        let addr = key.as_ptr() as usize;
        let r = MEMO.with(|m| m[slot_of(addr)].get());
        if r.generation == generation && r.addr == addr && r.len == key.len() {
            return r.hash;
        }
    }
    hash_key(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded value no real hash would give, to tell a record apart
    /// from a computed hash.
    const FAKE: u64 = 0x1234_5678;

    fn remember_fake(scope: &Scope<'_>, key: &[u8]) {
        record(key, scope.generation, FAKE);
    }

    #[test]
    fn records_are_found_only_for_the_same_bytes_while_the_scope_lives() {
        let buffer = b"*2\r\n$3\r\nGET\r\n$5\r\nkey:1\r\n".to_vec();
        let key = &buffer[17..22];
        assert_eq!(key, b"key:1");
        {
            let scope = Scope::open(&buffer);
            scope.remember(key, hash_key(key));
            assert_eq!(key_hash(key), hash_key(key));
            remember_fake(&scope, key);
            assert_eq!(key_hash(key), FAKE);
            // Same address, another length; another address, same bytes.
            assert_eq!(key_hash(&key[..4]), hash_key(b"key:"));
            assert_eq!(key_hash(b"key:1"), hash_key(key));
        }
        assert_eq!(key_hash(key), hash_key(key));
    }

    #[test]
    fn an_inner_scope_leaves_no_scope_open() {
        let buffer = b"abcdef".to_vec();
        let outer = Scope::open(&buffer);
        remember_fake(&outer, &buffer[..3]);
        {
            let inner = Scope::open(&buffer);
            assert_eq!(key_hash(&buffer[..3]), hash_key(b"abc"));
            remember_fake(&inner, &buffer[3..]);
            assert_eq!(key_hash(&buffer[3..]), FAKE);
        }
        assert_eq!(key_hash(&buffer[..3]), hash_key(b"abc"));
        drop(outer);
        let later = Scope::open(&buffer);
        assert_eq!(key_hash(&buffer[3..]), hash_key(b"def"));
        drop(later);
    }
}
