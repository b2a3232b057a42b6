//! The serialized form of one database: what RDB files, DUMP payloads
//! and AOF rewrites carry.
//!
//! ```text
//! u8  version (1)
//! u32 path length, path bytes        (0: in memory)
//! u32 statement count, then per statement:
//!     u32 name length, name, u32 SQL length, SQL
//! u64 image length, image            (sqlite3_serialize's bytes)
//! ```
//!
//! Integers are little-endian. The bytes come from files and clients
//! (RESTORE), so [`decode`] checks every length against what is left
//! before taking it: a corrupt payload is an error, never a panic or an
//! allocation larger than the payload.

use crate::SqlError;

/// The only version written and read.
const VERSION: u8 = 1;

/// A database's content as the payload carries it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parts<'a> {
    /// The file the database lives in, None in memory.
    pub path: Option<&'a [u8]>,
    /// Named statements, as (name, SQL).
    pub statements: Vec<(&'a [u8], &'a [u8])>,
    /// The database image (`sqlite3_serialize`).
    pub image: &'a [u8],
}

/// Appends the payload of `parts` to `out`.
pub fn encode(out: &mut Vec<u8>, parts: &Parts<'_>) {
    out.push(VERSION);
    put_bytes32(out, parts.path.unwrap_or_default());
    out.extend_from_slice(&(parts.statements.len() as u32).to_le_bytes());
    for (name, sql) in &parts.statements {
        put_bytes32(out, name);
        put_bytes32(out, sql);
    }
    out.extend_from_slice(&(parts.image.len() as u64).to_le_bytes());
    out.extend_from_slice(parts.image);
}

fn put_bytes32(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// Reads a payload written by [`encode`], borrowing from `src`.
pub fn decode(src: &[u8]) -> Result<Parts<'_>, SqlError> {
    let mut r = Reader(src);
    if r.take(1)? != [VERSION] {
        return Err(corrupt("unknown payload version"));
    }
    let path = r.bytes32()?;
    let count = r.u32()? as usize;
    // Each statement takes at least 8 bytes: a count beyond that is a lie.
    if count > r.0.len() / 8 {
        return Err(corrupt("statement count exceeds the payload"));
    }
    let mut statements = Vec::with_capacity(count);
    for _ in 0..count {
        statements.push((r.bytes32()?, r.bytes32()?));
    }
    let image_len = u64::from_le_bytes(r.take(8)?.try_into().unwrap_or_default());
    let image_len = usize::try_from(image_len).map_err(|_| corrupt("image too long"))?;
    let image = r.take(image_len)?;
    if !r.0.is_empty() {
        return Err(corrupt("trailing bytes after the image"));
    }
    Ok(Parts {
        path: (!path.is_empty()).then_some(path),
        statements,
        image,
    })
}

fn corrupt(what: &str) -> SqlError {
    SqlError::Corrupt(what.to_string())
}

/// A cursor over the payload's bytes.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SqlError> {
        if n > self.0.len() {
            return Err(corrupt("payload truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, SqlError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn bytes32(&mut self) -> Result<&'a [u8], SqlError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut out = Vec::new();
        encode(
            &mut out,
            &Parts {
                path: Some(b"a.db"),
                statements: vec![(b"ins", b"INSERT INTO t VALUES(?1)")],
                image: b"SQLite format 3\0rest",
            },
        );
        out
    }

    #[test]
    fn round_trip() {
        let bytes = sample();
        let parts = decode(&bytes).unwrap();
        assert_eq!(parts.path, Some(&b"a.db"[..]));
        assert_eq!(
            parts.statements,
            vec![(&b"ins"[..], &b"INSERT INTO t VALUES(?1)"[..])]
        );
        assert_eq!(parts.image, b"SQLite format 3\0rest");
        let mut empty = Vec::new();
        encode(&mut empty, &Parts::default());
        assert_eq!(decode(&empty).unwrap(), Parts::default());
    }

    #[test]
    fn every_truncation_and_trailing_byte_is_refused() {
        let bytes = sample();
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err(), "prefix {n}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
    }

    #[test]
    fn random_bytes_and_mutations_never_panic() {
        // A seeded loop (stable Rust): random buffers and single-byte
        // mutations of a valid payload either decode within bounds or fail.
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let valid = sample();
        for _ in 0..20_000 {
            let mut buf = if next() % 2 == 0 {
                valid.clone()
            } else {
                (0..next() % 64).map(|_| next() as u8).collect()
            };
            if !buf.is_empty() {
                let i = (next() as usize) % buf.len();
                buf[i] = next() as u8;
            }
            if let Ok(parts) = decode(&buf) {
                assert!(parts.image.len() <= buf.len());
                assert!(parts.statements.len() <= buf.len());
            }
        }
    }
}
