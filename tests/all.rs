//! One integration-test binary (faster to link than one per file); areas in `suite/`.

mod suite;
