//! `cmdr serve` SIGKILLed in the middle of an agent run, then started again on the same
//! database: the database passes `PRAGMA integrity_check`, the conversation is listed,
//! its turns are readable and the interrupted run is closed with a `stopped` tool turn
//! (not left looking as if it were still running), no lock is left behind (a new run on
//! the conversation completes), and the orphaned commands do not outlive the server:
//! one that writes dies of SIGPIPE, a silent one is killed when the restarted server
//! closes the interrupted run (`cmdr::orphans`).

use std::path::Path;

use cmdr::recovery::INTERRUPTED_NOTE;
use serde_json::{json, Value};

use crate::fake_llm::{FakeLlm, Reply};
use crate::http_support::{eventually, gone};
use crate::serve::{db, Options, Serve};
use crate::PATIENCE;

/// `PRAGMA integrity_check` of the database file, as SQLite itself reports it.
fn integrity(dir: &Path) -> String {
    let conn = rusqlite::Connection::open(db(dir)).unwrap();
    conn.query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap()
}

fn summary(turns: &[Value]) -> Vec<(String, String)> {
    turns
        .iter()
        .map(|t| {
            (
                t["role"].as_str().unwrap().to_owned(),
                t["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_run_restarts_with_the_conversation_intact_and_usable() {
    let dir = tempfile::tempdir().unwrap();
    let script = "echo $$; sleep 300 & echo bg $!; while :; do echo tick; sleep 0.2; done";
    let llm = FakeLlm::start(vec![Reply::text(&format!(
        "Looping.<shell>{script}</shell>"
    ))])
    .await;
    let first = Serve::start_in(
        dir.path(),
        Options {
            llm: Some(&llm),
            ..Options::default()
        },
    )
    .await;
    let mut sse = first
        .sse("/agents/helper/stream", json!({"message": "loop for ever"}))
        .await;
    let id = sse.event().await.unwrap()["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut printed = String::new();
    while !printed.contains("tick") {
        let output = sse.until(|e| e["type"] == "tool-output").await;
        printed.push_str(output["content"].as_str().unwrap());
    }
    let shell: i32 = printed.lines().next().unwrap().parse().unwrap();
    let silent: i32 = printed
        .lines()
        .find_map(|l| l.strip_prefix("bg "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(!gone(shell) && !gone(silent), "the command runs");

    first.crash().await;
    drop(sse);
    eventually(
        "the orphaned shell dies on its next write (SIGPIPE)",
        async || gone(shell),
    )
    .await;
    assert_eq!(
        integrity(dir.path()),
        "ok",
        "the database as the crash left it"
    );
    // The silent orphan outlives the crash itself; whichever cmdr starts next on the host
    // ends it (another test's server may, running alongside: not asserted here).

    let second = Serve::start_in(
        dir.path(),
        Options {
            llm: Some(&llm),
            ..Options::default()
        },
    )
    .await;
    eventually(
        "the silent orphan is killed when the interrupted run is closed",
        async || gone(silent),
    )
    .await;
    assert_eq!(integrity(dir.path()), "ok");
    let listed = second.get("/conversations?agentName=helper").await;
    let ids: Vec<_> = listed["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].clone())
        .collect();
    assert_eq!(ids, [json!(id)], "{listed}");
    let turns = second.get(&format!("/conversations/{id}/turns")).await;
    let turns = turns["items"].as_array().unwrap().clone();
    assert_eq!(
        summary(&turns),
        [
            ("user".into(), "ok".into()),
            ("assistant".into(), "ok".into()),
            ("tool".into(), "stopped".into())
        ],
        "{turns:#?}"
    );
    assert_eq!(turns[0]["content"], "loop for ever");
    assert_eq!(
        turns[2]["content"],
        format!("$ {script}\n[{INTERRUPTED_NOTE}]")
    );
    assert_eq!(
        turns[2]["toolRuns"],
        json!([{"commandId": "cmd-1-0", "command": script, "status": "stopped"}])
    );

    // No lock was left behind: a new run on the conversation completes, and the model
    // sees the interrupted command's note in the history.
    let again = second
        .sse(
            "/agents/helper/stream",
            json!({"message": "again", "conversationId": id}),
        )
        .await;
    let events = tokio::time::timeout(PATIENCE, again.all()).await.unwrap();
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "done", "reason": "completed"}),
        "{events:#?}"
    );
    let asked = llm.requests().last().unwrap().to_string();
    assert!(asked.contains("interrupted: cmdr stopped"), "{asked}");
    let turns = second.get(&format!("/conversations/{id}/turns")).await;
    let roles: Vec<_> = summary(turns["items"].as_array().unwrap());
    assert_eq!(roles.len(), 5, "{roles:?}");
    assert_eq!(roles[4], ("assistant".into(), "ok".into()));

    assert_eq!(second.stop().await, 0);
    assert_eq!(integrity(dir.path()), "ok");
    let markers: i64 = rusqlite::Connection::open(db(dir.path()))
        .unwrap()
        .query_row("SELECT COUNT(*) FROM runs", [], |row| row.get(0))
        .unwrap();
    assert_eq!(markers, 0, "every run ended: no marker left");
}

/// Starts `sleep 300` in the background on `serve` over REST; the shell's pid.
async fn background_sleeper(serve: &Serve) -> i32 {
    let response = serve
        .post(
            "/processes",
            &json!({"command": "echo $$; exec sleep 300", "ready": {"output": "^[0-9]+"}}),
        )
        .await;
    let started: Value = response.json().await.unwrap();
    assert_eq!(started["status"], "SUCCEEDED", "{started}");
    started["resultData"]
        .as_str()
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A SIGKILLed `cmdr serve` leaves its background processes running (nothing of its
/// shutdown ran); the next server started on the host ends them, and leaves a live
/// server's processes alone (issue 32.10).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_ends_what_a_killed_one_held_and_nothing_of_a_live_one() {
    let killed = Serve::start(Options::default()).await;
    let live = Serve::start(Options::default()).await;
    let orphan = background_sleeper(&killed).await;
    let kept = background_sleeper(&live).await;
    killed.crash().await;
    let restarted = Serve::start(Options::default()).await;
    eventually("the killed server's process is ended", async || {
        gone(orphan)
    })
    .await;
    assert!(!gone(kept), "a live server's process was ended");
    drop(restarted);
    assert_eq!(live.stop().await, 0);
}
