//! `cmdr serve` as a process: addresses, health, the web UI, auth off loopback, and a
//! graceful shutdown that stops in-flight runs and persists them.

use cmdr_test_support::fake_llm;
mod floods;
mod queueing;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use cmdr::agent::{Role, TurnStatus};
use cmdr::store::{SqliteStore, Store};
use fake_llm::{FakeLlm, Reply};
use futures_util::StreamExt;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A running `cmdr serve` and the URLs it announced.
struct Server {
    child: Child,
    api: String,
    mcp: String,
}

fn serve_command(dir: &Path, llm: Option<&FakeLlm>, extra: &[&str]) -> Command {
    serve_on(dir, llm, "127.0.0.1:0", extra)
}

fn serve_on(dir: &Path, llm: Option<&FakeLlm>, addr: &str, extra: &[&str]) -> Command {
    let agents = dir.join("agents/helper");
    std::fs::create_dir_all(&agents).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_cmdr"));
    command
        .arg("serve")
        .args(["--addr", addr, "--mcp-addr", "127.0.0.1:0"])
        .args(extra)
        .env("CMDR_AGENTS_DIR", dir.join("agents"))
        .env("CMDR_DB", dir.join("cmdr.sqlite3"))
        .env_remove("CMDR_AUTH_TOKEN")
        .env_remove("CMDR_LLM_API_KEY")
        .env_remove("CMDR_LLM_BASE_URL")
        .env_remove("CMDR_LLM_MODEL")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(llm) = llm {
        command
            .env("CMDR_LLM_BASE_URL", llm.base_url())
            .env("CMDR_LLM_MODEL", "fake-model");
    }
    command
}

/// Starts the server and reads its two announced URLs.
async fn start(dir: &Path, llm: Option<&FakeLlm>, extra: &[&str]) -> Server {
    start_command(serve_command(dir, llm, extra)).await
}

/// Starts `command` (a `cmdr serve`) and reads its two announced URLs.
async fn start_command(mut command: Command) -> Server {
    let mut child = command.spawn().unwrap();
    // Drained, so that a server logging a lot (floods) never blocks on a full pipe.
    let mut log = BufReader::new(child.stderr.take().unwrap()).lines();
    tokio::spawn(async move { while let Ok(Some(_)) = log.next_line().await {} });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut urls = Vec::new();
    while urls.len() < 2 {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the server announces its addresses")
            .unwrap()
            .expect("the server is still running");
        if let Some(url) = line.split(" on ").nth(1) {
            urls.push(url.trim().to_owned());
        }
    }
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Server {
        child,
        api: urls[0].trim_end_matches('/').to_owned(),
        mcp: urls[1].clone(),
    }
}

impl Server {
    /// SIGTERM, then the exit status (within 30 s).
    async fn stop(mut self) -> i32 {
        let pid = nix::unistd::Pid::from_raw(self.child.id().unwrap() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the server exits within 30 s of SIGTERM")
            .unwrap();
        status.code().unwrap_or(-1)
    }
}

fn client() -> reqwest::Client {
    cmdr::llm::OpenAiClient::install_crypto_provider();
    reqwest::Client::new()
}

#[tokio::test]
async fn serve_announces_health_ui_and_mcp_then_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), None, &[]).await;
    let http = client();
    let health: serde_json::Value = http
        .get(format!("{}/health", server.api))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["persistence"], "ok");
    assert_eq!(health["nats"], "off");
    assert_eq!(health["llm"], false);
    let page = http.get(format!("{}/", server.api)).send().await.unwrap();
    assert!(page.status().is_success());
    assert!(page.text().await.unwrap().contains("<html"));
    let agents: serde_json::Value = http
        .get(format!("{}/agents", server.api))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(agents["agents"][0]["name"], "helper");
    let init = http
        .post(&server.mcp)
        .header("Accept", "application/json, text/event-stream")
        .json(&serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                       "clientInfo": {"name": "test", "version": "0"}}
        }))
        .send()
        .await
        .unwrap();
    assert!(init.status().is_success(), "{}", init.status());
    assert!(init.text().await.unwrap().contains("\"cmdr\""));
    assert_eq!(server.stop().await, 0);
    // Stopped cleanly, the database is closed: no write-ahead log or shared memory left.
    for leftover in ["cmdr.sqlite3-wal", "cmdr.sqlite3-shm"] {
        assert!(
            !dir.path().join(leftover).exists(),
            "{leftover} left behind"
        );
    }
}

#[tokio::test]
async fn beyond_loopback_a_token_is_required_and_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let refused = serve_on(dir.path(), None, "0.0.0.0:0", &[])
        .output()
        .await
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--auth-token"));
    // A guessable token is no better off loopback; a blank one guards nothing anywhere.
    for (addr, token, says) in [
        ("0.0.0.0:0", "s3cret", "at least 16"),
        ("127.0.0.1:0", "   ", "whitespace"),
    ] {
        let refused = serve_on(dir.path(), None, addr, &["--auth-token", token])
            .output()
            .await
            .unwrap();
        assert_eq!(refused.status.code(), Some(2), "{addr} {token:?}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains(says), "{stderr}");
    }

    let server = start(dir.path(), None, &["--auth-token", "s3cret"]).await;
    let http = client();
    let agents = format!("{}/agents", server.api);
    let denied = http.get(&agents).send().await.unwrap();
    assert_eq!(denied.status(), 401);
    let wrong = http.get(&agents).bearer_auth("nope").send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    let allowed = http
        .get(&agents)
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(allowed.status(), 200);
    let mcp = http
        .post(&server.mcp)
        .header("Accept", "application/json, text/event-stream")
        .json(&serde_json::json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(mcp.status(), 401, "MCP is protected too");
    assert_eq!(server.stop().await, 0);
}

fn db(dir: &Path) -> PathBuf {
    dir.join("cmdr.sqlite3")
}

#[tokio::test]
async fn shutdown_stops_a_running_turn_and_persists_it() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![Reply::Hang(vec!["thinking hard".into()])]).await;
    let server = start(dir.path(), Some(&llm), &[]).await;
    let response = client()
        .post(format!("{}/agents/helper/stream", server.api))
        .json(&serde_json::json!({"message": "go"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("thinking hard") {
        let chunk = tokio::time::timeout(Duration::from_secs(30), body.next())
            .await
            .expect("events within 30 s")
            .expect("the stream goes on")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let id = seen
        .split("\"conversationId\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    let stopping = tokio::spawn(server.stop());
    while let Some(Ok(chunk)) = body.next().await {
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert_eq!(stopping.await.unwrap(), 0);
    assert!(seen.contains("\"reason\":\"stopped\""), "{seen}");
    let store = SqliteStore::open(&db(dir.path())).unwrap();
    let turns = store.turns(&id).await.unwrap();
    let last = turns.last().unwrap();
    assert_eq!(
        (last.role, last.content.as_str(), last.status),
        (Role::Assistant, "thinking hard", TurnStatus::Stopped)
    );
}

/// The attack: a model prints the environment. cmdr's own secrets (its token, the model's
/// API key) and the operator's (`*SECRET*`, `*TOKEN*`) never reach a shell; the rest does.
/// An agent's `[shell_environment_policy]` builds its shells' environment instead.
#[tokio::test]
async fn shells_never_see_cmdrs_secrets_and_agents_choose_their_environment() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![
        Reply::text("<shell>env</shell>"),
        Reply::text("Done."),
    ])
    .await;
    let secrets = [
        ("CMDR_AUTH_TOKEN", "tok-0123456789abcdef-serve"),
        ("CMDR_LLM_API_KEY", "sk-live-model-key-42"),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret-value-7"),
        ("GITHUB_TOKEN", "ghp_github-token-value"),
    ];
    let mut command = serve_command(dir.path(), Some(&llm), &[]);
    for (name, value) in secrets {
        command.env(name, value);
    }
    command.env("MY_SETTING", "visible");
    let server = start_command(command).await;
    let http = client();
    let token = secrets[0].1;
    let env: serde_json::Value = http
        .post(format!("{}/commands?combine=true", server.api))
        .bearer_auth(token)
        .json(&serde_json::json!({"commandType": "BASH_EXEC", "command": "env"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let printed = env["resultData"].as_str().unwrap();
    assert!(printed.contains("MY_SETTING=visible"), "{printed}");
    for (name, value) in secrets {
        assert!(
            !printed.contains(value),
            "{name} reached the shell:\n{printed}"
        );
    }

    std::fs::write(
        dir.path().join("agents/helper/config.toml"),
        "[shell_environment_policy]\ninherit = \"none\"\nset = { ONLY = \"this\" }\n",
    )
    .unwrap();
    let run = http
        .post(format!("{}/agents/helper/run", server.api))
        .bearer_auth(token)
        .json(&serde_json::json!({"instruction": "print the environment"}))
        .send()
        .await
        .unwrap();
    assert_eq!(run.status(), 200);
    let db = SqliteStore::open(&db(dir.path())).unwrap();
    let conversations = db.conversations(None).await.unwrap();
    let turns = db.turns(&conversations[0].id).await.unwrap();
    let tool = turns.iter().find(|t| t.role == Role::Tool).unwrap();
    assert!(tool.content.contains("ONLY=this"), "{}", tool.content);
    assert!(
        !tool.content.contains("MY_SETTING"),
        "inherit = none: {}",
        tool.content
    );
    assert!(
        !tool.content.contains("PATH=/"),
        "inherit = none: {}",
        tool.content
    );
    assert_eq!(server.stop().await, 0);
}
