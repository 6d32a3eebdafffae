//! The durable worker loop: commands come from the `CMDR_COMMANDS` work queue through a
//! shared pull consumer, one message per free slot (a busy worker never hoards messages
//! that idle workers could run).
//!
//! Per command: progress acks every third of `ack_wait` while it runs (so a long command
//! is not redelivered); results published as in core mode, the terminal one confirmed
//! stored in `CMDR_RESULTS`; then the message is acknowledged. A worker that dies leaves
//! the message unacknowledged: after `ack_wait` it is redelivered to another worker, which
//! says so in the output before running it again. After `max_attempts` deliveries the
//! command is failed with `REDELIVERY_LIMIT`. Stopped by this worker's shutdown, a
//! command is not failed but handed back (NAK) for another worker to run.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer::PullConsumer, AckKind};
use async_nats::Client;
use cmdr_executors::ErrorCode;
use cmdr_executors::{decode_command_slice, ExecutionStatus, OutputResult, Registry, ResultStream};
use futures_util::StreamExt;
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;

use super::alive::Holding;
use super::common::{decode_or_answer, listen_for_cancels, start, Runner};
use super::direct::Direct;
use super::options::{WorkerError, WorkerOptions};
use super::publish::{Published, Publisher};
use super::timeout_cap::admit;
use crate::nats::durable::{ensure_consumer, ensure_streams, DurableSettings};
use crate::nats::subjects;

/// How long one pull waits for a command before asking again.
const PULL_WAIT: Duration = Duration::from_secs(5);
/// Pause after a failed pull (server restarting …).
const PULL_RETRY: Duration = Duration::from_millis(500);

/// Runs a durable worker until `shutdown` resolves.
pub(super) async fn run(
    client: Client,
    registry: Registry,
    options: WorkerOptions,
    settings: DurableSettings,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WorkerError> {
    let js = jetstream::new(client.clone());
    ensure_streams(&js, &settings).await?;
    let consumer = ensure_consumer(&js, &options.queue, &settings).await?;
    let tracker = TaskTracker::new();
    // Commands for this worker's processes and sessions: core requests, never replayed
    // elsewhere (their results still land in `CMDR_RESULTS`, which covers the subject).
    let direct_runner = Runner {
        registry: registry.clone(),
        publisher: Publisher::core(client.clone()),
        holding: Holding::new(&options.worker_id),
        max_timeout: options.max_timeout,
    };
    let mut direct = Direct::start(&client, direct_runner, options.jobs, &tracker).await?;
    let cancels = client
        .subscribe(subjects::CANCEL_ALL)
        .await
        .map_err(|source| WorkerError::Subscribe {
            subject: subjects::CANCEL_ALL,
            source,
        })?;
    let cancel_listener = tokio::spawn(listen_for_cancels(cancels, registry.clone()));
    direct.answer_liveness(&client).await?;
    let publisher = Publisher::durable(client.clone(), js);
    let slots = Arc::new(Semaphore::new(options.jobs.max(1)));
    let settings = Arc::new(settings);
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot { Ok(s) => s, Err(_) => break },
            () = &mut shutdown => break,
        };
        let message = tokio::select! {
            message = pull_one(&consumer) => message,
            () = &mut shutdown => break,
        };
        let (registry, publisher, settings) =
            (registry.clone(), publisher.clone(), settings.clone());
        let max_timeout = options.max_timeout;
        // Boxed, like the core loop's tasks: spawned as a pointer, not a large future.
        tracker.spawn(Box::pin(async move {
            let worker = Worker {
                registry: &registry,
                publisher: &publisher,
                settings: &settings,
                max_timeout,
            };
            run_one(message, &worker).await;
            drop(slot);
        }));
    }
    tracing::info!("durable worker shutting down");
    direct.stop();
    // Running commands get the grace; every process of this worker is stopped.
    registry.shutdown(options.shutdown_grace).await;
    tracker.close();
    tracker.wait().await;
    cancel_listener.abort();
    direct.stop_answering();
    if let Err(e) = client.flush().await {
        tracing::warn!("flushing on shutdown: {e}");
    }
    Ok(())
}

/// Waits for the next command (one message), retrying through errors.
async fn pull_one(consumer: &PullConsumer) -> jetstream::Message {
    loop {
        let batch = consumer
            .batch()
            .max_messages(1)
            .expires(PULL_WAIT)
            .messages()
            .await;
        match batch {
            Ok(mut batch) => match batch.next().await {
                Some(Ok(message)) => return message,
                Some(Err(e)) => tracing::debug!("pulling a command: {e}"),
                None => continue,
            },
            Err(e) => tracing::debug!("pulling a command: {e}"),
        }
        tokio::time::sleep(PULL_RETRY).await;
    }
}

/// What running one delivered command needs.
struct Worker<'a> {
    registry: &'a Registry,
    publisher: &'a Publisher,
    settings: &'a DurableSettings,
    /// `--max-timeout-ms`: a longer `timeout_ms` is refused, none gets it as its deadline.
    max_timeout: Duration,
}

/// Runs one delivered command and settles its message.
async fn run_one(message: jetstream::Message, worker: &Worker<'_>) {
    let (publisher, settings) = (worker.publisher, worker.settings);
    let heartbeat = tokio::spawn(keep_alive(message.clone(), settings.ack_wait / 3));
    let outcome = run_delivery(&message, worker).await;
    heartbeat.abort();
    let sequence = message.info().map(|i| i.stream_sequence).unwrap_or(0);
    if outcome == Published::Redeliver {
        announce_hand_back(&message, publisher).await;
    }
    let settled = match outcome {
        Published::Complete => message.double_ack().await,
        Published::Redeliver | Published::Failed => message.ack_with(AckKind::Nak(None)).await,
    };
    if let Err(e) = settled {
        tracing::warn!(sequence, "settling a command message: {e}");
    }
}

async fn run_delivery(message: &jetstream::Message, worker: &Worker<'_>) -> Published {
    let (registry, publisher, settings) = (worker.registry, worker.publisher, worker.settings);
    let Some((scope, mut command)) = decode_or_answer(message, publisher).await else {
        return Published::Complete;
    };
    let info = message.info().ok();
    let attempt = info.as_ref().map_or(1, |i| i.delivered).max(1);
    let limit = i64::from(settings.max_attempts);
    let id = command.command_id().to_owned();
    let sequence = info.map_or(0, |i| i.stream_sequence);
    tracing::debug!(command_id = %id, sequence, attempt, "running a durable command");
    let command_type = command.command_type().as_str().to_owned();
    if attempt > limit {
        let result = gave_up(&id, &command_type, limit);
        return publisher
            .publish_all(ResultStream::from_result(result))
            .await;
    }
    if attempt > 1 {
        let note = restart_note(&id, &command_type, attempt, limit);
        if let Err(e) = publisher.publish_note(note).await {
            tracing::warn!("announcing a redelivery: {e}");
        }
    }
    let default = registry.default_timeout(command.command_type());
    let stream = match admit(&mut command, worker.max_timeout, default) {
        Some(refused) => ResultStream::from_result(refused),
        None => start(registry, scope, command).await,
    };
    let outcome = publisher.publish_all(stream).await;
    tracing::debug!(command_id = %id, sequence, ?outcome, "durable command ran");
    outcome
}

/// Says, in the command's output, that this worker stopped it and another will run it
/// again (the server does not count a hand-back as a failed delivery, so the next worker
/// cannot tell).
async fn announce_hand_back(message: &jetstream::Message, publisher: &Publisher) {
    let Ok(command) = decode_command_slice(&message.payload) else {
        return;
    };
    let Some(producer) = subjects::producer_of(&message.subject) else {
        return;
    };
    let id = subjects::scoped(producer, command.command_id());
    let mut note = gave_up(&id, command.command_type().as_str(), 0);
    note.status = ExecutionStatus::Running;
    note.message = "Handed back: this worker is shutting down.".to_owned();
    note.error = String::new();
    note.error_code = None;
    note.result_data = "\n[cmdr: the worker running this command shut down; it will run again on another worker]\n".to_owned();
    if let Err(e) = publisher.publish_note(note).await {
        tracing::warn!("announcing a hand-back: {e}");
    }
}

/// Marks the message in progress until aborted.
async fn keep_alive(message: jetstream::Message, every: Duration) {
    let every = every.max(Duration::from_millis(100));
    loop {
        tokio::time::sleep(every).await;
        if let Err(e) = message.ack_with(AckKind::Progress).await {
            tracing::debug!("progress ack: {e}");
        }
    }
}

/// The line a redelivered command's output starts with, so whoever reads the combined
/// output knows the text before it came from an abandoned attempt.
fn restart_note(id: &str, command_type: &str, attempt: i64, limit: i64) -> OutputResult {
    let mut note = gave_up(id, command_type, limit);
    note.status = ExecutionStatus::Running;
    note.message = format!("Redelivered: attempt {attempt} of {limit}.");
    note.error = String::new();
    note.error_code = None;
    note.result_data = format!(
        "\n[cmdr: the worker running this command stopped; running it again on another worker, attempt {attempt} of {limit}]\n"
    );
    note
}

fn gave_up(id: &str, command_type: &str, limit: i64) -> OutputResult {
    OutputResult {
        command_id: id.to_owned(),
        command_type: command_type.to_owned(),
        status: ExecutionStatus::Failed,
        message: "Command abandoned.".to_owned(),
        error: format!("workers stopped while running this command {limit} times; not retried"),
        error_code: Some(ErrorCode::RedeliveryLimit.into()),
        ..Default::default()
    }
}
