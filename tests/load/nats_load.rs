//! 1,000 commands through a private nats-server to two real `cmdr worker` processes:
//! each ends with exactly one terminal result, both workers take a share, and every
//! result says which worker produced it (each worker runs in its own folder, and the
//! commands use relative paths and report their working directory).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use cmdr::nats::producer::Producer;
use cmdr_executors::{decode_command, ExecutionStatus, OutputResult};
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::nats_server::NatsServer;

/// Commands sent.
const COMMANDS: usize = 1_000;
use cmdr_test_support::LOAD_PATIENCE as PATIENCE;

/// A `cmdr worker` process in its own folder; killed when dropped.
struct WorkerProcess {
    _child: Child,
    dir: PathBuf,
}

impl WorkerProcess {
    /// Starts a worker in `dir` (marked with `who.txt` = `name`) and waits until it
    /// announces that it serves.
    async fn start(server: &NatsServer, dir: &Path, name: &str) -> WorkerProcess {
        std::fs::write(dir.join("who.txt"), name).unwrap();
        std::fs::write(dir.join(format!("{name}.marker")), "").unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_cmdr"))
            .args(["worker", "--nats", &server.url(), "--grace-secs", "0"])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                .await
                .expect("the worker announces itself")
                .unwrap()
                .expect("the worker is still running");
            if line.contains("serving") {
                break;
            }
        }
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let probe = async_nats::connect(server.url()).await.unwrap();
        server.wait_for_subscribers(&probe).await;
        WorkerProcess {
            _child: child,
            dir: dir.to_owned(),
        }
    }
}

/// Command `i`: `BASH_EXEC`, `FILE_READ`, `LIST_DIRECTORY` or `FILE_WRITE`, each with
/// paths relative to the worker's folder.
fn command(i: usize) -> Value {
    let id = format!("n{i}");
    let mut command = match i % 4 {
        0 => json!({"commandType": "BASH_EXEC", "command": format!("echo {id}")}),
        1 => json!({"commandType": "FILE_READ", "file_path": "who.txt"}),
        2 => json!({"commandType": "LIST_DIRECTORY", "path": "."}),
        _ => json!({
            "commandType": "FILE_WRITE", "file_path": format!("out/{id}.txt"),
            "content": id, "create_dirs": true
        }),
    };
    command["command_id"] = json!(id);
    command
}

/// Which worker ran command `i`, from its results; `Err` when they are wrong.
fn worker_of(
    i: usize,
    messages: &[OutputResult],
    workers: &[WorkerProcess],
) -> Result<String, String> {
    let id = format!("n{i}");
    let terminals = messages.iter().filter(|m| m.status.is_terminal()).count();
    let last = messages.last().ok_or(format!("{id}: no result"))?;
    if terminals != 1 || !last.status.is_terminal() || last.status != ExecutionStatus::Succeeded {
        return Err(format!("{id}: {terminals} terminals, last {last:?}"));
    }
    if messages.iter().any(|m| m.command_id != id) {
        return Err(format!("{id}: a foreign message"));
    }
    let data: String = messages.iter().map(|m| m.result_data.as_str()).collect();
    let name = |dir: &Path| std::fs::read_to_string(dir.join("who.txt")).unwrap();
    let found = workers.iter().find(|w| match i % 4 {
        0 => {
            data == format!("{id}\n") && last.final_cwd.as_deref() == Some(w.dir.to_str().unwrap())
        }
        1 => data == name(&w.dir),
        2 => data.contains(&format!("{}.marker", name(&w.dir))),
        _ => std::fs::read_to_string(w.dir.join(format!("out/{id}.txt"))).ok() == Some(id.clone()),
    });
    found
        .map(|w| name(&w.dir))
        .ok_or(format!("{id}: no worker matches {data:?} / {last:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_commands_over_two_worker_processes_each_end_once() {
    let server = NatsServer::start();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let workers = [
        WorkerProcess::start(&server, a.path(), "worker-a").await,
        WorkerProcess::start(&server, b.path(), "worker-b").await,
    ];
    let producer = Producer::new(async_nats::connect(server.url()).await.unwrap());

    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..COMMANDS {
        let producer = producer.clone();
        tasks.spawn(async move {
            let command = decode_command(&command(i).to_string()).unwrap();
            let mut stream = producer.submit(command).await.unwrap();
            let mut messages = Vec::new();
            while let Some(message) = stream.next().await {
                messages.push(message);
            }
            (i, messages)
        });
    }
    let mut results = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        while let Some(joined) = tasks.join_next().await {
            results.push(joined.unwrap());
        }
    })
    .await
    .expect("every command ends in time");
    let elapsed = started.elapsed();

    let mut by_worker = HashMap::<String, usize>::new();
    let mut failures = Vec::new();
    for (i, messages) in &results {
        match worker_of(*i, messages, &workers) {
            Ok(worker) => *by_worker.entry(worker).or_default() += 1,
            Err(e) => failures.push(e),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
    assert_eq!(results.len(), COMMANDS);
    assert_eq!(by_worker.values().sum::<usize>(), COMMANDS);
    assert_eq!(
        by_worker.len(),
        2,
        "both workers took commands: {by_worker:?}"
    );
    eprintln!(
        "nats load: {COMMANDS} commands over 2 worker processes in {:.2} s ({:.0}/s); split {by_worker:?}",
        elapsed.as_secs_f64(),
        COMMANDS as f64 / elapsed.as_secs_f64()
    );
}
