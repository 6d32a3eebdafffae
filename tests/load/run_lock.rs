//! 100 concurrent REST runs on one conversation of a real `cmdr serve` (half through
//! `POST /agents/helper/run`, half through `POST /agents/helper/stream`) while the fake
//! model holds the winner's reply open: exactly one runs, the other 99 get 409
//! `RUN_IN_PROGRESS`, and once the winner is released the conversation takes a new run.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::fake_llm::{FakeLlm, Reply};
use crate::http_support::SseReader;
use crate::serve::{Options, Serve};

/// Runs requested at once.
const RUNS: usize = 100;
use cmdr_test_support::LOAD_PATIENCE as PATIENCE;

/// What one request got: a refusal (status, body) or the winner's open response.
enum Answer {
    Refused(StatusCode, Value),
    Running(reqwest::Response, bool),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_runs_on_one_conversation_one_runs_the_rest_get_409() {
    let gate = Arc::new(Notify::new());
    let llm = FakeLlm::start(vec![
        Reply::text("created"),
        Reply::Gated(vec!["held".into()], gate.clone(), vec![" released".into()]),
    ])
    .await;
    let serve = Serve::start(Options {
        llm: Some(&llm),
        ..Options::default()
    })
    .await;
    let created: Value = serve
        .post("/agents/helper/run", &json!({"instruction": "create"}))
        .await
        .json()
        .await
        .unwrap();
    let id = created["conversationId"].as_str().unwrap().to_owned();

    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..RUNS {
        let (http, id) = (serve.http.clone(), id.clone());
        let stream = i % 2 == 1;
        let url = serve.url(if stream {
            "/agents/helper/stream"
        } else {
            "/agents/helper/run"
        });
        let body = if stream {
            json!({"message": format!("run {i}"), "conversationId": id})
        } else {
            json!({"instruction": format!("run {i}"), "conversationId": id})
        };
        tasks.spawn(async move {
            let response = http.post(url).json(&body).send().await.unwrap();
            let status = response.status();
            if status == StatusCode::CONFLICT || !status.is_success() {
                return Answer::Refused(status, response.json().await.unwrap());
            }
            Answer::Running(response, stream)
        });
    }
    // The 99 refusals come back while the winner waits at the gate; a streaming winner's
    // response (its headers) comes back too, a `run` winner's only after the gate.
    let mut refused = Vec::new();
    let mut winner = None;
    tokio::time::timeout(PATIENCE, async {
        while refused.len() < RUNS - 1 || (winner.is_none() && tasks.len() > 1) {
            match tasks.join_next().await.unwrap().unwrap() {
                Answer::Refused(status, body) => refused.push((status, body)),
                Answer::Running(response, stream) => {
                    assert!(winner.is_none(), "a second run was admitted");
                    winner = Some((response, stream));
                }
            }
        }
    })
    .await
    .expect("the refusals arrive while the winner is held");
    for (status, body) in &refused {
        assert_eq!(*status, StatusCode::CONFLICT, "{body}");
        assert_eq!(body["code"], "RUN_IN_PROGRESS", "{body}");
        assert_eq!(body["error"], "conflict", "{body}");
    }
    assert_eq!(refused.len(), RUNS - 1);
    assert_eq!(llm.request_count(), 2, "only the winner asked the model");

    gate.notify_one();
    let winner = match winner {
        Some(winner) => winner,
        None => match tokio::time::timeout(PATIENCE, tasks.join_next()).await {
            Ok(Some(Ok(Answer::Running(response, stream)))) => (response, stream),
            _ => panic!("the one request left is the winner"),
        },
    };
    match winner {
        (response, true) => {
            let events = SseReader::new(response).all().await;
            assert_eq!(events.last().unwrap()["type"], "done", "{events:?}");
        }
        (response, false) => {
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["status"], "completed", "{body}");
        }
    }

    let after = serve
        .post(
            "/agents/helper/run",
            &json!({"instruction": "after", "conversationId": id}),
        )
        .await;
    assert_eq!(after.status(), StatusCode::OK, "the lock was released");
    let after: Value = after.json().await.unwrap();
    assert_eq!(after["status"], "completed", "{after}");
    let turns = serve.get(&format!("/conversations/{id}/turns")).await;
    let users = turns["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "user")
        .count();
    assert_eq!(users, 3, "the refused runs left no turns: {turns}");
    eprintln!(
        "run lock: {RUNS} concurrent runs → 1 ran, {} got 409 RUN_IN_PROGRESS",
        refused.len()
    );
}
