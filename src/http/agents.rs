//! Agent routes: discovery, runs to completion, streamed runs, stateless runs.
//!
//! - `GET /agents` → `{"agents":[{"name","description"}]}`
//! - `GET /agents/{agentName}/commands` → `{"commands":[{"name","description","disabled"?}]}`
//! - `POST /agents/{agentName}/run` `{instruction, conversationId?, working_folder?}`
//! - `POST /agents/{agentName}/commands/run` `{commandName, conversationId?, working_folder?}`
//! - `POST /agents/{agentName}/stream` `{message, conversationId?, working_folder?}` → SSE
//! - `POST /api/agent` `{messages:[{role,content}]}` → SSE
//!
//! Every check (names, agent, command file, working folder, model, conversation and its
//! lock) is the service's; a refusal is a JSON error before anything runs or streams.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use serde::{Deserialize, Serialize};

use crate::agent::{Message, Role, RunOutcome};
use crate::agents::{AgentSummary, CommandEntry};
use crate::service::{RunInfo, RunTarget};

use super::error::ApiError;
use super::extract::{ApiPath, JsonBody};
use super::sse;
use super::HttpState;

/// `GET /agents`.
#[derive(Debug, Serialize)]
pub struct AgentList {
    /// Every agent, sorted by name.
    pub agents: Vec<AgentSummary>,
}

/// `GET /agents/{agentName}/commands`.
#[derive(Debug, Serialize)]
pub struct CommandList {
    /// The agent's commands, sorted, invalid ones `disabled`.
    pub commands: Vec<CommandEntry>,
}

/// The body of `POST /agents/{agentName}/run`.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a JSON object")]
pub struct RunRequest {
    /// What to do.
    pub instruction: String,
    /// Continue this conversation (a new one when absent).
    #[serde(default, rename = "conversationId", alias = "conversation_id")]
    pub conversation_id: Option<String>,
    /// Absolute path of an existing directory where the run's commands start.
    #[serde(default, alias = "workingFolder")]
    pub working_folder: Option<String>,
}

/// The body of `POST /agents/{agentName}/commands/run`.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a JSON object")]
pub struct CommandRunRequest {
    /// The agent command (its file name without `.json`).
    #[serde(rename = "commandName", alias = "command_name")]
    pub command_name: String,
    /// Continue this conversation (a new one when absent).
    #[serde(default, rename = "conversationId", alias = "conversation_id")]
    pub conversation_id: Option<String>,
    /// Absolute path of an existing directory where the run's commands start.
    #[serde(default, alias = "workingFolder")]
    pub working_folder: Option<String>,
}

/// The body of `POST /agents/{agentName}/stream`.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a JSON object")]
pub struct StreamRequest {
    /// The user's message.
    #[serde(alias = "instruction")]
    pub message: String,
    /// Continue this conversation (a new one when absent).
    #[serde(default, rename = "conversationId", alias = "conversation_id")]
    pub conversation_id: Option<String>,
    /// Absolute path of an existing directory where the run's commands start.
    #[serde(default, alias = "workingFolder")]
    pub working_folder: Option<String>,
}

/// The body of `POST /api/agent`: the whole conversation, held by the client, ending
/// with the new user message.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a JSON object")]
pub struct StatelessRequest {
    /// Oldest first.
    pub messages: Vec<ClientMessage>,
}

/// One message of a client-held conversation.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a message object {role, content}")]
pub struct ClientMessage {
    /// `user`, `assistant` or `tool`.
    pub role: Role,
    /// Its text, verbatim.
    pub content: String,
}

/// What a run to completion answers.
#[derive(Debug, Serialize)]
pub struct RunResponse {
    /// Agent, command (for command runs), conversation and model.
    #[serde(flatten)]
    pub info: RunInfo,
    /// `completed`, `stopped`, `max-iterations` or `failed`.
    pub status: &'static str,
    /// Why it failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<RunError>,
}

/// A failed run's error.
#[derive(Debug, Serialize)]
pub struct RunError {
    /// Stable code (`LLM_HTTP_ERROR`, …).
    pub code: String,
    /// A sentence for people.
    pub message: String,
}

impl RunResponse {
    fn new(info: RunInfo, outcome: RunOutcome) -> Self {
        let status = outcome.status_name();
        let error = match outcome {
            RunOutcome::Failed { code, message } => Some(RunError { code, message }),
            _ => None,
        };
        Self {
            info,
            status,
            error,
        }
    }
}

fn target(
    agent: String,
    conversation_id: Option<String>,
    working_folder: Option<String>,
) -> RunTarget {
    RunTarget {
        agent,
        conversation_id,
        working_folder,
    }
}

/// `GET /agents`.
pub async fn list_agents(State(state): State<HttpState>) -> Result<Json<AgentList>, ApiError> {
    let agents = state.app().service.list_agents().await?;
    Ok(Json(AgentList { agents }))
}

/// `GET /agents/{agentName}/commands`.
pub async fn list_commands(
    State(state): State<HttpState>,
    ApiPath(agent): ApiPath<String>,
) -> Result<Json<CommandList>, ApiError> {
    let commands = state.app().service.list_commands(&agent).await?;
    Ok(Json(CommandList { commands }))
}

/// `POST /agents/{agentName}/run`: runs while the request is open; closing it stops
/// the run.
pub async fn run(
    State(state): State<HttpState>,
    ApiPath(agent): ApiPath<String>,
    JsonBody(body): JsonBody<RunRequest>,
) -> Result<Json<RunResponse>, ApiError> {
    let target = target(agent, body.conversation_id, body.working_folder);
    let run = state
        .app()
        .service
        .prepare_instruction(target, body.instruction)
        .await?;
    let info = run.info().clone();
    let outcome = state.runs().to_end(run).await?;
    Ok(Json(RunResponse::new(info, outcome)))
}

/// `POST /agents/{agentName}/commands/run`: runs every step while the request is open;
/// closing it stops after the current step.
pub async fn run_command(
    State(state): State<HttpState>,
    ApiPath(agent): ApiPath<String>,
    JsonBody(body): JsonBody<CommandRunRequest>,
) -> Result<Json<RunResponse>, ApiError> {
    let target = target(agent, body.conversation_id, body.working_folder);
    let run = state
        .app()
        .service
        .prepare_command(target, &body.command_name)
        .await?;
    let info = run.info().clone();
    let outcome = state.runs().to_end(run).await?;
    Ok(Json(RunResponse::new(info, outcome)))
}

/// `POST /agents/{agentName}/stream`: the run's events as SSE, opened by `conversation`.
pub async fn stream(
    State(state): State<HttpState>,
    ApiPath(agent): ApiPath<String>,
    JsonBody(body): JsonBody<StreamRequest>,
) -> Result<Response, ApiError> {
    let target = target(agent, body.conversation_id, body.working_folder);
    let run = state
        .app()
        .service
        .prepare_instruction(target, body.message)
        .await?;
    let (events, guard) = state.runs().start(run).into_parts();
    Ok(sse::agent_events(events, guard, state.keep_alive()))
}

/// `POST /api/agent`: one turn on a client-held history, as SSE; nothing is persisted.
pub async fn stateless(
    State(state): State<HttpState>,
    JsonBody(body): JsonBody<StatelessRequest>,
) -> Result<Response, ApiError> {
    let messages = body
        .messages
        .into_iter()
        .map(|m| Message::new(m.role, m.content))
        .collect();
    let live = state
        .runs()
        .start_stateless(&state.app().service, messages)
        .await?;
    let (events, guard) = live.into_parts();
    Ok(sse::agent_events(events, guard, state.keep_alive()))
}
