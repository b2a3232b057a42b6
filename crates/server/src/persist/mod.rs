//! Persistence at run time: RDB snapshots without fork, the multi-part
//! append-only file, and the offline checkers (`vireo check-rdb`,
//! `vireo check-aof`). The file formats themselves live in
//! [`vireo_store::rdb`].

pub mod aof;
pub mod check_rdb;
pub mod forks;
pub mod rdb;
