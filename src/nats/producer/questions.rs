//! Questions of `REQUEST_USER_INPUT` commands run on the workers: asked of the producer
//! on `cmdr.input.<producer>.<command_id>`, answered by its input broker or by
//! [`Producer::answer_input`].

use async_nats::{Client, Subject};
use cmdr_executors::InputRequest;

use super::error::{nats_error, ProducerError};
use super::Producer;
use crate::nats::wire::{InputAnswer, InputQuestion};

impl Producer {
    /// Answers the question of `command_id`.
    pub async fn answer_input(&self, command_id: &str, value: String) -> Result<(), ProducerError> {
        let (_, reply) = self
            .inner
            .questions
            .remove(command_id)
            .ok_or_else(|| ProducerError::NotWaiting(command_id.to_owned()))?;
        answer(&self.inner.client, reply, value).await
    }

    /// Records a question; with a broker, asks it and answers in the background.
    pub(super) fn take_question(&self, command_id: &str, message: async_nats::Message) {
        let (Some(reply), Ok(question)) = (
            message.reply,
            serde_json::from_slice::<InputQuestion>(&message.payload),
        ) else {
            tracing::warn!(command_id, "ignored a malformed input question");
            return;
        };
        let Some(broker) = self.inner.broker.clone() else {
            self.inner.questions.insert(command_id.to_owned(), reply);
            return;
        };
        let client = self.inner.client.clone();
        tokio::spawn(async move {
            let request = InputRequest {
                command_id: question.command_id,
                prompt: question.prompt,
                description: question.description,
            };
            match broker.request(request).await {
                Ok(value) => {
                    if let Err(e) = answer(&client, reply, value).await {
                        tracing::warn!("answering a question: {e}");
                    }
                }
                // No answer: the worker's command times out or is cancelled.
                Err(e) => tracing::warn!("no answer to a question: {e}"),
            }
        });
    }
}

/// Sends `value` as the answer on `reply`.
async fn answer(client: &Client, reply: Subject, value: String) -> Result<(), ProducerError> {
    let body = serde_json::to_vec(&InputAnswer { value }).map_err(nats_error)?;
    client
        .publish(reply, body.into())
        .await
        .map_err(nats_error)?;
    client.flush().await.map_err(nats_error)
}
