//! When a tool call stops: the client cancelled it (`notifications/cancelled`, which
//! fires rmcp's per-request token), the HTTP request carrying it went away (a
//! [`ClientGone`] token put in the request by the HTTP layer), or the server shuts down.
//! All three cancel the call's one [`CancellationToken`], which the agent run or the
//! executor command watches — so an aborted run stops and persists its `stopped` turn.

use rmcp::service::RequestContext;
use rmcp::RoleServer;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Fired when the HTTP request (or its streamed response) is dropped before the response
/// ended: the client went away. Put in the request's extensions by the HTTP layer; rmcp
/// hands the request's `http::request::Parts` to the tool through
/// [`RequestContext::extensions`].
#[derive(Debug, Clone)]
pub struct ClientGone(pub CancellationToken);

/// The cancellation of one tool call; stops watching when dropped.
#[derive(Debug)]
pub struct CallCancel {
    token: CancellationToken,
    watcher: Option<JoinHandle<()>>,
}

impl CallCancel {
    /// `token` (a child of the server's stop token), also fired by the client's
    /// cancellation of `context`'s request or by its HTTP request going away.
    pub fn new(token: CancellationToken, context: &RequestContext<RoleServer>) -> Self {
        let request = context.ct.clone();
        let gone = client_gone(context);
        let fire = token.clone();
        let watcher = tokio::spawn(async move {
            let gone = async {
                match gone {
                    Some(gone) => gone.cancelled_owned().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = request.cancelled() => {
                    tracing::info!("MCP tool call cancelled by the client");
                    fire.cancel();
                }
                () = gone => {
                    tracing::info!("MCP client went away: stopping the tool call");
                    fire.cancel();
                }
                () = fire.cancelled() => {}
            }
        });
        Self {
            token,
            watcher: Some(watcher),
        }
    }

    /// The token the run or command watches.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }
}

impl Drop for CallCancel {
    fn drop(&mut self) {
        if let Some(watcher) = self.watcher.take() {
            watcher.abort();
        }
    }
}

/// The [`ClientGone`] token of the HTTP request that carried this call, if any.
fn client_gone(context: &RequestContext<RoleServer>) -> Option<CancellationToken> {
    let parts = context.extensions.get::<axum::http::request::Parts>()?;
    parts
        .extensions
        .get::<ClientGone>()
        .map(|gone| gone.0.clone())
}
