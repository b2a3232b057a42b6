//! (being written) The List type and its encodings.

/// A Redis list value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct List {}

impl List {
    /// The encoding name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        "listpack"
    }

    /// Heap bytes owned by the value.
    pub fn heap_bytes(&self) -> usize {
        0
    }
}
