//! One SQL database: a writing connection, reading connections, and the
//! named statements they share.
//!
//! A [`Database`] is shared as an `Arc` between the keyspace entry that
//! holds it and the commands running on it, so a command can let go of
//! the keyspace shard before a long query runs.
//!
//! Readers run beside each other, each on a connection of its own taken
//! from a pool (opened on demand, kept when idle), over the same storage:
//! - in memory, SQLite's `memdb` VFS under a name private to this
//!   database (`file:/vireo-sql-N?vfs=memdb`), which lets several
//!   connections share one in-memory image. Its locking is a rollback
//!   journal's: any number of readers, or one writer committing. So
//!   `gate` (an `RwLock`) orders them before SQLite would answer BUSY: a
//!   read holds it shared, a write exclusively; a write waits for the
//!   reads that run, and reads wait for the write;
//! - in a file, in WAL mode: readers read the last commit while the
//!   writer writes, and neither waits for the other (SQLite's WAL rule);
//!   only COPY into the database takes `gate`.
//!
//! Shared cache (`cache=shared`) was not used: its connections share one
//! b-tree whose mutex each holds for a whole `sqlite3_step`, so two
//! aggregate queries would still run one after the other.
//!
//! Writes go through the one writing connection, behind its mutex. While
//! an explicit transaction (BEGIN …) is open on it, reads go there too:
//! they see its uncommitted changes, as on RediSQL's single connection,
//! and a reading connection could not get a lock meanwhile.
//!
//! Lock order: `writer`, then `gate`, then `readers` or `defs` (each held
//! briefly). Reads never take `writer` while holding `gate`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard, RwLock};
use rusqlite::{ffi, Connection, OpenFlags, MAIN_DB};

use crate::conn::{Conn, Defs};
use crate::payload::{self, Parts};
use crate::{Access, Ran, RunLimits, SqlError};

/// Largest image [`Database::restore`] accepts: SQLite's allocation size
/// is an `int`.
const MAX_IMAGE: usize = i32::MAX as usize;

/// Idle reading connections kept per database; more are closed when they
/// finish (as many can be open as threads read at once).
const IDLE_READERS_MAX: usize = 8;

/// How long a connection retries when SQLite reports the database busy
/// (WAL recovery or checkpoints of a file; the gate prevents the rest).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a database's pages live.
#[derive(Debug)]
enum Storage {
    /// In memory: the memdb URI its connections open.
    Memory(String),
    /// In this file (WAL mode).
    File(PathBuf),
}

/// An SQL database held by a key.
pub struct Database {
    writer: Mutex<Conn>,
    /// Idle reading connections.
    readers: Mutex<Vec<Conn>>,
    /// Named statements as defined; connections compile them on use.
    defs: Mutex<Arc<Defs>>,
    /// Orders reads and writes where SQLite's locking cannot run them
    /// together (see the module comment).
    gate: RwLock<()>,
    /// The writing connection has a transaction open (set under `gate`
    /// held exclusively or `writer`, see [`Database::read`]).
    in_transaction: AtomicBool,
    storage: Storage,
    /// SQLite's memory for this database as last measured (image, caches,
    /// schema, statements), for MEMORY USAGE without taking a lock.
    memory: AtomicUsize,
    /// The reading connections' share of `memory`, as last returned.
    readers_memory: AtomicUsize,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("storage", &self.storage)
            .finish_non_exhaustive()
    }
}

impl Database {
    /// A new, empty in-memory database.
    pub fn open_memory() -> Result<Arc<Database>, SqlError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let uri = format!(
            "file:/vireo-sql-{}?vfs=memdb",
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&uri, flags)?;
        // memdb's default ceiling is 1 GiB; maxmemory is the real bound.
        let mut limit: i64 = i64::MAX;
        // SAFETY: the handle is open; SIZE_LIMIT reads and writes one i64.
        unsafe {
            ffi::sqlite3_file_control(
                conn.handle(),
                c"main".as_ptr(),
                ffi::SQLITE_FCNTL_SIZE_LIMIT,
                (&mut limit as *mut i64).cast(),
            )
        };
        Self::wrap(conn, Storage::Memory(uri))
    }

    /// Opens (creating it if needed) the SQLite file at `path`, which the
    /// caller has checked with [`crate::path::resolve`].
    pub fn open_file(path: &Path) -> Result<Arc<Database>, SqlError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| SqlError::Path(format!("cannot open SQL database file: {e}")))?;
        // A file that is not a database fails on its first read: find out
        // now (switching to WAL is that first read).
        let wal: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(|e| SqlError::Corrupt(e.to_string()))?;
        if !wal.eq_ignore_ascii_case("wal") {
            return Err(SqlError::Path(format!(
                "cannot use WAL mode for SQL database file (journal mode {wal})"
            )));
        }
        let db = Self::wrap(conn, Storage::File(path.to_path_buf()))?;
        db.check_integrity()?;
        Ok(db)
    }

    fn wrap(conn: Connection, storage: Storage) -> Result<Arc<Database>, SqlError> {
        conn.busy_timeout(BUSY_TIMEOUT)?;
        if matches!(storage, Storage::Memory(_)) {
            // Pages are read in place from the image, not copied to a cache
            // (measured: without it, small inserts were no faster).
            conn.pragma_update(None, "mmap_size", i64::MAX)?;
        }
        let db = Arc::new(Database {
            writer: Mutex::new(Conn::new(conn)?),
            readers: Mutex::new(Vec::new()),
            defs: Mutex::new(Arc::default()),
            gate: RwLock::new(()),
            in_transaction: AtomicBool::new(false),
            storage,
            memory: AtomicUsize::new(0),
            readers_memory: AtomicUsize::new(0),
        });
        db.measure(&mut db.writer.lock());
        Ok(db)
    }

    /// A new reading connection to this database's storage.
    fn open_reader(&self) -> Result<Conn, SqlError> {
        let conn = match &self.storage {
            Storage::Memory(uri) => {
                let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_URI
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let conn = Connection::open_with_flags(uri, flags)?;
                conn.pragma_update(None, "mmap_size", i64::MAX)?;
                conn
            }
            Storage::File(path) => {
                let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                Connection::open_with_flags(path, flags)?
            }
        };
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.pragma_update(None, "query_only", true)?;
        Conn::new(conn)
    }

    /// The file the database lives in, None in memory.
    pub fn path(&self) -> Option<&Path> {
        match &self.storage {
            Storage::File(p) => Some(p),
            Storage::Memory(_) => None,
        }
    }

    /// SQLite's memory for this database as last measured, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.memory.load(Ordering::Relaxed) + self.readers_memory.load(Ordering::Relaxed)
    }

    /// Runs `sql` (one or more `;`-separated statements) with no
    /// arguments, compiling it once per text and connection. Read-only
    /// runs go to a reading connection (see the module comment).
    pub fn exec(&self, sql: &[u8], access: Access, limits: &RunLimits) -> Ran {
        self.on_conn(access, |conn| conn.exec(sql, access, limits))
    }

    /// Runs the named statement with `args` bound to `?1`, `?2`, ….
    pub fn exec_statement(
        &self,
        name: &[u8],
        args: &[&[u8]],
        access: Access,
        limits: &RunLimits,
    ) -> Ran {
        let defs = Arc::clone(&self.defs.lock());
        self.on_conn(access, |conn| {
            conn.exec_statement(&defs, name, args, access, limits)
        })
    }

    /// Runs `f` on the connection `access` calls for.
    fn on_conn(&self, access: Access, f: impl FnOnce(&mut Conn) -> Ran) -> Ran {
        match access {
            Access::ReadWrite => self.write(f),
            Access::ReadOnly => self.read(f),
        }
    }

    /// Runs `f` on the writing connection, with the gate held for an
    /// in-memory database.
    fn write<R>(&self, f: impl FnOnce(&mut Conn) -> R) -> R {
        let mut writer = self.writer.lock();
        let gate = matches!(self.storage, Storage::Memory(_)).then(|| self.gate.write());
        let r = f(&mut writer);
        self.in_transaction
            .store(writer.in_transaction(), Ordering::Relaxed);
        drop(gate);
        self.measure(&mut writer);
        r
    }

    /// Runs `f` on a reading connection, or on the writing one while it
    /// has a transaction open.
    fn read(&self, f: impl FnOnce(&mut Conn) -> Ran) -> Ran {
        let gate = self.gate.read();
        // Set only by a writer holding the gate or the writer mutex: seen
        // false under the gate, no transaction can open until we let go.
        if self.in_transaction.load(Ordering::Relaxed) {
            drop(gate);
            return f(&mut self.writer.lock());
        }
        let idle = self.readers.lock().pop();
        let mut conn = match idle.map_or_else(|| self.open_reader(), Ok) {
            Ok(conn) => conn,
            Err(e) => {
                return Ran {
                    result: Err(e),
                    wrote: false,
                }
            }
        };
        let ran = f(&mut conn);
        drop(gate);
        let before = conn.measured();
        let now = conn.measure();
        // Added before subtracted: the sum never dips below zero.
        self.readers_memory.fetch_add(now, Ordering::Relaxed);
        self.readers_memory.fetch_sub(before, Ordering::Relaxed);
        let mut idle = self.readers.lock();
        if idle.len() < IDLE_READERS_MAX {
            idle.push(conn);
        } else {
            self.readers_memory.fetch_sub(now, Ordering::Relaxed);
        }
        ran
    }

    /// Defines statement `name` (CREATE_STATEMENT), or replaces it when
    /// `replace` (UPDATE_STATEMENT), which requires it to exist.
    pub fn define_statement(&self, name: &[u8], sql: &[u8], replace: bool) -> Result<(), SqlError> {
        let writer = self.writer.lock();
        let mut defs = self.defs.lock();
        match (defs.sql.contains_key(name), replace) {
            (true, false) => return Err(SqlError::StatementExists),
            (false, true) => {
                return Err(SqlError::NoStatement(
                    "The statement is not present in the database, impossible to update it.",
                ))
            }
            _ => {}
        }
        writer.check_compiles(sql)?;
        let mut next = Defs::clone(&defs);
        next.sql.insert(name.to_vec(), sql.to_vec());
        next.generation += 1;
        *defs = Arc::new(next);
        Ok(())
    }

    /// Removes statement `name` (DELETE_STATEMENT).
    pub fn delete_statement(&self, name: &[u8]) -> Result<(), SqlError> {
        let _writer = self.writer.lock();
        let mut defs = self.defs.lock();
        let mut next = Defs::clone(&defs);
        next.sql.remove(name).ok_or(SqlError::NoStatement(
            "The statement is not present in the database, impossible to delete it.",
        ))?;
        next.generation += 1;
        *defs = Arc::new(next);
        Ok(())
    }

    /// The named statements as (name, SQL), in name order.
    pub fn statements(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let defs = Arc::clone(&self.defs.lock());
        defs.sql
            .iter()
            .map(|(n, s)| (n.clone(), s.clone()))
            .collect()
    }

    /// Replaces `dst`'s content and statements with this database's
    /// (REDISQL.COPY), with SQLite's backup API.
    pub fn copy_into(&self, dst: &Database) -> Result<(), SqlError> {
        if std::ptr::eq(self, dst) {
            return Ok(());
        }
        let (src_writer, mut dst_writer) = lock_pair(self, dst);
        // Backing up into a database needs it to itself: no reader.
        let _dst_gate = dst.gate.write();
        backup(&src_writer.conn, &mut dst_writer.conn)?;
        drop(src_writer);
        let defs = Arc::clone(&self.defs.lock());
        dst.replace_statements(&mut dst_writer, &defs.sql);
        dst.measure(&mut dst_writer);
        Ok(())
    }

    /// Replaces the named statements with `sql` (name → SQL); every
    /// connection recompiles what it uses (the schema changed too).
    fn replace_statements(
        &self,
        writer: &mut Conn,
        sql: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
    ) {
        writer.forget_statements();
        let mut defs = self.defs.lock();
        *defs = Arc::new(Defs {
            generation: defs.generation + 1,
            sql: sql.clone(),
        });
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
    /// statements and its image as the writing connection sees it (an
    /// open transaction's changes included: sqlite3_serialize reads a
    /// named memdb image through the connection's pages, as a file's).
    pub fn serialize(&self) -> Result<Vec<u8>, SqlError> {
        let writer = self.writer.lock();
        let path = self.path().map(|p| p.as_os_str().as_encoded_bytes());
        let defs = Arc::clone(&self.defs.lock());
        let encode = |image: &[u8]| {
            let mut out = Vec::with_capacity(image.len() + 64);
            let statements = defs.sql.iter().map(|(n, s)| (&n[..], &s[..])).collect();
            payload::encode(
                &mut out,
                &Parts {
                    path,
                    statements,
                    image,
                },
            );
            out
        };
        let image = writer.conn.serialize(MAIN_DB)?;
        Ok(encode(&image))
    }

    /// Rebuilds a database from its payload. A file-backed one reopens its
    /// file (the path is checked against [`crate::path::resolve`]'s rules
    /// again, since payloads come from clients too) and takes the image's
    /// content. Corrupt payloads and images are errors.
    pub fn restore(bytes: &[u8]) -> Result<Arc<Database>, SqlError> {
        let parts = payload::decode(bytes)?;
        let image = load_image(parts.image)?;
        let db = match parts.path {
            None => Database::open_memory()?,
            Some(p) => Database::open_file(&crate::path::resolve(p)?)?,
        };
        let mut writer = db.writer.lock();
        // No image (the save could not read a file-backed database): the
        // file's own content stands.
        if let Some(image) = image {
            backup(&image, &mut writer.conn)?;
        }
        for (_, sql) in &parts.statements {
            writer.check_compiles(sql)?;
        }
        let sql = parts
            .statements
            .iter()
            .map(|(n, s)| (n.to_vec(), s.to_vec()))
            .collect();
        db.replace_statements(&mut writer, &sql);
        db.measure(&mut writer);
        drop(writer);
        Ok(db)
    }

    /// `PRAGMA quick_check`: an error unless SQLite finds the file sound.
    fn check_integrity(&self) -> Result<(), SqlError> {
        quick_check(&self.writer.lock().conn)
    }

    /// Records SQLite's memory for the image and the writing connection
    /// (see [`Database::memory_bytes`]).
    fn measure(&self, writer: &mut Conn) {
        let image = match self.storage {
            Storage::Memory(_) => image_bytes(writer.handle()),
            Storage::File(_) => 0,
        };
        self.memory
            .store(image + writer.measure(), Ordering::Relaxed);
    }
}

/// The size of the memdb image under connection `db`'s main database.
fn image_bytes(db: *mut ffi::sqlite3) -> usize {
    let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
    let mut size: ffi::sqlite3_int64 = 0;
    // SAFETY: db is open and its caller has it; FILE_POINTER stores the
    // main database's sqlite3_file (owned by SQLite, alive while db is)
    // into `file`; xFileSize writes one i64.
    unsafe {
        ffi::sqlite3_file_control(
            db,
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_FILE_POINTER,
            (&mut file as *mut *mut ffi::sqlite3_file).cast(),
        );
        if let Some(size_of) = file
            .as_ref()
            .and_then(|f| f.pMethods.as_ref())
            .and_then(|m| m.xFileSize)
        {
            size_of(file, &mut size);
        }
    }
    usize::try_from(size).unwrap_or(0)
}

/// A private in-memory connection holding `image`, checked (SQLite only
/// notices corruption when it reads a damaged page, and a payload must
/// fail when it is loaded, not later); None for an empty image.
fn load_image(image: &[u8]) -> Result<Option<Connection>, SqlError> {
    if image.is_empty() {
        return Ok(None);
    }
    if image.len() > MAX_IMAGE {
        return Err(SqlError::Corrupt("database image too large".into()));
    }
    if !image.starts_with(b"SQLite format 3\0") {
        return Err(SqlError::Corrupt("not an SQLite database image".into()));
    }
    // A file database's image says WAL (format bytes 18 and 19 are 2),
    // which an image in memory cannot use: read it as a rollback one.
    let image: std::borrow::Cow<'_, [u8]> = if image.get(18..20) == Some(&[2, 2][..]) {
        let mut legacy = image.to_vec();
        legacy[18..20].copy_from_slice(&[1, 1]);
        legacy.into()
    } else {
        image.into()
    };
    let mut conn = Connection::open_in_memory()?;
    conn.deserialize_read_exact(MAIN_DB, &image[..], image.len(), false)
        .map_err(|e| SqlError::Corrupt(e.to_string()))?;
    quick_check(&conn)?;
    Ok(Some(conn))
}

/// `PRAGMA quick_check` on `conn`: an error unless SQLite finds it sound.
fn quick_check(conn: &Connection) -> Result<(), SqlError> {
    let verdict: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| SqlError::Corrupt(e.to_string()))?;
    if verdict != "ok" {
        return Err(SqlError::Corrupt(verdict));
    }
    Ok(())
}

/// Locks the writing connections of two distinct databases in address
/// order (so two COPYs in opposite directions cannot deadlock); returns
/// (a's, b's) guards.
fn lock_pair<'a>(a: &'a Database, b: &'a Database) -> (MutexGuard<'a, Conn>, MutexGuard<'a, Conn>) {
    if (a as *const Database) < (b as *const Database) {
        let ga = a.writer.lock();
        (ga, b.writer.lock())
    } else {
        let gb = b.writer.lock();
        (a.writer.lock(), gb)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cell, Output};
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

    /// A run's [`crate::Abandon`] that raises `mine` while it runs and
    /// gives up once `other` is raised too: called while the statement
    /// runs, it proves what ran at the same time without a clock.
    struct Meet {
        mine: Arc<std::sync::atomic::AtomicBool>,
        other: Arc<std::sync::atomic::AtomicBool>,
    }

    impl crate::Abandon for Meet {
        fn abandoned(&self) -> bool {
            self.mine.store(true, Ordering::SeqCst);
            self.other.load(Ordering::SeqCst)
        }
    }

    const FOREVER: &[u8] =
        b"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c";

    /// Limits for a run that only its [`Meet`] (or 30 s) can stop.
    fn meeting(
        mine: &Arc<std::sync::atomic::AtomicBool>,
        other: &Arc<std::sync::atomic::AtomicBool>,
    ) -> RunLimits {
        RunLimits {
            time_limit: Some(Duration::from_secs(30)),
            abandon: Some(Arc::new(Meet {
                mine: Arc::clone(mine),
                other: Arc::clone(other),
            })),
            ..LIMITS
        }
    }

    #[test]
    fn reads_of_one_database_run_at_the_same_time() {
        let db = Database::open_memory().unwrap();
        exec(&db, "CREATE TABLE t(a); INSERT INTO t VALUES(1)").unwrap();
        let (a, b) = (Arc::default(), Arc::default());
        let started = std::time::Instant::now();
        let (la, lb) = (meeting(&a, &b), meeting(&b, &a));
        let other = {
            let db = Arc::clone(&db);
            std::thread::spawn(move || db.exec(FOREVER, Access::ReadOnly, &lb).result)
        };
        let mine = db.exec(FOREVER, Access::ReadOnly, &la).result;
        // Each saw the other running and stopped (not at the time limit).
        assert_eq!(mine, Err(SqlError::Interrupted));
        assert_eq!(other.join().unwrap(), Err(SqlError::Interrupted));
        assert!(started.elapsed() < Duration::from_secs(30));
        // Reads between two connections of one memdb image see writes.
        exec(&db, "INSERT INTO t VALUES(2)").unwrap();
        assert_eq!(
            db.exec(b"SELECT count(*) FROM t", Access::ReadOnly, &LIMITS)
                .result,
            Ok(rows1(Cell::Int(2)))
        );
    }

    #[test]
    fn a_file_database_writes_while_a_read_runs() {
        let dir = std::env::temp_dir().join(format!("vireo-sql-wal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = Database::open_file(&dir.join("w.db")).unwrap();
        exec(&db, "CREATE TABLE t(a)").unwrap();
        let (reading, written) = (Arc::default(), Arc::default());
        let limits = meeting(&reading, &written);
        let read = {
            let db = Arc::clone(&db);
            std::thread::spawn(move || db.exec(FOREVER, Access::ReadOnly, &limits).result)
        };
        while !reading.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        // The read runs (and can only end once this write is done).
        exec(&db, "INSERT INTO t VALUES(1)").unwrap();
        written.store(true, Ordering::SeqCst);
        assert_eq!(read.join().unwrap(), Err(SqlError::Interrupted));
        assert_eq!(
            db.exec(b"SELECT count(*) FROM t", Access::ReadOnly, &LIMITS)
                .result,
            Ok(rows1(Cell::Int(1)))
        );
        drop(db);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_database_in_wal_mode_restores_from_its_payload() {
        let dir = std::env::temp_dir().join(format!("vireo-sql-walr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = Database::open_file(&dir.join("r.db")).unwrap();
        exec(&db, "CREATE TABLE t(a); INSERT INTO t VALUES(5)").unwrap();
        let bytes = db.serialize().unwrap();
        let parts = payload::decode(&bytes).unwrap();
        // Into memory (the image alone), as a COPY or a moved file would.
        let mut in_memory = Vec::new();
        payload::encode(
            &mut in_memory,
            &Parts {
                image: parts.image,
                ..Parts::default()
            },
        );
        let back = Database::restore(&in_memory).unwrap();
        assert_eq!(
            back.exec(b"SELECT a FROM t", Access::ReadOnly, &LIMITS)
                .result,
            Ok(Output::Rows {
                columns: vec![b"a".to_vec()],
                rows: vec![vec![Cell::Int(5)]],
            })
        );
        drop(db);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reads_inside_an_open_transaction_see_its_changes() {
        let db = Database::open_memory().unwrap();
        exec(&db, "CREATE TABLE t(a)").unwrap();
        exec(&db, "BEGIN; INSERT INTO t VALUES(1)").unwrap();
        let count = |db: &Database| {
            db.exec(b"SELECT count(*) FROM t", Access::ReadOnly, &LIMITS)
                .result
        };
        assert_eq!(count(&db), Ok(rows1(Cell::Int(1))));
        // The payload holds what the transaction's connection sees.
        let back = Database::restore(&db.serialize().unwrap()).unwrap();
        assert_eq!(count(&back), Ok(rows1(Cell::Int(1))));
        exec(&db, "ROLLBACK").unwrap();
        assert_eq!(count(&db), Ok(rows1(Cell::Int(0))));
    }

    #[test]
    fn names_that_are_not_utf8_are_errors_or_results() {
        let db = Database::open_memory().unwrap();
        let r = db.exec(b"SELECT \xff\xfe FROM t", Access::ReadOnly, &LIMITS);
        assert!(r.result.is_err());
        db.exec(
            b"CREATE TABLE \"t\xff\"(\"c\xfe\")",
            Access::ReadWrite,
            &LIMITS,
        )
        .result
        .unwrap();
        db.exec(
            b"SELECT \"c\xfe\" FROM \"t\xff\"",
            Access::ReadOnly,
            &LIMITS,
        )
        .result
        .unwrap();
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
