//! `cmdr worker` and `cmdr submit` as real processes: the README's walk-through, and a
//! worker stopped with SIGTERM mid-command still publishing its terminal result.

use std::io::Write;
use std::process::Command;

use cmdr_executors::{ExecutionStatus, OutputResult};
use futures_util::StreamExt;

use super::{NatsServer, WorkerProcess};

fn results(stdout: &[u8]) -> Vec<OutputResult> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_and_a_jsonl_file_of_commands() {
    let server = NatsServer::start();
    let _a = WorkerProcess::start(&server).await;
    let _b = WorkerProcess::start(&server).await;
    let mut file = tempfile::NamedTempFile::new().unwrap();
    for i in 0..20 {
        writeln!(
            file,
            r#"{{"command_id":"f{i}","commandType":"BASH_EXEC","command":"echo {i}"}}"#
        )
        .unwrap();
    }
    writeln!(file, "not json").unwrap();
    let url = server.url();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(assert_cmd::cargo::cargo_bin("cmdr"))
            .args(["submit", "--nats", &url, "--jobs", "8", "--combine"])
            .arg(file.path())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "the malformed line fails the run"
    );
    let results = results(&out.stdout);
    assert_eq!(results.len(), 21);
    for i in 0..20 {
        let r = results
            .iter()
            .find(|r| r.command_id == format!("f{i}"))
            .unwrap();
        assert_eq!(
            (r.status, r.result_data.as_str()),
            (ExecutionStatus::Succeeded, format!("{i}\n").as_str())
        );
    }
    assert_eq!(
        results
            .iter()
            .filter(|r| r.status == ExecutionStatus::Failed)
            .count(),
        1
    );
}

/// `cmdr submit --combine` keeps the head and tail of a long output within
/// `--max-output`, marks the cut and counts what it left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_combine_is_bounded_by_max_output() {
    let server = NatsServer::start();
    let _worker = WorkerProcess::start(&server).await;
    let url = server.url();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(assert_cmd::cargo::cargo_bin("cmdr"))
            .args([
                "submit",
                "--nats",
                &url,
                "--combine",
                "--max-output",
                "1000",
            ])
            .arg(r#"{"command_id":"long","commandType":"BASH_EXEC","command":"seq 1 100000"}"#)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let result = &results(&out.stdout)[0];
    let all: String = (1..=100000).map(|i| format!("{i}\n")).collect();
    assert!(
        result.result_data.starts_with(&all[..500]),
        "{}",
        &result.result_data[..80]
    );
    assert!(result.result_data.ends_with(&all[all.len() - 500..]));
    assert_eq!(result.truncated_bytes, Some((all.len() - 1000) as u64));
}

#[tokio::test]
async fn a_worker_stopped_mid_command_publishes_the_terminal_result_and_exits() {
    let server = NatsServer::start();
    let mut worker = WorkerProcess::start(&server).await;
    let producer = super::producer(&server).await;
    let c = cmdr_executors::decode_command(
        r#"{"command_id":"stop-1","commandType":"BASH_EXEC","command":"echo started; sleep 1000"}"#,
    )
    .unwrap();
    let mut stream = producer.submit(c).await.unwrap();
    let first = stream.next().await.unwrap();
    assert_eq!(first.result_data, "started\n");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let rest = super::collect(stream).await;
    assert_eq!(
        super::terminal(&rest).error_code.as_deref(),
        Some("SHUTTING_DOWN")
    );
    let status = tokio::task::spawn_blocking(move || worker.0.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success());
}
