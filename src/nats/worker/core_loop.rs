//! The core-mode worker loop: a reader task answers every command it receives with
//! [`Accepted`](crate::nats::wire::Accepted) — at once, or, when the producer asks for it,
//! with the command's first result if that comes within `reply::REPLY_WAIT` — and queues
//! it; the dispatcher runs queued commands `--jobs` at a time; shutdown answers commands
//! not yet started with `SHUTTING_DOWN`.

use std::future::Future;
use std::sync::Arc;

use async_nats::Client;
use cmdr_executors::Registry;
use futures_util::StreamExt;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;

use super::alive::Holding;
use super::backlog::Backlog;
use super::common::{acknowledge, decode, ids_of, listen_for_cancels, Decoded, Runner};
use super::direct::Direct;
use super::options::{WorkerError, WorkerOptions};
use super::publish::Publisher;
use super::reply::{wants_result, Deadlines, Reply};
use crate::nats::subjects;

/// An accepted command: decoded (once, by the reader), its size (counted in the backlog),
/// its scoped id (held while it waits and runs), and its reply when deferred.
struct Queued {
    decoded: Decoded,
    size: usize,
    scoped: String,
    reply: Option<Arc<Reply>>,
}

impl Queued {
    /// Runs the command (see [`Runner::run_decoded`]).
    async fn run(self, runner: &Runner) {
        let reply = self.reply.as_deref();
        runner.run_decoded(self.decoded, &self.scoped, reply).await;
    }
}

/// Runs a core worker until `shutdown` resolves, then shuts down gracefully.
pub(super) async fn run(
    client: Client,
    registry: Registry,
    options: WorkerOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WorkerError> {
    let tracker = TaskTracker::new();
    let runner = Runner {
        registry: registry.clone(),
        publisher: Publisher::core(client.clone()),
        holding: Holding::new(&options.worker_id),
    };
    // First: it checks that the worker id is free.
    let mut direct = Direct::start(&client, runner.clone(), options.jobs, &tracker).await?;
    let subscribe_error = |subject| move |source| WorkerError::Subscribe { subject, source };
    let commands = client
        .queue_subscribe(subjects::COMMANDS_ALL, options.queue.clone())
        .await
        .map_err(subscribe_error(subjects::COMMANDS_ALL))?;
    let cancels = client
        .subscribe(subjects::CANCEL_ALL)
        .await
        .map_err(subscribe_error(subjects::CANCEL_ALL))?;
    let cancel_listener = tokio::spawn(listen_for_cancels(cancels, registry.clone()));
    direct.answer_liveness(&client).await?;
    let (queue, mut queued) = mpsc::unbounded_channel();
    let deadlines = Arc::new(Deadlines::new(&options.worker_id));
    let late = tokio::spawn(deadlines.clone().answer_late(client.clone()));
    let jobs = Jobs {
        // Shared, not cloned per command: a clone is a NATS client's and a registry's handles.
        runner: Arc::new(runner.clone()),
        slots: Arc::new(Semaphore::new(options.jobs.max(1))),
        backlog: Arc::new(Backlog::new(options.max_queued, options.max_queued_bytes)),
        tracker: tracker.clone(),
    };
    let reader = tokio::spawn(accept(
        commands,
        client.clone(),
        queue,
        jobs.clone(),
        deadlines,
    ));
    let dispatcher = dispatch(&mut queued, &jobs);
    tokio::select! {
        () = dispatcher => {}
        () = shutdown => {}
    }
    tracing::info!("worker shutting down");
    reader.abort();
    direct.stop();
    queued.close();
    // Running commands get the grace; every process of this worker is stopped.
    registry.shutdown(options.shutdown_grace).await;
    while let Some(queued) = queued.recv().await {
        // Accepted but never started: the registry refuses it now, and says so.
        queued.run(&runner).await;
    }
    tracker.close();
    tracker.wait().await;
    // Every deferred reply was taken by its command's end at the latest.
    late.abort();
    cancel_listener.abort();
    direct.stop_answering();
    if let Err(e) = client.flush().await {
        tracing::warn!("flushing results on shutdown: {e}");
    }
    Ok(())
}

/// What runs commands: `--jobs` slots, the backlog of commands waiting for one, and the
/// tasks that run them. Shared by the reader (which starts a command itself when nothing
/// waits and a slot is free) and the dispatcher (which starts the waiting ones).
#[derive(Clone)]
struct Jobs {
    runner: Arc<Runner>,
    slots: Arc<Semaphore>,
    backlog: Arc<Backlog>,
    tracker: TaskTracker,
}

impl Jobs {
    /// Runs `queued` in `slot` on a task of its own.
    fn start(&self, queued: Queued, slot: OwnedSemaphorePermit) {
        let runner = self.runner.clone();
        // Boxed: the task is a pointer, not the ~5 KB future, which tokio would otherwise
        // copy several times on spawn and again on completion (BENCHMARKS.md, N2b).
        self.tracker.spawn(Box::pin(async move {
            queued.run(&runner).await;
            drop(slot);
        }));
    }

    /// A free slot, if no accepted command is waiting for one (it would be overtaken).
    fn free_slot(&self) -> Option<OwnedSemaphorePermit> {
        if !self.backlog.is_empty() {
            return None;
        }
        self.slots.clone().try_acquire_owned().ok()
    }
}

/// Answers each received command with [`Accepted`](crate::nats::wire::Accepted) (naming
/// this worker) and starts it, or queues it when every job is busy, holding its id (see
/// [`Holding`]); a producer asking for the first result as the reply gets it deferred
/// instead ([`Deadlines`]). Past the [`Backlog`]'s limits it answers `busy` at once and
/// drops the command.
async fn accept(
    mut commands: async_nats::Subscriber,
    client: Client,
    queue: mpsc::UnboundedSender<Queued>,
    jobs: Jobs,
    deadlines: Arc<Deadlines>,
) {
    let holding = jobs.runner.holding.clone();
    while let Some(message) = commands.next().await {
        let size = message.payload.len();
        // Only this task admits commands, so "nothing waits" cannot change before the
        // command starts (the dispatcher only takes slots for waiting commands).
        let slot = jobs.free_slot();
        if slot.is_none() && !jobs.backlog.try_admit(size) {
            // Turned away: only its id is read (a flood past the backlog is not decoded).
            let (id, _) = ids_of(&message.subject, &message.payload);
            acknowledge(&client, &message, id, holding.worker_id(), true).await;
            continue;
        }
        let decoded = decode(&message.subject, &message.payload);
        let (id, scoped) = decoded
            .ids()
            .unwrap_or_else(|| ids_of(&message.subject, &message.payload));
        holding.hold(&scoped);
        let reply = match (&message.reply, wants_result(&message)) {
            (Some(subject), true) => Some(deadlines.defer(subject.clone(), id)),
            _ => {
                acknowledge(&client, &message, id, holding.worker_id(), false).await;
                None
            }
        };
        let queued = Queued {
            decoded,
            size,
            scoped,
            reply,
        };
        match slot {
            // Started at once: no hop through the dispatcher, never in the backlog.
            Some(slot) => jobs.start(queued, slot),
            None => {
                if queue.send(queued).is_err() {
                    return;
                }
            }
        }
    }
}

/// Runs queued commands as slots free, in order, until the queue closes.
async fn dispatch(queued: &mut mpsc::UnboundedReceiver<Queued>, jobs: &Jobs) {
    while let Some(queued) = queued.recv().await {
        let Ok(slot) = jobs.slots.clone().acquire_owned().await else {
            return;
        };
        jobs.backlog.release(queued.size);
        jobs.start(queued, slot);
    }
}
