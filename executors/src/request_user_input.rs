//! `REQUEST_USER_INPUT`: ask a person through the [`InputBroker`] and wait.
//!
//! A real suspension point: the command stays in flight until the broker answers, the
//! command's `timeout_ms` passes, or it is cancelled. While waiting it sends one
//! `RUNNING` message whose `message` carries the prompt, so stream readers can show it.
//! The answer is the terminal `resultData`.

use std::sync::Arc;

use crate::error::ExecError;
use crate::executor::{ExecContext, ExecFuture, Executor};
use crate::input::{InputBroker, InputError, InputRequest};
use crate::outcome::Outcome;
use crate::protocol::{Command, RequestUserInputCommand};

/// The `REQUEST_USER_INPUT` executor.
#[derive(Clone)]
pub struct RequestUserInput {
    broker: Arc<dyn InputBroker>,
}

impl RequestUserInput {
    /// Asks through `broker`.
    pub fn new(broker: Arc<dyn InputBroker>) -> Self {
        Self { broker }
    }
}

impl Executor for RequestUserInput {
    fn execute(&self, command: Command, ctx: ExecContext) -> ExecFuture<'_> {
        Box::pin(async move {
            let cmd = RequestUserInputCommand::try_from(command)?;
            let waiting = format!("Waiting for user input: {}", cmd.prompt);
            let request = InputRequest {
                command_id: ctx.command_id.clone(),
                prompt: cmd.prompt,
                description: cmd.description,
            };
            // Asked before the prompt is shown, so an answer sent on seeing it finds the
            // question (`PendingInputs` registers it when `request` is called).
            let asking = self.broker.request(request);
            ctx.output.send(&waiting, String::new()).await?;
            let answer = tokio::select! {
                answer = asking => answer,
                _ = ctx.cancel.cancelled() => return Err(ExecError::Cancelled),
            };
            match answer {
                Ok(value) => Ok(Outcome::succeeded("User provided input.").with_data(value)),
                Err(InputError::Unavailable(why)) => Err(ExecError::InputUnavailable(why)),
            }
        })
    }
}
