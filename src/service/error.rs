//! Why a run or a lookup was refused, with the stable codes every transport sends
//! (SPEC §5) and the class each maps to (404, 400, 409, 503, 500).

use crate::agents::AgentError;
use crate::store::StoreError;

/// How a transport should present an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Something named does not exist (HTTP 404).
    NotFound,
    /// The request itself is wrong (HTTP 400, JSON-RPC -32602).
    Invalid,
    /// The conversation is busy (HTTP 409).
    Conflict,
    /// No model can be asked (HTTP 503).
    Unavailable,
    /// cmdr's own fault (HTTP 500); the message stays free of internals.
    Internal,
}

/// Everything the agent service can refuse.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Agents, their configs and command files.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The conversation store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The conversation has a run in progress.
    #[error("a run is already in progress on conversation '{0}'")]
    RunInProgress(String),
    /// `working_folder` is not an absolute path.
    #[error("working_folder must be an absolute path, got '{0}'")]
    WorkingFolderInvalid(String),
    /// `working_folder` is not an existing directory.
    #[error("working_folder '{0}' is not an existing directory")]
    WorkingFolderNotFound(String),
    /// `working_folder` is outside the allowed roots (`--allow-root`).
    #[error("{0}")]
    PathNotAllowed(cmdr_executors::Denied),
    /// The conversation belongs to another agent.
    #[error("conversation '{conversation}' belongs to agent '{owner}', not '{requested}'")]
    AgentMismatch {
        /// The conversation.
        conversation: String,
        /// Its agent.
        owner: String,
        /// The agent asked to run on it.
        requested: String,
    },
    /// The conversation is archived and takes no new runs.
    #[error("conversation '{0}' is archived")]
    ConversationArchived(String),
    /// No model is configured.
    #[error("no language model is configured: set CMDR_LLM_BASE_URL and CMDR_LLM_MODEL")]
    LlmUnavailable,
    /// A field of the request is malformed.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// cmdr itself failed (a worker thread died); details are in the log only.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ServiceError {
    /// The stable code (`AGENT_NOT_FOUND`, `RUN_IN_PROGRESS`, …).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Agent(e) => e.code(),
            Self::Store(e) => e.code(),
            Self::RunInProgress(_) => "RUN_IN_PROGRESS",
            Self::WorkingFolderInvalid(_) => "WORKING_FOLDER_INVALID",
            Self::WorkingFolderNotFound(_) => "WORKING_FOLDER_NOT_FOUND",
            Self::PathNotAllowed(_) => "PATH_NOT_ALLOWED",
            Self::AgentMismatch { .. } => "AGENT_MISMATCH",
            Self::ConversationArchived(_) => "CONVERSATION_ARCHIVED",
            Self::LlmUnavailable => "LLM_UNAVAILABLE",
            Self::InvalidRequest(_) => "INVALID_REQUEST",
            Self::Internal(_) => "INTERNAL_ERROR",
        }
    }

    /// How transports present it.
    pub fn class(&self) -> ErrorClass {
        match self.code() {
            "AGENT_NOT_FOUND" | "COMMAND_NOT_FOUND" | "CONVERSATION_NOT_FOUND" => {
                ErrorClass::NotFound
            }
            "RUN_IN_PROGRESS" => ErrorClass::Conflict,
            "LLM_UNAVAILABLE" => ErrorClass::Unavailable,
            "STORE_ERROR" | "IO_ERROR" | "INTERNAL_ERROR" => ErrorClass::Internal,
            _ => ErrorClass::Invalid,
        }
    }
}
