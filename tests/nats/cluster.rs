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
use cmdr_test_support::LOAD_PATIENCE;
use tokio_util::sync::CancellationToken;

use crate::data;

fn settings() -> DurableSettings {
    DurableSettings {
        replicas: 3,
        ack_wait: Duration::from_secs(10),
        ..DurableSettings::default()
    }
}

/// The id of the `n`th command submitted.
fn id_of(n: usize) -> String {
    if n < 200 {
        format!("c-{n}")
    } else {
        format!("late-{}", n - 200)
    }
}

/// What the cluster and the workers' logs say about the commands `ids` (printed when one
/// did not finish: a lost command must be explainable).
async fn diagnose(urls: &str, producer: &str, ids: &[String], logs: &Logs) -> String {
    use futures_util::StreamExt;
    let js = async_nats::jetstream::new(client(urls).await);
    let mut report = String::new();
    if let Ok(mut stream) = js.get_stream(COMMANDS_STREAM).await {
        if let Ok(info) = stream.info().await {
            report += &format!("CMDR_COMMANDS state: {:?}\n", info.state);
        }
        if let Ok(mut consumer) = stream
            .get_consumer::<async_nats::jetstream::consumer::pull::Config>("cmdr-workers")
            .await
        {
            if let Ok(info) = consumer.info().await {
                report += &format!(
                    "consumer: pending {} ack-pending {} redelivered {} delivered {:?} ack floor {:?}\n",
                    info.num_pending, info.num_ack_pending, info.num_redelivered, info.delivered, info.ack_floor
                );
            }
        }
    }
    for id in ids {
        let subject = cmdr::nats::subjects::results(producer, id);
        report += &format!("{id}: results on {subject}:\n");
        if let Ok(stream) = js.get_stream(cmdr::nats::durable::RESULTS_STREAM).await {
            if let Ok(consumer) = stream
                .create_consumer(async_nats::jetstream::consumer::pull::OrderedConfig {
                    filter_subject: subject.clone(),
                    ..Default::default()
                })
                .await
            {
                if let Ok(mut messages) = consumer.messages().await {
                    while let Ok(Some(Ok(m))) =
                        tokio::time::timeout(Duration::from_secs(2), messages.next()).await
                    {
                        let seq = m.info().map(|i| i.stream_sequence).unwrap_or(0);
                        report += &format!("  #{seq} {}\n", String::from_utf8_lossy(&m.payload));
                    }
                }
            }
        }
        report += &logs.lines_about(id);
    }
    report
}

/// The workers' debug logs, in files of the test's own directory.
struct Logs {
    dir: tempfile::TempDir,
}

impl Logs {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("in-process.log")).unwrap();
        let _ = tracing_subscriber::fmt()
            .with_env_filter("cmdr::nats=debug")
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(file))
            .try_init();
        Self { dir }
    }

    fn host(&self) -> std::fs::File {
        std::fs::File::create(self.dir.path().join("host.log")).unwrap()
    }

    /// The log lines naming `id`.
    fn lines_about(&self, id: &str) -> String {
        let mut out = String::new();
        for name in ["in-process.log", "host.log"] {
            let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
            let needle = format!("{id}\u{20}");
            for line in text
                .lines()
                .filter(|l| l.contains(&needle) || l.ends_with(id))
            {
                out += &format!("  [{name}] {line}\n");
            }
        }
        out
    }
}

async fn client(urls: &str) -> async_nats::Client {
    NatsConnect::new(urls, "cluster-test")
        .connect()
        .await
        .unwrap()
}

/// Every message of `stream`, or what arrived before `deadline` (one for the whole test,
/// [`LOAD_PATIENCE`] after it starts: on a loaded machine the cluster's elections and the
/// redeliveries after `ack_wait` take their time; what is checked is that nothing is lost).
async fn drain(
    mut stream: cmdr::nats::producer::RemoteStream,
    deadline: tokio::time::Instant,
) -> Vec<cmdr_executors::OutputResult> {
    use futures_util::StreamExt;
    let mut messages = Vec::new();
    let _ = tokio::time::timeout_at(deadline, async {
        while let Some(m) = stream.next().await {
            messages.push(m);
        }
    })
    .await;
    messages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_losing_its_stream_leader_loses_no_command() {
    let logs = Logs::new();
    let mut cluster = NatsCluster::start().await;
    let deadline = tokio::time::Instant::now() + LOAD_PATIENCE;
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
        .env("CMDR_LOG", "cmdr::nats=debug")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(logs.host())
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
        runs.push(tokio::spawn(drain(stream, deadline)));
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
        runs.push(tokio::spawn(drain(stream, deadline)));
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
    if !unfinished.is_empty() {
        let ids: Vec<String> = unfinished.iter().map(|(n, ..)| id_of(*n)).collect();
        let report = diagnose(&urls, producer.id(), &ids, &logs).await;
        panic!("{} unfinished: {unfinished:#?}\n{report}", unfinished.len());
    }
    stop.cancel();
    for worker in workers {
        worker.await.unwrap().unwrap();
    }
}
