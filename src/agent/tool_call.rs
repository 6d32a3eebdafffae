//! Running one `<shell>` command of the loop through the registry as `BASH_EXEC`,
//! forwarding its live output as `tool-output` events.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cmdr_executors::{BashExecCommand, Command, ExecutionStatus, OutputResult, Registry};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::events::{AgentEvent, ToolStatus};
use super::output::{OutputCapture, TOOL_RESULT_LIMIT};

/// One detected command, with its loop id (`cmd-{iteration}-{index}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// `cmd-{iteration}-{index}`.
    pub id: String,
    /// The command, trimmed.
    pub command: String,
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
}

impl ToolOutcome {
    /// The outcome of a command that never started.
    pub fn skipped() -> Self {
        Self {
            status: ToolStatus::Skipped,
            output: OutputCapture::new(),
            note: Some("not run: the run was stopped first".to_owned()),
            exit_code: None,
            duration_ms: None,
            final_cwd: None,
        }
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
}

/// Runs `call` to its end. Firing `cancel` kills the command's process tree; the
/// outcome is then `Stopped`.
pub async fn run_tool(
    registry: &Registry,
    call: &ToolCall,
    env: &ToolEnv,
    events: &mpsc::Sender<AgentEvent>,
    cancel: &CancellationToken,
) -> ToolOutcome {
    let command = Command::BashExec(BashExecCommand {
        command_id: format!("{}/{}", env.id_prefix, call.id),
        description: None,
        command: call.command.clone(),
        working_dir: Some(env.cwd.clone()),
        timeout_ms: env
            .timeout
            .map(|t| t.as_millis().try_into().unwrap_or(u64::MAX)),
        env: None,
        base_env: env.shell_env.clone(),
    });
    let mut stream = match registry.execute(command).await {
        Ok(stream) => stream,
        Err(e) => return failed_to_start(e.to_string()),
    };
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
            return failed_to_start("the command ended without a result".to_owned());
        };
        if message.status == ExecutionStatus::Running {
            forward_chunk(&mut output, &call.id, message.result_data, events).await;
            continue;
        }
        return finished(output, message, stopped);
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

fn finished(mut output: OutputCapture, terminal: OutputResult, stopped: bool) -> ToolOutcome {
    output.push(&terminal.result_data);
    let status = match terminal.status {
        ExecutionStatus::Succeeded => ToolStatus::Completed,
        _ if stopped => ToolStatus::Stopped,
        _ => ToolStatus::Failed,
    };
    let note = match status {
        ToolStatus::Completed => None,
        ToolStatus::Stopped => Some("stopped: the run was aborted".to_owned()),
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
    }
}

/// The `tool` message of one iteration: `$ <command>\n<result>` blocks joined by a
/// blank line (a result's own final newline is dropped, so exactly one blank line
/// separates blocks), each result at most [`TOOL_RESULT_LIMIT`] characters of output.
pub fn format_tool_message(runs: &[(ToolCall, ToolOutcome)]) -> String {
    runs.iter()
        .map(|(call, outcome)| {
            let result = outcome.model_text();
            let result = result.strip_suffix('\n').unwrap_or(&result);
            format!("$ {}\n{result}", call.command)
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}
