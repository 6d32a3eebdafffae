//! The command package's integration suite (one binary, areas in `suite/`); run it alone
//! with `cargo test -p cmdr-executors`.

// Integration tests are tests: their helpers may unwrap (the workspace denies it elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
