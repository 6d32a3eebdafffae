//! Fuzz target `json_escape`: see `cmdr_fuzz::checks::json_escape` for the properties checked.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cmdr_fuzz::checks::json_escape::check(data));
