//! Samples of the server process (resident memory, open descriptors) taken every few
//! seconds during the soak, written to a CSV as they come, and the comparison of the
//! warm-up tenth with the last tenth.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::tally::Tally;
use crate::proc_stats::{fd_count, mib, rss_kib};

/// One sample.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Seconds since the traffic started.
    pub elapsed_s: f64,
    /// The server's `VmRSS`, KiB.
    pub rss_kib: u64,
    /// The server's open descriptors.
    pub fds: usize,
    /// Requests ended so far.
    pub ended: u64,
    /// Errors so far.
    pub errors: usize,
}

/// Samples `pid` every `every` from `started` until `until`, appending to `csv` (and a
/// progress line to stderr) as it goes.
pub async fn sample_until(
    pid: i32,
    every: Duration,
    started: Instant,
    until: Instant,
    tally: Arc<Tally>,
    csv: &Path,
) -> Vec<Sample> {
    let mut file = std::fs::File::create(csv).unwrap();
    writeln!(file, "elapsed_s,rss_kib,fds,requests_ended,errors").unwrap();
    let mut samples = Vec::new();
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    while Instant::now() < until {
        ticker.tick().await;
        let sample = Sample {
            elapsed_s: started.elapsed().as_secs_f64(),
            rss_kib: rss_kib(pid).expect("the server is running"),
            fds: fd_count(pid).expect("the server is running"),
            ended: tally.total_ended(),
            errors: tally.error_count(),
        };
        writeln!(
            file,
            "{:.1},{},{},{},{}",
            sample.elapsed_s, sample.rss_kib, sample.fds, sample.ended, sample.errors
        )
        .unwrap();
        file.flush().unwrap();
        eprintln!(
            "soak {:>7.1} s: rss {:.1} MiB, {} fds, {} requests ended, {} errors",
            sample.elapsed_s,
            mib(sample.rss_kib),
            sample.fds,
            sample.ended,
            sample.errors
        );
        samples.push(sample);
    }
    samples
}

/// The warm-up tenth against the last tenth.
#[derive(Debug, Clone, Copy)]
pub struct Trend {
    /// Mean RSS of the first tenth of the samples, KiB.
    pub warm_rss_kib: u64,
    /// Mean RSS of the last tenth, KiB.
    pub last_rss_kib: u64,
    /// Highest RSS over the whole run, KiB.
    pub peak_rss_kib: u64,
    /// Highest descriptor count of the first tenth.
    pub warm_fds: usize,
    /// Highest descriptor count of the last tenth.
    pub last_fds: usize,
}

impl Trend {
    /// Compares the first and the last tenth of `samples` (at least one sample each).
    pub fn of(samples: &[Sample]) -> Trend {
        let tenth = (samples.len() / 10).max(1);
        let (warm, last) = (&samples[..tenth], &samples[samples.len() - tenth..]);
        let mean = |s: &[Sample]| s.iter().map(|x| x.rss_kib).sum::<u64>() / s.len() as u64;
        let max_fds = |s: &[Sample]| s.iter().map(|x| x.fds).max().unwrap_or(0);
        Trend {
            warm_rss_kib: mean(warm),
            last_rss_kib: mean(last),
            peak_rss_kib: samples.iter().map(|x| x.rss_kib).max().unwrap_or(0),
            warm_fds: max_fds(warm),
            last_fds: max_fds(last),
        }
    }
}
