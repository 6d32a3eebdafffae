//! `--max-concurrent`: how many commands of one type run at once before further ones are
//! queued (and told so: docs/contract.md §3, "Queueing"); `--session-idle-secs`: how long
//! an unused shell session lives.

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
    /// Seconds a shell session (`BASH_EXEC` with `session`) may stay unused before its
    /// shell is ended and its place freed.
    #[arg(long, env = "CMDR_SESSION_IDLE_SECS", value_name = "SECS",
          default_value_t = DEFAULT_SESSION_IDLE_SECS,
          value_parser = clap::value_parser!(u64).range(1..=7 * 24 * 3600))]
    pub session_idle_secs: u64,
}

/// Default of `--session-idle-secs`: 30 minutes.
const DEFAULT_SESSION_IDLE_SECS: u64 = 30 * 60;

impl ConcurrencyArgs {
    /// `--session-idle-secs` as a duration.
    pub fn session_idle(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.session_idle_secs)
    }
}
