//! Feeds arbitrary bytes to `cmsgpack.unpack` inside a script: it must
//! return values or raise a Lua error (caught by `pcall`), never crash or
//! allocate what a declared length claims, and what it unpacks must pack
//! again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vireo_script_fuzz::run_with_argument;

const SCRIPT: &str = "local r = {pcall(cmsgpack.unpack, ARGV[1])} \
    if r[1] then table.remove(r, 1) pcall(cmsgpack.pack, unpack(r)) end return 1";

fuzz_target!(|data: &[u8]| {
    assert_eq!(run_with_argument(SCRIPT, data), b":1\r\n");
});
