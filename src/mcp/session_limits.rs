//! [`SessionLimits`]: how many MCP sessions may be open over HTTP, and for how long
//! unused (read by the JSON-RPC gate and by rmcp's session manager).

use std::time::Duration;

/// Default cap on open MCP sessions (about 60 KiB each).
pub const DEFAULT_MAX_SESSIONS: usize = 1000;

/// Default time an MCP session may stay unused before it is closed.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(120);

/// How many MCP sessions may be open, and for how long unused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Sessions open at once; `initialize` beyond it closes the least-recently-used idle
    /// session, or gets 503 `TOO_MANY_SESSIONS` when none is idle.
    pub max_sessions: usize,
    /// A session unused this long is closed (its client must initialize again).
    pub idle: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            max_sessions: DEFAULT_MAX_SESSIONS,
            idle: DEFAULT_SESSION_IDLE,
        }
    }
}
