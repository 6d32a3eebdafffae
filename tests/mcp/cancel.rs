//! Aborting: a client's `notifications/cancelled`, a dropped HTTP request and server
//! shutdown all stop the run, whose `stopped` turn is persisted.

use std::time::Duration;

use cmdr::mcp::CmdrMcp;
use rmcp::ServiceExt;
use serde_json::json;

use crate::mcp::fake_llm::{FakeLlm, Reply};
use crate::mcp::rpc::Rpc;
use crate::mcp::{call, wait_stopped_turn, Recorder, Server, World};

/// The id of the one conversation of `helper`, once it exists.
async fn only_conversation(state: &cmdr::server::AppState) -> String {
    for _ in 0..200 {
        let conversations = state.service.conversations(Some("helper")).await.unwrap();
        if let Some(c) = conversations.first() {
            return c.id.clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no conversation was created")
}

#[tokio::test]
async fn notifications_cancelled_stops_the_run_and_persists_the_stopped_turn() {
    let world = World::new();
    let llm = FakeLlm::start(vec![Reply::Hang(vec!["thinking hard".into()])]).await;
    let (state, store) = world.state(Some(&llm), None);

    // rmcp's client and the handler over an in-process pipe: no HTTP involved.
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let handler = CmdrMcp::new(state.clone());
    let served = tokio::spawn(async move {
        let running = handler.serve(server_io).await.unwrap();
        let _ = running.waiting().await;
    });
    let client = Recorder::default().serve(client_io).await.unwrap();
    let peer = client.peer().clone();
    let pending = tokio::spawn(async move {
        peer.call_tool(call(
            "run_agent_instruction",
            json!({"agentName": "helper", "instruction": "take your time"}),
        ))
        .await
    });
    llm.wait_requests(1).await;
    let id = only_conversation(&state).await;

    // Dropping the request future makes rmcp's client send `notifications/cancelled`.
    pending.abort();
    let turns = wait_stopped_turn(&store, &id).await;
    let stopped = turns.last().unwrap();
    assert_eq!(
        stopped.content, "thinking hard",
        "the partial reply is kept"
    );
    tokio::time::timeout(Duration::from_secs(10), llm.wait_disconnects(1))
        .await
        .expect("the model stream was closed");
    assert!(!state.service.locks().is_busy(&id), "the lock is released");
    client.cancel().await.unwrap();
    served.await.unwrap();
}

#[tokio::test]
async fn a_dropped_http_request_stops_the_run() {
    let world = World::new();
    let llm = FakeLlm::start(vec![Reply::Hang(vec!["partial".into()])]).await;
    let (state, store) = world.state(Some(&llm), None);
    let server = Server::start(state.clone()).await;
    let (mut rpc, _) = Rpc::connect(&server.url(), None).await;

    let (_, response) = rpc
        .send(
            "tools/call",
            json!({"name": "run_agent_instruction",
                   "arguments": {"agentName": "helper", "instruction": "go"}}),
        )
        .await;
    llm.wait_requests(1).await;
    let id = only_conversation(&state).await;
    let started = std::time::Instant::now();
    drop(response);
    drop(rpc);

    let turns = wait_stopped_turn(&store, &id).await;
    assert_eq!(turns.last().unwrap().content, "partial");
    println!(
        "run stopped {:?} after the client went away",
        started.elapsed()
    );
    tokio::time::timeout(Duration::from_secs(10), llm.wait_disconnects(1))
        .await
        .expect("the model stream was closed");
}

#[tokio::test]
async fn a_dropped_http_request_kills_a_running_bash_exec() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state.clone()).await;
    let (mut rpc, _) = Rpc::connect(&server.url(), None).await;
    let marker = world.work().join("finished");
    let pid_file = world.work().join("shell.pid");

    let (_, response) = rpc
        .send(
            "tools/call",
            json!({"name": "bash_exec",
            "arguments": {"command": format!(
                "echo $$ > {}; sleep 60; touch {}",
                pid_file.display(),
                marker.display()
            )}}),
        )
        .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let shell = loop {
        let pid = std::fs::read_to_string(&pid_file).unwrap_or_default();
        if let Ok(pid) = pid.trim().parse::<u32>() {
            break pid;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the command never ran"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(state.registry.in_flight_count(), 1, "the command runs");
    drop(response);
    drop(rpc);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while state.registry.in_flight_count() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the command was not stopped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // It ended long before its own minute: stopped, and its shell is gone (reaped), so
    // it can never reach its `touch`.
    assert!(
        !std::path::Path::new(&format!("/proc/{shell}")).exists(),
        "the shell {shell} still runs"
    );
    assert!(
        !marker.exists(),
        "the command finished instead of being killed"
    );
}

#[tokio::test]
async fn server_shutdown_stops_runs_in_progress() {
    // Nothing outside the run tells when the agent loop has read the model's first chunk,
    // so shutting down right after the model was asked may come before it ("" kept) or
    // after it ("half" kept). Either way the run must stop with a stopped turn; that the
    // partial reply is kept must show within some tries (it never would if it were lost;
    // on a loaded machine the shutdown wins the race more often: five tries were not
    // always enough).
    for attempt in 1..=20 {
        let content = shutdown_during_a_reply().await;
        if content == "half" {
            return;
        }
        assert_eq!(
            content, "",
            "attempt {attempt}: the stopped turn is the partial reply"
        );
    }
    panic!("in twenty tries the partial reply was never kept");
}

/// Shuts the server down while the model is mid-reply; the stopped turn's content.
async fn shutdown_during_a_reply() -> String {
    let world = World::new();
    let llm = FakeLlm::start(vec![Reply::Hang(vec!["half".into()])]).await;
    let (state, store) = world.state(Some(&llm), None);
    let server = Server::start(state.clone()).await;
    let (mut rpc, _) = Rpc::connect(&server.url(), None).await;
    let (_, _response) = rpc
        .send(
            "tools/call",
            json!({"name": "run_agent_instruction",
                   "arguments": {"agentName": "helper", "instruction": "go"}}),
        )
        .await;
    llm.wait_requests(1).await;
    let id = only_conversation(&state).await;
    state.shutdown.cancel();
    let turns = wait_stopped_turn(&store, &id).await;
    turns.last().unwrap().content.clone()
}
