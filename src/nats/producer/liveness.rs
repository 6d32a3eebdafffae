//! Core mode: noticing that the worker running a command is gone, so that its producer
//! still gets exactly one terminal result.
//!
//! Core NATS delivers a command to one worker, at most once; if that worker dies
//! (SIGKILL) nothing else will ever publish on `cmdr.results.<id>`. So every core worker
//! has an id (in its [`Accepted`](crate::nats::wire::Accepted) reply) and answers requests on
//! `cmdr.alive.<worker_id>` with whether it still holds a command (`Holding`, worker side: from the
//! moment it accepted it until its terminal result is published). A producer waiting on
//! a command asks every [`CHECK_EVERY`] ([`watch`]); [`MISSES_BEFORE_LOST`] definite
//! misses in a row — nobody subscribes to the worker's subject any more (the server
//! dropped its connection), or the worker no longer has the command — end the stream
//! with `WORKER_LOST` or `RESULTS_LOST`. A check that cannot be answered (the connection
//! is down, the server restarting) is not a miss: a worker is not declared lost while
//! nobody can tell. Several misses are required because, after a server restart, the
//! producer may reconnect a moment before the worker has re-subscribed.

use std::time::Duration;

use async_nats::{Client, Request, RequestErrorKind};
use tokio::sync::oneshot;

use crate::nats::subjects;
use crate::nats::wire::Alive;

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
