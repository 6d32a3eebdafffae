//! Latency of single operations: one at a time, sides interleaved operation by operation
//! in alternating order (A B C, C B A, …), every operation timed; median and p99 per side.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::{check_failed, secs, Failure};

/// One unit of work (a command, a request): checks its own result and returns the time
/// of its measured part.
pub type Job =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<Duration, Failure>> + Send>> + Send + Sync>;

/// Wraps an async closure as a [`Job`] timed as a whole.
pub fn job<F, Fut>(f: F) -> Job
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Failure>> + Send + 'static,
{
    Arc::new(move || {
        let run = f();
        Box::pin(async move {
            let started = Instant::now();
            run.await?;
            Ok(started.elapsed())
        })
    })
}

/// Wraps an async closure that times its own measured part as a [`Job`].
pub fn timed_job<F, Fut>(f: F) -> Job
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Duration, Failure>> + Send + 'static,
{
    Arc::new(move || Box::pin(f()))
}

/// Median and p99 of one side, in seconds.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    /// 50th percentile.
    pub median: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Operations timed.
    pub n: usize,
}

/// A side's latencies, or why it has none.
pub type Latency = Result<Stats, Failure>;

/// Runs `warmup` then `rounds` rounds; each round runs every job once, timed, in
/// alternating order. A job that fails stops being run; the others go on.
pub async fn interleave(
    warmup: usize,
    rounds: usize,
    jobs: Vec<(&'static str, Job)>,
) -> Vec<Latency> {
    let mut taken: Vec<Result<Vec<Duration>, Failure>> = jobs
        .iter()
        .map(|_| Ok(Vec::with_capacity(rounds)))
        .collect();
    for round in 0..warmup + rounds {
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (Some((label, job)), Some(Ok(times))) = (jobs.get(i), taken.get_mut(i)) else {
                continue;
            };
            match job().await {
                Ok(took) if round >= warmup => times.push(took),
                Ok(_) => {}
                Err(e) => {
                    eprintln!("    {label}: {e}");
                    if let Some(slot) = taken.get_mut(i) {
                        *slot = Err(e);
                    }
                }
            }
        }
    }
    jobs.iter()
        .zip(taken)
        .map(|((label, _), times)| times.and_then(|t| summarise(label, t)))
        .collect()
}

/// The `p`-quantile (nearest rank) of sorted `times`, in seconds.
fn quantile(sorted: &[Duration], p: f64) -> f64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).map_or(f64::NAN, Duration::as_secs_f64)
}

fn summarise(label: &str, mut times: Vec<Duration>) -> Latency {
    if times.is_empty() {
        return Err(check_failed("no samples taken"));
    }
    times.sort_unstable();
    let stats = Stats {
        median: quantile(&times, 0.5),
        p99: quantile(&times, 0.99),
        n: times.len(),
    };
    eprintln!(
        "    {label}: median {}, p90 {}, p99 {}, max {} (n={})",
        secs(stats.median),
        secs(quantile(&times, 0.9)),
        secs(stats.p99),
        secs(quantile(&times, 1.0)),
        times.len()
    );
    Ok(stats)
}
