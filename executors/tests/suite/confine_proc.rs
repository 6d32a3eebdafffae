//! Issue 32.5: cmdr's own process directory is not a file to serve. File commands
//! refuse `/proc/<pid>/…`, `/proc/self`, `/proc/thread-self` (and the same through a
//! second procfs mount) with `PATH_NOT_ALLOWED`, whatever the roots, and never follow a
//! `/proc` magic link to what cmdr holds open.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use cmdr_executors::{ExecutionStatus, OutputResult, Registry, RegistryConfig};
use serde_json::{json, Value};

use super::{assert_failed, run, terminal};

/// A secret file the test process (standing for cmdr) holds open, as cmdr holds its
/// spilled outputs and its stdout.
struct Held {
    _tmp: tempfile::TempDir,
    path: PathBuf,
    file: std::fs::File,
}

const SECRET: &str = "the answer key\n";

fn held() -> Held {
    let tmp = tempfile::tempdir().unwrap();
    let path = std::fs::canonicalize(tmp.path()).unwrap().join("held.txt");
    std::fs::write(&path, SECRET).unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    Held {
        _tmp: tmp,
        path,
        file,
    }
}

async fn end_of(registry: &Registry, json: Value) -> OutputResult {
    terminal(&run(registry, json).await).clone()
}

/// Every file command on `path` is refused and reveals/changes nothing.
async fn assert_refused_everywhere(registry: &Registry, path: &Path, held: &Held) {
    let read = end_of(
        registry,
        json!({"commandType":"FILE_READ","file_path":path}),
    )
    .await;
    assert_failed(&read, "PATH_NOT_ALLOWED");
    assert!(!read.result_data.contains("answer"), "{read:?}");
    let wrote = end_of(
        registry,
        json!({"commandType":"FILE_WRITE","file_path":path,"content":"overwritten\n"}),
    )
    .await;
    assert_failed(&wrote, "PATH_NOT_ALLOWED");
    let patched = end_of(
        registry,
        json!({"commandType":"PATCH_FILE","file_path":path,
               "patch":"--- a/f\n+++ b/f\n@@ -1 +1 @@\n-the answer key\n+changed\n"}),
    )
    .await;
    assert_eq!(patched.status, ExecutionStatus::Failed, "{patched:?}");
    assert_eq!(std::fs::read_to_string(&held.path).unwrap(), SECRET);
}

#[tokio::test]
async fn file_commands_refuse_cmdrs_own_process_directory() {
    let held = held();
    let registry = Registry::with_config(RegistryConfig::default());
    let fd = held.file.as_raw_fd();
    let pid = std::process::id();
    let magic = [
        PathBuf::from(format!("/proc/self/fd/{fd}")),
        PathBuf::from(format!("/proc/{pid}/fd/{fd}")),
        PathBuf::from(format!("/proc/thread-self/fd/{fd}")),
        PathBuf::from(format!("/dev/fd/{fd}")),
        PathBuf::from(format!("/proc/{pid}/root")).join(held.path.strip_prefix("/").unwrap()),
    ];
    for path in &magic {
        assert_refused_everywhere(&registry, path, &held).await;
    }
    let cwd_file = format!("/proc/{pid}/cwd/Cargo.toml");
    for path in [
        "/proc/self/environ",
        "/proc/self/cmdline",
        "/proc/thread-self/environ",
        "/proc/self/cwd/Cargo.toml",
        &cwd_file,
    ] {
        let read = end_of(
            &registry,
            json!({"commandType":"FILE_READ","file_path":path}),
        )
        .await;
        assert_failed(&read, "PATH_NOT_ALLOWED");
    }
    let environ = format!("/proc/{pid}/environ");
    let read = end_of(
        &registry,
        json!({"commandType":"FILE_READ","file_path":environ}),
    )
    .await;
    assert_failed(&read, "PATH_NOT_ALLOWED");
    for dir in ["/proc/self/fd", "/proc/self", "/proc/thread-self/fd"] {
        let listed = end_of(
            &registry,
            json!({"commandType":"LIST_DIRECTORY","path":dir}),
        )
        .await;
        assert_failed(&listed, "PATH_NOT_ALLOWED");
    }
    // The file itself is still served by its own path.
    let read = end_of(
        &registry,
        json!({"commandType":"FILE_READ","file_path":held.path}),
    )
    .await;
    assert_eq!(read.status, ExecutionStatus::Succeeded, "{read:?}");
}

/// A second procfs, mounted where a root could allow it: refused the same way.
#[tokio::test]
async fn file_commands_refuse_process_directories_of_another_procfs_mount() {
    if !nix::unistd::Uid::effective().is_root() {
        println!("skipped: mounting a second procfs needs root");
        return;
    }
    let held = held();
    let tmp = tempfile::tempdir().unwrap();
    let mnt = std::fs::canonicalize(tmp.path()).unwrap().join("p");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "proc", "proc"])
        .arg(&mnt)
        .status();
    if !matches!(mounted, Ok(s) if s.success()) {
        println!("skipped: mount -t proc failed here ({mounted:?})");
        return;
    }
    let _unmount = Unmount(mnt.clone());
    let registry = Registry::with_config(RegistryConfig {
        paths: cmdr_executors::PathPolicy::allow_roots([&mnt]).unwrap(),
        ..RegistryConfig::default()
    });
    let pid = std::process::id();
    let environ = mnt.join(format!("{pid}/environ"));
    let read = end_of(
        &registry,
        json!({"commandType":"FILE_READ","file_path":environ}),
    )
    .await;
    assert_failed(&read, "PATH_NOT_ALLOWED");
    let fd = mnt.join(format!("{pid}/fd/{}", held.file.as_raw_fd()));
    assert_refused_everywhere(&registry, &fd, &held).await;
    let listed = end_of(
        &registry,
        json!({"commandType":"LIST_DIRECTORY","path":mnt.join(pid.to_string())}),
    )
    .await;
    assert_failed(&listed, "PATH_NOT_ALLOWED");
}

/// Unmounts a test mount when dropped.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
