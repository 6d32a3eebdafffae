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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_cannot_touch_another_producers_commands() {
    let server = NatsServer::start_with_config(&layout());
    let worker_client = connect_as(&server, "worker").await;
    let stop = CancellationToken::new();
    let task = tokio::spawn(worker::run(
        worker_client,
        cmdr::app::RegistryBuilder::new()
            .input_broker(std::sync::Arc::new(cmdr::nats::input::NatsInput::new(
                connect_as(&server, "worker").await,
            )))
            .build(),
        WorkerOptions {
            jobs: 8,
            shutdown_grace: Duration::from_millis(200),
            ..WorkerOptions::default()
        },
        stop.clone().cancelled_owned(),
    ));
    let probe = connect_as(&server, "alice").await;
    let alice = producer_as(&server, "alice").await;
    // Ready once a command of alice reaches the worker.
    let mut ready = false;
    for _ in 0..200 {
        let probe_command = command(r#"{"commandType":"BASH_EXEC","command":"true"}"#);
        if alice.submit(probe_command).await.is_ok() {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ready, "the worker never took alice's commands");
    drop(probe);
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
