//! Results larger than the server's `max_payload` are split, never dropped.
//!
//! The data of an oversized message is cut (on character boundaries) into pieces sent as
//! `RUNNING` messages, the last piece riding on the original message — so the stream
//! keeps its order and `combine_output_results` still yields the same whole.

use cmdr_executors::{ExecutionStatus, OutputResult};

/// Bytes of a message besides its data: ids, type, message, error … (generous).
const ENVELOPE_ALLOWANCE: usize = 16 * 1024;
/// JSON may expand a byte of data up to 6 bytes (`\u0000`).
const WORST_ESCAPE: usize = 6;

/// Encodes `result` as one or more JSON payloads, each at most `max_payload` bytes (given
/// data of reasonable size; the limit must leave room for the envelope).
pub fn encode(result: &OutputResult, max_payload: usize) -> serde_json::Result<Vec<Vec<u8>>> {
    let whole = serde_json::to_vec(result)?;
    if whole.len() <= max_payload {
        return Ok(vec![whole]);
    }
    let piece = (max_payload.saturating_sub(ENVELOPE_ALLOWANCE) / WORST_ESCAPE).max(1024);
    let pieces = split_on_char_boundaries(&result.result_data, piece);
    let last = pieces.len().saturating_sub(1);
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, data)| {
            let mut part = result.clone();
            part.result_data = data.to_owned();
            if i < last {
                part.status = ExecutionStatus::Running;
                part.error = String::new();
                part.error_code = None;
                part.exit_code = None;
                part.final_cwd = None;
                part.duration_ms = None;
            }
            serde_json::to_vec(&part)
        })
        .collect()
}

fn split_on_char_boundaries(text: &str, max: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while rest.len() > max {
        let mut cut = max;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (head, tail) = rest.split_at(cut);
        pieces.push(head);
        rest = tail;
    }
    pieces.push(rest);
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(status: ExecutionStatus, data: String) -> OutputResult {
        OutputResult {
            command_id: "c".into(),
            command_type: "LIST_DIRECTORY".into(),
            status,
            message: "listed".into(),
            result_data: data,
            duration_ms: Some(3),
            ..Default::default()
        }
    }

    #[test]
    fn small_results_are_one_message() {
        let r = result(ExecutionStatus::Succeeded, "x".repeat(100));
        assert_eq!(encode(&r, 1 << 20).unwrap().len(), 1);
    }

    #[test]
    fn oversized_results_split_keeping_order_and_the_whole() {
        let data: String = "é€\u{0}abc".repeat(200_000);
        let r = result(ExecutionStatus::Succeeded, data.clone());
        let parts = encode(&r, 1 << 20).unwrap();
        assert!(parts.len() > 1);
        let decoded: Vec<OutputResult> = parts
            .iter()
            .map(|p| serde_json::from_slice(p).unwrap())
            .collect();
        assert!(parts.iter().all(|p| p.len() <= 1 << 20));
        assert!(decoded[..decoded.len() - 1]
            .iter()
            .all(|m| m.status == ExecutionStatus::Running && m.duration_ms.is_none()));
        let last = decoded.last().unwrap();
        assert_eq!(last.status, ExecutionStatus::Succeeded);
        assert_eq!(last.duration_ms, Some(3));
        let joined: String = decoded.iter().map(|m| m.result_data.as_str()).collect();
        assert_eq!(joined, data);
    }
}
