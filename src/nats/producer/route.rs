//! Where a producer sends a command (docs/nats.md, "Processes"):
//!
//! - the **pool** (queue group, or the durable work queue): every command but those below,
//!   including `BASH_EXEC` with `background` (the process then lives on whichever worker
//!   ran it, and its id names that worker);
//! - **one worker**, over core request/reply in either mode: `PROCESS_INPUT`,
//!   `PROCESS_OUTPUT` and `PROCESS_KILL` go to the worker their `process_id` names
//!   (`<worker>-p<N>`); `BASH_EXEC` with `session` goes to the worker holding that session
//!   (pinned in the producer, found by discovery, or — for a new session — a live worker
//!   picked at random);
//! - **every worker**: `PROCESS_LIST`, merged (`fanout`).
//!
//! A process id that names no worker goes to the pool, whose worker answers
//! `PROCESS_NOT_FOUND`.

use std::sync::Arc;

use cmdr_executors::Command;

use super::discovery::discover;
use super::{Producer, ProducerError};
use crate::nats::subjects;

/// Where a command goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    /// Any worker: the queue group (core) or the work queue (durable).
    Pool,
    /// One worker, over core request/reply.
    Worker(Target),
    /// Every live worker, results merged (`PROCESS_LIST`).
    Every,
}

/// A worker a command must reach, and what of the producer's lives there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    /// The worker's id.
    pub(super) worker: String,
    /// The client scope the command runs in there (docs/nats.md, "Scopes over the bus").
    pub(super) scope: Arc<str>,
    /// What the command is about there.
    pub(super) holds: Holds,
}

/// What a [`Target`] worker holds for the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Holds {
    /// A process, by id.
    Process(String),
    /// A shell session, by name.
    Session(String),
    /// Nothing in particular (one worker's part of a fan-out).
    Part,
}

impl Target {
    /// Why the command cannot be served when the worker is gone.
    pub(super) fn lost(&self) -> ProducerError {
        let worker = &self.worker;
        ProducerError::ProcessLost(match &self.holds {
            Holds::Process(id) => {
                format!("process '{id}' is lost: its worker '{worker}' is not on the bus (it stopped or died)")
            }
            Holds::Session(name) => format!(
                "session '{name}' is lost: its worker '{worker}' is not on the bus (it stopped or died); the next command starts the session anew"
            ),
            Holds::Part => format!("worker '{worker}' is not on the bus"),
        })
    }
}

impl Producer {
    /// Where `command` of client scope `scope` goes.
    pub(super) async fn route(
        &self,
        command: &Command,
        scope: &Arc<str>,
    ) -> Result<Route, ProducerError> {
        let process_id = match command {
            Command::ProcessInput(c) => &c.process_id,
            Command::ProcessOutput(c) => &c.process_id,
            Command::ProcessKill(c) => &c.process_id,
            Command::ProcessList(_) => return Ok(Route::Every),
            Command::BashExec(c) => {
                return match &c.session {
                    Some(name) => Ok(Route::Worker(Target {
                        worker: self.session_worker(scope, name).await?,
                        scope: scope.clone(),
                        holds: Holds::Session(name.clone()),
                    })),
                    None => Ok(Route::Pool),
                }
            }
            _ => return Ok(Route::Pool),
        };
        Ok(match subjects::worker_of_process(process_id) {
            Some(worker) => Route::Worker(Target {
                worker: worker.to_owned(),
                scope: scope.clone(),
                holds: Holds::Process(process_id.clone()),
            }),
            None => Route::Pool,
        })
    }

    /// The worker session `name` of client scope `scope` lives on: the one pinned, else
    /// the one discovery finds holding it, else a live worker picked at random (then
    /// pinned).
    async fn session_worker(&self, scope: &Arc<str>, name: &str) -> Result<String, ProducerError> {
        let key = (scope.clone(), name.to_owned());
        if let Some(worker) = self.inner.sessions.get(&key) {
            return Ok(worker.clone());
        }
        // One resolution at a time, so two first commands of a session meet on one worker.
        let _resolving = self.inner.resolving.lock().await;
        if let Some(worker) = self.inner.sessions.get(&key) {
            return Ok(worker.clone());
        }
        let workers = discover(&self.inner.client, &self.inner.id, scope, false).await?;
        let holder = workers
            .iter()
            .find(|w| w.sessions.iter().any(|s| s == name))
            .or_else(|| pick(&workers))
            .ok_or_else(|| ProducerError::NoWorkers(subjects::workers(&self.inner.id)))?;
        self.inner.sessions.insert(key, holder.worker.clone());
        Ok(holder.worker.clone())
    }

    /// Forgets where `target`'s session was (its worker is gone).
    pub(super) fn forget(&self, target: &Target) {
        if let Holds::Session(name) = &target.holds {
            let key = (target.scope.clone(), name.clone());
            self.inner
                .sessions
                .remove_if(&key, |_, worker| *worker == target.worker);
        }
    }
}

/// One of `items` at random (`None` when empty).
fn pick<T>(items: &[T]) -> Option<&T> {
    let len = u128::try_from(items.len()).ok().filter(|len| *len > 0)?;
    let index = uuid::Uuid::new_v4().as_u128() % len;
    items.get(usize::try_from(index).ok()?)
}
