//! `decode_command`: untrusted bytes → [`Command`] (`decode_command_slice`,
//! `decode_command`, `peek_command_id`).
//!
//! Properties:
//! - nothing panics;
//! - the `&str` and `&[u8]` entry points agree (up to a generated id);
//! - `peek_command_id` reads the id the decoder reads: the decoded command's own id when
//!   it was given, the salvaged one of a failure;
//! - a decoded command has a non-blank id, comes from a JSON object whose `commandType`
//!   is its type, and survives a round trip: encoded and decoded again, it is the same;
//! - a failure answers with one `FAILED` result carrying its stable code, which survives a
//!   JSON round trip;
//! - spaces around the JSON do not change the outcome.

use cmdr_executors::{
    decode_command, decode_command_slice, peek_command_id, Command, DecodeFailure, ErrorCode,
    ExecutionStatus, OutputResult,
};
use serde::Deserialize;

/// Just the discriminator of a command.
#[derive(Deserialize)]
struct TypeOnly {
    #[serde(rename = "commandType")]
    command_type: String,
}

/// The codes a decoding failure may carry.
const DECODE_CODES: [ErrorCode; 3] = [
    ErrorCode::MalformedJson,
    ErrorCode::UnknownCommandType,
    ErrorCode::InvalidCommand,
];

/// Checks every property on one input.
pub fn check(data: &[u8]) {
    let decoded = decode_command_slice(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let from_str = decode_command(text);
        assert_eq!(
            outcome(&decoded),
            outcome(&from_str),
            "str and slice disagree"
        );
    }
    let peeked = peek_command_id(data);
    match &decoded {
        Ok(command) => check_command(data, command, peeked.as_deref()),
        Err(failure) => check_failure(failure, peeked),
    }
    let mut padded = Vec::with_capacity(data.len() + 2);
    padded.push(b' ');
    padded.extend_from_slice(data);
    padded.push(b'\n');
    let padded = decode_command_slice(&padded);
    assert_eq!(
        outcome_class(&decoded),
        outcome_class(&padded),
        "surrounding whitespace changed the outcome"
    );
}

/// The decoding outcome with a generated id blanked (it is random).
fn outcome(decoded: &Result<Command, DecodeFailure>) -> Result<Command, DecodeFailure> {
    decoded.clone().map(|mut command| {
        if uuid_like(command.command_id()) {
            command.command_id_mut().clear();
        }
        command
    })
}

/// Like [`outcome`], but a failure only by its code (messages name columns).
fn outcome_class(decoded: &Result<Command, DecodeFailure>) -> Result<Command, ErrorCode> {
    outcome(decoded).map_err(|failure| failure.error.code())
}

/// Whether `id` looks like a generated UUID v4 (8-4-4-4-12 hex digits).
fn uuid_like(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn check_command(data: &[u8], command: &Command, peeked: Option<&str>) {
    let id = command.command_id();
    assert!(!id.trim().is_empty(), "decoded command without an id");
    match peeked {
        Some(given) if !given.trim().is_empty() => assert_eq!(id, given, "peeked id differs"),
        _ => assert!(uuid_like(id), "a missing id must be generated: {id:?}"),
    }
    // Other fields are skipped unparsed (a number like 1e400 is no error there), so
    // only `commandType` is read again.
    match serde_json::from_slice::<TypeOnly>(data) {
        Ok(TypeOnly { command_type }) => {
            assert_eq!(command_type, command.command_type().as_str())
        }
        Err(e) => panic!("decoded a command whose commandType cannot be read: {e}"),
    }
    let encoded = match serde_json::to_vec(command) {
        Ok(encoded) => encoded,
        Err(e) => panic!("a decoded command cannot be encoded: {e}"),
    };
    match decode_command_slice(&encoded) {
        Ok(again) => assert_eq!(&again, command, "round trip changed the command"),
        Err(e) => panic!("a re-encoded command does not decode: {e}"),
    }
    // Asking for the deadline must not panic (e.g. on huge `timeout_ms`).
    let _ = command.requested_timeout();
}

fn check_failure(failure: &DecodeFailure, peeked: Option<String>) {
    assert_eq!(
        failure.command_id, peeked,
        "peek_command_id and the failure salvaged different ids"
    );
    let code = failure.error.code();
    assert!(DECODE_CODES.contains(&code), "unknown code {code}");
    let result = failure.to_result();
    assert_eq!(result.status, ExecutionStatus::Failed);
    assert_eq!(result.error_code.as_deref(), Some(code.as_str()));
    assert!(!result.error.is_empty(), "a failure without an error text");
    // A result always names a command: the salvaged id, else a generated one.
    match failure.command_id.as_deref() {
        Some(id) if !id.trim().is_empty() => assert_eq!(result.command_id, id),
        _ => assert!(
            !result.command_id.trim().is_empty(),
            "a result without an id"
        ),
    }
    let json = match serde_json::to_string(&result) {
        Ok(json) => json,
        Err(e) => panic!("the FAILED result cannot be encoded: {e}"),
    };
    match serde_json::from_str::<OutputResult>(&json) {
        Ok(back) => assert_eq!(back, result, "the FAILED result changed in a round trip"),
        Err(e) => panic!("the FAILED result does not decode: {e}"),
    }
}
