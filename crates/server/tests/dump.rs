//! DUMP / RESTORE and the RDB codec against the real binaries: round trips
//! inside Vireo, payloads moved between Vireo and redis-server 7.0.15 in
//! both directions, RDB files written by redis-server read with Vireo's
//! loader, files written by Vireo's encoder loaded by redis-server, and
//! RESTORE's errors compared with Redis's.

mod common;

use std::path::PathBuf;

use common::diff::{self, start_redis, start_redis_with};
use redis::{Connection, Value as RV};
use vireo_store::hash::{Hash, HashLimits};
use vireo_store::list::{End, List};
use vireo_store::rdb::{self, EncodeOptions, Item, Loader};
use vireo_store::set::Set;
use vireo_store::zset::{self, ZSet};
use vireo_store::{Entry, StrValue, Value};

/// A value's contents in comparable form.
#[derive(Clone, Debug, PartialEq)]
enum Contents {
    Str(Vec<u8>),
    List(Vec<Vec<u8>>),
    /// Sorted by field.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    /// Sorted.
    Set(Vec<Vec<u8>>),
    /// In (score, member) order.
    ZSet(Vec<(Vec<u8>, f64)>),
}

fn b(s: impl AsRef<[u8]>) -> Vec<u8> {
    s.as_ref().to_vec()
}

/// Every type in its small and large encodings, with awkward contents.
fn dataset() -> Vec<(String, Contents)> {
    let mut rng = fastrand::Rng::with_seed(5);
    let binary: Vec<u8> = (0..300).map(|_| rng.u8(..)).collect();
    let mut d = vec![
        ("s:int".into(), Contents::Str(b("12345"))),
        ("s:bigint".into(), Contents::Str(b("-9223372036854775808"))),
        ("s:short".into(), Contents::Str(b("hello"))),
        ("s:empty".into(), Contents::Str(b(""))),
        ("s:lead0".into(), Contents::Str(b("0042"))),
        ("s:long".into(), Contents::Str(b("x".repeat(1000)))),
        ("s:bin".into(), Contents::Str(binary)),
        (
            "l:small".into(),
            Contents::List(vec![b("a"), b("1"), b(""), b("-70000"), b("x".repeat(60))]),
        ),
        (
            "l:big".into(),
            Contents::List((0..3000).map(|i| b(format!("item-{i}"))).collect()),
        ),
        (
            "l:bigelem".into(),
            Contents::List(vec![b("y".repeat(10_000)), b("z")]),
        ),
    ];
    let hash = |n: usize, vlen: usize| {
        let mut v: Vec<_> = (0..n)
            .map(|i| {
                (
                    b(format!("field{i}")),
                    b(format!("{i}{}", "v".repeat(vlen))),
                )
            })
            .collect();
        v.sort();
        Contents::Hash(v)
    };
    d.push(("h:small".into(), hash(5, 3)));
    d.push(("h:big".into(), hash(600, 3)));
    d.push(("h:long".into(), hash(2, 100)));
    let set = |it: Vec<Vec<u8>>| {
        let mut v = it;
        v.sort();
        Contents::Set(v)
    };
    d.push((
        "st:int".into(),
        set((1..=10).map(|i| b((i * 1000).to_string())).collect()),
    ));
    d.push((
        "st:wide".into(),
        set(vec![b("1"), b("5000000000"), b("-3")]),
    ));
    d.push(("st:str".into(), set(vec![b("a"), b("b"), b("7")])));
    d.push((
        "st:manyint".into(),
        set((0..600).map(|i| b(i.to_string())).collect()),
    ));
    d.push((
        "st:big".into(),
        set((0..300).map(|i| b(format!("m{i}"))).collect()),
    ));
    let zs = |n: usize, mlen: usize| {
        let mut v: Vec<(Vec<u8>, f64)> = (0..n)
            .map(|i| (b(format!("{i:0mlen$}")), i as f64 * 0.25 - 7.0))
            .collect();
        v.push((b("pinf"), f64::INFINITY));
        v.push((b("ninf"), f64::NEG_INFINITY));
        v.push((b("frac"), 0.1));
        v.push((b("big"), 1e300));
        v.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then(a.0.cmp(&b.0)));
        Contents::ZSet(v)
    };
    d.push(("z:small".into(), zs(5, 2)));
    d.push(("z:big".into(), zs(300, 4)));
    d.push(("z:long".into(), zs(2, 100)));
    d
}

/// Creates `key` with `c` through commands.
fn create(con: &mut Connection, key: &str, c: &Contents) {
    let mut p = redis::pipe();
    p.cmd("DEL").arg(key).ignore();
    match c {
        Contents::Str(v) => {
            p.cmd("SET").arg(key).arg(v).ignore();
        }
        Contents::List(items) => {
            for chunk in items.chunks(500) {
                p.cmd("RPUSH").arg(key).arg(chunk).ignore();
            }
        }
        Contents::Hash(pairs) => {
            for (f, v) in pairs {
                p.cmd("HSET").arg(key).arg(f).arg(v).ignore();
            }
        }
        Contents::Set(ms) => {
            p.cmd("SADD").arg(key).arg(ms).ignore();
        }
        Contents::ZSet(es) => {
            for (m, s) in es {
                p.cmd("ZADD").arg(key).arg(score_text(*s)).arg(m).ignore();
            }
        }
    }
    p.query::<()>(con).unwrap();
}

fn score_text(s: f64) -> String {
    vireo_resp::number::format_double(s)
}

/// Reads `key`'s contents back.
fn read(con: &mut Connection, key: &str) -> Option<Contents> {
    let ty: String = redis::cmd("TYPE").arg(key).query(con).unwrap();
    Some(match ty.as_str() {
        "none" => return None,
        "string" => Contents::Str(redis::cmd("GET").arg(key).query(con).unwrap()),
        "list" => Contents::List(
            redis::cmd("LRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .query(con)
                .unwrap(),
        ),
        "hash" => {
            let mut v: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL").arg(key).query(con).unwrap();
            v.sort();
            Contents::Hash(v)
        }
        "set" => {
            let mut v: Vec<Vec<u8>> = redis::cmd("SMEMBERS").arg(key).query(con).unwrap();
            v.sort();
            Contents::Set(v)
        }
        "zset" => {
            let v: Vec<(Vec<u8>, String)> = redis::cmd("ZRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query(con)
                .unwrap();
            Contents::ZSet(
                v.into_iter()
                    .map(|(m, s)| (m, s.parse().unwrap()))
                    .collect(),
            )
        }
        other => panic!("unexpected type {other}"),
    })
}

fn encoding(con: &mut Connection, key: &str) -> String {
    redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(key)
        .query(con)
        .unwrap()
}

/// The contents of a decoded value.
fn contents(v: &Value) -> Contents {
    match v {
        Value::Str(s) => Contents::Str(s.to_vec()),
        Value::List(l) => Contents::List(l.iter().map(|e| e.to_vec()).collect()),
        Value::Hash(h) => {
            let mut v: Vec<_> = h.iter().map(|(f, v)| (b(f), b(v))).collect();
            v.sort();
            Contents::Hash(v)
        }
        Value::Set(s) => {
            let mut v: Vec<_> = s.iter().map(|m| m.to_vec()).collect();
            v.sort();
            Contents::Set(v)
        }
        Value::ZSet(z) => Contents::ZSet(z.iter().map(|(m, s)| (b(m), s)).collect()),
        Value::Stream(_) => panic!("streams are not generated here (see tests/stream.rs)"),
        Value::Module(_) => panic!("SQL databases are not generated here (see tests/sql.rs)"),
    }
}

/// Builds a value with Redis's default encoding thresholds.
fn value(c: &Contents) -> Value {
    match c {
        Contents::Str(v) => Value::Str(StrValue::from_bytes(v)),
        Contents::List(items) => {
            let mut l = List::new(-2);
            for it in items {
                l.push(End::Right, it);
            }
            Value::List(l)
        }
        Contents::Hash(pairs) => {
            let mut h = Hash::new();
            for (f, v) in pairs {
                h.set(f, v, HashLimits::default());
            }
            Value::Hash(h)
        }
        Contents::Set(ms) => {
            let mut s = Set::new();
            for m in ms {
                s.insert(m, 512);
            }
            Value::Set(s)
        }
        Contents::ZSet(es) => {
            let mut z = ZSet::default();
            for (m, s) in es {
                z.insert(m, *s, zset::Limits::default());
            }
            Value::ZSet(z)
        }
    }
}

fn dump(con: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(con).unwrap()
}

fn restore(
    con: &mut Connection,
    key: &str,
    ttl: i64,
    payload: &[u8],
    opts: &[&str],
) -> redis::RedisResult<RV> {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(ttl)
        .arg(payload)
        .arg(opts)
        .query(con)
}

#[test]
fn dump_restore_round_trips_every_type_inside_vireo() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    for compression in ["yes", "no"] {
        common::q(&mut con, &["CONFIG", "SET", "rdbcompression", compression]).unwrap();
        for (key, c) in dataset() {
            create(&mut con, &key, &c);
            let payload = dump(&mut con, &key);
            let copy = format!("{key}:copy");
            restore(&mut con, &copy, 0, &payload, &["REPLACE"]).unwrap();
            assert_eq!(read(&mut con, &copy).as_ref(), Some(&c), "{key}");
            assert_eq!(encoding(&mut con, &copy), encoding(&mut con, &key), "{key}");
        }
    }
    let nil: Option<Vec<u8>> = redis::cmd("DUMP").arg("missing").query(&mut con).unwrap();
    assert_eq!(nil, None);
}

#[test]
fn payloads_move_between_redis_and_vireo_both_ways() {
    let srv = common::Server::start(&[]);
    let redis_srv = start_redis();
    let mut v = srv.conn();
    let mut r = redis::Client::open(format!("redis://127.0.0.1:{}/", redis_srv.port))
        .unwrap()
        .get_connection()
        .unwrap();
    for (key, c) in dataset() {
        create(&mut v, &key, &c);
        create(&mut r, &key, &c);
        // Redis → Vireo.
        let from_redis = dump(&mut r, &key);
        restore(&mut v, "in", 0, &from_redis, &["REPLACE"]).unwrap();
        assert_eq!(read(&mut v, "in").as_ref(), Some(&c), "{key} from redis");
        assert_eq!(
            encoding(&mut v, "in"),
            encoding(&mut r, &key),
            "{key} from redis"
        );
        // Vireo → Redis.
        let from_vireo = dump(&mut v, &key);
        restore(&mut r, "in", 0, &from_vireo, &["REPLACE"]).unwrap();
        assert_eq!(read(&mut r, "in").as_ref(), Some(&c), "{key} from vireo");
        assert_eq!(
            encoding(&mut r, "in"),
            encoding(&mut v, &key),
            "{key} from vireo"
        );
    }
}

#[test]
fn restore_options_and_errors_match_redis() {
    let srv = common::Server::start(&[]);
    let redis_srv = start_redis();
    let mut v = diff::Raw::connect(srv.port);
    let mut r = diff::Raw::connect(redis_srv.port);
    let mut vc = srv.conn();
    create(&mut vc, "src", &Contents::List(vec![b("a"), b("b")]));
    let good = dump(&mut vc, "src");
    let mut bad_crc = good.clone();
    let n = bad_crc.len();
    bad_crc[n - 1] ^= 1;
    let mut v11 = good[..n - 10].to_vec();
    v11.extend_from_slice(&11u16.to_le_bytes());
    let crc = rdb::crc64(0, &v11);
    v11.extend_from_slice(&crc.to_le_bytes());
    let mut garbage = vec![rdb::RDB_VERSION as u8 + 90, 1, 2];
    garbage.extend_from_slice(&rdb::RDB_VERSION.to_le_bytes());
    let crc = rdb::crc64(0, &garbage);
    garbage.extend_from_slice(&crc.to_le_bytes());
    let s = |x: &str| b(x);
    let cases: Vec<Vec<Vec<u8>>> = vec![
        vec![s("RESTORE"), s("k"), s("0"), good.clone()],
        vec![s("RESTORE"), s("k"), s("0"), good.clone()],
        vec![s("RESTORE"), s("k"), s("0"), good.clone(), s("REPLACE")],
        vec![s("RESTORE"), s("k2"), s("-1"), good.clone()],
        vec![s("RESTORE"), s("k2"), s("abc"), good.clone()],
        vec![s("RESTORE"), s("k2"), s("0"), bad_crc],
        vec![s("RESTORE"), s("k2"), s("0"), v11],
        vec![s("RESTORE"), s("k2"), s("0"), garbage],
        vec![s("RESTORE"), s("k2"), s("0"), s("short")],
        vec![
            s("RESTORE"),
            s("k2"),
            s("0"),
            good.clone(),
            s("IDLETIME"),
            s("-1"),
        ],
        vec![
            s("RESTORE"),
            s("k2"),
            s("0"),
            good.clone(),
            s("IDLETIME"),
            s("x"),
        ],
        vec![
            s("RESTORE"),
            s("k2"),
            s("0"),
            good.clone(),
            s("FREQ"),
            s("256"),
        ],
        vec![
            s("RESTORE"),
            s("k2"),
            s("0"),
            good.clone(),
            s("FREQ"),
            s("-1"),
        ],
        vec![
            s("RESTORE"),
            s("k2"),
            s("0"),
            good.clone(),
            s("FREQ"),
            s("1"),
            s("IDLETIME"),
            s("1"),
        ],
        vec![s("RESTORE"), s("k2"), s("0"), good.clone(), s("IDLETIME")],
        vec![s("RESTORE"), s("k2"), s("0"), good.clone(), s("BOGUS")],
        vec![s("RESTORE"), s("k2")],
        vec![
            s("RESTORE"),
            s("k2"),
            s("100000"),
            good.clone(),
            s("IDLETIME"),
            s("1000"),
        ],
        vec![s("OBJECT"), s("IDLETIME"), s("k2")],
        vec![s("EXISTS"), s("k2")],
        // A TTL in the past with REPLACE deletes the old key.
        vec![
            s("RESTORE"),
            s("k2"),
            s("1"),
            good.clone(),
            s("REPLACE"),
            s("ABSTTL"),
        ],
        vec![s("EXISTS"), s("k2")],
        vec![s("RESTORE"), s("k3"), s("1"), good.clone(), s("ABSTTL")],
        vec![s("EXISTS"), s("k3")],
        vec![
            s("RESTORE"),
            s("k4"),
            s("4102444800000"),
            good.clone(),
            s("ABSTTL"),
        ],
        vec![s("PEXPIRETIME"), s("k4")],
        vec![s("LRANGE"), s("k4"), s("0"), s("-1")],
        vec![s("DUMP"), s("nokey")],
        vec![s("DUMP")],
        vec![s("SET"), s("str"), s("val")],
        vec![s("DUMP"), s("str")],
        vec![
            s("CONFIG"),
            s("SET"),
            s("maxmemory-policy"),
            s("allkeys-lfu"),
        ],
        vec![
            s("RESTORE"),
            s("k5"),
            s("0"),
            good.clone(),
            s("FREQ"),
            s("100"),
        ],
        vec![s("OBJECT"), s("FREQ"), s("k5")],
        vec![
            s("CONFIG"),
            s("SET"),
            s("maxmemory-policy"),
            s("noeviction"),
        ],
    ];
    for cmd in &cases {
        let (rv, vv) = (r.send(cmd), v.send(cmd));
        assert_eq!(
            String::from_utf8_lossy(&vv),
            String::from_utf8_lossy(&rv),
            "{:?}",
            cmd.iter()
                .take(3)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
        );
    }
}

/// A fresh directory for RDB files.
fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vireo-dump-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const DBS: [usize; 3] = [0, 3, 9];
const FAR: i64 = 4_102_444_800_000;

#[test]
fn loader_reads_files_redis_writes() {
    let dir = temp_dir("from-redis");
    let d = dir.to_str().unwrap();
    for compression in ["yes", "no"] {
        let redis_srv = start_redis_with(&[
            "--dir",
            d,
            "--dbfilename",
            "x.rdb",
            "--rdbcompression",
            compression,
        ]);
        let mut r = redis::Client::open(format!("redis://127.0.0.1:{}/", redis_srv.port))
            .unwrap()
            .get_connection()
            .unwrap();
        let data = dataset();
        for db in DBS {
            redis::cmd("SELECT").arg(db).query::<()>(&mut r).unwrap();
            for (i, (key, c)) in data.iter().enumerate() {
                create(&mut r, key, c);
                if i % 3 == 0 {
                    redis::cmd("PEXPIREAT")
                        .arg(key)
                        .arg(FAR + i as i64)
                        .query::<()>(&mut r)
                        .unwrap();
                }
            }
        }
        redis::cmd("SAVE").query::<()>(&mut r).unwrap();
        let file = std::fs::File::open(dir.join("x.rdb")).unwrap();
        let mut loader = Loader::new(std::io::BufReader::new(file)).unwrap();
        assert_eq!(loader.version(), 10);
        let mut seen = 0;
        let mut aux = Vec::new();
        while let Some(item) = loader.next().unwrap() {
            match item {
                Item::Entry { db, key, entry } => {
                    let key = String::from_utf8(key).unwrap();
                    redis::cmd("SELECT").arg(db).query::<()>(&mut r).unwrap();
                    let value = entry.value().to_value();
                    assert_eq!(Some(contents(&value)), read(&mut r, &key), "{key}");
                    if !matches!(value, Value::Str(_)) {
                        assert_eq!(value.encoding_name(), encoding(&mut r, &key), "{key}");
                    }
                    let at: i64 = redis::cmd("PEXPIRETIME").arg(&key).query(&mut r).unwrap();
                    assert_eq!(entry.expire_at().map_or(-1, |t| t as i64), at, "{key}");
                    seen += 1;
                }
                Item::Aux { key, .. } => aux.push(String::from_utf8(key).unwrap()),
                _ => {}
            }
        }
        assert_eq!(seen, data.len() * DBS.len());
        assert!(aux.contains(&"redis-ver".to_string()), "{aux:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redis_loads_files_the_encoder_writes() {
    let dir = temp_dir("to-redis");
    let d = dir.to_str().unwrap();
    let data = dataset();
    for compress in [true, false] {
        let mut out = Vec::new();
        rdb::write_header(&mut out);
        rdb::write_aux(&mut out, b"redis-ver", b"7.0.15");
        rdb::write_aux(&mut out, b"redis-bits", b"64");
        let opts = EncodeOptions {
            compress,
            ..Default::default()
        };
        for db in DBS {
            rdb::write_select_db(&mut out, db);
            rdb::write_resize_db(&mut out, data.len() as u64, 0);
            for (i, (key, c)) in data.iter().enumerate() {
                let at = (i % 3 == 0).then_some((FAR + i as i64) as u64);
                let entry = Entry::new(value(c)).with_expire(at);
                rdb::write_entry(&mut out, key.as_bytes(), &entry, 0, &opts);
            }
        }
        rdb::write_eof(&mut out);
        let crc = rdb::crc64(0, &out);
        out.extend_from_slice(&crc.to_le_bytes());
        std::fs::write(dir.join("v.rdb"), &out).unwrap();
        let redis_srv = start_redis_with(&["--dir", d, "--dbfilename", "v.rdb"]);
        let mut r = redis::Client::open(format!("redis://127.0.0.1:{}/", redis_srv.port))
            .unwrap()
            .get_connection()
            .unwrap();
        for db in DBS {
            redis::cmd("SELECT").arg(db).query::<()>(&mut r).unwrap();
            let n: usize = redis::cmd("DBSIZE").query(&mut r).unwrap();
            assert_eq!(n, data.len());
            for (i, (key, c)) in data.iter().enumerate() {
                assert_eq!(read(&mut r, key).as_ref(), Some(c), "{key} db {db}");
                if !matches!(c, Contents::Str(_)) {
                    assert_eq!(encoding(&mut r, key), value(c).encoding_name(), "{key}");
                }
                let at: i64 = redis::cmd("PEXPIRETIME").arg(key).query(&mut r).unwrap();
                assert_eq!(at, if i % 3 == 0 { FAR + i as i64 } else { -1 }, "{key}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn packed_payloads_convert_by_length_only_like_redis() {
    let srv = common::Server::start(&[]);
    let redis_srv = start_redis();
    let mut v = srv.conn();
    let mut r = redis::Client::open(format!("redis://127.0.0.1:{}/", redis_srv.port))
        .unwrap()
        .get_connection()
        .unwrap();
    // Listpacks with a value longer than the current limit, made under a
    // higher one: both servers keep them packed when restored.
    let long = "L".repeat(100);
    for (param, key) in [
        ("hash-max-listpack-value", "h"),
        ("zset-max-listpack-value", "z"),
    ] {
        common::q(&mut v, &["CONFIG", "SET", param, "1000"]).unwrap();
        if key == "h" {
            common::q(&mut v, &["HSET", key, &long, "v"]).unwrap();
        } else {
            common::q(&mut v, &["ZADD", key, "1", &long]).unwrap();
        }
        let payload = dump(&mut v, key);
        common::q(&mut v, &["CONFIG", "SET", param, "64"]).unwrap();
        for con in [&mut v, &mut r] {
            restore(con, "copy", 0, &payload, &["REPLACE"]).unwrap();
            assert_eq!(encoding(con, "copy"), "listpack", "{key}");
        }
    }
}
