//! The actor runtime: exactly one terminal message per command whatever happens (panic,
//! timeout, cancel, shutdown, reader gone, runtime torn down), back-pressure, duplicate
//! ids, registration.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cmdr_executors::{
    ActorConfig, CommandType, ExecContext, ExecError, ExecutionStatus, FnExecutor, Outcome,
    Registry, SubmitError, RESULT_CHANNEL_CAPACITY,
};
use serde_json::json;

use super::{assert_failed, collect, command, eventually, run, terminal};

fn bash(id: &str) -> serde_json::Value {
    json!({"command_id": id, "commandType": "BASH_EXEC", "command": "true"})
}

/// A registry whose BASH_EXEC is `executor`, with `config`.
fn custom<F, Fut>(config: ActorConfig, executor: F) -> Registry
where
    F: Fn(cmdr_executors::Command, ExecContext) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Outcome, ExecError>> + Send + 'static,
{
    let registry = Registry::new();
    registry.register_with(CommandType::BashExec, FnExecutor(executor), config);
    registry
}

/// Waits for cancellation, then reports it (a well-behaved executor).
async fn until_cancelled(ctx: ExecContext) -> Result<Outcome, ExecError> {
    ctx.cancel.cancelled().await;
    Err(ExecError::Cancelled)
}

#[tokio::test]
async fn a_panicking_executor_yields_one_failed_result() {
    let registry = custom(ActorConfig::default(), |_, ctx: ExecContext| async move {
        ctx.output.send("partial", "before".into()).await?;
        panic!("executor bug");
    });
    let messages = run(&registry, bash("p1")).await;
    assert_eq!(messages[0].result_data, "before");
    let end = terminal(&messages);
    assert_failed(end, "EXECUTOR_PANICKED");
    assert!(end.error.contains("executor bug"), "{end:?}");
    assert_eq!(registry.in_flight_count(), 0);
}

#[tokio::test]
async fn a_deadline_stops_a_cooperative_executor() {
    let config = ActorConfig {
        default_timeout: Some(Duration::from_millis(50)),
        ..ActorConfig::default()
    };
    let registry = custom(config, |_, ctx| until_cancelled(ctx));
    let messages = run(&registry, bash("t1")).await;
    assert_failed(terminal(&messages), "TIMEOUT");
}

#[tokio::test]
async fn an_executor_that_ignores_cancellation_is_dropped_after_the_grace() {
    let config = ActorConfig {
        default_timeout: Some(Duration::from_millis(20)),
        stop_grace: Duration::from_millis(50),
        ..ActorConfig::default()
    };
    let registry = custom(config, |_, _| std::future::pending());
    let messages = run(&registry, bash("t2")).await;
    assert_failed(terminal(&messages), "TIMEOUT");
    assert_eq!(registry.in_flight_count(), 0);
}

#[tokio::test]
async fn cancel_by_id_from_anywhere_and_from_the_stream() {
    let registry = custom(ActorConfig::default(), |_, ctx| until_cancelled(ctx));
    let stream = registry.execute(command(bash("c1"))).await.unwrap();
    assert!(registry.in_flight().contains(&"c1".to_owned()));
    let other = registry.clone();
    tokio::spawn(async move { assert!(other.cancel("c1")) });
    assert_failed(terminal(&collect(stream).await), "CANCELLED");
    assert!(!registry.cancel("c1"), "no longer in flight");

    let stream = registry.execute(command(bash("c2"))).await.unwrap();
    stream.cancel();
    assert_failed(terminal(&collect(stream).await), "CANCELLED");
}

#[tokio::test]
async fn dropping_the_stream_stops_the_command() {
    let started = Arc::new(AtomicBool::new(false));
    let saw_cancel = Arc::new(AtomicBool::new(false));
    let (start_flag, cancel_flag) = (started.clone(), saw_cancel.clone());
    let registry = custom(ActorConfig::default(), move |_, ctx: ExecContext| {
        let (start_flag, cancel_flag) = (start_flag.clone(), cancel_flag.clone());
        async move {
            start_flag.store(true, Ordering::SeqCst);
            ctx.cancel.cancelled().await;
            cancel_flag.store(true, Ordering::SeqCst);
            Err(ExecError::Cancelled)
        }
    });
    let stream = registry.execute(command(bash("d1"))).await.unwrap();
    eventually("executor starts", || started.load(Ordering::SeqCst)).await;
    drop(stream);
    eventually("executor sees cancellation", || {
        saw_cancel.load(Ordering::SeqCst)
    })
    .await;
    eventually("command leaves the table", || {
        registry.in_flight_count() == 0
    })
    .await;
}

#[tokio::test]
async fn a_stream_dropped_before_its_command_starts_never_runs_it() {
    let started = Arc::new(AtomicBool::new(false));
    let flag = started.clone();
    let config = ActorConfig {
        max_concurrent: 1,
        ..ActorConfig::default()
    };
    let registry = custom(
        config,
        move |c: cmdr_executors::Command, ctx: ExecContext| {
            let flag = flag.clone();
            async move {
                if c.command_id() == "second" {
                    flag.store(true, Ordering::SeqCst);
                }
                until_cancelled(ctx).await
            }
        },
    );
    let first = registry.execute(command(bash("first"))).await.unwrap();
    drop(registry.execute(command(bash("second"))).await.unwrap());
    first.cancel();
    collect(first).await;
    eventually("the table empties", || registry.in_flight_count() == 0).await;
    assert!(!started.load(Ordering::SeqCst));
}

#[tokio::test]
async fn shutdown_ends_running_and_queued_commands_and_refuses_new_ones() {
    let config = ActorConfig {
        max_concurrent: 1,
        ..ActorConfig::default()
    };
    let registry = custom(config, |_, ctx| until_cancelled(ctx));
    let running = registry.execute(command(bash("s1"))).await.unwrap();
    let queued = registry.execute(command(bash("s2"))).await.unwrap();
    registry.shutdown(Duration::from_millis(20)).await;
    assert_failed(terminal(&collect(running).await), "SHUTTING_DOWN");
    assert_failed(terminal(&collect(queued).await), "SHUTTING_DOWN");
    let refused = registry.execute(command(bash("s3"))).await;
    assert_eq!(refused.err(), Some(SubmitError::ShuttingDown));
}

#[tokio::test]
async fn shutdown_lets_quick_commands_finish_within_the_grace() {
    let registry = Registry::with_defaults();
    let stream = registry
        .execute(command(
            json!({"commandType":"BASH_EXEC","command":"sleep 0.2; echo done"}),
        ))
        .await
        .unwrap();
    registry.shutdown(Duration::from_secs(20)).await;
    let messages = collect(stream).await;
    assert_eq!(terminal(&messages).status, ExecutionStatus::Succeeded);
    assert_eq!(super::data(&messages), "done\n");
}

#[test]
fn a_runtime_torn_down_under_a_command_still_yields_a_terminal_result() {
    let first = tokio::runtime::Runtime::new().unwrap();
    let stream = first.block_on(async {
        let registry = custom(ActorConfig::default(), |_, ctx| until_cancelled(ctx));
        registry.execute(command(bash("lost-1"))).await.unwrap()
    });
    drop(first);
    let second = tokio::runtime::Runtime::new().unwrap();
    let messages = second.block_on(collect(stream));
    assert_failed(terminal(&messages), "EXECUTOR_LOST");
}

#[test]
fn a_registry_built_outside_a_runtime_starts_its_actors_with_their_first_command() {
    // Nothing is started when the registry is built (no runtime to start it on here)…
    let registry = Registry::with_defaults();
    // … and each actor starts on the runtime of its first command.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let messages = runtime.block_on(run(&registry, bash("lazy-1")));
    assert_eq!(terminal(&messages).status, ExecutionStatus::Succeeded);
    let json = json!({"command_id": "lazy-2", "commandType": "LIST_DIRECTORY", "path": "."});
    let messages = runtime.block_on(run(&registry, json));
    assert_eq!(terminal(&messages).status, ExecutionStatus::Succeeded);
}

#[tokio::test]
async fn a_duplicate_id_in_flight_is_refused_then_reusable() {
    let registry = custom(ActorConfig::default(), |_, ctx| until_cancelled(ctx));
    let first = registry.execute(command(bash("dup"))).await.unwrap();
    let second = registry.execute(command(bash("dup"))).await;
    assert_eq!(second.err(), Some(SubmitError::DuplicateId("dup".into())));
    first.cancel();
    collect(first).await;
    let again = registry.execute(command(bash("dup"))).await.unwrap();
    again.cancel();
    collect(again).await;
}

#[tokio::test]
async fn unregistered_types_are_an_error_and_register_replaces() {
    let registry = Registry::new();
    let refused = registry.execute(command(bash("r1"))).await;
    assert_eq!(
        refused.err(),
        Some(SubmitError::NotRegistered(CommandType::BashExec))
    );
    let json_stream = registry.execute_json(&bash("r2").to_string()).await;
    assert_failed(
        terminal(&collect(json_stream).await),
        "UNSUPPORTED_COMMAND_TYPE",
    );
    registry.register(
        CommandType::BashExec,
        FnExecutor(|_, _| async { Ok(Outcome::succeeded("first")) }),
    );
    registry.register(
        CommandType::BashExec,
        FnExecutor(|_, _| async { Ok(Outcome::succeeded("second")) }),
    );
    let messages = run(&registry, bash("r3")).await;
    assert_eq!(terminal(&messages).message, "second");
}

#[tokio::test]
async fn a_slow_reader_holds_the_executor_back() {
    let sent = Arc::new(AtomicUsize::new(0));
    let counter = sent.clone();
    let registry = custom(ActorConfig::default(), move |_, ctx: ExecContext| {
        let counter = counter.clone();
        async move {
            loop {
                ctx.output.send("chunk", "x".repeat(1024)).await?;
                counter.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    let mut stream = registry.execute(command(bash("bp1"))).await.unwrap();
    eventually("the channel fills", || {
        sent.load(Ordering::SeqCst) >= RESULT_CHANNEL_CAPACITY
    })
    .await;
    // One thread runs the test and the executor: each yield lets the executor run on, as
    // far as the channel lets it (no timer decides the outcome).
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    assert_eq!(sent.load(Ordering::SeqCst), RESULT_CHANNEL_CAPACITY);
    stream.next().await.unwrap();
    eventually("one more after one read", || {
        sent.load(Ordering::SeqCst) == RESULT_CHANNEL_CAPACITY + 1
    })
    .await;
    stream.cancel();
    assert_failed(terminal(&collect(stream).await), "CANCELLED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_concurrent_commands_each_end_once() {
    let registry = custom(ActorConfig::default(), |c: cmdr_executors::Command, _| {
        let id = c.command_id().to_owned();
        async move { Ok(Outcome::succeeded(id)) }
    });
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..10_000 {
        let registry = registry.clone();
        tasks.spawn(async move {
            let id = format!("n{i}");
            let messages = run(&registry, bash(&id)).await;
            assert_eq!(terminal(&messages).message, id);
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    assert_eq!(registry.in_flight_count(), 0);
}

#[tokio::test]
async fn execute_json_answers_bad_input_on_the_stream() {
    let registry = Registry::with_defaults();
    let stream = registry
        .execute_json(r#"{"command_id":"bad-1","commandType":"BASH_EXEC","timeout_ms":1}"#)
        .await;
    let messages = collect(stream).await;
    assert_eq!(terminal(&messages).command_id, "bad-1");
    assert_failed(terminal(&messages), "INVALID_COMMAND");
    let stream = registry
        .execute_json(r#"{"commandType":"BASH_EXEC","command":"true","timeout_ms":0}"#)
        .await;
    assert_failed(terminal(&collect(stream).await), "INVALID_INPUT");
}
