//! The soak: mixed traffic against one real `cmdr serve` for `CMDR_SOAK_SECS` seconds
//! (default 120) at a bounded rate — REST commands of every type (SSE and combined,
//! questions answered over HTTP), commands cancelled or abandoned mid-stream, agent runs
//! through the fake model with `<shell>` commands (streamed, to completion, stateless,
//! abandoned), MCP tool calls over sessions that come and go. Every
//! `CMDR_SOAK_SAMPLE_SECS` (default: duration / 120, at least 1 s) the server's `VmRSS`
//! and open descriptors go to `target/soak/soak-<unix time>.csv`.
//!
//! At the end: every request got its one terminal result (or, stopped on purpose, was
//! seen stopped), no errors; the last tenth's mean RSS is at most [`RSS_MARGIN_PERCENT`]
//! % + [`RSS_MARGIN_KIB`] above the warm-up tenth's; the last tenth's descriptors at most
//! [`FD_SLACK`] above the warm-up tenth's; and once the traffic stops the descriptors
//! fall back to the warm-up level (± [`FD_SLACK`]).

mod agents;
mod commands;
mod mcp;
mod samples;
mod tally;

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::fake_llm::FakeLlm;
use crate::proc_stats::{fd_count, mib};
use crate::rpc::Rpc;
use crate::serve::{Options, Serve};
use samples::{sample_until, Trend};
use tally::Tally;

/// Allowed growth of the mean RSS from the warm-up tenth to the last tenth: this
/// percentage of the warm-up level …
const RSS_MARGIN_PERCENT: u64 = 10;
/// … plus this many KiB (allocator slack).
const RSS_MARGIN_KIB: u64 = 8 * 1024;
/// Descriptors that may come and go with the traffic's timing (connections, pipes).
const FD_SLACK: usize = 16;
/// Parallel lanes of plain REST commands.
const COMMAND_LANES: usize = 3;

/// What every traffic lane shares.
pub struct Ctx {
    /// `http://127.0.0.1:PORT` of the REST API.
    pub api: String,
    /// The MCP endpoint.
    pub mcp: String,
    /// One client (a connection pool) for all REST traffic.
    pub http: reqwest::Client,
    /// The fake model.
    pub llm: Arc<FakeLlm>,
    /// The counts.
    pub tally: Arc<Tally>,
    /// Where the commands' fixture files go.
    pub dir: PathBuf,
    /// The conversation agent runs continue, and how many runs it had.
    pub conversation: Mutex<(Option<String>, u32)>,
    /// The current MCP session and how many calls it had.
    pub mcp_session: tokio::sync::Mutex<Option<(Rpc, u32)>>,
}

fn env_secs(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// `target/soak/`.
fn soak_dir() -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let dir = tmp.parent().unwrap_or(&tmp).join("soak");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `op(n)` for n = 0, 1, … once per `every` until `until`, each in its own task (a
/// panic becomes an error in the tally) with a deadline.
async fn drive<F, Fut>(
    name: &'static str,
    every: Duration,
    until: Instant,
    tally: Arc<Tally>,
    mut op: F,
) where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n = 0;
    while Instant::now() < until {
        ticker.tick().await;
        let task = tokio::spawn(tokio::time::timeout(Duration::from_secs(60), op(n)));
        match task.await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tally.error(format!("{name} #{n}: {e}")),
            Ok(Err(_)) => tally.error(format!("{name} #{n}: no end within 60 s")),
            Err(e) => tally.error(format!("{name} #{n}: {}", panic_text(e))),
        }
        n += 1;
    }
}

fn panic_text(error: tokio::task::JoinError) -> String {
    match error.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "panicked".to_owned()),
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak (CMDR_SOAK_SECS, default 120 s): run by benches/load-soak.sh"]
async fn mixed_traffic_for_a_long_time_keeps_memory_and_descriptors_flat() {
    let secs = env_secs("CMDR_SOAK_SECS").unwrap_or(120);
    let every =
        Duration::from_secs(env_secs("CMDR_SOAK_SAMPLE_SECS").unwrap_or((secs / 120).max(1)));
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let out = soak_dir();
    let csv = out.join(format!("soak-{stamp}.csv"));
    let llm = Arc::new(FakeLlm::start(Vec::new()).await);
    let serve = Serve::start(Options {
        llm: Some(&llm),
        log: Some(out.join(format!("serve-{stamp}.log"))),
        ..Options::default()
    })
    .await;
    let fixtures = tempfile::tempdir().unwrap();
    let tally = Arc::new(Tally::default());
    let ctx = Arc::new(Ctx {
        api: serve.api.clone(),
        mcp: serve.mcp.clone(),
        http: reqwest::Client::new(),
        llm: llm.clone(),
        tally: tally.clone(),
        dir: fixtures.path().to_owned(),
        conversation: Mutex::new((None, 0)),
        mcp_session: tokio::sync::Mutex::new(None),
    });
    eprintln!(
        "soak: {secs} s against pid {} ({}), samples every {every:?} to {}",
        serve.pid,
        serve.api,
        csv.display()
    );

    let started = Instant::now();
    let until = started + Duration::from_secs(secs);
    let mut lanes = tokio::task::JoinSet::new();
    for lane in 0..COMMAND_LANES {
        let ctx = ctx.clone();
        lanes.spawn(drive(
            "rest command",
            Duration::from_millis(100),
            until,
            tally.clone(),
            move |n| commands::command(ctx.clone(), lane, n),
        ));
    }
    let c = ctx.clone();
    lanes.spawn(drive(
        "rest stop",
        Duration::from_millis(250),
        until,
        tally.clone(),
        move |n| commands::stopped(c.clone(), n),
    ));
    let c = ctx.clone();
    lanes.spawn(drive(
        "agent",
        Duration::from_millis(200),
        until,
        tally.clone(),
        move |n| agents::run(c.clone(), n),
    ));
    let c = ctx.clone();
    lanes.spawn(drive(
        "mcp",
        Duration::from_millis(100),
        until,
        tally.clone(),
        move |n| mcp::call(c.clone(), n),
    ));
    let samples = sample_until(serve.pid, every, started, until, tally.clone(), &csv).await;
    while let Some(lane) = lanes.join_next().await {
        lane.unwrap();
    }
    let elapsed = started.elapsed();
    drop(ctx.mcp_session.lock().await.take());
    drop(ctx);

    let trend = Trend::of(&samples);
    let settled = settle_fds(serve.pid, trend.warm_fds + FD_SLACK).await;
    let counts = tally.counts();
    eprintln!(
        "soak summary: {:.0} s, {} samples in {}",
        elapsed.as_secs_f64(),
        samples.len(),
        csv.display()
    );
    for (kind, c) in &counts {
        eprintln!("  {kind:<28} sent {:>7}  ended {:>7}", c.sent, c.ended);
    }
    eprintln!(
        "  rss: warm-up tenth {:.1} MiB, last tenth {:.1} MiB, peak {:.1} MiB; fds: warm-up {}, last tenth {}, after traffic {settled}",
        mib(trend.warm_rss_kib),
        mib(trend.last_rss_kib),
        mib(trend.peak_rss_kib),
        trend.warm_fds,
        trend.last_fds
    );
    let total: u64 = counts.values().map(|c| c.ended).sum();
    eprintln!(
        "  {total} requests ended properly ({:.1}/s), {} errors",
        total as f64 / elapsed.as_secs_f64(),
        tally.error_count()
    );

    assert!(
        samples.len() >= 10,
        "too few samples ({}) to compare tenths",
        samples.len()
    );
    assert_eq!(tally.error_count(), 0, "errors: {:#?}", tally.errors());
    for (kind, c) in &counts {
        assert_eq!(c.sent, c.ended, "{kind}: every request ends once");
    }
    let rss_bound =
        trend.warm_rss_kib + trend.warm_rss_kib * RSS_MARGIN_PERCENT / 100 + RSS_MARGIN_KIB;
    assert!(trend.last_rss_kib <= rss_bound, "RSS grew: {trend:?}");
    assert!(
        trend.last_fds <= trend.warm_fds + FD_SLACK,
        "descriptors grew: {trend:?}"
    );
    assert!(
        settled <= trend.warm_fds + FD_SLACK,
        "{settled} descriptors left after the traffic: {trend:?}"
    );
    assert_eq!(serve.stop().await, 0, "the server stops cleanly");
}

/// Polls the server's descriptors until at most `level` (or 30 s pass); returns the last
/// count.
async fn settle_fds(pid: i32, level: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let fds = fd_count(pid).unwrap();
        if fds <= level || Instant::now() > deadline {
            return fds;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
