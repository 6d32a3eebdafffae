//! Discovery (`cmdr.workers.<producer>`): each live worker answers with its id and the
//! sessions of the asked client scope it holds; asked to, it first ends that scope.
//!
//! Core NATS cannot say how many answers a request will get, so discovery takes answers
//! until [`DISCOVERY_QUIET`] passes without a new one (after the first, which may take up to
//! [`ACCEPT_TIMEOUT`](super::ACCEPT_TIMEOUT)); no subscriber at all is known at once.

use std::time::Duration;

use async_nats::{Client, StatusCode};
use futures_util::StreamExt;

use super::{nats_error, scope_headers, ProducerError, ACCEPT_TIMEOUT};
use crate::nats::subjects;
use crate::nats::wire::{WorkerInfo, END_SCOPE_HEADER, END_SCOPE_YES};

/// After the first answer, discovery ends once this passes without another one.
pub const DISCOVERY_QUIET: Duration = Duration::from_millis(500);

/// The workers on the bus (each once), as they answer `cmdr.workers.<producer>`, each
/// naming the sessions of client scope `scope` it holds; with `end`, each first ends that
/// scope there (its processes and sessions).
pub(super) async fn discover(
    client: &Client,
    producer: &str,
    scope: &str,
    end: bool,
) -> Result<Vec<WorkerInfo>, ProducerError> {
    let inbox = client.new_inbox();
    let mut answers = client.subscribe(inbox.clone()).await.map_err(nats_error)?;
    let mut headers = scope_headers(scope).unwrap_or_default();
    if end {
        headers.insert(END_SCOPE_HEADER, END_SCOPE_YES);
    }
    client
        .publish_with_reply_and_headers(
            subjects::workers(producer),
            inbox,
            headers,
            bytes::Bytes::new(),
        )
        .await
        .map_err(nats_error)?;
    client.flush().await.map_err(nats_error)?;
    let mut found: Vec<WorkerInfo> = Vec::new();
    loop {
        let wait = if found.is_empty() {
            ACCEPT_TIMEOUT
        } else {
            DISCOVERY_QUIET
        };
        let Ok(Some(answer)) = tokio::time::timeout(wait, answers.next()).await else {
            break;
        };
        if answer.status == Some(StatusCode::NO_RESPONDERS) {
            break;
        }
        match serde_json::from_slice::<WorkerInfo>(&answer.payload) {
            Ok(info)
                if subjects::is_valid_id(&info.worker)
                    && !found.iter().any(|f| f.worker == info.worker) =>
            {
                found.push(info);
            }
            _ => tracing::debug!("ignored a malformed discovery answer"),
        }
    }
    Ok(found)
}
