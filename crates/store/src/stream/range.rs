//! Walking a stream's entries between two IDs, either way round.
//!
//! A forward walk starts at the last node whose master ID is at most the
//! start (entries are never below their node's master ID, and every entry
//! of a node is below the next node's master ID), then goes node by node
//! until an entry passes the end. A reverse walk starts at the last node at
//! or below the end; since node buffers are written front to back, it
//! decodes a node's entry offsets once and visits them backwards.

use std::collections::btree_map;
use std::collections::BTreeMap;

use super::id::StreamId;
use super::node::{Entry, Node, RawEntry};

/// Entries of a stream in an inclusive ID range (see [`super::Stream::range`]).
pub struct Range<'a> {
    nodes: btree_map::Range<'a, StreamId, Node>,
    /// The node being walked, with its master ID.
    current: Option<(StreamId, &'a Node)>,
    /// Forward: offset of the next entry in `current`.
    pos: usize,
    /// Reverse: offsets of the entries of `current` still to visit.
    offsets: Vec<usize>,
    start: StreamId,
    end: StreamId,
    rev: bool,
    tombstones: bool,
    finished: bool,
}

impl<'a> Range<'a> {
    /// Entries with `start <= id <= end`, tombstones only when asked.
    pub(crate) fn new(
        nodes: &'a BTreeMap<StreamId, Node>,
        start: StreamId,
        end: StreamId,
        rev: bool,
        tombstones: bool,
    ) -> Self {
        let finished = start > end;
        let walk = if finished {
            nodes.range(StreamId::MAX..StreamId::MAX)
        } else if rev {
            nodes.range(..=end)
        } else {
            match nodes.range(..=start).next_back() {
                Some((&first, _)) => nodes.range(first..=end),
                None => nodes.range(..=end),
            }
        };
        Range {
            nodes: walk,
            current: None,
            pos: 0,
            offsets: Vec::new(),
            start,
            end,
            rev,
            tombstones,
            finished,
        }
    }

    /// The next entry header of the walk, tombstones included, with its
    /// node; None once the nodes run out.
    fn next_raw(&mut self) -> Option<(&'a Node, RawEntry)> {
        loop {
            let Some((master, node)) = self.current else {
                let (&master, node) = if self.rev {
                    self.nodes.next_back()?
                } else {
                    self.nodes.next()?
                };
                self.current = Some((master, node));
                if self.rev {
                    self.offsets.clear();
                    self.offsets
                        .extend(node.raw_entries(master).map(|raw| raw.off));
                } else {
                    self.pos = node.first_offset();
                }
                continue;
            };
            let off = if self.rev {
                self.offsets.pop()
            } else {
                Some(self.pos).filter(|&p| !node.is_end(p))
            };
            let Some(off) = off else {
                self.current = None;
                continue;
            };
            let raw = node.decode(master, off);
            self.pos = raw.end;
            return Some((node, raw));
        }
    }
}

impl<'a> Iterator for Range<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        while !self.finished {
            let Some((node, raw)) = self.next_raw() else {
                self.finished = true;
                break;
            };
            if raw.is_deleted() && !self.tombstones {
                continue;
            }
            let (before, past) = if self.rev {
                (raw.id > self.end, raw.id < self.start)
            } else {
                (raw.id < self.start, raw.id > self.end)
            };
            if past {
                self.finished = true;
            } else if !before {
                return Some(Entry::new(raw.id, node.fields(&raw)));
            }
        }
        None
    }
}
