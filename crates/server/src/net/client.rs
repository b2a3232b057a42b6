//! The client registry: what every thread can see of every connection
//! (CLIENT LIST, CLIENT KILL, INFO clients), kept apart from the state only
//! the owning worker touches ([`crate::net::session::Session`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicPtr, AtomicU16, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::Arc;

use parking_lot::Mutex;
use vireo_store::clock::now_ms;

use crate::cmd::CommandSpec;

/// Flag bits mirrored for CLIENT LIST's `flags=` field.
pub mod cflags {
    pub const MULTI: u16 = 1;
    pub const MONITOR: u16 = 1 << 1;
    pub const CLOSE_AFTER_REPLY: u16 = 1 << 2;
    pub const NO_EVICT: u16 = 1 << 3;
    pub const NO_TOUCH: u16 = 1 << 4;
    pub const UNIX: u16 = 1 << 5;
    /// Subscribed to at least one channel or pattern (CLIENT LIST `TYPE
    /// pubsub`); set by the pub/sub commands.
    pub const PUBSUB: u16 = 1 << 6;
    /// Blocked: waiting for keys, or held back by CLIENT PAUSE.
    pub const BLOCKED: u16 = 1 << 7;
    /// CLIENT TRACKING is on (`t`).
    pub const TRACKING: u16 = 1 << 8;
    /// Tracking redirects to a client that is gone (`R`).
    pub const TRACKING_BROKEN_REDIR: u16 = 1 << 9;
    /// Tracking in broadcast mode (`B`).
    pub const TRACKING_BCAST: u16 = 1 << 10;
    /// A replica link (`S`), set once SYNC/PSYNC hands it over.
    pub const REPLICA: u16 = 1 << 11;
    /// A replica's link to its master (CLIENT LIST `M`).
    pub const MASTER: u16 = 1 << 12;
}

/// The part of a client other threads may read or act on. Written by the
/// owning worker with relaxed atomics; read by CLIENT LIST and INFO.
pub struct ClientShared {
    pub id: u64,
    /// Peer address `ip:port` (or the socket path for unix clients).
    pub addr: String,
    /// Local address.
    pub laddr: String,
    pub fd: i32,
    /// The worker thread serving this client.
    pub worker: usize,
    /// Creation time, Unix ms.
    pub created_ms: u64,
    pub name: Mutex<Option<Vec<u8>>>,
    pub db: AtomicUsize,
    pub last_interaction_ms: AtomicU64,
    last_cmd: AtomicPtr<CommandSpec>,
    pub flags: AtomicU16,
    pub resp: AtomicU8,
    pub qbuf: AtomicUsize,
    pub qbuf_free: AtomicUsize,
    pub omem: AtomicUsize,
    pub multi_len: AtomicUsize,
    /// Bytes the queued MULTI commands hold (CLIENT LIST `multi-mem`).
    pub multi_mem: AtomicUsize,
    /// Everything this client holds as last accounted by its worker
    /// (CLIENT LIST `tot-mem`, `maxmemory-clients`); see
    /// [`ClientRegistry::account`].
    pub tot_mem: AtomicUsize,
    pub watch_count: AtomicUsize,
    /// Channels, patterns and shard channels subscribed to (CLIENT LIST
    /// `sub`, `psub`, `ssub`).
    pub sub: AtomicUsize,
    pub psub: AtomicUsize,
    pub ssub: AtomicUsize,
    /// CLIENT TRACKING REDIRECT target (CLIENT LIST `redir`), -1 for none.
    pub redir: AtomicI64,
    /// Set by CLIENT KILL; the owning worker closes the connection.
    pub killed: AtomicBool,
    /// The ACL user (None: the default user), for CLIENT LIST and for
    /// disconnecting a changed or deleted user's clients.
    pub user: Mutex<Option<Arc<crate::security::users::UserHandle>>>,
}

impl ClientShared {
    /// Shared state for a new connection.
    pub fn new(id: u64, addr: String, laddr: String, fd: i32, worker: usize, unix: bool) -> Self {
        let now = now_ms();
        ClientShared {
            id,
            addr,
            laddr,
            fd,
            worker,
            created_ms: now,
            name: Mutex::new(None),
            db: AtomicUsize::new(0),
            last_interaction_ms: AtomicU64::new(now),
            last_cmd: AtomicPtr::new(std::ptr::null_mut()),
            flags: AtomicU16::new(if unix { cflags::UNIX } else { 0 }),
            resp: AtomicU8::new(2),
            qbuf: AtomicUsize::new(0),
            qbuf_free: AtomicUsize::new(0),
            omem: AtomicUsize::new(0),
            multi_len: AtomicUsize::new(0),
            multi_mem: AtomicUsize::new(0),
            tot_mem: AtomicUsize::new(0),
            watch_count: AtomicUsize::new(0),
            sub: AtomicUsize::new(0),
            psub: AtomicUsize::new(0),
            ssub: AtomicUsize::new(0),
            redir: AtomicI64::new(-1),
            killed: AtomicBool::new(false),
            user: Mutex::new(None),
        }
    }

    /// True when the peer closed its side of the connection, or the socket
    /// failed, even if unread input remains: Redis drops a client whose
    /// read returns end of file, so a command still running for it (a
    /// long SQL query) has no one to reply to. Asked by the thread that
    /// runs the client's command, which owns the socket meanwhile; a
    /// client with no socket (AOF replay) never hangs up.
    pub fn peer_hung_up(&self) -> bool {
        if self.fd < 0 {
            return false;
        }
        let mut p = libc::pollfd {
            fd: self.fd,
            events: libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: `p` is one valid pollfd for the call's duration; a zero
        // timeout never blocks; the fd stays open while its command runs.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        let gone = libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL;
        n > 0 && p.revents & gone != 0
    }

    /// Records the command being run (CLIENT LIST `cmd=`).
    pub fn set_last_cmd(&self, spec: &'static CommandSpec) {
        self.last_cmd.store(
            spec as *const CommandSpec as *mut CommandSpec,
            Ordering::Relaxed,
        );
    }

    /// Name of the last command run, `NULL` before the first one.
    pub fn last_cmd(&self) -> &'static str {
        let p = self.last_cmd.load(Ordering::Relaxed);
        if p.is_null() {
            "NULL"
        } else {
            // SAFETY: the pointer only ever comes from `set_last_cmd`, which
            // takes a `&'static CommandSpec`; statics are never freed. The
            // pointer is exercised by the CLIENT LIST integration tests.
            unsafe { (*p).name }
        }
    }

    /// Sets or clears a flag bit.
    pub fn set_flag(&self, bit: u16, on: bool) {
        if on {
            self.flags.fetch_or(bit, Ordering::Relaxed);
        } else {
            self.flags.fetch_and(!bit, Ordering::Relaxed);
        }
    }

    /// The client name, empty when unset.
    pub fn name_string(&self) -> String {
        self.name
            .lock()
            .as_ref()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default()
    }

    /// The client's ACL user name.
    pub fn user_name(&self) -> String {
        self.user
            .lock()
            .as_ref()
            .map_or_else(|| "default".to_string(), |u| u.name_lossy())
    }

    /// One line of CLIENT LIST / CLIENT INFO, in Redis 7.0's field order.
    pub fn info_line(&self) -> String {
        let now = now_ms();
        let flags = self.flags.load(Ordering::Relaxed);
        let has = |bit: u16| flags & bit != 0;
        let mut f = String::new();
        // Redis's letters, in its order; `A` (close ASAP) is a killed client.
        for (on, ch) in [
            (has(cflags::REPLICA), 'S'),
            (has(cflags::MASTER), 'M'),
            (has(cflags::MONITOR), 'O'),
            (has(cflags::PUBSUB), 'P'),
            (has(cflags::MULTI), 'x'),
            (has(cflags::BLOCKED), 'b'),
            (has(cflags::TRACKING), 't'),
            (has(cflags::TRACKING_BROKEN_REDIR), 'R'),
            (has(cflags::TRACKING_BCAST), 'B'),
            (has(cflags::CLOSE_AFTER_REPLY), 'c'),
            (self.killed.load(Ordering::Relaxed), 'A'),
            (has(cflags::UNIX), 'U'),
            (has(cflags::NO_EVICT), 'e'),
            (has(cflags::NO_TOUCH), 'T'),
        ] {
            if on {
                f.push(ch);
            }
        }
        if f.is_empty() {
            f.push('N');
        }
        let multi = if has(cflags::MULTI) {
            self.multi_len.load(Ordering::Relaxed) as i64
        } else {
            -1
        };
        let qbuf = self.qbuf.load(Ordering::Relaxed);
        let omem = self.omem.load(Ordering::Relaxed);
        let mut s = String::with_capacity(256);
        let _ = write!(
            s,
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} \
             qbuf={} qbuf-free={} argv-mem=0 multi-mem={} rbs={} rbp=0 obl=0 oll=0 omem={} tot-mem={} \
             events={} cmd={} user={} redir={} resp={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            self.name_string(),
            now.saturating_sub(self.created_ms) / 1000,
            now.saturating_sub(self.last_interaction_ms.load(Ordering::Relaxed)) / 1000,
            f,
            self.db.load(Ordering::Relaxed),
            self.sub.load(Ordering::Relaxed),
            self.psub.load(Ordering::Relaxed),
            self.ssub.load(Ordering::Relaxed),
            multi,
            qbuf,
            self.qbuf_free.load(Ordering::Relaxed),
            self.multi_mem.load(Ordering::Relaxed),
            qbuf + self.qbuf_free.load(Ordering::Relaxed),
            omem,
            self.tot_mem.load(Ordering::Relaxed).max(qbuf + omem),
            if omem > 0 { "rw" } else { "r" },
            self.last_cmd(),
            self.user_name(),
            self.redir.load(Ordering::Relaxed),
            self.resp.load(Ordering::Relaxed),
        );
        s
    }
}

/// Every connected client, by id.
#[derive(Default)]
pub struct ClientRegistry {
    clients: Mutex<BTreeMap<u64, Arc<ClientShared>>>,
    next_id: AtomicU64,
    /// Connections counted against `maxclients`: registered clients plus
    /// accepted ones still on their way to a worker (the registry alone
    /// would let a burst of connections through before any is added).
    slots: AtomicUsize,
    /// Sum of every client's [`ClientShared::tot_mem`]: what
    /// `maxmemory-clients` is compared with. Signed because the owner and
    /// an evicting thread may briefly apply their changes out of order.
    mem_total: AtomicI64,
}

impl ClientRegistry {
    /// Hands out client ids, starting at 1 and never reused.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Adds a connected client.
    pub fn add(&self, c: Arc<ClientShared>) {
        self.clients.lock().insert(c.id, c);
    }

    /// Claims a `maxclients` slot for a just-accepted connection; false
    /// when all `max` are taken. The slot is given back by [`Self::remove`]
    /// once the client is gone, or by [`Self::release`] if it never gets
    /// added.
    pub fn try_reserve(&self, max: usize) -> bool {
        self.slots
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
    }

    /// Gives back a slot whose connection was never added.
    pub fn release(&self) {
        let _ = self
            .slots
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Records `mem` as what client `c` now holds, keeping the total in
    /// step; returns true when the figure grew. Called by the owning worker
    /// whenever the client's buffers may have changed size.
    pub fn account(&self, c: &ClientShared, mem: usize) -> bool {
        if c.tot_mem.load(Ordering::Relaxed) == mem {
            return false;
        }
        let old = c.tot_mem.swap(mem, Ordering::Relaxed);
        self.mem_total
            .fetch_add(mem as i64 - old as i64, Ordering::Relaxed);
        mem > old
    }

    /// Takes client `c` out of the memory total (on disconnect or
    /// eviction); harmless when repeated.
    pub fn unaccount(&self, c: &ClientShared) {
        let old = c.tot_mem.swap(0, Ordering::Relaxed);
        self.mem_total.fetch_sub(old as i64, Ordering::Relaxed);
    }

    /// Bytes all clients hold together, as last accounted.
    pub fn memory_total(&self) -> u64 {
        self.mem_total.load(Ordering::Relaxed).max(0) as u64
    }

    /// Removes a client on disconnect, freeing its `maxclients` slot.
    pub fn remove(&self, id: u64) {
        if self.clients.lock().remove(&id).is_some() {
            self.release();
        }
    }

    /// Number of connected clients.
    pub fn len(&self) -> usize {
        self.clients.lock().len()
    }

    /// True when no client is connected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of all clients, ordered by id.
    pub fn snapshot(&self) -> Vec<Arc<ClientShared>> {
        self.clients.lock().values().cloned().collect()
    }

    /// The client with this id.
    pub fn get(&self, id: u64) -> Option<Arc<ClientShared>> {
        self.clients.lock().get(&id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_peer_that_closed_is_seen_hung_up_even_with_input_unread() {
        use std::io::Write;
        let (mut ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let client =
            ClientShared::new(1, String::new(), String::new(), theirs.as_raw_fd(), 0, true);
        assert!(!client.peer_hung_up());
        ours.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        assert!(!client.peer_hung_up(), "pending input is not a hang-up");
        drop(ours);
        assert!(client.peer_hung_up());
        let fake = ClientShared::new(2, String::new(), String::new(), -1, 0, false);
        assert!(!fake.peer_hung_up());
    }
}
