//! A real `cmdr serve` process over a temp world (agents folder with `helper`, SQLite
//! file, working folder), on ephemeral loopback ports, optionally talking to the fake LLM.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::fake_llm::FakeLlm;

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
    _dir: tempfile::TempDir,
}

/// How to start a [`Serve`].
#[derive(Default)]
pub struct Options<'a> {
    /// The model (none: agent runs fail with `LLM_UNAVAILABLE`).
    pub llm: Option<&'a FakeLlm>,
    /// Where the server's stderr goes (default: discarded).
    pub log: Option<PathBuf>,
}

impl Serve {
    /// Starts `cmdr serve` and waits for it to announce both addresses.
    pub async fn start(options: Options<'_>) -> Serve {
        cmdr::llm::OpenAiClient::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("agents/helper")).unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        let mut child = command(dir.path(), &options).spawn().unwrap();
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
            _dir: dir,
        }
    }

    /// The URL of an API path.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.api)
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
    let mut command = Command::new(env!("CARGO_BIN_EXE_cmdr"));
    command
        .arg("serve")
        .args(["--addr", "127.0.0.1:0", "--mcp-addr", "127.0.0.1:0"])
        .arg("--working-folder")
        .arg(dir.join("work"))
        .env("CMDR_AGENTS_DIR", dir.join("agents"))
        .env("CMDR_DB", dir.join("cmdr.sqlite3"))
        .env_remove("CMDR_AUTH_TOKEN")
        .env_remove("CMDR_LLM_API_KEY")
        .env_remove("CMDR_LLM_BASE_URL")
        .env_remove("CMDR_LLM_MODEL")
        .current_dir(dir.join("work"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    match &options.log {
        Some(path) => command.stderr(std::fs::File::create(path).unwrap()),
        None => command.stderr(Stdio::null()),
    };
    if let Some(llm) = options.llm {
        command
            .env("CMDR_LLM_BASE_URL", llm.base_url())
            .env("CMDR_LLM_MODEL", "fake-model");
    }
    command
}
