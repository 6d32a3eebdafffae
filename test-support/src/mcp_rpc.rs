//! Hand-written JSON-RPC over streamable HTTP, for exact wire assertions: `initialize`
//! (protocol 2025-06-18, so the server keeps a session), then requests whose answers are
//! read from the SSE response as they arrive.

use futures_util::StreamExt;
use serde_json::{json, Value};

/// The protocol version this client speaks.
pub const PROTOCOL: &str = "2025-06-18";

/// One initialized MCP session over HTTP.
pub struct Rpc {
    pub http: reqwest::Client,
    pub url: String,
    pub token: Option<String>,
    pub session: Option<String>,
    next_id: u64,
}

impl Rpc {
    /// Initializes a session at `url` (with `token` as bearer token, if any).
    pub async fn connect(url: &str, token: Option<&str>) -> (Rpc, Value) {
        let mut rpc = Rpc {
            http: reqwest::Client::new(),
            url: url.to_owned(),
            token: token.map(str::to_owned),
            session: None,
            next_id: 1,
        };
        let body = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "hand-written", "version": "0"}
            }
        });
        let response = rpc.post(&body).await;
        assert_eq!(response.status(), 200, "initialize");
        rpc.session = response
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_owned());
        let init = read_response(response, &json!(0)).await;
        let notified = rpc
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert!(notified.status().is_success(), "{}", notified.status());
        (rpc, init)
    }

    /// POSTs one JSON-RPC message with the session's headers.
    pub async fn post(&self, body: &Value) -> reqwest::Response {
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(session) = &self.session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", PROTOCOL);
        }
        request.send().await.unwrap()
    }

    /// Sends a request; returns its id and the HTTP response carrying the answer.
    pub async fn send(&mut self, method: &str, params: Value) -> (Value, reqwest::Response) {
        let id = json!(self.next_id);
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let response = self.post(&body).await;
        assert_eq!(response.status(), 200, "{method}");
        (id, response)
    }

    /// A request's whole JSON-RPC answer (with `result` or `error`).
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let (id, response) = self.send(method, params).await;
        read_response(response, &id).await
    }

    /// `tools/call`; the whole JSON-RPC answer.
    pub async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await
    }
}

/// Reads `response` (JSON or SSE) until the answer to request `id`.
pub async fn read_response(response: reqwest::Response, id: &Value) -> Value {
    let sse = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"));
    if !sse {
        return response.json().await.unwrap();
    }
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    while let Some(chunk) = body.next().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let data: Vec<&str> = event
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            if data.is_empty() {
                continue;
            }
            let Ok(message) = serde_json::from_str::<Value>(&data.join("\n")) else {
                continue;
            };
            if message.get("id") == Some(id)
                && (message.get("result").is_some() || message.get("error").is_some())
            {
                return message;
            }
        }
    }
    panic!("the stream ended without the answer to request {id}; left: {buffer}")
}

/// The JSON of a `tools/call` answer's one text content, and its `isError`.
pub fn tool_json(answer: &Value) -> (Value, bool) {
    let result = answer
        .get("result")
        .unwrap_or_else(|| panic!("a result: {answer}"));
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("text content: {answer}"));
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    (serde_json::from_str(text).unwrap(), is_error)
}

/// Asserts `answer` is a JSON-RPC error with `code` and `data.code`; returns its message.
pub fn assert_error(answer: &Value, code: i64, data_code: &str) -> String {
    let error = answer
        .get("error")
        .unwrap_or_else(|| panic!("expected an error, got {answer}"));
    assert_eq!(error["code"], code, "{answer}");
    assert_eq!(error["data"]["code"], data_code, "{answer}");
    let message = error["message"].as_str().unwrap().to_owned();
    assert!(!message.is_empty());
    message
}
