//! Unit tests of the stream structure: IDs on XADD, ranges, node cuts,
//! deletion, trimming, XSETID, groups and the 7.0 lag bookkeeping.

use super::*;

/// An entry's field-value pairs, collected.
type Pairs<'a> = Vec<(&'a [u8], &'a [u8])>;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

/// Adds `f=v` under an exact ID with the default node limits.
fn add_at(s: &mut Stream, at: StreamId) -> Result<StreamId, StreamError> {
    s.add(
        AddId::Exact(at),
        [(&b"f"[..], &b"v"[..])],
        NodeLimits::default(),
        0,
    )
}

/// A stream of entries `1-0 ..= n-0`, `f=<i>`, cut into nodes by `limits`.
fn numbered(n: u64, limits: NodeLimits) -> Stream {
    let mut s = Stream::new();
    for i in 1..=n {
        let v = i.to_string();
        s.add(
            AddId::Exact(id(i, 0)),
            [(&b"f"[..], v.as_bytes())],
            limits,
            0,
        )
        .unwrap();
    }
    s
}

fn ids(range: Range<'_>) -> Vec<u64> {
    range.map(|e| e.id.ms).collect()
}

fn per_node(n: u64) -> NodeLimits {
    NodeLimits {
        max_bytes: 0,
        max_entries: n,
    }
}

#[test]
fn xadd_generates_and_checks_ids() {
    let mut s = Stream::new();
    let limits = NodeLimits::default();
    let kv = [(&b"a"[..], &b"1"[..])];
    assert_eq!(s.add(AddId::Auto, kv, limits, 1000), Ok(id(1000, 0)));
    // The clock going backwards (or standing still) bumps the sequence.
    assert_eq!(s.add(AddId::Auto, kv, limits, 999), Ok(id(1000, 1)));
    assert_eq!(s.add(AddId::AutoSeq(1000), kv, limits, 0), Ok(id(1000, 2)));
    assert_eq!(s.add(AddId::AutoSeq(2000), kv, limits, 0), Ok(id(2000, 0)));
    assert_eq!(
        s.add(AddId::AutoSeq(5), kv, limits, 0),
        Err(StreamError::AddIdTooSmall)
    );
    assert_eq!(
        s.add(AddId::Exact(id(2000, 0)), kv, limits, 0),
        Err(StreamError::AddIdTooSmall)
    );
    assert_eq!(
        s.add(AddId::Exact(StreamId::MIN), kv, limits, 0),
        Err(StreamError::AddIdZero)
    );
    assert_eq!(
        s.add(AddId::Exact(id(3000, u64::MAX)), kv, limits, 0),
        Ok(id(3000, u64::MAX))
    );
    assert_eq!(
        s.add(AddId::AutoSeq(3000), kv, limits, 0),
        Err(StreamError::TooLarge)
    );
    assert_eq!(s.add(AddId::Auto, kv, limits, 0), Ok(id(3001, 0)));
    assert_eq!(
        s.add(AddId::Exact(StreamId::MAX), kv, limits, 0),
        Ok(StreamId::MAX)
    );
    assert_eq!(
        s.add(AddId::Auto, kv, limits, u64::MAX),
        Err(StreamError::Exhausted)
    );
    assert_eq!(s.len(), 7);
    assert_eq!(s.entries_added(), 7);
    assert_eq!(s.first_id(), id(1000, 0));
    assert_eq!(s.last_id(), StreamId::MAX);
    let mut fresh = Stream::new();
    assert_eq!(fresh.add(AddId::AutoSeq(0), kv, limits, 0), Ok(id(0, 1)));
}

#[test]
fn entries_keep_their_fields() {
    let mut s = Stream::new();
    let limits = NodeLimits::default();
    let a: [(&[u8], &[u8]); 2] = [(b"name", b"ann"), (b"age", b"42")];
    let b: [(&[u8], &[u8]); 2] = [(b"name", b"bob"), (b"age", b"")];
    let c: [(&[u8], &[u8]); 1] = [(b"other", b"x")];
    s.add(AddId::Exact(id(1, 0)), a, limits, 0).unwrap();
    s.add(AddId::Exact(id(1, 1)), b, limits, 0).unwrap();
    s.add(AddId::Exact(id(2, 0)), c, limits, 0).unwrap();
    let all: Vec<(StreamId, Pairs<'_>)> = s
        .range(StreamId::MIN, StreamId::MAX, false)
        .map(|e| (e.id, e.fields().collect()))
        .collect();
    assert_eq!(
        all,
        vec![
            (id(1, 0), a.to_vec()),
            (id(1, 1), b.to_vec()),
            (id(2, 0), c.to_vec())
        ]
    );
    assert_eq!(s.get(id(1, 1)).map(|e| e.field_count()), Some(2));
    assert!(s.get(id(1, 2)).is_none());
}

#[test]
fn nodes_are_cut_by_entries_and_by_bytes() {
    let s = numbered(25, per_node(10));
    assert_eq!(s.node_count(), 3);
    let big = NodeLimits {
        max_bytes: 100,
        max_entries: 0,
    };
    let mut s = Stream::new();
    let value = [b'x'; 30];
    for i in 1..=10 {
        s.add(AddId::Exact(id(i, 0)), [(&b"f"[..], &value[..])], big, 0)
            .unwrap();
    }
    // Each entry takes ~40 listpack bytes: two fit below 100.
    assert_eq!(s.node_count(), 5);
}

#[test]
fn ranges_walk_both_ways_across_nodes() {
    for cut in [1, 3, 100] {
        let s = numbered(20, per_node(cut));
        assert_eq!(ids(s.range(id(5, 0), id(9, 0), false)), vec![5, 6, 7, 8, 9]);
        assert_eq!(ids(s.range(id(5, 0), id(9, 0), true)), vec![9, 8, 7, 6, 5]);
        assert_eq!(ids(s.range(id(4, 1), id(5, 0), false)), vec![5]);
        assert_eq!(ids(s.range(id(0, 0), id(2, 0), true)), vec![2, 1]);
        assert_eq!(ids(s.range(id(19, 1), StreamId::MAX, false)), vec![20]);
        assert_eq!(ids(s.range(id(9, 0), id(5, 0), false)), Vec::<u64>::new());
        assert_eq!(
            ids(s.range(id(21, 0), StreamId::MAX, true)),
            Vec::<u64>::new()
        );
        assert_eq!(
            s.range(StreamId::MIN, StreamId::MAX, true).take(3).count(),
            3
        );
    }
}

#[test]
fn delete_leaves_tombstones_and_updates_the_edges() {
    let mut s = numbered(10, per_node(4));
    assert_eq!(s.delete(&[id(1, 0), id(3, 0), id(3, 0), id(42, 0)]), 2);
    assert_eq!(s.len(), 8);
    assert_eq!(s.first_id(), id(2, 0));
    assert_eq!(s.max_deleted_id(), id(3, 0));
    assert_eq!(
        ids(s.range(StreamId::MIN, StreamId::MAX, false)),
        vec![2, 4, 5, 6, 7, 8, 9, 10]
    );
    assert_eq!(ids(s.range(StreamId::MIN, StreamId::MAX, true)).len(), 8);
    assert_eq!(s.first_edge_id(true), id(1, 0));
    assert_eq!(s.first_edge_id(false), id(2, 0));
    // The first node goes with its last live entry.
    assert_eq!(s.node_count(), 3);
    assert_eq!(s.delete(&[id(2, 0), id(4, 0)]), 2);
    assert_eq!(s.node_count(), 2);
    assert_eq!(s.first_id(), id(5, 0));
    assert_eq!(s.delete(&[id(10, 0)]), 1);
    assert_eq!(s.last_valid_id(), Some(id(9, 0)));
    assert_eq!(s.last_id(), id(10, 0));
    let rest: Vec<StreamId> = (5..10).map(|i| id(i, 0)).collect();
    assert_eq!(s.delete(&rest), 5);
    assert!(s.is_empty());
    assert_eq!(s.first_id(), StreamId::MIN);
    assert_eq!(s.node_count(), 0);
    assert_eq!(s.first_edge_id(false), StreamId::MAX);
    assert_eq!(s.max_deleted_id(), id(10, 0));
}

fn trim(s: &mut Stream, strategy: TrimStrategy, approx: bool, limit: u64) -> u64 {
    s.trim(&Trim {
        strategy,
        approx,
        limit,
    })
}

#[test]
fn exact_trimming() {
    let mut s = numbered(30, per_node(10));
    assert_eq!(trim(&mut s, TrimStrategy::MaxLen(25), false, 0), 5);
    assert_eq!(s.len(), 25);
    assert_eq!(s.first_id(), id(6, 0));
    assert_eq!(trim(&mut s, TrimStrategy::MaxLen(25), false, 0), 0);
    assert_eq!(trim(&mut s, TrimStrategy::MinId(id(12, 0)), false, 0), 6);
    assert_eq!(ids(s.range(StreamId::MIN, id(13, 0), false)), vec![12, 13]);
    assert_eq!(trim(&mut s, TrimStrategy::MaxLen(0), false, 0), 19);
    assert!(s.is_empty());
    assert_eq!(s.first_id(), StreamId::MIN);
    assert_eq!(s.node_count(), 0);
}

#[test]
fn approximate_trimming_removes_whole_nodes_only() {
    let mut s = numbered(1000, per_node(100));
    assert_eq!(trim(&mut s, TrimStrategy::MaxLen(555), true, 0), 400);
    assert_eq!(s.len(), 600);
    assert_eq!(s.first_id(), id(401, 0));
    assert_eq!(trim(&mut s, TrimStrategy::MinId(id(650, 0)), true, 0), 200);
    assert_eq!(s.first_id(), id(601, 0));
    // LIMIT stops before a node that would exceed it.
    let mut s = numbered(1000, per_node(100));
    assert_eq!(trim(&mut s, TrimStrategy::MaxLen(0), true, 250), 200);
    assert_eq!(s.len(), 800);
    // MINID: a node goes only when its last entry (even a tombstone) is
    // below the ID.
    let mut s = numbered(20, per_node(10));
    s.delete(&[id(10, 0)]);
    assert_eq!(trim(&mut s, TrimStrategy::MinId(id(10, 0)), true, 0), 0);
    assert_eq!(trim(&mut s, TrimStrategy::MinId(id(11, 0)), true, 0), 9);
}

#[test]
fn exact_trim_can_leave_a_node_without_live_entries() {
    let mut s = numbered(3, per_node(10));
    s.delete(&[id(3, 0)]);
    assert_eq!(trim(&mut s, TrimStrategy::MinId(id(3, 0)), false, 0), 2);
    assert!(s.is_empty());
    assert_eq!(s.node_count(), 1);
    assert_eq!(s.first_edge_id(true), id(1, 0));
    // The next entry still goes after everything.
    assert_eq!(add_at(&mut s, id(4, 0)), Ok(id(4, 0)));
    assert_eq!(s.first_id(), id(4, 0));
    assert_eq!(ids(s.range(StreamId::MIN, StreamId::MAX, false)), vec![4]);
}

#[test]
fn default_trim_limit_is_clamped() {
    assert_eq!(NodeLimits::default().default_trim_limit(), 10_000);
    assert_eq!(per_node(0).default_trim_limit(), 10_000);
    assert_eq!(per_node(1 << 40).default_trim_limit(), 1_000_000);
    assert_eq!(per_node(u64::MAX).default_trim_limit(), 1_000_000);
}

#[test]
fn setid_guards_the_order() {
    assert_eq!(
        SetId::new(id(5, 0), None, Some(id(6, 0))),
        Err(StreamError::SetIdMaxDeletedTooLarge)
    );
    let mut s = numbered(5, NodeLimits::default());
    s.delete(&[id(5, 0)]);
    // Below the last live entry (4-0) is refused, above it is fine even
    // though 5-0 was used.
    let set = |ms, added| SetId::new(id(ms, 0), added, None).unwrap();
    assert_eq!(s.set_id(&set(3, None)), Err(StreamError::SetIdTooSmall));
    assert_eq!(
        s.set_id(&set(4, Some(3))),
        Err(StreamError::SetIdEntriesAddedTooSmall)
    );
    assert_eq!(s.set_id(&set(4, Some(4))), Ok(()));
    assert_eq!((s.last_id(), s.entries_added()), (id(4, 0), 4));
    assert_eq!(s.max_deleted_id(), id(5, 0));
    let with_max = SetId::new(id(9, 0), None, Some(id(7, 0))).unwrap();
    assert_eq!(s.set_id(&with_max), Ok(()));
    assert_eq!(s.max_deleted_id(), id(7, 0));
    assert_eq!(add_at(&mut s, id(9, 0)), Err(StreamError::AddIdTooSmall));
    // An empty stream takes anything.
    let mut empty = Stream::new();
    assert_eq!(empty.set_id(&set(0, Some(0))), Ok(()));
}

/// Reads `count` new entries for `consumer` of group `g`, returning their ms.
fn read_new(s: &mut Stream, consumer: &[u8], count: usize, now: i64) -> Vec<u64> {
    let mut got = Vec::new();
    s.read_group_new(b"g", consumer, count, false, now, |e| got.push(e.id.ms))
        .unwrap();
    got
}

fn lag_and_read(s: &Stream, group: &[u8]) -> (Option<i64>, Option<u64>) {
    let g = s.group(group).unwrap();
    (s.group_lag(g), g.entries_read)
}

#[test]
fn lag_in_empty_streams() {
    let mut s = Stream::new();
    s.create_group(b"g", StreamId::MIN, None).unwrap();
    assert_eq!(lag_and_read(&s, b"g"), (Some(0), None));
    add_at(&mut s, id(1, 0)).unwrap();
    s.delete(&[id(1, 0)]);
    assert_eq!(s.max_deleted_id(), id(1, 0));
    assert_eq!(lag_and_read(&s, b"g"), (Some(0), None));
}

#[test]
fn lag_follows_reads() {
    let mut s = numbered(5, NodeLimits::default());
    s.create_group(b"g", StreamId::MIN, None).unwrap();
    assert_eq!(lag_and_read(&s, b"g"), (Some(5), None));
    assert_eq!(read_new(&mut s, b"c1", 1, 10), vec![1]);
    assert_eq!(lag_and_read(&s, b"g"), (Some(4), Some(1)));
    assert_eq!(read_new(&mut s, b"c2", 10, 10), vec![2, 3, 4, 5]);
    assert_eq!(lag_and_read(&s, b"g"), (Some(0), Some(5)));
    add_at(&mut s, id(6, 0)).unwrap();
    assert_eq!(lag_and_read(&s, b"g"), (Some(1), Some(5)));
}

#[test]
fn lag_is_unknown_across_deletions() {
    let mut s = numbered(5, NodeLimits::default());
    s.delete(&[id(3, 0)]);
    s.create_group(b"g", StreamId::MIN, None).unwrap();
    s.create_group(b"h", StreamId::MIN, None).unwrap();
    assert_eq!(lag_and_read(&s, b"g"), (None, None));
    for _ in 0..3 {
        read_new(&mut s, b"c", 1, 0);
        assert_eq!(lag_and_read(&s, b"g"), (None, None));
    }
    // Reading the last entry makes the counter exact again.
    assert_eq!(read_new(&mut s, b"c", 1, 0), vec![5]);
    assert_eq!(lag_and_read(&s, b"g"), (Some(0), Some(5)));
    add_at(&mut s, id(6, 0)).unwrap();
    assert_eq!(lag_and_read(&s, b"g"), (Some(1), Some(5)));
    trim(&mut s, TrimStrategy::MinId(id(3, 0)), false, 0);
    assert_eq!(lag_and_read(&s, b"g"), (Some(1), Some(5)));
    assert_eq!(lag_and_read(&s, b"h"), (Some(3), None));
    trim(&mut s, TrimStrategy::MinId(id(5, 0)), false, 0);
    assert_eq!(lag_and_read(&s, b"h"), (Some(2), None));
}

#[test]
fn estimate_distance_cases() {
    let mut s = numbered(5, NodeLimits::default());
    assert_eq!(s.estimate_distance(id(5, 0)), Some(5));
    assert_eq!(s.estimate_distance(id(6, 0)), None);
    assert_eq!(s.estimate_distance(id(1, 0)), Some(1));
    assert_eq!(s.estimate_distance(id(0, 5)), Some(0));
    assert_eq!(s.estimate_distance(id(3, 0)), None);
    trim(&mut s, TrimStrategy::MaxLen(3), false, 0);
    assert_eq!(s.estimate_distance(id(3, 0)), Some(3));
    assert_eq!(s.estimate_distance(id(2, 7)), Some(2));
    assert!(!s.range_has_tombstones(StreamId::MIN, StreamId::MAX));
    s.delete(&[id(4, 0)]);
    assert!(s.range_has_tombstones(id(4, 0), StreamId::MAX));
    assert!(!s.range_has_tombstones(id(4, 1), StreamId::MAX));
    assert_eq!(s.estimate_distance(id(3, 0)), None);
}

#[test]
fn pending_entries_follow_reads_acks_and_owners() {
    let mut s = numbered(6, NodeLimits::default());
    s.create_group(b"g", StreamId::MIN, Some(0)).unwrap();
    assert_eq!(
        s.create_group(b"g", StreamId::MIN, None),
        Err(StreamError::BusyGroup)
    );
    assert_eq!(read_new(&mut s, b"alice", 2, 100), vec![1, 2]);
    assert_eq!(read_new(&mut s, b"bob", 2, 200), vec![3, 4]);
    let mut noack = Vec::new();
    let report = s
        .read_group_new(b"g", b"carol", 1, true, 300, |e| noack.push(e.id.ms))
        .unwrap();
    assert_eq!((noack, report.consumer_created), (vec![5], true));
    let g = s.group(b"g").unwrap();
    assert_eq!(g.pending_len(), 4);
    assert_eq!(g.pending_bounds(), Some((id(1, 0), id(4, 0))));
    assert_eq!(g.last_id, id(5, 0));
    assert_eq!(
        g.consumer(b"carol").map(|c| (c.pending_len(), c.seen_time)),
        Some((0, 300))
    );
    let owners: Vec<(u64, &[u8], i64, u64)> = g
        .pending(StreamId::MIN, StreamId::MAX)
        .map(|(id, n)| (id.ms, n.consumer(), n.delivery_time, n.delivery_count))
        .collect();
    assert_eq!(
        owners,
        vec![
            (1, &b"alice"[..], 100, 1),
            (2, b"alice", 100, 1),
            (3, b"bob", 200, 1),
            (4, b"bob", 200, 1)
        ]
    );
    let g = s.group_mut(b"g").unwrap();
    assert!(g.ack(id(2, 0)));
    assert!(!g.ack(id(2, 0)));
    assert_eq!(g.consumer(b"alice").unwrap().pending_len(), 1);
    // XGROUP SETID back: redelivery moves the entry to the new reader.
    g.last_id = StreamId::MIN;
    assert_eq!(read_new(&mut s, b"bob", 1, 400), vec![1]);
    let g = s.group(b"g").unwrap();
    assert_eq!(
        g.nack(id(1, 0)).map(|n| (n.consumer(), n.delivery_count)),
        Some((&b"bob"[..], 1))
    );
    assert_eq!(g.consumer(b"alice").unwrap().pending_len(), 0);
    let bobs: Vec<StreamId> = g
        .consumer_pending(b"bob", StreamId::MIN, StreamId::MAX)
        .unwrap()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(bobs, vec![id(1, 0), id(3, 0), id(4, 0)]);
    assert!(g
        .consumer_pending(b"nobody", StreamId::MIN, StreamId::MAX)
        .is_none());
    let g = s.group_mut(b"g").unwrap();
    assert!(!g.create_consumer(b"bob", 0));
    assert!(g.create_consumer(b"dave", 0));
    assert_eq!(g.delete_consumer(b"bob"), Some(3));
    assert_eq!(g.delete_consumer(b"bob"), None);
    assert_eq!(g.pending_len(), 0);
    assert!(s.destroy_group(b"g"));
    assert!(!s.destroy_group(b"g"));
}

#[test]
fn history_reads_redeliver_and_report_deleted_entries() {
    let mut s = numbered(4, NodeLimits::default());
    s.create_group(b"g", StreamId::MIN, None).unwrap();
    read_new(&mut s, b"c", 0, 10);
    s.delete(&[id(2, 0)]);
    let mut got = Vec::new();
    let r = s
        .read_group_history(b"g", b"c", StreamId::MIN, 3, 50, |id, e| {
            got.push((id.ms, e.map(|e| e.field_count())))
        })
        .unwrap();
    assert_eq!(r.delivered, 3);
    assert_eq!(got, vec![(1, Some(1)), (2, None), (3, Some(1))]);
    let g = s.group(b"g").unwrap();
    assert_eq!(
        g.nack(id(1, 0))
            .map(|n| (n.delivery_time, n.delivery_count)),
        Some((50, 2))
    );
    assert_eq!(g.nack(id(2, 0)).map(|n| n.delivery_count), Some(1));
    // The largest ID wraps around to the whole history, as in Redis.
    let mut all = 0;
    s.read_group_history(b"g", b"c", StreamId::MAX, 0, 60, |_, _| all += 1);
    assert_eq!(all, 4);
    // A consumer named for the first time is created with no history.
    let r = s
        .read_group_history(b"g", b"new", StreamId::MIN, 0, 70, |_, _| panic!("none"))
        .unwrap();
    assert_eq!((r.delivered, r.consumer_created), (0, true));
    assert!(s
        .read_group_history(b"nope", b"c", StreamId::MIN, 0, 0, |_, _| {})
        .is_none());
}

#[test]
fn claim_follows_redis_rules() {
    let mut s = numbered(5, NodeLimits::default());
    s.create_group(b"g", StreamId::MIN, None).unwrap();
    read_new(&mut s, b"a", 3, 1000);
    s.delete(&[id(2, 0)]);
    let ids = [id(1, 0), id(2, 0), id(3, 0), id(4, 0), id(9, 0)];
    // Not idle enough: nothing but the dropped deleted entry.
    let p = ClaimParams {
        min_idle: 500,
        ..ClaimParams::default()
    };
    let r = s.claim(b"g", b"b", &ids, &p, 1100).unwrap();
    assert!(r.claimed.is_empty() && !r.consumer_created);
    assert_eq!(r.deleted.len(), 1);
    assert_eq!(
        (r.deleted[0].0, r.deleted[0].1.consumer()),
        (id(2, 0), &b"a"[..])
    );
    assert!(s.group(b"b").is_none() && s.group(b"g").unwrap().consumer(b"b").is_none());
    // Idle enough; FORCE creates 4-0 (count 1, then +1 as any claim).
    let p = ClaimParams {
        min_idle: 500,
        force: true,
        last_id: Some(id(7, 0)),
        delivery_time: Some(5000),
        ..ClaimParams::default()
    };
    let r = s.claim(b"g", b"b", &ids, &p, 2000).unwrap();
    assert_eq!(r.claimed, vec![id(1, 0), id(3, 0), id(4, 0)]);
    assert!(r.consumer_created && r.last_id_raised);
    let g = s.group(b"g").unwrap();
    assert_eq!(g.last_id, id(7, 0));
    // A future TIME means now.
    let n = g.nack(id(4, 0)).unwrap();
    assert_eq!(
        (n.consumer(), n.delivery_time, n.delivery_count),
        (&b"b"[..], 2000, 2)
    );
    assert_eq!(g.nack(id(1, 0)).unwrap().delivery_count, 2);
    assert_eq!(g.consumer(b"a").unwrap().pending_len(), 0);
    assert_eq!(g.consumer(b"b").unwrap().pending_len(), 3);
    // RETRYCOUNT sets, JUSTID leaves the count alone.
    let p = ClaimParams {
        retry_count: Some(9),
        delivery_time: Some(1500),
        ..ClaimParams::default()
    };
    s.claim(b"g", b"a", &[id(1, 0)], &p, 3000).unwrap();
    let p = ClaimParams {
        justid: true,
        ..ClaimParams::default()
    };
    s.claim(b"g", b"a", &[id(3, 0)], &p, 3000).unwrap();
    let g = s.group(b"g").unwrap();
    assert_eq!(
        g.nack(id(1, 0))
            .map(|n| (n.delivery_count, n.delivery_time)),
        Some((9, 1500))
    );
    assert_eq!(g.nack(id(3, 0)).map(|n| n.delivery_count), Some(2));
    assert!(s.claim(b"x", b"a", &[], &p, 0).is_none());
}

fn auto(start: StreamId, count: u64, min_idle: i64, justid: bool) -> AutoclaimParams {
    AutoclaimParams {
        start,
        count,
        min_idle,
        justid,
    }
}

#[test]
fn autoclaim_scans_with_a_cursor() {
    let mut s = numbered(10, NodeLimits::default());
    s.create_group(b"g", StreamId::MIN, None).unwrap();
    read_new(&mut s, b"a", 0, 0);
    s.delete(&[id(3, 0)]);
    s.group_mut(b"g").unwrap().ack(id(5, 0));
    let r = s
        .autoclaim(b"g", b"b", &auto(StreamId::MIN, 3, 10, false), 100)
        .unwrap();
    assert_eq!(r.claimed, vec![id(1, 0), id(2, 0)]);
    assert_eq!(
        r.deleted.iter().map(|d| d.0).collect::<Vec<_>>(),
        vec![id(3, 0)]
    );
    assert_eq!(r.next, id(4, 0));
    assert!(r.consumer_created);
    let r = s
        .autoclaim(b"g", b"b", &auto(r.next, 100, 0, true), 100)
        .unwrap();
    assert_eq!(r.claimed.len(), 6);
    assert_eq!(r.next, StreamId::MIN);
    let g = s.group(b"g").unwrap();
    assert_eq!(g.nack(id(1, 0)).map(|n| n.delivery_count), Some(2));
    assert_eq!(g.nack(id(4, 0)).map(|n| n.delivery_count), Some(1));
    // Entries not idle enough use up attempts: 10 per requested entry.
    let mut s = numbered(30, NodeLimits::default());
    s.create_group(b"g", StreamId::MIN, None).unwrap();
    read_new(&mut s, b"a", 0, 1000);
    let r = s
        .autoclaim(b"g", b"b", &auto(StreamId::MIN, 1, 500, false), 1000)
        .unwrap();
    assert!(r.claimed.is_empty());
    assert_eq!(r.next, id(11, 0));
    assert!(!r.consumer_created);
}

#[test]
fn radix_tree_node_count_is_a_compressed_trie() {
    assert_eq!(Stream::new().radix_tree_nodes(), 1);
    let one = numbered(1, NodeLimits::default());
    assert_eq!(one.radix_tree_nodes(), 2);
    // Keys 1-0 and 2-0 differ in byte 7: a shared run, a branch, two leaves.
    let two = numbered(2, per_node(1));
    assert_eq!(two.radix_tree_nodes(), 1 + 1 + 2 * 2);
}

#[test]
fn memory_grows_with_content() {
    let small = numbered(10, NodeLimits::default());
    let big = numbered(1000, NodeLimits::default());
    assert!(small.heap_bytes() > 0);
    assert!(big.heap_bytes() > 50 * small.heap_bytes());
    assert_eq!(big.free_effort() as u64, big.radix_tree_nodes());
    assert_eq!(small.encoding_name(), "stream");
}

#[test]
fn error_messages_are_redis_ones() {
    assert_eq!(
        StreamError::InvalidId.to_string(),
        "ERR Invalid stream ID specified as stream command argument"
    );
    assert_eq!(
        StreamError::BusyGroup.message(),
        "BUSYGROUP Consumer Group name already exists"
    );
}
