//! `FILE_WRITE`: atomic replacement, permissions kept, parent directories, symlinks.

use std::os::unix::fs::PermissionsExt;

use cmdr_executors::{ExecutionStatus, Registry};
use serde_json::json;

use super::{assert_failed, run, terminal};

#[tokio::test]
async fn writes_and_reports_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("out.txt");
    let registry = Registry::with_defaults();
    let content = "Hello from FileWrite!\nThis is a test file.";
    let messages = run(
        &registry,
        json!({"commandType":"FILE_WRITE","file_path":path,"content":content}),
    )
    .await;
    let end = terminal(&messages);
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:?}");
    assert!(
        end.message.contains(&format!("{} bytes", content.len())),
        "{}",
        end.message
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), content);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    let leftovers = std::fs::read_dir(tmp.path()).unwrap().count();
    assert_eq!(leftovers, 1, "no temp files left behind");
}

#[tokio::test]
async fn overwriting_keeps_the_permissions() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("run.sh");
    std::fs::write(&path, "old").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).unwrap();
    let registry = Registry::with_defaults();
    run(
        &registry,
        json!({"commandType":"FILE_WRITE","file_path":path,"content":"#!/bin/sh\n"}),
    )
    .await;
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "#!/bin/sh\n");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o750);
}

#[tokio::test]
async fn parent_directories_only_with_create_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("a/b/c.txt");
    let registry = Registry::with_defaults();
    let refused = run(
        &registry,
        json!({"commandType":"FILE_WRITE","file_path":path,"content":"x"}),
    )
    .await;
    assert_failed(terminal(&refused), "INVALID_INPUT");
    assert!(terminal(&refused).error.contains("create_dirs"));
    let made = run(
        &registry,
        json!({"commandType":"FILE_WRITE","file_path":path,"content":"x","create_dirs":true}),
    )
    .await;
    assert_eq!(terminal(&made).status, ExecutionStatus::Succeeded);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "x");
}

#[tokio::test]
async fn a_symlink_is_followed_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("real.txt");
    let link = tmp.path().join("link.txt");
    std::fs::write(&target, "old").unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let registry = Registry::with_defaults();
    run(
        &registry,
        json!({"commandType":"FILE_WRITE","file_path":link,"content":"new"}),
    )
    .await;
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
}

#[tokio::test]
async fn a_directory_is_not_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = Registry::with_defaults();
    let messages = run(
        &registry,
        json!({"commandType":"FILE_WRITE","file_path":tmp.path(),"content":"x"}),
    )
    .await;
    assert_failed(terminal(&messages), "NOT_A_FILE");
    assert!(tmp.path().is_dir());
}
