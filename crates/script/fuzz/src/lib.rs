//! What the fuzz targets share: a [`Host`] that runs no commands, and a
//! helper that runs one script over the fuzz input.

use std::time::Duration;

use vireo_resp::{Args, Protocol, ReplyBuf};
use vireo_script::{EvalEngine, Host, Interrupt, LogLevel, ReplFlags};

/// A host without a server: `redis.call` fails, logs go nowhere, and no
/// script is ever killed (the fuzzer's own timeout catches hangs).
pub struct NullHost;

impl Host for NullHost {
    fn call(&mut self, _args: Args<'_>, _resp: Protocol) -> &[u8] {
        b"-ERR no server in the fuzz target\r\n"
    }
    fn acl_check(&mut self, _args: Args<'_>) -> Option<bool> {
        None
    }
    fn log(&mut self, _level: LogLevel, _message: &[u8]) {}
    fn set_repl(&mut self, _flags: ReplFlags) {}
    fn interrupt(&mut self) -> Interrupt {
        Interrupt::Continue
    }
}

/// How long FUNCTION LOAD may run a library's top-level code.
pub const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// Runs `body` with the fuzz input as `ARGV[1]` on a fresh engine (64 MB
/// of Lua memory, as in the unit tests) and returns the reply bytes. The
/// script must catch the library's errors with `pcall` itself: a failed
/// run here means the library broke its contract. (A fresh engine per
/// input, not one per thread: a VM that outlives the run would keep
/// mlua's pooled buffers, which the leak checker reports at exit.)
pub fn run_with_argument(body: &str, input: &[u8]) -> Vec<u8> {
    let mut engine = EvalEngine::new(64 << 20).expect("a Lua VM");
    let mut out = ReplyBuf::new(Protocol::Resp2);
    let result = engine.eval(body.as_bytes(), &[], &[input], &mut NullHost, &mut out);
    assert!(result.is_ok(), "the script failed: {result:?}");
    out.as_bytes().to_vec()
}
