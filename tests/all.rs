//! One integration-test binary for everything that needs no process of its own (each
//! test binary re-links axum, rmcp, async-nats and rusqlite): the CLI suite (`suite/`),
//! the agent loop, agents, the HTTP API, MCP, `cmdr serve`, the service and the store.
//! Separate binaries remain for what measures or disturbs its own process (`load`,
//! `faults`, `ui`, `nats`, the fuzz corpus).

// Integration tests are tests: their helpers may unwrap (the workspace denies it elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent;
mod agents;
mod http;
mod mcp;
mod serve;
mod service;
mod store;
mod suite;
