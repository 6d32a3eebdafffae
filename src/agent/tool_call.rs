//! Running one command of the loop through the registry — a `<shell>` command as
//! `BASH_EXEC` (with `background`: a process that outlives it), an `<ask>` question as
//! `REQUEST_USER_INPUT` (answered through the run's own input broker: the web UI's card,
//! the chat's terminal, MCP), the process tags as `PROCESS_OUTPUT`, `PROCESS_INPUT` and
//! `PROCESS_KILL` — forwarding live output as `tool-output` events.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cmdr_executors::{
    BashExecCommand, Command, ExecutionStatus, OutputResult, ProcessInputCommand,
    ProcessKillCommand, ProcessOutputCommand, ReadyCheck, Registry, RequestUserInputCommand, Scope,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::detector::{Attribute, DetectedCommand, TagKind};
use super::events::{AgentEvent, ToolStatus};
use super::output::{OutputCapture, TOOL_RESULT_LIMIT};
use super::tag_request::TagRequest;

/// One detected command, with its loop id (`cmd-{iteration}-{index}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// `cmd-{iteration}-{index}`.
    pub id: String,
    /// What is shown: the command (or question), trimmed; for a process tag, the tag
    /// (`<process-output id="p1"/>`).
    pub command: String,
    /// A shell command, a question for the person, or a process tag.
    pub kind: TagKind,
    /// What it asks for, or why the loop cannot tell (told to the model; nothing runs).
    pub request: Result<TagRequest, String>,
}

impl ToolCall {
    /// The call `id` for a tag found in the model's reply.
    pub fn new(id: String, detected: DetectedCommand) -> Self {
        let request = TagRequest::parse(detected.kind, &detected.attributes, &detected.command);
        let command = match detected.kind {
            TagKind::Shell | TagKind::Ask => detected.command,
            kind => render_tag(kind, &detected.attributes, &detected.command),
        };
        Self {
            id,
            command,
            kind: detected.kind,
            request,
        }
    }

    /// A `<shell background>` start.
    pub fn background(&self) -> bool {
        matches!(self.request, Ok(TagRequest::Background { .. }))
    }

    /// The process a process tag is about.
    pub fn target(&self) -> Option<&str> {
        self.request.as_ref().ok().and_then(TagRequest::target)
    }
}

/// A tag as the model wrote it, normalised: `<name a="v" b>content</name>`, or `<name
/// …/>` without content.
fn render_tag(kind: TagKind, attributes: &[Attribute], content: &str) -> String {
    let mut tag = format!("<{}", kind.name());
    for attribute in attributes {
        tag.push(' ');
        tag.push_str(&attribute.name);
        if let Some(value) = &attribute.value {
            let quote = if value.contains('"') { '\'' } else { '"' };
            tag.push_str(&format!("={quote}{value}{quote}"));
        }
    }
    if content.is_empty() {
        tag.push_str("/>");
    } else {
        tag.push_str(&format!(">{content}{}", kind.close_tag()));
    }
    tag
}

/// How one command ended.
#[derive(Debug, Clone)]
pub struct ToolOutcome {
    /// Completed, failed, stopped or skipped.
    pub status: ToolStatus,
    /// Its output (head and tail).
    pub output: OutputCapture,
    /// Why it failed, for people and the model (`exit status 2`, `timed out after 5s` …).
    pub note: Option<String>,
    /// The shell's exit status.
    pub exit_code: Option<i32>,
    /// How long it ran.
    pub duration_ms: Option<u64>,
    /// The shell's working directory when it exited.
    pub final_cwd: Option<PathBuf>,
    /// The background process the command started or was about.
    pub process_id: Option<String>,
    /// That process's state afterwards: `running` or `exited`.
    pub process_state: Option<String>,
    /// Where the output shown ends in that process's log (the model's new read position).
    pub next_offset: Option<u64>,
    /// The registry's error code when it failed (`PROCESS_NOT_FOUND` …).
    pub error_code: Option<String>,
}

impl ToolOutcome {
    /// The outcome of a command that never started.
    pub fn skipped() -> Self {
        Self::not_run("not run: the run was stopped first")
    }

    /// The outcome of a command the loop did not run, and why (`not run: …`).
    pub fn not_run(why: &str) -> Self {
        Self {
            status: ToolStatus::Skipped,
            output: OutputCapture::new(),
            note: Some(why.to_owned()),
            exit_code: None,
            duration_ms: None,
            final_cwd: None,
            process_id: None,
            process_state: None,
            next_offset: None,
            error_code: None,
        }
    }

    /// It failed with `PROCESS_NOT_FOUND` (the process is unknown, or gone).
    pub fn not_found(&self) -> bool {
        self.error_code.as_deref() == Some("PROCESS_NOT_FOUND")
    }

    /// The result as the `tool-result` event shows it (bounded, with the note).
    pub fn event_text(&self) -> String {
        self.with_note(self.output.text())
    }

    /// The result as the model sees it: at most [`TOOL_RESULT_LIMIT`] characters of
    /// output (head and tail), then the note.
    pub fn model_text(&self) -> String {
        self.with_note(self.output.truncated(TOOL_RESULT_LIMIT))
    }

    fn with_note(&self, mut text: String) -> String {
        match &self.note {
            Some(note) => {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&format!("[{note}]"));
            }
            None if text.is_empty() => text.push_str("(no output)"),
            None => {}
        }
        text
    }
}

/// Where and how the loop's commands run.
#[derive(Debug, Clone)]
pub struct ToolEnv {
    /// Prefix making registry ids unique across runs (`{prefix}/cmd-1-0`).
    pub id_prefix: String,
    /// The working directory the command starts in.
    pub cwd: PathBuf,
    /// Per-command deadline; the registry's default (5 minutes) when `None`.
    pub timeout: Option<Duration>,
    /// The environment the command's shell starts with; the registry's when `None`.
    pub shell_env: Option<Arc<[(String, String)]>>,
    /// The scope the command runs in (the conversation's).
    pub scope: Scope,
    /// Where the model stopped reading the process a process tag is about: a
    /// `<process-output>` reads from here, a `<process-input>` shows the output from here
    /// after writing (so the model sees what it had not read yet, then the reply).
    pub read_offset: u64,
}

/// Runs `call` to its end, in `env.scope`. Firing `cancel` kills the command's process
/// tree (a background process being started included); the outcome is then `Stopped`.
pub async fn run_tool(
    registry: &Registry,
    call: &ToolCall,
    env: &ToolEnv,
    events: &mpsc::Sender<AgentEvent>,
    cancel: &CancellationToken,
) -> ToolOutcome {
    let request = match &call.request {
        Ok(request) => request,
        Err(why) => return failed_to_start(format!("not run: {why}")),
    };
    let command = to_command(request, format!("{}/{}", env.id_prefix, call.id), env);
    let run = match run_command(registry, &env.scope, command, &call.id, events, cancel).await {
        Ok(run) => run,
        Err(reason) => return failed_to_start(reason),
    };
    let (mut output, mut terminal, stopped) = run;
    if let TagRequest::Input { process_id, .. } = request {
        if terminal.status == ExecutionStatus::Succeeded && !stopped {
            let read = catch_up(registry, env, process_id, &call.id, cancel).await;
            if let Some((caught_up, read)) = read {
                output = caught_up;
                terminal.result_data = read.result_data;
                terminal.next_offset = read.next_offset;
                terminal.process_state = read.process_state;
                terminal.exit_code = read.exit_code;
            }
        }
    }
    finished(request, output, terminal, stopped)
}

/// A command's streamed output, its terminal result, and whether it was cancelled.
type Ran = (OutputCapture, OutputResult, bool);

/// Runs `command` in `scope` to its terminal result, forwarding its output chunks as
/// `tool-output` events of `call_id`.
async fn run_command(
    registry: &Registry,
    scope: &Scope,
    command: Command,
    call_id: &str,
    events: &mpsc::Sender<AgentEvent>,
    cancel: &CancellationToken,
) -> Result<Ran, String> {
    let mut stream = registry
        .execute_in(scope.clone(), command)
        .await
        .map_err(|e| e.to_string())?;
    let mut output = OutputCapture::new();
    let mut stopped = false;
    loop {
        let message = tokio::select! {
            message = stream.next() => message,
            () = cancel.cancelled(), if !stopped => {
                stopped = true;
                stream.cancel();
                continue;
            }
        };
        let Some(message) = message else {
            return Err("the command ended without a result".to_owned());
        };
        if message.status == ExecutionStatus::Running {
            forward_chunk(&mut output, call_id, message.result_data, events).await;
            continue;
        }
        return Ok((output, message, stopped));
    }
}

/// After the model's input: the output from where the model stopped reading (what it had
/// not read yet, then the reply), so no byte printed before the input is skipped for it.
/// `None` when that read fails (the input's own reply stands).
async fn catch_up(
    registry: &Registry,
    env: &ToolEnv,
    process_id: &str,
    call_id: &str,
    cancel: &CancellationToken,
) -> Option<(OutputCapture, OutputResult)> {
    let read = Command::ProcessOutput(ProcessOutputCommand {
        command_id: format!("{}/{call_id}/read", env.id_prefix),
        description: None,
        process_id: process_id.to_owned(),
        offset: Some(env.read_offset),
        max_bytes: None,
        wait_ms: None,
        timeout_ms: None,
    });
    let (quiet, _) = mpsc::channel(1);
    match run_command(registry, &env.scope, read, call_id, &quiet, cancel).await {
        Ok((output, terminal, false)) if terminal.status == ExecutionStatus::Succeeded => {
            Some((output, terminal))
        }
        _ => None,
    }
}

/// The registry command a tag asks for.
fn to_command(request: &TagRequest, command_id: String, env: &ToolEnv) -> Command {
    let timeout_ms = env
        .timeout
        .map(|t| t.as_millis().try_into().unwrap_or(u64::MAX));
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let bash = |command: &str| BashExecCommand {
        command_id: command_id.clone(),
        description: None,
        command: command.to_owned(),
        working_dir: Some(env.cwd.clone()),
        timeout_ms,
        env: None,
        base_env: env.shell_env.clone(),
        background: false,
        yield_ms: None,
        ready: None,
        session: None,
        ..BashExecCommand::default()
    };
    match request {
        TagRequest::Shell { command } => Command::BashExec(bash(command)),
        TagRequest::Background {
            command,
            ready_text,
            port,
            url,
            timeout,
        } => {
            let waits = ready_text.is_some() || port.is_some() || url.is_some();
            let ready = waits.then(|| ReadyCheck {
                output: ready_text.as_deref().map(regex::escape),
                port: *port,
                http: url.clone(),
                timeout_ms: timeout.map(ms),
                all: false,
            });
            Command::BashExec(BashExecCommand {
                background: true,
                ready,
                ..bash(command)
            })
        }
        TagRequest::Ask { question } => Command::RequestUserInput(RequestUserInputCommand {
            command_id,
            description: Some("a question from the agent".to_owned()),
            prompt: question.clone(),
            timeout_ms,
        }),
        TagRequest::Output { process_id, wait } => Command::ProcessOutput(ProcessOutputCommand {
            command_id,
            description: None,
            process_id: process_id.clone(),
            offset: Some(env.read_offset),
            max_bytes: None,
            wait_ms: Some(ms(*wait)),
            timeout_ms,
        }),
        TagRequest::Input {
            process_id,
            input,
            close_stdin,
            wait,
        } => Command::ProcessInput(ProcessInputCommand {
            command_id,
            description: None,
            process_id: process_id.clone(),
            input: input.clone(),
            close_stdin: *close_stdin,
            yield_ms: wait.map(ms),
            timeout_ms,
            ..ProcessInputCommand::default()
        }),
        TagRequest::Kill { process_id, signal } => Command::ProcessKill(ProcessKillCommand {
            command_id,
            description: None,
            process_id: process_id.clone(),
            signal: signal.clone(),
            grace_ms: None,
            timeout_ms,
        }),
    }
}

async fn forward_chunk(
    output: &mut OutputCapture,
    id: &str,
    chunk: String,
    events: &mpsc::Sender<AgentEvent>,
) {
    if chunk.is_empty() {
        return;
    }
    output.push(&chunk);
    let event = AgentEvent::ToolOutput {
        command_id: id.to_owned(),
        content: chunk,
    };
    // A client that went away is the transport's business (it cancels the run).
    let _ = events.send(event).await;
}

fn finished(
    request: &TagRequest,
    mut output: OutputCapture,
    terminal: OutputResult,
    stopped: bool,
) -> ToolOutcome {
    output.push(&terminal.result_data);
    let status = match terminal.status {
        ExecutionStatus::Succeeded => ToolStatus::Completed,
        _ if stopped => ToolStatus::Stopped,
        _ => ToolStatus::Failed,
    };
    let is_process = !matches!(request, TagRequest::Shell { .. } | TagRequest::Ask { .. });
    let note = match status {
        ToolStatus::Stopped => Some("stopped: the run was aborted".to_owned()),
        _ if is_process => Some(process_note(request, &terminal)),
        ToolStatus::Completed => None,
        _ if terminal.error.is_empty() => Some(terminal.message),
        _ => Some(terminal.error),
    };
    ToolOutcome {
        status,
        output,
        note,
        exit_code: terminal.exit_code,
        duration_ms: terminal.duration_ms,
        final_cwd: terminal.final_cwd.map(PathBuf::from),
        process_id: terminal.process_id,
        process_state: terminal.process_state,
        next_offset: terminal.next_offset,
        error_code: terminal.error_code,
    }
}

/// The note after a process command's output: the process and its state (`process p1:
/// running`, `… exited with code 1`), after the error code and message when it failed.
fn process_note(request: &TagRequest, terminal: &OutputResult) -> String {
    let state = terminal.process_id.as_deref().map(|id| {
        let state = match (terminal.process_state.as_deref(), terminal.exit_code) {
            (Some("exited"), Some(code)) => format!("exited with code {code}"),
            (Some(state), _) => state.to_owned(),
            (None, _) => "unknown".to_owned(),
        };
        let what = if matches!(request, TagRequest::Background { .. }) {
            "background process"
        } else {
            "process"
        };
        format!("{what} {id}: {state}")
    });
    let failure = (terminal.status != ExecutionStatus::Succeeded).then(|| {
        let code = terminal.error_code.as_deref().unwrap_or("FAILED");
        let why = if terminal.error.is_empty() {
            &terminal.message
        } else {
            &terminal.error
        };
        format!("{code}: {why}")
    });
    let killed =
        matches!(request, TagRequest::Kill { .. }) && terminal.status == ExecutionStatus::Succeeded;
    let state = if killed {
        Some(terminal.message.trim_end_matches('.').to_owned())
    } else {
        state
    };
    match (failure, state) {
        (Some(failure), Some(state)) => format!("{failure}; {state}"),
        (Some(one), None) | (None, Some(one)) => one,
        (None, None) => terminal.message.clone(),
    }
}

fn failed_to_start(reason: String) -> ToolOutcome {
    ToolOutcome {
        status: ToolStatus::Failed,
        output: OutputCapture::new(),
        note: Some(reason),
        exit_code: None,
        duration_ms: None,
        final_cwd: None,
        process_id: None,
        process_state: None,
        next_offset: None,
        error_code: None,
    }
}

/// The `tool` message of one iteration: `$ <command>\n<result>` blocks (`? <question>\n
/// <answer>` for questions, `<tag>\n<result>` for process tags) joined by a blank line (a result's own final newline is
/// dropped, so exactly one blank line separates blocks), each result at most
/// [`TOOL_RESULT_LIMIT`] characters of output.
pub fn format_tool_message(runs: &[(ToolCall, ToolOutcome)]) -> String {
    runs.iter()
        .map(|(call, outcome)| {
            let result = outcome.model_text();
            let result = result.strip_suffix('\n').unwrap_or(&result);
            match call.kind {
                TagKind::Shell => format!("$ {}\n{result}", call.command),
                TagKind::Ask => format!("? {}\n{result}", call.command),
                _ => format!("{}\n{result}", call.command),
            }
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}
