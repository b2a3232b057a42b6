//! Damaged DUMP payloads and RDB files against the real binary: RESTORE
//! refuses them with Redis's reply and logs Redis's reason, streams
//! restored with `sanitize-dump-payload no` keep their sound nodes and
//! stay usable, empty keys in a dump are skipped and named in the log, and
//! a damaged dump stops start-up with Redis's report. Replies and exit
//! codes are compared with redis-server where it is installed.

mod common;

use common::wait_for_log;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::diff::{redis_server_available, start_redis_with, Raw};
use common::{fresh_dir, ok, Server};
use vireo_store::rdb::{crc64, RDB_VERSION};

/// A DUMP payload: type byte and body, RDB version, CRC64.
fn payload(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut p = vec![ty];
    p.extend_from_slice(body);
    p.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

/// An RDB string of fewer than 64 bytes.
fn short_string(s: &[u8]) -> Vec<u8> {
    assert!(s.len() < 64);
    let mut out = vec![s.len() as u8];
    out.extend_from_slice(s);
    out
}

/// A listpack of short strings (each below 64 bytes, so every entry is
/// `0x80|len`, the bytes and a one-byte backlen).
fn listpack(items: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    for it in items {
        body.push(0x80 | it.len() as u8);
        body.extend_from_slice(it);
        body.push(it.len() as u8 + 1);
    }
    let total = 6 + body.len() + 1;
    let mut lp = (total as u32).to_le_bytes().to_vec();
    lp.extend_from_slice(&(items.len() as u16).to_le_bytes());
    lp.extend_from_slice(&body);
    lp.push(0xFF);
    lp
}

/// Payloads Redis 7.0 refuses with `sanitize-dump-payload yes`, each with
/// the words Vireo's log must give for it.
fn damaged_payloads() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    // Type 16: a hash listpack, here with a repeated field.
    let dup_hash = payload(16, &short_string(&listpack(&[b"f", b"1", b"f", b"2"])));
    // Type 9: a zipmap without entries.
    let empty_zipmap = payload(9, &short_string(&[0, 0xFF]));
    // Type 18: a quicklist whose one plain node is empty.
    let empty_node = payload(18, &[1, 1, 0]);
    // Type 17: a sorted-set listpack whose header misstates its size.
    let mut lp = listpack(&[b"m", b"1"]);
    lp[0] += 3;
    let bad_size = payload(17, &short_string(&lp));
    vec![
        ("dup hash", dup_hash, "Hash listpack integrity check failed"),
        (
            "empty zipmap",
            empty_zipmap,
            "Zipmap integrity check failed",
        ),
        ("empty node", empty_node, "Internal error in RDB reading"),
        ("bad size", bad_size, "Zset listpack integrity check failed"),
    ]
}

/// RESTORE key 0 payload REPLACE on a raw connection.
fn restore(c: &mut Raw, key: &str, p: &[u8]) -> String {
    let args = vec![
        b"RESTORE".to_vec(),
        key.as_bytes().to_vec(),
        b"0".to_vec(),
        p.to_vec(),
        b"REPLACE".to_vec(),
    ];
    String::from_utf8_lossy(&c.send(&args))
        .trim_end()
        .to_string()
}

#[test]
fn damaged_payloads_are_refused_with_redis_s_reply_and_reason() {
    let dir = fresh_dir();
    let log = dir.join("vireo.log");
    let vireo = Server::start_in(
        dir.clone(),
        &["--loglevel", "verbose", "--logfile", log.to_str().unwrap()],
    );
    let mut v = Raw::connect(vireo.port);
    let redis = redis_server_available().then(|| start_redis_with(&[]));
    let mut r = redis.as_ref().map(|r| Raw::connect(r.port));
    for sanitize in ["yes", "no"] {
        let set = [
            b"CONFIG".to_vec(),
            b"SET".to_vec(),
            b"sanitize-dump-payload".to_vec(),
            sanitize.into(),
        ];
        v.send(&set);
        if let Some(r) = r.as_mut() {
            r.send(&set);
        }
        for (what, p, reason) in damaged_payloads() {
            let reply = restore(&mut v, "k", &p);
            assert_eq!(reply, "-ERR Bad data format", "{what}, sanitize {sanitize}");
            assert!(
                wait_for_log(&log, reason).contains(reason),
                "{what}: {reason}"
            );
            // With `no` Redis stores a listpack with a repeated field as it
            // is (and crashes when converting it); Vireo refuses it always.
            if let Some(r) = r.as_mut().filter(|_| sanitize == "yes") {
                assert_eq!(restore(r, "k", &p), reply, "redis: {what}");
            }
        }
    }
    assert_eq!(
        String::from_utf8_lossy(&v.send(&[b"PING".to_vec()])),
        "+PONG\r\n"
    );
}

/// Reads an RDB length of the one- or two-byte forms at `at`: (value,
/// bytes taken).
fn rdb_len(p: &[u8], at: usize) -> (usize, usize) {
    match p[at] >> 6 {
        0 => (usize::from(p[at] & 0x3f), 1),
        1 => (usize::from(p[at] & 0x3f) << 8 | usize::from(p[at + 1]), 2),
        _ => panic!("a length this test does not expect at {at}"),
    }
}

/// Where each node's listpack lies in an uncompressed stream payload
/// (type, node count, then per node a 16-byte ID string and the listpack).
fn node_listpacks(p: &[u8]) -> Vec<std::ops::Range<usize>> {
    let (nodes, n) = rdb_len(p, 1);
    let mut at = 1 + n;
    let mut out = Vec::new();
    for _ in 0..nodes {
        assert_eq!(p[at], 16, "a 16-byte node ID");
        at += 17;
        let (len, n) = rdb_len(p, at);
        out.push(at + n..at + n + len);
        at += n + len;
    }
    out
}

#[test]
fn streams_restored_without_sanitization_keep_their_sound_nodes() {
    let vireo = Server::start(&["--rdbcompression", "no", "--stream-node-max-entries", "3"]);
    let mut c = vireo.conn();
    for i in 1..=9 {
        ok(
            &mut c,
            &["XADD", "s", &format!("{i}-1"), "f", &format!("v{i}")],
        );
    }
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]);
    ok(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "4",
            "STREAMS",
            "s",
            ">",
        ],
    );
    let mut raw = Raw::connect(vireo.port);
    let reply = raw.send(&[b"DUMP".to_vec(), b"s".to_vec()]);
    // `$<len>\r\n<payload>\r\n`
    let start = reply.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut p = reply[start..reply.len() - 2].to_vec();
    let nodes = node_listpacks(&p);
    assert_eq!(nodes.len(), 3);
    // The middle node's last backlen: its frame stays sound.
    p[nodes[1].end - 2] ^= 1;
    let n = p.len() - 8;
    let crc = crc64(0, &p[..n]);
    p[n..].copy_from_slice(&crc.to_le_bytes());
    ok(&mut c, &["CONFIG", "SET", "sanitize-dump-payload", "yes"]);
    assert_eq!(restore(&mut raw, "copy", &p), "-ERR Bad data format");
    ok(&mut c, &["CONFIG", "SET", "sanitize-dump-payload", "no"]);
    assert_eq!(restore(&mut raw, "copy", &p), "+OK");
    let len: i64 = redis::cmd("XLEN").arg("copy").query(&mut c).unwrap();
    assert_eq!(len, 6);
    let ids: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg("copy")
        .arg("-")
        .arg("+")
        .query(&mut c)
        .unwrap();
    let ids: Vec<&str> = ids.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["1-1", "2-1", "3-1", "7-1", "8-1", "9-1"]);
    // Pending entries of the lost node stay pending, as after XDEL.
    ok(&mut c, &["XINFO", "STREAM", "copy", "FULL"]);
    ok(&mut c, &["XPENDING", "copy", "g", "-", "+", "10"]);
    let again = raw.send(&[b"DUMP".to_vec(), b"copy".to_vec()]);
    let start = again.iter().position(|&b| b == b'\n').unwrap() + 1;
    ok(&mut c, &["CONFIG", "SET", "sanitize-dump-payload", "yes"]);
    assert_eq!(
        restore(&mut raw, "again", &again[start..again.len() - 2]),
        "+OK"
    );
}

/// An RDB 10 file of `records` (type byte, key, value bytes), with the
/// checksum left at 0 (not checked).
fn rdb_file(records: &[(u8, &[u8], Vec<u8>)]) -> Vec<u8> {
    let mut f = b"REDIS0010".to_vec();
    for (ty, key, value) in records {
        f.push(*ty);
        f.extend(short_string(key));
        f.extend_from_slice(value);
    }
    f.push(0xFF);
    f.extend_from_slice(&[0; 8]);
    f
}

/// Starts `bin` on the dump `file` with its stdout (the log) captured and
/// waits until it exits or answers PING; returns the exit code (None if it
/// was serving, then killed), the output, and DBSIZE when it served.
fn run_on_dump(bin: &str, file: &[u8], extra: &[&str]) -> (Option<i32>, String, u16) {
    let dir = fresh_dir();
    std::fs::write(dir.join("dump.rdb"), file).unwrap();
    let port = common::free_port();
    let log = dir.join("out.log");
    let mut child = Command::new(bin)
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(&dir)
        .arg("--logfile")
        .arg("")
        .args(extra)
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut code = None;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            code = status.code();
            break;
        }
        if common::answers_ping(port) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = std::fs::read_to_string(&log).unwrap_or_default();
    let dbsize = if code.is_none() {
        let mut r = Raw::connect(port);
        let reply = String::from_utf8_lossy(&r.send(&[b"DBSIZE".to_vec()])).into_owned();
        reply
            .trim()
            .trim_start_matches(':')
            .parse()
            .unwrap_or(u16::MAX)
    } else {
        0
    };
    let _ = child.kill();
    let _ = child.wait();
    (code, out, dbsize)
}

#[test]
fn empty_keys_in_a_dump_are_skipped_and_named() {
    let file = rdb_file(&[
        (2, b"empty-set", vec![0]),
        (4, b"empty-hash", vec![0]),
        (0, b"k", short_string(b"v")),
        (16, b"empty-listpack", short_string(&listpack(&[]))),
    ]);
    let mut bins = vec![env!("CARGO_BIN_EXE_vireo")];
    if redis_server_available() {
        bins.push("redis-server");
    }
    for bin in bins {
        let (code, out, dbsize) = run_on_dump(bin, &file, &[]);
        assert_eq!((code, dbsize), (None, 1), "{bin}: {out}");
        for key in ["empty-set", "empty-hash", "empty-listpack"] {
            let line = format!("rdbLoadObject skipping empty key: {key}");
            assert!(out.contains(&line), "{bin}: {line}\n{out}");
        }
        assert!(
            out.contains(
                "Done loading RDB, keys loaded: 1, keys expired: 0, empty keys skipped: 3."
            ),
            "{bin}: {out}"
        );
    }
}

#[test]
fn a_damaged_dump_stops_start_up_with_redis_s_report() {
    // A hash listpack whose header misstates its size: even Redis's
    // shallow check (and its file checker) finds it.
    let mut lp = listpack(&[b"f", b"v"]);
    lp[0] += 1;
    let file = rdb_file(&[(0, b"a", short_string(b"1")), (16, b"h", short_string(&lp))]);
    let mut bins = vec![env!("CARGO_BIN_EXE_vireo")];
    if redis_server_available() {
        bins.push("redis-server");
    }
    for bin in bins {
        let (code, out, _) = run_on_dump(bin, &file, &[]);
        assert_eq!(code, Some(1), "{bin}: {out}");
        let lines = |needle: &str| out.lines().filter(|l| l.contains(needle)).count();
        assert_eq!(
            lines("Terminating server after rdb file reading failure."),
            1,
            "{bin}: {out}"
        );
        assert!(lines("integrity check failed") >= 2, "{bin}: {out}");
    }
}
