//! Differential test of the stream commands against a real redis-server
//! (see `common/diff.rs`).
//!
//! IDs are always explicit (`ms-seq`, a bare `ms`, or `ms-*`), never `*`,
//! so both servers hold the same entries. Replies that carry clock times
//! (XPENDING's idle times, XINFO CONSUMERS, XINFO STREAM FULL) are left
//! out; what depends on the node layout (XINFO STREAM's radix-tree
//! counts, approximate trimming) is compared exactly. Small node limits
//! are set first so that nodes fill and split often. `str` holds a string
//! for WRONGTYPE errors.

mod common;

use common::diff::{self, b, Gen};

/// Argument lists are built from byte vectors.
type Cmd = Vec<Vec<u8>>;

impl Gen<'_> {
    /// Mostly a few streams; sometimes the string or a missing key.
    fn key(&mut self) -> Vec<u8> {
        match self.rng.u8(..12) {
            0..=9 => format!("s{}", self.rng.u8(..3)).into_bytes(),
            10 => b("str"),
            _ => b("missing"),
        }
    }

    fn group(&mut self) -> Vec<u8> {
        format!("g{}", self.rng.u8(..3)).into_bytes()
    }

    fn consumer(&mut self) -> Vec<u8> {
        format!("c{}", self.rng.u8(..3)).into_bytes()
    }

    /// An ID in one of its textual forms, mostly in a small range so that
    /// entries collide, with the edges now and then.
    fn id(&mut self) -> Vec<u8> {
        let ms = self.rng.u64(0..60);
        match self.rng.u8(..14) {
            0..=6 => format!("{ms}-{}", self.rng.u8(..4)).into_bytes(),
            7 | 8 => ms.to_string().into_bytes(),
            9 => b(self.pick(&["0-0", "0-1", "18446744073709551615-18446744073709551615"])),
            10 => b(self.pick(&["-", "+", "abc", "1-x", "-1", "18446744073709551616"])),
            11 => format!("18446744073709551615-{}", self.rng.u8(..3)).into_bytes(),
            _ => format!("{ms}-18446744073709551615").into_bytes(),
        }
    }

    /// A range bound: an ID, `-`/`+`, or an exclusive one.
    fn bound(&mut self) -> Vec<u8> {
        match self.rng.u8(..6) {
            0 => b("-"),
            1 => b("+"),
            2 => {
                let mut v = b("(");
                v.extend(self.id());
                v
            }
            _ => self.id(),
        }
    }

    fn count(&mut self) -> Vec<u8> {
        b(self.pick(&["0", "1", "2", "3", "10", "-1", "x"]))
    }

    /// XADD with its options; the ID is explicit or `ms-*`.
    fn xadd(&mut self, k: Vec<u8>) -> Cmd {
        let mut c = vec![b("XADD"), k];
        if self.rng.u8(..8) == 0 {
            c.push(b("NOMKSTREAM"));
        }
        if self.rng.u8(..3) == 0 {
            c.extend(self.trim_args());
        }
        let id = match self.rng.u8(..5) {
            0 => format!("{}-*", self.rng.u64(0..60)).into_bytes(),
            1 => self.id(),
            // Mostly above everything so far, so entries accumulate.
            _ => format!("{}-{}", self.rng.u64(60..100_000), self.rng.u8(..3)).into_bytes(),
        };
        c.push(id);
        for _ in 0..self.rng.usize(1..4) {
            c.push(b(self.pick(&["f", "g", "field", "x"])));
            c.push(
                (0..self.rng.usize(0..12))
                    .map(|_| b'a' + self.rng.u8(..3))
                    .collect(),
            );
        }
        if self.rng.u8(..20) == 0 {
            c.pop();
        }
        c
    }

    /// MAXLEN/MINID [=|~] threshold [LIMIT n].
    fn trim_args(&mut self) -> Cmd {
        let mut c = Vec::new();
        let maxlen = self.rng.bool();
        c.push(b(if maxlen { "MAXLEN" } else { "MINID" }));
        let approx = match self.rng.u8(..3) {
            0 => None,
            1 => Some("="),
            _ => Some("~"),
        };
        if let Some(op) = approx {
            c.push(b(op));
        }
        c.push(if maxlen {
            b(self.pick(&["0", "1", "5", "20", "-1"]))
        } else {
            self.id()
        });
        if self.rng.u8(..4) == 0 {
            c.push(b("LIMIT"));
            c.push(b(self.pick(&["0", "1", "10", "-1"])));
        }
        c
    }

    /// One random command.
    fn command(&mut self) -> Cmd {
        let k = self.key();
        match self.rng.u8(..40) {
            0..=7 => self.xadd(k),
            8 | 9 => {
                let mut c = vec![b("XRANGE"), k, self.bound(), self.bound()];
                if self.rng.bool() {
                    c.extend([b("COUNT"), self.count()]);
                }
                c
            }
            10 => {
                let mut c = vec![b("XREVRANGE"), k, self.bound(), self.bound()];
                if self.rng.bool() {
                    c.extend([b("COUNT"), self.count()]);
                }
                c
            }
            11 => vec![b("XLEN"), k],
            12 | 13 => {
                let mut c = vec![b("XDEL"), k];
                for _ in 0..self.rng.usize(1..4) {
                    c.push(self.id());
                }
                c
            }
            14 | 15 => {
                let mut c = vec![b("XTRIM"), k];
                c.extend(self.trim_args());
                c
            }
            16 => {
                let mut c = vec![b("XSETID"), k, self.id()];
                if self.rng.bool() {
                    c.extend([b("ENTRIESADDED"), b(self.pick(&["0", "3", "100", "-1"]))]);
                }
                if self.rng.bool() {
                    c.extend([b("MAXDELETEDID"), self.id()]);
                }
                c
            }
            17 | 18 => {
                let mut c = vec![b("XGROUP"), b("CREATE"), k, self.group()];
                c.push(if self.rng.bool() { b("$") } else { self.id() });
                if self.rng.bool() {
                    c.push(b("MKSTREAM"));
                }
                if self.rng.u8(..3) == 0 {
                    c.extend([b("ENTRIESREAD"), b(self.pick(&["0", "2", "-1", "-2"]))]);
                }
                c
            }
            19 => {
                let mut c = vec![b("XGROUP"), b("SETID"), k, self.group()];
                c.push(if self.rng.bool() {
                    b("$")
                } else {
                    self.bound()
                });
                if self.rng.bool() {
                    c.extend([b("ENTRIESREAD"), b(self.pick(&["0", "2", "-1"]))]);
                }
                c
            }
            20 => vec![b("XGROUP"), b("DESTROY"), k, self.group()],
            21 => vec![
                b("XGROUP"),
                b(self.pick(&["CREATECONSUMER", "DELCONSUMER"])),
                k,
                self.group(),
                self.consumer(),
            ],
            22..=25 => {
                let mut c = vec![b("XREADGROUP"), b("GROUP"), self.group(), self.consumer()];
                if self.rng.bool() {
                    c.extend([b("COUNT"), self.count()]);
                }
                if self.rng.u8(..4) == 0 {
                    c.push(b("NOACK"));
                }
                c.push(b("STREAMS"));
                let n = self.rng.usize(1..3);
                let keys: Vec<_> = (0..n).map(|_| self.key()).collect();
                c.extend(keys);
                for _ in 0..n {
                    c.push(match self.rng.u8(..3) {
                        0 => self.id(),
                        _ => b(">"),
                    });
                }
                c
            }
            26 | 27 => {
                let mut c = vec![b("XREAD")];
                if self.rng.bool() {
                    c.extend([b("COUNT"), self.count()]);
                }
                c.push(b("STREAMS"));
                let n = self.rng.usize(1..3);
                let keys: Vec<_> = (0..n).map(|_| self.key()).collect();
                c.extend(keys);
                for _ in 0..n {
                    c.push(if self.rng.u8(..4) == 0 {
                        b("$")
                    } else {
                        self.id()
                    });
                }
                c
            }
            28 | 29 => {
                let mut c = vec![b("XACK"), k, self.group()];
                for _ in 0..self.rng.usize(1..4) {
                    c.push(self.id());
                }
                c
            }
            30 => vec![b("XPENDING"), k, self.group()],
            31 => {
                let mut c = vec![b("XCLAIM"), k, self.group(), self.consumer(), b("0")];
                for _ in 0..self.rng.usize(1..4) {
                    c.push(self.id());
                }
                c.push(b("JUSTID"));
                if self.rng.bool() {
                    c.extend([b("RETRYCOUNT"), b(self.pick(&["0", "5", "x"]))]);
                }
                if self.rng.u8(..4) == 0 {
                    c.push(b("FORCE"));
                }
                if self.rng.u8(..4) == 0 {
                    c.extend([b("LASTID"), self.id()]);
                }
                c
            }
            32 => {
                let mut c = vec![
                    b("XAUTOCLAIM"),
                    k,
                    self.group(),
                    self.consumer(),
                    b(self.pick(&["0", "x", "-5"])),
                    self.bound(),
                ];
                if self.rng.bool() {
                    c.extend([b("COUNT"), b(self.pick(&["1", "2", "100", "0", "-1"]))]);
                }
                c.push(b("JUSTID"));
                c
            }
            33 => vec![b("XINFO"), b("STREAM"), k],
            34 => vec![b("XINFO"), b("GROUPS"), k],
            35 => vec![b("TYPE"), k],
            36 => vec![b("OBJECT"), b("ENCODING"), k],
            37 => vec![b("DEL"), k],
            38 => vec![b("SET"), b("str"), b("x")],
            _ => vec![
                b(self.pick(&["XADD", "XLEN", "XRANGE", "XGROUP", "XINFO"])),
                k,
            ],
        }
    }
}

#[test]
fn stream_sequences_match_redis() {
    let mut configured = false;
    diff::run(|rng| {
        if !configured {
            configured = true;
            // Small nodes, so splits and whole-node trims happen often.
            return vec![
                vec![b("CONFIG"), b("SET"), b("stream-node-max-entries"), b("4")],
                vec![b("CONFIG"), b("SET"), b("stream-node-max-bytes"), b("200")],
            ];
        }
        if rng.u8(..12) == 0 {
            diff::transaction(rng, |r| Gen { rng: r }.command())
        } else {
            vec![Gen { rng }.command()]
        }
    });
}
