//! 10,000 commands of every type submitted at once to one in-process registry (the
//! default executors; each question answered through `PendingInputs` as soon as its
//! prompt arrives): each ends with exactly one terminal result carrying the right
//! content, and the process's open file descriptors stay far below the usual 1,024
//! limit (the actors' concurrency caps).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmdr_executors::{OutputResult, PendingInputs, Registry, RegistryConfig};
use tokio_util::sync::CancellationToken;

use crate::cases::{Case, Kind, KINDS};
use crate::proc_stats::fd_count;

/// Commands submitted at once.
const COMMANDS: usize = 10_000;
use cmdr_test_support::LOAD_PATIENCE as PATIENCE;
/// Open descriptors the test process may reach (the common default soft limit is 1,024).
const FD_BOUND: usize = 768;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_concurrent_commands_each_end_once_with_the_right_result() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = PendingInputs::new();
    let registry = Registry::with_config(RegistryConfig {
        input_broker: Arc::new(inputs.clone()),
        ..RegistryConfig::default()
    });
    let cases: Vec<Case> = (0..COMMANDS)
        .map(|i| Case::new(KINDS[i % KINDS.len()], dir.path(), &format!("c{i}")))
        .collect();
    let done = CancellationToken::new();
    let answered = Arc::new(AtomicUsize::new(0));
    let peak_fds = tokio::spawn(peak_fd_count(done.clone()));

    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for case in cases {
        let (registry, inputs, answered) = (registry.clone(), inputs.clone(), answered.clone());
        tasks.spawn(async move {
            let mut stream = registry.execute(case.command()).await.unwrap();
            let mut messages: Vec<OutputResult> = Vec::new();
            while let Some(message) = stream.next().await {
                if case.kind == Kind::Input && messages.is_empty() {
                    // Answered the moment the prompt is seen: the question must be there.
                    let answer = inputs.answer(&case.id, Case::answer(&case.id));
                    assert!(
                        answer.is_ok(),
                        "{}: {answer:?} right after its prompt",
                        case.id
                    );
                    answered.fetch_add(1, Ordering::SeqCst);
                }
                messages.push(message);
            }
            (case, messages)
        });
    }
    let mut terminals = HashMap::<String, usize>::new();
    let mut failures = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        while let Some(joined) = tasks.join_next().await {
            let (case, messages) = joined.unwrap();
            for m in messages.iter().filter(|m| m.status.is_terminal()) {
                *terminals.entry(m.command_id.clone()).or_default() += 1;
            }
            if let Err(e) = case.check(&messages) {
                failures.push(e);
            }
        }
    })
    .await
    .expect("every command ends in time");
    let elapsed = started.elapsed();
    done.cancel();
    let peak_fds = peak_fds.await.unwrap();

    assert!(
        failures.is_empty(),
        "{} failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
    assert_eq!(terminals.len(), COMMANDS, "one terminal for every command");
    assert!(
        terminals.values().all(|&n| n == 1),
        "no command ended twice"
    );
    let questions = (0..COMMANDS)
        .filter(|i| KINDS[i % KINDS.len()] == Kind::Input)
        .count();
    assert_eq!(
        answered.load(Ordering::SeqCst),
        questions,
        "each question answered once"
    );
    assert!(
        peak_fds < FD_BOUND,
        "{peak_fds} descriptors open at the peak"
    );
    eprintln!(
        "registry load: {COMMANDS} commands in {:.2} s ({:.0}/s), peak {peak_fds} open fds",
        elapsed.as_secs_f64(),
        COMMANDS as f64 / elapsed.as_secs_f64()
    );
}

/// The most descriptors this process had open, sampled every 5 ms until `done`.
async fn peak_fd_count(done: CancellationToken) -> usize {
    let pid = std::process::id() as i32;
    let mut peak = 0;
    while !done.is_cancelled() {
        peak = peak.max(fd_count(pid).unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    peak
}
