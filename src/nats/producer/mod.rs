//! [`Producer`]: the client side of the bus — submit a command and stream its results,
//! cancel it, answer its questions.
//!
//! `submit` registers the command with the producer's demultiplexer (`demux`: one
//! subscription for all its commands' results, one for their questions, made on first
//! use) *before* publishing, so no early result is missed, then publishes the command as
//! a request: a worker answers at once with `Accepted` — or, for a command that ends
//! quickly, with its terminal result (asked for by the request's header
//! `Cmdr-Reply: result`, `wire::REPLY_HEADER`; docs/nats.md "The reply");
//! no worker at all is `NO_WORKERS`. The returned
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

mod demux;
mod fanout;
mod follow;
mod liveness;
mod mailbox;
pub mod remote;
mod route;

pub use demux::DEFAULT_RESULT_BUFFER;
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
    decode_command, Command, CommandType, ExecutionStatus, InputBroker, InputRequest, OutputResult,
};
use dashmap::DashMap;
use futures_core::Stream;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::nats::durable::{ensure_ids, ensure_streams, hex, id_subject, DurableSettings};
use crate::nats::subjects;
use crate::nats::wire::{
    Accepted, InputAnswer, InputQuestion, REPLY_HEADER, REPLY_RESULT, SCOPE_HEADER,
};
use demux::{Demux, Registration};
use follow::{follow, Followed};
use liveness::{Lost, Monitor, Watch};
use mailbox::{Delivery, End};
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
    /// The command's stream was not read fast enough: more than this many bytes of its
    /// results were waiting unread, so the rest was dropped and the command cancelled.
    #[error("the command's results were dropped: its reader fell behind by more than {0} bytes (the command was cancelled)")]
    ReaderBehind(usize),
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
            ProducerError::ResultsLost(_) | ProducerError::ReaderBehind(_) => {
                ErrorCode::ResultsLost
            }
            ProducerError::ProcessLost(_) => ErrorCode::ProcessLost,
        }
    }
}

fn nats_error(e: impl std::fmt::Display) -> ProducerError {
    ProducerError::Nats(e.to_string())
}

/// A producer: cheap to clone (one shared reference: every command's stream holds one).
#[derive(Clone)]
pub struct Producer {
    inner: Arc<Inner>,
}

/// What a producer and its clones share.
#[derive(Clone)]
struct Inner {
    client: Client,
    /// This producer's id: the token its commands' subjects carry (docs/nats.md,
    /// "Permissions").
    id: Arc<str>,
    /// Durable mode: commands go through JetStream, results are read from `CMDR_RESULTS`.
    /// (Behind an `Arc`, as is `ids`: both are large.)
    js: Option<Arc<jetstream::Context>>,
    /// Durable mode: what command each recent id named (`CMDR_IDS`).
    ids: Option<Arc<jetstream::stream::Stream>>,
    /// Reply subjects of questions waiting for an answer, by command id.
    questions: Arc<DashMap<String, Subject>>,
    broker: Option<Arc<dyn InputBroker>>,
    /// The worker each of this producer's sessions lives on, by client scope and name.
    sessions: Arc<DashMap<(Arc<str>, String), String>>,
    /// Held while a session's worker is looked for.
    resolving: Arc<tokio::sync::Mutex<()>>,
    /// Routes the results and questions of every command in flight to its stream.
    demux: Arc<Demux>,
    /// Core mode: checks that the workers running this producer's commands still have them.
    monitor: Arc<Monitor>,
}

impl Producer {
    /// A producer over `client`; questions wait for [`Producer::answer_input`].
    pub fn new(client: Client) -> Self {
        let id: Arc<str> = Arc::from(uuid::Uuid::new_v4().simple().to_string());
        let demux = Demux::new(client.clone(), id.clone(), DEFAULT_RESULT_BUFFER);
        let inner = Inner {
            client: client.clone(),
            id,
            js: None,
            ids: None,
            questions: Arc::default(),
            broker: None,
            sessions: Arc::default(),
            resolving: Arc::default(),
            demux: Arc::new(demux),
            monitor: Arc::new(Monitor::new(client.clone())),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The shared parts, to set up (copied first if a clone shares them).
    fn inner_mut(&mut self) -> &mut Inner {
        Arc::make_mut(&mut self.inner)
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
        let mut producer = Self::new(client);
        let inner = producer.inner_mut();
        inner.js = Some(Arc::new(js));
        inner.ids = Some(Arc::new(ids));
        Ok(producer)
    }

    /// This producer's subjects carry `id` (a subject token: no `.`, `*`, `>` or spaces),
    /// e.g. the NATS user it connects as, so that permissions can confine it to its own
    /// subjects. Without it, a random id.
    pub fn with_id(mut self, id: &str) -> Result<Self, ProducerError> {
        if !subjects::is_valid_id(id) {
            return Err(ProducerError::InvalidId(id.to_owned()));
        }
        let inner = self.inner_mut();
        inner.id = Arc::from(id);
        let limit = inner.demux.limit();
        inner.demux = Arc::new(Demux::new(inner.client.clone(), inner.id.clone(), limit));
        Ok(self)
    }

    /// Each command's stream holds at most `bytes` of results unread (default
    /// [`DEFAULT_RESULT_BUFFER`]; a message is always taken when none is waiting). A stream
    /// read more slowly than its command writes ends with `RESULTS_LOST` once past it, and
    /// its command is cancelled: the other commands' results never wait for it.
    pub fn with_result_buffer(mut self, bytes: usize) -> Self {
        let inner = self.inner_mut();
        inner.demux = Arc::new(Demux::new(inner.client.clone(), inner.id.clone(), bytes));
        self
    }

    /// This producer's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Questions are answered by `broker` (e.g. the terminal) as they arrive.
    pub fn with_input_broker(mut self, broker: Arc<dyn InputBroker>) -> Self {
        self.inner_mut().broker = Some(broker);
        self
    }

    /// Publishes `command` (generating its id if empty) and streams its results. Commands
    /// about a process or session go to the worker holding it, `PROCESS_LIST` to every
    /// worker; the rest to the pool.
    pub async fn submit(&self, command: Command) -> Result<RemoteStream, ProducerError> {
        self.submit_in("", command).await
    }

    /// [`Producer::submit`] in client scope `scope` (docs/nats.md, "Scopes over the bus"):
    /// on the workers it runs in that scope within this producer's, and sees only that
    /// scope's processes and sessions (`""`: the producer's own scope).
    pub async fn submit_in(
        &self,
        scope: &str,
        mut command: Command,
    ) -> Result<RemoteStream, ProducerError> {
        let id = command.ensure_command_id().to_owned();
        if !subjects::is_valid_id(&id) {
            return Err(ProducerError::InvalidId(id));
        }
        let scope: Arc<str> = Arc::from(scope);
        match self.route(&command, &scope).await? {
            Route::Pool => self.submit_to_pool(command, id, &scope).await,
            Route::Worker(target) => self.submit_to_worker(command, target).await,
            Route::Every => self.submit_everywhere(command, id, scope).await,
        }
    }

    /// Ends client scope `scope` on every worker (its processes and sessions there), and
    /// returns once they answered (or none is on the bus). Its sessions are forgotten.
    pub async fn end_scope(&self, scope: &str) -> Result<(), ProducerError> {
        self.inner.sessions.retain(|(s, _), _| &**s != scope);
        fanout::discover(&self.inner.client, &self.inner.id, scope, true).await?;
        Ok(())
    }

    /// Any worker: the queue group (core) or the work queue (durable).
    async fn submit_to_pool(
        &self,
        command: Command,
        id: String,
        scope: &str,
    ) -> Result<RemoteStream, ProducerError> {
        let (results, inbox) = self.listen(&id).await?;
        let payload = serde_json::to_vec(&command).map_err(nats_error)?;
        let subject = subjects::command(&self.inner.id, command.command_type().as_str());
        // The id of this producer's command among every producer's (de-duplication).
        let scoped = subjects::scoped(&self.inner.id, &id);
        let (watch, first) = match &self.inner.js {
            // Boxed: JetStream's futures are large, and would make every submission's
            // future (moved several times per command) as large.
            Some(js) => {
                // The message id carries the secret recorded with the id, so that no
                // other producer can publish one that swallows this command as a duplicate.
                let message_id = match &self.inner.ids {
                    Some(ids) => {
                        let secret = Box::pin(claim_id(js, ids, &scoped, &payload)).await?;
                        format!("{scoped}.{secret}")
                    }
                    None => scoped.clone(),
                };
                let ids = (scoped.as_str(), message_id.as_str());
                Box::pin(publish_durably(js, subject, ids, scope, payload)).await?;
                (None, None)
            }
            None => {
                // A question is asked before any terminal: no use waiting for one.
                let wants_result = command.command_type() != CommandType::RequestUserInput;
                let taken = self
                    .request_core(subject, scope, payload, wants_result)
                    .await?;
                let ended = taken.ended();
                let watch = match taken.worker {
                    Some(worker) if !ended => {
                        Some(self.inner.monitor.watch(&worker, &self.inner.id, scoped))
                    }
                    _ => None,
                };
                (watch, taken.first)
            }
        };
        let mut stream = self.stream(&command, id, results, Some(inbox), watch, None);
        stream.first = first;
        Ok(stream)
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
        let (results, inbox) = match &self.inner.js {
            None => (
                Results::Demuxed,
                self.inner.demux.register(&id, true).await?,
            ),
            // Durable mode subscribes to core results only for these rare commands (its
            // pool's results come from JetStream: a wildcard would receive them twice).
            Some(_) => (
                Results::Core(
                    self.subscribe(subjects::results(&self.inner.id, &id))
                        .await?,
                ),
                self.inner.demux.register(&id, false).await?,
            ),
        };
        let payload = serde_json::to_vec(&command).map_err(nats_error)?;
        let subject = subjects::worker_command(
            &target.worker,
            &self.inner.id,
            command.command_type().as_str(),
        );
        match self
            .request_core(subject, &target.scope, payload, false)
            .await
        {
            Ok(_) => {}
            Err(ProducerError::NoWorkers(_)) => {
                self.forget(&target);
                return Err(target.lost());
            }
            Err(e) => return Err(e),
        }
        let scoped = subjects::scoped(&self.inner.id, &id);
        let watch = self
            .inner
            .monitor
            .watch(&target.worker, &self.inner.id, scoped);
        Ok(self.stream(
            &command,
            id,
            results,
            Some(inbox),
            Some(watch),
            Some(target),
        ))
    }

    /// `PROCESS_LIST` of client scope `scope` on every live worker, merged into one result.
    async fn submit_everywhere(
        &self,
        command: Command,
        id: String,
        scope: Arc<str>,
    ) -> Result<RemoteStream, ProducerError> {
        let workers = fanout::discover(&self.inner.client, &self.inner.id, &scope, false).await?;
        if workers.is_empty() {
            return Err(ProducerError::NoWorkers(subjects::workers(&self.inner.id)));
        }
        let (tx, rx) = mpsc::channel(1);
        let (producer, part, list_id) = (self.clone(), command.clone(), id.clone());
        tokio::spawn(async move {
            tokio::select! {
                merged = producer.list_everywhere(&part, (&list_id, &scope), workers) => {
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
        inbox: Option<Registration>,
        watch: Option<Watch>,
        target: Option<Target>,
    ) -> RemoteStream {
        RemoteStream {
            command_id,
            command_type: command.command_type().as_str().to_owned(),
            results,
            inbox,
            producer: self.clone(),
            watch,
            target,
            first: None,
            done: false,
        }
    }

    /// Durable mode: the results of `command_id` from the first one on (e.g. after this
    /// producer restarted), ending after the terminal one.
    pub async fn replay(&self, command_id: &str) -> Result<RemoteStream, ProducerError> {
        if !subjects::is_valid_id(command_id) {
            return Err(ProducerError::InvalidId(command_id.to_owned()));
        }
        let (results, inbox) = self.listen(command_id).await?;
        Ok(RemoteStream {
            command_id: command_id.to_owned(),
            command_type: String::new(),
            results,
            inbox: Some(inbox),
            producer: self.clone(),
            watch: None,
            target: None,
            first: None,
            done: false,
        })
    }

    /// Registers `id` for its questions, and says where its results are read from: the
    /// demultiplexer (core mode) or a follower over `CMDR_RESULTS` from the start,
    /// resuming through outages (durable).
    async fn listen(&self, id: &str) -> Result<(Results, Registration), ProducerError> {
        match &self.inner.js {
            None => Ok((Results::Demuxed, self.inner.demux.register(id, true).await?)),
            Some(js) => {
                let inbox = self.inner.demux.register(id, false).await?;
                Ok((
                    Results::Channel(follow(jetstream::Context::clone(js), &self.inner.id, id)),
                    inbox,
                ))
            }
        }
    }

    /// Core mode: publish as a request a worker acknowledges; the id of the worker that
    /// took it, when it gives one, or — asked for with `wants_result` ([`REPLY_HEADER`]) —
    /// the command's terminal result. A worker that answers `busy`
    /// did not take it: the request is sent again (the queue group may pick another
    /// worker) with a growing pause, until [`ACCEPT_TIMEOUT`] has passed.
    async fn request_core(
        &self,
        subject: String,
        scope: &str,
        payload: Vec<u8>,
        wants_result: bool,
    ) -> Result<Taken, ProducerError> {
        let mut headers = scope_headers(scope);
        if wants_result {
            headers
                .get_or_insert_with(async_nats::HeaderMap::new)
                .insert(REPLY_HEADER, REPLY_RESULT);
        }
        let payload = bytes::Bytes::from(payload);
        let deadline = tokio::time::Instant::now() + ACCEPT_TIMEOUT;
        let mut pause = BUSY_RETRY_FIRST;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let mut request = Request::new()
                .payload(payload.clone())
                .timeout(Some(left.max(Duration::from_millis(1))));
            if let Some(headers) = &headers {
                request = request.headers(headers.clone());
            }
            let accepted = match self
                .inner
                .client
                .send_request(subject.clone(), request)
                .await
            {
                Ok(reply) => {
                    if let Some(taken) = wants_result
                        .then(|| Taken::with_result(&reply.payload))
                        .flatten()
                    {
                        return Ok(taken);
                    }
                    serde_json::from_slice::<Accepted>(&reply.payload).ok()
                }
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
                    return Ok(Taken {
                        worker: accepted
                            .and_then(|accepted| accepted.worker)
                            .filter(|worker| subjects::is_valid_id(worker)),
                        first: None,
                    })
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
        self.inner
            .client
            .publish(
                subjects::cancel(&self.inner.id, command_id),
                bytes::Bytes::new(),
            )
            .await
            .map_err(nats_error)?;
        self.inner.client.flush().await.map_err(nats_error)
    }

    /// Answers the question of `command_id`.
    pub async fn answer_input(&self, command_id: &str, value: String) -> Result<(), ProducerError> {
        let (_, reply) = self
            .inner
            .questions
            .remove(command_id)
            .ok_or_else(|| ProducerError::NotWaiting(command_id.to_owned()))?;
        answer(&self.inner.client, reply, value).await
    }

    /// Sends everything buffered (cancels, answers) to the server.
    pub async fn flush(&self) {
        if let Err(e) = self.inner.client.flush().await {
            tracing::warn!("flushing to NATS: {e}");
        }
    }

    async fn subscribe(&self, subject: String) -> Result<Subscriber, ProducerError> {
        self.inner
            .client
            .subscribe(subject)
            .await
            .map_err(nats_error)
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
        let Some(broker) = self.inner.broker.clone() else {
            self.inner.questions.insert(command_id.to_owned(), reply);
            return;
        };
        let client = self.inner.client.clone();
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

/// Durable mode: records which command `id` names (a SHA-256 of its JSON) with a fresh
/// secret, unless the id is already recorded: then the same command may go on (its
/// publish, under the recorded secret, is de-duplicated and its results replayed), a
/// different one is refused. Returns the secret its message id carries.
async fn claim_id(
    js: &jetstream::Context,
    ids: &jetstream::stream::Stream,
    id: &str,
    payload: &[u8],
) -> Result<String, ProducerError> {
    let subject = id_subject(id);
    let hash = hex(ring::digest::digest(&ring::digest::SHA256, payload).as_ref());
    let secret = uuid::Uuid::new_v4().simple().to_string();
    let record = format!("{hash} {secret}");
    let mut headers = async_nats::HeaderMap::new();
    // Stored only if nothing is stored for this id yet (atomic on the server).
    headers.insert(async_nats::header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE, "0");
    let deadline = tokio::time::Instant::now() + PUBLISH_PATIENCE;
    let mut pause = Duration::from_millis(50);
    let published = loop {
        let attempt = async {
            js.publish_with_headers(subject.clone(), headers.clone(), record.clone().into())
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
        Ok(_) => Ok(secret),
        Err(e) if e.kind() == jetstream::context::PublishErrorKind::WrongLastSequence => {
            let known = ids
                .get_last_raw_message_by_subject(&subject)
                .await
                .map_err(nats_error)?;
            let known = String::from_utf8_lossy(&known.payload);
            match known.split_once(' ') {
                Some((known_hash, secret)) if known_hash == hash => Ok(secret.to_owned()),
                _ => Err(ProducerError::IdConflict(id.to_owned())),
            }
        }
        Err(e) => Err(nats_error(e)),
    }
}

/// Durable mode: store the command, de-duplicated by its message id (`ids`: the scoped
/// command id, for the log, and the message id, which holds a secret and is never logged).
async fn publish_durably(
    js: &jetstream::Context,
    subject: String,
    (id, message_id): (&str, &str),
    scope: &str,
    payload: Vec<u8>,
) -> Result<(), ProducerError> {
    let payload = bytes::Bytes::from(payload);
    let deadline = tokio::time::Instant::now() + PUBLISH_PATIENCE;
    let mut pause = Duration::from_millis(50);
    loop {
        let mut headers = scope_headers(scope).unwrap_or_default();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, message_id);
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

/// The headers naming client scope `scope` ([`SCOPE_HEADER`]); none for the producer's
/// own scope (`""`).
fn scope_headers(scope: &str) -> Option<async_nats::HeaderMap> {
    if scope.is_empty() {
        return None;
    }
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(SCOPE_HEADER, scope);
    Some(headers)
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
        error_code: Some(e.code().into()),
        ..Default::default()
    }
}

/// The results of one remote command, in order, ending after the terminal one.
pub struct RemoteStream {
    command_id: String,
    command_type: String,
    results: Results,
    /// The command's place in the demultiplexer: its questions, and in core mode its
    /// results (none for a merged `PROCESS_LIST`).
    inbox: Option<Registration>,
    producer: Producer,
    /// Core mode: resolves if the worker running the command is lost.
    watch: Option<Watch>,
    /// The worker holding the command's process or session (routed commands).
    target: Option<Target>,
    /// The command's terminal result, when the worker's reply was that result, until
    /// yielded (boxed: a stream is moved several times, a result is large).
    first: Option<Box<OutputResult>>,
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

    /// Takes the questions waiting in the inbox; the next result when the results are
    /// demultiplexed and one is there (or their end). `None`: nothing more there for now
    /// (the inbox wakes this task on its next message).
    fn poll_inbox(&mut self, cx: &mut Context<'_>) -> Option<Next> {
        let demuxed = matches!(self.results, Results::Demuxed);
        let Some(inbox) = &self.inbox else {
            return demuxed.then_some(Next::Ended);
        };
        loop {
            match inbox.mailbox().poll_next(cx) {
                Poll::Ready(Delivery::Question(question)) => {
                    self.producer.take_question(&self.command_id, question);
                }
                Poll::Ready(Delivery::Result(payload)) => {
                    return Some(Next::Result(parse(&payload)))
                }
                Poll::Ready(Delivery::End(End::Overflowed(limit))) if demuxed => {
                    return Some(Next::Overflowed(limit))
                }
                Poll::Ready(Delivery::End(_)) => return demuxed.then_some(Next::Ended),
                Poll::Pending => return None,
            }
        }
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
        let next = if let Some(first) = self.first.take() {
            Poll::Ready(Next::Result(Ok(*first)))
        } else {
            match self.poll_inbox(cx) {
                Some(next) => Poll::Ready(next),
                None => self.results.poll_result(cx),
            }
        };
        let result = match next {
            Poll::Ready(Next::Result(Ok(result))) => {
                self.done = result.status.is_terminal();
                return Poll::Ready(Some(result));
            }
            Poll::Ready(Next::Result(Err(e))) => self.lost(&format!("reading results: {e}")),
            Poll::Ready(Next::Ended) => self.lost("the result subscription closed"),
            Poll::Ready(Next::Overflowed(limit)) => {
                tracing::warn!(command_id = %self.command_id, limit, "a stream fell behind its results: cancelling its command");
                self.cancel();
                self.lost_with(&ProducerError::ReaderBehind(limit))
            }
            Poll::Pending => match self.poll_lost(cx) {
                Some(error) => self.lost_with(&error),
                None => return Poll::Pending,
            },
        };
        self.done = true;
        Poll::Ready(Some(result))
    }
}

impl Drop for RemoteStream {
    fn drop(&mut self) {
        self.producer.inner.questions.remove(&self.command_id);
        if !self.done {
            self.cancel();
        }
    }
}

/// Where a [`RemoteStream`]'s results come from.
enum Results {
    /// The inbox (core mode: the producer's one results subscription, demultiplexed).
    Demuxed,
    /// A subscription to the command's results subject (durable mode, commands routed to
    /// one worker).
    Core(Subscriber),
    /// Results handed over by a task: the durable follower, or a merged fan-out.
    Channel(mpsc::Receiver<Followed>),
}

/// What a [`RemoteStream`] got next.
// Moved once per result, never stored: boxing the result would cost an allocation each.
#[allow(clippy::large_enum_variant)]
enum Next {
    /// A result, or why one could not be read.
    Result(Followed),
    /// The reader fell behind by more than this many bytes (`mailbox`).
    Overflowed(usize),
    /// The results' source ended without a terminal.
    Ended,
}

impl Results {
    /// The next result from a source other than the inbox.
    fn poll_result(&mut self, cx: &mut Context<'_>) -> Poll<Next> {
        let next = match self {
            Results::Demuxed => return Poll::Pending,
            Results::Core(sub) => sub
                .poll_next_unpin(cx)
                .map(|m| m.map(|m| parse(&m.payload))),
            Results::Channel(rx) => rx.poll_recv(cx),
        };
        next.map(|next| next.map_or(Next::Ended, Next::Result))
    }
}

/// What a worker answered to a command request it took (core mode).
struct Taken {
    /// The worker's id, when it gives one (for the liveness checks).
    worker: Option<String>,
    /// The command's result, when the reply was that result (its terminal).
    first: Option<Box<OutputResult>>,
}

impl Taken {
    /// A reply that is the command's terminal result (an `OutputResult`, which has a
    /// `status`; an [`Accepted`] has none); `None` for an [`Accepted`] (from any worker,
    /// old or new).
    fn with_result(payload: &[u8]) -> Option<Self> {
        let result = serde_json::from_slice::<OutputResult>(payload).ok()?;
        Some(Self {
            worker: None,
            first: Some(Box::new(result)),
        })
    }

    /// Whether the reply already ended the command (its result is a terminal).
    fn ended(&self) -> bool {
        self.first
            .as_ref()
            .is_some_and(|result| result.status.is_terminal())
    }
}

/// One result message.
fn parse(payload: &[u8]) -> Followed {
    serde_json::from_slice::<OutputResult>(payload).map_err(|e| format!("malformed result: {e}"))
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
