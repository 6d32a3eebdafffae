//! The NATS transport (docs/contract.md §8): producers publish commands, a pool of `cmdr worker`s
//! runs them through the same registry as every other front door, and streams every
//! `OutputResult` back on a per-command subject.
//!
//! - [`subjects`]: subject names and the id rule (an id is one subject token).
//! - [`wire`]: the small JSON messages of the bus besides commands and results.
//! - [`chunk`]: splitting results larger than the server's `max_payload`.
//! - [`worker`]: the worker loop (`cmdr worker`).
//! - [`input`]: `REQUEST_USER_INPUT` on a worker, asked of the producer over the bus.
//! - [`producer`]: the client a producer uses (`cmdr submit`): submit, cancel, answer.
//! - [`remote`]: an executor that runs a local registry's commands on the pool.
//! - `liveness`: core mode, noticing that the worker running a command died.
//!
//! - [`durable`]: JetStream streams and consumer; `durable_worker`: the durable loop;
//!   `follow`: reading results through outages; `publish`: publishing result streams.
//!
//! Core mode is at most once; durable mode (JetStream) loses nothing when a worker, the
//! producer or the server restarts. Both are described in `docs/nats.md`.

pub mod chunk;
pub mod durable;
mod durable_worker;
mod follow;
pub mod input;
mod liveness;
pub mod producer;
mod publish;
pub mod remote;
pub mod subjects;
pub mod wire;
pub mod worker;
