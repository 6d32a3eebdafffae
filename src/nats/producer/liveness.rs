//! Core mode: noticing that the worker running a command is gone, so that its producer
//! still gets exactly one terminal result.
//!
//! Core NATS delivers a command to one worker, at most once; if that worker dies
//! (SIGKILL) nothing else will ever publish on `cmdr.results.<id>`. So every core worker
//! has an id (in its [`Accepted`](crate::nats::wire::Accepted) reply) and answers requests on
//! `cmdr.alive.<worker_id>.<producer>` with whether it still holds a command (`Holding`, worker side: from the
//! moment it accepted it until its terminal result is published). A producer waiting on
//! a command asks every [`CHECK_EVERY`] ([`watch`]); [`MISSES_BEFORE_LOST`] definite
//! misses in a row — nobody subscribes to the worker's subject any more (the server
//! dropped its connection), or the worker no longer has the command — end the stream
//! with `WORKER_LOST` or `RESULTS_LOST`. A check that cannot be answered (the connection
//! is down, the server restarting) is not a miss: a worker is not declared lost while
//! nobody can tell. Several misses are required because, after a server restart, the
//! producer may reconnect a moment before the worker has re-subscribed.
//!
//! One [`Monitor`] task per producer asks about every command it waits on, all at once,
//! every [`CHECK_EVERY`] (a command's first check comes within [`CHECK_EVERY`] of its
//! acceptance): watching a command is an entry in a table, not a task and a timer of its
//! own (that was ~8 % of the bus's CPU with 256 commands in flight, `BENCHMARKS.md`, N2).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use async_nats::{Client, Request, RequestErrorKind};
use dashmap::DashMap;
use tokio::sync::oneshot;
use tokio_util::sync::{CancellationToken, DropGuard};

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

/// A command being watched.
struct Watched {
    /// `cmdr.alive.<worker>.<producer>`.
    subject: String,
    /// The command's scoped id (what the worker holds).
    command_id: String,
    /// Definite misses in a row.
    misses: u32,
    verdict: oneshot::Sender<Lost>,
}

/// The commands a producer waits on, by watch number.
type Table = DashMap<u64, Watched>;

/// Producer side: one task checking every watched command every [`CHECK_EVERY`]; started
/// on the first watch, stopped with the producer (its last clone).
pub(super) struct Monitor {
    client: Client,
    table: Arc<Table>,
    next: AtomicU64,
    started: OnceLock<()>,
    stop: CancellationToken,
    _stop_on_drop: DropGuard,
}

impl Monitor {
    /// Nothing watched yet.
    pub(super) fn new(client: Client) -> Self {
        let stop = CancellationToken::new();
        Self {
            client,
            table: Arc::default(),
            next: AtomicU64::new(0),
            started: OnceLock::new(),
            _stop_on_drop: stop.clone().drop_guard(),
            stop,
        }
    }

    /// Checks that `worker` still has `command_id` until the returned [`Watch`] resolves
    /// (the command is lost) or is dropped.
    pub(super) fn watch(&self, worker: &str, producer: &str, command_id: String) -> Watch {
        self.started.get_or_init(|| {
            let (client, table, stop) =
                (self.client.clone(), self.table.clone(), self.stop.clone());
            tokio::spawn(async move {
                tokio::select! {
                    () = check_all(&client, &table) => {}
                    () = stop.cancelled() => {}
                }
            });
        });
        let (verdict, rx) = oneshot::channel();
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let watched = Watched {
            subject: subjects::alive(worker, producer),
            command_id,
            misses: 0,
            verdict,
        };
        self.table.insert(key, watched);
        Watch {
            rx,
            key,
            table: self.table.clone(),
        }
    }
}

/// Resolves once the watched command is lost; stops watching it when dropped.
pub(super) struct Watch {
    rx: oneshot::Receiver<Lost>,
    key: u64,
    table: Arc<Table>,
}

impl Future for Watch {
    type Output = Result<Lost, oneshot::error::RecvError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx).poll(cx)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.table.remove(&self.key);
    }
}

/// Every [`CHECK_EVERY`], asks about every watched command at once and gives up those
/// missed [`MISSES_BEFORE_LOST`] times in a row.
async fn check_all(client: &Client, table: &Table) {
    let mut ticks = tokio::time::interval(CHECK_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let due: Vec<(u64, String, String)> = table
            .iter()
            .map(|w| (*w.key(), w.subject.clone(), w.command_id.clone()))
            .collect();
        let asked = due
            .iter()
            .map(|(_, subject, command_id)| ask(client, subject, command_id));
        let answers = futures_util::future::join_all(asked).await;
        for ((key, _, _), answer) in due.into_iter().zip(answers) {
            record(table, key, answer);
        }
    }
}

/// Counts a check's answer for watch `key` (if still watched); sends the verdict when lost.
fn record(table: &Table, key: u64, answer: Answer) {
    let lost = match answer {
        Answer::Unknown => return,
        Answer::Running => {
            if let Some(mut watched) = table.get_mut(&key) {
                watched.misses = 0;
            }
            return;
        }
        Answer::Missing(lost) => lost,
    };
    let given_up = table.remove_if_mut(&key, |_, watched| {
        watched.misses += 1;
        watched.misses >= MISSES_BEFORE_LOST
    });
    if let Some((_, watched)) = given_up {
        let _ = watched.verdict.send(lost);
    }
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
