//! The stream type: an append-only log of entries keyed by [`StreamId`],
//! with consumer groups, as Redis 7.0 has it.
//!
//! Entries live in [`node`]s (runs of entries packed in one buffer with
//! shared field names) kept in a B-tree by the ID of their first entry,
//! the counterpart of Redis's radix tree of listpacks. Nodes are cut by
//! `stream-node-max-bytes` and `stream-node-max-entries` ([`NodeLimits`])
//! at the same points as Redis cuts them, so approximate trimming, which
//! only drops whole nodes, removes exactly what Redis removes.
//!
//! Beside the entries a stream records what Redis records: its length,
//! last ID (which only grows), first live ID, the largest deleted ID and
//! the count of entries ever added. The last three drive the 7.0 consumer
//! group lag ([`Stream::group_lag`]).
//!
//! * [`id`]: IDs and their textual forms.
//! * [`group`]: consumer groups, consumers and pending entries, and the
//!   read, ack and claim operations on them.
//! * [`range`]: walking entries between two IDs.
//!
//! Nothing here reads a clock: operations take the current time from the
//! caller, so the server decides what "now" is (and tests can too).

pub mod group;
pub mod id;
mod node;
pub mod range;

use std::collections::BTreeMap;
use std::fmt;

pub use group::{
    AutoclaimParams, AutoclaimReport, ClaimParams, ClaimReport, Consumer, Group, Nack, ReadReport,
};
pub use id::{parse_range_bound, AddId, BoundKind, StreamId};
pub use node::{Entry, Fields};
pub(crate) use node::{Node, FLAG_DELETED, FLAG_SAME_FIELDS};
pub use range::Range;

/// Redis refuses entries, and caps nodes, beyond 1 GiB of listpack.
const LISTPACK_MAX_SIZE: u64 = 1 << 30;

/// Errors stream operations report, with Redis's exact messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamError {
    /// An argument is not a valid ID.
    InvalidId,
    /// An exclusive range start at the largest ID.
    InvalidStartInterval,
    /// An exclusive range end at `0-0`.
    InvalidEndInterval,
    /// XADD with an explicit ID not above the last one.
    AddIdTooSmall,
    /// XADD with the ID `0-0`.
    AddIdZero,
    /// XADD to a stream whose last ID is the largest possible.
    Exhausted,
    /// XADD of more than 1 GiB of fields and values, or (as Redis 7.0
    /// answers it) `<ms>-*` when that millisecond's sequence is used up.
    TooLarge,
    /// XSETID below the stream's last live entry.
    SetIdTooSmall,
    /// XSETID ENTRIESADDED below the stream's length.
    SetIdEntriesAddedTooSmall,
    /// XSETID MAXDELETEDID above the new last ID.
    SetIdMaxDeletedTooLarge,
    /// XGROUP CREATE of a group that exists.
    BusyGroup,
}

impl StreamError {
    /// The error reply, exactly as Redis 7.0 sends it (without the `-`).
    pub fn message(self) -> &'static str {
        match self {
            StreamError::InvalidId => "ERR Invalid stream ID specified as stream command argument",
            StreamError::InvalidStartInterval => "ERR invalid start ID for the interval",
            StreamError::InvalidEndInterval => "ERR invalid end ID for the interval",
            StreamError::AddIdTooSmall => {
                "ERR The ID specified in XADD is equal or smaller than the target stream top item"
            }
            StreamError::AddIdZero => "ERR The ID specified in XADD must be greater than 0-0",
            StreamError::Exhausted => {
                "ERR The stream has exhausted the last possible ID, unable to add more items"
            }
            StreamError::TooLarge => "ERR Elements are too large to be stored",
            StreamError::SetIdTooSmall => {
                "ERR The ID specified in XSETID is smaller than the target stream top item"
            }
            StreamError::SetIdEntriesAddedTooSmall => {
                "ERR The entries_added specified in XSETID is smaller than the target stream length"
            }
            StreamError::SetIdMaxDeletedTooLarge => {
                "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"
            }
            StreamError::BusyGroup => "BUSYGROUP Consumer Group name already exists",
        }
    }
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for StreamError {}

/// How big a node may grow (`stream-node-max-bytes`,
/// `stream-node-max-entries`); 0 means no limit of that kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeLimits {
    /// Listpack bytes a node may reach before a new one starts.
    pub max_bytes: u64,
    /// Entries (live or deleted) a node may hold.
    pub max_entries: u64,
}

impl Default for NodeLimits {
    /// Redis's defaults: 4096 bytes, 100 entries.
    fn default() -> Self {
        NodeLimits {
            max_bytes: 4096,
            max_entries: 100,
        }
    }
}

impl NodeLimits {
    /// The LIMIT approximate trimming gets when the client gives none:
    /// 100 nodes' worth of entries, kept between 1 (10000 when entries are
    /// unlimited) and one million, as Redis computes it.
    pub fn default_trim_limit(self) -> u64 {
        match self.max_entries.saturating_mul(100) {
            0 => 10_000,
            n => n.min(1_000_000),
        }
    }
}

/// What XTRIM (or XADD's trimming options) asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimStrategy {
    /// Keep at most this many entries (MAXLEN).
    MaxLen(u64),
    /// Keep no entry below this ID (MINID).
    MinId(StreamId),
}

/// A trimming request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trim {
    /// What to keep.
    pub strategy: TrimStrategy,
    /// `~`: remove whole nodes only, stopping at the first node that
    /// cannot go entirely.
    pub approx: bool,
    /// Most entries to remove (0: no limit). Only meaningful with
    /// `approx`; see [`NodeLimits::default_trim_limit`].
    pub limit: u64,
}

/// The validated arguments of XSETID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetId {
    last_id: StreamId,
    entries_added: Option<u64>,
    max_deleted: StreamId,
}

impl SetId {
    /// Checks the arguments among themselves (Redis does so before looking
    /// the key up): MAXDELETEDID may not exceed the new last ID.
    pub fn new(
        last_id: StreamId,
        entries_added: Option<u64>,
        max_deleted: Option<StreamId>,
    ) -> Result<SetId, StreamError> {
        let max_deleted = max_deleted.unwrap_or(StreamId::MIN);
        if last_id < max_deleted {
            return Err(StreamError::SetIdMaxDeletedTooLarge);
        }
        Ok(SetId {
            last_id,
            entries_added,
            max_deleted,
        })
    }
}

/// A stream's bookkeeping beside its entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Meta {
    /// Live entries.
    pub length: u64,
    /// The largest ID ever used (or set by XSETID).
    pub last_id: StreamId,
    /// The first live entry's ID, 0-0 when empty.
    pub first_id: StreamId,
    /// The largest ID ever deleted.
    pub max_deleted: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
}

impl Meta {
    /// Whether a tombstone may lie in `start..=end` (Redis's
    /// `streamRangeHasTombstones`; only the largest deleted ID is known).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.length == 0 || self.max_deleted.is_zero() || self.first_id > self.max_deleted {
            return false;
        }
        start <= self.max_deleted && self.max_deleted <= end
    }

    /// How many entries were added up to and including `id`, when that can
    /// be known (Redis's `streamEstimateDistanceFromFirstEverEntry`): None
    /// for an ID in the future or inside a stream with deletions ahead.
    pub fn estimate_distance(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        if self.max_deleted.is_zero() || self.max_deleted < self.first_id {
            let before_first = self.entries_added - self.length;
            if id < self.first_id {
                return Some(before_first);
            }
            if id == self.first_id {
                return Some(before_first + 1);
            }
        }
        None
    }
}

/// A stream value (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stream {
    pub(crate) nodes: BTreeMap<StreamId, Node>,
    pub(crate) meta: Meta,
    pub(crate) groups: BTreeMap<Box<[u8]>, Group>,
}

impl Stream {
    /// An empty stream (what XGROUP CREATE … MKSTREAM makes).
    pub fn new() -> Self {
        Stream::default()
    }

    /// Live entries (XLEN).
    pub fn len(&self) -> u64 {
        self.meta.length
    }

    /// True when no live entry is left (an empty stream is still a key).
    pub fn is_empty(&self) -> bool {
        self.meta.length == 0
    }

    /// The largest ID used (`last-generated-id`).
    pub fn last_id(&self) -> StreamId {
        self.meta.last_id
    }

    /// The first live entry's ID as recorded (`recorded-first-entry-id`).
    pub fn first_id(&self) -> StreamId {
        self.meta.first_id
    }

    /// The largest deleted ID (`max-deleted-entry-id`).
    pub fn max_deleted_id(&self) -> StreamId {
        self.meta.max_deleted
    }

    /// Entries ever added (`entries-added`).
    pub fn entries_added(&self) -> u64 {
        self.meta.entries_added
    }

    /// Number of nodes (`radix-tree-keys`).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The node count of a radix tree holding the node keys
    /// (`radix-tree-nodes`): Redis's rax stores 16-byte big-endian keys,
    /// with a node per branching point, per key end and per run of
    /// unbranched bytes.
    pub fn radix_tree_nodes(&self) -> u64 {
        let keys: Vec<[u8; 16]> = self.nodes.keys().map(|id| id.to_be_bytes()).collect();
        if keys.is_empty() {
            return 1;
        }
        rax_subtree_nodes(&keys, 0)
    }

    /// `stream`, what `OBJECT ENCODING` reports.
    pub fn encoding_name(&self) -> &'static str {
        "stream"
    }

    /// Heap bytes owned by the stream, for `MEMORY USAGE`: node buffers,
    /// B-tree slots, groups, consumers and pending entries.
    pub fn heap_bytes(&self) -> usize {
        // A B-tree slot: key, value and a share of the node's edges.
        let slot = |k: usize, v: usize| k + v + std::mem::size_of::<usize>();
        let nodes: usize = self
            .nodes
            .values()
            .map(|n| n.heap_bytes() + slot(16, std::mem::size_of::<Node>()))
            .sum();
        let groups: usize = self
            .groups
            .iter()
            .map(|(name, g)| name.len() + slot(16, std::mem::size_of::<Group>()) + g.heap_bytes())
            .sum();
        nodes + groups
    }

    /// Allocations freeing the stream walks, as Redis's
    /// `lazyfreeGetFreeEffort` estimates them: the radix tree's nodes plus,
    /// per group, one and the first group's pending count.
    pub fn free_effort(&self) -> usize {
        let per_group = self
            .groups
            .values()
            .next()
            .map_or(0, |g| 1 + g.pending_len());
        self.radix_tree_nodes() as usize + self.groups.len() * per_group
    }

    /// Entries with `start <= id <= end`, oldest first, or newest first
    /// when `rev` (XRANGE, XREVRANGE, XREAD).
    pub fn range(&self, start: StreamId, end: StreamId, rev: bool) -> Range<'_> {
        Range::new(&self.nodes, start, end, rev, false)
    }

    /// The live entry `id`, if any.
    pub fn get(&self, id: StreamId) -> Option<Entry<'_>> {
        self.range(id, id, false).next()
    }

    /// The last live entry's ID (what XREAD compares against).
    pub fn last_valid_id(&self) -> Option<StreamId> {
        self.range(StreamId::MIN, StreamId::MAX, true)
            .next()
            .map(|e| e.id)
    }

    /// The first entry's ID, tombstones included when `with_tombstones`,
    /// or [`StreamId::MAX`] when there is none (Redis's `streamGetEdgeID`;
    /// XADD and XTRIM propagate `MINID ~` as `MINID =` this ID).
    pub fn first_edge_id(&self, with_tombstones: bool) -> StreamId {
        Range::new(
            &self.nodes,
            StreamId::MIN,
            StreamId::MAX,
            false,
            with_tombstones,
        )
        .next()
        .map_or(StreamId::MAX, |e| e.id)
    }

    /// Appends an entry (XADD) and returns its ID. `pairs` are the
    /// field-value pairs (at least one); `now_ms` is the clock for `*`.
    pub fn add<'a, I>(
        &mut self,
        id: AddId,
        pairs: I,
        limits: NodeLimits,
        now_ms: u64,
    ) -> Result<StreamId, StreamError>
    where
        I: IntoIterator<Item = (&'a [u8], &'a [u8])>,
        I::IntoIter: Clone,
    {
        let id = id.reject_zero()?;
        let last = self.meta.last_id;
        if last == StreamId::MAX {
            return Err(StreamError::Exhausted);
        }
        let id = match id {
            AddId::Auto if now_ms > last.ms => StreamId::new(now_ms, 0),
            AddId::Auto => last.incr().ok_or(StreamError::Exhausted)?,
            AddId::AutoSeq(ms) if ms == last.ms => {
                // Redis 7.0 answers a used-up millisecond with the message
                // of its last `errno`, which is not EDOM: "too large".
                last.incr()
                    .filter(|next| next.ms == ms)
                    .ok_or(StreamError::TooLarge)?
            }
            AddId::AutoSeq(ms) => StreamId::new(ms, 0),
            AddId::Exact(id) => id,
        };
        if id <= last {
            return Err(StreamError::AddIdTooSmall);
        }
        let pairs = pairs.into_iter();
        let payload: u64 = pairs.clone().map(|(f, v)| (f.len() + v.len()) as u64).sum();
        if payload > LISTPACK_MAX_SIZE {
            return Err(StreamError::TooLarge);
        }
        match self.writable_tail(payload, limits) {
            Some((master, node)) => node.push(master, id, false, pairs),
            None => {
                let mut node = Node::new(pairs.clone().map(|(name, _)| name));
                node.push(id, id, false, pairs);
                self.nodes.insert(id, node);
            }
        }
        let m = &mut self.meta;
        m.length += 1;
        m.entries_added += 1;
        m.last_id = id;
        if m.length == 1 {
            m.first_id = id;
        }
        Ok(id)
    }

    /// The tail node and its master ID when an entry of `payload` bytes
    /// still fits in it; None when a new node must start (the old tail
    /// then gives back its spare capacity).
    fn writable_tail(&mut self, payload: u64, limits: NodeLimits) -> Option<(StreamId, &mut Node)> {
        let tail = self.nodes.last_entry()?;
        let master = *tail.key();
        let node = tail.into_mut();
        let max_bytes = match limits.max_bytes {
            0 => LISTPACK_MAX_SIZE,
            n => n.min(LISTPACK_MAX_SIZE),
        };
        let full = node.listpack_bytes() + payload >= max_bytes
            || (limits.max_entries != 0 && node.entry_count() >= limits.max_entries);
        if full {
            node.shrink();
            return None;
        }
        Some((master, node))
    }

    /// Deletes the entries with these IDs (XDEL) and returns how many
    /// existed; updates the first and largest deleted IDs as Redis does.
    pub fn delete(&mut self, ids: &[StreamId]) -> u64 {
        let mut deleted = 0;
        let mut first_deleted = false;
        for &id in ids {
            if !self.delete_one(id) {
                continue;
            }
            first_deleted |= id == self.meta.first_id;
            if id > self.meta.max_deleted {
                self.meta.max_deleted = id;
            }
            deleted += 1;
        }
        if deleted > 0 {
            if self.meta.length == 0 {
                self.meta.first_id = StreamId::MIN;
            } else if first_deleted {
                self.meta.first_id = self.first_edge_id(false);
            }
        }
        deleted
    }

    /// Turns the live entry `id` into a tombstone, dropping its node when
    /// it was the node's last live entry.
    fn delete_one(&mut self, id: StreamId) -> bool {
        let Some((&master, node)) = self.nodes.range_mut(..=id).next_back() else {
            return false;
        };
        let found = node
            .raw_entries(master)
            .take_while(|raw| raw.id <= id)
            .find(|raw| raw.id == id && !raw.is_deleted());
        let Some(raw) = found else {
            return false;
        };
        if node.live() == 1 {
            self.nodes.remove(&master);
        } else {
            node.mark_deleted(raw.off);
        }
        self.meta.length -= 1;
        true
    }

    /// Trims the oldest entries (XTRIM, XADD's MAXLEN/MINID) and returns
    /// how many went, following Redis 7.0's `streamTrim`: whole nodes go
    /// while they may; then, unless `approx`, entries of the next node are
    /// marked deleted up to the goal. The limit stops before a node whose
    /// removal would exceed it.
    pub fn trim(&mut self, trim: &Trim) -> u64 {
        let mut removed = 0u64;
        while let Some(mut first) = self.nodes.first_entry() {
            if let TrimStrategy::MaxLen(max) = trim.strategy {
                if self.meta.length <= max {
                    break;
                }
            }
            let entries = first.get().live();
            if trim.limit != 0 && removed + entries > trim.limit {
                break;
            }
            let whole = match trim.strategy {
                TrimStrategy::MaxLen(max) => self.meta.length - entries >= max,
                TrimStrategy::MinId(min) => first.get().last_id() < min,
            };
            if whole {
                first.remove();
                self.meta.length -= entries;
                removed += entries;
                continue;
            }
            if !trim.approx {
                let master = *first.key();
                removed += trim_inside(first.get_mut(), master, &mut self.meta, trim.strategy);
            }
            break;
        }
        if self.meta.length == 0 {
            self.meta.first_id = StreamId::MIN;
        } else if removed > 0 {
            self.meta.first_id = self.first_edge_id(false);
        }
        removed
    }

    /// Sets the last ID and, optionally, the added-entries counter and the
    /// largest deleted ID (XSETID), refusing what would break the stream's
    /// order.
    pub fn set_id(&mut self, set: &SetId) -> Result<(), StreamError> {
        if self.meta.length > 0 {
            let top = self.last_valid_id().unwrap_or(StreamId::MIN);
            if set.last_id < top {
                return Err(StreamError::SetIdTooSmall);
            }
            if set.entries_added.is_some_and(|n| n < self.meta.length) {
                return Err(StreamError::SetIdEntriesAddedTooSmall);
            }
        }
        self.meta.last_id = set.last_id;
        if let Some(n) = set.entries_added {
            self.meta.entries_added = n;
        }
        if !set.max_deleted.is_zero() {
            self.meta.max_deleted = set.max_deleted;
        }
        Ok(())
    }

    /// Whether a tombstone may lie between `start` and `end` (see
    /// [`Meta::range_has_tombstones`]).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        self.meta.range_has_tombstones(start, end)
    }

    /// The number of entries added up to `id` when it can be known (what
    /// a group's `entries-read` is derived from); None when it cannot.
    pub fn estimate_distance(&self, id: StreamId) -> Option<u64> {
        self.meta.estimate_distance(id)
    }

    /// A group's lag (entries not yet delivered to it), or None when
    /// deletions make it unknowable (XINFO GROUPS' `lag`, nil then).
    pub fn group_lag(&self, group: &Group) -> Option<i64> {
        let added = self.meta.entries_added;
        if added == 0 {
            return Some(0);
        }
        let read = match group.entries_read {
            Some(read) if !self.range_has_tombstones(group.last_id, StreamId::MAX) => read,
            _ => self.estimate_distance(group.last_id)?,
        };
        Some((added as i64).wrapping_sub(read as i64))
    }
}

/// Marks entries of the first node deleted until `strategy` is met;
/// returns how many.
fn trim_inside(node: &mut Node, master: StreamId, meta: &mut Meta, strategy: TrimStrategy) -> u64 {
    let mut off = node.first_offset();
    let mut removed = 0;
    while !node.is_end(off) {
        let raw = node.decode(master, off);
        let done = match strategy {
            TrimStrategy::MaxLen(max) => meta.length <= max,
            TrimStrategy::MinId(min) => raw.id >= min,
        };
        if done {
            break;
        }
        if !raw.is_deleted() {
            node.mark_deleted(raw.off);
            meta.length -= 1;
            removed += 1;
        }
        off = raw.end;
    }
    removed
}

/// Nodes of the radix subtree reached at byte `depth` that holds `keys`
/// (sorted, distinct, 16 bytes each): a compressed node for the bytes all
/// keys share (if any), then a branching node with one subtree per next
/// byte; a lone key is a compressed node for its remaining bytes (if any)
/// and its end node.
fn rax_subtree_nodes(keys: &[[u8; 16]], depth: usize) -> u64 {
    let (first, last) = (keys[0], keys[keys.len() - 1]);
    if keys.len() == 1 {
        return if depth == 16 { 1 } else { 2 };
    }
    let shared = (depth..16).take_while(|&d| first[d] == last[d]).count();
    let branch_at = depth + shared;
    let mut nodes = 1 + u64::from(shared > 0);
    let mut rest = keys;
    while let Some(head) = rest.first() {
        let byte = head[branch_at];
        let n = rest.iter().take_while(|k| k[branch_at] == byte).count();
        nodes += rax_subtree_nodes(&rest[..n], branch_at + 1);
        rest = &rest[n..];
    }
    nodes
}

#[cfg(test)]
mod tests;
