//! [`AgentError`]: everything that can go wrong finding an agent or one of its commands,
//! each with a stable code (docs/contract.md §5).

use std::path::PathBuf;

use cmdr_executors::ErrorCode;

/// An error of the agent catalog. [`AgentError::code`] is the stable string every
/// transport reports; the `Display` text is one sentence for people (no stack traces;
/// paths are relative to the agents directory when they lie inside it).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// No agent of that name: no such folder, or a name that cannot be a folder of the
    /// agents directory (empty, a path separator, `..`, a leading `.`).
    #[error("agent `{0}` not found")]
    AgentNotFound(String),
    /// A name too long to be any file's (over 255 bytes); the text says so without
    /// repeating the name.
    #[error("invalid agent name: {0}")]
    AgentNameInvalid(&'static str),
    /// The agent exists but has no `commands/<command>.json`.
    #[error("agent `{agent}` has no command `{command}`")]
    CommandNotFound {
        /// The agent's name.
        agent: String,
        /// The command's name.
        command: String,
    },
    /// A command name that could escape the `commands/` folder, or a command file that
    /// breaks the schema; the text says which name or which key/item is wrong.
    #[error("invalid command: {0}")]
    CommandInvalid(String),
    /// The agent's `config.toml` is broken (syntax, unknown key, value out of range); the
    /// text names the file, the line and the key.
    #[error("invalid agent `{agent}`: {reason}")]
    AgentInvalid {
        /// The agent's name.
        agent: String,
        /// What is wrong, starting with the file (`<agent>/config.toml …`).
        reason: String,
    },
    /// Reading the agents directory failed for a reason other than "not there".
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The path that failed, relative to the agents directory when inside it.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl AgentError {
    /// The stable code: `AGENT_NOT_FOUND`, `AGENT_NAME_INVALID`, `COMMAND_NOT_FOUND`,
    /// `COMMAND_INVALID`, `AGENT_INVALID` or `IO_ERROR`.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::AgentNotFound(_) => ErrorCode::AgentNotFound,
            Self::AgentNameInvalid(_) => ErrorCode::AgentNameInvalid,
            Self::CommandNotFound { .. } => ErrorCode::CommandNotFound,
            Self::CommandInvalid(_) => ErrorCode::CommandInvalid,
            Self::AgentInvalid { .. } => ErrorCode::AgentInvalid,
            Self::Io { .. } => ErrorCode::IoError,
        }
    }
}
