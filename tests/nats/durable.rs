//! Durable mode (JetStream): stored commands, replayable results, de-duplication, and
//! redelivery when a worker dies (real `cmdr worker --durable` processes, SIGKILLed).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cmdr::nats::durable::{DurableSettings, COMMANDS_STREAM, RESULTS_STREAM};
use cmdr::nats::producer::{Producer, RemoteStream};
use cmdr::nats::worker::{self, WorkerOptions};
use cmdr_executors::{decode_command, ExecutionStatus, OutputResult, Registry};
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::{assert_ok, collect, data, terminal, until_all_acknowledged, NatsServer, PATIENCE};

fn settings() -> DurableSettings {
    DurableSettings {
        ack_wait: Duration::from_secs(1),
        ..DurableSettings::default()
    }
}

/// An in-process durable worker; stops when the token is cancelled.
async fn durable_worker(server: &NatsServer) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    durable_worker_with(server, settings()).await
}

async fn durable_worker_with(
    server: &NatsServer,
    settings: DurableSettings,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let options = WorkerOptions {
        durable: Some(settings),
        shutdown_grace: Duration::from_millis(200),
        ..WorkerOptions::default()
    };
    durable_worker_options(server, options).await
}

async fn durable_worker_options(
    server: &NatsServer,
    options: WorkerOptions,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let client = async_nats::connect(server.url()).await.unwrap();
    let stop = CancellationToken::new();
    let until = stop.clone();
    let task = tokio::spawn(async move {
        worker::run(
            client,
            Registry::with_defaults(),
            options,
            until.cancelled_owned(),
        )
        .await
        .unwrap();
    });
    (stop, task)
}

/// A `cmdr worker --durable` process, killed on drop.
struct WorkerProcess(Child);

impl WorkerProcess {
    fn start(server: &NatsServer, max_attempts: u32) -> Self {
        let child = Command::new(assert_cmd::cargo::cargo_bin("cmdr"))
            .args([
                "worker",
                "--durable",
                "--ack-wait-secs",
                "1",
                "--nats",
                &server.url(),
            ])
            .args([
                "--max-attempts",
                &max_attempts.to_string(),
                "--grace-secs",
                "0",
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self(child)
    }

    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn durable_producer(server: &NatsServer) -> Producer {
    Producer::durable(async_nats::connect(server.url()).await.unwrap())
        .await
        .unwrap()
}

async fn commands_waiting(server: &NatsServer) -> u64 {
    let js = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    let mut stream = js.get_stream(COMMANDS_STREAM).await.unwrap();
    stream.info().await.unwrap().state.messages
}

/// Submits `json` and waits until its first output message has arrived (the command is
/// running on a worker); returns that message and the rest of the stream.
async fn submit_running(producer: &Producer, json: &str) -> (OutputResult, RemoteStream) {
    let mut stream = producer.submit(command(json)).await.unwrap();
    let first = tokio::time::timeout(PATIENCE, stream.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.status, ExecutionStatus::Running, "{first:?}");
    (first, stream)
}

fn command(json: &str) -> cmdr_executors::Command {
    decode_command(json).unwrap()
}

#[tokio::test]
async fn commands_wait_for_a_worker_and_results_replay_from_the_start() {
    let server = NatsServer::start();
    let producer = durable_producer(&server).await;
    let stream = producer
        .submit(command(
            r#"{"command_id":"d1","commandType":"BASH_EXEC","command":"echo stored"}"#,
        ))
        .await
        .unwrap();
    assert_eq!(
        commands_waiting(&server).await,
        1,
        "stored while no worker runs"
    );
    let (stop, task) = durable_worker(&server).await;
    let first = collect(stream).await;
    assert_ok(&first);
    assert_eq!(data(&first), "stored\n");
    let replayed = collect(producer.replay("d1").await.unwrap()).await;
    assert_eq!(data(&replayed), data(&first));
    assert_eq!(terminal(&replayed).status, ExecutionStatus::Succeeded);
    // Acknowledged after the terminal result is stored (so possibly just after it is read).
    until_all_acknowledged(&server).await;
    stop.cancel();
    tokio::time::timeout(PATIENCE, task).await.unwrap().unwrap();
}

#[tokio::test]
async fn the_same_command_id_submitted_twice_runs_once() {
    let server = NatsServer::start();
    let (_stop, _task) = durable_worker(&server).await;
    let producer = durable_producer(&server).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let json = format!(
        r#"{{"command_id":"once-1","commandType":"BASH_EXEC","command":"echo ran >> {}; echo ok"}}"#,
        log.display()
    );
    let first = collect(producer.submit(command(&json)).await.unwrap()).await;
    let second = collect(producer.submit(command(&json)).await.unwrap()).await;
    assert_ok(&first);
    assert_eq!(
        data(&second),
        data(&first),
        "the second submission follows the first's results"
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "ran\n");
}

#[tokio::test]
async fn an_id_reused_for_a_different_command_is_refused() {
    let server = NatsServer::start();
    let (_stop, _task) = durable_worker(&server).await;
    let producer = durable_producer(&server).await;
    let first = r#"{"command_id":"fixed-1","commandType":"BASH_EXEC","command":"echo first"}"#;
    let other = r#"{"command_id":"fixed-1","commandType":"BASH_EXEC","command":"echo other"}"#;
    let ran = collect(producer.submit(command(first)).await.unwrap()).await;
    assert_eq!(data(&ran), "first\n");
    let refused = producer.submit(command(other)).await.err().unwrap();
    assert_eq!(
        refused.code(),
        cmdr::executors::ErrorCode::CommandIdConflict
    );
    assert!(refused.to_string().contains("fixed-1"), "{refused}");
    // The same producer again (restarted: same producer id), the same rule; and the
    // identical command still replays.
    let again = durable_producer(&server)
        .await
        .with_id(producer.id())
        .unwrap();
    let failed = collect(again.submit_json(other).await).await;
    assert_eq!(
        failed.last().unwrap().error_code.as_deref(),
        Some("COMMAND_ID_CONFLICT")
    );
    let replayed = collect(again.submit(command(first)).await.unwrap()).await;
    assert_eq!(data(&replayed), "first\n");
    // Another producer's ids are its own: the same id names its own command.
    let other_producer = durable_producer(&server).await;
    let its_own = collect(other_producer.submit(command(other)).await.unwrap()).await;
    assert_eq!(data(&its_own), "other\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_command_leaves_it_to_another() {
    let server = NatsServer::start();
    let mut first = WorkerProcess::start(&server, 3);
    let producer = durable_producer(&server).await;
    let (started, stream) = submit_running(&producer, r#"{"command_id":"k1","commandType":"BASH_EXEC","command":"echo start; sleep 2; echo done"}"#).await;
    assert_eq!(started.result_data, "start\n");
    first.kill();
    let _second = WorkerProcess::start(&server, 3);
    let rest = collect(stream).await;
    assert_ok(&rest);
    let output = data(&rest);
    assert!(
        output.contains("attempt 2 of 3"),
        "the restart is announced: {output:?}"
    );
    assert!(output.ends_with("start\ndone\n"), "{output:?}");
    until_all_acknowledged(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_delivery_limit_the_command_fails_and_says_why() {
    let server = NatsServer::start();
    let mut first = WorkerProcess::start(&server, 1);
    let producer = durable_producer(&server).await;
    let (_, stream) = submit_running(
        &producer,
        r#"{"command_id":"lim-1","commandType":"BASH_EXEC","command":"echo start; sleep 1000"}"#,
    )
    .await;
    first.kill();
    let _second = WorkerProcess::start(&server, 1);
    let rest = collect(stream).await;
    let end = terminal(&rest);
    assert_eq!(
        end.error_code.as_deref(),
        Some("REDELIVERY_LIMIT"),
        "{end:?}"
    );
    // A poison command is not redelivered forever.
    until_all_acknowledged(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_server_restart_mid_command_loses_nothing() {
    let mut server = NatsServer::start();
    // A long ack_wait: the restart must not look like a dead worker.
    let long = DurableSettings {
        ack_wait: Duration::from_secs(20),
        ..DurableSettings::default()
    };
    let (_stop, _task) = durable_worker_with(&server, long).await;
    let producer = durable_producer(&server).await;
    let (started, stream) = submit_running(&producer, r#"{"command_id":"r1","commandType":"BASH_EXEC","command":"echo before; sleep 2; echo after"}"#).await;
    assert_eq!(started.result_data, "before\n");
    server.restart();
    let rest = collect(stream).await;
    assert_ok(&rest);
    assert_eq!(data(&rest), "after\n");
    let replayed = collect(producer.replay("r1").await.unwrap()).await;
    assert_eq!(data(&replayed), "before\nafter\n");
    until_all_acknowledged(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_shut_down_mid_command_hands_it_back() {
    let server = NatsServer::start();
    let mut first = WorkerProcess::start(&server, 3);
    let producer = durable_producer(&server).await;
    let (_, stream) = submit_running(&producer, r#"{"command_id":"h1","commandType":"BASH_EXEC","command":"echo start; sleep 2; echo done"}"#).await;
    let pid = nix::unistd::Pid::from_raw(first.0.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let exited = tokio::task::spawn_blocking(move || first.0.wait().unwrap())
        .await
        .unwrap();
    assert!(exited.success(), "graceful exit");
    let _second = WorkerProcess::start(&server, 3);
    let rest = collect(stream).await;
    assert_ok(&rest);
    let output = data(&rest);
    assert!(
        output.contains("shut down; it will run again"),
        "the hand-back is announced: {output:?}"
    );
    assert!(output.ends_with("start\ndone\n"), "{output:?}");
}

/// A producer follows each command's results with a consumer of its own; left to expire
/// (30 s), a busy producer's consumers piled up past the server's limit and stalled every
/// command. Each is deleted when done: after the terminal result, or when the reader
/// drops the stream.
#[tokio::test]
async fn a_producer_leaves_no_results_consumers_behind() {
    let server = NatsServer::start();
    let (_stop, _task) = durable_worker(&server).await;
    let producer = durable_producer(&server).await;
    for i in 0..20 {
        let json =
            format!(r#"{{"command_id":"c{i}","commandType":"BASH_EXEC","command":"echo {i}"}}"#);
        assert_ok(&collect(producer.submit(command(&json)).await.unwrap()).await);
    }
    let (_, abandoned) = submit_running(
        &producer,
        r#"{"command_id":"gone","commandType":"BASH_EXEC","command":"echo started; sleep 30"}"#,
    )
    .await;
    drop(abandoned);
    let js = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    let mut results = js.get_stream(RESULTS_STREAM).await.unwrap();
    // Well inside the server's own expiry of an unread consumer (10 s).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let consumers = results.info().await.unwrap().state.consumer_count;
        if consumers == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{consumers} results consumers still exist"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_durable_commands_over_two_workers_each_end_once() {
    let server = NatsServer::start();
    // Nothing here dies: the default ack wait, not the 1 s the redelivery tests use (a
    // loaded machine can starve a progress ack for a second, and a redelivered command
    // rightly prints its restart note).
    let steady = DurableSettings {
        ack_wait: Duration::from_secs(30),
        ..settings()
    };
    let (_a, _ta) = durable_worker_with(&server, steady.clone()).await;
    let (_b, _tb) = durable_worker_with(&server, steady).await;
    let producer = durable_producer(&server).await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..1000 {
        let producer = producer.clone();
        tasks.spawn(async move {
            let json = format!(r#"{{"command_id":"m{i}","commandType":"BASH_EXEC","command":"echo {i}-a; echo {i}-b"}}"#);
            let messages = collect(producer.submit(command(&json)).await.unwrap()).await;
            assert_ok(&messages);
            assert_eq!(data(&messages), format!("{i}-a\n{i}-b\n"));
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    until_all_acknowledged(&server).await;
}

#[tokio::test]
async fn durable_cancel_and_poison_messages() {
    let server = NatsServer::start();
    let (_stop, _task) = durable_worker(&server).await;
    let producer = durable_producer(&server).await;
    let (_, stream) = submit_running(
        &producer,
        r#"{"command_id":"dc-1","commandType":"BASH_EXEC","command":"echo go; sleep 1000"}"#,
    )
    .await;
    producer.cancel("dc-1").await.unwrap();
    assert_eq!(
        terminal(&collect(stream).await).error_code.as_deref(),
        Some("CANCELLED")
    );

    let js = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    for garbage in [
        &b"not json at all"[..],
        b"{\"command_id\":\"poison-2\",\"commandType\":",
    ] {
        js.publish(
            format!("cmdr.commands.{}.BASH_EXEC", producer.id()),
            garbage.to_vec().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    }
    let answered = collect(producer.replay("poison-2").await.unwrap()).await;
    assert_eq!(
        terminal(&answered).error_code.as_deref(),
        Some("MALFORMED_JSON")
    );
    until_all_acknowledged(&server).await;
}

#[tokio::test]
async fn each_stored_result_names_the_one_stored_before_it() {
    let server = NatsServer::start();
    let producer = durable_producer(&server).await;
    let (stop, task) = durable_worker(&server).await;
    let json =
        r#"{"command_id":"chain","commandType":"BASH_EXEC","command":"echo a; sleep 0.1; echo b"}"#;
    let messages = collect(producer.submit(command(json)).await.unwrap()).await;
    assert_ok(&messages);
    // The stream as stored, this command's subject only, in order.
    let js = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    let mut stream = js.get_stream(RESULTS_STREAM).await.unwrap();
    let last = stream.info().await.unwrap().state.last_sequence;
    let subject = format!("cmdr.results.{}.chain", producer.id());
    let mut stored = Vec::new();
    for sequence in 1..=last {
        let message = stream.get_raw_message(sequence).await.unwrap();
        if message.subject.as_str() == subject {
            let after = message
                .headers
                .get(cmdr::nats::wire::RESULT_AFTER_HEADER)
                .map(|value| value.as_str().parse::<u64>().unwrap());
            stored.push((sequence, after));
        }
    }
    assert!(stored.len() >= 2, "output and terminal stored: {stored:?}");
    assert_eq!(stored[0].1, None, "the first names none: {stored:?}");
    for pair in stored.windows(2) {
        assert_eq!(pair[1].1, Some(pair[0].0), "{stored:?}");
    }
    stop.cancel();
    tokio::time::timeout(PATIENCE, task).await.unwrap().unwrap();
}

/// `cmdr submit --durable` of `command`, as a process of its own (no NATS user, no
/// `--producer-id`): its results.
async fn submit_process(server: &NatsServer, command: String) -> Vec<OutputResult> {
    let url = server.url();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(assert_cmd::cargo::cargo_bin("cmdr"))
            .args(["submit", "--durable", "--combine", "--nats", &url])
            .arg(command)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// De-duplication across restarts: the same durable command submitted by one `cmdr
/// submit`, then again by another (the first one's restart), runs once; the second gets
/// the first one's result (docs/nats.md, "Producer ids").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_command_resubmitted_by_a_second_submit_runs_once() {
    let server = NatsServer::start();
    let (_stop, _task) = durable_worker(&server).await;
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let command = serde_json::json!({
        "command_id": "nightly-1",
        "commandType": "BASH_EXEC",
        "command": format!("echo run >> {}; echo done", ran.display()),
    })
    .to_string();
    let first = submit_process(&server, command.clone()).await;
    let again = submit_process(&server, command).await;
    assert_eq!(data(&first), "done\n", "{first:?}");
    assert_eq!(data(&again), "done\n", "{again:?}");
    assert_eq!(
        std::fs::read_to_string(&ran).unwrap(),
        "run\n",
        "the resubmitted command ran again"
    );
}

/// Another producer publishes, on its own subject, a command whose message id is shaped
/// like bob's (`bob.<id>`, the old de-duplication key): bob's command with that id still
/// runs and ends, instead of being swallowed as a duplicate while bob waits for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_producers_message_id_cannot_swallow_a_command() {
    let server = NatsServer::start();
    let (_stop, _task) = durable_worker(&server).await;
    let bob = durable_producer(&server).await.with_id("bob").unwrap();
    let mallory = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    let forged = r#"{"command_id":"x1","commandType":"BASH_EXEC","command":"echo mallory"}"#;
    for message_id in ["bob.x1", "bob.x1.", "x1"] {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, message_id);
        mallory
            .publish_with_headers("cmdr.commands.mallory.BASH_EXEC", headers, forged.into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let own = r#"{"command_id":"x1","commandType":"BASH_EXEC","command":"echo bob"}"#;
    let results = tokio::time::timeout(PATIENCE, async {
        collect(bob.submit(command(own)).await.unwrap()).await
    })
    .await
    .expect("bob's command was swallowed: its stream never ended");
    assert_ok(&results);
    assert_eq!(data(&results), "bob\n");
}

/// Issue 32.8 in durable mode: a command asking for a longer `timeout_ms` than the
/// worker's `--max-timeout-ms` is refused (`INVALID_INPUT`, never run), and one asking for
/// none is stopped at the cap (`TIMEOUT`) instead of holding a job for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_worker_caps_every_commands_deadline() {
    let server = NatsServer::start();
    let options = WorkerOptions {
        durable: Some(settings()),
        shutdown_grace: Duration::from_millis(200),
        max_timeout: Duration::from_millis(1500),
        ..WorkerOptions::default()
    };
    let (_stop, _task) = durable_worker_options(&server, options).await;
    let producer = durable_producer(&server).await;
    let marker = tempfile::tempdir().unwrap();
    let ran = marker.path().join("ran");
    let json = format!(
        r#"{{"command_id":"above-cap","commandType":"BASH_EXEC","timeout_ms":86400000,"command":"touch {}; sleep 100000"}}"#,
        ran.display()
    );
    let messages = collect(
        producer
            .submit(decode_command(&json).unwrap())
            .await
            .unwrap(),
    )
    .await;
    let end = terminal(&messages);
    assert_eq!(end.status, ExecutionStatus::Failed, "{messages:#?}");
    assert_eq!(
        end.error_code.as_deref(),
        Some("INVALID_INPUT"),
        "{messages:#?}"
    );
    assert!(end.error.contains("--max-timeout-ms"), "{messages:#?}");
    assert!(!ran.exists(), "the refused command ran");

    let json = r#"{"command_id":"no-deadline","commandType":"BASH_EXEC","command":"echo started; sleep 100000"}"#;
    let messages = tokio::time::timeout(PATIENCE, async {
        collect(
            producer
                .submit(decode_command(json).unwrap())
                .await
                .unwrap(),
        )
        .await
    })
    .await
    .expect("a command without a deadline held a durable job past the cap");
    let end = terminal(&messages);
    assert_eq!(end.status, ExecutionStatus::Failed, "{messages:#?}");
    assert_eq!(end.error_code.as_deref(), Some("TIMEOUT"), "{messages:#?}");
    assert!(data(&messages).contains("started"), "{messages:#?}");
}
