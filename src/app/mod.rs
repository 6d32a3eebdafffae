//! The composition root: how every front door (`exec`, `chat`, `serve`, `mcp`, `worker`,
//! `commands`) builds what it runs on. CLI files only translate flags into these builders'
//! inputs; the wiring (confinement, shells' environment, who answers questions, marking
//! shells for orphan reaping, the model, the store and its recovery) happens here, once.
//!
//! - [`App::build`]: cmdr put together for the front doors that run agents (`serve`,
//!   `mcp`, `chat`, `commands`), from an [`AppConfig`].
//! - [`RegistryBuilder`]: the in-process registry of executors (also what `exec` and
//!   `worker` run on).
//! - [`SetupError`]: why a front door could not be set up, typed.

mod build;
mod error;
mod registry;

pub use build::{App, AppConfig, Executors, StoreChoice};
pub use error::SetupError;
pub use registry::RegistryBuilder;
