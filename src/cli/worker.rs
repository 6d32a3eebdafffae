//! `cmdr worker --nats URL`: run commands from the bus until SIGINT/SIGTERM.

use std::sync::Arc;
use std::time::Duration;

use super::confine::{self, ConfineArgs};
use super::nats_args::NatsAuthArgs;
use super::{connect, shutdown_signal, EXIT_OK, EXIT_USAGE};
use crate::nats::durable::DurableSettings;
use crate::nats::input::NatsInput;
use crate::nats::subjects;
use crate::nats::worker::{self, WorkerOptions, DEFAULT_MAX_QUEUED, DEFAULT_MAX_QUEUED_BYTES};

/// Arguments of `cmdr worker`.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The NATS server.
    #[arg(long, env = "CMDR_NATS_URL", default_value = "nats://127.0.0.1:4222")]
    pub nats: String,
    /// Credentials and TLS for NATS.
    #[command(flatten)]
    pub nats_auth: NatsAuthArgs,
    /// Queue group shared by the worker pool.
    #[arg(long, default_value = subjects::DEFAULT_QUEUE)]
    pub queue: String,
    /// Commands run at once by this worker.
    #[arg(long, short = 'j', default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub jobs: u32,
    /// Core mode: commands accepted and waiting for a free job at most; beyond, commands
    /// are answered busy and the producer tries again (maybe on another worker).
    #[arg(long, default_value_t = DEFAULT_MAX_QUEUED, value_name = "N")]
    pub max_queued: usize,
    /// Core mode: MiB of waiting commands' payloads at most.
    #[arg(long, default_value_t = DEFAULT_MAX_QUEUED_BYTES / (1024 * 1024), value_name = "MIB")]
    pub max_queued_mib: usize,
    /// On shutdown, seconds running commands may go on before they are cancelled.
    #[arg(long, default_value_t = 10)]
    pub grace_secs: u64,
    /// Durable mode: take commands from the JetStream work queue (see docs/nats.md).
    #[arg(long)]
    pub durable: bool,
    /// Durable mode: seconds without progress before a command is redelivered.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub ack_wait_secs: u64,
    /// Durable mode: deliveries of one command before it is failed.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_attempts: u32,
    /// Where commands may reach.
    #[command(flatten)]
    pub confine: ConfineArgs,
}

/// Runs `cmdr worker`; returns the exit status.
pub async fn run(args: WorkerArgs) -> u8 {
    let builder = match args.confine.builder() {
        Ok(builder) => builder,
        Err(e) => {
            eprintln!("cmdr worker: {e}");
            return EXIT_USAGE;
        }
    };
    let nats = args.nats_auth.connect(&args.nats, "cmdr worker");
    let client = match connect(&nats).await {
        Ok(client) => client,
        Err(message) => {
            eprintln!("cmdr worker: {message}");
            return EXIT_USAGE;
        }
    };
    let registry = builder
        .input_broker(Arc::new(NatsInput::new(client.clone())))
        .build();
    confine::report("cmdr worker", registry.confinement());
    let options = WorkerOptions {
        queue: args.queue,
        jobs: args.jobs as usize,
        max_queued: args.max_queued,
        max_queued_bytes: args.max_queued_mib.saturating_mul(1024 * 1024),
        shutdown_grace: Duration::from_secs(args.grace_secs),
        durable: args.durable.then(|| DurableSettings {
            ack_wait: Duration::from_secs(args.ack_wait_secs),
            max_attempts: args.max_attempts,
            ..DurableSettings::default()
        }),
    };
    eprintln!(
        "cmdr worker: serving {} (queue {}, {} jobs, {} mode) on {}",
        subjects::COMMANDS_ALL,
        options.queue,
        options.jobs,
        if args.durable { "durable" } else { "core" },
        nats.shown_servers()
    );
    match worker::run(client, registry, options, shutdown_signal()).await {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("cmdr worker: {e}");
            EXIT_USAGE
        }
    }
}
