//! One integration-test binary (faster to link than one per file); areas in `suite/`.

// Integration tests are tests: their helpers may unwrap (the workspace denies it elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
