//! What bounds ingest on a machine: copying 100 KB rows into memory the
//! process has never touched (every page faulted in and zeroed by the
//! kernel first), into memory already touched, into never-touched memory
//! on transparent huge pages, and into one cache-hot buffer.
//! `cargo run --release -p vireo-sql --example fresh_memory -- [rows] [rounds]`
//! prints MB/s for each (issue 29's ingest session in
//! docs/performance-log.md compares them with the engine's rate).

use std::time::Instant;

const ROW: usize = 102_400;

/// A fresh anonymous mapping of `len` bytes, with huge pages asked for
/// when `huge`.
fn map(len: usize, huge: bool) -> *mut u8 {
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    // SAFETY: a new anonymous mapping; nothing else is touched.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, -1, 0) };
    assert_ne!(p, libc::MAP_FAILED, "mmap");
    if huge {
        // SAFETY: the mapping just made; advice only.
        unsafe { libc::madvise(p, len, libc::MADV_HUGEPAGE) };
    }
    p.cast()
}

/// Copies `rows` copies of `row` one after the other from `dst`: MB/s.
fn fill(dst: *mut u8, row: &[u8], rows: usize) -> f64 {
    let start = Instant::now();
    for i in 0..rows {
        // SAFETY: dst holds rows * ROW bytes; row is ROW bytes.
        unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), dst.add(i * ROW), ROW) };
    }
    (rows * ROW) as f64 / start.elapsed().as_secs_f64() / 1e6
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let rows = args.first().copied().unwrap_or(2_000);
    let rounds = args.get(1).copied().unwrap_or(3);
    let row = vec![b'x'; ROW];
    let len = rows * ROW;
    for round in 0..rounds {
        let p = map(len, false);
        let fresh = fill(p, &row, rows);
        let touched = fill(p, &row, rows);
        let h = map(len, true);
        let huge = fill(h, &row, rows);
        // SAFETY: both mappings are ours and no longer used.
        unsafe {
            libc::munmap(p.cast(), len);
            libc::munmap(h.cast(), len);
        }
        let mut hot = vec![0u8; ROW];
        let start = Instant::now();
        for _ in 0..rows {
            hot.copy_from_slice(&row);
            std::hint::black_box(&mut hot);
        }
        let cached = len as f64 / start.elapsed().as_secs_f64() / 1e6;
        println!(
            "round {round}: fresh 4 KiB pages {fresh:.0} MB/s, touched {touched:.0} MB/s, \
             fresh huge pages {huge:.0} MB/s, cache-hot 100 KB {cached:.0} MB/s"
        );
    }
}
