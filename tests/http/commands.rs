//! The raw job runner: `POST /commands` as SSE and combined, cancel, input answers.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::http::fake_llm::FakeLlm;
use crate::http::support::{assert_error, eventually, gone, server};

async fn server_without_script() -> (crate::http::support::Server, FakeLlm) {
    let llm = FakeLlm::start(vec![]).await;
    (server(&llm).await, llm)
}

#[tokio::test]
async fn a_command_streams_its_results_as_sse_terminal_last() {
    let (server, _llm) = server_without_script().await;
    let results = server
        .sse(
            "/commands",
            json!({"command_id": "echo-1", "commandType": "BASH_EXEC", "command": "echo a; echo b >&2"}),
        )
        .await
        .all()
        .await;
    let (last, running) = results.split_last().unwrap();
    assert!(!running.is_empty());
    for result in running {
        assert_eq!(result["status"], "RUNNING", "{result}");
        assert_eq!(result["command_id"], "echo-1");
        assert_eq!(result["commandType"], "BASH_EXEC");
    }
    assert_eq!(last["status"], "SUCCEEDED", "{last}");
    assert_eq!(last["command_id"], "echo-1");
    assert_eq!(last["exitCode"], 0);
    assert!(last["message"]
        .as_str()
        .unwrap()
        .starts_with("Command finished in "));
    let output: String = running
        .iter()
        .filter_map(|r| r["resultData"].as_str())
        .collect();
    // stdout and stderr are two pipes: they interleave in no fixed order.
    let mut lines: Vec<&str> = output.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["a", "b"], "{output:?}");

    // Every command type goes through the same door.
    let file = server.world.work().join("note.txt");
    let results = server
        .sse(
            "/commands",
            json!({"commandType": "FILE_WRITE", "file_path": file, "content": "hello\n"}),
        )
        .await
        .all()
        .await;
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["status"], "SUCCEEDED");
    assert!(
        !results[0]["command_id"].as_str().unwrap().is_empty(),
        "an id is generated"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello\n");
}

#[tokio::test]
async fn combine_answers_one_json_result() {
    let (server, _llm) = server_without_script().await;
    let (status, result) = server
        .post(
            "/commands?combine=true",
            json!({"command_id": "c-1", "commandType": "BASH_EXEC", "command": "printf 'x\\ny\\n'"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(result["command_id"], "c-1");
    assert_eq!(result["status"], "SUCCEEDED");
    assert_eq!(result["resultData"], "x\ny\n");

    let (status, result) = server
        .post(
            "/commands?combine=true",
            json!({"commandType": "BASH_EXEC", "command": "echo no >&2; exit 3"}),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a failed command is a result, not an HTTP error"
    );
    assert_eq!(result["status"], "FAILED");
    assert_eq!(result["exitCode"], 3);
    assert!(!result["error"].as_str().unwrap().is_empty());

    let answer = server
        .post(
            "/commands?combine=maybe",
            json!({"commandType": "BASH_EXEC", "command": "true"}),
        )
        .await;
    assert_error(&answer, 400, "invalid_request", "INVALID_REQUEST");
}

#[tokio::test]
async fn bodies_that_do_not_decode_are_400_naming_the_problem() {
    let (server, _llm) = server_without_script().await;
    let cases: [(&str, &str); 7] = [
        ("{\"commandType\": \"BASH_EXEC\", ", "malformed JSON"),
        ("", "malformed JSON"),
        ("[]", "JSON object"),
        (r#"{"commandType": "FORMAT_DISK"}"#, "FORMAT_DISK"),
        (r#"{"command": "ls"}"#, "commandType"),
        (r#"{"commandType": "BASH_EXEC"}"#, "missing field `command`"),
        (
            r#"{"commandType": "BASH_EXEC", "command": "ls", "timeout_ms": "soon"}"#,
            "field `timeout_ms`",
        ),
    ];
    for (body, needle) in cases {
        for path in ["/commands", "/commands?combine=true"] {
            let answer = server.post_raw(path, body).await;
            assert_error(&answer, 400, "invalid_request", "INVALID_REQUEST");
            let message = answer.1["message"].as_str().unwrap();
            assert!(message.contains(needle), "{body}: {message}");
        }
    }
    assert_eq!(server.state.registry.in_flight_count(), 0);
}

/// Reads SSE results until a `RUNNING` one carries data; returns that data.
async fn first_output(sse: &mut crate::http::support::SseReader) -> String {
    let result = sse
        .until(|r| r["status"] == "RUNNING" && r["resultData"].is_string())
        .await;
    result["resultData"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_running_command_is_cancelled_and_a_duplicate_id_is_409() {
    let (server, _llm) = server_without_script().await;
    let command = json!({"command_id": "long-1", "commandType": "BASH_EXEC", "command": "sleep 1000 & echo $!; wait"});
    let mut sse = server.sse("/commands", command.clone()).await;
    let pid: i32 = first_output(&mut sse).await.trim().parse().unwrap();

    let answer = server.post("/commands", command.clone()).await;
    assert_error(&answer, 409, "conflict", "DUPLICATE_COMMAND_ID");
    let answer = server.post("/commands?combine=true", command).await;
    assert_error(&answer, 409, "conflict", "DUPLICATE_COMMAND_ID");

    let (status, body) = server.post("/commands/long-1/cancel", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"commandId": "long-1", "cancelled": true}));
    let results: Vec<Value> = sse.all().await;
    let last = results.last().unwrap();
    assert_eq!(last["status"], "FAILED");
    assert_eq!(last["errorCode"], "CANCELLED", "{last}");
    eventually("the process tree is killed", async || gone(pid)).await;

    let answer = server.post("/commands/long-1/cancel", json!({})).await;
    assert_error(&answer, 404, "not_found", "COMMAND_NOT_RUNNING");
}

/// Closing the SSE response stops the command and kills its process tree.
#[tokio::test]
async fn dropping_the_stream_stops_the_command() {
    let (server, _llm) = server_without_script().await;
    let mut sse = server
        .sse(
            "/commands",
            json!({"command_id": "gone-1", "commandType": "BASH_EXEC", "command": "sleep 1000 & echo $!; wait"}),
        )
        .await;
    let pid: i32 = first_output(&mut sse).await.trim().parse().unwrap();
    assert!(!gone(pid));
    drop(sse);
    eventually("the process tree is killed", async || gone(pid)).await;
    eventually("the command is no longer in flight", async || {
        server.state.registry.in_flight_count() == 0
    })
    .await;
}

/// Closing a `?combine=true` request stops the command too.
#[tokio::test]
async fn closing_a_combine_request_stops_the_command() {
    let (server, _llm) = server_without_script().await;
    let marker = server.world.work().join("pid");
    let http = server.http.clone();
    let url = server.url("/commands?combine=true");
    let command = json!({
        "command_id": "gone-2",
        "commandType": "BASH_EXEC",
        "command": format!("sleep 1000 & echo $! > {}; wait", marker.display()),
    });
    let request = tokio::spawn(async move { http.post(url).json(&command).send().await });
    eventually("the command started", async || {
        std::fs::read_to_string(&marker).is_ok_and(|pid| pid.ends_with('\n'))
    })
    .await;
    let pid: i32 = std::fs::read_to_string(&marker)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    request.abort();
    let _ = request.await;
    eventually("the process tree is killed", async || gone(pid)).await;
    eventually("the command is no longer in flight", async || {
        server.state.registry.in_flight_count() == 0
    })
    .await;
}

/// `REQUEST_USER_INPUT` over HTTP: the question shows in the stream and in
/// `GET /commands/inputs`; `POST /commands/:id/input` answers it.
#[tokio::test]
async fn a_question_is_answered_through_the_input_route() {
    let (server, _llm) = server_without_script().await;
    let mut sse = server
        .sse(
            "/commands",
            json!({"command_id": "ask-1", "commandType": "REQUEST_USER_INPUT", "prompt": "Your name?", "description": "greeting"}),
        )
        .await;
    let waiting = sse.until(|r| r["status"] == "RUNNING").await;
    assert!(waiting["message"].as_str().unwrap().contains("Your name?"));

    let mut listed = Value::Null;
    eventually("the question is listed", async || {
        let (status, body) = server.get("/commands/inputs").await;
        assert_eq!(status, StatusCode::OK);
        listed = body;
        !listed["inputs"].as_array().unwrap().is_empty()
    })
    .await;
    assert_eq!(
        listed,
        json!({"inputs": [{"commandId": "ask-1", "prompt": "Your name?", "description": "greeting"}]})
    );

    let key = sse
        .input_key
        .clone()
        .expect("the requester gets its question's key");
    let answer = server
        .post("/commands/ask-1/input", json!({"value": 5, "key": key}))
        .await;
    assert_error(&answer, 400, "invalid_request", "INVALID_REQUEST");
    let answer = server.post("/commands/ask-1/input", json!({})).await;
    assert_error(&answer, 400, "invalid_request", "INVALID_REQUEST");
    let (status, body) = server
        .post("/commands/ask-1/input", json!({"value": "Ada", "key": key}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"commandId": "ask-1", "answered": true}));
    let results: Vec<Value> = sse.all().await;
    let last = results.last().unwrap();
    assert_eq!(last["status"], "SUCCEEDED", "{last}");
    assert_eq!(last["resultData"], "Ada");

    let person = server.state.input_keys.person_key().to_owned();
    let answer = server
        .post(
            "/commands/ask-1/input",
            json!({"value": "again", "key": person}),
        )
        .await;
    assert_error(&answer, 404, "not_found", "NOT_WAITING_FOR_INPUT");
    let (_, body) = server.get("/commands/inputs").await;
    assert_eq!(body, json!({"inputs": []}));
}

/// The attack: a command answers the question its own run asked ("approve deploying?" →
/// "yes") by calling the loopback API, as a shell the model controls would. Without a key
/// (or with a wrong one, or another command's) it is refused and the question still waits;
/// the requester's key and the person key answer it.
#[tokio::test]
async fn a_command_cannot_answer_a_question_only_a_person_may() {
    let (server, _llm) = server_without_script().await;
    let mut ask = server
        .sse(
            "/commands",
            json!({"command_id": "approve", "commandType": "REQUEST_USER_INPUT", "prompt": "Approve deploying?"}),
        )
        .await;
    ask.until(|r| r["status"] == "RUNNING").await;
    let requester_key = ask.input_key.clone().unwrap();

    // A shell run by the same server, with everything a command can see: the question list,
    // its own stream's key, and a guess.
    let other = server
        .sse(
            "/commands",
            json!({"command_id": "other", "commandType": "REQUEST_USER_INPUT", "prompt": "?"}),
        )
        .await;
    let other_key = other.input_key.clone().unwrap();
    let url = server.url("/commands/approve/input");
    let script = format!(
        "for key in '' guess {other_key}; do \
           curl -s -o /dev/null -w '%{{http_code}} ' -H 'Content-Type: application/json' \
             -d \"{{\\\"value\\\":\\\"yes\\\",\\\"key\\\":\\\"$key\\\"}}\" {url}; \
         done; curl -s {list}",
        list = server.url("/commands/inputs"),
    );
    let (status, shell) = server
        .post(
            "/commands?combine=true",
            json!({"commandType": "BASH_EXEC", "command": script}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{shell}");
    let output = shell["resultData"].as_str().unwrap();
    assert!(
        output.starts_with("403 403 403 "),
        "every answer refused: {output}"
    );
    assert!(
        !output.contains(&requester_key) && !output.contains(server.state.input_keys.person_key()),
        "the list shows no key: {output}"
    );
    let (_, pending) = server.get("/commands/inputs").await;
    assert!(
        pending.to_string().contains("approve"),
        "the question still waits: {pending}"
    );

    // The person answers (the key of the address cmdr serve printed)…
    let person = server.state.input_keys.person_key().to_owned();
    let (status, _) = server
        .post(
            "/commands/approve/input",
            json!({"value": "no", "key": person}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let last = ask.all().await.pop().unwrap();
    assert_eq!(
        (last["status"].as_str(), last["resultData"].as_str()),
        (Some("SUCCEEDED"), Some("no"))
    );
    // …and so does the requester, with its own key, for its own question only.
    let (status, _) = server
        .post(
            "/commands/other/input",
            json!({"value": "ok", "key": other_key}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let last = other.all().await.pop().unwrap();
    assert_eq!(last["resultData"], "ok");
}
