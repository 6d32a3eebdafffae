//! Where `cmdr chat` keeps its conversations: the same database as the agents'
//! (`--db`, `CMDR_DB`, default under `$CMDR_DATA_DIR`), under the agent name
//! [`CHAT_AGENT`], so `cmdr conversations` lists them and `cmdr chat --conversation ID`
//! resumes one. A conversation is created at its first message; every message is
//! persisted the moment it is appended. A database that cannot be opened leaves the chat
//! working, unsaved, with a warning.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::agent::Session;
use crate::service::StoreRecorder;
use crate::store::{SqliteStore, Store};

/// The agent name chat conversations are stored under.
pub const CHAT_AGENT: &str = "chat";

/// A chat's link to the database.
pub struct ChatStore {
    store: Arc<dyn Store>,
    /// The conversation being written, once it exists.
    conversation: Option<String>,
}

impl ChatStore {
    /// Opens the database at `db` (the default path when `None`).
    pub fn open(db: Option<&Path>) -> Result<Self, String> {
        let path: PathBuf = db.map_or_else(SqliteStore::default_path, Path::to_path_buf);
        let store = SqliteStore::open(&path)
            .map_err(|e| format!("cannot open the conversation database: {e}"))?;
        Ok(Self {
            store: Arc::new(store),
            conversation: None,
        })
    }

    /// Continues conversation `id`: its messages and last working directory.
    pub async fn resume(&mut self, id: &str, folder: &Path) -> Result<Session, String> {
        let conversation = self
            .store
            .conversation(id)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("no conversation {id}"))?;
        let turns = self.store.turns(id).await.map_err(|e| e.to_string())?;
        let cwd = conversation
            .cwd
            .map(PathBuf::from)
            .filter(|cwd| cwd.is_dir())
            .unwrap_or_else(|| folder.to_path_buf());
        self.conversation = Some(id.to_owned());
        let mut session = Session::new(cwd).in_scope(crate::scopes::conversation(id));
        session.messages = turns.iter().map(|t| t.to_message()).collect();
        Ok(session)
    }

    /// The conversation being written (created now, with a new id, if none is).
    pub async fn conversation(&mut self, cwd: &Path) -> Option<String> {
        if self.conversation.is_none() {
            let id = uuid::Uuid::new_v4().to_string();
            let cwd = cwd.to_string_lossy();
            match self
                .store
                .create_conversation(&id, CHAT_AGENT, Some(&cwd))
                .await
            {
                Ok(_) => self.conversation = Some(id),
                Err(e) => tracing::warn!("cannot save the conversation: {e}"),
            }
        }
        self.conversation.clone()
    }

    /// Starts a new conversation at the next message (`/new`).
    pub fn forget(&mut self) {
        self.conversation = None;
    }

    /// A recorder persisting into `conversation_id`.
    pub fn recorder(&self, conversation_id: String) -> StoreRecorder {
        StoreRecorder::new(Arc::clone(&self.store), conversation_id)
    }

    /// Remembers where the next command starts.
    pub async fn save_cwd(&self, conversation_id: &str, cwd: &Path) {
        if let Err(e) = self
            .store
            .set_cwd(conversation_id, &cwd.to_string_lossy())
            .await
        {
            tracing::warn!("cannot save the working directory: {e}");
        }
    }

    /// Marks a turn as running (so a crash is closed by the next start) or ended.
    pub async fn mark_run(&self, conversation_id: &str, running: bool) {
        let marked = if running {
            self.store.begin_run(conversation_id).await
        } else {
            self.store.end_run(conversation_id).await
        };
        if let Err(e) = marked {
            tracing::warn!("cannot mark the run: {e}");
        }
    }
}
