//! Everything checked before a run starts, in a fixed order, so a refused run leaves no
//! trace: command name → agent → command file → working folder → model → conversation id
//! and its lock → the conversation itself.

use std::path::{Path, PathBuf};

use crate::agent::{
    system_prompt, RunOptions, Session, DEFAULT_MAX_ITERATIONS, DEFAULT_MAX_TOKENS,
};
use crate::agents::{Agent, AgentCommand};
use crate::store::StoreError;

use super::error::ServiceError;
use super::run::{PreparedRun, RunInfo, Steps};
use super::AgentService;

/// Where a run goes: an agent, optionally an existing conversation and a working folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunTarget {
    /// The agent's name.
    pub agent: String,
    /// An existing conversation of that agent; a new one when `None`.
    pub conversation_id: Option<String>,
    /// Absolute path of an existing directory: where the run's commands start.
    pub working_folder: Option<String>,
}

/// Longest conversation id accepted.
const MAX_ID_LEN: usize = 128;

impl AgentService {
    /// Checks a plain run of `instruction` and takes the conversation's lock.
    pub async fn prepare_instruction(
        &self,
        target: RunTarget,
        instruction: String,
    ) -> Result<PreparedRun, ServiceError> {
        if instruction.trim().is_empty() {
            return Err(ServiceError::InvalidRequest(
                "the instruction is empty".to_owned(),
            ));
        }
        let agent = self.load_agent(&target.agent).await?;
        let options = run_options(&agent);
        let target = RunTarget {
            agent: agent.name,
            ..target
        };
        self.prepare(target, options, Steps::Instruction(instruction))
            .await
    }

    /// Checks a plain run of `instruction` with settings the caller chose instead of an
    /// agent's files (`cmdr chat`: its flags), and takes the conversation's lock. No
    /// agent folder is read: `target.agent` only names the agent the conversation is
    /// stored under (and must own it, when given).
    pub async fn prepare_instruction_with(
        &self,
        target: RunTarget,
        options: RunOptions,
        instruction: String,
    ) -> Result<PreparedRun, ServiceError> {
        if instruction.trim().is_empty() {
            return Err(ServiceError::InvalidRequest(
                "the instruction is empty".to_owned(),
            ));
        }
        self.prepare(target, options, Steps::Instruction(instruction))
            .await
    }

    /// Checks a run of the agent command `command_name` (every file rule before any step
    /// runs) and takes the conversation's lock.
    pub async fn prepare_command(
        &self,
        target: RunTarget,
        command_name: &str,
    ) -> Result<PreparedRun, ServiceError> {
        let command = self.load_command(&target.agent, command_name).await?;
        let agent = self.load_agent(&target.agent).await?;
        let options = run_options(&agent);
        let target = RunTarget {
            agent: agent.name,
            ..target
        };
        self.prepare(target, options, Steps::Command(command)).await
    }

    /// The checks common to every run (working folder onwards), for a run of
    /// `target.agent` with `options`.
    async fn prepare(
        &self,
        target: RunTarget,
        options: RunOptions,
        steps: Steps,
    ) -> Result<PreparedRun, ServiceError> {
        let working_folder = match &target.working_folder {
            Some(folder) => Some(self.check_working_folder(folder.clone()).await?),
            None => None,
        };
        let model_id = self
            .agent_loop()
            .model_id(&options)
            .ok_or(ServiceError::LlmUnavailable)?;
        let given = target.conversation_id.is_some();
        let conversation_id = match target.conversation_id {
            Some(id) => check_conversation_id(id)?,
            None => uuid::Uuid::new_v4().to_string(),
        };
        let locks = self.locks().clone();
        let id = conversation_id.clone();
        let guard = blocking(move || locks.try_lock(&id)).await??;
        let session = self
            .open_session(&conversation_id, &target.agent, given, working_folder)
            .await?;
        let info = RunInfo {
            agent_name: target.agent,
            command_name: match &steps {
                Steps::Command(command) => Some(command.name.clone()),
                Steps::Instruction(_) => None,
            },
            conversation_id,
            model_id,
        };
        Ok(PreparedRun::new(
            self.clone(),
            guard,
            info,
            session,
            options,
            steps,
        ))
    }

    /// Creates the conversation, or loads an existing one after checking it may run.
    async fn open_session(
        &self,
        id: &str,
        agent: &str,
        existing: bool,
        working_folder: Option<PathBuf>,
    ) -> Result<Session, ServiceError> {
        let store = self.store();
        if !existing {
            let cwd = working_folder.unwrap_or_else(|| self.default_cwd().to_owned());
            store
                .create_conversation(id, agent, Some(&cwd.to_string_lossy()))
                .await?;
            return Ok(Session::new(cwd).in_scope(crate::scopes::conversation(id)));
        }
        let conversation = store
            .conversation(id)
            .await?
            .ok_or_else(|| StoreError::ConversationNotFound(id.to_owned()))?;
        if conversation.agent_name != agent {
            return Err(ServiceError::AgentMismatch {
                conversation: id.to_owned(),
                owner: conversation.agent_name,
                requested: agent.to_owned(),
            });
        }
        if conversation.archived {
            return Err(ServiceError::ConversationArchived(id.to_owned()));
        }
        let messages = store
            .turns(id)
            .await?
            .iter()
            .map(|turn| turn.to_message())
            .collect();
        // Where its last command left off, unless that directory is gone since.
        let saved = match conversation.cwd.map(PathBuf::from) {
            Some(dir) => blocking(move || dir.is_dir().then_some(dir)).await?,
            None => None,
        };
        let cwd = working_folder
            .or(saved)
            .unwrap_or_else(|| self.default_cwd().to_owned());
        let mut session = Session::new(cwd).in_scope(crate::scopes::conversation(id));
        session.messages = messages;
        session.reads = self.reads().load(id);
        Ok(session)
    }

    async fn load_agent(&self, name: &str) -> Result<Agent, ServiceError> {
        let catalog = self.catalog_arc();
        let name = name.to_owned();
        blocking(move || catalog.agent(&name))
            .await?
            .map_err(Into::into)
    }

    async fn load_command(&self, agent: &str, name: &str) -> Result<AgentCommand, ServiceError> {
        let catalog = self.catalog_arc();
        let (agent, name) = (agent.to_owned(), name.to_owned());
        blocking(move || catalog.load_command(&agent, &name))
            .await?
            .map_err(Into::into)
    }
}

/// The run settings an agent asks for.
fn run_options(agent: &Agent) -> RunOptions {
    RunOptions {
        system_prompt: system_prompt(agent.system_prompt.as_deref()),
        model: agent.config.model.clone(),
        max_iterations: agent
            .config
            .max_iterations
            .unwrap_or(DEFAULT_MAX_ITERATIONS),
        command_timeout: agent
            .config
            .command_timeout_secs
            .map(std::time::Duration::from_secs),
        command: None,
        max_tokens: agent.config.max_tokens_or(Some(DEFAULT_MAX_TOKENS)),
        shell_env: agent
            .config
            .shell_environment_policy
            .as_ref()
            .map(|policy| policy.apply_to_process().into()),
    }
}

impl AgentService {
    /// `WORKING_FOLDER_INVALID` unless absolute; `WORKING_FOLDER_NOT_FOUND` unless an
    /// existing directory; `PATH_NOT_ALLOWED` unless beneath an allowed root (when the
    /// registry is confined).
    async fn check_working_folder(&self, folder: String) -> Result<PathBuf, ServiceError> {
        let path = PathBuf::from(&folder);
        if !path.is_absolute() {
            return Err(ServiceError::WorkingFolderInvalid(folder));
        }
        let paths = self.agent_loop().registry().confinement().paths.clone();
        let probe = path.clone();
        let checked = blocking(move || {
            if !Path::is_dir(&probe) {
                return Ok(false);
            }
            paths.check(&probe, "working_folder").map(|()| true)
        })
        .await?;
        match checked {
            Ok(true) => Ok(path),
            Ok(false) => Err(ServiceError::WorkingFolderNotFound(folder)),
            Err(denied) => Err(ServiceError::PathNotAllowed(denied)),
        }
    }
}

fn check_conversation_id(id: String) -> Result<String, ServiceError> {
    let printable = id.chars().all(|c| !c.is_control());
    if id.trim().is_empty() || id.len() > MAX_ID_LEN || !printable || id.trim() != id {
        return Err(ServiceError::InvalidRequest(format!(
            "conversationId must be 1 to {MAX_ID_LEN} printable characters without surrounding spaces"
        )));
    }
    Ok(id)
}

/// Runs blocking file-system work off the async runtime.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ServiceError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        tracing::error!(error = %e, "a blocking task of the agent service failed");
        ServiceError::Internal("a worker thread failed".to_owned())
    })
}
