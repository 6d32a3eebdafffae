//! Core mode: noticing that the worker running a command is gone, so that its producer
//! still gets exactly one terminal result.
//!
//! Core NATS delivers a command to one worker, at most once; if that worker dies
//! (SIGKILL) nothing else will ever publish on `cmdr.results.<id>`. So every core worker
//! has an id (in its [`Accepted`](super::wire::Accepted) reply) and answers requests on
//! `cmdr.alive.<worker_id>` with whether it still holds a command ([`Holding`]: from the
//! moment it accepted it until its terminal result is published). A producer waiting on
//! a command asks every [`CHECK_EVERY`] ([`watch`]); [`MISSES_BEFORE_LOST`] definite
//! misses in a row — nobody subscribes to the worker's subject any more (the server
//! dropped its connection), or the worker no longer has the command — end the stream
//! with `WORKER_LOST` or `RESULTS_LOST`. A check that cannot be answered (the connection
//! is down, the server restarting) is not a miss: a worker is not declared lost while
//! nobody can tell. Several misses are required because, after a server restart, the
//! producer may reconnect a moment before the worker has re-subscribed.

use std::sync::Arc;
use std::time::Duration;

use async_nats::{Client, Request, RequestErrorKind, Subscriber};
use dashmap::DashMap;
use futures_util::StreamExt;
use tokio::sync::oneshot;

use super::subjects;
use super::wire::Alive;

/// How often a producer asks about a command it waits on.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);
/// Definite misses in a row after which the command is given up as lost.
pub const MISSES_BEFORE_LOST: u32 = 3;

/// Why a command was given up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Lost {
    /// Nobody answers on the worker's subject any more: its connection is gone.
    WorkerGone(String),
    /// The worker answers but no longer has the command: its results were lost.
    Forgotten(String),
}

/// Worker side: the commands accepted and not yet finished, by id (a count, since a
/// duplicate id may be received while the first is held).
#[derive(Debug, Clone)]
pub(super) struct Holding {
    worker_id: String,
    ids: Arc<DashMap<String, usize>>,
}

impl Holding {
    /// A new worker identity holding nothing.
    pub(super) fn new() -> Self {
        Self {
            worker_id: uuid::Uuid::new_v4().simple().to_string(),
            ids: Arc::default(),
        }
    }

    /// This worker's id (one subject token).
    pub(super) fn worker_id(&self) -> &str {
        &self.worker_id
    }

    /// The command `id` was accepted.
    pub(super) fn hold(&self, id: &str) {
        *self.ids.entry(id.to_owned()).or_insert(0) += 1;
    }

    /// The command `id` has published its terminal result (or was dropped).
    pub(super) fn release(&self, id: &str) {
        self.ids.remove_if_mut(id, |_, count| {
            *count = count.saturating_sub(1);
            *count == 0
        });
    }

    /// Whether `id` is held.
    pub(super) fn has(&self, id: &str) -> bool {
        self.ids.contains_key(id)
    }

    /// Answers every request on `cmdr.alive.<worker_id>` until the subscription ends.
    pub(super) async fn answer(self, mut requests: Subscriber, client: Client) {
        while let Some(request) = requests.next().await {
            let Some(reply) = request.reply else {
                continue;
            };
            let command_id = String::from_utf8_lossy(&request.payload).into_owned();
            let answer = Alive {
                running: self.has(&command_id),
                command_id,
            };
            let Ok(body) = serde_json::to_vec(&answer) else {
                continue;
            };
            if let Err(e) = client.publish(reply, body.into()).await {
                tracing::warn!("answering a liveness check: {e}");
            }
        }
    }
}

/// Producer side: checks every [`CHECK_EVERY`] that `worker` still has `command_id`;
/// resolves once it is lost. Stops when the receiver is dropped.
pub(super) fn watch(client: Client, worker: String, command_id: String) -> oneshot::Receiver<Lost> {
    let (mut tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        tokio::select! {
            lost = until_lost(&client, &worker, &command_id) => { let _ = tx.send(lost); }
            () = tx.closed() => {}
        }
    });
    rx
}

/// What one check learned.
enum Answer {
    /// The worker still has the command.
    Running,
    /// A definite miss.
    Missing(Lost),
    /// Nobody can tell now (no connection, a timeout, a garbled answer).
    Unknown,
}

async fn until_lost(client: &Client, worker: &str, command_id: &str) -> Lost {
    let subject = subjects::alive(worker);
    let mut misses = 0;
    loop {
        tokio::time::sleep(CHECK_EVERY).await;
        match ask(client, &subject, command_id).await {
            Answer::Running => misses = 0,
            Answer::Unknown => {}
            Answer::Missing(lost) => {
                misses += 1;
                if misses >= MISSES_BEFORE_LOST {
                    return lost;
                }
            }
        }
    }
}

async fn ask(client: &Client, subject: &str, command_id: &str) -> Answer {
    let request = Request::new()
        .payload(command_id.to_owned().into())
        .timeout(Some(CHECK_EVERY));
    match client.send_request(subject.to_owned(), request).await {
        Ok(reply) => match serde_json::from_slice::<Alive>(&reply.payload) {
            Ok(alive) if alive.running => Answer::Running,
            Ok(_) => Answer::Missing(Lost::Forgotten(subject.to_owned())),
            Err(_) => Answer::Unknown,
        },
        Err(e) if e.kind() == RequestErrorKind::NoResponders => {
            Answer::Missing(Lost::WorkerGone(subject.to_owned()))
        }
        Err(_) => Answer::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holding_counts_duplicates() {
        let holding = Holding::new();
        holding.hold("a");
        holding.hold("a");
        holding.release("a");
        assert!(holding.has("a"), "the first is still held");
        holding.release("a");
        assert!(!holding.has("a"));
        holding.release("never-held");
        assert!(!holding.has("never-held"));
        assert!(subjects::is_valid_id(holding.worker_id()));
    }
}
