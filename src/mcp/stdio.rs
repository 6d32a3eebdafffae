//! MCP over stdio (`cmdr mcp`): JSON-RPC messages, one per line, on stdin and stdout.
//! Stdout carries only the protocol (logs go to stderr).

use std::time::Duration;

use rmcp::service::ServerInitializeError;
use rmcp::transport::io::stdio_pipes;
use rmcp::ServiceExt;

use super::tools::CmdrMcp;
use crate::server::AppState;

/// How long stopped runs get to persist their `stopped` turns once the client hung up.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Serves MCP on stdin/stdout until the client closes stdin (or `state.shutdown` fires);
/// runs still in progress are then stopped, and their `stopped` turns persisted, before
/// this returns.
pub async fn serve_stdio(state: AppState) -> Result<(), String> {
    let shutdown = state.shutdown.clone();
    let handler = CmdrMcp::new(state);
    let served = handler
        .clone()
        .serve_with_ct(stdio_pipes(), shutdown.child_token())
        .await;
    let running = match served {
        Ok(running) => running,
        // The client left (or we were told to stop) before initializing: nothing to do.
        Err(ServerInitializeError::ConnectionClosed(_) | ServerInitializeError::Cancelled) => {
            return Ok(())
        }
        Err(e) => return Err(format!("MCP over stdio failed to start: {e}")),
    };
    let quit = running.waiting().await;
    handler.stop_calls(STOP_GRACE).await;
    // The connection was the session: its processes go with it.
    handler.end_session().await;
    match quit {
        Ok(reason) => {
            tracing::debug!(?reason, "MCP stdio session ended");
            Ok(())
        }
        Err(e) => Err(format!("MCP over stdio failed: {e}")),
    }
}
