//! Running commands through a registry and checking the shape of their result streams:
//! `RUNNING` messages, then exactly one terminal, last.

use std::time::Duration;

use crate::PATIENCE;
use cmdr_executors::{decode_command, Command, ExecutionStatus, OutputResult, Registry, Scope};

/// Decodes a command from a JSON value (panics on bad test input).
pub fn command(json: serde_json::Value) -> Command {
    decode_command(&json.to_string()).expect("test command decodes")
}

/// Runs `json` through `registry` and returns every message, checking the stream's shape:
/// RUNNING messages, then exactly one terminal message, last.
pub async fn run(registry: &Registry, json: serde_json::Value) -> Vec<OutputResult> {
    run_in(registry, Scope::default(), json).await
}

/// Like [`run`], in `scope`.
pub async fn run_in(
    registry: &Registry,
    scope: Scope,
    json: serde_json::Value,
) -> Vec<OutputResult> {
    let stream = registry
        .execute_in(scope, command(json))
        .await
        .expect("accepted");
    collect(stream).await
}

/// Collects a stream to its end, with the shape checks of [`run`].
pub async fn collect(mut stream: cmdr_executors::ResultStream) -> Vec<OutputResult> {
    let mut messages = Vec::new();
    let all = async {
        while let Some(m) = stream.next().await {
            messages.push(m);
        }
    };
    tokio::time::timeout(PATIENCE, all)
        .await
        .expect("stream ended in time");
    assert_one_terminal_last(&messages);
    messages
}

/// Exactly one terminal message, and it is the last one.
pub fn assert_one_terminal_last(messages: &[OutputResult]) {
    let terminals = messages.iter().filter(|m| m.status.is_terminal()).count();
    assert_eq!(
        terminals, 1,
        "exactly one terminal message in {messages:#?}"
    );
    assert!(
        messages.last().is_some_and(|m| m.status.is_terminal()),
        "terminal message last in {messages:#?}"
    );
}

/// The terminal message of a collected stream.
pub fn terminal(messages: &[OutputResult]) -> &OutputResult {
    messages.last().expect("at least one message")
}

/// All `resultData` of a collected stream, concatenated.
pub fn data(messages: &[OutputResult]) -> String {
    messages.iter().map(|m| m.result_data.as_str()).collect()
}

/// Asserts a FAILED terminal with `code`.
pub fn assert_failed(result: &OutputResult, code: &str) {
    assert_eq!(result.status, ExecutionStatus::Failed, "{result:#?}");
    assert_eq!(result.error_code.as_deref(), Some(code), "{result:#?}");
    assert!(!result.error.is_empty(), "a failure says what went wrong");
}

/// Polls `check` until it is true or [`PATIENCE`] runs out.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
