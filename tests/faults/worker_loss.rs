//! A core-mode worker SIGKILLed while it holds commands: nothing will ever publish their
//! terminal results, so the producer must notice and end each stream itself, with
//! exactly one `FAILED`/`WORKER_LOST` terminal — not wait for ever.

use std::time::{Duration, Instant};

use cmdr_executors::{decode_command, ExecutionStatus};
use serde_json::json;

use crate::nats_server::NatsServer;
use crate::workers::{producer, submit_running, Orphans, WorkerProcess};
use crate::{collect, data};

fn sleeper_command(id: &str, orphans: &Orphans) -> String {
    json!({"command_id": id, "commandType": "BASH_EXEC", "command": format!("echo started; {}", orphans.sleeper())})
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_whose_worker_is_sigkilled_gets_worker_lost() {
    let server = NatsServer::start();
    let orphans = Orphans::new();
    let mut worker = WorkerProcess::start(&server).await;
    let producer = producer(&server).await;
    let (first, stream) = submit_running(&producer, &sleeper_command("lost-1", &orphans)).await;
    assert_eq!(first.result_data, "started\n");
    let killed = Instant::now();
    worker.kill();
    let rest = collect(stream).await;
    let end = rest.last().unwrap();
    assert_eq!(end.status, ExecutionStatus::Failed, "{rest:#?}");
    assert_eq!(end.error_code.as_deref(), Some("WORKER_LOST"), "{end:?}");
    assert_eq!(end.command_id, "lost-1");
    assert!(end.error.contains("worker"), "{end:?}");
    assert_eq!(data(&rest), "", "nothing else arrived: {rest:#?}");
    assert!(
        killed.elapsed() < Duration::from_secs(10),
        "noticed within a few checks, not after a long timeout: {:?}",
        killed.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_and_queued_commands_of_a_killed_worker_each_end_once() {
    let server = NatsServer::start();
    let orphans = Orphans::new();
    let mut worker =
        WorkerProcess::start_with(&server, &["--jobs", "2", "--jobs-per-producer", "2"]).await;
    let producer = producer(&server).await;
    let mut streams = Vec::new();
    for i in 0..5 {
        let command = decode_command(&sleeper_command(&format!("q-{i}"), &orphans)).unwrap();
        streams.push(producer.submit(command).await.unwrap());
    }
    // Two run (their pids are recorded), three wait in the worker's queue.
    crate::http_support::eventually("two commands run", async || orphans.pids().len() == 2).await;
    worker.kill();
    for stream in streams {
        let messages = collect(stream).await;
        let end = messages.last().unwrap();
        assert_eq!(end.error_code.as_deref(), Some("WORKER_LOST"), "{end:?}");
    }
    assert_eq!(orphans.pids().len(), 2, "the queued ones never started");
}
