//! Agent runs started by requests, and how closing the request stops them.
//!
//! A run never executes inside the handler's future: it is spawned (on the
//! [`TaskTracker`] of the HTTP settings) with its own cancellation token, a child of
//! [`AppState::shutdown`](crate::server::AppState::shutdown) (so shutting the server
//! down stops it too). What the request holds is a [`DropGuard`] of
//! that token — in the handler's future for `POST …/run`, in the SSE body for
//! `POST …/stream`. When the client goes away, hyper drops the handler future or the
//! response body, the guard fires the token, and the run stops exactly as on Stop: the
//! model stream is closed, a running command's process tree is killed, the partial turn
//! is persisted as `stopped`, and the conversation's lock is released. Had the run been
//! polled by the handler itself, dropping the future would have torn it down mid-write
//! instead.

use std::future::Future;
use std::task::Poll;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

use crate::agent::{AgentEvent, Message, RunOutcome};
use crate::service::{AgentService, PreparedRun, ServiceError};

use super::error::{public_message, ApiError};

/// Events buffered between a run and its client before the run waits for the client.
pub const EVENT_BUFFER: usize = 64;

/// Spawns runs under the server's shutdown token and task tracker.
#[derive(Debug, Clone, Default)]
pub struct Runs {
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

/// A spawned run and the guard that stops it when dropped.
#[derive(Debug)]
pub struct LiveRun {
    /// The run's events, ending with one `done` or `error`.
    pub events: mpsc::Receiver<AgentEvent>,
    /// Fires the run's token when dropped (the client is gone).
    pub guard: DropGuard,
    task: JoinHandle<RunOutcome>,
}

impl Runs {
    /// Runs spawn on `tasks` and stop when `shutdown` (the application's) fires.
    pub fn new(shutdown: CancellationToken, tasks: TaskTracker) -> Self {
        Self { shutdown, tasks }
    }

    /// Spawns a prepared run; its events arrive on [`LiveRun::events`].
    pub fn start(&self, run: PreparedRun) -> LiveRun {
        let (tx, events) = mpsc::channel(EVENT_BUFFER);
        let cancel = self.shutdown.child_token();
        let guard = cancel.clone().drop_guard();
        let task = self.tasks.spawn(run.run(tx, cancel));
        LiveRun {
            events,
            guard,
            task,
        }
    }

    /// Runs a prepared run to its end while the caller's future is alive; dropping that
    /// future stops the run (which still ends and persists in the background).
    pub async fn to_end(&self, run: PreparedRun) -> Result<RunOutcome, ApiError> {
        let LiveRun {
            events,
            guard,
            task,
        } = self.start(run);
        // Nobody reads the events: the loop ignores a closed channel.
        drop(events);
        let outcome = task.await.map_err(ApiError::internal);
        guard.disarm();
        outcome
    }

    /// Starts a stateless run on client-held `messages` (`POST /api/agent`).
    ///
    /// The service checks the request before its first await, so the run is polled once
    /// here: a refusal (`INVALID_REQUEST`, `LLM_UNAVAILABLE`) comes back as an error
    /// before any SSE byte is sent. Past that first poll, the run is spawned like any
    /// other; a refusal it might still produce later arrives as the stream's `error`
    /// event.
    pub async fn start_stateless(
        &self,
        service: &AgentService,
        messages: Vec<Message>,
    ) -> Result<LiveRun, ApiError> {
        let (tx, events) = mpsc::channel(EVENT_BUFFER);
        let cancel = self.shutdown.child_token();
        let guard = cancel.clone().drop_guard();
        let service = service.clone();
        let late_errors = tx.clone();
        let mut run = Box::pin(async move { service.run_stateless(messages, tx, cancel).await });
        let first = std::future::poll_fn(|cx| Poll::Ready(run.as_mut().poll(cx))).await;
        let task = match first {
            Poll::Ready(Err(error)) => return Err(error.into()),
            Poll::Ready(Ok(outcome)) => self.tasks.spawn(std::future::ready(outcome)),
            Poll::Pending => self.tasks.spawn(async move {
                match run.await {
                    Ok(outcome) => outcome,
                    Err(error) => {
                        let outcome = failed(&error);
                        let _ = late_errors.send(outcome.final_event()).await;
                        outcome
                    }
                }
            }),
        };
        Ok(LiveRun {
            events,
            guard,
            task,
        })
    }
}

/// A refusal as a failed outcome.
fn failed(error: &ServiceError) -> RunOutcome {
    RunOutcome::Failed {
        code: error.code().into(),
        message: public_message(error),
    }
}

impl LiveRun {
    /// The events and the guard, for a stream that outlives the handler (the task is
    /// tracked by the server and ends on its own).
    pub fn into_parts(self) -> (mpsc::Receiver<AgentEvent>, DropGuard) {
        (self.events, self.guard)
    }
}
