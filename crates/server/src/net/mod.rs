//! Networking: the acceptor, the worker threads and their event loops, one
//! connection's I/O and parser, the pipeline look-ahead, and the per-client
//! state (the registry every thread sees, and the session only the owning
//! worker touches), and the connections MIGRATE opens to other servers.

pub mod client;
pub mod conn;
pub mod link;
pub mod listener;
pub mod lookahead;
pub mod outbound;
pub mod session;
pub mod tls;
pub mod worker;
