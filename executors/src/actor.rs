//! The executor actor: one long-lived task per command type, with a bounded mailbox and a
//! concurrency limit, running each command in its own supervised task.
//!
//! ```text
//!  submit ──► mailbox (bounded) ──► actor loop ──(permit)──► command task
//!                                                              │ executor.execute(..)
//!                                  RUNNING ◄── OutputSink ◄────┤
//!                                  terminal ◄── oneshot ◄──────┘ (built by terminal.rs)
//! ```
//! The loop takes the next envelope only once a concurrency permit is free, so a full
//! actor stops draining its mailbox and submitters wait: back-pressure all the way up.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::ExecError;
use crate::executor::{ExecContext, ExecFuture, Executor, OutputSink};
use crate::inflight::{Inflight, StopReason, StopSignal};
use crate::outcome::Outcome;
use crate::protocol::{Command, CommandType, OutputResult};
use crate::terminal::{failed_result, terminal_result};

/// Limits of one executor actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorConfig {
    /// Commands of this type running at once; further ones wait in the mailbox.
    pub max_concurrent: usize,
    /// Commands waiting in the mailbox before `execute` itself waits.
    pub mailbox_capacity: usize,
    /// Deadline for commands that set no `timeout_ms` (`None`: no deadline).
    pub default_timeout: Option<Duration>,
    /// How long a stopped executor gets to wind down (kill its processes, report) before
    /// the runtime drops it and reports the stop itself.
    pub stop_grace: Duration,
}

impl Default for ActorConfig {
    fn default() -> Self {
        Self {
            max_concurrent: 64,
            mailbox_capacity: 1024,
            default_timeout: None,
            stop_grace: Duration::from_secs(10),
        }
    }
}

/// State shared by every actor of one registry.
#[derive(Debug, Default)]
pub(crate) struct Runtime {
    pub(crate) inflight: Inflight,
    pub(crate) tracker: TaskTracker,
    pub(crate) shutdown: CancellationToken,
}

/// One accepted command on its way to the actor.
pub(crate) struct Envelope {
    pub(crate) command: Command,
    pub(crate) running: mpsc::Sender<OutputResult>,
    pub(crate) terminal: oneshot::Sender<OutputResult>,
    pub(crate) stop: Arc<StopSignal>,
}

/// The sending side of an actor's mailbox.
#[derive(Clone)]
pub(crate) struct ActorHandle {
    pub(crate) mailbox: mpsc::Sender<Envelope>,
}

/// Starts the actor for `command_type` served by `executor`.
pub(crate) fn spawn_actor(
    executor: Arc<dyn Executor>,
    config: ActorConfig,
    runtime: Arc<Runtime>,
) -> ActorHandle {
    let (mailbox, rx) = mpsc::channel(config.mailbox_capacity.max(1));
    let tracker = runtime.tracker.clone();
    tracker.spawn(actor_loop(rx, executor, Arc::new(config), runtime));
    ActorHandle { mailbox }
}

async fn actor_loop(
    mut rx: mpsc::Receiver<Envelope>,
    executor: Arc<dyn Executor>,
    config: Arc<ActorConfig>,
    runtime: Arc<Runtime>,
) {
    let permits = Arc::new(Semaphore::new(config.max_concurrent.max(1)));
    let mut closing = false;
    loop {
        let envelope = tokio::select! {
            biased;
            _ = runtime.shutdown.cancelled(), if !closing => {
                // Take nothing new; what is queued still runs (or, once shutdown stops
                // every in-flight command, answers at once with SHUTTING_DOWN).
                closing = true;
                rx.close();
                continue;
            }
            next = rx.recv() => match next {
                Some(envelope) => envelope,
                None => return,
            },
        };
        let Ok(permit) = permits.clone().acquire_owned().await else {
            reject(envelope, &runtime);
            return;
        };
        let task = run_command(
            executor.clone(),
            envelope,
            config.clone(),
            runtime.clone(),
            permit,
        );
        runtime.tracker.spawn(task);
    }
}

/// Answers a command the actor will not run (shutdown) with its terminal result.
fn reject(envelope: Envelope, runtime: &Runtime) {
    let id = envelope.command.command_id().to_owned();
    let ty = envelope.command.command_type();
    runtime.inflight.release(&id);
    let result = failed_result(&id, ty.as_str(), &ExecError::ShuttingDown);
    let _ = envelope.terminal.send(result);
}

async fn run_command(
    executor: Arc<dyn Executor>,
    envelope: Envelope,
    config: Arc<ActorConfig>,
    runtime: Arc<Runtime>,
    permit: OwnedSemaphorePermit,
) {
    let Envelope {
        command,
        running,
        terminal,
        stop,
    } = envelope;
    let command_id: Arc<str> = Arc::from(command.command_id());
    let command_type = command.command_type();
    let started = Instant::now();
    let deadline = command.requested_timeout().or(config.default_timeout);
    let result = if let Some(reason) = stop.reason() {
        Err(ExecError::from(reason))
    } else if deadline == Some(Duration::ZERO) {
        Err(ExecError::InvalidInput(
            "timeout_ms must be at least 1".to_owned(),
        ))
    } else {
        let ctx = ExecContext {
            command_id: command_id.to_string(),
            output: OutputSink::new(running, command_id.clone(), command_type),
            cancel: stop.token().clone(),
        };
        let run = executor.execute(command, ctx);
        supervise(run, &stop, deadline, config.stop_grace, command_type).await
    };
    runtime.inflight.release(&command_id);
    drop(permit);
    let result = terminal_result(
        &command_id,
        command_type,
        result,
        stop.reason(),
        started.elapsed(),
    );
    let _ = terminal.send(result);
}

/// Runs the executor's future, catching panics, enforcing the deadline, and giving a
/// stopped executor `grace` to wind down before dropping it.
async fn supervise(
    run: ExecFuture<'_>,
    stop: &StopSignal,
    deadline: Option<Duration>,
    grace: Duration,
    command_type: CommandType,
) -> Result<Outcome, ExecError> {
    let mut run = AssertUnwindSafe(run).catch_unwind();
    let timer = async {
        match deadline {
            Some(after) => tokio::time::sleep(after).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        result = &mut run => return flatten(result),
        _ = timer => stop.stop(StopReason::TimedOut(deadline.unwrap_or_default())),
        _ = stop.token().cancelled() => {}
    }
    match tokio::time::timeout(grace, &mut run).await {
        Ok(result) => flatten(result),
        Err(_) => {
            tracing::warn!(%command_type, "executor did not stop within {grace:?}; dropped");
            Err(stop
                .reason()
                .map(ExecError::from)
                .unwrap_or(ExecError::Cancelled))
        }
    }
}

fn flatten(
    result: Result<Result<Outcome, ExecError>, Box<dyn Any + Send>>,
) -> Result<Outcome, ExecError> {
    result.unwrap_or_else(|panic| Err(ExecError::Panicked(panic_message(panic.as_ref()))))
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}
