//! `--allow-root` checked by the kernel: a process racing to swap a directory for a
//! symlink to the outside, while file commands run, never gets a write, read, patch or
//! listing outside the root; a path through a `/proc/<pid>/cwd` magic link of a process in
//! another mount namespace is never followed there.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmdr_executors::{ExecutionStatus, PathPolicy, Registry, RegistryConfig};
use serde_json::json;

use super::{data, run, terminal};

/// How long the race runs: long enough for many thousand swaps, bounded.
const RACE: Duration = Duration::from_secs(3);

fn confined(root: &Path) -> Registry {
    Registry::with_config(RegistryConfig {
        paths: PathPolicy::allow_roots([root]).unwrap(),
        ..RegistryConfig::default()
    })
}

/// Swaps `root/d` between a real directory and a symlink to `outside`, as fast as it can,
/// until `stop`.
fn racer(root: PathBuf, outside: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let (d, real) = (root.join("d"), root.join("d.real"));
        let mut swaps = 0;
        while !stop.load(Ordering::Relaxed) {
            if std::fs::rename(&d, &real).is_ok() {
                let _ = symlink(&outside, &d);
                let _ = std::fs::remove_file(&d);
                let _ = std::fs::rename(&real, &d);
                swaps += 1;
            }
        }
        swaps
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_racing_symlink_swap_never_gets_a_file_command_outside_the_root() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let (root, outside) = (base.join("root"), base.join("outside"));
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::write(root.join("d/target.txt"), "inside\n").unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("target.txt"), "SECRET\n").unwrap();
    std::fs::write(outside.join("only-outside.txt"), "x").unwrap();
    let registry = confined(&root);
    let stop = Arc::new(AtomicBool::new(false));
    let swapping = racer(root.clone(), outside.clone(), stop.clone());
    let patch = "--- a/target.txt\n+++ b/target.txt\n@@ -1 +1 @@\n-SECRET\n+PWNED\n";
    let (mut commands, mut inside) = (0u64, 0u64);
    let started = Instant::now();
    while started.elapsed() < RACE {
        let n = commands;
        let (write, read, patched, listed) = tokio::join!(
            run(
                &registry,
                json!({"commandType": "FILE_WRITE",
                "file_path": root.join(format!("d/pwn-{n}.txt")), "content": "pwned"})
            ),
            run(
                &registry,
                json!({"commandType": "FILE_READ", "file_path": root.join("d/target.txt")})
            ),
            run(
                &registry,
                json!({"commandType": "PATCH_FILE", "file_path": root.join("d/target.txt"), "patch": patch})
            ),
            run(
                &registry,
                json!({"commandType": "LIST_DIRECTORY", "path": root.join("d")})
            ),
        );
        commands += 4;
        assert!(!data(&read).contains("SECRET"), "read outside: {read:?}");
        assert!(
            !data(&listed).contains("only-outside"),
            "listed outside: {listed:?}"
        );
        for messages in [&write, &read, &patched, &listed] {
            let end = terminal(messages);
            if end.status == ExecutionStatus::Succeeded {
                inside += 1;
            } else {
                // Refused (the link was seen, the directory was away …): any clear error.
                assert!(end.error_code.is_some(), "{end:?}");
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapping.join().unwrap();
    let escaped: Vec<String> = std::fs::read_dir(&outside)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "target.txt" && name != "only-outside.txt")
        .collect();
    assert!(escaped.is_empty(), "written outside the root: {escaped:?}");
    assert_eq!(
        std::fs::read_to_string(outside.join("target.txt")).unwrap(),
        "SECRET\n",
        "patched outside the root"
    );
    assert!(swaps > 100, "the race ran ({swaps} swaps)");
    assert!(
        inside > 0,
        "commands still work inside the root ({inside} of {commands})"
    );
}

/// A process in another mount namespace whose cwd is a tmpfs mounted over the root (there
/// only): `/proc/<pid>/cwd` reads as the root's path, but the kernel would follow it into
/// that tmpfs. File commands must not reach it. Needs `unshare`: as root a mount namespace,
/// otherwise a user namespace of its own as well (the attacker's way without privileges).
#[tokio::test]
async fn a_proc_magic_link_into_another_mount_namespace_is_not_followed() {
    let namespaces: &[&str] = if nix::unistd::geteuid().is_root() {
        &["--mount"]
    } else {
        &["--user", "--map-root-user", "--mount"]
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("secret.txt"), "ours\n").unwrap();
    let ready = root.join("ready");
    let script = format!(
        "mount -t tmpfs none {root} && cd {root} && echo THEIRS > secret.txt && touch {ready}.ns \
         && exec sleep 300",
        root = root.display(),
        ready = ready.display()
    );
    let mut other = std::process::Command::new("unshare")
        .args(namespaces)
        .args(["--propagation", "private", "sh", "-c", &script])
        .spawn()
        .unwrap();
    let pid = other.id();
    // Its cwd is ready once the file exists in its tmpfs (seen through the magic link).
    let theirs = PathBuf::from(format!("/proc/{pid}/cwd"));
    let deadline = Instant::now() + super::PATIENCE;
    while !theirs.join("ready.ns").exists() {
        assert!(
            Instant::now() < deadline,
            "the other namespace never got ready"
        );
        assert!(other.try_wait().unwrap().is_none(), "unshare failed");
        std::thread::sleep(Duration::from_millis(5));
    }
    let registry = confined(&root);
    let read = run(
        &registry,
        json!({"commandType": "FILE_READ", "file_path": theirs.join("secret.txt")}),
    )
    .await;
    assert!(
        !data(&read).contains("THEIRS"),
        "read through the magic link: {read:?}"
    );
    let _ = run(
        &registry,
        json!({"commandType": "FILE_WRITE", "file_path": theirs.join("planted.txt"), "content": "x"}),
    )
    .await;
    let listed = run(
        &registry,
        json!({"commandType": "LIST_DIRECTORY", "path": theirs}),
    )
    .await;
    assert!(
        !data(&listed).contains("ready.ns"),
        "listed through the magic link: {listed:?}"
    );
    let planted = theirs.join("planted.txt").exists();
    other.kill().unwrap();
    other.wait().unwrap();
    assert!(
        !planted,
        "written through the magic link into the other namespace"
    );
}
