//! Core-mode (`cmdr worker` without `--durable`) worker processes and producers for the
//! NATS faults.

use std::process::{Child, Command, Stdio};

use cmdr::nats::producer::{Producer, RemoteStream};
use cmdr_executors::{decode_command, ExecutionStatus, OutputResult};
use futures_util::StreamExt;

use crate::nats_server::NatsServer;
use crate::PATIENCE;

/// A core-mode `cmdr worker` process, SIGKILLed on drop.
pub struct WorkerProcess(Child);

impl WorkerProcess {
    /// Starts a worker and waits until commands published now reach it.
    pub async fn start(server: &NatsServer) -> Self {
        Self::start_with(server, &[]).await
    }

    /// Starts a worker with extra arguments.
    pub async fn start_with(server: &NatsServer, extra: &[&str]) -> Self {
        let child = Command::new(env!("CARGO_BIN_EXE_cmdr"))
            .args(["worker", "--nats", &server.url(), "--grace-secs", "0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let worker = Self(child);
        server.wait_for_subscribers(&connect(server).await).await;
        worker
    }

    /// SIGKILL, and reap it.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A new connection to `server`.
pub async fn connect(server: &NatsServer) -> async_nats::Client {
    async_nats::connect(server.url()).await.unwrap()
}

/// A core-mode producer on its own connection.
pub async fn producer(server: &NatsServer) -> Producer {
    Producer::new(connect(server).await)
}

/// Submits `json` and waits for its first (`RUNNING`) message: the command runs.
pub async fn submit_running(producer: &Producer, json: &str) -> (OutputResult, RemoteStream) {
    let mut stream = producer
        .submit(decode_command(json).unwrap())
        .await
        .unwrap();
    let first = tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("the command starts in time")
        .expect("a first message");
    assert_eq!(first.status, ExecutionStatus::Running, "{first:?}");
    (first, stream)
}

/// Processes a SIGKILLed worker could not stop (see docs/faults.md): each command writes
/// its shell's pid to this file; they are SIGKILLed when this is dropped.
pub struct Orphans {
    dir: tempfile::TempDir,
}

impl Orphans {
    /// An empty pid file.
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A script that records its pid, then becomes `sleep 1000` (same pid).
    pub fn sleeper(&self) -> String {
        format!(
            "echo $$ >> {}; exec sleep 1000",
            self.dir.path().join("pids").display()
        )
    }

    /// The pids recorded so far.
    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.path().join("pids"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    }
}

impl Drop for Orphans {
    fn drop(&mut self) {
        for pid in self.pids() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}
