//! Replays every committed fuzz input — the minimised corpora (`fuzz/corpus/<target>/`)
//! and the inputs of fixed findings (`fuzz/regressions/<target>/`) — through the same
//! property checks the fuzz targets run (`fuzz/src/checks/`), so each finding stays fixed
//! in the normal `cargo test` run without libFuzzer. See docs/fuzzing.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../fuzz/src/checks/mod.rs"]
mod checks;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// The committed inputs of `target`, sorted.
fn inputs(target: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut files = Vec::new();
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        files.extend(entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()));
    }
    files.sort();
    files
}

/// Runs `check` on every input of `target`; fails naming each input that panics.
fn replay(target: &str, check: fn(&[u8])) {
    let files = inputs(target);
    assert!(
        !files.is_empty(),
        "no committed inputs for fuzz target {target}"
    );
    let failed: Vec<String> = files
        .iter()
        .filter(|path| {
            let data = std::fs::read(path).unwrap();
            catch_unwind(AssertUnwindSafe(|| check(&data))).is_err()
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} inputs of {target} fail their properties:\n{}",
        failed.len(),
        files.len(),
        failed.join("\n")
    );
}

#[test]
fn decode_command() {
    replay("decode_command", checks::decode_command::check);
}

#[test]
fn shell_detector() {
    replay("shell_detector", checks::shell_detector::check);
}

#[test]
fn patch() {
    replay("patch", checks::patch::check);
}

#[test]
fn patch_roundtrip() {
    replay("patch_roundtrip", checks::patch_roundtrip::check);
}

#[test]
fn command_file() {
    replay("command_file", checks::command_file::check);
}

#[test]
fn http_request() {
    replay("http_request", checks::http_request::check);
}

#[test]
fn mcp_params() {
    replay("mcp_params", checks::mcp_params::check);
}

#[test]
fn json_escape() {
    replay("json_escape", checks::json_escape::check);
}
