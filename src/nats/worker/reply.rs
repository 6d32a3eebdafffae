//! Deferred replies (core mode): a producer whose command request carries
//! [`REPLY_HEADER`]` = `[`REPLY_RESULT`] takes
//! the command's **terminal result** as the reply: for a command that ends at once with
//! one result (a no-op, a quick file read) that is two messages per command (request,
//! reply), as for a bare request/reply, instead of three
//! ([`Accepted`], then the result on the results subject). The reply carries no headers
//! (parsing them costs async-nats more than the message saved): a result is told from an
//! [`Accepted`] by its `status`.
//!
//! A command's reply is taken once ([`Reply::take`]), by whichever comes first:
//!
//! - the command's first result (`publish`): a terminal that fits one message is sent as
//!   the reply; anything else (output, a note, an oversized terminal) first gets an
//!   [`Accepted`] naming the worker — which the producer's liveness checks need, the
//!   command going on — and then goes to the results subject;
//! - [`REPLY_WAIT`] after the command arrived ([`Deadlines`], one task per worker): a
//!   command that waits for a job or produces nothing for that long is answered with an
//!   [`Accepted`] as before, well inside the producer's 5 s reply timeout;
//! - the end of the command without any result sent (an undecodable command): an
//!   [`Accepted`].
//!
//! Busy refusals are answered at once, with [`Accepted`]`{busy}`, whatever the request asks.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_nats::{Client, Subject};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::nats::wire::{Accepted, REPLY_HEADER, REPLY_RESULT};

/// How long a worker may hold a command's reply back, waiting for its first result: long
/// enough for a quick command (a no-op, a file read, `true`: well under a millisecond or
/// two, and ~3 ms queued behind 256 others in the throughput bench) to answer in the
/// reply; short enough that a producer submitting silent commands one after another waits
/// little for each (it was 200 ms).
pub(super) const REPLY_WAIT: Duration = Duration::from_millis(20);

/// The reply owed to one command request.
#[derive(Debug)]
pub(super) struct Reply {
    subject: Subject,
    command_id: String,
    worker: Arc<str>,
    taken: AtomicBool,
}

impl Reply {
    /// Whether this caller gets to send the reply (`true` once, to the first caller).
    pub(super) fn take(&self) -> bool {
        !self.taken.swap(true, Ordering::AcqRel)
    }

    /// Whether the reply was sent (or is being sent).
    fn is_taken(&self) -> bool {
        self.taken.load(Ordering::Acquire)
    }

    /// Sends `payload`, one encoded terminal result, as the reply (after [`Reply::take`]).
    pub(super) async fn send_result(
        &self,
        client: &Client,
        payload: Vec<u8>,
    ) -> Result<(), String> {
        client
            .publish(self.subject.clone(), payload.into())
            .await
            .map_err(|e| e.to_string())
    }

    /// Sends a plain [`Accepted`] naming this worker (after [`Reply::take`]).
    pub(super) async fn send_accepted(&self, client: &Client) {
        let accepted = Accepted {
            command_id: self.command_id.clone(),
            worker: Some(self.worker.to_string()),
            busy: false,
        };
        let Ok(body) = serde_json::to_vec(&accepted) else {
            return;
        };
        if let Err(e) = client.publish(self.subject.clone(), body.into()).await {
            tracing::warn!("acknowledging a command: {e}");
        }
    }
}

/// Whether a command request takes its terminal result as the reply (it carries
/// [`REPLY_HEADER`]` = `[`REPLY_RESULT`]).
pub(super) fn wants_result(message: &async_nats::Message) -> bool {
    message
        .headers
        .as_ref()
        .and_then(|headers| headers.get(REPLY_HEADER))
        .is_some_and(|value| value.as_str() == REPLY_RESULT)
}

/// The deferred replies of a worker, in arrival order (so in deadline order), and the
/// task that answers those still untaken at their deadline.
#[derive(Debug)]
pub(super) struct Deadlines {
    worker: Arc<str>,
    due: Mutex<VecDeque<(Instant, Arc<Reply>)>>,
    /// Wakes the task when the first reply is deferred after it found none.
    first: Notify,
}

impl Deadlines {
    /// Nothing deferred yet, for worker `worker`.
    pub(super) fn new(worker: &str) -> Self {
        Self {
            worker: Arc::from(worker),
            due: Mutex::new(VecDeque::new()),
            first: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<(Instant, Arc<Reply>)>> {
        self.due.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Defers the reply to `subject` for command `command_id` by at most [`REPLY_WAIT`].
    pub(super) fn defer(&self, subject: Subject, command_id: String) -> Arc<Reply> {
        let reply = Arc::new(Reply {
            subject,
            command_id,
            worker: self.worker.clone(),
            taken: AtomicBool::new(false),
        });
        let mut due = self.lock();
        let was_empty = due.is_empty();
        due.push_back((Instant::now() + REPLY_WAIT, reply.clone()));
        drop(due);
        if was_empty {
            self.first.notify_one();
        }
        reply
    }

    /// Drops replies already taken from the front; the deadline of the first one left.
    fn next_deadline(&self) -> Option<Instant> {
        let mut due = self.lock();
        while due.front().is_some_and(|(_, reply)| reply.is_taken()) {
            due.pop_front();
        }
        due.front().map(|(at, _)| *at)
    }

    /// Removes and returns the replies due by `now`.
    fn take_due(&self, now: Instant) -> Vec<Arc<Reply>> {
        let mut due = self.lock();
        let count = due.iter().take_while(|(at, _)| *at <= now).count();
        due.drain(..count).map(|(_, reply)| reply).collect()
    }

    /// Answers every deferred reply still untaken at its deadline with [`Accepted`], for
    /// ever (the task is aborted with the worker).
    pub(super) async fn answer_late(self: Arc<Self>, client: Client) {
        loop {
            let Some(at) = self.next_deadline() else {
                self.first.notified().await;
                continue;
            };
            tokio::time::sleep_until(at).await;
            for reply in self.take_due(Instant::now()) {
                if reply.take() {
                    reply.send_accepted(&client).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_taken_once_and_taken_ones_are_skipped() {
        let deadlines = Deadlines::new("w1");
        let first = deadlines.defer(Subject::from("_INBOX.a"), "a".to_owned());
        let second = deadlines.defer(Subject::from("_INBOX.b"), "b".to_owned());
        assert!(first.take(), "the first caller takes it");
        assert!(!first.take(), "and only the first");
        let at = deadlines.next_deadline();
        assert!(at.is_some(), "the second is still owed");
        let due = deadlines.take_due(Instant::now() + REPLY_WAIT);
        assert_eq!(due.len(), 1);
        assert!(Arc::ptr_eq(&due[0], &second));
        assert_eq!(deadlines.next_deadline(), None);
    }
}
