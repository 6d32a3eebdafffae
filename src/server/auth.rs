//! The bearer-token guard every HTTP route and MCP endpoint sits behind when
//! `--auth-token` / `CMDR_AUTH_TOKEN` is set.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use cmdr_executors::ErrorCode;

use super::AppState;

/// Axum middleware: `401 {"error":"unauthorized","code":"UNAUTHORIZED","message"}` unless
/// the request carries `Authorization: Bearer <token>` (when a token is configured).
/// Use with `axum::middleware::from_fn_with_state(state, require_token)`.
pub async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if state.authorized(given) {
        return next.run(request).await;
    }
    let body = serde_json::json!({
        "error": "unauthorized",
        "code": ErrorCode::Unauthorized.as_str(),
        "message": "a valid 'Authorization: Bearer <token>' header is required",
    });
    let mut response = (StatusCode::UNAUTHORIZED, Json(body)).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}
