//! Fuzz target `command_file`: see `cmdr_fuzz::checks::command_file` for the properties checked.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cmdr_fuzz::checks::command_file::check(data));
