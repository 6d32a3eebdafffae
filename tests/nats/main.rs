//! NATS transport tests against a real `nats-server` (started per test on a free port,
//! with JetStream and a temporary store). Workers run in-process on their own
//! connections, or as real `cmdr worker` processes where the process matters.

// Integration tests are tests: their helpers may unwrap (the workspace denies it elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod auth;
mod bus;
mod cli;
mod cluster;
mod durable;
mod flood;
mod permissions;
mod remote;
mod serve;
use cmdr_test_support::nats_server as server;

use std::sync::Arc;
use std::time::Duration;

use cmdr::nats::input::NatsInput;
use cmdr::nats::producer::Producer;
use cmdr::nats::worker::{self, WorkerOptions};
use cmdr_executors::{ExecutionStatus, OutputResult, Registry, RegistryConfig};
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

pub use server::NatsServer;

pub use cmdr_test_support::PATIENCE;

/// An in-process worker on its own connection; stops when dropped.
pub struct Worker {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Worker {
    /// Starts a worker; its shell commands start in `dir` (so results tell which worker
    /// ran them).
    pub async fn start(server: &NatsServer, dir: Option<&std::path::Path>) -> Self {
        let client = async_nats::connect(server.url()).await.unwrap();
        let mut config = RegistryConfig {
            input_broker: Arc::new(NatsInput::new(client.clone())),
            ..RegistryConfig::default()
        };
        config.bash.default_working_dir = dir.map(|d| d.to_path_buf());
        let registry = Registry::with_config(config);
        let stop = CancellationToken::new();
        let until = stop.clone();
        let options = WorkerOptions {
            jobs: 8,
            shutdown_grace: Duration::from_millis(200),
            ..WorkerOptions::default()
        };
        let task = tokio::spawn(async move {
            worker::run(client.clone(), registry, options, until.cancelled_owned())
                .await
                .unwrap();
        });
        // The worker is ready once its subscription is registered at the server.
        let probe = async_nats::connect(server.url()).await.unwrap();
        server.wait_for_subscribers(&probe).await;
        Self {
            stop,
            task: Some(task),
        }
    }

    /// Stops gracefully and waits.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            tokio::time::timeout(PATIENCE, task).await.unwrap().unwrap();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A producer on its own connection.
pub async fn producer(server: &NatsServer) -> Producer {
    Producer::new(async_nats::connect(server.url()).await.unwrap())
}

/// Collects a stream to its end; checks one terminal, last.
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

/// The terminal message.
pub fn terminal(messages: &[OutputResult]) -> &OutputResult {
    messages.last().unwrap()
}

/// Asserts success.
pub fn assert_ok(messages: &[OutputResult]) {
    assert_eq!(
        terminal(messages).status,
        ExecutionStatus::Succeeded,
        "{messages:#?}"
    );
}

/// Polls `check` until true or [`PATIENCE`] runs out.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the durable commands stream is empty (everything acknowledged).
pub async fn until_all_acknowledged(server: &NatsServer) {
    let js = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let mut stream = js
            .get_stream(cmdr::nats::durable::COMMANDS_STREAM)
            .await
            .unwrap();
        if stream.info().await.unwrap().state.messages == 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "commands left unacknowledged"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads raw results on a subscription until the terminal one, and returns it.
pub async fn terminal_on(subscription: &mut async_nats::Subscriber) -> OutputResult {
    loop {
        let message = tokio::time::timeout(PATIENCE, subscription.next())
            .await
            .expect("a result in time")
            .expect("the subscription stays open");
        let result: OutputResult = serde_json::from_slice(&message.payload).unwrap();
        if result.status.is_terminal() {
            return result;
        }
    }
}
