//! A real `cmdr` HTTP server on 127.0.0.1:0 over a temp world (agents folder, SQLite
//! file, working folder), a real HTTP client, and an SSE reader.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use cmdr::agent::AgentLoop;
use cmdr::agents::AgentCatalog;
use cmdr::executors::PathPolicy;
use cmdr::executors::PendingInputs;
use cmdr::http::{router_with, HttpConfig};
use cmdr::llm::{LlmClient, LlmConfig, OpenAiClient};
use cmdr::server::{confined_registry, AppState};
use cmdr::service::AgentService;
use cmdr::store::{SqliteStore, Store};
use futures_core::Stream;
use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::fake_llm::FakeLlm;

pub use crate::PATIENCE;

/// A temp world: agents folder (`helper` with a three-step command and an invalid one,
/// `other` with none), database file, working folder.
pub struct World {
    dir: tempfile::TempDir,
}

impl World {
    pub fn new() -> World {
        let world = World {
            dir: tempfile::tempdir().unwrap(),
        };
        world.command("helper", "three", &three_steps());
        world.command("helper", "broken", r#"{"Description": "", "items": []}"#);
        std::fs::write(
            world.agents().join("helper/config.toml"),
            "description = \"Helps.\"\n",
        )
        .unwrap();
        std::fs::create_dir_all(world.agents().join("other")).unwrap();
        std::fs::create_dir_all(world.work()).unwrap();
        world
    }

    pub fn agents(&self) -> PathBuf {
        self.dir.path().join("agents")
    }

    pub fn db(&self) -> PathBuf {
        self.dir.path().join("data/cmdr.sqlite3")
    }

    /// Where runs without a working folder start.
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    pub fn command(&self, agent: &str, name: &str, json: &str) {
        let dir = self.agents().join(agent).join("commands");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.json")), json).unwrap();
    }
}

pub fn three_steps() -> String {
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

/// How to start a [`Server`].
#[derive(Default)]
pub struct Options {
    pub token: Option<String>,
    pub config: HttpConfig,
    /// Confine commands and working folders to the world's work folder.
    pub confined: bool,
}

/// A running server; stopped when dropped.
pub struct Server {
    pub url: String,
    pub http: reqwest::Client,
    pub state: AppState,
    pub world: World,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A server with a model (the fake LLM) and default settings.
pub async fn server(llm: &FakeLlm) -> Server {
    start(Some(llm), Options::default()).await
}

/// A server; without `llm` no model is configured.
pub async fn start(llm: Option<&FakeLlm>, options: Options) -> Server {
    OpenAiClient::install_crypto_provider();
    let world = World::new();
    let inputs = PendingInputs::new();
    let paths = match options.confined {
        true => PathPolicy::allow_roots([world.work()]).unwrap(),
        false => PathPolicy::unrestricted(),
    };
    let registry = confined_registry(&inputs, paths, false, Default::default());
    let client = llm.map(|llm| {
        Arc::new(OpenAiClient::new(LlmConfig::new(llm.base_url(), "fake-model")).unwrap())
            as Arc<dyn LlmClient>
    });
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&world.db()).unwrap());
    let service = AgentService::new(
        AgentCatalog::new(world.agents()),
        store,
        AgentLoop::new(client, registry.clone()),
        world.work(),
    );
    let state = AppState::new(service, registry, inputs, options.token, None).unwrap();
    let router = router_with(state.clone(), options.config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    Server {
        url: format!("http://{addr}"),
        http: reqwest::Client::new(),
        state,
        world,
        task,
    }
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// The `host:port` the server listens on.
    pub fn authority(&self) -> &str {
        self.url.trim_start_matches("http://")
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        let response = self.http.get(self.url(path)).send().await.unwrap();
        json_of(response).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let response = self
            .http
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        json_of(response).await
    }

    /// Posts raw text as the body.
    pub async fn post_raw(&self, path: &str, body: &str) -> (StatusCode, Value) {
        let response = self
            .http
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await
            .unwrap();
        json_of(response).await
    }

    /// Posts and returns the SSE response (after checking it is one).
    pub async fn sse(&self, path: &str, body: Value) -> SseReader {
        let response = self
            .http
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let content_type = response.headers()["content-type"].to_str().unwrap();
        assert_eq!(content_type, "text/event-stream");
        SseReader::new(response)
    }

    /// The turns of a conversation.
    pub async fn turns(&self, id: &str) -> Vec<Value> {
        let (status, body) = self.get(&format!("/conversations/{id}/turns")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["items"].as_array().unwrap().clone()
    }
}

/// The status and the JSON body.
pub async fn json_of(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, body)
}

/// Checks an error answer's shape: status, `error`, `code`, a message without internals.
#[track_caller]
pub fn assert_error(answer: &(StatusCode, Value), status: u16, error: &str, code: &str) {
    let (got, body) = answer;
    assert_eq!(got.as_u16(), status, "{body}");
    assert_eq!(body["error"], error, "{body}");
    assert_eq!(body["code"], code, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(!message.is_empty());
    for internal in [
        "/src/",
        ".rs:",
        "panicked",
        "stack backtrace",
        "RUST_BACKTRACE",
    ] {
        assert!(!message.contains(internal), "internals in {message}");
    }
    assert_eq!(
        body.as_object().unwrap().len(),
        3,
        "only error, code, message: {body}"
    );
}

type Chunks = Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// One SSE item.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A `data:` event, parsed as JSON.
    Data(Value),
    /// A comment line (`: keep-alive`).
    Comment(String),
}

/// Reads an SSE body event by event.
pub struct SseReader {
    chunks: Chunks,
    buffer: Vec<u8>,
    /// Every data event read so far.
    pub seen: Vec<Value>,
    /// The `Cmdr-Input-Key` header (`POST /commands`): the key answering its question.
    pub input_key: Option<String>,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> SseReader {
        let input_key = response
            .headers()
            .get("cmdr-input-key")
            .map(|v| v.to_str().unwrap().to_owned());
        SseReader {
            input_key,
            chunks: Box::pin(response.bytes_stream()),
            buffer: Vec::new(),
            seen: Vec::new(),
        }
    }

    /// The next item, `None` at the end of the body.
    pub async fn item(&mut self) -> Option<Item> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let text = String::from_utf8(block).unwrap();
                let mut data = Vec::new();
                let mut comment = None;
                for line in text.lines() {
                    if let Some(d) = line.strip_prefix("data: ") {
                        data.push(d.to_owned());
                    } else if let Some(c) = line.strip_prefix(':') {
                        comment = Some(c.trim().to_owned());
                    } else if !line.is_empty() {
                        panic!("unexpected SSE line {line:?}");
                    }
                }
                if !data.is_empty() {
                    assert_eq!(data.len(), 1, "one data line per event: {text:?}");
                    let value: Value = serde_json::from_str(&data[0]).unwrap();
                    self.seen.push(value.clone());
                    return Some(Item::Data(value));
                }
                if let Some(comment) = comment {
                    return Some(Item::Comment(comment));
                }
                continue;
            }
            let chunk = tokio::time::timeout(PATIENCE, self.chunks.next())
                .await
                .expect("an SSE chunk in time");
            match chunk {
                None => {
                    assert!(self.buffer.is_empty(), "trailing bytes {:?}", self.buffer);
                    return None;
                }
                Some(chunk) => self.buffer.extend_from_slice(&chunk.unwrap()),
            }
        }
    }

    /// The next data event (comments skipped), `None` at the end.
    pub async fn event(&mut self) -> Option<Value> {
        loop {
            match self.item().await? {
                Item::Data(value) => return Some(value),
                Item::Comment(_) => {}
            }
        }
    }

    /// Reads until an event satisfies `pred`, returns it.
    pub async fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let event = self.event().await.expect("the stream goes on");
            if pred(&event) {
                return event;
            }
        }
    }

    /// Reads every remaining event; returns all events of the stream.
    pub async fn all(mut self) -> Vec<Value> {
        while self.event().await.is_some() {}
        self.seen
    }
}

/// Whether a process is gone (or a zombie).
pub fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// Polls `condition` until it holds, failing after [`PATIENCE`].
pub async fn eventually(what: &str, mut condition: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !condition().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The events' `type`s.
pub fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

/// The lifecycle of one command in an event list: tool-call → tool-start → tool-result,
/// in that order; returns its `result` after checking its `status`.
#[track_caller]
pub fn lifecycle(events: &[Value], id: &str, status: &str) -> String {
    let position = |kind: &str| {
        events
            .iter()
            .position(|e| e["type"] == kind && e["commandId"] == id)
            .unwrap_or_else(|| panic!("no {kind} for {id} in {events:#?}"))
    };
    let (call, start, result) = (
        position("tool-call"),
        position("tool-start"),
        position("tool-result"),
    );
    assert!(call < start && start < result, "order of {id}");
    let result = &events[result];
    assert_eq!(result["status"], status, "{result}");
    result["result"].as_str().unwrap().to_owned()
}

/// The `commandId`s of the `tool-call` events, in order.
pub fn call_ids(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "tool-call")
        .map(|e| e["commandId"].as_str().unwrap().to_owned())
        .collect()
}
