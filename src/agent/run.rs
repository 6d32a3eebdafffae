//! The loop itself (docs/contract.md §4): prompt the model, stream its reply, run the `<shell>`
//! commands (and ask the `<ask>` questions) it wrote one after another, append the
//! results, prompt again — until a reply has none, the iteration cap is reached, a reply
//! is cut off by the length limit, the model repeats itself, the run is aborted or fails.
//!
//! What real models do, and what the loop does about it (docs/agent-loop.md):
//! - a reply goes on after its commands with made-up results: the reply ends at the first
//!   stop sequence ([`STOP_SEQUENCES`], also sent as the request's `stop`), which is
//!   neither shown nor stored;
//! - a reply cut off by `max_tokens` (`finish_reason: "length"`): its commands are not run
//!   and the run ends `done: max-tokens`;
//! - the last reply the iteration cap allows has commands: they are not run (nobody would
//!   read their results) and are reported `skipped`;
//! - the same commands with the same results as the previous iteration: the model is told
//!   so in the results; once more, and the run ends `done: repeating`.
//!
//! History is append-only and verbatim: the user's message, each raw assistant reply, one
//! `tool` message per iteration. Whatever happens, what already arrived is recorded and
//! the event stream ends with exactly one `done` or `error`.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use cmdr_executors::{ErrorCode, Registry};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::detector::ShellTagDetector;
use super::events::{AgentEvent, DoneReason, ToolStatus};
use super::history::to_chat_messages;
use super::prompt::DEFAULT_SYSTEM_PROMPT;
use super::session::Session;
use super::stop::{StopScanner, STOP_SEQUENCES};
use super::tool_call::{format_tool_message, run_tool, ToolCall, ToolEnv, ToolOutcome};
use crate::llm::{ChatRequest, Delta, LlmClient, LlmError};
use crate::turn::{CommandMeta, Message, Role, ToolRun, TurnStatus};

/// Iterations (model reply + its commands) per user turn, unless an agent says otherwise.
pub const DEFAULT_MAX_ITERATIONS: u32 = 10;

/// The longest reply asked for (`max_tokens`), unless an agent or a flag says otherwise:
/// room for a long answer or a large file written by a command, while a model that
/// rambles on (llama.cpp's own default is no limit) is stopped.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// What the model is told, in the results, when it repeats itself.
const REPEAT_NOTE: &str = "[cmdr: these are the same commands with the same results as in your \
previous reply. Do something different, or answer without commands; repeating them again ends \
the turn.]";

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
    /// The longest reply asked for (`max_tokens`); the provider's default when `None`.
    pub max_tokens: Option<u32>,
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
            max_tokens: Some(DEFAULT_MAX_TOKENS),
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
    /// A reply was cut off by the length limit.
    MaxTokens,
    /// The model repeated the same commands with the same results after being told.
    Repeating,
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

    /// The run's status as the run routes and MCP tools report it: `completed`,
    /// `stopped`, `max-iterations`, `max-tokens`, `repeating` or `failed`.
    pub fn status_name(&self) -> &'static str {
        match self {
            RunOutcome::Completed => "completed",
            RunOutcome::Stopped => "stopped",
            RunOutcome::MaxIterations => "max-iterations",
            RunOutcome::MaxTokens => "max-tokens",
            RunOutcome::Repeating => "repeating",
            RunOutcome::Failed { .. } => "failed",
        }
    }

    /// The event that ends the run's stream.
    pub fn final_event(&self) -> AgentEvent {
        let reason = match self {
            RunOutcome::Completed => DoneReason::Completed,
            RunOutcome::Stopped => DoneReason::Stopped,
            RunOutcome::MaxIterations => DoneReason::MaxIterations,
            RunOutcome::MaxTokens => DoneReason::MaxTokens,
            RunOutcome::Repeating => DoneReason::Repeating,
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
            previous_results: None,
            warned: false,
        };
        // A panic in the run, should one ever happen, ends this run with an answer (a
        // failed outcome, its `error` event) rather than silence or a dead process.
        let run = async {
            turn.record(Role::User, instruction, TurnStatus::Ok, Vec::new())
                .await;
            turn.run().await
        };
        let outcome = match futures_util::FutureExt::catch_unwind(AssertUnwindSafe(run)).await {
            Ok(outcome) => outcome,
            Err(_) => {
                tracing::error!("an agent run panicked: it ends failed");
                RunOutcome::Failed {
                    code: ErrorCode::InternalError.into(),
                    message: "the run failed inside cmdr; the details are in its log".into(),
                }
            }
        };
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
    /// The last iteration's results as the model saw them (to notice repetition).
    previous_results: Option<String>,
    /// The model was told it repeated itself.
    warned: bool,
}

/// What streaming one reply gave.
struct Reply {
    text: String,
    calls: Vec<ToolCall>,
    end: ReplyEnd,
    /// The provider ended the reply at its length limit (`finish_reason: "length"`).
    cut_off: bool,
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
        if reply.cut_off {
            let why = "not run: the reply was cut off by the length limit (max_tokens)";
            self.record_not_run(iteration, reply.calls, why).await;
            return Some(RunOutcome::MaxTokens);
        }
        if reply.calls.is_empty() {
            self.emit(AgentEvent::IterationEnd {
                iteration,
                has_more_commands: false,
            })
            .await;
            return Some(RunOutcome::Completed);
        }
        if !may_continue {
            let why = format!(
                "not run: the iteration limit ({iteration}) was reached; nobody would read the results"
            );
            self.record_not_run(iteration, reply.calls, &why).await;
            return Some(RunOutcome::MaxIterations);
        }
        let repeated = self.run_calls(reply.calls).await;
        if self.cancel.is_cancelled() {
            return Some(RunOutcome::Stopped);
        }
        let outcome = repeated.then_some(RunOutcome::Repeating);
        self.emit(AgentEvent::IterationEnd {
            iteration,
            has_more_commands: outcome.is_none(),
        })
        .await;
        outcome
    }

    /// Reports `calls` as not run (`skipped`, with `why`) and records them as the
    /// iteration's results, so the transcript shows what the model asked for; ends the
    /// iteration (the model is not prompted again).
    async fn record_not_run(&mut self, iteration: u32, calls: Vec<ToolCall>, why: &str) {
        if !calls.is_empty() {
            let outcome = ToolOutcome::not_run(why);
            let mut runs = Vec::with_capacity(calls.len());
            for call in calls {
                self.emit_result(&call, &outcome).await;
                runs.push((call, outcome.clone()));
            }
            let tool_runs = runs.iter().map(tool_run).collect();
            self.record(
                Role::Tool,
                format_tool_message(&runs),
                TurnStatus::Ok,
                tool_runs,
            )
            .await;
        }
        self.emit(AgentEvent::IterationEnd {
            iteration,
            has_more_commands: false,
        })
        .await;
    }

    /// Streams the model's reply, announcing each command as its closing tag arrives.
    async fn stream_reply(&mut self, iteration: u32) -> Reply {
        let mut reply = Reply {
            text: String::new(),
            calls: Vec::new(),
            end: ReplyEnd::Complete,
            cut_off: false,
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
            max_tokens: self.options.max_tokens,
            stop: STOP_SEQUENCES.iter().map(|s| (*s).to_owned()).collect(),
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
        let mut stops = StopScanner::new();
        loop {
            let item = tokio::select! {
                biased;
                () = self.cancel.cancelled() => {
                    reply.end = ReplyEnd::Stopped;
                    break;
                }
                item = tokens.next() => item,
            };
            let mut ended = false;
            let text = match item {
                None => {
                    ended = true;
                    stops.finish()
                }
                Some(Err(error)) => {
                    reply.end = ReplyEnd::Failed(error);
                    stops.finish()
                }
                Some(Ok(Delta::Finish(reason))) => {
                    reply.cut_off = reason == "length";
                    continue;
                }
                Some(Ok(Delta::Text(delta))) => stops.feed(&delta),
            };
            self.take_text(iteration, &text, &mut detector, &mut reply)
                .await;
            if ended || item_ended(&reply, &stops) {
                // The reply is over (a stop sequence: the stream is dropped, which stops
                // the provider generating).
                break;
            }
        }
        if let Some(offset) = detector.finish() {
            tracing::debug!(offset, iteration, "reply ended inside an unterminated tag");
        }
        reply
    }

    /// Appends released text to the reply, shows it, and announces the commands whose
    /// closing tag it completed.
    async fn take_text(
        &mut self,
        iteration: u32,
        text: &str,
        detector: &mut ShellTagDetector,
        reply: &mut Reply,
    ) {
        if text.is_empty() {
            return;
        }
        let mut found = Vec::new();
        reply.text.push_str(text);
        detector.feed(text, &mut found);
        self.emit(AgentEvent::Text {
            content: text.to_owned(),
        })
        .await;
        for detected in found {
            let call = ToolCall::new(format!("cmd-{iteration}-{}", reply.calls.len()), detected);
            self.emit(AgentEvent::ToolCall {
                command: call.command.clone(),
                kind: call.kind,
                command_id: call.id.clone(),
                background: call.background(),
                process_id: call.target().map(str::to_owned),
            })
            .await;
            reply.calls.push(call);
        }
    }

    /// Runs the iteration's commands one after another and records their `tool` message.
    /// True when they and their results repeat the previous iteration's although the
    /// model was already told so (the run is to end).
    async fn run_calls(&mut self, calls: Vec<ToolCall>) -> bool {
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
        let mut content = format_tool_message(&runs);
        // Waiting for a running process (a build, a server starting) is progress, not
        // repetition: the iteration cap bounds it.
        let repeated = !runs.iter().all(polls_running)
            && self.previous_results.as_deref() == Some(content.as_str());
        self.previous_results = Some(content.clone());
        let give_up = repeated && self.warned;
        if repeated && !self.warned {
            self.warned = true;
            content.push_str("\n\n");
            content.push_str(REPEAT_NOTE);
        }
        self.record(Role::Tool, content, status, tool_runs).await;
        give_up
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
            scope: self.session.scope.clone(),
            read_offset: call.target().map_or(0, |id| self.session.reads.get(id)),
        };
        let outcome = run_tool(&self.agent.registry, call, &env, self.events, self.cancel).await;
        if let Some(cwd) = &outcome.final_cwd {
            self.session.cwd.clone_from(cwd);
        }
        self.remember_read(call, &outcome);
        outcome
    }

    /// Moves the model's read position of the process `call` started or read to where
    /// the output it was shown ends; forgets a process that is not found.
    fn remember_read(&mut self, call: &ToolCall, outcome: &ToolOutcome) {
        let id = outcome.process_id.as_deref().or_else(|| call.target());
        let Some(id) = id else {
            return;
        };
        if let Some(next) = outcome.next_offset {
            self.session.reads.set(id, next);
        } else if outcome.not_found() {
            self.session.reads.forget(id);
        }
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
            process_id: outcome
                .process_id
                .clone()
                .or_else(|| call.target().map(str::to_owned)),
            process_state: outcome.process_state.clone(),
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
        question: call.kind == super::detector::TagKind::Ask,
        process_id: outcome
            .process_id
            .clone()
            .or_else(|| call.target().map(str::to_owned)),
    }
}

/// A `<process-output>` of a process that is still running: polling it again with the
/// same (empty) result is waiting, not repeating.
fn polls_running((call, outcome): &(ToolCall, ToolOutcome)) -> bool {
    call.kind == super::detector::TagKind::ProcessOutput
        && outcome.status == ToolStatus::Completed
        && outcome.process_state.as_deref() == Some("running")
}

/// Whether the reply is over after the text just taken: it failed, or a stop sequence
/// ended it.
fn item_ended(reply: &Reply, stops: &StopScanner) -> bool {
    !matches!(reply.end, ReplyEnd::Complete) || stops.stopped()
}

fn tool_status_name(status: ToolStatus) -> &'static str {
    match status {
        ToolStatus::Completed => "completed",
        ToolStatus::Failed => "failed",
        ToolStatus::Stopped => "stopped",
        ToolStatus::Skipped => "skipped",
    }
}
