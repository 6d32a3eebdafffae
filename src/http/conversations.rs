//! Conversation routes.
//!
//! - `GET /conversations[?agentName=]` → `{"conversations":[conversation…]}`, most recent
//!   activity first (an empty `agentName` means every agent).
//! - `GET /conversations/{id}` → the conversation, or 404 `CONVERSATION_NOT_FOUND`.
//! - `GET /conversations/{id}/turns` → `{"items":[turn…]}` oldest first, or 404
//!   `CONVERSATION_NOT_FOUND`.
//! - `POST /conversations/{id}/archive` and `/unarchive` → `{"conversationId","archived"}`;
//!   archived conversations refuse new runs.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};

use crate::service::ServiceError;
use crate::store::{Conversation, StoreError, StoredTurn};

use super::error::ApiError;
use super::extract::{ApiPath, ApiQuery};
use super::HttpState;

/// The query of `GET /conversations`.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    /// Only this agent's conversations.
    #[serde(default, rename = "agentName", alias = "agent")]
    pub agent_name: Option<String>,
}

/// `GET /conversations`.
#[derive(Debug, Serialize)]
pub struct ConversationList {
    /// Most recent activity first.
    pub conversations: Vec<Conversation>,
}

/// `GET /conversations/{id}/turns`.
#[derive(Debug, Serialize)]
pub struct TurnList {
    /// Oldest first.
    pub items: Vec<StoredTurn>,
}

/// `POST /conversations/{id}/archive` and `/unarchive`.
#[derive(Debug, Serialize)]
pub struct Archived {
    /// The conversation.
    #[serde(rename = "conversationId")]
    pub conversation_id: String,
    /// Whether it is archived now.
    pub archived: bool,
}

/// `GET /conversations`.
pub async fn list(
    State(state): State<HttpState>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<ConversationList>, ApiError> {
    let agent = query.agent_name.filter(|a| !a.is_empty());
    let conversations = state.app().service.conversations(agent.as_deref()).await?;
    Ok(Json(ConversationList { conversations }))
}

/// `GET /conversations/{id}`.
pub async fn get(
    State(state): State<HttpState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Conversation>, ApiError> {
    let store = state.app().service.store();
    match store.conversation(&id).await {
        Ok(Some(conversation)) => Ok(Json(conversation)),
        Ok(None) => Err(ServiceError::from(StoreError::ConversationNotFound(id)).into()),
        Err(e) => Err(ServiceError::from(e).into()),
    }
}

/// `GET /conversations/{id}/turns`.
pub async fn turns(
    State(state): State<HttpState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<TurnList>, ApiError> {
    let items = state.app().service.turns(&id).await?;
    Ok(Json(TurnList { items }))
}

/// `POST /conversations/{id}/archive`.
pub async fn archive(
    State(state): State<HttpState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Archived>, ApiError> {
    set_archived(state, id, true).await
}

/// `POST /conversations/{id}/unarchive`.
pub async fn unarchive(
    State(state): State<HttpState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Archived>, ApiError> {
    set_archived(state, id, false).await
}

async fn set_archived(
    state: HttpState,
    id: String,
    archived: bool,
) -> Result<Json<Archived>, ApiError> {
    state.app().service.set_archived(&id, archived).await?;
    Ok(Json(Archived {
        conversation_id: id,
        archived,
    }))
}
