//! Why a command failed, as an enum with stable string codes.
//!
//! Executors return [`ExecError`] for anything that stops them; the runtime turns it into
//! the command's one `FAILED` result, with [`ExecError::code`] in `errorCode`.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::patch::PatchError;
use crate::ErrorCode;

/// Everything that can end a command with `FAILED`, besides a non-zero exit status.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// A field had a value the executor cannot use (relative path, bad line range …).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A path does not exist.
    #[error("{}: no such file or directory", .0.display())]
    NotFound(PathBuf),
    /// The OS refused access to a path.
    #[error("{}: permission denied", .0.display())]
    PermissionDenied(PathBuf),
    /// The file system is full (or the quota is used up); nothing was replaced.
    #[error("{}: no space left on the device (or quota exceeded); the file was not changed", .0.display())]
    NoSpace(PathBuf),
    /// Another I/O failure.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The path being worked on.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The path is outside the allowed roots (`--allow-root`).
    #[error("{0}")]
    PathNotAllowed(#[from] crate::confine::Denied),
    /// The path names something that is not a regular file (a directory, FIFO, socket,
    /// device): file commands read and write regular files only.
    #[error("{}: {kind}, not a regular file{hint}", .path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is (`a directory`, `a FIFO (named pipe)` …).
        kind: &'static str,
        /// What to use instead, if anything (`; use LIST_DIRECTORY`).
        hint: &'static str,
    },
    /// The file was changed by someone else while the command was changing it; nothing
    /// was written.
    #[error("{}: changed by another process while this command was changing it ({detail}); nothing was written", .path.display())]
    Conflict {
        /// The file.
        path: PathBuf,
        /// What changed.
        detail: String,
    },
    /// A file is not UTF-8 text.
    #[error("{}: not a UTF-8 text file ({size} bytes); binary content is not returned", .path.display())]
    NotText {
        /// The file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
    },
    /// A patch could not be parsed or applied; the file is untouched.
    #[error("{0}")]
    Patch(#[from] PatchError),
    /// The process could not be started.
    #[error("could not start {program}: {source}")]
    Spawn {
        /// What was being started.
        program: String,
        /// The OS error.
        source: io::Error,
    },
    /// Nobody can answer a `REQUEST_USER_INPUT`.
    #[error("no user input available: {0}")]
    InputUnavailable(String),
    /// The command was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The command ran past its deadline and was stopped.
    #[error("timed out after {}", crate::outcome::human_duration(*.0))]
    TimedOut(Duration),
    /// The runtime is shutting down and took no new work.
    #[error("cmdr is shutting down")]
    ShuttingDown,
    /// Whoever was reading the results went away, so the command was stopped.
    #[error("the result reader went away")]
    ReceiverGone,
    /// The executor panicked; the message is the panic's.
    #[error("executor panicked: {0}")]
    Panicked(String),
    /// The executor stopped without producing a result (task dropped, runtime gone).
    #[error("executor stopped without a result")]
    Lost,
    /// No process with this id (in this scope).
    #[error("no process '{0}'")]
    ProcessNotFound(String),
    /// The process has exited: it takes no more input.
    #[error("process '{id}' has exited{}", .code.map(|c| format!(" (exit code {c})")).unwrap_or_default())]
    ProcessExited {
        /// The process.
        id: String,
        /// Its exit code, when it exited normally.
        code: Option<i32>,
    },
    /// The process took none of its pending input for the whole wait (it does not read
    /// its stdin, or not now): the rest of the input was dropped.
    #[error("process '{id}' is not reading its input: it took {written} of {total} bytes, then nothing for {stalled:?} (the rest was dropped)")]
    InputBlocked {
        /// The process.
        id: String,
        /// Bytes it took.
        written: usize,
        /// Bytes sent.
        total: usize,
        /// How long it took nothing.
        stalled: std::time::Duration,
    },
    /// The scope (or the whole registry) runs as many processes as it may: how many.
    #[error("too many background processes ({0}); stop one first")]
    TooManyProcesses(String),
    /// An executor was handed a command of another type.
    #[error("this executor runs {expected} commands, not {got}")]
    WrongCommandType {
        /// The type the executor serves.
        expected: &'static str,
        /// The type it was given.
        got: &'static str,
    },
}

impl ExecError {
    /// The stable code, as sent in `errorCode`.
    pub fn code(&self) -> ErrorCode {
        match self {
            ExecError::InvalidInput(_) => ErrorCode::InvalidInput,
            ExecError::NotFound(_) => ErrorCode::NotFound,
            ExecError::PermissionDenied(_) => ErrorCode::PermissionDenied,
            ExecError::NoSpace(_) => ErrorCode::NoSpace,
            ExecError::Io { .. } => ErrorCode::IoError,
            ExecError::PathNotAllowed(_) => ErrorCode::PathNotAllowed,
            ExecError::NotText { .. } => ErrorCode::NotText,
            ExecError::NotAFile { .. } => ErrorCode::NotAFile,
            ExecError::Conflict { .. } => ErrorCode::Conflict,
            ExecError::Patch(e) => e.code(),
            ExecError::Spawn { .. } => ErrorCode::SpawnFailed,
            ExecError::InputUnavailable(_) => ErrorCode::InputUnavailable,
            ExecError::Cancelled => ErrorCode::Cancelled,
            ExecError::TimedOut(_) => ErrorCode::Timeout,
            ExecError::ShuttingDown => ErrorCode::ShuttingDown,
            ExecError::ReceiverGone => ErrorCode::ReceiverGone,
            ExecError::Panicked(_) => ErrorCode::ExecutorPanicked,
            ExecError::Lost => ErrorCode::ExecutorLost,
            ExecError::WrongCommandType { .. } => ErrorCode::WrongCommandType,
            ExecError::ProcessNotFound(_) => ErrorCode::ProcessNotFound,
            ExecError::ProcessExited { .. } => ErrorCode::ProcessExited,
            ExecError::InputBlocked { .. } => ErrorCode::InputBlocked,
            ExecError::TooManyProcesses(_) => ErrorCode::TooManyProcesses,
        }
    }

    /// Classifies an I/O error on `path` (not found and permission denied get their own
    /// variants, so callers can tell them apart without parsing text).
    pub fn io(path: &Path, source: io::Error) -> Self {
        match source.kind() {
            io::ErrorKind::NotFound => ExecError::NotFound(path.to_path_buf()),
            io::ErrorKind::PermissionDenied => ExecError::PermissionDenied(path.to_path_buf()),
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
                ExecError::NoSpace(path.to_path_buf())
            }
            _ => ExecError::Io {
                path: path.to_path_buf(),
                source,
            },
        }
    }
}
