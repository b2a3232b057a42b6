//! One SQL database: a SQLite connection and its statements.
//!
//! A [`Database`] is shared as an `Arc` between the keyspace entry that
//! holds it and the commands running on it, so a command can let go of
//! the keyspace shard before a long query runs. Its mutex serializes the
//! connection's users (one in-memory connection cannot be shared by two
//! threads at once); commands on other databases never wait for it.
//!
//! Statements are compiled once: ad-hoc ones (EXEC, QUERY) in a bounded
//! cache keyed by their text, named ones (CREATE_STATEMENT) until updated
//! or deleted. A run's time limit is enforced by SQLite's progress
//! handler, which interrupts the statement once the deadline in
//! `deadline_ns` has passed.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use rusqlite::config::DbConfig;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::{ffi, Connection, OpenFlags, MAIN_DB};

use crate::payload::{self, Parts};
use crate::stmt::Prepared;
use crate::watch::Watch;
use crate::{Access, Output, Ran, RunLimits, SqlError};

/// Ad-hoc statements kept compiled per database; the cache is emptied when
/// full (clients that send many distinct texts gain nothing from it).
const ADHOC_CACHE_MAX: usize = 256;

/// How many SQLite virtual machine steps pass between stop checks
/// ([`Watch::must_stop`]).
const PROGRESS_STEPS: i32 = 10_000;

/// Largest image [`Database::restore`] accepts: SQLite's allocation size
/// is an `int`.
const MAX_IMAGE: usize = i32::MAX as usize;

/// An SQL database held by a key.
pub struct Database {
    inner: Mutex<Inner>,
    /// The file it lives in; None in memory.
    path: Option<PathBuf>,
    /// SQLite's memory for this connection as last measured (page cache,
    /// schema, statements), for MEMORY USAGE without taking the mutex.
    memory: AtomicUsize,
    /// When the running statement must stop: read by the progress handler.
    watch: Arc<Watch>,
}

/// The mutex-protected part. Field order matters: statements are
/// finalized (dropped) before the connection closes.
struct Inner {
    adhoc: HashMap<Vec<u8>, Prepared>,
    named: BTreeMap<Vec<u8>, Named>,
    conn: Connection,
}

/// A statement defined with CREATE_STATEMENT.
struct Named {
    sql: Vec<u8>,
    prepared: Prepared,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Database {
    /// A new, empty in-memory database.
    pub fn open_memory() -> Result<Arc<Database>, SqlError> {
        Self::wrap(Connection::open_in_memory()?, None)
    }

    /// Opens (creating it if needed) the SQLite file at `path`, which the
    /// caller has checked with [`crate::path::resolve`].
    pub fn open_file(path: &Path) -> Result<Arc<Database>, SqlError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| SqlError::Path(format!("cannot open SQL database file: {e}")))?;
        let db = Self::wrap(conn, Some(path.to_path_buf()))?;
        // A file that is not a database fails on its first read: find out now.
        db.check_integrity()?;
        Ok(db)
    }

    fn wrap(conn: Connection, path: Option<PathBuf>) -> Result<Arc<Database>, SqlError> {
        // Defensive mode: SQL cannot corrupt the file on purpose (writable
        // schema, journal tricks), since clients are not trusted.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
        conn.authorizer(Some(authorize));
        let watch = Arc::new(Watch::default());
        let handler_watch = Arc::clone(&watch);
        conn.progress_handler(PROGRESS_STEPS, Some(move || handler_watch.must_stop()));
        let db = Arc::new(Database {
            inner: Mutex::new(Inner {
                adhoc: HashMap::new(),
                named: BTreeMap::new(),
                conn,
            }),
            path,
            memory: AtomicUsize::new(0),
            watch,
        });
        db.measure(&db.inner.lock());
        Ok(db)
    }

    /// The file the database lives in, None in memory.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// SQLite's memory for this database as last measured, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.memory.load(Ordering::Relaxed)
    }

    /// Runs `sql` (one or more `;`-separated statements) with no
    /// arguments, compiling it once per text.
    pub fn exec(&self, sql: &[u8], access: Access, limits: &RunLimits) -> Ran {
        let mut inner = self.inner.lock();
        let db = handle(&inner.conn);
        if !inner.adhoc.contains_key(sql) {
            // SAFETY: the statements are stored beside the connection
            // they were compiled on and dropped before it.
            let compiled = unsafe { Prepared::new(db, sql) };
            match compiled {
                Ok(prepared) => {
                    if inner.adhoc.len() >= ADHOC_CACHE_MAX {
                        inner.adhoc.clear();
                    }
                    inner.adhoc.insert(sql.to_vec(), prepared);
                }
                Err(_) => {
                    // A script whose statements depend on each other (or
                    // a real error, which running it reports): compile
                    // each statement as it comes, uncached.
                    let ran = self.tracked(db, access, limits, || {
                        // SAFETY: db is open and locked.
                        unsafe {
                            crate::stmt::run_script(
                                db,
                                sql,
                                access == Access::ReadOnly,
                                limits.max_result_bytes,
                            )
                        }
                    });
                    self.measure(&inner);
                    return ran;
                }
            }
        }
        let prepared = &inner.adhoc[sql];
        let ran = self.run(db, prepared, &[], access, limits);
        self.measure(&inner);
        ran
    }

    /// Runs the named statement with `args` bound to `?1`, `?2`, ….
    pub fn exec_statement(
        &self,
        name: &[u8],
        args: &[&[u8]],
        access: Access,
        limits: &RunLimits,
    ) -> Ran {
        let inner = self.inner.lock();
        let Some(named) = inner.named.get(name) else {
            return Ran {
                result: Err(SqlError::NoStatement(
                    "The statement is not present in the database",
                )),
                wrote: false,
            };
        };
        let ran = self.run(handle(&inner.conn), &named.prepared, args, access, limits);
        self.measure(&inner);
        ran
    }

    /// Runs `prepared` under the time limit.
    fn run(
        &self,
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
        // SAFETY: `prepared` was compiled on `db`, whose mutex the caller holds.
        self.tracked(db, access, limits, || unsafe {
            prepared.run(db, args, limits.max_result_bytes)
        })
    }

    /// Runs `f` under the stop conditions of `limits` (see [`Watch`]), and
    /// tells whether it must be logged (see [`Ran`]).
    fn tracked(
        &self,
        db: *mut ffi::sqlite3,
        access: Access,
        limits: &RunLimits,
        f: impl FnOnce() -> Result<Output, SqlError>,
    ) -> Ran {
        // SAFETY: db is open and locked by the caller.
        let changes_before = unsafe { ffi::sqlite3_total_changes64(db) };
        self.watch.arm(limits);
        let result = f();
        self.watch.disarm();
        // SAFETY: as above.
        let changed = unsafe { ffi::sqlite3_total_changes64(db) } != changes_before;
        let wrote = access == Access::ReadWrite && (result.is_ok() || changed);
        Ran { result, wrote }
    }

    /// Defines statement `name` (CREATE_STATEMENT), or replaces it when
    /// `replace` (UPDATE_STATEMENT), which requires it to exist.
    pub fn define_statement(&self, name: &[u8], sql: &[u8], replace: bool) -> Result<(), SqlError> {
        let mut inner = self.inner.lock();
        match (inner.named.contains_key(name), replace) {
            (true, false) => return Err(SqlError::StatementExists),
            (false, true) => {
                return Err(SqlError::NoStatement(
                    "The statement is not present in the database, impossible to update it.",
                ))
            }
            _ => {}
        }
        // SAFETY: stored beside its connection, dropped before it.
        let prepared = unsafe { Prepared::new(handle(&inner.conn), sql)? };
        inner.named.insert(
            name.to_vec(),
            Named {
                sql: sql.to_vec(),
                prepared,
            },
        );
        self.measure(&inner);
        Ok(())
    }

    /// Removes statement `name` (DELETE_STATEMENT).
    pub fn delete_statement(&self, name: &[u8]) -> Result<(), SqlError> {
        let mut inner = self.inner.lock();
        inner.named.remove(name).ok_or(SqlError::NoStatement(
            "The statement is not present in the database, impossible to delete it.",
        ))?;
        self.measure(&inner);
        Ok(())
    }

    /// The named statements as (name, SQL), in name order.
    pub fn statements(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let inner = self.inner.lock();
        inner
            .named
            .iter()
            .map(|(n, s)| (n.clone(), s.sql.clone()))
            .collect()
    }

    /// Replaces `dst`'s content and statements with this database's
    /// (REDISQL.COPY), with SQLite's backup API.
    pub fn copy_into(&self, dst: &Database) -> Result<(), SqlError> {
        if std::ptr::eq(self, dst) {
            return Ok(());
        }
        let (src, mut dst_inner) = lock_pair(self, dst);
        backup(&src.conn, &mut dst_inner.conn)?;
        let statements: Vec<(Vec<u8>, Vec<u8>)> = src
            .named
            .iter()
            .map(|(n, s)| (n.clone(), s.sql.clone()))
            .collect();
        drop(src);
        install_statements(
            &mut dst_inner,
            statements.iter().map(|(n, s)| (&n[..], &s[..])),
        )?;
        dst.measure(&dst_inner);
        Ok(())
    }

    /// An in-memory copy of this database with its statements (Redis's
    /// COPY of the key; a file-backed database's copy lives in memory,
    /// since two keys cannot own one file).
    pub fn duplicate(&self) -> Result<Arc<Database>, SqlError> {
        let copy = Database::open_memory()?;
        self.copy_into(&copy)?;
        Ok(copy)
    }

    /// The payload of this database ([`crate::payload`]): its path, its
    /// statements and its image.
    pub fn serialize(&self) -> Result<Vec<u8>, SqlError> {
        let inner = self.inner.lock();
        let image = inner.conn.serialize(MAIN_DB)?;
        let path = self.path.as_ref().map(|p| p.as_os_str().as_encoded_bytes());
        let statements = inner
            .named
            .iter()
            .map(|(n, s)| (&n[..], &s.sql[..]))
            .collect();
        let mut out = Vec::with_capacity(image.len() + 64);
        payload::encode(
            &mut out,
            &Parts {
                path,
                statements,
                image: &image,
            },
        );
        Ok(out)
    }

    /// Rebuilds a database from its payload. A file-backed one reopens its
    /// file (the path is checked against [`crate::path::resolve`]'s rules
    /// again, since payloads come from clients too) and takes the image's
    /// content. Corrupt payloads and images are errors.
    pub fn restore(bytes: &[u8]) -> Result<Arc<Database>, SqlError> {
        let parts = payload::decode(bytes)?;
        let mem = Database::open_memory()?;
        mem.load_image(parts.image)?;
        let db = match parts.path {
            None => mem,
            Some(p) => {
                let path = crate::path::resolve(p)?;
                let file = Database::open_file(&path)?;
                // No image (the save could not read the database): the
                // file's own content stands.
                if !parts.image.is_empty() {
                    mem.copy_into(&file)?;
                }
                file
            }
        };
        {
            let mut inner = db.inner.lock();
            install_statements(&mut inner, parts.statements.iter().copied())?;
            db.measure(&inner);
        }
        Ok(db)
    }

    /// Replaces this (fresh, in-memory) database's content with `image`,
    /// then checks it: SQLite only notices corruption when it reads a
    /// damaged page, and a payload must fail when it is loaded, not later.
    fn load_image(&self, image: &[u8]) -> Result<(), SqlError> {
        if image.is_empty() {
            return Ok(());
        }
        if image.len() > MAX_IMAGE {
            return Err(SqlError::Corrupt("database image too large".into()));
        }
        if !image.starts_with(b"SQLite format 3\0") {
            return Err(SqlError::Corrupt("not an SQLite database image".into()));
        }
        {
            let mut inner = self.inner.lock();
            // sqlite3_deserialize attaches the image under the name `x`
            // internally: the one ATTACH of a name the authorizer allows.
            let no_check: Option<fn(AuthContext<'_>) -> Authorization> = None;
            inner.conn.authorizer(no_check);
            let loaded = inner
                .conn
                .deserialize_read_exact(MAIN_DB, image, image.len(), false);
            inner.conn.authorizer(Some(authorize));
            loaded.map_err(|e| SqlError::Corrupt(e.to_string()))?;
        }
        self.check_integrity()
    }

    /// `PRAGMA quick_check`: an error unless SQLite finds the file sound.
    fn check_integrity(&self) -> Result<(), SqlError> {
        let inner = self.inner.lock();
        let verdict: String = inner
            .conn
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(|e| SqlError::Corrupt(e.to_string()))?;
        if verdict != "ok" {
            return Err(SqlError::Corrupt(verdict));
        }
        Ok(())
    }

    /// Records SQLite's memory for this connection (see
    /// [`Database::memory_bytes`]).
    fn measure(&self, inner: &MutexGuard<'_, Inner>) {
        let db = handle(&inner.conn);
        let used = [
            ffi::SQLITE_DBSTATUS_CACHE_USED,
            ffi::SQLITE_DBSTATUS_SCHEMA_USED,
            ffi::SQLITE_DBSTATUS_STMT_USED,
        ]
        .iter()
        .map(|&op| {
            let (mut cur, mut hi) = (0, 0);
            // SAFETY: db is open; the out-pointers are valid locals.
            unsafe { ffi::sqlite3_db_status(db, op, &mut cur, &mut hi, 0) };
            cur.max(0) as usize
        })
        .sum();
        self.memory.store(used, Ordering::Relaxed);
    }
}

/// SQLite's authorizer for every connection: ATTACH (and so VACUUM INTO)
/// may only open private temporary databases (`''`, `:memory:`), never a
/// file: a file named in SQL would escape `dir` and the path rules of
/// [`crate::path`], or reach another key's database. Plain VACUUM, which
/// attaches `''` internally, still works.
fn authorize(ctx: AuthContext<'_>) -> Authorization {
    match ctx.action {
        AuthAction::Attach { filename } if filename.is_empty() || filename == ":memory:" => {
            Authorization::Allow
        }
        AuthAction::Attach { .. } => Authorization::Deny,
        // A filename that is an expression, not a literal.
        AuthAction::Unknown { code, .. } if code == ffi::SQLITE_ATTACH => Authorization::Deny,
        _ => Authorization::Allow,
    }
}

/// The raw handle of `conn`, for the statement layer.
fn handle(conn: &Connection) -> *mut ffi::sqlite3 {
    // SAFETY: the handle is only used while `conn` is alive and locked
    // (the Inner that owns it is borrowed by every caller).
    unsafe { conn.handle() }
}

/// Locks two distinct databases in address order (so two COPYs in
/// opposite directions cannot deadlock); returns (a's, b's) guards.
fn lock_pair<'a>(
    a: &'a Database,
    b: &'a Database,
) -> (MutexGuard<'a, Inner>, MutexGuard<'a, Inner>) {
    if (a as *const Database) < (b as *const Database) {
        let ga = a.inner.lock();
        (ga, b.inner.lock())
    } else {
        let gb = b.inner.lock();
        (a.inner.lock(), gb)
    }
}

/// Copies every page of `src` into `dst` (the backup API).
fn backup(src: &Connection, dst: &mut Connection) -> Result<(), SqlError> {
    use rusqlite::backup::{Backup, StepResult};
    // -1: every page in one step (both connections are ours and locked,
    // so nothing can be busy or change half-way).
    match Backup::new(src, dst)?.step(-1)? {
        StepResult::Done => Ok(()),
        other => Err(SqlError::Sql(format!(
            "database copy did not complete: {other:?}"
        ))),
    }
}

/// Replaces `inner`'s named statements with `statements`, compiled on its
/// connection; the ad-hoc cache is emptied too (the schema changed).
fn install_statements<'s>(
    inner: &mut Inner,
    statements: impl Iterator<Item = (&'s [u8], &'s [u8])>,
) -> Result<(), SqlError> {
    inner.adhoc.clear();
    inner.named.clear();
    let db = handle(&inner.conn);
    for (name, sql) in statements {
        // SAFETY: stored beside its connection, dropped before it.
        let prepared = unsafe { Prepared::new(db, sql)? };
        inner.named.insert(
            name.to_vec(),
            Named {
                sql: sql.to_vec(),
                prepared,
            },
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cell;
    use std::time::Duration;

    const LIMITS: RunLimits = RunLimits {
        max_result_bytes: 1 << 20,
        time_limit: Some(Duration::from_secs(5)),
        abandon: None,
    };

    fn exec(db: &Database, sql: &str) -> Result<Output, SqlError> {
        db.exec(sql.as_bytes(), Access::ReadWrite, &LIMITS).result
    }

    #[test]
    fn statements_run_and_report_changes_and_rows() {
        let db = Database::open_memory().unwrap();
        assert_eq!(
            exec(&db, "CREATE TABLE t(a INT, b TEXT, c REAL, d BLOB)"),
            Ok(Output::Done(0))
        );
        assert_eq!(
            exec(
                &db,
                "INSERT INTO t VALUES(1,'x',1.5,x'00ff'); INSERT INTO t VALUES(2,NULL,NULL,NULL)"
            ),
            Ok(Output::Done(2))
        );
        let rows = exec(&db, "SELECT * FROM t ORDER BY a").unwrap();
        assert_eq!(
            rows,
            Output::Rows {
                columns: vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()],
                rows: vec![
                    vec![
                        Cell::Int(1),
                        Cell::Text(b"x".to_vec()),
                        Cell::Real(1.5),
                        Cell::Blob(vec![0, 255])
                    ],
                    vec![Cell::Int(2), Cell::Null, Cell::Null, Cell::Null],
                ],
            }
        );
        // An empty result is DONE 0 whatever ran before.
        assert_eq!(
            exec(&db, "SELECT * FROM t WHERE a > 5"),
            Ok(Output::Done(0))
        );
        assert_eq!(
            exec(&db, "SELEC 1"),
            Err(SqlError::Sql("near \"SELEC\": syntax error".into()))
        );
    }

    #[test]
    fn read_only_access_refuses_writes_before_running() {
        let db = Database::open_memory().unwrap();
        exec(&db, "CREATE TABLE t(a)").unwrap();
        let r = db
            .exec(b"INSERT INTO t VALUES(1)", Access::ReadOnly, &LIMITS)
            .result;
        assert_eq!(r, Err(SqlError::NotReadOnly));
        assert_eq!(
            exec(&db, "SELECT count(*) FROM t").unwrap(),
            rows1(Cell::Int(0))
        );
    }

    fn rows1(c: Cell) -> Output {
        Output::Rows {
            columns: vec![b"count(*)".to_vec()],
            rows: vec![vec![c]],
        }
    }

    #[test]
    fn named_statements_bind_arguments_without_copying() {
        let db = Database::open_memory().unwrap();
        exec(&db, "CREATE TABLE t(a INT, b TEXT)").unwrap();
        db.define_statement(b"ins", b"INSERT INTO t VALUES(?1, ?2)", false)
            .unwrap();
        assert_eq!(
            db.define_statement(b"ins", b"SELECT 1", false),
            Err(SqlError::StatementExists)
        );
        let args: Vec<Vec<u8>> = vec![b"7".to_vec(), b"seven".to_vec()];
        let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
        assert_eq!(
            db.exec_statement(b"ins", &refs, Access::ReadWrite, &LIMITS)
                .result,
            Ok(Output::Done(1))
        );
        // The bindings were cleared: dropping the arguments is safe and a
        // second run with other arguments sees only those.
        drop(refs);
        drop(args);
        db.exec_statement(b"ins", &[b"8", b"eight"], Access::ReadWrite, &LIMITS)
            .result
            .unwrap();
        assert_eq!(
            db.exec_statement(b"ins", &[b"1"], Access::ReadWrite, &LIMITS)
                .result,
            Err(SqlError::Misuse(crate::PARAMETER_MISUSE))
        );
        assert_eq!(
            db.exec_statement(b"ins", &[b"1", b"2"], Access::ReadOnly, &LIMITS)
                .result,
            Err(SqlError::NotReadOnly)
        );
        let out = exec(&db, "SELECT a, b FROM t ORDER BY a").unwrap();
        let Output::Rows { rows, .. } = out else {
            panic!("rows expected")
        };
        // Numbers bound as text become INTEGER through the column's affinity.
        assert_eq!(rows[0], vec![Cell::Int(7), Cell::Text(b"seven".to_vec())]);
        assert_eq!(rows[1], vec![Cell::Int(8), Cell::Text(b"eight".to_vec())]);
        db.define_statement(b"ins", b"SELECT ?1", true).unwrap();
        db.delete_statement(b"ins").unwrap();
        assert!(db.delete_statement(b"ins").is_err());
        assert!(db.define_statement(b"nope", b"SELECT 1", true).is_err());
    }

    #[test]
    fn a_statement_past_its_time_limit_is_interrupted() {
        let db = Database::open_memory().unwrap();
        let limits = RunLimits {
            time_limit: Some(Duration::from_millis(50)),
            ..LIMITS
        };
        let forever =
            b"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c";
        assert_eq!(
            db.exec(forever, Access::ReadOnly, &limits).result,
            Err(SqlError::Interrupted)
        );
        // The database is usable afterwards.
        assert_eq!(
            exec(&db, "SELECT 1").unwrap(),
            Output::Rows {
                columns: vec![b"1".to_vec()],
                rows: vec![vec![Cell::Int(1)]],
            }
        );
    }

    #[test]
    fn an_abandoned_statement_is_interrupted() {
        struct Gone;
        impl crate::Abandon for Gone {
            fn abandoned(&self) -> bool {
                true
            }
        }
        let db = Database::open_memory().unwrap();
        let limits = RunLimits {
            time_limit: None,
            abandon: Some(Arc::new(Gone)),
            ..LIMITS
        };
        let forever =
            b"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c";
        assert_eq!(
            db.exec(forever, Access::ReadOnly, &limits).result,
            Err(SqlError::Interrupted)
        );
        assert!(db
            .exec(b"SELECT 1", Access::ReadOnly, &LIMITS)
            .result
            .is_ok());
    }

    #[test]
    fn sql_cannot_attach_files() {
        let db = Database::open_memory().unwrap();
        let dir = std::env::temp_dir().join(format!("vireo-sql-attach-{}", std::process::id()));
        let file = dir.to_str().unwrap().to_string();
        for sql in [
            format!("ATTACH '{file}' AS x"),
            format!("ATTACH ('{file}' || '2') AS x"),
            format!("VACUUM INTO '{file}'"),
        ] {
            let refused = exec(&db, &sql);
            assert!(
                matches!(&refused, Err(SqlError::Sql(m)) if m.contains("authoriz")),
                "{sql}: {refused:?}"
            );
        }
        assert!(!dir.exists());
        exec(&db, "CREATE TABLE t(a); INSERT INTO t VALUES(1)").unwrap();
        exec(&db, "VACUUM").unwrap();
        exec(&db, "ATTACH ':memory:' AS m; CREATE TABLE m.u(b); DETACH m").unwrap();
    }

    #[test]
    fn results_beyond_the_limit_fail() {
        let db = Database::open_memory().unwrap();
        let limits = RunLimits {
            max_result_bytes: 1000,
            ..LIMITS
        };
        let r = db.exec(
            b"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 1000) SELECT x FROM c",
            Access::ReadOnly,
            &limits,
        );
        assert_eq!(r.result, Err(SqlError::ResultTooLarge));
    }

    #[test]
    fn serialize_restore_copy_and_duplicate_keep_data_and_statements() {
        let db = Database::open_memory().unwrap();
        exec(&db, "CREATE TABLE t(a); INSERT INTO t VALUES(42)").unwrap();
        db.define_statement(b"get", b"SELECT a FROM t", false)
            .unwrap();
        let bytes = db.serialize().unwrap();
        let back = Database::restore(&bytes).unwrap();
        let want = Output::Rows {
            columns: vec![b"a".to_vec()],
            rows: vec![vec![Cell::Int(42)]],
        };
        assert_eq!(
            back.exec_statement(b"get", &[], Access::ReadOnly, &LIMITS)
                .result,
            Ok(want.clone())
        );
        let copy = db.duplicate().unwrap();
        exec(&db, "DELETE FROM t").unwrap();
        assert_eq!(
            copy.exec_statement(b"get", &[], Access::ReadOnly, &LIMITS)
                .result,
            Ok(want.clone())
        );
        let dst = Database::open_memory().unwrap();
        copy.copy_into(&dst).unwrap();
        assert_eq!(
            dst.exec_statement(b"get", &[], Access::ReadOnly, &LIMITS)
                .result,
            Ok(want)
        );
        assert!(dst.memory_bytes() > 0);
        // An empty database round-trips too.
        let empty = Database::open_memory().unwrap();
        Database::restore(&empty.serialize().unwrap()).unwrap();
    }

    #[test]
    fn randomly_damaged_payloads_fail_or_load_but_never_panic() {
        // A seeded loop (stable Rust): a real payload with bytes flipped
        // anywhere (header, page contents, statements) either is refused
        // or loads into a database that answers queries or errors.
        let db = Database::open_memory().unwrap();
        exec(
            &db,
            "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT); CREATE INDEX ib ON t(b)",
        )
        .unwrap();
        exec(&db, "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c LIMIT 300) INSERT INTO t SELECT i, hex(randomblob(20)) FROM c").unwrap();
        db.define_statement(b"q", b"SELECT count(*) FROM t WHERE b > ?1", false)
            .unwrap();
        let valid = db.serialize().unwrap();
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let (mut loaded, mut refused) = (0, 0);
        for _ in 0..300 {
            let mut bytes = valid.clone();
            for _ in 0..1 + next() % 8 {
                let i = (next() as usize) % bytes.len();
                bytes[i] = next() as u8;
            }
            match Database::restore(&bytes) {
                Ok(back) => {
                    loaded += 1;
                    let _ = back.exec(b"SELECT * FROM t ORDER BY b", Access::ReadOnly, &LIMITS);
                    let _ = back.exec_statement(b"q", &[b"5"], Access::ReadOnly, &LIMITS);
                }
                Err(_) => refused += 1,
            }
        }
        assert!(refused > 0 && loaded + refused == 300);
    }

    #[test]
    fn corrupt_images_are_refused_when_loaded() {
        let db = Database::open_memory().unwrap();
        exec(&db, "CREATE TABLE t(a); INSERT INTO t VALUES(1)").unwrap();
        let bytes = db.serialize().unwrap();
        let parts = payload::decode(&bytes).unwrap();
        let mut image = parts.image.to_vec();
        // Wreck the schema page's content past the header.
        for b in image.iter_mut().skip(100).take(400) {
            *b = 0xA5;
        }
        let mut bad = Vec::new();
        payload::encode(
            &mut bad,
            &Parts {
                image: &image,
                ..Parts::default()
            },
        );
        assert!(matches!(Database::restore(&bad), Err(SqlError::Corrupt(_))));
        let mut not_sqlite = Vec::new();
        payload::encode(
            &mut not_sqlite,
            &Parts {
                image: b"hello",
                ..Parts::default()
            },
        );
        assert!(matches!(
            Database::restore(&not_sqlite),
            Err(SqlError::Corrupt(_))
        ));
    }
}
