//! [`SessionScope`]: the process scope of one MCP session (docs/processes.md, "Scopes").
//!
//! rmcp makes one handler per session (streamable HTTP with sessions) or one for the
//! connection (stdio); each gets its own `SessionScope`. The scope is `mcp:<session id>`
//! — the `Mcp-Session-Id` of the requests, known from the first call (stdio: `mcp:stdio-<fresh uuid>`, one per process)
//! — and ends, killing its processes, when the session does: `DELETE`, idle expiry,
//! server shutdown (the handler is dropped) or stdin closed (`serve_stdio` ends it).
//! Requests without a session (protocol versions that have none) share the scope `mcp`,
//! which lives as long as the server, like REST's `http` — whatever `Mcp-Session-Id` they
//! carry: only a handler that went through `initialize` is a session's, so a stateless
//! request naming another session's id neither acts in that session's scope nor ends it
//! (issue 32.6).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use cmdr_executors::{Registry, Scope};
use rmcp::service::RequestContext;
use rmcp::RoleServer;

/// The header naming a streamable-HTTP session.
const SESSION_HEADER: &str = "mcp-session-id";

/// The scope of one MCP session; ends it when dropped.
pub(super) struct SessionScope {
    registry: Registry,
    bound: OnceLock<Scope>,
    ended: Mutex<bool>,
    /// This handler answered `initialize`: it serves a session (stateless requests get a
    /// handler of their own that never does).
    initialized: AtomicBool,
}

impl std::fmt::Debug for SessionScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionScope")
            .field("scope", &self.bound.get())
            .finish_non_exhaustive()
    }
}

impl SessionScope {
    /// A session's scope over `registry`, bound at the first call.
    pub(super) fn new(registry: Registry) -> Self {
        Self {
            registry,
            bound: OnceLock::new(),
            ended: Mutex::new(false),
            initialized: AtomicBool::new(false),
        }
    }

    /// This handler has answered `initialize`: its requests belong to one session.
    pub(super) fn mark_initialized(&self) {
        self.initialized.store(true, Ordering::Release);
    }

    /// The scope a call of `context` runs in.
    pub(super) fn scope(&self, context: &RequestContext<RoleServer>) -> Scope {
        let session = match context.extensions.get::<axum::http::request::Parts>() {
            // Stdio: the connection is the session, one of its own: several `cmdr mcp`
            // of one producer (`--nats`, one NATS user) share the workers, and one
            // ending must not end another's processes there.
            None => format!("stdio-{}", uuid::Uuid::new_v4().simple()),
            Some(parts) => match parts.headers.get(SESSION_HEADER) {
                Some(id) if self.initialized.load(Ordering::Acquire) => {
                    String::from_utf8_lossy(id.as_bytes()).into_owned()
                }
                // Stateless HTTP (a session id it carries is not its own): no session to
                // end with.
                _ => return Scope::new("mcp"),
            },
        };
        self.bound
            .get_or_init(|| crate::scopes::mcp(&session))
            .clone()
    }

    /// Ends the scope now (its processes stopped, SIGKILL after the grace); later calls
    /// and the drop do nothing.
    pub(super) async fn end(&self) {
        if let Some(scope) = self.take() {
            self.registry.end_scope(&scope).await;
        }
    }

    /// The bound scope, the first time only.
    fn take(&self) -> Option<Scope> {
        let mut ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
        if *ended {
            return None;
        }
        *ended = true;
        self.bound.get().cloned()
    }
}

impl Drop for SessionScope {
    fn drop(&mut self) {
        let Some(scope) = self.take() else {
            return;
        };
        let registry = self.registry.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                tracing::debug!(%scope, "MCP session ended: stopping its processes");
                runtime.spawn(async move { registry.end_scope(&scope).await });
            }
            // No runtime left: the registry's own shutdown (or cmdr's exit) takes them.
            Err(_) => tracing::debug!(%scope, "MCP session dropped outside a runtime"),
        }
    }
}
