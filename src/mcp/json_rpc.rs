//! The gate in front of rmcp on the MCP endpoint: every POST body must be one JSON-RPC 2.0
//! message, and `initialize` must find room under the session cap.
//!
//! - Not JSON: HTTP 400 with JSON-RPC error `-32700` (parse error), whatever the
//!   `Content-Type` says.
//! - JSON but not a JSON-RPC 2.0 request, notification or response (no `"jsonrpc":"2.0"`,
//!   a `method` that is not a string, an `id` that is not a string, number or null, a
//!   response without `result`/`error`), or a batch (MCP dropped batching in 2025-06-18):
//!   HTTP 400 with `-32600` (invalid request), the `id` echoed when it is valid.
//! - `initialize` without a session while [`SessionLimits::max_sessions`] sessions are
//!   open and every one of them has a call running: HTTP 503 with `-32000` and `data.code`
//!   `TOO_MANY_SESSIONS`. While one is idle, the least-recently-used idle session is closed
//!   to make room (a `ping` is not use), so sessions that only ping cannot lock clients out.

use std::sync::Arc;

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use cmdr_executors::ErrorCode;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{json, Value};

use super::session_limits::SessionLimits;
use super::session_use::{hold_until_sent, SessionUse};
use rmcp::transport::streamable_http_server::session::SessionManager;

/// JSON-RPC: the body is not JSON.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the body is not a valid request object.
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: implementation-defined server error (here: no room for a session).
const SERVER_BUSY: i64 = -32000;

/// The header naming an MCP session.
const SESSION_HEADER: &str = "mcp-session-id";

/// What the gate needs: the session table and its limit, and a lock that makes
/// "count, then create" one step for concurrent `initialize`s.
#[derive(Clone)]
pub struct Gate {
    pub(super) sessions: Arc<LocalSessionManager>,
    pub(super) limits: SessionLimits,
    pub(super) body_limit: usize,
    pub(super) initializing: Arc<tokio::sync::Mutex<()>>,
    pub(super) warned: Arc<std::sync::Mutex<Option<std::time::Instant>>>,
    pub(super) usage: Arc<SessionUse>,
}

/// Axum middleware applying the rules above to POSTs; other methods pass untouched.
pub async fn gate(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match to_bytes(body, gate.body_limit).await {
        Ok(bytes) => bytes,
        Err(_) => {
            let message = format!("the request body is larger than {} bytes", gate.body_limit);
            return rpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                INVALID_REQUEST,
                &message,
                None,
            );
        }
    };
    let message: Value = match serde_json::from_slice(&bytes) {
        Ok(message) => message,
        Err(e) => {
            let text = format!("the body is not JSON: {e}");
            return rpc_error(StatusCode::BAD_REQUEST, PARSE_ERROR, &text, None);
        }
    };
    if let Err(problem) = check_message(&message) {
        let id = message.get("id").filter(|id| valid_id(id)).cloned();
        return rpc_error(StatusCode::BAD_REQUEST, INVALID_REQUEST, problem, id);
    }
    let initialize = message.get("method").and_then(Value::as_str) == Some("initialize")
        && !parts.headers.contains_key(SESSION_HEADER);
    let session = parts
        .headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let method = message.get("method").and_then(Value::as_str);
    let request = Request::from_parts(parts, Body::from(bytes));
    if !initialize {
        return match session.filter(|_| method != Some("ping")) {
            Some(id) => {
                let busy = gate.usage.begin(&id);
                hold_until_sent(next.run(request).await, busy)
            }
            None => next.run(request).await,
        };
    }
    let _one_at_a_time = gate.initializing.lock().await;
    let open = gate.make_room().await;
    if open >= gate.limits.max_sessions {
        gate.warn_full(open);
        let text = format!(
            "cmdr has {open} MCP sessions open, its limit; try again when one ends \
             (sessions unused for {} s are closed)",
            gate.limits.idle.as_secs()
        );
        let mut response = rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            SERVER_BUSY,
            &text,
            message.get("id").cloned(),
        );
        response
            .headers_mut()
            .insert("retry-after", axum::http::HeaderValue::from_static("5"));
        return response;
    }
    let response = next.run(request).await;
    if let Some(id) = response
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        gate.usage.created(id);
    }
    response
}

impl Gate {
    /// When the table is full, closes the least-recently-used idle session; the number of
    /// sessions open after.
    async fn make_room(&self) -> usize {
        let open: Vec<_> = self
            .sessions
            .sessions
            .read()
            .await
            .keys()
            .cloned()
            .collect();
        if open.len() < self.limits.max_sessions {
            return open.len();
        }
        let Some(victim) = self.usage.victim(&open) else {
            return open.len();
        };
        tracing::info!(session = %victim, "MCP session limit reached: closing the least-recently-used idle session");
        if let Err(e) = self.sessions.close_session(&victim).await {
            tracing::warn!(error = %e, "closing an idle MCP session failed");
            return open.len();
        }
        self.usage.forget(&victim);
        open.len() - 1
    }

    /// Logs a full session table at most once a minute (a flood must not flood the log).
    fn warn_full(&self, open: usize) {
        let mut last = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        if last.is_none_or(|at| now.duration_since(at).as_secs() >= 60) {
            *last = Some(now);
            tracing::warn!(open, "MCP session limit reached: refusing new sessions");
        }
    }
}

/// Why `message` is not one JSON-RPC 2.0 message, if it is not.
fn check_message(message: &Value) -> Result<(), &'static str> {
    let Some(object) = message.as_object() else {
        return Err(if message.is_array() {
            "batches are not supported: send one JSON-RPC message per request"
        } else {
            "a JSON-RPC message is a JSON object"
        });
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err("\"jsonrpc\" must be \"2.0\"");
    }
    if object.get("id").is_some_and(|id| !valid_id(id)) {
        return Err("\"id\" must be a string, a number or null");
    }
    match object.get("method") {
        Some(Value::String(method)) if !method.is_empty() => Ok(()),
        Some(_) => Err("\"method\" must be a non-empty string"),
        None if object.contains_key("id")
            && (object.contains_key("result") ^ object.contains_key("error")) =>
        {
            Ok(())
        }
        None => Err("a request needs a \"method\"; a response needs an \"id\" and one of \"result\" or \"error\""),
    }
}

fn valid_id(id: &Value) -> bool {
    matches!(id, Value::String(_) | Value::Number(_) | Value::Null)
}

/// A JSON-RPC error response with this HTTP status.
fn rpc_error(status: StatusCode, code: i64, message: &str, id: Option<Value>) -> Response {
    let mut error = json!({ "code": code, "message": message });
    if code == SERVER_BUSY {
        error["data"] = json!({ "code": ErrorCode::TooManySessions.as_str() });
    }
    let body = json!({ "jsonrpc": "2.0", "id": id.unwrap_or(Value::Null), "error": error });
    (status, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_checked_like_json_rpc_2() {
        let ok = [
            json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
            json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            json!({"jsonrpc":"2.0","id":"a","result":{}}),
            json!({"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}),
        ];
        for message in ok {
            assert_eq!(check_message(&message), Ok(()), "{message}");
        }
        let bad = [
            json!([{"jsonrpc":"2.0","id":1,"method":"ping"}]),
            json!("ping"),
            json!({"id":1,"method":"ping"}),
            json!({"jsonrpc":"1.0","id":1,"method":"ping"}),
            json!({"jsonrpc":"2.0","id":1}),
            json!({"jsonrpc":"2.0","id":1,"method":5}),
            json!({"jsonrpc":"2.0","id":{},"method":"ping"}),
            json!({"jsonrpc":"2.0","id":1,"result":{},"error":{}}),
        ];
        for message in bad {
            assert!(check_message(&message).is_err(), "{message}");
        }
    }
}
