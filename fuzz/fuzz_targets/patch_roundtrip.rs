//! Fuzz target `patch_roundtrip`: see `cmdr_fuzz::checks::patch_roundtrip` for the properties checked.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cmdr_fuzz::checks::patch_roundtrip::check(data));
