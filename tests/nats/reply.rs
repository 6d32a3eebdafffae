//! The reply to a command request: the command's terminal result when the producer takes
//! it (the request begins with `wire::REPLY_MEMBER`, or, from older producers, carries
//! `Cmdr-Reply: result`) and it comes soon, else `Accepted`; producers and workers of
//! every version work together in one pool.

use async_nats::{HeaderMap, Request};
use cmdr::nats::wire::{Accepted, REPLY_HEADER, REPLY_MEMBER, REPLY_RESULT};
use cmdr_executors::{ExecutionStatus, OutputResult};
use futures_util::StreamExt;
use serde_json::json;

use super::{collect, data, producer, terminal, terminal_on, NatsServer, Worker, PATIENCE};

/// A request taking the terminal result as the reply, as producers ask: `body` (a JSON
/// object) with [`REPLY_MEMBER`] first.
fn asking_for_result(body: String) -> Request {
    let rest = body.strip_prefix('{').expect("a JSON object");
    Request::new()
        .payload(format!("{REPLY_MEMBER}{rest}").into())
        .timeout(Some(PATIENCE))
}

/// A request taking the terminal result as the reply, as producers asked before
/// [`REPLY_MEMBER`]: with the header `Cmdr-Reply: result`.
fn asking_by_header(body: String) -> Request {
    let mut headers = HeaderMap::new();
    headers.insert(REPLY_HEADER, REPLY_RESULT);
    Request::new()
        .payload(body.into())
        .headers(headers)
        .timeout(Some(PATIENCE))
}

/// The result a reply is, if it is one (it has a `status`; an `Accepted` has none).
fn result_in(reply: &async_nats::Message) -> Option<OutputResult> {
    serde_json::from_slice(&reply.payload).ok()
}

/// A server with one worker, and a client already subscribed to `results` (a results
/// subject or pattern). Fields drop in order: the worker stops before its server.
struct Pool {
    client: async_nats::Client,
    results: async_nats::Subscriber,
    _worker: Worker,
    _server: NatsServer,
}

impl Pool {
    async fn listening_on(results: &str) -> Self {
        let server = NatsServer::start();
        let worker = Worker::start(&server, None).await;
        let client = async_nats::connect(server.url()).await.unwrap();
        let results = client.subscribe(results.to_owned()).await.unwrap();
        client.flush().await.unwrap();
        Self {
            client,
            results,
            _worker: worker,
            _server: server,
        }
    }

    /// Sends the `BASH_EXEC` command `body` as producers do, taking the terminal result as
    /// the reply; the reply.
    async fn ask_bash(&self, body: &serde_json::Value) -> async_nats::Message {
        self.client
            .send_request(
                "cmdr.commands.raw.BASH_EXEC",
                asking_for_result(body.to_string()),
            )
            .await
            .unwrap()
    }
}

/// A worker replying with results carries each command's terminal once: in the reply or
/// on the results subject, never both — asked by the request's first member or, as older
/// producers ask, by its header.
#[tokio::test]
async fn a_worker_replies_with_the_terminal_once() {
    let mut pool = Pool::listening_on("cmdr.results.raw.*").await;
    let dir = tempfile::tempdir().unwrap();
    let mut in_reply = [0; 2];
    for n in 0..40 {
        let body =
            json!({"command_id":format!("r-{n}"),"commandType":"LIST_DIRECTORY","path":dir.path()})
                .to_string();
        let by_header = n % 2;
        let request = if by_header == 1 {
            asking_by_header(body)
        } else {
            asking_for_result(body)
        };
        let reply = pool
            .client
            .send_request("cmdr.commands.raw.LIST_DIRECTORY", request)
            .await
            .unwrap();
        if let Some(result) = result_in(&reply) {
            in_reply[by_header] += 1;
            assert_eq!(result.command_id, format!("r-{n}"));
            assert_eq!(result.status, ExecutionStatus::Succeeded, "{result:?}");
        } else {
            let accepted: Accepted = serde_json::from_slice(&reply.payload).unwrap();
            assert!(accepted.worker.is_some(), "{accepted:?}");
            let result = terminal_on(&mut pool.results).await;
            assert_eq!(result.command_id, format!("r-{n}"));
        }
    }
    assert!(
        in_reply[0] > 0,
        "no reply asked by its first member carried its result"
    );
    assert!(
        in_reply[1] > 0,
        "no reply asked by header carried its result"
    );
    // A fence: a plain request, answered `Accepted`, its terminal on the
    // subject after everything the worker published before.
    let fence = json!({"command_id":"fence","commandType":"LIST_DIRECTORY","path":dir.path()});
    pool.client
        .request("cmdr.commands.raw.LIST_DIRECTORY", fence.to_string().into())
        .await
        .unwrap();
    let next = terminal_on(&mut pool.results).await;
    assert_eq!(next.command_id, "fence", "a terminal sent twice: {next:?}");
}

/// A command with no result within the worker's wait (here: blocked reading a FIFO that
/// is written only after the reply came) is answered `Accepted` meanwhile, and its
/// results follow on the results subject.
#[tokio::test]
async fn a_command_without_a_result_yet_is_answered_accepted() {
    let mut pool = Pool::listening_on("cmdr.results.raw.slow-1").await;
    let (_dir, fifo) = gate();
    let script = format!("read x < '{}'; echo got $x", fifo.display());
    let body = json!({"command_id":"slow-1","commandType":"BASH_EXEC","command":script});
    let reply = pool.ask_bash(&body).await;
    assert!(result_in(&reply).is_none());
    let accepted: Accepted = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(accepted.command_id, "slow-1");
    assert!(accepted.worker.is_some() && !accepted.busy, "{accepted:?}");
    // Opening the FIFO for writing waits for its reader, the command.
    tokio::task::spawn_blocking(move || std::fs::write(fifo, "go\n"))
        .await
        .unwrap()
        .unwrap();
    let mut output = String::new();
    let last = loop {
        let message = tokio::time::timeout(PATIENCE, pool.results.next())
            .await
            .unwrap()
            .unwrap();
        let result: OutputResult = serde_json::from_slice(&message.payload).unwrap();
        output.push_str(&result.result_data);
        if result.status.is_terminal() {
            break result;
        }
    };
    assert_eq!(last.status, ExecutionStatus::Succeeded, "{last:?}");
    assert_eq!(output, "got go\n");
}

/// A producer submitting silent commands one after another waits only the short reply
/// wait for each, not the 200 ms it once was: twenty submits of silent commands take far
/// less than the 4 s that twenty such waits would (the bound leaves a busy machine room).
#[tokio::test]
async fn silent_commands_submitted_one_after_another_are_each_accepted_soon() {
    let pool = Pool::listening_on("cmdr.results.raw.>").await;
    let started = std::time::Instant::now();
    for n in 0..20 {
        let id = format!("quiet-{n}");
        let body = json!({"command_id": id, "commandType": "BASH_EXEC", "command": "sleep 30"});
        let reply = pool.ask_bash(&body).await;
        let accepted: Accepted = serde_json::from_slice(&reply.payload).unwrap();
        assert_eq!(accepted.command_id, id);
    }
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(2), "{took:?}");
}

/// The member asks only where producers write it, first: elsewhere in the object it is an
/// unknown field like any other, and the request is answered `Accepted` — for a command
/// whose first result is its terminal, which a reply asked for would carry.
#[tokio::test]
async fn the_member_asks_only_when_it_comes_first() {
    let mut pool = Pool::listening_on("cmdr.results.raw.*").await;
    let dir = tempfile::tempdir().unwrap();
    for n in 0..5 {
        let id = format!("late-{n}");
        // Written out: `json!` sorts its keys, which would put the member first.
        let path = serde_json::to_string(dir.path()).unwrap();
        let body = format!(
            r#"{{"command_id":"{id}","cmdrReply":"result","commandType":"LIST_DIRECTORY","path":{path}}}"#
        );
        let reply = pool
            .client
            .request("cmdr.commands.raw.LIST_DIRECTORY", body.into())
            .await
            .unwrap();
        assert!(result_in(&reply).is_none(), "{:?}", reply.payload);
        let accepted: Accepted = serde_json::from_slice(&reply.payload).unwrap();
        assert_eq!(accepted.command_id, id);
        let last = terminal_on(&mut pool.results).await;
        assert_eq!(last.command_id, id);
        assert_eq!(last.status, ExecutionStatus::Succeeded, "{last:?}");
    }
}

/// A producer of before the reply could carry results (a plain request) still gets
/// `Accepted` at once.
#[tokio::test]
async fn a_plain_request_still_gets_accepted() {
    let mut pool = Pool::listening_on("cmdr.results.raw.old-1").await;
    // Its first result is its terminal: a reply asked for would carry it.
    let body = json!({"command_id":"old-1","commandType":"BASH_EXEC","command":"true"});
    let reply = pool
        .client
        .request("cmdr.commands.raw.BASH_EXEC", body.to_string().into())
        .await
        .unwrap();
    assert!(result_in(&reply).is_none());
    let accepted: Accepted = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(accepted.command_id, "old-1");
    assert!(accepted.worker.is_some());
    let last = terminal_on(&mut pool.results).await;
    assert_eq!(last.status, ExecutionStatus::Succeeded);
}

/// A worker of before the reply could carry results: decodes the command as plain JSON
/// (the member is a field it does not know), answers `Accepted` (without its id, as the
/// oldest did) and publishes every result on the results subject. Yields whether the
/// request asked for the result.
async fn old_worker(server: &NatsServer) -> tokio::task::JoinHandle<Option<bool>> {
    let client = async_nats::connect(server.url()).await.unwrap();
    let mut commands = client
        .queue_subscribe("cmdr.commands.>", "cmdr-workers".to_owned())
        .await
        .unwrap();
    client.flush().await.unwrap();
    tokio::spawn(async move {
        let message = commands.next().await?;
        let asked = message.payload.starts_with(REPLY_MEMBER.as_bytes());
        let command: serde_json::Value = serde_json::from_slice(&message.payload).ok()?;
        let id = command["command_id"].as_str()?.to_owned();
        let producer = message.subject.split('.').nth(2)?.to_owned();
        let accepted = json!({"command_id": id});
        client
            .publish(message.reply?, accepted.to_string().into())
            .await
            .ok()?;
        let subject = format!("cmdr.results.{producer}.{id}");
        for (status, data) in [("RUNNING", "one "), ("SUCCEEDED", "two")] {
            let result = json!({"command_id": id, "commandType": "BASH_EXEC", "status": status,
                "message": "", "resultData": data});
            client
                .publish(subject.clone(), result.to_string().into())
                .await
                .ok()?;
        }
        client.flush().await.ok()?;
        Some(asked)
    })
}

/// A producer asking for the result in the reply takes an old worker's `Accepted` and
/// reads the results from the results subject, in order.
#[tokio::test]
async fn a_producer_takes_an_old_workers_accepted() {
    let server = NatsServer::start();
    let worker = old_worker(&server).await;
    let producer = producer(&server).await;
    let command =
        cmdr_executors::decode_command(r#"{"commandType":"BASH_EXEC","command":"x"}"#).unwrap();
    let messages = collect(producer.submit(command).await.unwrap()).await;
    assert_eq!(data(&messages), "one two");
    assert_eq!(terminal(&messages).status, ExecutionStatus::Succeeded);
    let asked = tokio::time::timeout(PATIENCE, worker)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        asked,
        Some(true),
        "the producer asks, by the request's first member"
    );
}

/// Through a producer, a command whose output comes before and after `submit` returned
/// (its reply, then, an `Accepted`) streams it all, in order, with one terminal.
#[tokio::test]
async fn results_after_the_reply_follow_it_in_order() {
    let server = NatsServer::start();
    let _worker = Worker::start(&server, None).await;
    let (_dir, fifo) = gate();
    let producer = producer(&server).await;
    let script = format!("echo one; read x < '{}'; echo $x", fifo.display());
    let command = cmdr_executors::decode_command(
        &json!({"commandType":"BASH_EXEC","command":script}).to_string(),
    )
    .unwrap();
    let stream = producer.submit(command).await.unwrap();
    tokio::task::spawn_blocking(move || std::fs::write(fifo, "two\n"))
        .await
        .unwrap()
        .unwrap();
    let messages = collect(stream).await;
    assert_eq!(data(&messages), "one\ntwo\n");
    assert_eq!(terminal(&messages).status, ExecutionStatus::Succeeded);
}

/// A FIFO in a new temporary directory (kept alive by the returned guard): a command that
/// reads it waits until the test writes it.
fn gate() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("gate");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    (dir, fifo)
}
