//! Differential test: the same seeded random command sequences go to Vireo
//! and to a real `redis-server` (Debian's 7.0.15, which `.ci/run` installs),
//! and the raw RESP replies must be byte-for-byte equal.
//!
//! Replies whose exact value legitimately differs between two servers (TTLs
//! counting down, unordered KEYS output) are normalised first; everything
//! else, including every error string, must match exactly.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

struct Redis {
    child: Child,
    port: u16,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_redis() -> Redis {
    let port = common::free_port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server must be installed for the differential test (apt-get install redis-server)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Redis { child, port };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("redis-server did not start");
}

/// A raw RESP connection that returns each reply's exact bytes.
struct Raw {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw {
            w: s.try_clone().unwrap(),
            r: BufReader::new(s),
        }
    }

    fn send(&mut self, args: &[Vec<u8>]) -> Vec<u8> {
        let mut b = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            b.extend_from_slice(a);
            b.extend_from_slice(b"\r\n");
        }
        self.w.write_all(&b).unwrap();
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

/// Keys, fields and values are drawn from small pools so commands collide.
struct Gen {
    rng: fastrand::Rng,
}

impl Gen {
    fn key(&mut self) -> Vec<u8> {
        format!("k{}", self.rng.u8(..8)).into_bytes()
    }

    fn value(&mut self) -> Vec<u8> {
        match self.rng.u8(..6) {
            0 => self.rng.i64(-1000..1000).to_string().into_bytes(),
            1 => b"".to_vec(),
            2 => format!("{}.{}", self.rng.i32(-50..50), self.rng.u8(..100)).into_bytes(),
            3 => (0..self.rng.usize(40..60))
                .map(|_| b'a' + self.rng.u8(..3))
                .collect(),
            4 => i64::MAX.to_string().into_bytes(),
            _ => (0..self.rng.usize(1..8))
                .map(|_| b'a' + self.rng.u8(..4))
                .collect(),
        }
    }

    fn int(&mut self) -> Vec<u8> {
        match self.rng.u8(..8) {
            0 => b"notanint".to_vec(),
            1 => i64::MIN.to_string().into_bytes(),
            _ => self.rng.i64(-20..20).to_string().into_bytes(),
        }
    }

    fn pick<'a>(&mut self, opts: &[&'a str]) -> &'a str {
        opts[self.rng.usize(..opts.len())]
    }

    /// One random command.
    fn command(&mut self) -> Vec<Vec<u8>> {
        let k = self.key();
        let b = |s: &str| s.as_bytes().to_vec();
        let c: Vec<Vec<u8>> = match self.rng.u8(..40) {
            0 => vec![b("GET"), k],
            1 => {
                let mut c = vec![b("SET"), k, self.value()];
                for _ in 0..self.rng.usize(..3) {
                    let opt = self.pick(&["NX", "XX", "GET", "KEEPTTL", "EX", "PX", "BAD"]);
                    c.push(b(opt));
                    if opt == "EX" || opt == "PX" {
                        c.push(b(self.pick(&["1000", "0", "-5", "x", "100000"])));
                    }
                }
                c
            }
            2 => vec![b("INCR"), k],
            3 => vec![b("INCRBY"), k, self.int()],
            4 => vec![b("DECRBY"), k, self.int()],
            5 => vec![b("APPEND"), k, self.value()],
            6 => vec![b("STRLEN"), k],
            7 => vec![b("GETRANGE"), k, self.int(), self.int()],
            8 => vec![
                b("SETRANGE"),
                k,
                b(self.pick(&["0", "3", "-1", "7"])),
                self.value(),
            ],
            9 => vec![b("MSET"), k, self.value(), self.key(), self.value()],
            10 => vec![b("MGET"), k, self.key(), self.key()],
            11 => vec![b("MSETNX"), k, self.value(), self.key(), self.value()],
            12 => vec![b("GETSET"), k, self.value()],
            13 => vec![b("GETDEL"), k],
            14 => vec![b("SETNX"), k, self.value()],
            // Redis adds in 80-bit long double; Vireo in f64. They agree on
            // everyday values, so INCRBYFLOAT gets keys of its own that
            // never hold huge integers.
            15 => {
                let fk = format!("f{}", self.rng.u8(..3)).into_bytes();
                vec![
                    b("INCRBYFLOAT"),
                    fk,
                    b(self.pick(&["1.5", "-0.25", "abc", "3", "1e3"])),
                ]
            }
            16 => vec![b("DEL"), k, self.key()],
            17 => vec![b("EXISTS"), k.clone(), self.key(), k],
            18 => vec![b("TYPE"), k],
            19 => vec![b("EXPIRE"), k, b(self.pick(&["1000", "2000", "-1", "x"]))],
            20 => {
                let mut c = vec![b("EXPIRE"), k, b("1500")];
                c.push(b(self.pick(&["NX", "XX", "GT", "LT", "NX"])));
                c
            }
            21 => vec![b("TTL"), k],
            22 => vec![b("PERSIST"), k],
            23 => vec![b("RENAME"), k, self.key()],
            24 => vec![b("RENAMENX"), k, self.key()],
            25 => vec![b("COPY"), k, self.key()],
            26 => vec![b("KEYS"), b(self.pick(&["*", "k[0-3]", "k?", "x*"]))],
            27 => vec![b("DBSIZE")],
            28 => vec![b("SELECT"), b(self.pick(&["0", "1", "16", "x"]))],
            29 => vec![b("MOVE"), k, b(self.pick(&["0", "1", "2"]))],
            30 => vec![
                b("SETEX"),
                k,
                b(self.pick(&["100", "0", "-1"])),
                self.value(),
            ],
            31 => vec![
                b("GETEX"),
                k,
                b(self.pick(&["PERSIST", "EX", "PX"])),
                b("5000"),
            ],
            32 => vec![b("LCS"), k, self.key()],
            33 => vec![b("SUBSTR"), k, self.int(), self.int()],
            34 => vec![b("DECR"), k],
            35 => vec![b("ECHO"), self.value()],
            36 => vec![b(self.pick(&["NOSUCHCMD", "get", "SeT"])), k],
            37 => vec![b("PSETEX"), k, b(self.pick(&["100000", "0"])), self.value()],
            38 => vec![b("EXPIRETIME"), k],
            _ => vec![b("UNLINK"), k],
        };
        c
    }

    /// A command or, sometimes, a transaction around a few of them.
    fn step(&mut self) -> Vec<Vec<Vec<u8>>> {
        if self.rng.u8(..12) == 0 {
            let mut t = vec![vec![b"MULTI".to_vec()]];
            for _ in 0..self.rng.usize(1..5) {
                let c = self.command();
                // KEYS order is unspecified; it is only normalised at top level.
                if !c[0].eq_ignore_ascii_case(b"KEYS") {
                    t.push(c);
                }
            }
            t.push(vec![if self.rng.u8(..6) == 0 {
                b"DISCARD".to_vec()
            } else {
                b"EXEC".to_vec()
            }]);
            t
        } else {
            vec![self.command()]
        }
    }
}

/// Replaces what may legitimately differ: positive TTLs (time passes
/// between the two servers) and the order of KEYS results.
fn normalise(cmd: &[Vec<u8>], reply: Vec<u8>) -> Vec<u8> {
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
        _ => reply,
    }
}

fn show(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn random_sequences_match_redis() {
    let redis = start_redis();
    let vireo = common::Server::start(&[]);
    let mut a = Raw::connect(vireo.port);
    let mut b = Raw::connect(redis.port);
    let (seqs, len) = sizes();
    for seed in 0..seqs {
        for c in [&mut a, &mut b] {
            c.send(&[b"SELECT".to_vec(), b"0".to_vec()]);
            c.send(&[b"FLUSHALL".to_vec()]);
        }
        let mut gen = Gen {
            rng: fastrand::Rng::with_seed(seed),
        };
        let mut history = Vec::new();
        let mut done = 0;
        while done < len {
            for cmd in gen.step() {
                done += 1;
                let ra = normalise(&cmd, a.send(&cmd));
                let rb = normalise(&cmd, b.send(&cmd));
                history.push(show(&cmd));
                assert!(
                    ra == rb,
                    "seed {seed}, step {done}: `{}`\n vireo: {:?}\n redis: {:?}\n last commands:\n  {}",
                    show(&cmd),
                    String::from_utf8_lossy(&ra),
                    String::from_utf8_lossy(&rb),
                    history[history.len().saturating_sub(15)..].join("\n  ")
                );
            }
        }
    }
}
