//! The MCP server driven by an independent client: rmcp's own streamable-HTTP client.

use std::collections::BTreeMap;

use rmcp::model::{NumberOrString, ProgressToken, RequestMetaObject};
use serde_json::{json, Value};

use crate::mcp::fake_llm::{FakeLlm, Reply};
use crate::mcp::{call, http_client, result_json, Server, World};

/// The tool names and the required fields of each input schema.
fn expected_tools() -> BTreeMap<&'static str, Vec<&'static str>> {
    BTreeMap::from([
        ("list_agents", vec![]),
        ("run_agent_instruction", vec!["agentName", "instruction"]),
        ("list_commands", vec![]),
        ("run_command", vec!["agentName", "commandName"]),
        ("bash_exec", vec!["command"]),
        ("file_read", vec!["file_path"]),
        ("file_write", vec!["content", "file_path"]),
        ("patch_file", vec!["file_path", "patch"]),
        ("list_directory", vec!["path"]),
        ("start_process", vec!["command"]),
        ("process_input", vec!["process_id"]),
        ("process_output", vec!["process_id"]),
        ("kill_process", vec!["process_id"]),
        ("list_processes", vec![]),
    ])
}

#[tokio::test]
async fn initialize_names_cmdr_and_tools_list_has_every_tool_with_its_schema() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state).await;
    let (client, _) = http_client(&server.url(), None).await;

    let info = client.peer_info().expect("initialized");
    let server_info = info.server_info.clone().expect("server info");
    assert_eq!(server_info.name, "cmdr");
    assert_eq!(server_info.version, env!("CARGO_PKG_VERSION"));
    assert!(info.capabilities.tools.is_some());
    let instructions = info.instructions.clone().unwrap_or_default();
    assert!(
        instructions.contains("run_agent_instruction"),
        "{instructions}"
    );

    let tools = client.list_all_tools().await.unwrap();
    let mut found = BTreeMap::new();
    for tool in &tools {
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["type"], "object", "{}: {schema}", tool.name);
        assert_eq!(
            schema["additionalProperties"], false,
            "{}: {schema}",
            tool.name
        );
        assert!(
            !tool.description.as_deref().unwrap_or_default().is_empty(),
            "{} has a description",
            tool.name
        );
        let mut required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().map(|v| v.as_str().unwrap()).collect())
            .unwrap_or_default();
        required.sort_unstable();
        // Every required field is a declared property.
        for field in &required {
            assert!(schema["properties"].get(*field).is_some(), "{schema}");
        }
        found.insert(tool.name.to_string(), required.join(","));
    }
    let expected: BTreeMap<String, String> = expected_tools()
        .into_iter()
        .map(|(name, required)| (name.to_owned(), required.join(",")))
        .collect();
    assert_eq!(found, expected);

    let run = tools
        .iter()
        .find(|t| t.name == "run_agent_instruction")
        .unwrap();
    let properties = &run.input_schema["properties"];
    for field in [
        "agentName",
        "instruction",
        "conversationId",
        "working_folder",
    ] {
        assert!(properties.get(field).is_some(), "{field} in {properties}");
    }
    let bash = tools.iter().find(|t| t.name == "bash_exec").unwrap();
    for field in ["command", "working_dir", "timeout_ms", "env"] {
        assert!(
            bash.input_schema["properties"].get(field).is_some(),
            "{field}"
        );
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn list_agents_and_list_commands_with_and_without_an_agent() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state).await;
    let (client, _) = http_client(&server.url(), None).await;

    let agents = client
        .call_tool(call("list_agents", json!({})))
        .await
        .unwrap();
    assert_eq!(agents.is_error, Some(false));
    assert_eq!(
        result_json(&agents),
        json!({"agents": [
            {"name": "helper", "description": "Helps with things"},
            {"name": "other", "description": ""}
        ]})
    );

    let one = client
        .call_tool(call("list_commands", json!({"agentName": "helper"})))
        .await
        .unwrap();
    assert_eq!(
        result_json(&one),
        json!({"agentName": "helper", "commands": [{"name": "three", "description": "Three steps"}]}),
        "the invalid file is left out, the non-JSON file ignored"
    );

    let all = client
        .call_tool(call("list_commands", json!({})))
        .await
        .unwrap();
    assert_eq!(
        result_json(&all),
        json!({"agents": [
            {"agentName": "helper", "commands": [{"name": "three", "description": "Three steps"}]},
            {"agentName": "other", "commands": []}
        ]})
    );

    // The disk is read on every call.
    world.command(
        "other",
        "hello",
        r#"{"Description":"Say hello","items":[{"type":"message","role":"user","content":["hi"]}]}"#,
    );
    let other = client
        .call_tool(call("list_commands", json!({"agentName": "other"})))
        .await
        .unwrap();
    assert_eq!(
        result_json(&other)["commands"],
        json!([{"name": "hello", "description": "Say hello"}])
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn run_agent_instruction_runs_to_the_end_with_progress_and_continues_a_conversation() {
    let world = World::new();
    let llm = FakeLlm::start(vec![
        Reply::text("Let me look.\n<shell>echo from-the-shell</shell>"),
        Reply::chunks(["All ", "done."]),
        Reply::text("Second answer."),
    ])
    .await;
    let (state, store) = world.state(Some(&llm), None);
    let server = Server::start(state).await;
    let (client, recorder) = http_client(&server.url(), None).await;

    let mut params = call(
        "run_agent_instruction",
        json!({"agentName": "helper", "instruction": "Check the shell"}),
    );
    let mut meta = RequestMetaObject::new();
    meta.set_progress_token(ProgressToken(NumberOrString::String("run-1".into())));
    params.meta = Some(meta);
    let result = client.call_tool(params).await.unwrap();
    assert_eq!(result.is_error, Some(false));
    let body = result_json(&result);
    let id = body["conversationId"].as_str().unwrap().to_owned();
    assert_eq!(
        body,
        json!({
            "agentName": "helper",
            "conversationId": id,
            "modelId": "fake-model",
            "status": "completed",
            "answer": "All done."
        })
    );
    let turns = store.turns(&id).await.unwrap();
    assert_eq!(
        turns.len(),
        4,
        "user, assistant, tool, assistant: {turns:?}"
    );
    assert!(turns[2].content.contains("from-the-shell"));

    let progress = recorder.progress.lock().unwrap().clone();
    let messages: Vec<String> = progress
        .iter()
        .map(|p| p.message.clone().unwrap_or_default())
        .collect();
    // (rmcp's client replaces the token with one it generates.)
    assert!(
        progress
            .iter()
            .all(|p| p.progress_token == progress[0].progress_token),
        "one token: {progress:?}"
    );
    assert!(
        progress.windows(2).all(|w| w[0].progress < w[1].progress),
        "progress increases: {messages:?}"
    );
    assert!(
        messages.iter().any(|m| m == "running: echo from-the-shell"),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m == "completed: echo from-the-shell"),
        "{messages:?}"
    );

    let again = client
        .call_tool(call(
            "run_agent_instruction",
            json!({"agentName": "helper", "instruction": "And now?", "conversationId": id}),
        ))
        .await
        .unwrap();
    let again = result_json(&again);
    assert_eq!(again["conversationId"], id);
    assert_eq!(again["answer"], "Second answer.");
    assert_eq!(store.turns(&id).await.unwrap().len(), 6);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn run_command_runs_every_step_and_reports_the_command() {
    let world = World::new();
    let llm = FakeLlm::start(vec![
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("three"),
    ])
    .await;
    let (state, store) = world.state(Some(&llm), None);
    let server = Server::start(state).await;
    let (client, _) = http_client(&server.url(), None).await;

    let result = client
        .call_tool(call(
            "run_command",
            json!({"agentName": "helper", "commandName": "three", "working_folder": world.work()}),
        ))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(false));
    let body = result_json(&result);
    let id = body["conversationId"].as_str().unwrap().to_owned();
    assert_eq!(
        body,
        json!({
            "agentName": "helper",
            "commandName": "three",
            "conversationId": id,
            "modelId": "fake-model",
            "status": "completed",
            "answer": "three"
        })
    );
    let turns = store.turns(&id).await.unwrap();
    let steps: Vec<Option<u32>> = turns
        .iter()
        .map(|t| t.command.as_ref().map(|c| c.step_index))
        .collect();
    assert_eq!(
        steps,
        [Some(1), Some(1), Some(2), Some(2), Some(3), Some(3)]
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_run_whose_model_fails_is_a_tool_error_with_the_code() {
    let world = World::new();
    let llm = FakeLlm::start(vec![Reply::Status(500, r#"{"error":"boom"}"#.into())]).await;
    let (state, _) = world.state(Some(&llm), None);
    let server = Server::start(state).await;
    let (client, _) = http_client(&server.url(), None).await;

    let result = client
        .call_tool(call(
            "run_agent_instruction",
            json!({"agentName": "helper", "instruction": "hi"}),
        ))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    let body = result_json(&result);
    assert_eq!(body["status"], "failed", "{body}");
    assert!(
        body["error"]["code"].as_str().unwrap().starts_with("LLM_"),
        "{body}"
    );
    assert!(body["conversationId"].is_string());
    client.cancel().await.unwrap();
}
