//! The raw job runner: one command (SPEC §2) straight into the registry.
//!
//! - `POST /commands` (body: a command) → SSE of its `OutputResult`s, the terminal one
//!   last; `?combine=true` → the one combined `OutputResult` as JSON. A body that does
//!   not decode is 400 `INVALID_REQUEST` naming the problem; an id already in flight is
//!   409 `DUPLICATE_COMMAND_ID`. Closing the request drops the result stream, which
//!   stops the command (its process tree is killed).
//! - `POST /commands/{command_id}/cancel` → `{"commandId","cancelled":true}`, or 404
//!   `COMMAND_NOT_RUNNING`.
//! - `POST /commands/{command_id}/input` `{"value"}` → `{"commandId","answered":true}`,
//!   or 404 `NOT_WAITING_FOR_INPUT`.
//! - `GET /commands/inputs` → `{"inputs":[{"commandId","prompt","description"?}]}`: the
//!   `REQUEST_USER_INPUT` questions waiting for an answer, sorted by id.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use cmdr_executors::{combine_output_results, decode_command_slice};
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

/// The body of `POST /commands/{command_id}/input`.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a JSON object")]
pub struct InputAnswer {
    /// The answer, sent as the command's `resultData`.
    pub value: String,
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
    let command = decode_command_slice(&body)
        .map_err(|failure| ApiError::invalid_request(failure.error.to_string()))?;
    let results = state.app().registry.execute(command).await?;
    if query.combine {
        let combined = combine_output_results(results, None).await;
        return Ok(Json(combined).into_response());
    }
    Ok(sse::command_results(results, state.keep_alive()))
}

/// `POST /commands/{command_id}/cancel`.
pub async fn cancel(
    State(state): State<HttpState>,
    ApiPath(command_id): ApiPath<String>,
) -> Result<Json<Cancelled>, ApiError> {
    if !state.app().registry.cancel(&command_id) {
        return Err(ApiError::not_found(
            "COMMAND_NOT_RUNNING",
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
    state
        .app()
        .inputs
        .answer(&command_id, body.value)
        .map_err(|e| ApiError::not_found("NOT_WAITING_FOR_INPUT", e.to_string()))?;
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
