//! A counting wrapper around mimalloc, so `used_memory` is exact.
//!
//! What is counted is the size of each block mimalloc hands out (its size
//! class), not the size asked for: Redis counts `zmalloc_size`, the
//! allocator's usable size, so `maxmemory` and bytes-per-key figures mean
//! the same here as there, allocator rounding included.
//!
//! mimalloc is called directly rather than through the `mimalloc` crate,
//! whose allocator always takes the aligned entry points: for the usual
//! small alignments the plain `mi_malloc` path is shorter (callgrind: ~40
//! instructions less per allocation, two allocations per SET).
//!
//! Counts are kept in cache-line-padded slots picked per thread, so two
//! threads allocating at once do not fight over one counter; reading the
//! total sums the slots. Each thread also keeps its own net count
//! ([`thread_net_bytes`]), exact whatever threads share a slot: eviction
//! measures with it what one deletion freed, as Redis measures
//! `zmalloc_used_memory` around a deletion on its single thread.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::ffi::c_void;

use libmimalloc_sys as mi;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use vireo_store::entry_alloc::{mimalloc_block_size, MIMALLOC_MODEL_MAX};

const SLOTS: usize = 16;

#[repr(align(64))]
struct Slot(AtomicIsize);

static COUNTS: [Slot; SLOTS] = [const { Slot(AtomicIsize::new(0)) }; SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

/// The calling thread's counting state.
struct ThreadCount {
    /// Its slot in `COUNTS`, `usize::MAX` until its first allocation.
    slot: Cell<usize>,
    /// Bytes it allocated minus bytes it freed (wrapping: only
    /// differences between two readings mean anything).
    net: Cell<isize>,
}

thread_local! {
    static MINE: ThreadCount = const {
        ThreadCount {
            slot: Cell::new(usize::MAX),
            net: Cell::new(0),
        }
    };
}

/// Adds `bytes` (negative for a free) to the calling thread's slot and
/// net count. (A thread that is ending, its state gone, counts in slot 0.)
#[inline]
fn count(bytes: isize) {
    let i = MINE
        .try_with(|t| {
            t.net.set(t.net.get().wrapping_add(bytes));
            if t.slot.get() == usize::MAX {
                t.slot
                    .set(NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS);
            }
            t.slot.get()
        })
        .unwrap_or(0);
    COUNTS[i].0.fetch_add(bytes, Ordering::Relaxed);
}

/// Bytes the calling thread has allocated minus those it has freed,
/// through the global allocator and in entry blocks. Only the difference
/// between two readings on one thread means anything: what that thread
/// allocated (positive) or freed (negative) in between, whoever else
/// allocates meanwhile.
#[inline]
pub fn thread_net_bytes() -> isize {
    let global = MINE.try_with(|t| t.net.get()).unwrap_or(0);
    global.wrapping_add(vireo_store::entry_alloc::thread_net_bytes())
}

/// Bytes currently allocated: through the global allocator, plus the
/// keyspace's entry blocks, which come from pages of their own (counted at
/// their 8-byte classes, not the pages' free room; see
/// [`vireo_store::entry_alloc`]), plus SQL databases' growing images, in
/// mappings of their own ([`vireo_sql::memory::mapped_bytes`]).
pub fn used_memory() -> usize {
    // Only the slots handed out so far can be non-zero: with a few
    // threads, summing them alone halves the cost of a reading, which
    // `maxmemory` takes before every command.
    let handed_out = NEXT_SLOT.load(Ordering::Relaxed).min(SLOTS);
    let global = COUNTS[..handed_out]
        .iter()
        .map(|s| s.0.load(Ordering::Relaxed))
        .sum::<isize>()
        .max(0) as usize;
    global + vireo_store::entry_alloc::live_bytes() + vireo_sql::memory::mapped_bytes()
}

/// Alignment every mimalloc block has: block sizes are whole machine
/// words. (Not 16: a 24-byte block is only 8-aligned, which is why
/// mimalloc's own aligned path checks each candidate block.)
const PLAIN_ALIGN: usize = std::mem::size_of::<usize>();

/// Bytes counted for the live block `ptr`, allocated for `size` bytes:
/// its usable size. (A block `realloc` shrank in place counts as the class
/// of its new size, slightly less than it holds; what is counted when it
/// is freed is the same, so the total never drifts.)
///
/// # Safety
/// `ptr` must be a live block from this allocator, asked for with `size`.
#[inline]
unsafe fn counted(ptr: *mut u8, size: usize) -> isize {
    if size <= MIMALLOC_MODEL_MAX {
        mimalloc_block_size(size) as isize
    } else {
        // SAFETY: the caller's contract.
        unsafe { mi::mi_usable_size(ptr as *const c_void) as isize }
    }
}

/// True when `layout` can use mimalloc's unaligned entry points.
fn plain(layout: &Layout) -> bool {
    layout.align() <= PLAIN_ALIGN
}

/// The global allocator: mimalloc, counted.
pub struct Counting;

// SAFETY: every method forwards to mimalloc, which returns blocks of at
// least the requested size aligned to `layout.align()`: the plain entry
// points only for layouts `plain` accepts (every mimalloc block is
// word-aligned), the aligned ones otherwise. `mi_free` frees blocks from either. The counters
// never affect the returned memory. Every test and benchmark runs through
// this allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe {
            if plain(&layout) {
                mi::mi_malloc(layout.size())
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align())
            }
        } as *mut u8;
        if !p.is_null() {
            // SAFETY: `p` was just allocated for `layout.size()` bytes.
            count(unsafe { counted(p, layout.size()) });
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract: `ptr` is live, from `layout`.
        let bytes = unsafe { counted(ptr, layout.size()) };
        unsafe { mi::mi_free(ptr as *mut c_void) };
        count(-bytes);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe {
            if plain(&layout) {
                mi::mi_zalloc(layout.size())
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align())
            }
        } as *mut u8;
        if !p.is_null() {
            // SAFETY: `p` was just allocated for `layout.size()` bytes.
            count(unsafe { counted(p, layout.size()) });
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract: `ptr` is live, from `layout`.
        let old = unsafe { counted(ptr, layout.size()) };
        let p = unsafe {
            let new = Layout::from_size_align_unchecked(new_size, layout.align());
            if plain(&new) {
                mi::mi_realloc(ptr as *mut c_void, new_size)
            } else {
                mi::mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align())
            }
        } as *mut u8;
        if !p.is_null() {
            // SAFETY: `p` is the live block for `new_size` bytes.
            let new = unsafe { counted(p, new_size) };
            count(new - old);
        }
        p
    }
}

/// Memory the allocators hold from the operating system, for INFO
/// memory's `allocator_*` fields.
#[derive(Clone, Copy, Debug)]
pub struct AllocatorStats {
    /// Bytes mimalloc has committed (read/write pages it keeps for its
    /// heaps), plus the pages mapped for entry blocks and SQL images:
    /// allocated bytes plus what those pages hold free.
    pub committed: u64,
}

/// Asks mimalloc and the entry block allocator how much memory they hold.
pub fn allocator_stats() -> AllocatorStats {
    let mut v = [0usize; 8];
    let [elapsed, user, system, rss, peak_rss, commit, peak_commit, faults] = &mut v;
    // SAFETY: mi_process_info only writes one usize through each pointer,
    // and each points to a distinct live element of `v`. Tested below.
    unsafe {
        mi::mi_process_info(
            elapsed,
            user,
            system,
            rss,
            peak_rss,
            commit,
            peak_commit,
            faults,
        );
    }
    AllocatorStats {
        committed: (v[5]
            + vireo_store::entry_alloc::mapped_bytes()
            + vireo_sql::memory::mapped_bytes()) as u64,
    }
}

/// Returns the free pages of the calling thread's heap to the system now
/// (mimalloc otherwise purges them only later, during that thread's own
/// allocations: an idle worker that just freed the buffers of thousands of
/// idle connections would keep their pages resident indefinitely; 10,000
/// idle connections measured 13-17 KB of RSS each without this, 1 KB with
/// it). Also what MEMORY PURGE does on the worker it runs on.
pub fn purge_thread_heap() {
    // SAFETY: mi_collect takes a flag and touches only mimalloc's own
    // state for the calling thread; it is safe to call at any time from a
    // thread that uses mimalloc. Exercised by purging_keeps_the_heap_usable.
    unsafe { mi::mi_collect(true) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_sizes_are_mimallocs_size_classes() {
        let mut bad = Vec::new();
        let big = [100_000, 300_000, 1 << 20, 3_000_001, 40 << 20];
        for size in (1..=MIMALLOC_MODEL_MAX + 1).chain(big) {
            let layout = Layout::from_size_align(size, 8).unwrap();
            // SAFETY: a valid non-zero layout, freed right after.
            let p = unsafe { Counting.alloc(layout) };
            // SAFETY: `p` is a live mimalloc block.
            let usable = unsafe { mi::mi_usable_size(p as *const c_void) };
            // SAFETY: `p` came from this allocator with this layout.
            unsafe { Counting.dealloc(p, layout) };
            if mimalloc_block_size(size) != usable && bad.len() < 10 {
                bad.push((size, mimalloc_block_size(size), usable));
            }
        }
        assert!(bad.is_empty(), "{bad:?}");
    }

    #[test]
    fn a_threads_net_count_is_its_own_allocations() {
        let layout = Layout::from_size_align(1000, 8).unwrap();
        let before = thread_net_bytes();
        // SAFETY: a valid non-zero layout, freed below with the same one.
        let p = unsafe { Counting.alloc(layout) };
        let held = thread_net_bytes() - before;
        assert_eq!(held, mimalloc_block_size(1000) as isize);
        // Another thread's allocations, and its free of this block, leave
        // this thread's count alone and show in its own.
        let p = p as usize;
        let other = std::thread::spawn(move || {
            let start = thread_net_bytes();
            // SAFETY: as above; the block is live, from this layout.
            let q = unsafe { Counting.alloc(layout) };
            unsafe { Counting.dealloc(p as *mut u8, layout) };
            let net = thread_net_bytes() - start;
            // SAFETY: as above.
            unsafe { Counting.dealloc(q, layout) };
            net
        })
        .join()
        .unwrap();
        assert_eq!(other, 0, "one block allocated, one freed");
        assert_eq!(thread_net_bytes() - before, held);
    }

    #[test]
    fn committed_memory_covers_what_mimalloc_handed_out() {
        let layout = Layout::from_size_align(8 << 20, 8).unwrap();
        // SAFETY: a valid non-zero layout; the block is freed with the same
        // layout right after.
        let p = unsafe { Counting.alloc(layout) };
        assert!(!p.is_null());
        let committed = allocator_stats().committed;
        // SAFETY: `p` came from this allocator with this layout.
        unsafe { Counting.dealloc(p, layout) };
        assert!(committed >= 8 << 20, "committed {committed}");
    }

    #[test]
    fn purging_keeps_the_heap_usable() {
        let blocks: Vec<Vec<u8>> = (0..1000).map(|i| vec![i as u8; 16 * 1024]).collect();
        drop(blocks);
        purge_thread_heap();
        let again: Vec<Vec<u8>> = (0..100).map(|i| vec![i as u8; 16 * 1024]).collect();
        assert!(again.iter().enumerate().all(|(i, b)| b[100] == i as u8));
    }
}
