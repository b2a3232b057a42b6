//! Intsets as RDB stores them (`SET_INTSET`):
//! `width:u32le` (2, 4 or 8) `count:u32le` then `count` little-endian
//! integers of that width in strictly ascending order.

/// Encodes `sorted` (strictly ascending) with the narrowest width that
/// holds every member.
pub fn encode(sorted: &[i64]) -> Vec<u8> {
    let width: usize = match (sorted.first(), sorted.last()) {
        (Some(&lo), Some(&hi)) if i16::try_from(lo).is_ok() && i16::try_from(hi).is_ok() => 2,
        (Some(&lo), Some(&hi)) if i32::try_from(lo).is_ok() && i32::try_from(hi).is_ok() => 4,
        (Some(_), Some(_)) => 8,
        _ => 2,
    };
    let mut out = Vec::with_capacity(8 + width * sorted.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(
        &u32::try_from(sorted.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    for &v in sorted {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

/// Validates an intset (width, size, strict order) and returns its members.
pub fn decode(b: &[u8]) -> Result<Vec<i64>, String> {
    if b.len() < 8 {
        return Err("intset shorter than its header".into());
    }
    let width = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err(format!("intset has invalid width {width}"));
    }
    let count = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
    if Some(b.len() - 8) != count.checked_mul(width) {
        return Err("intset size does not match its count".into());
    }
    let shift = 64 - 8 * width as u32;
    let mut out = Vec::with_capacity(count);
    for chunk in b[8..].chunks_exact(width) {
        let mut v: i64 = 0;
        for (k, &x) in chunk.iter().enumerate() {
            v |= i64::from(x) << (8 * k);
        }
        let v = (v << shift) >> shift;
        if out.last().is_some_and(|&p| p >= v) {
            return Err("intset members are not in strictly ascending order".into());
        }
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_each_width() {
        for set in [
            vec![-3, 0, 7, 32767],
            vec![-40000, 1, 2],
            vec![i64::MIN, 0, i64::MAX],
            vec![],
        ] {
            assert_eq!(decode(&encode(&set)).unwrap(), set);
        }
        assert_eq!(encode(&[1, 2]).len(), 8 + 4);
        assert_eq!(encode(&[1, 70000]).len(), 8 + 8);
        assert_eq!(encode(&[1, 1 << 40]).len(), 8 + 16);
    }

    #[test]
    fn decodes_hand_made_fixture() {
        // width 4, three members: -1, 5, 100000.
        let mut b = vec![4, 0, 0, 0, 3, 0, 0, 0];
        for v in [-1i32, 5, 100_000] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(decode(&b).unwrap(), vec![-1, 5, 100_000]);
    }

    #[test]
    fn rejects_damage() {
        assert!(decode(&[3, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(decode(&[2, 0, 0, 0, 2, 0, 0, 0, 1, 0]).is_err());
        assert!(decode(&[2, 0, 0, 0, 2, 0, 0, 0, 5, 0, 1, 0]).is_err());
        assert!(decode(&[2, 0, 0, 0, 2, 0, 0, 0, 1, 0, 1, 0]).is_err());
        assert!(decode(&[8, 0, 0, 0, 255, 255, 255, 255]).is_err());
    }
}
