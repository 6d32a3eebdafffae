//! MCP (docs/contract.md §7): the tools of cmdr for MCP clients, over streamable HTTP (mounted by
//! `cmdr serve`, default `127.0.0.1:5012`) and over stdio (`cmdr mcp`), with the
//! official Rust SDK `rmcp`. Every tool is a thin translation onto the agent service or
//! the registry of [`AppState`](crate::server::AppState). See `docs/mcp.md`.
//!
//! - `tools`: [`CmdrMcp`], the tool handler: the tool list and `tools/call` dispatch.
//! - `agent_tools`: `list_agents`, `list_commands`, `run_agent_instruction`, `run_command`.
//! - `executor_tools`: `bash_exec`, `file_read`, `file_write`, `patch_file`,
//!   `list_directory`.
//! - [`params`]: the tools' input structs, whose JSON Schemas `tools/list` shows.
//! - [`errors`]: refusals as JSON-RPC errors (`-32602`, `409`, `503`, `-32603`) with
//!   `data.code`.
//! - `progress`: progress notifications and the final answer of a run.
//! - `cancel`: what stops a call (client cancellation, client gone, shutdown).
//! - `session_scope`: the process scope of each session (`mcp:<session id>`), ended with
//!   the session.
//! - `http`: [`http_router`]; `session_limits`: [`SessionLimits`]; `json_rpc`: the gate that answers
//!   malformed messages and `initialize` beyond the session cap; `stdio`: [`serve_stdio`].

mod agent_tools;
mod cancel;
pub mod errors;
mod executor_tools;
mod http;
mod json_rpc;
pub mod params;
mod progress;
mod session_limits;
mod session_scope;
mod session_use;
mod stdio;
mod tools;

pub use cancel::ClientGone;
pub use http::{http_router, http_router_with, SSE_KEEP_ALIVE};
pub use progress::HEARTBEAT;
pub use session_limits::{SessionLimits, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE};
pub use stdio::{serve_stdio, StdioError};
pub use tools::{tools, CmdrMcp};
