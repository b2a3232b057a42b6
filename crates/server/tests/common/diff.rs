//! Differential testing against a real `redis-server` (Debian's 7.0.15,
//! which `.ci/run` installs): the same seeded random command sequences go to
//! both servers and the raw RESP replies must be byte-for-byte equal.
//!
//! Each command family has its own generator in a `tests/differential_*.rs`
//! file and calls [`run`]. Replies whose exact value legitimately differs
//! between two servers (TTLs counting down, unordered KEYS output) are
//! normalised first; everything else, errors included, must match exactly.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One step of a sequence: a single command, or several (a transaction).
pub type Step = Vec<Vec<Vec<u8>>>;

/// Sequences per run and commands per sequence (raise with env vars for a
/// longer soak: VIREO_DIFF_SEQS, VIREO_DIFF_LEN).
fn sizes() -> (u64, usize) {
    let seqs = std::env::var("VIREO_DIFF_SEQS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let len = std::env::var("VIREO_DIFF_LEN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    (seqs, len)
}

pub struct Redis {
    child: Child,
    pub port: u16,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `redis-server` can be run; differential tests that must not
/// fail without it print a note and return when it cannot.
pub fn redis_server_available() -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!("note: redis-server is not on PATH; skipping the differential test");
    }
    found
}

pub fn start_redis() -> Redis {
    start_redis_with(&[])
}

/// Starts redis-server with `extra` arguments after the defaults (later
/// ones win, e.g. `--dir D --dbfilename F` to load a file).
pub fn start_redis_with(extra: &[&str]) -> Redis {
    let port = super::free_port();
    let mut child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server must be installed for the differential test (apt-get install redis-server)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if super::answers_ping(port) {
            return Redis { child, port };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("redis-server did not start");
}

/// A raw RESP connection that returns each reply's exact bytes.
pub struct Raw {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw {
            w: s.try_clone().unwrap(),
            r: BufReader::new(s),
        }
    }

    pub fn send(&mut self, args: &[Vec<u8>]) -> Vec<u8> {
        let mut replies = self.send_pipelined(std::slice::from_ref(&args.to_vec()));
        replies.pop().expect("one reply")
    }

    /// Sends `cmds` in one write (a pipeline, so the server's look-ahead
    /// over queued commands runs) and returns their replies in order.
    pub fn send_pipelined(&mut self, cmds: &[Vec<Vec<u8>>]) -> Vec<Vec<u8>> {
        let mut b = Vec::new();
        for args in cmds {
            b.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in args {
                b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                b.extend_from_slice(a);
                b.extend_from_slice(b"\r\n");
            }
        }
        self.w.write_all(&b).unwrap();
        cmds.iter()
            .map(|_| {
                let mut out = Vec::new();
                self.read_value(&mut out);
                out
            })
            .collect()
    }

    /// Reads one more reply (a command that answers twice, like the
    /// Lua debugger's last step).
    pub fn read_reply(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.read_value(&mut out);
        out
    }

    fn line(&mut self, out: &mut Vec<u8>) -> Vec<u8> {
        let mut l = Vec::new();
        self.r.read_until(b'\n', &mut l).expect("read reply");
        assert!(
            l.ends_with(b"\r\n"),
            "truncated reply line {:?}",
            String::from_utf8_lossy(&l)
        );
        out.extend_from_slice(&l);
        l.truncate(l.len() - 2);
        l
    }

    fn read_value(&mut self, out: &mut Vec<u8>) {
        let l = self.line(out);
        let n: i64 = std::str::from_utf8(&l[1..])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        match l[0] {
            b'$' | b'=' | b'!' if n >= 0 => {
                let mut body = vec![0u8; n as usize + 2];
                std::io::Read::read_exact(&mut self.r, &mut body).unwrap();
                out.extend_from_slice(&body);
            }
            b'*' | b'~' | b'>' if n > 0 => (0..n).for_each(|_| self.read_value(out)),
            b'%' | b'|' if n > 0 => (0..2 * n).for_each(|_| self.read_value(out)),
            _ => {}
        }
    }
}

/// Replaces what may legitimately differ: positive TTLs (time passes
/// between the two servers) and the order of KEYS results.
pub fn normalise(cmd: &[Vec<u8>], reply: Vec<u8>) -> Vec<u8> {
    let name = String::from_utf8_lossy(&cmd[0]).to_ascii_uppercase();
    match name.as_str() {
        "TTL" | "PTTL" | "EXPIRETIME" | "PEXPIRETIME"
            if reply.starts_with(b":") && !reply.starts_with(b":-") =>
        {
            b":<positive>\r\n".to_vec()
        }
        "KEYS" => {
            let text = String::from_utf8_lossy(&reply).into_owned();
            let mut lines: Vec<&str> = text.split("\r\n").collect();
            if lines.len() > 2 {
                let head = lines.remove(0);
                let mut items: Vec<String> = lines
                    .chunks(2)
                    .filter(|c| c.len() == 2)
                    .map(|c| format!("{}\r\n{}", c[0], c[1]))
                    .collect();
                items.sort();
                return format!("{head}\r\n{}\r\n", items.join("\r\n")).into_bytes();
            }
            reply
        }
        // Hashes under `unordered:` keys are meant to become hashtables,
        // whose iteration order is unspecified: sort their items (pairs
        // where the reply has values; HSCAN keeps its cursor first).
        "HGETALL" | "HKEYS" | "HVALS" | "HSCAN" | "HRANDFIELD"
            if cmd.get(1).is_some_and(|k| k.starts_with(b"unordered:")) =>
        {
            let with_values = name == "HGETALL"
                || name == "HSCAN"
                || cmd.iter().any(|a| a.eq_ignore_ascii_case(b"WITHVALUES"));
            let head_lines = if name == "HSCAN" { 4 } else { 1 };
            sort_bulk_items(reply, head_lines, if with_values { 2 } else { 1 })
        }
        // Hashtable sets iterate in an unspecified order (intsets are
        // ascending, which the set integration tests check exactly).
        "SMEMBERS" | "SINTER" | "SUNION" | "SDIFF" => sort_bulk_items(reply, 1, 1),
        "SSCAN" => sort_bulk_items(reply, 4, 1),
        // ZSCAN of a skiplist walks in an unspecified order (the
        // generator asks for everything in one call): member/score pairs.
        "ZSCAN" => sort_bulk_items(reply, 4, 2),
        // ZRANDMEMBER with a positive count of at least the set's size
        // returns the whole set in reverse order in both servers; any other reply
        // is random and compared by shape only.
        "ZRANDMEMBER" => {
            let count = cmd
                .get(2)
                .and_then(|c| std::str::from_utf8(c).ok()?.parse::<i64>().ok());
            let per = if cmd.len() > 3 { 2 } else { 1 };
            let members = match reply.first() {
                Some(b'*') => std::str::from_utf8(&reply[1..])
                    .ok()
                    .and_then(|r| r.split("\r\n").next()?.parse::<i64>().ok())
                    .map(|n| n / per),
                _ => None,
            };
            match (count, members) {
                (Some(c), Some(n)) if c > 0 && n < c => reply,
                _ => mask_bulk_items(reply),
            }
        }
        // Random members: a whole set (fewer members than a positive count
        // asked for) is compared sorted, anything else only by shape.
        "SPOP" | "SRANDMEMBER" => {
            let count = cmd
                .get(2)
                .and_then(|c| std::str::from_utf8(c).ok()?.parse::<i64>().ok());
            let whole = match (count, reply.first()) {
                (Some(c), Some(b'*')) => std::str::from_utf8(&reply[1..])
                    .ok()
                    .and_then(|r| r.split("\r\n").next()?.parse::<i64>().ok())
                    .is_some_and(|n| c > 0 && n < c),
                _ => false,
            };
            if whole {
                sort_bulk_items(reply, 1, 1)
            } else {
                mask_bulk_items(reply)
            }
        }
        _ => reply,
    }
}

/// Replaces every bulk string of a reply (a single bulk or a flat array of
/// them) by a placeholder, keeping only the reply's shape.
fn mask_bulk_items(reply: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8_lossy(&reply).into_owned();
    let mut lines: Vec<&str> = text.split("\r\n").collect();
    lines.pop();
    let mut out = Vec::new();
    let mut skip = false;
    for l in lines {
        if skip {
            skip = false;
            continue;
        }
        if l.starts_with('$') && l != "$-1" {
            out.push("$<member>");
            skip = true;
        } else {
            out.push(l);
        }
    }
    format!("{}\r\n", out.join("\r\n")).into_bytes()
}

/// Sorts the bulk strings of a flat reply after its first `head_lines`
/// lines, in groups of `group` consecutive items (field/value pairs stay
/// together). Replies of other shapes (errors, nulls) are left alone.
fn sort_bulk_items(reply: Vec<u8>, head_lines: usize, group: usize) -> Vec<u8> {
    let text = String::from_utf8_lossy(&reply).into_owned();
    let mut lines: Vec<&str> = text.split("\r\n").collect();
    // The split leaves an empty string after the final CRLF.
    lines.pop();
    if lines.len() <= head_lines || !lines[head_lines].starts_with('$') {
        return reply;
    }
    let items = lines.split_off(head_lines);
    let mut groups: Vec<String> = items.chunks(2 * group).map(|c| c.join("\r\n")).collect();
    groups.sort();
    lines.extend(groups.iter().map(String::as_str));
    format!("{}\r\n", lines.join("\r\n")).into_bytes()
}

fn show(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `seqs` seeded sequences of about `len` commands from `gen` against
/// both servers (VIREO_DIFF_SEQS / VIREO_DIFF_LEN override the defaults)
/// and panics with the seed, the command and recent history on the first
/// differing reply. Commands go in pipelines of 1 to 8 steps, so that the
/// server's look-ahead (which prefetches the keys and members of queued
/// commands) sees every kind of command too.
pub fn run(mut gen: impl FnMut(&mut fastrand::Rng) -> Step) {
    let redis = start_redis();
    let vireo = super::Server::start(&[]);
    let mut a = Raw::connect(vireo.port);
    let mut b = Raw::connect(redis.port);
    let (seqs, len) = sizes();
    for seed in 0..seqs {
        for c in [&mut a, &mut b] {
            c.send(&[b"SELECT".to_vec(), b"0".to_vec()]);
            c.send(&[b"FLUSHALL".to_vec()]);
        }
        let mut rng = fastrand::Rng::with_seed(seed);
        // Its own generator, so the command sequences stay what they were.
        let mut batching = fastrand::Rng::with_seed(seed ^ 0x5eed);
        let mut history = Vec::new();
        let mut done = 0;
        while done < len {
            let batch: Vec<_> = (0..batching.usize(1..=8))
                .flat_map(|_| gen(&mut rng))
                .collect();
            let replies_a = a.send_pipelined(&batch);
            let replies_b = b.send_pipelined(&batch);
            for ((cmd, ra), rb) in batch.iter().zip(replies_a).zip(replies_b) {
                done += 1;
                let ra = normalise(cmd, ra);
                let rb = normalise(cmd, rb);
                history.push(show(cmd));
                assert!(
                    ra == rb,
                    "seed {seed}, step {done}: `{}`\n vireo: {:?}\n redis: {:?}\n last commands:\n  {}",
                    show(cmd),
                    String::from_utf8_lossy(&ra),
                    String::from_utf8_lossy(&rb),
                    history[history.len().saturating_sub(15)..].join("\n  ")
                );
            }
        }
    }
}

/// Wraps some generated commands in MULTI … EXEC (or DISCARD), leaving out
/// commands whose reply order is unspecified.
pub fn transaction(
    rng: &mut fastrand::Rng,
    mut command: impl FnMut(&mut fastrand::Rng) -> Vec<Vec<u8>>,
) -> Step {
    let mut t = vec![vec![b"MULTI".to_vec()]];
    for _ in 0..rng.usize(1..5) {
        let c = command(rng);
        if !c[0].eq_ignore_ascii_case(b"KEYS") {
            t.push(c);
        }
    }
    t.push(vec![if rng.u8(..6) == 0 {
        b"DISCARD".to_vec()
    } else {
        b"EXEC".to_vec()
    }]);
    t
}

/// The random source the command generators of `tests/differential_*.rs`
/// share; each file adds its family's methods (`impl Gen<'_>` there).
pub struct Gen<'r> {
    pub rng: &'r mut fastrand::Rng,
}

impl Gen<'_> {
    /// One of `opts`, uniformly.
    pub fn pick<'a>(&mut self, opts: &[&'a str]) -> &'a str {
        opts[self.rng.usize(..opts.len())]
    }
}

/// `s` as an argument.
pub fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}
