//! Issue 32.19: file commands refuse to cross a mount placed inside an allowed root
//! (`RESOLVE_NO_XDEV`) unless `--cross-mounts` is given.

use std::path::{Path, PathBuf};
use std::process::Command;

use cmdr_executors::{ExecutionStatus, OutputResult, PathPolicy, Registry, RegistryConfig};
use serde_json::{json, Value};

use super::{assert_failed, run, terminal};

async fn end_of(registry: &Registry, json: Value) -> OutputResult {
    terminal(&run(registry, json).await).clone()
}

fn registry(root: &Path, cross_mounts: bool) -> Registry {
    Registry::with_config(RegistryConfig {
        paths: PathPolicy::allow_roots([root])
            .unwrap()
            .crossing_mounts(cross_mounts),
        ..RegistryConfig::default()
    })
}

/// Unmounts a test mount when dropped.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[tokio::test]
async fn file_commands_refuse_a_mount_inside_a_root_unless_asked() {
    if !nix::unistd::Uid::effective().is_root() {
        println!("skipped: mounting a tmpfs inside a root needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap().join("root");
    let mnt = root.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    std::fs::write(root.join("plain.txt"), "plain\n").unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "tmpfs"])
        .arg(&mnt)
        .status();
    if !matches!(mounted, Ok(s) if s.success()) {
        println!("skipped: mount -t tmpfs failed here ({mounted:?})");
        return;
    }
    let _unmount = Unmount(mnt.clone());
    std::fs::write(mnt.join("mounted.txt"), "mounted\n").unwrap();

    let strict = registry(&root, false);
    let plain = end_of(
        &strict,
        json!({"commandType":"FILE_READ","file_path":root.join("plain.txt")}),
    )
    .await;
    assert_eq!(plain.status, ExecutionStatus::Succeeded, "{plain:?}");
    let read = end_of(
        &strict,
        json!({"commandType":"FILE_READ","file_path":mnt.join("mounted.txt")}),
    )
    .await;
    assert_failed(&read, "PATH_NOT_ALLOWED");
    assert!(!read.result_data.contains("mounted"), "{read:?}");
    let wrote = end_of(
        &strict,
        json!({"commandType":"FILE_WRITE","file_path":mnt.join("new.txt"),"content":"x\n"}),
    )
    .await;
    assert_failed(&wrote, "PATH_NOT_ALLOWED");
    assert!(
        !mnt.join("new.txt").exists(),
        "nothing written through the mount"
    );
    let deeper = end_of(
        &strict,
        json!({"commandType":"FILE_WRITE","file_path":mnt.join("a/b.txt"),"content":"x\n","create_dirs":true}),
    )
    .await;
    assert_failed(&deeper, "PATH_NOT_ALLOWED");
    assert!(
        !mnt.join("a").exists(),
        "no directory made through the mount"
    );
    let listed = end_of(&strict, json!({"commandType":"LIST_DIRECTORY","path":mnt})).await;
    assert_failed(&listed, "PATH_NOT_ALLOWED");

    let crossing = registry(&root, true);
    let read = end_of(
        &crossing,
        json!({"commandType":"FILE_READ","file_path":mnt.join("mounted.txt")}),
    )
    .await;
    assert_eq!(read.status, ExecutionStatus::Succeeded, "{read:?}");
    let wrote = end_of(
        &crossing,
        json!({"commandType":"FILE_WRITE","file_path":mnt.join("new.txt"),"content":"x\n"}),
    )
    .await;
    assert_eq!(wrote.status, ExecutionStatus::Succeeded, "{wrote:?}");
    assert_eq!(std::fs::read_to_string(mnt.join("new.txt")).unwrap(), "x\n");
}
