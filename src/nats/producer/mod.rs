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
//!
//! Files: `request` (core mode's request and its reply), `durable_publish` (durable
//! mode's id claim and publish), `stream` ([`RemoteStream`]), `questions` (answering
//! `REQUEST_USER_INPUT`), `error` ([`ProducerError`]), `demux`/`mailbox` (core results to
//! their streams), `follow` (durable results), `liveness`, `route`/`discovery`/`fanout`, `remote`
//! (the producer as a registry's executor).

mod demux;
mod discovery;
mod durable_publish;
mod error;
mod fanout;
mod follow;
mod liveness;
mod mailbox;
mod questions;
pub mod remote;
mod request;
mod route;
mod stream;

pub use demux::DEFAULT_RESULT_BUFFER;
pub use discovery::DISCOVERY_QUIET;
pub use error::ProducerError;
pub use stream::{RemoteStream, SubmitStream};

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use async_nats::{Client, Subject, Subscriber};
use cmdr_executors::{decode_command, Command, CommandType, InputBroker};
use dashmap::DashMap;
use tokio::sync::mpsc;

use crate::nats::durable::{ensure_ids, ensure_streams, DurableSettings};
use crate::nats::subjects;
use crate::nats::wire::SCOPE_HEADER;
use demux::{Demux, Registration};
use durable_publish::{claim_id, publish_durably};
use error::{nats_error, rejected};
use follow::follow;
use liveness::{Monitor, Watch};
use route::{Route, Target};
use stream::Results;

/// How long `submit` waits for a worker to acknowledge a command.
pub const ACCEPT_TIMEOUT: Duration = Duration::from_secs(5);

/// A producer: cheap to clone (one shared reference: every command's stream holds one).
#[derive(Clone)]
pub struct Producer {
    inner: Arc<Inner>,
}

/// How a producer's pool commands travel (docs/nats.md, "Two modes").
#[derive(Clone)]
enum Mode {
    /// Core NATS request/reply: at most once.
    Core,
    /// JetStream: commands stored in `CMDR_COMMANDS`, results read from `CMDR_RESULTS`.
    /// (Behind an `Arc`: large.)
    Durable(Arc<Durable>),
}

/// A durable producer's JetStream handles.
struct Durable {
    js: jetstream::Context,
    /// What command each recent id named (`CMDR_IDS`).
    ids: jetstream::stream::Stream,
}

/// What a producer and its clones share.
#[derive(Clone)]
struct Inner {
    client: Client,
    /// This producer's id: the token its commands' subjects carry (docs/nats.md,
    /// "Permissions").
    id: Arc<str>,
    /// How pool commands travel: core request/reply, or JetStream.
    mode: Mode,
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
            mode: Mode::Core,
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
        inner.mode = Mode::Durable(Arc::new(Durable { js, ids }));
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
        if !is_valid_scope(scope) {
            return Err(ProducerError::InvalidScope(scope.escape_debug().collect()));
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
        if !is_valid_scope(scope) {
            return Err(ProducerError::InvalidScope(scope.escape_debug().collect()));
        }
        self.inner.sessions.retain(|(s, _), _| &**s != scope);
        discovery::discover(&self.inner.client, &self.inner.id, scope, true).await?;
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
        let (watch, first) = match &self.inner.mode {
            // Boxed: JetStream's futures are large, and would make every submission's
            // future (moved several times per command) as large.
            Mode::Durable(durable) => {
                let Durable { js, ids } = &**durable;
                // The message id carries the secret recorded with the id, so that no
                // other producer can publish one that swallows this command as a duplicate.
                let secret = Box::pin(claim_id(js, ids, &scoped, &payload)).await?;
                let message_id = format!("{scoped}.{secret}");
                let ids = (scoped.as_str(), message_id.as_str());
                Box::pin(publish_durably(js, subject, ids, scope, payload)).await?;
                (None, None)
            }
            Mode::Core => {
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
        let (results, inbox) = match &self.inner.mode {
            Mode::Core => (
                Results::Demuxed,
                self.inner.demux.register(&id, true).await?,
            ),
            // Durable mode subscribes to core results only for these rare commands (its
            // pool's results come from JetStream: a wildcard would receive them twice).
            Mode::Durable(_) => (
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
        let workers =
            discovery::discover(&self.inner.client, &self.inner.id, &scope, false).await?;
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
        match &self.inner.mode {
            Mode::Core => Ok((Results::Demuxed, self.inner.demux.register(id, true).await?)),
            Mode::Durable(durable) => {
                let inbox = self.inner.demux.register(id, false).await?;
                let js = durable.js.clone();
                Ok((Results::Channel(follow(js, &self.inner.id, id)), inbox))
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
}

/// The longest client scope name sent to the workers, in bytes.
pub const MAX_SCOPE_LEN: usize = 1024;

/// Whether `scope` can travel in a header: bounded, and no control character (a line
/// break would end the header; `async_nats` refuses one by panicking).
fn is_valid_scope(scope: &str) -> bool {
    scope.len() <= MAX_SCOPE_LEN && !scope.chars().any(char::is_control)
}

/// The headers naming client scope `scope` ([`SCOPE_HEADER`]); none for the producer's
/// own scope (`""`). `scope` passed [`is_valid_scope`].
fn scope_headers(scope: &str) -> Option<async_nats::HeaderMap> {
    if scope.is_empty() {
        return None;
    }
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(SCOPE_HEADER, scope);
    Some(headers)
}
