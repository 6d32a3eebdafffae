//! Odd files and races on one file: FIFOs, devices, sockets and directories are refused
//! at once and left as they are; concurrent patches of one file all land; a change by
//! another process during a write is `CONFLICT`; a SIGKILLed write's temp file is removed
//! by the next write there; owners are kept; empty paths are named; a relative directory
//! is listed by its absolute path; file commands honour `timeout_ms`.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};

use cmdr_executors::{ExecutionStatus, OutputResult, Registry};
use serde_json::json;

use super::{assert_failed, run, terminal};

/// A `FILE_WRITE` of `content` (built directly: encoding and decoding hundreds of
/// megabytes of JSON would dominate a debug build's test time).
fn big_write(file: &Path, content: String) -> cmdr_executors::Command {
    cmdr_executors::Command::FileWrite(cmdr_executors::protocol::FileWriteCommand {
        file_path: file.to_path_buf(),
        content,
        ..Default::default()
    })
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A FIFO, a socket, a directory and (as root) a character device, in `dir`.
fn odd_files(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    let fifo = dir.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let socket = dir.join("socket");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::mem::forget(listener);
    let subdir = dir.join("subdir");
    std::fs::create_dir(&subdir).unwrap();
    let mut odd = vec![
        (fifo, "a FIFO"),
        (socket, "a socket"),
        (subdir, "a directory"),
    ];
    if is_root() {
        // Like /dev/null (1:3), but ours to lose.
        let device = dir.join("null-device");
        let kind = nix::sys::stat::SFlag::S_IFCHR;
        let mode = nix::sys::stat::Mode::from_bits_truncate(0o666);
        nix::sys::stat::mknod(&device, kind, mode, nix::sys::stat::makedev(1, 3)).unwrap();
        odd.push((device, "a character device"));
    }
    odd
}

fn kind_of(path: &Path) -> &'static str {
    let file_type = std::fs::symlink_metadata(path).unwrap().file_type();
    if file_type.is_fifo() {
        "fifo"
    } else if file_type.is_socket() {
        "socket"
    } else if file_type.is_dir() {
        "dir"
    } else if file_type.is_char_device() {
        "char"
    } else {
        "other"
    }
}

#[tokio::test]
async fn what_is_not_a_regular_file_is_refused_at_once_and_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = Registry::with_defaults();
    let patch = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n";
    for (path, kind) in odd_files(tmp.path()) {
        let before = kind_of(&path);
        for json in [
            json!({"commandType": "FILE_READ", "file_path": path}),
            json!({"commandType": "FILE_WRITE", "file_path": path, "content": "x"}),
            json!({"commandType": "PATCH_FILE", "file_path": path, "patch": patch}),
        ] {
            let messages = run(&registry, json.clone()).await;
            let end = terminal(&messages);
            assert_failed(end, "NOT_A_FILE");
            assert!(end.error.contains(kind), "{kind}: {end:?}");
            assert_eq!(kind_of(&path), before, "{json} left it as it was");
        }
    }
    // A device that never ends (read) and one that swallows everything (write).
    let zero = run(
        &registry,
        json!({"commandType": "FILE_READ", "file_path": "/dev/zero"}),
    )
    .await;
    assert_failed(terminal(&zero), "NOT_A_FILE");
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".cmdr-write-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// `cmdr exec --jobs 5` with five patches of one file, each changing its own line: every
/// patch lands (before: all SUCCEEDED, one change survived).
#[test]
fn five_concurrent_patches_of_one_file_all_land() {
    for round in 0..5 {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("shared.txt");
        let lines: Vec<String> = (1..=10).map(|i| format!("line {i}")).collect();
        std::fs::write(&file, lines.join("\n") + "\n").unwrap();
        let mut input = String::new();
        for k in 1..=5 {
            let n = 2 * k;
            let patch = format!(
                "--- a/shared.txt\n+++ b/shared.txt\n@@ -{n} +{n} @@\n-line {n}\n+LINE {n} by patch {k}\n"
            );
            let json = json!({"command_id": format!("p{k}"), "commandType": "PATCH_FILE",
                "file_path": file, "patch": patch});
            input.push_str(&json.to_string());
            input.push('\n');
        }
        let out = assert_cmd::Command::cargo_bin("cmdr")
            .unwrap()
            .args(["exec", "--jobs", "5", "-"])
            .write_stdin(input)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "round {round}: {text}");
        let content = std::fs::read_to_string(&file).unwrap();
        for k in 1..=5 {
            assert!(
                content.contains(&format!("LINE {} by patch {k}", 2 * k)),
                "round {round}: patch {k} was lost:\n{content}"
            );
        }
    }
}

/// Another process changes the file while a big `FILE_WRITE` is being written: the write
/// fails with `CONFLICT` and the other process's change stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_by_another_process_during_a_write_is_a_conflict() {
    let registry = Registry::with_defaults();
    for attempt in 0..5 {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("contested.txt");
        std::fs::write(&file, "original\n").unwrap();
        // The other process: appends once the write's temp file exists.
        let dir = tmp.path().to_path_buf();
        let target = file.clone();
        let other = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while std::time::Instant::now() < deadline {
                let writing = std::fs::read_dir(&dir)
                    .unwrap()
                    .flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with(".cmdr-write-"));
                if writing {
                    use std::io::Write;
                    let mut f = std::fs::OpenOptions::new()
                        .append(true)
                        .open(&target)
                        .unwrap();
                    f.write_all(b"appended by another process\n").unwrap();
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            false
        });
        let stream = registry
            .execute(big_write(&file, "x".repeat(256 * 1024 * 1024)))
            .await
            .unwrap();
        let messages = super::collect(stream).await;
        let saw_the_write = other.join().unwrap();
        let end = terminal(&messages);
        if !saw_the_write || end.status == ExecutionStatus::Succeeded && attempt < 4 {
            // The write was over before the other process looked: no race happened.
            continue;
        }
        assert_failed(end, "CONFLICT");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "original\nappended by another process\n"
        );
        let names: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["contested.txt"], "no temp file left");
        return;
    }
    panic!("the other process never changed the file during a write");
}

/// A `cmdr exec` SIGKILLed in the middle of a `FILE_WRITE` leaves its temp file; the next
/// write to that directory (by another cmdr) removes it.
#[test]
fn a_killed_writers_temp_file_is_removed_by_the_next_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    std::fs::create_dir(&dir).unwrap();
    let big = json!({"commandType": "FILE_WRITE", "file_path": dir.join("big.txt"),
        "content": "y".repeat(128 * 1024 * 1024)});
    let input = tmp.path().join("big.jsonl");
    std::fs::write(&input, big.to_string()).unwrap();
    let mut writer = Process::new(assert_cmd::cargo::cargo_bin("cmdr"))
        .arg("exec")
        .arg(&input)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let temp_files = || -> Vec<String> {
        std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".cmdr-write-"))
            .collect()
    };
    let deadline = std::time::Instant::now() + super::PATIENCE;
    while temp_files().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the write never started"
        );
        assert!(
            writer.try_wait().unwrap().is_none(),
            "the write ended before the kill"
        );
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    writer.kill().unwrap();
    writer.wait().unwrap();
    assert_eq!(temp_files().len(), 1, "the killed write left its temp file");
    let small =
        json!({"commandType": "FILE_WRITE", "file_path": dir.join("small.txt"), "content": "ok"});
    assert_cmd::Command::cargo_bin("cmdr")
        .unwrap()
        .args(["exec", &small.to_string()])
        .assert()
        .success();
    assert!(temp_files().is_empty(), "{:?}", temp_files());
    assert!(!dir.join("big.txt").exists());
}

/// As root, a file of another user stays theirs; a file with other hard links is
/// replaced under this name only, and the result says so.
#[tokio::test]
async fn owners_are_kept_and_hard_links_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = Registry::with_defaults();
    let file = tmp.path().join("theirs.txt");
    std::fs::write(&file, "old\n").unwrap();
    let link = tmp.path().join("link.txt");
    std::fs::hard_link(&file, &link).unwrap();
    if is_root() {
        std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
    }
    let messages = run(
        &registry,
        json!({"commandType": "FILE_WRITE", "file_path": file, "content": "new\n"}),
    )
    .await;
    let end = terminal(&messages);
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:?}");
    assert!(end.message.contains("1 other hard link"), "{end:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "new\n");
    assert_eq!(std::fs::read_to_string(&link).unwrap(), "old\n");
    if is_root() {
        let meta = std::fs::metadata(&file).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
    }
}

#[tokio::test]
async fn an_empty_path_is_refused_naming_its_field() {
    let registry = Registry::with_defaults();
    for (json, field) in [
        (
            json!({"commandType": "FILE_READ", "file_path": ""}),
            "file_path",
        ),
        (
            json!({"commandType": "FILE_WRITE", "file_path": "", "content": "x"}),
            "file_path",
        ),
        (
            json!({"commandType": "PATCH_FILE", "file_path": "", "patch": "x"}),
            "file_path",
        ),
        (json!({"commandType": "LIST_DIRECTORY", "path": ""}), "path"),
    ] {
        let messages = run(&registry, json).await;
        let end = terminal(&messages);
        assert_failed(end, "INVALID_INPUT");
        assert!(end.error.contains(&format!("{field} is empty")), "{end:?}");
    }
}

#[test]
fn a_relative_directory_is_listed_by_its_absolute_path() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.txt"), "a").unwrap();
    let out = assert_cmd::Command::cargo_bin("cmdr")
        .unwrap()
        .current_dir(tmp.path())
        .args([
            "exec",
            "--combine",
            r#"{"commandType":"LIST_DIRECTORY","path":"."}"#,
        ])
        .output()
        .unwrap();
    let result: OutputResult = serde_json::from_slice(&out.stdout).unwrap();
    let first = result.result_data.lines().next().unwrap().to_owned();
    let cwd = std::fs::canonicalize(tmp.path()).unwrap();
    assert_eq!(first, format!("Listing for {}:", cwd.display()));
}

/// A file command with `timeout_ms` stops at its deadline — here a patch waiting for a
/// big write of the same file — and a command that timed out never changes the file
/// afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_command_that_timed_out_never_changes_the_file_later() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("busy.txt");
    std::fs::write(&file, "a\n").unwrap();
    let registry = Registry::with_defaults();
    let write = registry
        .execute(big_write(&file, "b\n".repeat(128 * 1024 * 1024)))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + super::PATIENCE;
    while !std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with(".cmdr-write-"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the write never started"
        );
        tokio::time::sleep(std::time::Duration::from_micros(200)).await;
    }
    let patch = "--- a/busy.txt\n+++ b/busy.txt\n@@ -1 +1 @@\n-b\n+PATCHED\n";
    let patched = run(
        &registry,
        json!({"commandType": "PATCH_FILE", "file_path": file, "patch": patch, "timeout_ms": 100}),
    )
    .await;
    assert_failed(terminal(&patched), "TIMEOUT");
    let written = super::collect(write).await;
    assert_eq!(terminal(&written).status, ExecutionStatus::Succeeded);
    // The patch's thread waited for the write's lock: once it is done, nothing is wedged.
    super::eventually("the timed-out patch's thread returned", || {
        cmdr_executors::files::watch::wedged().count == 0
    })
    .await;
    let content = std::fs::read(&file).unwrap();
    assert_eq!(
        content.len(),
        2 * 128 * 1024 * 1024,
        "the write's content, whole"
    );
    assert!(
        !content.starts_with(b"PATCHED"),
        "the timed-out patch did not apply later"
    );
    assert_eq!(registry.in_flight_count(), 0);
}
