//! Integration tests of the CLI over the command package: real processes, real files. The
//! command package's own suite is `executors/tests/`.

mod cli;
mod error_codes;
mod exec_processes;
mod exec_stdout;
mod interrupt;
mod module_cycles;
mod odd_files;
mod process_tree;
mod scope_spawner;
// The filter checks the x86-64 system-call ABI.
#[cfg(target_arch = "x86_64")]
mod seccomp;

pub use cmdr_test_support::results::*;
pub use cmdr_test_support::PATIENCE;
