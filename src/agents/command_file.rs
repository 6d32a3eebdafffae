//! Command files (`commands/<name>.json`): the strict schema of docs/contract.md §5 and its
//! validator.
//!
//! ```json
//! {"Description": "…", "items": [{"type": "message", "role": "user", "content": ["…", "…"]}]}
//! ```
//!
//! The validator walks a [`serde_json::Value`] rather than deriving `Deserialize`, so every
//! error names the exact key or item (`items[2].content[1]: must be a non-empty string`).
//!
//! **Extension point.** An item is dispatched on its `type` in [`validate_item`]; a new
//! item type is one [`CommandItem`] variant, one arm there, one `validate_<type>`
//! function with its own allowed keys, and one entry in [`SUPPORTED_ITEM_TYPES`]. Code
//! that executes commands matches on [`CommandItem`] exhaustively, so the compiler lists
//! every place a new type must be handled.

use serde::Serialize;
use serde_json::{Map, Value};

/// The item types this version understands.
pub const SUPPORTED_ITEM_TYPES: &[&str] = &["message"];

const TOP_LEVEL_KEYS: &[&str] = &["Description", "items"];
const MESSAGE_KEYS: &[&str] = &["type", "role", "content"];

/// A validated command: its name (the file stem), description and steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentCommand {
    /// The command's name: the file name without `.json`.
    pub name: String,
    /// `Description`, trimmed.
    pub description: String,
    /// The steps, in order; never empty.
    pub items: Vec<CommandItem>,
}

impl AgentCommand {
    /// How many steps the command has.
    pub fn steps(&self) -> usize {
        self.items.len()
    }
}

/// One step of a command, by `type`. The enum is the extension point for future item
/// types: a new type is a variant here, an arm in the validator's dispatch on `type`
/// (`validate_item` in `src/agents/command_file.rs`) with its own allowed keys, and an
/// entry in [`SUPPORTED_ITEM_TYPES`]; code that executes commands matches exhaustively,
/// so the compiler points at every place that must learn the new type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum CommandItem {
    /// `type: "message"`: one user message sent through the agent loop.
    Message {
        /// Who says it (only the user today).
        role: MessageRole,
        /// The lines of the message, each trimmed and non-empty; never empty.
        content: Vec<String>,
    },
}

impl CommandItem {
    /// The instruction this step sends to the agent: the content lines joined with `\n`.
    pub fn instruction(&self) -> String {
        match self {
            Self::Message { content, .. } => content.join("\n"),
        }
    }
}

/// The author of a `message` item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageRole {
    /// `"user"`, the only role allowed today.
    User,
}

/// Why a command file is invalid: where (`Description`, `items[2].content[1]`, or empty
/// for the file as a whole) and what. Displays as `<path>: <message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandFileError {
    /// The JSON path of the offending value; empty for the whole document.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl CommandFileError {
    fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for CommandFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for CommandFileError {}

/// Validates the text of a command file and returns its trimmed `Description` and its
/// items. Reports the first problem in document order (top-level keys first, then
/// `Description`, then each item in turn).
pub fn validate_command_json(text: &str) -> Result<(String, Vec<CommandItem>), CommandFileError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| CommandFileError::new("", format!("not valid JSON: {e}")))?;
    let Value::Object(top) = value else {
        return Err(CommandFileError::new(
            "",
            format!(
                "must be a JSON object with `Description` and `items`, found {}",
                kind(&value)
            ),
        ));
    };
    check_keys(&top, TOP_LEVEL_KEYS, "")?;

    let description = match top.get("Description") {
        None => {
            return Err(CommandFileError::new(
                "Description",
                "missing; expected a non-empty string",
            ))
        }
        Some(Value::String(s)) if s.trim().is_empty() => {
            return Err(CommandFileError::new(
                "Description",
                "must be a non-empty string",
            ))
        }
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(other) => {
            return Err(CommandFileError::new(
                "Description",
                format!("must be a string, found {}", kind(other)),
            ))
        }
    };

    let items = match top.get("items") {
        None => {
            return Err(CommandFileError::new(
                "items",
                "missing; expected a non-empty array of steps",
            ))
        }
        Some(Value::Array(items)) if items.is_empty() => {
            return Err(CommandFileError::new(
                "items",
                "must contain at least one item",
            ))
        }
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(CommandFileError::new(
                "items",
                format!("must be an array, found {}", kind(other)),
            ))
        }
    };
    let items = items
        .iter()
        .enumerate()
        .map(|(i, item)| validate_item(item, &format!("items[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((description, items))
}

/// One item: an object whose `type` selects its schema.
fn validate_item(item: &Value, path: &str) -> Result<CommandItem, CommandFileError> {
    let Value::Object(obj) = item else {
        return Err(CommandFileError::new(
            path,
            format!("must be an object, found {}", kind(item)),
        ));
    };
    let type_path = format!("{path}.type");
    let supported = quoted_list(SUPPORTED_ITEM_TYPES);
    match obj.get("type") {
        None => Err(CommandFileError::new(
            type_path,
            format!("missing; supported types: {supported}"),
        )),
        Some(Value::String(t)) => match t.as_str() {
            "message" => validate_message(obj, path),
            other => Err(CommandFileError::new(
                type_path,
                format!("unsupported item type \"{other}\"; supported types: {supported}"),
            )),
        },
        Some(other) => Err(CommandFileError::new(
            type_path,
            format!("must be a string, found {}", kind(other)),
        )),
    }
}

/// A `message` item: exactly `type`, `role` (`"user"`) and `content` (non-empty array of
/// non-blank strings, stored trimmed).
fn validate_message(obj: &Map<String, Value>, path: &str) -> Result<CommandItem, CommandFileError> {
    check_keys(obj, MESSAGE_KEYS, path)?;
    let role_path = format!("{path}.role");
    let role = match obj.get("role") {
        None => {
            return Err(CommandFileError::new(
                role_path,
                "missing; expected \"user\"",
            ))
        }
        Some(Value::String(r)) if r == "user" => MessageRole::User,
        Some(Value::String(r)) => {
            return Err(CommandFileError::new(
                role_path,
                format!("unsupported role \"{r}\"; only \"user\" is supported"),
            ))
        }
        Some(other) => {
            return Err(CommandFileError::new(
                role_path,
                format!("must be a string, found {}", kind(other)),
            ))
        }
    };

    let content_path = format!("{path}.content");
    let lines = match obj.get("content") {
        None => {
            return Err(CommandFileError::new(
                content_path,
                "missing; expected a non-empty array of strings",
            ))
        }
        Some(Value::Array(lines)) if lines.is_empty() => {
            return Err(CommandFileError::new(
                content_path,
                "must contain at least one string",
            ))
        }
        Some(Value::Array(lines)) => lines,
        Some(other) => {
            return Err(CommandFileError::new(
                content_path,
                format!("must be an array of strings, found {}", kind(other)),
            ))
        }
    };
    let content = lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let line_path = format!("{content_path}[{i}]");
            match line {
                Value::String(s) if s.trim().is_empty() => Err(CommandFileError::new(
                    line_path,
                    "must be a non-empty string",
                )),
                Value::String(s) => Ok(s.trim().to_owned()),
                other => Err(CommandFileError::new(
                    line_path,
                    format!("must be a string, found {}", kind(other)),
                )),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CommandItem::Message { role, content })
}

/// Rejects keys of `obj` outside `allowed`, naming them (and the right spelling of a key
/// that differs only by case).
fn check_keys(
    obj: &Map<String, Value>,
    allowed: &[&str],
    path: &str,
) -> Result<(), CommandFileError> {
    let unknown: Vec<&String> = obj
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .collect();
    let Some(first) = unknown.first() else {
        return Ok(());
    };
    let names = unknown
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let noun = if unknown.len() == 1 { "key" } else { "keys" };
    let allowed_list = allowed
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let hint = allowed
        .iter()
        .find(|a| a.eq_ignore_ascii_case(first))
        .map(|a| format!(" (did you mean `{a}`? keys are case-sensitive)"))
        .unwrap_or_default();
    Err(CommandFileError::new(
        path,
        format!("unknown {noun} {names}{hint}; allowed keys: {allowed_list}"),
    ))
}

/// `"a", "b"` for messages.
fn quoted_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|t| format!("\"{t}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The JSON kind of a value, for "found …" messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
