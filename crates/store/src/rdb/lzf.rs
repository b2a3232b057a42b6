//! LZF, the compression RDB files use for long strings.
//!
//! The format is a sequence of chunks, each starting with a control byte:
//!
//! * `000LLLLL`: a literal run of `L + 1` bytes (1 … 32) follows;
//! * `LLLooooo oooooooo`: a back reference: copy `L + 2` bytes starting
//!   `o + 1` bytes back in the output (`L` of 7 means one more byte follows
//!   with `L - 7`, so lengths reach 264; offsets reach 8192).
//!
//! Both directions are written from the format description; the compressor
//! is a single-probe hash of 3-byte sequences, like liblzf's fast mode.
//! Its output differs from liblzf's in places but any LZF decoder reads it.

/// Longest literal run one control byte announces.
const MAX_LIT: usize = 32;
/// Farthest back a reference may point.
const MAX_OFF: usize = 1 << 13;
/// Longest match one reference copies.
const MAX_REF: usize = (1 << 8) + (1 << 3);
/// Bits of the match-finder's hash table.
const HASH_LOG: u32 = 14;

/// The most output bytes one input byte can produce: a 3-byte reference
/// copies at most [`MAX_REF`] bytes. Decoders check a declared length
/// against this before allocating.
pub const MAX_EXPANSION: usize = MAX_REF / 3 + 1;

/// Compresses `input`, returning None unless the result is smaller than
/// `max_out` bytes (Redis stores a string compressed only when that saves
/// space).
pub fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    let n = input.len();
    if n < 4 {
        return None;
    }
    let mut out = Vec::with_capacity(max_out);
    // A table about the input's size: short strings (most of them) must not
    // pay for clearing a big one.
    let bits = (usize::BITS - n.leading_zeros()).clamp(8, HASH_LOG);
    let mut table = vec![0u32; 1 << bits];
    let mut lit_start = 0;
    let mut i = 0;
    while i + 2 < n {
        let seq =
            u32::from(input[i]) << 16 | u32::from(input[i + 1]) << 8 | u32::from(input[i + 2]);
        let h = (seq.wrapping_mul(2_654_435_761) >> (32 - bits)) as usize;
        // Slots hold position + 1 so that 0 means empty.
        let cand = table[h] as usize;
        table[h] = (i + 1) as u32;
        if cand > 0 {
            let r = cand - 1;
            let off = i - r;
            if off <= MAX_OFF && input[r..r + 3] == input[i..i + 3] {
                let max = MAX_REF.min(n - i);
                let mut len = 3;
                while len < max && input[r + len] == input[i + len] {
                    len += 1;
                }
                flush_literals(&mut out, &input[lit_start..i]);
                let (l, o) = (len - 2, off - 1);
                if l < 7 {
                    out.push(((l << 5) | (o >> 8)) as u8);
                } else {
                    out.push(((7 << 5) | (o >> 8)) as u8);
                    out.push((l - 7) as u8);
                }
                out.push(o as u8);
                if out.len() >= max_out {
                    return None;
                }
                i += len;
                lit_start = i;
                continue;
            }
        }
        i += 1;
    }
    flush_literals(&mut out, &input[lit_start..]);
    (out.len() < max_out).then_some(out)
}

/// Appends `lit` as literal runs of at most [`MAX_LIT`] bytes.
fn flush_literals(out: &mut Vec<u8>, lit: &[u8]) {
    for run in lit.chunks(MAX_LIT) {
        out.push((run.len() - 1) as u8);
        out.extend_from_slice(run);
    }
}

/// Decompresses `input`, which must expand to exactly `out_len` bytes.
/// Returns None for malformed input (a reference before the start, a run
/// past the declared length, a truncated chunk, or a length mismatch).
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    if out_len > input.len().saturating_mul(MAX_EXPANSION) {
        return None;
    }
    // Grow with the output actually produced: a lying length must not
    // cost its allocation up front.
    let mut out = Vec::with_capacity(out_len.min(1 << 20));
    let mut i = 0;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            let run = input.get(i..i + ctrl + 1)?;
            if out.len() + run.len() > out_len {
                return None;
            }
            out.extend_from_slice(run);
            i += ctrl + 1;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*input.get(i)?);
                i += 1;
            }
            len += 2;
            let off = ((ctrl & 0x1f) << 8 | usize::from(*input.get(i)?)) + 1;
            i += 1;
            if off > out.len() || out.len() + len > out_len {
                return None;
            }
            let from = out.len() - off;
            // The copy may overlap its own output (runs), so go bytewise.
            for k in 0..len {
                let b = out[from + k];
                out.push(b);
            }
        }
    }
    (out.len() == out_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(data: &[u8]) {
        if let Some(c) = compress(data, data.len()) {
            assert!(c.len() < data.len());
            assert_eq!(decompress(&c, data.len()).as_deref(), Some(data));
        }
    }

    #[test]
    fn compresses_repetitive_data_and_round_trips() {
        let data = vec![b'a'; 10_000];
        let c = compress(&data, data.len()).expect("compressible");
        assert!(c.len() < 200, "{}", c.len());
        assert_eq!(decompress(&c, data.len()), Some(data));
        let text: Vec<u8> = b"hello world, hello vireo, hello redis! "
            .iter()
            .cycle()
            .take(5000)
            .copied()
            .collect();
        round_trip(&text);
        let mut rng = fastrand::Rng::with_seed(7);
        for len in [0, 1, 3, 4, 21, 100, 9000, 70_000] {
            let mixed: Vec<u8> = (0..len).map(|_| b"abc"[rng.usize(0..3)]).collect();
            round_trip(&mixed);
        }
    }

    #[test]
    fn incompressible_input_is_refused() {
        let mut rng = fastrand::Rng::with_seed(1);
        let data: Vec<u8> = (0..1000).map(|_| rng.u8(..)).collect();
        assert_eq!(compress(&data, data.len() - 4), None);
    }

    #[test]
    fn decodes_hand_made_chunks() {
        // literal "ab", then a back reference of 4 bytes at offset 2.
        assert_eq!(
            decompress(&[1, b'a', b'b', 2 << 5, 1], 6).as_deref(),
            Some(&b"ababab"[..])
        );
        // long reference: L=7 plus extra 3 → 12 bytes, offset 1.
        assert_eq!(
            decompress(&[0, b'x', 7 << 5, 3, 0], 13),
            Some(vec![b'x'; 13])
        );
    }

    #[test]
    fn malformed_input_is_rejected() {
        assert_eq!(decompress(&[2 << 5, 0], 4), None); // reference before start
        assert_eq!(decompress(&[5, b'a'], 6), None); // truncated literal
        assert_eq!(decompress(&[0, b'a'], 2), None); // too short
        assert_eq!(decompress(&[1, b'a', b'b'], 1), None); // too long
        assert_eq!(decompress(&[0, b'a', 7 << 5], 20), None); // missing length byte
        assert_eq!(decompress(&[0], 1_000_000), None); // absurd declared length
    }
}
