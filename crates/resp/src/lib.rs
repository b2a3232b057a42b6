//! `vireo-resp`: the RESP (REdis Serialization Protocol) layer of Vireo.
//!
//! This crate is pure: no I/O, no networking, no global state. It provides
//!
//! * [`Parser`]: a resumable, allocation-free (in steady state) parser for
//!   client requests in both the inline and multibulk forms, behaving like
//!   Redis 7.0's `networking.c` down to its error messages;
//! * [`Args`] / [`OwnedArgs`]: zero-copy and owned views of a command's
//!   arguments;
//! * [`peek_command`]: a stateless look-ahead at the next pipelined
//!   command, so a server can prefetch a batch's keys before running it;
//! * [`ReplyBuf`]: an output buffer that encodes replies in RESP2 or RESP3;
//! * [`number`]: Redis-exact integer/double parsing and formatting;
//! * [`repr`]: byte strings quoted as Redis's `sdscatrepr` quotes them.
//!
//! Typical connection loop (the server owns the socket and buffers):
//!
//! ```
//! use vireo_resp::{ParseLimits, Parser, Protocol, ReplyBuf};
//!
//! let mut parser = Parser::new();
//! let limits = ParseLimits::default();
//! let mut input: Vec<u8> = b"*1\r\n$4\r\nPING\r\nECHO hi\r\n".to_vec();
//! let mut out = ReplyBuf::new(Protocol::Resp2);
//! loop {
//!     match parser.parse(&input, &limits) {
//!         Ok(Some(n)) => {
//!             let args = parser.args(&input);
//!             if !args.is_empty() {
//!                 if args.get(0).eq_ignore_ascii_case(b"PING") {
//!                     out.simple("PONG");
//!                 } else {
//!                     out.bulk(args.get(1));
//!                 }
//!             }
//!             input.drain(..n);
//!         }
//!         Ok(None) => break, // read more from the socket, then parse again
//!         Err(e) => {
//!             out.error(&format!("ERR {}", e.message));
//!             break; // and close the connection after flushing
//!         }
//!     }
//! }
//! assert_eq!(out.as_bytes(), b"+PONG\r\n$2\r\nhi\r\n");
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod args;
pub mod number;
pub mod parse;
pub mod peek;
pub mod reply;
pub mod repr;

pub use args::{Args, ArgsIter, OwnedArgs};
pub use number::{
    format_double, parse_f64, parse_f64_lenient, parse_i64, parse_u64, write_double, write_i64,
    write_u64,
};
pub use parse::{ParseLimits, Parser, ProtocolError};
pub use peek::peek_command;
pub use reply::{DeferredLen, Protocol, ReplyBuf};
