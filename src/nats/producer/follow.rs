//! Following a command's results in `CMDR_RESULTS` (durable mode), through outages.
//!
//! A task reads the results with an ordered consumer from the first one on, remembers the
//! stream sequence of the last one delivered, and when the consumer fails (the server
//! restarted, the connection dropped) makes a new one that starts right after it — so
//! nothing is missed or repeated. It stops after the terminal result, when the reader goes
//! away, or after [`GIVE_UP_AFTER`] of consecutive failures.

use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, consumer::DeliverPolicy};
use cmdr_executors::OutputResult;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::nats::durable::RESULTS_STREAM;
use crate::nats::subjects;

/// Results buffered between the follower task and the reader.
const BUFFER: usize = 64;
/// Pause between attempts to resume.
const RETRY: Duration = Duration::from_millis(250);
/// Consecutive failed attempts (× [`RETRY`]) before the follower gives up.
const GIVE_UP_AFTER: u32 = 240;

/// A result, or why following stopped.
pub(super) type Followed = Result<OutputResult, String>;

/// Starts following the results of `producer`'s command `command_id`.
pub(super) fn follow(
    js: jetstream::Context,
    producer: &str,
    command_id: &str,
) -> mpsc::Receiver<Followed> {
    let (tx, rx) = mpsc::channel(BUFFER);
    let subject = subjects::results(producer, command_id);
    tokio::spawn(async move {
        tokio::select! {
            () = run(js, subject, &tx) => {}
            () = tx.closed() => {}
        }
    });
    rx
}

async fn run(js: jetstream::Context, subject: String, tx: &mpsc::Sender<Followed>) {
    let mut next_sequence: Option<u64> = None;
    let mut failures = 0u32;
    loop {
        match ordered(&js, &subject, next_sequence).await {
            Ok(mut messages) => {
                while let Some(item) = messages.next().await {
                    let message = match item {
                        Ok(message) => message,
                        Err(e) => {
                            tracing::debug!(%subject, "results consumer failed, resuming: {e}");
                            break;
                        }
                    };
                    failures = 0;
                    if let Ok(info) = message.info() {
                        next_sequence = Some(info.stream_sequence + 1);
                    }
                    let parsed = serde_json::from_slice::<OutputResult>(&message.payload)
                        .map_err(|e| format!("malformed result: {e}"));
                    let terminal = parsed.as_ref().map_or(true, |r| r.status.is_terminal());
                    if tx.send(parsed).await.is_err() || terminal {
                        return;
                    }
                }
            }
            Err(e) => tracing::debug!(%subject, "cannot follow results yet: {e}"),
        }
        failures += 1;
        if failures > GIVE_UP_AFTER {
            let _ = tx.send(Err("lost the results stream".to_owned())).await;
            return;
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// An ordered consumer over the command's results, from `start` (or the first one).
async fn ordered(
    js: &jetstream::Context,
    subject: &str,
    start: Option<u64>,
) -> Result<pull::Ordered, String> {
    let deliver_policy = match start {
        Some(start_sequence) => DeliverPolicy::ByStartSequence { start_sequence },
        None => DeliverPolicy::All,
    };
    let stream = js
        .get_stream(RESULTS_STREAM)
        .await
        .map_err(|e| e.to_string())?;
    let consumer = stream
        .create_consumer(pull::OrderedConfig {
            filter_subject: subject.to_owned(),
            deliver_policy,
            ..Default::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    consumer.messages().await.map_err(|e| e.to_string())
}
