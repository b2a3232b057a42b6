//! Differential test of the set commands against a real redis-server (see
//! `common/diff.rs`): random sequences over a small pool of keys and
//! members, with integer members (intsets, including width upgrades),
//! strings and non-canonical integers (hashtables), conversions at a
//! changing `set-max-intset-entries`, keys of another type, bad numbers,
//! wrong arities and transactions.

mod common;

use common::diff::{self, b, Gen};

impl Gen<'_> {
    /// Mostly set keys; `str` only ever holds a string.
    fn key(&mut self) -> Vec<u8> {
        if self.rng.u8(..10) == 0 {
            b("str")
        } else {
            format!("s{}", self.rng.u8(..5)).into_bytes()
        }
    }

    fn keys(&mut self, n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|_| self.key()).collect()
    }

    fn member(&mut self) -> Vec<u8> {
        match self.rng.u8(..10) {
            0..=4 => self.rng.i64(-3..12).to_string().into_bytes(),
            5 => b(self.pick(&[
                "70000",
                "-40000",
                "9223372036854775807",
                "-9223372036854775808",
                "4294967296",
            ])),
            6 => b(self.pick(&["01", "-0", "+1", "1.5", " 2", ""])),
            _ => b(self.pick(&["a", "b", "c", "dd", "élan"])),
        }
    }

    fn members(&mut self, min: usize) -> Vec<Vec<u8>> {
        (0..self.rng.usize(min..min + 4))
            .map(|_| self.member())
            .collect()
    }

    /// A command whose reply does not depend on randomness or on hashtable
    /// order (usable inside MULTI, where replies are not normalised).
    fn ordered_command(&mut self) -> Vec<Vec<u8>> {
        let k = self.key();
        match self.rng.u8(..14) {
            0..=2 => [vec![b("SADD"), k], self.members(1)].concat(),
            3 => [vec![b("SREM"), k], self.members(1)].concat(),
            4 => vec![b("SISMEMBER"), k, self.member()],
            5 => [vec![b("SMISMEMBER"), k], self.members(1)].concat(),
            6 => vec![b("SCARD"), k],
            7 => vec![b("SMOVE"), k, self.key(), self.member()],
            8 => {
                let n = self.rng.usize(1..4);
                let numkeys = b(self.pick(&["1", "2", "3", "0", "-1", "x", "9"]));
                let mut c = [vec![b("SINTERCARD"), numkeys], self.keys(n)].concat();
                if self.rng.bool() {
                    c.push(b(self.pick(&["LIMIT", "limit", "LIMIT", "BAD"])));
                    c.push(b(self.pick(&["0", "1", "2", "-1", "x"])));
                }
                c
            }
            9 => {
                let cmd = self.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]);
                let n = self.rng.usize(1..4);
                [vec![b(cmd), self.key()], self.keys(n)].concat()
            }
            10 => vec![b("OBJECT"), b("ENCODING"), k],
            11 => vec![b(self.pick(&["TYPE", "EXISTS", "DEL"])), k],
            12 => vec![
                b(self.pick(&["SADD", "SREM", "SMISMEMBER", "SCARD", "SMOVE"])),
                k,
            ],
            _ => vec![b("COPY"), k, self.key(), b("REPLACE")],
        }
    }

    /// Any command of the family, including the random and unordered ones.
    fn command(&mut self) -> Vec<Vec<u8>> {
        let k = self.key();
        match self.rng.u8(..30) {
            0..=13 => self.ordered_command(),
            14 => vec![b("SMEMBERS"), k],
            15 | 16 => {
                let cmd = self.pick(&["SINTER", "SUNION", "SDIFF"]);
                let n = self.rng.usize(1..4);
                [vec![b(cmd)], self.keys(n)].concat()
            }
            17 => {
                let mut c = vec![b("SRANDMEMBER"), k];
                if self.rng.u8(..4) > 0 {
                    c.push(b(self.pick(&[
                        "0",
                        "1",
                        "2",
                        "5",
                        "100",
                        "-1",
                        "-5",
                        "x",
                        "9223372036854775807",
                        "-9223372036854775808",
                    ])));
                }
                c
            }
            18 => {
                let mut c = vec![b("SSCAN"), k, b(self.pick(&["0", "0", "x", " 1"]))];
                match self.rng.u8(..5) {
                    0 => c.extend([b("MATCH"), b(self.pick(&["*", "1*", "[a-c]", "-*"]))]),
                    1 => c.extend([b("COUNT"), b(self.pick(&["0", "x", "1000"]))]),
                    2 => c.extend([b("TYPE"), b("set")]),
                    3 => c.push(b("COUNT")),
                    _ => {}
                }
                if !c.iter().any(|a| a == b"COUNT") {
                    // One call covers any set of the pool, so the cursor
                    // comes back as 0 on both servers.
                    c.extend([b("COUNT"), b("1000")]);
                }
                c
            }
            19 => vec![b("SET"), b("str"), b("x")],
            20 => vec![
                b("CONFIG"),
                b("SET"),
                b("set-max-intset-entries"),
                b(self.pick(&["1", "3", "512"])),
            ],
            21 => vec![b("SPOP"), k, b(self.pick(&["100", "9223372036854775807"]))],
            22 => vec![b("SPOP"), k, b(self.pick(&["-1", "x", "0"]))],
            23 => vec![b("SPOP"), k, b("1"), b("2")],
            24 => vec![b("SRANDMEMBER"), k, b("1"), b("2")],
            25 => vec![b("RENAME"), k, self.key()],
            26 => vec![b("EXPIRE"), k, b("1000")],
            _ => self.ordered_command(),
        }
    }

    /// A step: mostly one command; SPOP of random members followed by a
    /// DEL of its key (the two servers pop different members); sometimes a
    /// transaction.
    fn step(&mut self) -> diff::Step {
        match self.rng.u8(..16) {
            0 => diff::transaction(self.rng, |r| Gen { rng: r }.ordered_command()),
            1 => {
                let k = self.key();
                let mut pop = vec![b("SPOP"), k.clone()];
                if self.rng.bool() {
                    pop.push(b(self.pick(&["1", "2", "3"])));
                }
                vec![pop, vec![b("DEL"), k]]
            }
            _ => vec![self.command()],
        }
    }
}

#[test]
fn random_set_sequences_match_redis() {
    diff::run(|rng| Gen { rng }.step());
}
