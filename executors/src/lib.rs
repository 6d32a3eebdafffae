//! # cmdr-executors — the command package
//!
//! Commands arrive as JSON ([`decode_command`]), go through one [`Registry`], and are run
//! by executor actors that stream [`OutputResult`]s back over channels.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use cmdr_executors::{combine_output_results, decode_command, Registry};
//!
//! let registry = Registry::with_defaults();
//! let command = decode_command(r#"{"commandType":"BASH_EXEC","command":"echo hi"}"#)?;
//! let stream = registry.execute(command).await?;
//! let result = combine_output_results(stream, None).await;
//! assert_eq!(result.result_data, "hi\n");
//! # Ok(()) }
//! ```
//!
//! ## Layout
//! - [`protocol`]: the wire types, data only (docs/contract.md §2–3).
//! - `command`: what every command can be asked (id, type, timeout).
//! - `decode`: untrusted JSON → [`Command`], errors naming the field.
//! - `executor`: the [`Executor`] trait and the [`ExecContext`] an executor gets.
//! - `actor`: the actor loop, the supervised command task, [`ActorConfig`].
//! - `load`: an actor's counters ([`ActorLoad`]) and the notes of a queued command.
//! - `inflight`: the table of running commands (cancel from anywhere), stop reasons.
//! - `terminal`: the one place a terminal result is built.
//! - `stream`: [`ResultStream`], the receiving end of one command.
//! - `registry`: [`Registry`], type → actor, `execute`, `cancel`, `shutdown`.
//! - `combine`: [`combine_output_results`].
//! - `confine`: [`PathPolicy`], confinement of paths to allowed roots (`--allow-root`);
//!   Landlock for `BASH_EXEC` (writes beneath the roots, one domain per scope scoping
//!   signals and abstract sockets) lives in `bash_exec/sandbox.rs` and `domain.rs`.
//! - `input`: the [`InputBroker`] trait and the in-process [`PendingInputs`].
//! - One file per executor: `bash_exec/` (`BASH_EXEC`), `file_read` (`FILE_READ`),
//!   `file_write` (`FILE_WRITE`), `patch_file` (`PATCH_FILE`, engine in [`patch`]),
//!   `list_directory` (`LIST_DIRECTORY`), `request_user_input` (`REQUEST_USER_INPUT`).
//! - Helpers: `atomic_write`, `utf8` (incremental decoding), `outcome`, `error`.
//!
//! ## Theory of operation
//! Each command type is served by an **actor**: a long-lived task owning a bounded
//! mailbox and a semaphore (its concurrency limit). [`Registry::execute`] claims the
//! command's id in the shared **in-flight table** (a duplicate id is refused), creates the
//! command's result channels and posts an envelope to the actor's mailbox — waiting when
//! too many commands of its type already wait. The actor starts a command at once when one
//! of its slots (its concurrency limit) is free; otherwise it tells the command's reader
//! at once that it is **queued** and leaves it waiting, in line, for a slot. It runs each
//! command in its own task, under a **supervisor** that catches panics, enforces
//! the deadline (`timeout_ms` or the actor's default) and, once the command is told to
//! stop, gives the executor a grace period to kill what it started.
//!
//! Executors can only send `RUNNING` messages, over a bounded channel: a slow reader makes
//! the executor wait (**back-pressure**; memory stays bounded). The **terminal** message is
//! built by the runtime alone (`terminal.rs`) from what the executor returned and why it
//! was stopped, and travels over a oneshot, so every command ends with exactly one
//! terminal message — also after a panic, a timeout, a cancellation, a shutdown, or a
//! runtime torn down under it ([`ResultStream`] then reports `EXECUTOR_LOST`).
//!
//! **Cancellation** is one [`tokio_util::sync::CancellationToken`] per command, fired by
//! [`Registry::cancel`], [`ResultStream::cancel`], the deadline, shutdown, or dropping the
//! [`ResultStream`] early; the first reason recorded is the one reported.
//!
//! **Shutdown** ([`Registry::shutdown`]) refuses new commands, answers queued ones with
//! `SHUTTING_DOWN`, lets running ones finish within a grace period, cancels the rest and
//! returns when every terminal message has been produced.

mod actor;
mod atomic_write;
mod bash_exec;
mod combine;
mod command;
mod confine;
mod decode;
mod error;
mod error_code;
mod executor;
mod file_read;
mod file_write;
pub mod files;
mod inflight;
mod input;
mod list_directory;
mod load;
mod outcome;
pub mod patch;
mod patch_file;
pub mod process;
pub mod protocol;
mod registry;
mod request_user_input;
mod scope;
mod stream;
mod terminal;
mod utf8;

pub use actor::{ActorConfig, DEFAULT_MAX_CONCURRENT};
pub use atomic_write::{write_atomic, NEW_FILE_MODE};
pub use bash_exec::remove_cgroups;
pub use bash_exec::DEFAULT_YIELD;
pub use bash_exec::{
    BashExec, BashExecConfig, EnvPolicy, Inherit, Sandbox, SandboxStatus, TreeMechanism, CORE_VARS,
    CWD_REPORT_FD, DEFAULT_EXCLUDES, DRAIN_AFTER_EXIT, FLUSH_BYTES, FLUSH_INTERVAL, MARKER_VAR,
    NEVER_INHERITED, SHELL_STARTUP_VARS,
};
pub use combine::{combine_output_results, combine_output_results_limited, DEFAULT_COMBINED_LIMIT};
pub use command::{UnknownCommandType, MAX_GRACE_MS, MAX_TIMEOUT_MS, MAX_WAIT_MS};
pub use confine::{resolve, Denied, PathPolicy, RootError};
pub use decode::{
    decode_command, decode_command_slice, peek_command_id, DecodeError, DecodeFailure,
};
pub use error::ExecError;
pub use error_code::{ErrorClass, ErrorCode};
pub use executor::{ExecContext, ExecFuture, Executor, FnExecutor, OutputSink, ScopeEnder};
pub use file_read::{FileRead, READ_CHUNK_SIZE};
pub use file_write::FileWrite;
pub use inflight::StopReason;
pub use input::{
    InputBroker, InputError, InputFuture, InputRequest, NoInputBroker, NotWaiting, PendingInputs,
};
pub use list_directory::ListDirectory;
pub use load::ActorLoad;
pub use outcome::{human_duration, Outcome, ProcessStatus};
pub use patch_file::PatchFile;
pub use process::{
    local_number, KillSignal, ProcessLimits, ProcessState, ProcessTable, Scope, UnknownSignal,
};
pub use protocol::{
    BashExecCommand, Command, CommandType, ExecutionStatus, FileReadCommand, FileWriteCommand,
    ListDirectoryCommand, OutputResult, PatchFileCommand, ProcessInputCommand, ProcessKillCommand,
    ProcessListCommand, ProcessOutputCommand, QueueNote, QueueState, ReadyCheck,
    RequestUserInputCommand,
};
pub use registry::{
    Confinement, Registry, RegistryConfig, SubmitError, RESULT_CHANNEL_CAPACITY, SCOPE_END_GRACE,
    WAITING_ACTOR_LIMIT,
};
pub use request_user_input::RequestUserInput;
pub use stream::ResultStream;
pub use utf8::Utf8Decoder;
