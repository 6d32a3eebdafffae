//! The process routes (docs/processes.md): start with readiness, output as SSE from an
//! offset, input, list, kill, and clear errors for unknown ids and bad bodies; `tty`
//! processes through a real `cmdr serve` (a terminal, an `isatty` prompt answered, a
//! resize) and the terminal requests refused.

use cmdr_test_support::serve::{Options, Serve};
use cmdr_test_support::PATIENCE;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::http::fake_llm::FakeLlm;
use crate::http::support::{assert_error, json_of, server};

#[tokio::test]
async fn a_process_is_started_streamed_answered_listed_and_killed_over_rest() {
    let llm = FakeLlm::start(vec![]).await;
    let server = server(&llm).await;
    let (status, started) = server
        .post(
            "/processes",
            json!({"command": "echo ready; read -r x; echo \"got $x\"; sleep 60",
                   "ready": {"output": "^ready"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    assert_eq!(started["status"], "SUCCEEDED", "{started}");
    assert_eq!(started["processState"], "running");
    let id = started["processId"].as_str().unwrap().to_owned();

    let response = server
        .http
        .get(server.url(&format!("/processes/{id}/output?stream=true&offset=0")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut sse = crate::http::support::SseReader::new(response);
    let first = sse.until(|e| e["type"] == "output").await;
    assert_eq!(
        (first["offset"].as_u64(), first["text"].as_str()),
        (Some(0), Some("ready\n"))
    );

    let (status, reply) = server
        .post(
            &format!("/processes/{id}/input"),
            json!({"input": "hi\n", "yield_ms": 50}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let got = sse.until(|e| e["type"] == "output").await;
    assert_eq!(got["offset"], 6);
    assert_eq!(got["text"], "got hi\n");

    let (_, listed) = server.get("/processes").await;
    assert_eq!(listed["processes"][0]["processId"], id.as_str());
    assert_eq!(listed["processes"][0]["state"], "running");

    let (status, killed) = server
        .post(&format!("/processes/{id}/kill"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{killed}");
    assert_eq!(killed["processState"], "exited");
    let end = sse.until(|e| e["type"] == "end").await;
    assert_eq!(end["processState"], "exited");

    // Resuming from an offset gives the rest only.
    let (_, from) = server
        .get(&format!("/processes/{id}/output?offset=6"))
        .await;
    assert_eq!(from["resultData"], "got hi\n");
    assert_eq!(from["nextOffset"], 13);
}

#[tokio::test]
async fn unknown_processes_and_bad_bodies_are_clear_errors() {
    let llm = FakeLlm::start(vec![]).await;
    let server = server(&llm).await;
    let missing = server.get("/processes/p99/output").await;
    assert_error(&missing, 404, "not_found", "PROCESS_NOT_FOUND");
    let missing = server.post("/processes/nope/kill", json!({})).await;
    assert_error(&missing, 404, "not_found", "PROCESS_NOT_FOUND");
    let stream = server.get("/processes/p99/output?stream=true").await;
    assert_error(&stream, 404, "not_found", "PROCESS_NOT_FOUND");
    let bad = server
        .post("/processes", json!({"command": "true", "bogus": 1}))
        .await;
    assert_error(&bad, 400, "invalid_request", "INVALID_REQUEST");
    let bad_ready = server
        .post(
            "/processes",
            json!({"command": "true", "ready": {"output": "("}}),
        )
        .await;
    assert_eq!(bad_ready.0, StatusCode::BAD_REQUEST, "{}", bad_ready.1);
    assert_eq!(bad_ready.1["code"], "INVALID_INPUT");
}

#[tokio::test]
async fn a_conversations_processes_are_reached_with_the_conversation_query_only() {
    let llm = FakeLlm::start(vec![]).await;
    let server = server(&llm).await;
    let store = server.state.service.store();
    store
        .create_conversation("conv-1", "helper", None)
        .await
        .unwrap();
    let (status, started) = server
        .post(
            "/processes?conversation=conv-1",
            json!({"command": "sleep 300", "yield_ms": 0}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let id = started["processId"].as_str().unwrap().to_owned();
    // It is the conversation's: where its agent runs look.
    let scope = cmdr::scopes::conversation("conv-1");
    assert_eq!(server.state.registry.processes().list(&scope).len(), 1);

    // The REST client's own scope does not hold it.
    let (_, own) = server.get("/processes").await;
    assert_eq!(own["processes"], json!([]), "{own}");
    let missing = server.get(&format!("/processes/{id}/output")).await;
    assert_error(&missing, 404, "not_found", "PROCESS_NOT_FOUND");
    let missing = server
        .post(&format!("/processes/{id}/kill"), json!({}))
        .await;
    assert_error(&missing, 404, "not_found", "PROCESS_NOT_FOUND");
    let (_, listed) = server
        .post(
            "/commands?combine=true",
            json!({"commandType": "PROCESS_LIST"}),
        )
        .await;
    assert_eq!(listed["resultData"], "[]", "{listed}");

    // With the query, every route reaches it.
    let (_, theirs) = server.get("/processes?conversation=conv-1").await;
    assert_eq!(theirs["processes"][0]["processId"], id.as_str(), "{theirs}");
    let (_, listed) = server
        .post(
            "/commands?combine=true&conversation=conv-1",
            json!({"commandType": "PROCESS_LIST"}),
        )
        .await;
    assert!(
        listed["resultData"].as_str().unwrap().contains(&id),
        "{listed}"
    );
    let (status, read) = server
        .get(&format!("/processes/{id}/output?conversation=conv-1"))
        .await;
    assert_eq!(status, StatusCode::OK, "{read}");
    let response = server
        .http
        .get(server.url(&format!(
            "/processes/{id}/output?stream=true&conversation=conv-1"
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut sse = crate::http::support::SseReader::new(response);
    let (status, killed) = server
        .post(
            &format!("/processes/{id}/kill?conversation=conv-1"),
            json!({"signal": "KILL"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{killed}");
    assert_eq!(killed["processState"], "exited");
    let end = sse.until(|e| e["type"] == "end").await;
    assert_eq!(end["processState"], "exited");

    // A conversation that does not exist is said so; an empty one is a bad request.
    let unknown = server.get("/processes?conversation=nope").await;
    assert_error(&unknown, 404, "not_found", "CONVERSATION_NOT_FOUND");
    let unknown = server
        .get(&format!(
            "/processes/{id}/output?conversation=nope&stream=true"
        ))
        .await;
    assert_error(&unknown, 404, "not_found", "CONVERSATION_NOT_FOUND");
    let empty = server.get("/processes?conversation=").await;
    assert_error(&empty, 400, "invalid_request", "INVALID_REQUEST");
}

/// `body` posted to `path` of `serve`: the status and the JSON answer.
async fn post_to(serve: &Serve, path: &str, body: Value) -> (StatusCode, Value) {
    json_of(serve.post(path, &body).await).await
}

/// Starts `body` with `POST /processes` on `serve`: its id and first output.
async fn start_on(serve: &Serve, body: Value) -> (String, String) {
    let (status, started) = post_to(serve, "/processes", body).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    assert_eq!(started["status"], "SUCCEEDED", "{started}");
    let id = started["processId"].as_str().unwrap().to_owned();
    (
        id,
        started["resultData"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// The output of process `id` from offset 0 until it contains `needle` (within
/// `PATIENCE`), and the last read (with `processState`, `exitCode`).
async fn output_until(serve: &Serve, id: &str, needle: &str) -> (String, Value) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let (mut text, mut offset) = (String::new(), 0);
    loop {
        let read = serve
            .get(&format!(
                "/processes/{id}/output?offset={offset}&wait_ms=500"
            ))
            .await;
        text.push_str(read["resultData"].as_str().unwrap_or_default());
        offset = read["nextOffset"].as_u64().unwrap();
        if text.contains(needle) {
            return (text, read);
        }
        // An exited process may still have output to read (a terminal's `\r\n` comes in a
        // write of its own): only a read that brings nothing after the exit is the end.
        let more = read["processState"] == "running"
            || !read["resultData"].as_str().unwrap_or_default().is_empty();
        assert!(
            tokio::time::Instant::now() < deadline && more,
            "no {needle:?} in the output of {id}: {text:?} ({read})"
        );
    }
}

/// The last read of process `id` once it has exited (within `PATIENCE`).
async fn exited(serve: &Serve, id: &str) -> Value {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let read = serve
            .get(&format!("/processes/{id}/output?wait_ms=500"))
            .await;
        if read["processState"] == "exited" {
            return read;
        }
        assert!(tokio::time::Instant::now() < deadline, "{id} still runs");
    }
}

#[tokio::test]
async fn a_tty_process_started_over_rest_has_a_terminal_that_input_answers_and_resizes() {
    let serve = Serve::start(Options::default()).await;
    let probe = "test -t 0 && test -t 1 && echo 'a terminal' || echo 'no terminal'";
    let (_, piped) = start_on(
        &serve,
        json!({"command": probe, "ready": {"output": "terminal\\r?\\n"}}),
    )
    .await;
    assert_eq!(piped, "no terminal\n");
    let (_, on_tty) = start_on(
        &serve,
        json!({"command": probe, "tty": true, "ready": {"output": "terminal\\r?\\n"}}),
    )
    .await;
    assert_eq!(on_tty, "a terminal\r\n");

    // A prompt that insists on a terminal: it dies on a pipe, and is answered on a tty.
    let prompt =
        "python3 -c 'import sys; assert sys.stdin.isatty(); print(\"got\", input(\"Proceed? \"))'";
    let (id, _) = start_on(&serve, json!({"command": prompt, "yield_ms": 0})).await;
    let refused = exited(&serve, &id).await;
    assert_ne!(refused["exitCode"], 0, "{refused}");
    let (id, asked) = start_on(
        &serve,
        json!({"command": prompt, "tty": true, "ready": {"output": "Proceed\\? $"}}),
    )
    .await;
    assert!(asked.ends_with("Proceed? "), "{asked:?}");
    let (status, reply) = post_to(
        &serve,
        &format!("/processes/{id}/input"),
        json!({"input": "yes\n", "yield_ms": 0}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    // The terminal turns `\n` into `\r\n` in a write of its own: wait for the whole line.
    let (text, _) = output_until(&serve, &id, "got yes\r\n").await;
    assert_eq!(text, "Proceed? yes\r\ngot yes\r\n");
    assert_eq!(exited(&serve, &id).await["exitCode"], 0);

    // The size given at the start, then a resize through /input.
    let (id, first) = start_on(
        &serve,
        json!({"command": "stty size; while read -r; do stty size; done", "tty": true,
               "cols": 100, "rows": 30, "ready": {"output": "\\d+ \\d+\\r\\n"}}),
    )
    .await;
    assert_eq!(first, "30 100\r\n");
    let (status, resized) = post_to(
        &serve,
        &format!("/processes/{id}/input"),
        json!({"cols": 132, "rows": 43, "yield_ms": 0}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{resized}");
    assert!(
        resized["message"]
            .as_str()
            .unwrap()
            .contains("resized to 132x43"),
        "{resized}"
    );
    let (status, _) = post_to(
        &serve,
        &format!("/processes/{id}/input"),
        json!({"input": "\n", "yield_ms": 0}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (text, _) = output_until(&serve, &id, "43 132").await;
    assert_eq!(text, "30 100\r\n\r\n43 132\r\n");
    let (status, killed) = post_to(&serve, &format!("/processes/{id}/kill"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{killed}");
    assert_eq!(
        serve.stop().await,
        0,
        "cmdr stops cleanly, its processes with it"
    );
}

#[tokio::test]
async fn bad_terminal_requests_over_rest_are_clear_errors() {
    let serve = Serve::start(Options::default()).await;
    for (body, code, says) in [
        (
            json!({"command": "true", "tty": true, "cols": 0}),
            "INVALID_INPUT",
            "at least 1",
        ),
        (
            json!({"command": "true", "rows": 40}),
            "INVALID_INPUT",
            "set tty: true",
        ),
        (
            json!({"command": "true", "tty": true, "cols": 70000}),
            "INVALID_REQUEST",
            "cols",
        ),
        (
            json!({"command": "true", "tty": true, "session": "dev"}),
            "INVALID_REQUEST",
            "session",
        ),
    ] {
        let (status, error) = post_to(&serve, "/processes", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {error}");
        assert_eq!(error["code"], code, "{body}: {error}");
        assert!(
            error["message"].as_str().unwrap().contains(says),
            "{body}: {error}"
        );
    }
    let (piped, _) = start_on(&serve, json!({"command": "sleep 300", "yield_ms": 0})).await;
    let (tty, _) = start_on(
        &serve,
        json!({"command": "sleep 300", "tty": true, "yield_ms": 0}),
    )
    .await;
    for (id, body, says) in [
        (&piped, json!({"cols": 100}), "not started with tty: true"),
        (&tty, json!({"rows": 0}), "at least 1"),
    ] {
        let (status, error) =
            post_to(&serve, &format!("/processes/{id}/input"), body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {error}");
        assert_eq!(error["code"], "INVALID_INPUT", "{body}: {error}");
        assert!(
            error["message"].as_str().unwrap().contains(says),
            "{body}: {error}"
        );
    }
    // The raw runner: a one-shot command or a session gets no terminal.
    for (command, says) in [
        (
            json!({"commandType": "BASH_EXEC", "command": "true", "tty": true}),
            "set background: true",
        ),
        (
            json!({"commandType": "BASH_EXEC", "command": "true", "tty": true, "session": "dev"}),
            "sessions",
        ),
    ] {
        let (status, result) = post_to(&serve, "/commands?combine=true", command.clone()).await;
        assert_eq!(status, StatusCode::OK, "{command}: {result}");
        assert_eq!(result["status"], "FAILED", "{command}: {result}");
        assert_eq!(result["errorCode"], "INVALID_INPUT", "{command}: {result}");
        assert!(
            result["error"].as_str().unwrap().contains(says),
            "{command}: {result}"
        );
    }
    let (_, listed) = post_to(
        &serve,
        "/commands?combine=true",
        json!({"commandType": "PROCESS_LIST"}),
    )
    .await;
    let listed: Vec<Value> = serde_json::from_str(listed["resultData"].as_str().unwrap()).unwrap();
    assert_eq!(
        listed.len(),
        2,
        "no refused request left a process or a session: {listed:?}"
    );
    assert_eq!(
        serve.stop().await,
        0,
        "cmdr stops cleanly, its processes with it"
    );
}

/// An archived conversation's scope has ended: neither `POST /processes` nor the raw
/// runner may start a process in it (it would outlive its conversation until cmdr
/// stops); reading it still answers (nothing is there), and unarchiving allows it again.
#[tokio::test]
async fn an_archived_conversation_takes_no_new_process() {
    let llm = FakeLlm::start(vec![]).await;
    let server = server(&llm).await;
    let store = server.state.service.store();
    store
        .create_conversation("conv-old", "helper", None)
        .await
        .unwrap();
    let (status, archived) = server
        .post("/conversations/conv-old/archive", json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{archived}");
    let start = json!({"command": "sleep 300", "yield_ms": 0});
    let refused = server
        .post("/processes?conversation=conv-old", start.clone())
        .await;
    assert_error(&refused, 400, "invalid_request", "CONVERSATION_ARCHIVED");
    let raw = json!({"commandType": "BASH_EXEC", "command": "sleep 300", "background": true, "yield_ms": 0});
    let refused = server
        .post("/commands?combine=true&conversation=conv-old", raw)
        .await;
    assert_error(&refused, 400, "invalid_request", "CONVERSATION_ARCHIVED");
    let scope = cmdr::scopes::conversation("conv-old");
    assert!(server.state.registry.processes().list(&scope).is_empty());
    let (status, listed) = server.get("/processes?conversation=conv-old").await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["processes"], json!([]));
    server
        .post("/conversations/conv-old/unarchive", json!({}))
        .await;
    let (status, started) = server.post("/processes?conversation=conv-old", start).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    server.state.registry.end_scope(&scope).await;
}

/// The end event of one SSE follower of process `id`.
async fn sse_end(server: &crate::http::support::Server, id: &str) -> Value {
    let response = server
        .http
        .get(server.url(&format!("/processes/{id}/output?stream=true&offset=0")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    crate::http::support::SseReader::new(response)
        .until(|e| e["type"] == "end")
        .await
}

/// Many quick processes, each followed by several SSE streams at once (so the exit wakes
/// several tasks, some taken by the runtime's other threads): every stream must end with
/// the exit, never `running` without an exit code.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_follower_of_a_quick_exit_over_rest_ends_with_the_exit() {
    let llm = FakeLlm::start(vec![]).await;
    let server = server(&llm).await;
    let mut wrong = Vec::new();
    let mut followed = 0;
    for _ in 0..40 {
        let (status, started) = server
            .post(
                "/processes",
                json!({"command": "sleep 0.02; exit 7", "yield_ms": 0}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{started}");
        let id = started["processId"].as_str().unwrap().to_owned();
        let ends = futures_util::future::join_all((0..4).map(|_| sse_end(&server, &id))).await;
        for end in ends {
            followed += 1;
            if end["processState"] != "exited" || end["exitCode"] != 7 {
                wrong.push(end);
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {followed} followers ended without the exit: {wrong:?}",
        wrong.len()
    );
}

/// CPU time of process `pid` so far (utime + stime, in clock ticks of 10 ms).
fn cpu_of(pid: i32) -> std::time::Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let ticks: u64 = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|f| f.parse::<u64>().unwrap())
        .sum();
    std::time::Duration::from_millis(10 * ticks)
}

/// A process whose output ends inside a UTF-8 character: an SSE follower from there gets
/// its headers at once and waits for the rest without spinning (measured on a real
/// `cmdr serve` while a long poll of the same output waits out its `wait_ms`).
#[tokio::test]
async fn an_sse_follower_of_half_a_character_answers_at_once_and_waits_quietly() {
    let serve = Serve::start(Options::default()).await;
    let (id, first) = start_on(
        &serve,
        json!({"command": "printf 'x\\346'; sleep 60", "ready": {"output": "x"}}),
    )
    .await;
    assert_eq!(first, "x");
    let headers = tokio::time::timeout(
        PATIENCE / 3,
        serve
            .http
            .get(serve.url(&format!("/processes/{id}/output?stream=true&offset=1")))
            .send(),
    )
    .await
    .expect("the follower's headers never came")
    .unwrap();
    assert_eq!(headers.status(), StatusCode::OK);
    let (wall, cpu) = (std::time::Instant::now(), cpu_of(serve.pid));
    let read = serve
        .get(&format!("/processes/{id}/output?offset=1&wait_ms=1500"))
        .await;
    let (waited, spent) = (wall.elapsed(), cpu_of(serve.pid) - cpu);
    assert_eq!(read["nextOffset"], 1, "{read}");
    assert!(
        waited >= std::time::Duration::from_millis(1400),
        "the long poll returned after {waited:?}"
    );
    assert!(
        spent < waited / 4,
        "cmdr serve spent {spent:?} of CPU in {waited:?} with one follower waiting"
    );
    drop(headers);
}

/// `timeout_ms` on `POST /processes` is the process's lifetime: it is stopped then, and
/// its SSE end, its reads and the list all say `TIMEOUT`.
#[tokio::test]
async fn a_lifetime_given_over_rest_stops_the_process_and_every_report_says_so() {
    let llm = FakeLlm::start(vec![]).await;
    let server = server(&llm).await;
    let (status, started) = server
        .post(
            "/processes",
            json!({"command": "echo up; sleep 60", "timeout_ms": 1000,
                   "ready": {"output": "up"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    assert!(
        started["message"]
            .as_str()
            .unwrap()
            .contains("lifetime ends in"),
        "{started}"
    );
    let id = started["processId"].as_str().unwrap().to_owned();
    let (_, listed) = server.get("/processes").await;
    assert!(listed["processes"][0]["expiresAt"].is_string(), "{listed}");
    let end = sse_end(&server, &id).await;
    assert_eq!(end["processState"], "exited", "{end}");
    assert_eq!(end["errorCode"], "TIMEOUT", "{end}");
    let (_, read) = server.get(&format!("/processes/{id}/output")).await;
    assert_eq!(read["errorCode"], "TIMEOUT", "{read}");
    let (_, listed) = server.get("/processes").await;
    assert_eq!(listed["processes"][0]["errorCode"], "TIMEOUT", "{listed}");
}
