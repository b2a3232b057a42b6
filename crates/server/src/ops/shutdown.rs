//! SHUTDOWN and the termination signals, as Redis 7.0's
//! `prepareForShutdown`: unless NOW is given (or `shutdown-timeout` is 0),
//! a master whose replicas have not acknowledged its whole stream holds
//! writes back, asks them for their offsets (GETACK) and waits up to
//! `shutdown-timeout` seconds for them to catch up, INFO showing
//! `shutdown_in_milliseconds` meanwhile. The cron finishes the shutdown
//! as soon as they have, or at the deadline ([`cron`]). Finishing logs
//! the replicas that lag, refuses to exit while the first AOF is still
//! being written (unless FORCE), saves the final dump when asked and
//! stops the server. When that fails, or SHUTDOWN ABORT cancels the wait,
//! the clients blocked in SHUTDOWN get Redis's error and writes resume.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::exec::blocking::Waiter;
use crate::server::{Server, ShutdownSave, HOLD_SHUTDOWN};

/// The error clients get when a shutdown fails or is aborted.
pub const FAILED: &str = "Errors trying to SHUTDOWN. Check logs.";

/// How a shutdown was asked for: SHUTDOWN's arguments, or the words of
/// `shutdown-on-sigterm` / `shutdown-on-sigint`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flags {
    /// Whether the final dump is written.
    pub save: ShutdownSave,
    /// NOW: no waiting for lagging replicas.
    pub now: bool,
    /// FORCE: a failed final save or an unfinished first AOF does not
    /// stop the shutdown.
    pub force: bool,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            save: ShutdownSave::Default,
            now: false,
            force: false,
        }
    }
}

impl Flags {
    /// The flags a `shutdown-on-sig*` value names ("default", or some of
    /// "save", "nosave", "now", "force"; the config check refused others).
    pub fn from_config(value: &str) -> Flags {
        let mut flags = Flags::default();
        for word in value.split_ascii_whitespace() {
            match word {
                "save" => flags.save = ShutdownSave::Save,
                "nosave" => flags.save = ShutdownSave::NoSave,
                "now" => flags.now = true,
                "force" => flags.force = true,
                _ => {}
            }
        }
        flags
    }
}

/// What became of a shutdown request.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server stops.
    Stopping,
    /// A shutdown waits for replicas (this one, or one begun before).
    Pending,
    /// It failed (logged); clients get [`FAILED`].
    Failed,
}

/// The pending shutdown, if one waits for replicas.
#[derive(Default)]
pub struct Shutdown {
    pending: Mutex<Option<Pending>>,
}

struct Pending {
    flags: Flags,
    /// When the shutdown goes ahead whether or not replicas caught up.
    deadline: Instant,
    /// Clients blocked in SHUTDOWN.
    waiters: Vec<Arc<Waiter>>,
}

impl Shutdown {
    /// Milliseconds before a pending shutdown goes ahead anyway (INFO's
    /// `shutdown_in_milliseconds`); None when none is pending.
    pub fn remaining_ms(&self) -> Option<u64> {
        let pending = self.pending.lock();
        let p = pending.as_ref()?;
        Some(
            p.deadline
                .saturating_duration_since(Instant::now())
                .as_millis() as u64,
        )
    }

    /// True while a shutdown waits for replicas.
    pub fn is_pending(&self) -> bool {
        self.pending.lock().is_some()
    }
}

/// Starts a shutdown. When it has to wait (for its replicas, or for one
/// already waiting), `block` is called, under the state's lock, for the
/// client to block (None for a signal).
pub fn request(
    server: &Server,
    mut flags: Flags,
    block: impl FnOnce() -> Option<Arc<Waiter>>,
) -> Outcome {
    let mut pending = server.shutdown.pending.lock();
    if let Some(p) = pending.as_mut() {
        p.waiters.extend(block());
        return Outcome::Pending;
    }
    // A dataset half loaded must not overwrite the dump.
    if server.rdb.loading.load(Ordering::Acquire) {
        flags.save = ShutdownSave::NoSave;
    }
    tracing::warn!("User requested shutdown...");
    let timeout = server
        .config
        .get_one("shutdown-timeout")
        .and_then(|t| t.parse().ok())
        .unwrap_or(10u64);
    if !flags.now && timeout > 0 && !replicas_in_sync(server) {
        *pending = Some(Pending {
            flags,
            deadline: Instant::now() + Duration::from_secs(timeout),
            waiters: block().into_iter().collect(),
        });
        let paused = server.pause.active() != 0;
        server.pause.set_hold(&server.keyspace, HOLD_SHUTDOWN, true);
        tracing::info!("Waiting for replicas before shutting down.");
        drop(pending);
        if !paused {
            // Behind every write acknowledged so far, so that the replicas'
            // answers cover them.
            server.repl.settle(server);
            server.repl.request_acks(server);
        }
        return Outcome::Pending;
    }
    drop(pending);
    finish(server, flags)
}

/// Run by the cron: finishes a pending shutdown once every replica
/// caught up or its time is up.
pub fn cron(server: &Server) {
    let Some((flags, deadline)) = server
        .shutdown
        .pending
        .lock()
        .as_ref()
        .map(|p| (p.flags, p.deadline))
    else {
        return;
    };
    if Instant::now() >= deadline || replicas_in_sync(server) {
        finish(server, flags);
    }
}

/// SHUTDOWN ABORT: cancels a pending shutdown; false if none pends.
pub fn abort(server: &Server) -> bool {
    if !server.shutdown.is_pending() {
        return false;
    }
    cancel(server);
    tracing::info!("Shutdown manually aborted.");
    true
}

/// Whether every replica acknowledged the whole stream (Redis's
/// `isReadyToShutdown`). Never waits: writes the AOF writer has not
/// streamed yet count as not acknowledged (the cron looks again at its
/// next tick), so that SHUTDOWN blocks its client at once, as Redis's
/// does, and clients sent right after see it blocked.
fn replicas_in_sync(server: &Server) -> bool {
    let streamed = !server.aof.is_replicating() || server.aof.wait_written(Duration::ZERO);
    streamed && server.repl.lagging_replicas().1 == 0
}

/// The last step (Redis's `finishShutdown`): reports the replicas, checks
/// the AOF, saves, and stops the server; on failure cancels the shutdown.
fn finish(server: &Server, flags: Flags) -> Outcome {
    let (replicas, lagging, lines) = server.repl.lagging_replicas();
    for line in &lines {
        tracing::warn!("{line}");
    }
    if replicas > 0 {
        tracing::info!(
            "{} of {replicas} replicas are in sync when shutting down.",
            replicas - lagging
        );
    }
    let aof = &server.aof;
    if aof.rewrite_in_progress() {
        if aof.is_writing_first_file() {
            if !flags.force {
                tracing::warn!("Writing initial AOF, can't exit.");
                return fail(server);
            }
            tracing::warn!("Writing initial AOF. Exit anyway.");
        }
        tracing::warn!("There is a child rewriting the AOF. Killing it!");
        aof.cancel_rewrite();
    }
    if server.prepare_shutdown(flags.save, flags.force).is_err() {
        return fail(server);
    }
    Outcome::Stopping
}

/// A failed shutdown: logged, and cancelled.
fn fail(server: &Server) -> Outcome {
    tracing::warn!("Errors trying to shut down the server. Check the logs for more information.");
    cancel(server);
    Outcome::Failed
}

/// Ends a pending shutdown: the clients blocked in SHUTDOWN get the
/// error, and writes resume.
fn cancel(server: &Server) {
    let Some(p) = server.shutdown.pending.lock().take() else {
        return;
    };
    for w in &p.waiters {
        if server.blocking.claim(&server.keyspace, w) {
            let reply = format!("-ERR {FAILED}\r\n").into_bytes();
            crate::exec::blocking::deliver(server, w, reply, false);
        }
    }
    server
        .pause
        .set_hold(&server.keyspace, HOLD_SHUTDOWN, false);
    server.wake_all();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_flags_come_from_the_config_words() {
        assert_eq!(Flags::from_config("default"), Flags::default());
        let f = Flags::from_config("nosave now");
        assert_eq!(
            (f.save, f.now, f.force),
            (ShutdownSave::NoSave, true, false)
        );
        let f = Flags::from_config("save force");
        assert_eq!((f.save, f.now, f.force), (ShutdownSave::Save, false, true));
    }
}
