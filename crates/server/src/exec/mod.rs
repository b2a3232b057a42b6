//! What every command shares at run time, outside any one family: the
//! dispatch path from parsed arguments to a reply (lookup, checks, locking,
//! stats), the registry of clients blocked on keys, and the run-time side
//! of Lua scripts.

pub mod blocking;
pub mod dispatch;
pub mod monitor;
pub mod multi;
pub mod notify;
pub mod pubsub;
pub mod redact;
pub mod script;
pub mod script_debug;
pub mod tracking;
