//! The properties the fuzz targets check, as plain functions over bytes.
//!
//! Each `checks::<target>::check(data)` panics when a property fails; a fuzz target only
//! calls it, and `tests/fuzz_corpus.rs` (main workspace) replays every committed corpus
//! file through the same functions with `#[path = "../fuzz/src/checks/mod.rs"]`.

pub mod checks;
