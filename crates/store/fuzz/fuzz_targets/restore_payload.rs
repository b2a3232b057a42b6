//! Feeds arbitrary value encodings to the RESTORE path: the fuzz input is
//! the type byte and payload, and the target appends a valid version and
//! checksum so the decoder itself is exercised. Decoded values are encoded
//! again and must decode to the same value, also when decoded with
//! `salvage` (RESTORE under `sanitize-dump-payload no`, which keeps the
//! sound part of a damaged listpack or stream): what it keeps must be a
//! value the strict check accepts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vireo_store::rdb::{
    crc64, dump_payload, restore_payload, EncodeOptions, LoadOptions, RDB_VERSION,
};

fuzz_target!(|data: &[u8]| {
    let mut payload = data.to_vec();
    payload.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    let opts = LoadOptions::default();
    let salvage = LoadOptions {
        salvage: true,
        ..LoadOptions::default()
    };
    for decode in [&opts, &salvage] {
        if let Ok(v) = restore_payload(&payload, decode) {
            for compress in [false, true] {
                let again = dump_payload(
                    v.as_ref(),
                    &EncodeOptions {
                        compress,
                        ..Default::default()
                    },
                );
                assert_eq!(restore_payload(&again, &opts).as_ref(), Ok(&v));
            }
        }
    }
    // The unmodified input exercises the footer checks.
    let _ = restore_payload(data, &opts);
});
