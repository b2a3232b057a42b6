//! The engine's own ingest rate, without the network: inserts of rows of
//! a given size through a named statement, as REDISQL.EXEC_STATEMENT runs
//! them. `cargo run --release -p vireo-sql --example ingest -- [row bytes]
//! [rows] [page size]` prints rows/s and MB/s.
//!
//! It allocates as the server does: mimalloc is the global allocator and
//! SQLite's allocations go through it (`VIREO_SQL_HOOK=0`: SQLite keeps
//! libc's malloc instead).

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;
use std::time::Instant;

use libmimalloc_sys as mi;
use vireo_sql::{Access, Database, RunLimits};

/// mimalloc, as the server's global allocator (without its counters).
struct Mimalloc;

// SAFETY: mimalloc returns blocks of at least the size asked, aligned as
// asked; mi_free frees blocks from any of its entry points.
unsafe impl GlobalAlloc for Mimalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { mi::mi_malloc_aligned(layout.size(), layout.align()).cast() }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _: Layout) {
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe { mi::mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast() }
    }
}

#[global_allocator]
static GLOBAL: Mimalloc = Mimalloc;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let row = args.first().copied().unwrap_or(102_400);
    let rows = args.get(1).copied().unwrap_or(2_000);
    let page = args.get(2).copied();
    let limits = RunLimits {
        max_result_bytes: 1 << 20,
        time_limit: None,
        abandon: None,
    };
    if std::env::var_os("VIREO_SQL_HOOK").is_none_or(|v| v != "0") {
        vireo_sql::memory::route_to_global_allocator().expect("allocator hook");
    }
    let db = Database::open_memory().expect("open");
    if let Some(p) = page {
        let pragma = format!("PRAGMA page_size={p}");
        db.exec(pragma.as_bytes(), Access::ReadWrite, &limits)
            .result
            .expect("page size");
    }
    db.exec(
        b"CREATE TABLE big(id INTEGER, data BLOB)",
        Access::ReadWrite,
        &limits,
    )
    .result
    .expect("create");
    db.define_statement(b"ins", b"INSERT INTO big VALUES(?1, ?2)", false)
        .expect("statement");
    let data = vec![b'x'; row];
    let start = Instant::now();
    for i in 0..rows {
        let id = i.to_string();
        db.exec_statement(b"ins", &[id.as_bytes(), &data], Access::ReadWrite, &limits)
            .result
            .expect("insert");
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{rows} rows of {row} bytes (page size {}): {:.0} rows/s, {:.0} MB/s",
        page.map_or("default".to_string(), |p| p.to_string()),
        rows as f64 / secs,
        (rows * row) as f64 / secs / 1e6
    );
}
