//! Integration tests of the command package: every executor, the runtime, the protocol
//! and confinement, through a real registry, with real processes and real files.

mod bash_exec;
mod combine;
mod confine;
mod confine_mounts;
mod confine_proc;
mod confine_race;
mod duration_caps;
mod file_read;
mod file_write;
mod list_directory;
mod patch_file;
mod process_attacks;
mod process_ids;
mod process_lifetimes;
mod process_races;
mod process_reads;
mod processes;
mod protocol;
mod pty;
mod queueing;
mod runtime;
mod scope_domains;
mod scopes;
mod sessions;
mod user_input;

pub use cmdr_test_support::results::*;
pub use cmdr_test_support::PATIENCE;
