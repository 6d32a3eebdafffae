//! [`ErrorCode`]: every stable error code cmdr sends, as one type.
//!
//! A code travels as its wire string: `errorCode` of a command's terminal result, `code`
//! of an HTTP error body, `data.code` of a JSON-RPC error, `error [CODE]` on the command
//! line. The strings never change; [`ErrorCode::as_str`] gives them, [`ErrorCode::parse`]
//! reads them back. Each code has one [`ErrorClass`], which every transport maps
//! exhaustively (HTTP status, JSON-RPC code): a new code must say what it is.
//! `docs/errors.md` lists every code; a test keeps the two in step.

use std::fmt;

/// What kind of failure a code names, which decides how transports present it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The request or command itself is wrong (HTTP 400, JSON-RPC -32602).
    Invalid,
    /// No valid credentials (HTTP 401).
    Unauthorized,
    /// Understood and refused (HTTP 403).
    Forbidden,
    /// Something named does not exist (HTTP 404, JSON-RPC -32602).
    NotFound,
    /// A known route asked with a method it does not serve (HTTP 405).
    MethodNotAllowed,
    /// In the way of something in progress (HTTP 409).
    Conflict,
    /// A body over the limit (HTTP 413).
    PayloadTooLarge,
    /// A request whose body did not arrive in time (HTTP 408).
    RequestTimeout,
    /// Cannot be served now; try later (HTTP 503).
    Unavailable,
    /// cmdr's own fault (HTTP 500, JSON-RPC -32603); messages carry no internals.
    Internal,
    /// How a command or run ended (timeout, cancel, a lost worker, a failing model): a
    /// terminal result's `errorCode`, never a refusal of a request.
    Failed,
}

macro_rules! error_codes {
    ($($(#[doc = $doc:literal])+ $variant:ident = $wire:literal, $class:ident;)+) => {
        /// Every stable error code (see the module documentation).
        #[non_exhaustive]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($(#[doc = $doc])+ $variant,)+
        }

        impl ErrorCode {
            /// Every code, in documentation order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)+];

            /// The wire string (`"PATH_NOT_ALLOWED"`).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $wire,)+
                }
            }

            /// What kind of failure it names.
            pub const fn class(self) -> ErrorClass {
                match self {
                    $(ErrorCode::$variant => ErrorClass::$class,)+
                }
            }

            /// The code with this wire string, if there is one.
            pub fn parse(wire: &str) -> Option<ErrorCode> {
                match wire {
                    $($wire => Some(ErrorCode::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

error_codes! {
    // Decoding commands.
    /// A line or body that is not a JSON object (or not UTF-8).
    MalformedJson = "MALFORMED_JSON", Invalid;
    /// No `commandType`, or one no executor knows.
    UnknownCommandType = "UNKNOWN_COMMAND_TYPE", Invalid;
    /// A field of the command has the wrong type or value (the message names it).
    InvalidCommand = "INVALID_COMMAND", Invalid;
    /// A known command type that this registry does not serve.
    UnsupportedCommandType = "UNSUPPORTED_COMMAND_TYPE", Invalid;
    /// A command handed to an executor of another type (a wiring bug).
    WrongCommandType = "WRONG_COMMAND_TYPE", Internal;
    /// A command with this `command_id` is already in flight.
    DuplicateCommandId = "DUPLICATE_COMMAND_ID", Conflict;
    /// The registry (or server) is shutting down and takes no new commands.
    ShuttingDown = "SHUTTING_DOWN", Unavailable;

    // Executors.
    /// A field value an executor cannot use (empty path, bad env name, …).
    InvalidInput = "INVALID_INPUT", Invalid;
    /// The file or directory does not exist.
    NotFound = "NOT_FOUND", Failed;
    /// The OS refused access to the file.
    PermissionDenied = "PERMISSION_DENIED", Failed;
    /// The disk is full.
    NoSpace = "NO_SPACE", Failed;
    /// Any other I/O failure (the message names it).
    IoError = "IO_ERROR", Internal;
    /// The path (or working folder) is outside the allowed roots.
    PathNotAllowed = "PATH_NOT_ALLOWED", Invalid;
    /// The file is not UTF-8 text.
    NotText = "NOT_TEXT", Failed;
    /// Not a regular file (a directory, FIFO, socket, device): not opened.
    NotAFile = "NOT_A_FILE", Failed;
    /// Another process changed the file while cmdr was changing it; nothing written.
    Conflict = "CONFLICT", Conflict;
    /// The shell could not be started.
    SpawnFailed = "SPAWN_FAILED", Failed;
    /// `REQUEST_USER_INPUT` with nobody who can answer.
    InputUnavailable = "INPUT_UNAVAILABLE", Failed;
    /// Stopped by a cancel.
    Cancelled = "CANCELLED", Failed;
    /// Stopped by its timeout.
    Timeout = "TIMEOUT", Failed;
    /// The shell exited with a status other than 0 (`exitCode` holds it).
    ExitStatus = "EXIT_STATUS", Failed;
    /// The shell ended by a signal.
    Killed = "KILLED", Failed;
    /// Whoever read the results went away; the command was stopped.
    ReceiverGone = "RECEIVER_GONE", Failed;
    /// The executor panicked; the command failed, the registry lives on.
    ExecutorPanicked = "EXECUTOR_PANICKED", Internal;
    /// The executor ended without a terminal result.
    ExecutorLost = "EXECUTOR_LOST", Internal;
    /// A result stream ended without a terminal result (combined output).
    IncompleteStream = "INCOMPLETE_STREAM", Failed;

    // Processes (docs/processes.md).
    /// No process with that id in this scope.
    ProcessNotFound = "PROCESS_NOT_FOUND", NotFound;
    /// The NATS worker holding the process (or session) is gone, and the process with it.
    ProcessLost = "PROCESS_LOST", NotFound;
    /// The process has exited: it takes no more input.
    ProcessExited = "PROCESS_EXITED", Failed;
    /// The process stopped taking its input: what it did not take was dropped.
    InputBlocked = "INPUT_BLOCKED", Failed;
    /// The scope already holds as many processes as it may.
    TooManyProcesses = "TOO_MANY_PROCESSES", Unavailable;
    /// A background process was not ready within its `ready.timeout_ms` (it still runs).
    ReadyTimeout = "READY_TIMEOUT", Failed;

    // PATCH_FILE.
    /// The patch cannot be parsed.
    PatchInvalid = "PATCH_INVALID", Invalid;
    /// The patch holds no hunk.
    PatchEmpty = "PATCH_EMPTY", Invalid;
    /// The patch names more than one file.
    PatchMultipleFiles = "PATCH_MULTIPLE_FILES", Invalid;
    /// A hunk does not apply; nothing written.
    PatchHunkFailed = "PATCH_HUNK_FAILED", Failed;
    /// A patch creating a file whose target exists.
    PatchTargetExists = "PATCH_TARGET_EXISTS", Failed;
    /// A patch changing a file that does not exist.
    PatchTargetMissing = "PATCH_TARGET_MISSING", Failed;
    /// Every hunk is already applied.
    PatchNoChange = "PATCH_NO_CHANGE", Failed;

    // NATS.
    /// No worker subscribes to the command's subject.
    NoWorkers = "NO_WORKERS", Unavailable;
    /// No worker accepted the command in time.
    NotAccepted = "NOT_ACCEPTED", Failed;
    /// Durable: the id was used, within the de-duplication window, for a different command.
    CommandIdConflict = "COMMAND_ID_CONFLICT", Conflict;
    /// Every worker asked was full for the whole wait (their backlogs at their limits).
    WorkersBusy = "WORKERS_BUSY", Unavailable;
    /// The worker that ran the command is gone.
    WorkerLost = "WORKER_LOST", Failed;
    /// The worker lives but no longer has the command: its results were lost.
    ResultsLost = "RESULTS_LOST", Failed;
    /// An answer to a question nobody waits for (any more).
    NotWaiting = "NOT_WAITING", NotFound;
    /// Talking to NATS failed.
    NatsError = "NATS_ERROR", Unavailable;
    /// A worker could not subscribe to its subjects.
    NatsSubscribeFailed = "NATS_SUBSCRIBE_FAILED", Unavailable;
    /// A JetStream operation failed (durable mode).
    JetstreamError = "JETSTREAM_ERROR", Unavailable;
    /// A durable command delivered too often (its workers kept dying); given up.
    RedeliveryLimit = "REDELIVERY_LIMIT", Failed;

    // Agents, conversations, runs.
    /// No agent of that name.
    AgentNotFound = "AGENT_NOT_FOUND", NotFound;
    /// An agent name longer than any file name (255 bytes).
    AgentNameInvalid = "AGENT_NAME_INVALID", Invalid;
    /// The agent's `config.toml` is broken.
    AgentInvalid = "AGENT_INVALID", Invalid;
    /// The agent has no command of that name.
    CommandNotFound = "COMMAND_NOT_FOUND", NotFound;
    /// An agent command's name or file is invalid.
    CommandInvalid = "COMMAND_INVALID", Invalid;
    /// No conversation with that id.
    ConversationNotFound = "CONVERSATION_NOT_FOUND", NotFound;
    /// A conversation with that id exists already.
    ConversationExists = "CONVERSATION_EXISTS", Invalid;
    /// The conversation belongs to another agent.
    AgentMismatch = "AGENT_MISMATCH", Invalid;
    /// The conversation is archived and takes no new runs.
    ConversationArchived = "CONVERSATION_ARCHIVED", Invalid;
    /// The conversation has a run in progress.
    RunInProgress = "RUN_IN_PROGRESS", Conflict;
    /// `working_folder` is not an absolute path.
    WorkingFolderInvalid = "WORKING_FOLDER_INVALID", Invalid;
    /// `working_folder` is not an existing directory.
    WorkingFolderNotFound = "WORKING_FOLDER_NOT_FOUND", Invalid;
    /// The conversation database failed.
    StoreError = "STORE_ERROR", Internal;

    // The model.
    /// No model is configured, or it cannot be reached.
    LlmUnavailable = "LLM_UNAVAILABLE", Unavailable;
    /// The model's server answered with an HTTP error.
    LlmHttpError = "LLM_HTTP_ERROR", Failed;
    /// The model's stream is not what the protocol says.
    LlmBadStream = "LLM_BAD_STREAM", Failed;
    /// The model sent nothing for too long.
    LlmTimeout = "LLM_TIMEOUT", Failed;
    /// The model's stream ended before its end.
    LlmStreamCut = "LLM_STREAM_CUT", Failed;

    // HTTP and MCP.
    /// The request is malformed (JSON, a field, a query, an unknown tool).
    InvalidRequest = "INVALID_REQUEST", Invalid;
    /// Two `Host` or two `Origin` headers.
    DuplicateHeader = "DUPLICATE_HEADER", Invalid;
    /// No valid `Authorization: Bearer` token.
    Unauthorized = "UNAUTHORIZED", Unauthorized;
    /// A browser request from another origin.
    ForbiddenOrigin = "FORBIDDEN_ORIGIN", Forbidden;
    /// Without a token, a request addressed to a host that is not loopback.
    ForbiddenHost = "FORBIDDEN_HOST", Forbidden;
    /// An answer to a question without the question's key.
    InputForbidden = "INPUT_FORBIDDEN", Forbidden;
    /// No route for the path.
    RouteNotFound = "ROUTE_NOT_FOUND", NotFound;
    /// The path does not serve the method.
    MethodNotAllowed = "METHOD_NOT_ALLOWED", MethodNotAllowed;
    /// Cancel: nothing runs with that id.
    CommandNotRunning = "COMMAND_NOT_RUNNING", NotFound;
    /// Input: no question waits under that id.
    NotWaitingForInput = "NOT_WAITING_FOR_INPUT", NotFound;
    /// The request body is over the limit.
    PayloadTooLarge = "PAYLOAD_TOO_LARGE", PayloadTooLarge;
    /// The request body did not arrive within the body deadline.
    BodyTimeout = "BODY_TIMEOUT", RequestTimeout;
    /// The bytes of request bodies the server holds at once are at their cap.
    BodyBudgetExhausted = "BODY_BUDGET_EXHAUSTED", Unavailable;
    /// Every connection slot is busy with a request.
    TooManyConnections = "TOO_MANY_CONNECTIONS", Unavailable;
    /// The MCP session cap is reached.
    TooManySessions = "TOO_MANY_SESSIONS", Unavailable;
    /// cmdr failed internally; the details are in its log.
    InternalError = "INTERNAL_ERROR", Internal;
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ErrorCode> for String {
    fn from(code: ErrorCode) -> String {
        code.as_str().to_owned()
    }
}

impl From<ErrorCode> for std::borrow::Cow<'static, str> {
    fn from(code: ErrorCode) -> Self {
        std::borrow::Cow::Borrowed(code.as_str())
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_strings_are_unique_and_read_back() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "{code} twice");
            assert_eq!(ErrorCode::parse(code.as_str()), Some(*code));
            assert!(code
                .as_str()
                .chars()
                .all(|c| c.is_ascii_uppercase() || c == '_'));
        }
        assert_eq!(ErrorCode::parse("NO_SUCH_CODE"), None);
    }
}
