//! Entry blocks in 8-byte size classes.
//!
//! Every key is one heap block ([`crate::entry`]). The global allocator,
//! mimalloc, has 16-byte steps up to 64 bytes and only four classes per
//! power of two above (80, 96, 112, 128, 160 … 256), so the usual 86-byte
//! block of a 16-byte key with a 64-byte value costs 96 bytes, and a
//! 40-byte one 48. Blocks whose size rounded up to 8 bytes is below
//! mimalloc's class are served here instead, at that rounded size; all
//! others (and everything above `SLAB_MAX`) still go to the global
//! allocator, where 8-byte rounding would save nothing.
//!
//! # Layout
//!
//! Memory comes straight from the operating system in 64 KiB pages
//! (`mmap`), each aligned to its size, so the page a block belongs to is
//! found by masking the block's address: no per-block header. A page
//! serves one class. It starts with a `Page` header (its pool, its block
//! size, how many blocks are live, a free list threaded through freed
//! blocks, and a bump offset to the blocks never handed out), followed by
//! the blocks.
//!
//! Pages belong to one of `POOLS` pools; a thread allocates from the pool
//! picked for it on first use (round robin), and a free goes to the pool of
//! the block's page, whichever thread frees it. A pool is one
//! `parking_lot` mutex over, per class, a list of pages with free blocks
//! and at most one empty page kept for reuse; a page that becomes empty
//! when another one is kept is released: its memory goes back to the
//! system (`madvise(MADV_DONTNEED)`) after DEL or FLUSHALL, and its address
//! waits for the next page any pool needs. Pages are never unmapped, so
//! the mappings stay as few and as large as the kernel merged them
//! (unmapping pages here and there would split them, and a process may
//! only have `vm.max_map_count` of them, 65530 by default).
//!
//! # Invariants
//!
//! * A page's `pool` and `size` are written when it is taken into use and
//!   do not change until it is released; every other header field, and the
//!   free-list links inside freed blocks, are only read or written with
//!   that pool's mutex held.
//! * A page is in its class's list of its pool exactly when it has live
//!   blocks and room for another; the kept empty page is in no list.
//! * A page is released only when it has no live block, so a live block's
//!   page (and the pool it points to, which is `'static`) outlives it, and
//!   a released page is written anew before any of its blocks is handed
//!   out again.
//!
//! # Thread caches
//!
//! A thread keeps the last few blocks it freed of each class and hands
//! them out again to its next allocations of the class, without taking a
//! pool's mutex or touching the blocks' page headers. Under `maxmemory`
//! every new key comes with an evicted one, mostly of the same class, and
//! the eviction's free waited on the victim's page header (a miss to
//! memory, 9% of a worker under a SET load) which the next allocation then
//! read again. A cached block stays live for its page (so the page is not
//! released), and its thread counts it apart (`Pool::cached`) so that it
//! is not counted as used.
//!
//! # Accounting
//!
//! These pages are not the global allocator's, so the counting allocator
//! does not see them. Each pool counts the bytes of its live blocks at their
//! class size ([`live_bytes`]); `used_memory` adds that, so free space in
//! pages is never counted and deleting keys lowers `used_memory` (eviction
//! relies on it). [`mapped_bytes`] is what the pages take from the system.

use std::alloc::{self, Layout};
use std::cell::{Cell, RefCell};
use std::mem::size_of;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Bytes of a page, and its alignment.
const PAGE: usize = 64 << 10;
/// Class step: every class is a multiple of this, which is also the
/// alignment of every block.
const GRAIN: usize = 8;
/// Largest block served from pages.
const SLAB_MAX: usize = 256;
/// Classes: class `c` holds blocks of `(c + 1) * GRAIN` bytes.
const CLASSES: usize = SLAB_MAX / GRAIN;
/// Pools: more than the threads usually allocating at once, so they rarely
/// meet on a lock.
const POOLS: usize = 8;
/// Freed blocks a thread keeps per class (see "Thread caches"): when full,
/// the older half goes back to the pages.
const CACHE_BLOCKS: usize = 32;

/// Largest request [`mimalloc_block_size`] is exact for (and checked
/// for); larger ones are rare, and the server asks mimalloc itself.
pub const MIMALLOC_MODEL_MAX: usize = 64 << 10;

/// The size of the block mimalloc, the global allocator, gives a request of
/// `size` bytes (its usable size), up to [`MIMALLOC_MODEL_MAX`], worked out
/// without a call into C. The server's counting allocator counts blocks
/// with it, and a test there checks it against `mi_usable_size` for every
/// such size.
/// mimalloc's size classes are one word, then even numbers of words up to
/// 8 words (its build aligns blocks of two words or more to 16 bytes), then
/// four classes per power of two: for a request of `w` words, with `b` the
/// top bit of `w - 1`, the class is `(5 + k) << (b - 2)` words where `k` is
/// the two bits of `w - 1` below `b`.
#[inline]
pub const fn mimalloc_block_size(size: usize) -> usize {
    let words = size.div_ceil(8);
    if words <= 1 {
        return 8;
    }
    if words <= 8 {
        return words.next_multiple_of(2) * 8;
    }
    let below = words - 1;
    let top = below.ilog2();
    let quarter = (below >> (top - 2)) & 3;
    ((5 + quarter) << (top - 2)) * 8
}

/// Per number of grains (`size.div_ceil(GRAIN)`, up to `CLASSES`): whether
/// pages serve that size, because 8-byte rounding beats mimalloc's class.
const SERVED: [bool; CLASSES + 1] = {
    let mut t = [false; CLASSES + 1];
    let mut g = 1;
    while g <= CLASSES {
        t[g] = g * GRAIN < mimalloc_block_size(g * GRAIN);
        g += 1;
    }
    t
};

/// The class index serving `size` bytes, if pages serve it.
#[inline]
fn slab_class(size: usize) -> Option<usize> {
    let grains = size.div_ceil(GRAIN);
    if grains <= CLASSES && SERVED[grains] {
        Some(grains - 1)
    } else {
        None
    }
}

/// Bytes a block of `size` bytes from [`alloc`] takes, as `used_memory`
/// counts it: its 8-byte class when pages serve it, mimalloc's class
/// otherwise (up to 64 KiB; beyond, the size itself, which mimalloc rounds
/// by well under 1%).
pub fn block_bytes(size: usize) -> usize {
    match slab_class(size) {
        Some(c) => (c + 1) * GRAIN,
        None if size <= MIMALLOC_MODEL_MAX => mimalloc_block_size(size),
        None => size,
    }
}

/// A page's header, at its start.
#[repr(C)]
struct Page {
    /// The pool the page belongs to; set when mapped.
    pool: *const Pool,
    /// Block size; set when mapped.
    size: u32,
    /// Live blocks.
    used: u32,
    /// Offset of the first block never handed out.
    bump: u32,
    /// Freed blocks, each holding a pointer to the next.
    free: *mut u8,
    /// Neighbours in the class's list of pages with room.
    prev: *mut Page,
    next: *mut Page,
}

/// Offset of a page's first block.
const FIRST: usize = size_of::<Page>().next_multiple_of(GRAIN);

impl Page {
    /// True when no block is left to hand out.
    fn full(&self) -> bool {
        self.free.is_null() && self.bump as usize + self.size as usize > PAGE
    }
}

/// One class's pages in one pool.
#[derive(Clone, Copy)]
struct Class {
    /// Pages with live blocks and room, linked through `prev`/`next`.
    avail: *mut Page,
    /// An empty page kept for reuse, or null.
    empty: *mut Page,
}

/// What a pool's mutex guards.
struct Lists {
    classes: [Class; CLASSES],
}

// SAFETY: the pointers are to pages whose headers are only touched with
// the owning pool's mutex held (see the module's invariants), so the lists
// may be used from whichever thread holds it.
unsafe impl Send for Lists {}

impl Lists {
    /// Puts `page` at the head of class `c`'s list.
    ///
    /// # Safety
    /// `page` must be a mapped page of this pool in no list, and this
    /// pool's mutex held (as `&mut self` shows).
    unsafe fn link(&mut self, c: usize, page: *mut Page) {
        let class = &mut self.classes[c];
        // SAFETY: the caller's contract; the old head is a page of this
        // pool, its header guarded by the same mutex.
        unsafe {
            (*page).prev = null_mut();
            (*page).next = class.avail;
            if !class.avail.is_null() {
                (*class.avail).prev = page;
            }
        }
        class.avail = page;
    }

    /// Takes `page` out of class `c`'s list.
    ///
    /// # Safety
    /// `page` must be in that list, and this pool's mutex held.
    unsafe fn unlink(&mut self, c: usize, page: *mut Page) {
        // SAFETY: the caller's contract; the neighbours are pages of the
        // same list, guarded by the same mutex.
        unsafe {
            let (prev, next) = ((*page).prev, (*page).next);
            if prev.is_null() {
                self.classes[c].avail = next;
            } else {
                (*prev).next = next;
            }
            if !next.is_null() {
                (*next).prev = prev;
            }
        }
    }
}

/// A pool: its lists and counters, on its own cache line.
#[repr(align(64))]
struct Pool {
    lists: Mutex<Lists>,
    /// Bytes of live blocks at their class size; written with `lists`
    /// locked, read without.
    live: AtomicUsize,
    /// Bytes of the pages in use (not released).
    mapped: AtomicUsize,
    /// Bytes of blocks freed into the caches of the threads allocating
    /// from this pool: still live for their pages (in some pool's `live`),
    /// free for everyone else.
    cached: AtomicUsize,
}

/// A set of pools serving blocks: one for the keyspace, more in tests.
struct Slabs {
    pools: [Pool; POOLS],
    /// Released pages (addresses), their memory given back, for reuse.
    released: Mutex<Vec<usize>>,
}

/// The pools entry blocks come from.
static ENTRY_SLABS: Slabs = Slabs::new();

/// Next pool a thread gets.
static NEXT_POOL: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MY_POOL: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The pool index this thread allocates from.
#[inline]
fn my_pool() -> usize {
    MY_POOL
        .try_with(|p| {
            if p.get() == usize::MAX {
                p.set(NEXT_POOL.fetch_add(1, Ordering::Relaxed) % POOLS);
            }
            p.get()
        })
        .unwrap_or(0)
}

/// Maps one page-aligned page; null if the system refuses.
fn map_page() -> *mut Page {
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    // SAFETY: a new anonymous mapping at an address of the system's
    // choosing touches no existing memory.
    let p = unsafe { libc::mmap(null_mut(), PAGE, prot, flags, -1, 0) };
    if p == libc::MAP_FAILED {
        return null_mut();
    }
    if (p as usize).is_multiple_of(PAGE) {
        return p.cast();
    }
    // Not aligned (the system usually places a new mapping just below the
    // last, so after one aligned page the next tends to be too): map twice
    // the size and trim both ends to an aligned page.
    // SAFETY: `p` is the PAGE-byte mapping just made, used by nothing.
    unsafe { libc::munmap(p, PAGE) };
    // SAFETY: as for the first mapping.
    let p = unsafe { libc::mmap(null_mut(), 2 * PAGE, prot, flags, -1, 0) };
    if p == libc::MAP_FAILED {
        return null_mut();
    }
    let start = p as usize;
    let head = start.next_multiple_of(PAGE) - start;
    // SAFETY: the head and the tail lie inside the mapping just made and
    // outside the aligned page kept; nothing uses them.
    unsafe {
        if head > 0 {
            libc::munmap(p, head);
        }
        let tail = PAGE - head;
        if tail > 0 {
            libc::munmap(p.cast::<u8>().add(head + PAGE).cast(), tail);
        }
        p.cast::<u8>().add(head).cast()
    }
}

impl Slabs {
    const fn new() -> Slabs {
        const EMPTY: Class = Class {
            avail: null_mut(),
            empty: null_mut(),
        };
        Slabs {
            pools: [const {
                Pool {
                    lists: Mutex::new(Lists {
                        classes: [EMPTY; CLASSES],
                    }),
                    live: AtomicUsize::new(0),
                    mapped: AtomicUsize::new(0),
                    cached: AtomicUsize::new(0),
                }
            }; POOLS],
            released: Mutex::new(Vec::new()),
        }
    }

    /// A page to take into use: a released one, else a new mapping; null
    /// if the system refuses.
    fn take_page(&self) -> *mut Page {
        match self.released.lock().pop() {
            Some(addr) => addr as *mut Page,
            None => map_page(),
        }
    }

    /// Gives a page's memory back to the system and keeps its address for
    /// [`Slabs::take_page`].
    ///
    /// # Safety
    /// `page` must be a page from [`map_page`] with no live block, in no
    /// list and not kept, so nothing refers to it.
    unsafe fn release_page(&self, page: *mut Page) {
        // SAFETY: the caller's contract: nothing reads the page, which the
        // next use (zero-filled then) writes anew. If the kernel refused,
        // the page would just keep its memory.
        unsafe { libc::madvise(page.cast(), PAGE, libc::MADV_DONTNEED) };
        self.released.lock().push(page as usize);
    }

    /// A block for `layout` (align at most 8, size not 0), null if out of
    /// memory: from a page when its size is served there, else from the
    /// global allocator.
    #[inline]
    fn alloc(&'static self, layout: Layout) -> *mut u8 {
        debug_assert!(layout.align() <= GRAIN && layout.size() > 0);
        match slab_class(layout.size()) {
            Some(c) => self.alloc_class(c),
            // SAFETY: the caller gives a non-zero size.
            None => unsafe { alloc::alloc(layout) },
        }
    }

    /// A block of class `c` from this thread's pool.
    fn alloc_class(&'static self, c: usize) -> *mut u8 {
        let pool = &self.pools[my_pool()];
        let size = (c + 1) * GRAIN;
        let mut lists = pool.lists.lock();
        let mut page = lists.classes[c].avail;
        if page.is_null() {
            page = std::mem::replace(&mut lists.classes[c].empty, null_mut());
            if page.is_null() {
                page = self.take_page();
                if page.is_null() {
                    return null_mut();
                }
                // SAFETY: a fresh mapping of PAGE bytes, 8-aligned, large
                // enough for a header.
                unsafe {
                    page.write(Page {
                        pool,
                        size: size as u32,
                        used: 0,
                        bump: FIRST as u32,
                        free: null_mut(),
                        prev: null_mut(),
                        next: null_mut(),
                    })
                };
                pool.mapped.fetch_add(PAGE, Ordering::Relaxed);
            }
            // SAFETY: an empty page of this pool and class, in no list;
            // the mutex is held.
            unsafe { lists.link(c, page) };
        }
        // SAFETY: `page` heads the list of pages with room, so it has a
        // free block or room after `bump`; its header and free list are
        // ours while the mutex is held.
        let block = unsafe {
            let block = if (*page).free.is_null() {
                let b = page.cast::<u8>().add((*page).bump as usize);
                (*page).bump += size as u32;
                b
            } else {
                let b = (*page).free;
                (*page).free = b.cast::<*mut u8>().read();
                b
            };
            (*page).used += 1;
            if (*page).full() {
                lists.unlink(c, page);
            }
            block
        };
        pool.live
            .store(pool.live.load(Ordering::Relaxed) + size, Ordering::Relaxed);
        block
    }

    /// Frees a block from [`Slabs::alloc`].
    ///
    /// # Safety
    /// `p` must be a live block from `self.alloc(layout)`, not used after.
    #[inline]
    unsafe fn dealloc(&'static self, p: *mut u8, layout: Layout) {
        match slab_class(layout.size()) {
            // SAFETY: the caller's contract.
            Some(c) => unsafe { self.dealloc_class(p, c) },
            // SAFETY: the caller's contract: the global allocator made it.
            None => unsafe { alloc::dealloc(p, layout) },
        }
    }

    /// Frees block `p` of class `c`.
    ///
    /// # Safety
    /// As for [`Slabs::dealloc`], with `c` its class.
    unsafe fn dealloc_class(&'static self, p: *mut u8, c: usize) {
        let page = (p as usize & !(PAGE - 1)) as *mut Page;
        // SAFETY: `p` is live, so its page is mapped, and the page's pool
        // pointer was written before the block was handed out (whoever
        // gave us the block synchronised with that) and never changes. The
        // pool is one of a `'static` Slabs' pools.
        let pool = unsafe { &*(*page).pool };
        let size = (c + 1) * GRAIN;
        let mut lists = pool.lists.lock();
        let mut release = null_mut();
        // SAFETY: the page's header and free list are ours while its
        // pool's mutex is held; `p` is one of its blocks, at least a
        // pointer in size and 8-aligned, and no longer used by the caller.
        unsafe {
            debug_assert_eq!((*page).size as usize, size);
            let was_full = (*page).full();
            p.cast::<*mut u8>().write((*page).free);
            (*page).free = p;
            (*page).used -= 1;
            if was_full {
                lists.link(c, page);
            }
            if (*page).used == 0 {
                lists.unlink(c, page);
                if lists.classes[c].empty.is_null() {
                    (*page).free = null_mut();
                    (*page).bump = FIRST as u32;
                    lists.classes[c].empty = page;
                } else {
                    release = page;
                }
            }
        }
        pool.live
            .store(pool.live.load(Ordering::Relaxed) - size, Ordering::Relaxed);
        drop(lists);
        if !release.is_null() {
            // SAFETY: the page has no live block and was taken out of its
            // list; no other pointer to it remains.
            unsafe { self.release_page(release) };
            pool.mapped.fetch_sub(PAGE, Ordering::Relaxed);
        }
    }

    /// Bytes of live page blocks, at their class size (blocks in thread
    /// caches are not live).
    fn live_bytes(&self) -> usize {
        // Pools no thread was handed have never had a page.
        let handed_out = NEXT_POOL.load(Ordering::Relaxed).min(POOLS);
        let (live, cached) = self.pools[..handed_out]
            .iter()
            .fold((0usize, 0usize), |(l, c), p| {
                let live = p.live.load(Ordering::Relaxed);
                (l + live, c.wrapping_add(p.cached.load(Ordering::Relaxed)))
            });
        live.saturating_sub(cached)
    }

    /// Bytes of the pages in use.
    fn mapped_bytes(&self) -> usize {
        self.pools
            .iter()
            .map(|p| p.mapped.load(Ordering::Relaxed))
            .sum()
    }
}

/// A thread's freed blocks of one [`Slabs`], per class, the last freed
/// last (see "Thread caches").
struct ThreadCache {
    slabs: &'static Slabs,
    classes: [Vec<*mut u8>; CLASSES],
}

impl ThreadCache {
    const fn new(slabs: &'static Slabs) -> ThreadCache {
        ThreadCache {
            slabs,
            classes: [const { Vec::new() }; CLASSES],
        }
    }

    /// The pool whose `cached` count this thread keeps.
    fn counter(&self) -> &'static AtomicUsize {
        &self.slabs.pools[my_pool()].cached
    }

    /// A block of `layout`, the last one freed of its class if kept.
    fn alloc(&mut self, layout: Layout) -> *mut u8 {
        let Some(c) = slab_class(layout.size()) else {
            return self.slabs.alloc(layout);
        };
        let p = match self.classes[c].pop() {
            Some(p) => {
                self.counter().fetch_sub((c + 1) * GRAIN, Ordering::Relaxed);
                p
            }
            None => self.slabs.alloc_class(c),
        };
        if !p.is_null() {
            count_net(((c + 1) * GRAIN) as isize);
        }
        p
    }

    /// Frees a block into the cache (the older half of a full class goes
    /// back to its pages first).
    ///
    /// # Safety
    /// As for [`Slabs::dealloc`].
    unsafe fn dealloc(&mut self, p: *mut u8, layout: Layout) {
        let Some(c) = slab_class(layout.size()) else {
            // SAFETY: the caller's contract.
            return unsafe { self.slabs.dealloc(p, layout) };
        };
        count_net(-(((c + 1) * GRAIN) as isize));
        if self.classes[c].len() == CACHE_BLOCKS {
            // SAFETY: the older half of the class's blocks, taken out of
            // the cache, each freed once.
            unsafe { self.flush(c, CACHE_BLOCKS / 2) };
        }
        if self.classes[c].capacity() == 0 {
            self.classes[c].reserve_exact(CACHE_BLOCKS);
        }
        self.classes[c].push(p);
        self.counter().fetch_add((c + 1) * GRAIN, Ordering::Relaxed);
    }

    /// Returns the `n` oldest blocks of class `c` to their pages.
    ///
    /// # Safety
    /// Only blocks freed into this cache may be in it (as `dealloc`
    /// ensures).
    unsafe fn flush(&mut self, c: usize, n: usize) {
        let n = n.min(self.classes[c].len());
        self.counter()
            .fetch_sub(n * (c + 1) * GRAIN, Ordering::Relaxed);
        for p in self.classes[c].drain(..n) {
            // SAFETY: a block of class `c` of these slabs, freed by its
            // user into the cache and not handed out since.
            unsafe { self.slabs.dealloc_class(p, c) };
        }
    }
}

impl Drop for ThreadCache {
    /// The thread ends: its blocks go back to their pages.
    fn drop(&mut self) {
        for c in 0..CLASSES {
            // SAFETY: the cache holds only blocks freed into it.
            unsafe { self.flush(c, usize::MAX) };
        }
    }
}

thread_local! {
    static ENTRY_CACHE: RefCell<ThreadCache> = const { RefCell::new(ThreadCache::new(&ENTRY_SLABS)) };
}

/// A block for an entry of `layout` (alignment at most 8, size not 0);
/// null when out of memory.
#[inline]
pub(crate) fn alloc(layout: Layout) -> *mut u8 {
    ENTRY_CACHE
        .try_with(|cache| cache.borrow_mut().alloc(layout))
        .unwrap_or_else(|_| ENTRY_SLABS.alloc(layout))
}

/// Frees an entry block, from any thread.
///
/// # Safety
/// `p` must be a live block from [`alloc`] with this `layout`, not used
/// after.
#[inline]
pub(crate) unsafe fn dealloc(p: *mut u8, layout: Layout) {
    // SAFETY: the caller's contract.
    let cached = ENTRY_CACHE.try_with(|cache| unsafe { cache.borrow_mut().dealloc(p, layout) });
    if cached.is_err() {
        // SAFETY: the caller's contract; this thread's cache is gone (the
        // thread is ending), so the block goes straight to its page.
        unsafe { ENTRY_SLABS.dealloc(p, layout) }
    }
}

/// Bytes of live entry blocks held in pages, each at its 8-byte class:
/// what `used_memory` adds to the global allocator's count.
pub fn live_bytes() -> usize {
    ENTRY_SLABS.live_bytes()
}

/// Bytes of page blocks the calling thread has taken minus those it has
/// freed (blocks of other sizes are the global allocator's, counted
/// there). Only the difference between two readings on one thread means
/// anything: the server's eviction measures with it what one deletion
/// freed.
pub fn thread_net_bytes() -> isize {
    NET.try_with(Cell::get).unwrap_or(0)
}

thread_local! {
    /// Bytes of page blocks this thread took minus those it freed
    /// ([`thread_net_bytes`]), wrapping. A const cell with nothing to
    /// drop, so reading it is one load (eviction reads it around every
    /// deletion).
    static NET: Cell<isize> = const { Cell::new(0) };
}

/// Adds `bytes` (negative for a free) to the calling thread's net count.
#[inline]
fn count_net(bytes: isize) {
    let _ = NET.try_with(|n| n.set(n.get().wrapping_add(bytes)));
}

/// Bytes of the pages in use for entry blocks, live or free (released
/// pages, their memory given back, do not count): memory the process
/// holds besides the global allocator's.
pub fn mapped_bytes() -> usize {
    ENTRY_SLABS.mapped_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::ptr;

    /// A private set of pools, so counts are not disturbed by other tests.
    fn slabs() -> &'static Slabs {
        Box::leak(Box::new(Slabs::new()))
    }

    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 8).unwrap()
    }

    /// Whether `p` lies in one of `s`'s pages.
    fn in_page_of(s: &Slabs, p: *mut u8) -> bool {
        let page = (p as usize & !(PAGE - 1)) as *const Page;
        // SAFETY: only called on live blocks of `s`'s served sizes, whose
        // page header is mapped; `pool` never changes.
        let pool = unsafe { (*page).pool };
        s.pools.iter().any(|q| ptr::eq(q, pool))
    }

    #[test]
    fn a_threads_net_count_follows_its_own_blocks() {
        let l = layout(86);
        let before = thread_net_bytes();
        let p = alloc(l);
        assert_eq!(thread_net_bytes() - before, 88);
        // Freed by another thread: that thread's count drops, not this one's.
        let addr = p as usize;
        let other = std::thread::spawn(move || {
            let start = thread_net_bytes();
            // SAFETY: a live block from `alloc` with this layout, freed once.
            unsafe { dealloc(addr as *mut u8, l) };
            thread_net_bytes() - start
        })
        .join()
        .unwrap();
        assert_eq!(other, -88);
        assert_eq!(thread_net_bytes() - before, 88);
        // A size the global allocator serves is not counted here.
        let big = layout(SLAB_MAX + 8);
        let q = alloc(big);
        assert_eq!(thread_net_bytes() - before, 88);
        // SAFETY: a live block from `alloc` with this layout, freed once.
        unsafe { dealloc(q, big) };
    }

    #[test]
    fn classes_are_served_only_where_they_save() {
        // The 86-byte block of a 16-byte key with a 64-byte value: 88, not
        // mimalloc's 96; a 40-byte one 40, not 48.
        assert_eq!(block_bytes(86), 88);
        assert_eq!(block_bytes(94), 96);
        assert_eq!(block_bytes(40), 40);
        for size in 1..=PAGE {
            let b = block_bytes(size);
            assert!(b >= size && b <= mimalloc_block_size(size), "{size}");
            match slab_class(size) {
                Some(c) => {
                    assert_eq!(b, size.next_multiple_of(GRAIN));
                    assert!(b < mimalloc_block_size(size) && b <= SLAB_MAX);
                    assert_eq!((c + 1) * GRAIN, b);
                }
                None => assert_eq!(b, mimalloc_block_size(size)),
            }
        }
        assert_eq!(slab_class(16), None);
        assert_eq!(slab_class(96), None);
        assert_eq!(slab_class(SLAB_MAX + 1), None);
        assert_eq!(block_bytes(1 << 20), 1 << 20);
    }

    #[test]
    fn blocks_are_distinct_aligned_and_reused() {
        let s = slabs();
        for size in [17, 40, 86, 200, 248] {
            let l = layout(size);
            let blocks: Vec<*mut u8> = (0..2000).map(|_| s.alloc(l)).collect();
            let distinct: HashSet<usize> = blocks.iter().map(|&p| p as usize).collect();
            assert_eq!(distinct.len(), blocks.len());
            for &p in &blocks {
                assert!((p as usize).is_multiple_of(GRAIN) && in_page_of(s, p));
                // SAFETY: `p` is a live block of at least `size` bytes.
                unsafe { ptr::write_bytes(p, 0xa5, size) };
            }
            let class = block_bytes(size);
            assert_eq!(s.live_bytes(), 2000 * class);
            // SAFETY: each block is live and freed once.
            unsafe { s.dealloc(blocks[7], l) };
            // The freed block is the next one handed out.
            assert_eq!(s.alloc(l), blocks[7]);
            for &p in &blocks {
                // SAFETY: as above.
                unsafe { s.dealloc(p, l) };
            }
            assert_eq!(s.live_bytes(), 0);
        }
    }

    #[test]
    fn sizes_not_served_go_to_the_global_allocator() {
        let s = slabs();
        for size in [8, 16, 96, 257, 5000] {
            let p = s.alloc(layout(size));
            assert!(!p.is_null());
            // SAFETY: `p` is a live block of `size` bytes, freed once.
            unsafe {
                ptr::write_bytes(p, 1, size);
                s.dealloc(p, layout(size));
            }
        }
        assert_eq!((s.live_bytes(), s.mapped_bytes()), (0, 0));
    }

    #[test]
    fn empty_pages_go_back_but_one_per_class() {
        let s = slabs();
        let l = layout(88);
        let per_page = (PAGE - FIRST) / 88;
        let blocks: Vec<*mut u8> = (0..per_page * 10).map(|_| s.alloc(l)).collect();
        assert_eq!(s.mapped_bytes(), 10 * PAGE);
        assert_eq!(s.live_bytes(), per_page * 10 * 88);
        // Freeing all but one block per page keeps every page.
        for (i, &p) in blocks.iter().enumerate() {
            if i % per_page != 0 {
                // SAFETY: live, freed once.
                unsafe { s.dealloc(p, l) };
            }
        }
        assert_eq!(s.mapped_bytes(), 10 * PAGE);
        assert_eq!(s.live_bytes(), 10 * 88);
        // The freed room is reused before any new page is mapped.
        let again: Vec<*mut u8> = (0..per_page * 9).map(|_| s.alloc(l)).collect();
        assert_eq!(s.mapped_bytes(), 10 * PAGE);
        for &p in again.iter().chain(blocks.iter().step_by(per_page)) {
            // SAFETY: live, freed once.
            unsafe { s.dealloc(p, l) };
        }
        // Everything free: one empty page stays for the class.
        assert_eq!((s.live_bytes(), s.mapped_bytes()), (0, PAGE));
        // It is reused rather than a new one mapped.
        let p = s.alloc(l);
        assert_eq!(s.mapped_bytes(), PAGE);
        // SAFETY: live, freed once.
        unsafe { s.dealloc(p, l) };
        // The nine released pages are taken again, for any class, before
        // anything new is mapped: the same addresses, written anew.
        let mut released = s.released.lock().clone();
        assert_eq!(released.len(), 9);
        let other = layout(200);
        let per_other = (PAGE - FIRST) / 200;
        let reused: Vec<*mut u8> = (0..per_other * 9).map(|_| s.alloc(other)).collect();
        let mut pages: Vec<usize> = reused.iter().map(|&b| b as usize & !(PAGE - 1)).collect();
        pages.dedup();
        pages.sort_unstable();
        released.sort_unstable();
        assert_eq!(pages, released);
        assert!(s.released.lock().is_empty());
        for &b in &reused {
            // SAFETY: live, freed once.
            unsafe { s.dealloc(b, other) };
        }
    }

    #[test]
    fn a_thread_cache_hands_freed_blocks_out_again_and_gives_them_back() {
        let s = slabs();
        let l = layout(88);
        let mut cache = ThreadCache::new(s);
        let blocks: Vec<*mut u8> = (0..100).map(|_| cache.alloc(l)).collect();
        assert_eq!(s.live_bytes(), 100 * 88);
        // SAFETY (all frees below): each block is live and freed once.
        unsafe { cache.dealloc(blocks[5], l) };
        // A cached block is not used memory, and the next one handed out.
        assert_eq!(s.live_bytes(), 99 * 88);
        assert_eq!(cache.alloc(l), blocks[5]);
        assert_eq!(s.live_bytes(), 100 * 88);
        for &p in &blocks {
            unsafe { cache.dealloc(p, l) };
        }
        // The cache keeps a bounded number; the rest went back to the page.
        assert_eq!(s.live_bytes(), 0);
        let kept = cache.classes[slab_class(88).unwrap()].len();
        assert!((1..=CACHE_BLOCKS).contains(&kept), "{kept}");
        // Sizes the pages do not serve pass through.
        let big = layout(300);
        let p = cache.alloc(big);
        unsafe { cache.dealloc(p, big) };
        assert!(cache.classes.iter().all(|c| c.len() <= CACHE_BLOCKS));
        // The thread ends: its blocks go back, and the page is empty (kept
        // for the class) with its free list whole.
        drop(cache);
        assert_eq!((s.live_bytes(), s.mapped_bytes()), (0, PAGE));
        let per_page = (PAGE - FIRST) / 88;
        let again: HashSet<usize> = (0..per_page).map(|_| s.alloc(l) as usize).collect();
        assert_eq!((again.len(), s.mapped_bytes()), (per_page, PAGE));
        for p in again {
            unsafe { s.dealloc(p as *mut u8, l) };
        }
    }

    #[test]
    fn blocks_freed_on_other_threads_return_to_their_pool() {
        let s = slabs();
        let sizes = [24, 40, 72, 88, 136, 248];
        // Each round, threads (new ones every round, so they land on
        // different pools) allocate; the blocks are then freed by other
        // threads, mixed across pools and classes.
        for round in 0..4 {
            let made: Vec<Vec<(usize, usize)>> = std::thread::scope(|sc| {
                let hs: Vec<_> = (0..4)
                    .map(|t| {
                        sc.spawn(move || {
                            (0..20_000)
                                .map(|i| {
                                    let size = sizes[(i + t + round) % sizes.len()];
                                    let p = s.alloc(layout(size));
                                    // SAFETY: a live block of `size` bytes.
                                    unsafe { ptr::write_bytes(p, t as u8, size) };
                                    (p as usize, size)
                                })
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let all: Vec<(usize, usize)> = made.into_iter().flatten().collect();
            let expect: usize = all.iter().map(|&(_, n)| block_bytes(n)).sum();
            assert_eq!(s.live_bytes(), expect);
            let distinct: HashSet<usize> = all.iter().map(|&(p, _)| p).collect();
            assert_eq!(distinct.len(), all.len());
            // Free from other threads, interleaved, while they also
            // allocate and free blocks of their own.
            std::thread::scope(|sc| {
                for part in all.chunks(all.len() / 3 + 1).map(|c| c.to_vec()) {
                    sc.spawn(move || {
                        for (i, (p, size)) in part.into_iter().enumerate() {
                            // SAFETY: each block is live and freed once.
                            unsafe { s.dealloc(p as *mut u8, layout(size)) };
                            if i % 3 == 0 {
                                let q = s.alloc(layout(size));
                                // SAFETY: a live block, freed once here.
                                unsafe {
                                    ptr::write_bytes(q, 7, size);
                                    s.dealloc(q, layout(size));
                                }
                            }
                        }
                    });
                }
            });
            assert_eq!(s.live_bytes(), 0);
            // At most one empty page per class and pool stays.
            assert!(s.mapped_bytes() <= POOLS * sizes.len() * PAGE);
        }
    }
}
