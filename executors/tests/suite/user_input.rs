//! `REQUEST_USER_INPUT`: a real suspension until answered, timed out or cancelled.

use std::sync::Arc;

use cmdr_executors::{ExecutionStatus, PendingInputs, Registry, RegistryConfig};
use serde_json::json;

use super::{assert_failed, collect, command, eventually, run, terminal};

fn registry_with(pending: &PendingInputs) -> Registry {
    Registry::with_config(RegistryConfig {
        input_broker: Arc::new(pending.clone()),
        ..RegistryConfig::default()
    })
}

#[tokio::test]
async fn the_answer_is_the_result() {
    let pending = PendingInputs::new();
    let registry = registry_with(&pending);
    let mut stream = registry
        .execute(command(
            json!({"command_id":"q1","commandType":"REQUEST_USER_INPUT","prompt":"API key?"}),
        ))
        .await
        .unwrap();
    let waiting = stream.next().await.unwrap();
    assert_eq!(waiting.status, ExecutionStatus::Running);
    assert!(waiting.message.contains("API key?"));
    eventually("the question is pending", || !pending.pending().is_empty()).await;
    assert_eq!(pending.pending()[0].prompt, "API key?");
    assert!(pending.answer("nope", "x".into()).is_err());
    pending.answer("q1", "sk-123".into()).unwrap();
    let rest = collect(stream).await;
    let end = terminal(&rest);
    assert_eq!(end.status, ExecutionStatus::Succeeded);
    assert_eq!(end.result_data, "sk-123");
    assert!(pending.pending().is_empty());
}

#[tokio::test]
async fn unanswered_questions_time_out_and_are_withdrawn() {
    let pending = PendingInputs::new();
    let registry = registry_with(&pending);
    let messages = run(
        &registry,
        json!({"commandType":"REQUEST_USER_INPUT","prompt":"?","timeout_ms":50}),
    )
    .await;
    assert_failed(terminal(&messages), "TIMEOUT");
    assert!(pending.pending().is_empty());
}

#[tokio::test]
async fn cancelling_withdraws_the_question() {
    let pending = PendingInputs::new();
    let registry = registry_with(&pending);
    let stream = registry
        .execute(command(
            json!({"command_id":"q2","commandType":"REQUEST_USER_INPUT","prompt":"?"}),
        ))
        .await
        .unwrap();
    eventually("the question is pending", || !pending.pending().is_empty()).await;
    registry.cancel("q2");
    assert_failed(terminal(&collect(stream).await), "CANCELLED");
    assert!(pending.pending().is_empty());
}

#[tokio::test]
async fn without_a_broker_the_question_fails_clearly() {
    let registry = Registry::with_defaults();
    let messages = run(
        &registry,
        json!({"commandType":"REQUEST_USER_INPUT","prompt":"?"}),
    )
    .await;
    assert_failed(terminal(&messages), "INPUT_UNAVAILABLE");
}
