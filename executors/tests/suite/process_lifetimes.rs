//! A background process's lifetime (docs/processes.md): `timeout_ms` on a background
//! start stops the process's whole tree that long after its start (SIGTERM, then SIGKILL
//! after a grace), and every report on it says so (`TIMEOUT`); while it runs, its reads
//! say when its lifetime ends. The start itself is not cut short by it.

use std::time::{Duration, Instant};

use cmdr_executors::{ExecutionStatus, OutputResult, Registry};
use serde_json::{json, Value};

use cmdr_test_support::http::gone;

use super::processes::one;
use super::PATIENCE;

/// Long-polls `id` until it has exited: the last read.
async fn until_exited(registry: &Registry, id: &str) -> OutputResult {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let read = one(
            registry,
            json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "wait_ms": 5000}),
        )
        .await;
        if read.process_state.as_deref() == Some("exited") {
            return read;
        }
        assert!(
            Instant::now() < deadline,
            "{id} outlived its lifetime: {read:?}"
        );
    }
}

#[tokio::test]
async fn a_background_process_and_its_tree_stop_at_the_end_of_their_lifetime() {
    let registry = Registry::with_defaults();
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("child.pid");
    let script = format!("sleep 60 & echo $! > {}; echo up; wait", pid_file.display());
    let started = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": script, "background": true,
               "timeout_ms": 1000, "ready": {"output": "up"}}),
    )
    .await;
    assert_eq!(started.status, ExecutionStatus::Succeeded, "{started:?}");
    assert!(
        started.message.contains("lifetime ends in"),
        "{}",
        started.message
    );
    let id = started.process_id.clone().expect("a process id");
    let child = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_owned();
    let ended = until_exited(&registry, &id).await;
    assert_eq!(ended.error_code.as_deref(), Some("TIMEOUT"), "{ended:?}");
    assert!(ended.message.contains("lifetime"), "{}", ended.message);
    assert!(ended.exited_at.is_some());
    let child: i32 = child.parse().unwrap();
    super::eventually("the tree's child dies with it", || gone(child)).await;
    let list = one(&registry, json!({"commandType": "PROCESS_LIST"})).await;
    let entries: Vec<Value> = serde_json::from_str(&list.result_data).unwrap();
    assert_eq!(entries[0]["errorCode"], "TIMEOUT", "{entries:?}");
}

#[tokio::test]
async fn a_process_that_ignores_sigterm_is_killed_after_the_grace() {
    let registry = Registry::with_defaults();
    let started = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": "trap '' TERM; echo up; while :; do sleep 1; done",
               "background": true, "timeout_ms": 300, "ready": {"output": "up"}}),
    )
    .await;
    let id = started.process_id.clone().expect("a process id");
    let ended = until_exited(&registry, &id).await;
    assert_eq!(ended.error_code.as_deref(), Some("TIMEOUT"), "{ended:?}");
    assert_eq!(ended.signal.as_deref(), Some("KILL"), "{ended:?}");
}

/// The lifetime is the process's, not the start's: a start that waits out its `yield_ms`
/// beyond the lifetime sees the process stopped and says so, instead of failing itself.
#[tokio::test]
async fn the_start_outlasts_a_shorter_lifetime_and_reports_it() {
    let registry = Registry::with_defaults();
    let before = Instant::now();
    let started = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": "sleep 60", "background": true,
               "timeout_ms": 300, "yield_ms": 20_000}),
    )
    .await;
    assert_eq!(started.status, ExecutionStatus::Succeeded, "{started:?}");
    assert_eq!(
        started.process_state.as_deref(),
        Some("exited"),
        "{started:?}"
    );
    assert_eq!(
        started.error_code.as_deref(),
        Some("TIMEOUT"),
        "{started:?}"
    );
    assert!(
        before.elapsed() < Duration::from_secs(15),
        "the start waited out its yield instead of seeing the exit"
    );
}

/// Without `timeout_ms` a background process has no lifetime: nothing says one.
#[tokio::test]
async fn without_timeout_ms_a_process_has_no_lifetime() {
    let registry = Registry::with_defaults();
    let started = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": "sleep 60", "background": true,
               "yield_ms": 0}),
    )
    .await;
    assert!(!started.message.contains("lifetime"), "{}", started.message);
    let list = one(&registry, json!({"commandType": "PROCESS_LIST"})).await;
    let entries: Vec<Value> = serde_json::from_str(&list.result_data).unwrap();
    assert!(entries[0].get("expiresAt").is_none(), "{entries:?}");
}
