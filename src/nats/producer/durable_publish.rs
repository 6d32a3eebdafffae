//! Durable mode's publishing: an id claimed for one command (`CMDR_IDS`), then the
//! command stored in `CMDR_COMMANDS`, de-duplicated by a message id only its producer
//! knows, retried through leader elections (docs/nats.md, "Durable mode").

use std::time::Duration;

use async_nats::jetstream;

use super::error::{nats_error, ProducerError};
use super::scope_headers;
use crate::nats::durable::{hex, id_subject};

/// How long a durable publish is retried (leader elections take a few seconds).
const PUBLISH_PATIENCE: Duration = Duration::from_secs(30);

/// Durable mode: records which command `id` names (a SHA-256 of its JSON) with a fresh
/// secret, unless the id is already recorded: then the same command may go on (its
/// publish, under the recorded secret, is de-duplicated and its results replayed), a
/// different one is refused. Returns the secret its message id carries.
pub(super) async fn claim_id(
    js: &jetstream::Context,
    ids: &jetstream::stream::Stream,
    id: &str,
    payload: &[u8],
) -> Result<String, ProducerError> {
    let subject = id_subject(id);
    let hash = hex(ring::digest::digest(&ring::digest::SHA256, payload).as_ref());
    let secret = uuid::Uuid::new_v4().simple().to_string();
    let record = format!("{hash} {secret}");
    let mut headers = async_nats::HeaderMap::new();
    // Stored only if nothing is stored for this id yet (atomic on the server).
    headers.insert(async_nats::header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE, "0");
    let deadline = tokio::time::Instant::now() + PUBLISH_PATIENCE;
    let mut pause = Duration::from_millis(50);
    let published = loop {
        let attempt = async {
            js.publish_with_headers(subject.clone(), headers.clone(), record.clone().into())
                .await?
                .await
        };
        match attempt.await {
            Err(e)
                if e.kind() != jetstream::context::PublishErrorKind::WrongLastSequence
                    && tokio::time::Instant::now() + pause < deadline =>
            {
                tracing::info!(command_id = id, "recording the id again: {e}");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            other => break other,
        }
    };
    match published {
        Ok(_) => Ok(secret),
        Err(e) if e.kind() == jetstream::context::PublishErrorKind::WrongLastSequence => {
            let known = ids
                .get_last_raw_message_by_subject(&subject)
                .await
                .map_err(nats_error)?;
            let known = String::from_utf8_lossy(&known.payload);
            match known.split_once(' ') {
                Some((known_hash, secret)) if known_hash == hash => Ok(secret.to_owned()),
                _ => Err(ProducerError::IdConflict(id.to_owned())),
            }
        }
        Err(e) => Err(nats_error(e)),
    }
}

/// Durable mode: store the command, de-duplicated by its message id (`ids`: the scoped
/// command id, for the log, and the message id, which holds a secret and is never logged).
pub(super) async fn publish_durably(
    js: &jetstream::Context,
    subject: String,
    (id, message_id): (&str, &str),
    scope: &str,
    payload: Vec<u8>,
) -> Result<(), ProducerError> {
    let payload = bytes::Bytes::from(payload);
    let deadline = tokio::time::Instant::now() + PUBLISH_PATIENCE;
    let mut pause = Duration::from_millis(50);
    loop {
        let mut headers = scope_headers(scope).unwrap_or_default();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, message_id);
        let attempt = async {
            js.publish_with_headers(subject.clone(), headers, payload.clone())
                .await?
                .await
        };
        match attempt.await {
            Ok(ack) => {
                if ack.duplicate {
                    tracing::info!(command_id = id, "already submitted; following its results");
                }
                return Ok(());
            }
            // A cluster electing a leader, a server restarting: the same message, with
            // the same id, again (de-duplicated if the first one was stored after all).
            Err(e) if tokio::time::Instant::now() + pause < deadline => {
                tracing::info!(command_id = id, "publishing again: {e}");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(nats_error(e)),
        }
    }
}
