//! MCP over streamable HTTP: rmcp's [`StreamableHttpService`] (a tower service) mounted
//! at `/mcp` and `/` of an axum router, behind the bearer-token guard, with each request
//! watched for the client going away.
//!
//! Layers, outermost first:
//! - the browser guard (`crate::http::guard`): without a token only loopback `Host`s
//!   (DNS rebinding); a request carrying an `Origin` (any method: a page has no business
//!   here) must come from the server's own origin; duplicate `Host`/`Origin` are refused;
//! - the bearer token ([`require_token`]);
//! - the JSON-RPC gate ([`super::json_rpc`]): malformed messages get `-32700`/`-32600`,
//!   `initialize` beyond [`SessionLimits::max_sessions`] closes the least-recently-used
//!   idle session, or gets 503 when every session has a call running;
//! - the client-gone watch, then rmcp. Sessions unused for [`SessionLimits::idle`] are
//!   closed by rmcp.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, BodyDataStream, Bytes};
use axum::extract::Request;
use axum::http::header::CONTENT_TYPE;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;
use futures_core::Stream;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::cancel::ClientGone;
use super::json_rpc::{self, Gate};
use super::session_limits::SessionLimits;
use super::tools::CmdrMcp;
use crate::http::guard::mcp_browser_guard;
use crate::server::{require_token, AppState};

/// SSE keep-alive comments on idle response streams: besides keeping proxies from
/// timing out, each write lets the server notice a client that went away.
pub const SSE_KEEP_ALIVE: Duration = Duration::from_secs(5);

/// The MCP endpoint with default [`SessionLimits`] (see [`http_router_with`]).
pub fn http_router(state: AppState) -> Router {
    http_router_with(state, SessionLimits::default())
}

/// The MCP endpoint, at `/mcp` and at `/`, behind the layers listed above. Sessions (for
/// protocol versions that have them) live in memory; server shutdown (`state.shutdown`)
/// ends them and stops their runs.
pub fn http_router_with(state: AppState, limits: SessionLimits) -> Router {
    let mut config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(Some(SSE_KEEP_ALIVE))
        .with_cancellation_token(state.shutdown.child_token());
    // Our own guard checks hosts (with the same loopback rule) and origins.
    config = config.disable_allowed_hosts();
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(limits.idle);
    let sessions = Arc::new(sessions);
    let gate = Gate {
        sessions: sessions.clone(),
        limits,
        body_limit: config.max_request_body_bytes,
        initializing: Arc::default(),
        warned: Arc::default(),
        usage: Arc::default(),
    };
    let handler = CmdrMcp::new(state.clone());
    // One handler per session: its processes live in the session's scope and die with it.
    let service = StreamableHttpService::new(move || Ok(handler.for_session()), sessions, config);
    Router::new()
        .route_service("/mcp", service.clone())
        .route_service("/", service)
        .layer(middleware::from_fn(watch_client))
        .layer(middleware::from_fn_with_state(gate, json_rpc::gate))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .layer(middleware::from_fn_with_state(state, mcp_browser_guard))
}

/// Gives the request a [`ClientGone`] token, fired when the client goes away before the
/// response is complete: while the response is being prepared (this future is dropped),
/// or while a streamed (SSE) response is still open (its body is dropped unfinished).
async fn watch_client(mut request: Request, next: Next) -> Response {
    let gone = CancellationToken::new();
    request.extensions_mut().insert(ClientGone(gone.clone()));
    let guard = gone.drop_guard();
    let response = next.run(request).await;
    let streamed = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !streamed {
        guard.disarm();
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = Body::from_stream(Guarded {
        inner: body.into_data_stream(),
        guard: Some(guard),
    });
    Response::from_parts(parts, body)
}

/// A response stream that fires its guard when dropped before its end.
struct Guarded {
    inner: BodyDataStream,
    guard: Option<DropGuard>,
}

impl Stream for Guarded {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = Pin::new(&mut self.inner).poll_next(cx);
        if let Poll::Ready(None) = next {
            if let Some(guard) = self.guard.take() {
                guard.disarm();
            }
        }
        next
    }
}
