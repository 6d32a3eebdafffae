//! The executor tools and every error shape, over hand-written JSON-RPC.

use serde_json::json;
use tokio::sync::Notify;

use crate::mcp::fake_llm::{FakeLlm, Reply};
use crate::mcp::rpc::{assert_error, tool_json, Rpc};
use crate::mcp::{Server, World};

#[tokio::test]
async fn bash_exec_returns_the_combined_result_and_a_failure_is_a_tool_error() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state).await;
    let (mut rpc, _) = Rpc::connect(&server.url(), None).await;

    let answer = rpc
        .call(
            "bash_exec",
            json!({"command": "echo hi; echo \"$GREETING\" >&2", "working_dir": world.work(),
                   "env": {"GREETING": "hello"}, "timeout_ms": 10000}),
        )
        .await;
    let (result, is_error) = tool_json(&answer);
    assert!(!is_error, "{answer}");
    assert_eq!(result["status"], "SUCCEEDED");
    assert_eq!(result["commandType"], "BASH_EXEC");
    // stdout and stderr are two pipes: they interleave in no fixed order.
    let mut lines: Vec<&str> = result["resultData"].as_str().unwrap().lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["hello", "hi"]);
    assert_eq!(result["exitCode"], 0);
    assert!(result["message"]
        .as_str()
        .unwrap()
        .starts_with("Command finished in"));
    assert!(!result["command_id"].as_str().unwrap().is_empty());

    let failed = rpc
        .call("bash_exec", json!({"command": "echo partial; exit 3"}))
        .await;
    let (result, is_error) = tool_json(&failed);
    assert!(is_error, "a FAILED result is a tool error: {failed}");
    assert_eq!(result["status"], "FAILED");
    assert_eq!(result["exitCode"], 3);
    assert_eq!(result["resultData"], "partial\n");
    assert!(result["error"].as_str().unwrap().contains('3'), "{result}");
}

#[tokio::test]
async fn file_write_then_file_read_patch_file_and_list_directory() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state).await;
    let (mut rpc, _) = Rpc::connect(&server.url(), None).await;
    let file = world.work().join("sub/notes.txt");

    let written = rpc
        .call(
            "file_write",
            json!({"file_path": file, "content": "one\ntwo\nthree\n", "create_dirs": true}),
        )
        .await;
    let (result, is_error) = tool_json(&written);
    assert!(!is_error, "{written}");
    assert_eq!(result["status"], "SUCCEEDED");
    assert_eq!(result["commandType"], "FILE_WRITE");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\ntwo\nthree\n");

    let read = rpc
        .call(
            "file_read",
            json!({"file_path": file, "start_line": 2, "end_line": 3}),
        )
        .await;
    let (result, is_error) = tool_json(&read);
    assert!(!is_error, "{read}");
    assert_eq!(result["resultData"], "two\nthree\n");

    let patch = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n";
    let patched = rpc
        .call("patch_file", json!({"file_path": file, "patch": patch}))
        .await;
    let (result, is_error) = tool_json(&patched);
    assert!(!is_error, "{patched}");
    assert_eq!(result["commandType"], "PATCH_FILE");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\nTWO\nthree\n");

    let listed = rpc
        .call("list_directory", json!({"path": world.work().join("sub")}))
        .await;
    let (result, is_error) = tool_json(&listed);
    assert!(!is_error, "{listed}");
    let listing = result["resultData"].as_str().unwrap();
    assert!(listing.starts_with("Listing for "), "{listing}");
    assert!(
        listing.contains("[FILE]") && listing.contains(" notes.txt"),
        "{listing}"
    );

    let missing = rpc
        .call(
            "file_read",
            json!({"file_path": world.work().join("nope.txt")}),
        )
        .await;
    let (result, is_error) = tool_json(&missing);
    assert!(is_error, "{missing}");
    assert_eq!(result["status"], "FAILED");
    assert!(!result["error"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn invalid_params_are_32602_with_the_stable_code() {
    let world = World::new();
    let llm = FakeLlm::start(vec![]).await;
    let (state, _) = world.state(Some(&llm), None);
    let server = Server::start(state).await;
    let (mut rpc, _) = Rpc::connect(&server.url(), None).await;
    let work = world.work();
    let cases = [
        (
            "run_agent_instruction",
            json!({"agentName": "nobody", "instruction": "hi"}),
            "AGENT_NOT_FOUND",
        ),
        (
            "list_commands",
            json!({"agentName": "nobody"}),
            "AGENT_NOT_FOUND",
        ),
        (
            "run_agent_instruction",
            json!({"agentName": "helper"}),
            "INVALID_REQUEST",
        ),
        (
            "run_agent_instruction",
            json!({"agentName": "helper", "instruction": "  "}),
            "INVALID_REQUEST",
        ),
        (
            "run_agent_instruction",
            json!({"agentName": "helper", "instruction": 5}),
            "INVALID_REQUEST",
        ),
        (
            "run_agent_instruction",
            json!({"agentName": "helper", "instruction": "hi", "extra": 1}),
            "INVALID_REQUEST",
        ),
        (
            "run_agent_instruction",
            json!({"agentName": "helper", "instruction": "hi", "working_folder": "relative/dir"}),
            "WORKING_FOLDER_INVALID",
        ),
        (
            "run_agent_instruction",
            json!({"agentName": "helper", "instruction": "hi", "working_folder": work.join("missing")}),
            "WORKING_FOLDER_NOT_FOUND",
        ),
        (
            "run_agent_instruction",
            json!({"agentName": "helper", "instruction": "hi", "conversationId": "no-such-conversation"}),
            "CONVERSATION_NOT_FOUND",
        ),
        (
            "run_command",
            json!({"agentName": "helper", "commandName": "../three"}),
            "COMMAND_INVALID",
        ),
        (
            "run_command",
            json!({"agentName": "helper", "commandName": "broken"}),
            "COMMAND_INVALID",
        ),
        (
            "run_command",
            json!({"agentName": "helper", "commandName": "missing"}),
            "COMMAND_NOT_FOUND",
        ),
        (
            "run_command",
            json!({"agentName": "nobody", "commandName": "three"}),
            "AGENT_NOT_FOUND",
        ),
        (
            "run_command",
            json!({"agentName": "helper"}),
            "INVALID_REQUEST",
        ),
        ("bash_exec", json!({}), "INVALID_REQUEST"),
        (
            "bash_exec",
            json!({"command": "true", "timeout_ms": "soon"}),
            "INVALID_REQUEST",
        ),
        (
            "file_write",
            json!({"file_path": "/tmp/x"}),
            "INVALID_REQUEST",
        ),
        (
            "list_agents",
            json!({"unexpected": true}),
            "INVALID_REQUEST",
        ),
        ("no_such_tool", json!({}), "INVALID_REQUEST"),
    ];
    for (tool, args, code) in cases {
        let answer = rpc.call(tool, args.clone()).await;
        let message = assert_error(&answer, -32602, code);
        assert!(
            !message.contains(&*world.agents().to_string_lossy()),
            "no internal paths: {message}"
        );
        println!("{tool} {args} -> {code}: {message}");
    }
    assert_eq!(llm.request_count(), 0, "nothing refused reached the model");
}

#[tokio::test]
async fn a_second_run_on_a_busy_conversation_is_409_run_in_progress() {
    let world = World::new();
    let gate = std::sync::Arc::new(Notify::new());
    let llm = FakeLlm::start(vec![
        Reply::text("first"),
        Reply::Gated(vec!["wait".into()], gate.clone(), vec![" over".into()]),
        Reply::text("other conversation"),
    ])
    .await;
    let (state, _) = world.state(Some(&llm), None);
    let server = Server::start(state).await;
    let (mut rpc, _) = Rpc::connect(&server.url(), None).await;

    let first = rpc
        .call(
            "run_agent_instruction",
            json!({"agentName": "helper", "instruction": "one"}),
        )
        .await;
    let id = tool_json(&first).0["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();

    // Hold a run on the conversation …
    let (held_id, held) = rpc
        .send(
            "tools/call",
            json!({"name": "run_agent_instruction",
                   "arguments": {"agentName": "helper", "instruction": "two", "conversationId": id}}),
        )
        .await;
    llm.wait_requests(2).await;

    // … a second one on it is refused, on every run tool …
    let busy = rpc
        .call(
            "run_agent_instruction",
            json!({"agentName": "helper", "instruction": "three", "conversationId": id}),
        )
        .await;
    let message = assert_error(&busy, 409, "RUN_IN_PROGRESS");
    assert!(message.contains(&id), "{message}");
    let busy = rpc
        .call(
            "run_command",
            json!({"agentName": "helper", "commandName": "three", "conversationId": id}),
        )
        .await;
    assert_error(&busy, 409, "RUN_IN_PROGRESS");

    // … other conversations are not blocked …
    let other = rpc
        .call(
            "run_agent_instruction",
            json!({"agentName": "helper", "instruction": "x"}),
        )
        .await;
    assert_eq!(tool_json(&other).0["status"], "completed");

    // … and the held run completes.
    gate.notify_one();
    let held = crate::mcp::rpc::read_response(held, &held_id).await;
    let (held, _) = tool_json(&held);
    assert_eq!(held["status"], "completed");
    assert_eq!(held["answer"], "wait over");
}

#[tokio::test]
async fn without_a_model_runs_are_503_llm_unavailable() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state).await;
    let (mut rpc, _) = Rpc::connect(&server.url(), None).await;
    let answer = rpc
        .call(
            "run_agent_instruction",
            json!({"agentName": "helper", "instruction": "hi"}),
        )
        .await;
    assert_error(&answer, 503, "LLM_UNAVAILABLE");
    let answer = rpc
        .call(
            "run_command",
            json!({"agentName": "helper", "commandName": "three"}),
        )
        .await;
    assert_error(&answer, 503, "LLM_UNAVAILABLE");
    // Everything that needs no model still works.
    let listed = rpc.call("list_agents", json!({})).await;
    assert!(!tool_json(&listed).1);
}
