//! A real `cmdr serve --max-concurrent 2`: a third `POST /commands` while two shells hold
//! both slots is told at once on its SSE stream that it is queued, `/health` counts it,
//! and freeing a slot lets it start and end normally. The shells wait for files, not for
//! time.

use std::path::Path;

use cmdr_test_support::http::{eventually, SseReader};
use cmdr_test_support::serve::{Options, Serve};
use serde_json::{json, Value};

/// `POST /commands` of a shell that waits until `gate` exists, then prints `word`.
async fn held(server: &Serve, id: &str, gate: &Path, word: &str) -> SseReader {
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; echo {word}",
        gate.display()
    );
    let command = json!({"command_id": id, "commandType": "BASH_EXEC", "command": script});
    server.sse("/commands", command).await
}

/// The `BASH_EXEC` entry of `/health`'s `executors.concurrency`.
async fn bash_load(server: &Serve) -> Value {
    let health = server.get("/health").await;
    health["executors"]["concurrency"]["BASH_EXEC"].clone()
}

/// The events of `sse` up to its terminal one, and that one.
async fn to_the_end(sse: &mut SseReader) -> (Vec<Value>, Value) {
    let mut before = Vec::new();
    loop {
        let event = sse.event().await.expect("a terminal event");
        if event["status"] != "RUNNING" {
            return (before, event);
        }
        before.push(event);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_command_over_a_limit_of_two_is_queued_visibly_then_runs() {
    let dir = tempfile::tempdir().unwrap();
    let server = Serve::start(Options {
        args: vec!["--max-concurrent".into(), "2".into()],
        ..Options::default()
    })
    .await;
    let idle = bash_load(&server).await;
    assert_eq!(idle, json!({"limit": 2, "running": 0, "queued": 0}));

    let (gate1, gate2) = (dir.path().join("gate1"), dir.path().join("gate2"));
    let mut first = held(&server, "h-first", &gate1, "one").await;
    let mut second = held(&server, "h-second", &gate2, "two").await;
    eventually("both slots taken", async || {
        bash_load(&server).await["running"] == 2
    })
    .await;

    let mut third = held(&server, "h-third", &gate1, "three").await;
    let queued = third.event().await.expect("the queued notice");
    assert_eq!(queued["status"], "RUNNING", "{queued}");
    assert_eq!(queued["command_id"], "h-third");
    assert_eq!(
        queued["queue"],
        json!({"state": "queued", "position": 1, "limit": 2}),
        "{queued}"
    );
    assert!(queued.get("resultData").is_none(), "{queued}");
    assert_eq!(
        bash_load(&server).await,
        json!({"limit": 2, "running": 2, "queued": 1})
    );

    // The third waits for the same file as the first: once it exists, the first ends,
    // its slot frees, and the third starts and ends at once.
    std::fs::write(&gate1, "").unwrap();
    let (_, end) = to_the_end(&mut first).await;
    assert_eq!(end["status"], "SUCCEEDED", "{end}");
    let (before, end) = to_the_end(&mut third).await;
    assert_eq!(end["status"], "SUCCEEDED", "{end}");
    assert_eq!(before[0]["queue"]["state"], "started", "{before:?}");
    let output: String = before
        .iter()
        .filter_map(|m| m["resultData"].as_str())
        .collect();
    assert_eq!(output, "three\n");

    std::fs::write(&gate2, "").unwrap();
    let (before, end) = to_the_end(&mut second).await;
    assert_eq!(end["status"], "SUCCEEDED", "{end}");
    assert!(
        before.iter().all(|m| m.get("queue").is_none()),
        "a command that found a slot gets no note: {before:?}"
    );
    eventually("the slots free", async || {
        bash_load(&server).await == json!({"limit": 2, "running": 0, "queued": 0})
    })
    .await;
    assert_eq!(server.stop().await, 0);
}
