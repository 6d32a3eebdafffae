//! [`App::build`]: the one place cmdr is put together. Every front door that runs agents
//! (`serve`, `mcp`, `chat`, `commands`) turns its flags into an [`AppConfig`] and gets an
//! [`App`]: the registry (in-process, or the worker pool over NATS), the model client,
//! the agent service over the conversation store, and the store recovered once from
//! runs a dead cmdr left open (docs/architecture.md, "The composition root").

use std::path::PathBuf;
use std::sync::Arc;

use cmdr_executors::{InputBroker, Registry};

use super::{RegistryBuilder, SetupError};
use crate::agent::AgentLoop;
use crate::agents::AgentCatalog;
use crate::llm::LlmClient;
use crate::nats::connect::NatsConnect;
use crate::nats::producer::Producer;
use crate::nats::remote::RemoteExecutor;
use crate::service::AgentService;
use crate::store::{SqliteStore, Store};

/// Where commands run.
pub enum Executors {
    /// In this process, as the builder says (boxed: it is large).
    Local(Box<RegistryBuilder>),
    /// On the worker pool reached by `connect`, `max_concurrent` commands of a type in
    /// flight at once (`--nats`).
    Remote {
        /// How to reach the bus (boxed: it is large).
        connect: Box<NatsConnect>,
        /// Commands of one type in flight at once.
        max_concurrent: usize,
    },
}

/// The conversation store.
pub enum StoreChoice {
    /// The SQLite file at this path (its failure to open is a [`SetupError::Database`]).
    Open(PathBuf),
    /// A store the front door opened itself (`cmdr chat` falls back to one in memory);
    /// `saved`: whether it outlives the process (only such a store is recovered).
    Given {
        /// The store.
        store: Arc<dyn Store>,
        /// Whether it is on disk.
        saved: bool,
    },
}

/// What a front door asks of [`App::build`].
pub struct AppConfig {
    /// Where commands run.
    pub executors: Executors,
    /// Who answers `REQUEST_USER_INPUT` (the server's pending answers, the chat's
    /// terminal); `None`: such questions fail clearly.
    pub questions: Option<Arc<dyn InputBroker>>,
    /// The model, if one is configured (`None` for front doors that run no agent).
    pub llm: Option<Arc<dyn LlmClient>>,
    /// The conversation store.
    pub store: StoreChoice,
    /// The agents folder.
    pub agents_dir: PathBuf,
    /// Where runs without a working folder start.
    pub default_cwd: PathBuf,
    /// End what a killed cmdr left running on this host before starting (servers, whose
    /// shells are marked for it: `crate::orphans`).
    pub reap_orphans: bool,
}

/// cmdr, put together.
pub struct App {
    /// Agents, conversations and runs, over the registry and the store.
    pub service: AgentService,
    /// Where every command runs (the one the agent loop uses too).
    pub registry: Registry,
    /// The NATS connection commands go through, with [`Executors::Remote`].
    pub nats: Option<async_nats::Client>,
}

impl App {
    /// Builds the registry (local or remote), opens and recovers the store, and wires
    /// the agent service over them.
    pub async fn build(config: AppConfig) -> Result<App, SetupError> {
        if config.reap_orphans {
            reap_orphans().await;
        }
        let (registry, nats) = match config.executors {
            Executors::Local(builder) => {
                let builder = match config.questions {
                    Some(broker) => (*builder).input_broker(broker),
                    None => *builder,
                };
                (builder.build(), None)
            }
            Executors::Remote {
                connect,
                max_concurrent,
            } => {
                let (registry, client) =
                    remote_registry(&connect, config.questions, max_concurrent).await?;
                (registry, Some(client))
            }
        };
        let (store, saved): (Arc<dyn Store>, bool) = match config.store {
            StoreChoice::Open(path) => match SqliteStore::open(&path) {
                Ok(store) => (Arc::new(store), true),
                Err(source) => return Err(SetupError::Database { path, source }),
            },
            StoreChoice::Given { store, saved } => (store, saved),
        };
        if saved {
            crate::recovery::recover_or_log(store.as_ref()).await;
        }
        let service = AgentService::new(
            AgentCatalog::new(config.agents_dir),
            store,
            AgentLoop::new(config.llm, registry.clone()),
            config.default_cwd,
        );
        Ok(App {
            service,
            registry,
            nats,
        })
    }
}

/// Ends what a killed cmdr left running: a server kills its processes whenever it ends
/// normally, so its shells are marked like a worker's; once it is dead (SIGKILL, OOM),
/// whatever of theirs still runs is an orphan.
async fn reap_orphans() {
    match tokio::task::spawn_blocking(crate::orphans::reap_dead_workers).await {
        Ok(killed) if !killed.is_empty() => {
            tracing::warn!(?killed, "ended processes a killed cmdr left behind");
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("sweeping for orphans: {e}"),
    }
}

/// A registry whose commands run on the worker pool reached by `connect`, `max_concurrent`
/// of a type in flight at once; workers' questions are answered by `questions`.
async fn remote_registry(
    connect: &NatsConnect,
    questions: Option<Arc<dyn InputBroker>>,
    max_concurrent: usize,
) -> Result<(Registry, async_nats::Client), SetupError> {
    let client = connect.connect().await?;
    let mut producer = Producer::new(client.clone())
        .with_id(&connect.producer_id())
        .map_err(|e| SetupError::Flag(format!("--producer-id: {e}")))?;
    if let Some(questions) = questions {
        producer = producer.with_input_broker(questions);
    }
    Ok((
        RemoteExecutor::registry_with_limit(producer, max_concurrent),
        client,
    ))
}
