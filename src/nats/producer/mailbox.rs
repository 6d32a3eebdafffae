//! [`Mailbox`]: what the demultiplexer (`demux`) has received for one command and its
//! stream has not read yet — its result payloads, in order, and its questions.
//!
//! Pushing never waits: the demultiplexer serves every command of the producer from one
//! subscription, so one command's slow (or abandoned) reader must not hold up the others.
//! Instead a mailbox holds at most `limit` bytes unread (a message is always taken when the
//! mailbox is empty, whatever its size); the message that would pass the limit *overflows*
//! the mailbox: it and everything after it are dropped, and the stream, once it has read
//! what was kept, ends with `RESULTS_LOST` and cancels the command.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use async_nats::Message;
use bytes::Bytes;

/// Bytes counted for a message besides its payload (so empty messages are bounded too).
pub(super) const MESSAGE_OVERHEAD: usize = 64;

/// What a stream reads from its mailbox, after what was kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// The reader fell behind: more than this many bytes were waiting unread.
    Overflowed(usize),
    /// The producer's subscription ended (the connection closed for good).
    Closed,
}

/// What a stream reads from its mailbox.
#[derive(Debug)]
pub(super) enum Delivery {
    /// A question of the command (`REQUEST_USER_INPUT`), with its reply subject.
    Question(Message),
    /// One result message's payload.
    Result(Bytes),
    /// Nothing more will come.
    End(End),
}

/// One command's unread results and questions.
#[derive(Debug)]
pub(super) struct Mailbox {
    state: Mutex<State>,
    /// Whether results are delivered here (core mode), or only questions (durable mode
    /// reads results from JetStream).
    takes_results: bool,
}

#[derive(Debug)]
struct State {
    results: VecDeque<Bytes>,
    questions: VecDeque<Message>,
    bytes: usize,
    limit: usize,
    end: Option<End>,
    waker: Option<Waker>,
}

impl Mailbox {
    /// An empty mailbox holding at most `limit` unread bytes.
    pub(super) fn new(limit: usize, takes_results: bool) -> Self {
        Self {
            state: Mutex::new(State {
                results: VecDeque::new(),
                questions: VecDeque::new(),
                bytes: 0,
                limit,
                end: None,
                waker: None,
            }),
            takes_results,
        }
    }

    /// Whether results are delivered here.
    pub(super) fn takes_results(&self) -> bool {
        self.takes_results
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a result payload; `false` when the mailbox is (now) closed to new messages.
    pub(super) fn push_result(&self, payload: Bytes) -> bool {
        let size = payload.len() + MESSAGE_OVERHEAD;
        self.push(size, |state| state.results.push_back(payload))
    }

    /// Queues a question; `false` when the mailbox is (now) closed to new messages.
    pub(super) fn push_question(&self, question: Message) -> bool {
        let size = question.payload.len() + MESSAGE_OVERHEAD;
        self.push(size, |state| state.questions.push_back(question))
    }

    fn push(&self, size: usize, queue: impl FnOnce(&mut State)) -> bool {
        let mut state = self.lock();
        if state.end.is_some() {
            return false;
        }
        let fits = state.bytes == 0 || state.bytes.saturating_add(size) <= state.limit;
        if fits {
            state.bytes += size;
            queue(&mut state);
        } else {
            state.end = Some(End::Overflowed(state.limit));
        }
        let waker = state.waker.take();
        drop(state);
        if let Some(waker) = waker {
            waker.wake();
        }
        fits
    }

    /// No more messages will come (the subscription ended).
    pub(super) fn close(&self) {
        let mut state = self.lock();
        state.end.get_or_insert(End::Closed);
        let waker = state.waker.take();
        drop(state);
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The next thing to read: a waiting question first, else the next result payload in
    /// order, else — once they are all read — how the mailbox ended. Pending (woken by the
    /// next push or the end) while there is none.
    pub(super) fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Delivery> {
        let mut state = self.lock();
        if let Some(question) = state.questions.pop_front() {
            state.bytes = state
                .bytes
                .saturating_sub(question.payload.len() + MESSAGE_OVERHEAD);
            return Poll::Ready(Delivery::Question(question));
        }
        if let Some(payload) = state.results.pop_front() {
            state.bytes = state.bytes.saturating_sub(payload.len() + MESSAGE_OVERHEAD);
            return Poll::Ready(Delivery::Result(payload));
        }
        if let Some(end) = state.end {
            return Poll::Ready(Delivery::End(end));
        }
        match &mut state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn payload(len: usize) -> Bytes {
        Bytes::from(vec![b'x'; len])
    }

    /// The next result or end (questions are not pushed in these tests).
    fn next(mailbox: &Mailbox) -> Poll<Result<Bytes, End>> {
        match mailbox.poll_next(&mut Context::from_waker(Waker::noop())) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Delivery::Result(payload)) => Poll::Ready(Ok(payload)),
            Poll::Ready(Delivery::End(end)) => Poll::Ready(Err(end)),
            Poll::Ready(Delivery::Question(_)) => panic!("no question was asked"),
        }
    }

    #[test]
    fn results_come_out_in_order() {
        let mailbox = Mailbox::new(1 << 20, true);
        for len in 1..=3 {
            assert!(mailbox.push_result(payload(len)));
        }
        for len in 1..=3 {
            assert_eq!(next(&mailbox), Poll::Ready(Ok(payload(len))));
        }
        assert_eq!(next(&mailbox), Poll::Pending);
        mailbox.close();
        assert_eq!(next(&mailbox), Poll::Ready(Err(End::Closed)));
    }

    #[test]
    fn a_reader_too_far_behind_overflows_after_what_was_kept() {
        let mailbox = Mailbox::new(1_000, true);
        // Always taken when empty, even past the limit.
        assert!(mailbox.push_result(payload(5_000)));
        assert!(!mailbox.push_result(payload(1)), "over the limit");
        assert!(
            !mailbox.push_result(payload(1)),
            "closed after the overflow"
        );
        assert_eq!(next(&mailbox), Poll::Ready(Ok(payload(5_000))));
        assert_eq!(next(&mailbox), Poll::Ready(Err(End::Overflowed(1_000))));
    }

    #[test]
    fn reading_makes_room_again() {
        let mailbox = Mailbox::new(2 * (100 + MESSAGE_OVERHEAD), true);
        assert!(mailbox.push_result(payload(100)));
        assert!(mailbox.push_result(payload(100)));
        assert!(matches!(next(&mailbox), Poll::Ready(Ok(_))));
        assert!(mailbox.push_result(payload(100)), "one read, one more fits");
        assert!(matches!(next(&mailbox), Poll::Ready(Ok(_))));
        assert!(matches!(next(&mailbox), Poll::Ready(Ok(_))));
        assert_eq!(next(&mailbox), Poll::Pending);
    }
}
