//! Agent runs over HTTP: to completion, as SSE, stateless; every error of docs/contract.md §6;
//! aborts on client disconnect; one run per conversation.

use std::sync::Arc;
use std::time::Duration;

use cmdr::http::HttpConfig;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::http::fake_llm::{FakeLlm, Reply};
use crate::http::support::{
    assert_error, call_ids, eventually, gone, lifecycle, server, start, types, Item, Options,
};

#[tokio::test]
async fn a_run_to_completion_answers_its_info_and_outcome() {
    let llm = FakeLlm::start(vec![
        Reply::text("Sure: <shell>echo hi</shell>"),
        Reply::text("It said hi."),
        Reply::text("Again."),
    ])
    .await;
    let server = server(&llm).await;
    let (status, body) = server
        .post("/agents/helper/run", json!({"instruction": "greet"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = body["conversationId"].as_str().unwrap().to_owned();
    assert_eq!(
        body,
        json!({
            "agentName": "helper",
            "conversationId": id,
            "modelId": "fake-model",
            "status": "completed"
        })
    );
    let roles: Vec<_> = server
        .turns(&id)
        .await
        .iter()
        .map(|t| t["role"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);

    // The conversation continues, with its history sent to the model.
    let (status, body) = server
        .post(
            "/agents/helper/run",
            json!({"instruction": "again", "conversationId": id, "working_folder": server.world.work()}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["conversationId"], id.as_str());
    assert_eq!(server.turns(&id).await.len(), 6);
    let third = &llm.requests()[2]["messages"];
    assert_eq!(
        third.as_array().unwrap().len(),
        1 + 5,
        "system + history + new"
    );
}

#[tokio::test]
async fn a_failed_run_reports_failed_with_its_error() {
    let llm = FakeLlm::start(vec![Reply::Status(500, r#"{"error":"boom"}"#.into())]).await;
    let server = server(&llm).await;
    let (status, body) = server
        .post("/agents/helper/run", json!({"instruction": "hi"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "failed");
    assert!(body["error"]["code"].as_str().unwrap().starts_with("LLM_"));
    assert!(!body["error"]["message"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn an_agent_command_runs_every_step() {
    let llm = FakeLlm::start(vec![
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("three"),
    ])
    .await;
    let server = server(&llm).await;
    let (status, body) = server
        .post(
            "/agents/helper/commands/run",
            json!({"commandName": "three"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = body["conversationId"].as_str().unwrap().to_owned();
    assert_eq!(
        body,
        json!({
            "agentName": "helper",
            "commandName": "three",
            "conversationId": id,
            "modelId": "fake-model",
            "status": "completed"
        })
    );
    let turns = server.turns(&id).await;
    let steps: Vec<_> = turns
        .iter()
        .map(|t| {
            (
                t["role"].as_str().unwrap().to_owned(),
                t["command"]["stepIndex"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("user".to_owned(), 1),
            ("assistant".to_owned(), 1),
            ("user".to_owned(), 2),
            ("assistant".to_owned(), 2),
            ("user".to_owned(), 3),
            ("assistant".to_owned(), 3),
        ]
    );
}

/// Every refusal of the run routes, before anything runs.
#[tokio::test]
async fn refusals_map_to_the_statuses_of_spec_section_6() {
    let llm = FakeLlm::start(vec![]).await;
    let server = server(&llm).await;
    let work = server.world.work().display().to_string();
    let missing = server.world.work().join("missing").display().to_string();
    let cases = [
        (
            "/agents/nobody/run",
            json!({"instruction": "x"}),
            404,
            "not_found",
            "AGENT_NOT_FOUND",
        ),
        (
            "/agents/nobody/stream",
            json!({"message": "x"}),
            404,
            "not_found",
            "AGENT_NOT_FOUND",
        ),
        (
            "/agents/nobody/commands/run",
            json!({"commandName": "three"}),
            404,
            "not_found",
            "AGENT_NOT_FOUND",
        ),
        (
            "/agents/helper/commands/run",
            json!({"commandName": "nope"}),
            404,
            "not_found",
            "COMMAND_NOT_FOUND",
        ),
        (
            "/agents/helper/commands/run",
            json!({"commandName": "../three"}),
            400,
            "invalid_request",
            "COMMAND_INVALID",
        ),
        (
            "/agents/helper/commands/run",
            json!({"commandName": "broken"}),
            400,
            "invalid_request",
            "COMMAND_INVALID",
        ),
        (
            "/agents/helper/run",
            json!({"instruction": "x", "conversationId": "nope"}),
            404,
            "not_found",
            "CONVERSATION_NOT_FOUND",
        ),
        (
            "/agents/helper/stream",
            json!({"message": "x", "conversationId": "nope"}),
            404,
            "not_found",
            "CONVERSATION_NOT_FOUND",
        ),
        (
            "/agents/helper/run",
            json!({"instruction": "x", "working_folder": "relative/dir"}),
            400,
            "invalid_request",
            "WORKING_FOLDER_INVALID",
        ),
        (
            "/agents/helper/stream",
            json!({"message": "x", "working_folder": "relative"}),
            400,
            "invalid_request",
            "WORKING_FOLDER_INVALID",
        ),
        (
            "/agents/helper/commands/run",
            json!({"commandName": "three", "working_folder": "rel"}),
            400,
            "invalid_request",
            "WORKING_FOLDER_INVALID",
        ),
        (
            "/agents/helper/run",
            json!({"instruction": "x", "working_folder": missing}),
            400,
            "invalid_request",
            "WORKING_FOLDER_NOT_FOUND",
        ),
        (
            "/agents/helper/stream",
            json!({"message": "x", "working_folder": missing}),
            400,
            "invalid_request",
            "WORKING_FOLDER_NOT_FOUND",
        ),
        (
            "/agents/helper/run",
            json!({"instruction": "   "}),
            400,
            "invalid_request",
            "INVALID_REQUEST",
        ),
        (
            "/agents/helper/run",
            json!({"instruction": "x", "conversationId": " padded "}),
            400,
            "invalid_request",
            "INVALID_REQUEST",
        ),
        (
            "/agents/helper/run",
            json!({"conversationId": "x"}),
            400,
            "invalid_request",
            "INVALID_REQUEST",
        ),
        (
            "/agents/helper/run",
            json!({"instruction": 5}),
            400,
            "invalid_request",
            "INVALID_REQUEST",
        ),
        (
            "/agents/helper/stream",
            json!({"message": ["a"]}),
            400,
            "invalid_request",
            "INVALID_REQUEST",
        ),
        (
            "/agents/helper/commands/run",
            json!({"commandName": null}),
            400,
            "invalid_request",
            "INVALID_REQUEST",
        ),
        (
            "/agents/helper/run",
            json!({"instruction": "x", "working_folder": work, "conversationId": 7}),
            400,
            "invalid_request",
            "INVALID_REQUEST",
        ),
    ];
    for (path, body, status, error, code) in cases {
        let answer = server.post(path, body.clone()).await;
        assert_error(&answer, status, error, code);
        assert!(
            !answer.1["message"].as_str().unwrap().is_empty(),
            "{path} {body}"
        );
    }
    // The messages name the field and the problem.
    let (_, body) = server.post("/agents/helper/run", json!({})).await;
    assert_eq!(body["message"], "missing field `instruction`");
    let (_, body) = server
        .post("/agents/helper/run", json!({"instruction": 5}))
        .await;
    assert_eq!(
        body["message"],
        "field `instruction`: invalid type: integer `5`, expected a string"
    );
    let (_, body) = server
        .post(
            "/agents/helper/run",
            json!({"instruction": "x", "conversationId": 7}),
        )
        .await;
    assert!(body["message"]
        .as_str()
        .unwrap()
        .starts_with("field `conversationId`"));
    for raw in [
        "{\"instruction\": ",
        "not json",
        "",
        "[1, 2]",
        "{\"instruction\": \"x\"} trailing",
    ] {
        let answer = server.post_raw("/agents/helper/run", raw).await;
        assert_error(&answer, 400, "invalid_request", "INVALID_REQUEST");
    }
    let (_, body) = server
        .post_raw("/agents/helper/run", "{\"instruction\": ")
        .await;
    assert!(body["message"]
        .as_str()
        .unwrap()
        .starts_with("malformed JSON"));
    assert_eq!(llm.request_count(), 0, "nothing ran");
    let (_, body) = server.get("/conversations").await;
    assert_eq!(body, json!({"conversations": []}), "nothing was created");
}

#[tokio::test]
async fn without_a_model_runs_are_refused_with_503_llm_unavailable() {
    let server = start(None, Options::default()).await;
    for (path, body) in [
        ("/agents/helper/run", json!({"instruction": "x"})),
        ("/agents/helper/stream", json!({"message": "x"})),
        (
            "/agents/helper/commands/run",
            json!({"commandName": "three"}),
        ),
        (
            "/api/agent",
            json!({"messages": [{"role": "user", "content": "x"}]}),
        ),
    ] {
        let answer = server.post(path, body).await;
        assert_error(&answer, 503, "unavailable", "LLM_UNAVAILABLE");
    }
}

/// docs/contract.md §4 case 1 over SSE: three commands, each queued → running → completed.
#[tokio::test]
async fn the_stream_shows_three_commands_each_queued_running_completed() {
    let reply = "Checking.\n<shell>echo one</shell> <shell>echo two >&2</shell> <shell>printf three</shell>";
    let llm = FakeLlm::start(vec![Reply::text(reply), Reply::text("All three ran.")]).await;
    let server = server(&llm).await;
    let events = server
        .sse(
            "/agents/helper/stream",
            json!({"message": "run three things"}),
        )
        .await
        .all()
        .await;
    let id = events[0]["conversationId"].as_str().unwrap().to_owned();
    assert_eq!(
        events[0],
        json!({"type": "conversation", "conversationId": id})
    );
    assert_eq!(call_ids(&events), ["cmd-1-0", "cmd-1-1", "cmd-1-2"]);
    assert_eq!(lifecycle(&events, "cmd-1-0", "completed"), "one\n");
    assert_eq!(lifecycle(&events, "cmd-1-1", "completed"), "two\n");
    assert_eq!(lifecycle(&events, "cmd-1-2", "completed"), "three");
    let position = |kind: &str, id: &str| {
        events
            .iter()
            .position(|e| e["type"] == kind && e["commandId"] == id)
            .unwrap()
    };
    assert!(position("tool-result", "cmd-1-0") < position("tool-start", "cmd-1-1"));
    let ends: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "iteration-end")
        .cloned()
        .collect();
    assert_eq!(
        ends,
        [
            json!({"type": "iteration-end", "iteration": 1, "hasMoreCommands": true}),
            json!({"type": "iteration-end", "iteration": 2, "hasMoreCommands": false}),
        ]
    );
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "done", "reason": "completed"})
    );
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text")
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, format!("{reply}All three ran."));
    let turns = server.turns(&id).await;
    assert_eq!(turns[1]["content"], reply, "stored verbatim");
    assert_eq!(
        turns[2]["content"],
        "$ echo one\none\n\n$ echo two >&2\ntwo\n\n$ printf three\nthree"
    );
}

/// docs/contract.md §4 case 2 over SSE: `<shell>ls</shell> <shell>ls</shell>`.
#[tokio::test]
async fn the_stream_gives_duplicate_commands_distinct_ids_and_own_results() {
    let llm = FakeLlm::start(vec![Reply::text("<shell>ls</shell> <shell>ls</shell>")]).await;
    let server = server(&llm).await;
    std::fs::write(server.world.work().join("a.txt"), "").unwrap();
    std::fs::write(server.world.work().join("b.txt"), "").unwrap();
    let events = server
        .sse("/agents/helper/stream", json!({"message": "list twice"}))
        .await
        .all()
        .await;
    assert_eq!(call_ids(&events), ["cmd-1-0", "cmd-1-1"]);
    for id in ["cmd-1-0", "cmd-1-1"] {
        assert_eq!(lifecycle(&events, id, "completed"), "a.txt\nb.txt\n");
    }
    let results = events.iter().filter(|e| e["type"] == "tool-result").count();
    assert_eq!(results, 2, "one result per command");
    assert_eq!(events.last().unwrap()["type"], "done");
}

/// docs/contract.md §4 case 3 over SSE: the model reacts to results over several iterations.
#[tokio::test]
async fn the_stream_follows_several_iterations() {
    let llm = FakeLlm::start(vec![
        Reply::text("First: <shell>echo 41</shell>"),
        Reply::text("Now: <shell>echo $((41 + 1))</shell>"),
        Reply::text("The answer is 42."),
    ])
    .await;
    let server = server(&llm).await;
    let events = server
        .sse("/agents/helper/stream", json!({"message": "compute"}))
        .await
        .all()
        .await;
    assert_eq!(call_ids(&events), ["cmd-1-0", "cmd-2-0"]);
    assert_eq!(lifecycle(&events, "cmd-1-0", "completed"), "41\n");
    assert_eq!(lifecycle(&events, "cmd-2-0", "completed"), "42\n");
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "done", "reason": "completed"})
    );
    assert_eq!(llm.request_count(), 3);
    let finals = events
        .iter()
        .filter(|e| e["type"] == "done" || e["type"] == "error")
        .count();
    assert_eq!(finals, 1);
}

#[tokio::test]
async fn a_stream_continues_a_conversation_and_ends_with_error_on_model_failure() {
    let llm = FakeLlm::start(vec![
        Reply::text("first"),
        Reply::Status(500, r#"{"error":"boom"}"#.into()),
    ])
    .await;
    let server = server(&llm).await;
    let events = server
        .sse("/agents/helper/stream", json!({"message": "one"}))
        .await
        .all()
        .await;
    let id = events[0]["conversationId"].as_str().unwrap().to_owned();
    // The stream closed: the lock is free at once.
    let events = server
        .sse(
            "/agents/helper/stream",
            json!({"message": "two", "conversationId": id}),
        )
        .await
        .all()
        .await;
    assert_eq!(
        events[0],
        json!({"type": "conversation", "conversationId": id})
    );
    let last = events.last().unwrap();
    assert_eq!(last["type"], "error");
    assert!(last["code"].as_str().unwrap().starts_with("LLM_"));
    assert!(!last["message"].as_str().unwrap().is_empty());
    let statuses: Vec<_> = server
        .turns(&id)
        .await
        .iter()
        .map(|t| t["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(statuses, ["ok", "ok", "ok", "failed"]);
}

#[tokio::test]
async fn an_idle_stream_sends_keep_alive_comments() {
    let gate = Arc::new(Notify::new());
    let llm = FakeLlm::start(vec![Reply::Gated(
        vec!["thinking".into()],
        Arc::clone(&gate),
        vec![" done".into()],
    )])
    .await;
    let config = HttpConfig {
        keep_alive: Duration::from_millis(50),
        ..HttpConfig::default()
    };
    let server = start(
        Some(&llm),
        Options {
            config,
            ..Options::default()
        },
    )
    .await;
    let mut sse = server
        .sse("/agents/helper/stream", json!({"message": "wait"}))
        .await;
    sse.until(|e| e["type"] == "text").await;
    // Nothing happens until the gate opens: the next item is a comment.
    assert_eq!(
        sse.item().await.unwrap(),
        Item::Comment("keep-alive".to_owned())
    );
    gate.notify_one();
    let events = sse.all().await;
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "done", "reason": "completed"})
    );
}

/// Closing the SSE response mid-command stops the run: the command's process tree is
/// killed, the tool turn is persisted `stopped`, nothing further starts.
#[tokio::test]
async fn dropping_the_stream_stops_the_run_kills_the_command_and_persists_stopped() {
    let reply = "<shell>sleep 1000 & echo $!; sleep 1000</shell><shell>touch ran</shell>";
    let llm = FakeLlm::start(vec![Reply::text(reply)]).await;
    let server = server(&llm).await;
    let mut sse = server
        .sse("/agents/helper/stream", json!({"message": "sleep"}))
        .await;
    let id = sse.event().await.unwrap()["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();
    let output = sse.until(|e| e["type"] == "tool-output").await;
    let pid: i32 = output["content"].as_str().unwrap().trim().parse().unwrap();
    assert!(!gone(pid));
    drop(sse);

    eventually("the sleep is killed", async || gone(pid)).await;
    eventually("the stopped tool turn is persisted", async || {
        let turns = server.turns(&id).await;
        turns
            .last()
            .is_some_and(|t| t["role"] == "tool" && t["status"] == "stopped")
    })
    .await;
    let turns = server.turns(&id).await;
    let summary: Vec<_> = turns
        .iter()
        .map(|t| (t["role"].as_str().unwrap(), t["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        summary,
        [("user", "ok"), ("assistant", "ok"), ("tool", "stopped")]
    );
    let runs: Vec<_> = turns[2]["toolRuns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(runs, ["stopped", "skipped"]);
    assert!(
        !server.world.work().join("ran").exists(),
        "nothing starts after the abort"
    );
    assert_eq!(llm.request_count(), 1, "the model is not asked again");
    // The lock was released: the conversation takes a new run.
    eventually("the lock is released", async || {
        !server.state.service.locks().is_busy(&id)
    })
    .await;
}

/// Closing a `POST …/run` request (no streaming) stops the run as well: hyper drops the
/// handler's future when the client goes away, which fires the run's token.
#[tokio::test]
async fn closing_a_run_request_stops_the_run_and_persists_stopped() {
    let llm = FakeLlm::start(vec![Reply::Hang(vec!["thinking about".into()])]).await;
    let server = server(&llm).await;
    let http = server.http.clone();
    let url = server.url("/agents/helper/run");
    let request = tokio::spawn(async move {
        http.post(url)
            .json(&json!({"instruction": "think"}))
            .send()
            .await
    });
    llm.wait_requests(1).await;
    request.abort();
    let _ = request.await;
    llm.wait_disconnects(1).await;

    let (_, body) = server.get("/conversations?agentName=helper").await;
    let id = body["conversations"][0]["id"].as_str().unwrap().to_owned();
    eventually("the stopped assistant turn is persisted", async || {
        let turns = server.turns(&id).await;
        turns
            .last()
            .is_some_and(|t| t["role"] == "assistant" && t["status"] == "stopped")
    })
    .await;
    let turns = server.turns(&id).await;
    assert_eq!(turns[1]["content"], "thinking about");
}

/// Two runs at once on one conversation: exactly one is refused with 409.
#[tokio::test]
async fn two_concurrent_runs_on_one_conversation_give_exactly_one_409() {
    let gate = Arc::new(Notify::new());
    let llm = FakeLlm::start(vec![
        Reply::text("created"),
        Reply::Gated(
            vec!["held".into()],
            Arc::clone(&gate),
            vec![" released".into()],
        ),
    ])
    .await;
    let server = server(&llm).await;
    let (_, body) = server
        .post("/agents/helper/run", json!({"instruction": "create"}))
        .await;
    let id = body["conversationId"].as_str().unwrap().to_owned();

    let run = |instruction: &str| {
        let http = server.http.clone();
        let url = server.url("/agents/helper/run");
        let body = json!({"instruction": instruction, "conversationId": id});
        tokio::spawn(async move {
            let response = http.post(url).json(&body).send().await.unwrap();
            crate::http::support::json_of(response).await
        })
    };
    let mut first = run("a");
    let mut second = run("b");
    // The winner waits at the gate, so the loser answers first.
    let (refused, winner) = tokio::select! {
        answer = &mut first => (answer.unwrap(), second),
        answer = &mut second => (answer.unwrap(), first),
    };
    assert_error(&refused, 409, "conflict", "RUN_IN_PROGRESS");
    // Other conversations are not blocked.
    let (status, _) = server
        .post("/agents/helper/run", json!({"instruction": "elsewhere"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    gate.notify_one();
    let (status, body) = winner.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "completed");

    // The same through the streaming route: a stream holds the lock while it runs.
    let gate = Arc::new(Notify::new());
    llm.push([Reply::Gated(
        vec!["held".into()],
        Arc::clone(&gate),
        vec![" again".into()],
    )]);
    let mut sse = server
        .sse(
            "/agents/helper/stream",
            json!({"message": "hold", "conversationId": id}),
        )
        .await;
    sse.until(|e| e["type"] == "text").await;
    let refused = server
        .post(
            "/agents/helper/stream",
            json!({"message": "no", "conversationId": id}),
        )
        .await;
    assert_error(&refused, 409, "conflict", "RUN_IN_PROGRESS");
    let refused = server
        .post(
            "/agents/helper/commands/run",
            json!({"commandName": "three", "conversationId": id}),
        )
        .await;
    assert_error(&refused, 409, "conflict", "RUN_IN_PROGRESS");
    gate.notify_one();
    assert_eq!(sse.all().await.last().unwrap()["type"], "done");
}

#[tokio::test]
async fn the_stateless_route_streams_the_same_events_and_persists_nothing() {
    let llm = FakeLlm::start(vec![
        Reply::text("<shell>echo 41</shell>"),
        Reply::text("42."),
    ])
    .await;
    let server = server(&llm).await;
    let events = server
        .sse(
            "/api/agent",
            json!({"messages": [
                {"role": "user", "content": "earlier"},
                {"role": "assistant", "content": "noted"},
                {"role": "user", "content": "compute"}
            ]}),
        )
        .await
        .all()
        .await;
    assert_eq!(
        events[0]["type"], "text",
        "no conversation event: nothing is stored"
    );
    assert_eq!(lifecycle(&events, "cmd-1-0", "completed"), "41\n");
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "done", "reason": "completed"})
    );
    assert!(types(&events).contains(&"iteration-end".to_owned()));
    let first = &llm.requests()[0]["messages"];
    let contents: Vec<_> = first
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|m| (m["role"].clone(), m["content"].clone()))
        .collect();
    assert_eq!(
        contents,
        [
            (json!("user"), json!("earlier")),
            (json!("assistant"), json!("noted")),
            (json!("user"), json!("compute")),
        ]
    );
    let (_, body) = server.get("/conversations").await;
    assert_eq!(body, json!({"conversations": []}));

    for (body, needle) in [
        (
            json!({"messages": []}),
            "must end with a non-empty user message",
        ),
        (
            json!({"messages": [{"role": "assistant", "content": "x"}]}),
            "must end with a non-empty user message",
        ),
        (
            json!({"messages": [{"role": "robot", "content": "x"}]}),
            "field `messages[0].role`: unknown variant `robot`",
        ),
        (
            json!({"messages": [{"role": "user"}]}),
            "field `messages[0]`: missing field `content`",
        ),
        (json!({"messages": "hi"}), "field `messages`: invalid type"),
        (json!({}), "missing field `messages`"),
    ] {
        let answer = server.post("/api/agent", body.clone()).await;
        assert_error(&answer, 400, "invalid_request", "INVALID_REQUEST");
        let message = answer.1["message"].as_str().unwrap();
        assert!(message.contains(needle), "{body}: {message}");
    }
}

/// Cancelling `AppState::shutdown` stops every HTTP run; each stream ends with
/// `done` (`stopped`) and the run is persisted.
#[tokio::test]
async fn shutdown_stops_streams_and_persists_them() {
    let llm = FakeLlm::start(vec![Reply::Hang(vec!["partial".into()])]).await;
    let config = HttpConfig::default();
    let server = start(
        Some(&llm),
        Options {
            config: config.clone(),
            ..Options::default()
        },
    )
    .await;
    let mut sse = server
        .sse("/agents/helper/stream", json!({"message": "wait"}))
        .await;
    let id = sse.event().await.unwrap()["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();
    sse.until(|e| e["type"] == "text").await;
    server.state.shutdown.cancel();
    config.tasks.close();
    tokio::time::timeout(Duration::from_secs(20), config.tasks.wait())
        .await
        .unwrap();
    let events: Vec<Value> = sse.all().await;
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "done", "reason": "stopped"})
    );
    let turns = server.turns(&id).await;
    assert_eq!(turns[1]["status"], "stopped");
    assert_eq!(turns[1]["content"], "partial");
}

/// `done` means the conversation is free: a client that sends its next message the moment
/// it reads `done` (without waiting for the stream to close) is never refused with 409.
/// Agent commands run in between (their REST answer also means "free").
#[tokio::test]
async fn the_next_message_sent_on_done_is_never_refused() {
    let llm = FakeLlm::start(vec![]).await;
    let server = server(&llm).await;
    server.world.command(
        "helper",
        "three_steps",
        &crate::http::support::three_steps(),
    );
    let mut conversation: Option<String> = None;
    for round in 0..60 {
        if round % 10 == 9 {
            let id = conversation.clone().unwrap();
            let (status, body) = server
                .post(
                    "/agents/helper/commands/run",
                    json!({"commandName": "three_steps", "conversationId": id}),
                )
                .await;
            assert_eq!(status, StatusCode::OK, "round {round}: {body}");
            continue;
        }
        let mut body = json!({"message": "next"});
        if let Some(id) = &conversation {
            body["conversationId"] = json!(id);
        }
        let response = server
            .http
            .post(server.url("/agents/helper/stream"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        assert_eq!(
            status,
            StatusCode::OK,
            "round {round}: {}",
            response.text().await.unwrap()
        );
        let mut events = crate::http::support::SseReader::new(response);
        let first = events.event().await.unwrap();
        conversation.get_or_insert_with(|| first["conversationId"].as_str().unwrap().to_owned());
        let end = events
            .until(|e| e["type"] == "done" || e["type"] == "error")
            .await;
        assert_eq!(end["type"], "done", "round {round}: {end}");
        // The stream is still open here; the next request goes out at once.
    }
}

/// An agent's `<ask>` is a question only the person answers: it waits in
/// `GET /commands/inputs` (the web UI's card), a request without the person key is
/// refused, and the answer goes back to the model.
#[tokio::test]
async fn an_agents_question_waits_for_the_person_and_its_answer_reaches_the_model() {
    let llm = FakeLlm::start(vec![
        Reply::text("<ask>Which branch?</ask>"),
        Reply::text("Using main."),
    ])
    .await;
    let server = server(&llm).await;
    let mut sse = server
        .sse("/agents/helper/stream", json!({"message": "deploy"}))
        .await;
    let call = sse.until(|e| e["type"] == "tool-call").await;
    assert_eq!(call["kind"], "ask");
    assert_eq!(call["command"], "Which branch?");
    let mut waiting = Value::Null;
    eventually("the question is listed", async || {
        let (_, body) = server.get("/commands/inputs").await;
        waiting = body["inputs"][0].clone();
        !waiting.is_null()
    })
    .await;
    assert_eq!(waiting["prompt"], "Which branch?");
    let id = waiting["commandId"].as_str().unwrap().to_owned();
    // The id holds a `/` (`{run}/cmd-1-0`): one path segment, encoded as the web UI does.
    let path = format!("/commands/{}/input", id.replace('/', "%2F"));
    let forged = server
        .post(&path, json!({"value": "evil", "key": "guess"}))
        .await;
    assert_error(&forged, 403, "forbidden", "INPUT_FORBIDDEN");
    let person = server.state.input_keys.person_key().to_owned();
    let (status, _) = server
        .post(&path, json!({"value": "main", "key": person}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let events = sse.all().await;
    assert_eq!(events.last().unwrap()["type"], "done", "{events:?}");
    let sent = llm.requests()[1]["messages"].to_string();
    assert!(sent.contains("? Which branch?\\nmain"), "{sent}");
}
