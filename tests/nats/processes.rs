//! Processes on a pool of real `cmdr worker` processes (docs/nats.md, "Processes"): a
//! process id names the worker holding it and every command about it reaches that worker;
//! `PROCESS_LIST` merges every worker's; a session sticks to one worker; a worker that
//! dies loses its processes (`PROCESS_LOST`), one shut down cleanly kills them; durable
//! mode sends process commands over core requests.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cmdr::nats::producer::Producer;
use cmdr_executors::{ExecutionStatus, OutputResult};
use cmdr_test_support::http::gone;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

use crate::{collect, eventually, NatsServer, WorkerProcess, PATIENCE};

/// The terminal result of `json` submitted by `producer`, carrying the data of the
/// whole stream.
pub(crate) async fn one(producer: &Producer, json: Value) -> OutputResult {
    let messages = collect(producer.submit_json(&json.to_string()).await).await;
    let mut end = messages.last().unwrap().clone();
    end.result_data = crate::data(&messages);
    end
}

fn ok(result: &OutputResult) {
    assert_eq!(result.status, ExecutionStatus::Succeeded, "{result:#?}");
}

fn failed_with(result: &OutputResult, code: &str) {
    assert_eq!(result.status, ExecutionStatus::Failed, "{result:#?}");
    assert_eq!(result.error_code.as_deref(), Some(code), "{result:#?}");
}

/// The worker a process id names (`<worker>-p<N>`).
pub(crate) fn worker_of(id: &str) -> &str {
    id.rsplit_once('-').unwrap().0
}

/// Starts a background process; its id.
pub(crate) async fn start(producer: &Producer, script: &str) -> String {
    let started = one(
        producer,
        json!({"commandType": "BASH_EXEC", "command": script, "background": true, "yield_ms": 200}),
    )
    .await;
    ok(&started);
    started.process_id.unwrap()
}

/// The merged `PROCESS_LIST`, by process id.
pub(crate) async fn list(producer: &Producer) -> BTreeMap<String, Value> {
    let listed = one(producer, json!({"commandType": "PROCESS_LIST"})).await;
    ok(&listed);
    let entries: Vec<Value> = serde_json::from_str(&listed.result_data).unwrap();
    entries
        .into_iter()
        .map(|e| (e["processId"].as_str().unwrap().to_owned(), e))
        .collect()
}

/// Reads `id`'s output from offset 0 until it contains `needle`.
pub(crate) async fn read_until(producer: &Producer, id: &str, needle: &str) -> OutputResult {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let read = one(
            producer,
            json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "offset": 0, "wait_ms": 500}),
        )
        .await;
        ok(&read);
        if read.result_data.contains(needle) {
            return read;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {needle:?} in {read:#?}"
        );
    }
}

/// The parent of process `pid`.
fn parent_of(pid: i64) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = stat.rsplit(')').next().unwrap();
    after_name
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

/// Runs `cmdr submit` as producer `producer_id` with one command; its result.
async fn cmdr_submit(server: &NatsServer, producer_id: &str, json: Value) -> OutputResult {
    let (url, id) = (server.url(), producer_id.to_owned());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("cmdr"))
            .args(["submit", "--combine", "--nats", &url, "--producer-id", &id])
            .arg(json.to_string())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

pub(crate) async fn sigterm_and_wait(mut worker: WorkerProcess) {
    kill(Pid::from_raw(worker.pid()), Signal::SIGTERM).unwrap();
    let status = tokio::task::spawn_blocking(move || worker.0.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
}

pub(crate) async fn sigkill_and_wait(mut worker: WorkerProcess) {
    worker.0.kill().unwrap();
    tokio::task::spawn_blocking(move || worker.0.wait().unwrap())
        .await
        .unwrap();
}

/// Waits until the server has dropped `worker`'s connection (a request to its liveness
/// subject finds no responder): until then a command routed to it can still be taken by
/// the dead connection's subscription and time out as `NOT_ACCEPTED` (seen under load)
/// instead of being refused as `PROCESS_LOST`.
pub(crate) async fn until_off_the_bus(server: &NatsServer, worker: &str) {
    let client = async_nats::connect(server.url()).await.unwrap();
    let subject = cmdr::nats::subjects::alive(worker, "probe");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let request = async_nats::Request::new().timeout(Some(Duration::from_secs(1)));
        match client.send_request(subject.clone(), request).await {
            Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => return,
            _ => assert!(
                tokio::time::Instant::now() < deadline,
                "{worker} is still on the bus"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) async fn producer_as(server: &NatsServer, id: &str) -> Producer {
    crate::producer(server).await.with_id(id).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_processes_are_routed_to_the_worker_that_holds_them() {
    let server = NatsServer::start();
    let workers = BTreeMap::from([
        ("wa", WorkerProcess::start_as(&server, "wa", &[]).await),
        ("wb", WorkerProcess::start_as(&server, "wb", &[]).await),
    ]);
    let producer = producer_as(&server, "tester").await;
    // The queue group picks a worker for each start: start prompts until both hold one.
    let prompt = r#"printf 'name? '; read name; echo "hello $name"; sleep 60"#;
    let mut held: BTreeMap<String, String> = BTreeMap::new();
    let mut started = Vec::new();
    while held.len() < 2 {
        assert!(started.len() < 40, "every start went to one worker");
        let id = start(&producer, prompt).await;
        held.entry(worker_of(&id).to_owned())
            .or_insert_with(|| id.clone());
        started.push(id);
    }

    // One list from both workers; each process is a child of the worker its id names.
    let listed = list(&producer).await;
    assert_eq!(listed.len(), started.len(), "{listed:#?}");
    for id in &started {
        let pid = listed[id]["pid"].as_i64().unwrap();
        let worker = &workers[worker_of(id)];
        assert_eq!(parent_of(pid), worker.pid(), "{id} runs in its worker");
    }

    // Answer each prompt; read the output by offset; all on the right worker.
    for (worker, id) in &held {
        let before = read_until(&producer, id, "name? ").await;
        assert_eq!(before.process_state.as_deref(), Some("running"));
        let answered = one(
            &producer,
            json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": format!("{worker}\n")}),
        )
        .await;
        ok(&answered);
        read_until(&producer, id, &format!("hello {worker}\n")).await;
        let tail = one(
            &producer,
            json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "offset": 6}),
        )
        .await;
        assert_eq!(tail.result_data, format!("hello {worker}\n"));
        assert_eq!(tail.next_offset, Some(6 + 7 + worker.len() as u64));
    }

    // `cmdr submit` (another process, the same producer id) reaches wb's process too.
    let via_cli = cmdr_submit(
        &server,
        "tester",
        json!({"commandType": "PROCESS_OUTPUT", "process_id": held["wb"], "offset": 0}),
    )
    .await;
    ok(&via_cli);
    assert_eq!(via_cli.result_data, "name? hello wb\n");

    // Kill wa's process: routed there, ends once the tree is gone.
    let id = &held["wa"];
    let pid = listed[id]["pid"].as_i64().unwrap();
    let killed = one(
        &producer,
        json!({"commandType": "PROCESS_KILL", "process_id": id}),
    )
    .await;
    ok(&killed);
    assert!(gone(i32::try_from(pid).unwrap()), "{killed:#?}");
    assert_eq!(list(&producer).await[id]["state"], "exited");

    // Unknown ids: an unknown number on a live worker, an id naming no worker, and one
    // naming a worker that is not on the bus.
    for unknown in ["wa-p999", "p1"] {
        let read = one(
            &producer,
            json!({"commandType": "PROCESS_OUTPUT", "process_id": unknown}),
        )
        .await;
        failed_with(&read, "PROCESS_NOT_FOUND");
    }
    let read = one(
        &producer,
        json!({"commandType": "PROCESS_OUTPUT", "process_id": "nobody-p1"}),
    )
    .await;
    failed_with(&read, "PROCESS_LOST");

    // A worker shut down cleanly kills its processes.
    let mut workers = workers;
    let wb_pids: Vec<i32> = started
        .iter()
        .filter(|id| worker_of(id) == "wb")
        .map(|id| i32::try_from(listed[id]["pid"].as_i64().unwrap()).unwrap())
        .collect();
    sigterm_and_wait(workers.remove("wb").unwrap()).await;
    for pid in wb_pids {
        eventually("wb's processes are gone", || gone(pid)).await;
    }
    let left = list(&producer).await;
    assert!(left.keys().all(|id| worker_of(id) == "wa"), "{left:#?}");
    sigterm_and_wait(workers.remove("wa").unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_sticks_to_one_worker_and_is_lost_with_it() {
    let server = NatsServer::start();
    let mut workers = BTreeMap::from([
        ("wa", WorkerProcess::start_as(&server, "wa", &[]).await),
        ("wb", WorkerProcess::start_as(&server, "wb", &[]).await),
    ]);
    let producer = producer_as(&server, "tester").await;
    let session =
        |command: &str| json!({"commandType": "BASH_EXEC", "session": "s1", "command": command});
    let first = one(&producer, session("cd /tmp && X=42 && echo set")).await;
    ok(&first);
    // The session is a process of the worker holding it.
    let holder = listed_session_worker(&producer).await;
    for _ in 0..6 {
        let again = one(&producer, session("echo $X $PWD")).await;
        assert_eq!(again.result_data, "42 /tmp\n");
    }
    // A later producer with the same id (a new `cmdr submit`) finds it by discovery.
    let later = producer_as(&server, "tester").await;
    assert_eq!(
        one(&later, session("echo $X $PWD")).await.result_data,
        "42 /tmp\n"
    );
    let via_cli = cmdr_submit(&server, "tester", session("echo $X $PWD")).await;
    assert_eq!(via_cli.result_data, "42 /tmp\n");

    // Its worker dies: the session is lost, said once; the next command starts anew.
    let shell = list(&producer)
        .await
        .into_values()
        .find(|e| e["command"].as_str().is_some_and(|c| c.contains("s1")));
    let shell_pid = shell.unwrap()["pid"].as_i64().unwrap();
    sigkill_and_wait(workers.remove(holder.as_str()).unwrap()).await;
    until_off_the_bus(&server, &holder).await;
    let lost = one(&producer, session("echo $X $PWD")).await;
    failed_with(&lost, "PROCESS_LOST");
    assert!(lost.error.contains("session 's1'"), "{lost:#?}");
    let anew = one(&producer, session("echo \"[$X]\"")).await;
    ok(&anew);
    assert!(anew.result_data.ends_with("[]\n"), "{anew:#?}");
    assert_ne!(listed_session_worker(&producer).await, holder);
    // The dead worker's shell is an orphan now; clean it up.
    let _ = killpg(
        Pid::from_raw(i32::try_from(shell_pid).unwrap()),
        Signal::SIGKILL,
    );
}

/// The worker holding the one listed session.
async fn listed_session_worker(producer: &Producer) -> String {
    let listed = list(producer).await;
    let sessions: Vec<&String> = listed
        .iter()
        .filter(|(_, e)| e["state"] == "running")
        .map(|(id, _)| id)
        .collect();
    assert_eq!(sessions.len(), 1, "{listed:#?}");
    worker_of(sessions[0]).to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_processes_of_a_killed_worker_are_lost() {
    let server = NatsServer::start();
    let mut workers = BTreeMap::from([
        ("wa", WorkerProcess::start_as(&server, "wa", &[]).await),
        ("wb", WorkerProcess::start_as(&server, "wb", &[]).await),
    ]);
    let producer = producer_as(&server, "tester").await;
    let id = start(&producer, "echo up; sleep 600").await;
    let holder = worker_of(&id).to_owned();
    let other = start(&producer, "sleep 600").await;
    let listed = list(&producer).await;
    let pid = i32::try_from(listed[&id]["pid"].as_i64().unwrap()).unwrap();
    // A read waiting for more output when the worker dies ends within seconds.
    let waiting = producer
        .submit_json(
            &json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "offset": 3, "wait_ms": 60000})
                .to_string(),
        )
        .await;
    let killed_at = Instant::now();
    sigkill_and_wait(workers.remove(holder.as_str()).unwrap()).await;
    let cut = collect(waiting).await;
    failed_with(cut.last().unwrap(), "PROCESS_LOST");
    assert!(
        killed_at.elapsed() < Duration::from_secs(15),
        "{:?}",
        killed_at.elapsed()
    );
    // Every later command about it says so at once; the list no longer shows it.
    for json in [
        json!({"commandType": "PROCESS_OUTPUT", "process_id": id}),
        json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": "x"}),
        json!({"commandType": "PROCESS_KILL", "process_id": id}),
    ] {
        let result = one(&producer, json).await;
        failed_with(&result, "PROCESS_LOST");
        assert!(result.error.contains(&holder), "{result:#?}");
    }
    let left = list(&producer).await;
    assert!(!left.contains_key(&id), "{left:#?}");
    if worker_of(&other) != holder {
        assert!(left.contains_key(&other), "{left:#?}");
    }
    // The dead worker could not stop its process: clean up after it.
    let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    for (_, worker) in workers {
        sigterm_and_wait(worker).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_mode_sends_process_commands_over_core_requests() {
    let server = NatsServer::start();
    let da = WorkerProcess::start_as(&server, "da", &["--durable"]).await;
    let db = WorkerProcess::start_as(&server, "db", &["--durable"]).await;
    let client = async_nats::connect(server.url()).await.unwrap();
    let producer = Producer::durable(client.clone())
        .await
        .unwrap()
        .with_id("tester")
        .unwrap();
    let id = start(
        &producer,
        r#"printf 'name? '; read name; echo "hello $name"; sleep 60"#,
    )
    .await;
    for _ in 0..4 {
        read_until(&producer, &id, "name? ").await;
    }
    let answered = one(
        &producer,
        json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": "durable\n"}),
    )
    .await;
    ok(&answered);
    read_until(&producer, &id, "hello durable\n").await;
    ok(&one(
        &producer,
        json!({"commandType": "PROCESS_KILL", "process_id": id}),
    )
    .await);
    // Only the start went through the work queue.
    let js = async_nats::jetstream::new(client);
    let mut stream = js
        .get_stream(cmdr::nats::durable::COMMANDS_STREAM)
        .await
        .unwrap();
    assert_eq!(stream.info().await.unwrap().state.last_sequence, 1);
    sigterm_and_wait(da).await;
    sigterm_and_wait(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_id_is_unique_on_the_bus_and_a_single_token() {
    let server = NatsServer::start();
    let wa = WorkerProcess::start_as(&server, "wa", &[]).await;
    let url = server.url();
    let out = tokio::task::spawn_blocking(move || {
        let run = |id: &str| {
            std::process::Command::new(assert_cmd::cargo::cargo_bin("cmdr"))
                .args(["worker", "--nats", &url, "--worker-id", id])
                .output()
                .unwrap()
        };
        (run("wa"), run("a.b"))
    })
    .await
    .unwrap();
    let (twin, dotted) = out;
    assert_eq!(twin.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&twin.stderr).contains("already uses the id 'wa'"),
        "{twin:?}"
    );
    assert_eq!(dotted.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&dotted.stderr).contains("--worker-id"),
        "{dotted:?}"
    );
    // The first worker still serves alone.
    let producer = producer_as(&server, "tester").await;
    let id = start(&producer, "sleep 60").await;
    assert!(id.starts_with("wa-p"), "{id}");
    sigterm_and_wait(wa).await;
}
