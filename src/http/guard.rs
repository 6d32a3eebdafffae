//! The browser guard: what keeps web pages the user happens to visit from driving a
//! command runner listening on their machine.
//!
//! - **Cross-site requests** (CSRF): a page on another site can `POST` to
//!   `http://127.0.0.1:5010/commands` without any CORS preflight (a "simple request":
//!   `text/plain` body, or no `Content-Type` at all). Browsers always send `Origin` on
//!   such requests, so every request other than `GET`/`HEAD`/`OPTIONS` that carries an
//!   `Origin` must come from the server's own origin (`http(s)://<Host>`); otherwise 403
//!   `FORBIDDEN_ORIGIN`. Non-browser clients send no `Origin` and are unaffected.
//! - **DNS rebinding**: a page can make its own host name resolve to 127.0.0.1 and then
//!   talk to cmdr "same-origin". Without an auth token (loopback-only mode), the `Host`
//!   must therefore be a loopback name (`localhost`, `127.0.0.1`, `[::1]`, any port);
//!   otherwise 403 `FORBIDDEN_HOST`. With a token the check is off (a reverse proxy may
//!   use any name; the page cannot know the token).
//! - **Ambiguity**: a request with more than one `Host` or `Origin` header is refused
//!   (400 `DUPLICATE_HEADER`): a proxy and cmdr could each read a different one.
//!
//! The MCP endpoint applies the same rules ([`mcp_browser_guard`]), with the `Origin`
//! rule on every method: no page has business there.

use axum::extract::{Request, State};
use axum::http::{header, HeaderName, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cmdr_executors::ErrorCode;

use super::error::ApiError;
use super::HttpState;
use crate::server::AppState;

/// Axum middleware of the REST API applying the rules above.
pub async fn browser_guard(
    State(state): State<HttpState>,
    request: Request,
    next: Next,
) -> Response {
    match refusal(&request, state.app().auth_token.is_some(), false) {
        Some(refused) => refused.into_response(),
        None => next.run(request).await,
    }
}

/// Axum middleware of the MCP endpoint: the same rules, `Origin` checked on every method.
pub async fn mcp_browser_guard(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    match refusal(&request, state.auth_token.is_some(), true) {
        Some(refused) => refused.into_response(),
        None => next.run(request).await,
    }
}

/// Why `request` is refused, if it is. `has_token`: a token is configured (the `Host`
/// rule is off); `every_method`: check `Origin` on safe methods too.
fn refusal(request: &Request, has_token: bool, every_method: bool) -> Option<ApiError> {
    for name in [header::HOST, header::ORIGIN] {
        if request.headers().get_all(&name).iter().nth(1).is_some() {
            return Some(duplicate(&name));
        }
    }
    let host = request_host(request);
    if !has_token && host.as_deref().is_some_and(|host| !is_loopback_host(host)) {
        return Some(ApiError::new(
            ErrorCode::ForbiddenHost,
            "without an auth token cmdr only answers requests addressed to a loopback host (localhost, 127.0.0.1, [::1])",
        ));
    }
    let safe = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if safe && !every_method {
        return None;
    }
    let origin = request.headers().get(header::ORIGIN)?;
    let same = origin
        .to_str()
        .ok()
        .zip(host.as_deref())
        .is_some_and(|(origin, host)| same_origin(origin, host));
    (!same).then(|| {
        ApiError::new(
            ErrorCode::ForbiddenOrigin,
            "cross-origin requests are refused: cmdr only accepts browser requests from its own origin",
        )
    })
}

fn duplicate(name: &HeaderName) -> ApiError {
    ApiError::new(
        ErrorCode::DuplicateHeader,
        format!("the request has more than one {name} header"),
    )
}

/// The authority the request was addressed to: the URI's (HTTP/2, absolute form), else
/// the `Host` header.
fn request_host(request: &Request) -> Option<String> {
    if let Some(authority) = request.uri().authority() {
        return Some(authority.as_str().to_owned());
    }
    request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
}

/// `localhost`, `127.x.y.z` or `[::1]`, with or without a port.
fn is_loopback_host(host: &str) -> bool {
    let name = strip_port(host);
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let bare = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    bare.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// The host part of `host[:port]` / `[v6]:port`.
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return match host.find(']') {
            Some(end) => &host[..=end],
            None => host,
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    }
}

/// Whether `origin` (`scheme://host[:port]`) names the server addressed as `host`.
fn same_origin(origin: &str, host: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    matches!(scheme, "http" | "https") && authority.eq_ignore_ascii_case(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for host in [
            "localhost",
            "LOCALHOST:5010",
            "127.0.0.1",
            "127.0.0.1:5010",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:5010",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:5010",
            "localhost.evil.example",
            "10.0.0.1:5010",
            "[::2]:5010",
            "",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn origins() {
        assert!(same_origin("http://127.0.0.1:5010", "127.0.0.1:5010"));
        assert!(same_origin("https://Cmdr.Example", "cmdr.example"));
        assert!(!same_origin("http://evil.example", "127.0.0.1:5010"));
        assert!(!same_origin("null", "127.0.0.1:5010"));
        assert!(!same_origin("http://127.0.0.1:5011", "127.0.0.1:5010"));
        assert!(!same_origin("file://127.0.0.1:5010", "127.0.0.1:5010"));
    }
}
