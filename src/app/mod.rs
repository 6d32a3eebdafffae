//! The composition root: how every front door (`exec`, `chat`, `serve`, `mcp`, `worker`,
//! `commands`) builds what it runs on. CLI files only translate flags into these builders'
//! inputs; the wiring (confinement, shells' environment, who answers questions, marking
//! shells for orphan reaping) happens here, once.
//!
//! - [`RegistryBuilder`]: the in-process registry of executors.
//! - [`SetupError`]: why a front door could not be set up, typed.
//!
//! `cmdr serve` and `cmdr mcp` build their shared state with
//! [`AppState::build`](crate::server::AppState::build), which uses the same builder.

mod error;
mod registry;

pub use error::SetupError;
pub use registry::RegistryBuilder;
