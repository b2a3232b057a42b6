//! SQL databases as keys: RediSQL's command set (`REDISQL.*`) over the
//! embedded SQLite of `vireo-sql`.
//!
//! A key made by `REDISQL.CREATE_DB` holds an `Arc<Database>` (a module
//! value, TYPE `vireo-sql`). Replies have RediSQL's shapes: rows as arrays
//! (INTEGER as integers, REAL as doubles, TEXT and BLOB as bulk strings,
//! NULL as null), `DONE n` (an array of the status `DONE` and the number
//! of rows changed) when a statement returns no row, and RediSQL's error
//! texts (SQLite's own message for SQL errors, without an `ERR` prefix, as
//! a module's `ReplyWithError` sends it). The `.NOW` variants are the same
//! commands: every command here runs at once (RediSQL's plain forms queued
//! to a thread per database; `.NOW` was its synchronous form).
//!
//! Locking: dispatch locks the key's shard as for any command. Reads
//! (QUERY, QUERY_STATEMENT and the reading half of the `.INTO` forms) take
//! the database's `Arc` out of the entry and let go of the shards while the
//! query runs (`Keys::unlocked`), so a long query holds up no other key;
//! reads run side by side on reading connections of their own, and the
//! database orders them with its writer as SQLite allows (`vireo-sql`'s
//! `database.rs`: in memory a write waits for running reads, in a file
//! (WAL) neither waits). Writes (EXEC,
//! EXEC_STATEMENT, …) keep the shard for their duration: that keeps the
//! AOF in execution order and a snapshot's cut consistent with the log, as
//! for every other write. Inside MULTI and scripts nothing is let go (the
//! transaction is isolated). Lock order: shard, then database, never the
//! reverse, so none of this can deadlock.
//!
//! Persistence: writes propagate as executed (statements are replayed),
//! except CREATE_DB of a file, which propagates as a RESTORE of the
//! database as opened, so a replay starts from the file's content then.
//! A run that passes `sql-time-limit` is interrupted by SQLite. A query
//! occupies the worker thread that runs it (as a script does): other keys
//! are served by the other workers and by this one once it returns. So
//! the run itself watches its client ([`ClientGone`], asked by SQLite's
//! progress handler every few milliseconds): a client that disconnects
//! or is killed (CLIENT KILL), or a server that shuts down, interrupts
//! the statement at once instead of at the time limit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use vireo_resp::{Args, ReplyBuf};
use vireo_sql::{Abandon, Access, Cell, Database, Output, Ran, RunLimits, SqlError};
use vireo_store::stream::{AddId, Stream, StreamId};
use vireo_store::{Value, ValueRef};

use super::{errors, flags::*, spec, CommandSpec, Ctx, KeySpec, KEY1};
use crate::exec::notify::class as ev;
use crate::net::client::ClientShared;
use crate::server::Server;

/// Keys at arguments 1 and 2 (COPY's source and destination, `.INTO`'s
/// stream and database).
const KEYS_1_2: KeySpec = KeySpec::Range {
    first: 1,
    last: 2,
    step: 1,
};

/// Flags of the commands that write.
const W: u32 = WRITE | DENYOOM;

/// This family's commands; each but CREATE_DB, STATISTICS and VERSION has
/// a `.NOW` twin (see the module comment).
pub const COMMANDS: &[CommandSpec] = &[
    spec("redisql.create_db", -2, W, KEY1, create_db),
    spec("redisql.statistics", 1, READONLY, KeySpec::None, statistics),
    spec(
        "redisql.version",
        1,
        READONLY | FAST,
        KeySpec::None,
        version,
    ),
    spec("redisql.exec", 3, W, KEY1, exec),
    spec("redisql.exec.now", 3, W, KEY1, exec),
    spec("redisql.query", 3, READONLY, KEY1, query),
    spec("redisql.query.now", 3, READONLY, KEY1, query),
    spec("redisql.query.into", 4, W, KEYS_1_2, query_into),
    spec("redisql.query.into.now", 4, W, KEYS_1_2, query_into),
    spec("redisql.create_statement", 4, W, KEY1, create_statement),
    spec("redisql.create_statement.now", 4, W, KEY1, create_statement),
    spec("redisql.exec_statement", -3, W, KEY1, exec_statement),
    spec("redisql.exec_statement.now", -3, W, KEY1, exec_statement),
    spec(
        "redisql.query_statement",
        -3,
        READONLY,
        KEY1,
        query_statement,
    ),
    spec(
        "redisql.query_statement.now",
        -3,
        READONLY,
        KEY1,
        query_statement,
    ),
    spec(
        "redisql.query_statement.into",
        -4,
        W,
        KEYS_1_2,
        query_statement_into,
    ),
    spec(
        "redisql.query_statement.into.now",
        -4,
        W,
        KEYS_1_2,
        query_statement_into,
    ),
    spec("redisql.update_statement", 4, W, KEY1, update_statement),
    spec("redisql.update_statement.now", 4, W, KEY1, update_statement),
    spec("redisql.delete_statement", 3, WRITE, KEY1, delete_statement),
    spec(
        "redisql.delete_statement.now",
        3,
        WRITE,
        KEY1,
        delete_statement,
    ),
    spec("redisql.copy", 3, W, KEYS_1_2, copy),
    spec("redisql.copy.now", 3, W, KEYS_1_2, copy),
];

/// RediSQL's reply for a command on a key that does not exist.
const KEY_EMPTY: &str = "ERR - Error the key is empty";

/// The commands RediSQL keeps statistics for, in its STATISTICS order.
#[derive(Clone, Copy)]
enum Stat {
    CreateDb,
    Exec,
    Query,
    QueryInto,
    CreateStatement,
    ExecStatement,
    UpdateStatement,
    DeleteStatement,
    QueryStatement,
    QueryStatementInto,
    Copy,
}

const STAT_NAMES: [&str; 11] = [
    "CREATE_DB",
    "EXEC",
    "QUERY",
    "QUERY.INTO",
    "CREATE_STATEMENT",
    "EXEC_STATEMENT",
    "UPDATE_STATEMENT",
    "DELETE_STATEMENT",
    "QUERY_STATEMENT",
    "QUERY_STATEMENT.INTO",
    "COPY",
];

/// Per command: calls, successes, errors (RediSQL's three counters).
static STATS: [[AtomicU64; 3]; 11] = [const { [const { AtomicU64::new(0) }; 3] }; 11];

/// Counts a call of `which` and whether it succeeded.
fn count(which: Stat, ok: bool) {
    let c = &STATS[which as usize];
    c[0].fetch_add(1, Ordering::Relaxed);
    c[if ok { 1 } else { 2 }].fetch_add(1, Ordering::Relaxed);
}

/// The limits a run observes: `sql-time-limit`, a result no larger than
/// `proto-max-bulk-len` (a bound on what one reply may build), and its
/// client's interest ([`ClientGone`]). A replay (AOF loading, a master's
/// stream) is never cut short: a statement that completed once must
/// complete again, however slow the machine is now, whatever its link.
fn limits(ctx: &Ctx<'_>) -> RunLimits {
    let hot = &ctx.server.config.hot;
    let replay = ctx.session.replaying || ctx.session.from_master;
    let ms = if replay {
        0
    } else {
        hot.sql_time_limit.load(Ordering::Relaxed)
    };
    RunLimits {
        max_result_bytes: usize::try_from(hot.proto_max_bulk_len.load(Ordering::Relaxed))
            .unwrap_or(usize::MAX),
        time_limit: (ms > 0).then(|| Duration::from_millis(ms)),
        abandon: (!replay).then(|| {
            Arc::new(ClientGone {
                client: Arc::clone(&ctx.session.shared),
                server: ctx.server.arc(),
            }) as Arc<dyn Abandon>
        }),
    }
}

/// A run's client, as its statement asks whether to go on: not when the
/// client hung up, was killed, or the server is shutting down (which
/// waits for every worker, so for the statement too).
struct ClientGone {
    client: Arc<ClientShared>,
    server: Arc<Server>,
}

impl Abandon for ClientGone {
    fn abandoned(&self) -> bool {
        self.client.killed.load(Ordering::Relaxed)
            || self.server.shutting_down.load(Ordering::Acquire)
            || self.client.peer_hung_up()
    }
}

/// The database at `key`, looked up for a write (which keeps the cut-time
/// version for a snapshot in progress) or a read; the error reply when
/// the key is missing or holds something else.
fn database(ctx: &mut Ctx<'_>, key: &[u8], write: bool) -> Result<Arc<Database>, &'static str> {
    let entry = if write {
        ctx.keys.get_mut(ctx.db, key)
    } else {
        ctx.keys.get_read(ctx.db, key)
    };
    match entry.map(|e| e.value()) {
        None => Err(KEY_EMPTY),
        Some(ValueRef::Module(m)) => vireo_sql::database_of(m).ok_or(errors::WRONGTYPE),
        Some(_) => Err(errors::WRONGTYPE),
    }
}

/// Runs `f` without the command's shards unless a transaction or script
/// holds them for isolation (see the module comment).
fn off_shards<R>(ctx: &mut Ctx<'_>, f: impl FnOnce() -> R) -> R {
    if ctx.deny_blocking {
        f()
    } else {
        ctx.keys.unlocked(f)
    }
}

/// Writes a result in RediSQL's shape.
fn reply_output(out: &mut ReplyBuf, output: &Output) {
    match output {
        Output::Done(n) => {
            out.array(2);
            out.simple("DONE");
            out.int(i64::try_from(*n).unwrap_or(i64::MAX));
        }
        Output::Rows { rows, .. } => {
            out.array(rows.len());
            for row in rows {
                out.array(row.len());
                for cell in row {
                    match cell {
                        Cell::Int(v) => out.int(*v),
                        Cell::Real(v) => out.double(*v),
                        Cell::Text(b) | Cell::Blob(b) => out.bulk(b),
                        Cell::Null => out.null(),
                    }
                }
            }
        }
    }
}

/// Replies `result` (output or error), counts it, and returns whether it
/// succeeded.
fn reply_result(ctx: &mut Ctx<'_>, which: Stat, result: &Result<Output, SqlError>) -> bool {
    count(which, result.is_ok());
    match result {
        Ok(output) => reply_output(ctx.out, output),
        Err(e) => ctx.out.error(&e.to_string()),
    }
    result.is_ok()
}

/// Replies an error for `which` and counts it.
fn fail(ctx: &mut Ctx<'_>, which: Stat, msg: &str) {
    count(which, false);
    ctx.out.error(msg);
}

/// Records a change to the database at `key`: WATCH, dirty (so the
/// command is logged as executed) and a module keyspace event.
fn changed(ctx: &mut Ctx<'_>, key: &[u8], event: &str) {
    ctx.modified(key);
    ctx.notify(ev::MODULE, event, key);
}

/// REDISQL.CREATE_DB key [path]
fn create_db(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if args.len() > 3 {
        return fail(
            ctx,
            Stat::CreateDb,
            "Wrong number of arguments, it accepts 2 or 3",
        );
    }
    let key = args.get(1);
    // RediSQL refuses any existing key, a database included.
    if ctx.keys.get_mut(ctx.db, key).is_some() {
        return fail(ctx, Stat::CreateDb, errors::WRONGTYPE);
    }
    let path = args.try_get(2).filter(|p| *p != b":memory:");
    let opened = match path {
        None => Database::open_memory(),
        Some(p) => vireo_sql::path::resolve(p).and_then(|p| Database::open_file(&p)),
    };
    let db = match opened {
        Ok(db) => db,
        Err(e) => return fail(ctx, Stat::CreateDb, &e.to_string()),
    };
    let value = Value::Module(vireo_sql::wrap(db));
    if path.is_some() {
        // The file may hold data: a replay must start from it as it is now.
        let payload = vireo_store::rdb::dump_payload(
            value.as_ref(),
            &vireo_store::rdb::EncodeOptions::default(),
        );
        ctx.propagate(&[&b"RESTORE"[..], key, b"0", &payload]);
    }
    ctx.keys.set(ctx.db, key, value);
    changed(ctx, key, "redisql.create_db");
    count(Stat::CreateDb, true);
    ctx.out.ok();
}

/// REDISQL.EXEC key statement
fn exec(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    let db = match database(ctx, key, true) {
        Ok(db) => db,
        Err(e) => return fail(ctx, Stat::Exec, e),
    };
    let ran = db.exec(args.get(2), Access::ReadWrite, &limits(ctx));
    finish_write(ctx, key, Stat::Exec, ran, "redisql.exec");
}

/// Replies a write's result and records the change when it made one.
fn finish_write(ctx: &mut Ctx<'_>, key: &[u8], which: Stat, ran: Ran, event: &str) {
    reply_result(ctx, which, &ran.result);
    if ran.wrote {
        changed(ctx, key, event);
    }
}

/// REDISQL.QUERY key statement
fn query(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let db = match database(ctx, args.get(1), false) {
        Ok(db) => db,
        Err(e) => return fail(ctx, Stat::Query, e),
    };
    let limits = limits(ctx);
    let ran = off_shards(ctx, || db.exec(args.get(2), Access::ReadOnly, &limits));
    reply_result(ctx, Stat::Query, &ran.result);
}

/// REDISQL.CREATE_STATEMENT key name statement
fn create_statement(ctx: &mut Ctx<'_>, args: Args<'_>) {
    define(ctx, args, false, Stat::CreateStatement);
}

/// REDISQL.UPDATE_STATEMENT key name statement
fn update_statement(ctx: &mut Ctx<'_>, args: Args<'_>) {
    define(ctx, args, true, Stat::UpdateStatement);
}

/// CREATE_STATEMENT, or UPDATE_STATEMENT when `replace`.
fn define(ctx: &mut Ctx<'_>, args: Args<'_>, replace: bool, which: Stat) {
    let key = args.get(1);
    let db = match database(ctx, key, true) {
        Ok(db) => db,
        Err(e) => return fail(ctx, which, e),
    };
    if let Err(e) = db.define_statement(args.get(2), args.get(3), replace) {
        return fail(ctx, which, &e.to_string());
    }
    changed(ctx, key, "redisql.statement");
    count(which, true);
    ctx.out.ok();
}

/// REDISQL.DELETE_STATEMENT key name
fn delete_statement(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    let db = match database(ctx, key, true) {
        Ok(db) => db,
        Err(e) => return fail(ctx, Stat::DeleteStatement, e),
    };
    if let Err(e) = db.delete_statement(args.get(2)) {
        return fail(ctx, Stat::DeleteStatement, &e.to_string());
    }
    changed(ctx, key, "redisql.statement");
    count(Stat::DeleteStatement, true);
    ctx.out.ok();
}

/// The statement arguments from index `from`, borrowed from the request
/// (bound to SQLite without a copy).
fn statement_args<'a>(args: Args<'a>, from: usize) -> Vec<&'a [u8]> {
    (from..args.len()).map(|i| args.get(i)).collect()
}

/// REDISQL.EXEC_STATEMENT key name [arg ...]
fn exec_statement(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let key = args.get(1);
    let db = match database(ctx, key, true) {
        Ok(db) => db,
        Err(e) => return fail(ctx, Stat::ExecStatement, e),
    };
    let bound = statement_args(args, 3);
    let ran = db.exec_statement(args.get(2), &bound, Access::ReadWrite, &limits(ctx));
    finish_write(ctx, key, Stat::ExecStatement, ran, "redisql.exec_statement");
}

/// REDISQL.QUERY_STATEMENT key name [arg ...]
fn query_statement(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let db = match database(ctx, args.get(1), false) {
        Ok(db) => db,
        Err(e) => return fail(ctx, Stat::QueryStatement, e),
    };
    let bound = statement_args(args, 3);
    let limits = limits(ctx);
    let ran = off_shards(ctx, || {
        db.exec_statement(args.get(2), &bound, Access::ReadOnly, &limits)
    });
    reply_result(ctx, Stat::QueryStatement, &ran.result);
}

/// REDISQL.QUERY.INTO stream key statement
fn query_into(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let db = match database(ctx, args.get(2), false) {
        Ok(db) => db,
        Err(e) => return fail(ctx, Stat::QueryInto, e),
    };
    let limits = limits(ctx);
    let ran = off_shards(ctx, || db.exec(args.get(3), Access::ReadOnly, &limits));
    into_stream(ctx, args.get(1), Stat::QueryInto, ran.result);
}

/// REDISQL.QUERY_STATEMENT.INTO stream key name [arg ...]
fn query_statement_into(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let db = match database(ctx, args.get(2), false) {
        Ok(db) => db,
        Err(e) => return fail(ctx, Stat::QueryStatementInto, e),
    };
    let bound = statement_args(args, 4);
    let limits = limits(ctx);
    let ran = off_shards(ctx, || {
        db.exec_statement(args.get(3), &bound, Access::ReadOnly, &limits)
    });
    into_stream(ctx, args.get(1), Stat::QueryStatementInto, ran.result);
}

/// Appends each row of `result` to the stream at `key` (XADD with a
/// generated ID; fields `type:column`, as RediSQL names them) and replies
/// RediSQL's `[stream, first ID, last ID, count]`, or `DONE 0` with no
/// rows. Each entry propagates as an XADD with its ID.
fn into_stream(ctx: &mut Ctx<'_>, key: &[u8], which: Stat, result: Result<Output, SqlError>) {
    let (columns, rows) = match result {
        Err(e) => return fail(ctx, which, &e.to_string()),
        Ok(Output::Rows { columns, rows }) => (columns, rows),
        Ok(done) => {
            count(which, true);
            return reply_output(ctx.out, &done);
        }
    };
    let stream = match ctx.keys.get_mut(ctx.db, key) {
        None => None,
        Some(e) if matches!(e.value(), ValueRef::Stream(_)) => Some(()),
        Some(_) => return fail(ctx, which, errors::WRONGTYPE),
    };
    if stream.is_none() {
        ctx.keys
            .set(ctx.db, key, Value::Stream(Box::new(Stream::new())));
    }
    let mut ids = Vec::with_capacity(rows.len());
    for row in &rows {
        let fields = stream_fields(&columns, row);
        match append_entry(ctx, key, &fields) {
            Ok(id) => ids.push(id),
            Err(e) => return fail(ctx, which, e),
        }
        let id_text = ids[ids.len() - 1].to_string();
        let mut cmd: Vec<&[u8]> = vec![b"XADD", key, id_text.as_bytes()];
        cmd.extend(fields.iter().flat_map(|(f, v)| [&f[..], &v[..]]));
        ctx.propagate(&cmd);
    }
    ctx.modified(key);
    ctx.notify(ev::STREAM, "xadd", key);
    ctx.signal_ready(key);
    count(which, true);
    ctx.out.array(4);
    ctx.out.bulk(key);
    ctx.out.bulk(ids[0].to_string().as_bytes());
    ctx.out.bulk(ids[ids.len() - 1].to_string().as_bytes());
    ctx.out.int(ids.len() as i64);
}

/// A row as stream fields: `int:a` → `1`, `real:x` → `1.5`, `text:b`,
/// `blob:c`, and `null:d` → `(null)`.
fn stream_fields(columns: &[Vec<u8>], row: &[Cell]) -> Vec<(Vec<u8>, Vec<u8>)> {
    columns
        .iter()
        .zip(row)
        .map(|(name, cell)| {
            let (kind, value) = match cell {
                Cell::Int(v) => ("int", v.to_string().into_bytes()),
                Cell::Real(v) => ("real", v.to_string().into_bytes()),
                Cell::Text(b) => ("text", b.clone()),
                Cell::Blob(b) => ("blob", b.clone()),
                Cell::Null => ("null", b"(null)".to_vec()),
            };
            let mut field = kind.as_bytes().to_vec();
            field.push(b':');
            field.extend_from_slice(name);
            (field, value)
        })
        .collect()
}

/// XADDs one entry with a generated ID to the stream at `key` (which
/// exists and is a stream).
fn append_entry(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    fields: &[(Vec<u8>, Vec<u8>)],
) -> Result<StreamId, &'static str> {
    let limits = ctx.server.config.hot.stream_node_limits();
    let Some(Value::Stream(s)) = ctx.keys.get_mut(ctx.db, key).map(|e| e.value_mut()) else {
        return Err(errors::WRONGTYPE);
    };
    let pairs = fields.iter().map(|(f, v)| (&f[..], &v[..]));
    s.add(AddId::Auto, pairs, limits, vireo_store::clock::now_ms())
        .map_err(|e| e.message())
}

/// REDISQL.COPY source destination: the destination database takes the
/// source's content and statements.
fn copy(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let src = match database(ctx, args.get(1), false) {
        Ok(db) => db,
        Err(e) => return fail(ctx, Stat::Copy, e),
    };
    let dst_key = args.get(2);
    let Ok(dst) = database(ctx, dst_key, true) else {
        return fail(ctx, Stat::Copy, "Error in opening the DESTINATION database");
    };
    if let Err(e) = src.copy_into(&dst) {
        return fail(ctx, Stat::Copy, &e.to_string());
    }
    changed(ctx, dst_key, "redisql.copy");
    count(Stat::Copy, true);
    ctx.out.ok();
}

/// REDISQL.STATISTICS: RediSQL's counters, `[name, count]` pairs (a map
/// for RESP3 clients).
fn statistics(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let resp3 = ctx.out.protocol() == vireo_resp::Protocol::Resp3;
    if resp3 {
        ctx.out.map(STAT_NAMES.len() * 3);
    } else {
        ctx.out.array(STAT_NAMES.len() * 3);
    }
    for (name, counters) in STAT_NAMES.iter().zip(&STATS) {
        for (suffix, c) in ["", " OK", " ERR"].iter().zip(counters) {
            if !resp3 {
                ctx.out.array(2);
            }
            ctx.out.bulk(format!("{name}{suffix}").as_bytes());
            ctx.out.int(c.load(Ordering::Relaxed) as i64);
        }
    }
}

/// REDISQL.VERSION: this implementation's version and SQLite's.
fn version(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let v = format!(
        "vireo-sql {} (SQLite {})",
        env!("CARGO_PKG_VERSION"),
        vireo_sql::sqlite_version()
    );
    ctx.out.bulk(v.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_fields_name_the_type_and_column_as_redisql() {
        let cols = vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()];
        let row = vec![
            Cell::Int(1),
            Cell::Real(1.5),
            Cell::Text(b"x".to_vec()),
            Cell::Null,
        ];
        let f = stream_fields(&cols, &row);
        let pairs: Vec<(&[u8], &[u8])> = f.iter().map(|(a, b)| (&a[..], &b[..])).collect();
        assert_eq!(
            pairs,
            vec![
                (&b"int:a"[..], &b"1"[..]),
                (b"real:b", b"1.5"),
                (b"text:c", b"x"),
                (b"null:d", b"(null)"),
            ]
        );
    }

    #[test]
    fn results_have_redisql_shapes() {
        let mut out = ReplyBuf::new(vireo_resp::Protocol::Resp2);
        reply_output(&mut out, &Output::Done(3));
        assert_eq!(out.as_bytes(), b"*2\r\n+DONE\r\n:3\r\n");
        let mut out = ReplyBuf::new(vireo_resp::Protocol::Resp2);
        reply_output(
            &mut out,
            &Output::Rows {
                columns: vec![b"a".to_vec(), b"b".to_vec()],
                rows: vec![
                    vec![Cell::Int(1), Cell::Real(0.5)],
                    vec![Cell::Blob(b"z".to_vec()), Cell::Null],
                ],
            },
        );
        assert_eq!(
            out.as_bytes(),
            b"*2\r\n*2\r\n:1\r\n$3\r\n0.5\r\n*2\r\n$1\r\nz\r\n$-1\r\n"
        );
    }
}
