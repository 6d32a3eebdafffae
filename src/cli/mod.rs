//! The `cmdr` command line. Each subcommand lives in its own file and only translates
//! between the terminal and the library.

mod exec;

use clap::{Parser, Subcommand};

pub use exec::ExecArgs;

/// Exit status: everything requested succeeded.
pub const EXIT_OK: u8 = 0;
/// Exit status: at least one command failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit status: the invocation itself was wrong (unreadable input file …).
pub const EXIT_USAGE: u8 = 2;
/// Exit status: interrupted by SIGINT/SIGTERM (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

/// cmdr — an actor-based async command runner for AI agents.
#[derive(Debug, Parser)]
#[command(name = "cmdr", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: CliCommand,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// Run commands (one JSON object or JSON Lines) and print every result as JSON Lines.
    Exec(ExecArgs),
}

impl Cli {
    /// Runs the chosen subcommand; returns the process exit status.
    pub async fn run(self) -> u8 {
        match self.command {
            CliCommand::Exec(args) => exec::run(args).await,
        }
    }
}
