//! Values stored under keys and their encodings.
//!
//! Each Redis type is one variant of [`Value`]; a type's compact and scalable
//! encodings live inside its own module, so `OBJECT ENCODING` can report the
//! same names Redis 7.0 reports.

use vireo_resp::number::parse_i64;

/// Longest string Redis stores as `embstr`; longer ones are `raw`.
const EMBSTR_MAX_LEN: usize = 44;

/// The value held by a key.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A Redis string (also what INCR and friends operate on).
    Str(StrValue),
    /// A list (`listpack` when small, `quicklist` when large).
    List(crate::list::List),
    /// A hash (`listpack` or `hashtable`).
    Hash(crate::hash::Hash),
    /// A set (`intset` or `hashtable`).
    Set(crate::set::Set),
    /// A sorted set (`listpack` or `skiplist`).
    ZSet(crate::zset::ZSet),
    /// A stream (boxed: it is larger than the other variants).
    Stream(Box<crate::stream::Stream>),
    /// A value of a type implemented outside the store (an SQL database).
    Module(crate::module::ModuleValue),
}

impl Value {
    /// The value, borrowed in the form entries hand out.
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Str(s) => ValueRef::Str(s.as_ref()),
            Value::List(v) => ValueRef::List(v),
            Value::Hash(v) => ValueRef::Hash(v),
            Value::Set(v) => ValueRef::Set(v),
            Value::ZSet(v) => ValueRef::ZSet(v),
            Value::Stream(v) => ValueRef::Stream(v),
            Value::Module(v) => ValueRef::Module(v),
        }
    }

    /// The type name TYPE and `SCAN ... TYPE` use.
    pub fn type_name(&self) -> &'static str {
        self.as_ref().type_name()
    }

    /// The encoding name `OBJECT ENCODING` reports.
    pub fn encoding_name(&self) -> &'static str {
        self.as_ref().encoding_name()
    }

    /// See [`ValueRef::free_effort`].
    pub fn free_effort(&self) -> usize {
        self.as_ref().free_effort()
    }

    /// Heap bytes owned by the value, for `MEMORY USAGE`.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Value::Str(s) => s.heap_bytes(),
            v => v.as_ref().heap_bytes(),
        }
    }
}

/// A borrowed value: what an [`crate::Entry`] hands out, since a string may
/// be stored in the entry's own block rather than as a [`Value`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueRef<'a> {
    /// A string.
    Str(StrRef<'a>),
    /// A list.
    List(&'a crate::list::List),
    /// A hash.
    Hash(&'a crate::hash::Hash),
    /// A set.
    Set(&'a crate::set::Set),
    /// A sorted set.
    ZSet(&'a crate::zset::ZSet),
    /// A stream.
    Stream(&'a crate::stream::Stream),
    /// A module value.
    Module(&'a crate::module::ModuleValue),
}

impl ValueRef<'_> {
    /// The type name TYPE and `SCAN ... TYPE` use.
    pub fn type_name(self) -> &'static str {
        match self {
            ValueRef::Str(_) => "string",
            ValueRef::List(_) => "list",
            ValueRef::Hash(_) => "hash",
            ValueRef::Set(_) => "set",
            ValueRef::ZSet(_) => "zset",
            ValueRef::Stream(_) => "stream",
            ValueRef::Module(m) => m.0.type_name(),
        }
    }

    /// The encoding name `OBJECT ENCODING` reports.
    pub fn encoding_name(self) -> &'static str {
        match self {
            ValueRef::Str(s) => s.encoding_name(),
            ValueRef::List(v) => v.encoding_name(),
            ValueRef::Hash(v) => v.encoding_name(),
            ValueRef::Set(v) => v.encoding_name(),
            ValueRef::ZSet(v) => v.encoding_name(),
            ValueRef::Stream(v) => v.encoding_name(),
            // Redis reports every module value as `raw`.
            ValueRef::Module(_) => "raw",
        }
    }

    /// Roughly how many allocations freeing the value walks, as Redis's
    /// `lazyfreeGetFreeEffort` counts them: the node count of a list, the
    /// element count of a hash table or skiplist encoding, and 1 for a
    /// string or a packed encoding (one buffer).
    pub fn free_effort(self) -> usize {
        match self {
            ValueRef::Str(_) => 1,
            ValueRef::List(v) => v.node_count(),
            ValueRef::Hash(v) if v.encoding_name() == "hashtable" => v.len(),
            ValueRef::Set(v) if v.encoding_name() == "hashtable" => v.len(),
            ValueRef::ZSet(v) if v.encoding_name() == "skiplist" => v.len(),
            ValueRef::Hash(_) | ValueRef::Set(_) | ValueRef::ZSet(_) => 1,
            ValueRef::Stream(v) => v.free_effort(),
            ValueRef::Module(_) => 1,
        }
    }

    /// Heap bytes owned by the value: a string's length (its own buffer
    /// when it is a [`Value`]; entries count embedded strings themselves).
    pub fn heap_bytes(self) -> usize {
        match self {
            ValueRef::Str(s) => s.len(),
            ValueRef::List(v) => v.heap_bytes(),
            ValueRef::Hash(v) => v.heap_bytes(),
            ValueRef::Set(v) => v.heap_bytes(),
            ValueRef::ZSet(v) => v.heap_bytes(),
            ValueRef::Stream(v) => std::mem::size_of::<crate::stream::Stream>() + v.heap_bytes(),
            ValueRef::Module(m) => m.0.heap_bytes(),
        }
    }

    /// An owned copy.
    pub fn to_value(self) -> Value {
        match self {
            ValueRef::Str(s) => Value::Str(s.to_owned()),
            ValueRef::List(v) => Value::List(v.clone()),
            ValueRef::Hash(v) => Value::Hash(v.clone()),
            ValueRef::Set(v) => Value::Set(v.clone()),
            ValueRef::ZSet(v) => Value::ZSet(v.clone()),
            ValueRef::Stream(v) => Value::Stream(Box::new(v.clone())),
            ValueRef::Module(m) => Value::Module(m.clone()),
        }
    }
}

/// A borrowed string value (see [`StrValue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrRef<'a> {
    /// A string that is the canonical decimal form of this integer.
    Int(i64),
    /// Any other byte string; `raw` once modified in place.
    Bytes { data: &'a [u8], raw: bool },
}

impl<'a> StrRef<'a> {
    /// The string's bytes; integers are formatted into `scratch`.
    pub fn as_bytes<'s>(self, scratch: &'s mut itoa::Buffer) -> &'s [u8]
    where
        'a: 's,
    {
        match self {
            StrRef::Int(n) => scratch.format(n).as_bytes(),
            StrRef::Bytes { data, .. } => data,
        }
    }

    /// Copies the string's bytes out.
    pub fn to_vec(self) -> Vec<u8> {
        self.as_bytes(&mut itoa::Buffer::new()).to_vec()
    }

    /// Length in bytes of the string form (STRLEN).
    pub fn len(self) -> usize {
        match self {
            StrRef::Int(n) => itoa::Buffer::new().format(n).len(),
            StrRef::Bytes { data, .. } => data.len(),
        }
    }

    /// True for the empty string.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// The value as an integer when its string form is a valid integer
    /// (the check INCR and friends make).
    pub fn as_i64(self) -> Option<i64> {
        match self {
            StrRef::Int(n) => Some(n),
            StrRef::Bytes { data, .. } => parse_i64(data),
        }
    }

    /// `int`, `embstr` or `raw`, as `OBJECT ENCODING` prints them.
    pub fn encoding_name(self) -> &'static str {
        match self {
            StrRef::Int(_) => "int",
            StrRef::Bytes { data, raw } if !raw && data.len() <= EMBSTR_MAX_LEN => "embstr",
            StrRef::Bytes { .. } => "raw",
        }
    }

    /// An owned copy.
    pub fn to_owned(self) -> StrValue {
        match self {
            StrRef::Int(n) => StrValue::Int(n),
            StrRef::Bytes { data, raw } => StrValue::Bytes {
                data: data.to_vec(),
                raw,
            },
        }
    }
}

/// A string value: integers that print back identically are kept as `i64`
/// (Redis's `int` encoding), everything else as bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StrValue {
    /// A string that is the canonical decimal form of this integer.
    Int(i64),
    /// Any other byte string. `raw` is true once the string was modified in
    /// place (APPEND, SETRANGE), which Redis reports as `raw` whatever its
    /// length.
    Bytes { data: Vec<u8>, raw: bool },
}

impl StrValue {
    /// Stores `b` with the most compact encoding that round-trips exactly.
    pub fn from_bytes(b: &[u8]) -> Self {
        match parse_i64(b) {
            Some(n) => StrValue::Int(n),
            None => StrValue::Bytes {
                data: b.to_vec(),
                raw: false,
            },
        }
    }

    /// Wraps an owned buffer, choosing the integer encoding when it fits.
    pub fn from_vec(data: Vec<u8>) -> Self {
        match parse_i64(&data) {
            Some(n) => StrValue::Int(n),
            None => StrValue::Bytes { data, raw: false },
        }
    }

    /// The string, borrowed.
    pub fn as_ref(&self) -> StrRef<'_> {
        match self {
            StrValue::Int(n) => StrRef::Int(*n),
            StrValue::Bytes { data, raw } => StrRef::Bytes { data, raw: *raw },
        }
    }

    /// The string's bytes; integers are formatted into `scratch`.
    pub fn as_bytes<'a>(&'a self, scratch: &'a mut itoa::Buffer) -> &'a [u8] {
        self.as_ref().as_bytes(scratch)
    }

    /// Copies the string's bytes out.
    pub fn to_vec(&self) -> Vec<u8> {
        self.as_ref().to_vec()
    }

    /// Length in bytes of the string form (STRLEN).
    pub fn len(&self) -> usize {
        self.as_ref().len()
    }

    /// True for the empty string.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value as an integer when its string form is a valid integer
    /// (the check INCR and friends make).
    pub fn as_i64(&self) -> Option<i64> {
        self.as_ref().as_i64()
    }

    /// Mutable bytes for in-place edits (APPEND, SETRANGE); turns an
    /// integer into its bytes and marks the string `raw` as Redis does.
    pub fn bytes_mut(&mut self) -> &mut Vec<u8> {
        if let StrValue::Int(n) = *self {
            *self = StrValue::Bytes {
                data: itoa::Buffer::new().format(n).as_bytes().to_vec(),
                raw: true,
            };
        }
        match self {
            StrValue::Bytes { data, raw } => {
                *raw = true;
                data
            }
            StrValue::Int(_) => unreachable!("converted above"),
        }
    }

    /// `int`, `embstr` or `raw`, as `OBJECT ENCODING` prints them.
    pub fn encoding_name(&self) -> &'static str {
        self.as_ref().encoding_name()
    }

    /// Heap bytes owned by the string.
    pub fn heap_bytes(&self) -> usize {
        match self {
            StrValue::Int(_) => 0,
            StrValue::Bytes { data, .. } => data.capacity(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_effort_counts_what_freeing_walks() {
        assert_eq!(Value::Str(StrValue::from_bytes(b"x")).free_effort(), 1);
        let mut small = crate::set::Set::new();
        let mut big = crate::set::Set::new();
        for i in 0..100 {
            small.insert(format!("{i}").as_bytes(), 512);
            big.insert(format!("m{i}").as_bytes(), 512);
        }
        // An intset is one buffer; a hash table one allocation per member.
        assert_eq!(Value::Set(small).free_effort(), 1);
        assert_eq!(Value::Set(big).free_effort(), 100);
        let mut list = crate::list::List::new(16);
        for _ in 0..10_000 {
            list.push(crate::list::End::Right, b"0123456789");
        }
        let nodes = list.node_count();
        assert!(nodes > 64);
        assert_eq!(Value::List(list).free_effort(), nodes);
    }

    #[test]
    fn integers_are_stored_as_int_only_when_canonical() {
        assert_eq!(StrValue::from_bytes(b"123"), StrValue::Int(123));
        assert_eq!(StrValue::from_bytes(b"-9"), StrValue::Int(-9));
        assert!(matches!(
            StrValue::from_bytes(b"0123"),
            StrValue::Bytes { .. }
        ));
        assert!(matches!(
            StrValue::from_bytes(b"+1"),
            StrValue::Bytes { .. }
        ));
        assert!(matches!(
            StrValue::from_bytes(b" 1"),
            StrValue::Bytes { .. }
        ));
    }

    #[test]
    fn encodings_match_redis_names() {
        assert_eq!(StrValue::from_bytes(b"42").encoding_name(), "int");
        assert_eq!(StrValue::from_bytes(b"hello").encoding_name(), "embstr");
        assert_eq!(StrValue::from_bytes(&[b'x'; 45]).encoding_name(), "raw");
        let mut s = StrValue::from_bytes(b"7");
        s.bytes_mut().push(b'x');
        assert_eq!(s.encoding_name(), "raw");
        assert_eq!(s.to_vec(), b"7x");
    }

    #[test]
    fn len_and_int_view() {
        assert_eq!(StrValue::Int(-120).len(), 4);
        assert_eq!(StrValue::from_bytes(b"abc").as_i64(), None);
        assert_eq!(StrValue::from_bytes(b"-5").as_i64(), Some(-5));
    }
}
