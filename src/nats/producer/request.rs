//! Core mode's request: a command published as a request that a worker acknowledges
//! ([`Accepted`]) or answers with the command's terminal result; `busy` answers are asked
//! again with a growing pause (docs/nats.md, "The reply").

use std::time::Duration;

use async_nats::{Request, RequestErrorKind};
use cmdr_executors::OutputResult;

use super::error::{nats_error, ProducerError};
use super::{scope_headers, Producer, ACCEPT_TIMEOUT};
use crate::nats::subjects;
use crate::nats::wire::{Accepted, REPLY_HEADER, REPLY_RESULT};

/// First pause before asking again after every worker asked was busy.
const BUSY_RETRY_FIRST: Duration = Duration::from_millis(20);
/// Longest pause between two attempts.
const BUSY_RETRY_MAX: Duration = Duration::from_millis(500);

impl Producer {
    /// Core mode: publish as a request a worker acknowledges; the id of the worker that
    /// took it, when it gives one, or — asked for with `wants_result` ([`REPLY_HEADER`]) —
    /// the command's terminal result. A worker that answers `busy`
    /// did not take it: the request is sent again (the queue group may pick another
    /// worker) with a growing pause, until [`ACCEPT_TIMEOUT`] has passed.
    pub(super) async fn request_core(
        &self,
        subject: String,
        scope: &str,
        payload: Vec<u8>,
        wants_result: bool,
    ) -> Result<Taken, ProducerError> {
        let mut headers = scope_headers(scope);
        if wants_result {
            headers
                .get_or_insert_with(async_nats::HeaderMap::new)
                .insert(REPLY_HEADER, REPLY_RESULT);
        }
        let payload = bytes::Bytes::from(payload);
        let deadline = tokio::time::Instant::now() + ACCEPT_TIMEOUT;
        let mut pause = BUSY_RETRY_FIRST;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let mut request = Request::new()
                .payload(payload.clone())
                .timeout(Some(left.max(Duration::from_millis(1))));
            if let Some(headers) = &headers {
                request = request.headers(headers.clone());
            }
            let accepted = match self
                .inner
                .client
                .send_request(subject.clone(), request)
                .await
            {
                Ok(reply) => {
                    if let Some(taken) = wants_result
                        .then(|| Taken::with_result(&reply.payload))
                        .flatten()
                    {
                        return Ok(taken);
                    }
                    serde_json::from_slice::<Accepted>(&reply.payload).ok()
                }
                Err(e) if e.kind() == RequestErrorKind::NoResponders => {
                    return Err(ProducerError::NoWorkers(subject))
                }
                Err(e) if e.kind() == RequestErrorKind::TimedOut => {
                    return Err(ProducerError::NotAccepted(ACCEPT_TIMEOUT))
                }
                Err(e) => return Err(nats_error(e)),
            };
            match accepted {
                Some(accepted) if accepted.busy => {
                    if tokio::time::Instant::now() + pause >= deadline {
                        return Err(ProducerError::Busy(ACCEPT_TIMEOUT));
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(BUSY_RETRY_MAX);
                }
                accepted => {
                    return Ok(Taken {
                        worker: accepted
                            .and_then(|accepted| accepted.worker)
                            .filter(|worker| subjects::is_valid_id(worker)),
                        first: None,
                    })
                }
            }
        }
    }
}

/// What a worker answered to a command request it took (core mode).
pub(super) struct Taken {
    /// The worker's id, when it gives one (for the liveness checks).
    pub(super) worker: Option<String>,
    /// The command's result, when the reply was that result (its terminal).
    pub(super) first: Option<Box<OutputResult>>,
}

impl Taken {
    /// A reply that is the command's terminal result (an `OutputResult`, which has a
    /// `status`; an [`Accepted`] has none); `None` for an [`Accepted`] (from any worker,
    /// old or new).
    fn with_result(payload: &[u8]) -> Option<Self> {
        let result = serde_json::from_slice::<OutputResult>(payload).ok()?;
        Some(Self {
            worker: None,
            first: Some(Box::new(result)),
        })
    }

    /// Whether the reply already ended the command (its result is a terminal).
    pub(super) fn ended(&self) -> bool {
        self.first
            .as_ref()
            .is_some_and(|result| result.status.is_terminal())
    }
}
