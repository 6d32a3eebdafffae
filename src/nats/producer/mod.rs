//! [`Producer`]: the client side of the bus — submit a command and stream its results,
//! cancel it, answer its questions.
//!
//! `submit` subscribes to the command's result and input subjects *before* publishing,
//! so no early result is missed, then publishes the command as a request: a worker
//! answers at once with `Accepted`; no worker at all is `NO_WORKERS`. The returned
//! [`RemoteStream`] yields the command's `OutputResult`s in order and ends after the
//! terminal one. Questions from a `REQUEST_USER_INPUT` are answered by the producer's
//! input broker if it has one, else they wait for [`Producer::answer_input`]. Dropping
//! the stream before its end cancels the command, as with a local stream.
//!
//! Commands about processes and sessions are routed to the worker holding them, and
//! `PROCESS_LIST` to every worker (`route`, `fanout`; docs/nats.md, "Processes").
//!
//! Core mode: while it waits, the stream asks the worker that accepted the command
//! whether it still has it (see `liveness`); a worker that died ends the stream with
//! `WORKER_LOST`, one that lost the results with `RESULTS_LOST` — never a stream that
//! waits for ever.

mod fanout;
mod follow;
mod liveness;
pub mod remote;
mod route;

pub use fanout::DISCOVERY_QUIET;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_nats::jetstream;
use async_nats::{Client, Request, RequestErrorKind, Subject, Subscriber};
use cmdr_executors::ErrorCode;
use cmdr_executors::{
    decode_command, Command, ExecutionStatus, InputBroker, InputRequest, OutputResult,
};
use dashmap::DashMap;
use futures_core::Stream;
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot};

use crate::nats::durable::{ensure_ids, ensure_streams, hex, id_subject, DurableSettings};
use crate::nats::subjects;
use crate::nats::wire::{Accepted, InputAnswer, InputQuestion};
use follow::{follow, Followed};
use liveness::Lost;
use route::{Route, Target};

/// How long `submit` waits for a worker to acknowledge a command.
pub const ACCEPT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a durable publish is retried (leader elections take a few seconds).
const PUBLISH_PATIENCE: Duration = Duration::from_secs(30);

/// First pause before asking again after every worker asked was busy.
const BUSY_RETRY_FIRST: Duration = Duration::from_millis(20);
/// Longest pause between two attempts.
const BUSY_RETRY_MAX: Duration = Duration::from_millis(500);

/// Why a submission, cancel or answer failed.
#[derive(Debug, thiserror::Error)]
pub enum ProducerError {
    /// The id cannot be a subject token.
    #[error("command id '{0}' cannot be used on NATS (no spaces, '.', '*' or '>')")]
    InvalidId(String),
    /// No worker subscribes to the command subject.
    #[error("no cmdr worker is listening on {0}")]
    NoWorkers(String),
    /// Workers exist but none acknowledged in time.
    #[error("no worker accepted the command within {0:?}")]
    NotAccepted(Duration),
    /// Durable mode: the id was used, within the de-duplication window, for a different
    /// command (resubmitting the same command is fine: it replays its results).
    #[error("command id '{0}' was already used for a different command; give this one another id")]
    IdConflict(String),
    /// Every worker asked was full (its backlog at its limit) for the whole wait.
    #[error("every worker was busy for {0:?}; try again later or add workers")]
    Busy(Duration),
    /// `answer_input` named a command that asked nothing.
    #[error("command '{0}' is not waiting for input")]
    NotWaiting(String),
    /// The connection or the server failed.
    #[error("NATS: {0}")]
    Nats(String),
    /// Core mode: the worker running the command is gone (nobody answers on its subject).
    #[error("the worker running the command is gone (no answer on {0})")]
    WorkerLost(String),
    /// Core mode: the worker is there but no longer has the command, and its terminal
    /// result never arrived.
    #[error("the command's results were lost: the worker on {0} no longer has it")]
    ResultsLost(String),
    /// The worker holding the process or session the command is about is gone.
    #[error("{0}")]
    ProcessLost(String),
}

impl ProducerError {
    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            ProducerError::InvalidId(_) => ErrorCode::InvalidCommand,
            ProducerError::NoWorkers(_) => ErrorCode::NoWorkers,
            ProducerError::NotAccepted(_) => ErrorCode::NotAccepted,
            ProducerError::Busy(_) => ErrorCode::WorkersBusy,
            ProducerError::IdConflict(_) => ErrorCode::CommandIdConflict,
            ProducerError::NotWaiting(_) => ErrorCode::NotWaiting,
            ProducerError::Nats(_) => ErrorCode::NatsError,
            ProducerError::WorkerLost(_) => ErrorCode::WorkerLost,
            ProducerError::ResultsLost(_) => ErrorCode::ResultsLost,
            ProducerError::ProcessLost(_) => ErrorCode::ProcessLost,
        }
    }
}

fn nats_error(e: impl std::fmt::Display) -> ProducerError {
    ProducerError::Nats(e.to_string())
}

/// A producer: cheap to clone.
#[derive(Clone)]
pub struct Producer {
    client: Client,
    /// This producer's id: the token its commands' subjects carry (docs/nats.md,
    /// "Permissions").
    id: Arc<str>,
    /// Durable mode: commands go through JetStream, results are read from `CMDR_RESULTS`.
    js: Option<jetstream::Context>,
    /// Durable mode: what command each recent id named (`CMDR_IDS`).
    ids: Option<jetstream::stream::Stream>,
    /// Reply subjects of questions waiting for an answer, by command id.
    questions: Arc<DashMap<String, Subject>>,
    broker: Option<Arc<dyn InputBroker>>,
    /// The worker each of this producer's sessions lives on, by name.
    sessions: Arc<DashMap<String, String>>,
    /// Held while a session's worker is looked for.
    resolving: Arc<tokio::sync::Mutex<()>>,
}

impl Producer {
    /// A producer over `client`; questions wait for [`Producer::answer_input`].
    pub fn new(client: Client) -> Self {
        Self {
            client,
            id: Arc::from(uuid::Uuid::new_v4().simple().to_string()),
            js: None,
            ids: None,
            questions: Arc::default(),
            broker: None,
            sessions: Arc::default(),
            resolving: Arc::default(),
        }
    }

    /// A durable-mode producer: commands are stored in `CMDR_COMMANDS` (de-duplicated by
    /// id) even while no worker runs, and results are read from `CMDR_RESULTS` from the
    /// start, so nothing is missed across reconnects. Creates the streams if missing.
    pub async fn durable(client: Client) -> Result<Self, ProducerError> {
        Self::durable_with(client, &DurableSettings::default()).await
    }

    /// [`Producer::durable`] creating missing streams with `settings` (e.g. replicas in a
    /// cluster).
    pub async fn durable_with(
        client: Client,
        settings: &DurableSettings,
    ) -> Result<Self, ProducerError> {
        let js = jetstream::new(client.clone());
        ensure_streams(&js, settings).await.map_err(nats_error)?;
        let ids = ensure_ids(&js, settings).await.map_err(nats_error)?;
        Ok(Self {
            js: Some(js),
            ids: Some(ids),
            ..Self::new(client)
        })
    }

    /// This producer's subjects carry `id` (a subject token: no `.`, `*`, `>` or spaces),
    /// e.g. the NATS user it connects as, so that permissions can confine it to its own
    /// subjects. Without it, a random id.
    pub fn with_id(mut self, id: &str) -> Result<Self, ProducerError> {
        if !subjects::is_valid_id(id) {
            return Err(ProducerError::InvalidId(id.to_owned()));
        }
        self.id = Arc::from(id);
        Ok(self)
    }

    /// This producer's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Questions are answered by `broker` (e.g. the terminal) as they arrive.
    pub fn with_input_broker(mut self, broker: Arc<dyn InputBroker>) -> Self {
        self.broker = Some(broker);
        self
    }

    /// Publishes `command` (generating its id if empty) and streams its results. Commands
    /// about a process or session go to the worker holding it, `PROCESS_LIST` to every
    /// worker; the rest to the pool.
    pub async fn submit(&self, mut command: Command) -> Result<RemoteStream, ProducerError> {
        let id = command.ensure_command_id().to_owned();
        if !subjects::is_valid_id(&id) {
            return Err(ProducerError::InvalidId(id));
        }
        match self.route(&command).await? {
            Route::Pool => self.submit_to_pool(command, id).await,
            Route::Worker(target) => self.submit_to_worker(command, target).await,
            Route::Every => self.submit_everywhere(command, id).await,
        }
    }

    /// Any worker: the queue group (core) or the work queue (durable).
    async fn submit_to_pool(
        &self,
        command: Command,
        id: String,
    ) -> Result<RemoteStream, ProducerError> {
        let results = self.results_of(&id).await?;
        let questions = self.subscribe(subjects::input(&self.id, &id)).await?;
        let payload = serde_json::to_vec(&command).map_err(nats_error)?;
        let subject = subjects::command(&self.id, command.command_type().as_str());
        // The id of this producer's command among every producer's (de-duplication).
        let scoped = subjects::scoped(&self.id, &id);
        let watch = match &self.js {
            Some(js) => {
                if let Some(ids) = &self.ids {
                    claim_id(js, ids, &scoped, &payload).await?;
                }
                publish_durably(js, subject, &scoped, payload).await?;
                None
            }
            None => self
                .request_core(subject, payload)
                .await?
                .map(|worker| liveness::watch(self.client.clone(), worker, scoped)),
        };
        Ok(self.stream(&command, id, results, Some(questions), watch, None))
    }

    /// One worker, over core request/reply in either mode (its processes and sessions
    /// live there: nothing to replay elsewhere). A worker not on the bus is
    /// `PROCESS_LOST`, at once or once the liveness checks miss it.
    async fn submit_to_worker(
        &self,
        command: Command,
        target: Target,
    ) -> Result<RemoteStream, ProducerError> {
        let id = command.command_id().to_owned();
        let results = Results::Core(self.subscribe(subjects::results(&self.id, &id)).await?);
        let questions = self.subscribe(subjects::input(&self.id, &id)).await?;
        let payload = serde_json::to_vec(&command).map_err(nats_error)?;
        let subject =
            subjects::worker_command(&target.worker, &self.id, command.command_type().as_str());
        match self.request_core(subject, payload).await {
            Ok(_) => {}
            Err(ProducerError::NoWorkers(_)) => {
                self.forget(&target);
                return Err(target.lost());
            }
            Err(e) => return Err(e),
        }
        let scoped = subjects::scoped(&self.id, &id);
        let watch = liveness::watch(self.client.clone(), target.worker.clone(), scoped);
        Ok(self.stream(
            &command,
            id,
            results,
            Some(questions),
            Some(watch),
            Some(target),
        ))
    }

    /// `PROCESS_LIST` on every live worker, merged into one result.
    async fn submit_everywhere(
        &self,
        command: Command,
        id: String,
    ) -> Result<RemoteStream, ProducerError> {
        let workers = fanout::discover(&self.client, &self.id).await?;
        if workers.is_empty() {
            return Err(ProducerError::NoWorkers(subjects::workers(&self.id)));
        }
        let (tx, rx) = mpsc::channel(1);
        let (producer, part, list_id) = (self.clone(), command.clone(), id.clone());
        tokio::spawn(async move {
            tokio::select! {
                merged = producer.list_everywhere(&part, &list_id, workers) => {
                    let _ = tx.send(Ok(merged)).await;
                }
                () = tx.closed() => {}
            }
        });
        Ok(self.stream(&command, id, Results::Channel(rx), None, None, None))
    }

    fn stream(
        &self,
        command: &Command,
        command_id: String,
        results: Results,
        questions: Option<Subscriber>,
        watch: Option<oneshot::Receiver<Lost>>,
        target: Option<Target>,
    ) -> RemoteStream {
        RemoteStream {
            command_id,
            command_type: command.command_type().as_str().to_owned(),
            results,
            questions,
            producer: self.clone(),
            watch,
            target,
            done: false,
        }
    }

    /// Durable mode: the results of `command_id` from the first one on (e.g. after this
    /// producer restarted), ending after the terminal one.
    pub async fn replay(&self, command_id: &str) -> Result<RemoteStream, ProducerError> {
        if !subjects::is_valid_id(command_id) {
            return Err(ProducerError::InvalidId(command_id.to_owned()));
        }
        Ok(RemoteStream {
            command_id: command_id.to_owned(),
            command_type: String::new(),
            results: self.results_of(command_id).await?,
            questions: Some(
                self.subscribe(subjects::input(&self.id, command_id))
                    .await?,
            ),
            producer: self.clone(),
            watch: None,
            target: None,
            done: false,
        })
    }

    /// Where the results of `id` are read from: a plain subscription (core mode) or a
    /// follower over `CMDR_RESULTS` from the start, resuming through outages (durable).
    async fn results_of(&self, id: &str) -> Result<Results, ProducerError> {
        match &self.js {
            None => Ok(Results::Core(
                self.subscribe(subjects::results(&self.id, id)).await?,
            )),
            Some(js) => Ok(Results::Channel(follow(js.clone(), &self.id, id))),
        }
    }

    /// Core mode: publish as a request a worker acknowledges; the id of the worker that
    /// took it, when it gives one. A worker that answers `busy` did not take it: the
    /// request is sent again (the queue group may pick another worker) with a growing
    /// pause, until [`ACCEPT_TIMEOUT`] has passed.
    async fn request_core(
        &self,
        subject: String,
        payload: Vec<u8>,
    ) -> Result<Option<String>, ProducerError> {
        let payload = bytes::Bytes::from(payload);
        let deadline = tokio::time::Instant::now() + ACCEPT_TIMEOUT;
        let mut pause = BUSY_RETRY_FIRST;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let request = Request::new()
                .payload(payload.clone())
                .timeout(Some(left.max(Duration::from_millis(1))));
            let accepted = match self.client.send_request(subject.clone(), request).await {
                Ok(reply) => serde_json::from_slice::<Accepted>(&reply.payload).ok(),
                Err(e) if e.kind() == RequestErrorKind::NoResponders => {
                    return Err(ProducerError::NoWorkers(subject))
                }
                Err(e) if e.kind() == RequestErrorKind::TimedOut => {
                    return Err(ProducerError::NotAccepted(ACCEPT_TIMEOUT))
                }
                Err(e) => return Err(nats_error(e)),
            };
            match accepted {
                Some(accepted) if accepted.busy => {
                    if tokio::time::Instant::now() + pause >= deadline {
                        return Err(ProducerError::Busy(ACCEPT_TIMEOUT));
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(BUSY_RETRY_MAX);
                }
                accepted => {
                    return Ok(accepted
                        .and_then(|accepted| accepted.worker)
                        .filter(|worker| subjects::is_valid_id(worker)))
                }
            }
        }
    }

    /// Like [`Producer::submit`] for JSON text; never fails: bad input or a failed
    /// submission becomes a stream of one `FAILED` result.
    pub async fn submit_json(&self, json: &str) -> SubmitStream {
        let command = match decode_command(json) {
            Ok(command) => command,
            Err(failure) => return SubmitStream::Failed(Some(Box::new(failure.to_result()))),
        };
        let (id, ty) = (command.command_id().to_owned(), command.command_type());
        match self.submit(command).await {
            Ok(stream) => SubmitStream::Remote(Box::new(stream)),
            Err(e) => SubmitStream::Failed(Some(Box::new(rejected(&id, ty.as_str(), &e)))),
        }
    }

    /// Cancels the command `command_id` wherever it runs.
    pub async fn cancel(&self, command_id: &str) -> Result<(), ProducerError> {
        self.client
            .publish(subjects::cancel(&self.id, command_id), bytes::Bytes::new())
            .await
            .map_err(nats_error)?;
        self.client.flush().await.map_err(nats_error)
    }

    /// Answers the question of `command_id`.
    pub async fn answer_input(&self, command_id: &str, value: String) -> Result<(), ProducerError> {
        let (_, reply) = self
            .questions
            .remove(command_id)
            .ok_or_else(|| ProducerError::NotWaiting(command_id.to_owned()))?;
        answer(&self.client, reply, value).await
    }

    /// Sends everything buffered (cancels, answers) to the server.
    pub async fn flush(&self) {
        if let Err(e) = self.client.flush().await {
            tracing::warn!("flushing to NATS: {e}");
        }
    }

    async fn subscribe(&self, subject: String) -> Result<Subscriber, ProducerError> {
        self.client.subscribe(subject).await.map_err(nats_error)
    }

    /// Records a question; with a broker, asks it and answers in the background.
    fn take_question(&self, command_id: &str, message: async_nats::Message) {
        let (Some(reply), Ok(question)) = (
            message.reply,
            serde_json::from_slice::<InputQuestion>(&message.payload),
        ) else {
            tracing::warn!(command_id, "ignored a malformed input question");
            return;
        };
        let Some(broker) = self.broker.clone() else {
            self.questions.insert(command_id.to_owned(), reply);
            return;
        };
        let client = self.client.clone();
        tokio::spawn(async move {
            let request = InputRequest {
                command_id: question.command_id,
                prompt: question.prompt,
                description: question.description,
            };
            match broker.request(request).await {
                Ok(value) => {
                    if let Err(e) = answer(&client, reply, value).await {
                        tracing::warn!("answering a question: {e}");
                    }
                }
                // No answer: the worker's command times out or is cancelled.
                Err(e) => tracing::warn!("no answer to a question: {e}"),
            }
        });
    }
}

/// Durable mode: records which command `id` names (a SHA-256 of its JSON), unless the id
/// is already recorded: then the same command may go on (its publish is de-duplicated and
/// its results replayed), a different one is refused.
async fn claim_id(
    js: &jetstream::Context,
    ids: &jetstream::stream::Stream,
    id: &str,
    payload: &[u8],
) -> Result<(), ProducerError> {
    let subject = id_subject(id);
    let hash = hex(ring::digest::digest(&ring::digest::SHA256, payload).as_ref());
    let mut headers = async_nats::HeaderMap::new();
    // Stored only if nothing is stored for this id yet (atomic on the server).
    headers.insert(async_nats::header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE, "0");
    let deadline = tokio::time::Instant::now() + PUBLISH_PATIENCE;
    let mut pause = Duration::from_millis(50);
    let published = loop {
        let attempt = async {
            js.publish_with_headers(subject.clone(), headers.clone(), hash.clone().into())
                .await?
                .await
        };
        match attempt.await {
            Err(e)
                if e.kind() != jetstream::context::PublishErrorKind::WrongLastSequence
                    && tokio::time::Instant::now() + pause < deadline =>
            {
                tracing::info!(command_id = id, "recording the id again: {e}");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            other => break other,
        }
    };
    match published {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == jetstream::context::PublishErrorKind::WrongLastSequence => {
            let known = ids
                .get_last_raw_message_by_subject(&subject)
                .await
                .map_err(nats_error)?;
            if known.payload.as_ref() == hash.as_bytes() {
                Ok(())
            } else {
                Err(ProducerError::IdConflict(id.to_owned()))
            }
        }
        Err(e) => Err(nats_error(e)),
    }
}

/// Durable mode: store the command, de-duplicated by its id.
async fn publish_durably(
    js: &jetstream::Context,
    subject: String,
    id: &str,
    payload: Vec<u8>,
) -> Result<(), ProducerError> {
    let payload = bytes::Bytes::from(payload);
    let deadline = tokio::time::Instant::now() + PUBLISH_PATIENCE;
    let mut pause = Duration::from_millis(50);
    loop {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, id);
        let attempt = async {
            js.publish_with_headers(subject.clone(), headers, payload.clone())
                .await?
                .await
        };
        match attempt.await {
            Ok(ack) => {
                if ack.duplicate {
                    tracing::info!(command_id = id, "already submitted; following its results");
                }
                return Ok(());
            }
            // A cluster electing a leader, a server restarting: the same message, with
            // the same id, again (de-duplicated if the first one was stored after all).
            Err(e) if tokio::time::Instant::now() + pause < deadline => {
                tracing::info!(command_id = id, "publishing again: {e}");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(nats_error(e)),
        }
    }
}

async fn answer(client: &Client, reply: Subject, value: String) -> Result<(), ProducerError> {
    let body = serde_json::to_vec(&InputAnswer { value }).map_err(nats_error)?;
    client
        .publish(reply, body.into())
        .await
        .map_err(nats_error)?;
    client.flush().await.map_err(nats_error)
}

fn rejected(command_id: &str, command_type: &str, e: &ProducerError) -> OutputResult {
    OutputResult {
        command_id: command_id.to_owned(),
        command_type: command_type.to_owned(),
        status: ExecutionStatus::Failed,
        message: "Command rejected before execution.".to_owned(),
        error: e.to_string(),
        result_data: String::new(),
        error_code: Some(e.code().into()),
        exit_code: None,
        final_cwd: None,
        duration_ms: None,
        truncated_bytes: None,
        process_id: None,
        process_state: None,
        next_offset: None,
        truncated_before: None,
        queue: None,
    }
}

/// The results of one remote command, in order, ending after the terminal one.
pub struct RemoteStream {
    command_id: String,
    command_type: String,
    results: Results,
    /// Questions of the command (none for a merged `PROCESS_LIST`).
    questions: Option<Subscriber>,
    producer: Producer,
    /// Core mode: resolves if the worker running the command is lost.
    watch: Option<oneshot::Receiver<Lost>>,
    /// The worker holding the command's process or session (routed commands).
    target: Option<Target>,
    done: bool,
}

impl RemoteStream {
    /// The command's id.
    pub fn command_id(&self) -> &str {
        &self.command_id
    }

    /// The command's type, as its results name it.
    pub fn command_type(&self) -> &str {
        &self.command_type
    }

    /// Asks the worker to stop the command (in the background); its terminal result will
    /// say `CANCELLED`.
    pub fn cancel(&self) {
        let (producer, id) = (self.producer.clone(), self.command_id.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { producer.cancel(&id).await });
        }
    }

    fn lost(&self, why: &str) -> OutputResult {
        self.lost_with(&ProducerError::Nats(why.to_owned()))
    }

    fn lost_with(&self, error: &ProducerError) -> OutputResult {
        let mut result = rejected(&self.command_id, &self.command_type, error);
        result.message = "Lost contact with the command.".to_owned();
        result
    }

    /// Whether the worker was found lost (only looked at when no result is waiting, so a
    /// terminal that arrived before the verdict always wins).
    fn poll_lost(&mut self, cx: &mut Context<'_>) -> Option<ProducerError> {
        let watch = self.watch.as_mut()?;
        let Poll::Ready(verdict) = Pin::new(watch).poll(cx) else {
            return None;
        };
        self.watch = None;
        match verdict {
            Ok(Lost::WorkerGone(subject)) => Some(match &self.target {
                Some(target) => {
                    self.producer.forget(target);
                    target.lost()
                }
                None => ProducerError::WorkerLost(subject),
            }),
            Ok(Lost::Forgotten(subject)) => Some(ProducerError::ResultsLost(subject)),
            // The watcher stopped without a verdict: keep waiting on the results.
            Err(_) => None,
        }
    }
}

impl Stream for RemoteStream {
    type Item = OutputResult;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<OutputResult>> {
        if self.done {
            return Poll::Ready(None);
        }
        while let Some(Poll::Ready(Some(question))) =
            self.questions.as_mut().map(|q| q.poll_next_unpin(cx))
        {
            let id = self.command_id.clone();
            self.producer.take_question(&id, question);
        }
        match self.results.poll_result(cx) {
            Poll::Ready(Some(Ok(result))) => {
                self.done = result.status.is_terminal();
                Poll::Ready(Some(result))
            }
            Poll::Ready(Some(Err(e))) => {
                self.done = true;
                Poll::Ready(Some(self.lost(&format!("reading results: {e}"))))
            }
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(Some(self.lost("the result subscription closed")))
            }
            Poll::Pending => match self.poll_lost(cx) {
                Some(error) => {
                    self.done = true;
                    Poll::Ready(Some(self.lost_with(&error)))
                }
                None => Poll::Pending,
            },
        }
    }
}

impl Drop for RemoteStream {
    fn drop(&mut self) {
        self.producer.questions.remove(&self.command_id);
        if !self.done {
            self.cancel();
        }
    }
}

/// Where a [`RemoteStream`]'s results come from.
enum Results {
    /// A plain subscription to the results subject.
    Core(Subscriber),
    /// Results handed over by a task: the durable follower, or a merged fan-out.
    Channel(mpsc::Receiver<Followed>),
}

impl Results {
    fn poll_result(&mut self, cx: &mut Context<'_>) -> Poll<Option<Followed>> {
        match self {
            Results::Core(sub) => sub.poll_next_unpin(cx).map(|m| {
                m.map(|m| {
                    serde_json::from_slice::<OutputResult>(&m.payload)
                        .map_err(|e| format!("malformed result: {e}"))
                })
            }),
            Results::Channel(rx) => rx.poll_recv(cx),
        }
    }
}

/// What [`Producer::submit_json`] returns: a remote stream, or one ready failure.
pub enum SubmitStream {
    /// The command was accepted by a worker.
    Remote(Box<RemoteStream>),
    /// The command was refused; the failure, until yielded.
    Failed(Option<Box<OutputResult>>),
}

impl Stream for SubmitStream {
    type Item = OutputResult;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<OutputResult>> {
        match self.get_mut() {
            SubmitStream::Remote(stream) => stream.poll_next_unpin(cx),
            SubmitStream::Failed(result) => Poll::Ready(result.take().map(|r| *r)),
        }
    }
}
