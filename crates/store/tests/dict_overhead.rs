//! Checks `Dict::overhead_bytes` against what the allocator actually hands
//! out, and reports the structural cost per entry.
//!
//! This lives in its own test binary because it installs a counting global
//! allocator. Counts are kept per thread so that the test harness and other
//! tests running concurrently do not disturb them.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use vireo_store::dict::{hash_key, Dict};

/// Wraps the system allocator and tracks, per thread, the net number of
/// heap bytes allocated.
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

/// Adds `delta` to the current thread's count (ignored during thread
/// teardown, when the thread-local may already be gone).
fn count(delta: isize) {
    let _ = LIVE.try_with(|c| c.set(c.get() + delta));
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the only addition is updating a thread-local counter, which
// does not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract of `GlobalAlloc::alloc`.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract of `GlobalAlloc::alloc_zeroed`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract of `GlobalAlloc::dealloc`.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded contract of `GlobalAlloc::realloc`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Net bytes allocated so far by the current thread.
fn live() -> isize {
    LIVE.with(Cell::get)
}

/// Fixed-size key that owns no heap memory, so every byte the table
/// allocates is table structure.
fn fixed_key(i: usize) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&(i as u64).to_le_bytes());
    k
}

#[test]
fn dict_overhead_bytes_matches_allocator() {
    for n in [1usize, 10, 1000, 100_000, 700_000] {
        let keys: Vec<[u8; 16]> = (0..n).map(fixed_key).collect();
        let hashes: Vec<u64> = keys.iter().map(|k| hash_key(k)).collect();
        let before = live();
        let mut d: Dict<[u8; 16], u64> = Dict::new();
        assert_eq!(live(), before, "new() allocates nothing");
        for (k, &h) in keys.iter().zip(&hashes) {
            d.insert(h, *k, 0);
        }
        let used = (live() - before) as usize;
        assert_eq!(used, d.overhead_bytes(), "n={n}");
        let inline = 16 + 8;
        let per_entry = (used as f64 - (n * inline) as f64) / n as f64;
        // Fixed structure (8 B hash+link) + buckets (4-8 B) + spare arena
        // capacity (< 50% of a slot; tiny tables round up to 4 slots).
        if n >= 1000 {
            assert!(
                per_entry < 8.0 + 8.0 + 0.5 * (8 + inline) as f64,
                "{per_entry}"
            );
        }
        for (k, &h) in keys.iter().zip(&hashes) {
            d.remove(h, k);
        }
        assert_eq!(d.overhead_bytes(), 0);
        assert_eq!(live(), before, "everything freed once empty");
        // Printed only now: captured output allocates.
        println!(
            "n={n:>7}: {used} bytes total, {per_entry:.1} bytes/entry beyond the \
             {inline}-byte key+value"
        );
    }
}

#[test]
fn dict_overhead_excludes_key_heap() {
    let keys: Vec<Vec<u8>> = (0..5000).map(|i| format!("key:{i}").into_bytes()).collect();
    // The hasher allocates its random seed once, on first use in the
    // process: make sure that is not counted here (it was when this test
    // happened to run first).
    hash_key(b"warm-up");
    let before = live();
    let mut d: Dict<Vec<u8>, ()> = Dict::new();
    for k in &keys {
        d.insert(hash_key(k), k.clone(), ());
    }
    let used = (live() - before) as usize;
    // Everything allocated is either table structure or the keys' buffers.
    let key_heap: usize = d.iter().map(|(k, _)| k.capacity()).sum();
    assert_eq!(used, d.overhead_bytes() + key_heap);
    d.clear();
    assert_eq!(live(), before);
}
