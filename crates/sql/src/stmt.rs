//! Prepared statements over SQLite's C API, bound without copying.
//!
//! rusqlite binds text and blobs with `SQLITE_TRANSIENT`, which makes
//! SQLite copy every argument; RediSQL's ingest doubled when it stopped
//! copying. A [`Prepared`] binds the client's argument bytes with
//! `SQLITE_STATIC` instead: SQLite reads them in place. That is sound
//! because [`Prepared::run`] borrows the arguments for its whole duration
//! and clears the bindings (and resets the statement) before it returns,
//! so SQLite never keeps a pointer past the borrow.
//!
//! One [`Prepared`] holds every statement of a `;`-separated text, as
//! RediSQL accepts several statements in one EXEC: they run in order, the
//! changes add up, and the last one's rows (if any) are the result.

use std::ffi::{c_char, c_int, CStr};
use std::ptr;

use rusqlite::ffi;

use crate::{Cell, Output, SqlError};

/// RediSQL's error for a parameter count that does not match the
/// arguments given (its statements only take `?NNN` parameters, no gaps).
pub const PARAMETER_MISUSE: &str = "RediSQL MISUSE, only parameters in the form `?NNN`, \
     where `N` is a digit, are supported, also no gap should be present.";

/// One compiled statement, finalized on drop.
struct RawStmt(ptr::NonNull<ffi::sqlite3_stmt>);

impl RawStmt {
    /// True when the statement neither writes nor controls a transaction.
    /// SQLite counts BEGIN, COMMIT, ROLLBACK, SAVEPOINT and RELEASE as
    /// read-only, but a read-only command (QUERY) must not run them: it is
    /// not logged, and a transaction it opened or closed would make the
    /// AOF replay differ.
    fn is_read_only(&self) -> bool {
        // SAFETY: a RawStmt is a live compiled statement; sqlite3_sql's text
        // lives as long as the statement and is read at once.
        unsafe {
            let s = self.0.as_ptr();
            if ffi::sqlite3_stmt_readonly(s) == 0 {
                return false;
            }
            let text = ffi::sqlite3_sql(s);
            text.is_null() || !is_transaction_control(CStr::from_ptr(text).to_bytes())
        }
    }
}

/// Whether `sql`'s first keyword (after blanks and comments) starts a
/// transaction statement.
fn is_transaction_control(sql: &[u8]) -> bool {
    let mut rest = sql;
    loop {
        rest = rest.trim_ascii_start();
        if let Some(r) = rest.strip_prefix(b"--") {
            rest = r
                .iter()
                .position(|&c| c == b'\n')
                .map_or(&[][..], |i| &r[i..]);
        } else if let Some(r) = rest.strip_prefix(b"/*") {
            rest = r
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(&[][..], |i| &r[i + 2..]);
        } else {
            break;
        }
    }
    let word: Vec<u8> = rest
        .iter()
        .take_while(|c| c.is_ascii_alphabetic())
        .map(u8::to_ascii_uppercase)
        .collect();
    matches!(
        &word[..],
        b"BEGIN" | b"COMMIT" | b"END" | b"ROLLBACK" | b"SAVEPOINT" | b"RELEASE"
    )
}

impl Drop for RawStmt {
    fn drop(&mut self) {
        // SAFETY: the pointer came from sqlite3_prepare_v2 and is finalized
        // exactly once, here.
        unsafe { ffi::sqlite3_finalize(self.0.as_ptr()) };
    }
}

/// The compiled statements of one SQL text, with what the commands need
/// to know about them before running.
pub struct Prepared {
    stmts: Vec<RawStmt>,
    /// Highest parameter index over the statements (`?3` counts 3).
    params: usize,
    /// True when no statement writes (`sqlite3_stmt_readonly`).
    read_only: bool,
}

// SAFETY: a Prepared lives in the `Conn` of the connection it was compiled
// on, and a `Conn` is used by one thread at a time (taken from its
// database's pool, or behind the writer's mutex), so SQLite never sees two
// threads on it at once; moving it to another thread is what SQLite's
// multi-thread mode (NO_MUTEX connections) allows.
unsafe impl Send for Prepared {}

impl Prepared {
    /// Compiles every statement of `sql` on connection `db`.
    ///
    /// # Safety
    /// `db` must be an open connection that outlives the result.
    pub(crate) unsafe fn new(db: *mut ffi::sqlite3, sql: &[u8]) -> Result<Prepared, SqlError> {
        let mut stmts = Vec::new();
        let mut rest = sql;
        while !rest.is_empty() {
            // SAFETY: db is open (caller's contract).
            let (stmt, used) = unsafe { prepare_one(db, rest)? };
            stmts.extend(stmt);
            rest = &rest[used..];
        }
        // SAFETY (both closures): every statement is a live compiled one.
        let params = stmts
            .iter()
            .map(|s| unsafe { ffi::sqlite3_bind_parameter_count(s.0.as_ptr()) }.max(0) as usize)
            .max()
            .unwrap_or(0);
        let read_only = stmts.iter().all(RawStmt::is_read_only);
        Ok(Prepared {
            stmts,
            params,
            read_only,
        })
    }

    /// True when running the statements cannot change the database.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Runs the statements with `args` bound to `?1`, `?2`, … (as text,
    /// letting SQLite's type affinity turn numbers into numbers, as RediSQL
    /// does), and returns the last statement's rows, or the rows changed.
    ///
    /// # Safety
    /// `db` must be the connection the statements were compiled on.
    pub(crate) unsafe fn run(
        &self,
        db: *mut ffi::sqlite3,
        args: &[&[u8]],
        max_result_bytes: usize,
    ) -> Result<Output, SqlError> {
        if args.len() != self.params {
            return Err(SqlError::Misuse(PARAMETER_MISUSE));
        }
        // SAFETY: db is open (caller's contract).
        let changes_before = unsafe { ffi::sqlite3_total_changes64(db) };
        let mut output = None;
        for stmt in &self.stmts {
            let s = stmt.0.as_ptr();
            // SAFETY: the bindings point into `args`, borrowed for this
            // whole call; `finish` clears them before the borrow ends.
            let result = unsafe { bind(s, args).and_then(|()| collect(db, s, max_result_bytes)) };
            // SAFETY: s is a live statement.
            unsafe { finish(s) };
            if let Some(rows) = result? {
                output = Some(rows);
            }
        }
        // SAFETY: db is open.
        let changes_after = unsafe { ffi::sqlite3_total_changes64(db) };
        Ok(output.unwrap_or(Output::Done(
            changes_after.saturating_sub(changes_before) as u64
        )))
    }
}

/// Compiles the first statement of `sql`: the statement (None for only
/// whitespace or comments) and how many bytes it used (at least 1 unless
/// `sql` is empty).
///
/// # Safety
/// `db` is an open connection that outlives the statement.
unsafe fn prepare_one(
    db: *mut ffi::sqlite3,
    sql: &[u8],
) -> Result<(Option<RawStmt>, usize), SqlError> {
    let len = c_int::try_from(sql.len()).map_err(|_| SqlError::Sql("statement too long".into()))?;
    let mut stmt = ptr::null_mut();
    let mut tail: *const c_char = ptr::null();
    // SAFETY: `sql` is valid for its length (passed explicitly, so no NUL
    // terminator is needed); `tail` points into it on success.
    let rc = unsafe { ffi::sqlite3_prepare_v2(db, sql.as_ptr().cast(), len, &mut stmt, &mut tail) };
    if rc != ffi::SQLITE_OK {
        // SAFETY: db is open.
        return Err(unsafe { last_error(db) });
    }
    let used = if tail.is_null() {
        sql.len()
    } else {
        (tail as usize).saturating_sub(sql.as_ptr() as usize)
    };
    // Never report 0 bytes used for a non-empty text (no endless loop).
    let used = used.clamp(1.min(sql.len()), sql.len());
    Ok((ptr::NonNull::new(stmt).map(RawStmt), used))
}

/// Runs the statements of `sql` one after the other, compiling each just
/// before it runs: for a script whose later statements name tables its
/// earlier ones create (which cannot all be compiled up front). With
/// `read_only`, a statement that may write is refused before it runs.
///
/// # Safety
/// `db` is an open connection.
pub(crate) unsafe fn run_script(
    db: *mut ffi::sqlite3,
    sql: &[u8],
    read_only: bool,
    max_result_bytes: usize,
) -> Result<Output, SqlError> {
    // SAFETY: db is open (caller's contract).
    let changes_before = unsafe { ffi::sqlite3_total_changes64(db) };
    let mut output = None;
    let mut rest = sql;
    while !rest.is_empty() {
        // SAFETY: db is open; the statement is dropped within this loop.
        let (stmt, used) = unsafe { prepare_one(db, rest)? };
        rest = &rest[used..];
        let Some(stmt) = stmt else { continue };
        if read_only && !stmt.is_read_only() {
            return Err(SqlError::NotReadOnly);
        }
        // SAFETY: stmt is live and has no bindings.
        let result = unsafe { collect(db, stmt.0.as_ptr(), max_result_bytes) };
        if let Some(rows) = result? {
            output = Some(rows);
        }
    }
    // SAFETY: db is open.
    let changes_after = unsafe { ffi::sqlite3_total_changes64(db) };
    Ok(output.unwrap_or(Output::Done(
        changes_after.saturating_sub(changes_before) as u64
    )))
}

/// Binds `args` to the parameters `args` has (statements of a multi-
/// statement text may use fewer than the text does: the rest are skipped,
/// as RediSQL skips SQLITE_RANGE).
///
/// # Safety
/// `s` is live; the bytes of `args` must outlive the bindings (cleared by
/// [`finish`]).
unsafe fn bind(s: *mut ffi::sqlite3_stmt, args: &[&[u8]]) -> Result<(), SqlError> {
    // SAFETY: s is live.
    let count = unsafe { ffi::sqlite3_bind_parameter_count(s) }.max(0) as usize;
    for (i, arg) in args.iter().enumerate().take(count) {
        let len = c_int::try_from(arg.len())
            .map_err(|_| SqlError::Sql("string or blob too big".into()))?;
        // SAFETY: SQLITE_STATIC: SQLite reads the bytes in place until the
        // bindings are cleared, which `finish` does before `args` is
        // released. A zero-length argument still gets a valid pointer.
        let rc = unsafe {
            ffi::sqlite3_bind_text(
                s,
                i as c_int + 1,
                arg.as_ptr().cast(),
                len,
                ffi::SQLITE_STATIC(),
            )
        };
        if rc != ffi::SQLITE_OK {
            // SAFETY: s is live.
            return Err(unsafe { last_error(ffi::sqlite3_db_handle(s)) });
        }
    }
    Ok(())
}

/// Resets `s` and drops its bindings, so it can run again and holds no
/// pointer into the arguments.
///
/// # Safety
/// `s` is live.
unsafe fn finish(s: *mut ffi::sqlite3_stmt) {
    // SAFETY: s is live.
    unsafe {
        ffi::sqlite3_reset(s);
        ffi::sqlite3_clear_bindings(s);
    }
}

/// Steps `s` to its end: Some(rows) when it has result columns and
/// produced at least one row, None otherwise.
///
/// # Safety
/// `s` is a live statement of connection `db`.
unsafe fn collect(
    db: *mut ffi::sqlite3,
    s: *mut ffi::sqlite3_stmt,
    max_result_bytes: usize,
) -> Result<Option<Output>, SqlError> {
    let mut rows: Vec<Vec<Cell>> = Vec::new();
    let mut bytes = 0usize;
    loop {
        // SAFETY: s is live.
        match unsafe { ffi::sqlite3_step(s) } {
            ffi::SQLITE_ROW => {
                // SAFETY: s just produced a row.
                let row = unsafe { read_row(s) };
                bytes = bytes.saturating_add(row.iter().map(Cell::weight).sum::<usize>());
                if bytes > max_result_bytes {
                    return Err(SqlError::ResultTooLarge);
                }
                rows.push(row);
            }
            ffi::SQLITE_DONE => break,
            ffi::SQLITE_INTERRUPT => return Err(SqlError::Interrupted),
            // SAFETY: db is open.
            _ => return Err(unsafe { last_error(db) }),
        }
    }
    if rows.is_empty() {
        return Ok(None);
    }
    // SAFETY: s is live; names are copied before the next step.
    let columns = unsafe { column_names(s) };
    Ok(Some(Output::Rows { columns, rows }))
}

/// The result column names of `s`.
///
/// # Safety
/// `s` is live.
unsafe fn column_names(s: *mut ffi::sqlite3_stmt) -> Vec<Vec<u8>> {
    // SAFETY: s is live; a name pointer is valid until the statement
    // changes, and is copied at once.
    let n = unsafe { ffi::sqlite3_column_count(s) }.max(0);
    (0..n)
        .map(|i| {
            let p = unsafe { ffi::sqlite3_column_name(s, i) };
            if p.is_null() {
                Vec::new()
            } else {
                unsafe { CStr::from_ptr(p) }.to_bytes().to_vec()
            }
        })
        .collect()
}

/// The current row of `s`, each value as SQLite stores it.
///
/// # Safety
/// `s` is live and positioned on a row.
unsafe fn read_row(s: *mut ffi::sqlite3_stmt) -> Vec<Cell> {
    // SAFETY: s is on a row; column pointers are read (and copied) before
    // any other call on the statement.
    let n = unsafe { ffi::sqlite3_column_count(s) }.max(0);
    (0..n)
        .map(|i| unsafe {
            match ffi::sqlite3_column_type(s, i) {
                ffi::SQLITE_INTEGER => Cell::Int(ffi::sqlite3_column_int64(s, i)),
                ffi::SQLITE_FLOAT => Cell::Real(ffi::sqlite3_column_double(s, i)),
                ffi::SQLITE_TEXT => Cell::Text(column_bytes(s, i, true)),
                ffi::SQLITE_BLOB => Cell::Blob(column_bytes(s, i, false)),
                _ => Cell::Null,
            }
        })
        .collect()
}

/// Column `i` of the current row as bytes (text or blob form).
///
/// # Safety
/// `s` is live and on a row.
unsafe fn column_bytes(s: *mut ffi::sqlite3_stmt, i: c_int, text: bool) -> Vec<u8> {
    // SAFETY: the pointer is fetched before the length, as SQLite asks,
    // and valid for that many bytes until the next step.
    unsafe {
        let p: *const u8 = if text {
            ffi::sqlite3_column_text(s, i)
        } else {
            ffi::sqlite3_column_blob(s, i).cast()
        };
        let len = ffi::sqlite3_column_bytes(s, i).max(0) as usize;
        if p.is_null() || len == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(p, len).to_vec()
        }
    }
}

/// The connection's last error as a [`SqlError`] (interrupts apart).
///
/// # Safety
/// `db` is an open connection.
pub(crate) unsafe fn last_error(db: *mut ffi::sqlite3) -> SqlError {
    // SAFETY: db is open; the message is copied at once.
    unsafe {
        if ffi::sqlite3_errcode(db) == ffi::SQLITE_INTERRUPT {
            return SqlError::Interrupted;
        }
        let p = ffi::sqlite3_errmsg(db);
        if p.is_null() {
            return SqlError::Sql("unknown error".into());
        }
        SqlError::Sql(CStr::from_ptr(p).to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::is_transaction_control;

    #[test]
    fn transaction_statements_are_recognised_past_comments() {
        for sql in [
            "BEGIN",
            " commit;",
            "-- c\nROLLBACK TO x",
            "/* a */ savepoint s",
            "End",
            "release s",
        ] {
            assert!(is_transaction_control(sql.as_bytes()), "{sql}");
        }
        for sql in [
            "SELECT 1",
            "beginning",
            "",
            "-- BEGIN",
            "/* BEGIN */ SELECT 1",
            "/* open",
        ] {
            assert!(!is_transaction_control(sql.as_bytes()), "{sql}");
        }
    }
}
