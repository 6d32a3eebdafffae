//! The executor actor: one long-lived task per command type, with a bounded mailbox and a
//! concurrency limit, running each command in its own supervised task.
//!
//! ```text
//!  submit ──► mailbox (bounded) ──► actor loop ──(permit)──► command task
//!                                                              │ executor.execute(..)
//!                                  RUNNING ◄── OutputSink ◄────┤
//!                                  terminal ◄── oneshot ◄──────┘ (built by terminal.rs)
//! ```
//! `execute` first takes a seat in the actor's waiting room (`mailbox_capacity` seats), so
//! when too many commands wait, submitters wait: back-pressure all the way up. The loop
//! starts a command at once when one of its `max_concurrent` slots is free; otherwise it
//! tells the command's reader at once that it is queued (a `RUNNING` note, `load.rs`) and
//! leaves it waiting, in line, for a slot — or for its stop, answered at once. A queued
//! command that gets its slot is told so before its first output.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, TryAcquireError};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::ExecError;
use crate::executor::{ExecContext, ExecFuture, Executor, OutputSink};
use crate::inflight::{Inflight, StopReason, StopSignal};
use crate::load::{queued_note, started_note, Gauge};
use crate::outcome::Outcome;
use crate::protocol::{Command, CommandType, OutputResult};
use crate::scope::Scope;
use crate::terminal::{failed_result, terminal_result};

/// Commands of one type running at once unless configured ([`ActorConfig::max_concurrent`];
/// `cmdr serve --max-concurrent`).
pub const DEFAULT_MAX_CONCURRENT: usize = 64;

/// Limits of one executor actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorConfig {
    /// Commands of this type running at once; further ones are told they are queued
    /// (a `RUNNING` message with a `queue` note) and wait for a slot, in order.
    pub max_concurrent: usize,
    /// Commands waiting for a slot before `execute` itself waits.
    pub mailbox_capacity: usize,
    /// Deadline for commands that set no `timeout_ms` (`None`: no deadline). It counts
    /// from the start, not from the queueing.
    pub default_timeout: Option<Duration>,
    /// How long a stopped executor gets to wind down (kill its processes, report) before
    /// the runtime drops it and reports the stop itself.
    pub stop_grace: Duration,
}

impl Default for ActorConfig {
    fn default() -> Self {
        Self {
            max_concurrent: DEFAULT_MAX_CONCURRENT,
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
    pub(crate) scope: Scope,
    /// Its place in the waiting room, given back when it starts or ends.
    pub(crate) seat: OwnedSemaphorePermit,
}

/// An actor's counters, and the sending side of its mailbox once it has started.
#[derive(Clone)]
pub(crate) struct ActorHandle {
    pub(crate) gauge: Arc<Gauge>,
    lazy: Arc<LazyActor>,
}

impl ActorHandle {
    /// The deadline of a command of this actor that asks for none.
    pub(crate) fn default_timeout(&self) -> Option<Duration> {
        self.lazy.actor.config.default_timeout
    }
}

/// An actor that starts (its mailbox and its task) with its first command: a one-shot
/// `cmdr exec` runs one command type of ten, and each mailbox is a first block of 32
/// envelopes written on creation (BENCHMARKS.md, X3).
struct LazyActor {
    mailbox: OnceLock<mpsc::Sender<Envelope>>,
    actor: Actor,
}

/// The actor for `command_type` served by `executor`, to start with its first command.
pub(crate) fn lazy_actor(
    executor: Arc<dyn Executor>,
    config: ActorConfig,
    runtime: Arc<Runtime>,
) -> ActorHandle {
    let room = config.mailbox_capacity.max(1);
    let gauge = Arc::new(Gauge::new(config.max_concurrent.max(1), room));
    let actor = Actor {
        executor,
        config: Arc::new(config),
        runtime,
        gauge: gauge.clone(),
    };
    let lazy = Arc::new(LazyActor {
        mailbox: OnceLock::new(),
        actor,
    });
    ActorHandle { gauge, lazy }
}

impl ActorHandle {
    /// The actor's mailbox, starting the actor on the first call (within a Tokio runtime).
    /// Never full: every envelope in it holds a seat of the waiting room.
    pub(crate) fn mailbox(&self) -> &mpsc::Sender<Envelope> {
        self.lazy.mailbox.get_or_init(|| {
            let actor = self.lazy.actor.clone();
            let (mailbox, rx) = mpsc::channel(actor.config.mailbox_capacity.max(1));
            let tracker = actor.runtime.tracker.clone();
            tracker.spawn(actor_loop(rx, actor));
            mailbox
        })
    }
}

/// What every command task of one actor shares.
#[derive(Clone)]
struct Actor {
    executor: Arc<dyn Executor>,
    config: Arc<ActorConfig>,
    runtime: Arc<Runtime>,
    gauge: Arc<Gauge>,
}

async fn actor_loop(mut rx: mpsc::Receiver<Envelope>, actor: Actor) {
    let mut closing = false;
    loop {
        let envelope = tokio::select! {
            biased;
            _ = actor.runtime.shutdown.cancelled(), if !closing => {
                // Take nothing new; what is queued still runs (or, once shutdown stops
                // every in-flight command, answers at once with SHUTTING_DOWN).
                closing = true;
                rx.close();
                actor.gauge.waiting_room.close();
                continue;
            }
            next = rx.recv() => match next {
                Some(envelope) => envelope,
                None => return,
            },
        };
        let task_actor = actor.clone();
        match actor.gauge.slots.clone().try_acquire_owned() {
            Ok(slot) => {
                // Boxed: tokio copies a task's future on spawn and its stage on
                // completion; a pointer is cheaper to move than the command's state.
                let task = Box::pin(run_command(task_actor, envelope, Some(slot)));
                actor.runtime.tracker.spawn(task);
            }
            Err(TryAcquireError::NoPermits) => {
                announce_queued(&envelope, &actor.gauge);
                actor
                    .runtime
                    .tracker
                    .spawn(Box::pin(wait_then_run(task_actor, envelope)));
            }
            Err(TryAcquireError::Closed) => reject(envelope, &actor.runtime),
        }
    }
}

/// Tells the reader of a command that found every slot busy that it is queued.
fn announce_queued(envelope: &Envelope, gauge: &Gauge) {
    let position = gauge.enqueue();
    let command = &envelope.command;
    let note = queued_note(
        command.command_id(),
        command.command_type(),
        position,
        gauge.limit(),
    );
    // The channel is new and empty: only a reader already gone refuses the note.
    let _ = envelope.running.try_send(note);
}

/// Waits (in line: the semaphore is fair) for a slot, or for the command to be stopped,
/// whichever comes first; then runs it, or answers its stop at once.
async fn wait_then_run(actor: Actor, envelope: Envelope) {
    let queued_at = Instant::now();
    let slot = tokio::select! {
        biased;
        _ = envelope.stop.token().cancelled() => None,
        slot = actor.gauge.slots.clone().acquire_owned() => slot.ok(),
    };
    actor.gauge.dequeue();
    if slot.is_some() {
        let command = &envelope.command;
        let note = started_note(
            command.command_id(),
            command.command_type(),
            queued_at.elapsed(),
        );
        // At most the queued note is ahead of it: there is room.
        let _ = envelope.running.try_send(note);
    }
    run_command(actor, envelope, slot).await;
}

/// Answers a command the actor will not run (shutdown) with its terminal result.
fn reject(envelope: Envelope, runtime: &Runtime) {
    let id = envelope.command.command_id().to_owned();
    let ty = envelope.command.command_type();
    runtime.inflight.release(&id);
    let result = failed_result(&id, ty.as_str(), &ExecError::ShuttingDown);
    let _ = envelope.terminal.send(result);
}

/// Runs one command in its slot; without a slot (stopped while queued) it only answers
/// with its terminal result.
async fn run_command(actor: Actor, envelope: Envelope, slot: Option<OwnedSemaphorePermit>) {
    let Envelope {
        command,
        running,
        terminal,
        stop,
        scope,
        seat,
    } = envelope;
    drop(seat);
    let command_id: Arc<str> = Arc::from(command.command_id());
    let command_type = command.command_type();
    let started = Instant::now();
    let deadline = command.requested_timeout().or(actor.config.default_timeout);
    let result = if let Some(reason) = stop.reason() {
        Err(ExecError::from(reason))
    } else if slot.is_none() {
        // Only a closed semaphore gives no slot, and nothing closes it.
        Err(ExecError::ShuttingDown)
    } else if deadline == Some(Duration::ZERO) {
        Err(ExecError::InvalidInput(
            "timeout_ms must be at least 1".to_owned(),
        ))
    } else if let Err(e) = command.check_durations() {
        Err(e)
    } else {
        let ctx = ExecContext {
            command_id: command_id.to_string(),
            output: OutputSink::new(running, command_id.clone(), command_type),
            cancel: stop.token().clone(),
            scope,
        };
        let run = actor.executor.execute(command, ctx);
        let grace = actor.config.stop_grace;
        supervise(run, &stop, deadline, grace, command_type).await
    };
    actor.runtime.inflight.release(&command_id);
    drop(slot);
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
