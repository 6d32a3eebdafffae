//! `cmdr exec` driving background processes from one JSON Lines file (docs/processes.md,
//! "`cmdr exec`"): a prompt started, answered, read, listed and killed; a process named by
//! the command that started it, even with `--jobs`; and every process of the run gone
//! when `cmdr exec` ends.

use std::collections::HashMap;
use std::time::Instant;

use assert_cmd::Command;
use cmdr_executors::{ExecutionStatus, OutputResult};
use cmdr_test_support::http::gone;
use serde_json::{json, Value};

use super::PATIENCE;

/// Runs `cmdr exec <args> <file of lines>`; its results by command id (in order) and all
/// of them in printed order.
fn exec(
    args: &[&str],
    lines: &[Value],
) -> (HashMap<String, Vec<OutputResult>>, Vec<OutputResult>, i32) {
    let file = tempfile::NamedTempFile::new().unwrap();
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(file.path(), text).unwrap();
    let out = Command::cargo_bin("cmdr")
        .unwrap()
        .arg("exec")
        .args(args)
        .arg(file.path())
        .timeout(PATIENCE)
        .output()
        .unwrap();
    let printed: Vec<OutputResult> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    let mut by_id: HashMap<String, Vec<OutputResult>> = HashMap::new();
    for r in &printed {
        by_id
            .entry(r.command_id.clone())
            .or_default()
            .push(r.clone());
    }
    (by_id, printed, out.status.code().unwrap_or(-1))
}

fn end<'a>(results: &'a HashMap<String, Vec<OutputResult>>, id: &str) -> &'a OutputResult {
    let messages = results
        .get(id)
        .unwrap_or_else(|| panic!("no results for {id}: {results:#?}"));
    super::assert_one_terminal_last(messages);
    super::terminal(messages)
}

fn wait_gone(pid: i32) {
    let deadline = Instant::now() + PATIENCE;
    while !gone(pid) {
        assert!(
            Instant::now() < deadline,
            "process {pid} outlived cmdr exec"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn one_file_starts_a_prompt_answers_it_reads_it_and_kills_it() {
    let prompt = "printf 'Proceed? [y/N] '; read -r a; echo \"answer=$a\"; exec sleep 300";
    let lines = [
        json!({"command_id": "installer", "commandType": "BASH_EXEC", "command": prompt,
               "background": true, "ready": {"output": "Proceed\\?"}}),
        json!({"command_id": "left", "commandType": "BASH_EXEC", "command": "exec sleep 300",
               "background": true, "yield_ms": 0}),
        // By the command that started it …
        json!({"command_id": "answer", "commandType": "PROCESS_INPUT",
               "process_id": "installer", "input": "y\n", "yield_ms": 0}),
        // … or by its id: p1, p2 … in start order in a fresh run.
        json!({"command_id": "read", "commandType": "PROCESS_OUTPUT", "process_id": "p1",
               "offset": 15, "wait_ms": 10000}),
        json!({"command_id": "list", "commandType": "PROCESS_LIST"}),
        json!({"command_id": "kill", "commandType": "PROCESS_KILL", "process_id": "installer"}),
    ];
    let (results, _, code) = exec(&["--combine"], &lines);
    assert_eq!(code, 0, "{results:#?}");
    let started = end(&results, "installer");
    assert_eq!(started.status, ExecutionStatus::Succeeded, "{started:#?}");
    assert_eq!(started.process_id.as_deref(), Some("p1"));
    assert_eq!(started.result_data, "Proceed? [y/N] ");
    assert_eq!(end(&results, "left").process_id.as_deref(), Some("p2"));
    let answered = end(&results, "answer");
    assert_eq!(answered.status, ExecutionStatus::Succeeded, "{answered:#?}");
    assert_eq!(answered.process_id.as_deref(), Some("p1"));
    let read = end(&results, "read");
    assert_eq!(read.result_data, "answer=y\n", "{read:#?}");
    let list: Vec<Value> = serde_json::from_str(&end(&results, "list").result_data).unwrap();
    assert_eq!(list.len(), 2, "{list:#?}");
    let pids: Vec<i32> = list
        .iter()
        .map(|p| p["pid"].as_i64().unwrap() as i32)
        .collect();
    let killed = end(&results, "kill");
    assert_eq!(killed.status, ExecutionStatus::Succeeded, "{killed:#?}");
    assert_eq!(killed.process_state.as_deref(), Some("exited"));
    // p2 was never stopped: it died with the run, like the one that was killed.
    for pid in pids {
        wait_gone(pid);
    }
}

#[test]
fn with_jobs_a_line_naming_a_start_waits_for_it() {
    let lines = [
        json!({"command_id": "server", "commandType": "BASH_EXEC", "background": true,
               "command": "sleep 0.3; echo up; exec sleep 300", "ready": {"output": "up"}}),
        json!({"command_id": "stop", "commandType": "PROCESS_KILL", "process_id": "server",
               "signal": "KILL"}),
        json!({"command_id": "oneshot", "commandType": "BASH_EXEC", "command": "true"}),
        json!({"command_id": "nothing", "commandType": "PROCESS_OUTPUT",
               "process_id": "oneshot"}),
    ];
    let (results, printed, code) = exec(&["--jobs", "8", "--combine"], &lines);
    assert_eq!(code, 1, "the last line fails: {results:#?}");
    let stop = end(&results, "stop");
    assert_eq!(stop.status, ExecutionStatus::Succeeded, "{stop:#?}");
    assert_eq!(stop.process_id.as_deref(), Some("p1"));
    let order: Vec<&str> = printed.iter().map(|r| r.command_id.as_str()).collect();
    let at = |id| order.iter().position(|o| *o == id).unwrap();
    assert!(at("server") < at("stop"), "{order:?}");
    // A command that started no process names none.
    super::assert_failed(end(&results, "nothing"), "PROCESS_NOT_FOUND");
}

/// A command cmdr runs cannot read cmdr's environment through `/proc/$PPID/environ` (the
/// model's API key, tokens), although it runs as the same user: cmdr is not dumpable.
/// Under root, cmdr is started as `nobody` (root's commands may read anything).
#[test]
fn a_command_cannot_read_cmdrs_secrets_from_proc() {
    let secret = "sk-attack-probe-5f1c9e";
    let cmdr = Command::cargo_bin("cmdr").unwrap();
    let program = cmdr.get_program().to_owned();
    let mut command = if nix::unistd::geteuid().is_root() {
        let mut c = std::process::Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(&program);
        c
    } else {
        std::process::Command::new(&program)
    };
    let probe =
        "echo \"parent=$(tr '\\0' ' ' < /proc/$PPID/cmdline | cut -d' ' -f1 | xargs basename)\"; \
        tr '\\0' '\\n' < /proc/$PPID/environ | grep CMDR_LLM_API_KEY; echo end";
    let line = json!({"command_id": "probe", "commandType": "BASH_EXEC", "command": probe});
    command
        .arg("exec")
        .current_dir("/")
        .env("CMDR_LLM_API_KEY", secret)
        .env("HOME", "/");
    let out = Command::from_std(command)
        .write_stdin(format!("{line}\n"))
        .timeout(PATIENCE)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The probe ran, under cmdr, and read nothing of it.
    assert!(stdout.contains("parent=cmdr"), "{stdout}");
    assert!(stdout.contains("end"), "{stdout}");
    assert!(!stdout.contains(secret), "cmdr's secret leaked: {stdout}");
    assert!(stdout.contains("Permission denied"), "{stdout}");
}
