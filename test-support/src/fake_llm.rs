//! A real (HTTP over TCP on 127.0.0.1) fake of an OpenAI-compatible streaming
//! chat-completions server, scripted reply by reply.
//!
//! Every `POST /v1/chat/completions` takes the next [`Reply`] of the script; once the
//! script is exhausted every request gets `Reply::text("done.")` (a reply without
//! `<shell>` tags, so agent loops end). Each piece of a streamed reply goes out as its own
//! HTTP chunk (a channel-backed body), so chunk boundaries on the wire are real.
//!
//! ```ignore
//! let llm = FakeLlm::start(vec![Reply::chunks(["Hel", "lo"]), Reply::Status(500, "{}".into())]).await;
//! let client = OpenAiClient::new(LlmConfig::new(llm.base_url(), "fake-model"))?;
//! llm.wait_requests(1).await;
//! assert_eq!(llm.requests()[0]["model"], "fake-model");
//! ```

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch, Notify};
use tokio_util::sync::CancellationToken;

/// What the fake answers to one chat-completions request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A normal streamed reply: a role-only chunk, one chunk per string as
    /// `delta.content`, a `finish_reason: "stop"` chunk, then `data: [DONE]`.
    Text(Vec<String>),
    /// An HTTP error: this status and body (sent as JSON when it parses as JSON).
    Status(u16, String),
    /// A 200 `text/event-stream` whose body is exactly these pieces, one HTTP chunk each.
    Raw(Vec<String>),
    /// These content chunks (after the role chunk), then the connection is dropped
    /// abruptly: no `finish_reason`, no `[DONE]`, no end-of-body marker.
    CutAfter(Vec<String>),
    /// These content chunks (after the role chunk), then nothing more: the connection
    /// stays open until the client goes away, which [`FakeLlm::disconnects`] counts.
    Hang(Vec<String>),
    /// The first content chunks, then a pause until the [`Notify`] is notified (or the
    /// client goes away), then the second chunks and a normal end (`stop`, `[DONE]`).
    Gated(Vec<String>, Arc<Notify>, Vec<String>),
    /// These content chunks, then `finish_reason: "length"` (the server's reply-length
    /// limit) and `[DONE]`.
    Length(Vec<String>),
}

impl Reply {
    /// A normal reply streamed as one chunk.
    pub fn text(text: &str) -> Reply {
        Reply::Text(vec![text.to_owned()])
    }

    /// A normal reply streamed as these chunks.
    pub fn chunks<S: Into<String>>(chunks: impl IntoIterator<Item = S>) -> Reply {
        Reply::Text(chunks.into_iter().map(Into::into).collect())
    }
}

/// One request as received.
#[derive(Debug, Clone)]
struct Received {
    headers: HeaderMap,
    body: Vec<u8>,
}

/// State shared by the handler, the streaming tasks and the test.
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    received: Mutex<Vec<Received>>,
    /// Requests received so far.
    request_count: watch::Sender<usize>,
    /// Streamed replies the client abandoned before the fake finished them.
    disconnect_count: watch::Sender<usize>,
    /// Cancelled when the [`FakeLlm`] is dropped: ends every open stream.
    shutdown: CancellationToken,
}

/// The running fake server; shut down when dropped.
pub struct FakeLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl FakeLlm {
    /// Binds 127.0.0.1 on a free port and serves `script`, one reply per request.
    pub async fn start(script: Vec<Reply>) -> FakeLlm {
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            received: Mutex::new(Vec::new()),
            request_count: watch::channel(0).0,
            disconnect_count: watch::channel(0).0,
            shutdown: CancellationToken::new(),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            // Like real providers: small SSE chunks go out at once (no Nagle delay).
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            });
            axum::serve(listener, app).await.unwrap();
        });
        FakeLlm {
            addr,
            shared,
            server,
        }
    }

    /// The base URL to configure a client with: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Appends replies to the script (served after the ones still queued).
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.script.lock().unwrap().extend(replies);
    }

    /// Every request body received, in order, parsed as JSON.
    pub fn requests(&self) -> Vec<Value> {
        self.raw_requests()
            .iter()
            .map(|body| serde_json::from_slice(body).expect("request body is JSON"))
            .collect()
    }

    /// The exact bytes of every request body received, in order.
    pub fn raw_requests(&self) -> Vec<Vec<u8>> {
        self.shared
            .received
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.body.clone())
            .collect()
    }

    /// The headers of every request received, in order.
    pub fn headers(&self) -> Vec<HeaderMap> {
        self.shared
            .received
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.headers.clone())
            .collect()
    }

    /// The `Authorization` header of request `index` (0-based), if it had one.
    pub fn authorization(&self, index: usize) -> Option<String> {
        let headers = self.headers();
        let value = headers[index].get(header::AUTHORIZATION)?;
        Some(value.to_str().unwrap().to_owned())
    }

    /// How many requests arrived so far.
    pub fn request_count(&self) -> usize {
        *self.shared.request_count.borrow()
    }

    /// Waits until at least `n` requests have arrived.
    pub async fn wait_requests(&self, n: usize) {
        let mut rx = self.shared.request_count.subscribe();
        rx.wait_for(|count| *count >= n).await.unwrap();
    }

    /// How many streamed replies the client abandoned (closed the connection) before
    /// the fake had sent all of them — every ended [`Reply::Hang`] counts.
    pub fn disconnects(&self) -> usize {
        *self.shared.disconnect_count.borrow()
    }

    /// Waits until at least `n` client disconnects were seen.
    pub async fn wait_disconnects(&self, n: usize) {
        let mut rx = self.shared.disconnect_count.subscribe();
        rx.wait_for(|count| *count >= n).await.unwrap();
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
        self.server.abort();
    }
}

/// `POST /v1/chat/completions`: records the request, answers with the next reply.
async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let model = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("model")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| "fake-model".to_owned());
    let reply = shared
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| Reply::text("done."));
    let id = {
        let mut received = shared.received.lock().unwrap();
        received.push(Received {
            headers,
            body: body.to_vec(),
        });
        received.len()
    };
    shared.request_count.send_modify(|count| *count += 1);
    let chunk = ChunkMaker {
        id: format!("chatcmpl-fake-{id}"),
        model,
    };
    match reply {
        Reply::Status(status, body) => error_response(status, body),
        Reply::Raw(pieces) => stream_response(shared, Plan::finish(pieces)),
        Reply::Text(texts) => stream_response(shared, Plan::finish(chunk.complete(&texts))),
        Reply::Length(texts) => {
            let mut events = chunk.open(&texts);
            events.push(chunk.event(json!({}), json!("length")));
            events.push("data: [DONE]\n\n".to_owned());
            stream_response(shared, Plan::finish(events))
        }
        Reply::CutAfter(texts) => stream_response(
            shared,
            Plan {
                then: Then::Cut,
                ..Plan::finish(chunk.open(&texts))
            },
        ),
        Reply::Hang(texts) => stream_response(
            shared,
            Plan {
                then: Then::Hang,
                ..Plan::finish(chunk.open(&texts))
            },
        ),
        Reply::Gated(first, gate, second) => {
            let mut rest: Vec<String> = second.iter().map(|t| chunk.content(t)).collect();
            rest.extend(chunk.tail());
            let plan = Plan {
                then: Then::Gate(gate, rest),
                ..Plan::finish(chunk.open(&first))
            };
            stream_response(shared, plan)
        }
    }
}

/// An HTTP error reply.
fn error_response(status: u16, body: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap();
    let content_type = if serde_json::from_str::<Value>(&body).is_ok() {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    (status, [(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// Builds `chat.completion.chunk` SSE events in OpenAI's shape.
struct ChunkMaker {
    id: String,
    model: String,
}

impl ChunkMaker {
    fn event(&self, delta: Value, finish_reason: Value) -> String {
        let chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        });
        format!("data: {chunk}\n\n")
    }

    /// One content delta.
    fn content(&self, text: &str) -> String {
        self.event(json!({"content": text}), Value::Null)
    }

    /// The role-only first chunk, then the content chunks.
    fn open(&self, texts: &[String]) -> Vec<String> {
        let role = self.event(json!({"role": "assistant", "content": ""}), Value::Null);
        std::iter::once(role)
            .chain(texts.iter().map(|t| self.content(t)))
            .collect()
    }

    /// The `finish_reason: "stop"` chunk and `[DONE]`.
    fn tail(&self) -> Vec<String> {
        vec![
            self.event(json!({}), json!("stop")),
            "data: [DONE]\n\n".to_owned(),
        ]
    }

    /// A whole normal reply.
    fn complete(&self, texts: &[String]) -> Vec<String> {
        let mut events = self.open(texts);
        events.extend(self.tail());
        events
    }
}

/// How a streamed reply goes: these pieces, then …
struct Plan {
    pieces: Vec<String>,
    then: Then,
}

/// … what happens after the pieces.
enum Then {
    /// The body ends normally.
    Finish,
    /// The connection is dropped mid-body.
    Cut,
    /// Nothing more until the client goes away.
    Hang,
    /// Wait for the gate, then send these pieces and end normally.
    Gate(Arc<Notify>, Vec<String>),
}

impl Plan {
    fn finish(pieces: Vec<String>) -> Plan {
        Plan {
            pieces,
            then: Then::Finish,
        }
    }
}

type Piece = Result<Bytes, io::Error>;

/// A 200 `text/event-stream` response fed piece by piece by a task running `plan`.
fn stream_response(shared: Arc<Shared>, plan: Plan) -> Response {
    // Capacity 1: a piece is only queued once the previous one was taken by the server.
    let (tx, rx) = mpsc::channel::<Piece>(1);
    tokio::spawn(run_plan(shared, plan, tx));
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        let piece = rx.recv().await?;
        Some((piece, rx))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .unwrap()
}

/// Sends the pieces of `plan`; counts a disconnect when the client goes away first.
async fn run_plan(shared: Arc<Shared>, plan: Plan, tx: mpsc::Sender<Piece>) {
    let completed = tokio::select! {
        completed = send_plan(plan, &tx) => completed,
        () = shared.shutdown.cancelled() => return,
    };
    if !completed {
        shared.disconnect_count.send_modify(|count| *count += 1);
    }
}

/// `false` when the client went away before the plan was through.
async fn send_plan(plan: Plan, tx: &mpsc::Sender<Piece>) -> bool {
    if !send_all(tx, plan.pieces).await {
        return false;
    }
    match plan.then {
        Then::Finish => true,
        Then::Cut => {
            // An error from the body stream makes the server abort the connection.
            let _ = tx
                .send(Err(io::Error::other("fake LLM cut the connection")))
                .await;
            true
        }
        Then::Hang => {
            tx.closed().await;
            false
        }
        Then::Gate(gate, rest) => {
            tokio::select! {
                () = gate.notified() => send_all(tx, rest).await,
                () = tx.closed() => false,
            }
        }
    }
}

/// `false` when the client went away before every piece was handed over.
async fn send_all(tx: &mpsc::Sender<Piece>, pieces: Vec<String>) -> bool {
    for piece in pieces {
        if tx.send(Ok(Bytes::from(piece))).await.is_err() {
            return false;
        }
    }
    true
}
