//! Partial reads say they are partial (docs/processes.md): every process result carries
//! `outputBytes` (all the process has produced so far), a read cut short says how many
//! bytes follow and where to read on, and an exited process says when (`exitedAt`) and,
//! killed by a signal, which (`signal`), in its reads and in `PROCESS_LIST`.

use cmdr_executors::{ExecutionStatus, Registry};
use serde_json::{json, Value};

use super::processes::one;

/// Starts `script` in the background and waits until it has exited: its id.
async fn exited(registry: &Registry, script: &str) -> String {
    let started = one(
        registry,
        json!({"commandType": "BASH_EXEC", "command": script, "background": true,
               "yield_ms": 30_000}),
    )
    .await;
    assert_eq!(
        started.process_state.as_deref(),
        Some("exited"),
        "{started:?}"
    );
    started.process_id.expect("a process id")
}

#[tokio::test]
async fn a_read_cut_by_max_bytes_says_how_much_follows_and_when_the_process_exited() {
    let registry = Registry::with_defaults();
    let id = exited(&registry, "seq 1 20000").await;
    let total: u64 = (1..=20000)
        .map(|i: u64| i.to_string().len() as u64 + 1)
        .sum();
    let read = one(
        &registry,
        json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "offset": 0,
               "max_bytes": 1000}),
    )
    .await;
    assert_eq!(read.status, ExecutionStatus::Succeeded, "{read:?}");
    assert_eq!(read.next_offset, Some(1000));
    assert_eq!(read.output_bytes, Some(total), "{read:?}");
    let follow = format!(
        "{} more bytes follow: read on from offset 1000",
        total - 1000
    );
    assert!(read.message.contains(&follow), "{}", read.message);
    let exited_at = read.exited_at.clone().expect("exitedAt");
    assert!(humantime::parse_rfc3339(&exited_at).is_ok(), "{exited_at}");
    assert_eq!(read.signal, None);
    // The whole rest: nothing more follows, and the message does not say so.
    let rest = one(
        &registry,
        json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "max_bytes": 4_000_000}),
    )
    .await;
    assert_eq!(rest.next_offset, Some(total));
    assert!(
        !rest.message.contains("more bytes follow"),
        "{}",
        rest.message
    );
}

#[tokio::test]
async fn an_input_reply_cut_at_its_limit_says_how_much_follows() {
    let registry = Registry::with_defaults();
    let started = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": "head -c 200000 /dev/zero | tr '\\0' x; cat",
               "background": true, "yield_ms": 0}),
    )
    .await;
    let id = started.process_id.expect("a process id");
    let reply = one(
        &registry,
        json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": "hello\n",
               "yield_ms": 2000}),
    )
    .await;
    assert_eq!(reply.status, ExecutionStatus::Succeeded, "{reply:?}");
    let next = reply.next_offset.expect("nextOffset");
    let produced = reply.output_bytes.expect("outputBytes");
    assert!(next < produced, "{reply:?}");
    let follow = format!(
        "{} more bytes follow: read on from offset {next}",
        produced - next
    );
    assert!(reply.message.contains(&follow), "{}", reply.message);
    assert_eq!(reply.exited_at, None, "it still runs");
}

#[tokio::test]
async fn a_process_killed_by_a_signal_says_which_in_its_reads_and_the_list() {
    let registry = Registry::with_defaults();
    let started = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": "trap '' TERM; sleep 60",
               "background": true, "yield_ms": 0}),
    )
    .await;
    let id = started.process_id.expect("a process id");
    let killed = one(
        &registry,
        json!({"commandType": "PROCESS_KILL", "process_id": id, "signal": "KILL"}),
    )
    .await;
    assert_eq!(killed.signal.as_deref(), Some("KILL"), "{killed:?}");
    assert!(killed.exited_at.is_some(), "{killed:?}");
    let read = one(
        &registry,
        json!({"commandType": "PROCESS_OUTPUT", "process_id": id}),
    )
    .await;
    assert_eq!(read.signal.as_deref(), Some("KILL"), "{read:?}");
    assert_eq!(read.output_bytes, Some(0));
    let list = one(&registry, json!({"commandType": "PROCESS_LIST"})).await;
    let entries: Vec<Value> = serde_json::from_str(&list.result_data).unwrap();
    let entry = entries
        .iter()
        .find(|e| e["processId"] == id.as_str())
        .expect("listed");
    assert_eq!(entry["signal"], "KILL", "{entry}");
    assert_eq!(
        entry["exitedAt"],
        read.exited_at.unwrap().as_str(),
        "{entry}"
    );
}
