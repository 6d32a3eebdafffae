//! The patch engine against fixtures, plus a large generated patch.
//!
//! Each directory in `tests/fixtures/patch/` is one case:
//! - `before.txt`: the file's content (absent: the file does not exist);
//! - `patch.diff`: the patch;
//! - `after.txt`: the expected content, or a `deleted` marker file, or `error.txt` whose
//!   first line is the expected error code and whose other lines must each appear in the
//!   error message;
//! - `notes.txt` (optional): each line must appear in one of the notes.

// Integration tests are tests: their helpers may unwrap (the workspace denies it elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cmdr_executors::patch::{apply_patch, PatchApplied, PatchError, PatchedFile};
use pretty_assertions::assert_eq;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/patch")
}

fn read_optional(dir: &Path, name: &str) -> Option<String> {
    fs::read_to_string(dir.join(name)).ok()
}

/// The outcome as one comparable string.
fn render(result: &Result<PatchApplied, PatchError>) -> String {
    match result {
        Ok(applied) => match &applied.file {
            PatchedFile::Modified(text) => format!("MODIFIED\n{text}"),
            PatchedFile::Created(text) => format!("CREATED\n{text}"),
            PatchedFile::Deleted => "DELETED".to_owned(),
        },
        Err(e) => format!("ERROR {}", e.code()),
    }
}

/// The expected outcome string, and the lines the error message or notes must contain.
fn expected(dir: &Path, before: Option<&str>, patch: &str) -> (String, Vec<String>, Vec<String>) {
    let lines = |text: Option<String>| -> Vec<String> {
        let text = text.unwrap_or_default();
        text.lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let notes = lines(read_optional(dir, "notes.txt"));
    if let Some(error) = read_optional(dir, "error.txt") {
        let mut all = lines(Some(error));
        let code = if all.is_empty() {
            String::new()
        } else {
            all.remove(0)
        };
        return (format!("ERROR {code}"), all, notes);
    }
    if dir.join("deleted").exists() {
        return ("DELETED".to_owned(), Vec::new(), notes);
    }
    let after = read_optional(dir, "after.txt")
        .unwrap_or_else(|| panic!("{}: needs after.txt, error.txt or deleted", dir.display()));
    let creates = before.is_none() || patch.contains("--- /dev/null");
    let kind = if creates { "CREATED" } else { "MODIFIED" };
    (format!("{kind}\n{after}"), Vec::new(), notes)
}

fn run_fixture(dir: &Path) {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let before = read_optional(dir, "before.txt");
    let patch = read_optional(dir, "patch.diff").unwrap_or_else(|| panic!("{name}: no patch.diff"));
    let result = apply_patch(before.as_deref(), &patch);
    let (want, message_parts, note_parts) = expected(dir, before.as_deref(), &patch);
    let detail = match &result {
        Ok(applied) => format!("notes: {:?}", applied.notes),
        Err(e) => format!("error: {e}"),
    };
    assert_eq!(render(&result), want, "fixture {name} ({detail})");
    if let Err(e) = &result {
        let message = e.to_string();
        for part in &message_parts {
            assert!(
                message.contains(part.as_str()),
                "fixture {name}: message lacks {part:?}:\n{message}"
            );
        }
    }
    if let Ok(applied) = &result {
        for part in &note_parts {
            let found = applied.notes.iter().any(|n| n.contains(part.as_str()));
            assert!(
                found,
                "fixture {name}: no note contains {part:?}: {:?}",
                applied.notes
            );
        }
    }
}

#[test]
fn fixtures() {
    let mut dirs: Vec<PathBuf> = fs::read_dir(fixtures_dir())
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    dirs.retain(|d| d.is_dir());
    dirs.sort();
    assert!(
        dirs.len() >= 30,
        "expected the fixture directories, found {}",
        dirs.len()
    );
    for dir in &dirs {
        run_fixture(dir);
    }
}

/// A 100,000-line file, a 1,000-hunk patch (some headers off by a few lines, some with
/// wrong counts) and the text the patch must produce.
fn large_case() -> (String, String, String) {
    const LINES: usize = 100_000;
    const HUNKS: usize = 1_000;
    let line = |i: usize| format!("line {i} value {}", i % 97);
    let original: String = (0..LINES).map(|i| line(i) + "\n").collect();
    let mut patch = String::from("--- a/big.txt\n+++ b/big.txt\n");
    let mut expected = String::with_capacity(original.len() + HUNKS * 40);
    let mut next = 0;
    for k in 0..HUNKS {
        let changed = 50 + k * 100;
        let first = changed - 3;
        // Every 7th header is 4 lines off; every 11th has wrong counts.
        let stated = if k % 7 == 3 { first + 1 + 4 } else { first + 1 };
        let counts = if k % 11 == 5 { (2, 9) } else { (7, 8) };
        patch.push_str(&format!(
            "@@ -{stated},{} +{stated},{} @@\n",
            counts.0, counts.1
        ));
        for i in first..changed {
            patch.push_str(&format!(" {}\n", line(i)));
        }
        patch.push_str(&format!("-{}\n+changed {k}\n+added {k}\n", line(changed)));
        for i in changed + 1..changed + 4 {
            patch.push_str(&format!(" {}\n", line(i)));
        }
        for i in next..changed {
            expected.push_str(&line(i));
            expected.push('\n');
        }
        expected.push_str(&format!("changed {k}\nadded {k}\n"));
        next = changed + 1;
    }
    for i in next..LINES {
        expected.push_str(&line(i));
        expected.push('\n');
    }
    (original, patch, expected)
}

#[test]
fn thousand_hunks_on_a_hundred_thousand_lines() {
    let (original, patch, expected) = large_case();
    let mut best = Duration::MAX;
    let mut result = None;
    for _ in 0..5 {
        let started = Instant::now();
        let applied = apply_patch(Some(&original), &patch);
        best = best.min(started.elapsed());
        result = Some(applied);
    }
    eprintln!("patch engine: 1,000 hunks on a 100,000-line file in {best:?} (best of 5)");
    let applied = match result {
        Some(Ok(applied)) => applied,
        other => panic!("large patch failed: {other:?}"),
    };
    assert_eq!(applied.hunks, 1_000);
    let text = match applied.file {
        PatchedFile::Modified(text) => text,
        other => panic!("expected Modified, got {other:?}"),
    };
    assert!(text == expected, "large patch produced the wrong text");
    assert!(
        applied.notes.iter().any(|n| n.contains("offset")),
        "{:?}",
        applied.notes
    );
    assert!(
        applied.notes.iter().any(|n| n.contains("recomputed")),
        "{:?}",
        applied.notes
    );
}
