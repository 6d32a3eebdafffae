//! Wire types of the command package: data only, no behaviour.
//!
//! The field names are the published format (docs/contract.md §2–3). They mix styles on purpose —
//! `command_id` next to `commandType` and `resultData` — because that is what existing
//! producers and consumers already speak.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The kind of a command: the `commandType` discriminator on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CommandType {
    /// Run a shell command with `/bin/bash -c`.
    BashExec,
    /// Read a text file (optionally a line range), streamed in chunks.
    FileRead,
    /// Write a file atomically.
    FileWrite,
    /// Apply a unified diff to one file.
    PatchFile,
    /// List the entries of a directory.
    ListDirectory,
    /// Ask a person for a line of input and wait for the answer.
    RequestUserInput,
    /// Write to a background process's stdin.
    ProcessInput,
    /// Read a background process's output from an offset.
    ProcessOutput,
    /// Stop a background process and its whole tree.
    ProcessKill,
    /// List the background processes.
    ProcessList,
}

/// `BASH_EXEC`: run `command` with `/bin/bash -c`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BashExecCommand {
    /// Unique id of this command; generated (UUID v4) when absent.
    #[serde(default)]
    pub command_id: String,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The shell script to run.
    pub command: String,
    /// Absolute directory to start in; the executor's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<PathBuf>,
    /// Kill the process tree after this many milliseconds (default: 5 minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Extra environment variables, added to the environment the shell starts with (see
    /// `EnvPolicy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// In-process only (never on the wire): the environment the shell starts with, in
    /// place of the executor's (an agent's own `shell_environment_policy`).
    #[serde(skip)]
    pub base_env: Option<Arc<[(String, String)]>>,
    /// Start a background process (docs/processes.md): the command ends after
    /// `yield_ms` with the process's id while the process keeps running.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
    /// Background only: how long to wait for (and stream) the first output before
    /// answering (default 1000 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yield_ms: Option<u64>,
    /// Background only: answer once the process is ready (instead of after `yield_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<ReadyCheck>,
    /// Background only: run under a pseudo-terminal (the program sees a terminal; input is
    /// typed: `^C` interrupts, `^D` is end-of-file).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tty: bool,
    /// With `tty`: the terminal's width in columns (default 80).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    /// With `tty`: the terminal's height in rows (default 24).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
    /// Run in the persistent shell of this name (created on first use): `cd`, variables
    /// and functions carry over to the next command of the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// When a background process counts as ready (docs/processes.md): any of the checks
/// given (all of them with `all`), within `timeout_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReadyCheck {
    /// A regular expression matched against the output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// A TCP port on 127.0.0.1 that accepts connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// An `http://` URL answering a GET with a 2xx status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    /// How long to wait (default 30000 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Every check given must pass (default: the first one that passes).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
}

/// `PROCESS_INPUT`: write to a background process's stdin.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProcessInputCommand {
    /// Unique id of this command; generated (UUID v4) when absent.
    #[serde(default)]
    pub command_id: String,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The process.
    pub process_id: String,
    /// What to write (control characters allowed); may be empty with `close_stdin`.
    #[serde(default)]
    pub input: String,
    /// Close the process's stdin after writing (it then reads end-of-file).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub close_stdin: bool,
    /// How long to collect the output that follows (default 1000 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yield_ms: Option<u64>,
    /// Deadline in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// `tty` processes: resize the terminal to this many columns (before writing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    /// `tty` processes: resize the terminal to this many rows (before writing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
}

/// `PROCESS_OUTPUT`: read a background process's output.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProcessOutputCommand {
    /// Unique id of this command; generated (UUID v4) when absent.
    #[serde(default)]
    pub command_id: String,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The process.
    pub process_id: String,
    /// Byte offset to read from (default: where the last `PROCESS_OUTPUT` stopped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Most bytes to return (default 64 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Wait up to this long for output (or the end of the process) when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    /// Deadline in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `PROCESS_KILL`: stop a background process and its whole tree.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProcessKillCommand {
    /// Unique id of this command; generated (UUID v4) when absent.
    #[serde(default)]
    pub command_id: String,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The process.
    pub process_id: String,
    /// `TERM` (default), `INT` or `KILL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Time between the signal and SIGKILL (default 2000 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_ms: Option<u64>,
    /// Deadline in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `PROCESS_LIST`: the background processes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProcessListCommand {
    /// Unique id of this command; generated (UUID v4) when absent.
    #[serde(default)]
    pub command_id: String,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Deadline in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `FILE_READ`: read a UTF-8 text file, whole or a 1-based inclusive line range.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FileReadCommand {
    /// Unique id of this command; generated (UUID v4) when absent.
    #[serde(default)]
    pub command_id: String,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The file to read.
    pub file_path: PathBuf,
    /// First line to return (1-based, inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_line: Option<u64>,
    /// Last line to return (1-based, inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u64>,
    /// Deadline in milliseconds (default: the file actor's, one minute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `FILE_WRITE`: replace a file's content atomically.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FileWriteCommand {
    /// Unique id of this command; generated (UUID v4) when absent.
    #[serde(default)]
    pub command_id: String,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The file to write.
    pub file_path: PathBuf,
    /// The complete new content.
    pub content: String,
    /// Create missing parent directories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_dirs: Option<bool>,
    /// Deadline in milliseconds (default: the file actor's, one minute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `PATCH_FILE`: apply a unified diff to one file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PatchFileCommand {
    /// Unique id of this command; generated (UUID v4) when absent.
    #[serde(default)]
    pub command_id: String,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The file to patch (names inside the diff are ignored, except `/dev/null`).
    pub file_path: PathBuf,
    /// The unified diff.
    pub patch: String,
    /// Deadline in milliseconds (default: the file actor's, one minute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `LIST_DIRECTORY`: list a directory's entries, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ListDirectoryCommand {
    /// Unique id of this command; generated (UUID v4) when absent.
    #[serde(default)]
    pub command_id: String,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The directory to list.
    pub path: PathBuf,
    /// Deadline in milliseconds (default: the file actor's, one minute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `REQUEST_USER_INPUT`: ask a person and wait for the answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RequestUserInputCommand {
    /// Unique id of this command; generated (UUID v4) when absent.
    #[serde(default)]
    pub command_id: String,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What to ask.
    pub prompt: String,
    /// Give up after this many milliseconds (default: wait until cancelled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// One command as it arrives on the wire, tagged by `commandType`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "commandType")]
pub enum Command {
    /// `BASH_EXEC`
    #[serde(rename = "BASH_EXEC")]
    BashExec(BashExecCommand),
    /// `FILE_READ`
    #[serde(rename = "FILE_READ")]
    FileRead(FileReadCommand),
    /// `FILE_WRITE`
    #[serde(rename = "FILE_WRITE")]
    FileWrite(FileWriteCommand),
    /// `PATCH_FILE`
    #[serde(rename = "PATCH_FILE")]
    PatchFile(PatchFileCommand),
    /// `LIST_DIRECTORY`
    #[serde(rename = "LIST_DIRECTORY")]
    ListDirectory(ListDirectoryCommand),
    /// `REQUEST_USER_INPUT`
    #[serde(rename = "REQUEST_USER_INPUT")]
    RequestUserInput(RequestUserInputCommand),
    /// `PROCESS_INPUT`
    #[serde(rename = "PROCESS_INPUT")]
    ProcessInput(ProcessInputCommand),
    /// `PROCESS_OUTPUT`
    #[serde(rename = "PROCESS_OUTPUT")]
    ProcessOutput(ProcessOutputCommand),
    /// `PROCESS_KILL`
    #[serde(rename = "PROCESS_KILL")]
    ProcessKill(ProcessKillCommand),
    /// `PROCESS_LIST`
    #[serde(rename = "PROCESS_LIST")]
    ProcessList(ProcessListCommand),
}

/// Where a command stands. `SUCCEEDED` and `FAILED` are terminal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ExecutionStatus {
    /// Still running; `resultData` may carry a chunk of output.
    #[default]
    Running,
    /// Finished successfully (terminal).
    Succeeded,
    /// Finished with an error, timed out, was cancelled or lost (terminal).
    Failed,
}

/// One message of a command's result stream.
///
/// `commandType` is kept as the text the producer sent, so a command whose type could not
/// be decoded can still be answered on the same stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputResult {
    /// The id of the command this message belongs to.
    pub command_id: String,
    /// The command's type (`BASH_EXEC`, …), or the unrecognised text that was sent.
    #[serde(rename = "commandType", default)]
    pub command_type: String,
    /// `RUNNING`, `SUCCEEDED` or `FAILED`.
    pub status: ExecutionStatus,
    /// Human-readable summary.
    #[serde(default)]
    pub message: String,
    /// What went wrong; omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// Output chunk (RUNNING) or result (terminal); omitted when empty.
    #[serde(
        rename = "resultData",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub result_data: String,
    /// Stable machine-readable code of `error` (cmdr extension), e.g. `TIMEOUT`.
    #[serde(rename = "errorCode", default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// `BASH_EXEC` terminal: the shell's exit status (absent when killed by a signal).
    #[serde(rename = "exitCode", default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// `BASH_EXEC` terminal: the shell's working directory when it exited.
    #[serde(rename = "finalCwd", default, skip_serializing_if = "Option::is_none")]
    pub final_cwd: Option<String>,
    /// Terminal: wall-clock duration of the execution in milliseconds.
    #[serde(
        rename = "durationMs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ms: Option<u64>,
    /// Combined results only: bytes of output left out of `resultData` (its head and tail
    /// are kept, with an `OUTPUT_TRUNCATED` marker between) because the output was longer
    /// than the combined-output limit. Absent when nothing was left out.
    #[serde(
        rename = "truncatedBytes",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub truncated_bytes: Option<u64>,
    /// Process commands (docs/processes.md): the process's id.
    #[serde(rename = "processId", default, skip_serializing_if = "Option::is_none")]
    pub process_id: Option<String>,
    /// Process commands: `running` or `exited`.
    #[serde(
        rename = "processState",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub process_state: Option<String>,
    /// Process commands: the output offset to read from next.
    #[serde(
        rename = "nextOffset",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub next_offset: Option<u64>,
    /// `PROCESS_OUTPUT`: the offset asked for was older than the retained output, which
    /// starts here.
    #[serde(
        rename = "truncatedBefore",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub truncated_before: Option<u64>,
    /// Process commands: the bytes of output the process has produced so far, over its
    /// whole life (compare with `nextOffset`: what is left to read).
    #[serde(
        rename = "outputBytes",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub output_bytes: Option<u64>,
    /// Process commands: when the process exited (RFC 3339, milliseconds), once it has.
    #[serde(rename = "exitedAt", default, skip_serializing_if = "Option::is_none")]
    pub exited_at: Option<String>,
    /// Process commands: the signal that ended the process (`KILL`, `TERM` …), when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// A `RUNNING` note on the command's wait for a free slot of its type (docs/contract.md
    /// §3, "Queueing"): `queued` at once when every slot is busy, `started` when it gets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueNote>,
}

/// Where a command stands in its type's queue: the `queue` field of a `RUNNING` message
/// (docs/contract.md §3, "Queueing").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueNote {
    /// `queued`: every slot of its type is busy, the command waits; `started`: it got one.
    pub state: QueueState,
    /// `queued`: its place in line when it was queued (1: next to start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// `queued`: how many commands of its type run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// `started`: how long it waited, in milliseconds.
    #[serde(rename = "waitedMs", default, skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
}

/// The state a [`QueueNote`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueState {
    /// Waiting for a free slot.
    Queued,
    /// Got a slot: running from now on.
    Started,
}
