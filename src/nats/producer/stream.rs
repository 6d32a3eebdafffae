//! [`RemoteStream`]: the results of one remote command, in order, ending after the
//! terminal one, wherever they come from (the demultiplexer, a durable follower, a
//! merged list); dropping it before its end cancels the command. [`SubmitStream`]: a
//! remote stream, or one ready failure.

use std::pin::Pin;
use std::task::{Context, Poll};

use std::future::Future;

use async_nats::Subscriber;
use cmdr_executors::OutputResult;
use futures_core::Stream;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::demux::Registration;
use super::error::{rejected, ProducerError};
use super::follow::Followed;
use super::liveness::{Lost, Watch};
use super::mailbox::{Delivery, End};
use super::route::Target;
use super::Producer;

/// The results of one remote command, in order, ending after the terminal one.
pub struct RemoteStream {
    pub(super) command_id: String,
    pub(super) command_type: String,
    pub(super) results: Results,
    /// The command's place in the demultiplexer: its questions, and in core mode its
    /// results (none for a merged `PROCESS_LIST`).
    pub(super) inbox: Option<Registration>,
    pub(super) producer: Producer,
    /// Core mode: resolves if the worker running the command is lost.
    pub(super) watch: Option<Watch>,
    /// The worker holding the command's process or session (routed commands).
    pub(super) target: Option<Target>,
    /// The command's terminal result, when the worker's reply was that result, until
    /// yielded (boxed: a stream is moved several times, a result is large).
    pub(super) first: Option<Box<OutputResult>>,
    pub(super) done: bool,
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
pub(super) enum Results {
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
