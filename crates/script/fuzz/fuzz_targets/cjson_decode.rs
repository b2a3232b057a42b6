//! Feeds arbitrary bytes to `cjson.decode` inside a script: it must return
//! a value or raise a Lua error (caught here by `pcall`), never crash the
//! VM, and whatever it decodes must encode again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vireo_script_fuzz::run_with_argument;

const SCRIPT: &str = "local ok, v = pcall(cjson.decode, ARGV[1]) \
    if ok then local ok2 = pcall(cjson.encode, v) end return 1";

fuzz_target!(|data: &[u8]| {
    assert_eq!(run_with_argument(SCRIPT, data), b":1\r\n");
});
