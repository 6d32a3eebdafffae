//! Every duration a client gives has a cap (docs/contract.md §3): beyond it the command
//! is refused `INVALID_INPUT` naming the cap, at once, instead of overflowing the clock
//! arithmetic it feeds or waiting for ever; at the cap it is accepted.

use cmdr_executors::{ExecutionStatus, Registry, MAX_GRACE_MS, MAX_TIMEOUT_MS, MAX_WAIT_MS};
use serde_json::{json, Value};

use super::processes::one;

async fn refused(registry: &Registry, command: Value, field: &str) {
    let result = one(registry, command.clone()).await;
    assert_eq!(
        result.status,
        ExecutionStatus::Failed,
        "{command}: {result:?}"
    );
    assert_eq!(
        result.error_code.as_deref(),
        Some("INVALID_INPUT"),
        "{result:?}"
    );
    assert!(result.error.contains(field), "{command}: {}", result.error);
    assert!(result.error.contains("at most"), "{}", result.error);
}

#[tokio::test]
async fn durations_beyond_their_caps_are_refused_at_once() {
    let registry = Registry::with_defaults();
    for huge in [MAX_TIMEOUT_MS + 1, u64::MAX] {
        refused(
            &registry,
            json!({"commandType": "BASH_EXEC", "command": "true", "timeout_ms": huge}),
            "timeout_ms",
        )
        .await;
        refused(&registry, json!({"commandType": "BASH_EXEC", "command": "sleep 60", "background": true, "timeout_ms": huge}), "timeout_ms").await;
        refused(
            &registry,
            json!({"commandType": "FILE_READ", "file_path": "/etc/hostname", "timeout_ms": huge}),
            "timeout_ms",
        )
        .await;
        refused(&registry, json!({"commandType": "BASH_EXEC", "command": "sleep 60", "background": true, "ready": {"output": "x", "timeout_ms": huge}}), "ready.timeout_ms").await;
    }
    for huge in [MAX_WAIT_MS + 1, u64::MAX] {
        refused(&registry, json!({"commandType": "BASH_EXEC", "command": "true", "background": true, "yield_ms": huge}), "yield_ms").await;
        refused(
            &registry,
            json!({"commandType": "PROCESS_OUTPUT", "process_id": "p1", "wait_ms": huge}),
            "wait_ms",
        )
        .await;
        refused(&registry, json!({"commandType": "PROCESS_INPUT", "process_id": "p1", "input": "x", "yield_ms": huge}), "yield_ms").await;
    }
    for huge in [MAX_GRACE_MS + 1, u64::MAX] {
        refused(
            &registry,
            json!({"commandType": "PROCESS_KILL", "process_id": "p1", "grace_ms": huge}),
            "grace_ms",
        )
        .await;
    }
}

/// A kill asking for the longest grace still ends: the process that ignores SIGTERM is
/// killed when the grace is over, and one that obeys ends at once.
#[tokio::test]
async fn a_kill_with_the_longest_grace_ends_with_the_process() {
    let registry = Registry::with_defaults();
    let started = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": "sleep 60", "background": true,
               "yield_ms": 0, "timeout_ms": MAX_TIMEOUT_MS}),
    )
    .await;
    assert_eq!(started.status, ExecutionStatus::Succeeded, "{started:?}");
    let id = started.process_id.expect("a process id");
    let killed = one(
        &registry,
        json!({"commandType": "PROCESS_KILL", "process_id": id, "grace_ms": MAX_GRACE_MS}),
    )
    .await;
    assert_eq!(killed.status, ExecutionStatus::Succeeded, "{killed:?}");
    assert_eq!(killed.process_state.as_deref(), Some("exited"));
}
