//! `cmdr serve` benchmarks, side by side with references in the same run. See
//! `benches/README.md`.
//!
//! ```text
//! cargo bench --bench serve                     # all groups (~1 min; needs `wrk`)
//! cargo bench --bench serve -- rest             # only groups whose name matches
//! CMDR_BENCH_QUICK=1 cargo bench --bench serve  # smoke run
//! ```
//!
//! - `rest`: `GET /agents` and `GET /agents/:agent/commands` requests per second, driven by
//!   `wrk` on loopback, against the same bytes served by a bare axum route (the HTTP stack
//!   alone).
//! - `first-event`: from `POST /agents/:agent/stream` to the first SSE event and to the
//!   first model text, with the fake LLM, against the fake LLM's own time to its first
//!   token when asked directly.
//! - `sse`: text events per second one stream sustains through cmdr, against reading the
//!   fake LLM's SSE directly.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

/// The allocator of the `cmdr` binary (src/main.rs), so in-process figures are its
/// (its smaller first arena, which only shapes a process's first allocations, is not copied).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use cmdr_test_support::fake_llm;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::serve::ListenerExt;
use axum::Router;
use cmdr::agent::AgentLoop;
use cmdr::agents::AgentCatalog;
use cmdr::llm::{LlmClient, LlmConfig, OpenAiClient};
use cmdr::server::{local_registry, AppState};
use cmdr::service::AgentService;
use cmdr::store::{SqliteStore, Store};
use cmdr_executors::PendingInputs;
use fake_llm::{FakeLlm, Reply};
use futures_util::StreamExt;

struct Config {
    quick: bool,
    /// Seconds per wrk run, runs per side.
    wrk: (u64, usize),
    /// Requests timed for the first-event group.
    first_event: usize,
    /// Text events in the SSE stream.
    sse_events: usize,
}

impl Config {
    fn from_env() -> Self {
        let quick = std::env::var_os("CMDR_BENCH_QUICK").is_some_and(|v| v != "0" && !v.is_empty());
        if quick {
            Self {
                quick,
                wrk: (1, 1),
                first_event: 20,
                sse_events: 5_000,
            }
        } else {
            Self {
                quick,
                wrk: (5, 3),
                first_event: 300,
                sse_events: 100_000,
            }
        }
    }
}

/// Serves `app` on a free loopback port; returns its address.
async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // As `cmdr serve` does: no Nagle delay on small SSE events.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Agents with commands, a database, and the model at `llm`.
fn state(dir: &Path, llm: &FakeLlm) -> AppState {
    for agent in ["coding_agent", "planning_agent", "review_agent"] {
        let commands = dir.join("agents").join(agent).join("commands");
        std::fs::create_dir_all(&commands).unwrap();
        std::fs::write(
            dir.join("agents").join(agent).join("config.toml"),
            format!("description = \"The {agent}\"\n"),
        )
        .unwrap();
        for i in 0..5 {
            let json = serde_json::json!({"Description": format!("Command {i}"),
                "items": [{"type":"message","role":"user","content":["Do it."]}]});
            std::fs::write(commands.join(format!("cmd_{i}.json")), json.to_string()).unwrap();
        }
    }
    let client: Arc<dyn LlmClient> =
        Arc::new(OpenAiClient::new(LlmConfig::new(llm.base_url(), "fake-model")).unwrap());
    let inputs = PendingInputs::new();
    let registry = local_registry(&inputs);
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("db.sqlite3")).unwrap());
    let service = AgentService::new(
        AgentCatalog::new(dir.join("agents")),
        store,
        AgentLoop::new(Some(client), registry.clone()),
        dir.to_owned(),
    );
    AppState::new(service, registry, inputs, None, None).unwrap()
}

/// `wrk` requests per second against `url`.
fn wrk(url: &str, secs: u64) -> f64 {
    let output = Command::new("wrk")
        .args(["-t", "1", "-c", "16", "-d", &format!("{secs}s"), url])
        .output()
        .expect("wrk is installed (Debian: apt-get install wrk)");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(!text.contains("Non-2xx"), "errors from {url}:\n{text}");
    text.lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Requests/sec from wrk:\n{text}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// `rest`: cmdr's listing routes against the same bytes from a bare route.
async fn rest(config: &Config, cmdr: SocketAddr) {
    let http = reqwest::Client::new();
    println!(
        "\n### `cmdr serve` REST — wrk -t1 -c16, {} s per run, median of {} runs\n",
        config.wrk.0, config.wrk.1
    );
    println!("| route | cmdr | bare axum, same bytes | ratio |");
    println!("|---|---|---|---|");
    for path in ["/agents", "/agents/coding_agent/commands"] {
        let url = format!("http://{cmdr}{path}");
        let body = http.get(&url).send().await.unwrap().bytes().await.unwrap();
        assert!(
            body.starts_with(b"{\""),
            "{}",
            String::from_utf8_lossy(&body)
        );
        let bare = serve(Router::new().route(
            "/",
            get(move || {
                let body = body.clone();
                async move { ([("content-type", "application/json")], body) }
            }),
        ))
        .await;
        let bare_url = format!("http://{bare}/");
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for round in 0..config.wrk.1 {
            let secs = config.wrk.0;
            let (u1, u2) = (url.clone(), bare_url.clone());
            if round % 2 == 0 {
                ours.push(
                    tokio::task::spawn_blocking(move || wrk(&u1, secs))
                        .await
                        .unwrap(),
                );
                theirs.push(
                    tokio::task::spawn_blocking(move || wrk(&u2, secs))
                        .await
                        .unwrap(),
                );
            } else {
                theirs.push(
                    tokio::task::spawn_blocking(move || wrk(&u2, secs))
                        .await
                        .unwrap(),
                );
                ours.push(
                    tokio::task::spawn_blocking(move || wrk(&u1, secs))
                        .await
                        .unwrap(),
                );
            }
        }
        let (a, b) = (median(ours), median(theirs));
        println!(
            "| `GET {path}` | {a:.0} req/s | {b:.0} req/s | {:.2} |",
            a / b
        );
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Reads an SSE body until `stop` says so; returns when each wanted event arrived.
async fn first_events(response: reqwest::Response, started: Instant) -> (Duration, Duration) {
    let mut body = response.bytes_stream();
    let (mut first, mut text) = (None, None);
    let mut seen = Vec::new();
    while let Some(chunk) = body.next().await {
        seen.extend_from_slice(&chunk.unwrap());
        if first.is_none() && contains(&seen, b"data: ") {
            first = Some(started.elapsed());
        }
        if text.is_none() && contains(&seen, b"\"type\":\"text\"") {
            text = Some(started.elapsed());
        }
    }
    let seen = String::from_utf8_lossy(&seen);
    (
        first.unwrap_or_else(|| panic!("no event in {seen}")),
        text.unwrap_or_else(|| panic!("no text event in {seen}")),
    )
}

/// `first-event`: time to the first SSE event and the first model text through cmdr,
/// against the model's own time to its first token.
async fn first_event(config: &Config, cmdr: SocketAddr, llm: &FakeLlm) {
    let http = reqwest::Client::new();
    let (mut to_event, mut to_text, mut direct) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..config.first_event + 10 {
        let started = Instant::now();
        let response = http
            .post(format!("http://{cmdr}/agents/coding_agent/stream"))
            .json(&serde_json::json!({"message": "hi"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let (event, text) = first_events(response, started).await;
        let started = Instant::now();
        let response = http
            .post(format!("{}/chat/completions", llm.base_url()))
            .json(&serde_json::json!({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}))
            .send()
            .await
            .unwrap();
        let mut body = response.bytes_stream();
        let mut seen = Vec::new();
        let mut token = None;
        while let Some(chunk) = body.next().await {
            seen.extend_from_slice(&chunk.unwrap());
            if token.is_none() && contains(&seen, b"\"content\":") {
                token = Some(started.elapsed());
            }
        }
        if round >= 10 {
            to_event.push(event);
            to_text.push(text);
            direct.push(token.expect("a token"));
        }
    }
    for v in [&mut to_event, &mut to_text, &mut direct] {
        v.sort();
    }
    let cell = |v: &[Duration]| format!("{:.2?} / {:.2?}", percentile(v, 0.5), percentile(v, 0.99));
    println!(
        "\n### `POST /agents/:agent/stream` to the first event — {} requests, median / p99\n",
        config.first_event
    );
    println!("| cmdr: first event (`conversation`) | cmdr: first model text | fake LLM asked directly: first token |");
    println!("|---|---|---|");
    println!(
        "| {} | {} | {} |",
        cell(&to_event),
        cell(&to_text),
        cell(&direct)
    );
}

/// Counts `"type":"text"` events (or raw chunks) in a streamed body.
async fn count(response: reqwest::Response, needle: &[u8]) -> usize {
    let mut body = response.bytes_stream();
    let mut n = 0;
    let mut carry: Vec<u8> = Vec::new();
    while let Some(chunk) = body.next().await {
        carry.extend_from_slice(&chunk.unwrap());
        let keep = carry.len().saturating_sub(needle.len() - 1);
        n += carry.windows(needle.len()).filter(|w| *w == needle).count();
        carry.drain(..keep);
    }
    n
}

/// `sse`: one long reply streamed through cmdr vs read from the fake LLM directly.
async fn sse(config: &Config, cmdr: SocketAddr, llm: &FakeLlm) {
    let http = reqwest::Client::new();
    let n = config.sse_events;
    let chunks: Vec<String> = (0..n).map(|i| format!("w{} ", i % 10)).collect();
    llm.push([Reply::Text(chunks.clone())]);
    let started = Instant::now();
    let response = http
        .post(format!("http://{cmdr}/agents/coding_agent/stream"))
        .json(&serde_json::json!({"message": "long"}))
        .send()
        .await
        .unwrap();
    let through = count(response, b"\"type\":\"text\"").await;
    let cmdr_time = started.elapsed();
    assert_eq!(through, n, "every delta arrives as one text event");
    llm.push([Reply::Text(chunks)]);
    let started = Instant::now();
    let response = http
        .post(format!("{}/chat/completions", llm.base_url()))
        .json(&serde_json::json!({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}))
        .send()
        .await
        .unwrap();
    let direct = count(response, b"\"content\":\"w").await;
    let direct_time = started.elapsed();
    assert_eq!(direct, n);
    let rate = |t: Duration| n as f64 / t.as_secs_f64();
    println!("\n### One SSE stream, {n} text events\n");
    println!("| through cmdr (model → loop → SSE) | fake LLM read directly | ratio |");
    println!("|---|---|---|");
    println!(
        "| {:.0} events/s | {:.0} events/s | {:.2} |",
        rate(cmdr_time),
        rate(direct_time),
        rate(cmdr_time) / rate(direct_time)
    );
}

fn main() -> ExitCode {
    let config = Config::from_env();
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted =
        |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()));
    OpenAiClient::install_crypto_provider();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let llm = FakeLlm::start(vec![]).await;
        let cmdr = serve(cmdr::http::router(state(dir.path(), &llm))).await;
        if config.quick {
            eprintln!("quick mode: small sizes");
        }
        if wanted("rest") {
            rest(&config, cmdr).await;
        }
        if wanted("first-event") {
            first_event(&config, cmdr, &llm).await;
        }
        if wanted("sse") {
            sse(&config, cmdr, &llm).await;
        }
    });
    ExitCode::SUCCESS
}
