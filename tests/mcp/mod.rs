//! MCP end to end (docs/contract.md §7): the tools over streamable HTTP (a real axum server on an
//! ephemeral port) and over stdio (the real `cmdr mcp` binary), driven by rmcp's own
//! client and by hand-written JSON-RPC, with real agent folders, a real SQLite file and
//! the fake LLM server.

mod cancel;
mod client;
use cmdr_test_support::fake_llm;
mod http;
mod limits;
mod processes;
mod queueing;
use cmdr_test_support::mcp_rpc as rpc;
mod stdio;
mod tools;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cmdr::agent::AgentLoop;
use cmdr::agents::AgentCatalog;
use cmdr::executors::PendingInputs;
use cmdr::llm::{LlmClient, LlmConfig, OpenAiClient};
use cmdr::server::{local_registry, AppState};
use cmdr::service::AgentService;
use cmdr::store::{SqliteStore, Store, StoredTurn};
use fake_llm::FakeLlm;
use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};
use tokio::task::JoinHandle;

/// A temp world: agents folder, database file, working folder.
///
/// Agents: `helper` (a description, commands `three` (valid), `broken` (invalid), a
/// non-JSON file), `other` (no commands folder at all).
pub(crate) struct World {
    dir: tempfile::TempDir,
}

impl World {
    pub(crate) fn new() -> World {
        cmdr::llm::OpenAiClient::install_crypto_provider();
        let world = World {
            dir: tempfile::tempdir().unwrap(),
        };
        let helper = world.agents().join("helper");
        std::fs::create_dir_all(&helper).unwrap();
        std::fs::write(
            helper.join("config.toml"),
            "description = \"Helps with things\"\n",
        )
        .unwrap();
        world.command("helper", "three", &three_steps());
        world.command("helper", "broken", r#"{"Description":"  ","items":[]}"#);
        std::fs::write(helper.join("commands/notes.txt"), "not a command").unwrap();
        std::fs::create_dir_all(world.agents().join("other")).unwrap();
        std::fs::create_dir_all(world.work()).unwrap();
        world
    }

    pub(crate) fn agents(&self) -> PathBuf {
        self.dir.path().join("agents")
    }

    pub(crate) fn db(&self) -> PathBuf {
        self.dir.path().join("data/cmdr.sqlite3")
    }

    pub(crate) fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    pub(crate) fn command(&self, agent: &str, name: &str, json: &str) {
        let dir = self.agents().join(agent).join("commands");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.json")), json).unwrap();
    }

    /// The shared state over this world (with `llm` as the model, if any), and its store.
    pub(crate) fn state(
        &self,
        llm: Option<&FakeLlm>,
        token: Option<&str>,
    ) -> (AppState, Arc<dyn Store>) {
        let client = llm.map(|llm| {
            Arc::new(OpenAiClient::new(LlmConfig::new(llm.base_url(), "fake-model")).unwrap())
                as Arc<dyn LlmClient>
        });
        let inputs = PendingInputs::new();
        let registry = local_registry(&inputs);
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&self.db()).unwrap());
        let service = AgentService::new(
            AgentCatalog::new(self.agents()),
            Arc::clone(&store),
            AgentLoop::new(client, registry.clone()),
            self.work(),
        );
        let state =
            AppState::new(service, registry, inputs, token.map(str::to_owned), None).unwrap();
        (state, store)
    }
}

pub(crate) fn three_steps() -> String {
    json!({
        "Description": "Three steps",
        "items": [
            {"type": "message", "role": "user", "content": ["Step one"]},
            {"type": "message", "role": "user", "content": ["Step two"]},
            {"type": "message", "role": "user", "content": ["Step three"]}
        ]
    })
    .to_string()
}

/// The MCP HTTP router of `state`, served on 127.0.0.1 on a free port.
pub(crate) struct Server {
    /// `http://127.0.0.1:PORT`
    pub(crate) base: String,
    pub(crate) state: AppState,
    task: JoinHandle<()>,
}

impl Server {
    pub(crate) async fn start(state: AppState) -> Server {
        Self::start_with(state, cmdr::mcp::SessionLimits::default()).await
    }

    /// The router with these session limits.
    pub(crate) async fn start_with(state: AppState, limits: cmdr::mcp::SessionLimits) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = cmdr::mcp::http_router_with(state.clone(), limits);
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Server {
            base: format!("http://{addr}"),
            state,
            task,
        }
    }

    /// The MCP endpoint.
    pub(crate) fn url(&self) -> String {
        format!("{}/mcp", self.base)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
        self.task.abort();
    }
}

/// An rmcp client that records the progress notifications it gets.
#[derive(Clone, Default)]
pub(crate) struct Recorder {
    pub(crate) progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

pub(crate) type Client = RunningService<RoleClient, Recorder>;

/// rmcp's streamable-HTTP client connected (initialized) to `url`.
pub(crate) async fn http_client(url: &str, token: Option<&str>) -> (Client, Recorder) {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    let recorder = Recorder::default();
    let client = recorder.clone().serve(transport).await.unwrap();
    (client, recorder)
}

/// `tools/call` arguments from a JSON object.
pub(crate) fn call(name: &'static str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(name).with_arguments(args)
}

/// The JSON of a tool result's one text content.
pub(crate) fn result_json(result: &CallToolResult) -> Value {
    assert_eq!(result.content.len(), 1, "one content block: {result:?}");
    let text = &result.content[0]
        .as_text()
        .unwrap_or_else(|| panic!("text content: {result:?}"))
        .text;
    serde_json::from_str(text).unwrap_or_else(|e| panic!("JSON text ({e}): {text}"))
}

/// Waits (at most 10 s) until `conversation_id` has a turn with status `stopped`.
pub(crate) async fn wait_stopped_turn(
    store: &Arc<dyn Store>,
    conversation_id: &str,
) -> Vec<StoredTurn> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let turns = store.turns(conversation_id).await.unwrap();
        if turns
            .iter()
            .any(|t| t.status == cmdr::agent::TurnStatus::Stopped)
        {
            return turns;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no stopped turn in {conversation_id}: {turns:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
