//! Security: who may connect and what they may do. TLS configuration
//! (`tls.rs`: certificates, trust, protocol versions, cipher suites) lives
//! here; the TLS record layer of a connection is in `net/tls.rs`.

pub mod tls;
