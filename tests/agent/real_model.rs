//! The agent loop driven by a real model (opt-in: `#[ignore]`d, so the default
//! `cargo test` never needs one). Any OpenAI-compatible endpoint given by `CMDR_LLM_BASE_URL`
//! and `CMDR_LLM_MODEL` (and `CMDR_LLM_API_KEY`) will do; the pinned tiny model of
//! `scripts/real-model.sh` is the reference:
//!
//! ```sh
//! scripts/real-model.sh > /tmp/real-model.env &      # prints the two variables
//! export $(grep CMDR_LLM /tmp/real-model.env | xargs)
//! cargo test --test all real_model -- --ignored --test-threads 1
//! ```
//!
//! Through `cmdr chat` (piped) and through `cmdr serve`'s stream route (a real server
//! process). The tests assert structure — a command ran, ids, events, persisted turns, the answer
//! holds the right number — never exact wording.

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// How long one real-model task may take on one CPU thread.
const REAL_PATIENCE: Duration = Duration::from_secs(600);

fn endpoint() -> (String, String) {
    let base = std::env::var("CMDR_LLM_BASE_URL")
        .expect("set CMDR_LLM_BASE_URL (see scripts/real-model.sh)");
    let model = std::env::var("CMDR_LLM_MODEL").expect("set CMDR_LLM_MODEL");
    (base, model)
}

/// Runs `cmdr chat` piped with `message` in `dir`, saving into `db`; its stdout, stderr,
/// exit status and how long it took.
async fn chat(
    dir: &std::path::Path,
    db: &std::path::Path,
    message: &str,
) -> (String, String, i32, Duration) {
    let (base, model) = endpoint();
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cmdr"))
        .args(["chat", "--max-iterations", "4", "--working-folder"])
        .arg(dir)
        .arg("--db")
        .arg(db)
        .env("CMDR_LLM_BASE_URL", base)
        .env("CMDR_LLM_MODEL", model)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(format!("{message}\n").as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let output = tokio::time::timeout(REAL_PATIENCE, child.wait_with_output())
        .await
        .expect("the chat ends")
        .unwrap();
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.status.code().unwrap_or(-1),
        started.elapsed(),
    )
}

async fn saved_turns(db: &std::path::Path) -> Vec<cmdr::store::StoredTurn> {
    use cmdr::store::Store;
    let store = cmdr::store::SqliteStore::open(db).unwrap();
    let conversations = store.conversations(Some("chat")).await.unwrap();
    assert_eq!(conversations.len(), 1);
    store.turns(&conversations[0].id).await.unwrap()
}

#[tokio::test]
#[ignore = "needs a real model: see scripts/real-model.sh"]
async fn real_model_counts_the_lines_of_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("chat.sqlite3");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("notes.txt"), "a\nb\nc\nd\ne\nf\ng\n").unwrap();
    let (out, err, code, took) = chat(
        &work,
        &db,
        "How many lines does the file notes.txt have? Count them with a shell command.",
    )
    .await;
    eprintln!("took {took:?}\n{out}\n{err}");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("[cmd-1-0] completed"), "a command ran: {out}");
    let turns = saved_turns(&db).await;
    assert!(turns
        .iter()
        .any(|t| t.role == cmdr::agent::Role::Tool && t.content.contains('7')));
    let answer = turns
        .iter()
        .rev()
        .find(|t| t.role == cmdr::agent::Role::Assistant)
        .unwrap();
    assert!(
        answer.content.contains('7'),
        "the answer holds the count: {}",
        answer.content
    );
}

#[tokio::test]
#[ignore = "needs a real model: see scripts/real-model.sh"]
async fn real_model_creates_and_runs_a_small_script() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("chat.sqlite3");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let (out, err, code, took) = chat(
        &work,
        &db,
        "Run this shell command: echo 'echo $((20+22))' > hello.sh && bash hello.sh",
    )
    .await;
    eprintln!("took {took:?}\n{out}\n{err}");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(work.join("hello.sh").exists(), "{out}");
    let turns = saved_turns(&db).await;
    assert!(
        turns
            .iter()
            .any(|t| t.role == cmdr::agent::Role::Tool && t.content.contains("42")),
        "{out}"
    );
}

/// A `cmdr serve` process over a temp world, asking the real model.
async fn serve() -> cmdr_test_support::serve::Serve {
    cmdr_test_support::serve::Serve::start(cmdr_test_support::serve::Options {
        endpoint: Some(endpoint()),
        ..Default::default()
    })
    .await
}

fn event_types(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
#[ignore = "needs a real model: see scripts/real-model.sh"]
async fn real_model_through_the_stream_route_runs_a_command_and_persists_the_turns() {
    let serve = serve().await;
    let started = Instant::now();
    let reader = serve
        .sse(
            "/agents/helper/stream",
            serde_json::json!({"message": "Use a shell command to print the current date."}),
        )
        .await;
    let events = tokio::time::timeout(REAL_PATIENCE, reader.all())
        .await
        .expect("the run ends");
    eprintln!("took {:?}: {:?}", started.elapsed(), event_types(&events));
    let types = event_types(&events);
    assert_eq!(types.first().map(String::as_str), Some("conversation"));
    assert_eq!(types.last().map(String::as_str), Some("done"), "{events:?}");
    let result = events
        .iter()
        .find(|e| e["type"] == "tool-result")
        .unwrap_or_else(|| panic!("a command ran: {events:?}"));
    assert_eq!(result["commandId"], "cmd-1-0");
    assert_eq!(result["status"], "completed", "{result}");
    let id = events[0]["conversationId"].as_str().unwrap();
    let turns = serve.get(&format!("/conversations/{id}/turns")).await;
    let roles: Vec<&str> = turns["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(&roles[..3], ["user", "assistant", "tool"], "{turns}");
}

#[tokio::test]
#[ignore = "needs a real model: see scripts/real-model.sh"]
async fn real_model_aborted_mid_generation_keeps_the_partial_reply_as_stopped() {
    let serve = serve().await;
    let mut reader = serve
        .sse(
            "/agents/helper/stream",
            serde_json::json!({"message": "Without running any command, write a long essay (at least 1000 words) about the history of the Unix shell."}),
        )
        .await;
    let opened = reader.until(|e| e["type"] == "conversation").await;
    let id = opened["conversationId"].as_str().unwrap().to_owned();
    for _ in 0..5 {
        reader.until(|e| e["type"] == "text").await;
    }
    // The client goes away mid-generation: the run is stopped.
    drop(reader);
    let deadline = Instant::now() + REAL_PATIENCE;
    loop {
        let turns = serve.get(&format!("/conversations/{id}/turns")).await;
        let items = turns["items"].as_array().cloned().unwrap_or_default();
        if let Some(reply) = items.iter().find(|t| t["role"] == "assistant") {
            assert_eq!(reply["status"], "stopped", "{reply}");
            assert!(!reply["content"].as_str().unwrap_or_default().is_empty());
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the partial reply was never recorded: {turns}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
#[ignore = "needs a real model: see scripts/real-model.sh"]
async fn real_model_asks_the_person_and_hears_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("chat.sqlite3");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let (out, err, code, took) = chat(
        &work,
        &db,
        "Ask me for the name of the file to create, using an <ask> tag, then create that file with touch.\nanswer.txt",
    )
    .await;
    eprintln!("took {took:?}\n{out}\n{err}");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.lines().any(|l| l.starts_with("? ")),
        "the question was shown: {out}"
    );
    let turns = saved_turns(&db).await;
    let asked = turns
        .iter()
        .find(|t| t.role == cmdr::agent::Role::Tool)
        .unwrap_or_else(|| panic!("{out}"));
    assert!(asked.tool_runs.iter().any(|r| r.question), "{asked:?}");
    assert!(asked.content.ends_with("\nanswer.txt"), "{}", asked.content);
}
