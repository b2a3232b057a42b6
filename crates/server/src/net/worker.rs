//! Worker threads: one mio event loop each, owning the connections handed
//! to it by the acceptor for their whole life.
//!
//! Other threads talk to a worker only through its [`WorkerHandle`]: a
//! message queue plus a `mio::Waker`.
//!
//! While one connection's commands run, that connection is taken out of
//! the worker's table, so that a script running too long can serve the
//! worker's other connections from inside its run ([`serve_while_busy`]),
//! as Redis processes events while a script is busy.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Token, Waker};
use parking_lot::Mutex;
use slab::Slab;
use vireo_store::clock::now_ms;

use crate::exec::blocking::Waiter;
use crate::net::client::{cflags, ClientShared};
use crate::net::conn::{Close, Conn, Stream};
use crate::net::session::Session;
use crate::server::Server;

const WAKER: Token = Token(usize::MAX);
/// How often housekeeping runs (timeouts, paused clients).
const TICK: Duration = Duration::from_millis(100);
/// A connection idle this long gives back its buffers (Redis frees an idle
/// client's query buffer after two seconds).
const IDLE_RELEASE_MS: u64 = 2000;
/// The shortest time between two purges of a worker's allocator heap after
/// idle connections gave back their buffers.
const PURGE_INTERVAL: Duration = Duration::from_secs(1);

/// A message to a worker.
pub enum Msg {
    /// A newly accepted connection to adopt.
    NewConn {
        stream: Stream,
        addr: String,
        laddr: String,
        fd: i32,
        unix: bool,
    },
    /// Close this client (CLIENT KILL).
    Kill(u64),
    /// Append these bytes to a client's output (MONITOR feed).
    Output(u64, Vec<u8>),
    /// A blocked client's wait was ended by another thread (served by a
    /// push, CLIENT UNBLOCK): write its reply and resume its input.
    Unblocked {
        waiter: Arc<Waiter>,
        reply: Vec<u8>,
        failed: bool,
    },
    /// A Pub/Sub message or invalidation for these clients of the
    /// worker, encoded as a RESP2 array (see
    /// [`crate::exec::pubsub::write_push`]).
    Push { ids: Vec<u64>, encoded: Arc<[u8]> },
    /// Just look around (shutdown, unpause).
    Wake,
}

/// How other threads reach a worker.
pub struct WorkerHandle {
    waker: Waker,
    inbox: Mutex<Vec<Msg>>,
}

impl WorkerHandle {
    /// Queues a message and wakes the worker.
    ///
    /// Only the message that finds the inbox empty wakes it: the worker
    /// takes the whole inbox at once after a wake-up, so later messages ride
    /// on the pending one. A pipeline of 16 PUBLISHes to a subscriber thus
    /// costs one `eventfd` write instead of 16 (one per message measured
    /// 200,002 `write` calls for 200,000 PUBLISHes, Redis 25,001 in all).
    pub fn send(&self, msg: Msg) {
        let was_empty = {
            let mut inbox = self.inbox.lock();
            inbox.push(msg);
            inbox.len() == 1
        };
        if was_empty {
            self.wake();
        }
    }

    /// Queues a message from the worker's own thread, without waking it:
    /// its loop drains the inbox before it next waits ([`run`]). A PUBLISH
    /// to a subscriber of the same worker thus costs no `eventfd` write and
    /// no extra trip through `epoll`.
    fn send_from_own_thread(&self, msg: Msg) {
        self.inbox.lock().push(msg);
        OWN_INBOX_PENDING.set(true);
    }

    /// Wakes the worker without a message.
    pub fn wake(&self) {
        let _ = self.waker.wake();
    }
}

/// Creates a worker's poller and handle; the loop runs in [`run`].
pub fn create() -> std::io::Result<(Poll, WorkerHandle)> {
    let poll = Poll::new()?;
    let waker = Waker::new(poll.registry(), WAKER)?;
    Ok((
        poll,
        WorkerHandle {
            waker,
            inbox: Mutex::new(Vec::new()),
        },
    ))
}

struct Worker {
    id: usize,
    server: Arc<Server>,
    poll: Poll,
    /// Connections; None while the connection's commands run (taken out).
    conns: Slab<Option<Conn>>,
    /// Connections that may have unread input (they used up their turn).
    more_input: Vec<usize>,
    /// client id → slab index, for messages addressed by id.
    by_id: std::collections::HashMap<u64, usize>,
    /// Deadlines of blocked clients, as (Unix ms, client id); entries of
    /// clients no longer blocked are dropped when reached.
    deadlines: BTreeSet<(u64, u64)>,
    /// Connections whose replies wait for an AOF fsync (`appendfsync
    /// always`); the AOF writer wakes this worker when it has synced.
    held: Vec<usize>,
    /// When idle connections' memory was last handed back to the system.
    last_purge: Instant,
    /// Buffers were released since the last purge.
    purge_pending: bool,
}

/// Runs worker `id`'s event loop until the server shuts down.
pub fn run(id: usize, server: Arc<Server>, poll: Poll) {
    let mut w = Worker {
        id,
        server,
        poll,
        conns: Slab::new(),
        more_input: Vec::new(),
        by_id: Default::default(),
        deadlines: BTreeSet::new(),
        held: Vec::new(),
        last_purge: Instant::now(),
        purge_pending: false,
    };
    let mut events = Events::with_capacity(1024);
    let mut last_tick = Instant::now();
    crate::ops::watchdog::register_worker(id);
    OWN_WORKER.set(Some(id));
    loop {
        // What this thread queued for itself (see `send_from_own_thread`)
        // goes out before the loop may sleep.
        while OWN_INBOX_PENDING.replace(false) {
            w.drain_inbox();
        }
        let mut timeout = if w.more_input.is_empty() {
            TICK.saturating_sub(last_tick.elapsed())
        } else {
            Duration::ZERO
        };
        if let Some(&(deadline, _)) = w.deadlines.first() {
            // A wait times out once the clock is past its deadline.
            let ms = (deadline + 1).saturating_sub(now_ms());
            timeout = timeout.min(Duration::from_millis(ms));
        }
        crate::ops::watchdog::idle(id);
        if let Err(e) = w.poll.poll(&mut events, Some(timeout)) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                tracing::error!("worker {id}: poll failed: {e}");
                break;
            }
        }
        crate::ops::watchdog::busy(id);
        // Whatever runs commands next times itself from a fresh reading.
        vireo_store::clock::anchor_chain();
        for ev in events.iter() {
            if ev.token() == WAKER {
                w.drain_inbox();
                continue;
            }
            let idx = ev.token().0;
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                // Without a pending EOF or error, a short read proves the
                // socket drained (see `Conn::on_readable`).
                w.on_readable_trusting_short_reads(idx, !ev.is_read_closed() && !ev.is_error());
            } else if ev.is_writable() {
                w.flush(idx);
            }
        }
        for idx in std::mem::take(&mut w.more_input) {
            w.on_readable(idx);
        }
        for idx in std::mem::take(&mut w.held) {
            w.flush(idx);
        }
        w.expire_blocked();
        if last_tick.elapsed() >= TICK {
            last_tick = Instant::now();
            w.tick();
        }
        if w.server.shutting_down.load(Ordering::Acquire) {
            w.shutdown();
            break;
        }
    }
}

impl Worker {
    fn drain_inbox(&mut self) {
        let msgs = std::mem::take(
            &mut *self.server.workers.get().expect("workers set")[self.id]
                .inbox
                .lock(),
        );
        // Connections given pushes, flushed once after the batch.
        let mut pushed = Vec::new();
        // Messages for the connection whose commands are running (a busy
        // script's) wait for it to be back.
        let mut later = Vec::new();
        for msg in msgs {
            match msg {
                Msg::NewConn {
                    stream,
                    addr,
                    laddr,
                    fd,
                    unix,
                } => self.adopt(stream, addr, laddr, fd, unix),
                Msg::Kill(id) => {
                    if let Some(&idx) = self.by_id.get(&id) {
                        self.close(idx);
                    }
                }
                Msg::Output(id, bytes) => {
                    if let Some(&idx) = self.by_id.get(&id) {
                        match self.conn_mut(idx) {
                            Some(conn) => conn.out.raw(&bytes),
                            None => later.push(Msg::Output(id, bytes)),
                        }
                        self.flush(idx);
                    }
                }
                Msg::Unblocked {
                    waiter,
                    reply,
                    failed,
                } => {
                    if let Some(&idx) = self.by_id.get(&waiter.client.id) {
                        if self.conn_mut(idx).is_none() {
                            later.push(Msg::Unblocked {
                                waiter,
                                reply,
                                failed,
                            });
                            continue;
                        }
                        self.unblocked(idx, &waiter, &reply, failed);
                    }
                }
                Msg::Push { ids, encoded } => {
                    // The running connection gets its pushes once it is back.
                    let mut deferred = Vec::new();
                    for id in ids {
                        if let Some(&idx) = self.by_id.get(&id) {
                            match self.conn_mut(idx) {
                                Some(conn) => {
                                    crate::exec::pubsub::write_push(&mut conn.out, &encoded);
                                    pushed.push(idx);
                                }
                                None => deferred.push(id),
                            }
                        }
                    }
                    if !deferred.is_empty() {
                        later.push(Msg::Push {
                            ids: deferred,
                            encoded,
                        });
                    }
                }
                Msg::Wake => {}
            }
        }
        pushed.sort_unstable();
        pushed.dedup();
        for idx in pushed {
            self.flush(idx);
        }
        if !later.is_empty() {
            let handle = &self.server.workers.get().expect("workers set")[self.id];
            handle.inbox.lock().extend(later);
            handle.wake();
        }
    }

    /// Connection `idx`, unless absent or running.
    fn conn_mut(&mut self, idx: usize) -> Option<&mut Conn> {
        self.conns.get_mut(idx).and_then(Option::as_mut)
    }

    /// Connection `idx`, unless absent or running.
    fn conn(&self, idx: usize) -> Option<&Conn> {
        self.conns.get(idx).and_then(Option::as_ref)
    }

    /// Runs `f` on connection `idx` taken out of the table, so that a busy
    /// script among its commands can serve the other connections
    /// ([`serve_while_busy`]) through this worker meanwhile.
    fn run_conn<R>(
        &mut self,
        idx: usize,
        f: impl FnOnce(&mut Conn, &Server, &crate::server::WorkerStats) -> R,
    ) -> Option<R> {
        let mut conn = self.conns.get_mut(idx)?.take()?;
        let server = self.server.clone();
        let stats = server.worker_stats[self.id].clone();
        // `self` is not used until the pointer is withdrawn below.
        let outer = RUNNING.replace(Some((self as *mut Worker, idx)));
        let result = f(&mut conn, &server, &stats);
        RUNNING.set(outer);
        self.conns[idx] = Some(conn);
        Some(result)
    }

    /// One round of event handling for the connections other than
    /// `running`, from inside its busy script.
    fn serve_others(&mut self, running: usize) {
        let mut events = Events::with_capacity(256);
        if self.poll.poll(&mut events, Some(Duration::ZERO)).is_err() {
            return;
        }
        vireo_store::clock::anchor_chain();
        // The inbox is read every round: the loop may have taken the waker's
        // event just before the script started (new connections, messages).
        self.drain_inbox();
        for ev in events.iter() {
            if ev.token() == WAKER {
                continue;
            }
            let idx = ev.token().0;
            if idx == running || self.conn(idx).is_none() {
                // Its events are handled once the script is over.
                self.more_input.push(idx);
                continue;
            }
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                self.on_readable_trusting_short_reads(idx, !ev.is_read_closed() && !ev.is_error());
            } else if ev.is_writable() {
                self.flush(idx);
            }
        }
        // Every other connection gets a turn, not only those with new
        // events: an event the loop took just before the script started
        // would not be reported again (edge-triggered polling).
        let others: Vec<usize> = self
            .conns
            .iter()
            .filter_map(|(i, c)| (i != running && c.is_some()).then_some(i))
            .collect();
        let deferred: Vec<usize> = std::mem::take(&mut self.more_input)
            .into_iter()
            .filter(|i| *i == running || self.conn(*i).is_none())
            .collect();
        for idx in others {
            self.on_readable(idx);
        }
        self.more_input.extend(deferred);
    }

    fn adopt(&mut self, mut stream: Stream, addr: String, laddr: String, fd: i32, unix: bool) {
        let server = &self.server;
        let id = server.clients.next_id();
        let shared = Arc::new(ClientShared::new(id, addr, laddr, fd, self.id, unix));
        let entry = self.conns.vacant_entry();
        let idx = entry.key();
        if stream.register(self.poll.registry(), Token(idx)).is_err() {
            // Its maxclients slot was claimed by the acceptor.
            server.clients.release();
            return;
        }
        let authenticated = server.security.users.default_needs_no_auth();
        server.clients.add(shared.clone());
        entry.insert(Some(Conn::new(stream, Session::new(shared, authenticated))));
        self.by_id.insert(id, idx);
        // Data may already be waiting; edge-triggered polling would not
        // report it again.
        self.on_readable(idx);
    }

    fn on_readable(&mut self, idx: usize) {
        self.on_readable_trusting_short_reads(idx, false);
    }

    /// Reads and runs what connection `idx` sent. With `trust_short_reads`
    /// the connection stops reading at a short read instead of reading on
    /// until the socket says it is empty.
    fn on_readable_trusting_short_reads(&mut self, idx: usize, trust_short_reads: bool) {
        let read = self.run_conn(idx, |conn, server, stats| {
            conn.session
                .shared
                .last_interaction_ms
                .store(now_ms(), Ordering::Relaxed);
            conn.on_readable(server, stats, trust_short_reads)
        });
        let Some(read) = read else {
            return;
        };
        if self
            .conn(idx)
            .is_some_and(|c| c.session.repl.handoff.is_some())
        {
            return self.hand_off_replica(idx);
        }
        match read {
            Ok(true) => self.more_input.push(idx),
            Ok(false) => {}
            Err(Close::Gone) => return self.close(idx),
            Err(Close::Done) => {
                let stats = self.server.worker_stats[self.id].clone();
                if let Some(conn) = self.conn_mut(idx) {
                    let _ = conn.flush(&stats);
                }
                return self.close(idx);
            }
        }
        self.track_deadline(idx);
        self.flush(idx);
    }

    /// Remembers the deadline of a connection that just blocked.
    fn track_deadline(&mut self, idx: usize) {
        let Some(conn) = self.conn(idx) else {
            return;
        };
        if let Some(b) = &conn.session.blocked {
            if b.waiter.deadline_ms != 0 {
                self.deadlines
                    .insert((b.waiter.deadline_ms, conn.session.id));
            }
        }
    }

    /// Times out the blocked clients whose deadline passed.
    fn expire_blocked(&mut self) {
        let now = now_ms();
        while let Some(&(deadline, id)) = self.deadlines.first() {
            if deadline >= now {
                break;
            }
            self.deadlines.pop_first();
            let Some(&idx) = self.by_id.get(&id) else {
                continue;
            };
            let Some(conn) = self.conn(idx) else {
                continue;
            };
            let Some(b) = &conn.session.blocked else {
                continue;
            };
            let waiter = b.waiter.clone();
            if let Some(reply) = crate::exec::blocking::expire(&self.server, &conn.session, now) {
                self.unblocked(idx, &waiter, &reply, false);
            }
        }
    }

    /// Completes a blocked command with `reply`, then runs the input that
    /// waited behind it.
    fn unblocked(&mut self, idx: usize, waiter: &Arc<Waiter>, reply: &[u8], failed: bool) {
        let server = self.server.clone();
        let Some(conn) = self.conn_mut(idx) else {
            return;
        };
        if !conn.finish_blocked(&server, waiter, reply, failed) {
            return;
        }
        // The pop that served it was logged by the pusher: its reply waits
        // for that to be durable like any write's.
        conn.session.aof_wait = conn.session.aof_wait.max(server.aof.wait_offset_now());
        self.deadlines
            .remove(&(waiter.deadline_ms, waiter.client.id));
        self.process_more(idx);
        self.track_deadline(idx);
        self.flush(idx);
    }

    /// Runs the input of connection `idx` that waited (behind a blocked
    /// command, or CLIENT PAUSE), then flushes.
    fn process_more(&mut self, idx: usize) {
        let result = self.run_conn(idx, |conn, server, _| {
            conn.process_input(server)
                .map(|()| !conn.paused && !conn.is_blocked())
        });
        match result {
            Some(Ok(true)) => self.more_input.push(idx),
            Some(Ok(false)) | None => {}
            Some(Err(_)) => return self.close(idx),
        }
        self.track_deadline(idx);
        self.flush(idx);
    }

    fn flush(&mut self, idx: usize) {
        let server = self.server.clone();
        let id = self.id;
        let Some(conn) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        // Under `appendfsync always` replies wait until the commands they
        // acknowledge are durable; the thread goes on serving others.
        if conn.session.aof_wait > 0 {
            if server.aof.must_wait(id, conn.session.aof_wait) {
                if !self.held.contains(&idx) {
                    self.held.push(idx);
                }
                return;
            }
            conn.session.aof_wait = 0;
        }
        // Checked before writing, as Redis checks when a reply is appended:
        // a client past its output limit (or killed) is closed unflushed.
        let used = conn.out.len();
        if crate::net::conn::output_limit_reached(&server, &mut conn.session, used)
            || conn.flush(&server.worker_stats[id]).is_err()
        {
            return self.close(idx);
        }
        // What the client holds now counts towards `maxmemory-clients`;
        // this client may be the one evicted.
        conn.account(&server);
        if crate::memory::client_evict::evict_clients(&server) > 0
            && conn.session.shared.killed.load(Ordering::Relaxed)
        {
            self.close(idx);
        }
    }

    /// A connection that ran SYNC or PSYNC leaves the event loop: its socket
    /// and registry entry go to the replication threads.
    fn hand_off_replica(&mut self, idx: usize) {
        let Some(Some(mut conn)) = self.conns.try_remove(idx) else {
            return;
        };
        conn.stream.deregister(self.poll.registry());
        self.by_id.remove(&conn.session.id);
        crate::exec::dispatch::on_disconnect(&self.server, &mut conn.session);
        let shared = conn.session.shared.clone();
        let kind = conn.session.repl.handoff.take();
        let pending = conn.out.as_bytes().to_vec();
        let unread = conn.unread_input();
        match (kind, conn.stream.into_link()) {
            (Some(kind), Ok(socket)) => {
                let conf = &conn.session.repl;
                let io = (pending, unread);
                crate::repl::master::start(&self.server, socket, shared, conf, kind, io);
            }
            _ => {
                self.server.clients.unaccount(&shared);
                self.server.clients.remove(shared.id);
            }
        }
    }

    fn close(&mut self, idx: usize) {
        if self.conn(idx).is_none() {
            // Running (a busy script's client): its `killed` flag closes it
            // at the next tick.
            return;
        }
        let Some(Some(mut conn)) = self.conns.try_remove(idx) else {
            return;
        };
        conn.stream.deregister(self.poll.registry());
        self.by_id.remove(&conn.session.id);
        if let Some(b) = &conn.session.blocked {
            self.deadlines
                .remove(&(b.waiter.deadline_ms, conn.session.id));
        }
        crate::exec::dispatch::on_disconnect(&self.server, &mut conn.session);
        self.server.clients.unaccount(&conn.session.shared);
        self.server.clients.remove(conn.session.id);
    }

    /// Housekeeping: idle timeouts, stalled TLS handshakes, killed clients,
    /// paused input.
    fn tick(&mut self) {
        let server = self.server.clone();
        let timeout_s = server.config.hot.timeout.load(Ordering::Relaxed);
        let now = now_ms();
        let now_instant = Instant::now();
        let mut to_close = Vec::new();
        let mut to_resume = Vec::new();
        let mut to_release = Vec::new();
        for (idx, conn) in self
            .conns
            .iter_mut()
            .filter_map(|(i, c)| c.as_mut().map(|c| (i, c)))
        {
            // As Redis's clientsCron: a client over its soft limit is
            // closed once the time is up even if nothing more is written
            // to it.
            let used = conn.out.len();
            if crate::net::conn::output_limit_reached(&server, &mut conn.session, used) {
                to_close.push(idx);
                continue;
            }
            let shared = &conn.session.shared;
            if conn.stream.handshake_expired(now_instant) {
                tracing::warn!("Error accepting a client connection: TLS handshake timed out");
                to_close.push(idx);
                continue;
            }
            let idle_ms = now.saturating_sub(shared.last_interaction_ms.load(Ordering::Relaxed));
            if timeout_s > 0
                && idle_ms / 1000 >= timeout_s
                && !conn.session.monitor
                && !conn.session.in_multi()
                && !conn.paused
                && !conn.is_blocked()
            {
                to_close.push(idx);
                continue;
            }
            if conn.paused {
                to_resume.push(idx);
            }
            if idle_ms >= IDLE_RELEASE_MS && conn.holds_idle_buffers() {
                to_release.push(idx);
            }
        }
        for idx in to_release {
            if let Some(conn) = self.conn_mut(idx) {
                conn.release_idle_buffers();
                conn.account(&server);
                self.purge_pending = true;
            }
        }
        // A purge walks the worker's heap (a few ms for hundreds of MB):
        // at most one per interval, and only after buffers were released.
        if self.purge_pending && self.last_purge.elapsed() >= PURGE_INTERVAL {
            crate::memory::alloc::purge_thread_heap();
            self.last_purge = Instant::now();
            self.purge_pending = false;
        }
        for idx in to_close {
            self.close(idx);
        }
        for idx in to_resume {
            self.resume(idx);
        }
    }

    /// Retries input held back by CLIENT PAUSE.
    fn resume(&mut self, idx: usize) {
        let Some(conn) = self.conn_mut(idx) else {
            return;
        };
        conn.paused = false;
        conn.session.shared.set_flag(cflags::BLOCKED, false);
        self.process_more(idx);
    }

    /// Flushes pending replies (briefly) and closes everything.
    fn shutdown(&mut self) {
        let deadline = Instant::now() + Duration::from_millis(500);
        let stats = self.server.worker_stats[self.id].clone();
        let idxs: Vec<usize> = self.conns.iter().map(|(i, _)| i).collect();
        for idx in idxs {
            let server = self.server.clone();
            if let Some(conn) = self.conns.get_mut(idx).and_then(Option::as_mut) {
                // Replies acknowledging writes not yet durable (`appendfsync
                // always`) wait for the writer, or are not sent at all.
                while conn.session.aof_wait > server.aof.synced() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if conn.session.aof_wait > server.aof.synced() {
                    conn.out.clear();
                }
                while !conn.out.is_empty() && Instant::now() < deadline {
                    if conn.flush(&stats).is_err() {
                        break;
                    }
                    if !conn.out.is_empty() {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
            self.close(idx);
        }
    }
}

thread_local! {
    /// While this thread's worker runs a connection's commands: the worker
    /// and that connection (set by `Worker::run_conn`).
    static RUNNING: Cell<Option<(*mut Worker, usize)>> = const { Cell::new(None) };
    /// A busy script is serving the other connections right now.
    static SERVING: Cell<bool> = const { Cell::new(false) };
    /// The worker whose loop runs on this thread, if any.
    static OWN_WORKER: Cell<Option<usize>> = const { Cell::new(None) };
    /// This thread queued messages in its own worker's inbox without a
    /// wake-up; the loop drains them before it waits.
    static OWN_INBOX_PENDING: Cell<bool> = const { Cell::new(false) };
}

/// Queues `msg` for worker `id` (`handle`): quietly when the caller runs
/// on that worker's own thread, else with a wake-up.
pub fn send_to(handle: &WorkerHandle, id: usize, msg: Msg) {
    if OWN_WORKER.get() == Some(id) {
        handle.send_from_own_thread(msg);
    } else {
        handle.send(msg);
    }
}

/// Serves this worker's other connections once (their commands get
/// `-BUSY`, except the `allow-busy` ones such as SCRIPT KILL), from the
/// hook of a script running past `busy-reply-threshold`. Does nothing on a
/// thread that is not a worker running a connection, or when already
/// serving (no nesting).
pub fn serve_while_busy() {
    let Some((worker, running)) = RUNNING.get() else {
        return;
    };
    if SERVING.replace(true) {
        return;
    }
    // SAFETY: `worker` was made from the `&mut Worker` of `run_conn`, whose
    // frame is below us on this thread's stack and does not use that
    // reference until `f` returns; the running connection was moved out of
    // the table, so nothing here aliases it. `SERVING` keeps this from
    // nesting; a connection served here is itself run through `run_conn`,
    // which restores `RUNNING` when done.
    let worker = unsafe { &mut *worker };
    worker.serve_others(running);
    SERVING.set(false);
}

/// Whether this thread is serving other connections from inside a busy
/// script: commands that need shard locks must not run (the script's
/// thread holds them).
pub fn serving_while_busy() -> bool {
    SERVING.get()
}
