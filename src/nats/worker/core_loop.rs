//! The core-mode worker loop: a reader task answers every command it receives with
//! [`Accepted`](crate::nats::wire::Accepted) — at once, or, when the producer asks for it,
//! with the command's first result if that comes within `reply::REPLY_WAIT` — and queues
//! it; the dispatcher runs queued commands `--jobs` at a time, each producer's at most
//! `--jobs-per-producer` at a time, producers taking turns ([`FairQueue`]); shutdown
//! answers commands not yet started with `SHUTTING_DOWN`.

use std::future::Future;
use std::sync::Arc;

use async_nats::Client;
use cmdr_executors::Registry;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

use super::alive::Holding;
use super::backlog::Backlog;
use super::common::{acknowledge, decode, ids_of, listen_for_cancels, Decoded, Runner};
use super::direct::Direct;
use super::fair::FairQueue;
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
        max_timeout: options.max_timeout,
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
    let backlog = Arc::new(Backlog::new(options.max_queued, options.max_queued_bytes));
    let deadlines = Arc::new(Deadlines::new(&options.worker_id));
    let late = tokio::spawn(deadlines.clone().answer_late(client.clone()));
    let reader = tokio::spawn(accept(
        commands,
        client.clone(),
        queue,
        runner.holding.clone(),
        backlog.clone(),
        deadlines,
    ));
    let waiting = std::sync::Mutex::new(FairQueue::new(options.producer_share()));
    let dispatcher = dispatch(
        &mut queued,
        runner.clone(),
        options.jobs,
        &tracker,
        (&backlog, &waiting),
    );
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
    let left = lock(&waiting).drain();
    for queued in left {
        // Accepted but never started: the registry refuses it now, and says so.
        queued.run(&runner).await;
    }
    while let Some(queued) = queued.recv().await {
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

/// Answers each received command with [`Accepted`](crate::nats::wire::Accepted) (naming
/// this worker) and queues it, holding its id (see [`Holding`]); a producer asking for
/// the first result as the reply gets it deferred instead ([`Deadlines`]). Past the
/// [`Backlog`]'s limits it answers `busy` at once and drops the command.
async fn accept(
    mut commands: async_nats::Subscriber,
    client: Client,
    queue: mpsc::UnboundedSender<Queued>,
    holding: Holding,
    backlog: Arc<Backlog>,
    deadlines: Arc<Deadlines>,
) {
    while let Some(message) = commands.next().await {
        let size = message.payload.len();
        if !backlog.try_admit(size) {
            // Turned away: only its id is read (a flood past the backlog is not decoded).
            let (id, _) = ids_of(&message.subject, &message.payload);
            acknowledge(&client, &message, id, holding.worker_id(), true).await;
            continue;
        }
        let decoded = decode(&message.subject, message.headers.as_ref(), &message.payload);
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
        if queue.send(queued).is_err() {
            return;
        }
    }
}

/// Runs queued commands, `jobs` at a time and each producer's within its share, until
/// the queue closes; what has not started by then stays in `waiting`.
async fn dispatch(
    queued: &mut mpsc::UnboundedReceiver<Queued>,
    runner: Runner,
    jobs: usize,
    tracker: &TaskTracker,
    (backlog, waiting): (&Backlog, &std::sync::Mutex<FairQueue<Queued>>),
) {
    // Shared, not cloned per command: a clone is a NATS client's and a registry's handles.
    let runner = Arc::new(runner);
    let (ended_tx, mut ended) = mpsc::unbounded_channel::<String>();
    let mut free = jobs.max(1);
    loop {
        while free > 0 {
            let Some((producer, next)) = lock(waiting).next() else {
                break;
            };
            free -= 1;
            backlog.release(next.size);
            let (runner, ended_tx) = (runner.clone(), ended_tx.clone());
            // Boxed: the task is a pointer, not the ~5 KB future, which tokio would
            // otherwise copy several times on spawn and again on completion (BASH_EXEC
            // no-ops measured: BENCHMARKS.md, N2b).
            tracker.spawn(Box::pin(async move {
                next.run(&runner).await;
                let _ = ended_tx.send(producer);
            }));
        }
        tokio::select! {
            item = queued.recv() => match item {
                Some(item) => {
                    let producer = subjects::unscoped(&item.scoped).map_or("", |(p, _)| p).to_owned();
                    lock(waiting).push(&producer, item);
                }
                None => return,
            },
            Some(producer) = ended.recv() => {
                free += 1;
                lock(waiting).done(&producer);
            }
        }
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
