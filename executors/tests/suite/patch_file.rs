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

/// Issue 32: a failing `PATCH_FILE` is not a way to read a file. Against a secrets file,
/// blind hunks, a hunk anchored on a known line and a deletion quote none of its secrets;
/// against a file with NUL bytes nothing of it is quoted, even a line close to the hunk's;
/// a near miss in an ordinary file is still quoted (it is what the writer needs).
#[tokio::test]
async fn a_failing_patch_quotes_nothing_it_did_not_already_know() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = Registry::with_defaults();
    let failure = |path: &std::path::Path, diff: &str| {
        let command = patch(path, diff);
        let registry = &registry;
        async move {
            let messages = run(registry, command).await;
            let end = terminal(&messages);
            assert_eq!(end.status, ExecutionStatus::Failed, "{messages:?}");
            end.error.clone()
        }
    };
    let secrets = tmp.path().join("credentials");
    let key = "AKIAIOSFODNN7EXAMPLE";
    let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    let content = format!(
        "[default]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\npin = 4711\n"
    );
    std::fs::write(&secrets, &content).unwrap();
    let attacks = [
        // Blind: the header points at a line, the hunk knows nothing of it.
        "@@ -2,1 +2,1 @@\n-x\n+y\n".to_owned(),
        "@@ -3,1 +3,1 @@\n-aws_secret_access_key = \n+y\n".to_owned(),
        "@@ -4,1 +4,1 @@\n-x\n+y\n".to_owned(),
        // Anchored on a line everyone knows, guessing the next.
        "@@ -1,2 +1,2 @@\n [default]\n-aws_access_key_id = AKIA\n+x\n".to_owned(),
        format!("@@ -2,2 +2,2 @@\n aws_access_key_id = {key}\n-guess\n+x\n"),
        // A deletion that removes the first line only.
        "--- a/credentials\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-[default]\n".to_owned(),
    ];
    for diff in attacks {
        let error = failure(&secrets, &diff).await;
        for leaked in [key, secret, "4711"] {
            assert!(!error.contains(leaked), "{diff:?} read {leaked}: {error}");
        }
    }
    assert_eq!(std::fs::read_to_string(&secrets).unwrap(), content);

    let binary = tmp.path().join("blob.bin");
    std::fs::write(&binary, "header\0\u{1}\nsecret-in-blob-42\n").unwrap();
    let error = failure(&binary, "@@ -2,1 +2,1 @@\n-secret-in-blob-4\n+x\n").await;
    assert!(!error.contains("secret-in-blob-42"), "{error}");
    assert!(error.contains("not text"), "{error}");

    let code = tmp.path().join("code.rs");
    std::fs::write(&code, "fn main() {\n    run(a, b, c);\n}\n").unwrap();
    let error = failure(
        &code,
        "@@ -1,3 +1,3 @@\n fn main() {\n-    run(a, b);\n+    go(a, b);\n }\n",
    )
    .await;
    assert!(error.contains("found `    run(a, b, c);`"), "{error}");
}
