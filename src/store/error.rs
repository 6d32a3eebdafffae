//! [`StoreError`]: what a store operation can fail with, each with a stable code.

use cmdr_executors::ErrorCode;
use thiserror::Error;

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    /// No conversation has this id.
    #[error("conversation {0} not found")]
    ConversationNotFound(String),
    /// A conversation with this id already exists.
    #[error("conversation {0} already exists")]
    ConversationExists(String),
    /// The database failed (I/O, corruption, a newer schema …). The message names at most
    /// the database file, never its directory.
    #[error("store error: {0}")]
    Database(String),
}

impl StoreError {
    /// The stable code, identical across transports.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::ConversationNotFound(_) => ErrorCode::ConversationNotFound,
            Self::ConversationExists(_) => ErrorCode::ConversationExists,
            Self::Database(_) => ErrorCode::StoreError,
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        Self::Database(err.to_string())
    }
}
