//! Producer ⇄ bus ⇄ worker: every command type, many commands over two workers, cancel,
//! user input, refusals and poison messages, oversized results.

use std::sync::Arc;
use std::time::Duration;

use cmdr::nats::producer::ProducerError;
use cmdr_executors::{
    combine_output_results, decode_command, ExecutionStatus, PendingInputs, Registry,
};
use futures_util::StreamExt;
use serde_json::json;

use super::{assert_ok, collect, data, eventually, producer, terminal, NatsServer, Worker};

fn command(value: serde_json::Value) -> cmdr_executors::Command {
    decode_command(&value.to_string()).unwrap()
}

#[tokio::test]
async fn every_command_type_runs_remotely() {
    let server = NatsServer::start();
    let _worker = Worker::start(&server, None).await;
    let producer = producer(&server).await;
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("f.txt");
    let cases = [
        json!({"commandType":"FILE_WRITE","file_path":file,"content":"one\ntwo\n"}),
        json!({"commandType":"PATCH_FILE","file_path":file,"patch":"@@ -1,2 +1,2 @@\n-one\n+ONE\n two\n"}),
        json!({"commandType":"FILE_READ","file_path":file}),
        json!({"commandType":"LIST_DIRECTORY","path":tmp.path()}),
        json!({"commandType":"BASH_EXEC","command":"cat f.txt; cd /","working_dir":tmp.path()}),
    ];
    let mut outputs = Vec::new();
    for case in cases {
        let messages = collect(producer.submit(command(case)).await.unwrap()).await;
        assert_ok(&messages);
        outputs.push(messages);
    }
    assert_eq!(data(&outputs[2]), "ONE\ntwo\n");
    assert!(data(&outputs[3]).contains("f.txt"));
    assert_eq!(data(&outputs[4]), "ONE\ntwo\n");
    assert_eq!(terminal(&outputs[4]).final_cwd.as_deref(), Some("/"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_commands_over_two_workers_each_end_once_in_order() {
    let server = NatsServer::start();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let _first = Worker::start(&server, Some(a.path())).await;
    let _second = Worker::start(&server, Some(b.path())).await;
    let producer = producer(&server).await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..1000 {
        let producer = producer.clone();
        tasks.spawn(async move {
            let script = format!("echo {i}-a; echo {i}-b; echo {i}-c");
            let c = command(
                json!({"command_id": format!("k{i}"), "commandType":"BASH_EXEC","command":script}),
            );
            let messages = collect(producer.submit(c).await.unwrap()).await;
            assert_ok(&messages);
            assert_eq!(data(&messages), format!("{i}-a\n{i}-b\n{i}-c\n"));
            terminal(&messages).final_cwd.clone().unwrap()
        });
    }
    let mut by_worker = std::collections::HashMap::<String, usize>::new();
    while let Some(cwd) = tasks.join_next().await {
        *by_worker.entry(cwd.unwrap()).or_default() += 1;
    }
    assert_eq!(by_worker.values().sum::<usize>(), 1000);
    assert_eq!(
        by_worker.len(),
        2,
        "both workers took commands: {by_worker:?}"
    );
}

#[tokio::test]
async fn cancel_over_the_bus_kills_the_remote_process_tree() {
    let server = NatsServer::start();
    let _worker = Worker::start(&server, None).await;
    let producer = producer(&server).await;
    let c = command(
        json!({"command_id":"long-1","commandType":"BASH_EXEC","command":"sleep 1000 & echo $!; sleep 1000"}),
    );
    let mut stream = producer.submit(c).await.unwrap();
    let first = tokio::time::timeout(super::PATIENCE, stream.next())
        .await
        .unwrap()
        .unwrap();
    let pid: i32 = first.result_data.trim().parse().unwrap();
    producer.cancel("long-1").await.unwrap();
    let rest = collect(stream).await;
    assert_eq!(terminal(&rest).error_code.as_deref(), Some("CANCELLED"));
    eventually("the remote sleep is gone", || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true)
    })
    .await;
}

#[tokio::test]
async fn user_input_is_asked_of_the_producer() {
    let server = NatsServer::start();
    let _worker = Worker::start(&server, None).await;
    let plain = producer(&server).await;
    let c = command(
        json!({"command_id":"ask-1","commandType":"REQUEST_USER_INPUT","prompt":"Your name?"}),
    );
    let mut stream = plain.submit(c).await.unwrap();
    let waiting = stream.next().await.unwrap();
    assert!(waiting.message.contains("Your name?"), "{waiting:?}");
    // The question travels on its own subject; answer once it has arrived.
    let deadline = tokio::time::Instant::now() + super::PATIENCE;
    let answer = loop {
        let pending = tokio::time::timeout(Duration::from_millis(20), stream.next()).await;
        assert!(pending.is_err(), "nothing else before the answer");
        match plain.answer_input("ask-1", "Ada".into()).await {
            Ok(()) => break collect(stream).await,
            Err(ProducerError::NotWaiting(_)) => {}
            Err(e) => panic!("{e}"),
        }
        assert!(tokio::time::Instant::now() < deadline);
    };
    assert_eq!(terminal(&answer).result_data, "Ada");

    let pending = PendingInputs::new();
    let brokered = super::producer(&server)
        .await
        .with_input_broker(Arc::new(pending.clone()));
    let c = command(
        json!({"command_id":"ask-2","commandType":"REQUEST_USER_INPUT","prompt":"Colour?"}),
    );
    let stream = brokered.submit(c).await.unwrap();
    let answering = tokio::spawn(async move { collect(stream).await });
    eventually("the broker is asked", || !pending.pending().is_empty()).await;
    pending.answer("ask-2", "green".into()).unwrap();
    assert_eq!(terminal(&answering.await.unwrap()).result_data, "green");
}

#[tokio::test]
async fn input_without_a_listening_producer_fails_clearly() {
    let server = NatsServer::start();
    let _worker = Worker::start(&server, None).await;
    let client = async_nats::connect(server.url()).await.unwrap();
    let mut results = client.subscribe("cmdr.results.raw.ask-3").await.unwrap();
    let body =
        json!({"command_id":"ask-3","commandType":"REQUEST_USER_INPUT","prompt":"?"}).to_string();
    client
        .publish("cmdr.commands.raw.REQUEST_USER_INPUT", body.into())
        .await
        .unwrap();
    let last = super::terminal_on(&mut results).await;
    assert_eq!(last.error_code.as_deref(), Some("INPUT_UNAVAILABLE"));
    assert!(last.error.contains("cmdr.input.raw.ask-3"), "{last:?}");
}

#[tokio::test]
async fn without_workers_submit_fails_at_once() {
    let server = NatsServer::start();
    let producer = producer(&server).await;
    let c = command(json!({"commandType":"BASH_EXEC","command":"true"}));
    let started = std::time::Instant::now();
    let err = producer.submit(c).await.err().unwrap();
    assert_eq!(err.code(), cmdr::executors::ErrorCode::NoWorkers);
    assert!(started.elapsed() < Duration::from_secs(3));
    let stream = producer
        .submit_json("{\"commandType\":\"BASH_EXEC\",\"command\":\"true\"}")
        .await;
    assert_eq!(
        terminal(&collect(stream).await).error_code.as_deref(),
        Some("NO_WORKERS")
    );
}

#[tokio::test]
async fn poison_messages_are_answered_or_dropped_and_the_worker_goes_on() {
    let server = NatsServer::start();
    let _worker = Worker::start(&server, None).await;
    let client = async_nats::connect(server.url()).await.unwrap();
    let mut results = client.subscribe("cmdr.results.raw.poison-1").await.unwrap();
    for garbage in [
        &b"\xff\xfe not json"[..],
        b"{\"command_id\":\"poison-1\",\"commandType\":\"BASH_EXEC\",",
        b"[]",
    ] {
        client
            .publish("cmdr.commands.raw.BASH_EXEC", garbage.to_vec().into())
            .await
            .unwrap();
    }
    let message = tokio::time::timeout(super::PATIENCE, results.next())
        .await
        .unwrap()
        .unwrap();
    let result: cmdr_executors::OutputResult = serde_json::from_slice(&message.payload).unwrap();
    assert_eq!(result.status, ExecutionStatus::Failed);
    assert_eq!(result.error_code.as_deref(), Some("MALFORMED_JSON"));
    let producer = producer(&server).await;
    let c = command(json!({"commandType":"BASH_EXEC","command":"echo still here"}));
    assert_eq!(
        data(&collect(producer.submit(c).await.unwrap()).await),
        "still here\n"
    );
}

#[tokio::test]
async fn results_larger_than_max_payload_are_split_not_dropped() {
    let server = NatsServer::start_with_config("max_payload: 65536");
    let _worker = Worker::start(&server, None).await;
    let producer = producer(&server).await;
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..3000 {
        std::fs::write(
            tmp.path()
                .join(format!("a-rather-long-file-name-number-{i:05}.txt")),
            "",
        )
        .unwrap();
    }
    let file = tmp.path().join("big.txt");
    let text: String = (0..20_000)
        .map(|i| format!("line {i} \"quoted\" \\ back\n"))
        .collect();
    std::fs::write(&file, &text).unwrap();
    let local = Registry::with_defaults();
    for case in [
        json!({"commandType":"LIST_DIRECTORY","path":tmp.path()}),
        json!({"commandType":"FILE_READ","file_path":file}),
    ] {
        let remote =
            combine_output_results(producer.submit(command(case.clone())).await.unwrap(), None)
                .await;
        let here = combine_output_results(local.execute(command(case)).await.unwrap(), None).await;
        assert_eq!(remote.status, ExecutionStatus::Succeeded, "{remote:?}");
        assert!(remote.result_data.len() > 65536);
        assert_eq!(remote.result_data, here.result_data);
    }
}

#[tokio::test]
async fn dropping_the_remote_stream_cancels_the_command() {
    let server = NatsServer::start();
    let _worker = Worker::start(&server, None).await;
    let producer = producer(&server).await;
    let watcher = async_nats::connect(server.url()).await.unwrap();
    let mut results = watcher
        .subscribe(format!("cmdr.results.{}.drop-1", producer.id()))
        .await
        .unwrap();
    let c = command(
        json!({"command_id":"drop-1","commandType":"BASH_EXEC","command":"echo go; sleep 1000"}),
    );
    let mut stream = producer.submit(c).await.unwrap();
    stream.next().await.unwrap();
    drop(stream);
    let last = super::terminal_on(&mut results).await;
    assert_eq!(last.error_code.as_deref(), Some("CANCELLED"));
}
