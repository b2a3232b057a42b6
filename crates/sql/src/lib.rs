//! SQL databases as values: embedded SQLite, one database per key.
//!
//! This crate is the engine behind Vireo's `REDISQL.*` commands (RediSQL's
//! command set). It knows nothing of keys, shards or RESP: the server looks
//! a key up, clones the `Arc<Database>` it holds and calls in here.
//!
//! - [`Database`] (`database.rs`): a writing connection behind a mutex
//!   and a pool of reading connections over the same storage (a private
//!   memdb image in memory, WAL for files), so reads run side by side;
//!   its named statements, serialization for RDB / DUMP and copies with
//!   the backup API.
//! - `conn.rs`: one connection, its compiled statements, and the
//!   authorizer that keeps files out of SQL's reach.
//! - `watch.rs`: what stops a running statement (its time limit, or its
//!   client gone: [`Abandon`]), asked by SQLite's progress handler.
//! - `stmt.rs`: statements prepared once and bound to the client's bytes
//!   without copying them (`SQLITE_STATIC`).
//! - [`payload`]: the byte form of a database (path, statements, image),
//!   decoded defensively since RESTORE hands us client bytes.
//! - [`memory`]: routes SQLite's allocations through Rust's global
//!   allocator, so the server's counting allocator (used_memory,
//!   maxmemory) sees them; a growing in-memory image moves to a mapping
//!   of its own, grown by `mremap` instead of copied ([`memory::mapped_bytes`]
//!   is added to used_memory).
//! - [`path`]: where a file-backed database may live (under `dir`).
//! - `value.rs`: a database as the store's module value (TYPE, RDB id,
//!   payload, deep copy) and the decoder [`register`] installs.

mod conn;
mod database;
pub mod memory;
pub mod path;
pub mod payload;
mod stmt;
mod value;
mod watch;

pub use database::Database;
pub use stmt::PARAMETER_MISUSE;
pub use value::{database_of, register, wrap, MODULE_ID, TYPE_NAME};

use std::sync::Arc;
use std::time::Duration;

/// The SQLite library version linked in (`sqlite3_libversion`).
pub fn sqlite_version() -> &'static str {
    rusqlite::version()
}

/// One value of a result row, as SQLite typed it.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// INTEGER.
    Int(i64),
    /// REAL.
    Real(f64),
    /// TEXT (bytes as stored; SQLite does not check UTF-8).
    Text(Vec<u8>),
    /// BLOB.
    Blob(Vec<u8>),
    /// NULL.
    Null,
}

impl Cell {
    /// Bytes the value costs in a result, for the result size limit.
    fn weight(&self) -> usize {
        match self {
            Cell::Text(b) | Cell::Blob(b) => b.len() + 16,
            _ => 16,
        }
    }
}

/// What running statements produced.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// No rows: the number of rows the statements inserted, updated or
    /// deleted (RediSQL's `DONE n`).
    Done(u64),
    /// The last statement's rows, with its column names.
    Rows {
        /// Column names, in order.
        columns: Vec<Vec<u8>>,
        /// Rows, each as long as `columns`.
        rows: Vec<Vec<Cell>>,
    },
}

/// What a run produced, and whether it may have changed the database
/// (so the command is logged for persistence): any successful read-write
/// run (even a SELECT through EXEC: transaction statements like BEGIN and
/// ROLLBACK count as read-only to SQLite yet matter to a replay), or a
/// failed one that changed rows before it failed.
#[derive(Debug)]
pub struct Ran {
    /// The output or the error.
    pub result: Result<Output, SqlError>,
    /// True when the run must be logged.
    pub wrote: bool,
}

/// Bounds on one run.
#[derive(Clone, Default)]
pub struct RunLimits {
    /// Largest result in bytes of cell data (plus 16 per cell) before the
    /// run fails with [`SqlError::ResultTooLarge`].
    pub max_result_bytes: usize,
    /// Longest a run may take before SQLite is interrupted; None: no limit.
    pub time_limit: Option<Duration>,
    /// Asked every [`ABANDON_POLL`] while the run goes on whether anyone
    /// still wants its result; None: the run is always wanted.
    pub abandon: Option<Arc<dyn Abandon>>,
}

impl std::fmt::Debug for RunLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLimits")
            .field("max_result_bytes", &self.max_result_bytes)
            .field("time_limit", &self.time_limit)
            .field("abandon", &self.abandon.is_some())
            .finish()
    }
}

/// How often a running statement asks its [`Abandon`]: often enough that
/// a disconnected client's query stops at once to a human, rarely enough
/// that the question (a system call, for a socket) costs nothing.
pub const ABANDON_POLL: Duration = Duration::from_millis(10);

/// Whoever started a run, asked while it runs whether it still wants the
/// result (its client may have disconnected or been killed, or the server
/// may be stopping). When it answers yes, SQLite is interrupted and the
/// run fails with [`SqlError::Interrupted`], as past its time limit.
pub trait Abandon: Send + Sync {
    /// True when the run should stop now.
    fn abandoned(&self) -> bool;
}

/// How a run may touch the database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Any statement (EXEC, EXEC_STATEMENT).
    ReadWrite,
    /// Read-only statements only (QUERY, QUERY_STATEMENT): others are
    /// refused before they run.
    ReadOnly,
}

/// Why a SQL operation failed. `Display` is the error reply's text,
/// RediSQL's where it has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqlError {
    /// SQLite's own message (syntax errors, constraint violations, …).
    Sql(String),
    /// A parameter count mismatch (RediSQL's MISUSE message).
    Misuse(&'static str),
    /// QUERY of a statement that may write.
    NotReadOnly,
    /// The run passed its time limit and SQLite was interrupted.
    Interrupted,
    /// The result passed [`RunLimits::max_result_bytes`].
    ResultTooLarge,
    /// CREATE_STATEMENT of a name already defined.
    StatementExists,
    /// A statement name not defined; the text says for what.
    NoStatement(&'static str),
    /// A serialized database that cannot be read.
    Corrupt(String),
    /// A path refused or a file that could not be opened.
    Path(String),
}

impl std::fmt::Display for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SqlError::Sql(m) => f.write_str(m),
            SqlError::Misuse(m) => f.write_str(m),
            SqlError::NotReadOnly => f.write_str(
                "Statement is not read only but it may modify the database, \
                 use `EXEC_STATEMENT` instead.",
            ),
            SqlError::Interrupted => f.write_str(
                "It was impossible to return the whole result before the timeout expired.",
            ),
            SqlError::ResultTooLarge => {
                f.write_str("ERR the result is larger than the SQL result limit")
            }
            SqlError::StatementExists => f.write_str(
                "Impossible to overwrite it with this command, try with UPDATE_STATEMENT",
            ),
            SqlError::NoStatement(m) => f.write_str(m),
            SqlError::Corrupt(m) => write!(f, "ERR corrupt SQL database: {m}"),
            SqlError::Path(m) => write!(f, "ERR {m}"),
        }
    }
}

impl std::error::Error for SqlError {}

impl From<rusqlite::Error> for SqlError {
    fn from(e: rusqlite::Error) -> Self {
        match e {
            rusqlite::Error::SqliteFailure(code, _)
                if code.code == rusqlite::ErrorCode::OperationInterrupted =>
            {
                SqlError::Interrupted
            }
            rusqlite::Error::SqliteFailure(_, Some(msg)) => SqlError::Sql(msg),
            other => SqlError::Sql(other.to_string()),
        }
    }
}
