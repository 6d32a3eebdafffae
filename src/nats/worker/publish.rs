//! Publishing a command's results on `cmdr.results.<producer>.<command_id>`: in order, split to fit
//! the server's `max_payload`, and — in durable mode — the terminal result confirmed
//! stored in `CMDR_RESULTS` before the command is acknowledged.

use std::time::Duration;

use async_nats::jetstream;
use async_nats::Client;
use cmdr_executors::ErrorCode;
use cmdr_executors::{OutputResult, ResultStream};

use crate::nats::chunk;
use crate::nats::subjects;

/// Attempts to store a terminal result (the server may be restarting).
const TERMINAL_ATTEMPTS: u32 = 10;
/// Pause between those attempts.
const TERMINAL_RETRY: Duration = Duration::from_millis(500);

/// How publishing a command's stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Published {
    /// Every message is out (durable: the terminal is stored).
    Complete,
    /// Durable mode: the command was stopped by this worker's shutdown; its terminal was
    /// withheld so that the command is redelivered to another worker.
    Redeliver,
    /// Publishing failed; the command was stopped.
    Failed,
}

/// Publishes result streams.
#[derive(Clone)]
pub(super) struct Publisher {
    client: Client,
    durable: Option<jetstream::Context>,
}

impl Publisher {
    /// Core mode: plain publishes.
    pub(super) fn core(client: Client) -> Self {
        Self {
            client,
            durable: None,
        }
    }

    /// Durable mode: the terminal result is published through JetStream and confirmed.
    pub(super) fn durable(client: Client, js: jetstream::Context) -> Self {
        Self {
            client,
            durable: Some(js),
        }
    }

    /// Publishes every message of `stream`, in order. If publishing fails, the stream is
    /// dropped, which stops the command.
    pub(super) async fn publish_all(&self, mut stream: ResultStream) -> Published {
        let scoped = stream.command_id().to_owned();
        let Some((producer, id)) = subjects::unscoped(&scoped) else {
            tracing::warn!(command_id = %scoped, "a command without a producer: results dropped");
            return Published::Failed;
        };
        let subject = subjects::results(producer, id);
        while let Some(mut result) = stream.next().await {
            // The producer knows the command by its own id.
            id.clone_into(&mut result.command_id);
            if self.durable.is_some()
                && result.error_code.as_deref() == Some(ErrorCode::ShuttingDown.as_str())
            {
                return Published::Redeliver;
            }
            if let Err(e) = self.publish(&subject, &result).await {
                tracing::warn!(%subject, "publishing a result failed, stopping the command: {e}");
                return Published::Failed;
            }
        }
        Published::Complete
    }

    /// Publishes one result of the command with this scoped id (its `command_id`), outside
    /// its stream (a note of a redelivery or a hand-back).
    pub(super) async fn publish_note(&self, mut result: OutputResult) -> Result<(), String> {
        let scoped = std::mem::take(&mut result.command_id);
        let (producer, id) = subjects::unscoped(&scoped)
            .ok_or_else(|| format!("command '{scoped}' names no producer"))?;
        let subject = subjects::results(producer, id);
        id.clone_into(&mut result.command_id);
        self.publish(&subject, &result).await
    }

    /// Publishes one result (in as many parts as `max_payload` needs).
    pub(super) async fn publish(&self, subject: &str, result: &OutputResult) -> Result<(), String> {
        let max_payload = self.client.server_info().max_payload.max(64 * 1024);
        let parts = chunk::encode(result, max_payload).map_err(|e| e.to_string())?;
        let last = parts.len().saturating_sub(1);
        for (i, part) in parts.into_iter().enumerate() {
            match &self.durable {
                Some(js) if i == last && result.status.is_terminal() => {
                    store(js, subject, part).await?;
                }
                _ => self
                    .client
                    .publish(subject.to_owned(), part.into())
                    .await
                    .map_err(|e| e.to_string())?,
            }
        }
        Ok(())
    }
}

/// Publishes through JetStream and waits for the stream's acknowledgement, retrying
/// while the server is unreachable.
async fn store(js: &jetstream::Context, subject: &str, payload: Vec<u8>) -> Result<(), String> {
    let payload = bytes::Bytes::from(payload);
    let mut last_error = String::new();
    for _ in 0..TERMINAL_ATTEMPTS {
        let sent = js.publish(subject.to_owned(), payload.clone()).await;
        match sent {
            Ok(ack) => match ack.await {
                Ok(_) => return Ok(()),
                Err(e) => last_error = e.to_string(),
            },
            Err(e) => last_error = e.to_string(),
        }
        tokio::time::sleep(TERMINAL_RETRY).await;
    }
    Err(format!("the terminal result was not stored: {last_error}"))
}
