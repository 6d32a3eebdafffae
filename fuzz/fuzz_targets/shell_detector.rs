//! Fuzz target `shell_detector`: see `cmdr_fuzz::checks::shell_detector` for the properties checked.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cmdr_fuzz::checks::shell_detector::check(data));
