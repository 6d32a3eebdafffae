//! Fuzz target `http_request`: see `cmdr_fuzz::checks::http_request` for the properties checked.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cmdr_fuzz::checks::http_request::check(data));
