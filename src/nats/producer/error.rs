//! [`ProducerError`]: why a submission, cancel or answer failed, with its stable code.

use std::time::Duration;

use cmdr_executors::{ErrorCode, ExecutionStatus, OutputResult};

/// Why a submission, cancel or answer failed.
#[derive(Debug, thiserror::Error)]
pub enum ProducerError {
    /// The id cannot be a subject token.
    #[error("command id '{0}' cannot be used on NATS (no spaces, '.', '*' or '>')")]
    InvalidId(String),
    /// The client scope cannot travel in a header (a control character, or too long).
    #[error("scope '{0}' cannot be sent to the workers (control characters, or over {max} bytes)", max = super::MAX_SCOPE_LEN)]
    InvalidScope(String),
    /// No worker subscribes to the command subject.
    #[error("no cmdr worker is listening on {0}")]
    NoWorkers(String),
    /// Workers exist but none acknowledged in time.
    #[error("no worker accepted the command within {0:?}")]
    NotAccepted(Duration),
    /// Durable mode: the id was used, within the de-duplication window, for a different
    /// command (resubmitting the same command is fine: it replays its results).
    #[error("command id '{0}' was already used for a different command; give this one another id")]
    IdConflict(String),
    /// Every worker asked was full (its backlog at its limit) for the whole wait.
    #[error("every worker was busy for {0:?}; try again later or add workers")]
    Busy(Duration),
    /// `answer_input` named a command that asked nothing.
    #[error("command '{0}' is not waiting for input")]
    NotWaiting(String),
    /// The connection or the server failed.
    #[error("NATS: {0}")]
    Nats(String),
    /// Core mode: the worker running the command is gone (nobody answers on its subject).
    #[error("the worker running the command is gone (no answer on {0})")]
    WorkerLost(String),
    /// Core mode: the worker is there but no longer has the command, and its terminal
    /// result never arrived.
    #[error("the command's results were lost: the worker on {0} no longer has it")]
    ResultsLost(String),
    /// The worker holding the process or session the command is about is gone.
    #[error("{0}")]
    ProcessLost(String),
    /// The command's stream was not read fast enough: more than this many bytes of its
    /// results were waiting unread, so the rest was dropped and the command cancelled.
    #[error("the command's results were dropped: its reader fell behind by more than {0} bytes (the command was cancelled)")]
    ReaderBehind(usize),
}

impl ProducerError {
    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            ProducerError::InvalidId(_) => ErrorCode::InvalidCommand,
            ProducerError::InvalidScope(_) => ErrorCode::InvalidInput,
            ProducerError::NoWorkers(_) => ErrorCode::NoWorkers,
            ProducerError::NotAccepted(_) => ErrorCode::NotAccepted,
            ProducerError::Busy(_) => ErrorCode::WorkersBusy,
            ProducerError::IdConflict(_) => ErrorCode::CommandIdConflict,
            ProducerError::NotWaiting(_) => ErrorCode::NotWaiting,
            ProducerError::Nats(_) => ErrorCode::NatsError,
            ProducerError::WorkerLost(_) => ErrorCode::WorkerLost,
            ProducerError::ResultsLost(_) | ProducerError::ReaderBehind(_) => {
                ErrorCode::ResultsLost
            }
            ProducerError::ProcessLost(_) => ErrorCode::ProcessLost,
        }
    }
}

pub(super) fn nats_error(e: impl std::fmt::Display) -> ProducerError {
    ProducerError::Nats(e.to_string())
}

/// The `FAILED` result of a command refused before it ran (`e` says why).
pub(super) fn rejected(command_id: &str, command_type: &str, e: &ProducerError) -> OutputResult {
    OutputResult {
        command_id: command_id.to_owned(),
        command_type: command_type.to_owned(),
        status: ExecutionStatus::Failed,
        message: "Command rejected before execution.".to_owned(),
        error: e.to_string(),
        error_code: Some(e.code().into()),
        ..Default::default()
    }
}
