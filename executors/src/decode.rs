//! Turning untrusted JSON into a [`Command`], with errors that name what is wrong.
//!
//! Decoding happens in two passes over the text: a cheap probe reads `command_id` and
//! `commandType` (everything else is skipped), then the text is decoded straight into the
//! struct of that type with `serde_path_to_error`, so a wrong type is reported with the
//! field's path (`env.HOME`, `timeout_ms`). No intermediate `serde_json::Value` is built,
//! which matters for `FILE_WRITE` commands carrying megabytes of content.

use std::sync::LazyLock;

use crate::ErrorCode;
use regex::Regex;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::command::UnknownCommandType;
use crate::protocol::{Command, CommandType, OutputResult};
use crate::terminal::rejected_result;

/// Why a command could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The text is not valid JSON.
    #[error("malformed JSON: {0}")]
    Malformed(String),
    /// The bytes are not UTF-8 (JSON text must be).
    #[error("malformed JSON: not valid UTF-8 ({0})")]
    NotUtf8(String),
    /// The JSON is valid but not an object.
    #[error("a command must be a JSON object")]
    NotAnObject,
    /// There is no `commandType` field.
    #[error("missing field `commandType`")]
    MissingType,
    /// `commandType` names no known command.
    #[error(transparent)]
    UnknownType(#[from] UnknownCommandType),
    /// A field is missing or has the wrong JSON type.
    #[error("{0}")]
    InvalidField(String),
}

impl DecodeError {
    /// The stable code, as sent in `errorCode`.
    pub fn code(&self) -> ErrorCode {
        match self {
            DecodeError::Malformed(_) | DecodeError::NotUtf8(_) | DecodeError::NotAnObject => {
                ErrorCode::MalformedJson
            }
            DecodeError::MissingType | DecodeError::UnknownType(_) => ErrorCode::UnknownCommandType,
            DecodeError::InvalidField(_) => ErrorCode::InvalidCommand,
        }
    }
}

/// A command that could not be decoded, with whatever could be salvaged to answer it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct DecodeFailure {
    /// The `command_id`, when one could be read (even from malformed JSON).
    pub command_id: Option<String>,
    /// The `commandType` text, when one could be read.
    pub command_type: Option<String>,
    /// What was wrong.
    pub error: DecodeError,
}

impl DecodeFailure {
    /// Input that is not UTF-8: `lossy` is it with the invalid bytes replaced (to salvage
    /// an id and type), `detail` says where it broke.
    pub fn not_utf8(lossy: &str, detail: impl Into<String>) -> Self {
        Self {
            command_id: salvage("command_id", lossy.as_bytes()),
            command_type: salvage("commandType", lossy.as_bytes()),
            error: DecodeError::NotUtf8(detail.into()),
        }
    }

    /// The `FAILED` result that answers this input on a result stream. A result always
    /// names a command: when no `command_id` could be read, it gets a generated one (a
    /// UUID v4), like a valid command without one.
    pub fn to_result(&self) -> OutputResult {
        let generated;
        let id = match self.command_id.as_deref() {
            Some(id) if !id.trim().is_empty() => id,
            _ => {
                generated = uuid::Uuid::new_v4().to_string();
                &generated
            }
        };
        rejected_result(
            id,
            self.command_type.as_deref().unwrap_or_default(),
            self.error.to_string(),
            self.error.code(),
        )
    }
}

/// The first pass: just enough to route and attribute the command.
#[derive(Deserialize)]
struct Probe {
    #[serde(default)]
    command_id: Option<serde_json::Value>,
    #[serde(rename = "commandType", default)]
    command_type: Option<serde_json::Value>,
}

/// Decodes one command from JSON text; a missing or empty `command_id` gets a UUID v4.
pub fn decode_command(json: &str) -> Result<Command, DecodeFailure> {
    decode_command_slice(json.as_bytes())
}

/// Like [`decode_command`], for raw bytes (e.g. a NATS payload).
pub fn decode_command_slice(json: &[u8]) -> Result<Command, DecodeFailure> {
    let probe = probe(json)?;
    let command_id = match probe.command_id {
        Some(serde_json::Value::String(id)) => Some(id),
        _ => None,
    };
    let type_text = match probe.command_type {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => Some(s),
        Some(other) => Some(other.to_string()),
    };
    let fail = |error| DecodeFailure {
        command_id: command_id.clone(),
        command_type: type_text.clone(),
        error,
    };
    let Some(text) = type_text.as_deref() else {
        return Err(fail(DecodeError::MissingType));
    };
    let command_type: CommandType = text.parse().map_err(|e| fail(DecodeError::from(e)))?;
    let mut command = decode_as(command_type, json).map_err(fail)?;
    command.ensure_command_id();
    Ok(command)
}

/// The `command_id` of a command without decoding the rest (the cheap first pass only),
/// salvaged from malformed JSON when possible. For routing and acknowledgements.
pub fn peek_command_id(json: &[u8]) -> Option<String> {
    match probe(json) {
        Ok(probe) => probe.command_id.and_then(|v| v.as_str().map(str::to_owned)),
        Err(failure) => failure.command_id,
    }
}

fn probe(json: &[u8]) -> Result<Probe, DecodeFailure> {
    let first = json.iter().find(|b| !b.is_ascii_whitespace());
    let salvaged = || DecodeFailure {
        command_id: salvage("command_id", json),
        command_type: salvage("commandType", json),
        error: DecodeError::NotAnObject,
    };
    if first != Some(&b'{') {
        let mut failure = salvaged();
        if serde_json::from_slice::<serde::de::IgnoredAny>(json).is_err() {
            failure.error = DecodeError::Malformed("expected a JSON object".to_owned());
        }
        return Err(failure);
    }
    serde_json::from_slice::<Probe>(json).map_err(|e| {
        let mut failure = salvaged();
        failure.error = DecodeError::Malformed(e.to_string());
        failure
    })
}

fn decode_as(command_type: CommandType, json: &[u8]) -> Result<Command, DecodeError> {
    Ok(match command_type {
        CommandType::BashExec => Command::BashExec(typed(json)?),
        CommandType::FileRead => Command::FileRead(typed(json)?),
        CommandType::FileWrite => Command::FileWrite(typed(json)?),
        CommandType::PatchFile => Command::PatchFile(typed(json)?),
        CommandType::ListDirectory => Command::ListDirectory(typed(json)?),
        CommandType::RequestUserInput => Command::RequestUserInput(typed(json)?),
        CommandType::ProcessInput => Command::ProcessInput(typed(json)?),
        CommandType::ProcessOutput => Command::ProcessOutput(typed(json)?),
        CommandType::ProcessKill => Command::ProcessKill(typed(json)?),
        CommandType::ProcessList => Command::ProcessList(typed(json)?),
    })
}

fn typed<T: DeserializeOwned>(json: &[u8]) -> Result<T, DecodeError> {
    // Nearly every command is valid: decode it without tracking the path (which costs a
    // wrapper per value); only a failure is decoded again, for an error naming its field.
    if let Ok(value) = serde_json::from_slice(json) {
        return Ok(value);
    }
    let de = &mut serde_json::Deserializer::from_slice(json);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            DecodeError::InvalidField(strip_position(&inner))
        } else {
            DecodeError::InvalidField(format!("field `{path}`: {}", strip_position(&inner)))
        }
    })
}

/// serde_json appends "at line L column C"; useful for syntax errors, noise for fields.
fn strip_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

/// Finds `"key": "value"` in text that is not valid JSON, so a malformed command can still
/// be answered under its own id.
fn salvage(key: &str, json: &[u8]) -> Option<String> {
    static STRING_FIELD: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r#""(command_id|commandType)"\s*:\s*("(?:[^"\\]|\\.)*")"#).ok()
    });
    let text = String::from_utf8_lossy(json);
    let re = STRING_FIELD.as_ref()?;
    re.captures_iter(&text)
        .find(|c| c.get(1).is_some_and(|m| m.as_str() == key))
        .and_then(|c| serde_json::from_str::<String>(c.get(2)?.as_str()).ok())
}
