//! Which process scope a REST request addresses (docs/processes.md, "Scopes"): `http`,
//! or with `?conversation=<id>` that conversation's scope `conversation:<id>` (the web UI
//! shows and stops the processes a conversation's agent started).

use cmdr_executors::Scope;
use serde::Deserialize;

use super::error::ApiError;
use super::HttpState;
use crate::service::ServiceError;
use crate::store::StoreError;

/// The query naming a scope.
#[derive(Debug, Default, Deserialize)]
pub struct ScopeQuery {
    /// Address this conversation's processes instead of the REST client's own.
    #[serde(default)]
    pub conversation: Option<String>,
}

/// The scope of `conversation` (404 `CONVERSATION_NOT_FOUND` when there is no such
/// conversation, 400 when it is empty), or `http` without one.
pub async fn resolve(state: &HttpState, conversation: Option<&str>) -> Result<Scope, ApiError> {
    resolve_as(state, conversation, false).await
}

/// The scope of `conversation` for a request that may start something in it (`POST
/// /processes`, `POST /commands`): as [`resolve`], and 400 `CONVERSATION_ARCHIVED` for an
/// archived conversation. Archiving ended its scope; a process started there afterwards
/// would belong to no live conversation and run until cmdr stops.
pub async fn resolve_to_start(
    state: &HttpState,
    conversation: Option<&str>,
) -> Result<Scope, ApiError> {
    resolve_as(state, conversation, true).await
}

async fn resolve_as(
    state: &HttpState,
    conversation: Option<&str>,
    starting: bool,
) -> Result<Scope, ApiError> {
    let Some(id) = conversation else {
        return Ok(crate::scopes::http());
    };
    if id.is_empty() {
        return Err(ApiError::invalid_request(
            "conversation must name a conversation (or be left out)",
        ));
    }
    match state.app().service.store().conversation(id).await {
        Ok(Some(c)) if starting && c.archived => {
            Err(ServiceError::ConversationArchived(id.to_owned()).into())
        }
        Ok(Some(_)) => Ok(crate::scopes::conversation(id)),
        Ok(None) => Err(ServiceError::from(StoreError::ConversationNotFound(id.to_owned())).into()),
        Err(e) => Err(ServiceError::from(e).into()),
    }
}
