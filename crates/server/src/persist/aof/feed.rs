//! How commands travel from the workers to the AOF writer without one
//! global lock per command.
//!
//! A command's effects are encoded, as they are collected, into a [`Unit`]
//! that its connection reuses (no allocation per command once warm). When
//! the unit is complete, still under its shard locks, it is appended to
//! one of several staging [`Slot`]s (one per worker, plus one for other
//! threads) together with a sequence number taken from one global counter,
//! inside that slot's lock.
//!
//! Ordering. Two units that touch a common key also share that key's shard
//! lock, and each takes its number while holding it: the one that ran
//! first has the smaller number. So the order of the numbers is an order
//! in which the units could have run one after the other, which is all
//! the log needs (units on disjoint shards commute). The writer merges the
//! slots by number ([`Merger`]); a unit is copied whole, so a transaction
//! stays one MULTI/EXEC block.
//!
//! Completeness. The writer first reads the counter (`limit`), then takes
//! every slot's bytes under its lock. A unit numbered below `limit` took
//! its number before that read, inside its slot's lock, and is appended
//! before that lock is let go: the writer's later take of the slot sees
//! it. So every unit below `limit` is in hand and the units below `limit`
//! can be written in order; units at or above it wait for the next round.

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use vireo_resp::Args;

/// Bytes in front of each unit in a slot: its sequence number (8), body
/// length (4), first database (4), last database (4) and flags (4).
const HEADER: usize = 24;

/// Unit flag: the unit holds commands for one destination only.
const HAS_MARKED: u32 = 1;

/// First byte of a command that goes to replicas and not to the log
/// (PUBLISH, as Redis propagates it): a multibulk whose `*` is replaced by
/// this byte, which no RESP command starts with. The writer restores the
/// `*` for the stream and drops the command from the file
/// ([`split_marked`]).
pub const REPL_ONLY_MARK: u8 = b'!';

/// First byte of a command that goes to the log and not to replicas (a
/// script's write under `redis.set_repl(redis.REPL_AOF)`), marked as
/// [`REPL_ONLY_MARK`] is.
pub const AOF_ONLY_MARK: u8 = b'&';

/// Where the commands added to a [`Unit`] go: a script's
/// `redis.set_repl` sends its writes to the log only or to replicas only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Destination {
    /// The log and the replicas (every command but a script's).
    #[default]
    Both,
    /// The log only (`redis.REPL_AOF`).
    LogOnly,
    /// The replicas only (`redis.REPL_REPLICA`).
    ReplicasOnly,
}

const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
const EXEC: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";

/// One execution unit's effects (a command, or a transaction's commands),
/// RESP-encoded as they are collected: wrapped in MULTI/EXEC once it holds
/// more than one command, with a SELECT in front of each command whose
/// database differs from the previous one's. The SELECT in front of the
/// first command is left to the writer, which knows what the log has
/// selected. Cleared, not freed, between units.
#[derive(Debug, Default)]
pub struct Unit {
    bytes: Vec<u8>,
    ops: u32,
    /// The commands go out one by one, without MULTI/EXEC ([`Unit::unwrapped`]).
    unwrapped: bool,
    /// Some command is for one destination only ([`REPL_ONLY_MARK`],
    /// [`AOF_ONLY_MARK`]).
    marked: bool,
    /// Where the commands added now go.
    destination: Destination,
    first_db: usize,
    last_db: usize,
}

impl Unit {
    /// True when no command has been added since the last clear.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ops == 0
    }

    /// Forgets the contents, keeping the buffer.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ops = 0;
        self.unwrapped = false;
        self.marked = false;
    }

    /// Sends the commands added from now on to `destination` (the
    /// MULTI/EXEC and SELECTs around them go to both); returns the one it
    /// replaces.
    pub fn set_destination(&mut self, destination: Destination) -> Destination {
        std::mem::replace(&mut self.destination, destination)
    }

    /// Leaves this unit's commands unwrapped (no MULTI/EXEC): the lazy
    /// expirations of a command run directly that touches arbitrary keys
    /// (Redis's `propagatePendingCommands`). Only for an empty unit.
    pub fn unwrapped(&mut self) {
        debug_assert!(self.is_empty());
        self.unwrapped = true;
    }

    /// Adds a command applying to database `db`, given as arguments.
    pub fn push_args(&mut self, db: usize, args: Args<'_>) {
        let start = self.begin(db);
        // A request that came in canonical RESP is its own encoding
        // (callgrind: a copy instead of encoding saves ~300 instructions
        // per SET).
        match args.canonical_resp() {
            Some(raw) => self.bytes.extend_from_slice(raw),
            None => encode_with(&mut self.bytes, args.len(), || args.iter()),
        }
        self.mark(start);
    }

    /// Adds a command applying to database `db`.
    pub fn push_command<A: AsRef<[u8]>>(&mut self, db: usize, cmd: &[A]) {
        let start = self.begin(db);
        encode_with(&mut self.bytes, cmd.len(), || {
            cmd.iter().map(|a| a.as_ref())
        });
        self.mark(start);
    }

    /// Adds a command applying to database `db`, already RESP-encoded
    /// (or marked for replicas only, see [`encode_repl_only`]: dropped
    /// when the unit's destination is the log only).
    pub fn push_encoded(&mut self, db: usize, bytes: &[u8]) {
        let repl_only = bytes.first() == Some(&REPL_ONLY_MARK);
        if repl_only && self.destination == Destination::LogOnly {
            return;
        }
        let start = self.begin(db);
        self.bytes.extend_from_slice(bytes);
        if repl_only {
            self.marked = true;
        } else {
            self.mark(start);
        }
    }

    /// Marks the command at `start` for the unit's destination.
    fn mark(&mut self, start: usize) {
        let mark = match self.destination {
            Destination::Both => return,
            Destination::LogOnly => AOF_ONLY_MARK,
            Destination::ReplicasOnly => REPL_ONLY_MARK,
        };
        self.bytes[start] = mark;
        self.marked = true;
    }

    /// The RESP bytes so far, without the closing EXEC.
    pub fn body(&self) -> &[u8] {
        &self.bytes
    }

    /// Opens the next command (MULTI and SELECT as needed); returns the
    /// offset where its bytes go.
    fn begin(&mut self, db: usize) -> usize {
        if self.ops == 0 {
            self.first_db = db;
            self.last_db = db;
        } else {
            if self.ops == 1 && !self.unwrapped {
                self.bytes.splice(0..0, MULTI.iter().copied());
            }
            if db != self.last_db {
                let mut num = itoa::Buffer::new();
                let db_s = num.format(db);
                encode_with(&mut self.bytes, 2, || {
                    [&b"SELECT"[..], db_s.as_bytes()].into_iter()
                });
                self.last_db = db;
            }
        }
        self.ops += 1;
        self.bytes.len()
    }

    /// Closes a transaction's MULTI (once, before the unit is staged).
    fn finish(&mut self) {
        if self.ops > 1 && !self.unwrapped {
            self.bytes.extend_from_slice(EXEC);
        }
    }
}

/// Digits of `n` in decimal.
#[inline]
fn digits(n: usize) -> usize {
    if n < 10 {
        1
    } else if n < 100 {
        2
    } else {
        itoa::Buffer::new().format(n).len()
    }
}

/// Writes `n` in decimal at `buf[at..]`, returning the position after it.
#[inline]
fn put_num(buf: &mut [u8], at: usize, n: usize) -> usize {
    if n < 10 {
        buf[at] = b'0' + n as u8;
        at + 1
    } else if n < 100 {
        buf[at] = b'0' + (n / 10) as u8;
        buf[at + 1] = b'0' + (n % 10) as u8;
        at + 2
    } else {
        let mut num = itoa::Buffer::new();
        let s = num.format(n).as_bytes();
        buf[at..at + s.len()].copy_from_slice(s);
        at + s.len()
    }
}

/// Appends the multibulk of the `n` arguments `parts()` yields: sized
/// exactly first, then written in place (callgrind: growing the buffer
/// piece by piece cost about three times the copying itself).
fn encode_with<'a, I: Iterator<Item = &'a [u8]>>(
    out: &mut Vec<u8>,
    n: usize,
    parts: impl Fn() -> I,
) {
    let size = 3
        + digits(n)
        + parts()
            .map(|a| 5 + digits(a.len()) + a.len())
            .sum::<usize>();
    let start = out.len();
    out.resize(start + size, 0);
    let buf = &mut out[start..];
    buf[0] = b'*';
    let mut at = put_num(buf, 1, n);
    buf[at] = b'\r';
    buf[at + 1] = b'\n';
    at += 2;
    for a in parts() {
        buf[at] = b'$';
        at = put_num(buf, at + 1, a.len());
        buf[at] = b'\r';
        buf[at + 1] = b'\n';
        at += 2;
        buf[at..at + a.len()].copy_from_slice(a);
        at += a.len();
        buf[at] = b'\r';
        buf[at + 1] = b'\n';
        at += 2;
    }
    debug_assert_eq!(at, size);
}

/// A staging buffer of framed units, in increasing sequence order. Padded
/// to its own cache lines: each worker writes its own.
#[repr(align(128))]
#[derive(Default)]
pub(super) struct Slot {
    units: Mutex<Vec<u8>>,
    /// The capacity of `units`, mirrored for [`Slot::held`] (written
    /// with the lock held, on the slot's own cache line).
    held: AtomicUsize,
}

impl Slot {
    /// Stages `unit` (finished, then cleared) with the number `next()`
    /// returns, taken inside the slot's lock. Returns the number, and
    /// whether the slot was empty before (the writer may be asleep).
    pub(super) fn stage(&self, unit: &mut Unit, next: impl FnOnce() -> u64) -> (u64, bool) {
        unit.finish();
        let mut header = [0u8; HEADER];
        header[8..12].copy_from_slice(&(unit.bytes.len() as u32).to_le_bytes());
        header[12..16].copy_from_slice(&(unit.first_db as u32).to_le_bytes());
        header[16..20].copy_from_slice(&(unit.last_db as u32).to_le_bytes());
        let flags = if unit.marked { HAS_MARKED } else { 0 };
        header[20..24].copy_from_slice(&flags.to_le_bytes());
        let mut units = self.units.lock();
        let seq = next();
        header[..8].copy_from_slice(&seq.to_le_bytes());
        let was_empty = units.is_empty();
        units.reserve(HEADER + unit.bytes.len());
        units.extend_from_slice(&header);
        units.extend_from_slice(&unit.bytes);
        self.held.store(units.capacity(), Ordering::Relaxed);
        drop(units);
        unit.clear();
        (seq, was_empty)
    }

    /// Bytes staged and not yet taken.
    pub(super) fn len(&self) -> usize {
        self.units.lock().len()
    }

    /// Bytes the slot's buffer holds (its capacity), without the lock.
    pub(super) fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
}

/// The capacity a buffer of the feed keeps once emptied: a burst of
/// writes grows them, and without giving the memory back they would hold
/// several copies of the burst's size for good (Redis frees its buffers
/// too; `used_memory` would show them).
pub(super) const KEPT_CAPACITY: usize = 64 * 1024;

/// Units taken from one slot and not yet written.
#[derive(Default)]
struct Queue {
    buf: Vec<u8>,
    pos: usize,
    /// An empty buffer handed to the slot at the next take, so buffers
    /// circulate instead of being allocated.
    spare: Vec<u8>,
}

impl Queue {
    /// The sequence number of the next unit, if any.
    #[inline]
    fn head(&self) -> Option<u64> {
        let h = self.buf.get(self.pos..self.pos + 8)?;
        Some(u64::from_le_bytes(h.try_into().ok()?))
    }

    fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }
}

/// The writer's side: the units taken from every slot, merged into the
/// log's order with the SELECTs the log needs.
pub(super) struct Merger {
    queues: Vec<Queue>,
    /// The database the log's reader has selected (None: unknown, so the
    /// next unit is preceded by SELECT).
    pub(super) selected_db: Option<usize>,
}

impl Merger {
    /// A merger for `slots` slots.
    pub(super) fn new(slots: usize) -> Self {
        Merger {
            queues: (0..slots).map(|_| Queue::default()).collect(),
            selected_db: None,
        }
    }

    /// Takes what every slot staged (each slot's lock held for a swap).
    pub(super) fn take(&mut self, slots: &[Slot]) {
        for (q, slot) in self.queues.iter_mut().zip(slots) {
            q.spare.clear();
            q.spare.shrink_to(KEPT_CAPACITY);
            {
                let mut units = slot.units.lock();
                std::mem::swap(&mut *units, &mut q.spare);
                slot.held.store(units.capacity(), Ordering::Relaxed);
            }
            if q.spare.is_empty() {
                continue;
            }
            if q.is_empty() {
                std::mem::swap(&mut q.buf, &mut q.spare);
                q.pos = 0;
            } else {
                q.buf.drain(..q.pos);
                q.pos = 0;
                q.buf.extend_from_slice(&q.spare);
            }
        }
    }

    /// Bytes the queues' buffers hold (their capacities).
    pub(super) fn held(&self) -> usize {
        self.queues
            .iter()
            .map(|q| q.buf.capacity() + q.spare.capacity())
            .sum()
    }

    /// True when every unit taken has been emitted.
    pub(super) fn is_empty(&self) -> bool {
        self.queues.iter().all(Queue::is_empty)
    }

    /// Appends to `out`, in sequence order, every unit taken whose number
    /// is below `bound`. True if one of them holds commands for one
    /// destination only (then `out` needs [`split_marked`]).
    pub(super) fn emit_until(&mut self, bound: u64, out: &mut Vec<u8>) -> bool {
        let mut marked = false;
        loop {
            // The queue with the lowest head, and the next lowest head: that
            // queue's units below both go out in one run.
            let mut best: Option<(usize, u64)> = None;
            let mut second = u64::MAX;
            for (i, q) in self.queues.iter().enumerate() {
                let Some(seq) = q.head() else { continue };
                match best {
                    Some((_, b)) if b <= seq => second = second.min(seq),
                    _ => {
                        if let Some((_, b)) = best {
                            second = second.min(b);
                        }
                        best = Some((i, seq));
                    }
                }
            }
            let Some((i, seq)) = best else {
                return marked;
            };
            if seq >= bound {
                return marked;
            }
            let stop = second.min(bound);
            let q = &mut self.queues[i];
            while let Some(seq) = q.head() {
                if seq >= stop {
                    break;
                }
                let h = &q.buf[q.pos..q.pos + HEADER];
                let field =
                    |at: usize| u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
                let len = field(8) as usize;
                let first_db = field(12) as usize;
                let last_db = field(16) as usize;
                marked |= field(20) & HAS_MARKED != 0;
                if self.selected_db != Some(first_db) {
                    let mut num = itoa::Buffer::new();
                    let db_s = num.format(first_db);
                    encode_with(out, 2, || [&b"SELECT"[..], db_s.as_bytes()].into_iter());
                }
                self.selected_db = Some(last_db);
                let body = q.pos + HEADER;
                out.extend_from_slice(&q.buf[body..body + len]);
                q.pos = body + len;
            }
            if q.is_empty() {
                q.buf.clear();
                q.pos = 0;
                q.buf.shrink_to(KEPT_CAPACITY);
            }
        }
    }
}

/// Encodes `cmd` as a replication-only command for [`Unit::push_encoded`].
pub fn encode_repl_only<A: AsRef<[u8]>>(cmd: &[A]) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_with(&mut bytes, cmd.len(), || cmd.iter().map(|a| a.as_ref()));
    bytes[0] = REPL_ONLY_MARK;
    bytes
}

/// Splits merged units holding commands for one destination only:
/// `data` keeps what the log gets (replication-only commands dropped,
/// log-only ones with their `*` back), and the stream's bytes are returned
/// (log-only commands dropped, replication-only ones with their `*` back).
/// Only called for runs that hold such commands, so the common path never
/// walks the bytes.
pub(super) fn split_marked(data: &mut Vec<u8>) -> Vec<u8> {
    let mut stream = Vec::with_capacity(data.len());
    let mut file = Vec::with_capacity(data.len());
    let mut at = 0;
    while at < data.len() {
        let command = &data[at..at + command_len(&data[at..])];
        let (to_file, to_stream) = match command[0] {
            REPL_ONLY_MARK => (false, true),
            AOF_ONLY_MARK => (true, false),
            _ => (true, true),
        };
        for (wanted, out) in [(to_file, &mut file), (to_stream, &mut stream)] {
            if wanted {
                let start = out.len();
                out.extend_from_slice(command);
                if to_file != to_stream {
                    out[start] = b'*';
                }
            }
        }
        at += command.len();
    }
    *data = file;
    stream
}

/// The length of the RESP multibulk at the start of `bytes` (the
/// writer's own encoding; a malformed rest counts as one command).
fn command_len(bytes: &[u8]) -> usize {
    let line_end = |from: usize| {
        bytes
            .get(from..)?
            .windows(2)
            .position(|w| w == b"\r\n")
            .map(|p| from + p)
    };
    let number = |from: usize, to: usize| -> Option<usize> {
        std::str::from_utf8(&bytes[from..to]).ok()?.parse().ok()
    };
    let walk = || -> Option<usize> {
        let end = line_end(1)?;
        let n = number(1, end)?;
        let mut at = end + 2;
        for _ in 0..n {
            let end = line_end(at + 1)?;
            let len = number(at + 1, end)?;
            at = end + 2 + len + 2;
        }
        (at <= bytes.len()).then_some(at)
    };
    walk().unwrap_or(bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persist::aof::reader::{encode, CommandReader};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    fn commands(data: &[u8]) -> Vec<Vec<String>> {
        let mut r = CommandReader::new(data, 0);
        let mut out = Vec::new();
        while let Some(c) = r.next_command().unwrap() {
            out.push(
                c.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect(),
            );
        }
        out
    }

    /// A transaction with a PUBLISH in it: the stream gets it in place,
    /// the log gets the rest; a unit without one is not flagged.
    #[test]
    fn replication_only_commands_reach_the_stream_and_not_the_log() {
        let mut u = Unit::default();
        u.push_command(2, &["SET", "a", "1"]);
        u.push_encoded(2, &encode_repl_only(&["PUBLISH", "ch", "msg"]));
        let slot = Slot::default();
        slot.stage(&mut u, || 0);
        u.push_command(2, &["DEL", "a"]);
        slot.stage(&mut u, || 1);
        let mut m = Merger::new(1);
        m.take(std::slice::from_ref(&slot));
        let mut data = Vec::new();
        assert!(m.emit_until(2, &mut data));
        let stream = split_marked(&mut data);
        let want_stream: Vec<Vec<&str>> = vec![
            vec!["SELECT", "2"],
            vec!["MULTI"],
            vec!["SET", "a", "1"],
            vec!["PUBLISH", "ch", "msg"],
            vec!["EXEC"],
            vec!["DEL", "a"],
        ];
        assert_eq!(commands(&stream), want_stream);
        let want_log: Vec<Vec<&str>> = vec![
            vec!["SELECT", "2"],
            vec!["MULTI"],
            vec!["SET", "a", "1"],
            vec!["EXEC"],
            vec!["DEL", "a"],
        ];
        assert_eq!(commands(&data), want_log);
        u.push_command(0, &["SET", "b", "2"]);
        slot.stage(&mut u, || 2);
        m.take(std::slice::from_ref(&slot));
        assert!(!m.emit_until(3, &mut Vec::new()), "no flag without PUBLISH");
    }

    /// A script's writes under `redis.set_repl`: log-only and
    /// replicas-only commands inside one transaction, with SELECTs and
    /// MULTI/EXEC kept for both; a replication-only PUBLISH of a log-only
    /// run is dropped.
    #[test]
    fn commands_for_one_destination_reach_only_it() {
        let mut u = Unit::default();
        u.push_command(0, &["SET", "a", "1"]);
        assert_eq!(u.set_destination(Destination::LogOnly), Destination::Both);
        u.push_command(1, &["SET", "c", "3"]);
        u.push_encoded(1, &encode_repl_only(&["PUBLISH", "ch", "m"]));
        u.set_destination(Destination::ReplicasOnly);
        u.push_command(1, &["SET", "r", "5"]);
        u.set_destination(Destination::Both);
        u.push_command(0, &["SET", "d", "4"]);
        let slot = Slot::default();
        slot.stage(&mut u, || 0);
        let mut m = Merger::new(1);
        m.take(std::slice::from_ref(&slot));
        let mut data = Vec::new();
        assert!(m.emit_until(1, &mut data));
        let stream = split_marked(&mut data);
        let command = |c: &[&str]| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let around = |inner: &[&[&str]]| {
            let mut all = vec![command(&["SELECT", "0"]), command(&["MULTI"])];
            all.extend(inner.iter().map(|c| command(c)));
            all.push(command(&["EXEC"]));
            all
        };
        assert_eq!(
            commands(&data),
            around(&[
                &["SET", "a", "1"],
                &["SELECT", "1"],
                &["SET", "c", "3"],
                &["SELECT", "0"],
                &["SET", "d", "4"],
            ])
        );
        assert_eq!(
            commands(&stream),
            around(&[
                &["SET", "a", "1"],
                &["SELECT", "1"],
                &["SET", "r", "5"],
                &["SELECT", "0"],
                &["SET", "d", "4"],
            ])
        );
    }

    /// Random encoded commands, some marked for one destination, some cut
    /// short: the split never panics, the log keeps exactly the commands
    /// not for replicas only and the stream those not for the log only,
    /// marks restored.
    #[test]
    fn splitting_random_runs_keeps_each_destinations_commands() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2000 {
            let (mut data, mut log, mut repl) = (Vec::new(), Vec::new(), Vec::new());
            let count = rng.usize(0..6);
            for _ in 0..count {
                let args: Vec<Vec<u8>> = (0..rng.usize(1..4))
                    .map(|_| (0..rng.usize(0..12)).map(|_| rng.u8(..)).collect())
                    .collect();
                let start = data.len();
                encode_with(&mut data, args.len(), || args.iter().map(|a| &a[..]));
                let plain = data[start..].to_vec();
                match rng.u8(0..3) {
                    0 => data[start] = REPL_ONLY_MARK,
                    1 => {
                        data[start] = AOF_ONLY_MARK;
                        log.extend_from_slice(&plain);
                        continue;
                    }
                    _ => log.extend_from_slice(&plain),
                }
                repl.extend_from_slice(&plain);
            }
            let mut all = data.clone();
            if rng.bool() && !all.is_empty() {
                all.truncate(rng.usize(..all.len()));
            }
            let complete = all.len() == data.len();
            let stream = split_marked(&mut all);
            if complete {
                assert_eq!(all, log);
                assert_eq!(stream, repl);
            }
        }
    }

    #[test]
    fn the_encoder_writes_what_the_reference_encoder_writes() {
        let long = vec![b'x'; 1234];
        let cases: Vec<Vec<&[u8]>> = vec![
            vec![b"SET", b"k", b"v"],
            vec![b"PING"],
            vec![b"SET", b"", &long],
            vec![b"A"; 9],
            vec![b"B"; 10],
            vec![b"C"; 100],
            vec![&long[..99], &long[..100], &long[..10]],
        ];
        for args in cases {
            let mut want = Vec::new();
            encode(&mut want, &args);
            let mut got = b"prefix".to_vec();
            encode_with(&mut got, args.len(), || args.iter().copied());
            assert_eq!(&got[6..], &want[..]);
        }
    }

    #[test]
    fn a_unit_of_several_commands_is_one_transaction_with_its_selects() {
        let mut u = Unit::default();
        u.push_command(3, &["SET", "a", "1"]);
        assert_eq!(u.body(), b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n");
        u.push_command(3, &["DEL", "b"]);
        u.push_encoded(5, b"*2\r\n$4\r\nINCR\r\n$1\r\nc\r\n");
        let slot = Slot::default();
        let (seq, was_empty) = slot.stage(&mut u, || 7);
        assert_eq!((seq, was_empty), (7, true));
        assert!(u.is_empty() && u.body().is_empty());
        let mut m = Merger::new(1);
        m.selected_db = Some(0);
        m.take(std::slice::from_ref(&slot));
        let mut out = Vec::new();
        m.emit_until(7, &mut out);
        assert!(
            out.is_empty(),
            "a unit waits for its number to be below the bound"
        );
        m.emit_until(8, &mut out);
        let got = commands(&out);
        let want: Vec<Vec<&str>> = vec![
            vec!["SELECT", "3"],
            vec!["MULTI"],
            vec!["SET", "a", "1"],
            vec!["DEL", "b"],
            vec!["SELECT", "5"],
            vec!["INCR", "c"],
            vec!["EXEC"],
        ];
        assert_eq!(got, want);
        assert_eq!(m.selected_db, Some(5));
        assert!(m.is_empty());
    }

    #[test]
    fn slots_merge_in_sequence_order() {
        let slots: Vec<Slot> = (0..3).map(|_| Slot::default()).collect();
        // Numbers handed out round the slots out of slot order.
        let plan = [(2, 0), (0, 1), (0, 2), (1, 3), (2, 4), (1, 5), (0, 6)];
        for &(slot, seq) in &plan {
            let mut u = Unit::default();
            u.push_command(0, &["SET", "k", &seq.to_string()]);
            slots[slot].stage(&mut u, || seq);
        }
        let mut m = Merger::new(3);
        m.take(&slots);
        let mut out = Vec::new();
        m.emit_until(4, &mut out);
        let values = |out: &[u8]| -> Vec<String> {
            commands(out)
                .into_iter()
                .filter(|c| c[0] == "SET")
                .map(|c| c[2].clone())
                .collect()
        };
        assert_eq!(values(&out), ["0", "1", "2", "3"]);
        // More arrives in a slot that still holds units: it queues behind.
        let mut u = Unit::default();
        u.push_command(0, &["SET", "k", "7"]);
        slots[1].stage(&mut u, || 7);
        m.take(&slots);
        m.emit_until(u64::MAX, &mut out);
        assert_eq!(values(&out), ["0", "1", "2", "3", "4", "5", "6", "7"]);
        assert_eq!(commands(&out)[0], ["SELECT", "0"]);
        assert_eq!(commands(&out).len(), 9, "one SELECT in all");
    }

    /// Threads play workers: each update of a key takes the key's lock (the
    /// shard lock), changes the value and stages the unit while holding it,
    /// sometimes two keys at once as a transaction; a writer thread takes
    /// and merges all along. Replaying the merged log must give every key
    /// its final value, and each key's values must appear in the order
    /// they were set.
    #[test]
    fn concurrent_writers_to_the_same_keys_log_in_execution_order() {
        const KEYS: usize = 4;
        const THREADS: usize = 4;
        const ROUNDS: u64 = 20_000;
        let keys: Arc<Vec<parking_lot::Mutex<u64>>> =
            Arc::new((0..KEYS).map(|_| parking_lot::Mutex::new(0)).collect());
        let slots: Arc<Vec<Slot>> = Arc::new((0..THREADS).map(|_| Slot::default()).collect());
        let counter = Arc::new(AtomicU64::new(0));
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (slots, counter, done) = (slots.clone(), counter.clone(), done.clone());
            std::thread::spawn(move || {
                let mut m = Merger::new(THREADS);
                let mut out = Vec::new();
                loop {
                    let finished = done.load(Ordering::SeqCst);
                    let limit = counter.load(Ordering::SeqCst);
                    m.take(&slots);
                    m.emit_until(limit, &mut out);
                    if finished {
                        assert!(m.is_empty(), "everything below the final limit");
                        return out;
                    }
                    std::thread::yield_now();
                }
            })
        };
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (keys, slots, counter) = (keys.clone(), slots.clone(), counter.clone());
                std::thread::spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(t as u64);
                    let mut unit = Unit::default();
                    for _ in 0..ROUNDS {
                        let a = rng.usize(0..KEYS);
                        let b = rng.usize(0..KEYS);
                        let db = rng.usize(0..3);
                        if a == b || rng.bool() {
                            let mut v = keys[a].lock();
                            *v += 1;
                            let value = format!("{v}@{db}");
                            unit.push_command(db, &["SET", &a.to_string(), &value]);
                            slots[t].stage(&mut unit, || counter.fetch_add(1, Ordering::SeqCst));
                        } else {
                            let (lo, hi) = (a.min(b), a.max(b));
                            let mut vl = keys[lo].lock();
                            let mut vh = keys[hi].lock();
                            *vl += 1;
                            *vh += 1;
                            let (lv, hdb) = (format!("{vl}@{db}"), (db + 1) % 3);
                            let hv = format!("{vh}@{hdb}");
                            unit.push_command(db, &["SET", &lo.to_string(), &lv]);
                            unit.push_command(hdb, &["SET", &hi.to_string(), &hv]);
                            slots[t].stage(&mut unit, || counter.fetch_add(1, Ordering::SeqCst));
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        done.store(true, Ordering::SeqCst);
        let log = writer.join().unwrap();
        // Replay: per key the values must count up one by one; the
        // database is tracked to check the SELECTs, and transactions must
        // not interleave.
        let mut last = [0u64; KEYS];
        let mut db = None;
        let mut in_multi = false;
        let mut dbs_seen = std::collections::BTreeSet::new();
        for c in commands(&log) {
            match c[0].as_str() {
                "SELECT" => db = Some(c[1].parse::<usize>().unwrap()),
                "MULTI" => {
                    assert!(!in_multi);
                    in_multi = true;
                }
                "EXEC" => {
                    assert!(in_multi);
                    in_multi = false;
                }
                "SET" => {
                    let db = db.expect("a SELECT before the first command");
                    dbs_seen.insert(db);
                    let k: usize = c[1].parse().unwrap();
                    let (v, in_db) = c[2].split_once('@').unwrap();
                    assert_eq!(
                        in_db.parse::<usize>().unwrap(),
                        db,
                        "SET in the wrong database"
                    );
                    let v: u64 = v.parse().unwrap();
                    assert_eq!(v, last[k] + 1, "key {k} out of order");
                    last[k] = v;
                }
                other => panic!("unexpected {other}"),
            }
        }
        assert!(!in_multi);
        assert_eq!(dbs_seen.len(), 3);
        for (k, v) in last.iter().enumerate() {
            assert_eq!(*v, *keys[k].lock());
        }
    }
}
