//! Durable mode (JetStream): the streams and the consumer, created if missing.
//!
//! - `CMDR_COMMANDS` over `cmdr.commands.>`: work-queue retention (a command is removed
//!   once a worker acknowledges it), file storage, de-duplication on `Nats-Msg-Id` (the
//!   command id) within [`DurableSettings::dedupe_window`].
//! - `CMDR_RESULTS` over `cmdr.results.>`: limits retention, bounded by
//!   [`DurableSettings::results_max_age`] and `results_max_bytes`, so a producer can replay
//!   a command's results from the start after reconnecting.
//! - Consumer `<queue>` (default `cmdr-workers`) on `CMDR_COMMANDS`: durable pull
//!   consumer shared by the workers, explicit acks, `ack_wait`, `max_deliver` =
//!   `max_attempts + 1` (the worker answers the extra delivery with a `FAILED` result).
//!
//! Settings apply when a stream or the consumer is created; existing ones are used as
//! they are. Works with nats-server 2.9.10.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use cmdr_executors::ErrorCode;

use super::subjects;

/// Name of the commands stream.
pub const COMMANDS_STREAM: &str = "CMDR_COMMANDS";
/// Name of the results stream.
pub const RESULTS_STREAM: &str = "CMDR_RESULTS";

/// Durable-mode settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurableSettings {
    /// A delivered command not acknowledged (or marked in progress) within this time is
    /// redelivered. Running commands send progress acks every third of it.
    pub ack_wait: Duration,
    /// Deliveries of one command before it is failed with `REDELIVERY_LIMIT`.
    pub max_attempts: u32,
    /// A command id published twice within this window runs once.
    pub dedupe_window: Duration,
    /// Results are kept this long for replay.
    pub results_max_age: Duration,
    /// … and up to this many bytes in all (oldest dropped first).
    pub results_max_bytes: i64,
    /// Copies of each stream in a JetStream cluster (1 on a single server; 3 survive the
    /// loss of one node). Applied when the streams are created.
    pub replicas: usize,
}

impl Default for DurableSettings {
    fn default() -> Self {
        Self {
            ack_wait: Duration::from_secs(30),
            max_attempts: 3,
            dedupe_window: Duration::from_secs(600),
            results_max_age: Duration::from_secs(3600),
            results_max_bytes: 1 << 30,
            replicas: 1,
        }
    }
}

/// Creating or reading the streams or the consumer failed.
#[derive(Debug, thiserror::Error)]
#[error("JetStream {what}: {detail}")]
pub struct DurableError {
    what: &'static str,
    detail: String,
}

impl DurableError {
    pub(crate) fn new(what: &'static str, detail: impl std::fmt::Display) -> Self {
        Self {
            what,
            detail: detail.to_string(),
        }
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::JetstreamError
    }
}

/// The stream remembering, per durable command id, what command it named (a SHA-256 of
/// its JSON) and the secret its message id carries, one message per id on
/// `cmdr.ids.<producer>.<sha256 of the scoped id>`, for as long as ids are de-duplicated.
/// A plain stream rather than a KV bucket: nats-server 2.9 rejects the KV configuration
/// this client sends.
pub const IDS_STREAM: &str = "CMDR_IDS";

/// The subject of the record of `scoped` (`<producer>.<command id>`) in [`IDS_STREAM`]:
/// under its producer, so that permissions can confine each producer to its own records.
pub fn id_subject(scoped: &str) -> String {
    let producer = scoped
        .split_once('.')
        .map_or(scoped, |(producer, _)| producer);
    let digest = ring::digest::digest(&ring::digest::SHA256, scoped.as_bytes());
    format!("cmdr.ids.{producer}.{}", hex(digest.as_ref()))
}

/// Lower-case hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Creates (if missing) and returns the stream of [`IDS_STREAM`].
pub async fn ensure_ids(
    js: &jetstream::Context,
    settings: &DurableSettings,
) -> Result<stream::Stream, DurableError> {
    js.get_or_create_stream(stream::Config {
        name: IDS_STREAM.to_owned(),
        subjects: vec!["cmdr.ids.>".to_owned()],
        retention: stream::RetentionPolicy::Limits,
        storage: stream::StorageType::File,
        max_messages_per_subject: 1,
        max_age: settings.dedupe_window,
        discard: stream::DiscardPolicy::Old,
        num_replicas: settings.replicas,
        ..Default::default()
    })
    .await
    .map_err(|e| DurableError::new("creating CMDR_IDS", e))
}

/// Creates both streams if missing.
pub async fn ensure_streams(
    js: &jetstream::Context,
    settings: &DurableSettings,
) -> Result<(), DurableError> {
    js.get_or_create_stream(stream::Config {
        name: COMMANDS_STREAM.to_owned(),
        subjects: vec![subjects::COMMANDS_ALL.to_owned()],
        retention: stream::RetentionPolicy::WorkQueue,
        storage: stream::StorageType::File,
        duplicate_window: settings.dedupe_window,
        num_replicas: settings.replicas,
        ..Default::default()
    })
    .await
    .map_err(|e| DurableError::new("creating CMDR_COMMANDS", e))?;
    js.get_or_create_stream(stream::Config {
        name: RESULTS_STREAM.to_owned(),
        subjects: vec!["cmdr.results.>".to_owned()],
        retention: stream::RetentionPolicy::Limits,
        storage: stream::StorageType::File,
        max_age: settings.results_max_age,
        max_bytes: settings.results_max_bytes,
        num_replicas: settings.replicas,
        discard: stream::DiscardPolicy::Old,
        ..Default::default()
    })
    .await
    .map_err(|e| DurableError::new("creating CMDR_RESULTS", e))?;
    Ok(())
}

/// Creates (if missing) and returns the workers' durable pull consumer.
pub async fn ensure_consumer(
    js: &jetstream::Context,
    queue: &str,
    settings: &DurableSettings,
) -> Result<consumer::PullConsumer, DurableError> {
    let stream = js
        .get_stream(COMMANDS_STREAM)
        .await
        .map_err(|e| DurableError::new("opening CMDR_COMMANDS", e))?;
    stream
        .get_or_create_consumer(
            queue,
            consumer::pull::Config {
                durable_name: Some(queue.to_owned()),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: settings.ack_wait,
                max_deliver: i64::from(settings.max_attempts) + 1,
                filter_subject: subjects::COMMANDS_ALL.to_owned(),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| DurableError::new("creating the workers' consumer", e))
}
