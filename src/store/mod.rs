//! Persistent conversations and turns (docs/contract.md §5): the [`Store`] trait every transport's
//! service talks to, and [`SqliteStore`], the embedded default.
//!
//! - `error`: [`StoreError`] and its stable codes.
//! - `schema`: the pragmas and the ordered migrations (`PRAGMA user_version`).
//! - `actor`: the store actor — one thread owning the connection, fed closures.
//! - `queries`: the SQL of each operation, synchronous, on a `&mut Connection`.
//! - `sqlite`: [`SqliteStore`], opening the file and implementing [`Store`] on the worker.
//! - `markers`: run markers, and closing a run a dead process left open in one transaction
//!   (what closes it, and when, is start-up recovery's business: `crate::recovery`).
//!
//! The store only opens, migrates, reads and writes: it never decides whether a process
//! is alive, never kills one, and knows nothing of how the agent loop closes a run.
//!
//! ## Decisions
//! - **A trait with boxed futures** so the store is object safe (`Arc<dyn Store>`) and a
//!   networked store can replace SQLite later without touching callers.
//! - **Never block the runtime**: every query runs on the store's own thread (an actor
//!   owning the `Connection`, receiving boxed closures over a channel, answering on a
//!   oneshot). One thread per store serialises its writes without lock contention;
//!   callers wait on the answer, so the queue never holds more than one job per caller.
//!   A panicking job is caught; its caller gets `STORE_ERROR` and the actor lives on.
//! - **Durability**: WAL journal, `synchronous=NORMAL` ([`SYNCHRONOUS`]): every committed
//!   transaction survives a crash of the process (the WAL is in the OS page cache the
//!   moment `COMMIT` returns); only a power loss / kernel crash can lose the last commits
//!   before the next checkpoint — never corrupt the database. `FULL` would fsync the WAL
//!   on every commit to survive power loss too, at one fsync per turn.
//! - **Transactions**: each write is one `BEGIN IMMEDIATE` transaction (an append inserts
//!   the turn and updates its conversation atomically). `IMMEDIATE` takes the write lock
//!   up front, so a second connection on the same file (another [`SqliteStore`], another
//!   process) waits on `busy_timeout` instead of failing with a lock upgrade deadlock.
//!   Reads of several statements run in one read transaction (a consistent snapshot).
//! - **Ordering never by timestamps alone** (millisecond clocks tie and go backwards):
//!   turns are ordered by an `INTEGER PRIMARY KEY AUTOINCREMENT` `seq`; conversations by
//!   an `activity` counter bumped (max + 1, inside the write transaction) on create and
//!   on every appended turn. `set_cwd` and `set_archived` change neither `updated_at` nor
//!   the order: the list is "most recent activity first".
//! - **Columns**: command metadata as three nullable columns (queryable: "turns of
//!   command X"), tool runs as one JSON text column (a list, only ever read back whole);
//!   role and status as their lowercase wire strings with `CHECK` constraints; tables are
//!   `STRICT`.
//! - **Timestamps**: RFC 3339 UTC with milliseconds (`2025-01-31T12:00:00.123Z`).
//! - **Title**: the first non-blank user message, whitespace runs collapsed to one space
//!   (a title is one line), cut to [`TITLE_MAX_CHARS`] characters; `""` until then.
//!   Later messages never change it.

mod actor;
mod error;
mod markers;
mod queries;
mod schema;
mod sqlite;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use crate::turn::{CommandMeta, Message, Role, ToolRun, TurnStatus};

pub use error::StoreError;
pub use schema::{BUSY_TIMEOUT, SCHEMA_VERSION, SYNCHRONOUS};
pub use sqlite::{SqliteStore, DB_FILE_NAME};

/// Longest conversation title, in characters.
pub const TITLE_MAX_CHARS: usize = 80;

/// What every [`Store`] operation returns: a boxed future, so the trait is object safe.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Where conversations and their turns are kept. Used as `Arc<dyn Store>`.
pub trait Store: Send + Sync + 'static {
    /// Creates an empty conversation owned by `agent_name`; `CONVERSATION_EXISTS` if the
    /// id is taken.
    fn create_conversation<'a>(
        &'a self,
        id: &'a str,
        agent_name: &'a str,
        cwd: Option<&'a str>,
    ) -> StoreFuture<'a, Conversation>;

    /// The conversation with this id, if any.
    fn conversation<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Conversation>>;

    /// Every conversation (of one agent, when given), most recent activity first.
    fn conversations<'a>(
        &'a self,
        agent_name: Option<&'a str>,
    ) -> StoreFuture<'a, Vec<Conversation>>;

    /// Appends a turn (one transaction): bumps the conversation's `updated_at` and sets
    /// its title from the first user message. `CONVERSATION_NOT_FOUND` if missing.
    fn append_turn<'a>(
        &'a self,
        conversation_id: &'a str,
        message: &'a Message,
    ) -> StoreFuture<'a, StoredTurn>;

    /// The conversation's turns, oldest first. `CONVERSATION_NOT_FOUND` if missing.
    fn turns<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<StoredTurn>>;

    /// Sets the working folder remembered for the conversation.
    /// `CONVERSATION_NOT_FOUND` if missing.
    fn set_cwd<'a>(&'a self, conversation_id: &'a str, cwd: &'a str) -> StoreFuture<'a, ()>;

    /// Archives (`true`) or restores (`false`) the conversation.
    /// `CONVERSATION_NOT_FOUND` if missing.
    fn set_archived<'a>(&'a self, conversation_id: &'a str, archived: bool) -> StoreFuture<'a, ()>;

    /// Marks `conversation_id` as run by this process from now on, so that if the process
    /// dies before [`Store::end_run`], start-up recovery can close the run (its last turn
    /// answered with a `stopped` one). A store without crash recovery does nothing.
    fn begin_run<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, ()> {
        let _ = conversation_id;
        Box::pin(async { Ok(()) })
    }

    /// Removes this process's mark of `conversation_id` (the run ended, however).
    fn end_run<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, ()> {
        let _ = conversation_id;
        Box::pin(async { Ok(()) })
    }

    /// Where the processes sharing this store take their per-conversation run locks
    /// (`crate::service::RunLocks`): a directory next to the database file. `None` for a
    /// store no other process can open (in memory): its locks live in memory only.
    fn lock_dir(&self) -> Option<PathBuf> {
        None
    }

    /// Every run marker: runs in progress, in this process or another, or left open by a
    /// process that died. A store without crash recovery has none.
    fn run_markers(&self) -> StoreFuture<'_, Vec<RunMarker>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Closes `marker`'s run atomically: removes the marker and appends the turn `closing`
    /// makes of the conversation's turns (if any). `false`, nothing written, when the
    /// marker was already gone.
    fn close_run<'a>(
        &'a self,
        marker: &'a RunMarker,
        closing: ClosingTurn,
    ) -> StoreFuture<'a, bool> {
        let _ = (marker, closing);
        Box::pin(async { Ok(false) })
    }
}

/// A run marker: a conversation with a run in progress and the process running it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunMarker {
    /// The conversation.
    pub conversation_id: String,
    /// The process running it, as `crate::owner` names processes.
    pub owner: String,
}

/// What closes an interrupted run: given the conversation's turns, the turn to append (or
/// none). Runs on the store's thread, inside the closing transaction.
pub type ClosingTurn = Box<dyn FnOnce(&[StoredTurn]) -> Option<Message> + Send>;

/// A conversation: one agent's thread of turns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    /// Its id (given by the caller or generated before the first run).
    pub id: String,
    /// The agent it belongs to.
    #[serde(rename = "agentName")]
    pub agent_name: String,
    /// The first user message, one line, at most [`TITLE_MAX_CHARS`]; `""` until then.
    pub title: String,
    /// The working folder of its runs, if one was given.
    pub cwd: Option<String>,
    /// Archived conversations refuse new runs.
    pub archived: bool,
    /// When it was created (RFC 3339 UTC, milliseconds).
    #[serde(rename = "createdAt")]
    pub created_at: String,
    /// When its last turn was appended (or its creation, before any).
    #[serde(rename = "updatedAt")]
    pub updated_at: String,
}

/// A [`Message`] as stored: with its id, conversation and timestamps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredTurn {
    /// Its id (UUID v4).
    pub id: String,
    /// The conversation it belongs to.
    #[serde(rename = "conversationId")]
    pub conversation_id: String,
    /// Who wrote it.
    pub role: Role,
    /// Verbatim content.
    pub content: String,
    /// Complete, stopped or failed.
    pub status: TurnStatus,
    /// Set when written by a step of an agent command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandMeta>,
    /// For `tool` turns: the commands whose results it holds.
    #[serde(rename = "toolRuns", default, skip_serializing_if = "Vec::is_empty")]
    pub tool_runs: Vec<ToolRun>,
    /// When it was appended (RFC 3339 UTC, milliseconds).
    #[serde(rename = "createdAt")]
    pub created_at: String,
    /// When it last changed (turns are append-only today: equal to `created_at`).
    #[serde(rename = "updatedAt")]
    pub updated_at: String,
}

impl StoredTurn {
    /// The message it stores, as the agent loop keeps it.
    pub fn to_message(&self) -> Message {
        Message {
            role: self.role,
            content: self.content.clone(),
            status: self.status,
            tool_runs: self.tool_runs.clone(),
            command: self.command.clone(),
        }
    }
}

/// The title a first user message gives its conversation: whitespace runs collapsed to
/// one space, cut to [`TITLE_MAX_CHARS`] characters (`""` for a blank message).
pub fn title_from(content: &str) -> String {
    let mut title = String::new();
    for (count, word) in content.split_whitespace().enumerate() {
        if count > 0 {
            title.push(' ');
        }
        title.push_str(word);
        if title.chars().count() >= TITLE_MAX_CHARS {
            break;
        }
    }
    title.chars().take(TITLE_MAX_CHARS).collect()
}
