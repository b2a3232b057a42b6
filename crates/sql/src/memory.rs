//! SQLite's allocations through Rust's global allocator.
//!
//! The server's global allocator counts every block (used_memory,
//! maxmemory). SQLite allocates with libc's malloc by default, which that
//! count would miss, so [`route_to_global_allocator`] installs
//! `sqlite3_mem_methods` that allocate from Rust's global allocator. Each
//! block carries a 16-byte header with its size, since SQLite frees and
//! measures blocks by pointer alone while Rust needs the layout.

use std::alloc::{self, Layout};
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use rusqlite::ffi;

/// Header before each block: its usable size (16 keeps SQLite's 8-byte
/// alignment and then some).
const HEADER: usize = 16;
const ALIGN: usize = 16;

fn layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(HEADER)?, ALIGN).ok()
}

/// `xMalloc`.
unsafe extern "C" fn sql_malloc(n: c_int) -> *mut c_void {
    let Some(l) = layout(n.max(0) as usize) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the layout has a non-zero size (the header).
    let p = unsafe { alloc::alloc(l) };
    if p.is_null() {
        return p.cast();
    }
    // SAFETY: p is valid for HEADER + n bytes and 16-aligned.
    unsafe {
        p.cast::<usize>().write(n.max(0) as usize);
        p.add(HEADER).cast()
    }
}

/// The start of the block behind a pointer [`sql_malloc`] returned, and
/// its usable size.
///
/// # Safety
/// `p` came from [`sql_malloc`] or [`sql_realloc`] and is live.
unsafe fn block(p: *mut c_void) -> (*mut u8, usize) {
    // SAFETY: the header sits HEADER bytes before every pointer handed out.
    unsafe {
        let start = p.cast::<u8>().sub(HEADER);
        (start, start.cast::<usize>().read())
    }
}

/// `xFree`.
unsafe extern "C" fn sql_free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: SQLite frees only pointers it got from xMalloc/xRealloc,
    // with the layout they were allocated with.
    unsafe {
        let (start, size) = block(p);
        if let Some(l) = layout(size) {
            alloc::dealloc(start, l);
        }
    }
}

/// `xRealloc`.
unsafe extern "C" fn sql_realloc(p: *mut c_void, n: c_int) -> *mut c_void {
    if p.is_null() {
        // SAFETY: as xMalloc.
        return unsafe { sql_malloc(n) };
    }
    let n = n.max(0) as usize;
    let Some(new_layout) = layout(n) else {
        return std::ptr::null_mut();
    };
    // SAFETY: p is live (SQLite's contract); realloc keeps the alignment
    // and the new size is non-zero; the header is rewritten.
    unsafe {
        let (start, size) = block(p);
        let Some(old) = layout(size) else {
            return std::ptr::null_mut();
        };
        let q = alloc::realloc(start, old, new_layout.size());
        if q.is_null() {
            return q.cast();
        }
        q.cast::<usize>().write(n);
        q.add(HEADER).cast()
    }
}

/// `xSize`.
unsafe extern "C" fn sql_size(p: *mut c_void) -> c_int {
    if p.is_null() {
        return 0;
    }
    // SAFETY: p is live (SQLite's contract).
    unsafe { block(p).1 as c_int }
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
}
