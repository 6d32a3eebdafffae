//! Load and soak tests against real processes: one in-process registry under 10,000
//! concurrent commands, 1,000 commands over NATS to two `cmdr worker` processes, a real
//! `cmdr serve` under an endless printer read slowly and under 100 concurrent runs on
//! one conversation, and an `#[ignore]`d soak of mixed traffic that watches the server's
//! memory and descriptors (see docs/load.md; `benches/load-soak.sh` runs them all).

// Integration tests are tests: their helpers may unwrap (the workspace denies it elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cases;
mod combined_output;
mod endless_output;
use cmdr_test_support::fake_llm;
use cmdr_test_support::http as http_support;
mod nats_load;
use cmdr_test_support::nats_server;
mod proc_stats;
mod registry_load;
use cmdr_test_support::mcp_rpc as rpc;
mod run_lock;
use cmdr_test_support::serve;
mod soak;
