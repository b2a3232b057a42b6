//! Stream payloads: round trips, the legacy type 15, damaged input and a
//! seeded random-mutation harness for the loader.

use super::encode::{write_len, write_string};
use super::stream::node_listpack;
use super::*;
use crate::stream::{AddId, NodeLimits, Stream, StreamId};
use crate::value::Value;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

/// A stream exercising every part of the format: several nodes, entries
/// with and without the master fields, integer, empty and long values,
/// tombstones, two groups with pending entries, consumers without any,
/// known and unknown read counters.
fn sample() -> Stream {
    let limits = NodeLimits {
        max_bytes: 4096,
        max_entries: 3,
    };
    let mut s = Stream::new();
    let long = vec![b'L'; 5000];
    let mid = vec![b'M'; 100];
    for i in 1..=12u64 {
        let n = (i * 1000).to_string();
        let fields: Vec<(&[u8], &[u8])> = match i % 4 {
            0 => vec![(b"name", b"x"), (b"n", n.as_bytes())],
            1 => vec![(b"name", &mid), (b"n", b"-17")],
            2 => vec![(b"other", b"")],
            _ => vec![(b"name", &long), (b"12", b"007")],
        };
        s.add(AddId::Exact(id(i, i % 3)), fields, limits, 0)
            .unwrap();
    }
    s.delete(&[id(2, 2), id(4, 1), id(12, 0)]);
    s.create_group(b"g1", StreamId::MIN, None).unwrap();
    s.read_group_new(b"g1", b"alice", 3, false, 1_700_000_000_000, |_| {});
    s.read_group_new(b"g1", b"bob", 2, false, 1_700_000_000_500, |_| {});
    s.group_mut(b"g1").unwrap().ack(id(3, 0));
    s.group_mut(b"g1").unwrap().create_consumer(b"carol", 5);
    s.create_group(b"g2", id(3, 0), Some(3)).unwrap();
    s.read_group_new(b"g2", b"dave", 0, true, 9, |_| {});
    s.create_group(b"1234", StreamId::MAX, None).unwrap();
    s
}

fn payload(s: &Stream, compress: bool) -> Vec<u8> {
    dump_stream_payload(
        s,
        &EncodeOptions {
            compress,
            ..Default::default()
        },
    )
}

/// A DUMP payload around a type byte and body.
fn wrap(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut p = vec![ty];
    p.extend_from_slice(body);
    p.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

/// Recomputes the checksum of a (mutated) payload.
fn fix_crc(p: &mut [u8]) {
    if p.len() >= 10 {
        let n = p.len() - 8;
        let crc = crc64(0, &p[..n]);
        p[n..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Checks what a loaded stream promises: ordered entries matching its
/// length both ways, pending entries owned consistently, and a second
/// round trip giving the same stream.
fn check_consistent(s: &Stream) {
    let fwd: Vec<StreamId> = s
        .range(StreamId::MIN, StreamId::MAX, false)
        .map(|e| e.id)
        .collect();
    let mut rev: Vec<StreamId> = s
        .range(StreamId::MIN, StreamId::MAX, true)
        .map(|e| e.id)
        .collect();
    rev.reverse();
    assert_eq!(fwd, rev);
    assert_eq!(fwd.len() as u64, s.len());
    assert!(fwd.windows(2).all(|w| w[0] < w[1]));
    assert!(fwd.last().is_none_or(|&l| l <= s.last_id()));
    for (_, g) in s.groups() {
        for (pid, nack) in g.pending(StreamId::MIN, StreamId::MAX) {
            let owner = g.consumer(nack.consumer()).expect("owner exists");
            assert!(owner.pending_ids(pid, pid).next().is_some());
        }
        let owned: usize = g.consumers().map(|(_, c)| c.pending_len()).sum();
        assert_eq!(owned, g.pending_len());
    }
    let again = restore_stream_payload(&payload(s, false)).expect("re-dump loads");
    assert_eq!(&again, s);
}

#[test]
fn streams_round_trip() {
    let s = sample();
    assert!(s.node_count() >= 4);
    for compress in [false, true] {
        let back = restore_stream_payload(&payload(&s, compress)).unwrap();
        assert_eq!(back, s, "compress={compress}");
        check_consistent(&back);
    }
    // NOACK reads leave nothing pending; the deleted last entry (12-0)
    // keeps the read counter unknown.
    let g2 = s.group(b"g2").unwrap();
    assert_eq!((g2.pending_len(), g2.entries_read), (0, None));
    assert_eq!(g2.last_id, id(11, 2));
    let empty = Stream::new();
    assert_eq!(restore_stream_payload(&payload(&empty, false)), Ok(empty));
}

#[test]
fn other_types_are_not_streams() {
    let p = dump_payload(
        crate::value::ValueRef::Str(crate::value::StrRef::Int(5)),
        &EncodeOptions::default(),
    );
    assert!(matches!(
        restore_stream_payload(&p),
        Err(PayloadError::BadData(_))
    ));
    let mut p = payload(&sample(), false);
    let last = p.len() - 1;
    p[last] ^= 1;
    assert_eq!(
        restore_stream_payload(&p),
        Err(PayloadError::VersionOrChecksum)
    );
}

/// The Redis 5/6 layout (type 15) of a stream: no first or deleted IDs, no
/// added count, no group read counters.
fn legacy_body(s: &Stream) -> Vec<u8> {
    let mut out = Vec::new();
    write_len(&mut out, s.nodes.len() as u64);
    for (&master, node) in &s.nodes {
        write_string(&mut out, &master.to_be_bytes(), false);
        write_string(&mut out, &node_listpack(master, node), false);
    }
    write_len(&mut out, s.len());
    write_len(&mut out, s.last_id().ms);
    write_len(&mut out, s.last_id().seq);
    write_len(&mut out, s.group_count() as u64);
    for (name, g) in s.groups() {
        write_string(&mut out, name, false);
        write_len(&mut out, g.last_id.ms);
        write_len(&mut out, g.last_id.seq);
        write_len(&mut out, g.pending_len() as u64);
        for (pid, nack) in g.pending(StreamId::MIN, StreamId::MAX) {
            out.extend_from_slice(&pid.to_be_bytes());
            out.extend_from_slice(&nack.delivery_time.to_le_bytes());
            write_len(&mut out, nack.delivery_count);
        }
        write_len(&mut out, g.consumer_count() as u64);
        for (cname, c) in g.consumers() {
            write_string(&mut out, cname, false);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            write_len(&mut out, c.pending_len() as u64);
            for pid in c.pending_ids(StreamId::MIN, StreamId::MAX) {
                out.extend_from_slice(&pid.to_be_bytes());
            }
        }
    }
    out
}

#[test]
fn legacy_streams_get_7_0_counters() {
    // Six entries, 3-0 deleted, g1 read four of them, then MAXLEN = 2.
    let mut s = Stream::new();
    for i in 1..=6 {
        s.add(
            AddId::Exact(id(i, 0)),
            [(&b"data"[..], &b"x"[..])],
            NodeLimits::default(),
            0,
        )
        .unwrap();
    }
    s.delete(&[id(3, 0)]);
    s.create_group(b"g1", StreamId::MIN, None).unwrap();
    s.create_group(b"g2", StreamId::MIN, None).unwrap();
    s.read_group_new(b"g1", b"c11", 4, false, 77, |_| {});
    s.trim(&crate::stream::Trim {
        strategy: crate::stream::TrimStrategy::MaxLen(2),
        approx: false,
        limit: 0,
    });
    let back = restore_stream_payload(&wrap(rtype::STREAM_LISTPACKS, &legacy_body(&s))).unwrap();
    assert_eq!(back.len(), 2);
    assert_eq!(back.entries_added(), 2);
    assert_eq!(back.max_deleted_id(), StreamId::MIN);
    assert_eq!(back.first_id(), id(5, 0));
    let g1 = back.group(b"g1").unwrap();
    assert_eq!((g1.entries_read, back.group_lag(g1)), (Some(1), Some(1)));
    let g2 = back.group(b"g2").unwrap();
    assert_eq!((g2.entries_read, back.group_lag(g2)), (Some(0), Some(2)));
    assert_eq!(g1.pending_len(), 4);
    check_consistent(&back);
}

#[test]
fn legacy_empty_stream_records_the_largest_first_id() {
    let mut s = Stream::new();
    s.add(
        AddId::Exact(id(1, 0)),
        [(&b"a"[..], &b"b"[..])],
        NodeLimits::default(),
        0,
    )
    .unwrap();
    s.delete(&[id(1, 0)]);
    let back = restore_stream_payload(&wrap(rtype::STREAM_LISTPACKS, &legacy_body(&s))).unwrap();
    assert_eq!(back.first_id(), StreamId::MAX);
    assert!(back.is_empty());
}

#[test]
fn redis_7_2_consumers_carry_an_active_time() {
    let s = sample();
    // Type 21 adds 8 bytes after each consumer's seen-time.
    let mut body = Vec::new();
    write_stream(&mut body, &s, false);
    let v19 = restore_stream_payload(&wrap(rtype::STREAM_LISTPACKS_3, &body));
    assert!(matches!(v19, Err(PayloadError::BadData(_))));
    let mut one = Stream::new();
    one.add(
        AddId::Exact(id(1, 0)),
        [(&b"a"[..], &b"b"[..])],
        NodeLimits::default(),
        0,
    )
    .unwrap();
    one.create_group(b"g", StreamId::MIN, Some(0)).unwrap();
    one.group_mut(b"g").unwrap().create_consumer(b"c", 42);
    let mut body = Vec::new();
    write_stream(&mut body, &one, false);
    // The consumer's seen-time is the payload's last 8 bytes but its
    // empty PEL count: insert the active-time after it.
    let at = body.len() - 1;
    body.splice(at..at, 99i64.to_le_bytes());
    let back = restore_stream_payload(&wrap(rtype::STREAM_LISTPACKS_3, &body)).unwrap();
    assert_eq!(back, one);
}

/// Loads `body` as a type-19 payload and returns the error text.
fn load_error(body: &[u8]) -> String {
    match restore_stream_payload(&wrap(rtype::STREAM_LISTPACKS_2, body)) {
        Err(PayloadError::BadData(e)) => e.to_string(),
        other => panic!("expected bad data, got {other:?}"),
    }
}

/// A type-19 body with one node holding `lp` under `master`, then the
/// given tail (length, IDs, counters, groups).
fn one_node(master: StreamId, lp: &[u8], tail: &[u64]) -> Vec<u8> {
    let mut out = vec![1];
    write_string(&mut out, &master.to_be_bytes(), false);
    write_string(&mut out, lp, false);
    for &n in tail {
        write_len(&mut out, n);
    }
    out
}

/// A node listpack from integer and string elements.
fn lp(items: &[&[u8]]) -> Vec<u8> {
    let mut b = listpack::Builder::new();
    items.iter().for_each(|it| b.push(it));
    b.finish()
}

#[test]
fn damaged_payloads_are_refused() {
    let m = id(5, 0);
    let good = lp(&[b"1", b"0", b"1", b"f", b"0", b"2", b"0", b"0", b"v", b"4"]);
    // length, last, first, max-deleted, added, groups
    let tail = [1, 5, 0, 5, 0, 0, 0, 1, 0];
    assert!(restore_stream_payload(&wrap(19, &one_node(m, &good, &tail))).is_ok());
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            one_node(m, &good, &[2, 5, 0, 5, 0, 0, 0, 1, 0]),
            "stream length",
        ),
        (
            one_node(m, &good, &[1, 4, 0, 5, 0, 0, 0, 1, 0]),
            "last ID below",
        ),
        (
            one_node(
                m,
                &lp(&[b"2", b"0", b"1", b"f", b"0", b"2", b"0", b"0", b"v", b"4"]),
                &tail,
            ),
            "entry counts",
        ),
        (
            one_node(
                m,
                &lp(&[b"1", b"0", b"1", b"f", b"0", b"2", b"0", b"0", b"v", b"5"]),
                &tail,
            ),
            "element count",
        ),
        (
            one_node(
                m,
                &lp(&[b"1", b"0", b"1", b"f", b"0", b"2", b"-1", b"0", b"v", b"4"]),
                &tail,
            ),
            "out of order",
        ),
        (
            one_node(
                m,
                &lp(&[b"0", b"0", b"0", b"0"]),
                &[0, 5, 0, 0, 0, 0, 0, 0, 0],
            ),
            "a node without entries",
        ),
        (
            one_node(m, &lp(&[b"1", b"0", b"1", b"f", b"7"]), &tail),
            "not terminated",
        ),
        (
            one_node(m, &lp(&[b"1", b"0", b"9", b"f", b"0"]), &tail),
            "bad count",
        ),
        (
            one_node(
                m,
                &lp(&[b"1", b"0", b"1", b"f", b"0", b"2", b"0", b"0"]),
                &tail,
            ),
            "ends inside an entry",
        ),
    ];
    for (body, what) in cases {
        let e = load_error(&body);
        assert!(e.contains(what), "{what}: {e}");
    }
    // A short node key.
    let mut body = vec![1];
    write_string(&mut body, b"short", false);
    assert!(load_error(&body).contains("size of a stream ID"));
}

/// A one-entry stream with one group whose PEL and consumer parts are
/// `groups` (raw bytes after the group's name, last ID and counter).
fn with_group(groups: &[u8]) -> Vec<u8> {
    let m = id(5, 0);
    let node = lp(&[b"1", b"0", b"1", b"f", b"0", b"2", b"0", b"0", b"v", b"4"]);
    let mut body = one_node(m, &node, &[1, 5, 0, 5, 0, 0, 0, 1, 1]);
    write_string(&mut body, b"g", false);
    for n in [5, 0, 1] {
        write_len(&mut body, n);
    }
    body.extend_from_slice(groups);
    body
}

/// A PEL with `ids` (delivered at 0, once).
fn pel(ids: &[StreamId]) -> Vec<u8> {
    let mut out = Vec::new();
    write_len(&mut out, ids.len() as u64);
    for i in ids {
        out.extend_from_slice(&i.to_be_bytes());
        out.extend_from_slice(&0i64.to_le_bytes());
        write_len(&mut out, 1);
    }
    out
}

/// Consumers, each with its name and owned IDs.
fn consumers(list: &[(&[u8], &[StreamId])]) -> Vec<u8> {
    let mut out = Vec::new();
    write_len(&mut out, list.len() as u64);
    for (name, ids) in list {
        write_string(&mut out, name, false);
        out.extend_from_slice(&0i64.to_le_bytes());
        write_len(&mut out, ids.len() as u64);
        for i in *ids {
            out.extend_from_slice(&i.to_be_bytes());
        }
    }
    out
}

#[test]
fn damaged_groups_are_refused() {
    let a = id(5, 0);
    let b = id(9, 9);
    let ok = [pel(&[a, b]), consumers(&[(b"x", &[a]), (b"y", &[b])])].concat();
    let s = restore_stream_payload(&wrap(19, &with_group(&ok))).unwrap();
    check_consistent(&s);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            [pel(&[a, a]), consumers(&[])].concat(),
            "Duplicated global PEL",
        ),
        ([pel(&[a]), consumers(&[])].concat(), "without consumer"),
        (
            [pel(&[a]), consumers(&[(b"x", &[b])])].concat(),
            "missing from the group PEL",
        ),
        (
            [pel(&[a]), consumers(&[(b"x", &[a]), (b"y", &[a])])].concat(),
            "owned twice",
        ),
        (
            [pel(&[a]), consumers(&[(b"x", &[a, a])])].concat(),
            "owned twice",
        ),
        (
            [pel(&[]), consumers(&[(b"x", &[]), (b"x", &[])])].concat(),
            "Duplicate stream consumer detected.",
        ),
    ];
    for (groups, what) in cases {
        let e = load_error(&with_group(&groups));
        assert!(e.contains(what), "{what}: {e}");
    }
    // Two groups with one name.
    let mut body = with_group(&[pel(&[]), consumers(&[])].concat());
    let groups_at = body.len() - (3 + 2 + 2);
    body[groups_at - 1] = 2;
    body.extend_from_within(groups_at..);
    assert!(load_error(&body).contains("Duplicated consumer group"));
}

#[test]
fn random_damage_never_panics() {
    let seeds: Vec<Vec<u8>> = vec![
        payload(&sample(), false),
        payload(&sample(), true),
        wrap(rtype::STREAM_LISTPACKS, &legacy_body(&sample())),
        payload(&Stream::new(), false),
    ];
    let mut rng = fastrand::Rng::with_seed(0x5eed_57ea);
    let mut accepted = 0;
    for round in 0..6000 {
        let mut p = seeds[round % seeds.len()].clone();
        for _ in 0..rng.usize(1..4) {
            let body_end = p.len().saturating_sub(10).max(1);
            let at = rng.usize(0..body_end);
            match rng.u8(0..4) {
                0 => p[at] = rng.u8(..),
                1 => p[at] ^= 1 << rng.u8(0..8),
                2 => {
                    let end = (at + rng.usize(1..16)).min(body_end);
                    p.drain(at..end);
                }
                _ => {
                    let junk: Vec<u8> = (0..rng.usize(1..8)).map(|_| rng.u8(..)).collect();
                    p.splice(at..at, junk);
                }
            }
        }
        fix_crc(&mut p);
        if let Ok(s) = restore_stream_payload(&p) {
            accepted += 1;
            check_consistent(&s);
        }
    }
    // Mutations of counts, values and times are often still valid.
    assert!(accepted > 50, "{accepted}");
}

/// Options restoring as `sanitize-dump-payload no` does.
fn salvaging() -> LoadOptions {
    LoadOptions {
        salvage: true,
        ..LoadOptions::default()
    }
}

#[test]
fn salvage_leaves_out_a_node_with_damaged_entries() {
    let s = sample();
    let (&master, node) = s.nodes.iter().nth(1).unwrap();
    let lp = node_listpack(master, node);
    let mut p = payload(&s, false);
    let at = p
        .windows(lp.len())
        .position(|w| w == lp)
        .expect("node bytes");
    // The last entry's backlen, just before the terminator: the frame
    // stays sound, the entries do not.
    p[at + lp.len() - 2] ^= 0x01;
    fix_crc(&mut p);
    let strict = restore_payload(&p, &LoadOptions::default());
    assert!(
        matches!(&strict, Err(PayloadError::BadData(e)) if e.to_string().contains("Stream listpack integrity check failed")),
        "{strict:?}"
    );
    let Ok(Value::Stream(kept)) = restore_payload(&p, &salvaging()) else {
        panic!("salvaged");
    };
    assert_eq!(kept.node_count(), s.node_count() - 1);
    assert_eq!(kept.len(), s.len() - node.live());
    check_consistent(&kept);
}

#[test]
fn salvage_still_refuses_a_damaged_frame() {
    let s = sample();
    let (&master, node) = s.nodes.iter().next().unwrap();
    let lp = node_listpack(master, node);
    let mut p = payload(&s, false);
    let at = p
        .windows(lp.len())
        .position(|w| w == lp)
        .expect("node bytes");
    // The terminator.
    p[at + lp.len() - 1] = 0;
    fix_crc(&mut p);
    assert!(matches!(
        restore_payload(&p, &salvaging()),
        Err(PayloadError::BadData(_))
    ));
}

#[test]
fn random_damage_with_salvage_keeps_streams_consistent() {
    let seeds = [payload(&sample(), false), payload(&sample(), true)];
    let mut rng = fastrand::Rng::with_seed(0x5a1_4a6e);
    for round in 0..4000 {
        let mut p = seeds[round % seeds.len()].clone();
        let body_end = p.len() - 10;
        for _ in 0..rng.usize(1..3) {
            let at = rng.usize(0..body_end);
            p[at] = rng.u8(..);
        }
        fix_crc(&mut p);
        if let Ok(Value::Stream(s)) = restore_payload(&p, &salvaging()) {
            check_consistent(&s);
        }
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..3000 {
        let len = rng.usize(0..300);
        let mut body: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
        // Small leading counts keep the loader going further in.
        if let Some(b) = body.first_mut() {
            *b %= 4;
        }
        let p = wrap(rtype::STREAM_LISTPACKS_2, &body);
        if let Ok(s) = restore_stream_payload(&p) {
            check_consistent(&s);
        }
    }
}
