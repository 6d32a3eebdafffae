//! A conversation's turns as data: who wrote each ([`Role`]), how it ended
//! ([`TurnStatus`]), the commands a `tool` turn holds ([`ToolRun`]), the agent-command step
//! that wrote it ([`CommandMeta`]), and the [`Message`] itself. The agent loop writes them,
//! the store keeps them, every transport shows them: a layer below all three (the store
//! knows nothing else of the agent).

use serde::{Deserialize, Serialize};

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
    /// An `<ask>` question for the person (its block starts `? ` instead of `$ `).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub question: bool,
    /// The background process it started or was about (docs/agents.md, "Processes").
    #[serde(rename = "processId", default, skip_serializing_if = "Option::is_none")]
    pub process_id: Option<String>,
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
