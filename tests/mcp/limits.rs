//! What a hostile client cannot do to the MCP endpoint: send garbage and get anything but a
//! JSON-RPC error, open sessions without end, or drive it from a web page.

use std::time::Duration;

use cmdr::mcp::SessionLimits;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::mcp::rpc::PROTOCOL;
use crate::mcp::{Server, World};

fn initialize(id: u64) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}}
    })
}

/// POSTs `body` as it is, with this content type; the status and the JSON answer.
async fn post(server: &Server, body: &str, content_type: &str) -> (StatusCode, Value) {
    post_with(server, body, content_type, &[]).await
}

async fn post_with(
    server: &Server,
    body: &str,
    content_type: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new()
        .post(server.url())
        .header("content-type", content_type)
        .header("accept", "application/json, text/event-stream")
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    // A successful initialize answers as an SSE stream: take its one data line.
    let json = text
        .lines()
        .find_map(|line| line.strip_prefix("data: ").filter(|d| !d.is_empty()))
        .unwrap_or(&text);
    let value = serde_json::from_str(json).unwrap_or(Value::String(text.clone()));
    (status, value)
}

#[tokio::test]
async fn malformed_messages_get_json_rpc_errors() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state).await;
    let cases: [(&str, &str, i64, Value); 8] = [
        ("{not json", "application/json", -32700, Value::Null),
        ("hello", "text/plain", -32700, Value::Null),
        ("", "application/json", -32700, Value::Null),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            "application/json",
            -32600,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":7}"#,
            "application/json",
            -32600,
            json!(7),
        ),
        (
            r#"{"jsonrpc":"1.0","id":"x","method":"ping"}"#,
            "application/json",
            -32600,
            json!("x"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":42}"#,
            "application/json",
            -32600,
            json!(3),
        ),
        (r#""ping""#, "application/json", -32600, Value::Null),
    ];
    for (body, content_type, code, id) in cases {
        let (status, answer) = post(&server, body, content_type).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["jsonrpc"], "2.0", "{body}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
        assert_eq!(answer["id"], id, "{body}: {answer}");
        assert!(answer["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
}

/// The session cap is not a lock-out (issue 32.15): with the table full of sessions that
/// keep pinging, a new client still gets a session and works; the one closed for it is
/// the session used least recently (pings are not use), and the others go on.
#[tokio::test]
async fn pinging_sessions_cannot_lock_out_a_new_client() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let limits = SessionLimits {
        max_sessions: 3,
        idle: Duration::from_secs(600),
    };
    let server = Server::start_with(state, limits).await;
    let mut first = crate::mcp::rpc::Rpc::connect(&server.url(), None).await.0;
    let mut second = crate::mcp::rpc::Rpc::connect(&server.url(), None).await.0;
    let mut third = crate::mcp::rpc::Rpc::connect(&server.url(), None).await.0;
    let listed = first.call("list_processes", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
    for _ in 0..5 {
        for client in [&mut second, &mut third, &mut first] {
            let pong = client.request("ping", json!({})).await;
            assert!(pong.get("result").is_some(), "{pong}");
        }
    }
    let (mut newcomer, init) = crate::mcp::rpc::Rpc::connect(&server.url(), None).await;
    assert_eq!(init["result"]["serverInfo"]["name"], "cmdr", "{init}");
    let listed = newcomer.call("list_processes", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
    let ping = json!({"jsonrpc": "2.0", "id": 99, "method": "ping"});
    assert!(
        !second.post(&ping).await.status().is_success(),
        "the least-recently-used session was not the one closed"
    );
    for client in [&first, &third] {
        let status = client.post(&ping).await.status();
        assert!(
            status.is_success(),
            "a recently used session was closed: {status}"
        );
    }
}

#[tokio::test]
async fn web_pages_cannot_drive_the_endpoint() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state).await;
    let own = server.base.clone();
    let body = initialize(1).to_string();
    for origin in ["http://evil.example", "null", "http://localhost:1"] {
        let (status, answer) =
            post_with(&server, &body, "application/json", &[("origin", origin)]).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{origin}: {answer}");
        assert_eq!(answer["code"], "FORBIDDEN_ORIGIN", "{answer}");
        let response = reqwest::Client::new()
            .get(server.url())
            .header("origin", origin)
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::FORBIDDEN,
            "GET from {origin}"
        );
    }
    let (status, answer) = post_with(&server, &body, "application/json", &[("origin", &own)]).await;
    assert_eq!(status, StatusCode::OK, "own origin: {answer}");

    let mut headers = reqwest::header::HeaderMap::new();
    headers.append(
        "host",
        server.base.trim_start_matches("http://").parse().unwrap(),
    );
    headers.append("host", "evil.example".parse().unwrap());
    let response = reqwest::Client::new()
        .post(server.url())
        .headers(headers)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["code"], "DUPLICATE_HEADER", "{answer}");
}

/// A stateless request (protocol 2026-07-28: no session) carrying another session's
/// `Mcp-Session-Id` does not act in that session's scope, and its end does not end it:
/// the session's process is neither listed, read nor killed by it, and runs on.
#[tokio::test]
async fn a_stateless_request_cannot_borrow_a_session() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state).await;
    let (mut owner, _) = crate::mcp::rpc::Rpc::connect(&server.url(), None).await;
    let started = owner
        .call(
            "start_process",
            json!({"command": "echo up; sleep 60", "ready": {"output": "up"}}),
        )
        .await;
    let (started, is_error) = crate::mcp::rpc::tool_json(&started);
    assert!(!is_error, "{started}");
    let id = started["processId"].as_str().unwrap().to_owned();
    let session = owner.session.clone().expect("a session id");
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "borrower", "version": "0"}
    });
    for (n, (tool, arguments)) in [
        ("list_processes", json!({})),
        ("kill_process", json!({"process_id": id, "signal": "KILL"})),
        ("process_output", json!({"process_id": id})),
    ]
    .into_iter()
    .enumerate()
    {
        let body = json!({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments, "_meta": meta}});
        let headers = [
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", tool),
        ];
        let (_, answer) = post_with(&server, &body.to_string(), "application/json", &headers).await;
        let (result, _) = crate::mcp::rpc::tool_json(&answer);
        match tool {
            "list_processes" => assert_eq!(result["resultData"], "[]", "{answer}"),
            _ => assert_eq!(result["errorCode"], "PROCESS_NOT_FOUND", "{answer}"),
        }
    }
    let listed = owner.call("list_processes", json!({})).await;
    let (listed, _) = crate::mcp::rpc::tool_json(&listed);
    let entries: Vec<Value> = serde_json::from_str(listed["resultData"].as_str().unwrap()).unwrap();
    assert_eq!(entries.len(), 1, "{listed}");
    assert_eq!(
        entries[0]["state"], "running",
        "the borrower ended it: {listed}"
    );
}
