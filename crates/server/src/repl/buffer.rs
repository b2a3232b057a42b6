//! The shared replication buffer (Redis 7.0's replication buffer blocks):
//! one list of blocks of stream bytes that the backlog and every replica
//! read, so N replicas don't hold N copies of what they have not sent yet.
//!
//! The backlog is the whole list: its first byte is the first byte of the
//! first block, and `repl_backlog_histlen` is every byte held. A replica
//! is a cursor, the stream offset of the next byte it needs; it keeps the
//! block holding that byte (or the last block, once it has everything)
//! and every later one. The first block is dropped only when the backlog
//! would still hold more than `repl-backlog-size` bytes without it and no
//! replica needs it, so a slow replica makes the backlog grow beyond its
//! setting (and a replica coming back can continue from any of it), and
//! the backlog shrinks again as replicas catch up or go away.
//!
//! Memory figures follow Redis: `mem_total_replication_buffers` is every
//! block's capacity plus a per-block overhead; a replica's output buffer
//! (CLIENT LIST `omem`/`tot-mem`, `client-output-buffer-limit replica`)
//! is the capacity from its block to the end. Offsets are Redis's:
//! `offset` is the offset of the last byte fed, a block starts at the
//! offset of its first byte.

use std::collections::VecDeque;

/// The smallest block (Redis's `PROTO_REPLY_CHUNK_BYTES`): small writes
/// fill one block instead of allocating one each.
const MIN_BLOCK: usize = 16 * 1024;
/// Bytes a block costs besides its data (Redis counts its list node and
/// block header the same way).
pub const BLOCK_OVERHEAD: usize = std::mem::size_of::<Block>() + 24;

/// One block of consecutive stream bytes.
struct Block {
    /// The stream offset of `data[0]`.
    start: u64,
    /// Filled up to its capacity, which never changes.
    data: Vec<u8>,
}

impl Block {
    /// The offset one past the last byte this block can hold.
    fn capacity_end(&self) -> u64 {
        self.start + self.data.capacity() as u64
    }

    fn is_full(&self) -> bool {
        self.data.len() == self.data.capacity()
    }
}

/// The stream's recent bytes, shared by the backlog and the replicas.
pub struct ReplBuffer {
    blocks: VecDeque<Block>,
    /// The stream offset of the last byte fed (`master_repl_offset`).
    offset: u64,
    /// `repl-backlog-size`: what the backlog keeps when no replica needs
    /// more.
    backlog_size: usize,
    /// `mem_total_replication_buffers`.
    mem: usize,
}

impl ReplBuffer {
    /// An empty buffer created when the stream is at `offset`, keeping
    /// `backlog_size` bytes of history.
    pub fn new(backlog_size: usize, offset: u64) -> Self {
        ReplBuffer {
            blocks: VecDeque::new(),
            offset,
            backlog_size: backlog_size.max(1),
            mem: 0,
        }
    }

    /// Changes how much history is kept (CONFIG SET repl-backlog-size);
    /// takes effect at the next trim.
    pub fn set_backlog_size(&mut self, size: usize) {
        self.backlog_size = size.max(1);
    }

    /// `repl_backlog_size`.
    pub fn backlog_size(&self) -> usize {
        self.backlog_size
    }

    /// Appends stream bytes. Returns true if a block was added (Redis
    /// checks replicas' output limits then, and trims).
    pub fn feed(&mut self, mut bytes: &[u8]) -> bool {
        let mut added = false;
        while !bytes.is_empty() {
            let tail = match self.blocks.back_mut() {
                Some(tail) if !tail.is_full() => tail,
                _ => {
                    self.add_block(bytes.len());
                    added = true;
                    self.blocks.back_mut().expect("a block was just added")
                }
            };
            let n = bytes.len().min(tail.data.capacity() - tail.data.len());
            tail.data.extend_from_slice(&bytes[..n]);
            self.offset += n as u64;
            bytes = &bytes[n..];
        }
        added
    }

    /// A new tail block for `wanted` more bytes: at least [`MIN_BLOCK`],
    /// at most a sixteenth of the backlog (so that a big write doesn't
    /// make one block nobody can drop while a replica needs its end).
    fn add_block(&mut self, wanted: usize) {
        let limit = (self.backlog_size / 16).max(MIN_BLOCK);
        let size = wanted.clamp(MIN_BLOCK, limit);
        let block = Block {
            start: self.offset + 1,
            data: Vec::with_capacity(size),
        };
        self.mem += block.data.capacity() + BLOCK_OVERHEAD;
        self.blocks.push_back(block);
    }

    /// The stream offset of the last byte fed.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// `mem_total_replication_buffers`.
    pub fn mem(&self) -> usize {
        self.mem
    }

    /// What `maxmemory` leaves out of this buffer, as Redis's
    /// `freeMemoryGetNotCountedMemory`: everything beyond
    /// `repl-backlog-size` and the block overhead a backlog of that size
    /// takes, which is what replicas hold back (kept even once they are
    /// gone, until trimmed: evicting keys for it would not bring it down).
    pub fn not_counted(&self) -> usize {
        let blocks = self.backlog_size / MIN_BLOCK + 1;
        self.mem
            .saturating_sub(self.backlog_size + blocks * BLOCK_OVERHEAD)
    }

    /// Bytes held (`repl_backlog_histlen`).
    pub fn histlen(&self) -> u64 {
        (self.offset + 1) - self.first_byte_offset()
    }

    /// The offset of the oldest byte held (`repl_backlog_first_byte_offset`),
    /// one past `offset` when nothing is held.
    pub fn first_byte_offset(&self) -> u64 {
        self.blocks.front().map_or(self.offset + 1, |b| b.start)
    }

    /// True if a replica may continue from `from` (the first byte it
    /// lacks): from the first byte held to one past the last.
    pub fn holds(&self, from: u64) -> bool {
        from >= self.first_byte_offset() && from <= self.offset + 1
    }

    /// The index of the block a cursor keeps: the last one starting at or
    /// before it.
    fn block_of(&self, cursor: u64) -> usize {
        self.blocks
            .partition_point(|b| b.start <= cursor)
            .saturating_sub(1)
    }

    /// Appends to `out` at most `max` bytes from `cursor` on; returns the
    /// cursor past them. A cursor outside the buffer reads nothing.
    pub fn read(&self, cursor: u64, max: usize, out: &mut Vec<u8>) -> u64 {
        if !self.holds(cursor) {
            return cursor;
        }
        let mut at = cursor;
        let mut i = self.block_of(cursor);
        let limit = out.len() + max;
        while out.len() < limit && i < self.blocks.len() {
            let b = &self.blocks[i];
            let from = (at - b.start) as usize;
            let n = (b.data.len() - from).min(limit - out.len());
            out.extend_from_slice(&b.data[from..from + n]);
            at += n as u64;
            i += 1;
        }
        at
    }

    /// The output buffer a replica at `cursor` holds: the capacity from its
    /// block to the end, plus each block's overhead (Redis's
    /// `getClientOutputBufferMemoryUsage` for replicas).
    pub fn held_by(&self, cursor: u64) -> usize {
        let Some(last) = self.blocks.back() else {
            return 0;
        };
        let i = self.block_of(cursor);
        let bytes = last.capacity_end() - self.blocks[i].start;
        bytes as usize + (self.blocks.len() - i) * BLOCK_OVERHEAD
    }

    /// Drops the oldest blocks the backlog can spare: while it holds more
    /// than its size without the first block and no replica (cursors
    /// `oldest_cursor` and later) needs that block. Returns the bytes
    /// freed.
    pub fn trim(&mut self, oldest_cursor: Option<u64>) -> usize {
        let mut freed = 0;
        while self.blocks.len() > 1 && oldest_cursor.is_none_or(|c| self.block_of(c) > 0) {
            let first = &self.blocks[0];
            if self.histlen() - first.data.len() as u64 <= self.backlog_size as u64 {
                break;
            }
            let cost = first.data.capacity() + BLOCK_OVERHEAD;
            self.blocks.pop_front();
            self.mem -= cost;
            freed += cost;
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_exceeds_the_backlog_escapes_maxmemory() {
        let mut b = ReplBuffer::new(64 * 1024, 0);
        b.feed(&[1; 60 * 1024]);
        assert_eq!(b.not_counted(), 0, "within the backlog's size");
        let replica = 1;
        b.feed(&[2; 200 * 1024]);
        b.trim(Some(replica));
        let counted = 64 * 1024 + 5 * BLOCK_OVERHEAD;
        assert!(b.mem() > counted);
        assert_eq!(b.not_counted(), b.mem() - counted);
        // The replica caught up: the backlog shrinks back to its size,
        // give or take the one block it keeps until all of it can go.
        b.trim(Some(b.offset() + 1));
        assert!(b.not_counted() <= MIN_BLOCK, "{}", b.not_counted());
    }

    fn read_all(b: &ReplBuffer, cursor: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let end = b.read(cursor, usize::MAX / 2, &mut out);
        assert_eq!(end, b.offset() + 1);
        out
    }

    #[test]
    fn a_new_buffer_is_empty_at_its_offset() {
        let b = ReplBuffer::new(1024, 100);
        assert_eq!(
            (b.offset(), b.histlen(), b.first_byte_offset()),
            (100, 0, 101)
        );
        assert_eq!(b.mem(), 0);
        assert!(b.holds(101) && !b.holds(100) && !b.holds(102));
    }

    #[test]
    fn small_writes_share_a_block_and_big_ones_are_split() {
        let mut b = ReplBuffer::new(1 << 20, 0);
        assert!(b.feed(b"abc"));
        assert!(!b.feed(b"def"));
        assert_eq!(b.blocks.len(), 1);
        // A sixteenth of the backlog is 64 KiB: 200 KiB takes 4 blocks.
        b.feed(&vec![7; 200 * 1024]);
        assert!(b.blocks.iter().all(|bl| bl.data.capacity() <= 64 * 1024));
        assert_eq!(b.histlen(), 6 + 200 * 1024);
        let cap: usize = b.blocks.iter().map(|bl| bl.data.capacity()).sum();
        assert_eq!(b.mem(), cap + b.blocks.len() * BLOCK_OVERHEAD);
    }

    #[test]
    fn the_backlog_keeps_its_size_when_no_replica_lags() {
        let mut b = ReplBuffer::new(16 * 1024, 0);
        for _ in 0..100 {
            b.feed(&[1; 1000]);
            b.trim(None);
        }
        assert!(b.histlen() > 16 * 1024);
        assert!(b.histlen() <= 16 * 1024 + MIN_BLOCK as u64);
        assert_eq!(b.first_byte_offset(), b.offset() + 1 - b.histlen());
    }

    #[test]
    fn a_lagging_replica_keeps_its_blocks_and_the_backlog_grows() {
        let mut b = ReplBuffer::new(16 * 1024, 0);
        b.feed(b"x");
        let replica = 1;
        for _ in 0..200 {
            b.feed(&[2; 1000]);
            b.trim(Some(replica));
        }
        assert_eq!(b.first_byte_offset(), 1);
        assert_eq!(read_all(&b, replica).len(), 200_001);
        assert!(b.held_by(replica) >= 200_001);
        // Once it caught up, the history shrinks back to about the setting.
        let caught_up = b.offset() + 1;
        b.trim(Some(caught_up));
        assert!(b.histlen() <= 16 * 1024 + MIN_BLOCK as u64);
        assert!(b.held_by(caught_up) <= MIN_BLOCK + BLOCK_OVERHEAD);
    }

    /// Random feeds, reads and trims against a model keeping the whole
    /// stream.
    #[test]
    fn what_it_holds_is_the_end_of_the_stream() {
        let mut rng = fastrand::Rng::with_seed(28);
        for _ in 0..100 {
            let start = rng.u64(0..1000);
            let mut b = ReplBuffer::new(rng.usize(1..100_000), start);
            let mut stream = Vec::new();
            let mut cursor = start + 1;
            for _ in 0..rng.usize(0..40) {
                let chunk: Vec<u8> = (0..rng.usize(0..40_000)).map(|_| rng.u8(..)).collect();
                b.feed(&chunk);
                stream.extend_from_slice(&chunk);
                let mut out = Vec::new();
                let next = b.read(cursor, rng.usize(0..50_000), &mut out);
                let at = (cursor - start - 1) as usize;
                assert_eq!(out, &stream[at..at + out.len()]);
                cursor = next;
                b.trim(Some(cursor));
                assert!(b.holds(cursor));
                let held = b.histlen() as usize;
                assert_eq!(
                    read_all(&b, b.first_byte_offset()),
                    &stream[stream.len() - held..]
                );
                assert_eq!(b.offset(), start + stream.len() as u64);
            }
        }
    }
}
