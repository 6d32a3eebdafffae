//! A real `cmdr serve` process over a world folder (agents folder with `helper`, SQLite
//! file, working folder), on ephemeral loopback ports, optionally talking to the fake LLM.
//! Used by the `load` and `faults` targets.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::fake_llm::FakeLlm;
use crate::http::SseReader;

/// A running `cmdr serve`; killed when dropped.
pub struct Serve {
    child: Child,
    /// The server's process id (for `/proc` samples).
    pub pid: i32,
    /// `http://127.0.0.1:PORT` of the REST API.
    pub api: String,
    /// `http://127.0.0.1:PORT/mcp`.
    pub mcp: String,
    /// An HTTP client for the tests.
    pub http: reqwest::Client,
    /// The world, when the server owns it (removed when dropped).
    _dir: Option<tempfile::TempDir>,
}

/// How to start a [`Serve`].
#[derive(Default)]
pub struct Options<'a> {
    /// The model (none: agent runs fail with `LLM_UNAVAILABLE`).
    pub llm: Option<&'a FakeLlm>,
    /// Where the server's stderr goes (default: discarded).
    pub log: Option<PathBuf>,
    /// Another model instead: an OpenAI-compatible base URL and a model name (the
    /// opt-in real-model tests).
    pub endpoint: Option<(String, String)>,
    /// More arguments of `cmdr serve` (e.g. `--max-concurrent 2`).
    pub args: Vec<String>,
}

impl Serve {
    /// Starts `cmdr serve` over a new temp world and waits for it to announce both
    /// addresses.
    pub async fn start(options: Options<'_>) -> Serve {
        let dir = tempfile::tempdir().unwrap();
        let mut serve = Self::start_in(dir.path(), options).await;
        serve._dir = Some(dir);
        serve
    }

    /// Like [`Serve::start`], over the world in `dir` (kept: a server started again on
    /// it finds the same database).
    pub async fn start_in(dir: &Path, options: Options<'_>) -> Serve {
        cmdr::llm::OpenAiClient::install_crypto_provider();
        std::fs::create_dir_all(dir.join("agents/helper")).unwrap();
        std::fs::create_dir_all(dir.join("work")).unwrap();
        let mut child = command(dir, &options).spawn().unwrap();
        let pid = child.id().unwrap() as i32;
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
        Serve {
            child,
            pid,
            api: urls[0].trim_end_matches('/').to_owned(),
            mcp: urls[1].clone(),
            http: reqwest::Client::new(),
            _dir: None,
        }
    }

    /// The URL of an API path.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.api)
    }

    /// `GET path` (must succeed), as JSON.
    pub async fn get(&self, path: &str) -> Value {
        let response = self.http.get(self.url(path)).send().await.unwrap();
        let status = response.status();
        assert!(status.is_success(), "GET {path}: {status}");
        response.json().await.unwrap()
    }

    /// Posts `body` (JSON) to `path`.
    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.http
            .post(self.url(path))
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

    /// SIGTERM, then the exit status (within 30 s).
    pub async fn stop(mut self) -> i32 {
        let pid = nix::unistd::Pid::from_raw(self.pid);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the server exits within 30 s of SIGTERM")
            .unwrap();
        status.code().unwrap_or(-1)
    }
}

fn command(dir: &Path, options: &Options<'_>) -> Command {
    let mut command = Command::new(crate::cmdr_bin());
    command
        .arg("serve")
        .args(["--addr", "127.0.0.1:0", "--mcp-addr", "127.0.0.1:0"])
        .arg("--working-folder")
        .arg(dir.join("work"))
        .env("CMDR_AGENTS_DIR", dir.join("agents"))
        .arg("--db")
        .arg(db(dir))
        .env_remove("CMDR_AUTH_TOKEN")
        .env_remove("CMDR_LLM_API_KEY")
        .env_remove("CMDR_LLM_BASE_URL")
        .env_remove("CMDR_LLM_MODEL")
        .current_dir(dir.join("work"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    command.args(&options.args);
    match &options.log {
        Some(path) => command.stderr(std::fs::File::create(path).unwrap()),
        None => command.stderr(Stdio::null()),
    };
    if let Some(llm) = options.llm {
        command
            .env("CMDR_LLM_BASE_URL", llm.base_url())
            .env("CMDR_LLM_MODEL", "fake-model");
    }
    if let Some((base_url, model)) = &options.endpoint {
        command
            .env("CMDR_LLM_BASE_URL", base_url)
            .env("CMDR_LLM_MODEL", model);
    }
    command
}

/// The database file of a server started in `dir`.
pub fn db(dir: &Path) -> PathBuf {
    dir.join("data/cmdr.sqlite3")
}
