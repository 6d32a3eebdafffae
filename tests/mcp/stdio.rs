//! `cmdr mcp`: the real binary on stdio, driven by rmcp's child-process client.

use std::time::Duration;

use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::json;

use crate::mcp::fake_llm::{FakeLlm, Reply};
use crate::mcp::{call, result_json, Recorder, World};

/// `cmdr mcp` on `world`'s agents and store, in its working folder, with no model set.
fn cmdr_mcp_without_a_model(world: &World) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_cmdr"));
    command
        .arg("mcp")
        .arg("--agents-dir")
        .arg(world.agents())
        .arg("--db")
        .arg(world.db())
        .env_remove("CMDR_LLM_BASE_URL")
        .env_remove("CMDR_LLM_MODEL")
        .env_remove("CMDR_LLM_API_KEY")
        .current_dir(world.work());
    command
}

#[tokio::test]
async fn cmdr_mcp_serves_the_tools_on_stdio_and_exits_when_stdin_closes() {
    let world = World::new();
    let llm = FakeLlm::start(vec![
        Reply::text("<shell>echo via-stdio</shell>"),
        Reply::text("Finished."),
    ])
    .await;
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_cmdr"));
    command
        .arg("mcp")
        .env("CMDR_AGENTS_DIR", world.agents())
        .env("CMDR_DB", world.db())
        .env("CMDR_LLM_BASE_URL", llm.base_url())
        .env("CMDR_LLM_MODEL", "fake-model")
        .env_remove("CMDR_LLM_API_KEY")
        .env_remove("CMDR_AUTH_TOKEN")
        .current_dir(world.work());
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let client = Recorder::default().serve(transport).await.unwrap();

    let info = client.peer_info().expect("initialized");
    let server_info = info.server_info.clone().expect("server info");
    assert_eq!(server_info.name, "cmdr");
    assert_eq!(client.list_all_tools().await.unwrap().len(), 14);

    let agents = client
        .call_tool(call("list_agents", json!({})))
        .await
        .unwrap();
    assert_eq!(result_json(&agents)["agents"][0]["name"], "helper");

    let run = client
        .call_tool(call(
            "run_agent_instruction",
            json!({"agentName": "helper", "instruction": "use the shell"}),
        ))
        .await
        .unwrap();
    let run = result_json(&run);
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["answer"], "Finished.");

    let bash = client
        .call_tool(call("bash_exec", json!({"command": "echo stdio-ok"})))
        .await
        .unwrap();
    assert_eq!(result_json(&bash)["resultData"], "stdio-ok\n");

    let refused = client
        .call_tool(call(
            "run_agent_instruction",
            json!({"agentName": "nobody", "instruction": "x"}),
        ))
        .await
        .unwrap_err();
    let rmcp::ServiceError::McpError(error) = refused else {
        panic!("a JSON-RPC error: {refused:?}")
    };
    assert_eq!(error.code.0, -32602);
    assert_eq!(error.data.unwrap()["code"], "AGENT_NOT_FOUND");

    // Closing stdin ends the process (cleanly).
    client.cancel().await.unwrap();
    let mut stderr = stderr.expect("piped stderr");
    let mut logs = String::new();
    let _ = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut logs),
    )
    .await
    .expect("cmdr mcp exits when stdin closes");
}

#[tokio::test]
async fn cmdr_mcp_stdout_carries_only_protocol_and_eof_ends_the_process() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let world = World::new();
    let mut child = cmdr_mcp_without_a_model(&world)
        .env("RUST_LOG", "debug")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "list_commands", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "run_agent_instruction",
                          "arguments": {"agentName": "helper", "instruction": "hi"}}}),
    ];
    for message in &messages {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answers = std::collections::BTreeMap::new();
    while answers.len() < 3 {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("an answer in time")
            .unwrap()
            .expect("stdout open");
        let message: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carries only JSON-RPC ({e}): {line}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        if let Some(id) = message["id"].as_u64() {
            answers.insert(id, message);
        }
    }
    assert_eq!(answers[&1]["result"]["serverInfo"]["name"], "cmdr");
    let listing: serde_json::Value = serde_json::from_str(
        answers[&2]["result"]["content"][0]["text"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        listing["agents"][1],
        json!({"agentName": "other", "commands": []})
    );
    assert_eq!(answers[&3]["error"]["code"], 503);
    assert_eq!(answers[&3]["error"]["data"]["code"], "LLM_UNAVAILABLE");

    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("cmdr mcp exits when stdin closes")
        .unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(lines.next_line().await.unwrap(), None);
}

#[tokio::test]
async fn closing_stdin_mid_run_stops_the_run_and_persists_it_before_exiting() {
    use cmdr::store::{SqliteStore, Store};
    use tokio::io::AsyncWriteExt;

    let world = World::new();
    let llm = FakeLlm::start(vec![Reply::Hang(vec!["half a thought".into()])]).await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_cmdr"))
        .arg("mcp")
        .env("CMDR_AGENTS_DIR", world.agents())
        .env("CMDR_DB", world.db())
        .env("CMDR_LLM_BASE_URL", llm.base_url())
        .env("CMDR_LLM_MODEL", "fake-model")
        .env_remove("CMDR_LLM_API_KEY")
        .current_dir(world.work())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "run_agent_instruction",
                          "arguments": {"agentName": "helper", "instruction": "think"}}}),
    ] {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    tokio::time::timeout(Duration::from_secs(20), llm.wait_requests(1))
        .await
        .expect("the run asked the model");
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("cmdr mcp exits after stdin closed")
        .unwrap();
    assert!(status.success(), "{status}");

    let store = SqliteStore::open(&world.db()).unwrap();
    let conversations = store.conversations(Some("helper")).await.unwrap();
    assert_eq!(conversations.len(), 1);
    let turns = store.turns(&conversations[0].id).await.unwrap();
    let last = turns.last().unwrap();
    assert_eq!(last.status, cmdr::agent::TurnStatus::Stopped, "{turns:?}");
    assert_eq!(last.content, "half a thought");
}

#[tokio::test]
async fn closing_stdin_kills_the_sessions_processes() {
    let world = World::new();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_cmdr"));
    command
        .arg("mcp")
        .env("CMDR_AGENTS_DIR", world.agents())
        .env("CMDR_DB", world.db())
        .env_remove("CMDR_LLM_BASE_URL")
        .env_remove("CMDR_AUTH_TOKEN")
        .current_dir(world.work());
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let client = Recorder::default().serve(transport).await.unwrap();
    let started = client
        .call_tool(call(
            "start_process",
            json!({"command": "trap '' TERM; echo \"pid=$$\"; while :; do sleep 0.05; done",
                   "ready": {"output": "pid="}}),
        ))
        .await
        .unwrap();
    let started = result_json(&started);
    let text = started["resultData"].as_str().unwrap();
    let pid: i32 = text.trim().trim_start_matches("pid=").parse().unwrap();
    assert!(!cmdr_test_support::http::gone(pid), "{started}");

    client.cancel().await.unwrap();
    let mut stderr = stderr.expect("piped stderr");
    let mut logs = String::new();
    let _ = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut logs),
    )
    .await
    .expect("cmdr mcp exits when stdin closes");
    cmdr_test_support::http::eventually("the process is gone", async || {
        cmdr_test_support::http::gone(pid)
    })
    .await;
}

/// A client that sends requests and never reads a reply cannot keep `cmdr mcp` alive:
/// the replies fill its stdout (a socket nobody reads) until the write blocks, and still
/// the process ends soon after the client closes stdin, or after SIGTERM.
#[tokio::test]
async fn a_client_that_stops_reading_cannot_keep_cmdr_mcp_alive() {
    use std::os::fd::OwnedFd;
    use tokio::io::AsyncWriteExt;

    for stop in ["close stdin", "SIGTERM"] {
        let world = World::new();
        let (unread, stdout) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut child = cmdr_mcp_without_a_model(&world)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::from(OwnedFd::from(stdout)))
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        // ~12 KB of reply each: 100 of them are several times what the socket holds.
        let mut requests = format!(
            "{}\n{}\n",
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "deaf", "version": "0"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        for id in 2..102 {
            requests.push_str(&format!(
                "{}\n",
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
            ));
        }
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(requests.as_bytes()).await.unwrap();
        // Replying has begun (nothing is read from the socket, ever).
        unread.set_nonblocking(true).unwrap();
        let unread = tokio::net::UnixStream::from_std(unread).unwrap();
        tokio::time::timeout(Duration::from_secs(20), unread.readable())
            .await
            .expect("cmdr mcp replies")
            .unwrap();
        match stop {
            "close stdin" => drop(stdin),
            _ => {
                let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
                nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
            }
        }
        let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .unwrap_or_else(|_| panic!("{stop}: cmdr mcp still running 30 s later"))
            .unwrap();
        assert!(
            status.code().is_some(),
            "{stop}: it exited by itself: {status}"
        );
        drop(unread);
    }
}

/// The same before `initialize`: rmcp answers pings during its handshake, so a client
/// that floods them and reads nothing blocks the handshake's writes; closing stdin must
/// still end the process.
#[tokio::test]
async fn a_client_that_floods_pings_unread_before_initializing_cannot_keep_it_alive() {
    use nix::fcntl::{fcntl, FcntlArg};
    use tokio::io::AsyncWriteExt;

    let world = World::new();
    let (unread, stdout) = nix::unistd::pipe().unwrap();
    // The smallest pipe, a page: ~100 unread replies fill it.
    fcntl(&stdout, FcntlArg::F_SETPIPE_SZ(4096)).unwrap();
    let mut child = cmdr_mcp_without_a_model(&world)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::from(stdout))
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // ~45 KB: it fits stdin's pipe whatever cmdr reads, and ends with the hang-up.
    let pings: String = (0..1000)
        .map(|id| {
            format!(
                "{}\n",
                json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
            )
        })
        .collect();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(pings.as_bytes()).await.unwrap();
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("cmdr mcp still running 30 s after its client hung up")
        .unwrap();
    assert!(status.code().is_some(), "it exited by itself: {status}");
    drop(unread);
}
