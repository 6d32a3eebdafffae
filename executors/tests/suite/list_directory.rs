//! `LIST_DIRECTORY`: the contract's format (docs/contract.md §3), sorted by name, symlinks, refusals.

use cmdr_executors::{ExecutionStatus, Registry};
use regex::Regex;
use serde_json::json;

use super::{assert_failed, run, terminal};

#[tokio::test]
async fn lists_entries_sorted_in_the_spec_format() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("b.txt"), "12345").unwrap();
    std::fs::create_dir(tmp.path().join("a_dir")).unwrap();
    std::fs::write(tmp.path().join("C.md"), "").unwrap();
    std::os::unix::fs::symlink("b.txt", tmp.path().join("link")).unwrap();
    let registry = Registry::with_defaults();
    let messages = run(
        &registry,
        json!({"commandType":"LIST_DIRECTORY","path":tmp.path()}),
    )
    .await;
    let end = terminal(&messages);
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:?}");
    assert!(end.message.contains("4 entries"), "{}", end.message);
    let mut lines = end.result_data.lines();
    assert_eq!(
        lines.next(),
        Some(format!("Listing for {}:", tmp.path().display()).as_str())
    );
    let line = Regex::new(
        r"^  \[(DIR |FILE)\] [-dlpscb][-rwxsStT]{9} \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ [ \d]{10} (.+)$",
    )
    .unwrap();
    let rows: Vec<(String, String)> = lines
        .map(|l| {
            let c = line.captures(l).unwrap_or_else(|| panic!("bad line {l:?}"));
            (c[1].to_owned(), c[2].to_owned())
        })
        .collect();
    let expected = [
        ("FILE", "C.md"),
        ("DIR ", "a_dir"),
        ("FILE", "b.txt"),
        ("FILE", "link -> b.txt"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(k, n)| (k.to_string(), n.to_string()))
        .collect();
    assert_eq!(rows, expected);
    assert!(
        end.result_data.contains("          5 b.txt"),
        "sizes right-aligned: {}",
        end.result_data
    );
}

#[tokio::test]
async fn missing_paths_and_files_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("f");
    std::fs::write(&file, "").unwrap();
    let registry = Registry::with_defaults();
    let missing = run(
        &registry,
        json!({"commandType":"LIST_DIRECTORY","path":tmp.path().join("nope")}),
    )
    .await;
    assert_failed(terminal(&missing), "NOT_FOUND");
    let not_dir = run(
        &registry,
        json!({"commandType":"LIST_DIRECTORY","path":file}),
    )
    .await;
    assert_failed(terminal(&not_dir), "INVALID_INPUT");
}
