//! MONITOR: the clients that receive every command the server runs, and
//! the line each of them gets (Redis's `replicationFeedMonitors`).

use std::sync::atomic::Ordering;

use vireo_resp::repr::write_repr;
use vireo_resp::Args;
use vireo_store::clock::now_us;

use crate::net::client::cflags;
use crate::net::session::Session;
use crate::net::worker::Msg;
use crate::server::Server;

/// Puts the connection in MONITOR mode; false if it already was (a repeated
/// MONITOR is ignored without a reply, as in Redis).
pub fn start_monitor(server: &Server, session: &mut Session) -> bool {
    if session.monitor {
        return false;
    }
    session.monitor = true;
    session.shared.set_flag(cflags::MONITOR, true);
    let mut m = server.monitors.lock();
    m.push((session.shared.worker, session.id));
    server.monitor_count.store(m.len(), Ordering::Relaxed);
    true
}

/// Takes the connection out of MONITOR mode (RESET, disconnect).
pub fn stop_monitor(server: &Server, session: &mut Session) {
    if !session.monitor {
        return;
    }
    session.monitor = false;
    session.shared.set_flag(cflags::MONITOR, false);
    let mut m = server.monitors.lock();
    m.retain(|(_, id)| *id != session.id);
    server.monitor_count.store(m.len(), Ordering::Relaxed);
}

/// Sends the command line to every MONITOR client, in Redis's format.
pub fn feed_monitors(server: &Server, session: &Session, db: usize, args: Args<'_>) {
    let us = now_us();
    let source = if session.in_script {
        "lua"
    } else {
        &session.shared.addr
    };
    let mut line = format!(
        "+{}.{:06} [{} {}]",
        us / 1_000_000,
        us % 1_000_000,
        db,
        source
    )
    .into_bytes();
    let hidden = crate::exec::redact::redacted_positions(args);
    for (i, a) in args.iter().enumerate() {
        line.push(b' ');
        let shown = if hidden.contains(&i) {
            crate::exec::redact::REDACTED
        } else {
            a
        };
        write_repr(&mut line, shown);
    }
    line.extend_from_slice(b"\r\n");
    let monitors = server.monitors.lock().clone();
    for (worker, id) in monitors {
        if id != session.id {
            server.notify(worker, Msg::Output(id, line.clone()));
        }
    }
}
