//! The SQL of each store operation: synchronous functions on the store thread's
//! connection. Writes are one `BEGIN IMMEDIATE` transaction each; multi-statement reads
//! one read transaction (a consistent snapshot).

use std::time::SystemTime;

use rusqlite::{params, Connection, OptionalExtension, Row, Transaction, TransactionBehavior};

use super::{title_from, Conversation, StoreError, StoredTurn};
use crate::turn::{CommandMeta, Message, Role, ToolRun, TurnStatus};

/// The columns of a [`Conversation`], in [`conversation_from_row`] order.
const CONVERSATION_COLUMNS: &str = "id, agent_name, title, cwd, archived, created_at, updated_at";

/// The columns of a [`StoredTurn`], in [`TurnRow`] order.
const TURN_COLUMNS: &str = "id, conversation_id, role, content, status, command_name, \
     command_step_index, command_total_steps, tool_runs, created_at, updated_at";

/// Creates an empty conversation; `ConversationExists` if the id is taken.
pub(super) fn create_conversation(
    conn: &mut Connection,
    id: &str,
    agent_name: &str,
    cwd: Option<&str>,
) -> Result<Conversation, StoreError> {
    let now = now();
    let tx = write_transaction(conn)?;
    let inserted = tx.execute(
        "INSERT INTO conversations
             (id, agent_name, title, cwd, archived, created_at, updated_at, activity)
         VALUES (?1, ?2, '', ?3, 0, ?4, ?4,
                 (SELECT COALESCE(MAX(activity), 0) + 1 FROM conversations))
         ON CONFLICT (id) DO NOTHING",
        params![id, agent_name, cwd, now],
    )?;
    if inserted == 0 {
        return Err(StoreError::ConversationExists(id.to_owned()));
    }
    tx.commit()?;
    Ok(Conversation {
        id: id.to_owned(),
        agent_name: agent_name.to_owned(),
        title: String::new(),
        cwd: cwd.map(str::to_owned),
        archived: false,
        created_at: now.clone(),
        updated_at: now,
    })
}

/// The conversation with this id, if any.
pub(super) fn conversation(
    conn: &mut Connection,
    id: &str,
) -> Result<Option<Conversation>, StoreError> {
    let sql = format!("SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?1");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([id], conversation_from_row)
        .optional()?)
}

/// Every conversation (of one agent, when given), most recent activity first.
pub(super) fn conversations(
    conn: &mut Connection,
    agent_name: Option<&str>,
) -> Result<Vec<Conversation>, StoreError> {
    let rows = match agent_name {
        Some(agent) => {
            let sql = format!(
                "SELECT {CONVERSATION_COLUMNS} FROM conversations
                 WHERE agent_name = ?1 ORDER BY activity DESC"
            );
            let mut statement = conn.prepare_cached(&sql)?;
            let rows = statement.query_map([agent], conversation_from_row)?;
            rows.collect::<Result<Vec<_>, _>>()?
        }
        None => {
            let sql =
                format!("SELECT {CONVERSATION_COLUMNS} FROM conversations ORDER BY activity DESC");
            let mut statement = conn.prepare_cached(&sql)?;
            let rows = statement.query_map([], conversation_from_row)?;
            rows.collect::<Result<Vec<_>, _>>()?
        }
    };
    Ok(rows)
}

/// Appends a turn and updates its conversation (activity, `updated_at`, first title) in
/// one transaction.
pub(super) fn append_turn(
    conn: &mut Connection,
    conversation_id: &str,
    message: &Message,
) -> Result<StoredTurn, StoreError> {
    let tx = write_transaction(conn)?;
    let turn = append_turn_in(&tx, conversation_id, message)?;
    tx.commit()?;
    Ok(turn)
}

/// [`append_turn`] inside a write transaction the caller commits.
pub(super) fn append_turn_in(
    tx: &Transaction<'_>,
    conversation_id: &str,
    message: &Message,
) -> Result<StoredTurn, StoreError> {
    let title: Option<String> = tx
        .prepare_cached("SELECT title FROM conversations WHERE id = ?1")?
        .query_row([conversation_id], |row| row.get(0))
        .optional()?;
    let Some(title) = title else {
        return Err(StoreError::ConversationNotFound(conversation_id.to_owned()));
    };
    let turn = new_turn(conversation_id, message);
    insert_turn(tx, &turn)?;
    let title = if title.is_empty() && message.role == Role::User {
        title_from(&message.content)
    } else {
        title
    };
    tx.prepare_cached(
        "UPDATE conversations
         SET updated_at = ?2, title = ?3,
             activity = (SELECT MAX(activity) FROM conversations) + 1
         WHERE id = ?1",
    )?
    .execute(params![conversation_id, turn.updated_at, title])?;
    Ok(turn)
}

/// The conversation's turns in insertion order; `ConversationNotFound` if missing.
pub(super) fn turns(
    conn: &mut Connection,
    conversation_id: &str,
) -> Result<Vec<StoredTurn>, StoreError> {
    let tx = conn.transaction()?;
    let exists = tx
        .prepare_cached("SELECT 1 FROM conversations WHERE id = ?1")?
        .exists([conversation_id])?;
    if !exists {
        return Err(StoreError::ConversationNotFound(conversation_id.to_owned()));
    }
    let turns = turns_in(&tx, conversation_id)?;
    tx.commit()?;
    Ok(turns)
}

/// The conversation's turns in insertion order, inside the caller's transaction (none
/// for an unknown conversation).
pub(super) fn turns_in(
    tx: &Transaction<'_>,
    conversation_id: &str,
) -> Result<Vec<StoredTurn>, StoreError> {
    let sql = format!("SELECT {TURN_COLUMNS} FROM turns WHERE conversation_id = ?1 ORDER BY seq");
    let rows = {
        let mut statement = tx.prepare_cached(&sql)?;
        let rows = statement.query_map([conversation_id], TurnRow::read)?;
        rows.collect::<Result<Vec<_>, _>>()?
    };
    rows.into_iter().map(TurnRow::into_turn).collect()
}

/// Sets the conversation's working folder.
pub(super) fn set_cwd(
    conn: &mut Connection,
    conversation_id: &str,
    cwd: &str,
) -> Result<(), StoreError> {
    let changed = conn
        .prepare_cached("UPDATE conversations SET cwd = ?2 WHERE id = ?1")?
        .execute(params![conversation_id, cwd])?;
    found(changed, conversation_id)
}

/// Archives or restores the conversation.
pub(super) fn set_archived(
    conn: &mut Connection,
    conversation_id: &str,
    archived: bool,
) -> Result<(), StoreError> {
    let changed = conn
        .prepare_cached("UPDATE conversations SET archived = ?2 WHERE id = ?1")?
        .execute(params![conversation_id, archived])?;
    found(changed, conversation_id)
}

/// `ConversationNotFound` when an update by id changed no row.
fn found(changed: usize, conversation_id: &str) -> Result<(), StoreError> {
    if changed == 0 {
        return Err(StoreError::ConversationNotFound(conversation_id.to_owned()));
    }
    Ok(())
}

/// A write transaction that holds the write lock from its start (no lock upgrade, so a
/// busy database makes it wait on `busy_timeout` rather than fail).
pub(super) fn write_transaction(conn: &mut Connection) -> Result<Transaction<'_>, StoreError> {
    Ok(conn.transaction_with_behavior(TransactionBehavior::Immediate)?)
}

/// The turn a message becomes: a fresh id, timestamps of now.
fn new_turn(conversation_id: &str, message: &Message) -> StoredTurn {
    let now = now();
    StoredTurn {
        id: uuid::Uuid::new_v4().to_string(),
        conversation_id: conversation_id.to_owned(),
        role: message.role,
        content: message.content.clone(),
        status: message.status,
        command: message.command.clone(),
        tool_runs: message.tool_runs.clone(),
        created_at: now.clone(),
        updated_at: now,
    }
}

/// Inserts one turn row.
fn insert_turn(tx: &Transaction<'_>, turn: &StoredTurn) -> Result<(), StoreError> {
    let tool_runs =
        if turn.tool_runs.is_empty() {
            None
        } else {
            Some(serde_json::to_string(&turn.tool_runs).map_err(|err| {
                StoreError::Database(format!("cannot encode the tool runs: {err}"))
            })?)
        };
    let command = turn.command.as_ref();
    tx.prepare_cached(
        "INSERT INTO turns (id, conversation_id, role, content, status, command_name,
             command_step_index, command_total_steps, tool_runs, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        turn.id,
        turn.conversation_id,
        role_name(turn.role),
        turn.content,
        status_name(turn.status),
        command.map(|c| c.name.as_str()),
        command.map(|c| c.step_index),
        command.map(|c| c.total_steps),
        tool_runs,
        turn.created_at,
        turn.updated_at,
    ])?;
    Ok(())
}

/// Reads a row of [`CONVERSATION_COLUMNS`].
fn conversation_from_row(row: &Row<'_>) -> rusqlite::Result<Conversation> {
    Ok(Conversation {
        id: row.get(0)?,
        agent_name: row.get(1)?,
        title: row.get(2)?,
        cwd: row.get(3)?,
        archived: row.get(4)?,
        created_at: row.get(5)?,
        updated_at: row.get(6)?,
    })
}

/// A row of [`TURN_COLUMNS`] as SQLite holds it, before decoding role, status, command
/// and tool runs.
struct TurnRow {
    id: String,
    conversation_id: String,
    role: String,
    content: String,
    status: String,
    command_name: Option<String>,
    command_step_index: Option<u32>,
    command_total_steps: Option<u32>,
    tool_runs: Option<String>,
    created_at: String,
    updated_at: String,
}

impl TurnRow {
    /// Reads the raw columns.
    fn read(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            conversation_id: row.get(1)?,
            role: row.get(2)?,
            content: row.get(3)?,
            status: row.get(4)?,
            command_name: row.get(5)?,
            command_step_index: row.get(6)?,
            command_total_steps: row.get(7)?,
            tool_runs: row.get(8)?,
            created_at: row.get(9)?,
            updated_at: row.get(10)?,
        })
    }

    /// Decodes the row into a turn; a value this build cannot read is a `STORE_ERROR`.
    fn into_turn(self) -> Result<StoredTurn, StoreError> {
        let command = match (
            self.command_name,
            self.command_step_index,
            self.command_total_steps,
        ) {
            (Some(name), Some(step_index), Some(total_steps)) => Some(CommandMeta {
                name,
                step_index,
                total_steps,
            }),
            _ => None,
        };
        let tool_runs: Vec<ToolRun> = match self.tool_runs {
            Some(json) => serde_json::from_str(&json).map_err(|err| {
                StoreError::Database(format!("turn {}: unreadable tool runs: {err}", self.id))
            })?,
            None => Vec::new(),
        };
        Ok(StoredTurn {
            role: parse_role(&self.role)?,
            status: parse_status(&self.status)?,
            id: self.id,
            conversation_id: self.conversation_id,
            content: self.content,
            command,
            tool_runs,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// The stored (and wire) name of a role.
fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// The role a stored name stands for.
fn parse_role(name: &str) -> Result<Role, StoreError> {
    match name {
        "user" => Ok(Role::User),
        "assistant" => Ok(Role::Assistant),
        "tool" => Ok(Role::Tool),
        other => Err(StoreError::Database(format!("unknown turn role {other:?}"))),
    }
}

/// The stored (and wire) name of a status.
fn status_name(status: TurnStatus) -> &'static str {
    match status {
        TurnStatus::Ok => "ok",
        TurnStatus::Stopped => "stopped",
        TurnStatus::Failed => "failed",
    }
}

/// The status a stored name stands for.
fn parse_status(name: &str) -> Result<TurnStatus, StoreError> {
    match name {
        "ok" => Ok(TurnStatus::Ok),
        "stopped" => Ok(TurnStatus::Stopped),
        "failed" => Ok(TurnStatus::Failed),
        other => Err(StoreError::Database(format!(
            "unknown turn status {other:?}"
        ))),
    }
}

/// Now, RFC 3339 UTC with milliseconds.
pub(super) fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}
