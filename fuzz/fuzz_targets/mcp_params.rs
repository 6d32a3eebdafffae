//! Fuzz target `mcp_params`: see `cmdr_fuzz::checks::mcp_params` for the properties checked.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cmdr_fuzz::checks::mcp_params::check(data));
