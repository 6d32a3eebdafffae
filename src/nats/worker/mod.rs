//! The worker role (`cmdr worker`): take commands from `cmdr.commands.>` in a queue
//! group, run each through the registry, publish every result on
//! `cmdr.results.<producer>.<command_id>` in order.
//!
//! A reader task answers every command it receives at once with `Accepted` (so a
//! producer learns immediately that a worker has it) — or, when the producer asks for it,
//! with the command's first result if that comes soon (`reply`) — and queues it; the dispatcher runs
//! queued commands `--jobs` at a time. Cancels (`cmdr.cancel.*`) reach every worker; the
//! one running the command stops it. Every worker has an id and answers on
//! `cmdr.alive.<worker_id>` whether it still has a command, so a producer notices a
//! worker that died (see `producer::liveness`). Shutdown: stop receiving, answer commands not yet
//! started with `SHUTTING_DOWN`, let running ones finish within the grace (then cancel
//! them), publish every terminal result, flush.
//!
//! - `core_loop`: the core-mode loop (at most once); `durable_loop`: the JetStream loop
//!   (nothing lost).
//! - `options`: [`WorkerOptions`] and [`WorkerError`]; `common`: what both loops do with
//!   one command (decode, start, cancels).
//! - `backlog`: the bound on accepted-but-waiting commands (core mode);
//! - `direct`: the worker's own subjects, in both modes: commands for its processes and
//!   sessions (`cmdr.worker.<id>.commands.…`), discovery (`cmdr.workers.<producer>`),
//!   liveness;
//! - `publish`: publishing result streams; `reply`: replies deferred to carry the first
//!   result; `alive`: which commands it holds;
//!   [`input`]: `REQUEST_USER_INPUT` asked of the producer over the bus.

mod alive;
mod backlog;
mod common;
mod core_loop;
mod direct;
mod durable_loop;
mod fair;
pub mod input;
mod options;
mod publish;
mod reply;
mod timeout_cap;

pub use options::{
    random_worker_id, WorkerError, WorkerOptions, DEFAULT_MAX_QUEUED, DEFAULT_MAX_QUEUED_BYTES,
};
pub use timeout_cap::DEFAULT_MAX_TIMEOUT;

use std::future::Future;

use async_nats::Client;
use cmdr_executors::Registry;

/// Runs the worker until `shutdown` resolves, then shuts down gracefully: the durable
/// loop with `options.durable`, else the core loop.
pub async fn run(
    client: Client,
    registry: Registry,
    options: WorkerOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WorkerError> {
    match options.durable.clone() {
        Some(settings) => durable_loop::run(client, registry, options, settings, shutdown).await,
        None => core_loop::run(client, registry, options, shutdown).await,
    }
}
