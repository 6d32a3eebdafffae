//! Every way a model call can fail, with stable string codes.

use cmdr_executors::ErrorCode;

/// Why the model gave no (complete) answer. Messages never contain the API key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// No model is configured (`CMDR_LLM_BASE_URL` / `CMDR_LLM_MODEL` unset).
    #[error("no language model is configured: {0}")]
    NotConfigured(String),
    /// The provider could not be reached (connection refused, DNS, TLS …).
    #[error("cannot reach the model provider at {url}: {reason}")]
    Connect {
        /// The endpoint, without credentials.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// The provider answered with an HTTP error status.
    #[error("the model provider answered HTTP {status}: {message}")]
    Http {
        /// The HTTP status code.
        status: u16,
        /// The provider's own error message (or a short excerpt of its body).
        message: String,
    },
    /// The stream held something that is not a chat-completion chunk.
    #[error("the model provider sent a malformed stream: {0}")]
    Malformed(String),
    /// No data arrived for too long.
    #[error("the model provider sent nothing for {0} s")]
    Timeout(u64),
    /// The connection ended before the reply was complete.
    #[error("the model stream was cut before it finished: {0}")]
    StreamCut(String),
}

impl LlmError {
    /// The stable code of this error, as sent in `error` events.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::NotConfigured(_) | Self::Connect { .. } => ErrorCode::LlmUnavailable,
            Self::Http { .. } => ErrorCode::LlmHttpError,
            Self::Malformed(_) => ErrorCode::LlmBadStream,
            Self::Timeout(_) => ErrorCode::LlmTimeout,
            Self::StreamCut(_) => ErrorCode::LlmStreamCut,
        }
    }
}
