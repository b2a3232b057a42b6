//! Differential test of the bit commands against a real redis-server (see
//! `common/diff.rs`): random SETBIT/GETBIT/BITCOUNT/BITPOS/BITOP/BITFIELD/
//! BITFIELD_RO sequences over a few keys holding short and long strings,
//! integers, all-ones and all-zeros runs, a list (WRONGTYPE), with random
//! and edge-case offsets, ranges, units, field types and overflow policies,
//! bad arguments and transactions. Replies must match byte for byte; GET
//! and BITCOUNT/BITPOS of whole strings check the stored bytes too.

mod common;

use common::diff::{self, b, Gen};

impl Gen<'_> {
    /// Mostly string keys; `list` only ever holds a list.
    fn key(&mut self) -> Vec<u8> {
        if self.rng.u8(..12) == 0 {
            b("list")
        } else {
            format!("b{}", self.rng.u8(..5)).into_bytes()
        }
    }

    /// A string value: random bytes, runs of 0x00/0xFF (word-skipping
    /// paths), integers (int encoding) or empty.
    fn value(&mut self) -> Vec<u8> {
        let len = match self.rng.u8(..4) {
            0 => self.rng.usize(..4),
            1 => self.rng.usize(..20),
            _ => self.rng.usize(..90),
        };
        match self.rng.u8(..6) {
            0 => self.rng.i64(-5000..5000).to_string().into_bytes(),
            1 => vec![0xFF; len],
            2 => vec![0; len],
            3 => {
                let mut v = vec![0u8; len];
                if let Some(x) = v.last_mut() {
                    *x = 1 << self.rng.u8(..8);
                }
                v
            }
            _ => (0..len).map(|_| self.rng.u8(..)).collect(),
        }
    }

    /// A bit offset: small, near the end of typical values, or invalid.
    fn offset(&mut self) -> Vec<u8> {
        match self.rng.u8(..12) {
            0 => b(self.pick(&["-1", "x", "", "4294967296", "1.0", "#3"])),
            1..=3 => self.rng.u64(..16).to_string().into_bytes(),
            _ => self.rng.u64(..800).to_string().into_bytes(),
        }
    }

    /// A range index: mostly small, sometimes negative, huge or invalid.
    fn index(&mut self) -> Vec<u8> {
        match self.rng.u8(..14) {
            0 => b(self.pick(&["x", "9223372036854775807", "-9223372036854775808", "1e3"])),
            1..=4 => self.rng.i64(-100..0).to_string().into_bytes(),
            5..=7 => self.rng.i64(0..12).to_string().into_bytes(),
            _ => self.rng.i64(0..700).to_string().into_bytes(),
        }
    }

    fn unit(&mut self) -> Vec<u8> {
        b(self.pick(&["BYTE", "BIT", "bit", "Byte", "bits"]))
    }

    /// A BITFIELD type, sometimes invalid.
    fn field_type(&mut self) -> Vec<u8> {
        if self.rng.u8(..15) == 0 {
            return b(self.pick(&["u64", "i65", "i0", "U8", "x8", "i", "u08"]));
        }
        let bits = match self.rng.u8(..3) {
            0 => self.rng.u8(1..9),
            1 => self.rng.u8(1..65),
            _ => *[8u8, 16, 32, 63, 64].get(self.rng.usize(..5)).unwrap_or(&8),
        };
        let signed = self.rng.bool() || bits == 64;
        format!("{}{bits}", if signed { 'i' } else { 'u' }).into_bytes()
    }

    /// A BITFIELD offset: plain, `#N` positional, or invalid.
    fn field_offset(&mut self) -> Vec<u8> {
        match self.rng.u8(..10) {
            0 => b(self.pick(&["-1", "#-1", "#", "x", "4294967296"])),
            1..=3 => format!("#{}", self.rng.u8(..12)).into_bytes(),
            _ => self.rng.u64(..300).to_string().into_bytes(),
        }
    }

    /// A SET value or INCRBY increment, often near the limits.
    fn field_value(&mut self) -> Vec<u8> {
        match self.rng.u8(..10) {
            0 => b(self.pick(&[
                "9223372036854775807",
                "-9223372036854775808",
                "x",
                "4611686018427387904",
            ])),
            1..=2 => self.rng.i64(-300..300).to_string().into_bytes(),
            3 => self.rng.i64(..).to_string().into_bytes(),
            _ => self.rng.i64(-5..20).to_string().into_bytes(),
        }
    }

    /// BITFIELD/BITFIELD_RO subcommands (sometimes truncated or unknown).
    fn field_ops(&mut self, read_only: bool) -> Vec<Vec<u8>> {
        let mut c = Vec::new();
        for _ in 0..self.rng.usize(..5) {
            match self.rng.u8(..20) {
                0 => c.push(b(self.pick(&["GET", "SET", "FOO", "overflow"]))),
                1..=3 => {
                    c.push(b("OVERFLOW"));
                    c.push(b(self.pick(&["WRAP", "SAT", "FAIL", "fail", "sat", "NONE"])));
                }
                4..=9 if !read_only || self.rng.u8(..6) == 0 => {
                    c.push(b(self.pick(&["SET", "INCRBY", "set", "incrby"])));
                    c.push(self.field_type());
                    c.push(self.field_offset());
                    c.push(self.field_value());
                }
                _ => {
                    c.push(b(self.pick(&["GET", "get"])));
                    c.push(self.field_type());
                    c.push(self.field_offset());
                }
            }
        }
        c
    }

    fn command(&mut self) -> Vec<Vec<u8>> {
        let k = self.key();
        match self.rng.u8(..22) {
            0 | 1 => vec![b("SET"), k, self.value()],
            2 => vec![b("GET"), k],
            3 => vec![b("DEL"), k],
            4 => vec![b("APPEND"), k, self.value()],
            5 | 6 => {
                let bit = b(self.pick(&["0", "1", "1", "2", "-1", "x"]));
                vec![b("SETBIT"), k, self.offset(), bit]
            }
            7 => vec![b("GETBIT"), k, self.offset()],
            8..=10 => {
                let mut c = vec![b("BITCOUNT"), k];
                match self.rng.u8(..6) {
                    0 => {}
                    1 => c.push(self.index()),
                    5 => c.extend([self.index(), self.index(), self.unit(), self.unit()]),
                    _ => c.extend([self.index(), self.index()]),
                }
                if c.len() == 4 && self.rng.bool() {
                    c.push(self.unit());
                }
                c
            }
            11..=13 => {
                let bit = b(self.pick(&["0", "1", "0", "1", "2", "x"]));
                let mut c = vec![b("BITPOS"), k, bit];
                for _ in 0..self.rng.usize(..3) {
                    c.push(self.index());
                }
                if c.len() == 5 && self.rng.bool() {
                    c.push(self.unit());
                }
                if self.rng.u8(..20) == 0 {
                    c.push(self.unit());
                }
                c
            }
            14 | 15 => {
                let op = b(self.pick(&["AND", "OR", "XOR", "NOT", "not", "and", "NAND"]));
                let mut c = vec![b("BITOP"), op, k];
                let n = if self.rng.u8(..4) == 0 { 2 } else { 1 };
                for _ in 0..self.rng.usize(1..=n * 2) {
                    c.push(self.key());
                }
                c
            }
            16..=18 => {
                let mut c = vec![b("BITFIELD"), k];
                c.extend(self.field_ops(false));
                c
            }
            19 => {
                let mut c = vec![b("BITFIELD_RO"), k];
                c.extend(self.field_ops(true));
                c
            }
            20 => vec![b("RPUSH"), b("list"), b("x")],
            _ => vec![b("STRLEN"), k],
        }
    }

    fn step(&mut self) -> diff::Step {
        if self.rng.u8(..15) == 0 {
            diff::transaction(self.rng, |r| Gen { rng: r }.command())
        } else {
            vec![self.command()]
        }
    }
}

#[test]
fn random_bit_sequences_match_redis() {
    diff::run(|rng| Gen { rng }.step());
}
