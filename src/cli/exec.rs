//! `cmdr exec [FILE|-|JSON]`: run commands locally, print every `OutputResult` as a JSON
//! line (see [`super::runner`] for input, ordering and exit status). The run is the
//! default scope of its registry: the background processes and sessions it starts are
//! stopped when it ends.

use std::sync::Arc;
use std::time::Duration;

use cmdr_executors::{Registry, ResultStream};

use super::concurrency::ConcurrencyArgs;
use super::confine::{self, ConfineArgs};
use super::output_limit::OutputLimitArgs;
use super::runner::{self, CommandStream, RunOptions, Submitter};
use super::EXIT_USAGE;
use crate::tty_input::TtyInput;

/// Run commands (one JSON object or JSON Lines) and print every result as JSON Lines.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// A file of commands, `-` for stdin (the default), or one JSON command.
    pub input: Option<String>,
    /// Print one combined result per command instead of every message.
    #[arg(long)]
    pub combine: bool,
    /// Run up to N commands at once.
    #[arg(long, short = 'j', default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub jobs: u32,
    /// Default timeout of BASH_EXEC commands without `timeout_ms`, in milliseconds.
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
    /// Where commands may reach.
    #[command(flatten)]
    pub confine: ConfineArgs,
    /// How much output a combined result keeps.
    #[command(flatten)]
    pub output: OutputLimitArgs,
    /// How many commands of one type run at once.
    #[command(flatten)]
    pub concurrency: ConcurrencyArgs,
}

/// Runs `cmdr exec`; returns the exit status.
pub async fn run(args: ExecArgs) -> u8 {
    let builder = match args.confine.builder() {
        Ok(builder) => builder,
        Err(e) => {
            eprintln!("cmdr exec: {e}");
            return EXIT_USAGE;
        }
    };
    let registry = builder
        .input_broker(Arc::new(TtyInput::default()))
        .default_timeout(args.timeout_ms.map(Duration::from_millis))
        .max_concurrent(args.concurrency.max_concurrent)
        .session_idle(args.concurrency.session_idle())
        .build();
    let options = RunOptions {
        combine: args.combine,
        jobs: args.jobs,
        max_output: args.output.limit(),
    };
    confine::report("cmdr exec", registry.confinement());
    let status = runner::run(args.input.as_deref(), registry.clone(), options, "exec").await;
    // The run is the scope of its processes: they end with it (SIGTERM, SIGKILL after 2 s).
    registry.shutdown(Duration::ZERO).await;
    status
}

impl Submitter for Registry {
    type Stream = ResultStream;

    async fn submit(&self, json: String) -> ResultStream {
        self.execute_json(&json).await
    }

    async fn interrupt(&self) {
        self.shutdown(Duration::ZERO).await;
    }
}

impl CommandStream for ResultStream {
    fn command_id(&self) -> String {
        ResultStream::command_id(self).to_owned()
    }

    fn command_type(&self) -> String {
        ResultStream::command_type(self).to_owned()
    }

    fn cancel(&self) {
        ResultStream::cancel(self);
    }
}
