//! The shipped permission layout (examples/nats/permissions.conf) on a real nats-server: a
//! second producer cannot read, forge, cancel or answer the first one's commands, cannot
//! join the workers' queue group, and reusing the first one's command id does not touch it.

use std::time::Duration;

use cmdr::nats::connect::NatsConnect;
use cmdr::nats::producer::Producer;
use cmdr::nats::worker::{self, WorkerOptions};
use cmdr_executors::{decode_command, ExecutionStatus, OutputResult};
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::{collect, data, NatsServer};

/// How long a subscription that must stay silent is watched.
const SILENCE: Duration = Duration::from_millis(500);

fn layout() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/nats/permissions.conf"
    );
    std::fs::read_to_string(path).unwrap()
}

async fn connect_as(server: &NatsServer, user: &str) -> async_nats::Client {
    NatsConnect {
        user: Some(user.to_owned()),
        password: Some(format!("{user}-pass")),
        ..NatsConnect::new(&server.url(), user)
    }
    .connect()
    .await
    .unwrap()
}

async fn producer_as(server: &NatsServer, user: &str) -> Producer {
    Producer::new(connect_as(server, user).await)
        .with_id(user)
        .unwrap()
}

fn command(json: &str) -> cmdr_executors::Command {
    decode_command(json).unwrap()
}

/// Nothing arrives on `subscription` for a while.
async fn silent(subscription: &mut async_nats::Subscriber, what: &str) {
    let got = tokio::time::timeout(SILENCE, subscription.next()).await;
    assert!(
        got.is_err() || matches!(got, Ok(None)),
        "{what}: {:?}",
        got.ok().flatten().map(|m| m.subject)
    );
}

fn ended_ok(messages: &[OutputResult]) {
    assert_eq!(
        messages.last().unwrap().status,
        ExecutionStatus::Succeeded,
        "{messages:#?}"
    );
}

/// The id of the worker [`start_worker`] starts.
const WORKER: &str = "w1";

/// A worker connected as user `worker`, its process ids `w1-p<N>`.
async fn start_worker(
    server: &NatsServer,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<Result<(), worker::WorkerError>>,
) {
    let options = WorkerOptions {
        worker_id: WORKER.to_owned(),
        jobs: 8,
        shutdown_grace: Duration::from_millis(200),
        ..WorkerOptions::default()
    };
    let registry = cmdr::app::RegistryBuilder::new()
        .input_broker(std::sync::Arc::new(cmdr::nats::input::NatsInput::new(
            connect_as(server, "worker").await,
        )))
        .process_id_prefix(options.process_id_prefix())
        .build();
    let stop = CancellationToken::new();
    let task = tokio::spawn(worker::run(
        connect_as(server, "worker").await,
        registry,
        options,
        stop.clone().cancelled_owned(),
    ));
    (stop, task)
}

/// A producer as `user` once the worker takes its commands.
async fn ready_producer(server: &NatsServer, user: &str) -> Producer {
    let producer = producer_as(server, user).await;
    for _ in 0..200 {
        let probe = command(r#"{"commandType":"BASH_EXEC","command":"true"}"#);
        if producer.submit(probe).await.is_ok() {
            return producer;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the worker never took {user}'s commands");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_cannot_reach_another_producers_processes() {
    let server = NatsServer::start_with_config(&layout());
    let (stop, task) = start_worker(&server).await;
    let alice = ready_producer(&server, "alice").await;
    let started = collect(
        alice
            .submit(command(
                r#"{"commandType":"BASH_EXEC","command":"echo alive; sleep 60","background":true,"yield_ms":100}"#,
            ))
            .await
            .unwrap(),
    )
    .await;
    ended_ok(&started);
    let id = started.last().unwrap().process_id.clone().unwrap();
    assert!(id.starts_with("w1-p"), "{id}");
    let bob_client = connect_as(&server, "bob").await;
    let mut snoop_results = bob_client.subscribe("cmdr.results.alice.>").await.unwrap();

    // Bob addresses alice's process as alice: the server drops it, no worker answers.
    for (ty, body) in [
        (
            "PROCESS_KILL",
            format!(
                r#"{{"command_id":"k1","commandType":"PROCESS_KILL","process_id":"{id}","signal":"KILL","grace_ms":0}}"#
            ),
        ),
        (
            "PROCESS_INPUT",
            format!(
                r#"{{"command_id":"i1","commandType":"PROCESS_INPUT","process_id":"{id}","input":"x\n"}}"#
            ),
        ),
        (
            "PROCESS_OUTPUT",
            format!(r#"{{"command_id":"o1","commandType":"PROCESS_OUTPUT","process_id":"{id}"}}"#),
        ),
    ] {
        let request = async_nats::Request::new()
            .payload(body.into())
            .timeout(Some(SILENCE));
        let subject = format!("cmdr.worker.{WORKER}.commands.alice.{ty}");
        let answer = bob_client.send_request(subject, request).await;
        assert!(answer.is_err(), "a worker took bob's {ty} as alice's");
    }
    // Nor can he ask which sessions alice has.
    let request = async_nats::Request::new()
        .payload(bytes::Bytes::new())
        .timeout(Some(SILENCE));
    let discovery = bob_client.send_request("cmdr.workers.alice", request).await;
    assert!(discovery.is_err(), "bob discovered alice's sessions");

    // Alice's process is untouched, its output whole, and bob read none of it.
    let read = collect(
        alice
            .submit(command(&format!(
                r#"{{"commandType":"PROCESS_OUTPUT","process_id":"{id}","offset":0}}"#
            )))
            .await
            .unwrap(),
    )
    .await;
    ended_ok(&read);
    assert_eq!(
        data(&read),
        "alive
"
    );
    assert_eq!(
        read.last().unwrap().process_state.as_deref(),
        Some("running")
    );
    silent(&mut snoop_results, "bob read alice's results").await;
    stop.cancel();
    task.await.unwrap().unwrap();
}

/// Every message of `json` submitted by `producer`.
async fn run(producer: &Producer, json: String) -> Vec<OutputResult> {
    collect(producer.submit(command(&json)).await.unwrap()).await
}

/// Bob's process commands on his own subjects run in his scope (`nats:bob`), where
/// alice's process does not exist, nor her session of the same name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_cannot_reach_another_producers_processes_through_its_own_subjects() {
    let server = NatsServer::start_with_config(&layout());
    let (stop, task) = start_worker(&server).await;
    let alice = ready_producer(&server, "alice").await;
    let bob = ready_producer(&server, "bob").await;
    let started = run(
        &alice,
        r#"{"commandType":"BASH_EXEC","command":"echo alive; sleep 60","background":true,"yield_ms":100}"#
            .to_owned(),
    )
    .await;
    ended_ok(&started);
    let id = started.last().unwrap().process_id.clone().unwrap();
    let session = |script: &str| {
        format!(r#"{{"commandType":"BASH_EXEC","session":"dev","command":"{script}"}}"#)
    };
    ended_ok(&run(&alice, session("X=alice; echo set")).await);
    // Discovery names a producer's own sessions only.
    for (user, sessions) in [("alice", vec!["dev"]), ("bob", vec![])] {
        let client = connect_as(&server, user).await;
        let answer = client
            .request(format!("cmdr.workers.{user}"), bytes::Bytes::new())
            .await
            .unwrap();
        let info: cmdr::nats::wire::WorkerInfo = serde_json::from_slice(&answer.payload).unwrap();
        assert_eq!(info.worker, WORKER);
        assert_eq!(info.sessions, sessions, "{user}");
    }
    for json in [
        format!(
            r#"{{"commandType":"PROCESS_KILL","process_id":"{id}","signal":"KILL","grace_ms":0}}"#
        ),
        format!(r#"{{"commandType":"PROCESS_INPUT","process_id":"{id}","input":"x"}}"#),
        format!(r#"{{"commandType":"PROCESS_OUTPUT","process_id":"{id}","offset":0}}"#),
    ] {
        let result = run(&bob, json).await;
        let end = result.last().unwrap();
        assert_eq!(end.status, ExecutionStatus::Failed, "{result:#?}");
        assert_eq!(
            end.error_code.as_deref(),
            Some("PROCESS_NOT_FOUND"),
            "{result:#?}"
        );
        // Worded like an id that never existed: bob learns nothing.
        assert_eq!(end.error, format!("no process '{id}'"), "{result:#?}");
        assert!(!data(&result).contains("alive"), "{result:#?}");
    }
    let listed = run(&bob, r#"{"commandType":"PROCESS_LIST"}"#.to_owned()).await;
    ended_ok(&listed);
    assert_eq!(data(&listed), "[]");
    // Bob's session "dev" is his own shell, not alice's.
    let bobs = run(&bob, session("echo [$X]")).await;
    ended_ok(&bobs);
    assert_eq!(data(&bobs), "[]\n");

    // Alice's process and session are untouched.
    let read = run(
        &alice,
        format!(r#"{{"commandType":"PROCESS_OUTPUT","process_id":"{id}","offset":0}}"#),
    )
    .await;
    ended_ok(&read);
    assert_eq!(data(&read), "alive\n");
    assert_eq!(
        read.last().unwrap().process_state.as_deref(),
        Some("running")
    );
    assert_eq!(data(&run(&alice, session("echo [$X]")).await), "[alice]\n");
    let listed = run(&alice, r#"{"commandType":"PROCESS_LIST"}"#.to_owned()).await;
    let listed: Vec<serde_json::Value> = serde_json::from_str(&data(&listed)).unwrap();
    assert_eq!(listed.len(), 2, "her process and her session: {listed:#?}");
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_cannot_touch_another_producers_commands() {
    let server = NatsServer::start_with_config(&layout());
    let (stop, task) = start_worker(&server).await;
    let alice = ready_producer(&server, "alice").await;
    let bob_client = connect_as(&server, "bob").await;
    let bob = producer_as(&server, "bob").await;

    // Bob cannot read alice's results, nor her questions, nor take work from the queue.
    let mut snoop_results = bob_client.subscribe("cmdr.results.alice.>").await.unwrap();
    let mut snoop_input = bob_client.subscribe("cmdr.input.alice.>").await.unwrap();
    let mut steal = bob_client
        .queue_subscribe("cmdr.commands.>", "cmdr-workers".to_owned())
        .await
        .unwrap();

    // A long command of alice: bob forges its result and cancels it, both ways he can.
    let running = alice
        .submit(command(
            r#"{"command_id":"shared-1","commandType":"BASH_EXEC","command":"sleep 0.5; echo alice-real"}"#,
        ))
        .await
        .unwrap();
    let forged = r#"{"command_id":"shared-1","commandType":"BASH_EXEC","status":"SUCCEEDED","message":"","resultData":"forged\n"}"#;
    bob_client
        .publish("cmdr.results.alice.shared-1", forged.into())
        .await
        .unwrap();
    bob_client
        .publish("cmdr.cancel.alice.shared-1", "".into())
        .await
        .unwrap();
    bob_client.flush().await.unwrap();
    // Bob's own command with the same id runs as his own.
    let bobs = collect(
        bob.submit(command(
            r#"{"command_id":"shared-1","commandType":"BASH_EXEC","command":"echo bob-own"}"#,
        ))
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(data(&bobs), "bob-own\n");
    // Cancelling "his" shared-1 cannot reach alice's.
    bob.cancel("shared-1").await.unwrap();
    let alices = collect(running).await;
    ended_ok(&alices);
    assert_eq!(
        data(&alices),
        "alice-real\n",
        "neither forged nor cancelled"
    );

    // A question of alice's is hers alone to answer.
    let asking = alice
        .submit(command(
            r#"{"command_id":"ask-1","commandType":"REQUEST_USER_INPUT","prompt":"deploy?"}"#,
        ))
        .await
        .unwrap();
    // Questions arrive while the stream is read.
    let asking = tokio::spawn(collect(asking));
    let mut answered = false;
    for _ in 0..500 {
        if alice
            .answer_input("ask-1", "from-alice".to_owned())
            .await
            .is_ok()
        {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(answered, "alice could not answer her own question");
    let answer = asking.await.unwrap();
    ended_ok(&answer);
    assert_eq!(data(&answer), "from-alice");

    silent(&mut snoop_results, "bob read alice's results").await;
    silent(&mut snoop_input, "bob saw alice's question").await;
    silent(&mut steal, "bob took commands from the workers' queue").await;
    stop.cancel();
    task.await.unwrap().unwrap();
}
