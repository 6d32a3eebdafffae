//! Why a run or a lookup was refused, with the stable codes every transport sends
//! (docs/contract.md §5); each code's [`ErrorClass`] decides how transports present it.

use crate::agents::AgentError;
use crate::store::StoreError;
use cmdr_executors::{ErrorClass, ErrorCode};

/// Everything the agent service can refuse.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Agents, their configs and command files.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The conversation store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The conversation has a run in progress (in this process or another).
    #[error("a run is already in progress on conversation '{0}'")]
    RunInProgress(String),
    /// The conversation's lock file could not be made or locked (`STORE_ERROR`).
    #[error("cannot take the run lock of conversation '{conversation_id}': {source}")]
    LockFile {
        /// The conversation.
        conversation_id: String,
        /// What went wrong.
        #[source]
        source: super::LockFileError,
    },
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

impl From<super::LockError> for ServiceError {
    fn from(error: super::LockError) -> Self {
        match error {
            super::LockError::Busy(busy) => Self::RunInProgress(busy.0),
            super::LockError::File {
                conversation_id,
                source,
            } => Self::LockFile {
                conversation_id,
                source,
            },
        }
    }
}

impl ServiceError {
    /// The stable code (`AGENT_NOT_FOUND`, `RUN_IN_PROGRESS`, …).
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Agent(e) => e.code(),
            Self::Store(e) => e.code(),
            Self::RunInProgress(_) => ErrorCode::RunInProgress,
            Self::LockFile { .. } => ErrorCode::StoreError,
            Self::WorkingFolderInvalid(_) => ErrorCode::WorkingFolderInvalid,
            Self::WorkingFolderNotFound(_) => ErrorCode::WorkingFolderNotFound,
            Self::PathNotAllowed(_) => ErrorCode::PathNotAllowed,
            Self::AgentMismatch { .. } => ErrorCode::AgentMismatch,
            Self::ConversationArchived(_) => ErrorCode::ConversationArchived,
            Self::LlmUnavailable => ErrorCode::LlmUnavailable,
            Self::InvalidRequest(_) => ErrorCode::InvalidRequest,
            Self::Internal(_) => ErrorCode::InternalError,
        }
    }

    /// How transports present it (the code's class).
    pub fn class(&self) -> ErrorClass {
        self.code().class()
    }
}
