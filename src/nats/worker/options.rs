//! A worker's settings and why it could not run.

use std::time::Duration;

use cmdr_executors::ErrorCode;

use crate::nats::durable::{DurableError, DurableSettings};
use crate::nats::subjects;

/// Default bound on commands waiting in a core worker.
pub const DEFAULT_MAX_QUEUED: usize = 256;

/// Default bound on the payload bytes of the commands waiting in a core worker (64 MiB).
pub const DEFAULT_MAX_QUEUED_BYTES: usize = 64 * 1024 * 1024;

/// A fresh worker id: 12 hex digits (48 random bits).
pub fn random_worker_id() -> String {
    let mut id = uuid::Uuid::new_v4().simple().to_string();
    id.truncate(12);
    id
}

/// Settings of a worker.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// This worker's id (one subject token, unique in the pool): its own subjects carry it
    /// and its process ids start with it, so the registry it runs must be built with
    /// [`WorkerOptions::process_id_prefix`] (docs/nats.md, "Processes").
    pub worker_id: String,
    /// Queue group shared by the pool.
    pub queue: String,
    /// Commands run at once.
    pub jobs: usize,
    /// Core mode: commands of one producer run at once at most (`None`: `jobs - 1`, at
    /// least 1), so one producer cannot hold every job.
    pub jobs_per_producer: Option<usize>,
    /// Core mode: commands accepted and waiting for a free job at most; beyond, a command
    /// is answered `busy` (the producer tries again, maybe on another worker).
    pub max_queued: usize,
    /// Core mode: payload bytes of the waiting commands at most (one is always taken).
    pub max_queued_bytes: usize,
    /// Commands whose `timeout_ms` is above this are refused (`INVALID_INPUT`).
    pub max_timeout: Duration,
    /// On shutdown, how long running commands may go on before they are cancelled.
    pub shutdown_grace: Duration,
    /// Durable mode (JetStream) with these settings; core mode when `None`.
    pub durable: Option<DurableSettings>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            worker_id: random_worker_id(),
            queue: subjects::DEFAULT_QUEUE.to_owned(),
            jobs: 16,
            jobs_per_producer: None,
            max_queued: DEFAULT_MAX_QUEUED,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
            max_timeout: super::timeout_cap::DEFAULT_MAX_TIMEOUT,
            shutdown_grace: Duration::from_secs(10),
            durable: None,
        }
    }
}

impl WorkerOptions {
    /// The jobs one producer may hold at once (see [`WorkerOptions::jobs_per_producer`]).
    pub fn producer_share(&self) -> usize {
        self.jobs_per_producer
            .unwrap_or(self.jobs.saturating_sub(1))
            .clamp(1, self.jobs.max(1))
    }

    /// The `RegistryConfig::process_id_prefix` of this worker's registry: `<worker_id>-`.
    pub fn process_id_prefix(&self) -> String {
        subjects::process_id_prefix(&self.worker_id)
    }
}

/// Why the worker could not run.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Subscribing failed.
    #[error("subscribing to {subject}: {source}")]
    Subscribe {
        /// The subject.
        subject: &'static str,
        /// The client's error.
        source: async_nats::SubscribeError,
    },
    /// The worker id is not a subject token.
    #[error("worker id '{0}' cannot be used on NATS (no spaces, '.', '*' or '>')")]
    InvalidId(String),
    /// Another worker on the bus already has this id.
    #[error("another worker already uses the id '{0}'; give each worker its own")]
    IdInUse(String),
    /// Durable mode could not set up its streams or consumer.
    #[error(transparent)]
    Durable(#[from] DurableError),
}

impl WorkerError {
    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            WorkerError::Subscribe { .. } | WorkerError::IdInUse(_) => {
                ErrorCode::NatsSubscribeFailed
            }
            WorkerError::InvalidId(_) => ErrorCode::InvalidInput,
            WorkerError::Durable(e) => e.code(),
        }
    }
}
