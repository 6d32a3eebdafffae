//! Benchmark 1: registry + actor overhead. A no-op executor behind the registry, against
//! calling the same no-op body directly and against a bare `tokio::spawn` + oneshot
//! round trip.

use std::future::Future;
use std::hint::black_box;
use std::time::Instant;

use cmdr_executors::{
    ActorConfig, BashExecCommand, Command, CommandType, ExecContext, ExecError, ExecutionStatus,
    FnExecutor, Outcome, Registry,
};
use tokio::runtime::Runtime;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use crate::harness::{check_failed, compare, drain, ensure, refused, Failure, Sample, Side, Unit};
use crate::table::{Goal, Row};
use crate::Config;

/// Commands in flight at once in the concurrent case.
const IN_FLIGHT: usize = 1_000;

/// The executor body: done at once.
async fn noop() -> Result<Outcome, ExecError> {
    Ok(Outcome::succeeded(""))
}

/// The command every no-op side sends: `BASH_EXEC true`, no id (cmdr generates one).
pub fn template() -> Command {
    Command::BashExec(BashExecCommand {
        command: "true".to_owned(),
        ..BashExecCommand::default()
    })
}

/// Runs group 1.
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Vec<Row>, Failure> {
    let registry = rt.block_on(async { noop_registry() });
    let seq = cfg.size(20_000, 2_000);
    let waves = cfg.size(20, 2);
    let sequential = compare(
        cfg.warmup,
        cfg.samples,
        vec![
            Side::new("registry, sequential", commands(seq), || {
                on_worker(rt, sequential_cmdr(registry.clone(), seq))
            }),
            Side::new("direct call", commands(seq), || on_worker(rt, direct(seq))),
            Side::new("spawn + oneshot, sequential", commands(seq), || {
                on_worker(rt, spawn_round_trips(seq))
            }),
        ],
    );
    let total = waves * IN_FLIGHT;
    let concurrent = compare(
        cfg.warmup,
        cfg.samples,
        vec![
            Side::new("registry, 1,000 in flight", commands(total), || {
                on_worker(rt, in_flight_cmdr(registry.clone(), waves))
            }),
            Side::new("1,000 × (spawn + oneshot)", commands(total), || {
                on_worker(rt, in_flight_reference(waves))
            }),
        ],
    );
    let [cmdr_seq, direct, spawn_seq] = <[_; 3]>::try_from(sequential)
        .map_err(|_| check_failed("three sequential timings expected"))?;
    let [cmdr_conc, spawn_conc] = <[_; 2]>::try_from(concurrent)
        .map_err(|_| check_failed("two concurrent timings expected"))?;
    Ok(vec![
        Row::new("1a overhead, sequential", &cmdr_seq, &direct, Goal::Info),
        Row::new("1b overhead, sequential", &cmdr_seq, &spawn_seq, Goal::Info),
        Row::new(
            "1c overhead, 1,000 in flight",
            &cmdr_conc,
            &spawn_conc,
            Goal::AtMostMicros(5.0),
        ),
    ])
}

/// A registry whose `BASH_EXEC` executor is the no-op body (default `ActorConfig`).
/// Must be called inside the runtime: the registry spawns its actor.
pub fn noop_registry() -> Registry {
    let registry = Registry::new();
    let executor = FnExecutor(|_: Command, _: ExecContext| noop());
    registry.register_with(CommandType::BashExec, executor, ActorConfig::default());
    registry
}

fn commands(n: usize) -> Unit {
    Unit::Commands(n as f64)
}

/// Runs `sample` as a task on the runtime's workers, as a transport task would submit
/// commands (not on the `block_on` thread, which would add a cross-thread wake-up to
/// every round trip on both sides).
pub fn on_worker(rt: &Runtime, sample: impl Future<Output = Sample> + Send + 'static) -> Sample {
    rt.block_on(rt.spawn(sample))?
}

/// Executes `command` on `registry` and drains its stream to the one terminal result.
pub async fn execute_noop(registry: &Registry, command: Command) -> Result<(), Failure> {
    let stream = registry.execute(command).await.map_err(refused)?;
    drain(stream).await.map(drop)
}

async fn sequential_cmdr(registry: Registry, n: usize) -> Sample {
    let started = Instant::now();
    for _ in 0..n {
        execute_noop(&registry, template()).await?;
    }
    Ok(started.elapsed())
}

async fn direct(n: usize) -> Sample {
    let started = Instant::now();
    for _ in 0..n {
        drop(black_box(template()));
        check_outcome(black_box(noop()).await)?;
    }
    Ok(started.elapsed())
}

async fn spawn_round_trips(n: usize) -> Sample {
    let started = Instant::now();
    for _ in 0..n {
        spawn_round_trip(template()).await?;
    }
    Ok(started.elapsed())
}

/// The bare minimum an actor does: hand the command to a task, get the outcome back.
pub async fn spawn_round_trip(command: Command) -> Result<(), Failure> {
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        drop(black_box(command));
        let _ = tx.send(noop().await);
    });
    check_outcome(rx.await?)
}

fn check_outcome(outcome: Result<Outcome, ExecError>) -> Result<(), Failure> {
    let outcome = outcome?;
    ensure(outcome.status == ExecutionStatus::Succeeded, || {
        format!("no-op outcome was {:?}", outcome.status)
    })
}

async fn in_flight_cmdr(registry: Registry, waves: usize) -> Sample {
    let started = Instant::now();
    for _ in 0..waves {
        let mut set = JoinSet::new();
        for _ in 0..IN_FLIGHT {
            let registry = registry.clone();
            set.spawn(async move { execute_noop(&registry, template()).await });
        }
        join_all(set).await?;
    }
    Ok(started.elapsed())
}

async fn in_flight_reference(waves: usize) -> Sample {
    let started = Instant::now();
    for _ in 0..waves {
        let mut set = JoinSet::new();
        for _ in 0..IN_FLIGHT {
            set.spawn(spawn_round_trip(template()));
        }
        join_all(set).await?;
    }
    Ok(started.elapsed())
}

/// Waits for every task; fails on the first failure (after all have finished).
pub async fn join_all(mut set: JoinSet<Result<(), Failure>>) -> Result<(), Failure> {
    let mut first_failure = None;
    let mut finished = 0usize;
    while let Some(joined) = set.join_next().await {
        let result = joined.map_err(Failure::from).and_then(|r| r);
        if let Err(e) = result {
            first_failure.get_or_insert(e);
        }
        finished += 1;
    }
    match first_failure {
        Some(e) => Err(e),
        None => ensure(finished > 0, || "no task ran".to_owned()),
    }
}
