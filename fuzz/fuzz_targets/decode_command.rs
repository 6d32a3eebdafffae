//! Fuzz target `decode_command`: see `cmdr_fuzz::checks::decode_command` for the properties checked.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cmdr_fuzz::checks::decode_command::check(data));
