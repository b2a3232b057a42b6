//! Consumer groups: their consumers, pending entries lists (PELs), and the
//! operations XREADGROUP, XACK, XCLAIM and XAUTOCLAIM perform on them.
//!
//! A group has a last-delivered ID, an entries-read counter (None when
//! unknown, Redis's -1), a PEL mapping each delivered but unacknowledged
//! ID to a [`Nack`] (last delivery time, delivery count, owner), and its
//! consumers, each with a seen-time and the set of IDs it owns. A NACK
//! names its owner by a shared name, so the group PEL and the owner's set
//! always agree: every change goes through the methods here.
//!
//! Redis 7.0 keeps one time per consumer, `seen-time`, refreshed whenever a
//! command names the consumer (XREADGROUP, XCLAIM, XAUTOCLAIM); the
//! `active-time` of later versions does not exist in 7.0.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;

use super::id::StreamId;
use super::node::Entry;
use super::range::Range;
use super::{Stream, StreamError};

/// A pending (delivered, not yet acknowledged) entry of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nack {
    /// Unix time in milliseconds of the last delivery.
    pub delivery_time: i64,
    /// How many times the entry was delivered.
    pub delivery_count: u64,
    consumer: Arc<[u8]>,
}

impl Nack {
    /// The consumer that owns the entry.
    pub fn consumer(&self) -> &[u8] {
        &self.consumer
    }
}

/// A consumer of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Consumer {
    /// Unix time in milliseconds the consumer was last named by a command.
    pub seen_time: i64,
    pel: BTreeSet<StreamId>,
}

impl Consumer {
    /// Entries pending for this consumer.
    pub fn pending_len(&self) -> usize {
        self.pel.len()
    }

    /// IDs pending for this consumer between `start` and `end`, in order.
    pub fn pending_ids(
        &self,
        start: StreamId,
        end: StreamId,
    ) -> impl DoubleEndedIterator<Item = StreamId> + '_ {
        self.pel.range(bounds(start, end)).copied()
    }
}

/// A consumer group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// The last ID delivered to the group (XGROUP SETID sets it).
    pub last_id: StreamId,
    /// Entries the group has read, counted as if from the first entry
    /// ever added; None when unknown (XGROUP SETID sets it).
    pub entries_read: Option<u64>,
    pel: BTreeMap<StreamId, Nack>,
    consumers: BTreeMap<Arc<[u8]>, Consumer>,
}

/// Range bounds `start..=end`, empty (rather than a panic) when reversed.
fn bounds(start: StreamId, end: StreamId) -> (Bound<StreamId>, Bound<StreamId>) {
    if start <= end {
        (Bound::Included(start), Bound::Included(end))
    } else {
        (
            Bound::Excluded(StreamId::MIN),
            Bound::Excluded(StreamId::MIN),
        )
    }
}

impl Group {
    /// A group with no consumers that has delivered up to `last_id`.
    pub(crate) fn new(last_id: StreamId, entries_read: Option<u64>) -> Self {
        Group {
            last_id,
            entries_read,
            pel: BTreeMap::new(),
            consumers: BTreeMap::new(),
        }
    }

    /// Entries pending in the whole group.
    pub fn pending_len(&self) -> usize {
        self.pel.len()
    }

    /// The smallest and largest pending IDs.
    pub fn pending_bounds(&self) -> Option<(StreamId, StreamId)> {
        let first = self.pel.keys().next()?;
        let last = self.pel.keys().next_back()?;
        Some((*first, *last))
    }

    /// Pending entries between `start` and `end`, in ID order.
    pub fn pending(
        &self,
        start: StreamId,
        end: StreamId,
    ) -> impl DoubleEndedIterator<Item = (StreamId, &Nack)> + '_ {
        self.pel.range(bounds(start, end)).map(|(id, n)| (*id, n))
    }

    /// Pending entries of consumer `name` between `start` and `end`; None
    /// when there is no such consumer.
    pub fn consumer_pending(
        &self,
        name: &[u8],
        start: StreamId,
        end: StreamId,
    ) -> Option<impl DoubleEndedIterator<Item = (StreamId, &Nack)> + '_> {
        let consumer = self.consumers.get(name)?;
        Some(
            consumer
                .pending_ids(start, end)
                .filter_map(|id| self.pel.get(&id).map(|n| (id, n))),
        )
    }

    /// The pending entry `id`.
    pub fn nack(&self, id: StreamId) -> Option<&Nack> {
        self.pel.get(&id)
    }

    /// The consumers, by name.
    pub fn consumers(&self) -> impl Iterator<Item = (&[u8], &Consumer)> + '_ {
        self.consumers.iter().map(|(name, c)| (&name[..], c))
    }

    /// Number of consumers.
    pub fn consumer_count(&self) -> usize {
        self.consumers.len()
    }

    /// The consumer `name`.
    pub fn consumer(&self, name: &[u8]) -> Option<&Consumer> {
        self.consumers.get(name)
    }

    /// Adds consumer `name` seen at `now` (XGROUP CREATECONSUMER); false
    /// when it exists.
    pub fn create_consumer(&mut self, name: &[u8], now: i64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        self.consumers.insert(
            Arc::from(name),
            Consumer {
                seen_time: now,
                pel: BTreeSet::new(),
            },
        );
        true
    }

    /// Refreshes the seen-time of consumer `name`, creating it if needed
    /// (what naming a consumer in a command does); returns its shared name
    /// and whether it was created.
    fn acquire_consumer(&mut self, name: &[u8], now: i64) -> (Arc<[u8]>, bool) {
        if let Some(existing) = self.consumers.get_mut(name) {
            existing.seen_time = now;
            if let Some((key, _)) = self.consumers.get_key_value(name) {
                return (key.clone(), false);
            }
        }
        let key: Arc<[u8]> = Arc::from(name);
        self.consumers.insert(
            key.clone(),
            Consumer {
                seen_time: now,
                pel: BTreeSet::new(),
            },
        );
        (key, true)
    }

    /// Removes consumer `name` and its pending entries (XGROUP
    /// DELCONSUMER); returns how many it had, None if it did not exist.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let consumer = self.consumers.remove(name)?;
        for id in &consumer.pel {
            self.pel.remove(id);
        }
        Some(consumer.pel.len())
    }

    /// Acknowledges `id` (XACK); false when it was not pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        let Some(nack) = self.pel.remove(&id) else {
            return false;
        };
        if let Some(owner) = self.consumers.get_mut(&nack.consumer) {
            owner.pel.remove(&id);
        }
        true
    }

    /// Removes the pending entry `id` and returns it.
    fn drop_nack(&mut self, id: StreamId) -> Option<Nack> {
        let nack = self.pel.remove(&id)?;
        if let Some(owner) = self.consumers.get_mut(&nack.consumer) {
            owner.pel.remove(&id);
        }
        Some(nack)
    }

    /// Records the delivery of `id` to `consumer` at `now` by XREADGROUP:
    /// a new pending entry, or one taken over from its previous owner with
    /// its count reset to 1.
    fn deliver(&mut self, id: StreamId, consumer: &Arc<[u8]>, now: i64) {
        let nack = Nack {
            delivery_time: now,
            delivery_count: 1,
            consumer: consumer.clone(),
        };
        if let Some(old) = self.pel.insert(id, nack) {
            if let Some(owner) = self.consumers.get_mut(&old.consumer) {
                owner.pel.remove(&id);
            }
        }
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
    }

    /// Gives the pending entry `id` to `consumer`.
    fn transfer(&mut self, id: StreamId, consumer: &Arc<[u8]>) {
        let Some(nack) = self.pel.get_mut(&id) else {
            return;
        };
        if nack.consumer == *consumer {
            return;
        }
        let old = std::mem::replace(&mut nack.consumer, consumer.clone());
        if let Some(owner) = self.consumers.get_mut(&old) {
            owner.pel.remove(&id);
        }
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
    }

    /// Heap bytes of the group's PEL and consumers.
    pub(crate) fn heap_bytes(&self) -> usize {
        let nack = std::mem::size_of::<(StreamId, Nack)>() + std::mem::size_of::<usize>();
        let id = std::mem::size_of::<StreamId>() + std::mem::size_of::<usize>();
        let consumers: usize = self
            .consumers
            .iter()
            .map(|(name, c)| name.len() + 2 * std::mem::size_of::<usize>() + c.pel.len() * id)
            .sum();
        self.pel.len() * nack + consumers
    }

    /// Adds a pending entry while loading an RDB file: the owner is set
    /// later by [`Group::load_consumer_entry`] (until then the entry names
    /// an empty consumer name but is in no consumer's set, which is what
    /// "unowned" means here). Returns false for a duplicate ID.
    pub(crate) fn load_nack(
        &mut self,
        id: StreamId,
        delivery_time: i64,
        delivery_count: u64,
    ) -> bool {
        let unowned = Nack {
            delivery_time,
            delivery_count,
            consumer: Arc::from(&b""[..]),
        };
        self.pel.insert(id, unowned).is_none()
    }

    /// Gives the loaded pending entry `id` to consumer `name`; false when
    /// the ID is not in the group PEL or already has an owner.
    pub(crate) fn load_consumer_entry(&mut self, name: &[u8], id: StreamId) -> bool {
        let Some((key, _)) = self.consumers.get_key_value(name) else {
            return false;
        };
        if !self.pel.contains_key(&id) || self.is_owned(id) {
            return false;
        }
        let key = key.clone();
        self.transfer_unowned(id, key);
        true
    }

    /// True when some consumer's set holds `id`.
    fn is_owned(&self, id: StreamId) -> bool {
        self.pel
            .get(&id)
            .and_then(|n| self.consumers.get(&n.consumer))
            .is_some_and(|c| c.pel.contains(&id))
    }

    /// Sets the owner of a loaded, unowned pending entry.
    fn transfer_unowned(&mut self, id: StreamId, owner: Arc<[u8]>) {
        if let Some(c) = self.consumers.get_mut(&owner) {
            c.pel.insert(id);
        }
        if let Some(n) = self.pel.get_mut(&id) {
            n.consumer = owner;
        }
    }

    /// True when every pending entry has an owner (checked after loading).
    pub(crate) fn all_owned(&self) -> bool {
        self.pel.iter().all(|(id, _)| self.is_owned(*id))
    }
}

/// What a read through a group did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadReport {
    /// Entries (or, for history reads, IDs) returned.
    pub delivered: usize,
    /// The consumer did not exist and was created (Redis then notifies
    /// `xgroup-createconsumer`).
    pub consumer_created: bool,
}

/// XCLAIM's options, with the arguments already parsed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClaimParams {
    /// Only claim entries idle at least this long (ms); 0 claims all.
    pub min_idle: i64,
    /// The new delivery time (from IDLE as `now - idle`, or TIME); None,
    /// negative or future values mean now.
    pub delivery_time: Option<i64>,
    /// RETRYCOUNT: the new delivery count.
    pub retry_count: Option<u64>,
    /// FORCE: create pending entries for existing entries not pending.
    pub force: bool,
    /// JUSTID: do not count the claim as a delivery.
    pub justid: bool,
    /// LASTID: raise the group's last ID to this.
    pub last_id: Option<StreamId>,
}

/// What XCLAIM did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimReport {
    /// IDs now owned by the consumer, in argument order.
    pub claimed: Vec<StreamId>,
    /// Pending entries dropped because their stream entry is gone, as they
    /// were (Redis propagates an XCLAIM for each).
    pub deleted: Vec<(StreamId, Nack)>,
    /// The consumer was created.
    pub consumer_created: bool,
    /// LASTID raised the group's last ID.
    pub last_id_raised: bool,
}

/// XAUTOCLAIM's arguments, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutoclaimParams {
    /// Where the PEL scan starts (inclusive).
    pub start: StreamId,
    /// Most entries to claim or drop (COUNT, at least 1).
    pub count: u64,
    /// Only claim entries idle at least this long (ms); 0 claims all.
    pub min_idle: i64,
    /// JUSTID: do not count the claim as a delivery.
    pub justid: bool,
}

/// What XAUTOCLAIM did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AutoclaimReport {
    /// IDs now owned by the consumer, in order.
    pub claimed: Vec<StreamId>,
    /// Pending entries dropped because their stream entry is gone.
    pub deleted: Vec<(StreamId, Nack)>,
    /// Where the next call should start (0-0 once the PEL is exhausted).
    pub next: StreamId,
    /// The consumer was created.
    pub consumer_created: bool,
}

/// How many PEL entries XAUTOCLAIM may look at per entry it may return.
const AUTOCLAIM_ATTEMPTS_FACTOR: u64 = 10;

impl Stream {
    /// Creates group `name` that has delivered up to `last_id` (XGROUP
    /// CREATE; `$` is [`Stream::last_id`]).
    pub fn create_group(
        &mut self,
        name: &[u8],
        last_id: StreamId,
        entries_read: Option<u64>,
    ) -> Result<(), StreamError> {
        if self.groups.contains_key(name) {
            return Err(StreamError::BusyGroup);
        }
        self.groups
            .insert(name.into(), Group::new(last_id, entries_read));
        Ok(())
    }

    /// The group `name`.
    pub fn group(&self, name: &[u8]) -> Option<&Group> {
        self.groups.get(name)
    }

    /// The group `name`, to change (XACK, XGROUP SETID/CREATECONSUMER/
    /// DELCONSUMER).
    pub fn group_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        self.groups.get_mut(name)
    }

    /// Removes group `name` (XGROUP DESTROY); false when it did not exist.
    pub fn destroy_group(&mut self, name: &[u8]) -> bool {
        self.groups.remove(name).is_some()
    }

    /// The groups, by name.
    pub fn groups(&self) -> impl Iterator<Item = (&[u8], &Group)> + '_ {
        self.groups.iter().map(|(name, g)| (&name[..], g))
    }

    /// Number of groups.
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Whether XREADGROUP `>` has something to serve right away: a live
    /// entry above the group's last ID (Redis's test before it names the
    /// consumer; when nothing is served, the consumer is neither created
    /// nor refreshed). A blocked reader is woken on a different test: the
    /// stream's last ID above the group's.
    pub fn has_unread(&self, group: &Group) -> bool {
        self.last_valid_id().is_some_and(|top| top > group.last_id)
    }

    /// XREADGROUP with `>`: hands `emit` up to `count` (0: all) entries
    /// after the group's last ID, advancing it and its entries-read as
    /// Redis 7.0 does, and (unless `noack`) makes them pending for
    /// `consumer`, which is created or refreshed. The caller first decides
    /// there is something to serve ([`Stream::has_unread`], or the waking
    /// test for blocked readers). None if no such group.
    pub fn read_group_new(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        count: usize,
        noack: bool,
        now: i64,
        mut emit: impl FnMut(Entry<'_>),
    ) -> Option<ReadReport> {
        let Stream {
            nodes,
            meta,
            groups,
        } = self;
        let group = groups.get_mut(group)?;
        let (consumer, consumer_created) = group.acquire_consumer(consumer, now);
        let start = group.last_id.incr().unwrap_or(StreamId::MIN);
        let mut delivered = 0;
        for entry in Range::new(nodes, start, StreamId::MAX, false, false) {
            let id = entry.id;
            if id > group.last_id {
                group.entries_read = match group.entries_read {
                    Some(n) if !meta.range_has_tombstones(id, StreamId::MAX) => Some(n + 1),
                    _ if meta.entries_added != 0 => meta.estimate_distance(id),
                    unchanged => unchanged,
                };
                group.last_id = id;
            }
            emit(entry);
            if !noack {
                group.deliver(id, &consumer, now);
            }
            delivered += 1;
            if delivered == count {
                break;
            }
        }
        Some(ReadReport {
            delivered,
            consumer_created,
        })
    }

    /// XREADGROUP with an ID: hands `emit` up to `count` (0: all) of the
    /// consumer's own pending IDs above `after` (the largest ID wraps to
    /// 0-0, as in Redis), each with its entry, or None when the entry was
    /// deleted meanwhile; each existing one counts as a new delivery.
    /// None if no such group.
    pub fn read_group_history(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        after: StreamId,
        count: usize,
        now: i64,
        mut emit: impl FnMut(StreamId, Option<Entry<'_>>),
    ) -> Option<ReadReport> {
        let Stream { nodes, groups, .. } = self;
        let group = groups.get_mut(group)?;
        let (consumer, consumer_created) = group.acquire_consumer(consumer, now);
        let start = after.incr().unwrap_or(StreamId::MIN);
        let limit = if count == 0 { usize::MAX } else { count };
        let ids: Vec<StreamId> = group
            .consumers
            .get(&consumer)
            .map(|c| c.pel.range(start..).take(limit).copied().collect())
            .unwrap_or_default();
        for &id in &ids {
            let entry = Range::new(nodes, id, id, false, false).next();
            if entry.is_some() {
                if let Some(nack) = group.pel.get_mut(&id) {
                    nack.delivery_time = now;
                    nack.delivery_count += 1;
                }
            }
            emit(id, entry);
        }
        Some(ReadReport {
            delivered: ids.len(),
            consumer_created,
        })
    }

    /// XCLAIM: gives the pending entries `ids` that are idle enough to
    /// `consumer` (created on the first claim), following Redis 7.0's
    /// rules for FORCE, RETRYCOUNT, JUSTID and LASTID; pending entries of
    /// deleted stream entries are dropped. None if no such group.
    pub fn claim(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        ids: &[StreamId],
        params: &ClaimParams,
        now: i64,
    ) -> Option<ClaimReport> {
        let Stream { nodes, groups, .. } = self;
        let group = groups.get_mut(group)?;
        let mut report = ClaimReport::default();
        if let Some(last) = params.last_id.filter(|&l| l > group.last_id) {
            group.last_id = last;
            report.last_id_raised = true;
        }
        let delivery_time = params
            .delivery_time
            .filter(|&t| (0..=now).contains(&t))
            .unwrap_or(now);
        let mut owner: Option<Arc<[u8]>> = None;
        for &id in ids {
            if Range::new(nodes, id, id, false, false).next().is_none() {
                if let Some(nack) = group.drop_nack(id) {
                    report.deleted.push((id, nack));
                }
                continue;
            }
            let forced = params.force && !group.pel.contains_key(&id);
            if !forced {
                let Some(nack) = group.pel.get(&id) else {
                    continue;
                };
                if params.min_idle > 0 && now - nack.delivery_time < params.min_idle {
                    continue;
                }
            }
            let owner = owner.get_or_insert_with(|| {
                let (name, created) = group.acquire_consumer(consumer, now);
                report.consumer_created = created;
                name
            });
            if forced {
                group.deliver(id, owner, now);
            } else {
                group.transfer(id, owner);
            }
            if let Some(nack) = group.pel.get_mut(&id) {
                nack.delivery_time = delivery_time;
                match params.retry_count {
                    Some(n) => nack.delivery_count = n,
                    None if !params.justid => nack.delivery_count += 1,
                    None => {}
                }
            }
            report.claimed.push(id);
        }
        Some(report)
    }

    /// XAUTOCLAIM: scans the group PEL from `start`, giving entries idle at
    /// least `min_idle` ms to `consumer` until `count` were claimed or
    /// dropped (pending entries of deleted stream entries are dropped and
    /// count too) or `10 * count` were looked at. None if no such group.
    pub fn autoclaim(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        params: &AutoclaimParams,
        now: i64,
    ) -> Option<AutoclaimReport> {
        let AutoclaimParams {
            start,
            count,
            min_idle,
            justid,
        } = *params;
        let Stream { nodes, groups, .. } = self;
        let group = groups.get_mut(group)?;
        let mut report = AutoclaimReport::default();
        let mut attempts = count.saturating_mul(AUTOCLAIM_ATTEMPTS_FACTOR);
        let mut left = count;
        let mut owner: Option<Arc<[u8]>> = None;
        let mut from = Bound::Included(start);
        while attempts > 0 && left > 0 {
            attempts -= 1;
            let Some((&id, nack)) = group.pel.range((from, Bound::Unbounded)).next() else {
                break;
            };
            from = Bound::Excluded(id);
            if Range::new(nodes, id, id, false, false).next().is_none() {
                if let Some(nack) = group.drop_nack(id) {
                    report.deleted.push((id, nack));
                }
                left -= 1;
                continue;
            }
            if min_idle > 0 && now - nack.delivery_time < min_idle {
                continue;
            }
            let owner = owner.get_or_insert_with(|| {
                let (name, created) = group.acquire_consumer(consumer, now);
                report.consumer_created = created;
                name
            });
            group.transfer(id, owner);
            if let Some(nack) = group.pel.get_mut(&id) {
                nack.delivery_time = now;
                if !justid {
                    nack.delivery_count += 1;
                }
            }
            report.claimed.push(id);
            left -= 1;
        }
        report.next = group
            .pel
            .range((from, Bound::Unbounded))
            .next()
            .map_or(StreamId::MIN, |(id, _)| *id);
        Some(report)
    }
}
