//! A command past its type's concurrency limit is told at once that it is queued (a
//! `RUNNING` message with a `queue` note), waits in line, is told when it starts, and can
//! be stopped while it waits; `Registry::load` counts it. Real shells, held open by files
//! that do not exist yet (no timing).

use std::path::Path;

use cmdr_executors::{
    ActorConfig, ActorLoad, CommandType, ExecutionStatus, OutputResult, QueueState, Registry,
    RegistryConfig, ResultStream,
};
use serde_json::json;

use super::{assert_failed, collect, command, data, eventually, terminal, PATIENCE};

/// A registry running at most `limit` `BASH_EXEC` at once.
fn limited(limit: usize) -> Registry {
    Registry::with_config(RegistryConfig {
        bash_actor: ActorConfig {
            max_concurrent: limit,
            ..ActorConfig::default()
        },
        ..RegistryConfig::default()
    })
}

/// A shell that waits until `gate` exists, then prints `word`.
async fn held(registry: &Registry, id: &str, gate: &Path, word: &str) -> ResultStream {
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; echo {word}",
        gate.display()
    );
    let json = json!({"command_id": id, "commandType": "BASH_EXEC", "command": script});
    registry.execute(command(json)).await.unwrap()
}

/// The next message of `stream`, within [`PATIENCE`].
async fn next(stream: &mut ResultStream) -> OutputResult {
    tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("a message in time")
        .expect("the stream goes on")
}

fn bash_load(registry: &Registry) -> ActorLoad {
    registry.load()[&CommandType::BashExec]
}

#[tokio::test]
async fn a_command_past_the_limit_is_told_it_is_queued_then_that_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let registry = limited(2);
    let first = held(&registry, "q-first", &dir.path().join("gate1"), "one").await;
    let second = held(&registry, "q-second", &dir.path().join("gate2"), "two").await;
    eventually("both slots taken", || bash_load(&registry).running == 2).await;

    let marker = dir.path().join("third-ran");
    let script = format!("touch '{}'; echo three", marker.display());
    let json = json!({"command_id": "q-third", "commandType": "BASH_EXEC", "command": script});
    let mut third = registry.execute(command(json)).await.unwrap();
    let queued = next(&mut third).await;
    assert_eq!(queued.status, ExecutionStatus::Running, "{queued:?}");
    assert_eq!(queued.command_id, "q-third");
    assert!(queued.result_data.is_empty(), "{queued:?}");
    let note = queued.queue.clone().expect("a queue note");
    assert_eq!(note.state, QueueState::Queued);
    assert_eq!((note.position, note.limit), (Some(1), Some(2)), "{note:?}");
    assert!(queued.message.starts_with("Queued"), "{queued:?}");
    let load = bash_load(&registry);
    assert_eq!(
        load,
        ActorLoad {
            limit: 2,
            running: 2,
            queued: 1
        }
    );
    assert!(!marker.exists(), "the queued command did not run yet");

    std::fs::write(dir.path().join("gate1"), "").unwrap();
    let first = collect(first).await;
    assert_eq!(terminal(&first).status, ExecutionStatus::Succeeded);
    let started = next(&mut third).await;
    let note = started.queue.clone().expect("a started note");
    assert_eq!(note.state, QueueState::Started, "{started:?}");
    assert!(note.waited_ms.is_some(), "{note:?}");
    let rest = collect(third).await;
    assert_eq!(
        terminal(&rest).status,
        ExecutionStatus::Succeeded,
        "{rest:?}"
    );
    assert_eq!(data(&rest), "three\n");
    assert!(marker.exists());
    assert!(
        rest.iter().all(|m| m.queue.is_none()),
        "one note of each: {rest:?}"
    );

    std::fs::write(dir.path().join("gate2"), "").unwrap();
    let second = collect(second).await;
    assert_eq!(data(&second), "two\n");
    assert!(
        second.iter().all(|m| m.queue.is_none()),
        "a command that found a free slot gets no note: {second:?}"
    );
    assert_eq!(
        bash_load(&registry),
        ActorLoad {
            limit: 2,
            running: 0,
            queued: 0
        }
    );
}

#[tokio::test]
async fn a_queued_command_cancelled_while_waiting_ends_at_once_and_leaves_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let registry = limited(1);
    let blocker = held(&registry, "w-blocker", &gate, "done").await;
    eventually("the slot is taken", || bash_load(&registry).running == 1).await;
    let mut waiting = held(&registry, "w-one", &gate, "one").await;
    let mut behind = held(&registry, "w-two", &gate, "two").await;
    let positions = [
        next(&mut waiting).await.queue.and_then(|n| n.position),
        next(&mut behind).await.queue.and_then(|n| n.position),
    ];
    assert_eq!(positions, [Some(1), Some(2)]);
    assert_eq!(bash_load(&registry).queued, 2);

    // The blocker still holds the only slot: the cancelled command answers anyway.
    assert!(registry.cancel("w-one"));
    let cancelled = collect(waiting).await;
    assert_failed(terminal(&cancelled), "CANCELLED");
    assert_eq!(bash_load(&registry).queued, 1);
    assert_eq!(bash_load(&registry).running, 1);

    std::fs::write(&gate, "").unwrap();
    assert_eq!(data(&collect(blocker).await), "done\n");
    let behind = collect(behind).await;
    assert_eq!(terminal(&behind).status, ExecutionStatus::Succeeded);
    assert_eq!(data(&behind), "two\n");
    eventually("the line empties", || bash_load(&registry).queued == 0).await;
}
