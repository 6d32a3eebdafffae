//! The core-mode worker loop: a reader task answers every command it receives at once
//! with [`Accepted`] and queues it; the dispatcher runs queued commands `--jobs` at a
//! time; shutdown answers commands not yet started with `SHUTTING_DOWN`.

use std::future::Future;
use std::sync::Arc;

use async_nats::{Client, Message};
use cmdr_executors::{peek_command_id, Registry};
use futures_util::StreamExt;
use tokio::sync::{mpsc, Semaphore};
use tokio_util::task::TaskTracker;

use super::alive::Holding;
use super::backlog::Backlog;
use super::common::{decode_or_answer, listen_for_cancels, scoped_id, start};
use super::options::{WorkerError, WorkerOptions};
use super::publish::Publisher;
use crate::nats::subjects;
use crate::nats::wire::Accepted;

/// Runs a core worker until `shutdown` resolves, then shuts down gracefully.
pub(super) async fn run(
    client: Client,
    registry: Registry,
    options: WorkerOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WorkerError> {
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
    let backlog = Arc::new(Backlog::new(options.max_queued, options.max_queued_bytes));
    let reader = tokio::spawn(accept(
        commands,
        client.clone(),
        queue,
        holding.clone(),
        backlog.clone(),
    ));
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
        &backlog,
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

/// Answers each received command with [`Accepted`] (naming this worker) and queues it,
/// holding its id (see [`Holding`]); past the [`Backlog`]'s limits it answers `busy`
/// instead and drops it.
async fn accept(
    mut commands: async_nats::Subscriber,
    client: Client,
    queue: mpsc::UnboundedSender<Message>,
    holding: Holding,
    backlog: Arc<Backlog>,
) {
    while let Some(message) = commands.next().await {
        let id = peek_command_id(&message.payload).unwrap_or_default();
        let admitted = backlog.try_admit(message.payload.len());
        if admitted {
            holding.hold(&scoped_id(&message.subject, &message.payload));
        }
        if let Some(reply) = message.reply.clone() {
            let accepted = Accepted {
                command_id: id,
                worker: Some(holding.worker_id().to_owned()),
                busy: !admitted,
            };
            if let Ok(body) = serde_json::to_vec(&accepted) {
                if let Err(e) = client.publish(reply, body.into()).await {
                    tracing::warn!("acknowledging a command: {e}");
                }
            }
        }
        if admitted && queue.send(message).is_err() {
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
    backlog: &Backlog,
) {
    let slots = Arc::new(Semaphore::new(jobs.max(1)));
    while let Some(message) = queued.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        backlog.release(message.payload.len());
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
        if let Some(command) =
            decode_or_answer(&message.subject, &message.payload, &self.publisher).await
        {
            let stream = start(&self.registry, command).await;
            self.publisher.publish_all(stream).await;
        }
        self.holding
            .release(&scoped_id(&message.subject, &message.payload));
    }
}
