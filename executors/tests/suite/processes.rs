//! Background processes (docs/processes.md) through a real registry and real processes:
//! start, read from offsets, input, kill (whole trees, processes that ignore SIGTERM),
//! list, limits, retention, bad ids, and shutdown.

use std::time::Duration;

use cmdr_executors::{
    ExecutionStatus, OutputResult, ProcessLimits, Registry, RegistryConfig, Scope,
};
use serde_json::{json, Value};

use cmdr_test_support::http::gone;

use super::{assert_failed, eventually, run, terminal, PATIENCE};

async fn start(registry: &Registry, script: &str) -> (String, Vec<OutputResult>) {
    let messages = run(
        registry,
        json!({"commandType": "BASH_EXEC", "command": script, "background": true, "yield_ms": 100}),
    )
    .await;
    let end = terminal(&messages).clone();
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:#?}");
    let id = end.process_id.clone().expect("a process id");
    (id, messages)
}

pub(super) async fn one(registry: &Registry, json: Value) -> OutputResult {
    terminal(&run(registry, json).await).clone()
}

/// Reads the output of `id` from `offset` until it contains `needle` (long-polling).
pub(super) async fn read_until(registry: &Registry, id: &str, needle: &str) -> String {
    let mut text = String::new();
    let mut offset = 0;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !text.contains(needle) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {needle:?} in {text:?}"
        );
        let read = one(
            registry,
            json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "offset": offset, "wait_ms": 1000}),
        )
        .await;
        assert_eq!(read.status, ExecutionStatus::Succeeded, "{read:#?}");
        text.push_str(&read.result_data);
        offset = read.next_offset.unwrap();
    }
    text
}

#[tokio::test]
async fn a_background_process_keeps_running_and_its_output_is_read_by_offset() {
    let registry = Registry::with_defaults();
    let (id, _) = start(
        &registry,
        "echo started; while sleep 0.05; do echo tick; done",
    )
    .await;
    assert_eq!(id, "p1");
    let text = read_until(&registry, &id, "tick\ntick\n").await;
    assert!(text.starts_with("started\n"), "{text}");
    // Offsets are stable: reading from 0 again gives the same start.
    let again = one(
        &registry,
        json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "offset": 0, "max_bytes": 8}),
    )
    .await;
    assert_eq!(again.result_data, "started\n");
    assert_eq!(again.next_offset, Some(8));
    assert_eq!(again.process_state.as_deref(), Some("running"));
    // Without an offset, a read goes on where the last one stopped.
    let next = one(
        &registry,
        json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "max_bytes": 5}),
    )
    .await;
    assert_eq!(next.result_data, "tick\n");
    let killed = one(
        &registry,
        json!({"commandType": "PROCESS_KILL", "process_id": id}),
    )
    .await;
    assert_eq!(killed.status, ExecutionStatus::Succeeded, "{killed:#?}");
    assert_eq!(killed.process_state.as_deref(), Some("exited"));
}

#[tokio::test]
async fn input_reaches_the_process_and_its_reply_comes_back() {
    let registry = Registry::with_defaults();
    let (id, _) = start(
        &registry,
        "read -r -p 'Proceed? [y/N] ' answer; echo \"answer=$answer\"",
    )
    .await;
    let reply = one(
        &registry,
        json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": "y\n", "yield_ms": 30000}),
    )
    .await;
    assert_eq!(reply.status, ExecutionStatus::Succeeded, "{reply:#?}");
    // The process exits after answering: the input returns then, with the reply.
    assert!(reply.result_data.contains("answer=y"), "{reply:#?}");
    assert_eq!(reply.process_state.as_deref(), Some("exited"));
    assert_eq!(reply.exit_code, Some(0));
    let late = one(
        &registry,
        json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": "more\n"}),
    )
    .await;
    assert_failed(&late, "PROCESS_EXITED");
}

#[tokio::test]
async fn closing_stdin_gives_the_process_end_of_file() {
    let registry = Registry::with_defaults();
    let (id, _) = start(&registry, "wc -l").await;
    let reply = one(
        &registry,
        json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": "a\nb\nc\n", "close_stdin": true, "yield_ms": 30000}),
    )
    .await;
    assert_eq!(reply.result_data.trim(), "3", "{reply:#?}");
    assert_eq!(reply.process_state.as_deref(), Some("exited"));
}

#[tokio::test]
async fn kill_takes_the_whole_tree_even_what_ignores_sigterm_or_left_the_group() {
    let registry = Registry::with_defaults();
    let (id, _) = start(
        &registry,
        "trap '' TERM; setsid sleep 300 & echo \"child=$!\"; while :; do sleep 0.05; done",
    )
    .await;
    let text = read_until(&registry, &id, "\n").await;
    let child: i32 = text
        .trim()
        .strip_prefix("child=")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    let killed = one(
        &registry,
        json!({"commandType": "PROCESS_KILL", "process_id": id, "grace_ms": 200}),
    )
    .await;
    assert_eq!(killed.status, ExecutionStatus::Succeeded, "{killed:#?}");
    assert!(
        killed.message.contains("signal 9"),
        "SIGTERM was ignored: {killed:#?}"
    );
    eventually("the setsid child is gone", || gone(child)).await;
}

#[tokio::test]
async fn the_list_shows_every_process_with_its_state() {
    let registry = Registry::with_defaults();
    let (running, _) = start(&registry, "sleep 60").await;
    let (done, _) = start(&registry, "exit 3").await;
    eventually("the second one exits", || {
        registry
            .processes()
            .get(&Scope::default(), &done)
            .unwrap()
            .state()
            .name()
            == "exited"
    })
    .await;
    let list = one(&registry, json!({"commandType": "PROCESS_LIST"})).await;
    let entries: Vec<Value> = serde_json::from_str(&list.result_data).unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["processId"], running.as_str());
    assert_eq!(entries[0]["state"], "running");
    assert_eq!(entries[0]["command"], "sleep 60");
    assert!(entries[0]["pid"].as_u64().is_some());
    assert_eq!(entries[1]["state"], "exited");
    assert_eq!(entries[1]["exitCode"], 3);
    registry.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn unknown_ids_bad_fields_and_the_process_limit_are_clear_errors() {
    let config = RegistryConfig {
        processes: ProcessLimits {
            max_running: 2,
            ..ProcessLimits::default()
        },
        ..RegistryConfig::default()
    };
    let registry = Registry::with_config(config);
    for json in [
        json!({"commandType": "PROCESS_OUTPUT", "process_id": "p999"}),
        json!({"commandType": "PROCESS_INPUT", "process_id": "nope", "input": "x"}),
        json!({"commandType": "PROCESS_KILL", "process_id": "../p1"}),
    ] {
        assert_failed(&one(&registry, json).await, "PROCESS_NOT_FOUND");
    }
    start(&registry, "sleep 60").await;
    let (id, _) = start(&registry, "sleep 60").await;
    let third = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": "sleep 60", "background": true}),
    )
    .await;
    assert_failed(&third, "TOO_MANY_PROCESSES");
    let empty = one(
        &registry,
        json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": ""}),
    )
    .await;
    assert_failed(&empty, "INVALID_INPUT");
    let bad_signal = one(
        &registry,
        json!({"commandType": "PROCESS_KILL", "process_id": id, "signal": "USR9"}),
    )
    .await;
    assert_failed(&bad_signal, "INVALID_INPUT");
    registry.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn an_output_flood_from_100_processes_stays_bounded_and_beyond_retention_readers_are_told() {
    let limits = ProcessLimits {
        max_running: 100,
        max_running_per_scope: 100,
        log_cap: 64 * 1024,
        log_memory: 16 * 1024,
        ..ProcessLimits::default()
    };
    let registry = Registry::with_config(RegistryConfig {
        processes: limits,
        ..RegistryConfig::default()
    });
    let lines = 40_000;
    let expected: String = (1..=lines)
        .map(|n| format!("{n}\n"))
        .chain(std::iter::once("end\n".to_owned()))
        .collect();
    // All 100 wait for a line on stdin, then flood at once.
    let mut ids = Vec::new();
    for _ in 0..100 {
        let started = one(
            &registry,
            json!({"commandType": "BASH_EXEC", "command": format!("read -r _; seq 1 {lines}; echo end"),
                   "background": true, "yield_ms": 0}),
        )
        .await;
        assert_eq!(started.status, ExecutionStatus::Succeeded, "{started:#?}");
        ids.push(started.process_id.expect("a process id"));
    }
    let table = registry.processes();
    let processes: Vec<_> = ids
        .iter()
        .map(|id| table.get(&Scope::default(), id).unwrap())
        .collect();
    for id in &ids {
        let go = one(
            &registry,
            json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": "\n", "yield_ms": 0}),
        )
        .await;
        assert_eq!(go.status, ExecutionStatus::Succeeded, "{go:#?}");
    }
    // While they flood, no log holds more than its memory bound.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while processes.iter().any(|p| p.state().name() == "running") {
        assert!(tokio::time::Instant::now() < deadline, "the flood ends");
        for process in &processes {
            let log = &process.log;
            let held = log.memory_bytes();
            assert!(
                held <= log.memory() + log.memory() / 2,
                "{}: {held} bytes held in memory",
                process.id
            );
            assert!(log.disk_bytes() <= log.cap() as u64, "{}", process.id);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let kept_from = expected.len() - limits.log_cap;
    for (id, process) in ids.iter().zip(&processes) {
        assert_eq!(
            process.log.end(),
            expected.len() as u64,
            "{id}: every byte counted"
        );
        let read = one(
            &registry,
            json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "offset": 0, "max_bytes": 4096}),
        )
        .await;
        assert_eq!(read.truncated_before, Some(kept_from as u64), "{id}");
        assert_eq!(
            read.result_data,
            expected[kept_from..kept_from + 4096],
            "{id}"
        );
        // Within retention, every byte, exactly.
        let mut text = String::new();
        let mut offset = kept_from as u64;
        while offset < process.log.end() {
            let read = one(
                &registry,
                json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "offset": offset,
                       "max_bytes": 20_000}),
            )
            .await;
            assert_eq!(read.truncated_before, None, "{id}");
            text.push_str(&read.result_data);
            offset = read.next_offset.unwrap();
        }
        assert!(
            text == expected[kept_from..],
            "{id}: nothing lost within retention"
        );
    }
    registry.shutdown(Duration::from_secs(1)).await;
}

/// The device and inode of every file this test process has open.
fn open_files() -> Vec<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::metadata(e.path()).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

#[tokio::test]
async fn output_past_the_memory_threshold_is_spilled_to_disk_and_read_back_whole() {
    // Default limits: 256 KiB in memory, 16 MiB retained.
    let registry = Registry::with_defaults();
    let lines = 400_000;
    let expected: String = (1..=lines).map(|n| format!("{n}\n")).collect();
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(start(&registry, &format!("seq 1 {lines}")).await.0);
    }
    let mut spill_files = Vec::new();
    for id in &ids {
        let process = registry.processes().get(&Scope::default(), id).unwrap();
        assert_eq!(process.wait_exit(PATIENCE).await.name(), "exited");
        let log = &process.log;
        assert_eq!(log.end(), expected.len() as u64);
        assert!(
            log.disk_bytes() > 2_000_000,
            "spilled: {}",
            log.disk_bytes()
        );
        assert!(
            log.memory_bytes() <= log.memory() + log.memory() / 2,
            "memory stays bounded: {} bytes held",
            log.memory_bytes()
        );
        // Every byte, from offset 0, most of it only on disk.
        let mut text = String::new();
        let mut offset = 0;
        while offset < log.end() {
            let read = one(
                &registry,
                json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "offset": offset,
                       "max_bytes": 1_000_000}),
            )
            .await;
            assert_eq!(read.truncated_before, None, "{id}");
            text.push_str(&read.result_data);
            offset = read.next_offset.unwrap();
        }
        assert!(text == expected, "{id}: nothing lost within retention");
        spill_files.push(log.spill_file_id().expect("a spill file"));
    }
    let open = open_files();
    assert!(spill_files.iter().all(|f| open.contains(f)));
    registry.shutdown(Duration::from_secs(1)).await;
    drop(registry);
    eventually("the spill files are closed with the table", || {
        let open = open_files();
        spill_files.iter().all(|f| !open.contains(f))
    })
    .await;
}

#[tokio::test]
async fn shutdown_stops_every_background_process() {
    let registry = Registry::with_defaults();
    let (id, _) = start(&registry, "trap '' TERM; sleep 300").await;
    let pid = registry
        .processes()
        .get(&Scope::default(), &id)
        .unwrap()
        .pid
        .unwrap() as i32;
    assert!(!gone(pid));
    registry.shutdown(Duration::from_millis(100)).await;
    eventually("the process is gone", || gone(pid)).await;
}

#[tokio::test]
async fn the_start_streams_the_first_output_and_reports_a_quick_exit() {
    let registry = Registry::with_defaults();
    let messages = run(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": "echo hello; exit 4", "background": true, "yield_ms": 30000}),
    )
    .await;
    let end = terminal(&messages);
    // It exited well within the yield: the start returns then, with its output.
    let streamed: String = messages.iter().map(|m| m.result_data.as_str()).collect();
    assert_eq!(streamed, "hello\n");
    assert_eq!(end.process_state.as_deref(), Some("exited"));
    assert_eq!(end.exit_code, Some(4));
    assert_eq!(end.next_offset, Some(6));
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn a_dev_server_started_in_the_background_is_probed_until_it_answers() {
    let registry = Registry::with_defaults();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("health"), "ok").unwrap();
    let port = free_port();
    let messages = run(
        &registry,
        json!({
            "commandType": "BASH_EXEC", "background": true,
            "working_dir": dir.path(),
            "command": format!("sleep 0.3; exec python3 -m http.server {port} --bind 127.0.0.1"),
            "ready": {"http": format!("http://127.0.0.1:{port}/health"), "timeout_ms": 30000},
        }),
    )
    .await;
    let end = terminal(&messages);
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:#?}");
    assert_eq!(end.process_state.as_deref(), Some("running"));
    assert!(end.message.contains("ready"), "{end:#?}");
    // It answers a one-shot command right away.
    let curl = run(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": format!("exec 3<>/dev/tcp/127.0.0.1/{port}; printf 'GET /health HTTP/1.0\\r\\n\\r\\n' >&3; head -1 <&3")}),
    )
    .await;
    let status_line = super::data(&curl);
    assert!(status_line.contains(" 200 "), "{status_line:?}");
    let id = end.process_id.clone().unwrap();
    let killed = one(
        &registry,
        json!({"commandType": "PROCESS_KILL", "process_id": id}),
    )
    .await;
    assert_eq!(killed.process_state.as_deref(), Some("exited"));
}

#[tokio::test]
async fn readiness_by_output_by_port_and_what_happens_when_it_never_comes() {
    let registry = Registry::with_defaults();
    let by_output = run(
        &registry,
        json!({"commandType": "BASH_EXEC", "background": true,
               "command": "echo booting; sleep 0.2; echo 'Listening on 4000'; sleep 60",
               "ready": {"output": "Listening on \\d+"}}),
    )
    .await;
    let end = terminal(&by_output);
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:#?}");
    let streamed: String = by_output.iter().map(|m| m.result_data.as_str()).collect();
    assert!(streamed.contains("Listening on 4000"), "{streamed}");

    let port = free_port();
    let by_port = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "background": true,
               "command": format!("exec python3 -c 'import socket,time; s=socket.socket(); s.bind((\"127.0.0.1\",{port})); s.listen(); time.sleep(60)'"),
               "ready": {"port": port, "timeout_ms": 30000}}),
    )
    .await;
    assert_eq!(by_port.status, ExecutionStatus::Succeeded, "{by_port:#?}");

    let died = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "background": true,
               "command": "echo 'cannot bind'; exit 3",
               "ready": {"port": free_port(), "timeout_ms": 30000}}),
    )
    .await;
    assert_failed(&died, "PROCESS_EXITED");
    assert_eq!(died.exit_code, Some(3));
    assert_eq!(died.process_state.as_deref(), Some("exited"));

    let slow = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "background": true, "command": "sleep 60",
               "ready": {"port": free_port(), "timeout_ms": 300}}),
    )
    .await;
    assert_failed(&slow, "READY_TIMEOUT");
    assert_eq!(
        slow.process_state.as_deref(),
        Some("running"),
        "it still runs"
    );
    assert!(slow.process_id.is_some());

    for bad in [
        json!({"commandType": "BASH_EXEC", "command": "true", "ready": {"port": 1}}),
        json!({"commandType": "BASH_EXEC", "command": "true", "background": true, "ready": {"output": "("}}),
        json!({"commandType": "BASH_EXEC", "command": "true", "background": true, "ready": {"http": "https://x/"}}),
        json!({"commandType": "BASH_EXEC", "command": "true", "background": true, "ready": {}}),
    ] {
        assert_failed(&one(&registry, bad).await, "INVALID_INPUT");
    }
    registry.shutdown(Duration::from_secs(1)).await;
}
