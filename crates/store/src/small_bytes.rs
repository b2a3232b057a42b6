//! A byte string that keeps up to [`INLINE`] bytes in itself and only a
//! longer one on the heap, in the 24 bytes of a `Vec`.
//!
//! Collection members are mostly short ("element:12345", user ids), and a
//! boxed member costs a heap block of its own (16 bytes at least) and, on
//! every comparison, a cache miss after the one that reached the
//! reference. Inline, the member is read with what refers to it.

/// Longest byte string kept inline.
pub const INLINE: usize = 22;

/// An immutable byte string, inline when it is at most [`INLINE`] bytes.
#[derive(Clone, Debug)]
pub enum SmallBytes {
    /// `bytes[..len]`; the rest is zero.
    Inline { len: u8, bytes: [u8; INLINE] },
    /// Longer than [`INLINE`].
    Heap(Box<[u8]>),
}

impl SmallBytes {
    /// A copy of `b`.
    pub fn new(b: &[u8]) -> Self {
        if b.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..b.len()].copy_from_slice(b);
            SmallBytes::Inline {
                len: b.len() as u8,
                bytes,
            }
        } else {
            SmallBytes::Heap(b.into())
        }
    }

    /// Takes `b` over, moving a short one inline (freeing its block).
    pub fn from_vec(b: Vec<u8>) -> Self {
        if b.len() <= INLINE {
            SmallBytes::new(&b)
        } else {
            SmallBytes::Heap(b.into_boxed_slice())
        }
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            SmallBytes::Inline { len, bytes } => &bytes[..usize::from(*len)],
            SmallBytes::Heap(b) => b,
        }
    }

    /// Heap bytes owned (beyond the value itself): 0 when inline.
    pub fn heap_bytes(&self) -> usize {
        match self {
            SmallBytes::Inline { .. } => 0,
            SmallBytes::Heap(b) => b.len(),
        }
    }

    /// The bytes as a `Vec` (the heap block reused when there is one).
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            SmallBytes::Inline { .. } => self.as_bytes().to_vec(),
            SmallBytes::Heap(b) => b.into_vec(),
        }
    }
}

impl std::borrow::Borrow<[u8]> for SmallBytes {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Default for SmallBytes {
    fn default() -> Self {
        SmallBytes::new(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_as_small_as_a_vec() {
        assert_eq!(std::mem::size_of::<SmallBytes>(), 24);
    }

    #[test]
    fn round_trips_every_length_around_the_inline_limit() {
        for n in [0, 1, 13, INLINE - 1, INLINE, INLINE + 1, 100] {
            let b: Vec<u8> = (0..n).map(|i| i as u8 ^ 0x5a).collect();
            let s = SmallBytes::new(&b);
            assert_eq!(s.as_bytes(), &b[..]);
            assert_eq!(matches!(s, SmallBytes::Inline { .. }), n <= INLINE);
            assert_eq!(s.heap_bytes(), if n <= INLINE { 0 } else { n });
            assert_eq!(s.clone().into_vec(), b);
            let v = SmallBytes::from_vec(b.clone());
            assert_eq!(v.as_bytes(), &b[..]);
            assert_eq!(v.into_vec(), b);
        }
        assert_eq!(SmallBytes::default().as_bytes(), b"");
    }
}
