//! Following an agent run for an MCP client: the final answer is collected from the
//! run's events, and — when the request carries a `progressToken` — the client gets a
//! progress notification for each event of note (a command step begins, a shell command
//! starts or ends, an iteration ends) and a heartbeat whenever nothing was sent for
//! [`HEARTBEAT`], so clients with 60-second request timeouts that reset on progress keep
//! waiting for long runs.

use std::time::Duration;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::agent::AgentEvent;

/// The longest silence before a heartbeat progress notification.
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// How long one notification may take to send before progress reporting gives up (the
/// client is gone or not reading); the run goes on regardless.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest command shown in a progress message.
const MAX_COMMAND_CHARS: usize = 120;

/// Where progress goes: the requesting peer and its token, when it asked for progress.
pub struct Progress {
    target: Option<(Peer<RoleServer>, ProgressToken)>,
    sent: u32,
}

impl Progress {
    /// Progress for the request of `context` (silent when it has no `progressToken`).
    pub fn new(context: &RequestContext<RoleServer>) -> Self {
        let target = context
            .meta
            .get_progress_token()
            .map(|token| (context.peer.clone(), token));
        Self { target, sent: 0 }
    }

    /// Reads the run's events until the run closes the channel, reporting progress on
    /// the way; returns the final assistant text.
    pub async fn follow(mut self, mut events: mpsc::Receiver<AgentEvent>) -> String {
        let mut answer = Answer::default();
        let mut quiet_since = Instant::now();
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                () = tokio::time::sleep_until(quiet_since + HEARTBEAT), if self.target.is_some() => {
                    let secs = quiet_since.elapsed().as_secs();
                    self.send(format!("still running ({secs} s without news)")).await;
                    quiet_since = Instant::now();
                    continue;
                }
            };
            let Some(event) = event else { break };
            answer.observe(&event);
            if let Some(message) = describe(&event) {
                self.send(message).await;
                quiet_since = Instant::now();
            }
        }
        answer.finish()
    }

    /// Sends one notification (silent without a `progressToken`); gives up on progress for
    /// good when it fails.
    pub async fn send(&mut self, message: String) {
        let Some((peer, token)) = &self.target else {
            return;
        };
        self.sent += 1;
        let param = ProgressNotificationParam::new(token.clone(), f64::from(self.sent))
            .with_message(message);
        match tokio::time::timeout(SEND_TIMEOUT, peer.notify_progress(param)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "progress notification failed; no more progress");
                self.target = None;
            }
            Err(_) => {
                tracing::debug!("progress notification timed out; no more progress");
                self.target = None;
            }
        }
    }
}

/// The progress message for an event worth one; `None` for the others (text deltas,
/// command output chunks, the final event).
fn describe(event: &AgentEvent) -> Option<String> {
    match event {
        AgentEvent::Conversation { conversation_id } => {
            Some(format!("started conversation {conversation_id}"))
        }
        AgentEvent::CommandStep {
            name,
            step_index,
            total_steps,
            ..
        } => Some(format!("{name}: step {step_index}/{total_steps}")),
        AgentEvent::ToolStart { command, .. } => Some(format!("running: {}", short(command))),
        AgentEvent::ToolResult {
            command, status, ..
        } => {
            let status = serde_json::to_value(status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            Some(format!("{status}: {}", short(command)))
        }
        AgentEvent::IterationEnd {
            iteration,
            has_more_commands,
        } => Some(if *has_more_commands {
            format!("iteration {iteration} done; asking the model again")
        } else {
            format!("iteration {iteration} done")
        }),
        AgentEvent::ToolCall { .. }
        | AgentEvent::Text { .. }
        | AgentEvent::ToolOutput { .. }
        | AgentEvent::Done { .. }
        | AgentEvent::Error { .. } => None,
    }
}

/// The first line of `command`, at most [`MAX_COMMAND_CHARS`] characters.
fn short(command: &str) -> String {
    let line = command.lines().next().unwrap_or_default();
    let mut out: String = line.chars().take(MAX_COMMAND_CHARS).collect();
    if out.len() < command.len() {
        out.push('…');
    }
    out
}

/// The final assistant text: the model's reply of the last iteration (of the last step,
/// for an agent command) — what it said once it ran no more commands.
#[derive(Debug, Default)]
struct Answer {
    /// Text of the iteration in progress.
    current: String,
    /// Text of the last finished iteration.
    last: String,
}

impl Answer {
    fn observe(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::Text { content } => self.current.push_str(content),
            AgentEvent::IterationEnd { .. } => self.last = std::mem::take(&mut self.current),
            AgentEvent::CommandStep { .. } => {
                self.current.clear();
                self.last.clear();
            }
            _ => {}
        }
    }

    fn finish(self) -> String {
        if self.current.is_empty() {
            self.last
        } else {
            self.current
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> AgentEvent {
        AgentEvent::Text {
            content: s.to_owned(),
        }
    }

    fn end(iteration: u32) -> AgentEvent {
        AgentEvent::IterationEnd {
            iteration,
            has_more_commands: iteration == 1,
        }
    }

    #[test]
    fn the_answer_is_the_last_iterations_text() {
        let mut answer = Answer::default();
        for event in [
            text("<shell>ls</shell>"),
            end(1),
            text("Fi"),
            text("ne."),
            end(2),
        ] {
            answer.observe(&event);
        }
        assert_eq!(answer.finish(), "Fine.");
    }

    #[test]
    fn a_stopped_iteration_keeps_its_partial_text() {
        let mut answer = Answer::default();
        for event in [text("one"), end(1), text("partial")] {
            answer.observe(&event);
        }
        assert_eq!(answer.finish(), "partial");
    }

    #[test]
    fn long_commands_are_shortened_to_their_first_line() {
        assert_eq!(short("ls -la"), "ls -la");
        assert_eq!(short("echo a\necho b"), "echo a…");
        assert_eq!(
            short(&"x".repeat(200)).chars().count(),
            MAX_COMMAND_CHARS + 1
        );
    }
}
