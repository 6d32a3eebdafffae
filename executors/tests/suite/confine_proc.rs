//! File commands never open procfs (docs/security.md): they run inside cmdr, so
//! `/proc/self/environ` would be cmdr's own secrets and `/proc/<pid>/fd/…` other
//! processes' files. Refused `PATH_NOT_ALLOWED` confined or not, whatever path leads there:
//! `/proc` itself, a symbolic link to it, a second procfs mounted elsewhere.

use cmdr_executors::{ExecutionStatus, PathPolicy, Registry, RegistryConfig};
use serde_json::{json, Value};

use super::processes::one;

fn confined_to_everything() -> Registry {
    Registry::with_config(RegistryConfig {
        paths: PathPolicy::allow_roots(["/"]).unwrap(),
        ..RegistryConfig::default()
    })
}

async fn refused(registry: &Registry, command: Value) {
    let result = one(registry, command.clone()).await;
    assert_eq!(
        result.status,
        ExecutionStatus::Failed,
        "{command}: {result:?}"
    );
    assert_eq!(
        result.error_code.as_deref(),
        Some("PATH_NOT_ALLOWED"),
        "{command}: {result:?}"
    );
    assert!(result.error.contains("procfs"), "{}", result.error);
    assert!(!result.result_data.contains("PATH="), "leaked: {result:?}");
}

/// Every file command on `dir` (a procfs directory, however reached).
async fn every_command_refused(registry: &Registry, dir: &str) {
    refused(
        registry,
        json!({"commandType": "FILE_READ", "file_path": format!("{dir}/self/environ")}),
    )
    .await;
    refused(
        registry,
        json!({"commandType": "FILE_READ", "file_path": format!("{dir}/self/status")}),
    )
    .await;
    refused(
        registry,
        json!({"commandType": "LIST_DIRECTORY", "path": format!("{dir}/self/fd")}),
    )
    .await;
    refused(
        registry,
        json!({"commandType": "LIST_DIRECTORY", "path": dir}),
    )
    .await;
    refused(registry, json!({"commandType": "FILE_WRITE", "file_path": format!("{dir}/self/comm"), "content": "x"})).await;
    refused(
        registry,
        json!({"commandType": "PATCH_FILE", "file_path": format!("{dir}/self/comm"),
        "patch": "--- a\n+++ b\n@@ -1 +1 @@\n-a\n+b\n"}),
    )
    .await;
}

#[tokio::test]
async fn proc_is_never_opened_confined_or_not() {
    every_command_refused(&Registry::with_defaults(), "/proc").await;
    every_command_refused(&confined_to_everything(), "/proc").await;
}

#[tokio::test]
async fn a_link_to_proc_is_refused_too() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("p");
    std::os::unix::fs::symlink("/proc", &link).unwrap();
    every_command_refused(&Registry::with_defaults(), link.to_str().unwrap()).await;
    let self_link = dir.path().join("me");
    std::os::unix::fs::symlink("/proc/self", &self_link).unwrap();
    refused(
        &Registry::with_defaults(),
        json!({"commandType": "FILE_READ", "file_path": self_link.join("environ")}),
    )
    .await;
}

/// A second procfs, mounted where a root allows (needs root to mount; skipped otherwise).
#[tokio::test]
async fn a_second_procfs_mount_is_refused() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: mounting a procfs needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("p");
    std::fs::create_dir(&mount).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "proc", "proc"])
        .arg(&mount)
        .status()
        .unwrap();
    if !mounted.success() {
        eprintln!("skipped: cannot mount a procfs here");
        return;
    }
    let registry = Registry::with_config(RegistryConfig {
        paths: PathPolicy::allow_roots([dir.path()]).unwrap(),
        ..RegistryConfig::default()
    });
    let refused_here = async {
        every_command_refused(&registry, mount.to_str().unwrap()).await;
        every_command_refused(&Registry::with_defaults(), mount.to_str().unwrap()).await;
    };
    // Unmounted whatever the outcome.
    let outcome =
        futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(refused_here)).await;
    let _ = std::process::Command::new("umount").arg(&mount).status();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}
