//! The Vireo keyspace: databases split into independently locked shards, the
//! value types with their encodings, expiry and the key-pattern matcher.
//!
//! Nothing here does networking. The server crate locks the shards a command
//! needs (through [`keyspace::Keyspace`]) and then reads and writes values
//! through the resulting [`keyspace::Keys`] view.

pub mod clock;
pub mod dict;
pub mod entry;
pub mod entry_alloc;
pub mod evict;
pub mod geo;
pub mod geohash;
pub mod glob;
pub mod hash;
pub mod hash_memo;
pub mod hll;
mod key_table;
pub mod keyspace;
pub mod list;
pub mod long_double;
pub mod module;
mod open_table;
pub mod rdb;
pub mod set;
mod small_bytes;
pub mod snapshot;
pub mod stream;
mod ttl_index;
pub mod value;
pub mod zset;

pub use evict::{Evicted, EvictionPool, Policy};
pub use keyspace::{Entry, Key, Keys, Keyspace, ShardStats};
pub use value::{StrRef, StrValue, Value, ValueRef};
