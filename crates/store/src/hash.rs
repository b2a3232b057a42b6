//! (being written) The Hash type and its encodings.

/// A Redis hash value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hash {}

impl Hash {
    /// The encoding name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        "listpack"
    }

    /// Heap bytes owned by the value.
    pub fn heap_bytes(&self) -> usize {
        0
    }
}
