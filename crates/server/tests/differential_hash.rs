//! Differential test of the hash commands against a real redis-server (see
//! `common/diff.rs`).
//!
//! Keys `h0`..`h3` stay small (short fields and values, few of them), so
//! they remain listpack-encoded and every reply, including HGETALL's
//! insertion order, must match exactly. Keys `unordered:0`..`unordered:2`
//! get long values and bulk inserts, so they convert to hashtables; replies
//! listing their contents are compared after sorting (the rule in
//! `normalise`), and OBJECT ENCODING checks both servers convert at the same
//! moment. `s0` and `str` hold strings for WRONGTYPE errors.

mod common;

use common::diff::{self, b, Gen};

/// Argument lists are built from byte vectors.
type Cmd = Vec<Vec<u8>>;

impl Gen<'_> {
    /// Any key: small hashes, big hashes, the string, a missing key.
    fn key(&mut self) -> Vec<u8> {
        match self.rng.u8(..10) {
            0..=4 => format!("h{}", self.rng.u8(..4)).into_bytes(),
            5..=7 => format!("unordered:{}", self.rng.u8(..3)).into_bytes(),
            8 => b("s0"),
            _ => b("missing"),
        }
    }

    fn is_big(key: &[u8]) -> bool {
        key.starts_with(b"unordered:")
    }

    /// A field: a small pool so writes collide; `n*` fields get HINCRBY,
    /// `x*` fields HINCRBYFLOAT.
    fn field(&mut self) -> Vec<u8> {
        match self.rng.u8(..10) {
            0..=5 => format!("f{}", self.rng.u8(..6)).into_bytes(),
            6 | 7 => format!("n{}", self.rng.u8(..2)).into_bytes(),
            8 => format!("x{}", self.rng.u8(..2)).into_bytes(),
            _ => b(""),
        }
    }

    /// A value for `key`: long ones (converting the hash) only for big keys.
    fn value(&mut self, key: &[u8]) -> Vec<u8> {
        match self.rng.u8(..8) {
            0 => self.rng.i64(-1000..1000).to_string().into_bytes(),
            1 => b(""),
            2 => b(self.pick(&["1.5", " 1", "1 ", "-0", "abc", "0x10"])),
            3 if Self::is_big(key) => (0..self.rng.usize(60..80))
                .map(|_| b'a' + self.rng.u8(..3))
                .collect(),
            _ => (0..self.rng.usize(1..8))
                .map(|_| b'a' + self.rng.u8(..4))
                .collect(),
        }
    }

    /// HSET/HMSET with a few pairs, or (big keys) many new fields at once.
    fn set_pairs(&mut self, name: &str, key: Vec<u8>) -> Cmd {
        let mut c = vec![b(name), key.clone()];
        if Self::is_big(&key) && self.rng.u8(..8) == 0 {
            let base = self.rng.u16(..1000);
            for i in 0..self.rng.u16(60..140) {
                c.push(format!("bulk{}", base + i).into_bytes());
                c.push(self.value(&key));
            }
            return c;
        }
        for _ in 0..self.rng.usize(1..4) {
            c.push(self.field());
            c.push(self.value(&key));
        }
        if self.rng.u8(..15) == 0 {
            c.pop();
        }
        c
    }

    /// One random command; `in_tx` leaves out replies that are compared
    /// after sorting (the normalisation does not look inside EXEC).
    fn command(&mut self, in_tx: bool) -> Cmd {
        let k = self.key();
        let ordered_ok = !in_tx || !Self::is_big(&k);
        match self.rng.u8(..32) {
            0..=3 => self.set_pairs("HSET", k),
            4 => self.set_pairs("HMSET", k),
            5 => {
                let v = self.value(&k);
                vec![b("HSETNX"), k, self.field(), v]
            }
            6 | 7 => vec![b("HGET"), k, self.field()],
            8 => vec![b("HMGET"), k, self.field(), self.field(), self.field()],
            9 | 10 => {
                let mut c = vec![b("HDEL"), k];
                for _ in 0..self.rng.usize(1..4) {
                    c.push(self.field());
                }
                c
            }
            11 => vec![b("HLEN"), k],
            12 => vec![b("HSTRLEN"), k, self.field()],
            13 => vec![b("HEXISTS"), k, self.field()],
            14 if ordered_ok => vec![b("HKEYS"), k],
            15 if ordered_ok => vec![b("HVALS"), k],
            16 | 17 if ordered_ok => vec![b("HGETALL"), k],
            18 | 19 => {
                let f = format!("n{}", self.rng.u8(..2)).into_bytes();
                let by = self.pick(&[
                    "1",
                    "-3",
                    "100",
                    "x",
                    "9223372036854775807",
                    "-9223372036854775808",
                ]);
                vec![b("HINCRBY"), k, f, b(by)]
            }
            20 => vec![
                b("HSET"),
                k,
                format!("n{}", self.rng.u8(..2)).into_bytes(),
                b(self.pick(&["9223372036854775806", "-9223372036854775807", "7"])),
            ],
            21 | 22 => {
                let f = format!("x{}", self.rng.u8(..2)).into_bytes();
                let by = self.pick(&["1.5", "-0.25", "3", "1e3", "abc", "inf", "-inf", "nan", ""]);
                vec![b("HINCRBYFLOAT"), k, f, b(by)]
            }
            23 if ordered_ok => {
                let mut c = vec![b("HRANDFIELD"), k];
                c.push(b(self.pick(&[
                    "0",
                    "100000",
                    "x",
                    "-9223372036854775808",
                    "2000",
                ])));
                match self.rng.u8(..4) {
                    0 => c.push(b("WITHVALUES")),
                    1 => c.push(b("BAD")),
                    _ => {}
                }
                c
            }
            // Keys no other command writes as a hash: the reply is not random.
            24 => vec![b("HRANDFIELD"), b(self.pick(&["str", "nokey"]))],
            25 if ordered_ok => {
                // A hashtable's cursors are implementation-specific: big
                // keys are scanned from 0 with a COUNT that covers them.
                let big = Self::is_big(&k);
                let cursor = if big {
                    "0"
                } else {
                    self.pick(&["0", "0", "x", "-1", "7"])
                };
                let mut c = vec![b("HSCAN"), k, b(cursor)];
                match self.rng.u8(..5) {
                    0 => c.extend([b("MATCH"), b(self.pick(&["f*", "*", "n?", "bulk1*"]))]),
                    1 => c.extend([b("COUNT"), b(self.pick(&["100000", "0", "x"]))]),
                    2 => c.push(b("COUNT")),
                    _ => {}
                }
                if big {
                    c.extend([b("COUNT"), b("100000")]);
                }
                c
            }
            26 => vec![b("OBJECT"), b("ENCODING"), k],
            27 => vec![b("TYPE"), k],
            28 => vec![b("SET"), b(self.pick(&["s0", "str"])), b("str")],
            29 => vec![b("DEL"), k],
            30 => vec![
                b(self.pick(&["HSET", "HGET", "HDEL", "HLEN", "HINCRBY"])),
                k,
            ],
            _ => vec![b("EXISTS"), k],
        }
    }
}

#[test]
fn hash_sequences_match_redis() {
    diff::run(|rng| {
        if rng.u8(..12) == 0 {
            diff::transaction(rng, |r| Gen { rng: r }.command(true))
        } else {
            vec![Gen { rng }.command(false)]
        }
    });
}
