//! Fuzz target `patch`: see `cmdr_fuzz::checks::patch` for the properties checked.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cmdr_fuzz::checks::patch::check(data));
