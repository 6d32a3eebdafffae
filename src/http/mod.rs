//! The HTTP API of `cmdr serve` (docs/contract.md §6): REST and SSE over [`AppState`], every handler
//! a thin translation onto the agent service or the registry. Routes, shapes and
//! decisions are documented in `docs/http.md`.
//!
//! - `error`: [`ApiError`], the one error shape, and the 404/405 fallbacks.
//! - `extract`: body, path and query extractors whose rejections are [`ApiError`]s.
//! - `guard`: refuses cross-site browser requests, duplicate `Host`/`Origin` headers and,
//!   without a token, non-loopback `Host`s (DNS rebinding).
//! - [`listener`]: the accept loop with its connection cap and header-read timeout.
//! - `runs`: spawning agent runs so that a closed request stops them like Stop does.
//! - `sse`: agent events and command results as server-sent events.
//! - `agents`, `commands`, `conversations`, `processes`: the routes, by resource.
//!
//! Layers, outermost first: the body limit ([`DEFAULT_BODY_LIMIT`]), the browser guard,
//! then the bearer-token check ([`require_token`]) on every route but `GET /health`.

mod agents;
mod commands;
mod conversations;
mod error;
mod extract;
pub(crate) mod guard;
pub mod listener;
mod processes;
pub mod request_body;
mod runs;
mod scope;
mod sse;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap};
use axum::routing::{get, post};
use axum::{middleware, Json, Router};
use tokio_util::task::TaskTracker;

use crate::server::{require_token, AppState, Health};

pub use error::ApiError;
pub use extract::decode_json;
// The request bodies and queries, for the fuzz targets (fuzz/) and their corpus replay.
pub use agents::{ClientMessage, CommandRunRequest, RunRequest, StatelessRequest, StreamRequest};
pub use commands::{InputAnswer, RunQuery};
pub use conversations::ListQuery;

/// Largest request body accepted (4 MiB: `FILE_WRITE` and `PATCH_FILE` carry whole
/// files); larger ones get 413 `PAYLOAD_TOO_LARGE`.
pub const DEFAULT_BODY_LIMIT: usize = 4 * 1024 * 1024;

/// How often an idle SSE stream sends a `: keep-alive` comment.
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Settings of the HTTP API beyond [`AppState`].
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Largest request body, in bytes.
    pub body_limit: usize,
    /// Keep-alive comment interval of SSE streams.
    pub keep_alive: Duration,
    /// Every agent run started over HTTP is spawned on it: `close()` + `wait()` after
    /// cancelling [`AppState::shutdown`] waits until they are all persisted (including
    /// runs whose client already went away).
    pub tasks: TaskTracker,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            body_limit: DEFAULT_BODY_LIMIT,
            keep_alive: DEFAULT_KEEP_ALIVE,
            tasks: TaskTracker::new(),
        }
    }
}

/// What the handlers share: the application state and the HTTP settings.
#[derive(Clone)]
pub struct HttpState {
    inner: Arc<Inner>,
}

struct Inner {
    app: AppState,
    runs: runs::Runs,
    body_limit: usize,
    keep_alive: Duration,
}

impl HttpState {
    fn new(app: AppState, config: HttpConfig) -> Self {
        let runs = runs::Runs::new(app.shutdown.clone(), config.tasks);
        Self {
            inner: Arc::new(Inner {
                app,
                runs,
                body_limit: config.body_limit,
                keep_alive: config.keep_alive,
            }),
        }
    }

    /// The application state.
    pub fn app(&self) -> &AppState {
        &self.inner.app
    }

    fn runs(&self) -> &runs::Runs {
        &self.inner.runs
    }

    fn body_limit(&self) -> usize {
        self.inner.body_limit
    }

    fn keep_alive(&self) -> Duration {
        self.inner.keep_alive
    }
}

/// The whole REST + SSE API with default settings (see [`router_with`]).
pub fn router(state: AppState) -> Router {
    router_with(state, HttpConfig::default())
}

/// The whole REST + SSE API: every route of docs/contract.md §6 but the web UI, JSON 404/405
/// fallbacks, the body limit, the browser guard and the token check.
///
/// `GET /health` is deliberately open (no token), so load balancers and supervisors
/// can probe it; it reveals only the version and whether persistence, NATS and a model
/// are available. Everything else, unknown paths included, requires the token when one
/// is configured.
pub fn router_with(app: AppState, config: HttpConfig) -> Router {
    let body_limit = config.body_limit;
    let state = HttpState::new(app.clone(), config);
    let protected = Router::new()
        .route("/agents", get(agents::list_agents))
        .route("/agents/{agent_name}/commands", get(agents::list_commands))
        .route("/agents/{agent_name}/run", post(agents::run))
        .route(
            "/agents/{agent_name}/commands/run",
            post(agents::run_command),
        )
        .route("/agents/{agent_name}/stream", post(agents::stream))
        .route("/api/agent", post(agents::stateless))
        .route("/conversations", get(conversations::list))
        .route("/conversations/{id}", get(conversations::get))
        .route("/conversations/{id}/turns", get(conversations::turns))
        .route("/conversations/{id}/archive", post(conversations::archive))
        .route(
            "/conversations/{id}/unarchive",
            post(conversations::unarchive),
        )
        .route("/commands", post(commands::run))
        .route("/commands/inputs", get(commands::inputs))
        .route("/commands/{command_id}/cancel", post(commands::cancel))
        .route("/commands/{command_id}/input", post(commands::answer))
        .route("/processes", get(processes::list).post(processes::start))
        .route("/processes/{id}/output", get(processes::output))
        .route("/processes/{id}/input", post(processes::input))
        .route("/processes/{id}/kill", post(processes::kill))
        .fallback(error::route_not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(middleware::from_fn_with_state(app, require_token));
    let open = Router::new()
        .route("/health", get(health))
        .method_not_allowed_fallback(error::method_not_allowed);
    protected
        .merge(open)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            guard::browser_guard,
        ))
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
}

/// `GET /health`: `{"status":"ok","version","persistence","nats","llm","uptimeSecs",…}`.
/// With a token configured, a caller without it does not see the allowed roots.
async fn health(State(state): State<HttpState>, headers: HeaderMap) -> Json<Health> {
    let app = state.app();
    let mut health = app.health().await;
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if app.auth_token.is_some() && !app.authorized(given) {
        health.confinement.hide_roots();
        health.nats_server = None;
    }
    Json(health)
}
