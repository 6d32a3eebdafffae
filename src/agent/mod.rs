//! The agent loop: stream a model's reply, run the `<shell>` commands it writes through
//! the registry, feed the results back, repeat (docs/contract.md §4).
//!
//! - `detector`: [`ShellTagDetector`], incremental `<shell>…</shell>` detection.
//! - `events`: [`AgentEvent`], what a run streams to its client (data only).
//! - `history`: [`to_chat_messages`], the one mapping of the append-only conversation
//!   ([`Message`]s, defined in [`crate::turn`]) to what the model is sent.
//! - `output`: [`OutputCapture`], a command's output in bounded memory, and truncation.
//! - `tool_call`: running one command as `BASH_EXEC`, formatting the `tool` message.
//! - `prompt`: the default system prompt.
//! - `run`: [`AgentLoop`], the loop.

mod detector;
mod events;
mod history;
mod output;
mod prompt;
mod run;
mod tool_call;

pub use crate::turn::{CommandMeta, Message, Role, ToolRun, TurnStatus};
pub use detector::{DetectedCommand, ShellTagDetector};
pub use events::{AgentEvent, DoneReason, ToolStatus};
pub use history::{to_chat_messages, TOOL_RESULTS_CLOSE, TOOL_RESULTS_OPEN};
pub use output::{omitted_marker, OutputCapture, CAPTURE_KEEP, TOOL_RESULT_LIMIT};
pub use prompt::{system_prompt, DEFAULT_SYSTEM_PROMPT};
pub use run::{
    AgentLoop, NoRecorder, RecordFuture, Recorder, RunOptions, RunOutcome, Session,
    DEFAULT_MAX_ITERATIONS,
};
pub use tool_call::{format_tool_message, ToolCall, ToolOutcome};
