//! What `cmdr serve` (REST, SSE, MCP over HTTP) and `cmdr mcp` (stdio) share: one
//! registry, one agent service, one table of questions waiting for an answer.
//!
//! Transports are thin translations onto [`AppState`]: no business logic lives in a
//! handler or a tool.

mod auth;
mod input_keys;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use cmdr_executors::{ActorLoad, EnvPolicy, PathPolicy, PendingInputs, Registry};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::app::{App, AppConfig, Executors, RegistryBuilder, SetupError, StoreChoice};
use crate::llm::LlmClient;
use crate::nats::connect::{connected_server, NatsConnect};
use crate::service::AgentService;

pub use auth::require_token;
pub use input_keys::{InputKeys, RequesterKey};

/// Everything a request handler or an MCP tool may use. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// Agents, conversations and runs.
    pub service: AgentService,
    /// The registry raw commands (`POST /commands`, executor tools) run in — the same
    /// one the agent loop uses.
    pub registry: Registry,
    /// `REQUEST_USER_INPUT` questions waiting for `POST /commands/:id/input`.
    pub inputs: PendingInputs,
    /// Who may answer them: the requester's key or the person's (never a command's).
    pub input_keys: InputKeys,
    /// When set, every route and tool requires `Authorization: Bearer <token>`.
    pub auth_token: Option<Arc<str>>,
    /// Bytes a combined result keeps (`?combine=true`, the MCP executor tools): head and
    /// tail, with an `OUTPUT_TRUNCATED` marker between (default
    /// [`cmdr_executors::DEFAULT_COMBINED_LIMIT`]).
    pub combined_limit: usize,
    /// The NATS connection commands go through (`--nats`), for `/health`.
    pub nats: Option<async_nats::Client>,
    /// Fired when the server shuts down: every run's token is a child of it (use
    /// [`AppState::run_token`]), so in-flight runs stop and persist as `stopped`.
    pub shutdown: CancellationToken,
    started: Instant,
}

/// How to build an [`AppState`].
#[derive(Debug, Clone)]
pub struct StateConfig {
    /// The agents folder.
    pub agents_dir: PathBuf,
    /// The SQLite file.
    pub db: PathBuf,
    /// Run commands on the worker pool reached this way instead of in-process.
    pub nats: Option<NatsConnect>,
    /// Bearer token protecting every route and tool.
    pub auth_token: Option<String>,
    /// Where runs without a working folder start.
    pub default_cwd: PathBuf,
    /// Where in-process commands and working folders may point (`--allow-root`).
    pub paths: PathPolicy,
    /// Confine in-process `BASH_EXEC` writes with Landlock (`--landlock`).
    pub landlock: bool,
    /// Bytes a combined result keeps (`--max-output`; `usize::MAX`: all).
    pub combined_limit: usize,
    /// How shells' environments are built (`--env-*`).
    pub shell_env: EnvPolicy,
    /// Commands of one type running at once (`--max-concurrent`), in-process or in
    /// flight to the workers.
    pub max_concurrent: usize,
    /// How long an unused shell session lives (`--session-idle-secs`).
    pub session_idle: std::time::Duration,
}

/// What `GET /health` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Health {
    /// `ok` while the server answers; `degraded` while file operations are wedged
    /// (see `executors`).
    pub status: &'static str,
    /// cmdr's version.
    pub version: &'static str,
    /// `ok`, or `error` when the database cannot be read.
    pub persistence: &'static str,
    /// `off` (in-process executors), `connected` or `disconnected`.
    pub nats: &'static str,
    /// The NATS server connected to (`host:port (name)`); shown to callers with the token.
    #[serde(rename = "natsServer", skip_serializing_if = "Option::is_none")]
    pub nats_server: Option<String>,
    /// Whether a model is configured.
    pub llm: bool,
    /// Seconds since start.
    #[serde(rename = "uptimeSecs")]
    pub uptime_secs: u64,
    /// What commands may reach.
    pub confinement: HealthConfinement,
    /// Blocking file operations still running after their command ended (a hung file
    /// system): each holds a thread of the blocking pool.
    pub executors: HealthExecutors,
}

/// The executors part of `GET /health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealthExecutors {
    /// How many file operations are wedged.
    #[serde(rename = "wedgedFileOperations")]
    pub wedged_file_operations: usize,
    /// How long the oldest has run, in seconds.
    #[serde(rename = "oldestWedgedSecs", skip_serializing_if = "Option::is_none")]
    pub oldest_wedged_secs: Option<u64>,
    /// Per command type: how many run at once (`limit`, `--max-concurrent`), how many run
    /// now, how many are queued for a slot (in flight to the workers, with `--nats`).
    pub concurrency: BTreeMap<&'static str, ActorLoad>,
}

/// The confinement part of `GET /health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealthConfinement {
    /// The allowed roots (`--allow-root`); empty: no limit.
    pub roots: Vec<String>,
    /// `off`, `enforced`, `partially enforced …` or `not enforced: <why>` (Landlock on
    /// `BASH_EXEC` writes).
    pub landlock: String,
    /// How confined file commands open paths: `off` (no roots), `kernel-checked (openat2)`
    /// or `checked, then opened by name: <why>` (kernels without `openat2`).
    #[serde(rename = "fileCommands")]
    pub file_commands: String,
    /// How a stopped command's processes are all found: `cgroup v2 (<dir>)` or
    /// `process group + environment marker …`; `off` when commands run elsewhere (NATS).
    #[serde(rename = "processTrees")]
    pub process_trees: String,
    /// `true` when `roots` was emptied because the caller did not show the token (a
    /// server with a token tells anonymous probes nothing about its file system).
    #[serde(rename = "rootsHidden", skip_serializing_if = "std::ops::Not::not")]
    pub roots_hidden: bool,
}

impl HealthConfinement {
    /// Empties the roots for a caller without the token.
    pub fn hide_roots(&mut self) {
        self.roots.clear();
        self.roots_hidden = true;
    }
}

impl AppState {
    /// A state over an existing service and registry (the registry's input broker must
    /// be `inputs`). Fails only when the OS gives no random bytes for the answer keys.
    pub fn new(
        service: AgentService,
        registry: Registry,
        inputs: PendingInputs,
        auth_token: Option<String>,
        nats: Option<async_nats::Client>,
    ) -> Result<Self, getrandom::Error> {
        let input_keys = InputKeys::new()?;
        Ok(Self {
            service,
            registry,
            inputs,
            input_keys,
            combined_limit: cmdr_executors::DEFAULT_COMBINED_LIMIT,
            auth_token: auth_token.filter(|t| !t.is_empty()).map(Arc::from),
            nats,
            shutdown: CancellationToken::new(),
            started: Instant::now(),
        })
    }

    /// A cancellation token for one run or command: fired by the client going away (the
    /// transport's business) or by server shutdown.
    pub fn run_token(&self) -> CancellationToken {
        self.shutdown.child_token()
    }

    /// cmdr put together for a server ([`App::build`]): its shells marked for orphan
    /// reaping, questions answered through the returned state's pending inputs.
    pub async fn build(
        config: StateConfig,
        llm: Option<Arc<dyn LlmClient>>,
    ) -> Result<Self, SetupError> {
        let inputs = PendingInputs::new();
        let executors = match config.nats {
            None => Executors::Local(Box::new(
                RegistryBuilder::new()
                    .confine(config.paths, config.landlock)
                    .shell_env(config.shell_env)
                    .max_concurrent(config.max_concurrent)
                    .session_idle(config.session_idle)
                    .worker_shells(),
            )),
            Some(connect) => Executors::Remote {
                connect: Box::new(connect),
                max_concurrent: config.max_concurrent,
            },
        };
        let app = App::build(AppConfig {
            executors,
            questions: Some(Arc::new(inputs.clone())),
            llm,
            store: StoreChoice::Open(config.db),
            agents_dir: config.agents_dir,
            default_cwd: config.default_cwd,
            reap_orphans: true,
        })
        .await?;
        let mut state = Self::new(
            app.service,
            app.registry,
            inputs,
            config.auth_token,
            app.nats,
        )
        .map_err(SetupError::Random)?;
        state.combined_limit = config.combined_limit;
        Ok(state)
    }

    /// The state of the parts `GET /health` reports.
    pub async fn health(&self) -> Health {
        let persistence = match self.service.store().conversation("").await {
            Ok(_) => "ok",
            Err(_) => "error",
        };
        let nats = match &self.nats {
            None => "off",
            Some(client) => match client.connection_state() {
                async_nats::connection::State::Connected => "connected",
                _ => "disconnected",
            },
        };
        let wedged = cmdr_executors::files::watch::wedged();
        let nats_server = self
            .nats
            .as_ref()
            .filter(|client| client.connection_state() == async_nats::connection::State::Connected)
            .map(connected_server);
        Health {
            status: if wedged.count == 0 { "ok" } else { "degraded" },
            version: env!("CARGO_PKG_VERSION"),
            persistence,
            nats,
            nats_server,
            llm: self
                .service
                .agent_loop()
                .model_id(&crate::agent::RunOptions::default())
                .is_some(),
            uptime_secs: self.started.elapsed().as_secs(),
            confinement: self.confinement(),
            executors: HealthExecutors {
                wedged_file_operations: wedged.count,
                oldest_wedged_secs: wedged.oldest.map(|d| d.as_secs()),
                concurrency: self
                    .registry
                    .load()
                    .into_iter()
                    .map(|(command_type, load)| (command_type.as_str(), load))
                    .collect(),
            },
        }
    }

    fn confinement(&self) -> HealthConfinement {
        let confinement = self.registry.confinement();
        HealthConfinement {
            roots: confinement
                .paths
                .roots()
                .iter()
                .map(|root| root.display().to_string())
                .collect(),
            landlock: confinement
                .landlock
                .as_ref()
                .map_or_else(|| "off".to_owned(), ToString::to_string),
            file_commands: file_commands(&confinement.paths),
            process_trees: confinement
                .process_trees
                .as_ref()
                .map_or_else(|| "off".to_owned(), ToString::to_string),
            roots_hidden: false,
        }
    }

    /// Whether `header` (the `Authorization` value, if any) passes the token check: the
    /// scheme `Bearer` in any case (RFC 7235), then the token, compared in constant time.
    pub fn authorized(&self, header: Option<&str>) -> bool {
        let Some(token) = &self.auth_token else {
            return true;
        };
        let Some((scheme, given)) = header.and_then(|h| h.trim().split_once(' ')) else {
            return false;
        };
        scheme.eq_ignore_ascii_case("bearer")
            && input_keys::constant_time_eq(given.trim_start().as_bytes(), token.as_bytes())
    }
}

/// How confined file commands open paths (see [`HealthConfinement::file_commands`]).
pub fn file_commands(paths: &PathPolicy) -> String {
    if !paths.is_restricted() {
        return "off".to_owned();
    }
    match cmdr_executors::files::kernel_check() {
        Ok(()) => "kernel-checked (openat2)".to_owned(),
        Err(why) => format!("checked, then opened by name: {why}"),
    }
}

/// The in-process executors, asking questions through `inputs`.
pub fn local_registry(inputs: &PendingInputs) -> Registry {
    confined_registry(
        inputs,
        PathPolicy::unrestricted(),
        false,
        EnvPolicy::default(),
    )
}

/// The in-process executors, asking questions through `inputs`, confined to `paths`
/// (and, with `landlock`, their shells' writes too), shells' environments built by
/// `shell_env`.
pub fn confined_registry(
    inputs: &PendingInputs,
    paths: PathPolicy,
    landlock: bool,
    shell_env: EnvPolicy,
) -> Registry {
    RegistryBuilder::new()
        .confine(paths, landlock)
        .shell_env(shell_env)
        .input_broker(Arc::new(inputs.clone()))
        .build()
}
