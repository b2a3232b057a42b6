//! What the SQL fuzz targets share: run limits that stop any statement
//! quickly, and a valid database payload for mutations to start from
//! (random bytes almost never make an SQLite image that gets past the
//! header check, so most inputs edit a real one).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use vireo_sql::{Access, Database, RunLimits};

/// Bounds for every run: a small result and a short time limit, so a
/// statement the fuzzer writes cannot hang or exhaust memory.
pub fn limits() -> RunLimits {
    RunLimits {
        max_result_bytes: 1 << 16,
        time_limit: Some(Duration::from_millis(50)),
        abandon: None,
    }
}

/// A database with two tables, an index, a view, rows and named
/// statements: what the targets run statements against.
pub fn sample_database() -> Arc<Database> {
    let db = Database::open_memory().expect("open");
    db.exec(
        b"CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL, d BLOB); \
          CREATE INDEX tb ON t(b); CREATE TABLE u(x, y); \
          CREATE VIEW v AS SELECT a, b FROM t WHERE a > 3; \
          WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c LIMIT 50) \
          INSERT INTO t SELECT i, hex(randomblob(i)), i / 3.0, randomblob(i * 40) FROM c",
        Access::ReadWrite,
        &limits(),
    )
    .result
    .expect("fill");
    db.define_statement(b"get", b"SELECT b, c FROM t WHERE a = ?1", false)
        .expect("statement");
    db.define_statement(b"put", b"INSERT INTO u VALUES(?1, ?2)", false)
        .expect("statement");
    db
}

/// The payload of [`sample_database`], made once.
pub fn valid_payload() -> &'static [u8] {
    static PAYLOAD: OnceLock<Vec<u8>> = OnceLock::new();
    PAYLOAD.get_or_init(|| sample_database().serialize().expect("serialize"))
}

/// The fuzz input as a payload: with its first byte even, the rest as is;
/// odd, the rest as (u32 little-endian offset, byte) edits of
/// [`valid_payload`] (and a final truncation when the last edit is
/// partial).
pub fn payload_from(data: &[u8]) -> Vec<u8> {
    let Some((&mode, rest)) = data.split_first() else {
        return Vec::new();
    };
    if mode % 2 == 0 {
        return rest.to_vec();
    }
    let mut out = valid_payload().to_vec();
    let mut edits = rest.chunks_exact(5);
    for e in &mut edits {
        let at = u32::from_le_bytes([e[0], e[1], e[2], e[3]]) as usize % out.len();
        out[at] = e[4];
    }
    if let [a, b, ..] = edits.remainder() {
        let keep = u16::from_le_bytes([*a, *b]) as usize;
        out.truncate(keep.min(out.len()));
    }
    out
}
