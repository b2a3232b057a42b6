//! Listpacks as RDB stores them (hash, sorted set and list node payloads
//! since Redis 7.0), written and read from the format description:
//!
//! ```text
//! total-bytes:u32le  count:u16le (65535 = unknown)  entry*  0xFF
//! entry = encoding [data] backlen
//! ```
//!
//! Integers that a string parses to canonically are stored in binary:
//! `0xxxxxxx` (0 … 127), `110xxxxx` + 1 byte (13-bit signed), `0xF1` …
//! `0xF4` + 2/3/4/8 little-endian bytes. Strings are `10xxxxxx` (< 64
//! bytes), `1110xxxx` + 1 byte (< 4096) or `0xF0` + a 4-byte length.
//! `backlen` is the size of encoding plus data, written so it can be read
//! from the right: 7 bits per byte, the byte nearest the entry's start
//! holding the highest bits and every other byte flagged with 0x80.

use vireo_resp::number::parse_i64;

use super::Packed;

/// Header bytes: total size and entry count.
const HEADER: usize = 6;
/// The terminator byte.
const END: u8 = 0xFF;
/// The count field's "too many to count" value.
const COUNT_UNKNOWN: u16 = u16::MAX;

/// Builds a listpack entry by entry.
pub struct Builder {
    buf: Vec<u8>,
    count: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// An empty listpack.
    pub fn new() -> Self {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&[0; HEADER]);
        Builder { buf, count: 0 }
    }

    /// Bytes the finished listpack would have so far.
    pub fn bytes(&self) -> usize {
        self.buf.len() + 1
    }

    /// Entries pushed so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Bytes an entry for `s` takes (encoding, data and backlen).
    pub fn entry_size(s: &[u8]) -> usize {
        match parse_i64(s) {
            Some(v) => Builder::int_entry_size(v),
            None => {
                let body = str_header_len(s.len()) + s.len();
                body + backlen_len(body)
            }
        }
    }

    /// Bytes an entry for the integer `v` takes.
    pub fn int_entry_size(v: i64) -> usize {
        let body = int_body_len(v);
        body + backlen_len(body)
    }

    /// Appends a string, stored as an integer when it is a canonical one.
    pub fn push(&mut self, s: &[u8]) {
        match parse_i64(s) {
            Some(v) => self.push_int(v),
            None => self.push_str(s),
        }
    }

    /// Appends an integer.
    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        let b = &mut self.buf;
        match v {
            0..=127 => b.push(v as u8),
            -4096..=4095 => {
                let u = (v as u16) & 0x1fff;
                b.extend_from_slice(&[0xC0 | (u >> 8) as u8, u as u8]);
            }
            _ if i16::try_from(v).is_ok() => {
                b.push(0xF1);
                b.extend_from_slice(&(v as i16).to_le_bytes());
            }
            -0x80_0000..=0x7f_ffff => {
                b.push(0xF2);
                b.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            _ if i32::try_from(v).is_ok() => {
                b.push(0xF3);
                b.extend_from_slice(&(v as i32).to_le_bytes());
            }
            _ => {
                b.push(0xF4);
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        self.end_entry(start);
    }

    /// Appends a string as a string (no integer detection).
    fn push_str(&mut self, s: &[u8]) {
        let start = self.buf.len();
        let n = s.len();
        if n < 64 {
            self.buf.push(0x80 | n as u8);
        } else if n < 4096 {
            self.buf
                .extend_from_slice(&[0xE0 | (n >> 8) as u8, n as u8]);
        } else {
            self.buf.push(0xF0);
            // A listpack never holds a 4 GiB entry: callers cap node sizes.
            self.buf
                .extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        self.end_entry(start);
    }

    /// Writes the backlen of the entry that started at `start`.
    fn end_entry(&mut self, start: usize) {
        let body = self.buf.len() - start;
        let groups = backlen_len(body);
        for k in (0..groups).rev() {
            let bits = ((body >> (7 * k)) & 0x7f) as u8;
            self.buf
                .push(if k + 1 == groups { bits } else { bits | 0x80 });
        }
        self.count += 1;
    }

    /// The finished listpack bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(END);
        let total = u32::try_from(self.buf.len()).unwrap_or(u32::MAX);
        let count = u16::try_from(self.count).unwrap_or(COUNT_UNKNOWN);
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// Bytes of encoding plus data for the integer `v`.
fn int_body_len(v: i64) -> usize {
    match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        _ if i16::try_from(v).is_ok() => 3,
        -0x80_0000..=0x7f_ffff => 4,
        _ if i32::try_from(v).is_ok() => 5,
        _ => 9,
    }
}

/// Bytes of the encoding of a string of `n` bytes.
fn str_header_len(n: usize) -> usize {
    match n {
        0..=63 => 1,
        64..=4095 => 2,
        _ => 5,
    }
}

/// Bytes of the backlen for an entry body of `body` bytes.
fn backlen_len(body: usize) -> usize {
    match body {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Validates a whole listpack and returns its entries in order.
///
/// Every check Redis's deep sanitisation makes is made: the header's size
/// matches the blob, each entry's encoding and length stay inside it, each
/// backlen matches its entry, the terminator is the last byte and the count
/// (when known) matches.
pub fn entries(lp: &[u8]) -> Result<Vec<Packed<'_>>, String> {
    match sound_prefix(lp)? {
        (out, None) => Ok(out),
        (_, Some(damage)) => Err(damage),
    }
}

/// The entries of a listpack whose frame passes Redis's shallow check
/// (size in the header, terminator last), up to the first one that does
/// not decode, with what was wrong past them (None when every entry and
/// the count are sound). Err when the frame itself is damaged.
///
/// This is what a payload restored with `sanitize-dump-payload no` keeps:
/// Redis would store such a blob as it is and crash when it reaches the
/// damage; Vireo keeps the sound entries before it.
pub fn sound_prefix(lp: &[u8]) -> Result<(Vec<Packed<'_>>, Option<String>), String> {
    if lp.len() < HEADER + 1 {
        return Err("listpack shorter than its header".into());
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    if total != lp.len() {
        return Err(format!(
            "listpack header says {total} bytes, blob has {}",
            lp.len()
        ));
    }
    let count = u16::from_le_bytes([lp[4], lp[5]]);
    let end = lp.len() - 1;
    if lp[end] != END {
        return Err("listpack does not end with its terminator".into());
    }
    let mut out = Vec::with_capacity(usize::from(count).min(4096));
    let mut p = HEADER;
    while p < end {
        match entry_at(lp, p, end) {
            Ok((entry, size)) => {
                out.push(entry);
                p += size;
            }
            Err(damage) => return Ok((out, Some(damage))),
        }
    }
    if count != COUNT_UNKNOWN && usize::from(count) != out.len() {
        let damage = format!(
            "listpack header counts {count} entries, found {}",
            out.len()
        );
        return Ok((out, Some(damage)));
    }
    Ok((out, None))
}

/// Decodes and checks the entry at `p` (before the terminator at `end`);
/// returns it with its whole size, backlen included.
fn entry_at(lp: &[u8], p: usize, end: usize) -> Result<(Packed<'_>, usize), String> {
    let (entry, body) = decode_entry(&lp[p..end])?;
    let bl = backlen_len(body);
    let back = lp
        .get(p + body..p + body + bl)
        .filter(|_| p + body + bl <= end)
        .ok_or("listpack entry runs past the end")?;
    let mut v = 0usize;
    for &b in back {
        v = (v << 7) | usize::from(b & 0x7f);
    }
    // Highest bits first and unflagged, every later byte flagged, so a
    // reader coming from the right knows where the backlen starts.
    let layout_ok = back[0] & 0x80 == 0 && back[1..].iter().all(|b| b & 0x80 != 0);
    if v != body || !layout_ok {
        return Err("listpack entry has a wrong backlen".into());
    }
    Ok((entry, body + bl))
}

/// Decodes the entry at the start of `b` (which excludes the terminator);
/// returns it with the size of its encoding plus data.
fn decode_entry(b: &[u8]) -> Result<(Packed<'_>, usize), String> {
    let need = |n: usize| -> Result<&[u8], String> {
        b.get(..n)
            .ok_or_else(|| "listpack entry runs past the end".to_string())
    };
    let e = b[0];
    let int = |n: usize| -> Result<i64, String> {
        let d = need(1 + n)?;
        let mut v: i64 = 0;
        for (k, &x) in d[1..].iter().enumerate() {
            v |= i64::from(x) << (8 * k);
        }
        let shift = 64 - 8 * n as u32;
        Ok((v << shift) >> shift)
    };
    let string = |hdr: usize, n: usize| -> Result<(Packed<'_>, usize), String> {
        let end = hdr
            .checked_add(n)
            .ok_or("listpack string length overflows")?;
        Ok((Packed::Str(&need(end)?[hdr..]), end))
    };
    match e {
        0x00..=0x7F => Ok((Packed::Int(i64::from(e)), 1)),
        0x80..=0xBF => string(1, usize::from(e & 0x3f)),
        0xC0..=0xDF => {
            let d = need(2)?;
            let u = i64::from(e & 0x1f) << 8 | i64::from(d[1]);
            Ok((Packed::Int(if u >= 1 << 12 { u - (1 << 13) } else { u }), 2))
        }
        0xE0..=0xEF => {
            let d = need(2)?;
            string(2, usize::from(e & 0x0f) << 8 | usize::from(d[1]))
        }
        0xF0 => {
            let d = need(5)?;
            string(5, u32::from_le_bytes([d[1], d[2], d[3], d[4]]) as usize)
        }
        0xF1 => Ok((Packed::Int(int(2)?), 3)),
        0xF2 => Ok((Packed::Int(int(3)?), 4)),
        0xF3 => Ok((Packed::Int(int(4)?), 5)),
        0xF4 => Ok((Packed::Int(int(8)?), 9)),
        _ => Err(format!("listpack entry has invalid encoding byte {e:#04x}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(lp: &[u8]) -> Vec<Vec<u8>> {
        entries(lp).unwrap().iter().map(|e| e.to_vec()).collect()
    }

    #[test]
    fn round_trips_every_encoding() {
        let long = vec![b'x'; 5000];
        let mid = vec![b'y'; 300];
        let items: Vec<Vec<u8>> = [
            &b"0"[..],
            b"127",
            b"128",
            b"-1",
            b"-4096",
            b"4095",
            b"-4097",
            b"32767",
            b"-32768",
            b"8388607",
            b"-8388608",
            b"2147483647",
            b"-2147483648",
            b"9223372036854775807",
            b"-9223372036854775808",
            b"",
            b"abc",
            b"007",
            &mid,
            &long,
        ]
        .iter()
        .map(|s| s.to_vec())
        .collect();
        let mut b = Builder::new();
        let mut predicted = 7;
        for it in &items {
            b.push(it);
            predicted += Builder::entry_size(it);
        }
        assert_eq!(b.bytes(), predicted);
        let lp = b.finish();
        assert_eq!(lp.len(), predicted);
        assert_eq!(strings(&lp), items);
        let e = entries(&lp).unwrap();
        assert_eq!(e[1], Packed::Int(127));
        assert_eq!(e[17], Packed::Str(b"007"));
    }

    #[test]
    fn decodes_redis_backlen_layout() {
        // Redis's own bytes for a 200-byte string: F0-less 12-bit header
        // E0 C8, data, then backlen 202 written as [0x01, 0xCA].
        let mut lp = vec![0, 0, 0, 0, 1, 0, 0xE0, 200];
        lp.extend_from_slice(&[b'z'; 200]);
        lp.extend_from_slice(&[0x01, 0xCA, 0xFF]);
        let n = lp.len() as u32;
        lp[0..4].copy_from_slice(&n.to_le_bytes());
        assert_eq!(strings(&lp), vec![vec![b'z'; 200]]);
    }

    #[test]
    fn rejects_damage() {
        let mut b = Builder::new();
        b.push(b"hello");
        b.push(b"12");
        let lp = b.finish();
        assert!(entries(&lp).is_ok());
        for i in 0..lp.len() {
            for x in [0u8, 0x7f, 0x80, 0xff] {
                let mut bad = lp.clone();
                bad[i] = x;
                if bad != lp {
                    // Must not panic; most corruptions are errors.
                    let _ = entries(&bad);
                }
            }
        }
        assert!(entries(&lp[..lp.len() - 1]).is_err());
        let mut wrong_count = lp.clone();
        wrong_count[4] = 3;
        assert!(entries(&wrong_count).is_err());
        let mut wrong_backlen = lp.clone();
        wrong_backlen[6 + 6] = 5;
        assert!(entries(&wrong_backlen).is_err());
    }
}
