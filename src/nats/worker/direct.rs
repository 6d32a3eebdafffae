//! What a worker serves besides the pool's queue, in both modes, over core NATS: commands
//! addressed to it alone (`cmdr.worker.<id>.commands.<producer>.<type>`: the process
//! commands for its processes, its sessions' commands), discovery (`cmdr.workers.<producer>`:
//! "who is there, and which of my sessions do you hold") and liveness (`cmdr.alive.<id>.<producer>`).
//!
//! A worker's processes live in it, so the commands about them cannot go to just any
//! worker, nor be replayed on another one (durable mode): the producer sends them here as
//! core requests. They run at once, up to `--jobs` of them besides the pool's commands (a
//! busy pool must not keep a `PROCESS_OUTPUT` waiting); past that they are answered busy.
//! Before subscribing, the worker checks that no other worker on the bus has its id.

use std::sync::Arc;
use std::time::Duration;

use async_nats::{Client, Request, RequestErrorKind, Subscriber};
use futures_util::StreamExt;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

use super::common::{acknowledge, client_scope, ids_of, Runner};
use super::options::WorkerError;
use crate::nats::subjects;
use crate::nats::wire::{WorkerInfo, END_SCOPE_HEADER, END_SCOPE_YES};

/// How long the start-up check waits for another worker with the same id to answer.
const ID_CHECK_WAIT: Duration = Duration::from_secs(1);

/// The tasks serving a worker's own subjects.
pub(super) struct Direct {
    commands: JoinHandle<()>,
    discovery: JoinHandle<()>,
    alive: Option<JoinHandle<()>>,
    runner: Runner,
}

impl Direct {
    /// Checks the worker's id is free, subscribes to its commands and discovery and serves
    /// them; the commands run on `tracker` through `runner`. Liveness comes last
    /// ([`Direct::answer_liveness`]).
    pub(super) async fn start(
        client: &Client,
        runner: Runner,
        jobs: usize,
        tracker: &TaskTracker,
    ) -> Result<Self, WorkerError> {
        let worker = runner.holding.worker_id().to_owned();
        if !subjects::is_valid_id(&worker) {
            return Err(WorkerError::InvalidId(worker));
        }
        ensure_id_free(client, &worker).await?;
        let commands = subscribe(client, subjects::worker_commands_all(&worker)).await?;
        let discovery = subscribe(client, subjects::WORKERS_ALL.to_owned()).await?;
        Ok(Self {
            commands: tokio::spawn(serve_commands(
                commands,
                client.clone(),
                runner.clone(),
                Arc::new(Semaphore::new(jobs.max(1))),
                tracker.clone(),
            )),
            discovery: tokio::spawn(answer_discovery(discovery, client.clone(), runner.clone())),
            alive: None,
            runner,
        })
    }

    /// Answers on `cmdr.alive.<id>`: the worker's last subscription, so a worker that
    /// answers there has every subscription in place.
    pub(super) async fn answer_liveness(&mut self, client: &Client) -> Result<(), WorkerError> {
        let alive = subscribe(client, subjects::alive_all(self.runner.holding.worker_id())).await?;
        let holding = self.runner.holding.clone();
        self.alive = Some(tokio::spawn(holding.answer(alive, client.clone())));
        Ok(())
    }

    /// Stops taking commands (shutdown); discovery and liveness are still answered while
    /// the running ones finish.
    pub(super) fn stop(&self) {
        self.commands.abort();
    }

    /// Stops answering discovery and liveness (the last step of shutdown).
    pub(super) fn stop_answering(&self) {
        self.discovery.abort();
        if let Some(alive) = &self.alive {
            alive.abort();
        }
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        self.commands.abort();
        self.stop_answering();
    }
}

async fn subscribe(client: &Client, subject: String) -> Result<Subscriber, WorkerError> {
    client
        .subscribe(subject)
        .await
        .map_err(|source| WorkerError::Subscribe {
            subject: "cmdr.worker.<id>.commands.> / cmdr.workers.* / cmdr.alive.<id>.*",
            source,
        })
}

/// The producer token of a worker's start-up id check (`cmdr.alive.<worker>._`).
const ID_CHECK_PRODUCER: &str = "_";

/// Refuses to start when a worker already answers on `cmdr.alive.<worker>.*`: two workers
/// with one id would both run the commands meant for one of them.
async fn ensure_id_free(client: &Client, worker: &str) -> Result<(), WorkerError> {
    let request = Request::new()
        .payload(bytes::Bytes::new())
        .timeout(Some(ID_CHECK_WAIT));
    match client
        .send_request(subjects::alive(worker, ID_CHECK_PRODUCER), request)
        .await
    {
        Ok(_) => Err(WorkerError::IdInUse(worker.to_owned())),
        Err(e) if e.kind() == RequestErrorKind::NoResponders => Ok(()),
        // Nobody answered in time (or the server could not say): take the id.
        Err(e) => {
            tracing::debug!("checking the worker id: {e}");
            Ok(())
        }
    }
}

/// Runs every command addressed to this worker at once, `jobs` at most (beyond: busy).
async fn serve_commands(
    mut commands: Subscriber,
    client: Client,
    runner: Runner,
    slots: Arc<Semaphore>,
    tracker: TaskTracker,
) {
    while let Some(message) = commands.next().await {
        let (id, scoped) = ids_of(&message.subject, &message.payload);
        let worker = runner.holding.worker_id();
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            acknowledge(&client, &message, id, worker, true).await;
            continue;
        };
        runner.holding.hold(&scoped);
        acknowledge(&client, &message, id, worker, false).await;
        let runner = runner.clone();
        // Boxed, like the core loop's tasks: spawned as a pointer, not a large future.
        tracker.spawn(Box::pin(async move {
            runner.run(&message, &scoped, None).await;
            drop(slot);
        }));
    }
}

/// Answers every `cmdr.workers.<producer>` request with this worker's id and the
/// sessions it holds for that producer in the client scope the request names
/// ([`crate::nats::wire::SCOPE_HEADER`]; only that scope's). A request marked [`END_SCOPE_HEADER`] first ends
/// that scope here (its processes and sessions), so the answer means "gone".
async fn answer_discovery(mut requests: Subscriber, client: Client, runner: Runner) {
    let (ends, waiting) = mpsc::channel(ENDS_WAITING);
    let ender = tokio::spawn(end_scopes(waiting, client.clone(), runner.clone()));
    while let Some(request) = requests.next().await {
        let (Some(reply), Some(producer)) = (
            request.reply.clone(),
            subjects::producer_of_discovery(&request.subject),
        ) else {
            continue;
        };
        let headers = request.headers.as_ref();
        let scope = crate::scopes::nats_client(producer, client_scope(headers));
        let end = headers
            .and_then(|h| h.get(END_SCOPE_HEADER))
            .is_some_and(|v| v.as_str() == END_SCOPE_YES);
        if !end {
            answer(&client, reply, &info_of(&runner, &scope)).await;
            continue;
        }
        // Ending a scope waits for its processes to go: never here, where every
        // producer's discovery is answered. Past `ENDS_WAITING` ends waiting, this one is
        // dropped unanswered (the producer's end gives up on this worker).
        if ends.try_send((scope, reply)).is_err() {
            tracing::warn!(%producer, "too many scope ends waiting: one dropped");
        }
    }
    ender.abort();
}

/// Ends the scopes asked for, `ENDING_AT_ONCE` at a time, answering each once it is
/// gone.
async fn end_scopes(
    mut waiting: mpsc::Receiver<(cmdr_executors::Scope, async_nats::Subject)>,
    client: Client,
    runner: Runner,
) {
    let ending = Arc::new(Semaphore::new(ENDING_AT_ONCE));
    while let Some((scope, reply)) = waiting.recv().await {
        let Ok(permit) = ending.clone().acquire_owned().await else {
            return;
        };
        let (client, runner) = (client.clone(), runner.clone());
        tokio::spawn(async move {
            tracing::debug!(%scope, "ending a scope over the bus");
            runner.registry.end_scope(&scope).await;
            answer(&client, reply, &info_of(&runner, &scope)).await;
            drop(permit);
        });
    }
}

/// Scope ends a worker runs at once.
const ENDING_AT_ONCE: usize = 16;

/// Scope ends waiting for one of those places; past them, a request is dropped.
const ENDS_WAITING: usize = 1024;

/// This worker's discovery answer for `scope`.
fn info_of(runner: &Runner, scope: &cmdr_executors::Scope) -> WorkerInfo {
    WorkerInfo {
        worker: runner.holding.worker_id().to_owned(),
        sessions: sessions(runner, scope),
    }
}

/// The names of the live sessions of `scope` on this worker (another scope's are not
/// even named).
fn sessions(runner: &Runner, scope: &cmdr_executors::Scope) -> Vec<String> {
    runner
        .registry
        .processes()
        .list(scope)
        .iter()
        .filter(|p| p.state() == cmdr_executors::ProcessState::Running)
        .filter_map(|p| p.session().map(str::to_owned))
        .collect()
}

async fn answer(client: &Client, reply: async_nats::Subject, info: &WorkerInfo) {
    let Ok(body) = serde_json::to_vec(info) else {
        return;
    };
    if let Err(e) = client.publish(reply, body.into()).await {
        tracing::warn!("answering a discovery request: {e}");
    }
}
