//! Differential test of the HyperLogLog commands against a real
//! redis-server (see `common/diff.rs`): random PFADD, PFCOUNT (one key and
//! unions), PFMERGE and PFDEBUG sequences whose values are read back with
//! GET, so the stored bytes (sparse and dense encodings, the cached
//! cardinality) must be identical to Redis's; `hll-sparse-max-bytes`
//! changes during a run; values are corrupted with SETRANGE and APPEND to
//! compare the error replies. A second test moves HLLs both ways between
//! the servers with DUMP/RESTORE.

mod common;

use common::diff::{self, b, Gen, Raw};

impl Gen<'_> {
    /// A key: mostly HLLs, sometimes a plain string, a list or nothing.
    fn key(&mut self) -> Vec<u8> {
        match self.rng.u8(..25) {
            0 => b("str"),
            1 => b("list"),
            2 => b("nokey"),
            _ => format!("h{}", self.rng.u8(..4)).into_bytes(),
        }
    }

    fn element(&mut self) -> Vec<u8> {
        match self.rng.u8(..10) {
            0 => b(""),
            1 => vec![self.rng.u8(..); self.rng.usize(1..20)],
            _ => format!("e{}", self.rng.u32(..50_000)).into_bytes(),
        }
    }

    fn pfadd(&mut self) -> Vec<Vec<u8>> {
        let mut c = vec![b("PFADD"), self.key()];
        let n = match self.rng.u8(..10) {
            0 => 0,
            1 => self.rng.usize(100..600),
            _ => self.rng.usize(1..8),
        };
        for _ in 0..n {
            c.push(self.element());
        }
        c
    }

    /// Corrupts an HLL (overwrites a few bytes, or appends one: a dense
    /// value then has the wrong length, a sparse one a trailing opcode),
    /// uses it once and deletes it. Only once: after a write Redis may have
    /// left an opcode cut at the end of the string, whose missing byte it
    /// then reads from whatever its previous write left past the end.
    fn corrupt(&mut self) -> Vec<Vec<Vec<u8>>> {
        let key = format!("h{}", self.rng.u8(..4)).into_bytes();
        let damage = if self.rng.u8(..4) == 0 {
            vec![b("APPEND"), key.clone(), vec![self.rng.u8(..)]]
        } else {
            let at = match self.rng.u8(..4) {
                0 => self.rng.u32(..16),
                _ => self.rng.u32(16..40),
            };
            let bytes: Vec<u8> = (0..self.rng.usize(1..4)).map(|_| self.rng.u8(..)).collect();
            vec![
                b("SETRANGE"),
                key.clone(),
                at.to_string().into_bytes(),
                bytes,
            ]
        };
        let mut add = vec![b("PFADD"), key.clone()];
        for _ in 0..self.rng.usize(1..5) {
            add.push(self.element());
        }
        let mut step = vec![damage, vec![b("PFCOUNT"), key.clone(), b("h0")]];
        step.push(vec![b("PFCOUNT"), key.clone()]);
        step.push(vec![b("PFDEBUG"), b("DECODE"), key.clone()]);
        step.push(if self.rng.bool() {
            add
        } else {
            vec![b("PFMERGE"), key.clone(), b("h0")]
        });
        step.push(vec![b("GET"), key.clone()]);
        step.push(vec![b("DEL"), key]);
        step
    }

    fn keys(&mut self, first: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let mut c = first;
        for _ in 0..self.rng.usize(0..4) {
            c.push(self.key());
        }
        c
    }

    fn command(&mut self) -> Vec<Vec<u8>> {
        match self.rng.u8(..40) {
            0..=13 => self.pfadd(),
            14..=18 => {
                let first = vec![b("PFCOUNT"), self.key()];
                self.keys(first)
            }
            19..=21 => {
                let first = vec![b("PFMERGE"), self.key()];
                self.keys(first)
            }
            22..=26 => vec![b("GET"), self.key()],
            27 => vec![
                b("PFDEBUG"),
                b(self.pick(&["ENCODING", "DECODE", "TODENSE", "todense", "nosuch"])),
                self.key(),
            ],
            28 => vec![b("PFDEBUG"), b("GETREG"), self.key()],
            30 => vec![
                b("CONFIG"),
                b("SET"),
                b("hll-sparse-max-bytes"),
                b(self.pick(&["0", "30", "200", "3000", "3000", "20000"])),
            ],
            31 => vec![b("SET"), b("str"), b(self.pick(&["abc", "12345", "HYLL"]))],
            32 => vec![b("RPUSH"), b("list"), b("x")],
            33 => vec![b("DEL"), self.key()],
            34 => vec![b("STRLEN"), self.key()],
            35 => vec![b("TYPE"), self.key()],
            36 => vec![b("PFADD")],
            _ => vec![b("PFCOUNT"), self.key()],
        }
    }
}

#[test]
fn random_hll_sequences_match_redis() {
    if !diff::redis_server_available() {
        return;
    }
    diff::run(|rng| {
        if rng.u8(..40) == 0 {
            Gen { rng }.corrupt()
        } else if rng.u8(..15) == 0 {
            diff::transaction(rng, |r| Gen { rng: r }.command())
        } else {
            vec![Gen { rng }.command()]
        }
    });
}

fn cmd(line: &[&[u8]]) -> Vec<Vec<u8>> {
    line.iter().map(|a| a.to_vec()).collect()
}

/// HLLs made by one server restore in the other (DUMP payloads of
/// strings) and read back identically, sparse and dense.
#[test]
fn hll_values_move_between_servers_with_dump_restore() {
    if !diff::redis_server_available() {
        return;
    }
    let redis = diff::start_redis();
    let vireo = common::Server::start(&[]);
    let mut servers = [Raw::connect(vireo.port), Raw::connect(redis.port)];
    let mut rng = fastrand::Rng::with_seed(26);
    for size in [3usize, 200, 5000] {
        let elements: Vec<Vec<u8>> = (0..size)
            .map(|_| rng.u64(..).to_string().into_bytes())
            .collect();
        for (from, to) in [(0, 1), (1, 0)] {
            let mut add = cmd(&[b"PFADD", b"src"]);
            add.extend(elements.iter().cloned());
            servers[from].send(&cmd(&[b"DEL", b"src"]));
            assert_eq!(servers[from].send(&add), b":1\r\n");
            // PFCOUNT caches the cardinality in the header: moved too.
            let count = servers[from].send(&cmd(&[b"PFCOUNT", b"src"]));
            let dump = servers[from].send(&cmd(&[b"DUMP", b"src"]));
            let payload = bulk_payload(&dump);
            servers[to].send(&cmd(&[b"DEL", b"dst"]));
            let restored = servers[to].send(&cmd(&[b"RESTORE", b"dst", b"0", &payload]));
            assert_eq!(restored, b"+OK\r\n", "size {size}, {from} -> {to}");
            assert_eq!(
                servers[to].send(&cmd(&[b"GET", b"dst"])),
                servers[from].send(&cmd(&[b"GET", b"src"])),
                "size {size}, {from} -> {to}"
            );
            assert_eq!(servers[to].send(&cmd(&[b"PFCOUNT", b"dst"])), count);
            let encoding = servers[from].send(&cmd(&[b"PFDEBUG", b"ENCODING", b"src"]));
            assert_eq!(
                servers[to].send(&cmd(&[b"PFDEBUG", b"ENCODING", b"dst"])),
                encoding
            );
        }
    }
}

/// The payload of a bulk string reply.
fn bulk_payload(reply: &[u8]) -> Vec<u8> {
    assert_eq!(reply[0], b'$', "{}", String::from_utf8_lossy(reply));
    let header_end = reply.iter().position(|&c| c == b'\n').unwrap() + 1;
    reply[header_end..reply.len() - 2].to_vec()
}
