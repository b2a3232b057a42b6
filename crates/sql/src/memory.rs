//! SQLite's allocations through Rust's global allocator, and growing
//! in-memory images in mappings of their own.
//!
//! The server's global allocator counts every block (used_memory,
//! maxmemory). SQLite allocates with libc's malloc by default, which that
//! count would miss, so [`route_to_global_allocator`] installs
//! `sqlite3_mem_methods` that allocate from Rust's global allocator. Each
//! block carries a 16-byte header with its size (SQLite frees and measures
//! blocks by pointer alone while Rust needs the layout) and, for a block in
//! a mapping of its own, that mapping's length.
//!
//! A block that `realloc` grows to [`MAP_FROM`] bytes or more moves to a
//! mapping of its own and from then on grows with `mremap`. That block is,
//! in practice, an in-memory database's image (SQLite's memdb doubles it
//! by realloc as it fills). Through mimalloc a doubling allocates a fresh
//! block and copies the image into it, so every byte of a growing image
//! was written into two or three fresh blocks, each page zeroed by the
//! kernel on first touch: on this project's VMs writing fresh memory runs
//! at ~0.7 GB/s against ~5 GB/s for memory already touched (see
//! docs/performance-log.md, issue 29's ingest session). `mremap` moves the
//! page tables instead: no copy, and each byte of the image is touched
//! once. Mappings ask for transparent huge pages (`MADV_HUGEPAGE`): one
//! fault per 2 MiB instead of per 4 KiB (on a VM whose balloon reports
//! free 2 MiB blocks to the host, a block the host took back is slow to
//! zero again; measured, huge pages still win on the whole). Their bytes
//! are counted in [`mapped_bytes`], which the server adds to used_memory.

use std::alloc::{self, Layout};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use rusqlite::ffi;

/// Header before each block: its usable size, then the length of its
/// mapping (0 for a block of the global allocator). 16 keeps SQLite's
/// 8-byte alignment and then some.
const HEADER: usize = 16;
const ALIGN: usize = 16;

/// Size from which a growing block moves to a mapping of its own. Below
/// it a copy is cheap and the global allocator reuses memory better;
/// plain allocations (a statement's record buffer, however large) never
/// move, so they keep reusing the allocator's warm memory.
pub const MAP_FROM: usize = 4 << 20;

/// Bytes in mappings of SQLite blocks (their whole pages).
static MAPPED: AtomicUsize = AtomicUsize::new(0);

/// Bytes SQLite holds in mappings of their own (growing images), which the
/// global allocator does not see: the server adds them to used_memory.
pub fn mapped_bytes() -> usize {
    MAPPED.load(Ordering::Relaxed)
}

fn layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(HEADER)?, ALIGN).ok()
}

/// A live block: where it starts (its header), its usable size, and the
/// length of its mapping (0: from the global allocator).
struct Block {
    start: *mut u8,
    size: usize,
    mapped: usize,
}

/// Writes the header at `start` and returns the pointer SQLite gets.
///
/// # Safety
/// `start` is valid for HEADER bytes and 16-aligned.
unsafe fn finish(start: *mut u8, size: usize, mapped: usize) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe {
        start.cast::<usize>().write(size);
        start.cast::<usize>().add(1).write(mapped);
        start.add(HEADER).cast()
    }
}

/// The block behind a pointer [`sql_malloc`] or [`sql_realloc`] returned.
///
/// # Safety
/// `p` came from [`sql_malloc`] or [`sql_realloc`] and is live.
unsafe fn block(p: *mut c_void) -> Block {
    // SAFETY: the header sits HEADER bytes before every pointer handed out.
    unsafe {
        let start = p.cast::<u8>().sub(HEADER);
        Block {
            start,
            size: start.cast::<usize>().read(),
            mapped: start.cast::<usize>().add(1).read(),
        }
    }
}

/// The system's page size.
fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    // SAFETY: sysconf reads a constant of the system.
    *PAGE.get_or_init(|| {
        usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
    })
}

/// The mapping length for a block of `size` usable bytes.
fn mapping_len(size: usize) -> Option<usize> {
    let page = page_size();
    Some(size.checked_add(HEADER + page - 1)? / page * page)
}

/// Asks for transparent huge pages on a mapping (advice only: without
/// them the mapping works the same with 4 KiB pages).
///
/// # Safety
/// `start..start + len` is a mapping of ours.
unsafe fn advise_huge(start: *mut c_void, len: usize) {
    // SAFETY: the caller's contract; madvise only changes how the kernel
    // backs the range.
    unsafe { libc::madvise(start, len, libc::MADV_HUGEPAGE) };
}

/// A new mapping for a block of `size` bytes, null when the system
/// refuses; the header is written.
fn map(size: usize) -> *mut c_void {
    let Some(len) = mapping_len(size) else {
        return std::ptr::null_mut();
    };
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    // SAFETY: a fresh anonymous mapping; nothing else is touched.
    let start = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, -1, 0) };
    if start == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    MAPPED.fetch_add(len, Ordering::Relaxed);
    // SAFETY: start..start + len is ours, page-aligned.
    unsafe {
        advise_huge(start, len);
        finish(start.cast(), size, len)
    }
}

/// Resizes a mapped block with `mremap` (the kernel moves page tables,
/// not bytes); null when the system refuses, the block then unchanged.
///
/// # Safety
/// `b` is a live mapped block.
unsafe fn remap(b: Block, size: usize) -> *mut c_void {
    let Some(len) = mapping_len(size) else {
        return std::ptr::null_mut();
    };
    // SAFETY: b.start..b.start + b.mapped is the block's mapping; with
    // MREMAP_MAYMOVE the kernel may move it, and the old range is gone.
    let start = unsafe { libc::mremap(b.start.cast(), b.mapped, len, libc::MREMAP_MAYMOVE) };
    if start == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    MAPPED.fetch_add(len, Ordering::Relaxed);
    MAPPED.fetch_sub(b.mapped, Ordering::Relaxed);
    // SAFETY: start..start + len is the block's mapping now.
    unsafe {
        if len > b.mapped {
            advise_huge(start, len);
        }
        finish(start.cast(), size, len)
    }
}

/// Frees a block, whichever kind.
///
/// # Safety
/// `b` is live and not used again.
unsafe fn release(b: Block) {
    if b.mapped > 0 {
        // SAFETY: the block's whole mapping, unmapped once.
        unsafe { libc::munmap(b.start.cast(), b.mapped) };
        MAPPED.fetch_sub(b.mapped, Ordering::Relaxed);
    } else if let Some(l) = layout(b.size) {
        // SAFETY: allocated by the global allocator with this layout.
        unsafe { alloc::dealloc(b.start, l) };
    }
}

/// `xMalloc`.
unsafe extern "C" fn sql_malloc(n: c_int) -> *mut c_void {
    let n = n.max(0) as usize;
    let Some(l) = layout(n) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the layout has a non-zero size (the header).
    let p = unsafe { alloc::alloc(l) };
    if p.is_null() {
        return p.cast();
    }
    // SAFETY: p is valid for HEADER + n bytes and 16-aligned.
    unsafe { finish(p, n, 0) }
}

/// `xFree`.
unsafe extern "C" fn sql_free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: SQLite frees only live pointers it got from xMalloc/xRealloc.
    unsafe { release(block(p)) }
}

/// `xRealloc`.
unsafe extern "C" fn sql_realloc(p: *mut c_void, n: c_int) -> *mut c_void {
    if p.is_null() {
        // SAFETY: as xMalloc.
        return unsafe { sql_malloc(n) };
    }
    let n = n.max(0) as usize;
    // SAFETY: p is live (SQLite's contract).
    let b = unsafe { block(p) };
    if b.mapped > 0 {
        // SAFETY: b is live and mapped.
        return unsafe { remap(b, n) };
    }
    if n >= MAP_FROM && n > b.size {
        let q = map(n);
        if !q.is_null() {
            // SAFETY: both blocks are live, q holds n > b.size bytes, and
            // b is released once its bytes are copied.
            unsafe {
                std::ptr::copy_nonoverlapping(p.cast::<u8>(), q.cast::<u8>(), b.size);
                release(b);
            }
        }
        return q;
    }
    let (Some(old), Some(new_layout)) = (layout(b.size), layout(n)) else {
        return std::ptr::null_mut();
    };
    // SAFETY: b is live with layout `old`; realloc keeps the alignment and
    // the new size is non-zero; the header is rewritten.
    unsafe {
        let q = alloc::realloc(b.start, old, new_layout.size());
        if q.is_null() {
            return q.cast();
        }
        finish(q, n, 0)
    }
}

/// `xSize`.
unsafe extern "C" fn sql_size(p: *mut c_void) -> c_int {
    if p.is_null() {
        return 0;
    }
    // SAFETY: p is live (SQLite's contract).
    unsafe { block(p).size as c_int }
}

/// `xRoundup`: blocks are sized exactly, rounded to 8 as SQLite expects.
unsafe extern "C" fn sql_roundup(n: c_int) -> c_int {
    n.saturating_add(7) & !7
}

unsafe extern "C" fn sql_init(_: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn sql_shutdown(_: *mut c_void) {}

/// Makes SQLite allocate through Rust's global allocator. Must run before
/// SQLite is first used (it is initialized here); later calls return the
/// first call's outcome. An error names SQLite's refusal.
pub fn route_to_global_allocator() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let methods = ffi::sqlite3_mem_methods {
            xMalloc: Some(sql_malloc),
            xFree: Some(sql_free),
            xRealloc: Some(sql_realloc),
            xSize: Some(sql_size),
            xRoundup: Some(sql_roundup),
            xInit: Some(sql_init),
            xShutdown: Some(sql_shutdown),
            pAppData: std::ptr::null_mut(),
        };
        // SAFETY: SQLITE_CONFIG_MALLOC copies the methods table, so a
        // local is enough; the call is only valid before
        // sqlite3_initialize, which the OnceLock makes this the first
        // SQLite call of the process to do, provided no connection was
        // opened before (SQLite then refuses with SQLITE_MISUSE).
        let rc = unsafe {
            ffi::sqlite3_config(
                ffi::SQLITE_CONFIG_MALLOC,
                &methods as *const ffi::sqlite3_mem_methods,
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(format!("sqlite3_config(SQLITE_CONFIG_MALLOC) failed: {rc}"));
        }
        // SAFETY: plain initialization call.
        let rc = unsafe { ffi::sqlite3_initialize() };
        if rc != ffi::SQLITE_OK {
            return Err(format!("sqlite3_initialize failed: {rc}"));
        }
        Ok(())
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_keep_their_size_through_realloc_and_free() {
        // SAFETY: the functions are used as SQLite would use them.
        unsafe {
            let p = sql_malloc(10);
            assert!(!p.is_null());
            assert_eq!(sql_size(p), 10);
            std::ptr::write_bytes(p.cast::<u8>(), 7, 10);
            let q = sql_realloc(p, 1000);
            assert_eq!(sql_size(q), 1000);
            assert_eq!(*q.cast::<u8>().add(9), 7);
            sql_free(q);
            sql_free(std::ptr::null_mut());
            assert_eq!(sql_roundup(9), 16);
        }
    }

    #[test]
    fn blocks_grown_past_the_threshold_move_to_counted_mappings() {
        let big = MAP_FROM as c_int;
        // SAFETY: the functions are used as SQLite would use them.
        unsafe {
            // A plain allocation of that size stays with the allocator.
            let plain = sql_malloc(big);
            assert_eq!(block(plain).mapped, 0);
            sql_free(plain);

            let p = sql_malloc(5000);
            std::ptr::write_bytes(p.cast::<u8>(), 3, 5000);
            let mapped_before = mapped_bytes();
            let q = sql_realloc(p, big);
            assert_eq!(sql_size(q), big);
            let b = block(q);
            assert!(b.mapped >= MAP_FROM + HEADER);
            assert!(mapped_bytes() >= mapped_before + b.mapped);
            assert_eq!(q as usize % ALIGN, 0);
            assert_eq!(*q.cast::<u8>().add(4999), 3);
            // Growing (mremap) keeps the bytes, including the last ones.
            *q.cast::<u8>().add(MAP_FROM - 1) = 9;
            let r = sql_realloc(q, big * 3);
            assert_eq!(sql_size(r), big * 3);
            assert_eq!(*r.cast::<u8>().add(4999), 3);
            assert_eq!(*r.cast::<u8>().add(MAP_FROM - 1), 9);
            *r.cast::<u8>().add(3 * MAP_FROM - 1) = 4;
            // Shrinking keeps it mapped, with its leading bytes.
            let s = sql_realloc(r, 100);
            assert_eq!(sql_size(s), 100);
            assert!(block(s).mapped > 0);
            assert_eq!(*s.cast::<u8>().add(99), 3);
            sql_free(s);
        }
    }
}
