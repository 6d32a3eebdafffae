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

/// Run commands from NATS (`cmdr.commands.>`) as part of a worker pool.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The NATS server.
    #[arg(long, env = "CMDR_NATS_URL", default_value = "nats://127.0.0.1:4222")]
    pub nats: String,
    /// Credentials and TLS for NATS.
    #[command(flatten)]
    pub nats_auth: NatsAuthArgs,
    /// This worker's id, unique in the pool (letters, digits, `-`, `_`): its process ids
    /// are `<id>-p1` …; random when absent.
    #[arg(long, env = "CMDR_WORKER_ID", value_parser = parse_worker_id)]
    pub worker_id: Option<String>,
    /// Queue group shared by the worker pool.
    #[arg(long, default_value = subjects::DEFAULT_QUEUE)]
    pub queue: String,
    /// Commands run at once by this worker.
    #[arg(long, short = 'j', default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub jobs: u32,
    /// Core mode: commands of one producer run at once at most (default: jobs - 1, at
    /// least 1), so one producer's commands cannot hold every job.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub jobs_per_producer: Option<u32>,
    /// Core mode: commands accepted and waiting for a free job at most; beyond, commands
    /// are answered busy and the producer tries again (maybe on another worker).
    #[arg(long, default_value_t = DEFAULT_MAX_QUEUED, value_name = "N")]
    pub max_queued: usize,
    /// Core mode: MiB of waiting commands' payloads at most.
    #[arg(long, default_value_t = DEFAULT_MAX_QUEUED_BYTES / (1024 * 1024), value_name = "MIB")]
    pub max_queued_mib: usize,
    /// Commands whose `timeout_ms` is above this many ms are refused with INVALID_INPUT,
    /// and those giving none get it as their deadline, so commands that never end cannot
    /// hold this worker's jobs (default: one hour).
    #[arg(long, default_value_t = worker::DEFAULT_MAX_TIMEOUT.as_millis() as u64, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_timeout_ms: u64,
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
    /// Seconds between sweeps for the orphans of killed workers on this host (processes
    /// a SIGKILLed worker left running), which are killed; 0: only at start-up.
    #[arg(long, default_value_t = 30, value_name = "SECS")]
    pub orphan_sweep_secs: u64,
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
    let worker_id = args.worker_id.unwrap_or_else(worker::random_worker_id);
    let registry = builder
        .input_broker(Arc::new(NatsInput::new(client.clone())))
        .process_id_prefix(subjects::process_id_prefix(&worker_id))
        .worker_shells()
        .build();
    let sweep_every =
        (args.orphan_sweep_secs > 0).then(|| Duration::from_secs(args.orphan_sweep_secs));
    let sweeper = tokio::spawn(crate::orphans::sweep_dead_workers(sweep_every));
    confine::report("cmdr worker", registry.confinement());
    let options = WorkerOptions {
        worker_id,
        queue: args.queue,
        jobs: args.jobs as usize,
        jobs_per_producer: args.jobs_per_producer.map(|n| n as usize),
        max_queued: args.max_queued,
        max_queued_bytes: args.max_queued_mib.saturating_mul(1024 * 1024),
        max_timeout: Duration::from_millis(args.max_timeout_ms),
        shutdown_grace: Duration::from_secs(args.grace_secs),
        durable: args.durable.then(|| DurableSettings {
            ack_wait: Duration::from_secs(args.ack_wait_secs),
            max_attempts: args.max_attempts,
            ..DurableSettings::default()
        }),
    };
    eprintln!(
        "cmdr worker: serving {} (worker {}, queue {}, {} jobs, {} mode) on {}",
        subjects::COMMANDS_ALL,
        options.worker_id,
        options.queue,
        options.jobs,
        if args.durable { "durable" } else { "core" },
        nats.shown_servers()
    );
    let outcome = worker::run(client, registry, options, shutdown_signal()).await;
    sweeper.abort();
    match outcome {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("cmdr worker: {e}");
            EXIT_USAGE
        }
    }
}

/// A worker id: a subject token that a process id can be split back into (letters, digits,
/// `-` and `_`; at most 64).
fn parse_worker_id(id: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if id.is_empty() || id.len() > 64 || !id.chars().all(allowed) {
        return Err("use 1 to 64 letters, digits, '-' or '_'".to_owned());
    }
    Ok(id.to_owned())
}
