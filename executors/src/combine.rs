//! [`combine_output_results`]: collapse a result stream into one result (docs/contract.md §3), and
//! [`combine_output_results_limited`]: the same in bounded memory, as every transport of
//! cmdr uses it.

use crate::ErrorCode;
use futures_core::Stream;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::protocol::{ExecutionStatus, OutputResult};

/// The combined-output limit cmdr's transports use unless configured (`--max-output`):
/// `?combine=true`, the MCP executor tools, `cmdr exec --combine`, `cmdr submit --combine`.
pub const DEFAULT_COMBINED_LIMIT: usize = 4 * 1024 * 1024;

/// Reads `stream` to its end and returns one result: every non-empty `resultData`
/// concatenated in order, every other field from the last message. Unbounded: the whole
/// output is held in memory (use [`combine_output_results_limited`] for output of unknown
/// size).
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
    combine_output_results_limited(stream, cancel, usize::MAX).await
}

/// Like [`combine_output_results`], keeping at most about `limit` bytes of output however
/// much the command prints (`yes` never ends): the first and the last `limit / 2` bytes
/// (cut at character boundaries), and between them one line
/// `[OUTPUT_TRUNCATED: N bytes left out …]`. The result's status is the command's (a
/// command that succeeded still `SUCCEEDED`); `truncatedBytes` says how much was left out.
/// Memory stays within about twice `limit` while the stream lasts.
pub async fn combine_output_results_limited<S>(
    stream: S,
    cancel: Option<&CancellationToken>,
    limit: usize,
) -> OutputResult
where
    S: Stream<Item = OutputResult> + Unpin,
{
    let mut stream = stream;
    let mut data = Kept::new(limit);
    let mut last: Option<OutputResult> = None;
    let never = CancellationToken::new();
    let cancel = cancel.unwrap_or(&never);
    loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                return end(last, data, "cancelled while waiting for results", ErrorCode::Cancelled);
            }
            next = stream.next() => next,
        };
        let Some(mut message) = next else { break };
        data.push(std::mem::take(&mut message.result_data));
        last = Some(message);
    }
    match last {
        Some(mut last) if last.status.is_terminal() => {
            data.into_result(&mut last);
            last
        }
        last => end(
            last,
            data,
            "the stream ended without a terminal result",
            ErrorCode::IncompleteStream,
        ),
    }
}

fn end(last: Option<OutputResult>, data: Kept, error: &str, code: ErrorCode) -> OutputResult {
    let mut result = last.unwrap_or_else(|| OutputResult {
        status: ExecutionStatus::Failed,
        ..Default::default()
    });
    result.status = ExecutionStatus::Failed;
    result.error = error.to_owned();
    result.error_code = Some(code.into());
    data.into_result(&mut result);
    result
}

/// The output kept: all of it while it fits `limit`, then the head and a moving tail.
struct Kept {
    limit: usize,
    head: String,
    /// Only once over the limit: the most recent output (trimmed in batches).
    tail: Option<String>,
    dropped: u64,
}

impl Kept {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            head: String::new(),
            tail: None,
            dropped: 0,
        }
    }

    fn tail_keep(&self) -> usize {
        self.limit - self.limit / 2
    }

    fn push(&mut self, chunk: String) {
        if chunk.is_empty() {
            return;
        }
        let Some(tail) = &mut self.tail else {
            if self.head.len().saturating_add(chunk.len()) <= self.limit {
                if self.head.is_empty() {
                    self.head = chunk;
                } else {
                    self.head.push_str(&chunk);
                }
                return;
            }
            // Over the limit for the first time: the head keeps its first half.
            self.head.push_str(&chunk);
            let cut = floor_char_boundary(&self.head, self.limit / 2);
            self.tail = Some(self.head.split_off(cut));
            self.trim(0);
            return;
        };
        tail.push_str(&chunk);
        // Trim in batches: at most twice the tail's share is held.
        self.trim(self.tail_keep());
    }

    /// Drops the front of the tail beyond `slack` past its share.
    fn trim(&mut self, slack: usize) {
        let keep = self.tail_keep();
        let Some(tail) = &mut self.tail else { return };
        if tail.len() <= keep.saturating_add(slack) {
            return;
        }
        let cut = ceil_char_boundary(tail, tail.len() - keep);
        self.dropped += cut as u64;
        tail.drain(..cut);
    }

    /// Puts the kept output (and, if anything was left out, the marker and the count) into
    /// `result`.
    fn into_result(mut self, result: &mut OutputResult) {
        self.trim(0);
        let Some(tail) = self.tail else {
            result.result_data = self.head;
            return;
        };
        if self.dropped == 0 {
            self.head.push_str(&tail);
            result.result_data = self.head;
            return;
        }
        let marker = format!(
            "\n[OUTPUT_TRUNCATED: {} bytes left out here; combined output keeps the first and \
             last {} bytes when it is longer than {} bytes]\n",
            self.dropped,
            self.limit / 2,
            self.limit
        );
        self.head.push_str(&marker);
        self.head.push_str(&tail);
        result.result_data = self.head;
        result.truncated_bytes = Some(self.dropped);
    }
}

/// The largest char boundary of `s` at or below `i`.
fn floor_char_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest char boundary of `s` at or above `i`.
fn ceil_char_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(limit: usize, chunks: &[&str]) -> OutputResult {
        let mut k = Kept::new(limit);
        for c in chunks {
            k.push((*c).to_owned());
        }
        let mut result = OutputResult {
            command_id: "c".into(),
            command_type: "BASH_EXEC".into(),
            status: ExecutionStatus::Succeeded,
            ..Default::default()
        };
        k.into_result(&mut result);
        result
    }

    #[test]
    fn output_within_the_limit_is_whole() {
        let r = kept(10, &["abc", "defg", "hij"]);
        assert_eq!(
            (r.result_data.as_str(), r.truncated_bytes),
            ("abcdefghij", None)
        );
    }

    #[test]
    fn over_the_limit_head_and_tail_are_exact_and_the_middle_counted() {
        let chunks: Vec<String> = (0..1000).map(|i| format!("{i:04}\n")).collect();
        let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
        let all: String = chunks.concat();
        let r = kept(100, &refs);
        let (head, rest) = r.result_data.split_once("\n[OUTPUT_TRUNCATED: ").unwrap();
        let tail = rest.split_once("]\n").unwrap().1;
        assert_eq!(head, &all[..50]);
        assert_eq!(tail, &all[all.len() - 50..]);
        assert_eq!(r.truncated_bytes, Some((all.len() - 100) as u64));
        assert!(rest.starts_with(&format!("{} bytes", all.len() - 100)));
    }

    #[test]
    fn cuts_never_split_a_character() {
        let r = kept(7, &["ééééé", "€€€€"]);
        assert!(r.truncated_bytes.is_some());
        let kept_bytes = r.result_data.len() - r.result_data.find("\n[").unwrap();
        assert!(kept_bytes > 0);
        // Valid UTF-8 by construction (a String); the head is whole characters.
        assert!(r.result_data.starts_with("é"));
        assert!(r.result_data.ends_with("€"));
    }
}
