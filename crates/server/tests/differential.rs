//! Differential test of the string, keyspace, expiry and transaction
//! commands against a real redis-server (see `common/diff.rs`).

mod common;

use common::diff::{self, Gen};

/// Keys, fields and values are drawn from small pools so commands collide.
impl Gen<'_> {
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
                // GT/LT compare against an expiry set a moment earlier; with
                // a relative TTL the answer would depend on whether a
                // millisecond passed in between (on either server), so those
                // use absolute times.
                let opt = self.pick(&["NX", "XX", "GT", "LT", "NX"]);
                if matches!(opt, "GT" | "LT") {
                    let at = self.pick(&["4000000000", "4100000000"]);
                    vec![b("EXPIREAT"), k, b(at), b(opt)]
                } else {
                    vec![b("EXPIRE"), k, b("1500"), b(opt)]
                }
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
}

#[test]
fn random_sequences_match_redis() {
    diff::run(|rng| {
        if rng.u8(..12) == 0 {
            diff::transaction(rng, |r| Gen { rng: r }.command())
        } else {
            vec![Gen { rng }.command()]
        }
    });
}
