//! Statement text and arguments as clients send them: EXEC/QUERY's SQL
//! (split into statements, compiled, checked for read-only use, run) and
//! CREATE_STATEMENT/EXEC_STATEMENT with arguments bound in place. The
//! input is `sql \0 arg \0 arg …`. Nothing may crash or hang; every
//! outcome is a result or an error, and the database stays usable.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vireo_sql::Access;
use vireo_sql_fuzz::{limits, sample_database};

fuzz_target!(|data: &[u8]| {
    let mut parts = data.split(|&b| b == 0);
    let sql = parts.next().unwrap_or_default();
    let args: Vec<&[u8]> = parts.take(16).collect();
    let db = sample_database();
    let l = limits();
    let _ = db.exec(sql, Access::ReadOnly, &l);
    let _ = db.exec(sql, Access::ReadWrite, &l);
    if db.define_statement(b"f", sql, false).is_ok() {
        let _ = db.exec_statement(b"f", &args, Access::ReadOnly, &l);
        let _ = db.exec_statement(b"f", &args, Access::ReadWrite, &l);
    }
    // Still a working database, whatever the statements did to it.
    db.exec(b"SELECT 1", Access::ReadOnly, &l)
        .result
        .expect("usable after any statement");
});
