//! The worker loop (`cmdr worker`): take commands from `cmdr.commands.>` in a queue
//! group, run each through the registry, publish every result on
//! `cmdr.results.<command_id>` in order.
//!
//! A reader task answers every command it receives at once with [`Accepted`] (so a
//! producer learns immediately that a worker has it) and queues it; the dispatcher runs
//! queued commands `--jobs` at a time. Cancels (`cmdr.cancel.*`) reach every worker; the
//! one running the command stops it. Every worker has an id and answers on
//! `cmdr.alive.<worker_id>` whether it still has a command, so a producer notices a
//! worker that died (see `liveness`). Shutdown: stop receiving, answer commands not yet
//! started with `SHUTTING_DOWN`, let running ones finish within the grace (then cancel
//! them), publish every terminal result, flush.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_nats::{Client, Message};
use cmdr_executors::ErrorCode;
use cmdr_executors::{
    decode_command_slice, peek_command_id, Command, Registry, ResultStream, SubmitError,
};
use futures_util::StreamExt;
use tokio::sync::{mpsc, Semaphore};
use tokio_util::task::TaskTracker;

use super::durable::{DurableError, DurableSettings};
use super::liveness::Holding;
use super::publish::Publisher;
use super::subjects;
use super::wire::Accepted;

/// Settings of a worker.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Queue group shared by the pool.
    pub queue: String,
    /// Commands run at once.
    pub jobs: usize,
    /// On shutdown, how long running commands may go on before they are cancelled.
    pub shutdown_grace: Duration,
    /// Durable mode (JetStream) with these settings; core mode when `None`.
    pub durable: Option<DurableSettings>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            queue: subjects::DEFAULT_QUEUE.to_owned(),
            jobs: 16,
            shutdown_grace: Duration::from_secs(10),
            durable: None,
        }
    }
}

/// Why the worker could not run.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Subscribing failed.
    #[error("subscribing to {subject}: {source}")]
    Subscribe {
        /// The subject.
        subject: &'static str,
        /// The client's error.
        source: async_nats::SubscribeError,
    },
    /// Durable mode could not set up its streams or consumer.
    #[error(transparent)]
    Durable(#[from] DurableError),
}

impl WorkerError {
    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            WorkerError::Subscribe { .. } => ErrorCode::NatsSubscribeFailed,
            WorkerError::Durable(e) => e.code(),
        }
    }
}

/// Runs the worker until `shutdown` resolves, then shuts down gracefully.
pub async fn run(
    client: Client,
    registry: Registry,
    options: WorkerOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WorkerError> {
    if let Some(settings) = options.durable.clone() {
        return super::durable_worker::run(client, registry, options, settings, shutdown).await;
    }
    let subscribe_error = |subject| move |source| WorkerError::Subscribe { subject, source };
    let commands = client
        .queue_subscribe(subjects::COMMANDS_ALL, options.queue.clone())
        .await
        .map_err(subscribe_error(subjects::COMMANDS_ALL))?;
    let cancels = client
        .subscribe(subjects::CANCEL_ALL)
        .await
        .map_err(subscribe_error(subjects::CANCEL_ALL))?;
    let holding = Holding::new();
    let alive_subject = subjects::alive(holding.worker_id());
    let alive = client
        .subscribe(alive_subject)
        .await
        .map_err(subscribe_error("cmdr.alive.<worker>"))?;
    let tracker = TaskTracker::new();
    let cancel_listener = tokio::spawn(listen_for_cancels(cancels, registry.clone()));
    let alive_responder = tokio::spawn(holding.clone().answer(alive, client.clone()));
    let (queue, mut queued) = mpsc::unbounded_channel();
    let reader = tokio::spawn(accept(commands, client.clone(), queue, holding.clone()));
    let publisher = Publisher::core(client.clone());
    let dispatcher = dispatch(
        &mut queued,
        Runner {
            registry: registry.clone(),
            publisher: publisher.clone(),
            holding: holding.clone(),
        },
        options.jobs,
        &tracker,
    );
    tokio::select! {
        () = dispatcher => {}
        () = shutdown => {}
    }
    tracing::info!("worker shutting down");
    reader.abort();
    queued.close();
    registry.shutdown(options.shutdown_grace).await;
    let runner = Runner {
        registry,
        publisher,
        holding,
    };
    while let Some(message) = queued.recv().await {
        // Accepted but never started: the registry refuses it now, and says so.
        runner.run(&message).await;
    }
    tracker.close();
    tracker.wait().await;
    cancel_listener.abort();
    alive_responder.abort();
    if let Err(e) = client.flush().await {
        tracing::warn!("flushing results on shutdown: {e}");
    }
    Ok(())
}

/// Answers each received command with [`Accepted`] (naming this worker), holds its id
/// (see [`Holding`]) and queues it.
async fn accept(
    mut commands: async_nats::Subscriber,
    client: Client,
    queue: mpsc::UnboundedSender<Message>,
    holding: Holding,
) {
    while let Some(message) = commands.next().await {
        let id = peek_command_id(&message.payload).unwrap_or_default();
        holding.hold(&id);
        if let Some(reply) = message.reply.clone() {
            let accepted = Accepted {
                command_id: id,
                worker: Some(holding.worker_id().to_owned()),
            };
            if let Ok(body) = serde_json::to_vec(&accepted) {
                if let Err(e) = client.publish(reply, body.into()).await {
                    tracing::warn!("acknowledging a command: {e}");
                }
            }
        }
        if queue.send(message).is_err() {
            return;
        }
    }
}

/// Runs queued commands, `jobs` at a time, until the queue closes.
async fn dispatch(
    queued: &mut mpsc::UnboundedReceiver<Message>,
    runner: Runner,
    jobs: usize,
    tracker: &TaskTracker,
) {
    let slots = Arc::new(Semaphore::new(jobs.max(1)));
    while let Some(message) = queued.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let runner = runner.clone();
        tracker.spawn(async move {
            runner.run(&message).await;
            drop(slot);
        });
    }
}

/// What a core worker needs to run one command message.
#[derive(Clone)]
struct Runner {
    registry: Registry,
    publisher: Publisher,
    holding: Holding,
}

impl Runner {
    /// Runs one command message, publishes its results, then stops holding its id.
    async fn run(&self, message: &Message) {
        if let Some(command) = decode_or_answer(&message.payload, &self.publisher).await {
            let stream = start(&self.registry, command).await;
            self.publisher.publish_all(stream).await;
        }
        self.holding
            .release(&peek_command_id(&message.payload).unwrap_or_default());
    }
}

/// Decodes a command; answers an undecodable one on its results subject when an id can
/// be read (else logs it). `None` when there is nothing to run.
pub(super) async fn decode_or_answer(payload: &[u8], publisher: &Publisher) -> Option<Command> {
    let command = match decode_command_slice(payload) {
        Ok(command) => command,
        Err(failure) => {
            let result = failure.to_result();
            if subjects::is_valid_id(&result.command_id) {
                publisher
                    .publish_all(ResultStream::from_result(result))
                    .await;
            } else {
                tracing::warn!("dropped a command with no usable id: {failure}");
            }
            return None;
        }
    };
    if !subjects::is_valid_id(command.command_id()) {
        tracing::warn!(
            id = command.command_id(),
            "dropped a command whose id is not a subject token"
        );
        return None;
    }
    Some(command)
}

/// Starts `command`; a refusal becomes a one-message stream.
pub(super) async fn start(registry: &Registry, command: Command) -> ResultStream {
    let id = command.command_id().to_owned();
    let command_type = command.command_type();
    registry
        .execute(command)
        .await
        .unwrap_or_else(|e: SubmitError| {
            ResultStream::from_result(e.to_result(&id, command_type.as_str()))
        })
}

/// Cancels commands named on `cmdr.cancel.<id>`.
pub(super) async fn listen_for_cancels(mut cancels: async_nats::Subscriber, registry: Registry) {
    while let Some(message) = cancels.next().await {
        if let Some(id) = subjects::id_of(&message.subject) {
            if registry.cancel(id) {
                tracing::info!(command_id = id, "cancelled over the bus");
            }
        }
    }
}
