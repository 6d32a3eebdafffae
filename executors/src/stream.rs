//! [`ResultStream`]: the receiving end of one command.
//!
//! `RUNNING` messages arrive over a bounded channel (a slow reader makes the executor wait:
//! back-pressure, bounded memory); the terminal message arrives over a separate oneshot, so
//! the runtime never blocks on a slow reader to finish a command. The stream yields every
//! `RUNNING` message queued before the terminal, then the terminal, then ends. If the
//! terminal can never come (the runtime was torn down), it yields a `FAILED`
//! `EXECUTOR_LOST` message instead: a stream always ends with exactly one terminal.
//!
//! Dropping the stream before its terminal stops the command (`RECEIVER_GONE`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_core::Stream;
use tokio::sync::{mpsc, oneshot};

use crate::error::ExecError;
use crate::inflight::{StopReason, StopSignal};
use crate::protocol::{CommandType, OutputResult};
use crate::terminal::failed_result;

/// The results of one command: zero or more `RUNNING` messages, then one terminal.
#[derive(Debug)]
pub struct ResultStream {
    command_id: String,
    command_type: String,
    running: mpsc::Receiver<OutputResult>,
    terminal: Option<oneshot::Receiver<OutputResult>>,
    stop: Option<Arc<StopSignal>>,
    done: bool,
}

impl ResultStream {
    pub(crate) fn new(
        command_id: String,
        command_type: CommandType,
        running: mpsc::Receiver<OutputResult>,
        terminal: oneshot::Receiver<OutputResult>,
        stop: Arc<StopSignal>,
    ) -> Self {
        Self {
            command_id,
            command_type: command_type.as_str().to_owned(),
            running,
            terminal: Some(terminal),
            stop: Some(stop),
            done: false,
        }
    }

    /// A stream holding one ready terminal result (e.g. a rejected command).
    pub fn from_result(result: OutputResult) -> Self {
        let (_, running) = mpsc::channel(1);
        let (tx, terminal) = oneshot::channel();
        let stream = Self {
            command_id: result.command_id.clone(),
            command_type: result.command_type.clone(),
            running,
            terminal: Some(terminal),
            stop: None,
            done: false,
        };
        let _ = tx.send(result);
        stream
    }

    /// The command's id.
    pub fn command_id(&self) -> &str {
        &self.command_id
    }

    /// The command's type, as its results name it.
    pub fn command_type(&self) -> &str {
        &self.command_type
    }

    /// Asks the command to stop; its terminal result will say `CANCELLED`.
    pub fn cancel(&self) {
        if let Some(stop) = &self.stop {
            stop.stop(StopReason::Cancelled);
        }
    }

    /// The next message, or `None` after the terminal one.
    pub async fn next(&mut self) -> Option<OutputResult> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }

    fn finish(&mut self, result: OutputResult) -> Poll<Option<OutputResult>> {
        self.done = true;
        self.terminal = None;
        Poll::Ready(Some(result))
    }
}

impl Stream for ResultStream {
    type Item = OutputResult;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<OutputResult>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Poll::Ready(Some(msg)) = self.running.poll_recv(cx) {
            return Poll::Ready(Some(msg));
        }
        let Some(terminal) = self.terminal.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(terminal).poll(cx) {
            Poll::Ready(Ok(result)) => self.finish(result),
            Poll::Ready(Err(_)) => {
                let lost = failed_result(&self.command_id, &self.command_type, &ExecError::Lost);
                self.finish(lost)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for ResultStream {
    fn drop(&mut self) {
        if !self.done {
            if let Some(stop) = &self.stop {
                stop.stop(StopReason::ReceiverGone);
            }
        }
    }
}
