//! Closing the runs a crashed process left open, when a store opens the database.
//!
//! Turns are appended as they complete, so a process killed in the middle of a run
//! (SIGKILL, OOM, power loss) leaves its conversation ending with the user's turn, an
//! assistant turn whose `<shell>` commands never got their results, or a `tool` turn
//! the model never answered — and a run marker (`runs`) whose owner is gone. For each
//! such marker, in one transaction, the run is closed the way an abort would have
//! closed it, then the marker is removed:
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
//! processes (another `cmdr` on the same file) are left alone.

use rusqlite::Connection;

use crate::agent::{
    format_tool_message, Message, OutputCapture, Role, ShellTagDetector, ToolCall, ToolOutcome,
    ToolRun, ToolStatus, TurnStatus,
};

use super::queries::{append_turn_in, turns_in, write_transaction};
use super::{runs, StoreError, StoredTurn};

/// The note of every command of an interrupted run.
pub const INTERRUPTED_NOTE: &str =
    "interrupted: cmdr stopped while this run was in progress; the result is unknown";

/// Closes every run whose owner is gone; returns their conversations with those owners.
pub(super) fn close_interrupted_runs(
    conn: &mut Connection,
) -> Result<Vec<(String, String)>, StoreError> {
    let mut closed = Vec::new();
    for (conversation_id, run_owner) in runs::all(conn)? {
        if crate::owner::is_alive(&run_owner) {
            continue;
        }
        if close(conn, &conversation_id, &run_owner)? {
            closed.push((conversation_id, run_owner));
        }
    }
    Ok(closed)
}

/// Closes one run, unless another process did it first; whether this one did.
fn close(
    conn: &mut Connection,
    conversation_id: &str,
    run_owner: &str,
) -> Result<bool, StoreError> {
    let tx = write_transaction(conn)?;
    let removed = tx
        .prepare_cached("DELETE FROM runs WHERE conversation_id = ?1 AND owner = ?2")?
        .execute([conversation_id, run_owner])?;
    if removed == 0 {
        return Ok(false);
    }
    let turns = turns_in(&tx, conversation_id)?;
    if let Some(message) = closing_message(&turns) {
        append_turn_in(&tx, conversation_id, &message)?;
    }
    tx.commit()?;
    tracing::warn!(conversation_id, "closed a run interrupted by a crash");
    Ok(true)
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
                    let call = ToolCall {
                        id: format!("cmd-{iteration}-{index}"),
                        command: detected.command,
                    };
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
        output: OutputCapture::new(),
        note: Some(INTERRUPTED_NOTE.to_owned()),
        exit_code: None,
        duration_ms: None,
        final_cwd: None,
    }
}

fn stopped_run(call: &ToolCall) -> ToolRun {
    ToolRun {
        command_id: call.id.clone(),
        command: call.command.clone(),
        status: "stopped".to_owned(),
        exit_code: None,
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
