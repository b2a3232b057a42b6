//! `vireo-script`: the Lua 5.1 engine behind EVAL and FCALL, as Redis 7.0
//! exposes it.
//!
//! The crate knows nothing of the server. Each worker thread owns an
//! [`EvalEngine`] (EVAL/EVALSHA and the script cache) and a
//! [`FunctionEngine`] (FUNCTION LOAD/FCALL and the library registry), each
//! with its own sandboxed VM (not `Send`). To run a script the server
//! passes a [`Host`], which runs the commands the script calls (with the
//! server's own locks) and decides whether a long script must be killed;
//! the script's reply is written to the caller's `vireo_resp::ReplyBuf`.
//!
//! Modules:
//! * `vm`: VM set-up (sandbox, frozen globals) and one run;
//! * `api`: the `redis` table; `call`: `redis.call`/`redis.pcall` as raw C
//!   functions; `convert`: Lua values → replies;
//! * `eval`, `functions`: the two engines; `shebang`: `#!lua` lines;
//! * `cjson`, `cmsgpack`, `bit`, `lstruct`: the bundled libraries;
//! * `ldb`: the Lua debugger of `SCRIPT DEBUG`;
//! * `host`, `reply`: the boundary types; `luaerr`, `numfmt`, `rand48`:
//!   Lua/C behaviour the rest relies on.

#![warn(missing_docs)]

mod api;
mod bit;
mod call;
mod cjson;
mod cmsgpack;
mod convert;
mod eval;
mod functions;
mod host;
mod ldb;
mod lstruct;
mod luaerr;
mod numfmt;
mod rand48;
mod reply;
mod shebang;
mod vm;

#[cfg(test)]
mod tests;

pub use api::{REDIS_VERSION, REDIS_VERSION_NUM};
pub use convert::REPLY_DEPTH_LIMIT;
pub use eval::EvalEngine;
pub use functions::{FunctionEngine, FunctionInfo, Library};
pub use host::{Host, Interrupt, LogLevel, ReplFlags};
pub use ldb::DebugChannel;
pub use reply::{Reply, ReplyParseError, MAX_PARSE_DEPTH};
pub use shebang::{parse_script_shebang, ScriptFlags, Shebang};
pub use vm::HOOK_INSTRUCTIONS;

/// A script that failed: the error reply to send (`message` is the text
/// after `-`, e.g. `ERR user_script:1: ... script: <sha>, on
/// @user_script:1.`), and whether Redis would skip counting it in error
/// stats (errors of commands the script ran were already counted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptError {
    /// Error reply text, without the leading `-`.
    pub message: String,
    /// Redis's `ignore_error_stats_update`.
    pub ignore_stats: bool,
}

impl ScriptError {
    /// An error to be counted in stats.
    pub(crate) fn plain(message: String) -> ScriptError {
        ScriptError {
            message,
            ignore_stats: false,
        }
    }
}

/// Outcome of a run: `Ok` when the reply was written to the output buffer,
/// `Err` when nothing was written and the caller sends the error.
pub type RunResult = Result<(), ScriptError>;

/// Lowercase hex SHA1 of `bytes` (script names, `redis.sha1hex`).
pub fn sha1_hex(bytes: &[u8]) -> String {
    sha1_smol::Sha1::from(bytes).digest().to_string()
}
