//! One result as one JSON line, fast for large output chunks.
//!
//! `serde_json` escapes a string one byte at a time through a lookup table; for a 64 KiB
//! output chunk that loop was the largest single cost of `cmdr exec` printing output
//! (BENCHMARKS.md, issue 19). Here a chunk's `resultData` is escaped with SIMD (16 or 32
//! bytes at a time, [`crate::json_escape`]) straight into the line's buffer, and spliced
//! into what `serde_json` writes for the rest of the result. The bytes are exactly
//! `serde_json`'s: the same escapes (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other
//! control characters as `\u00xx`), nothing else escaped.

use cmdr_executors::OutputResult;

/// Below this many bytes of `resultData`, `serde_json` alone writes the line.
const SPLICE_FROM: usize = 1024;

/// Stands in for `resultData` while `serde_json` writes the rest.
const PLACEHOLDER: &str = "-";

/// The key and placeholder as `serde_json` writes them. Inside a JSON string every `"` is
/// escaped, so this unescaped sequence can only be the key itself.
const NEEDLE: &[u8] = b"\"resultData\":\"-\"";

/// Appends `result` as JSON (no newline) to `out`; `result` is left as it was.
pub fn encode(result: &mut OutputResult, out: &mut Vec<u8>) -> serde_json::Result<()> {
    if result.result_data.len() < SPLICE_FROM {
        return serde_json::to_writer(&mut *out, result);
    }
    let data = std::mem::replace(&mut result.result_data, PLACEHOLDER.to_owned());
    let start = out.len();
    let written = serde_json::to_writer(&mut *out, &*result);
    result.result_data = data;
    written?;
    let at = out
        .get(start..)
        .and_then(|line| memchr::memmem::find(line, NEEDLE))
        .map(|at| start + at);
    let Some(at) = at else {
        // Not reachable with OutputResult's fields; serde_json alone is always right.
        out.truncate(start);
        return serde_json::to_writer(&mut *out, result);
    };
    let tail = out.split_off(at + NEEDLE.len());
    out.truncate(at + NEEDLE.len() - PLACEHOLDER.len() - 2);
    out.reserve(result.result_data.len() + tail.len() + 16);
    escape_str(&result.result_data, out);
    out.extend_from_slice(&tail);
    Ok(())
}

/// Appends `text` to `out` as a JSON string (with its quotes), byte for byte as
/// `serde_json` writes it ([`crate::json_escape`]; the tests below hold it to serde_json
/// for every byte class).
pub fn escape_str(text: &str, out: &mut Vec<u8>) {
    crate::json_escape::escape_into(text, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use cmdr_executors::ExecutionStatus;

    fn serde(text: &str) -> Vec<u8> {
        serde_json::to_vec(text).unwrap()
    }

    fn ours(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        escape_str(text, &mut out);
        out
    }

    #[test]
    fn every_byte_class_escapes_as_serde_json_does() {
        for c in (0u32..0x250).chain([0x2028, 0x2029, 0xfeff, 0x1f600]) {
            let Some(c) = char::from_u32(c) else { continue };
            // At every offset within a SIMD block (16 or 32 bytes) and across blocks, with
            // neighbours of every kind.
            for pad in 0..70 {
                let text = format!("{}{c}a\"{c}\\{}", "x".repeat(pad), "é".repeat(pad));
                assert_eq!(ours(&text), serde(&text), "{c:?} at {pad}");
            }
        }
    }

    fn chunk_of_every_class() -> String {
        let mut text = String::new();
        for round in 0..2000u32 {
            text.push_str("plain ascii text that needs no escape at all ");
            text.push(char::from_u32(round % 0x20).unwrap_or('?'));
            text.push_str("\"quoted\" back\\slash\u{7f} é € 😀 \u{fffd}");
            text.push_str(&String::from_utf8_lossy(b"bad \xff\xfe utf8 \xe2\x82"));
        }
        text
    }

    fn result(data: String) -> OutputResult {
        OutputResult {
            command_id: "id \"1\"".into(),
            command_type: "BASH_EXEC".into(),
            status: ExecutionStatus::Running,
            message: "Command output \"resultData\":\"-\"".into(),
            error: "e\\".into(),
            result_data: data,
            error_code: Some("X".into()),
            exit_code: Some(3),
            final_cwd: Some("/tmp/\"resultData\":\"-\"".into()),
            next_offset: Some(7),
            ..Default::default()
        }
    }

    #[test]
    fn a_chunk_with_every_byte_class_round_trips_exactly() {
        let data = chunk_of_every_class();
        assert!(data.len() > SPLICE_FROM);
        let mut message = result(data.clone());
        let mut line = b"before".to_vec();
        encode(&mut message, &mut line).unwrap();
        assert_eq!(message.result_data, data, "the result is left as it was");
        let expected = serde_json::to_vec(&message).unwrap();
        assert_eq!(line.get(6..), Some(&expected[..]));
        let back: OutputResult = serde_json::from_slice(&expected).unwrap();
        assert_eq!(back.result_data, data);
        assert_eq!(back.final_cwd, message.final_cwd);
        assert_eq!(back.message, message.message);
    }

    #[test]
    fn small_and_empty_chunks_are_serde_jsons() {
        for data in ["", "-", "a\u{1}\"\\"] {
            let mut message = result(data.into());
            let mut line = Vec::new();
            encode(&mut message, &mut line).unwrap();
            assert_eq!(line, serde_json::to_vec(&message).unwrap());
        }
    }
}
