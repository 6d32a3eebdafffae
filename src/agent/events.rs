//! The events an agent run streams to its client (docs/contract.md §4): data only.
//!
//! The same objects travel on every transport (SSE `data:` lines, MCP, the terminal
//! chat). A run's event stream ends with exactly one `done` or one `error`.

use serde::Serialize;

use super::detector::TagKind;

/// How a command of the loop ended, as shown in `tool-result`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolStatus {
    /// The command ran and succeeded (exit status 0).
    Completed,
    /// The command ran and failed (non-zero exit, timeout, could not start …).
    Failed,
    /// The command was killed because the run was stopped.
    Stopped,
    /// The command never started: the run was stopped before its turn.
    Skipped,
}

/// Why a run ended normally (`done`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DoneReason {
    /// The model answered without commands.
    Completed,
    /// The run was aborted (client gone, Stop, Ctrl-C); the partial turn is recorded.
    Stopped,
    /// The iteration cap was reached: the last reply's commands were not run (they are
    /// reported `skipped`) and the model was not prompted again.
    MaxIterations,
    /// The model's reply was cut off by the reply-length limit (`max_tokens`): its
    /// commands were not run (reported `skipped`).
    MaxTokens,
    /// The model repeated the same commands with the same results after being told so.
    Repeating,
}

/// One event of an agent run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum AgentEvent {
    /// Opens the stream of a persisted conversation.
    Conversation {
        /// The conversation's id.
        #[serde(rename = "conversationId")]
        conversation_id: String,
    },
    /// A step of an agent command begins (its events follow).
    CommandStep {
        /// The command's name.
        name: String,
        /// 1-based step number.
        #[serde(rename = "stepIndex")]
        step_index: u32,
        /// Number of steps.
        #[serde(rename = "totalSteps")]
        total_steps: u32,
        /// The step's instruction (its `content` lines joined by newlines).
        instruction: String,
    },
    /// A piece of the model's reply, verbatim.
    Text {
        /// The text delta.
        content: String,
    },
    /// A `<shell>` command, an `<ask>` question or a process tag was detected (queued).
    ToolCall {
        /// The command (or question), trimmed; for a process tag, the tag.
        command: String,
        /// `shell`, `ask`, `process-output`, `process-input` or `process-kill`.
        kind: TagKind,
        /// `cmd-{iteration}-{index}`.
        #[serde(rename = "commandId")]
        command_id: String,
        /// A `<shell background>`: it starts a background process.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        background: bool,
        /// The process a process tag is about.
        #[serde(rename = "processId", skip_serializing_if = "Option::is_none")]
        process_id: Option<String>,
    },
    /// The command started running.
    ToolStart {
        /// The command.
        command: String,
        /// Its id.
        #[serde(rename = "commandId")]
        command_id: String,
    },
    /// A chunk of the running command's output (stdout and stderr interleaved).
    ToolOutput {
        /// Its id.
        #[serde(rename = "commandId")]
        command_id: String,
        /// The chunk.
        content: String,
    },
    /// The command ended.
    ToolResult {
        /// The command.
        command: String,
        /// Its id.
        #[serde(rename = "commandId")]
        command_id: String,
        /// Its output (bounded: very large outputs keep head and tail), plus a note when
        /// it failed.
        result: String,
        /// How it ended.
        status: ToolStatus,
        /// The shell's exit status, when it exited.
        #[serde(rename = "exitCode", skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// How long it ran, in milliseconds.
        #[serde(rename = "durationMs", skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
        /// The background process it started or was about (also when it failed, e.g.
        /// `READY_TIMEOUT` leaves the process running).
        #[serde(rename = "processId", skip_serializing_if = "Option::is_none")]
        process_id: Option<String>,
        /// That process's state afterwards: `running` or `exited`.
        #[serde(rename = "processState", skip_serializing_if = "Option::is_none")]
        process_state: Option<String>,
    },
    /// One iteration (model reply + its commands) ended.
    IterationEnd {
        /// 1-based within the user turn.
        iteration: u32,
        /// Whether the model is prompted again with this iteration's results.
        #[serde(rename = "hasMoreCommands")]
        has_more_commands: bool,
    },
    /// The run ended normally.
    Done {
        /// Why.
        reason: DoneReason,
    },
    /// The run ended with an error; everything before it is recorded.
    Error {
        /// Stable code (`LLM_UNAVAILABLE`, `LLM_HTTP_ERROR`, …).
        code: String,
        /// A sentence for people.
        message: String,
    },
}

impl AgentEvent {
    /// Whether this event ends a run's stream.
    pub fn is_final(&self) -> bool {
        matches!(self, AgentEvent::Done { .. } | AgentEvent::Error { .. })
    }
}
