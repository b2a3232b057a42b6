//! The replication backlog: the last `repl-backlog-size` bytes of the
//! replication stream, in a ring, with the stream offsets INFO reports.
//!
//! Offsets follow Redis: `master_repl_offset` counts every byte ever fed;
//! the first byte the ring holds is at `first_byte_offset` (one past the
//! offset of the byte before it, so an empty backlog created at offset N
//! reports N + 1) and the ring holds `histlen` bytes. A partial resync
//! reads from here ([`Backlog::since`]).

/// A ring of the latest stream bytes.
#[derive(Debug)]
pub struct Backlog {
    ring: Vec<u8>,
    /// Where the next byte goes in `ring`.
    head: usize,
    /// Bytes held (at most `ring.len()`).
    histlen: usize,
    /// The stream offset of the last byte fed.
    offset: u64,
}

impl Backlog {
    /// An empty backlog of `size` bytes (at least 1) created when the
    /// stream is at `offset`.
    pub fn new(size: usize, offset: u64) -> Self {
        Backlog {
            ring: vec![0; size.max(1)],
            head: 0,
            histlen: 0,
            offset,
        }
    }

    /// Appends stream bytes, forgetting the oldest beyond the size.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        self.offset += bytes.len() as u64;
        let size = self.ring.len();
        if bytes.len() > size {
            bytes = &bytes[bytes.len() - size..];
        }
        let first = bytes.len().min(size - self.head);
        self.ring[self.head..self.head + first].copy_from_slice(&bytes[..first]);
        self.ring[..bytes.len() - first].copy_from_slice(&bytes[first..]);
        self.head = (self.head + bytes.len()) % size;
        self.histlen = (self.histlen + bytes.len()).min(size);
    }

    /// The ring's size (`repl_backlog_size`).
    pub fn size(&self) -> usize {
        self.ring.len()
    }

    /// Bytes held (`repl_backlog_histlen`).
    pub fn histlen(&self) -> usize {
        self.histlen
    }

    /// The stream offset of the last byte fed (`master_repl_offset`).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The offset of the oldest byte held (`repl_backlog_first_byte_offset`).
    pub fn first_byte_offset(&self) -> u64 {
        self.offset - self.histlen as u64 + 1
    }

    /// The bytes from stream offset `from` (the first byte a replica
    /// lacks) to the end, or None when the backlog does not hold them all:
    /// valid offsets run from the first byte held to one past the last.
    pub fn since(&self, from: u64) -> Option<Vec<u8>> {
        if from < self.first_byte_offset() || from > self.offset + 1 {
            return None;
        }
        let mut held = self.contents();
        let skip = (from - self.first_byte_offset()) as usize;
        held.drain(..skip);
        Some(held)
    }

    /// The bytes held, oldest first.
    pub fn contents(&self) -> Vec<u8> {
        let size = self.ring.len();
        let start = (self.head + size - self.histlen) % size;
        let mut out = Vec::with_capacity(self.histlen);
        let first = self.histlen.min(size - start);
        out.extend_from_slice(&self.ring[start..start + first]);
        out.extend_from_slice(&self.ring[..self.histlen - first]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_backlog_is_empty_at_its_offset() {
        let b = Backlog::new(16, 100);
        assert_eq!(
            (b.offset(), b.histlen(), b.first_byte_offset()),
            (100, 0, 101)
        );
        assert!(b.contents().is_empty());
    }

    /// Random feeds against a model that keeps the whole stream.
    #[test]
    fn it_keeps_the_last_size_bytes_of_the_stream() {
        let mut rng = fastrand::Rng::with_seed(28);
        for _ in 0..200 {
            let size = rng.usize(1..64);
            let start = rng.u64(0..1000);
            let mut b = Backlog::new(size, start);
            let mut stream = Vec::new();
            for _ in 0..rng.usize(0..30) {
                let chunk: Vec<u8> = (0..rng.usize(0..100)).map(|_| rng.u8(..)).collect();
                b.feed(&chunk);
                stream.extend_from_slice(&chunk);
                let kept = stream.len().min(size);
                assert_eq!(b.contents(), &stream[stream.len() - kept..]);
                assert_eq!(b.offset(), start + stream.len() as u64);
                assert_eq!(b.histlen(), kept);
                assert_eq!(
                    b.first_byte_offset(),
                    start + (stream.len() - kept) as u64 + 1
                );
                // A replica that has the stream up to byte `have` asks
                // for the next one.
                let have = rng.u64(start..=start + stream.len() as u64 + 1);
                let expected = (have >= start + (stream.len() - kept) as u64
                    && have <= start + stream.len() as u64)
                    .then(|| stream[(have - start) as usize..].to_vec());
                assert_eq!(b.since(have + 1), expected);
            }
        }
    }
}
