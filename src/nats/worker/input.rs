//! [`NatsInput`]: a worker's `REQUEST_USER_INPUT` asks the command's producer over
//! `cmdr.input.<producer>.<command_id>` (request/reply; the command runs under its scoped
//! id `<producer>.<command_id>`) and waits for its [`InputAnswer`].
//!
//! No responder (the producer is gone or never listened) fails at once with
//! `INPUT_UNAVAILABLE`; otherwise the wait is bounded by the command's own `timeout_ms`
//! and cancellation, enforced by the runtime.

use async_nats::{Client, Request, RequestErrorKind};
use cmdr_executors::{InputBroker, InputError, InputFuture, InputRequest};

use crate::nats::subjects;
use crate::nats::wire::{InputAnswer, InputQuestion};

/// The NATS input broker used by `cmdr worker`.
#[derive(Debug, Clone)]
pub struct NatsInput {
    client: Client,
}

impl NatsInput {
    /// Asks over `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl InputBroker for NatsInput {
    fn request(&self, request: InputRequest) -> InputFuture<'_> {
        Box::pin(async move {
            let Some((producer, id)) = subjects::unscoped(&request.command_id) else {
                return Err(InputError::Unavailable(format!(
                    "command '{}' has no producer to ask",
                    request.command_id
                )));
            };
            let subject = subjects::input(producer, id);
            let question = InputQuestion {
                command_id: id.to_owned(),
                prompt: request.prompt,
                description: request.description,
            };
            let payload = serde_json::to_vec(&question)
                .map_err(|e| InputError::Unavailable(format!("encoding the question: {e}")))?;
            let ask = Request::new().payload(payload.into()).timeout(None);
            let reply = self.client.send_request(subject.clone(), ask).await;
            let message = reply.map_err(|e| {
                InputError::Unavailable(match e.kind() {
                    RequestErrorKind::NoResponders => {
                        format!("no producer is listening on {subject}")
                    }
                    _ => format!("asking on {subject}: {e}"),
                })
            })?;
            serde_json::from_slice::<InputAnswer>(&message.payload)
                .map(|answer| answer.value)
                .map_err(|e| InputError::Unavailable(format!("malformed answer on {subject}: {e}")))
        })
    }
}
