//! Discovery, conversations and health.

use reqwest::StatusCode;
use serde_json::json;

use crate::http::fake_llm::{FakeLlm, Reply};
use crate::http::support::{assert_error, server, start, Options};

#[tokio::test]
async fn health_reports_the_parts() {
    let llm = FakeLlm::start(vec![]).await;
    let server = server(&llm).await;
    let (status, body) = server.get("/health").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "ok");
    assert_eq!(body["persistence"], "ok");
    assert_eq!(body["nats"], "off");
    assert_eq!(body["llm"], true);
    assert!(body["version"].is_string());
    assert!(body["uptimeSecs"].is_u64());

    let without_model = start(None, Options::default()).await;
    let (_, body) = without_model.get("/health").await;
    assert_eq!(body["llm"], false);
}

#[tokio::test]
async fn agents_and_their_commands_are_listed() {
    let llm = FakeLlm::start(vec![]).await;
    let server = server(&llm).await;
    let (status, body) = server.get("/agents").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"agents": [
            {"name": "helper", "description": "Helps."},
            {"name": "other", "description": ""}
        ]})
    );

    let (status, body) = server.get("/agents/helper/commands").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"commands": [
            {"name": "broken", "description": "Invalid command file", "disabled": true},
            {"name": "three", "description": "Three steps"}
        ]})
    );
    let (status, body) = server.get("/agents/other/commands").await;
    assert_eq!((status, body), (StatusCode::OK, json!({"commands": []})));

    // Read from disk on every call.
    server.world.command(
        "other",
        "hello",
        r#"{"Description": "Say hello", "items": [{"type": "message", "role": "user", "content": ["hello"]}]}"#,
    );
    let (_, body) = server.get("/agents/other/commands").await;
    assert_eq!(body["commands"][0]["name"], "hello");

    let answer = server.get("/agents/nobody/commands").await;
    assert_error(&answer, 404, "not_found", "AGENT_NOT_FOUND");
}

#[tokio::test]
async fn conversations_turns_and_archiving() {
    let llm = FakeLlm::start(vec![Reply::text("Hi there.")]).await;
    let server = server(&llm).await;
    let (status, run) = server
        .post("/agents/helper/run", json!({"instruction": "Say hi"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    let id = run["conversationId"].as_str().unwrap().to_owned();

    let (status, body) = server.get("/conversations").await;
    assert_eq!(status, StatusCode::OK);
    let list = body["conversations"].as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(list[0]["agentName"], "helper");
    assert_eq!(list[0]["title"], "Say hi");
    assert_eq!(list[0]["archived"], false);
    for key in ["createdAt", "updatedAt"] {
        assert!(list[0][key].is_string(), "{key}");
    }
    let (_, body) = server.get("/conversations?agentName=helper").await;
    assert_eq!(body["conversations"].as_array().unwrap().len(), 1);
    let (_, body) = server.get("/conversations?agentName=other").await;
    assert_eq!(body, json!({"conversations": []}));
    let (_, body) = server.get("/conversations?agentName=").await;
    assert_eq!(body["conversations"].as_array().unwrap().len(), 1);

    let (status, body) = server.get(&format!("/conversations/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["id"], id.as_str());

    let turns = server.turns(&id).await;
    let summary: Vec<_> = turns
        .iter()
        .map(|t| (t["role"].clone(), t["content"].clone(), t["status"].clone()))
        .collect();
    assert_eq!(
        summary,
        [
            (json!("user"), json!("Say hi"), json!("ok")),
            (json!("assistant"), json!("Hi there."), json!("ok")),
        ]
    );
    for turn in &turns {
        assert_eq!(turn["conversationId"], id.as_str());
        assert!(turn["id"].is_string() && turn["createdAt"].is_string());
    }

    let (status, body) = server
        .post(&format!("/conversations/{id}/archive"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"conversationId": id, "archived": true}));
    let (_, body) = server.get(&format!("/conversations/{id}")).await;
    assert_eq!(body["archived"], true);
    let refused = server
        .post(
            "/agents/helper/run",
            json!({"instruction": "more", "conversationId": id}),
        )
        .await;
    assert_error(&refused, 400, "invalid_request", "CONVERSATION_ARCHIVED");
    let (status, body) = server
        .post(&format!("/conversations/{id}/unarchive"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"conversationId": id, "archived": false}));

    for answer in [
        server.get("/conversations/nope/turns").await,
        server.get("/conversations/nope").await,
        server.post("/conversations/nope/archive", json!({})).await,
        server
            .post("/conversations/nope/unarchive", json!({}))
            .await,
    ] {
        assert_error(&answer, 404, "not_found", "CONVERSATION_NOT_FOUND");
    }
}
