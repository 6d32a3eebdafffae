//! The input broker: how a `REQUEST_USER_INPUT` reaches a person and gets an answer.
//!
//! The executor only knows the [`InputBroker`] trait. Transports implement it: the CLI on
//! the terminal, HTTP and NATS through [`PendingInputs`] or their own request/reply.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::oneshot;

/// A question waiting for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputRequest {
    /// The `REQUEST_USER_INPUT` command's id.
    pub command_id: String,
    /// What to ask.
    pub prompt: String,
    /// The command's description, if any.
    pub description: Option<String>,
}

/// Why no answer came.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// Nobody can be asked (no broker, no terminal, no producer listening …).
    #[error("{0}")]
    Unavailable(String),
}

/// The future a broker returns.
pub type InputFuture<'a> = Pin<Box<dyn Future<Output = Result<String, InputError>> + Send + 'a>>;

/// Asks a person and resolves with the answer. Dropping the future withdraws the question
/// (timeout or cancellation).
pub trait InputBroker: Send + Sync + 'static {
    /// Asks `request.prompt`.
    fn request(&self, request: InputRequest) -> InputFuture<'_>;
}

/// The default broker: there is nobody to ask.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoInputBroker;

impl InputBroker for NoInputBroker {
    fn request(&self, _request: InputRequest) -> InputFuture<'_> {
        Box::pin(async {
            Err(InputError::Unavailable(
                "no input broker is configured for this registry".to_owned(),
            ))
        })
    }
}

/// `answer` named a command that is not waiting for input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("command '{0}' is not waiting for input")]
pub struct NotWaiting(pub String);

/// An in-process broker: questions wait in a table until [`PendingInputs::answer`] is
/// called with their command id (e.g. from an HTTP handler).
#[derive(Debug, Clone, Default)]
pub struct PendingInputs {
    waiting: Arc<DashMap<String, Waiting>>,
}

#[derive(Debug)]
struct Waiting {
    request: InputRequest,
    reply: oneshot::Sender<String>,
}

impl PendingInputs {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The questions waiting now, in no particular order.
    pub fn pending(&self) -> Vec<InputRequest> {
        self.waiting.iter().map(|w| w.request.clone()).collect()
    }

    /// Answers the question of `command_id`.
    pub fn answer(&self, command_id: &str, value: String) -> Result<(), NotWaiting> {
        let (_, waiting) = self
            .waiting
            .remove(command_id)
            .ok_or_else(|| NotWaiting(command_id.to_owned()))?;
        waiting
            .reply
            .send(value)
            .map_err(|_| NotWaiting(command_id.to_owned()))
    }
}

/// Removes a question from the table when its future ends or is dropped.
struct Withdraw<'a> {
    table: &'a DashMap<String, Waiting>,
    command_id: String,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        self.table.remove(&self.command_id);
    }
}

impl InputBroker for PendingInputs {
    /// The question is in the table as soon as this returns (not only once the future is
    /// polled), so it can be answered the moment its prompt has been shown.
    fn request(&self, request: InputRequest) -> InputFuture<'_> {
        let (reply, answer) = oneshot::channel();
        let command_id = request.command_id.clone();
        self.waiting
            .insert(command_id.clone(), Waiting { request, reply });
        let withdraw = Withdraw {
            table: &self.waiting,
            command_id,
        };
        Box::pin(async move {
            let _withdraw = withdraw;
            answer
                .await
                .map_err(|_| InputError::Unavailable("the question was withdrawn".to_owned()))
        })
    }
}
