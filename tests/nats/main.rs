//! NATS transport tests against a real `nats-server` (started per test on a free port,
//! with JetStream and a temporary store). Workers run in-process on their own
//! connections, or as real `cmdr worker` processes where the process matters.

// Integration tests are tests: their helpers may unwrap (the workspace denies it elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod alive;
mod attacks;
mod auth;
mod bus;
mod cli;
mod cluster;
mod demux;
mod durable;
mod flood;
mod orphans;
mod permissions;
mod processes;
mod remote;
mod reply;
mod scopes;
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
        let options = WorkerOptions {
            jobs: 8,
            ..WorkerOptions::default()
        };
        Self::start_with(server, dir, options).await
    }

    /// [`Worker::start`] with these `options` (its shutdown grace made short).
    pub async fn start_with(
        server: &NatsServer,
        dir: Option<&std::path::Path>,
        options: WorkerOptions,
    ) -> Self {
        let client = async_nats::connect(server.url()).await.unwrap();
        let options = WorkerOptions {
            shutdown_grace: Duration::from_millis(200),
            ..options
        };
        let mut config = RegistryConfig {
            input_broker: Arc::new(NatsInput::new(client.clone())),
            process_id_prefix: Some(options.process_id_prefix()),
            ..RegistryConfig::default()
        };
        config.bash.default_working_dir = dir.map(|d| d.to_path_buf());
        let registry = Registry::with_config(config);
        let stop = CancellationToken::new();
        let until = stop.clone();
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

/// A real `cmdr worker` process; SIGKILLed when dropped.
pub struct WorkerProcess(pub std::process::Child);

impl WorkerProcess {
    /// A core worker with a random id, ready to take commands.
    pub async fn start(server: &NatsServer) -> Self {
        let child = Self::spawn(server, &[]);
        let probe = async_nats::connect(server.url()).await.unwrap();
        server.wait_for_subscribers(&probe).await;
        Self(child)
    }

    /// A worker called `id` with `args` (e.g. `--durable`), ready once it answers on its
    /// liveness subject (its last subscription).
    pub async fn start_as(server: &NatsServer, id: &str, args: &[&str]) -> Self {
        let mut all = vec!["--worker-id", id];
        all.extend_from_slice(args);
        let child = Self(Self::spawn(server, &all));
        wait_until_alive(server, id).await;
        child
    }

    /// [`WorkerProcess::start_as`] with its log at `filter` (`CMDR_LOG`, e.g.
    /// `cmdr::orphans=debug`), its lines sent to the receiver as they are written.
    pub async fn start_logged(
        server: &NatsServer,
        id: &str,
        args: &[&str],
        filter: &str,
    ) -> (Self, std::sync::mpsc::Receiver<String>) {
        let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("cmdr"))
            .args(["worker", "--nats", &server.url(), "--grace-secs", "0"])
            .args(["--worker-id", id])
            .args(args)
            .env("CMDR_LOG", filter)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut child = Self(child);
        let stderr = child.0.stderr.take().unwrap();
        let (lines, log) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                if lines.send(line).is_err() {
                    return;
                }
            }
        });
        wait_until_alive(server, id).await;
        (child, log)
    }

    fn spawn(server: &NatsServer, args: &[&str]) -> std::process::Child {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("cmdr"))
            .args(["worker", "--nats", &server.url(), "--grace-secs", "0"])
            .args(args)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Its process id.
    pub fn pid(&self) -> i32 {
        i32::try_from(self.0.id()).unwrap()
    }
}

/// Waits until worker `id` answers on its liveness subject (its last subscription).
async fn wait_until_alive(server: &NatsServer, id: &str) {
    let probe = async_nats::connect(server.url()).await.unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let request = async_nats::Request::new()
            .payload("readiness".into())
            .timeout(Some(Duration::from_millis(500)));
        if probe
            .send_request(format!("cmdr.alive.{id}.probe"), request)
            .await
            .is_ok()
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "worker {id} never came up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
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
