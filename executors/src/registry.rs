//! [`Registry`]: maps each [`CommandType`] to its executor actor, and is the one door
//! (`execute`) through which every transport runs commands.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::ErrorCode;
use dashmap::DashMap;
use tokio::sync::{mpsc, oneshot};

use crate::actor::{lazy_actor, ActorConfig, ActorHandle, Envelope, Runtime};
use crate::bash_exec::{BashExec, BashExecConfig, Sandbox, SandboxStatus, TreeMechanism};
use crate::confine::PathPolicy;
use crate::decode::decode_command;
use crate::executor::{Executor, ScopeEnder};
use crate::file_read::FileRead;
use crate::file_write::FileWrite;
use crate::inflight::{Claim, StopReason};
use crate::input::{InputBroker, NoInputBroker};
use crate::list_directory::ListDirectory;
use crate::load::ActorLoad;
use crate::patch_file::PatchFile;
use crate::process::{
    ProcessInputExec, ProcessKillExec, ProcessLimits, ProcessListExec, ProcessOutputExec,
    ProcessTable, Scope,
};
use crate::protocol::{Command, CommandType, OutputResult};
use crate::request_user_input::RequestUserInput;
use crate::stream::ResultStream;
use crate::terminal::rejected_result;

/// Messages buffered per command before its executor waits for the reader. With 64 KiB
/// chunks this bounds a command's queued output at 2 MiB.
pub const RESULT_CHANNEL_CAPACITY: usize = 32;

/// Why a command was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// The registry is shutting down.
    #[error("cmdr is shutting down; no new commands are accepted")]
    ShuttingDown,
    /// A command with this id is still in flight.
    #[error("a command with id '{0}' is already running")]
    DuplicateId(String),
    /// No executor is registered for the type.
    #[error("no executor is registered for {0}")]
    NotRegistered(CommandType),
}

impl SubmitError {
    /// The stable code, as sent in `errorCode`.
    pub fn code(&self) -> ErrorCode {
        match self {
            SubmitError::ShuttingDown => ErrorCode::ShuttingDown,
            SubmitError::DuplicateId(_) => ErrorCode::DuplicateCommandId,
            SubmitError::NotRegistered(_) => ErrorCode::UnsupportedCommandType,
        }
    }

    /// The `FAILED` result that answers the refused command on its stream.
    pub fn to_result(&self, command_id: &str, command_type: &str) -> OutputResult {
        rejected_result(command_id, command_type, self.to_string(), self.code())
    }
}

/// Deadline of file commands and `LIST_DIRECTORY` without `timeout_ms`: long enough to
/// read gigabytes, short enough that a wedged one does not wait forever.
pub const FILE_DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Time between SIGTERM and SIGKILL when a scope ends ([`Registry::end_scope`]).
pub const SCOPE_END_GRACE: Duration = Duration::from_secs(2);

/// Commands at once of the types that mostly wait — `REQUEST_USER_INPUT` (on people) and
/// the process commands (on output) — unaffected by `--max-concurrent`.
pub const WAITING_ACTOR_LIMIT: usize = 1024;

/// How the default executors are set up.
#[derive(Clone)]
pub struct RegistryConfig {
    /// Who answers `REQUEST_USER_INPUT` (default: nobody — such commands fail clearly).
    pub input_broker: Arc<dyn InputBroker>,
    /// `BASH_EXEC` settings.
    pub bash: BashExecConfig,
    /// Actor limits for `BASH_EXEC` (its default deadline is `bash.default_timeout`).
    pub bash_actor: ActorConfig,
    /// Actor limits for the file commands and `LIST_DIRECTORY`.
    pub file_actor: ActorConfig,
    /// Actor limits for `REQUEST_USER_INPUT` (questions wait on people: many at once).
    pub input_actor: ActorConfig,
    /// Where file commands and `working_dir` may point (default: anywhere).
    pub paths: PathPolicy,
    /// Confine `BASH_EXEC` writes to the allowed roots with Landlock (needs roots in
    /// `paths`; what the kernel enforces is in [`Registry::confinement`]).
    pub landlock: bool,
    /// Limits of the background processes (docs/processes.md).
    pub processes: ProcessLimits,
    /// What every process id starts with (`<prefix>p1` …), so that an id names the
    /// instance holding it: a NATS worker sets its worker id and `-` (docs/nats.md).
    pub process_id_prefix: Option<String>,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            input_broker: Arc::new(NoInputBroker),
            bash: BashExecConfig::default(),
            bash_actor: ActorConfig::default(),
            file_actor: ActorConfig {
                default_timeout: Some(FILE_DEFAULT_TIMEOUT),
                ..ActorConfig::default()
            },
            input_actor: ActorConfig {
                max_concurrent: WAITING_ACTOR_LIMIT,
                ..ActorConfig::default()
            },
            paths: PathPolicy::unrestricted(),
            landlock: false,
            processes: ProcessLimits::default(),
            process_id_prefix: None,
        }
    }
}

/// Command types → executor actors. Cheap to clone; every clone is the same registry.
///
/// Each actor's task starts with the first command of its type, on the Tokio runtime that
/// command is executed from.
#[derive(Clone, Default)]
pub struct Registry {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    actors: DashMap<CommandType, ActorHandle>,
    runtime: Arc<Runtime>,
    closed: AtomicBool,
    confinement: Confinement,
    /// The background processes (stopped at shutdown).
    processes: ProcessTable,
    /// Ends scopes whose processes live elsewhere (see [`ScopeEnder`]).
    scope_ender: std::sync::OnceLock<Arc<dyn ScopeEnder>>,
    /// The scopes' Landlock domains (`--landlock`), ended with their scopes.
    sandbox: Option<Arc<Sandbox>>,
}

/// How a registry's default executors are confined.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    /// Where file commands and `working_dir` may point.
    pub paths: PathPolicy,
    /// What Landlock enforces on `BASH_EXEC` (writes beneath the roots; each scope in a
    /// domain of its own); `None` when not asked for.
    pub landlock: Option<SandboxStatus>,
    /// How a stopped `BASH_EXEC`'s processes are all found (`None`: no `BASH_EXEC`).
    pub process_trees: Option<TreeMechanism>,
}

impl Registry {
    /// An empty registry: every command type is `UNSUPPORTED_COMMAND_TYPE` until registered.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry with every executor and default settings.
    pub fn with_defaults() -> Self {
        Self::with_config(RegistryConfig::default())
    }

    /// A registry with every executor, set up by `config`.
    pub fn with_config(config: RegistryConfig) -> Self {
        let paths = config.paths.clone();
        let processes = ProcessTable::with_id_prefix(
            config.processes,
            config.process_id_prefix.clone().unwrap_or_default(),
        );
        let mut bash = BashExec::new(config.bash.clone())
            .with_paths(paths.clone())
            .with_processes(processes.clone());
        let mut landlock = None;
        let mut sandbox = None;
        if config.landlock {
            let (started, status) = Sandbox::start(paths.roots(), processes.clone());
            if let Some(started) = started {
                let started = Arc::new(started);
                bash = bash.with_sandbox(Arc::clone(&started));
                sandbox = Some(started);
            }
            landlock = Some(status);
        }
        let registry = Self {
            inner: Arc::new(Inner {
                confinement: Confinement {
                    paths: paths.clone(),
                    landlock,
                    process_trees: Some(bash.tree_mechanism()),
                },
                processes: processes.clone(),
                sandbox,
                ..Inner::default()
            }),
        };
        let bash_actor = ActorConfig {
            default_timeout: config.bash.default_timeout,
            ..config.bash_actor.clone()
        };
        registry.register_with(CommandType::BashExec, bash, bash_actor);
        let files = [
            (
                CommandType::FileRead,
                Arc::new(FileRead::new(paths.clone())) as Arc<dyn Executor>,
            ),
            (
                CommandType::FileWrite,
                Arc::new(FileWrite::new(paths.clone())),
            ),
            (
                CommandType::PatchFile,
                Arc::new(PatchFile::new(paths.clone())),
            ),
            (
                CommandType::ListDirectory,
                Arc::new(ListDirectory::new(paths)),
            ),
        ];
        for (ty, executor) in files {
            registry.register_arc(ty, executor, config.file_actor.clone());
        }
        let input = RequestUserInput::new(config.input_broker.clone());
        registry.register_with(CommandType::RequestUserInput, input, config.input_actor);
        let process_actor = ActorConfig {
            // Reads wait for output (`wait_ms`), inputs for replies: many at once.
            max_concurrent: WAITING_ACTOR_LIMIT,
            ..ActorConfig::default()
        };
        let process_executors = [
            (
                CommandType::ProcessInput,
                Arc::new(ProcessInputExec::new(processes.clone())) as Arc<dyn Executor>,
            ),
            (
                CommandType::ProcessOutput,
                Arc::new(ProcessOutputExec::new(processes.clone())),
            ),
            (
                CommandType::ProcessKill,
                Arc::new(ProcessKillExec::new(processes.clone())),
            ),
            (
                CommandType::ProcessList,
                Arc::new(ProcessListExec::new(processes)),
            ),
        ];
        for (ty, executor) in process_executors {
            registry.register_arc(ty, executor, process_actor.clone());
        }
        registry
    }

    /// The background processes.
    pub fn processes(&self) -> &ProcessTable {
        &self.inner.processes
    }

    /// Serves `command_type` with `executor` (default limits), replacing any previous one.
    /// Commands already running on the previous executor finish there.
    pub fn register(&self, command_type: CommandType, executor: impl Executor) {
        self.register_with(command_type, executor, ActorConfig::default());
    }

    /// Like [`Registry::register`], with explicit actor limits.
    pub fn register_with(
        &self,
        command_type: CommandType,
        executor: impl Executor,
        config: ActorConfig,
    ) {
        self.register_arc(command_type, Arc::new(executor), config);
    }

    /// Like [`Registry::register_with`], for an executor that is already shared.
    pub fn register_arc(
        &self,
        command_type: CommandType,
        executor: Arc<dyn Executor>,
        config: ActorConfig,
    ) {
        let handle = lazy_actor(executor, config, self.inner.runtime.clone());
        self.inner.actors.insert(command_type, handle);
    }

    /// How the default executors are confined (allowed roots, Landlock status).
    pub fn confinement(&self) -> &Confinement {
        &self.inner.confinement
    }

    /// Whether an executor serves `command_type`.
    pub fn supports(&self, command_type: CommandType) -> bool {
        self.inner.actors.contains_key(&command_type)
    }

    /// Runs `command` in the default scope: [`Registry::execute_in`] with
    /// [`Scope::default`].
    pub async fn execute(&self, command: Command) -> Result<ResultStream, SubmitError> {
        self.execute_in(Scope::default(), command).await
    }

    /// Runs `command` in `scope` (generating its id if empty) and returns its result
    /// stream. The processes it starts belong to `scope`, and it sees only the processes
    /// of `scope` (docs/processes.md, "Scopes").
    ///
    /// Waits while `mailbox_capacity` commands of its type already wait for a slot. A
    /// command that must wait for a slot is told so at once: its stream starts with a
    /// `RUNNING` message whose `queue` note says `queued` (docs/contract.md §3,
    /// "Queueing"). Dropping the returned stream before its
    /// terminal message stops the command.
    pub async fn execute_in(
        &self,
        scope: Scope,
        mut command: Command,
    ) -> Result<ResultStream, SubmitError> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(SubmitError::ShuttingDown);
        }
        let command_type = command.command_type();
        let actor = self
            .inner
            .actors
            .get(&command_type)
            .map(|a| a.clone())
            .ok_or(SubmitError::NotRegistered(command_type))?;
        let id = command.ensure_command_id().to_owned();
        let inflight = &self.inner.runtime.inflight;
        let stop = inflight
            .claim(&id)
            .ok_or_else(|| SubmitError::DuplicateId(id.clone()))?;
        let mut claim = Claim {
            inflight,
            id: &id,
            armed: true,
        };
        let seat = actor
            .gauge
            .waiting_room
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| SubmitError::ShuttingDown)?;
        let (running_tx, running_rx) = mpsc::channel(RESULT_CHANNEL_CAPACITY);
        let (terminal_tx, terminal_rx) = oneshot::channel();
        let envelope = Envelope {
            command,
            running: running_tx,
            terminal: terminal_tx,
            stop: stop.clone(),
            scope,
            seat,
        };
        if actor.mailbox().send(envelope).await.is_err() {
            return Err(SubmitError::ShuttingDown);
        }
        claim.armed = false;
        Ok(ResultStream::new(
            id.clone(),
            command_type,
            running_rx,
            terminal_rx,
            stop,
        ))
    }

    /// Decodes and runs one JSON command in the default scope: [`Registry::execute_json_in`]
    /// with [`Scope::default`].
    pub async fn execute_json(&self, json: &str) -> ResultStream {
        self.execute_json_in(Scope::default(), json).await
    }

    /// Decodes and runs one JSON command in `scope`. Never fails: a command that cannot be
    /// decoded or accepted yields a stream holding its one `FAILED` result.
    pub async fn execute_json_in(&self, scope: Scope, json: &str) -> ResultStream {
        let command = match decode_command(json) {
            Ok(command) => command,
            Err(failure) => return ResultStream::from_result(failure.to_result()),
        };
        let id = command.command_id().to_owned();
        let command_type = command.command_type();
        match self.execute_in(scope, command).await {
            Ok(stream) => stream,
            Err(e) => ResultStream::from_result(e.to_result(&id, command_type.as_str())),
        }
    }

    /// Ends `scope`: stops every process of it (SIGTERM to the whole tree, SIGKILL after
    /// [`SCOPE_END_GRACE`]), including those starting now, and returns once they are gone.
    /// Its exited processes are forgotten, and its Landlock domain (`--landlock`) ends.
    /// Commands of the scope still running are not stopped (their front door owns them),
    /// and the scope may be used again (in a new domain). A registry whose executors run
    /// elsewhere ends the scope there too (its [`ScopeEnder`]).
    pub async fn end_scope(&self, scope: &Scope) {
        self.inner.processes.end_scope(scope, SCOPE_END_GRACE).await;
        if let Some(sandbox) = &self.inner.sandbox {
            sandbox.end_scope(scope);
        }
        if let Some(ender) = self.inner.scope_ender.get() {
            ender.end_scope(scope.clone()).await;
        }
    }

    /// Sets who ends scopes whose processes live elsewhere (once; later calls are
    /// ignored and return false).
    pub fn set_scope_ender(&self, ender: Arc<dyn ScopeEnder>) -> bool {
        self.inner.scope_ender.set(ender).is_ok()
    }

    /// The number of scopes with a Landlock domain now (`--landlock`; 0 without it).
    pub fn landlock_domains(&self) -> usize {
        self.inner.sandbox.as_ref().map_or(0, |s| s.domains())
    }

    /// Cancels the in-flight command `command_id`, wherever it runs. False when no such
    /// command is in flight.
    pub fn cancel(&self, command_id: &str) -> bool {
        self.inner
            .runtime
            .inflight
            .stop(command_id, StopReason::Cancelled)
    }

    /// How busy each command type's actor is: its limit, the commands running, the
    /// commands queued for a slot.
    pub fn load(&self) -> BTreeMap<CommandType, ActorLoad> {
        self.inner
            .actors
            .iter()
            .map(|actor| (*actor.key(), actor.value().gauge.load()))
            .collect()
    }

    /// The deadline a command of `command_type` gets when it asks for none (`None`: it
    /// has none, or the type is not registered).
    pub fn default_timeout(&self, command_type: CommandType) -> Option<Duration> {
        self.inner
            .actors
            .get(&command_type)
            .and_then(|actor| actor.default_timeout())
    }

    /// Ids of the commands accepted and not yet finished.
    pub fn in_flight(&self) -> Vec<String> {
        self.inner.runtime.inflight.ids()
    }

    /// Number of commands accepted and not yet finished.
    pub fn in_flight_count(&self) -> usize {
        self.inner.runtime.inflight.len()
    }

    /// Stops accepting commands, lets running ones go on for up to `grace`, cancels the
    /// rest, and returns once every accepted command has its terminal result.
    pub async fn shutdown(&self, grace: Duration) {
        self.inner.closed.store(true, Ordering::Release);
        let runtime = &self.inner.runtime;
        runtime.shutdown.cancel();
        runtime.tracker.close();
        if tokio::time::timeout(grace, runtime.tracker.wait())
            .await
            .is_err()
        {
            runtime.inflight.stop_all(StopReason::ShuttingDown);
            runtime.tracker.wait().await;
        }
        // Background processes outlive commands, not cmdr.
        self.inner.processes.shutdown(Duration::from_secs(2)).await;
    }
}
