//! One module per fuzz target (`check(data)` panics when a property fails), plus what
//! they share.

pub mod command_file;
pub mod decode_command;
pub mod http_request;
pub mod input;
pub mod json_escape;
pub mod mcp_params;
pub mod patch;
pub mod patch_roundtrip;
pub mod shell_detector;
pub mod unified_diff;
