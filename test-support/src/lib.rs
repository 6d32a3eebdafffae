//! What cmdr's test binaries share: the fake OpenAI-compatible LLM, a real `nats-server`
//! per test, an in-process HTTP server over a temp world, a `cmdr serve` process, hand-made
//! JSON-RPC for MCP, the result-stream checks, a deterministic random generator, and how
//! long a test waits.
//!
//! A dev-only workspace member (`publish = false`): the test binaries of `cmdr` and of
//! `cmdr-executors` depend on it instead of including files by `#[path]`.

// Test helpers are test code: they may unwrap, and not every binary uses every helper.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::new_without_default,
    missing_docs
)]

pub mod fake_llm;
pub mod http;
pub mod mcp_rpc;
pub mod nats_cluster;
pub mod nats_server;
pub mod results;
pub mod rng;
pub mod serve;

use std::path::PathBuf;
use std::time::Duration;

/// How long a test waits for something that should happen promptly before failing.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// How long a load test waits (thousands of commands on two cores).
pub const LOAD_PATIENCE: Duration = Duration::from_secs(120);

/// The `cmdr` binary cargo built next to the running test binary
/// (`target/<profile>/deps/<test>` → `target/<profile>/cmdr`).
pub fn cmdr_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps/<test>");
    profile.join("cmdr")
}
