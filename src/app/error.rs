//! [`SetupError`]: why a front door could not be set up.

use std::net::SocketAddr;
use std::path::PathBuf;

use cmdr_executors::{Denied, RootError};

use crate::nats::connect::ConnectFailure;
use crate::store::StoreError;

/// Why a front door could not be set up. [`SetupError::is_usage`] tells a mistake in the
/// flags (exit status 2) from a failure of the world (exit status 1).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// An `--allow-root` that cannot be used.
    #[error(transparent)]
    Root(#[from] RootError),
    /// A folder outside the allowed roots.
    #[error(transparent)]
    NotAllowed(#[from] Denied),
    /// A flag value that makes no sense; the text names the flag.
    #[error("{0}")]
    Flag(String),
    /// The address cannot be listened on.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// NATS cannot be reached, or refused the credentials (no secret in the text).
    #[error(transparent)]
    Nats(#[from] ConnectFailure),
    /// The conversation database cannot be opened.
    #[error("cannot open the database {}: {source}", path.display())]
    Database {
        /// The file.
        path: PathBuf,
        /// Why.
        source: StoreError,
    },
    /// The OS gave no random bytes (for the answer keys).
    #[error("no random bytes for the answer keys: {0}")]
    Random(getrandom::Error),
}

impl SetupError {
    /// Whether the flags are at fault (exit status 2), rather than the world (1).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::Root(_) | Self::NotAllowed(_) | Self::Flag(_) | Self::Bind { .. }
        )
    }
}
