//! A counting wrapper around mimalloc, so `used_memory` is exact.
//!
//! Counts are kept in cache-line-padded slots picked per thread, so two
//! threads allocating at once do not fight over one counter; reading the
//! total sums the slots.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

const SLOTS: usize = 16;

#[repr(align(64))]
struct Slot(AtomicIsize);

static COUNTS: [Slot; SLOTS] = [const { Slot(AtomicIsize::new(0)) }; SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MY_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn slot() -> &'static AtomicIsize {
    let i = MY_SLOT
        .try_with(|s| {
            if s.get() == usize::MAX {
                s.set(NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS);
            }
            s.get()
        })
        .unwrap_or(0);
    &COUNTS[i].0
}

/// Bytes currently allocated through the global allocator.
pub fn used_memory() -> usize {
    COUNTS
        .iter()
        .map(|s| s.0.load(Ordering::Relaxed))
        .sum::<isize>()
        .max(0) as usize
}

/// The global allocator: mimalloc, counted.
pub struct Counting;

// SAFETY: every method forwards to mimalloc with the caller's arguments
// unchanged and only adds bookkeeping; the counters never affect the
// returned memory. Every integration test runs through this allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { mimalloc::MiMalloc.alloc(layout) };
        if !p.is_null() {
            slot().fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) };
        slot().fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) };
        if !p.is_null() {
            slot().fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            slot().fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}

/// Memory mimalloc holds from the operating system, for INFO memory's
/// `allocator_*` fields.
#[derive(Clone, Copy, Debug)]
pub struct AllocatorStats {
    /// Bytes mimalloc has committed (read/write pages it keeps for its
    /// heaps): allocated bytes plus what its pages hold free.
    pub committed: u64,
}

/// Asks mimalloc how much memory it holds.
pub fn allocator_stats() -> AllocatorStats {
    let mut v = [0usize; 8];
    let [elapsed, user, system, rss, peak_rss, commit, peak_commit, faults] = &mut v;
    // SAFETY: mi_process_info only writes one usize through each pointer,
    // and each points to a distinct live element of `v`. Tested below.
    unsafe {
        libmimalloc_sys::mi_process_info(
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
        committed: v[5] as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_memory_covers_what_mimalloc_handed_out() {
        let layout = Layout::from_size_align(8 << 20, 8).unwrap();
        // SAFETY: a valid non-zero layout; the block is freed with the same
        // layout right after.
        let p = unsafe { mimalloc::MiMalloc.alloc(layout) };
        assert!(!p.is_null());
        let committed = allocator_stats().committed;
        // SAFETY: `p` came from this allocator with this layout.
        unsafe { mimalloc::MiMalloc.dealloc(p, layout) };
        assert!(committed >= 8 << 20, "committed {committed}");
    }
}
