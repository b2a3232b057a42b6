//! Streams against a real redis-server 7.0: its DUMP payloads load and
//! re-dump byte for byte, Vireo's payloads RESTORE into it and read back
//! the same, and seeded random operation sequences leave both with the
//! same bytes and the same counters.
//!
//! Each test starts its own redis-server (the shared `common` harness,
//! switched to `rdbcompression no` so payloads compare byte for byte) and
//! skips with a note when redis-server is not installed.

mod common;

use common::{Redis, Reply};
use vireo_store::rdb::{dump_stream_payload, restore_stream_payload, EncodeOptions};
use vireo_store::stream::{
    AddId, AutoclaimParams, ClaimParams, NodeLimits, SetId, Stream, StreamId, Trim, TrimStrategy,
};

/// Starts the shared throwaway redis-server with uncompressed payloads, so
/// DUMP bytes compare with Vireo's exactly.
fn start(test: &str) -> Option<Redis> {
    let mut r = Redis::start(test)?;
    assert_eq!(
        r.cmd_str("CONFIG SET rdbcompression no"),
        Reply::Status("OK".into())
    );
    Some(r)
}

/// Commands with byte-string arguments of mixed lengths.
trait Call {
    fn call(&mut self, args: &[&[u8]]) -> Reply;

    /// The DUMP payload of `key`.
    fn dump(&mut self, key: &str) -> Vec<u8> {
        self.call(&[b"DUMP", key.as_bytes()]).raw()
    }
}

impl Call for Redis {
    fn call(&mut self, args: &[&[u8]]) -> Reply {
        self.cmd(args)
    }
}

/// Borrowing accessors (the shared harness's consume the reply).
trait View {
    fn items(&self) -> &[Reply];
    fn num(&self) -> i64;
    fn raw(&self) -> Vec<u8>;

    /// A bulk reply's text.
    fn txt(&self) -> String {
        String::from_utf8_lossy(&self.raw()).into_owned()
    }

    /// The value under `key` in a flat key-value array.
    fn field(&self, key: &str) -> &Reply {
        let all = self.items();
        let at = all
            .chunks(2)
            .position(|kv| kv[0] == Reply::Bulk(Some(key.as_bytes().to_vec())))
            .unwrap_or_else(|| panic!("no field {key}"));
        &all[2 * at + 1]
    }
}

impl View for Reply {
    fn items(&self) -> &[Reply] {
        match self {
            Reply::Array(Some(items)) => items,
            other => panic!("expected an array reply, got {other:?}"),
        }
    }

    fn num(&self) -> i64 {
        Reply::int(self.clone())
    }

    fn raw(&self) -> Vec<u8> {
        Reply::bytes(self.clone())
    }
}

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn plain() -> EncodeOptions {
    EncodeOptions::default()
}

/// The value of entry `i` in the shapes the tests use: repeated and new
/// field names, integers, empty and long strings.
fn fields_of(i: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    let f = |a: &[u8], b: Vec<u8>| (a.to_vec(), b);
    match i % 5 {
        0 => vec![
            f(b"name", b"x".to_vec()),
            f(b"n", (i * 1000).to_string().into_bytes()),
        ],
        1 => vec![f(b"name", vec![b'M'; 70]), f(b"n", b"-17".to_vec())],
        2 => vec![f(b"other", Vec::new())],
        3 => vec![f(b"name", vec![b'L'; 5000]), f(b"12", b"007".to_vec())],
        _ => vec![f(b"name", b"y".to_vec()), f(b"n", b"4096".to_vec())],
    }
}

/// XADD argument list for `fields`.
fn xadd_args<'a>(
    key: &'a [u8],
    idarg: &'a [u8],
    fields: &'a [(Vec<u8>, Vec<u8>)],
) -> Vec<&'a [u8]> {
    let mut args: Vec<&[u8]> = vec![b"XADD", key, idarg];
    for (f, v) in fields {
        args.push(f);
        args.push(v);
    }
    args
}

/// Checks that `mine` reads back as Redis's copy of `key` does: entries
/// both ways, the XINFO STREAM counters and the XINFO GROUPS ones.
fn assert_same_view(r: &mut Redis, key: &str, mine: &Stream) {
    let all = r.call(&[b"XRANGE", key.as_bytes(), b"-", b"+"]);
    let theirs: Vec<(String, Vec<Vec<u8>>)> = all
        .items()
        .iter()
        .map(|e| {
            let kv = e.items()[1].items().iter().map(View::raw).collect();
            (e.items()[0].txt(), kv)
        })
        .collect();
    let ours: Vec<(String, Vec<Vec<u8>>)> = mine
        .range(StreamId::MIN, StreamId::MAX, false)
        .map(|e| {
            let kv = e
                .fields()
                .flat_map(|(f, v)| [f.to_vec(), v.to_vec()])
                .collect();
            (e.id.to_string(), kv)
        })
        .collect();
    assert_eq!(ours, theirs);
    let info = r.call(&[b"XINFO", b"STREAM", key.as_bytes()]);
    assert_eq!(info.field("length").num() as u64, mine.len());
    assert_eq!(
        info.field("radix-tree-keys").num() as usize,
        mine.node_count()
    );
    assert_eq!(
        info.field("radix-tree-nodes").num() as u64,
        mine.radix_tree_nodes()
    );
    assert_eq!(
        info.field("last-generated-id").txt(),
        mine.last_id().to_string()
    );
    assert_eq!(
        info.field("max-deleted-entry-id").txt(),
        mine.max_deleted_id().to_string()
    );
    assert_eq!(
        info.field("entries-added").num() as u64,
        mine.entries_added()
    );
    assert_eq!(
        info.field("recorded-first-entry-id").txt(),
        mine.first_id().to_string()
    );
    let groups = r.call(&[b"XINFO", b"GROUPS", key.as_bytes()]);
    assert_eq!(groups.items().len(), mine.group_count());
    for (g, (name, group)) in groups.items().iter().zip(mine.groups()) {
        assert_eq!(g.field("name").raw(), name);
        assert_eq!(g.field("consumers").num() as usize, group.consumer_count());
        assert_eq!(g.field("pending").num() as usize, group.pending_len());
        assert_eq!(
            g.field("last-delivered-id").txt(),
            group.last_id.to_string()
        );
        let read = match g.field("entries-read") {
            Reply::Bulk(None) => None,
            n => Some(n.num() as u64),
        };
        assert_eq!(
            read,
            group.entries_read,
            "entries-read of {}",
            String::from_utf8_lossy(name)
        );
        let lag = match g.field("lag") {
            Reply::Bulk(None) => None,
            n => Some(n.num()),
        };
        assert_eq!(
            lag,
            mine.group_lag(group),
            "lag of {}",
            String::from_utf8_lossy(name)
        );
    }
}

#[test]
fn redis_dumps_load_and_redump_byte_for_byte() {
    let Some(mut r) = start(module_path!()) else {
        return;
    };
    r.cmd_str("CONFIG SET stream-node-max-entries 5");
    for i in 1..=30u64 {
        let fields = fields_of(i);
        let idarg = if i % 7 == 0 {
            format!("{}-*", i / 2)
        } else {
            format!("{}-{}", i / 2, i)
        };
        let reply = r.call(&xadd_args(b"s", idarg.as_bytes(), &fields));
        assert!(matches!(reply, Reply::Bulk(Some(_))), "{reply:?}");
    }
    let ids: Vec<String> = r
        .cmd_str("XRANGE s - +")
        .items()
        .iter()
        .map(|e| e.items()[0].txt())
        .collect();
    r.call(&[
        b"XDEL",
        b"s",
        ids[3].as_bytes(),
        ids[9].as_bytes(),
        ids[29].as_bytes(),
    ]);
    r.cmd_str("XGROUP CREATE s g1 0");
    r.cmd_str("XGROUP CREATE s g2 $");
    r.cmd_str("XGROUP CREATE s g3 0 ENTRIESREAD 2");
    r.cmd_str("XREADGROUP GROUP g1 alice COUNT 4 STREAMS s >");
    r.cmd_str("XREADGROUP GROUP g1 bob COUNT 3 STREAMS s >");
    r.call(&[b"XACK", b"s", b"g1", ids[1].as_bytes()]);
    r.cmd_str("XGROUP CREATECONSUMER s g1 carol");
    r.cmd_str("XREADGROUP GROUP g3 dave NOACK COUNT 2 STREAMS s >");
    assert_eq!(r.cmd_str("XTRIM s MAXLEN = 24").num(), 3);
    let payload = r.dump("s");
    let mine = restore_stream_payload(&payload).expect("Redis's payload loads");
    assert_same_view(&mut r, "s", &mine);
    assert_eq!(dump_stream_payload(&mine, &plain()), payload);
    // An empty stream with a group, and one emptied by XDEL.
    r.cmd_str("XGROUP CREATE e g 0 MKSTREAM");
    r.cmd_str("XADD d 1-1 a b");
    r.cmd_str("XDEL d 1-1");
    for key in ["e", "d"] {
        let payload = r.dump(key);
        let mine = restore_stream_payload(&payload).expect("loads");
        assert_same_view(&mut r, key, &mine);
        assert_eq!(dump_stream_payload(&mine, &plain()), payload, "{key}");
    }
}

#[test]
fn vireo_payloads_restore_into_redis() {
    let Some(mut r) = start(module_path!()) else {
        return;
    };
    let limits = NodeLimits {
        max_bytes: 300,
        max_entries: 4,
    };
    let mut s = Stream::new();
    for i in 1..=40u64 {
        let fields = fields_of(i);
        let pairs = fields.iter().map(|(f, v)| (&f[..], &v[..]));
        s.add(AddId::Exact(id(1_000 + i / 3, i)), pairs, limits, 0)
            .unwrap();
    }
    s.delete(&[id(1_001, 3), id(1_005, 16), id(1_013, 40)]);
    s.create_group(b"g1", StreamId::MIN, None).unwrap();
    s.create_group(b"g2", id(1_004, 13), Some(7)).unwrap();
    s.read_group_new(b"g1", b"alice", 5, false, 1_700_000_000_000, |_| {});
    s.read_group_new(b"g1", b"bob", 5, false, 1_700_000_000_001, |_| {});
    s.read_group_new(b"g2", b"bob", 3, false, 1_700_000_000_002, |_| {});
    s.group_mut(b"g1").unwrap().ack(id(1_002, 7));
    let payload = dump_stream_payload(&s, &plain());
    assert_eq!(
        r.call(&[b"RESTORE", b"x", b"0", &payload]),
        Reply::Status("OK".into())
    );
    assert_same_view(&mut r, "x", &s);
    assert_eq!(r.dump("x"), payload);
    // XINFO STREAM FULL shows the pending entries and consumers as stored.
    let full = r.cmd_str("XINFO STREAM x FULL COUNT 0");
    let g1 = &full.field("groups").items()[0];
    let group = s.group(b"g1").unwrap();
    let pending: Vec<(String, Vec<u8>, i64, i64)> = g1
        .field("pending")
        .items()
        .iter()
        .map(|p| {
            let p = p.items();
            (p[0].txt(), p[1].raw(), p[2].num(), p[3].num())
        })
        .collect();
    let ours: Vec<(String, Vec<u8>, i64, i64)> = group
        .pending(StreamId::MIN, StreamId::MAX)
        .map(|(pid, n)| {
            (
                pid.to_string(),
                n.consumer().to_vec(),
                n.delivery_time,
                n.delivery_count as i64,
            )
        })
        .collect();
    assert_eq!(pending, ours);
    let consumers: Vec<(Vec<u8>, i64, i64)> = g1
        .field("consumers")
        .items()
        .iter()
        .map(|c| {
            (
                c.field("name").raw(),
                c.field("seen-time").num(),
                c.field("pel-count").num(),
            )
        })
        .collect();
    let ours: Vec<(Vec<u8>, i64, i64)> = group
        .consumers()
        .map(|(name, c)| (name.to_vec(), c.seen_time, c.pending_len() as i64))
        .collect();
    assert_eq!(consumers, ours);
}

/// Runs the same random XADD/XDEL/XTRIM/XSETID sequence on both sides and
/// compares replies, and every few steps the DUMP bytes and counters.
#[test]
fn random_operations_match_redis() {
    let Some(mut r) = start(module_path!()) else {
        return;
    };
    for seed in 0..6u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let limits = NodeLimits {
            max_bytes: [0, 120, 400, 4096][rng.usize(0..4)],
            max_entries: [0, 1, 3, 10, 100][rng.usize(0..5)],
        };
        r.call(&[
            b"CONFIG",
            b"SET",
            b"stream-node-max-bytes",
            limits.max_bytes.to_string().as_bytes(),
            b"stream-node-max-entries",
            limits.max_entries.to_string().as_bytes(),
        ]);
        r.cmd_str("DEL s");
        let mut s = Stream::new();
        let mut ms = 1u64;
        for step in 0..300 {
            random_step(&mut r, &mut s, &mut rng, limits, &mut ms);
            if step % 25 == 24 {
                assert_eq!(
                    dump_stream_payload(&s, &plain()),
                    r.dump("s"),
                    "seed {seed} step {step}"
                );
                assert_same_view(&mut r, "s", &s);
            }
        }
    }
}

/// One random stream operation on both sides, replies compared.
fn random_step(
    r: &mut Redis,
    s: &mut Stream,
    rng: &mut fastrand::Rng,
    limits: NodeLimits,
    ms: &mut u64,
) {
    let known = |s: &Stream, rng: &mut fastrand::Rng| -> StreamId {
        let all: Vec<StreamId> = s
            .range(StreamId::MIN, StreamId::MAX, false)
            .map(|e| e.id)
            .collect();
        if all.is_empty() || rng.u8(0..5) == 0 {
            id(rng.u64(0..*ms + 2), rng.u64(0..3))
        } else {
            all[rng.usize(0..all.len())]
        }
    };
    match rng.u8(0..10) {
        0..=5 => {
            *ms += rng.u64(0..3);
            let (arg, add) = match rng.u8(0..6) {
                0 => (format!("{ms}-*"), AddId::AutoSeq(*ms)),
                1 => (format!("{}", *ms - 1), AddId::Exact(id(*ms - 1, 0))),
                _ => {
                    let seq = rng.u64(0..4);
                    (format!("{ms}-{seq}"), AddId::Exact(id(*ms, seq)))
                }
            };
            let n = rng.usize(1..4);
            let fields: Vec<(Vec<u8>, Vec<u8>)> = (0..n)
                .map(|k| {
                    let name = if rng.bool() {
                        format!("f{k}")
                    } else {
                        format!("g{}", rng.u8(0..3))
                    };
                    let value = match rng.u8(0..3) {
                        0 => rng.i64(-5000..5000).to_string().into_bytes(),
                        1 => vec![b'v'; rng.usize(0..200)],
                        _ => Vec::new(),
                    };
                    (name.into_bytes(), value)
                })
                .collect();
            let theirs = r.call(&xadd_args(b"s", arg.as_bytes(), &fields));
            let ours = s.add(add, fields.iter().map(|(f, v)| (&f[..], &v[..])), limits, 0);
            match (theirs, ours) {
                (Reply::Bulk(Some(t)), Ok(o)) => assert_eq!(t, o.to_string().into_bytes()),
                (Reply::Error(t), Err(e)) => assert_eq!(t, e.message()),
                (t, o) => panic!("XADD {arg}: redis {t:?}, vireo {o:?}"),
            }
        }
        6 => {
            let ids: Vec<StreamId> = (0..rng.usize(1..4)).map(|_| known(s, rng)).collect();
            let texts: Vec<String> = ids.iter().map(StreamId::to_string).collect();
            let mut args: Vec<&[u8]> = vec![b"XDEL", b"s"];
            args.extend(texts.iter().map(|t| t.as_bytes()));
            assert_eq!(r.call(&args).num() as u64, s.delete(&ids));
        }
        7 | 8 => {
            let approx = rng.bool();
            let (strategy, text) = if rng.bool() {
                let n = rng.u64(0..s.len() + 3);
                (
                    TrimStrategy::MaxLen(n),
                    format!("MAXLEN {} {n}", if approx { "~" } else { "=" }),
                )
            } else {
                let at = known(s, rng);
                (
                    TrimStrategy::MinId(at),
                    format!("MINID {} {at}", if approx { "~" } else { "=" }),
                )
            };
            let limit = if approx && rng.bool() {
                rng.u64(0..30)
            } else {
                0
            };
            let line = if limit > 0 {
                format!("XTRIM s {text} LIMIT {limit}")
            } else {
                format!("XTRIM s {text}")
            };
            let theirs = r.cmd_str(&line);
            let limit = match (approx, limit) {
                (true, 0) => limits.default_trim_limit(),
                (_, l) => l,
            };
            let ours = s.trim(&Trim {
                strategy,
                approx,
                limit,
            });
            assert_eq!(theirs.num() as u64, ours, "{line}");
        }
        _ => {
            if r.cmd_str("EXISTS s").num() == 0 {
                return;
            }
            *ms += rng.u64(0..2);
            let last = id(*ms, rng.u64(0..3));
            let added = s.entries_added() + rng.u64(0..3);
            let line = format!("XSETID s {last} ENTRIESADDED {added}");
            let theirs = r.cmd_str(&line);
            let ours = s.set_id(&SetId::new(last, Some(added), None).unwrap());
            match (theirs, ours) {
                (Reply::Status(_), Ok(())) => {}
                (Reply::Error(t), Err(e)) => assert_eq!(t, e.message()),
                (t, o) => panic!("{line}: redis {t:?}, vireo {o:?}"),
            }
        }
    }
}

/// The same random consumer-group operations on both sides: reads (new
/// and history), acks, claims, autoclaims and SETID must deliver the same
/// IDs and leave the same counters, lag and pending entries.
#[test]
fn random_group_operations_match_redis() {
    let Some(mut r) = start(module_path!()) else {
        return;
    };
    let limits = NodeLimits::default();
    for seed in 0..4u64 {
        let mut rng = fastrand::Rng::with_seed(100 + seed);
        r.cmd_str("DEL s");
        let mut s = Stream::new();
        for i in 1..=60u64 {
            r.call(&[b"XADD", b"s", format!("{i}-1").as_bytes(), b"f", b"v"]);
            s.add(AddId::Exact(id(i, 1)), [(&b"f"[..], &b"v"[..])], limits, 0)
                .unwrap();
        }
        r.cmd_str("XGROUP CREATE s g 0");
        s.create_group(b"g", StreamId::MIN, None).unwrap();
        let mut next_ms = 61;
        for step in 0..200 {
            group_step(&mut r, &mut s, &mut rng, &mut next_ms);
            if step % 10 == 9 {
                assert_same_view(&mut r, "s", &s);
                let theirs = r.cmd_str("XPENDING s g - + 1000");
                let ours: Vec<(String, Vec<u8>, i64)> = s
                    .group(b"g")
                    .unwrap()
                    .pending(StreamId::MIN, StreamId::MAX)
                    .map(|(pid, n)| {
                        (
                            pid.to_string(),
                            n.consumer().to_vec(),
                            n.delivery_count as i64,
                        )
                    })
                    .collect();
                let theirs: Vec<(String, Vec<u8>, i64)> = theirs
                    .items()
                    .iter()
                    .map(|p| (p.items()[0].txt(), p.items()[1].raw(), p.items()[3].num()))
                    .collect();
                assert_eq!(ours, theirs, "seed {seed} step {step}");
            }
        }
    }
}

/// IDs in a reply array of entries (or of bare IDs, for JUSTID).
fn reply_ids(items: &[Reply]) -> Vec<String> {
    items
        .iter()
        .map(|e| match e {
            Reply::Array(Some(kv)) => kv[0].txt(),
            other => other.txt(),
        })
        .collect()
}

fn group_step(r: &mut Redis, s: &mut Stream, rng: &mut fastrand::Rng, next_ms: &mut u64) {
    let consumer = ["alice", "bob", "carol"][rng.usize(0..3)];
    let now = now_ms();
    let some_id = |rng: &mut fastrand::Rng| id(rng.u64(0..*next_ms + 2), rng.u64(0..3));
    match rng.u8(0..9) {
        0 | 1 => {
            let count = rng.usize(0..6);
            let noack = rng.u8(0..4) == 0;
            let line = format!(
                "XREADGROUP GROUP g {consumer} COUNT {count}{} STREAMS s >",
                if noack { " NOACK" } else { "" }
            );
            let theirs = r.cmd_str(&line);
            let theirs = match &theirs {
                Reply::Array(None) => Vec::new(),
                t => reply_ids(t.items()[0].items()[1].items()),
            };
            let mut ours = Vec::new();
            if s.has_unread(s.group(b"g").unwrap()) {
                s.read_group_new(b"g", consumer.as_bytes(), count, noack, now, |e| {
                    ours.push(e.id.to_string())
                });
            }
            assert_eq!(ours, theirs, "{line}");
        }
        2 => {
            let after = some_id(rng);
            let count = rng.usize(0..4);
            let line = format!("XREADGROUP GROUP g {consumer} COUNT {count} STREAMS s {after}");
            let theirs = r.cmd_str(&line);
            let theirs = reply_ids(theirs.items()[0].items()[1].items());
            let mut ours = Vec::new();
            s.read_group_history(b"g", consumer.as_bytes(), after, count, now, |i, _| {
                ours.push(i.to_string())
            });
            assert_eq!(ours, theirs, "{line}");
        }
        3 => {
            let ids: Vec<StreamId> = (0..rng.usize(1..4)).map(|_| some_id(rng)).collect();
            let line = format!(
                "XACK s g {}",
                ids.iter()
                    .map(StreamId::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            let g = s.group_mut(b"g").unwrap();
            let ours = ids.iter().filter(|&&i| g.ack(i)).count();
            assert_eq!(r.cmd_str(&line).num() as usize, ours, "{line}");
        }
        4 => {
            let ids: Vec<StreamId> = (0..rng.usize(1..4)).map(|_| some_id(rng)).collect();
            let force = rng.bool();
            let retry = rng.bool().then(|| rng.u64(0..9));
            let line = format!(
                "XCLAIM s g {consumer} 0 {}{}{} JUSTID",
                ids.iter()
                    .map(StreamId::to_string)
                    .collect::<Vec<_>>()
                    .join(" "),
                if force { " FORCE" } else { "" },
                retry.map_or(String::new(), |n| format!(" RETRYCOUNT {n}")),
            );
            let theirs = reply_ids(r.cmd_str(&line).items());
            let params = ClaimParams {
                force,
                retry_count: retry,
                justid: true,
                ..ClaimParams::default()
            };
            let report = s
                .claim(b"g", consumer.as_bytes(), &ids, &params, now)
                .unwrap();
            let ours: Vec<String> = report.claimed.iter().map(StreamId::to_string).collect();
            assert_eq!(ours, theirs, "{line}");
        }
        5 => {
            let start = some_id(rng);
            let count = rng.u64(1..5);
            let justid = rng.bool();
            let line = format!(
                "XAUTOCLAIM s g {consumer} 0 {start} COUNT {count}{}",
                if justid { " JUSTID" } else { "" }
            );
            let theirs = r.cmd_str(&line);
            let params = AutoclaimParams {
                start,
                count,
                min_idle: 0,
                justid,
            };
            let report = s
                .autoclaim(b"g", consumer.as_bytes(), &params, now)
                .unwrap();
            let t = theirs.items();
            assert_eq!(t[0].txt(), report.next.to_string(), "{line}");
            let ours: Vec<String> = report.claimed.iter().map(StreamId::to_string).collect();
            assert_eq!(reply_ids(t[1].items()), ours, "{line}");
            let deleted: Vec<String> = report.deleted.iter().map(|(i, _)| i.to_string()).collect();
            assert_eq!(reply_ids(t[2].items()), deleted, "{line}");
        }
        6 => {
            let at = some_id(rng);
            let read = rng.bool().then(|| rng.u64(0..70));
            let line = format!(
                "XGROUP SETID s g {at}{}",
                read.map_or(String::new(), |n| format!(" ENTRIESREAD {n}"))
            );
            assert_eq!(r.cmd_str(&line), Reply::Status("OK".into()));
            let g = s.group_mut(b"g").unwrap();
            g.last_id = at;
            g.entries_read = read;
        }
        7 => {
            let victim = some_id(rng);
            let line = format!("XDEL s {victim}");
            assert_eq!(r.cmd_str(&line).num() as u64, s.delete(&[victim]), "{line}");
        }
        _ => {
            let line = format!("XADD s {}-0 f v", *next_ms);
            r.cmd_str(&line);
            s.add(
                AddId::Exact(id(*next_ms, 0)),
                [(&b"f"[..], &b"v"[..])],
                NodeLimits::default(),
                0,
            )
            .unwrap();
            *next_ms += 1;
        }
    }
}
