//! Zipmaps, the packed hash encoding of RDB files written before Redis 2.6
//! (`HASH_ZIPMAP`), read-only:
//!
//! ```text
//! count:u8 (254 = unknown)  (len key len free:u8 value pad[free])*  0xFF
//! ```
//!
//! A `len` is one byte below 254, or 254 followed by 4 little-endian bytes.

/// The one-byte length escape.
const BIGLEN: u8 = 254;
/// The terminator.
const END: u8 = 0xFF;

/// A (field, value) pair borrowed from a zipmap.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

/// Validates a zipmap (every length inside the blob, terminator last, count
/// when known) and returns its (field, value) pairs.
pub fn pairs(zm: &[u8]) -> Result<Vec<Pair<'_>>, String> {
    let trunc = || "zipmap runs past its end".to_string();
    let count = *zm.first().ok_or_else(trunc)?;
    let mut p = 1;
    let mut out = Vec::new();
    let read_len = |p: &mut usize| -> Result<Option<usize>, String> {
        let b = *zm.get(*p).ok_or_else(trunc)?;
        *p += 1;
        match b {
            END => Ok(None),
            BIGLEN => {
                let d = zm.get(*p..*p + 4).ok_or_else(trunc)?;
                *p += 4;
                Ok(Some(u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as usize))
            }
            n => Ok(Some(usize::from(n))),
        }
    };
    let take = |p: &mut usize, n: usize| -> Result<&[u8], String> {
        let end = p.checked_add(n).ok_or_else(trunc)?;
        let s = zm.get(*p..end).ok_or_else(trunc)?;
        *p = end;
        Ok(s)
    };
    while let Some(klen) = read_len(&mut p)? {
        let key = take(&mut p, klen)?;
        let vlen = read_len(&mut p)?.ok_or("zipmap field has no value")?;
        let free = usize::from(*zm.get(p).ok_or_else(trunc)?);
        p += 1;
        let value = take(&mut p, vlen)?;
        take(&mut p, free)?;
        out.push((key, value));
    }
    if p != zm.len() {
        return Err("zipmap has bytes after its terminator".into());
    }
    if out.is_empty() {
        return Err("zipmap is empty".into());
    }
    if count < BIGLEN && usize::from(count) != out.len() {
        return Err("zipmap count does not match its entries".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_hand_made_fixture() {
        let big = vec![b'v'; 300];
        let mut zm = vec![2, 3];
        zm.extend_from_slice(b"foo");
        zm.extend_from_slice(&[3, 2]);
        zm.extend_from_slice(b"bar..");
        zm.extend_from_slice(&[1, b'k', BIGLEN, 44, 1, 0, 0, 0]);
        zm.extend_from_slice(&big);
        zm.push(END);
        let p = pairs(&zm).unwrap();
        assert_eq!(p, vec![(&b"foo"[..], &b"bar"[..]), (&b"k"[..], &big[..])]);
    }

    #[test]
    fn rejects_damage() {
        assert!(pairs(&[]).is_err());
        assert!(pairs(&[1, END]).is_err()); // count mismatch
        assert!(pairs(&[254, 1, b'a', END]).is_err()); // key without value
        assert!(pairs(&[254, 1, b'a', 1, 9, b'b', END]).is_err()); // free past end
        assert!(pairs(&[0, END, 0]).is_err()); // trailing bytes
        assert_eq!(pairs(&[0, END]), Err("zipmap is empty".into()));
    }
}
