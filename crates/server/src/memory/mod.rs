//! Memory: the counting allocator behind `used_memory`, `maxmemory`
//! eviction of keys, `maxmemory-clients` eviction of clients, and lazy
//! freeing of big values on a background thread.

pub mod alloc;
pub mod client_evict;
pub mod evict;
pub mod lazyfree;
