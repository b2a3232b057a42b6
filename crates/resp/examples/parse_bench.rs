//! Tiny std-only throughput check for the parser and reply encoder (no
//! criterion): `cargo run --release -p vireo-resp --example parse_bench`.
//!
//! Prints commands/s and MB/s for a pipelined SET/GET stream parsed from a
//! single buffer, for the same stream delivered in 4 KiB reads, and for
//! encoding typical replies.

use std::hint::black_box;
use std::time::Instant;

use vireo_resp::{OwnedArgs, ParseLimits, Parser, Protocol, ReplyBuf};

/// Builds `n` pipelined commands alternating `SET key:<i> <value>` and
/// `GET key:<i>`.
fn build_stream(n: usize, value_len: usize) -> Vec<u8> {
    let value = vec![b'v'; value_len];
    let mut out = Vec::new();
    for i in 0..n {
        let key = format!("key:{i:08}");
        let cmd = if i % 2 == 0 {
            OwnedArgs::from_slices([&b"SET"[..], key.as_bytes(), &value])
        } else {
            OwnedArgs::from_slices([&b"GET"[..], key.as_bytes()])
        };
        cmd.write_resp(&mut out);
    }
    out
}

/// Parses the whole stream, returning the number of commands and total
/// argument bytes seen.
fn parse_all(stream: &[u8], chunk: usize) -> (usize, usize) {
    let limits = ParseLimits::default();
    let mut parser = Parser::new();
    let mut buf: Vec<u8> = Vec::with_capacity(chunk * 2);
    let mut cmds = 0;
    let mut bytes = 0;
    let mut fed = 0;
    while fed < stream.len() {
        let end = (fed + chunk).min(stream.len());
        buf.extend_from_slice(&stream[fed..end]);
        fed = end;
        let mut consumed = 0;
        while let Ok(Some(n)) = parser.parse(&buf[consumed..], &limits) {
            let args = parser.args(&buf[consumed..]);
            cmds += 1;
            bytes += args.iter().map(<[u8]>::len).sum::<usize>();
            consumed += n;
        }
        buf.drain(..consumed);
    }
    (cmds, bytes)
}

/// CPU time consumed by this thread so far, in seconds (Linux
/// `/proc/thread-self/schedstat`), so results stay meaningful on a busy
/// machine; falls back to wall-clock time elsewhere.
fn cpu_seconds(start: Instant) -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or_else(|| start.elapsed().as_secs_f64(), |ns| ns as f64 / 1e9)
}

/// Measures `f` in CPU seconds.
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let wall = Instant::now();
    let before = cpu_seconds(wall);
    let out = f();
    let after = cpu_seconds(wall);
    (out, (after - before).max(1e-9))
}

fn report(label: &str, ops: usize, bytes: usize, secs: f64) {
    println!(
        "{label:<28} {:>8.2} Mops/s {:>9.1} MB/s",
        ops as f64 / secs / 1e6,
        bytes as f64 / secs / 1e6
    );
}

/// Parses a small pipelined batch (fits in cache) over and over: the pure
/// per-command parser cost, without buffer management.
fn parse_hot(batch: &[u8], rounds: usize) -> usize {
    let limits = ParseLimits::default();
    let mut parser = Parser::new();
    let mut cmds = 0;
    for _ in 0..rounds {
        let mut pos = 0;
        while let Ok(Some(n)) = parser.parse(&batch[pos..], &limits) {
            cmds += parser.args(&batch[pos..]).len().min(1);
            pos += n;
        }
    }
    cmds
}

fn main() {
    let batch = build_stream(64, 16);
    let rounds = 50_000;
    let (cmds, secs) = timed(|| black_box(parse_hot(black_box(&batch), rounds)));
    report("parse (hot batch)", cmds, batch.len() * rounds, secs);
    if std::env::args().any(|a| a == "--hot-only") {
        return;
    }

    let n = 1_000_000;
    let stream = build_stream(n, 16);
    for (label, chunk) in [
        ("parse (one buffer)", stream.len()),
        ("parse (4 KiB reads)", 4096),
    ] {
        let ((cmds, _), secs) = timed(|| black_box(parse_all(black_box(&stream), chunk)));
        report(label, cmds, stream.len(), secs);
    }

    let mut out = ReplyBuf::new(Protocol::Resp2);
    let (total, secs) = timed(|| {
        let mut total = 0;
        for i in 0..n as i64 {
            out.bulk(b"0123456789abcdef");
            out.int(i);
            out.double(i as f64 * 0.5);
            out.ok();
            if out.len() > 64 * 1024 {
                total += out.len();
                out.consume(out.len());
            }
        }
        total + out.len()
    });
    report("encode (4 replies/op)", n, total, secs);
}
