//! (being written) The Set type and its encodings.

/// A Redis set value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Set {}

impl Set {
    /// The encoding name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        "intset"
    }

    /// Heap bytes owned by the value.
    pub fn heap_bytes(&self) -> usize {
        0
    }
}
