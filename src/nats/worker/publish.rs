//! Publishing a command's results on `cmdr.results.<producer>.<command_id>`: in order, split to fit
//! the server's `max_payload`, and — in durable mode — every message confirmed stored in
//! `CMDR_RESULTS` (retried under a message id unique to this run of the command, so a
//! retry is de-duplicated while a later run's output is not) before the next one is sent
//! and before the command is acknowledged: a terminal never arrives without its output.
//! Each stored result after a run's first names its predecessor's stream sequence
//! ([`RESULT_AFTER_HEADER`]), so a follower can tell when its consumer skipped one.

use std::time::Duration;

use async_nats::jetstream;
use async_nats::Client;
use cmdr_executors::ErrorCode;
use cmdr_executors::{OutputResult, ResultStream};

use super::reply::Reply;
use crate::nats::chunk;
use crate::nats::subjects;
use crate::nats::wire::RESULT_AFTER_HEADER;

/// Attempts to store a result (the server may be restarting, a cluster electing).
const TERMINAL_ATTEMPTS: u32 = 20;
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

    /// The connection results are published on.
    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    /// Publishes every message of `stream`, in order. If publishing fails, the stream is
    /// dropped, which stops the command.
    pub(super) async fn publish_all(&self, stream: ResultStream) -> Published {
        self.publish_replying(stream, None).await
    }

    /// [`Publisher::publish_all`], replying to the command request (`reply`, if still
    /// untaken) with the first result when that is a terminal fitting one message, else
    /// with [`Accepted`](crate::nats::wire::Accepted) before the first result is published.
    pub(super) async fn publish_replying(
        &self,
        mut stream: ResultStream,
        mut reply: Option<&Reply>,
    ) -> Published {
        let scoped = stream.command_id().to_owned();
        let Some((producer, id)) = subjects::unscoped(&scoped) else {
            tracing::warn!(command_id = %scoped, "a command without a producer: results dropped");
            return Published::Failed;
        };
        // Made when first needed: not at all when the reply carries the only result.
        let mut subject = None;
        // Durable mode: message ids of this run's results, `<run>.<n>`.
        let run = self
            .durable
            .is_some()
            .then(|| uuid::Uuid::new_v4().simple().to_string());
        let mut sent = 0u64;
        // Durable mode: the stream sequence of this run's last stored result.
        let mut previous = None;
        while let Some(mut result) = stream.next().await {
            // The producer knows the command by its own id.
            id.clone_into(&mut result.command_id);
            if self.durable.is_some()
                && result.error_code.as_deref() == Some(ErrorCode::ShuttingDown.as_str())
            {
                return Published::Redeliver;
            }
            if let Some(reply) = reply.take().filter(|reply| reply.take()) {
                match self.reply_with(reply, &result).await {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(command_id = %scoped, "replying with a result failed, stopping the command: {e}");
                        return Published::Failed;
                    }
                }
            }
            sent += 1;
            let msg_id = run.as_ref().map(|run| format!("{run}.{sent}"));
            let subject = subject.get_or_insert_with(|| subjects::results(producer, id));
            let published = self
                .publish_as(subject, &result, msg_id.as_deref(), &mut previous)
                .await;
            if let Err(e) = published {
                tracing::warn!(%subject, "publishing a result failed, stopping the command: {e}");
                return Published::Failed;
            }
        }
        Published::Complete
    }

    /// Sends `result` as the command's `reply` (already taken) if it is a terminal that
    /// fits one message (`true`); else replies [`Accepted`](crate::nats::wire::Accepted)
    /// (`false`: the result is still to be published).
    async fn reply_with(&self, reply: &Reply, result: &OutputResult) -> Result<bool, String> {
        if result.status.is_terminal() {
            let max_payload = self.client.max_payload().max(64 * 1024);
            // Encoded whole: one that needs splitting is published in parts, as below.
            let whole = serde_json::to_vec(result).map_err(|e| e.to_string())?;
            if whole.len() <= max_payload {
                return reply.send_result(&self.client, whole).await.map(|()| true);
            }
        }
        reply.send_accepted(&self.client).await;
        Ok(false)
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
        let once = uuid::Uuid::new_v4().simple().to_string();
        self.publish_as(subject, result, Some(&once), &mut None)
            .await
    }

    /// Publishes one result; in durable mode each part is stored under `msg_id.<part>`,
    /// naming the stream sequence of the part stored before it (`previous`, then updated).
    async fn publish_as(
        &self,
        subject: &str,
        result: &OutputResult,
        msg_id: Option<&str>,
        previous: &mut Option<u64>,
    ) -> Result<(), String> {
        let max_payload = self.client.max_payload().max(64 * 1024);
        let parts = chunk::encode(result, max_payload).map_err(|e| e.to_string())?;
        for (i, part) in parts.into_iter().enumerate() {
            match (&self.durable, msg_id) {
                (Some(js), Some(msg_id)) => {
                    let id = format!("{msg_id}.{i}");
                    *previous = Some(store(js, subject, part, &id, *previous).await?);
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

/// Publishes through JetStream under `msg_id` (naming the `previous` result's stream
/// sequence) and waits for the stream's acknowledgement, retrying (de-duplicated by the
/// id) while the server is unreachable. The stored message's stream sequence.
async fn store(
    js: &jetstream::Context,
    subject: &str,
    payload: Vec<u8>,
    msg_id: &str,
    previous: Option<u64>,
) -> Result<u64, String> {
    let payload = bytes::Bytes::from(payload);
    let mut last_error = String::new();
    for _ in 0..TERMINAL_ATTEMPTS {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, msg_id);
        if let Some(previous) = previous {
            headers.insert(RESULT_AFTER_HEADER, previous.to_string().as_str());
        }
        let sent = js
            .publish_with_headers(subject.to_owned(), headers, payload.clone())
            .await;
        match sent {
            Ok(ack) => match ack.await {
                Ok(ack) => return Ok(ack.sequence),
                Err(e) => last_error = e.to_string(),
            },
            Err(e) => last_error = e.to_string(),
        }
        tracing::debug!(%subject, %msg_id, "storing a result again: {last_error}");
        tokio::time::sleep(TERMINAL_RETRY).await;
    }
    Err(format!("the result was not stored: {last_error}"))
}
