//! (being written) The ZSet type and its encodings.

/// A Redis zset value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ZSet {}

impl ZSet {
    /// The encoding name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        "listpack"
    }

    /// Heap bytes owned by the value.
    pub fn heap_bytes(&self) -> usize {
        0
    }
}
