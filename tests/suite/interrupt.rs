//! `cmdr exec` interrupted by SIGINT or SIGTERM: every command that had started still ends
//! with one terminal line (`FAILED` `CANCELLED`, "interrupted"), `--combine` prints one such
//! line per started command with the data received so far, nothing else starts, and the
//! exit status is 130.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use cmdr_executors::{ExecutionStatus, OutputResult};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Two long commands that say they started (a line and a file), and a third that must
/// never start (`--jobs 2`).
fn commands(dir: &Path) -> String {
    let long = |n: u32| {
        serde_json::json!({
            "command_id": format!("long-{n}"),
            "commandType": "BASH_EXEC",
            "command": format!("echo partial-{n}; touch {}/started-{n}; sleep 300", dir.display()),
        })
        .to_string()
    };
    let never = serde_json::json!({
        "command_id": "never",
        "commandType": "BASH_EXEC",
        "command": format!("touch {}/never", dir.display()),
    });
    format!("{}\n{}\n{never}\n", long(1), long(2))
}

fn start(dir: &Path, combine: bool) -> Child {
    let file = dir.join("commands.jsonl");
    std::fs::write(&file, commands(dir)).unwrap();
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("cmdr"));
    command.args(["exec", "--jobs", "2"]);
    if combine {
        command.arg("--combine");
    }
    command
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits (bounded) until both long commands have started.
fn wait_started(dir: &Path) {
    let deadline = std::time::Instant::now() + super::PATIENCE;
    while !(dir.join("started-1").exists() && dir.join("started-2").exists()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the commands never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Signals `child` once both commands run; returns its exit code and results by id.
fn interrupt(
    mut child: Child,
    dir: &Path,
    signal: Signal,
) -> (Option<i32>, HashMap<String, Vec<OutputResult>>) {
    wait_started(dir);
    kill(Pid::from_raw(child.id() as i32), signal).unwrap();
    let mut by_id: HashMap<String, Vec<OutputResult>> = HashMap::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let result: OutputResult = serde_json::from_str(&line.unwrap()).unwrap();
        by_id
            .entry(result.command_id.clone())
            .or_default()
            .push(result);
    }
    let status = child.wait().unwrap();
    (status.code(), by_id)
}

fn assert_interrupted(end: &OutputResult) {
    assert_eq!(end.status, ExecutionStatus::Failed, "{end:?}");
    assert_eq!(end.error_code.as_deref(), Some("CANCELLED"), "{end:?}");
    assert!(end.error.starts_with("interrupted"), "{end:?}");
}

#[test]
fn every_started_command_ends_with_its_terminal_line_then_130() {
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        let dir = tempfile::tempdir().unwrap();
        let (code, by_id) = interrupt(start(dir.path(), false), dir.path(), signal);
        assert_eq!(code, Some(130), "{signal}");
        for n in [1, 2] {
            let results = &by_id[&format!("long-{n}")];
            let (end, running) = results.split_last().unwrap();
            assert!(
                running.iter().all(|r| r.status == ExecutionStatus::Running),
                "{results:?}"
            );
            assert_eq!(results.iter().filter(|r| r.status.is_terminal()).count(), 1);
            assert_interrupted(end);
            let output: String = results.iter().map(|r| r.result_data.as_str()).collect();
            assert_eq!(output, format!("partial-{n}\n"));
        }
        assert!(!by_id.contains_key("never"), "{by_id:?}");
        assert!(
            !dir.path().join("never").exists(),
            "nothing starts after the signal"
        );
    }
}

#[test]
fn combine_prints_one_failed_line_per_started_command_with_its_data() {
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        let dir = tempfile::tempdir().unwrap();
        let (code, by_id) = interrupt(start(dir.path(), true), dir.path(), signal);
        assert_eq!(code, Some(130), "{signal}");
        for n in [1, 2] {
            let results = &by_id[&format!("long-{n}")];
            assert_eq!(results.len(), 1, "{results:?}");
            assert_interrupted(&results[0]);
            assert_eq!(results[0].result_data, format!("partial-{n}\n"));
            assert_eq!(results[0].command_type, "BASH_EXEC");
        }
        assert_eq!(by_id.len(), 2, "{by_id:?}");
    }
}

/// A cmdr started with signals ignored (as a shell starts a job run with `&`: `SIGINT` and
/// `SIGQUIT` ignored) still starts its commands with every signal at its default, or a
/// timeout's interrupt or a terminal's Ctrl-C would never reach them.
#[test]
fn commands_start_with_default_signals_however_cmdr_was_started() {
    let command = serde_json::json!({
        "command_id": "ignored",
        "commandType": "BASH_EXEC",
        "command": "grep ^SigIgn: /proc/self/status",
    });
    let script = format!(
        "trap '' INT QUIT TERM HUP USR1; echo '{command}' | exec '{}' exec --combine -",
        assert_cmd::cargo::cargo_bin("cmdr").display()
    );
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let result: OutputResult = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result.status, ExecutionStatus::Succeeded, "{result:?}");
    let ignored = result
        .result_data
        .trim()
        .strip_prefix("SigIgn:")
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or_else(|| panic!("no SigIgn line: {result:?}"));
    // Signals 1–31; glibc reserves 32 and 33 for itself (no program can set them).
    assert_eq!(
        ignored & 0x7fff_ffff,
        0,
        "signals left ignored: {ignored:#x}"
    );
}
