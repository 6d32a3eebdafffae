//! The loop itself (docs/contract.md §4): prompt the model, stream its reply, run the `<shell>`
//! commands it wrote one after another, append the results, prompt again — until a reply
//! has no commands, the iteration cap is reached, the run is aborted or fails.
//!
//! History is append-only and verbatim: the user's message, each raw assistant reply, one
//! `tool` message per iteration. Whatever happens, what already arrived is recorded and
//! the event stream ends with exactly one `done` or `error`.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use cmdr_executors::Registry;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::detector::ShellTagDetector;
use super::events::{AgentEvent, DoneReason, ToolStatus};
use super::history::to_chat_messages;
use super::prompt::DEFAULT_SYSTEM_PROMPT;
use super::tool_call::{format_tool_message, run_tool, ToolCall, ToolEnv, ToolOutcome};
use crate::llm::{ChatRequest, LlmClient, LlmError};
use crate::turn::{CommandMeta, Message, Role, ToolRun, TurnStatus};

/// Iterations (model reply + its commands) per user turn, unless an agent says otherwise.
pub const DEFAULT_MAX_ITERATIONS: u32 = 10;

/// A conversation as the loop needs it: its messages and the shell's working directory,
/// which carries over from one command to the next, like a terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Every message so far, oldest first.
    pub messages: Vec<Message>,
    /// Where the next command starts.
    pub cwd: PathBuf,
}

impl Session {
    /// An empty conversation whose commands start in `cwd`.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        Self {
            messages: Vec::new(),
            cwd: cwd.into(),
        }
    }
}

/// Settings of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptions {
    /// The system prompt (see [`super::system_prompt`]).
    pub system_prompt: String,
    /// The model; the client's default when `None`.
    pub model: Option<String>,
    /// Iteration cap (at least 1).
    pub max_iterations: u32,
    /// Deadline of each command; the registry's default (5 minutes) when `None`.
    pub command_timeout: Option<Duration>,
    /// Tags every message of the run as a step of an agent command.
    pub command: Option<CommandMeta>,
    /// The environment the run's shells start with (the agent's
    /// `shell_environment_policy` applied); the registry's when `None`.
    pub shell_env: Option<Arc<[(String, String)]>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_owned(),
            model: None,
            max_iterations: DEFAULT_MAX_ITERATIONS,
            command_timeout: None,
            command: None,
            shell_env: None,
        }
    }
}

/// Told of every message the moment the loop appends it (e.g. to persist it), so an
/// interrupted run loses nothing that was already said.
pub trait Recorder: Send + Sync {
    /// `message` was appended to the session.
    fn record<'a>(&'a self, message: &'a Message) -> RecordFuture<'a>;
}

/// The future [`Recorder::record`] returns.
pub type RecordFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// A recorder that keeps nothing beyond the session itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRecorder;

impl Recorder for NoRecorder {
    fn record<'a>(&'a self, _message: &'a Message) -> RecordFuture<'a> {
        Box::pin(std::future::ready(()))
    }
}

/// How a run ended (also sent as its last event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// The model answered without commands.
    Completed,
    /// Aborted; the partial turn is recorded as `stopped`.
    Stopped,
    /// The iteration cap was reached.
    MaxIterations,
    /// The model could not be asked or its reply broke off.
    Failed {
        /// Stable code (`LLM_UNAVAILABLE`, …).
        code: String,
        /// A sentence for people.
        message: String,
    },
}

impl RunOutcome {
    fn failed(error: &LlmError) -> Self {
        RunOutcome::Failed {
            code: error.code().into(),
            message: error.to_string(),
        }
    }

    /// The event that ends the run's stream.
    pub fn final_event(&self) -> AgentEvent {
        let reason = match self {
            RunOutcome::Completed => DoneReason::Completed,
            RunOutcome::Stopped => DoneReason::Stopped,
            RunOutcome::MaxIterations => DoneReason::MaxIterations,
            RunOutcome::Failed { code, message } => {
                return AgentEvent::Error {
                    code: code.clone(),
                    message: message.clone(),
                }
            }
        };
        AgentEvent::Done { reason }
    }
}

/// The agent loop: a model and the registry its commands run in. Cheap to clone.
#[derive(Clone)]
pub struct AgentLoop {
    llm: Option<Arc<dyn LlmClient>>,
    registry: Registry,
}

impl AgentLoop {
    /// A loop asking `llm` (none configured: every run fails with `LLM_UNAVAILABLE`)
    /// and running commands in `registry`.
    pub fn new(llm: Option<Arc<dyn LlmClient>>, registry: Registry) -> Self {
        Self { llm, registry }
    }

    /// The registry commands run in.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The model a run with `options` uses, if a model is configured at all.
    pub fn model_id(&self, options: &RunOptions) -> Option<String> {
        let llm = self.llm.as_ref()?;
        Some(
            options
                .model
                .clone()
                .unwrap_or_else(|| llm.default_model().to_owned()),
        )
    }

    /// Runs one user turn on `session`: appends `instruction` and everything that follows
    /// to its messages, streams events to `events` (ending with `done` or `error`), and
    /// stops promptly — killing a running command's process tree — when `cancel` fires.
    pub async fn run_turn(
        &self,
        session: &mut Session,
        instruction: String,
        options: &RunOptions,
        events: &mpsc::Sender<AgentEvent>,
        cancel: &CancellationToken,
    ) -> RunOutcome {
        self.run_turn_recorded(session, instruction, options, events, cancel, &NoRecorder)
            .await
    }

    /// [`AgentLoop::run_turn`], telling `recorder` of every message as it is appended
    /// (the user's message first).
    pub async fn run_turn_recorded(
        &self,
        session: &mut Session,
        instruction: String,
        options: &RunOptions,
        events: &mpsc::Sender<AgentEvent>,
        cancel: &CancellationToken,
        recorder: &dyn Recorder,
    ) -> RunOutcome {
        let mut turn = Turn {
            agent: self,
            session,
            options,
            events,
            cancel,
            recorder,
            id_prefix: uuid::Uuid::new_v4().simple().to_string(),
        };
        turn.record(Role::User, instruction, TurnStatus::Ok, Vec::new())
            .await;
        let outcome = turn.run().await;
        turn.emit(outcome.final_event()).await;
        outcome
    }
}

/// One user turn in progress.
struct Turn<'a> {
    agent: &'a AgentLoop,
    session: &'a mut Session,
    options: &'a RunOptions,
    events: &'a mpsc::Sender<AgentEvent>,
    cancel: &'a CancellationToken,
    recorder: &'a dyn Recorder,
    id_prefix: String,
}

/// What streaming one reply gave.
struct Reply {
    text: String,
    calls: Vec<ToolCall>,
    end: ReplyEnd,
}

enum ReplyEnd {
    Complete,
    Stopped,
    Failed(LlmError),
}

impl Turn<'_> {
    async fn run(&mut self) -> RunOutcome {
        let max = self.options.max_iterations.max(1);
        for iteration in 1..=max {
            if let Some(outcome) = self.iteration(iteration, iteration < max).await {
                return outcome;
            }
        }
        RunOutcome::MaxIterations
    }

    /// One model reply and its commands; `None` when the model is to be prompted again.
    async fn iteration(&mut self, iteration: u32, may_continue: bool) -> Option<RunOutcome> {
        let reply = self.stream_reply(iteration).await;
        let status = match &reply.end {
            ReplyEnd::Complete => TurnStatus::Ok,
            ReplyEnd::Stopped => TurnStatus::Stopped,
            ReplyEnd::Failed(_) => TurnStatus::Failed,
        };
        self.record(Role::Assistant, reply.text, status, Vec::new())
            .await;
        match reply.end {
            ReplyEnd::Complete => {}
            ReplyEnd::Stopped => {
                self.skip_all(&reply.calls).await;
                return Some(RunOutcome::Stopped);
            }
            ReplyEnd::Failed(error) => {
                self.skip_all(&reply.calls).await;
                return Some(RunOutcome::failed(&error));
            }
        }
        if reply.calls.is_empty() {
            self.emit(AgentEvent::IterationEnd {
                iteration,
                has_more_commands: false,
            })
            .await;
            return Some(RunOutcome::Completed);
        }
        self.run_calls(reply.calls).await;
        if self.cancel.is_cancelled() {
            return Some(RunOutcome::Stopped);
        }
        self.emit(AgentEvent::IterationEnd {
            iteration,
            has_more_commands: may_continue,
        })
        .await;
        (!may_continue).then_some(RunOutcome::MaxIterations)
    }

    /// Streams the model's reply, announcing each command as its closing tag arrives.
    async fn stream_reply(&mut self, iteration: u32) -> Reply {
        let mut reply = Reply {
            text: String::new(),
            calls: Vec::new(),
            end: ReplyEnd::Complete,
        };
        let Some(llm) = self.agent.llm.clone() else {
            reply.end = ReplyEnd::Failed(LlmError::NotConfigured(
                "set CMDR_LLM_BASE_URL and CMDR_LLM_MODEL (and CMDR_LLM_API_KEY if needed)"
                    .to_owned(),
            ));
            return reply;
        };
        let request = ChatRequest {
            model: self.options.model.clone(),
            messages: to_chat_messages(&self.options.system_prompt, &self.session.messages),
        };
        let started = tokio::select! {
            biased;
            () = self.cancel.cancelled() => None,
            started = llm.stream_chat(request) => Some(started),
        };
        let mut tokens = match started {
            None => {
                reply.end = ReplyEnd::Stopped;
                return reply;
            }
            Some(Err(error)) => {
                reply.end = ReplyEnd::Failed(error);
                return reply;
            }
            Some(Ok(tokens)) => tokens,
        };
        let mut detector = ShellTagDetector::new();
        let mut found = Vec::new();
        loop {
            let item = tokio::select! {
                biased;
                () = self.cancel.cancelled() => {
                    reply.end = ReplyEnd::Stopped;
                    break;
                }
                item = tokens.next() => item,
            };
            let delta = match item {
                None => break,
                Some(Err(error)) => {
                    reply.end = ReplyEnd::Failed(error);
                    break;
                }
                Some(Ok(delta)) => delta,
            };
            reply.text.push_str(&delta);
            detector.feed(&delta, &mut found);
            self.emit(AgentEvent::Text { content: delta }).await;
            for detected in found.drain(..) {
                let call = ToolCall {
                    id: format!("cmd-{iteration}-{}", reply.calls.len()),
                    command: detected.command,
                };
                self.emit(AgentEvent::ToolCall {
                    command: call.command.clone(),
                    command_id: call.id.clone(),
                })
                .await;
                reply.calls.push(call);
            }
        }
        if let Some(offset) = detector.finish() {
            tracing::debug!(
                offset,
                iteration,
                "reply ended inside an unterminated <shell> tag"
            );
        }
        reply
    }

    /// Runs the iteration's commands one after another and records their `tool` message.
    async fn run_calls(&mut self, calls: Vec<ToolCall>) {
        let mut runs = Vec::with_capacity(calls.len());
        for call in calls {
            let outcome = if self.cancel.is_cancelled() {
                ToolOutcome::skipped()
            } else {
                self.run_call(&call).await
            };
            self.emit_result(&call, &outcome).await;
            runs.push((call, outcome));
        }
        let status = if self.cancel.is_cancelled() {
            TurnStatus::Stopped
        } else {
            TurnStatus::Ok
        };
        let tool_runs = runs.iter().map(tool_run).collect();
        self.record(Role::Tool, format_tool_message(&runs), status, tool_runs)
            .await;
    }

    async fn run_call(&mut self, call: &ToolCall) -> ToolOutcome {
        self.emit(AgentEvent::ToolStart {
            command: call.command.clone(),
            command_id: call.id.clone(),
        })
        .await;
        let env = ToolEnv {
            id_prefix: self.id_prefix.clone(),
            cwd: self.session.cwd.clone(),
            timeout: self.options.command_timeout,
            shell_env: self.options.shell_env.clone(),
        };
        let outcome = run_tool(&self.agent.registry, call, &env, self.events, self.cancel).await;
        if let Some(cwd) = &outcome.final_cwd {
            self.session.cwd.clone_from(cwd);
        }
        outcome
    }

    /// Announces commands that will never run, so no client leaves them queued.
    async fn skip_all(&mut self, calls: &[ToolCall]) {
        let skipped = ToolOutcome::skipped();
        for call in calls {
            self.emit_result(call, &skipped).await;
        }
    }

    async fn emit_result(&mut self, call: &ToolCall, outcome: &ToolOutcome) {
        self.emit(AgentEvent::ToolResult {
            command: call.command.clone(),
            command_id: call.id.clone(),
            result: outcome.event_text(),
            status: outcome.status,
            exit_code: outcome.exit_code,
            duration_ms: outcome.duration_ms,
        })
        .await;
    }

    async fn record(
        &mut self,
        role: Role,
        content: String,
        status: TurnStatus,
        runs: Vec<ToolRun>,
    ) {
        let message = Message {
            role,
            content,
            status,
            tool_runs: runs,
            command: self.options.command.clone(),
        };
        self.recorder.record(&message).await;
        self.session.messages.push(message);
    }

    async fn emit(&self, event: AgentEvent) {
        // A client that went away is the transport's business: it cancels the run.
        let _ = self.events.send(event).await;
    }
}

fn tool_run((call, outcome): &(ToolCall, ToolOutcome)) -> ToolRun {
    ToolRun {
        command_id: call.id.clone(),
        command: call.command.clone(),
        status: tool_status_name(outcome.status).to_owned(),
        exit_code: outcome.exit_code,
    }
}

fn tool_status_name(status: ToolStatus) -> &'static str {
    match status {
        ToolStatus::Completed => "completed",
        ToolStatus::Failed => "failed",
        ToolStatus::Stopped => "stopped",
        ToolStatus::Skipped => "skipped",
    }
}
