//! The agent service: the one implementation of agent discovery, validation and
//! execution that every transport (CLI, REST, MCP) calls (docs/contract.md §5).
//!
//! - `prepare`: [`RunTarget`] and the checks before a run (`prepare_instruction`,
//!   `prepare_command`), in a fixed order, ending with the conversation's lock.
//! - `run`: [`PreparedRun`] (holds the lock) and running it, persisting as it goes.
//! - `locks`: [`RunLocks`], one run per conversation, across every process on the same
//!   database (`lock_file`: a kernel-released lock file per conversation).
//! - `reads`: [`ConversationReads`], the model's read positions of each conversation's
//!   processes, kept between runs.
//! - `error`: [`ServiceError`], the stable codes and their classes.

mod error;
mod lock_file;
mod locks;
mod prepare;
mod reads;
mod run;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentEvent, AgentLoop, Message, Role, RunOptions, RunOutcome, Session};
use crate::agents::{AgentCatalog, AgentSummary, CommandEntry};
use crate::store::{Conversation, Store, StoreError, StoredTurn};

pub use cmdr_executors::ErrorClass;
pub use error::ServiceError;
pub use lock_file::LockFileError;
pub use locks::{Busy, LockError, RunGuard, RunLocks};
pub use prepare::RunTarget;
pub use reads::ConversationReads;
pub use run::{PreparedRun, RunInfo, StoreRecorder};

use prepare::blocking;

/// Agents, conversations and runs. Cheap to clone; every clone is the same service.
#[derive(Clone)]
pub struct AgentService {
    inner: Arc<Inner>,
}

struct Inner {
    catalog: Arc<AgentCatalog>,
    store: Arc<dyn Store>,
    agent_loop: AgentLoop,
    locks: RunLocks,
    reads: ConversationReads,
    default_cwd: PathBuf,
}

impl AgentService {
    /// A service over the agents of `catalog`, persisting in `store`, running with
    /// `agent_loop`; runs without a working folder start in `default_cwd`. A store other
    /// processes can open (`Store::lock_dir`) gets conversation locks that hold across
    /// them.
    pub fn new(
        catalog: AgentCatalog,
        store: Arc<dyn Store>,
        agent_loop: AgentLoop,
        default_cwd: PathBuf,
    ) -> Self {
        let locks = store
            .lock_dir()
            .map_or_else(RunLocks::new, RunLocks::across_processes);
        Self {
            inner: Arc::new(Inner {
                catalog: Arc::new(catalog),
                store,
                agent_loop,
                locks,
                reads: ConversationReads::default(),
                default_cwd,
            }),
        }
    }

    /// The agents folder.
    pub fn catalog(&self) -> &AgentCatalog {
        &self.inner.catalog
    }

    /// The conversation store.
    pub fn store(&self) -> Arc<dyn Store> {
        Arc::clone(&self.inner.store)
    }

    /// The loop runs go through.
    pub fn agent_loop(&self) -> &AgentLoop {
        &self.inner.agent_loop
    }

    /// The per-conversation locks.
    pub fn locks(&self) -> &RunLocks {
        &self.inner.locks
    }

    /// Where each conversation's model stopped reading its processes.
    pub fn reads(&self) -> &ConversationReads {
        &self.inner.reads
    }

    /// Stops every process of `conversation_id`'s agent runs (its scope,
    /// `conversation:<id>`: SIGTERM to each whole tree, SIGKILL after 2 s) and forgets
    /// where its model stopped reading them. Returns once they are gone.
    pub async fn end_processes(&self, conversation_id: &str) {
        let scope = crate::scopes::conversation(conversation_id);
        self.agent_loop().registry().end_scope(&scope).await;
        self.inner.reads.forget(conversation_id);
    }

    /// Where runs without a working folder start.
    pub fn default_cwd(&self) -> &Path {
        &self.inner.default_cwd
    }

    fn catalog_arc(&self) -> Arc<AgentCatalog> {
        Arc::clone(&self.inner.catalog)
    }

    /// Every agent, sorted by name (read from disk on every call).
    pub async fn list_agents(&self) -> Result<Vec<AgentSummary>, ServiceError> {
        let catalog = self.catalog_arc();
        Ok(blocking(move || catalog.list_agents()).await??)
    }

    /// The commands of `agent`, sorted, invalid ones disabled (read from disk every call).
    pub async fn list_commands(&self, agent: &str) -> Result<Vec<CommandEntry>, ServiceError> {
        let catalog = self.catalog_arc();
        let agent = agent.to_owned();
        Ok(blocking(move || catalog.list_commands(&agent)).await??)
    }

    /// Conversations, most recently updated first, optionally of one agent.
    pub async fn conversations(
        &self,
        agent: Option<&str>,
    ) -> Result<Vec<Conversation>, ServiceError> {
        Ok(self.inner.store.conversations(agent).await?)
    }

    /// The turns of a conversation, oldest first.
    pub async fn turns(&self, conversation_id: &str) -> Result<Vec<StoredTurn>, ServiceError> {
        Ok(self.inner.store.turns(conversation_id).await?)
    }

    /// Archives (or restores) a conversation; archived ones refuse new runs, and
    /// archiving stops its processes (returning once they are gone).
    pub async fn set_archived(
        &self,
        conversation_id: &str,
        archived: bool,
    ) -> Result<(), ServiceError> {
        let store = &self.inner.store;
        if store.conversation(conversation_id).await?.is_none() {
            return Err(StoreError::ConversationNotFound(conversation_id.to_owned()).into());
        }
        store.set_archived(conversation_id, archived).await?;
        if archived {
            self.end_processes(conversation_id).await;
        }
        Ok(())
    }

    /// Runs one turn on a client-held history (`POST /api/agent`): no agent, no
    /// persistence, no lock. `messages` must end with the user's new message; earlier
    /// ones are the history, sent to the model as they are. Commands start in the
    /// service's default directory.
    pub async fn run_stateless(
        &self,
        mut messages: Vec<Message>,
        events: mpsc::Sender<AgentEvent>,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, ServiceError> {
        let instruction = match messages.pop() {
            Some(last) if last.role == Role::User && !last.content.trim().is_empty() => {
                last.content
            }
            _ => {
                return Err(ServiceError::InvalidRequest(
                    "messages must end with a non-empty user message".to_owned(),
                ))
            }
        };
        let options = RunOptions::default();
        if self.agent_loop().model_id(&options).is_none() {
            return Err(ServiceError::LlmUnavailable);
        }
        // The client's history is all there is: its processes live in REST's scope
        // (`http`), where its next request (and `GET /processes`) finds them.
        let mut session = Session::new(self.default_cwd()).in_scope(crate::scopes::http());
        session.messages = messages;
        Ok(self
            .agent_loop()
            .run_turn(&mut session, instruction, &options, &events, &cancel)
            .await)
    }

    /// Checks, locks and runs `instruction` to its end.
    pub async fn run_instruction(
        &self,
        target: RunTarget,
        instruction: String,
        events: mpsc::Sender<AgentEvent>,
        cancel: CancellationToken,
    ) -> Result<(RunInfo, RunOutcome), ServiceError> {
        let run = self.prepare_instruction(target, instruction).await?;
        let info = run.info().clone();
        Ok((info, run.run(events, cancel).await))
    }

    /// Checks, locks and runs the agent command `command_name` to its end.
    pub async fn run_command(
        &self,
        target: RunTarget,
        command_name: &str,
        events: mpsc::Sender<AgentEvent>,
        cancel: CancellationToken,
    ) -> Result<(RunInfo, RunOutcome), ServiceError> {
        let run = self.prepare_command(target, command_name).await?;
        let info = run.info().clone();
        Ok((info, run.run(events, cancel).await))
    }
}
