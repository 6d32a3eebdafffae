//! Faults (issue 8, item 3), each provoked for real: a `cmdr worker` SIGKILLed, a
//! nats-server restarted, a file system that is full, a `cmdr serve` SIGKILLed in the
//! middle of a run and started again on the same database. What each test proves is
//! listed in `docs/faults.md`, with the tests elsewhere that cover the other faults.
//!
//! - `worker_loss`: core-mode producers end with `WORKER_LOST` when their worker dies.
//! - `nats_restart`: core-mode workers and producers survive a nats-server restart.
//! - `disk_full`: `FILE_WRITE`/`PATCH_FILE` on a full tmpfs leave the old file intact.
//! - `server_crash`: `cmdr serve` killed mid-run; the database, conversation and lock.
//! - `client_gone`: a client vanishing mid-stream from a real `cmdr serve`.

// Integration tests are tests: their helpers may unwrap (the workspace denies it elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod client_gone;
mod disk_full;
#[path = "../agent/fake_llm.rs"]
mod fake_llm;
#[allow(dead_code)]
#[path = "../http/support.rs"]
mod http_support;
mod nats_restart;
#[path = "../nats/server.rs"]
mod nats_server;
// Shared with the `load` target, which uses other parts of it.
#[allow(dead_code)]
#[path = "../load/serve.rs"]
mod serve;
mod server_crash;
mod worker_loss;
mod workers;

use std::time::Duration;

use cmdr_executors::OutputResult;
use futures_util::StreamExt;

/// Upper bound on waiting for anything that should happen promptly.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Collects a stream to its end (within [`PATIENCE`]); checks exactly one terminal, last.
pub async fn collect(
    mut stream: impl futures_core::Stream<Item = OutputResult> + Unpin,
) -> Vec<OutputResult> {
    let mut messages = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        while let Some(m) = stream.next().await {
            messages.push(m);
        }
    })
    .await
    .expect("the stream ends in time");
    let terminals = messages.iter().filter(|m| m.status.is_terminal()).count();
    assert_eq!(terminals, 1, "one terminal in {messages:#?}");
    assert!(messages.last().unwrap().status.is_terminal());
    messages
}

/// All data of a stream.
pub fn data(messages: &[OutputResult]) -> String {
    messages.iter().map(|m| m.result_data.as_str()).collect()
}
