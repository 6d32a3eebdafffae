//! Start-up recovery: closing the runs of `cmdr` processes that died in the middle of one,
//! and killing what those processes left running. Called once by each front door that runs
//! agents with persistence (`cmdr serve`, `cmdr mcp`, `cmdr commands run`, `cmdr chat`),
//! after opening the store and before serving; never by a store opening a database
//! (listing conversations must not touch any process).
//!
//! Turns are appended as they complete, so a process killed in the middle of a run
//! (SIGKILL, OOM, power loss) leaves its conversation ending with the user's turn, an
//! assistant turn whose `<shell>` commands never got their results, or a `tool` turn
//! the model never answered, and a run marker whose owner is gone. For each such marker
//! the store closes the run in one transaction, the way an abort would have closed it:
//!
//! - after an assistant turn with commands: a `tool` turn, status `stopped`, one
//!   `stopped` tool run per command, each result `[interrupted: …]` (what ran and how it
//!   ended is unknown);
//! - after a user or `tool` turn (the model was answering): an empty assistant turn,
//!   status `stopped`;
//! - after a turn that already ends the run (stopped, failed, or a final answer without
//!   commands): nothing.
//!
//! The closing turn carries the agent-command tag of the turn before it. Markers of live
//! processes (another `cmdr` on the same file) are left alone. Then the shells the dead
//! owners started (marked by `crate::orphans`) are killed.

use crate::agent::{
    format_tool_message, Message, Role, ShellTagDetector, ToolCall, ToolOutcome, ToolRun,
    ToolStatus, TurnStatus,
};
use crate::store::{RunMarker, Store, StoreError, StoredTurn};

/// The note of every command of an interrupted run.
pub const INTERRUPTED_NOTE: &str =
    "interrupted: cmdr stopped while this run was in progress; the result is unknown";

/// What [`recover`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The runs it closed.
    pub closed: Vec<RunMarker>,
    /// The processes of their dead owners it killed.
    pub killed: Vec<u32>,
}

/// Closes every run whose owner is gone, then kills the processes those owners left.
pub async fn recover(store: &dyn Store) -> Result<Recovered, StoreError> {
    let mut recovered = Recovered::default();
    for marker in store.run_markers().await? {
        if crate::owner::is_alive(&marker.owner) {
            continue;
        }
        if store.close_run(&marker, Box::new(closing_message)).await? {
            tracing::warn!(
                conversation_id = marker.conversation_id,
                "closed a run interrupted by a crash"
            );
            recovered.closed.push(marker);
        }
    }
    if recovered.closed.is_empty() {
        return Ok(recovered);
    }
    let mut owners: Vec<String> = recovered.closed.iter().map(|m| m.owner.clone()).collect();
    owners.sort();
    owners.dedup();
    recovered.killed = tokio::task::spawn_blocking(move || crate::orphans::reap(&owners))
        .await
        .unwrap_or_default();
    Ok(recovered)
}

/// [`recover`] for a front door: a failure is logged, never fatal (the store works
/// without it; the runs stay open for the next start).
pub async fn recover_or_log(store: &dyn Store) {
    if let Err(e) = recover(store).await {
        tracing::error!("closing interrupted runs: {e}");
    }
}

/// The turn that closes a run whose conversation has these turns, if one is needed.
fn closing_message(turns: &[StoredTurn]) -> Option<Message> {
    let last = turns.last()?;
    if last.status != TurnStatus::Ok {
        return None;
    }
    let mut message = match last.role {
        Role::User | Role::Tool => Message {
            status: TurnStatus::Stopped,
            ..Message::new(Role::Assistant, "")
        },
        Role::Assistant => {
            let commands = ShellTagDetector::detect_all(&last.content);
            if commands.is_empty() {
                return None;
            }
            let iteration = iteration_of(turns);
            let runs: Vec<(ToolCall, ToolOutcome)> = commands
                .into_iter()
                .enumerate()
                .map(|(index, detected)| {
                    let call = ToolCall::new(format!("cmd-{iteration}-{index}"), detected);
                    (call, interrupted())
                })
                .collect();
            Message {
                role: Role::Tool,
                content: format_tool_message(&runs),
                status: TurnStatus::Stopped,
                tool_runs: runs.iter().map(|(call, _)| stopped_run(call)).collect(),
                command: None,
            }
        }
    };
    message.command.clone_from(&last.command);
    Some(message)
}

/// The loop iteration of the last assistant turn: assistant turns since the last user turn.
fn iteration_of(turns: &[StoredTurn]) -> usize {
    turns
        .iter()
        .rev()
        .take_while(|turn| turn.role != Role::User)
        .filter(|turn| turn.role == Role::Assistant)
        .count()
}

fn interrupted() -> ToolOutcome {
    ToolOutcome {
        status: ToolStatus::Stopped,
        note: Some(INTERRUPTED_NOTE.to_owned()),
        ..ToolOutcome::not_run("")
    }
}

fn stopped_run(call: &ToolCall) -> ToolRun {
    ToolRun {
        command_id: call.id.clone(),
        command: call.command.clone(),
        status: "stopped".to_owned(),
        exit_code: None,
        question: call.kind == crate::agent::TagKind::Ask,
        process_id: call.target().map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(role: Role, content: &str, status: TurnStatus) -> StoredTurn {
        StoredTurn {
            id: String::new(),
            conversation_id: "c".to_owned(),
            role,
            content: content.to_owned(),
            status,
            command: None,
            tool_runs: Vec::new(),
            created_at: String::new(),
            updated_at: String::new(),
        }
    }

    #[test]
    fn unanswered_commands_get_a_stopped_tool_turn() {
        let turns = [
            turn(Role::User, "go", TurnStatus::Ok),
            turn(Role::Assistant, "<shell>ls</shell>", TurnStatus::Ok),
            turn(Role::Tool, "$ ls\n(no output)", TurnStatus::Ok),
            turn(
                Role::Assistant,
                "<shell>sleep 30</shell> <shell>pwd</shell>",
                TurnStatus::Ok,
            ),
        ];
        let Some(message) = closing_message(&turns) else {
            panic!("a closing turn");
        };
        assert_eq!(
            (message.role, message.status),
            (Role::Tool, TurnStatus::Stopped)
        );
        let ids: Vec<_> = message
            .tool_runs
            .iter()
            .map(|r| r.command_id.as_str())
            .collect();
        assert_eq!(ids, ["cmd-2-0", "cmd-2-1"]);
        assert!(message.tool_runs.iter().all(|r| r.status == "stopped"));
        assert_eq!(
            message.content,
            format!("$ sleep 30\n[{INTERRUPTED_NOTE}]\n\n$ pwd\n[{INTERRUPTED_NOTE}]")
        );
    }

    #[test]
    fn an_unanswered_prompt_gets_an_empty_stopped_reply() {
        for last in [Role::User, Role::Tool] {
            let turns = [turn(last, "x", TurnStatus::Ok)];
            let message = closing_message(&turns);
            assert_eq!(
                message.map(|m| (m.role, m.content, m.status)),
                Some((Role::Assistant, String::new(), TurnStatus::Stopped))
            );
        }
    }

    #[test]
    fn a_run_that_had_ended_needs_nothing() {
        assert!(closing_message(&[]).is_none());
        let final_answer = [turn(Role::Assistant, "all done", TurnStatus::Ok)];
        assert!(closing_message(&final_answer).is_none());
        let stopped = [turn(Role::Tool, "x", TurnStatus::Stopped)];
        assert!(closing_message(&stopped).is_none());
    }
}
