//! `cmdr serve`'s limits against floods: connections per address, the header-read timeout,
//! request bodies (a deadline and a server-wide budget), and MCP sessions (see docs/http.md, "Limits").

use std::time::Duration;

use crate::http::listener::{ListenerLimits, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS};
use crate::http::request_body::{
    BodyBudget, BodyLimits, DEFAULT_BODY_BUDGET, DEFAULT_BODY_TIMEOUT,
};
use crate::mcp::{SessionLimits, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE};

/// The flags of `cmdr serve` that bound what clients can hold.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct ServerLimitsArgs {
    /// Connections served at once on each address; when full, the oldest idle connection
    /// is closed to make room, and only if all are busy is a newcomer refused (503).
    #[arg(long, env = "CMDR_MAX_CONNECTIONS", value_name = "N",
          default_value_t = DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections: usize,
    /// Seconds a client has to send a whole request head (also the keep-alive idle time).
    #[arg(long, env = "CMDR_HEADER_TIMEOUT_SECS", value_name = "SECS",
          default_value_t = DEFAULT_HEADER_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_secs: u64,
    /// Seconds a client has to send a whole request body once its head has arrived;
    /// past it the request is answered 408 BODY_TIMEOUT.
    #[arg(long, env = "CMDR_BODY_TIMEOUT_SECS", value_name = "SECS",
          default_value_t = DEFAULT_BODY_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout_secs: u64,
    /// MiB of request bodies held at once by the whole server (both addresses); a request
    /// whose body would go past it is answered 503 BODY_BUDGET_EXHAUSTED.
    #[arg(long, env = "CMDR_BODY_BUDGET_MIB", value_name = "MIB",
          default_value_t = (DEFAULT_BODY_BUDGET >> 20) as u64,
          value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub body_budget_mib: u64,
    /// MCP sessions open at once; `initialize` beyond it is refused until one ends.
    #[arg(long, env = "CMDR_MCP_MAX_SESSIONS", value_name = "N",
          default_value_t = DEFAULT_MAX_SESSIONS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub mcp_max_sessions: usize,
    /// Seconds an MCP session may stay unused before it is closed.
    #[arg(long, env = "CMDR_MCP_SESSION_IDLE_SECS", value_name = "SECS",
          default_value_t = DEFAULT_SESSION_IDLE.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub mcp_session_idle_secs: u64,
}

impl ServerLimitsArgs {
    /// The limits of each listening address, the cap fitted into `fd_limit` descriptors
    /// (one body budget: the clones share it).
    pub fn listener(&self, fd_limit: u64) -> ListenerLimits {
        let budget = usize::try_from(self.body_budget_mib << 20).unwrap_or(usize::MAX);
        ListenerLimits {
            max_connections: crate::http::listener::fitting_cap(self.max_connections, fd_limit, 2),
            header_timeout: Duration::from_secs(self.header_timeout_secs),
            bodies: BodyLimits {
                timeout: Duration::from_secs(self.body_timeout_secs),
                budget: BodyBudget::new(budget),
            },
        }
    }

    /// The MCP session limits.
    pub fn sessions(&self) -> SessionLimits {
        SessionLimits {
            max_sessions: self.mcp_max_sessions,
            idle: Duration::from_secs(self.mcp_session_idle_secs),
        }
    }
}
