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
//! - `run_disk_full`: an agent run whose turns cannot be saved ends `STORE_ERROR`.

// Integration tests are tests: their helpers may unwrap (the workspace denies it elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod client_gone;
mod disk_full;
use cmdr_test_support::fake_llm;
use cmdr_test_support::http as http_support;
mod nats_restart;
mod run_disk_full;
use cmdr_test_support::nats_server;
use cmdr_test_support::serve;
mod server_crash;
mod worker_loss;
mod workers;

use cmdr_executors::OutputResult;
use futures_util::StreamExt;

pub use cmdr_test_support::PATIENCE;

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
