//! One SQLite connection of a database, with what it keeps compiled.
//!
//! A [`Database`](crate::Database) has one writing connection and a pool
//! of reading ones over the same storage. Each [`Conn`] compiles its own
//! statements (a compiled statement belongs to one connection): ad-hoc
//! ones (EXEC, QUERY) in a bounded cache keyed by their text, named ones
//! (CREATE_STATEMENT) on first use from the database's shared definitions
//! ([`Defs`]), recompiled when those change. Each has its own [`Watch`],
//! read by its progress handler.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::Arc;

use rusqlite::config::DbConfig;
use rusqlite::{ffi, Connection};

use crate::stmt::Prepared;
use crate::watch::Watch;
use crate::{Access, Output, Ran, RunLimits, SqlError};

/// Ad-hoc statements kept compiled per connection; the cache is emptied
/// when full (clients that send many distinct texts gain nothing from it).
const ADHOC_CACHE_MAX: usize = 256;

/// How many SQLite virtual machine steps pass between stop checks
/// ([`Watch::must_stop`]).
const PROGRESS_STEPS: i32 = 10_000;

/// The named statements of a database as defined (name → SQL), with a
/// generation that changes with every definition, so each connection
/// knows when its compiled copies are stale.
#[derive(Clone, Default)]
pub(crate) struct Defs {
    pub(crate) generation: u64,
    pub(crate) sql: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// A connection and its compiled statements. Field order matters:
/// statements are finalized (dropped) before the connection closes.
pub(crate) struct Conn {
    adhoc: HashMap<Vec<u8>, Prepared>,
    named: BTreeMap<Vec<u8>, Prepared>,
    /// The [`Defs::generation`] `named` was compiled from.
    named_generation: u64,
    watch: Arc<Watch>,
    /// Schema and statement memory as last measured: costly to measure
    /// (SQLite sizes every object), so only after something was compiled.
    fixed_memory: usize,
    /// Something was compiled since `fixed_memory` was measured.
    compiled: bool,
    /// Everything as last measured ([`Conn::measure`]).
    measured: usize,
    pub(crate) conn: Connection,
}

impl Conn {
    /// Sets up `conn` as every connection of a database is: defensive,
    /// files out of SQL's reach ([`authorize`]), stopped by its watch.
    pub(crate) fn new(conn: Connection) -> Result<Conn, SqlError> {
        // Defensive mode: SQL cannot corrupt the file on purpose (writable
        // schema, journal tricks), since clients are not trusted.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
        // SAFETY: the handle is open; `authorize` is a plain function that
        // needs no user data and only reads the strings SQLite passes.
        let rc = unsafe {
            ffi::sqlite3_set_authorizer(conn.handle(), Some(authorize), std::ptr::null_mut())
        };
        if rc != ffi::SQLITE_OK {
            return Err(SqlError::Sql("cannot install the SQL authorizer".into()));
        }
        let watch = Arc::new(Watch::default());
        let handler_watch = Arc::clone(&watch);
        conn.progress_handler(PROGRESS_STEPS, Some(move || handler_watch.must_stop()));
        Ok(Conn {
            adhoc: HashMap::new(),
            named: BTreeMap::new(),
            named_generation: 0,
            watch,
            fixed_memory: 0,
            compiled: true,
            measured: 0,
            conn,
        })
    }

    /// The raw handle, for the statement layer.
    pub(crate) fn handle(&self) -> *mut ffi::sqlite3 {
        // SAFETY: the handle is only used while `self` (which owns the
        // connection) is borrowed, by one thread at a time.
        unsafe { self.conn.handle() }
    }

    /// True while an explicit transaction (BEGIN …) is open on it.
    pub(crate) fn in_transaction(&self) -> bool {
        !self.conn.is_autocommit()
    }

    /// Runs `sql` (one or more `;`-separated statements) with no
    /// arguments, compiling it once per text.
    pub(crate) fn exec(&mut self, sql: &[u8], access: Access, limits: &RunLimits) -> Ran {
        let db = self.handle();
        if !self.adhoc.contains_key(sql) {
            self.compiled = true;
            // SAFETY: the statements are stored beside the connection
            // they were compiled on and dropped before it.
            match unsafe { Prepared::new(db, sql) } {
                Ok(prepared) => {
                    if self.adhoc.len() >= ADHOC_CACHE_MAX {
                        self.adhoc.clear();
                    }
                    self.adhoc.insert(sql.to_vec(), prepared);
                }
                Err(_) => {
                    // A script whose statements depend on each other (or
                    // a real error, which running it reports): compile
                    // each statement as it comes, uncached.
                    let read_only = access == Access::ReadOnly;
                    let max = limits.max_result_bytes;
                    // SAFETY: db is open and this connection is ours.
                    return tracked(&self.watch, db, access, limits, || unsafe {
                        crate::stmt::run_script(db, sql, read_only, max)
                    });
                }
            }
        }
        run(&self.watch, db, &self.adhoc[sql], &[], access, limits)
    }

    /// Runs the named statement with `args` bound to `?1`, `?2`, …,
    /// compiling it from `defs` if this connection has not yet.
    pub(crate) fn exec_statement(
        &mut self,
        defs: &Defs,
        name: &[u8],
        args: &[&[u8]],
        access: Access,
        limits: &RunLimits,
    ) -> Ran {
        let db = self.handle();
        if self.named_generation != defs.generation {
            self.named.clear();
            self.named_generation = defs.generation;
        }
        if !self.named.contains_key(name) {
            self.compiled = true;
            let compiled = match defs.sql.get(name) {
                None => Err(SqlError::NoStatement(
                    "The statement is not present in the database",
                )),
                // SAFETY: stored beside its connection, dropped before it.
                Some(sql) => unsafe { Prepared::new(db, sql) },
            };
            match compiled {
                Ok(prepared) => {
                    self.named.insert(name.to_vec(), prepared);
                }
                Err(e) => {
                    return Ran {
                        result: Err(e),
                        wrote: false,
                    }
                }
            }
        }
        run(&self.watch, db, &self.named[name], args, access, limits)
    }

    /// Compiles `sql` on this connection (to check a definition); the
    /// statement is dropped at once.
    pub(crate) fn check_compiles(&self, sql: &[u8]) -> Result<(), SqlError> {
        // SAFETY: the statement is dropped before this returns.
        unsafe { Prepared::new(self.handle(), sql) }.map(drop)
    }

    /// Forgets every compiled statement (the schema was replaced).
    pub(crate) fn forget_statements(&mut self) {
        self.compiled = true;
        self.adhoc.clear();
        self.named.clear();
    }

    /// Measures SQLite's memory for this connection: its page cache, and
    /// its schema and statements when it compiled something since their
    /// last measure (a schema changed without compiling, by another
    /// connection or a cached DDL text, is seen at the next compile).
    pub(crate) fn measure(&mut self) -> usize {
        if std::mem::take(&mut self.compiled) {
            self.fixed_memory = status(self.handle(), ffi::SQLITE_DBSTATUS_SCHEMA_USED)
                + status(self.handle(), ffi::SQLITE_DBSTATUS_STMT_USED);
        }
        self.measured = status(self.handle(), ffi::SQLITE_DBSTATUS_CACHE_USED) + self.fixed_memory;
        self.measured
    }

    /// What [`Conn::measure`] found last.
    pub(crate) fn measured(&self) -> usize {
        self.measured
    }
}

/// One of SQLite's per-connection memory figures (`sqlite3_db_status`).
fn status(db: *mut ffi::sqlite3, op: std::ffi::c_int) -> usize {
    let (mut cur, mut hi) = (0, 0);
    // SAFETY: db is open and its caller has it; the out-pointers are
    // valid locals.
    unsafe { ffi::sqlite3_db_status(db, op, &mut cur, &mut hi, 0) };
    cur.max(0) as usize
}

/// Runs `prepared` (compiled on `db`) under `limits`.
fn run(
    watch: &Watch,
    db: *mut ffi::sqlite3,
    prepared: &Prepared,
    args: &[&[u8]],
    access: Access,
    limits: &RunLimits,
) -> Ran {
    if access == Access::ReadOnly && !prepared.is_read_only() {
        return Ran {
            result: Err(SqlError::NotReadOnly),
            wrote: false,
        };
    }
    let max = limits.max_result_bytes;
    // SAFETY: `prepared` was compiled on `db`, which this thread has.
    tracked(watch, db, access, limits, || unsafe {
        prepared.run(db, args, max)
    })
}

/// Runs `f` on `db` under the stop conditions of `limits` (see
/// [`Watch`]), and tells whether it must be logged (see [`Ran`]).
fn tracked(
    watch: &Watch,
    db: *mut ffi::sqlite3,
    access: Access,
    limits: &RunLimits,
    f: impl FnOnce() -> Result<Output, SqlError>,
) -> Ran {
    // SAFETY: db is open and this thread has it.
    let changes_before = unsafe { ffi::sqlite3_total_changes64(db) };
    watch.arm(limits);
    let result = f();
    watch.disarm();
    // SAFETY: as above.
    let changed = unsafe { ffi::sqlite3_total_changes64(db) } != changes_before;
    let wrote = access == Access::ReadWrite && (result.is_ok() || changed);
    Ran { result, wrote }
}

/// SQLite's authorizer for every connection: ATTACH (and so VACUUM INTO)
/// may only open private temporary databases (`''`, `:memory:`), never a
/// file: a file named in SQL would escape `dir` and the path rules of
/// [`crate::path`], or reach another key's database. Plain VACUUM, which
/// attaches `''` internally, still works. A raw C callback, not
/// rusqlite's wrapper: that one panics on names that are not UTF-8 (a
/// client's SQL or a corrupt schema has them; found by the fuzz target).
unsafe extern "C" fn authorize(
    _data: *mut c_void,
    action: c_int,
    filename: *const c_char,
    _arg2: *const c_char,
    _database: *const c_char,
    _trigger: *const c_char,
) -> c_int {
    if action != ffi::SQLITE_ATTACH {
        return ffi::SQLITE_OK;
    }
    if filename.is_null() {
        // A filename that is an expression, not a literal.
        return ffi::SQLITE_DENY;
    }
    // SAFETY: SQLite passes a NUL-terminated string valid for this call.
    let name = unsafe { CStr::from_ptr(filename) }.to_bytes();
    if name.is_empty() || name == b":memory:" {
        ffi::SQLITE_OK
    } else {
        ffi::SQLITE_DENY
    }
}
