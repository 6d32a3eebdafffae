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
#[path = "../agent/fake_llm.rs"]
mod fake_llm;
#[path = "../http/support.rs"]
#[allow(dead_code)]
mod http_support;
mod nats_load;
#[path = "../nats/server.rs"]
#[allow(dead_code)]
mod nats_server;
mod proc_stats;
mod registry_load;
#[path = "../mcp/rpc.rs"]
#[allow(dead_code)]
mod rpc;
mod run_lock;
// Shared with the `faults` target, which uses other parts of it.
#[allow(dead_code)]
mod serve;
mod soak;
