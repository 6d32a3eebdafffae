//! Durable throughput on one nats-server vs a three-node JetStream cluster (streams with 3
//! replicas), side by side in the same run, samples alternating:
//!
//! ```sh
//! cargo bench --bench nats_cluster
//! ```
//!
//! Each sample submits 300 durable `LIST_DIRECTORY` commands of an empty folder (cheap:
//! what is measured is the bus) through one producer, 64 in flight, to two workers, and
//! waits for every terminal result. Prints commands per second for both sides and the
//! ratio cluster / single.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

/// The allocator of the `cmdr` binary (src/main.rs), so in-process figures are its
/// (its smaller first arena, which only shapes a process's first allocations, is not copied).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::{Duration, Instant};

use cmdr::nats::connect::NatsConnect;
use cmdr::nats::durable::DurableSettings;
use cmdr::nats::producer::Producer;
use cmdr::nats::worker::{self, WorkerOptions};
use cmdr_executors::{decode_command, ExecutionStatus, Registry};
use cmdr_test_support::nats_cluster::NatsCluster;
use cmdr_test_support::nats_server::NatsServer;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

const COMMANDS: usize = 300;
const IN_FLIGHT: usize = 64;
const SAMPLES: usize = 5;

/// A producer and two workers on the bus at `urls`.
struct Pool {
    producer: Producer,
    stop: CancellationToken,
    dir: tempfile::TempDir,
    next: usize,
}

impl Pool {
    async fn start(urls: &str, replicas: usize, name: &str) -> Pool {
        let settings = DurableSettings {
            replicas,
            ..DurableSettings::default()
        };
        let connect = || async { NatsConnect::new(urls, "bench").connect().await.unwrap() };
        let producer = Producer::durable_with(connect().await, &settings)
            .await
            .unwrap()
            .with_id(name)
            .unwrap();
        let stop = CancellationToken::new();
        for _ in 0..2 {
            let options = WorkerOptions {
                jobs: 32,
                durable: Some(settings.clone()),
                queue: format!("bench-{name}"),
                ..WorkerOptions::default()
            };
            tokio::spawn(worker::run(
                connect().await,
                Registry::with_defaults(),
                options,
                stop.clone().cancelled_owned(),
            ));
        }
        Pool {
            producer,
            stop,
            dir: tempfile::tempdir().unwrap(),
            next: 0,
        }
    }

    /// Runs one sample; its duration.
    async fn sample(&mut self) -> Duration {
        let base = self.next;
        self.next += COMMANDS;
        let path = self.dir.path().display().to_string();
        let started = Instant::now();
        let results: Vec<bool> = futures_util::stream::iter(base..base + COMMANDS)
            .map(|n| {
                let producer = self.producer.clone();
                let json = format!(
                    r#"{{"command_id":"b-{n}","commandType":"LIST_DIRECTORY","path":"{path}"}}"#
                );
                async move {
                    let stream = producer
                        .submit(decode_command(&json).unwrap())
                        .await
                        .unwrap();
                    let messages: Vec<_> = stream.collect().await;
                    messages.last().map(|m| m.status) == Some(ExecutionStatus::Succeeded)
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        assert!(results.iter().all(|ok| *ok), "every command succeeds");
        started.elapsed()
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let single = NatsServer::start();
        let cluster = NatsCluster::start().await;
        let mut one = Pool::start(&single.url(), 1, "single").await;
        let mut three = Pool::start(&cluster.urls(), 3, "cluster").await;
        // Warm-up, then samples alternating A B, B A …
        one.sample().await;
        three.sample().await;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for i in 0..SAMPLES {
            let rate = |d: Duration| COMMANDS as f64 / d.as_secs_f64();
            if i % 2 == 0 {
                a.push(rate(one.sample().await));
                b.push(rate(three.sample().await));
            } else {
                b.push(rate(three.sample().await));
                a.push(rate(one.sample().await));
            }
        }
        let (single_rate, cluster_rate) = (median(a.clone()), median(b.clone()));
        println!("durable LIST_DIRECTORY, {COMMANDS} per sample, {IN_FLIGHT} in flight, 2 workers, medians of {SAMPLES}:");
        println!("  one node:               {single_rate:.0} cmd/s   (samples {a:.0?})");
        println!("  3-node cluster, R=3:    {cluster_rate:.0} cmd/s   (samples {b:.0?})");
        println!("  ratio cluster / single: {:.2}", cluster_rate / single_rate);
        one.stop.cancel();
        three.stop.cancel();
    });
}
