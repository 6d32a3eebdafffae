//! The `cmdr` command line. Each subcommand lives in its own file and only translates
//! between the terminal and the library.

mod agents;
mod chat;
mod chat_input;
mod chat_store;
mod chat_view;
mod concurrency;
mod confine;
mod exec;
mod nats_args;
mod output_limit;
mod process_refs;
mod runner;
mod serve;
mod server_limits;
mod setup;
mod stdout;
mod submit;
mod worker;

use clap::{Parser, Subcommand};

pub use agents::{
    transcript, AgentsAction, AgentsArgs, CommandsAction, CommandsArgs, ConversationsAction,
    ConversationsArgs, ServiceOptions,
};
pub use chat::ChatArgs;
pub use confine::ConfineArgs;
pub use exec::ExecArgs;
pub use serve::{McpArgs, ServeArgs};
pub use submit::SubmitArgs;
pub use worker::WorkerArgs;

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

/// The subcommands. Each one's arguments are built only when it is the one chosen
/// (`defer`): building all nine cost a one-shot `cmdr exec` ~0.65 ms (BENCHMARKS.md, X3).
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum CliCommand {
    /// Run commands (one JSON object or JSON Lines) and print every result as JSON Lines.
    Exec(ExecArgs),
    /// Run commands from NATS (`cmdr.commands.>`) as part of a worker pool.
    Worker(WorkerArgs),
    /// Send commands to the worker pool over NATS and print every result as JSON Lines.
    Submit(SubmitArgs),
    /// Chat with the agent: it runs the `<shell>` commands it writes.
    Chat(ChatArgs),
    /// List the agents of the agents folder.
    Agents(AgentsArgs),
    /// List and run agent commands (named multi-step prompt macros).
    Commands(CommandsArgs),
    /// List conversations and print their transcripts.
    Conversations(ConversationsArgs),
    /// Serve the REST API, SSE streams and web UI (5010) and MCP over HTTP (5012).
    Serve(ServeArgs),
    /// Serve MCP on stdin/stdout (logs on stderr).
    Mcp(McpArgs),
}

impl Cli {
    /// Whether one async thread serves this run better than a pool: `cmdr exec` one
    /// command at a time (the default `--jobs 1`). Its work is a chain — read a chunk,
    /// hand it on, print it — that a pool splits across threads, paying a wake-up per
    /// hand-off and worker threads to start: one thread measured 7.3 against 8.9 ms for a
    /// one-shot `BASH_EXEC true` and 84 against 91 ms for 100 MB of output (BENCHMARKS.md,
    /// X1/X3). Blocking work still goes to the blocking pool and stdout to its own thread;
    /// servers and `--jobs N` keep the multi-thread runtime.
    pub fn single_threaded(&self) -> bool {
        matches!(&self.command, CliCommand::Exec(args) if args.jobs == 1)
    }

    /// Runs the chosen subcommand; returns the process exit status.
    pub async fn run(self) -> u8 {
        match self.command {
            CliCommand::Exec(args) => exec::run(args).await,
            CliCommand::Worker(args) => worker::run(args).await,
            CliCommand::Submit(args) => submit::run(args).await,
            CliCommand::Chat(args) => chat::run(args).await,
            CliCommand::Agents(args) => agents::run_agents(args).await,
            CliCommand::Commands(args) => agents::run_commands(args).await,
            CliCommand::Conversations(args) => agents::run_conversations(args).await,
            CliCommand::Serve(args) => serve::run(args).await,
            CliCommand::Mcp(args) => serve::run_mcp(args).await,
        }
    }
}

/// Connects to NATS; the error says where and why (never with a secret).
async fn connect(
    connect: &crate::nats::connect::NatsConnect,
) -> Result<async_nats::Client, crate::app::SetupError> {
    Ok(connect.connect().await?)
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is called, not
/// when the future is first polled: a signal that arrives while the caller starts
/// serving (before it polls this) is caught, never the default action that kills cmdr.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let handlers = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move {
        let (Ok(mut int), Ok(mut term)) = handlers else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// A deferred subcommand takes its arguments' doc comment as its about when it is
    /// built: it must say what `cmdr --help` lists for it, in every subcommand.
    #[test]
    fn each_subcommand_says_in_its_own_help_what_the_list_says() {
        let cli = super::Cli::command();
        let mut checked = 0;
        for listed in cli.get_subcommands() {
            let mut built = listed.clone();
            built.build();
            assert_eq!(
                built.get_about().map(ToString::to_string),
                listed.get_about().map(ToString::to_string),
                "cmdr {} --help",
                listed.get_name()
            );
            // Deferred: nothing of a subcommand is built before it is chosen.
            assert_eq!(listed.get_arguments().count(), 0, "{}", listed.get_name());
            checked += 1;
        }
        assert_eq!(checked, 9);
    }
}
