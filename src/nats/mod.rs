//! The NATS transport (docs/contract.md §8): producers publish commands, a pool of `cmdr worker`s
//! runs them through the same registry as every other front door, and streams every
//! `OutputResult` back on a per-command subject.
//!
//! - [`subjects`]: subject names and the id rule (an id is one subject token).
//! - [`wire`]: the small JSON messages of the bus besides commands and results.
//! - [`chunk`]: splitting results larger than the server's `max_payload`.
//! - [`connect`]: connecting with credentials, TLS and several servers, secrets masked.
//! - [`durable`]: the JetStream streams and consumer settings both roles share.
//!
//! By role, each with its core and durable parts (neither imports the other):
//! - [`worker`]: `cmdr worker`: the core and durable loops, publishing results,
//!   answering liveness checks, and [`input`]: `REQUEST_USER_INPUT` asked of the producer.
//! - [`producer`]: the client a producer uses (`cmdr submit`): submit, cancel, answer,
//!   following results through outages (durable), noticing a lost worker (core); and
//!   [`remote`]: an executor that runs a local registry's commands on the pool.
//!
//! Core mode is at most once; durable mode (JetStream) loses nothing when a worker, the
//! producer or the server restarts. Both are described in `docs/nats.md`.

pub mod chunk;
pub mod connect;
pub mod durable;
pub mod producer;
pub mod subjects;
pub mod wire;
pub mod worker;

pub use producer::remote;
pub use worker::input;
