//! The agent loop: stream a model's reply, run the `<shell>` commands it writes through
//! the registry, feed the results back, repeat (docs/contract.md §4).
//!
//! - `detector`: [`ShellTagDetector`], incremental detection of the loop's tags.
//! - `events`: [`AgentEvent`], what a run streams to its client (data only).
//! - `history`: [`to_chat_messages`], the one mapping of the append-only conversation
//!   ([`Message`]s, defined in [`crate::turn`]) to what the model is sent.
//! - `output`: [`OutputCapture`], a command's output in bounded memory, and truncation.
//! - `tag_request`: [`TagRequest`], what a tag asks for, its attributes checked.
//! - `tool_call`: running one command through the registry (`BASH_EXEC`,
//!   `REQUEST_USER_INPUT`, the process commands), formatting the `tool` message.
//! - `prompt`: the default system prompt.
//! - `stop`: [`StopScanner`], where a reply ends (the stop sequences).
//! - `session`: [`Session`], a conversation as the loop needs it (messages, working
//!   directory, process scope, the model's read positions).
//! - `run`: [`AgentLoop`], the loop.

mod detector;
mod events;
mod history;
mod output;
mod prompt;
mod run;
mod session;
mod stop;
mod tag_request;
mod tool_call;

pub use crate::turn::{CommandMeta, Message, Role, ToolRun, TurnStatus};
pub use detector::{
    Attribute, DetectedCommand, ShellTagDetector, TagKind, ATTRIBUTE_PATTERN, MAX_OPEN_TAG,
    OPEN_TAG_PATTERN,
};
pub use events::{AgentEvent, DoneReason, ToolStatus};
pub use history::{to_chat_messages, TOOL_RESULTS_CLOSE, TOOL_RESULTS_OPEN};
pub use output::{omitted_marker, OutputCapture, CAPTURE_KEEP, TOOL_RESULT_LIMIT};
pub use prompt::{system_prompt, DEFAULT_SYSTEM_PROMPT};
pub use run::{
    AgentLoop, NoRecorder, RecordFuture, Recorder, RunOptions, RunOutcome, DEFAULT_MAX_ITERATIONS,
    DEFAULT_MAX_TOKENS,
};
pub use session::{ReadPositions, Session};
pub use stop::{StopScanner, STOP_MARKERS, STOP_SEQUENCES};
pub use tag_request::{TagRequest, DEFAULT_OUTPUT_WAIT, KEYS};
pub use tool_call::{format_tool_message, ToolCall, ToolOutcome};
