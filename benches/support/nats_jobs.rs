//! The work the NATS benchmarks time, each checking its own result: a command through
//! the bus (`Producer::submit` + drain), through a local registry, and a bare NATS
//! request/reply; and running a job many times with a fixed number in flight.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use async_nats::Client;
use bytes::Bytes;
use cmdr_executors::{ExecutionStatus, OutputResult, Registry};
use tokio::task::JoinSet;

use crate::harness::{drain, ensure, refused, Failure, Sample};
use crate::latency::{job, Job};
use crate::nats_bus::{bash_true, drain_remote, strict, Bus, ECHO, PATIENCE};

/// What the bare request carries: a command as the producer encodes it.
pub fn request_payload() -> Result<Bytes, Failure> {
    Ok(serde_json::to_vec(&bash_true())?.into())
}

/// What the responder answers: a terminal result as a worker publishes it.
pub fn reply_payload() -> Result<Bytes, Failure> {
    let result = OutputResult {
        command_id: "0b3f6c1e-5d6a-4a57-9f0b-3c1d2e4f5a6b".to_owned(),
        command_type: "BASH_EXEC".to_owned(),
        status: ExecutionStatus::Succeeded,
        exit_code: Some(0),
        duration_ms: Some(1),
        ..Default::default()
    };
    Ok(serde_json::to_vec(&result)?.into())
}

/// A check on a `SUCCEEDED` terminal result.
pub type Check = fn(&OutputResult) -> Result<(), Failure>;

/// Nothing beyond `SUCCEEDED` (the no-op executor).
pub fn no_check(_: &OutputResult) -> Result<(), Failure> {
    Ok(())
}

/// `true` exited 0 and printed nothing.
pub fn exited_cleanly(result: &OutputResult) -> Result<(), Failure> {
    ensure(
        result.exit_code == Some(0) && result.result_data.is_empty(),
        || {
            format!(
                "`true`: exit {:?}, output {:?}",
                result.exit_code, result.result_data
            )
        },
    )
}

/// `BASH_EXEC true` through the bus's producer and workers, drained.
pub fn remote(bus: &Bus, check: Check) -> Job {
    let (producer, succeeded) = (bus.producer.clone(), bus.succeeded.clone());
    job(move || {
        let (producer, succeeded) = (producer.clone(), succeeded.clone());
        async move {
            let stream = producer.submit(bash_true()).await?;
            check(&drain_remote(stream).await?)?;
            succeeded.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    })
}

/// `BASH_EXEC true` through a local registry, drained.
pub fn local(registry: Registry, check: Check) -> Job {
    job(move || {
        let registry = registry.clone();
        async move {
            let stream = registry.execute(bash_true()).await.map_err(refused)?;
            let result = tokio::time::timeout(PATIENCE, drain(stream)).await?;
            check(&result.map_err(strict)?)
        }
    })
}

/// A bare request to the bus's responder, on its own connection; checks the reply.
pub fn bare(client: Client) -> Result<Job, Failure> {
    let (payload, expected) = (request_payload()?, reply_payload()?);
    Ok(job(move || {
        let (client, payload, expected) = (client.clone(), payload.clone(), expected.clone());
        async move {
            let reply = client.request(ECHO, payload).await?;
            ensure(reply.payload == expected, || "a wrong reply".into())
        }
    }))
}

/// `job` run `total` times by `tasks` tasks, each starting its next run as soon as its
/// last one ends (so `tasks` are always in flight); the wall time.
pub async fn in_flight(job: Job, total: usize, tasks: usize) -> Sample {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut set = JoinSet::new();
    for _ in 0..tasks {
        let (job, next) = (job.clone(), next.clone());
        set.spawn(async move {
            let mut done = 0usize;
            while next.fetch_add(1, Ordering::Relaxed) < total {
                job().await?;
                done += 1;
            }
            Ok::<_, Failure>(done)
        });
    }
    let (mut done, mut failure) = (0, None);
    while let Some(joined) = set.join_next().await {
        match joined.map_err(Failure::from).and_then(|r| r) {
            Ok(n) => done += n,
            Err(e) => {
                failure.get_or_insert(e);
            }
        }
    }
    let elapsed = started.elapsed();
    failure.map_or(Ok(()), Err)?;
    ensure(done == total, || format!("{done} of {total} commands ran"))?;
    Ok(elapsed)
}
