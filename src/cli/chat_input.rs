//! [`ChatInput`]: how an `<ask>` question (a `REQUEST_USER_INPUT` of the agent) reaches
//! the person in `cmdr chat` — through the chat's own input, so a question takes the next
//! line typed at the terminal, or the next line of a piped script.
//!
//! The broker hands each question to the chat loop, which shows it, takes the next input
//! line and sends it back. No second reader competes for the terminal.

use cmdr_executors::{InputBroker, InputError, InputFuture, InputRequest};
use tokio::sync::{mpsc, oneshot};

/// A question waiting for the chat loop, and where its answer goes.
pub type Question = (InputRequest, oneshot::Sender<String>);

/// The chat's input broker (see the module docs).
#[derive(Debug, Clone)]
pub struct ChatInput {
    questions: mpsc::Sender<Question>,
}

impl ChatInput {
    /// A broker and the receiver the chat loop takes questions from.
    pub fn new() -> (Self, mpsc::Receiver<Question>) {
        let (questions, rx) = mpsc::channel(1);
        (Self { questions }, rx)
    }
}

impl InputBroker for ChatInput {
    fn request(&self, request: InputRequest) -> InputFuture<'_> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            let gone =
                || InputError::Unavailable("the chat's input ended: nobody can answer".to_owned());
            self.questions
                .send((request, reply))
                .await
                .map_err(|_| gone())?;
            answer.await.map_err(|_| gone())
        })
    }
}
