//! The conversation as the loop keeps it: append-only messages, stored verbatim.
//!
//! What the model is sent is derived from this in one place ([`to_chat_messages`]), the
//! same way every time, so the request of iteration N is the request of iteration N−1
//! plus new messages (the provider's prefix cache stays warm).

use serde::{Deserialize, Serialize};

use crate::llm::{ChatMessage, ChatRole};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person.
    User,
    /// The model (its raw reply, `<shell>` tags and all).
    Assistant,
    /// The results of one iteration's commands.
    Tool,
}

/// How a message came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnStatus {
    /// Complete.
    Ok,
    /// Cut short by an abort; the content is what arrived until then.
    Stopped,
    /// Cut short by an error; the content is what arrived until then.
    Failed,
}

/// One command of an iteration, as recorded with its `tool` message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolRun {
    /// `cmd-{iteration}-{index}`.
    #[serde(rename = "commandId")]
    pub command_id: String,
    /// The command.
    pub command: String,
    /// How it ended (`completed`, `failed`, `stopped`, `skipped`).
    pub status: String,
    /// The shell's exit status, when it exited.
    #[serde(rename = "exitCode", default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// Which agent command (macro) step a message belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CommandMeta {
    /// The command's name (its file name without `.json`).
    pub name: String,
    /// 1-based step number.
    #[serde(rename = "stepIndex")]
    pub step_index: u32,
    /// Number of steps of the command.
    #[serde(rename = "totalSteps")]
    pub total_steps: u32,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Verbatim content (for `tool`: the formatted, truncated results).
    pub content: String,
    /// Complete, stopped or failed.
    pub status: TurnStatus,
    /// For `tool` messages: the commands whose results it holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_runs: Vec<ToolRun>,
    /// Set when the message was written by a step of an agent command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandMeta>,
}

impl Message {
    /// A complete message without tool runs.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            status: TurnStatus::Ok,
            tool_runs: Vec::new(),
            command: None,
        }
    }
}

/// Opening line of a `tool` message as the model sees it.
pub const TOOL_RESULTS_OPEN: &str = "<tool_results>\n";
/// Closing line of a `tool` message as the model sees it.
pub const TOOL_RESULTS_CLOSE: &str = "\n</tool_results>";

/// The provider's view of the conversation: the system prompt, then every non-empty
/// message in order. Providers refuse a bare `tool` role without tool-call ids, so `tool`
/// messages become `user` messages wrapped in `<tool_results>` tags. A pure function of
/// its input: appending to `history` only ever appends to the result.
pub fn to_chat_messages(system_prompt: &str, history: &[Message]) -> Vec<ChatMessage> {
    let mut messages = Vec::with_capacity(history.len() + 1);
    if !system_prompt.is_empty() {
        messages.push(ChatMessage {
            role: ChatRole::System,
            content: system_prompt.to_owned(),
        });
    }
    messages.extend(
        history
            .iter()
            .filter(|m| !m.content.is_empty())
            .map(to_chat_message),
    );
    messages
}

fn to_chat_message(message: &Message) -> ChatMessage {
    match message.role {
        Role::User => ChatMessage {
            role: ChatRole::User,
            content: message.content.clone(),
        },
        Role::Assistant => ChatMessage {
            role: ChatRole::Assistant,
            content: message.content.clone(),
        },
        Role::Tool => ChatMessage {
            role: ChatRole::User,
            content: format!("{TOOL_RESULTS_OPEN}{}{TOOL_RESULTS_CLOSE}", message.content),
        },
    }
}
