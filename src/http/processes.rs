//! The process routes (docs/processes.md), each a thin translation onto the registry's
//! process commands:
//!
//! - `GET /processes` → `{"processes":[{processId, command, pid, state, startedAt,
//!   exitCode?, outputBytes, tty}]}`;
//! - `POST /processes` `{command, working_dir?, env?, yield_ms?, timeout_ms?, ready?, tty?,
//!   cols?, rows?}` → the combined result of `BASH_EXEC` with `background` (`processId`,
//!   `processState`, first output); `tty` runs it under a pseudo-terminal of
//!   `cols` x `rows`;
//! - `GET /processes/{id}/output?offset=&max_bytes=&wait_ms=` → the combined result of
//!   `PROCESS_OUTPUT`; with `stream=true`, SSE: `{"type":"output","offset","nextOffset",
//!   "text"}` events from `offset` on (resume after a disconnect with the last
//!   `nextOffset`), then one `{"type":"end","processState","exitCode"?}`;
//! - `POST /processes/{id}/input` `{input, close_stdin?, yield_ms?, cols?, rows?}` →
//!   `PROCESS_INPUT` (`cols`/`rows` resize a `tty` process's terminal);
//! - `POST /processes/{id}/kill` `{signal?, grace_ms?}` → `PROCESS_KILL`.
//!
//! Every route acts in the REST client's scope `http`, or with `?conversation=<id>` in
//! that conversation's (404 `CONVERSATION_NOT_FOUND` when there is none; an archived one
//! takes no new process: 400 `CONVERSATION_ARCHIVED`): another scope's process is 404
//! `PROCESS_NOT_FOUND`, like an unknown one.
//!
//! A result `FAILED` because the request was wrong (unknown id, bad field, too many
//! processes) is that code's HTTP error; a process that failed its readiness or exited is
//! a 200 with the `FAILED` result.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use cmdr_executors::{
    combine_output_results_limited, BashExecCommand, Command, ErrorClass, ErrorCode,
    ExecutionStatus, OutputResult, ProcessInputCommand, ProcessKillCommand, ProcessListCommand,
    ProcessOutputCommand, ReadyCheck, Scope,
};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ApiError;
use super::extract::{ApiPath, ApiQuery, JsonBody};
use super::scope::ScopeQuery;
use super::HttpState;

/// How long one SSE wait for output lasts before it looks again.
const STREAM_WAIT: Duration = Duration::from_secs(15);
/// Bytes per SSE output event, at most.
const STREAM_CHUNK: usize = 64 * 1024;

/// The body of `POST /processes`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub struct StartBody {
    command: String,
    #[serde(default)]
    working_dir: Option<PathBuf>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    yield_ms: Option<u64>,
    /// The process's lifetime: it is stopped this long after its start.
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    ready: Option<ReadyCheck>,
    #[serde(default)]
    tty: bool,
    #[serde(default)]
    cols: Option<u16>,
    #[serde(default)]
    rows: Option<u16>,
}

/// The body of `POST /processes/{id}/input`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub struct InputBody {
    #[serde(default)]
    input: String,
    #[serde(default)]
    close_stdin: bool,
    #[serde(default)]
    yield_ms: Option<u64>,
    #[serde(default)]
    cols: Option<u16>,
    #[serde(default)]
    rows: Option<u16>,
}

/// The body of `POST /processes/{id}/kill`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub struct KillBody {
    #[serde(default)]
    signal: Option<String>,
    #[serde(default)]
    grace_ms: Option<u64>,
}

/// The query of `GET /processes/{id}/output`.
#[derive(Debug, Default, Deserialize)]
pub struct OutputQuery {
    #[serde(default)]
    offset: Option<u64>,
    #[serde(default)]
    max_bytes: Option<u64>,
    #[serde(default)]
    wait_ms: Option<u64>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    conversation: Option<String>,
}

/// `GET /processes`.
pub async fn list(
    State(state): State<HttpState>,
    ApiQuery(scope): ApiQuery<ScopeQuery>,
) -> Result<Json<Value>, ApiError> {
    let command = Command::ProcessList(ProcessListCommand::default());
    let result = run(&state, &scope, command).await?;
    let processes: Value = serde_json::from_str(&result.result_data).unwrap_or(json!([]));
    Ok(Json(json!({ "processes": processes })))
}

/// `POST /processes`.
pub async fn start(
    State(state): State<HttpState>,
    ApiQuery(scope): ApiQuery<ScopeQuery>,
    JsonBody(body): JsonBody<StartBody>,
) -> Result<Json<OutputResult>, ApiError> {
    let command = Command::BashExec(BashExecCommand {
        command: body.command,
        working_dir: body.working_dir,
        env: body.env,
        background: true,
        yield_ms: body.yield_ms,
        timeout_ms: body.timeout_ms,
        ready: body.ready,
        tty: body.tty,
        cols: body.cols,
        rows: body.rows,
        ..BashExecCommand::default()
    });
    let scope = super::scope::resolve_to_start(&state, scope.conversation.as_deref()).await?;
    run_in(&state, scope, command).await.map(Json)
}

/// `POST /processes/{id}/input`.
pub async fn input(
    State(state): State<HttpState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(scope): ApiQuery<ScopeQuery>,
    JsonBody(body): JsonBody<InputBody>,
) -> Result<Json<OutputResult>, ApiError> {
    let command = Command::ProcessInput(ProcessInputCommand {
        process_id: id,
        input: body.input,
        close_stdin: body.close_stdin,
        yield_ms: body.yield_ms,
        cols: body.cols,
        rows: body.rows,
        ..ProcessInputCommand::default()
    });
    run(&state, &scope, command).await.map(Json)
}

/// `POST /processes/{id}/kill`.
pub async fn kill(
    State(state): State<HttpState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(scope): ApiQuery<ScopeQuery>,
    JsonBody(body): JsonBody<KillBody>,
) -> Result<Json<OutputResult>, ApiError> {
    let command = Command::ProcessKill(ProcessKillCommand {
        process_id: id,
        signal: body.signal,
        grace_ms: body.grace_ms,
        ..ProcessKillCommand::default()
    });
    run(&state, &scope, command).await.map(Json)
}

/// `GET /processes/{id}/output`.
pub async fn output(
    State(state): State<HttpState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<OutputQuery>,
) -> Result<Response, ApiError> {
    let scope = ScopeQuery {
        conversation: query.conversation,
    };
    if query.stream {
        let scope = super::scope::resolve(&state, scope.conversation.as_deref()).await?;
        return stream(&state, &scope, &id, query.offset.unwrap_or(0));
    }
    let command = Command::ProcessOutput(ProcessOutputCommand {
        process_id: id,
        offset: query.offset,
        max_bytes: query.max_bytes,
        wait_ms: query.wait_ms,
        ..ProcessOutputCommand::default()
    });
    Ok(Json(run(&state, &scope, command).await?).into_response())
}

/// The output of process `id` from `offset` on, as SSE, until it exits.
fn stream(state: &HttpState, scope: &Scope, id: &str, offset: u64) -> Result<Response, ApiError> {
    let process = state
        .app()
        .registry
        .processes()
        .get(scope, id)
        .map_err(|e| ApiError::new(e.code(), e.to_string()))?;
    let events = futures_util::stream::unfold(Some(offset), move |offset| {
        let process = process.clone();
        async move {
            let mut offset = offset?;
            loop {
                let slice = process.log.read(offset, STREAM_CHUNK);
                if !slice.text.is_empty() || slice.truncated_before.is_some() {
                    let mut event = json!({"type": "output", "offset": slice.offset,
                        "nextOffset": slice.next_offset, "text": slice.text});
                    if let Some(before) = slice.truncated_before {
                        event["truncatedBefore"] = json!(before);
                    }
                    return Some((Ok::<_, Infallible>(data(&event)), Some(slice.next_offset)));
                }
                offset = slice.next_offset;
                if process.log.is_closed() && offset >= process.log.end() {
                    let state = process.state();
                    let mut end = json!({"type": "end", "processState": state.name()});
                    if let Some(code) = state.exit_code() {
                        end["exitCode"] = json!(code);
                    }
                    if state.timed_out() {
                        end["errorCode"] = json!(cmdr_executors::ErrorCode::Timeout.as_str());
                    }
                    return Some((Ok(data(&end)), None));
                }
                process.log.wait_beyond(offset, STREAM_WAIT).await;
            }
        }
    });
    let sse = Sse::new(events).keep_alive(
        KeepAlive::new()
            .interval(state.keep_alive())
            .text(super::sse::KEEP_ALIVE_TEXT),
    );
    Ok(sse.into_response())
}

fn data(value: &Value) -> Event {
    Event::default().data(value.to_string())
}

/// Runs `command` in the scope `query` names to its combined result; a failure that says
/// the request was wrong is that code's HTTP error.
async fn run(
    state: &HttpState,
    query: &ScopeQuery,
    command: Command,
) -> Result<OutputResult, ApiError> {
    let scope = super::scope::resolve(state, query.conversation.as_deref()).await?;
    run_in(state, scope, command).await
}

/// Runs `command` in `scope` to its combined result, as [`run`].
async fn run_in(
    state: &HttpState,
    scope: Scope,
    command: Command,
) -> Result<OutputResult, ApiError> {
    let results = state.app().registry.execute_in(scope, command).await?;
    let limit = state.app().combined_limit;
    let result = combine_output_results_limited(results, None, limit).await;
    if result.status == ExecutionStatus::Failed {
        let code = result.error_code.as_deref().and_then(ErrorCode::parse);
        if let Some(code) = code.filter(|c| {
            matches!(
                c.class(),
                ErrorClass::Invalid | ErrorClass::NotFound | ErrorClass::Unavailable
            )
        }) {
            return Err(ApiError::new(code, result.error));
        }
    }
    Ok(result)
}
