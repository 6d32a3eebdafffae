//! Where `cmdr chat` keeps its conversations: the same database as the agents'
//! (`--db`, `CMDR_DB`, default under `$CMDR_DATA_DIR`), under the agent name
//! [`CHAT_AGENT`], so `cmdr conversations` lists them and `cmdr chat --conversation ID`
//! resumes one. The chat's turns run through the agent service like every other front
//! door's, so a conversation is created at its first message, every message is persisted
//! the moment it is appended, and a turn holds the conversation's lock. An unsaved chat
//! (`--ephemeral`, or a database that cannot be opened: a warning) keeps its conversations
//! in a database in memory, gone when it exits.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::store::{SqliteStore, Store, StoreError};

/// The agent name chat conversations are stored under.
pub const CHAT_AGENT: &str = "chat";

/// A chat's database.
pub struct ChatStore {
    store: Arc<dyn Store>,
    /// A file other processes see (recovery and resuming make sense).
    saved: bool,
}

impl ChatStore {
    /// Opens the database at `db` (the default path when `None`).
    pub fn open(db: Option<&Path>) -> Result<Self, StoreError> {
        let path: PathBuf = db.map_or_else(SqliteStore::default_path, Path::to_path_buf);
        Ok(Self {
            store: Arc::new(SqliteStore::open(&path)?),
            saved: true,
        })
    }

    /// A database in memory: nothing is saved.
    pub fn unsaved() -> Result<Self, StoreError> {
        Ok(Self {
            store: Arc::new(SqliteStore::open_in_memory()?),
            saved: false,
        })
    }

    /// The store the chat's service persists in.
    pub fn store(&self) -> Arc<dyn Store> {
        Arc::clone(&self.store)
    }

    /// Whether the conversations outlive the chat.
    pub fn is_saved(&self) -> bool {
        self.saved
    }

    /// The agent conversation `id` is stored under (`CONVERSATION_NOT_FOUND` when it
    /// does not exist): the chat continues it under that name.
    pub async fn owner_of(&self, id: &str) -> Result<String, StoreError> {
        let conversation = self.store.conversation(id).await?;
        conversation
            .map(|c| c.agent_name)
            .ok_or_else(|| StoreError::ConversationNotFound(id.to_owned()))
    }
}
