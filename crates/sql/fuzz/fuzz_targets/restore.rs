//! Database payloads as RDB files, DUMP and the AOF's RESTORE carry them
//! (`Database::restore`: the payload's framing, then SQLite reading the
//! image). Any input must load or fail with an error, never crash, hang
//! or allocate beyond its size; a database that loads must answer
//! queries and its named statements, and serialize again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vireo_sql::{Access, Database};
use vireo_sql_fuzz::{limits, payload_from};

fuzz_target!(|data: &[u8]| {
    let payload = payload_from(data);
    let Ok(db) = Database::restore(&payload) else {
        return;
    };
    let l = limits();
    let _ = db.exec(b"SELECT * FROM t ORDER BY b", Access::ReadOnly, &l);
    let _ = db.exec(b"SELECT count(*) FROM v", Access::ReadOnly, &l);
    let _ = db.exec_statement(b"get", &[b"7"], Access::ReadOnly, &l);
    let _ = db.exec_statement(b"put", &[b"1", b"2"], Access::ReadWrite, &l);
    let _ = db.serialize();
});
