//! Persistent shell sessions (`BASH_EXEC` with `session`, docs/processes.md): state carries
//! over, exact exit codes and final cwd, timeouts interrupt the command not the session,
//! broken input cannot wedge the session, and sessions are processes (listed, killable).

use std::time::Duration;

use cmdr_executors::{
    ExecutionStatus, OutputResult, ProcessLimits, Registry, RegistryConfig, Scope,
};
use serde_json::{json, Value};

use cmdr_test_support::http::gone;
use cmdr_test_support::results::run_in;

use super::{assert_failed, data, eventually, run, terminal};

async fn in_session(registry: &Registry, session: &str, script: &str) -> (String, OutputResult) {
    in_session_with(
        registry,
        json!({"commandType": "BASH_EXEC", "session": session, "command": script}),
    )
    .await
}

async fn in_session_with(registry: &Registry, json: Value) -> (String, OutputResult) {
    let messages = run(registry, json).await;
    (data(&messages), terminal(&messages).clone())
}

#[tokio::test]
async fn directory_variables_and_functions_carry_over_with_exact_exit_codes() {
    let registry = Registry::with_defaults();
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let (_, first) = in_session(
        &registry,
        "main",
        &format!(
            "cd {} && X=5 && greet() {{ echo \"hi $1\"; }}",
            dir.display()
        ),
    )
    .await;
    assert_eq!(first.status, ExecutionStatus::Succeeded, "{first:#?}");
    assert_eq!(first.final_cwd.as_deref(), Some(dir.to_str().unwrap()));
    let (out, second) =
        in_session(&registry, "main", "echo $X; greet you; pwd; echo err >&2").await;
    assert_eq!(second.status, ExecutionStatus::Succeeded, "{second:#?}");
    assert!(
        out.starts_with(&format!("5\nhi you\n{}\n", dir.display())),
        "{out:?}"
    );
    assert!(out.contains("err\n"), "{out:?}");
    let (_, failed) = in_session(&registry, "main", "(exit 7)").await;
    assert_failed(&failed, "EXIT_STATUS");
    assert_eq!(failed.exit_code, Some(7));
    // Output without a final newline stays exactly as printed.
    let (out, _) = in_session(&registry, "main", "printf 'a\\nb'").await;
    assert_eq!(out, "a\nb");
    // Another name is another shell.
    let (out, _) = in_session(&registry, "other", "echo \"[$X]\"").await;
    assert_eq!(out, "[]\n");
}

#[tokio::test]
async fn any_text_and_any_directory_reach_the_shell_exactly() {
    let registry = Registry::with_defaults();
    let base = tempfile::tempdir().unwrap();
    let odd = base
        .path()
        .canonicalize()
        .unwrap()
        .join("it's 日本 $HOME \\ dir");
    std::fs::create_dir(&odd).unwrap();
    // Multi-byte text, quotes, backslashes, tabs and a carriage return, in a command whose
    // byte length differs from its length in characters.
    let script = "printf '%s|' 'é日🦀' \"it's\" 'a\\b' $'t\\tc\\r'; echo";
    let (out, first) = in_session(&registry, "s", script).await;
    assert_eq!(first.status, ExecutionStatus::Succeeded, "{first:#?}");
    assert_eq!(out, "é日🦀|it's|a\\b|t\tc\r|\n");
    let (out, there) = in_session_with(
        &registry,
        json!({"commandType": "BASH_EXEC", "session": "s", "command": "pwd; echo ok", "working_dir": odd}),
    )
    .await;
    assert_eq!(there.status, ExecutionStatus::Succeeded, "{there:#?}");
    assert_eq!(out, format!("{}\nok\n", odd.display()));
    assert_eq!(there.final_cwd.as_deref(), odd.to_str());
    // The `cd` carries over, as one typed in the shell.
    let (out, _) = in_session(&registry, "s", "pwd").await;
    assert_eq!(out, format!("{}\n", odd.display()));
}

#[tokio::test]
async fn a_timeout_interrupts_the_command_and_the_session_goes_on() {
    let registry = Registry::with_defaults();
    in_session(&registry, "s", "KEEP=kept").await;
    let (_, slow) = in_session_with(
        &registry,
        json!({"commandType": "BASH_EXEC", "session": "s", "command": "sleep 30", "timeout_ms": 300}),
    )
    .await;
    assert_eq!(slow.status, ExecutionStatus::Failed, "{slow:#?}");
    assert_eq!(slow.error_code.as_deref(), Some("TIMEOUT"), "{slow:#?}");
    let (out, after) = in_session(&registry, "s", "echo $KEEP").await;
    assert_eq!(after.status, ExecutionStatus::Succeeded, "{after:#?}");
    assert_eq!(out, "kept\n", "the session kept its state");
}

#[tokio::test]
async fn a_command_that_ignores_the_interrupt_ends_its_session_and_the_next_starts_anew() {
    let registry = Registry::with_defaults();
    in_session(&registry, "s", "KEEP=kept").await;
    let (_, stuck) = in_session_with(
        &registry,
        json!({"commandType": "BASH_EXEC", "session": "s", "command": "trap '' INT; sleep 30", "timeout_ms": 300}),
    )
    .await;
    assert_eq!(stuck.status, ExecutionStatus::Failed, "{stuck:#?}");
    let (out, fresh) = in_session(&registry, "s", "echo \"[$KEEP]\"").await;
    assert_eq!(fresh.status, ExecutionStatus::Succeeded, "{fresh:#?}");
    assert_eq!(out, "[]\n", "a new session, without the old state");
}

#[tokio::test]
async fn broken_input_cannot_wedge_a_session() {
    let registry = Registry::with_defaults();
    let (_, syntax) = in_session(&registry, "s", "echo \"unterminated").await;
    assert_eq!(syntax.exit_code, Some(2), "{syntax:#?}");
    let (out, _) = in_session(&registry, "s", "cat; echo after-cat").await;
    assert_eq!(out, "after-cat\n", "stdin is at end-of-file");
    // A command that prints the marker's start cannot end another command early.
    let (out, ok) = in_session(&registry, "s", "printf '\\036CMDR:fake:0:/\\0'; echo real").await;
    assert_eq!(ok.status, ExecutionStatus::Succeeded);
    assert!(out.ends_with("real\n"), "{out:?}");
    let (_, exited) = in_session(&registry, "s", "exit 3").await;
    assert_eq!(exited.exit_code, Some(3), "{exited:#?}");
    let (out, again) = in_session(&registry, "s", "echo back").await;
    assert_eq!(
        (out.as_str(), again.status),
        ("back\n", ExecutionStatus::Succeeded)
    );
    for bad in [
        json!({"commandType": "BASH_EXEC", "session": "", "command": "true"}),
        json!({"commandType": "BASH_EXEC", "session": "s", "command": "true", "background": true}),
        json!({"commandType": "BASH_EXEC", "session": "s", "command": "true", "env": {"A": "1"}}),
    ] {
        let (_, result) = in_session_with(&registry, bad).await;
        assert_failed(&result, "INVALID_INPUT");
    }
}

#[tokio::test]
async fn a_session_is_a_process_listed_and_killable_but_takes_no_raw_input() {
    let registry = Registry::with_defaults();
    in_session(&registry, "work", "true").await;
    let list = terminal(&run(&registry, json!({"commandType": "PROCESS_LIST"})).await).clone();
    let entries: Vec<Value> = serde_json::from_str(&list.result_data).unwrap();
    let session = entries
        .iter()
        .find(|e| e["command"] == "session work")
        .unwrap_or_else(|| panic!("{entries:?}"));
    let id = session["processId"].as_str().unwrap().to_owned();
    let input = terminal(
        &run(
            &registry,
            json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": "rm -rf /\n"}),
        )
        .await,
    )
    .clone();
    assert_failed(&input, "INVALID_INPUT");
    let killed = terminal(
        &run(
            &registry,
            json!({"commandType": "PROCESS_KILL", "process_id": id}),
        )
        .await,
    )
    .clone();
    assert_eq!(
        killed.process_state.as_deref(),
        Some("exited"),
        "{killed:#?}"
    );
    let (out, _) = in_session(&registry, "work", "echo new").await;
    assert_eq!(out, "new\n");
    registry.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn first_commands_arriving_together_share_one_shell() {
    let registry = Registry::with_defaults();
    let runs = (0..8).map(|_| in_session(&registry, "together", "echo $$"));
    let pids: Vec<String> = futures_util::future::join_all(runs)
        .await
        .into_iter()
        .map(|(out, end)| {
            assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:?}");
            out.trim().to_owned()
        })
        .collect();
    assert!(pids.iter().all(|p| p == &pids[0]), "{pids:?}");
    let (_, list) = in_session_with(&registry, json!({"commandType": "PROCESS_LIST"})).await;
    let listed: Vec<Value> = serde_json::from_str(&list.result_data).unwrap();
    let shells = listed
        .iter()
        .filter(|p| p["command"] == "session together")
        .count();
    assert_eq!(shells, 1, "{listed:?}");
    registry.shutdown(Duration::from_secs(1)).await;
}

/// A command cannot forge the next command's end: it leaves behind a job that, once the
/// next command runs, prints end markers for every token it could guess (the sequence
/// numbers the markers used to carry, in the old and the new width). The next command
/// still runs to its real end, with its own output, status and directory.
#[tokio::test]
async fn a_command_cannot_forge_the_next_commands_end() {
    let registry = Registry::with_defaults();
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let forger = format!(
        "(while [ ! -e {go} ]; do sleep 0.02; done; \
          for n in 0 1 2 3 4 5 6 7; do \
            printf '\\036CMDR:%08x:0:/forged\\0' $n; printf '\\036CMDR:%032x:0:/forged\\0' $n; \
          done) & echo planted",
        go = go.display()
    );
    let (planted, _) = in_session(&registry, "forge", &forger).await;
    assert_eq!(planted, "planted\n");
    let real = format!("touch {}; sleep 1; echo real; (exit 3)", go.display());
    let (output, end) = in_session(&registry, "forge", &real).await;
    assert!(output.ends_with("real\n"), "{output:?} {end:?}");
    assert_eq!(end.exit_code, Some(3), "{end:?}");
    assert_ne!(end.final_cwd.as_deref(), Some("/forged"), "{end:?}");
}

/// Runs `command` in session `name` of `scope`: its terminal result and output.
async fn scoped(
    registry: &Registry,
    scope: &Scope,
    name: &str,
    command: &str,
) -> (String, OutputResult) {
    let json = json!({"commandType": "BASH_EXEC", "command": command, "session": name});
    let messages = run_in(registry, scope.clone(), json).await;
    (data(&messages), terminal(&messages).clone())
}

/// One client filling its scope's sessions locks out no one: sessions have their own cap
/// per scope (below the scope's process cap), so the scope still starts processes, and
/// another scope still starts sessions.
#[tokio::test]
async fn a_scope_full_of_sessions_leaves_room_for_processes_and_other_scopes() {
    let registry = Registry::with_config(RegistryConfig {
        processes: ProcessLimits {
            max_running_per_scope: 4,
            max_sessions_per_scope: 2,
            ..ProcessLimits::default()
        },
        ..RegistryConfig::default()
    });
    let (greedy, other) = (Scope::new("http:shared"), Scope::new("mcp:other"));
    for name in ["a", "b"] {
        let (_, end) = scoped(&registry, &greedy, name, "true").await;
        assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:#?}");
    }
    let (_, refused) = scoped(&registry, &greedy, "c", "true").await;
    assert_failed(&refused, "TOO_MANY_PROCESSES");
    assert!(
        refused.error.contains("sessions in this scope"),
        "{refused:#?}"
    );
    // The kept sessions still run commands.
    let (out, _) = scoped(&registry, &greedy, "a", "echo still").await;
    assert_eq!(out, "still\n");
    // The same scope still starts processes (its process cap is not used up) …
    let background = json!({"commandType": "BASH_EXEC", "command": "sleep 60", "background": true, "yield_ms": 50});
    let started = terminal(&run_in(&registry, greedy.clone(), background).await).clone();
    assert_eq!(started.status, ExecutionStatus::Succeeded, "{started:#?}");
    // … and another scope starts sessions.
    let (_, end) = scoped(&registry, &other, "a", "true").await;
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:#?}");
    registry.shutdown(Duration::from_secs(1)).await;
}

/// A session left idle past its limit has its shell ended (and frees its place); the same
/// name then starts a fresh shell.
#[tokio::test]
async fn an_idle_session_expires_and_frees_its_place() {
    let registry = Registry::with_config(RegistryConfig {
        processes: ProcessLimits {
            max_sessions_per_scope: 1,
            session_idle: Duration::from_secs(1),
            ..ProcessLimits::default()
        },
        ..RegistryConfig::default()
    });
    let scope = Scope::new("mcp:idle");
    let (out, _) = scoped(&registry, &scope, "a", "echo $$").await;
    let first: i32 = out.trim().parse().expect("a pid");
    eventually("the idle session's shell is ended", || gone(first)).await;
    let (out, end) = scoped(&registry, &scope, "b", "echo $$").await;
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:#?}");
    assert_ne!(out.trim(), first.to_string());
    registry.shutdown(Duration::from_secs(1)).await;
}
