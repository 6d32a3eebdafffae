//! A real `cmdr serve` process for the faults: free ports, its own database and agents
//! folder in a temp dir, the fake LLM as its model.

use std::path::Path;
use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::fake_llm::FakeLlm;
use crate::http_support::SseReader;
use crate::PATIENCE;

/// A `cmdr serve` process on free ports, its database and agents in `dir`.
pub struct Serve {
    child: Child,
    api: String,
    http: reqwest::Client,
}

impl Serve {
    /// Starts the server (agent `helper`, database `data/cmdr.sqlite3`, model `llm`).
    pub async fn start(dir: &Path, llm: &FakeLlm) -> Self {
        std::fs::create_dir_all(dir.join("agents/helper")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_cmdr"))
            .arg("serve")
            .args(["--addr", "127.0.0.1:0", "--mcp-addr", "127.0.0.1:0"])
            .arg("--db")
            .arg(db(dir))
            .env("CMDR_AGENTS_DIR", dir.join("agents"))
            .env("CMDR_LLM_BASE_URL", llm.base_url())
            .env("CMDR_LLM_MODEL", "fake-model")
            .env_remove("CMDR_AUTH_TOKEN")
            .env_remove("CMDR_LLM_API_KEY")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let api = loop {
            let line = tokio::time::timeout(PATIENCE, lines.next_line())
                .await
                .expect("the server announces its address")
                .unwrap()
                .expect("the server is still running");
            if let Some(url) = line.split(" on ").nth(1) {
                break url.trim().trim_end_matches('/').to_owned();
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        cmdr::llm::OpenAiClient::install_crypto_provider();
        Self {
            child,
            api,
            http: reqwest::Client::new(),
        }
    }

    /// `GET path` (must succeed), as JSON.
    pub async fn get(&self, path: &str) -> Value {
        let response = self
            .http
            .get(format!("{}{path}", self.api))
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "GET {path}: {}",
            response.status()
        );
        response.json().await.unwrap()
    }

    /// Posts `body` (JSON) to `path`.
    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.api))
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// Posts `body` to `path` and returns the SSE response.
    pub async fn sse(&self, path: &str, body: Value) -> SseReader {
        let response = self.post(path, &body).await;
        assert_eq!(response.status(), 200);
        SseReader::new(response)
    }

    /// SIGKILL: no shutdown code runs.
    pub async fn crash(mut self) {
        self.child.kill().await.unwrap();
    }

    /// SIGTERM, and the exit status.
    pub async fn stop(mut self) -> Option<i32> {
        let pid = nix::unistd::Pid::from_raw(self.child.id().unwrap() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .unwrap();
        status.unwrap().code()
    }
}

/// The database file of a server started in `dir`.
pub fn db(dir: &Path) -> std::path::PathBuf {
    dir.join("data/cmdr.sqlite3")
}
