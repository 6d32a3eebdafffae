//! `combine_output_results` (docs/contract.md §3).

use cmdr_executors::{combine_output_results, ExecutionStatus, OutputResult, Registry};
use futures_util::StreamExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::command;

fn message(status: ExecutionStatus, data: &str, text: &str) -> OutputResult {
    OutputResult {
        command_id: "c".into(),
        command_type: "BASH_EXEC".into(),
        status,
        message: text.into(),
        result_data: data.into(),
        ..Default::default()
    }
}

fn stream_of(
    messages: Vec<OutputResult>,
) -> impl futures_core::Stream<Item = OutputResult> + Unpin {
    futures_util::stream::iter(messages)
}

#[tokio::test]
async fn concatenates_data_and_takes_the_rest_from_the_last_message() {
    let combined = combine_output_results(
        stream_of(vec![
            message(ExecutionStatus::Running, "a", "m1"),
            message(ExecutionStatus::Running, "", "m2"),
            message(ExecutionStatus::Running, "b", "m3"),
            message(ExecutionStatus::Succeeded, "", "done"),
        ]),
        None,
    )
    .await;
    assert_eq!(combined.status, ExecutionStatus::Succeeded);
    assert_eq!(combined.result_data, "ab");
    assert_eq!(combined.message, "done");
}

#[tokio::test]
async fn a_stream_without_a_terminal_is_failed() {
    let combined = combine_output_results(
        stream_of(vec![message(ExecutionStatus::Running, "x", "m")]),
        None,
    )
    .await;
    assert_eq!(combined.status, ExecutionStatus::Failed);
    assert_eq!(combined.error_code.as_deref(), Some("INCOMPLETE_STREAM"));
    assert_eq!(combined.result_data, "x");
}

#[tokio::test]
async fn cancelling_returns_the_data_so_far_and_stops_the_command() {
    let registry = Registry::with_defaults();
    let stream = registry
        .execute(command(json!({"command_id":"long","commandType":"BASH_EXEC","command":"echo first; sleep 1000"})))
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let stream = stream.inspect(move |m| {
        if m.result_data.contains("first") {
            trigger.cancel();
        }
    });
    let combined = combine_output_results(stream, Some(&cancel)).await;
    assert_eq!(combined.status, ExecutionStatus::Failed);
    assert_eq!(combined.error_code.as_deref(), Some("CANCELLED"));
    assert_eq!(combined.command_id, "long");
    assert_eq!(combined.result_data, "first\n");
    super::eventually("the command is stopped", || registry.in_flight_count() == 0).await;
}

/// 200 MiB of output in 64 KiB chunks (made as they are read), combined within 1 MiB: the
/// exact first and last 512 KiB, a marker, every other byte counted, the status kept.
#[tokio::test]
async fn limited_combine_keeps_the_exact_head_and_tail_of_endless_output() {
    const CHUNK: usize = 64 * 1024;
    const CHUNKS: usize = 3200;
    const LIMIT: usize = 1 << 20;
    // Chunk i is made of the digit i % 10, so position tells content.
    let chunk = |i: usize| char::from(b'0' + (i % 10) as u8).to_string().repeat(CHUNK);
    let running = futures_util::stream::iter(0..CHUNKS)
        .map(move |i| message(ExecutionStatus::Running, &chunk(i), "out"));
    let end = futures_util::stream::iter([message(ExecutionStatus::Succeeded, "", "done")]);
    let combined =
        cmdr_executors::combine_output_results_limited(running.chain(end), None, LIMIT).await;
    assert_eq!(combined.status, ExecutionStatus::Succeeded);
    let total = CHUNK * CHUNKS;
    assert_eq!(combined.truncated_bytes, Some((total - LIMIT) as u64));
    let (head, rest) = combined
        .result_data
        .split_once("\n[OUTPUT_TRUNCATED: ")
        .unwrap();
    let tail = rest.split_once("]\n").unwrap().1;
    let expected_head: String = (0..LIMIT / 2 / CHUNK).map(chunk).collect();
    let expected_tail: String = (CHUNKS - LIMIT / 2 / CHUNK..CHUNKS).map(chunk).collect();
    assert!(head == expected_head, "the head is the first 512 KiB");
    assert!(tail == expected_tail, "the tail is the last 512 KiB");
}
