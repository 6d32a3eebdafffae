//! A client vanishing mid-stream from a real `cmdr serve` process. The in-process router
//! tests (`tests/http`) cover the same paths; these add the real binary and, for agent
//! runs, that the lock is really released: a new run on the conversation is accepted.

use std::time::Duration;

use serde_json::json;

use crate::fake_llm::{FakeLlm, Reply};
use crate::http_support::{eventually, gone, SseReader};
use crate::serve::{Options, Serve};
use crate::PATIENCE;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_command_client_gets_its_process_tree_killed() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(Vec::new()).await;
    let server = Serve::start_in(
        dir.path(),
        Options {
            llm: Some(&llm),
            ..Options::default()
        },
    )
    .await;
    let command = json!({"command_id": "gone-1", "commandType": "BASH_EXEC",
                         "command": "sleep 1000 & echo $!; wait"});
    let mut sse = server.sse("/commands", command).await;
    let first = sse.event().await.unwrap();
    let pid: i32 = first["resultData"]
        .as_str()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!gone(pid), "the background sleep runs");
    drop(sse);
    eventually("the whole process tree is killed", async || gone(pid)).await;
    assert_eq!(server.stop().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_agent_client_stops_the_run_and_frees_the_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![Reply::text(
        "<shell>sleep 1000 & echo $!; wait</shell>",
    )])
    .await;
    let server = Serve::start_in(
        dir.path(),
        Options {
            llm: Some(&llm),
            ..Options::default()
        },
    )
    .await;
    let mut sse = server
        .sse("/agents/helper/stream", json!({"message": "wait"}))
        .await;
    let id = sse.event().await.unwrap()["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();
    let output = sse.until(|e| e["type"] == "tool-output").await;
    let pid: i32 = output["content"].as_str().unwrap().trim().parse().unwrap();
    drop(sse);
    eventually("the command's process tree is killed", async || gone(pid)).await;
    let turns_path = format!("/conversations/{id}/turns");
    eventually("the stopped tool turn is persisted", async || {
        let turns = server.get(&turns_path).await;
        let last = turns["items"].as_array().unwrap().last().cloned();
        last.is_some_and(|t| t["role"] == "tool" && t["status"] == "stopped")
    })
    .await;

    // The lock goes with the run: a new run on the conversation is accepted (a 409 is
    // only allowed while the stopped run is still winding down) and completes.
    let body = json!({"message": "again", "conversationId": id});
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let response = loop {
        let response = server.post("/agents/helper/stream", &body).await;
        if response.status() != 409 {
            break response;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the conversation stays locked"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(response.status(), 200);
    let events = SseReader::new(response).all().await;
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "done", "reason": "completed"}),
        "{events:#?}"
    );
    assert_eq!(server.stop().await, 0);
}
