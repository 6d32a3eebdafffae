//! `tty` background processes (docs/processes.md, "Terminals") on real pseudo-terminals:
//! programs see a terminal, prompts that refuse a pipe are answered, the size follows a
//! resize, `^C` interrupts the foreground program through the line discipline, `^D` is
//! end-of-file, and the whole tree dies on kill.

use std::time::Duration;

use cmdr_executors::{
    BashExecConfig, ExecutionStatus, OutputResult, Registry, RegistryConfig, Scope,
};
use serde_json::{json, Value};

use cmdr_test_support::http::gone;

use super::processes::{one, read_until};
use super::{assert_failed, eventually, PATIENCE};

/// Starts `script` under a terminal with the extra `fields`; its id and start result.
async fn start_tty(registry: &Registry, script: &str, fields: Value) -> (String, OutputResult) {
    let mut json = json!({"commandType": "BASH_EXEC", "command": script, "background": true,
                          "tty": true, "yield_ms": 100});
    if let (Some(json), Some(extra)) = (json.as_object_mut(), fields.as_object()) {
        json.extend(extra.clone());
    }
    let end = one(registry, json).await;
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:#?}");
    (end.process_id.clone().expect("a process id"), end)
}

async fn input(registry: &Registry, id: &str, fields: Value) -> OutputResult {
    let mut json = json!({"commandType": "PROCESS_INPUT", "process_id": id});
    if let (Some(json), Some(extra)) = (json.as_object_mut(), fields.as_object()) {
        json.extend(extra.clone());
    }
    let reply = one(registry, json).await;
    assert_eq!(reply.status, ExecutionStatus::Succeeded, "{reply:#?}");
    reply
}

async fn wait_exited(registry: &Registry, id: &str) -> Option<i32> {
    let process = registry.processes().get(&Scope::default(), id).unwrap();
    let state = process.wait_exit(PATIENCE).await;
    assert_eq!(state.name(), "exited", "{id} exits");
    state.exit_code()
}

#[tokio::test]
async fn a_tty_process_sees_a_terminal_and_its_bytes_are_kept_as_written() {
    let registry = Registry::with_defaults();
    let (id, _) = start_tty(
        &registry,
        "test -t 0 && test -t 1 && test -t 2 && echo \"terminal: $TERM\"; \
         printf 'red:\\033[31mR\\033[0m\\n'",
        json!({"ready": {"output": "red"}}),
    )
    .await;
    assert_eq!(wait_exited(&registry, &id).await, Some(0));
    let text = read_until(&registry, &id, "red:").await;
    assert!(text.contains("terminal: xterm-256color\r\n"), "{text:?}");
    assert!(text.contains("\u{1b}[31mR\u{1b}[0m\r\n"), "{text:?}");
    // The same test on a pipe process fails: the check can tell them apart.
    let piped = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": "test -t 0 || test -t 1 || echo piped",
               "background": true, "yield_ms": 100}),
    )
    .await;
    let piped_id = piped.process_id.clone().unwrap();
    wait_exited(&registry, &piped_id).await;
    assert!(read_until(&registry, &piped_id, "piped")
        .await
        .contains("piped\n"));
    let list = one(&registry, json!({"commandType": "PROCESS_LIST"})).await;
    let entries: Vec<Value> = serde_json::from_str(&list.result_data).unwrap();
    let tty_of = |id: &str| {
        entries
            .iter()
            .find(|e| e["processId"] == id)
            .map(|e| e["tty"].clone())
    };
    assert_eq!(tty_of(&id), Some(json!(true)));
    assert_eq!(tty_of(&piped_id), Some(json!(false)));
}

#[tokio::test]
async fn a_prompt_that_refuses_a_pipe_is_answered_through_the_terminal() {
    let registry = Registry::with_defaults();
    let script = "python3 -c 'import sys; assert sys.stdin.isatty(); \
                  print(\"answer=\" + input(\"Proceed? [y/N] \"))'";
    let (id, _) = start_tty(&registry, script, json!({})).await;
    read_until(&registry, &id, "Proceed? [y/N] ").await;
    let reply = input(&registry, &id, json!({"input": "y\n", "yield_ms": 30000})).await;
    assert!(reply.result_data.contains("answer=y"), "{reply:#?}");
    assert_eq!(wait_exited(&registry, &id).await, Some(0));
    // Without a terminal the same program refuses.
    let piped = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": script, "background": true, "yield_ms": 100}),
    )
    .await;
    let piped_id = piped.process_id.clone().unwrap();
    assert_eq!(wait_exited(&registry, &piped_id).await, Some(1));
    assert!(read_until(&registry, &piped_id, "AssertionError")
        .await
        .contains("AssertionError"));
}

#[tokio::test]
async fn stty_size_reports_the_size_given_and_follows_a_resize() {
    let registry = Registry::with_defaults();
    let (id, _) = start_tty(
        &registry,
        "echo \"size=$(stty size)\"; read -r _; echo \"size=$(stty size)\"",
        json!({"cols": 100, "rows": 30}),
    )
    .await;
    read_until(&registry, &id, "size=30 100\r\n").await;
    // A resize alone (empty input), then the line that lets the script go on.
    let resized = input(&registry, &id, json!({"cols": 132, "rows": 43})).await;
    assert!(
        resized.message.contains("resized to 132x43"),
        "{resized:#?}"
    );
    let reply = input(&registry, &id, json!({"input": "\n", "yield_ms": 30000})).await;
    assert!(reply.result_data.contains("size=43 132\r\n"), "{reply:#?}");
    assert_eq!(wait_exited(&registry, &id).await, Some(0));
}

#[tokio::test]
async fn the_default_size_is_80_by_24() {
    let registry = Registry::with_defaults();
    let (id, _) = start_tty(&registry, "stty size", json!({})).await;
    assert_eq!(wait_exited(&registry, &id).await, Some(0));
    assert!(read_until(&registry, &id, "\n").await.contains("24 80\r\n"));
}

#[tokio::test]
async fn ctrl_c_interrupts_the_foreground_program_and_the_prompt_returns() {
    let registry = Registry::with_defaults();
    let (id, _) = start_tty(
        &registry,
        // (A non-interactive bash drops PS1 from its environment: set it for the inner one.)
        "exec env PS1='prompt> ' bash --norc --noprofile -i",
        json!({}),
    )
    .await;
    read_until(&registry, &id, "prompt> ").await;
    let started = std::time::Instant::now();
    input(
        &registry,
        &id,
        json!({"input": "echo started-$((6*7)); sleep 100; echo not-interrupted\n", "yield_ms": 0}),
    )
    .await;
    read_until(&registry, &id, "started-42").await;
    // ^C goes to the terminal's foreground process group: wait until that is sleep's, and
    // sleep runs (the shell hands the terminal to its job just before the exec: a ^C
    // then would reach bash's own handler in the child instead).
    let shell = registry
        .processes()
        .get(&Scope::default(), &id)
        .unwrap()
        .pid
        .unwrap();
    eventually("sleep holds the terminal", || {
        foreground_group(shell).is_some_and(|group| {
            group != shell
                && std::fs::read_to_string(format!("/proc/{group}/comm"))
                    .is_ok_and(|name| name.trim() == "sleep")
        })
    })
    .await;
    input(&registry, &id, json!({"input": "\u{3}", "yield_ms": 0})).await;
    input(
        &registry,
        &id,
        json!({"input": "echo status=$?\n", "yield_ms": 0}),
    )
    .await;
    let text = read_until(&registry, &id, "status=130").await;
    assert!(started.elapsed() < Duration::from_secs(100));
    // Only the echo of the typed line: the rest of the line was abandoned.
    assert_eq!(text.matches("not-interrupted").count(), 1, "{text:?}");
    assert!(text.contains("^C"), "the terminal echoed ^C: {text:?}");
    let process = registry.processes().get(&Scope::default(), &id).unwrap();
    assert_eq!(process.state().name(), "running", "the shell survived ^C");
    registry.shutdown(Duration::from_secs(1)).await;
}

/// The foreground process group of `pid`'s controlling terminal (`tpgid` in its stat).
fn foreground_group(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(5)?
        .parse()
        .ok()
}

#[tokio::test]
async fn end_of_file_is_typed_as_ctrl_d_even_after_a_partial_line() {
    let registry = Registry::with_defaults();
    let (id, _) = start_tty(&registry, "cat; echo cat-ended", json!({})).await;
    let reply = input(
        &registry,
        &id,
        json!({"input": "partial", "close_stdin": true, "yield_ms": 30000}),
    )
    .await;
    assert!(reply.message.contains("end-of-file"), "{reply:#?}");
    assert!(reply.result_data.contains("cat-ended"), "{reply:#?}");
    assert_eq!(wait_exited(&registry, &id).await, Some(0));
}

#[tokio::test]
async fn killing_a_tty_process_takes_its_whole_tree_by_cgroup_or_marker() {
    for cgroups in [true, false] {
        let registry = Registry::with_config(RegistryConfig {
            bash: BashExecConfig {
                cgroups,
                ..BashExecConfig::default()
            },
            ..RegistryConfig::default()
        });
        let (id, _) = start_tty(
            &registry,
            "trap '' TERM HUP; setsid sleep 300 & echo \"child=$!\"; while :; do sleep 0.05; done",
            json!({}),
        )
        .await;
        let text = read_until(&registry, &id, "\r\n").await;
        let child: i32 = text
            .trim()
            .strip_prefix("child=")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{text:?}"));
        let killed = one(
            &registry,
            json!({"commandType": "PROCESS_KILL", "process_id": id, "grace_ms": 200}),
        )
        .await;
        assert_eq!(killed.status, ExecutionStatus::Succeeded, "{killed:#?}");
        assert!(killed.message.contains("signal 9"), "{killed:#?}");
        eventually("the setsid child is gone", || gone(child)).await;
    }
}

#[tokio::test]
async fn tty_fields_out_of_place_are_refused() {
    let registry = Registry::with_defaults();
    for json in [
        json!({"commandType": "BASH_EXEC", "command": "true", "tty": true}),
        json!({"commandType": "BASH_EXEC", "command": "true", "tty": true, "session": "s"}),
        json!({"commandType": "BASH_EXEC", "command": "true", "background": true, "cols": 100}),
        json!({"commandType": "BASH_EXEC", "command": "true", "background": true, "tty": true, "rows": 0}),
    ] {
        assert_failed(&one(&registry, json.clone()).await, "INVALID_INPUT");
    }
    let piped = one(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": "sleep 60", "background": true, "yield_ms": 0}),
    )
    .await;
    let piped_id = piped.process_id.clone().unwrap();
    let resize = one(
        &registry,
        json!({"commandType": "PROCESS_INPUT", "process_id": piped_id, "cols": 100}),
    )
    .await;
    assert_failed(&resize, "INVALID_INPUT");
    assert!(resize.error.contains("tty"), "{resize:#?}");
    let (tty_id, _) = start_tty(&registry, "sleep 60", json!({})).await;
    let zero = one(
        &registry,
        json!({"commandType": "PROCESS_INPUT", "process_id": tty_id, "cols": 0}),
    )
    .await;
    assert_failed(&zero, "INVALID_INPUT");
    registry.shutdown(Duration::from_secs(1)).await;
}

/// Issue 33: a `tty` process has `TERM=xterm-256color`, so `git log` longer than a screen
/// would open `less` and wait for a key nobody types. Pagers are `cat` by default
/// (`EnvPolicy`, docs/security.md): the log is printed and the process ends on its own.
#[tokio::test]
async fn git_log_in_a_tty_process_prints_and_ends_instead_of_paging() {
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=cmdr",
                "-c",
                "user.email=cmdr@example.invalid",
            ])
            .args(["-c", "commit.gpgsign=false"])
            .args(args)
            .current_dir(repo.path())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    // Far more than a 24-row screen: `less -F` (git's default) would not quit at once.
    for i in 1..=40 {
        git(&[
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            &format!("change number {i}"),
        ]);
    }
    let registry = Registry::with_defaults();
    let (id, _) = start_tty(
        &registry,
        "git log && echo logged",
        json!({"working_dir": repo.path()}),
    )
    .await;
    assert_eq!(wait_exited(&registry, &id).await, Some(0));
    let text = read_until(&registry, &id, "logged").await;
    assert!(
        text.contains("change number 1\r\n") && text.contains("change number 40\r\n"),
        "{text:?}"
    );
}
