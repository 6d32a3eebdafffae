//! The agent's processes through a real `cmdr serve` (docs/processes.md, "Scopes"): they
//! belong to the conversation (`GET /processes?conversation=<id>` lists them, plain
//! `/processes` and another conversation's agent cannot reach them), outlive the run, die
//! when the conversation is archived and when cmdr stops; and the model keeps its own
//! read position, so what the person reads or types in the web UI is still delivered to
//! the model.

use std::sync::Arc;

use cmdr::agent::{TOOL_RESULTS_CLOSE, TOOL_RESULTS_OPEN};
use cmdr_test_support::serve::{Options, Serve};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::http::fake_llm::{FakeLlm, Reply};
use crate::http::support::gone;

/// A process that is ready at once and then waits.
const SLEEPER: &str = "<shell background ready=\"ready\">echo ready; exec sleep 300</shell>";

async fn serve(llm: &FakeLlm) -> Serve {
    Serve::start(Options {
        llm: Some(llm),
        ..Options::default()
    })
    .await
}

/// Runs `instruction` to its end (in `conversation`, or a new one): the run's answer.
async fn run(serve: &Serve, instruction: &str, conversation: Option<&str>) -> Value {
    let mut body = json!({ "instruction": instruction });
    if let Some(id) = conversation {
        body["conversationId"] = json!(id);
    }
    let response = serve.post("/agents/helper/run", &body).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["status"], "completed", "{answer}");
    answer
}

/// The `tool` message the model was sent in request `index`.
fn told(llm: &FakeLlm, index: usize) -> String {
    let request = &llm.requests()[index];
    let last = request["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    last.strip_prefix(TOOL_RESULTS_OPEN)
        .and_then(|s| s.strip_suffix(TOOL_RESULTS_CLOSE))
        .unwrap_or_else(|| panic!("not a tool message: {last}"))
        .to_owned()
}

/// The processes `path` lists.
async fn listed(serve: &Serve, path: &str) -> Vec<Value> {
    serve.get(path).await["processes"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn an_agents_processes_belong_to_its_conversation_and_die_with_it() {
    let llm = FakeLlm::start(vec![Reply::text(SLEEPER), Reply::text("Started.")]).await;
    let serve = serve(&llm).await;
    let mine = run(&serve, "start it", None).await["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();

    // The run is over; its process runs on, listed under its conversation only.
    let own = listed(&serve, &format!("/processes?conversation={mine}")).await;
    assert_eq!(own.len(), 1, "{own:#?}");
    assert_eq!(own[0]["state"], "running");
    let id = own[0]["processId"].as_str().unwrap().to_owned();
    let pid = i32::try_from(own[0]["pid"].as_i64().unwrap()).unwrap();
    assert!(told(&llm, 1).contains(&format!("[background process {id}: running]")));
    assert!(listed(&serve, "/processes").await.is_empty());

    // Another conversation's agent cannot read or kill it, and starts its own.
    llm.push([
        Reply::text(&format!(
            "<process-output id=\"{id}\" wait=\"0\"/>\n<process-kill id=\"{id}\"/>\n{SLEEPER}"
        )),
        Reply::text("Not mine."),
    ]);
    let theirs = run(&serve, "stop the other one", None).await["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();
    let refused = told(&llm, 3);
    let blocks: Vec<&str> = refused.split("\n\n").collect();
    assert_eq!(blocks.len(), 3, "{refused}");
    assert!(blocks[0].contains("[PROCESS_NOT_FOUND: "), "{refused}");
    assert!(blocks[1].contains("[PROCESS_NOT_FOUND: "), "{refused}");
    assert!(!gone(pid), "another conversation killed {pid}");
    let other = listed(&serve, &format!("/processes?conversation={theirs}")).await;
    assert_eq!(other.len(), 1, "{other:#?}");
    assert_ne!(other[0]["processId"], id.as_str());
    let other_pid = i32::try_from(other[0]["pid"].as_i64().unwrap()).unwrap();

    // Archiving the conversation stops its processes before it answers; not the other's.
    let response = serve
        .post(&format!("/conversations/{mine}/archive"), &json!({}))
        .await;
    assert_eq!(response.status(), 200);
    assert!(
        gone(pid),
        "the archived conversation's process {pid} survived"
    );
    assert!(listed(&serve, &format!("/processes?conversation={mine}"))
        .await
        .is_empty());
    assert!(!gone(other_pid));

    // cmdr stopping takes the rest with it.
    assert_eq!(serve.stop().await, 0);
    assert!(gone(other_pid), "{other_pid} outlived cmdr serve");
}

#[tokio::test]
async fn what_the_web_ui_reads_or_types_is_still_delivered_to_the_model() {
    let echo = "<shell background ready=\"ready\">echo ready; \
                while read -r line; do echo \"got $line\"; done</shell>";
    let llm = FakeLlm::start(vec![Reply::text(echo), Reply::text("Started.")]).await;
    let serve = serve(&llm).await;
    let conversation = run(&serve, "start it", None).await["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();
    let query = format!("?conversation={conversation}");
    let id = listed(&serve, &format!("/processes{query}")).await[0]["processId"]
        .as_str()
        .unwrap()
        .to_owned();

    // The person types a line and reads everything (no offset: the shared position).
    type_line(&serve, &id, &query, "from the ui").await;
    let read = serve.get(&format!("/processes/{id}/output{query}")).await;
    assert!(read["processState"] == "running", "{read}");
    let again = serve
        .get(&format!("/processes/{id}/output{query}&wait_ms=0"))
        .await;
    assert_eq!(
        (again["resultData"].as_str(), &again["nextOffset"]),
        (None, &read["nextOffset"]),
        "the UI's reads share one position: {again}"
    );

    // The model has read none of it: its next read shows both lines; its own input,
    // typed after the person typed again, shows that line first, then its reply; and
    // nothing twice.
    let gate = Arc::new(Notify::new());
    llm.push([
        Reply::text(&format!("<process-output id=\"{id}\" wait=\"0\"/>")),
        Reply::Gated(
            vec!["Answering: ".into()],
            gate.clone(),
            vec![format!(
                "<process-input id=\"{id}\" wait=\"0.3\">from the model</process-input>"
            )],
        ),
        Reply::text("Done."),
    ]);
    type_line(&serve, &id, &query, "typed later").await;
    let next = {
        let (http, url) = (serve.http.clone(), serve.url("/agents/helper/run"));
        let body = json!({"instruction": "what did it say?", "conversationId": conversation});
        tokio::spawn(async move { http.post(url).json(&body).send().await.unwrap() })
    };
    llm.wait_requests(4).await;
    type_line(&serve, &id, &query, "meanwhile").await;
    gate.notify_one();
    let answer: Value = next.await.unwrap().json().await.unwrap();
    assert_eq!(answer["status"], "completed", "{answer}");
    let read = told(&llm, 3);
    assert!(
        read.contains("got from the ui\ngot typed later\n"),
        "{read}"
    );
    let typed = told(&llm, 4);
    assert!(
        typed.contains("\ngot meanwhile\ngot from the model\n"),
        "{typed}"
    );
    assert!(!typed.contains("typed later"), "shown twice: {typed}");
}

/// The person types `line` into the process in the web UI (and reads the reply).
async fn type_line(serve: &Serve, id: &str, query: &str, line: &str) {
    let response = serve
        .post(
            &format!("/processes/{id}/input{query}"),
            &json!({"input": format!("{line}\n"), "yield_ms": 300}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let reply: Value = response.json().await.unwrap();
    assert_eq!(reply["resultData"], format!("got {line}\n"), "{reply}");
}
