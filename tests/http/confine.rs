//! `--allow-root` over HTTP: a working folder outside the roots is refused before the
//! run starts, commands outside fail with `PATH_NOT_ALLOWED`, `/health` shows the roots.

use serde_json::json;

use crate::http::fake_llm::FakeLlm;
use crate::http::support::{assert_error, start, Options};

fn confined() -> Options {
    Options {
        confined: true,
        ..Options::default()
    }
}

#[tokio::test]
async fn a_working_folder_outside_the_roots_is_refused_naming_the_rule() {
    let llm = FakeLlm::start(vec![]).await;
    let server = start(Some(&llm), confined()).await;
    let outside = server.world.agents().display().to_string();
    for (path, body) in [
        (
            "/agents/helper/run",
            json!({"instruction": "x", "working_folder": outside}),
        ),
        (
            "/agents/helper/stream",
            json!({"message": "x", "working_folder": outside}),
        ),
        (
            "/agents/helper/commands/run",
            json!({"commandName": "three", "working_folder": outside}),
        ),
    ] {
        let answer = server.post(path, body).await;
        assert_error(&answer, 400, "invalid_request", "PATH_NOT_ALLOWED");
        let message = answer.1["message"].as_str().unwrap();
        assert!(message.contains("working_folder"), "{message}");
        assert!(message.contains("--allow-root"), "{message}");
    }
    assert_eq!(llm.requests().len(), 0, "no model call for a refused run");
    let (_, conversations) = server.get("/conversations").await;
    assert_eq!(conversations.to_string().matches("helper").count(), 0);
}

#[tokio::test]
async fn commands_outside_the_roots_fail_and_health_shows_the_roots() {
    let server = start(None, confined()).await;
    let secret = server.world.agents().join("helper/config.toml");
    let (status, result) = server
        .post(
            "/commands?combine=true",
            json!({"commandType": "FILE_READ", "file_path": secret}),
        )
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["status"], "FAILED", "{result}");
    assert_eq!(result["errorCode"], "PATH_NOT_ALLOWED", "{result}");
    assert!(result.get("resultData").is_none(), "{result}");
    let inside = server.world.work().join("note.txt");
    let (_, wrote) = server
        .post(
            "/commands?combine=true",
            json!({"commandType": "FILE_WRITE", "file_path": inside, "content": "ok"}),
        )
        .await;
    assert_eq!(wrote["status"], "SUCCEEDED", "{wrote}");
    let (_, health) = server.get("/health").await;
    let root = std::fs::canonicalize(server.world.work()).unwrap();
    let trees = server
        .state
        .registry
        .confinement()
        .process_trees
        .clone()
        .unwrap()
        .to_string();
    assert_eq!(
        health["confinement"],
        json!({"roots": [root.display().to_string()], "landlock": "off",
            "fileCommands": "kernel-checked (openat2)", "processTrees": trees})
    );
}
