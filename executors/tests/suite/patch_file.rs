//! `PATCH_FILE` as an executor: applies, creates, deletes, and leaves the file untouched
//! when a hunk fails. (The engine's cases are in executors/tests/patch_engine.rs.)

use cmdr_executors::{ExecutionStatus, Registry};
use serde_json::json;

use super::{assert_failed, run, terminal};

fn patch(path: &std::path::Path, diff: &str) -> serde_json::Value {
    json!({"commandType":"PATCH_FILE","file_path":path,"patch":diff})
}

#[tokio::test]
async fn modifies_creates_and_deletes() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("greet.txt");
    let registry = Registry::with_defaults();
    let create = "--- /dev/null\n+++ b/greet.txt\n@@ -0,0 +1,2 @@\n+Hello from FileWrite!\n+This is a test file.\n";
    let messages = run(&registry, patch(&path, create)).await;
    assert_eq!(
        terminal(&messages).status,
        ExecutionStatus::Succeeded,
        "{messages:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "Hello from FileWrite!\nThis is a test file.\n"
    );

    let modify = "--- a/greet.txt\n+++ b/greet.txt\n@@ -1,2 +1,2 @@\n-Hello from FileWrite!\n+Greetings from PatchFile!\n This is a test file.\n";
    let messages = run(&registry, patch(&path, modify)).await;
    assert_eq!(
        terminal(&messages).status,
        ExecutionStatus::Succeeded,
        "{messages:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "Greetings from PatchFile!\nThis is a test file.\n"
    );

    let delete = "--- a/greet.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-Greetings from PatchFile!\n-This is a test file.\n";
    let messages = run(&registry, patch(&path, delete)).await;
    assert_eq!(
        terminal(&messages).status,
        ExecutionStatus::Succeeded,
        "{messages:?}"
    );
    assert!(!path.exists());
}

#[tokio::test]
async fn a_failing_hunk_leaves_the_file_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("code.rs");
    let original = "fn main() {\n    println!(\"hi\");\n}\n";
    std::fs::write(&path, original).unwrap();
    let registry = Registry::with_defaults();
    let diff =
        "@@ -1,3 +1,3 @@\n fn start() {\n-    println!(\"bye\");\n+    println!(\"hello\");\n }\n";
    let messages = run(&registry, patch(&path, diff)).await;
    let end = terminal(&messages);
    assert_failed(end, "PATCH_HUNK_FAILED");
    assert!(
        end.error.contains("#1") || end.error.contains("hunk 1"),
        "{}",
        end.error
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
}

#[tokio::test]
async fn wrong_counts_and_offsets_still_apply_and_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("list.txt");
    let original: String = (1..=20).map(|i| format!("item {i}\n")).collect();
    std::fs::write(&path, &original).unwrap();
    let registry = Registry::with_defaults();
    let diff = "@@ -5,9 +5,1 @@\n item 8\n-item 9\n+item nine\n item 10\n";
    let messages = run(&registry, patch(&path, diff)).await;
    let end = terminal(&messages);
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:?}");
    assert!(end.message.contains("offset"), "{}", end.message);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        original.replace("item 9\n", "item nine\n")
    );
}
