//! `--max-concurrent`: how many commands of one type run at once before further ones are
//! queued (and told so: docs/contract.md §3, "Queueing").

use cmdr_executors::DEFAULT_MAX_CONCURRENT;

/// The concurrency limit of `serve`, `mcp` and `exec`.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct ConcurrencyArgs {
    /// Commands of one type (BASH_EXEC, each file command, LIST_DIRECTORY) running at
    /// once; further ones wait in line, their streams saying at once that they are queued
    /// (REQUEST_USER_INPUT and the process commands, which mostly wait, allow 1024).
    #[arg(long, env = "CMDR_MAX_CONCURRENT", value_name = "N",
          default_value_t = DEFAULT_MAX_CONCURRENT,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65536))]
    pub max_concurrent: usize,
}
