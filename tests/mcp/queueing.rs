//! An executor tool whose command must wait for a slot tells the client so, and when it
//! starts, as progress notifications (`cmdr serve --max-concurrent`; docs/mcp.md). The
//! shell holding the only slot waits for a file, not for time.

use cmdr::app::RegistryBuilder;
use cmdr::executors::{decode_command, ExecutionStatus};
use cmdr_test_support::results::collect;
use rmcp::model::{NumberOrString, ProgressToken, RequestMetaObject};
use serde_json::json;

use crate::mcp::{call, http_client, result_json, Server, World};
use cmdr_test_support::http::eventually;

#[tokio::test]
async fn a_queued_bash_exec_reports_queued_then_started_as_progress() {
    let world = World::new();
    let (mut state, _) = world.state(None, None);
    state.registry = RegistryBuilder::new().max_concurrent(1).build();
    let registry = state.registry.clone();
    let gate = world.work().join("gate");
    let script = format!("while [ ! -e '{}' ]; do sleep 0.02; done", gate.display());
    let blocker = decode_command(
        &json!({"command_id": "m-blocker", "commandType": "BASH_EXEC", "command": script})
            .to_string(),
    )
    .unwrap();
    let blocker = registry.execute(blocker).await.unwrap();
    let server = Server::start(state).await;
    let (client, recorder) = http_client(&server.url(), None).await;

    let mut params = call("bash_exec", json!({"command": "echo after"}));
    let mut meta = RequestMetaObject::new();
    meta.set_progress_token(ProgressToken(NumberOrString::String("q-1".into())));
    params.meta = Some(meta);
    let waiting = tokio::spawn(async move {
        let result = client.call_tool(params).await.unwrap();
        client.cancel().await.unwrap();
        result
    });
    let messages = || -> Vec<String> {
        let progress = recorder.progress.lock().unwrap();
        progress.iter().filter_map(|p| p.message.clone()).collect()
    };
    eventually("the queued notice", async || {
        messages().iter().any(|m| m.starts_with("Queued:"))
    })
    .await;
    assert_eq!(
        registry.load()[&cmdr::executors::CommandType::BashExec].queued,
        1
    );

    std::fs::write(&gate, "").unwrap();
    let end = collect(blocker).await;
    assert_eq!(end.last().unwrap().status, ExecutionStatus::Succeeded);
    let result = waiting.await.unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let body = result_json(&result);
    assert_eq!(body["status"], "SUCCEEDED", "{body}");
    assert_eq!(body["resultData"], "after\n");
    let messages = messages();
    assert!(
        messages.iter().any(|m| m.starts_with("Started after")),
        "{messages:?}"
    );
}
