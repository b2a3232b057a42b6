//! FUNCTION RESTORE end to end: the fuzz input is a payload body (a valid
//! version and checksum are appended so the decoder itself is exercised);
//! every library it yields is loaded into a function engine as the server
//! does. Decoding and loading must succeed or fail with an error, never
//! panic or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vireo_script::FunctionEngine;
use vireo_script_fuzz::{NullHost, LOAD_TIMEOUT};
use vireo_store::rdb::{crc64, load::restore_functions, RDB_VERSION};

fuzz_target!(|data: &[u8]| {
    let mut payload = data.to_vec();
    payload.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    let Ok(libraries) = restore_functions(&payload) else {
        return;
    };
    let mut engine = FunctionEngine::new(64 << 20).expect("a Lua VM");
    for code in libraries {
        let _ = engine.load(&code, true, LOAD_TIMEOUT, &mut NullHost);
    }
});
