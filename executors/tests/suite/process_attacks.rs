//! Attacks on background processes by a hostile caller (a model, or a prompt injection
//! in what it reads): input nobody reads (extreme numbers are refused: `duration_caps.rs`), id aliases, trees that fork
//! wide or close their output. Each test is the attack itself, with real processes.

use std::time::Duration;

use cmdr_executors::{ExecutionStatus, OutputResult, Registry, Scope};
use serde_json::{json, Value};

use cmdr_test_support::http::gone;
use cmdr_test_support::results::run_in;

use super::{assert_failed, eventually, terminal, PATIENCE};

async fn one(registry: &Registry, json: Value) -> OutputResult {
    one_in(registry, &Scope::default(), json).await
}

async fn one_in(registry: &Registry, scope: &Scope, json: Value) -> OutputResult {
    let run = run_in(registry, scope.clone(), json.clone());
    let messages = tokio::time::timeout(PATIENCE, run)
        .await
        .unwrap_or_else(|_| panic!("no terminal result within {PATIENCE:?} for {json}"));
    terminal(&messages).clone()
}

/// Starts `script` in the background; its process id.
async fn start(registry: &Registry, script: &str) -> String {
    let end = one(
        registry,
        json!({"commandType": "BASH_EXEC", "command": script, "background": true, "yield_ms": 100}),
    )
    .await;
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:#?}");
    end.process_id.expect("a process id")
}

/// The pids a process wrote, one per line, once `count` are there.
async fn pids_of(registry: &Registry, id: &str, count: usize) -> Vec<i32> {
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let pids: Vec<i32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        if pids.len() >= count {
            return pids;
        }
        assert!(tokio::time::Instant::now() < deadline, "{text:?}");
        let read = one(
            registry,
            json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "offset": 0, "max_bytes": 4_000_000, "wait_ms": 200}),
        )
        .await;
        text = read.result_data;
    }
}

/// Input a process never reads fills its pipe: the write gives up when the yield is over
/// (saying how much went in) instead of holding the process's input for ever, so later
/// input and a kill still work.
#[tokio::test]
async fn input_nobody_reads_does_not_wedge_the_process() {
    let registry = Registry::with_defaults();
    let id = start(&registry, "exec sleep 300").await;
    let flood = "y".repeat(4 * 1024 * 1024);
    let reply = one(
        &registry,
        json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": flood, "yield_ms": 300}),
    )
    .await;
    assert_failed(&reply, "INPUT_BLOCKED");
    assert!(reply.error.contains("not reading"), "{reply:#?}");
    // The next input is not stuck behind the first one.
    let again = one(
        &registry,
        json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": "more\n", "yield_ms": 100}),
    )
    .await;
    assert_failed(&again, "INPUT_BLOCKED");
    let kill = one(
        &registry,
        json!({"commandType": "PROCESS_KILL", "process_id": id, "signal": "KILL"}),
    )
    .await;
    assert_eq!(kill.status, ExecutionStatus::Succeeded, "{kill:#?}");
    registry.shutdown(Duration::from_secs(1)).await;
}

/// The same on a terminal, whose input queue fills as a pipe does.
#[tokio::test]
async fn input_nobody_reads_does_not_wedge_a_terminal() {
    let registry = Registry::with_defaults();
    let end = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": "stty raw -echo; exec sleep 300", "background": true, "tty": true, "yield_ms": 300}),
    )
    .await;
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:#?}");
    let id = end.process_id.expect("a process id");
    let flood = "y".repeat(4 * 1024 * 1024);
    let reply = one(
        &registry,
        json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": flood, "yield_ms": 300}),
    )
    .await;
    assert_failed(&reply, "INPUT_BLOCKED");
    let kill = one(
        &registry,
        json!({"commandType": "PROCESS_KILL", "process_id": id, "signal": "KILL"}),
    )
    .await;
    assert_eq!(kill.status, ExecutionStatus::Succeeded, "{kill:#?}");
    registry.shutdown(Duration::from_secs(1)).await;
}

/// A process that reads its input slowly still gets all of it when it keeps reading.
#[tokio::test]
async fn input_read_slowly_arrives_whole() {
    let registry = Registry::with_defaults();
    let id = start(&registry, "sleep 0.3; wc -c").await;
    let input = "z".repeat(1024 * 1024);
    let reply = one(
        &registry,
        json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": input, "close_stdin": true, "yield_ms": 20000}),
    )
    .await;
    assert_eq!(reply.status, ExecutionStatus::Succeeded, "{reply:#?}");
    assert_eq!(reply.result_data.trim(), "1048576");
    registry.shutdown(Duration::from_secs(1)).await;
}

/// Only the canonical `p<N>` names a process: `p01`, `p+1`, ` p1`, `P1`, a huge number
/// are unknown ids, not aliases of `p1`.
#[tokio::test]
async fn process_ids_have_one_spelling() {
    let registry = Registry::with_defaults();
    let id = start(&registry, "sleep 60").await;
    assert_eq!(id, "p1");
    for alias in [
        "p01",
        "p+1",
        " p1",
        "p1 ",
        "P1",
        "p١",
        "p",
        "p18446744073709551617",
        "p99999999999999999999999",
    ] {
        let read = one(
            &registry,
            json!({"commandType": "PROCESS_OUTPUT", "process_id": alias}),
        )
        .await;
        assert_failed(&read, "PROCESS_NOT_FOUND");
    }
    registry.shutdown(Duration::from_secs(1)).await;
}

/// A background shell that starts hundreds of children is one process (the limit does
/// not see them), and its kill takes every one of them, `setsid` ones included.
#[tokio::test]
async fn a_shell_that_forks_hundreds_of_children_is_killed_whole() {
    let registry = Registry::with_defaults();
    let id = start(
        &registry,
        "for i in $(seq 100); do sleep 300 & echo $!; setsid sleep 300 & echo $!; done; wait",
    )
    .await;
    let pids = pids_of(&registry, &id, 200).await;
    let kill = one(
        &registry,
        json!({"commandType": "PROCESS_KILL", "process_id": id, "grace_ms": 500}),
    )
    .await;
    assert_eq!(kill.status, ExecutionStatus::Succeeded, "{kill:#?}");
    eventually("every child gone", || pids.iter().all(|p| gone(*p))).await;
    registry.shutdown(Duration::from_secs(1)).await;
}

/// A process that closes its output but lives on is still running, listed and killable.
#[tokio::test]
async fn a_process_that_closes_its_output_is_still_killable() {
    let registry = Registry::with_defaults();
    let id = start(&registry, "echo $$; exec >&- 2>&-; exec sleep 300").await;
    let pids = pids_of(&registry, &id, 1).await;
    let read = one(
        &registry,
        json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "wait_ms": 300}),
    )
    .await;
    assert_eq!(read.process_state.as_deref(), Some("running"), "{read:#?}");
    let kill = one(
        &registry,
        json!({"commandType": "PROCESS_KILL", "process_id": id}),
    )
    .await;
    assert_eq!(kill.status, ExecutionStatus::Succeeded, "{kill:#?}");
    eventually("the shell gone", || gone(pids[0])).await;
    registry.shutdown(Duration::from_secs(1)).await;
}

/// A process that writes no newline, invalid UTF-8 and escape floods: output stays
/// bounded per read, valid text, offsets exact.
#[tokio::test]
async fn output_without_newlines_or_valid_utf8_reads_back_bounded() {
    let registry = Registry::with_defaults();
    let id = start(
        &registry,
        "head -c 300000 /dev/zero | tr '\\0' '\\377'; printf '\\033[2J\\033]0;pwned\\007'; head -c 100000 /dev/zero | tr '\\0' 'a'",
    )
    .await;
    let mut offset = 0u64;
    let mut chars = 0usize;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        assert!(tokio::time::Instant::now() < deadline);
        let read = one(
            &registry,
            json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "offset": offset, "max_bytes": 65536, "wait_ms": 200}),
        )
        .await;
        assert_eq!(read.status, ExecutionStatus::Succeeded, "{read:#?}");
        let next = read.next_offset.unwrap();
        assert!(next - offset <= 65536, "{offset} → {next}");
        chars += read.result_data.chars().count();
        offset = next;
        if offset >= 400_014 && read.process_state.as_deref() == Some("exited") {
            break;
        }
    }
    // Every invalid byte became one U+FFFD; everything else came through as it was.
    assert_eq!(offset, 300_000 + 14 + 100_000);
    assert_eq!(chars, 300_000 + 14 + 100_000);
    registry.shutdown(Duration::from_secs(1)).await;
}

/// A process that closed its stdin but lives on is not reported as exited.
#[tokio::test]
async fn input_to_a_process_that_closed_its_stdin_says_so() {
    let registry = Registry::with_defaults();
    let id = start(&registry, "exec 0<&-; exec sleep 300").await;
    let reply = one(
        &registry,
        json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": "hello\n", "yield_ms": 100}),
    )
    .await;
    assert_failed(&reply, "INVALID_INPUT");
    assert!(reply.error.contains("closed its input"), "{reply:#?}");
    registry.shutdown(Duration::from_secs(1)).await;
}
