//! The engine's own ingest rate, without the network: inserts of rows of
//! a given size through a named statement, as REDISQL.EXEC_STATEMENT runs
//! them. `cargo run --release -p vireo-sql --example ingest -- [row bytes]
//! [rows] [page size]` prints rows/s and MB/s (`VIREO_SQL_HOOK=1`: with
//! SQLite's allocations routed through Rust's allocator).

use std::time::Instant;

use vireo_sql::{Access, Database, RunLimits};

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
    // VIREO_SQL_HOOK=1: SQLite allocates through Rust's allocator, as in
    // the server (where that allocator counts used_memory).
    if std::env::var_os("VIREO_SQL_HOOK").is_some() {
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
