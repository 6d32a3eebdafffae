//! [`combine_output_results`]: collapse a result stream into one result (SPEC §3).

use futures_core::Stream;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::protocol::{ExecutionStatus, OutputResult};

/// Reads `stream` to its end and returns one result: every non-empty `resultData`
/// concatenated in order, every other field from the last message.
///
/// If `cancel` fires first: `FAILED` with a cancellation error, the data received so far,
/// and the other fields of the last message received (the stream is dropped, which stops a
/// [`ResultStream`](crate::ResultStream)'s command). A stream that ends without a terminal
/// message gives `FAILED` with `errorCode` `INCOMPLETE_STREAM`.
pub async fn combine_output_results<S>(
    stream: S,
    cancel: Option<&CancellationToken>,
) -> OutputResult
where
    S: Stream<Item = OutputResult> + Unpin,
{
    let mut stream = stream;
    let mut data = String::new();
    let mut last: Option<OutputResult> = None;
    let never = CancellationToken::new();
    let cancel = cancel.unwrap_or(&never);
    loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                return end(last, data, "cancelled while waiting for results", "CANCELLED");
            }
            next = stream.next() => next,
        };
        let Some(mut message) = next else { break };
        let chunk = std::mem::take(&mut message.result_data);
        if data.is_empty() {
            data = chunk;
        } else {
            data.push_str(&chunk);
        }
        last = Some(message);
    }
    match last {
        Some(mut last) if last.status.is_terminal() => {
            last.result_data = data;
            last
        }
        last => end(
            last,
            data,
            "the stream ended without a terminal result",
            "INCOMPLETE_STREAM",
        ),
    }
}

fn end(last: Option<OutputResult>, data: String, error: &str, code: &str) -> OutputResult {
    let mut result = last.unwrap_or_else(|| OutputResult {
        command_id: String::new(),
        command_type: String::new(),
        status: ExecutionStatus::Failed,
        message: String::new(),
        error: String::new(),
        result_data: String::new(),
        error_code: None,
        exit_code: None,
        final_cwd: None,
        duration_ms: None,
    });
    result.status = ExecutionStatus::Failed;
    result.error = error.to_owned();
    result.error_code = Some(code.to_owned());
    result.result_data = data;
    result
}
