//! A command that prints without end (`yes`) to a slow HTTP client, through a real
//! `cmdr serve`: the server's resident memory stays bounded while well over 200 MiB go
//! through, a stalled reader stops `yes` itself (its pipe fills), and once the client
//! goes away the command is stopped and `yes` is gone.
//!
//! (`tests/backpressure.rs` covers the in-process registry; this is the HTTP path:
//! SSE body, hyper, the socket.)

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::http_support::{eventually, gone};
use crate::proc_stats::{mib, rss_kib, written_bytes};
use crate::serve::{Options, Serve};

/// Bytes `yes` must have written through cmdr before the test ends.
const PRODUCED: u64 = 200 << 20;
/// How much the server's resident memory may grow above its idle level (KiB). The
/// designed bound is ~2 MiB per command (32 queued 64 KiB chunks) plus SSE encoding
/// and socket buffers; unbounded buffering would grow by hundreds of MiB.
const RSS_GROWTH_BOUND_KIB: u64 = 48 * 1024;
/// Bytes that may sit between `yes` and a stalled reader (pipe, channel, SSE body,
/// both sockets' buffers).
const IN_FLIGHT_BOUND: u64 = 32 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_printer_to_a_slow_client_keeps_the_server_bounded() {
    let serve = Serve::start(Options::default()).await;
    let idle_kib = rss_kib(serve.pid).unwrap();
    let command = json!({
        "commandType": "BASH_EXEC",
        "command": "echo $$; exec yes 'a line of output that repeats forever'",
        "timeout_ms": 600_000
    });
    let mut response = serve
        .http
        .post(serve.url("/commands"))
        .json(&command)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = Vec::new();
    while !body.windows(2).any(|w| w == b"\n\n") {
        body.extend_from_slice(&response.chunk().await.unwrap().unwrap());
    }
    let end = body.windows(2).position(|w| w == b"\n\n").unwrap();
    let first: serde_json::Value = serde_json::from_slice(&body[b"data: ".len()..end]).unwrap();
    let data = first["resultData"].as_str().unwrap();
    let yes: i32 = data.lines().next().unwrap().parse().unwrap();
    let first_data = data.len() as u64;

    let peak_kib = Arc::new(AtomicU64::new(idle_kib));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = tokio::spawn(sample_peak_rss(
        serve.pid,
        peak_kib.clone(),
        sampling.clone(),
    ));

    // A stalled reader: `yes` blocks once everything between it and the client is full.
    let stalled = wait_until_blocked(yes).await;
    let in_flight = stalled.saturating_sub(first_data);
    assert!(
        in_flight < IN_FLIGHT_BOUND,
        "{in_flight} bytes taken in for a stalled reader"
    );

    // A slow reader: a pause after every 4 MiB, until 200 MiB went through.
    let started = Instant::now();
    let mut received = body.len() as u64;
    while written_bytes(yes).unwrap() < PRODUCED {
        let chunk = response.chunk().await.unwrap().expect("the stream goes on");
        let before = received;
        received += chunk.len() as u64;
        if received >> 22 != before >> 22 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let elapsed = started.elapsed();
    sampling.store(false, Ordering::SeqCst);
    sampler.await.unwrap();
    let peak = peak_kib.load(Ordering::SeqCst);
    let grown = peak.saturating_sub(idle_kib);
    assert!(
        grown < RSS_GROWTH_BOUND_KIB,
        "server RSS grew by {grown} KiB (idle {idle_kib} KiB, peak {peak} KiB)"
    );

    drop(response);
    eventually("`yes` is stopped once the client is gone", async || {
        gone(yes)
    })
    .await;
    eprintln!(
        "endless output: {:.0} MiB produced, {:.0} MiB of SSE read in {:.2} s; stalled reader: {:.1} MiB in flight; \
         server RSS idle {:.1} MiB, peak {:.1} MiB",
        PRODUCED as f64 / (1 << 20) as f64,
        received as f64 / (1 << 20) as f64,
        elapsed.as_secs_f64(),
        in_flight as f64 / (1 << 20) as f64,
        mib(idle_kib),
        mib(peak)
    );
}

/// Polls how much `yes` wrote until it stops growing (it blocks on its full pipe);
/// returns that amount.
async fn wait_until_blocked(yes: i32) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = written_bytes(yes).unwrap();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = written_bytes(yes).unwrap();
        if now == last {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "`yes` never blocked: {now} bytes written"
        );
        last = now;
    }
}

/// Records the server's peak resident memory every 20 ms while `sampling`.
async fn sample_peak_rss(pid: i32, peak: Arc<AtomicU64>, sampling: Arc<AtomicBool>) {
    while sampling.load(Ordering::SeqCst) {
        if let Some(kib) = rss_kib(pid) {
            peak.fetch_max(kib, Ordering::SeqCst);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
