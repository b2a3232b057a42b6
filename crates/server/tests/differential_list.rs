//! Differential test of the list commands against a real redis-server (see
//! `common/diff.rs`): random pushes, pops, edits and reads over a few keys,
//! with wrong types, bad numbers, wrong arities and transactions mixed in.

mod common;

use common::diff::{self, Gen};

/// Keys and elements come from small pools so commands collide.
impl Gen<'_> {
    fn key(&mut self) -> Vec<u8> {
        format!("l{}", self.rng.u8(..5)).into_bytes()
    }

    /// Elements: small integers (stored packed), short strings, a few long
    /// ones and edge cases.
    fn elem(&mut self) -> Vec<u8> {
        match self.rng.u8(..10) {
            0 => self.rng.i64(-3000..3000).to_string().into_bytes(),
            1 => b"".to_vec(),
            2 => vec![b'x'; self.rng.usize(60..70)],
            3 => i64::MIN.to_string().into_bytes(),
            4 => b"007".to_vec(),
            _ => vec![b'a' + self.rng.u8(..4)],
        }
    }

    fn int(&mut self) -> Vec<u8> {
        match self.rng.u8(..14) {
            0 => b"x".to_vec(),
            1 => i64::MIN.to_string().into_bytes(),
            2 => i64::MAX.to_string().into_bytes(),
            3 => b"1.5".to_vec(),
            _ => self.rng.i64(-8..12).to_string().into_bytes(),
        }
    }

    fn side(&mut self) -> Vec<u8> {
        self.pick(&["LEFT", "RIGHT", "left", "Right", "up"])
            .as_bytes()
            .to_vec()
    }

    /// One random command.
    fn command(&mut self) -> Vec<Vec<u8>> {
        let k = self.key();
        let b = |s: &str| s.as_bytes().to_vec();
        match self.rng.u8(..32) {
            0..=3 => {
                let name = self.pick(&["LPUSH", "RPUSH", "LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]);
                let mut c = vec![b(name), k];
                for _ in 0..self.rng.usize(1..6) {
                    c.push(self.elem());
                }
                c
            }
            4 | 5 => {
                let mut c = vec![b(self.pick(&["LPOP", "RPOP"])), k];
                match self.rng.u8(..6) {
                    0 | 1 => c.push(self.int()),
                    2 => c.push(b("0")),
                    3 => c.extend([b("1"), b("2")]),
                    _ => {}
                }
                c
            }
            6 => vec![b("LLEN"), k],
            7 | 8 => vec![b("LRANGE"), k, self.int(), self.int()],
            9 => vec![b("LINDEX"), k, self.int()],
            10 => vec![b("LSET"), k, self.int(), self.elem()],
            11 => vec![
                b("LINSERT"),
                k,
                b(self.pick(&["BEFORE", "AFTER", "after", "middle"])),
                self.elem(),
                self.elem(),
            ],
            12 => vec![b("LREM"), k, self.int(), self.elem()],
            13 => vec![b("LTRIM"), k, self.int(), self.int()],
            14 | 15 => {
                let mut c = vec![b("LPOS"), k, self.elem()];
                for _ in 0..self.rng.usize(..4) {
                    let opt = self.pick(&["RANK", "COUNT", "MAXLEN", "rank", "BAD"]);
                    c.push(b(opt));
                    if self.rng.u8(..10) > 0 {
                        c.push(self.int());
                    }
                }
                c
            }
            16 => vec![b("LMOVE"), k, self.key(), self.side(), self.side()],
            17 => vec![b("RPOPLPUSH"), k, self.key()],
            18 => {
                let n = self.rng.usize(..4);
                let mut c = vec![b("LMPOP")];
                c.push(if self.rng.u8(..8) == 0 {
                    self.int()
                } else {
                    n.to_string().into_bytes()
                });
                for _ in 0..n {
                    c.push(self.key());
                }
                if self.rng.u8(..8) > 0 {
                    c.push(self.side());
                }
                if self.rng.bool() {
                    c.push(b(self.pick(&["COUNT", "count", "BAD"])));
                    if self.rng.u8(..6) > 0 {
                        c.push(self.int());
                    }
                }
                c
            }
            19 => vec![b("SET"), k, b("str")],
            20 => vec![b("SADD"), k, b("m")],
            21 => vec![b("DEL"), k],
            22 => vec![b("TYPE"), k],
            23 => vec![b("OBJECT"), b("ENCODING"), k],
            24 => vec![b("EXISTS"), k],
            25 => vec![b("COPY"), k, self.key()],
            26 => vec![b("RENAME"), k, self.key()],
            27 => {
                // Wrong arity.
                let name =
                    self.pick(&["LPUSH", "LLEN", "LRANGE", "LINDEX", "LSET", "LMOVE", "LPOS"]);
                vec![b(name)]
            }
            28 => vec![b("LRANGE"), k, b("0"), b("-1")],
            29 => {
                let mut c = vec![b("RPUSH"), k];
                for i in 0..self.rng.usize(100..300) {
                    c.push(format!("e{}", i % 7).into_bytes());
                }
                c
            }
            30 => vec![b("LREM"), k, b("0"), self.elem()],
            31 if self.rng.u8(..4) == 0 => vec![
                b("CONFIG"),
                b("SET"),
                b(self.pick(&["list-max-listpack-size", "list-max-ziplist-size"])),
                b(self.pick(&["-2", "-1", "1", "2", "3", "128"])),
            ],
            _ => vec![b("LINDEX"), k, b(self.pick(&["0", "-1", "1", "-2"]))],
        }
    }
}

#[test]
fn random_list_sequences_match_redis() {
    diff::run(|rng| {
        if rng.u8(..12) == 0 {
            diff::transaction(rng, |r| Gen { rng: r }.command())
        } else {
            vec![Gen { rng }.command()]
        }
    });
}
