//! A flood of large commands at a core worker: the worker holds a bounded backlog and
//! answers the rest `busy`, so its memory stays bounded; producers told `busy` try again
//! and their commands still run.

use std::process::Stdio;

use futures_util::StreamExt;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::{collect, producer, NatsServer, Worker, PATIENCE};

/// Peak resident memory of process `pid`, in MiB.
fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        / 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_large_commands_keeps_a_worker_small() {
    let server = NatsServer::start();
    let mut worker = Command::new(env!("CARGO_BIN_EXE_cmdr"))
        .args([
            "worker",
            "--nats",
            &server.url(),
            "--jobs",
            "2",
            "--max-queued",
            "4",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(worker.stderr.take().unwrap()).lines();
    tokio::time::timeout(PATIENCE, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("serving") {
                return;
            }
        }
    })
    .await
    .unwrap();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let pid = worker.id().unwrap();
    let before = peak_rss_mib(pid);

    // 800 commands of 500 KiB each (400 MB in all), 64 in flight at a time.
    let client = async_nats::connect(server.url()).await.unwrap();
    let padding = "x".repeat(500 * 1024);
    let replies: Vec<bool> = futures_util::stream::iter(0..800)
        .map(|n| {
            let client = client.clone();
            let body = format!(
                r#"{{"command_id":"flood-{n}","commandType":"BASH_EXEC","command":"sleep 1","description":"{padding}"}}"#
            );
            async move {
                let reply = client
                    .request("cmdr.commands.flood.BASH_EXEC", body.into())
                    .await
                    .unwrap();
                let accepted: serde_json::Value = serde_json::from_slice(&reply.payload).unwrap();
                accepted["busy"].as_bool().unwrap_or(false)
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let busy = replies.iter().filter(|b| **b).count();
    let peak = peak_rss_mib(pid);
    assert!(busy > 600, "the worker took {} of 800", 800 - busy);
    assert!(
        peak < before + 100,
        "the worker's peak memory grew from {before} to {peak} MiB"
    );
    eprintln!(
        "flood: {} accepted, {busy} busy; worker peak RSS {before} -> {peak} MiB",
        800 - busy
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_told_busy_try_again_and_every_command_runs() {
    let server = NatsServer::start();
    let options = cmdr::nats::worker::WorkerOptions {
        jobs: 1,
        max_queued: 1,
        ..Default::default()
    };
    let worker = Worker::start_with(&server, None, options).await;
    let producer = producer(&server).await;
    let runs = (0..4).map(|n| {
        let producer = producer.clone();
        async move {
            let json = format!(
                r#"{{"command_id":"busy-{n}","commandType":"BASH_EXEC","command":"sleep 0.3; echo done-{n}"}}"#
            );
            let command = cmdr_executors::decode_command(&json).unwrap();
            let stream = producer.submit(command).await.unwrap();
            collect(stream).await
        }
    });
    let results = futures_util::future::join_all(runs).await;
    for (n, messages) in results.iter().enumerate() {
        let end = messages.last().unwrap();
        assert_eq!(
            end.status,
            cmdr_executors::ExecutionStatus::Succeeded,
            "{messages:#?}"
        );
        assert!(crate::data(messages).contains(&format!("done-{n}")));
    }
    worker.stop().await;
}

/// Issue 32.8: a command asking for a longer `timeout_ms` than the worker's
/// `max_timeout` (one that would hold a job for ever) is refused with `INVALID_INPUT`
/// and never runs; one within the cap runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_with_a_timeout_above_the_workers_cap_is_refused() {
    let server = NatsServer::start();
    let options = cmdr::nats::worker::WorkerOptions {
        jobs: 1,
        max_timeout: std::time::Duration::from_secs(60),
        ..Default::default()
    };
    let worker = Worker::start_with(&server, None, options).await;
    let producer = producer(&server).await;
    let marker = tempfile::tempdir().unwrap();
    let ran = marker.path().join("ran");
    let json = format!(
        r#"{{"command_id":"forever","commandType":"BASH_EXEC","timeout_ms":86400000,"command":"touch {}; sleep 100000"}}"#,
        ran.display()
    );
    let command = cmdr_executors::decode_command(&json).unwrap();
    let messages = collect(producer.submit(command).await.unwrap()).await;
    let end = messages.last().unwrap();
    assert_eq!(
        end.status,
        cmdr_executors::ExecutionStatus::Failed,
        "{messages:#?}"
    );
    assert_eq!(
        end.error_code.as_deref(),
        Some("INVALID_INPUT"),
        "{messages:#?}"
    );
    assert!(end.error.contains("--max-timeout-ms"), "{messages:#?}");
    assert!(!ran.exists(), "the refused command ran");
    let json = r#"{"command_id":"within","commandType":"BASH_EXEC","timeout_ms":60000,"command":"echo within"}"#;
    let command = cmdr_executors::decode_command(json).unwrap();
    let messages = collect(producer.submit(command).await.unwrap()).await;
    assert!(crate::data(&messages).contains("within"), "{messages:#?}");
    worker.stop().await;
}

/// Issue 32.8: one producer's commands that never end hold at most its share of a
/// worker's jobs (`jobs - 1` by default), so another producer's command still starts at
/// once instead of waiting behind them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_producer_cannot_hold_every_job() {
    let server = NatsServer::start();
    let options = cmdr::nats::worker::WorkerOptions {
        jobs: 3,
        ..Default::default()
    };
    let worker = Worker::start_with(&server, None, options).await;
    let flood = producer(&server).await.with_id("flood").unwrap();
    let mut held = Vec::new();
    for n in 0..6 {
        let json = format!(
            r#"{{"command_id":"forever-{n}","commandType":"BASH_EXEC","command":"sleep 100000"}}"#
        );
        let command = cmdr_executors::decode_command(&json).unwrap();
        held.push(flood.submit(command).await.unwrap());
    }
    let other = producer(&server).await.with_id("other").unwrap();
    let command = cmdr_executors::decode_command(
        r#"{"command_id":"quick","commandType":"BASH_EXEC","command":"echo through"}"#,
    )
    .unwrap();
    let results = tokio::time::timeout(PATIENCE, async {
        collect(other.submit(command).await.unwrap()).await
    })
    .await
    .expect("the other producer's command waited behind the flood");
    assert_eq!(crate::data(&results), "through\n", "{results:?}");
    drop(held);
    worker.stop().await;
}

/// Issue 32.8: a command that asks for no deadline gets the worker's `max_timeout` as
/// its deadline, so it cannot hold a job for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_without_a_timeout_ends_at_the_workers_cap() {
    let server = NatsServer::start();
    let options = cmdr::nats::worker::WorkerOptions {
        jobs: 1,
        max_timeout: std::time::Duration::from_millis(1500),
        ..Default::default()
    };
    let worker = Worker::start_with(&server, None, options).await;
    let producer = producer(&server).await;
    let json = r#"{"command_id":"no-deadline","commandType":"BASH_EXEC","command":"echo started; sleep 100000"}"#;
    let command = cmdr_executors::decode_command(json).unwrap();
    let messages = tokio::time::timeout(PATIENCE, async {
        collect(producer.submit(command).await.unwrap()).await
    })
    .await
    .expect("a command without a deadline held the job past the cap");
    let end = messages.last().unwrap();
    assert_eq!(
        end.status,
        cmdr_executors::ExecutionStatus::Failed,
        "{messages:#?}"
    );
    assert_eq!(end.error_code.as_deref(), Some("TIMEOUT"), "{messages:#?}");
    assert!(crate::data(&messages).contains("started"), "{messages:#?}");
    worker.stop().await;
}
