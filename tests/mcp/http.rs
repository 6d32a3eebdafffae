//! The HTTP mounting: `/mcp` and `/`, the bearer token, the host guard.

use serde_json::json;

use crate::mcp::rpc::{tool_json, Rpc, PROTOCOL};
use crate::mcp::{call, http_client, result_json, Server, World};

fn initialize() -> serde_json::Value {
    json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}}
    })
}

#[tokio::test]
async fn the_endpoint_answers_at_mcp_and_at_the_root() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state).await;
    for url in [server.url(), format!("{}/", server.base)] {
        let (mut rpc, init) = Rpc::connect(&url, None).await;
        assert_eq!(init["result"]["serverInfo"]["name"], "cmdr", "{init}");
        assert!(rpc.session.is_some(), "a session for {PROTOCOL}");
        let listed = rpc.request("tools/list", json!({})).await;
        assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 14);
        let agents = rpc.call("list_agents", json!({})).await;
        assert_eq!(tool_json(&agents).0["agents"][0]["name"], "helper");
    }
}

#[tokio::test]
async fn the_auth_token_is_required_on_every_request() {
    let world = World::new();
    let (state, _) = world.state(None, Some("s3cret"));
    let server = Server::start(state).await;
    let http = reqwest::Client::new();

    for token in [None, Some("wrong")] {
        let mut request = http
            .post(server.url())
            .header("accept", "application/json, text/event-stream")
            .json(&initialize());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401);
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["code"], "UNAUTHORIZED");
    }
    let root = http
        .post(format!("{}/", server.base))
        .json(&initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(root.status(), 401, "the root endpoint too");

    // With the token: the hand-written client and rmcp's client both work.
    let (mut rpc, _) = Rpc::connect(&server.url(), Some("s3cret")).await;
    let agents = rpc.call("list_agents", json!({})).await;
    assert!(!tool_json(&agents).1);
    let (client, _) = http_client(&server.url(), Some("s3cret")).await;
    let agents = client
        .call_tool(call("list_agents", json!({})))
        .await
        .unwrap();
    assert_eq!(result_json(&agents)["agents"][1]["name"], "other");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn without_a_token_only_loopback_host_names_are_served() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state).await;
    let http = reqwest::Client::new();
    let port = server.base.rsplit(':').next().unwrap().to_owned();
    for (host, status) in [
        (format!("evil.example:{port}"), 403),
        (format!("localhost:{port}"), 200),
        (format!("127.0.0.1:{port}"), 200),
    ] {
        let response = http
            .post(server.url())
            .header("host", &host)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "Host: {host}");
    }
}

#[tokio::test]
async fn with_a_token_any_host_name_is_served() {
    let world = World::new();
    let (state, _) = world.state(None, Some("s3cret"));
    let server = Server::start(state).await;
    let response = reqwest::Client::new()
        .post(server.url())
        .header("host", "cmdr.lan:5012")
        .header("accept", "application/json, text/event-stream")
        .bearer_auth("s3cret")
        .json(&initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}
