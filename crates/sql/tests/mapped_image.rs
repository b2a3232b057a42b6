//! A database whose image outgrows `memory::MAP_FROM` with SQLite's
//! allocations routed through Rust's allocator, as in the server: the
//! image moves to a mapping of its own and grows by `mremap`, and its
//! content survives growth, serialization and restore. A test binary of
//! its own, since the allocator hook must be installed before SQLite's
//! first use in the process.

use vireo_sql::memory::{mapped_bytes, route_to_global_allocator, MAP_FROM};
use vireo_sql::{Access, Cell, Database, Output, RunLimits};

const LIMITS: RunLimits = RunLimits {
    max_result_bytes: 1 << 20,
    time_limit: None,
    abandon: None,
};

fn query(db: &Database, sql: &str) -> Vec<Vec<Cell>> {
    match db.exec(sql.as_bytes(), Access::ReadOnly, &LIMITS).result {
        Ok(Output::Rows { rows, .. }) => rows,
        other => panic!("{sql}: {other:?}"),
    }
}

#[test]
fn a_growing_image_moves_to_a_mapping_and_keeps_its_rows() {
    route_to_global_allocator().unwrap();
    assert_eq!(mapped_bytes(), 0);
    let db = Database::open_memory().unwrap();
    db.exec(
        b"CREATE TABLE t(id INTEGER, data BLOB)",
        Access::ReadWrite,
        &LIMITS,
    )
    .result
    .unwrap();
    db.define_statement(b"ins", b"INSERT INTO t VALUES(?1, ?2)", false)
        .unwrap();
    // 3 x MAP_FROM of rows, each row's bytes telling its number (bound
    // as text, so read back as a blob: bytes, NULs included).
    let rows = 3 * MAP_FROM / 100_000;
    for i in 0..rows {
        let data = vec![i as u8; 100_000];
        let id = i.to_string();
        db.exec_statement(b"ins", &[id.as_bytes(), &data], Access::ReadWrite, &LIMITS)
            .result
            .unwrap();
    }
    // The image (and only that much) lives in mappings now, counted.
    let mapped = mapped_bytes();
    assert!(mapped >= 3 * MAP_FROM, "{mapped}");
    assert!(
        mapped <= 2 * db.memory_bytes(),
        "{mapped} {}",
        db.memory_bytes()
    );
    let check = |db: &Database| {
        let got = query(
            db,
            "SELECT count(*), sum(length(CAST(data AS BLOB))), \
             sum(hex(substr(CAST(data AS BLOB), 99999, 1)) = printf('%02X', id % 256)) FROM t",
        );
        let n = rows as i64;
        assert_eq!(
            got,
            vec![vec![Cell::Int(n), Cell::Int(n * 100_000), Cell::Int(n)]]
        );
    };
    check(&db);
    // A reading connection reads the moved image; a restored copy too.
    let copy = Database::restore(&db.serialize().unwrap()).unwrap();
    check(&copy);
    // Freeing the databases unmaps their images.
    drop(db);
    drop(copy);
    assert_eq!(mapped_bytes(), 0);
}
