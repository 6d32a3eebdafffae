//! The raw job runner: one command (docs/contract.md §2) straight into the registry.
//!
//! - `POST /commands` (body: a command) → SSE of its `OutputResult`s, the terminal one
//!   last; `?combine=true` → the one combined `OutputResult` as JSON. A body that does
//!   not decode is 400 `INVALID_REQUEST` naming the problem; an id already in flight is
//!   409 `DUPLICATE_COMMAND_ID`. Closing the request drops the result stream, which
//!   stops the command (its process tree is killed). It runs in the REST client's process
//!   scope `http` (the processes and sessions of `/processes`), or with
//!   `?conversation=<id>` in that conversation's.
//! - `POST /commands/{command_id}/cancel` → `{"commandId","cancelled":true}`, or 404
//!   `COMMAND_NOT_RUNNING`.
//!   The stream's response carries the `Cmdr-Input-Key` header: the key that answers this
//!   command's `REQUEST_USER_INPUT` question (only this client ever sees it).
//! - `POST /commands/{command_id}/input` `{"value","key"}` → `{"commandId","answered":true}`;
//!   403 `INPUT_FORBIDDEN` unless `key` is the question's requester key or the person key
//!   (`cmdr serve`'s printed UI address), so a command cannot answer its own question;
//!   404 `NOT_WAITING_FOR_INPUT` when no question waits under that id.
//! - `GET /commands/inputs` → `{"inputs":[{"commandId","prompt","description"?}]}`: the
//!   `REQUEST_USER_INPUT` questions waiting for an answer, sorted by id (no keys).

use axum::extract::State;
use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use cmdr_executors::ErrorCode;
use cmdr_executors::{combine_output_results_limited, decode_command_slice};
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::{ApiPath, ApiQuery, JsonBody, RawBody};
use super::sse;
use super::HttpState;

/// The query of `POST /commands`.
#[derive(Debug, Default, Deserialize)]
pub struct RunQuery {
    /// Answer with one combined result instead of a stream.
    #[serde(default)]
    pub combine: bool,
    /// Run in this conversation's process scope instead of the REST client's (`http`).
    #[serde(default)]
    pub conversation: Option<String>,
}

/// `POST /commands/{command_id}/cancel`.
#[derive(Debug, Serialize)]
pub struct Cancelled {
    /// The command.
    #[serde(rename = "commandId")]
    pub command_id: String,
    /// Always `true` (a command not running is a 404).
    pub cancelled: bool,
}

/// The response header carrying a command's requester key.
pub const INPUT_KEY_HEADER: &str = "cmdr-input-key";

/// The body of `POST /commands/{command_id}/input`.
#[derive(Deserialize)]
#[serde(expecting = "a JSON object")]
pub struct InputAnswer {
    /// The answer, sent as the command's `resultData`.
    pub value: String,
    /// The question's requester key (`Cmdr-Input-Key`) or the person key.
    #[serde(default)]
    pub key: String,
}

impl std::fmt::Debug for InputAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a key.
        f.debug_struct("InputAnswer")
            .field("value", &self.value)
            .finish_non_exhaustive()
    }
}

/// `POST /commands/{command_id}/input`.
#[derive(Debug, Serialize)]
pub struct Answered {
    /// The command.
    #[serde(rename = "commandId")]
    pub command_id: String,
    /// Always `true` (a command not waiting is a 404).
    pub answered: bool,
}

/// `GET /commands/inputs`.
#[derive(Debug, Serialize)]
pub struct InputList {
    /// The questions waiting, sorted by command id.
    pub inputs: Vec<PendingInput>,
}

/// One question waiting for an answer.
#[derive(Debug, Serialize)]
pub struct PendingInput {
    /// The `REQUEST_USER_INPUT` command's id.
    #[serde(rename = "commandId")]
    pub command_id: String,
    /// What it asks.
    pub prompt: String,
    /// Its description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `POST /commands`.
pub async fn run(
    State(state): State<HttpState>,
    ApiQuery(query): ApiQuery<RunQuery>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let mut command = decode_command_slice(&body)
        .map_err(|failure| ApiError::invalid_request(failure.error.to_string()))?;
    let id = command.ensure_command_id().to_owned();
    let scope = super::scope::resolve_to_start(&state, query.conversation.as_deref()).await?;
    let results = state.app().registry.execute_in(scope, command).await?;
    // Bound once the id is this command's (a duplicate id was refused above), so nobody
    // can re-bind a running command's question.
    let binding = state.app().input_keys.bind(&id);
    if query.combine {
        let limit = state.app().combined_limit;
        let combined = combine_output_results_limited(results, None, limit).await;
        return Ok(Json(combined).into_response());
    }
    let header = binding
        .as_ref()
        .and_then(|b| HeaderValue::from_str(b.key()).ok());
    let mut response = sse::command_results(results, state.keep_alive(), binding);
    if let Some(header) = header {
        response
            .headers_mut()
            .insert(HeaderName::from_static(INPUT_KEY_HEADER), header);
    }
    Ok(response)
}

/// `POST /commands/{command_id}/cancel`.
pub async fn cancel(
    State(state): State<HttpState>,
    ApiPath(command_id): ApiPath<String>,
) -> Result<Json<Cancelled>, ApiError> {
    if !state.app().registry.cancel(&command_id) {
        return Err(ApiError::new(
            ErrorCode::CommandNotRunning,
            format!("no command with id '{command_id}' is running"),
        ));
    }
    Ok(Json(Cancelled {
        command_id,
        cancelled: true,
    }))
}

/// `POST /commands/{command_id}/input`.
pub async fn answer(
    State(state): State<HttpState>,
    ApiPath(command_id): ApiPath<String>,
    JsonBody(body): JsonBody<InputAnswer>,
) -> Result<Json<Answered>, ApiError> {
    if !state.app().input_keys.may_answer(&command_id, &body.key) {
        return Err(ApiError::new(
            ErrorCode::InputForbidden,
            "only the person may answer: send the question's key (the Cmdr-Input-Key header \
             of the POST /commands response that asked it) or the answer key of the web UI \
             address cmdr serve printed",
        ));
    }
    state
        .app()
        .inputs
        .answer(&command_id, body.value)
        .map_err(|e| ApiError::new(ErrorCode::NotWaitingForInput, e.to_string()))?;
    Ok(Json(Answered {
        command_id,
        answered: true,
    }))
}

/// `GET /commands/inputs`.
pub async fn inputs(State(state): State<HttpState>) -> Json<InputList> {
    let mut inputs: Vec<PendingInput> = state
        .app()
        .inputs
        .pending()
        .into_iter()
        .map(|request| PendingInput {
            command_id: request.command_id,
            prompt: request.prompt,
            description: request.description,
        })
        .collect();
    inputs.sort_by(|a, b| a.command_id.cmp(&b.command_id));
    Json(InputList { inputs })
}
