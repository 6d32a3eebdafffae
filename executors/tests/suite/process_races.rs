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

/// A process whose output so far ends with the first byte of a three-byte character
/// (`日` is E6 97 A5), then waits.
const HALF: &str = "printf 'x\\346'; sleep 60";

/// This thread's CPU time, in clock ticks of 10 ms (the current-thread runtime of a
/// `#[tokio::test]` runs the test, the executors and the process actors on it).
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|f| f.parse().unwrap())
        .collect();
    Duration::from_millis(10 * (fields[0] + fields[1]))
}

#[tokio::test]
async fn a_long_poll_on_half_a_character_waits_for_the_rest() {
    let registry = Registry::with_defaults();
    let started = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": HALF, "background": true,
               "ready": {"output": "x"}}),
    )
    .await;
    let id = started.process_id.clone().expect("a process id");
    assert_eq!(started.next_offset, Some(1), "{started:?}");
    let (wall, cpu) = (Instant::now(), thread_cpu());
    let read = one(
        &registry,
        json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "offset": 1,
               "wait_ms": 1500}),
    )
    .await;
    let (waited, spent) = (wall.elapsed(), thread_cpu() - cpu);
    assert_eq!(read.result_data, "", "{read:?}");
    assert_eq!(read.next_offset, Some(1), "{read:?}");
    assert!(
        waited >= Duration::from_millis(1400),
        "returned after {waited:?} with nothing instead of waiting"
    );
    assert!(
        spent < waited / 4,
        "spent {spent:?} of CPU in a wait of {waited:?}"
    );
}

#[tokio::test]
async fn a_readiness_check_on_half_a_character_sleeps_until_its_timeout() {
    let registry = Registry::with_defaults();
    let (wall, cpu) = (Instant::now(), thread_cpu());
    let started = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": HALF, "background": true,
               "ready": {"output": "never printed", "timeout_ms": 1500}}),
    )
    .await;
    let (waited, spent) = (wall.elapsed(), thread_cpu() - cpu);
    assert_eq!(
        started.error_code.as_deref(),
        Some("READY_TIMEOUT"),
        "{started:?}"
    );
    assert!(waited >= Duration::from_millis(1400), "{waited:?}");
    assert!(
        spent < waited / 4,
        "spent {spent:?} of CPU in a readiness wait of {waited:?}"
    );
}
