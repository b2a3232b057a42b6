//! The server log in Redis's format, and the start-up banner.
//!
//! Tools, operators and Redis's own test suite read the log: the suite
//! waits for ` PID: <pid>` in the banner and then for "Ready to accept
//! connections", and greps for Redis's wording of later events. So every
//! line reads as Redis writes it:
//!
//! ```text
//! 4242:M 27 Nov 2026 05:20:01.123 * Ready to accept connections
//! ```
//!
//! that is pid, role (`M` master; `S` replica once replication exists),
//! the local time to the millisecond, the level mark (`.` debug, `-`
//! verbose, `*` notice, `#` warning) and the message. Events come through
//! `tracing`; Redis's four levels map onto tracing's as TRACE = debug,
//! DEBUG = verbose, INFO = notice, WARN and ERROR = warning. `loglevel` can
//! change at run time (CONFIG SET), so the filter reads an atomic rather
//! than being fixed when the subscriber is installed.

use std::fmt::Write as _;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

use crate::server::{REDIS_VERSION, VIREO_VERSION};

/// Redis's verbosity levels, most verbose first (`loglevel`).
const LEVELS: [&str; 4] = ["debug", "verbose", "notice", "warning"];

/// The index in [`LEVELS`] of the least severe level written.
static MIN_LEVEL: AtomicU8 = AtomicU8::new(2);

/// This server follows a master: lines are marked `S` instead of `M`.
static REPLICA_ROLE: AtomicBool = AtomicBool::new(false);

/// Marks the lines written from now on as a replica's (`S`) or a
/// master's (`M`).
pub fn set_replica_role(replica: bool) {
    REPLICA_ROLE.store(replica, Ordering::Relaxed);
}

/// Sets the verbosity from a `loglevel` value (unknown names keep the
/// current one; CONFIG SET has validated the value already).
pub fn set_level(name: &str) {
    if let Some(i) = LEVELS.iter().position(|l| l.eq_ignore_ascii_case(name)) {
        MIN_LEVEL.store(i as u8, Ordering::Relaxed);
    }
}

/// Redis's level index of a tracing level.
fn redis_level(level: &Level) -> u8 {
    match *level {
        Level::TRACE => 0,
        Level::DEBUG => 1,
        Level::INFO => 2,
        _ => 3,
    }
}

/// The mark Redis prints for a level.
fn level_mark(level: u8) -> char {
    ['.', '-', '*', '#'][usize::from(level.min(3))]
}

/// Where log lines go: standard output, or the `logfile` opened for
/// appending.
type Sink = Mutex<Box<dyn Write + Send>>;

/// The sink every line goes to, set once by [`init`]. A static rather
/// than the layer's own field so that the crash report and the watchdog
/// (`ops/crash.rs`) can write Redis's raw blocks to the same place.
static SINK: OnceLock<Sink> = OnceLock::new();

/// The tracing layer writing Redis-format lines to [`SINK`].
struct RedisFormat;

impl<S: Subscriber> Layer<S> for RedisFormat {
    fn register_callsite(
        &self,
        _meta: &'static Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        // The level can change at run time: decide per event.
        tracing::subscriber::Interest::sometimes()
    }

    fn enabled(&self, meta: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        redis_level(meta.level()) >= MIN_LEVEL.load(Ordering::Relaxed)
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut text = Message::default();
        event.record(&mut text);
        let line = format_line(redis_level(event.metadata().level()), &text.0);
        if let Some(sink) = SINK.get() {
            let mut sink = sink.lock();
            let _ = sink.write_all(line.as_bytes());
            let _ = sink.flush();
        }
    }
}

/// Writes `text` to the log as it is, whatever the verbosity (Redis's
/// `LL_RAW` warnings: the blocks of a crash report). Used where the
/// thread may have been stopped anywhere, even while holding the sink's
/// lock, so the lock is waited for a bounded time and standard error
/// takes the text if it stays held.
pub fn write_raw(text: &str) {
    let written = SINK.get().and_then(|sink| {
        let mut sink = sink.try_lock_for(Duration::from_secs(1))?;
        let _ = sink.write_all(text.as_bytes());
        let _ = sink.flush();
        Some(())
    });
    if written.is_none() {
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
}

/// Writes one warning line (`#`) whatever the verbosity, as [`write_raw`]
/// does: for the crash report, where going through `tracing` from a
/// signal handler is one more lock and thread-local to trip on.
pub fn write_warning(message: &str) {
    write_raw(&format_line(3, message));
}

/// Collects an event's message, then its other fields as ` name=value`.
#[derive(Default)]
struct Message(String);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.insert_str(0, value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.insert_str(0, &format!("{value:?}"));
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}

/// One log line: `pid:M dd Mon yyyy hh:mm:ss.mmm <mark> message\n`.
fn format_line(level: u8, message: &str) -> String {
    let role = if REPLICA_ROLE.load(Ordering::Relaxed) {
        'S'
    } else {
        'M'
    };
    format!(
        "{}:{role} {} {} {message}\n",
        std::process::id(),
        timestamp(),
        level_mark(level)
    )
}

/// The local time as Redis prints it: `27 Nov 2026 05:20:01.123`.
fn timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    // SAFETY: localtime_r writes only into `tm`, which lives on this stack
    // frame; `secs` is a valid time_t read through a shared reference.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&secs, &mut tm);
        tm
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        tm.tm_mday,
        MONTHS[tm.tm_mon.clamp(0, 11) as usize],
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        now.subsec_millis()
    )
}

/// Installs the Redis-format logger writing to `logfile` (empty: standard
/// output) at `loglevel`. A log file that cannot be opened falls back to
/// standard output with a message, as the server must still start.
pub fn init(logfile: &str, loglevel: &str) {
    set_level(loglevel);
    let sink: Box<dyn Write + Send> = if logfile.is_empty() {
        Box::new(std::io::stdout())
    } else {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logfile)
        {
            Ok(f) => Box::new(f),
            Err(e) => {
                eprintln!("Can't open the log file: {e}");
                Box::new(std::io::stdout())
            }
        }
    };
    if SINK.set(Mutex::new(sink)).is_ok() {
        let _ = tracing_subscriber::registry().with(RedisFormat).try_init();
    }
}

/// The start-up banner: with `always-show-logo`, a block naming the
/// version, port and pid (the suite waits for its ` PID: ` line); without
/// it, Redis's one-line "Running mode" notice.
pub fn banner(show_logo: bool, port: u16, threads: usize) -> String {
    let pid = std::process::id();
    if !show_logo {
        return format!("Running mode=standalone, port={port}.");
    }
    let lines = [
        String::new(),
        "  .--.".to_string(),
        format!(" ( v  )    Vireo {VIREO_VERSION} (Redis {REDIS_VERSION} compatible)"),
        "  \\  /     Running in standalone mode".to_string(),
        format!("   ''      Port: {port}"),
        format!("           PID: {pid}"),
        format!("           Worker threads: {threads}"),
        String::new(),
    ];
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_as_redis_writes_them() {
        let line = format_line(2, "Ready to accept connections");
        let (pid_role, rest) = line.split_once(' ').unwrap();
        assert_eq!(pid_role, format!("{}:M", std::process::id()));
        // dd Mon yyyy hh:mm:ss.mmm
        let parts: Vec<&str> = rest.splitn(6, ' ').collect();
        assert_eq!(parts[0].len(), 2);
        assert_eq!(parts[1].len(), 3);
        assert_eq!(parts[2].len(), 4);
        assert_eq!(parts[3].len(), "05:20:01.123".len());
        assert_eq!(parts[4], "*");
        assert_eq!(parts[5], "Ready to accept connections\n");
    }

    #[test]
    fn level_marks_follow_redis() {
        let marks: String = (0..4).map(level_mark).collect();
        assert_eq!(marks, ".-*#");
        assert_eq!(redis_level(&Level::WARN), 3);
        assert_eq!(redis_level(&Level::ERROR), 3);
        assert_eq!(redis_level(&Level::TRACE), 0);
    }

    #[test]
    fn the_logo_names_the_pid_and_port() {
        let logo = banner(true, 7777, 2);
        assert!(logo.contains(&format!(" PID: {}", std::process::id())));
        assert!(logo.contains("Port: 7777"));
        assert_eq!(
            banner(false, 7777, 2),
            "Running mode=standalone, port=7777."
        );
    }
}
