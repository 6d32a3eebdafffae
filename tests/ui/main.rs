//! The web UI end to end in a real browser: a real server (the REST/SSE API and the
//! embedded UI) on 127.0.0.1 with the fake LLM, a temp agents folder and SQLite file; each
//! test runs one scenario script (`tests/ui/<scenario>.mjs`, playwright-core driving
//! Debian's `/usr/bin/chromium` headless) against it and asserts its exit status.
//!
//! Needs `node`, `chromium` and `tests/ui/node_modules` — `scripts/ui-deps.sh` installs
//! them. Each scenario saves PNG screenshots into `target/ui-screenshots/`.

// Integration tests are tests: their helpers may unwrap (the workspace denies it elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cmdr_test_support::fake_llm;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::post;
use cmdr::agent::AgentLoop;
use cmdr::agents::AgentCatalog;
use cmdr::executors::PendingInputs;
use cmdr::llm::{LlmClient, LlmConfig, OpenAiClient};
use cmdr::server::{local_registry, AppState};
use cmdr::service::AgentService;
use cmdr::store::{SqliteStore, Store};
use fake_llm::{FakeLlm, Reply};
use tokio::sync::Notify;

/// How long one scenario may take before it is killed.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

/// A running server over a temp world.
struct Ui {
    dir: tempfile::TempDir,
    base_url: String,
    /// The person key, for scenarios that answer questions (`CMDR_ANSWER_KEY`).
    answer_key: String,
    _llm: Option<FakeLlm>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Ui {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Agents `helper` (a 3-step command, an invalid one, and `list_files`) and `reviewer`
/// (one command); a working folder with two small files.
fn world(root: &Path) {
    let agents = root.join("agents");
    write(
        &agents.join("helper/config.toml"),
        "description = \"Runs shell commands in the working folder\"\n",
    );
    let steps = serde_json::json!({
        "Description": "Inspect the folder in three steps: where, what, summary",
        "items": [
            {"type": "message", "role": "user", "content": ["Step one: where are we?", "Print the working directory."]},
            {"type": "message", "role": "user", "content": ["Step two: list the files."]},
            {"type": "message", "role": "user", "content": ["Step three: summarise."]}
        ]
    });
    write(
        &agents.join("helper/commands/three_steps.json"),
        &steps.to_string(),
    );
    let one = serde_json::json!({
        "Description": "List the files of the working folder",
        "items": [{"type": "message", "role": "user", "content": ["List the files."]}]
    });
    write(
        &agents.join("helper/commands/list_files.json"),
        &one.to_string(),
    );
    write(
        &agents.join("helper/commands/broken.json"),
        "{\"Description\": \"\", \"items\": []}",
    );
    write(
        &agents.join("reviewer/config.toml"),
        "description = \"Reviews changes\"\n",
    );
    let review = serde_json::json!({
        "Description": "Review the latest change",
        "items": [{"type": "message", "role": "user", "content": ["Review it."]}]
    });
    write(
        &agents.join("reviewer/commands/review_change.json"),
        &review.to_string(),
    );
    let work = root.join("work");
    write(&work.join("one.txt"), "first file\n");
    write(&work.join("two.txt"), "second file\n");
}

impl Ui {
    /// Starts the server; `script` is the fake LLM's replies (`None`: no model configured).
    /// `gate` is released by `POST /__test/release` (a test-only route).
    async fn start(script: Option<Vec<Reply>>, gate: Arc<Notify>) -> Ui {
        let dir = tempfile::tempdir().unwrap();
        world(dir.path());
        let llm = match script {
            Some(script) => Some(FakeLlm::start(script).await),
            None => None,
        };
        let client = llm.as_ref().map(|llm| {
            Arc::new(OpenAiClient::new(LlmConfig::new(llm.base_url(), "fake-model")).unwrap())
                as Arc<dyn LlmClient>
        });
        let inputs = PendingInputs::new();
        let registry = local_registry(&inputs);
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("data/cmdr.sqlite3")).unwrap());
        let service = AgentService::new(
            AgentCatalog::new(dir.path().join("agents")),
            store,
            AgentLoop::new(client, registry.clone()),
            dir.path().join("work"),
        );
        let state = AppState::new(service, registry, inputs, None, None).unwrap();
        let answer_key = state.input_keys.person_key().to_owned();
        let test_routes = axum::Router::new().route(
            "/__test/release",
            post(move || {
                let gate = Arc::clone(&gate);
                async move {
                    gate.notify_one();
                    "released"
                }
            }),
        );
        let app = cmdr::http::router(state)
            .merge(cmdr::web::router())
            .merge(test_routes);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Ui {
            dir,
            base_url: format!("http://{addr}/"),
            answer_key,
            _llm: llm,
            server,
        }
    }

    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// Runs `tests/ui/<scenario>.mjs <base_url> <screenshot dir> <work dir>`; panics with
    /// its output unless it exits 0.
    async fn scenario(&self, scenario: &str) {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let ui = root.join("tests/ui");
        prerequisites(&ui);
        let shots = root.join("target/ui-screenshots");
        std::fs::create_dir_all(&shots).unwrap();
        let child = tokio::process::Command::new("node")
            .arg(ui.join(format!("{scenario}.mjs")))
            .arg(&self.base_url)
            .arg(&shots)
            .arg(self.work())
            .env("CMDR_ANSWER_KEY", &self.answer_key)
            .current_dir(&ui)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("cannot start node; run scripts/ui-deps.sh");
        let output = tokio::time::timeout(SCENARIO_TIMEOUT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| {
                panic!("scenario {scenario} did not finish within {SCENARIO_TIMEOUT:?}")
            })
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "scenario {scenario} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
            output.status
        );
        print!("{stdout}");
    }
}

/// Fails with a clear message when the browser test tools are missing.
fn prerequisites(ui: &Path) {
    let hint = "run `bash scripts/ui-deps.sh` (installs Debian's chromium and playwright-core)";
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(node, "node is not installed: {hint}");
    assert!(
        Path::new("/usr/bin/chromium").exists(),
        "/usr/bin/chromium is missing: {hint}"
    );
    assert!(
        ui.join("node_modules/playwright-core/package.json")
            .exists(),
        "tests/ui/node_modules/playwright-core is missing: {hint}"
    );
}

async fn run(scenario: &str, script: Option<Vec<Reply>>) {
    run_gated(scenario, script, Arc::new(Notify::new())).await;
}

/// [`run`], with `gate` released by the scenario (`POST /__test/release`).
async fn run_gated(scenario: &str, script: Option<Vec<Reply>>, gate: Arc<Notify>) {
    Ui::start(script, gate).await.scenario(scenario).await;
}

/// The original three cases (the first examples): three commands all reach completed through
/// queued → running; two `ls` are two parts with their own outputs; a reply over several
/// iterations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_shows_every_command_by_id() {
    run(
        "chat_commands",
        Some(vec![
            // Case 1: three different commands, the tags split across chunks.
            Reply::chunks([
                "Let me look at the folder.\n\n<sh",
                "ell>ls</shell> <shell>cat one.txt</",
                "shell> <shell>sleep 0.3; cat two.txt</shell>",
            ]),
            Reply::text("Both files hold **one line** each:\n\n- `one.txt`: first file\n- `two.txt`: second file"),
            // Case 2: the same command twice.
            Reply::text("<shell>ls</shell>\n<shell>ls</shell>"),
            Reply::text("Listed twice."),
            // Case 3: several iterations.
            Reply::text("First I check the date.\n\n<shell>echo iteration-one</shell>"),
            Reply::text("Now the second step.\n\n<shell>echo iteration-two</shell>"),
            Reply::text("## Summary\n\nBoth steps ran:\n\n1. `iteration-one`\n2. `iteration-two`\n\nSee [the docs](https://example.com/docs)."),
        ]),
    )
    .await;
}

/// A three-step agent command with the working folder: progress, each step's prompt and
/// answer with its `Command run: <name> (k/n)` note; commands listed per agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_run_shows_every_step() {
    let gate = Arc::new(Notify::new());
    run_gated(
        "command_run",
        Some(vec![
            Reply::text("We are here:\n\n<shell>pwd</shell>"),
            Reply::text("That is the working folder."),
            Reply::text("<shell>sleep 0.5; ls</shell>"),
            Reply::text("Two files: `one.txt` and `two.txt`."),
            // Held until the page has shown the progress of steps 1 and 2.
            Reply::Gated(
                vec!["**Summary**: ".to_owned()],
                Arc::clone(&gate),
                vec!["a small folder with two text files.".to_owned()],
            ),
        ]),
        gate,
    )
    .await;
}

/// A second page on a busy conversation gets the exact RUN_IN_PROGRESS sentence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_conversation_shows_the_conflict_message() {
    let gate = Arc::new(Notify::new());
    run_gated(
        "conflict",
        Some(vec![Reply::Gated(
            vec!["Working on it".to_owned()],
            Arc::clone(&gate),
            vec![" — all done.".to_owned()],
        )]),
        gate,
    )
    .await;
}

/// Stop during `sleep 1000`: the part shows stopped, the turn persists as stopped; Stop
/// also ends a command run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_kills_a_long_command() {
    run(
        "stop",
        Some(vec![
            Reply::text("Starting a long job.\n\n<shell>echo started; sleep 1000</shell>"),
            Reply::text("<shell>sleep 1000</shell>"),
        ]),
    )
    .await;
}

/// A REQUEST_USER_INPUT question appears in the page; the answer resumes the command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_answered_inline() {
    run("user_input", Some(vec![])).await;
}

/// Reloading re-hydrates the transcript from persisted turns; the sidebar opens,
/// archives and restores conversations; dark theme and a narrow window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_rehydrates_the_transcript() {
    run(
        "reload",
        Some(vec![
            Reply::text("Here are the files:\n\n<shell>ls</shell> <shell>cat one.txt</shell>"),
            Reply::text("And a long one:\n\n<shell>seq 1 60</shell>"),
            Reply::text(
                "### Result\n\n- two files\n- a *long* output, collapsed\n\n```sh\nseq 1 60\n```",
            ),
            Reply::text("Second conversation."),
        ]),
    )
    .await;
}

/// The Markdown renderer and `<shell>` splitter (node only, no browser): escaping, link
/// schemes, blocks, segments.
#[test]
fn markdown_renders_safely() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = std::process::Command::new("node")
        .arg(root.join("tests/ui/markdown.mjs"))
        .output()
        .expect("cannot start node; run scripts/ui-deps.sh");
    assert!(
        output.status.success(),
        "markdown checks failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Without a model, a run explains how to configure one, in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_the_page_says_how_to_configure_one() {
    run("no_model", None).await;
}

/// The processes panel: a REST-started process listed, tailed live (resuming after the
/// network drops), typed into and stopped; the agent's own background process appears
/// by itself in its conversation's panel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_processes_panel_tails_types_and_stops() {
    run(
        "processes",
        Some(vec![
            Reply::text(
                "Starting the watcher.\n\n<shell background>echo watching; sleep 600</shell>",
            ),
            Reply::text("It is running in the background as **p2**."),
        ]),
    )
    .await;
}
