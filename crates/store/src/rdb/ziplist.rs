//! Ziplists, the packed encoding RDB files before Redis 7.0 use for small
//! lists, hashes and sorted sets (read-only: Vireo writes listpacks).
//!
//! ```text
//! total-bytes:u32le  tail-offset:u32le  count:u16le (65535 = unknown)  entry*  0xFF
//! entry = prevlen encoding data
//! ```
//!
//! `prevlen` is the previous entry's size in 1 byte, or `0xFE` and 4
//! little-endian bytes. The encoding is `00llllll` (string < 64 bytes),
//! `01llllll llllllll` (14-bit big-endian length), `10______` + 4
//! big-endian length bytes, or an integer: `0xC0` int16, `0xD0` int32,
//! `0xE0` int64, `0xF0` int24, `0xFE` int8 (little-endian), `0xF1` …
//! `0xFD` the values 0 … 12 inline.

use super::Packed;

/// Header bytes.
const HEADER: usize = 10;
/// The terminator byte.
const END: u8 = 0xFF;

/// Validates a whole ziplist the way Redis's deep sanitisation does (sizes,
/// encodings, every prevlen, the tail offset and the count) and returns its
/// entries in order.
pub fn entries(zl: &[u8]) -> Result<Vec<Packed<'_>>, String> {
    if zl.len() < HEADER + 1 {
        return Err("ziplist shorter than its header".into());
    }
    let total = u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]) as usize;
    let tail = u32::from_le_bytes([zl[4], zl[5], zl[6], zl[7]]) as usize;
    let count = u16::from_le_bytes([zl[8], zl[9]]);
    if total != zl.len() {
        return Err(format!(
            "ziplist header says {total} bytes, blob has {}",
            zl.len()
        ));
    }
    let end = zl.len() - 1;
    if zl[end] != END {
        return Err("ziplist does not end with its terminator".into());
    }
    let mut out = Vec::with_capacity(usize::from(count).min(4096));
    let mut p = HEADER;
    let mut prev_size = 0;
    let mut last = HEADER;
    while p < end {
        let b = &zl[p..end];
        let (prevlen, plen) = match b[0] {
            0xFE => {
                let d = b.get(1..5).ok_or("ziplist entry runs past the end")?;
                (u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as usize, 5)
            }
            0xFF => return Err("ziplist entry has an invalid prevlen".into()),
            n => (usize::from(n), 1),
        };
        if prevlen != prev_size {
            return Err("ziplist entry's prevlen does not match the previous entry".into());
        }
        let (entry, body) = decode_entry(&b[plen..])?;
        out.push(entry);
        last = p;
        prev_size = plen + body;
        p += prev_size;
    }
    let expect_tail = if out.is_empty() { HEADER } else { last };
    if tail != expect_tail {
        return Err("ziplist tail offset is wrong".into());
    }
    if count != u16::MAX && usize::from(count) != out.len() {
        return Err(format!(
            "ziplist header counts {count} entries, found {}",
            out.len()
        ));
    }
    Ok(out)
}

/// Decodes encoding and data at the start of `b`; returns the entry and
/// their size.
fn decode_entry(b: &[u8]) -> Result<(Packed<'_>, usize), String> {
    let need = |n: usize| -> Result<&[u8], String> {
        b.get(..n)
            .ok_or_else(|| "ziplist entry runs past the end".to_string())
    };
    let e = *b.first().ok_or("ziplist entry runs past the end")?;
    let string = |hdr: usize, n: usize| -> Result<(Packed<'_>, usize), String> {
        let end = hdr
            .checked_add(n)
            .ok_or("ziplist string length overflows")?;
        Ok((Packed::Str(&need(end)?[hdr..]), end))
    };
    let int = |n: usize| -> Result<(Packed<'_>, usize), String> {
        let d = need(1 + n)?;
        let mut v: i64 = 0;
        for (k, &x) in d[1..].iter().enumerate() {
            v |= i64::from(x) << (8 * k);
        }
        let shift = 64 - 8 * n as u32;
        Ok((Packed::Int((v << shift) >> shift), 1 + n))
    };
    match e {
        0x00..=0x3F => string(1, usize::from(e)),
        0x40..=0x7F => {
            let d = need(2)?;
            string(2, usize::from(e & 0x3f) << 8 | usize::from(d[1]))
        }
        0x80..=0xBF => {
            let d = need(5)?;
            string(5, u32::from_be_bytes([d[1], d[2], d[3], d[4]]) as usize)
        }
        0xC0 => int(2),
        0xD0 => int(4),
        0xE0 => int(8),
        0xF0 => int(3),
        0xFE => int(1),
        0xF1..=0xFD => Ok((Packed::Int(i64::from(e & 0x0f) - 1), 1)),
        _ => Err(format!("ziplist entry has invalid encoding byte {e:#04x}")),
    }
}

/// Test fixtures: ziplists built by hand from the format description.
#[cfg(test)]
pub(crate) mod build {
    /// One entry's encoding and data for `s` (integers as Redis stores them).
    fn body(s: &[u8]) -> Vec<u8> {
        if let Some(v) = vireo_resp::number::parse_i64(s) {
            return match v {
                0..=12 => vec![0xF1 + v as u8],
                _ if i8::try_from(v).is_ok() => vec![0xFE, v as u8],
                _ if i16::try_from(v).is_ok() => [&[0xC0][..], &(v as i16).to_le_bytes()].concat(),
                -0x80_0000..=0x7f_ffff => [&[0xF0][..], &(v as i32).to_le_bytes()[..3]].concat(),
                _ if i32::try_from(v).is_ok() => [&[0xD0][..], &(v as i32).to_le_bytes()].concat(),
                _ => [&[0xE0][..], &v.to_le_bytes()].concat(),
            };
        }
        let n = s.len();
        let mut out = if n < 64 {
            vec![n as u8]
        } else if n < 16384 {
            vec![0x40 | (n >> 8) as u8, n as u8]
        } else {
            [&[0x80][..], &(n as u32).to_be_bytes()].concat()
        };
        out.extend_from_slice(s);
        out
    }

    /// A ziplist of `items`.
    pub(crate) fn ziplist(items: &[&[u8]]) -> Vec<u8> {
        let mut zl = vec![0u8; 10];
        let mut prev = 0usize;
        let mut tail = 10;
        for it in items {
            tail = zl.len();
            let mut e = if prev < 254 {
                vec![prev as u8]
            } else {
                [&[0xFE][..], &(prev as u32).to_le_bytes()].concat()
            };
            e.extend(body(it));
            prev = e.len();
            zl.extend(e);
        }
        zl.push(0xFF);
        let n = zl.len() as u32;
        zl[0..4].copy_from_slice(&n.to_le_bytes());
        zl[4..8].copy_from_slice(&(tail as u32).to_le_bytes());
        zl[8..10].copy_from_slice(&(items.len() as u16).to_le_bytes());
        zl
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_every_encoding() {
        let long = vec![b'q'; 300];
        let huge = vec![b'h'; 20_000];
        let items: Vec<&[u8]> = vec![
            b"0",
            b"12",
            b"13",
            b"-1",
            b"-128",
            b"1000",
            b"-32768",
            b"8000000",
            b"2000000000",
            b"-9000000000",
            b"",
            b"abc",
            &long,
            &huge,
        ];
        let zl = build::ziplist(&items);
        let got: Vec<Vec<u8>> = entries(&zl).unwrap().iter().map(|e| e.to_vec()).collect();
        let want: Vec<Vec<u8>> = items.iter().map(|s| s.to_vec()).collect();
        assert_eq!(got, want);
        assert_eq!(entries(&zl).unwrap()[1], Packed::Int(12));
    }

    #[test]
    fn empty_ziplist() {
        assert!(entries(&build::ziplist(&[])).unwrap().is_empty());
    }

    #[test]
    fn rejects_damage() {
        let zl = build::ziplist(&[b"a", b"bb", b"7"]);
        let mut bad_prev = zl.clone();
        bad_prev[10 + 3] = 9; // second entry's prevlen
        assert!(entries(&bad_prev).is_err());
        let mut bad_tail = zl.clone();
        bad_tail[4] = 11;
        assert!(entries(&bad_tail).is_err());
        let mut bad_count = zl.clone();
        bad_count[8] = 2;
        assert!(entries(&bad_count).is_err());
        let mut bad_enc = zl.clone();
        bad_enc[11] = 0xC1;
        assert!(entries(&bad_enc).is_err());
        assert!(entries(&zl[..zl.len() - 1]).is_err());
        for i in 0..zl.len() {
            let mut b = zl.clone();
            b[i] ^= 0xA5;
            let _ = entries(&b);
        }
    }
}
