//! Feeds arbitrary bytes to the RDB file loader (after a valid header, so
//! the fuzzer spends its time past the magic check): it must return items
//! or an error, never panic, hang or allocate beyond the input's size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vireo_store::rdb::{LoadOptions, Loader};

fuzz_target!(|data: &[u8]| {
    let mut file = b"REDIS0010".to_vec();
    file.extend_from_slice(data);
    let opts = LoadOptions {
        // Small thresholds reach the conversions with small inputs.
        set_max_intset_entries: 4,
        list_fill: 2,
        ..LoadOptions::default()
    };
    let Ok(mut loader) = Loader::with_options(&file[..], opts) else {
        return;
    };
    while let Ok(Some(_)) = loader.next() {}
});
