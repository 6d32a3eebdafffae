//! Per-command latency: one command at a time, sides interleaved command by command in
//! alternating order (A B C, C B A, …), every command timed; median and p99 per side,
//! and the Markdown table of remote vs local vs bare request/reply.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::{check_failed, secs, Failure};

/// One unit of work (a command, a request): checks its own result.
pub type Job =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<(), Failure>> + Send>> + Send + Sync>;

/// Wraps an async closure as a [`Job`].
pub fn job<F, Fut>(f: F) -> Job
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Failure>> + Send + 'static,
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
            let started = Instant::now();
            match job().await {
                Ok(()) if round >= warmup => times.push(started.elapsed()),
                Ok(()) => {}
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

/// Largest allowed overhead / bare request/reply (medians).
pub const GOAL: f64 = 2.0;

/// One latency row: remote and local runs of the same command, and the bare
/// request/reply measured alongside them.
pub struct LatencyRow {
    /// What ran.
    pub name: String,
    /// Through `Producer::submit` and a worker.
    pub remote: Latency,
    /// Through a local registry.
    pub local: Latency,
    /// `client.request` to a responder that answers at once.
    pub bare: Latency,
}

impl LatencyRow {
    /// Whether a side has no figure (a check failed).
    pub fn failed(&self) -> bool {
        self.remote.is_err() || self.local.is_err() || self.bare.is_err()
    }

    fn cells(&self) -> [String; 8] {
        let pair = |s: &Latency| match s {
            Ok(s) => format!("{} / {}", secs(s.median), secs(s.p99)),
            Err(e) => e.to_string().replace('|', "\\|"),
        };
        let (overhead, ratio, met) = match (&self.remote, &self.local, &self.bare) {
            (Ok(r), Ok(l), Ok(b)) => {
                let (median, p99) = (r.median - l.median, r.p99 - l.p99);
                let ratio = median / b.median;
                (
                    format!("{} / {}", signed(median), signed(p99)),
                    format!("{ratio:.2} / {:.2}", p99 / b.p99),
                    if ratio <= GOAL { "yes" } else { "**no**" },
                )
            }
            _ => ("—".to_owned(), "—".to_owned(), "n/a"),
        };
        [
            self.name.clone(),
            pair(&self.remote),
            pair(&self.local),
            overhead,
            pair(&self.bare),
            ratio,
            format!("≤ {GOAL:.0} (medians)"),
            met.to_owned(),
        ]
    }
}

fn signed(x: f64) -> String {
    if x < 0.0 {
        format!("−{}", secs(-x))
    } else {
        secs(x)
    }
}

/// The latency table (cells are median / p99).
pub fn render(rows: &[LatencyRow]) -> String {
    let mut out = String::from(
        "| latency, median / p99 | remote | local | overhead = remote − local | \
         bare request/reply | overhead / bare | goal | met? |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        out.push_str(&format!("| {} |\n", row.cells().join(" | ")));
    }
    out
}
