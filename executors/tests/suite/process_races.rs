//! Races between a process's exit and those who follow it (docs/processes.md): whoever
//! is woken by the end of a process's output sees how it exited, and a waiter whose
//! output ends inside a UTF-8 character waits for the rest instead of spinning. Each race
//! is run many times, concurrently, on a multi-threaded runtime: once proves nothing.

use std::time::{Duration, Instant};

use cmdr_executors::{OutputResult, Registry};
use serde_json::json;

use super::{run, terminal};

/// Rounds of [`FOLLOWERS`] processes each.
const ROUNDS: usize = 25;
/// Processes followed at once.
const FOLLOWERS: usize = 8;
/// Long polls of each process.
const POLLS: usize = 4;

async fn one(registry: &Registry, json: serde_json::Value) -> OutputResult {
    terminal(&run(registry, json).await).clone()
}

/// What is wrong with a result that should report an exit with code 7, if anything.
fn not_exited(what: &str, result: &OutputResult) -> Option<String> {
    let exited = result.process_state.as_deref() == Some("exited") && result.exit_code == Some(7);
    (!exited).then(|| {
        format!(
            "{what}: state {:?}, exit code {:?}",
            result.process_state, result.exit_code
        )
    })
}

/// A start that waits out its process (it exits within `yield_ms`), and a long poll
/// woken only by the exit (the process writes nothing): both must say how it exited.
async fn follow_one(registry: &Registry) -> Vec<String> {
    let start = one(
        registry,
        json!({"commandType": "BASH_EXEC", "command": "exit 7", "background": true,
               "yield_ms": 30_000}),
    )
    .await;
    let mut wrong: Vec<String> = not_exited("a start that saw the exit", &start)
        .into_iter()
        .collect();
    let started = one(
        registry,
        json!({"commandType": "BASH_EXEC", "command": "sleep 0.02; exit 7",
               "background": true, "yield_ms": 0}),
    )
    .await;
    let Some(id) = started.process_id.clone() else {
        return vec![format!("no process id: {started:?}")];
    };
    // Several long polls of one process, so that the exit wakes several tasks at once
    // (the runtime's other threads then take some of them).
    let polls = (0..POLLS).map(|_| {
        one(
            registry,
            json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "offset": 0,
                   "wait_ms": 30_000}),
        )
    });
    for read in futures_util::future::join_all(polls).await {
        wrong.extend(not_exited("a long poll woken by the exit", &read));
    }
    wrong
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_follower_woken_by_an_exit_sees_the_exit() {
    let registry = Registry::with_defaults();
    let mut wrong = Vec::new();
    for _ in 0..ROUNDS {
        let round = (0..FOLLOWERS).map(|_| follow_one(&registry));
        for errors in futures_util::future::join_all(round).await {
            wrong.extend(errors);
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} followers did not see the exit: {wrong:#?}",
        wrong.len(),
        (1 + POLLS) * ROUNDS * FOLLOWERS
    );
}
