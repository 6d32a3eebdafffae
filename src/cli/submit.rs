//! `cmdr submit --nats URL [FILE|-|JSON]`: like `cmdr exec`, but the commands run on the
//! worker pool. Questions (`REQUEST_USER_INPUT`) are asked on this terminal.

use std::sync::Arc;

use super::nats_args::NatsAuthArgs;
use super::output_limit::OutputLimitArgs;
use super::runner::{self, CommandStream, RunOptions, Submitter};
use super::{connect, EXIT_USAGE};
use crate::nats::producer::{Producer, SubmitStream};
use crate::tty_input::TtyInput;

/// Send commands to the worker pool over NATS and print every result as JSON Lines.
#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// The NATS server.
    #[arg(long, env = "CMDR_NATS_URL", default_value = "nats://127.0.0.1:4222")]
    pub nats: String,
    /// Credentials and TLS for NATS.
    #[command(flatten)]
    pub nats_auth: NatsAuthArgs,
    /// A file of commands, `-` for stdin (the default), or one JSON command.
    pub input: Option<String>,
    /// Print one combined result per command instead of every message.
    #[arg(long)]
    pub combine: bool,
    /// Durable mode: store commands in JetStream (they wait for a worker, and are
    /// de-duplicated by id) and read results from the start (see docs/nats.md).
    #[arg(long)]
    pub durable: bool,
    /// Keep up to N commands in flight.
    #[arg(long, short = 'j', default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub jobs: u32,
    /// How much output a combined result keeps.
    #[command(flatten)]
    pub output: OutputLimitArgs,
}

/// Runs `cmdr submit`; returns the exit status.
pub async fn run(args: SubmitArgs) -> u8 {
    let nats = args.nats_auth.connect(&args.nats, "cmdr submit");
    let client = match connect(&nats).await {
        Ok(client) => client,
        Err(message) => {
            eprintln!("cmdr submit: {message}");
            return EXIT_USAGE;
        }
    };
    let producer = if args.durable {
        match Producer::durable(client).await {
            Ok(producer) => producer,
            Err(e) => {
                eprintln!("cmdr submit: {e}");
                return EXIT_USAGE;
            }
        }
    } else {
        Producer::new(client)
    };
    let producer = match producer.with_id(&nats.producer_id()) {
        Ok(producer) => producer,
        Err(e) => {
            eprintln!("cmdr submit: producer id: {e}");
            return EXIT_USAGE;
        }
    };
    let producer = producer.with_input_broker(Arc::new(TtyInput::default()));
    let options = RunOptions {
        combine: args.combine,
        jobs: args.jobs,
        max_output: args.output.limit(),
    };
    runner::run(args.input.as_deref(), producer, options, "submit").await
}

impl Submitter for Producer {
    type Stream = SubmitStream;

    async fn submit(&self, json: String) -> SubmitStream {
        self.submit_json(&json).await
    }

    async fn interrupt(&self) {
        // Streams dropped by the interruption have sent their cancels; make sure they
        // leave before the process does.
        tokio::task::yield_now().await;
        self.flush().await;
    }
}

impl CommandStream for SubmitStream {
    fn command_id(&self) -> String {
        match self {
            SubmitStream::Remote(stream) => stream.command_id().to_owned(),
            SubmitStream::Failed(result) => result
                .as_ref()
                .map(|r| r.command_id.clone())
                .unwrap_or_default(),
        }
    }

    fn command_type(&self) -> String {
        match self {
            SubmitStream::Remote(stream) => stream.command_type().to_owned(),
            SubmitStream::Failed(result) => result
                .as_ref()
                .map(|r| r.command_type.clone())
                .unwrap_or_default(),
        }
    }

    fn cancel(&self) {
        if let SubmitStream::Remote(stream) = self {
            stream.cancel();
        }
    }
}
