//! A three-node JetStream cluster (streams with 3 replicas): 200 durable commands in
//! flight, the `CMDR_COMMANDS` stream leader SIGKILLed (and started again) and a worker
//! process SIGKILLed mid-command; every command runs and its producer sees exactly one
//! terminal result, with its output.

use std::time::Duration;

use cmdr::nats::connect::NatsConnect;
use cmdr::nats::durable::{DurableSettings, COMMANDS_STREAM};
use cmdr::nats::producer::Producer;
use cmdr::nats::worker::{self, WorkerOptions};
use cmdr_executors::{decode_command, ExecutionStatus, Registry};
use cmdr_test_support::nats_cluster::NatsCluster;
use tokio_util::sync::CancellationToken;

use crate::data;

fn settings() -> DurableSettings {
    DurableSettings {
        replicas: 3,
        ack_wait: Duration::from_secs(10),
        ..DurableSettings::default()
    }
}

async fn client(urls: &str) -> async_nats::Client {
    NatsConnect::new(urls, "cluster-test")
        .connect()
        .await
        .unwrap()
}

/// Every message of `stream`, or what arrived before a minute passed.
async fn drain(
    mut stream: cmdr::nats::producer::RemoteStream,
) -> Vec<cmdr_executors::OutputResult> {
    use futures_util::StreamExt;
    let mut messages = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(m) = stream.next().await {
            messages.push(m);
        }
    })
    .await;
    messages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_losing_its_stream_leader_loses_no_command() {
    let mut cluster = NatsCluster::start().await;
    let urls = cluster.urls();
    let producer = Producer::durable_with(client(&urls).await, &settings())
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let mut workers = Vec::new();
    for _ in 0..2 {
        let options = WorkerOptions {
            jobs: 16,
            shutdown_grace: Duration::from_millis(200),
            durable: Some(settings()),
            ..WorkerOptions::default()
        };
        workers.push(tokio::spawn(worker::run(
            client(&urls).await,
            Registry::with_defaults(),
            options,
            stop.clone().cancelled_owned(),
        )));
    }
    // A third worker in its own process, to be killed mid-command.
    let mut host = std::process::Command::new(env!("CARGO_BIN_EXE_cmdr"))
        .args([
            "worker",
            "--durable",
            "--ack-wait-secs",
            "10",
            "--grace-secs",
            "0",
        ])
        .args(["--jobs", "16", "--nats", &urls])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut runs = Vec::new();
    for n in 0..200 {
        let json = format!(
            r#"{{"command_id":"c-{n}","commandType":"BASH_EXEC","command":"sleep 0.2; echo c-{n}"}}"#
        );
        let stream = producer
            .submit(decode_command(&json).unwrap())
            .await
            .unwrap();
        runs.push(tokio::spawn(drain(stream)));
    }
    // The leader of the commands stream goes down with 200 commands in flight.
    let js = async_nats::jetstream::new(client(&urls).await);
    let info = js
        .get_stream(COMMANDS_STREAM)
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .clone();
    let leader = info
        .cluster
        .and_then(|c| c.leader)
        .and_then(|name| NatsCluster::index_of(&name))
        .unwrap_or(0);
    cluster.kill(leader);
    // … and a worker host dies with commands of its own running.
    let _ = host.kill();
    let _ = host.wait();
    // Commands go on on the two nodes left; then the node comes back.
    for n in 0..20 {
        let json = format!(
            r#"{{"command_id":"late-{n}","commandType":"BASH_EXEC","command":"echo late-{n}"}}"#
        );
        let stream = producer
            .submit(decode_command(&json).unwrap())
            .await
            .unwrap();
        runs.push(tokio::spawn(drain(stream)));
    }
    cluster.restart(leader);
    let mut unfinished = Vec::new();
    for (n, run) in runs.into_iter().enumerate() {
        let messages = run.await.unwrap();
        let terminals = messages.iter().filter(|m| m.status.is_terminal()).count();
        match messages.last() {
            Some(end) if terminals == 1 && end.status == ExecutionStatus::Succeeded => {
                let expected = format!("{}\n", end.command_id);
                assert!(data(&messages).ends_with(&expected), "{messages:#?}");
            }
            other => unfinished.push((n, terminals, other.cloned())),
        }
    }
    assert!(
        unfinished.is_empty(),
        "{} unfinished: {unfinished:#?}",
        unfinished.len()
    );
    stop.cancel();
    for worker in workers {
        worker.await.unwrap().unwrap();
    }
}
