//! `BASH_EXEC` with real processes: output streaming, exit status, cwd, env, stdin,
//! timeouts and cancellation killing whole process trees, orphans, encoding.

use std::time::{Duration, Instant};

use cmdr_executors::{ExecutionStatus, Registry, FLUSH_BYTES};
use serde_json::json;

use super::{assert_failed, collect, command, data, eventually, run, terminal};

fn bash(script: &str) -> serde_json::Value {
    json!({"commandType": "BASH_EXEC", "command": script})
}

/// True when `pid` no longer runs (gone, or a zombie waiting to be reaped).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn output_streams_and_the_terminal_reports_exit_cwd_and_duration() {
    let registry = Registry::with_defaults();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let script = format!("echo out; echo err >&2; cd {}", dir.display());
    let messages = run(
        &registry,
        json!({"command_id":"b1","commandType":"BASH_EXEC","command":script}),
    )
    .await;
    let end = terminal(&messages);
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:?}");
    assert_eq!(end.command_id, "b1");
    assert_eq!(end.exit_code, Some(0));
    let cwd = dir.display().to_string();
    assert_eq!(end.final_cwd.as_deref(), Some(cwd.as_str()));
    assert!(
        end.message.starts_with("Command finished in "),
        "{}",
        end.message
    );
    assert!(
        end.message.ends_with(&format!("Final CWD: {cwd}.")),
        "{}",
        end.message
    );
    assert!(end.duration_ms.is_some());
    let output = data(&messages);
    assert!(
        output.contains("out\n") && output.contains("err\n"),
        "{output:?}"
    );
    assert!(
        !output.contains(&cwd),
        "the cwd report is not part of the output"
    );
}

#[tokio::test]
async fn a_command_writes_into_a_pipe_of_256_kib() {
    // F_GETPIPE_SZ (1032) on the shell's stdout: 64 KiB is the kernel's default.
    let registry = Registry::with_defaults();
    let messages = run(
        &registry,
        bash("python3 -c 'import fcntl; print(fcntl.fcntl(1, 1032))'"),
    )
    .await;
    assert_eq!(terminal(&messages).status, ExecutionStatus::Succeeded);
    assert_eq!(data(&messages), format!("{}\n", 256 * 1024));
}

#[tokio::test]
async fn non_zero_exit_is_failed_with_the_status() {
    let registry = Registry::with_defaults();
    let messages = run(&registry, bash("echo partial; exit 3")).await;
    let end = terminal(&messages);
    assert_failed(end, "EXIT_STATUS");
    assert_eq!(end.exit_code, Some(3));
    assert!(end.error.contains('3'));
    assert_eq!(data(&messages), "partial\n");
}

#[tokio::test]
async fn working_dir_and_env_apply() {
    let registry = Registry::with_defaults();
    let tmp = tempfile::tempdir().unwrap();
    let messages = run(
        &registry,
        json!({"commandType":"BASH_EXEC","command":"pwd; echo \"$GREETING\"",
               "working_dir": tmp.path(), "env": {"GREETING": "hello there"}}),
    )
    .await;
    let expected = format!("{}\nhello there\n", tmp.path().display());
    assert_eq!(data(&messages), expected);
}

#[tokio::test]
async fn a_bad_working_dir_is_refused_clearly() {
    let registry = Registry::with_defaults();
    let relative = run(
        &registry,
        json!({"commandType":"BASH_EXEC","command":"true","working_dir":"rel/dir"}),
    )
    .await;
    assert_failed(terminal(&relative), "INVALID_INPUT");
    assert!(terminal(&relative).error.contains("absolute"));
    let missing = run(
        &registry,
        json!({"commandType":"BASH_EXEC","command":"true","working_dir":"/no/such/dir"}),
    )
    .await;
    assert_failed(terminal(&missing), "NOT_FOUND");
}

#[tokio::test]
async fn a_command_reading_stdin_gets_eof_and_ends() {
    let registry = Registry::with_defaults();
    let messages = run(&registry, bash("cat; read line; echo \"read:$?\"")).await;
    assert_eq!(terminal(&messages).status, ExecutionStatus::Succeeded);
    assert_eq!(data(&messages), "read:1\n");
}

#[tokio::test]
async fn cancel_kills_the_whole_process_tree() {
    let registry = Registry::with_defaults();
    let script = "sleep 1000 & echo $!; sleep 1000 & echo $!; wait";
    let mut stream = registry.execute(command(bash(script))).await.unwrap();
    let mut seen = String::new();
    while seen.lines().count() < 2 {
        let message = stream.next().await.expect("output before the end");
        seen.push_str(&message.result_data);
    }
    let pids: Vec<i32> = seen.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert!(pids.iter().all(|&p| !gone(p)), "both sleeps run");
    assert!(registry.cancel(stream.command_id()));
    let messages = collect(stream).await;
    assert_failed(terminal(&messages), "CANCELLED");
    eventually("both sleeps are gone", || pids.iter().all(|&p| gone(p))).await;
}

#[tokio::test]
async fn timeout_kills_the_tree_and_says_so() {
    let registry = Registry::with_defaults();
    let started = Instant::now();
    let messages = run(
        &registry,
        json!({"commandType":"BASH_EXEC","command":"sleep 1000 & echo $!; sleep 1000","timeout_ms":300}),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    let end = terminal(&messages);
    assert_failed(end, "TIMEOUT");
    assert!(end.error.contains("300ms"), "{end:?}");
    let pid: i32 = data(&messages).trim().parse().unwrap();
    eventually("the background sleep is gone", || gone(pid)).await;
}

#[tokio::test]
async fn a_shell_ignoring_sigterm_is_killed_after_the_grace() {
    let registry = Registry::with_defaults();
    let messages = run(
        &registry,
        json!({"commandType":"BASH_EXEC","command":"trap '' TERM; while true; do sleep 0.05; done","timeout_ms":100}),
    )
    .await;
    assert_failed(terminal(&messages), "TIMEOUT");
}

/// A tree killed whole leaves a cgroup Linux kills every later child cloned into (its
/// `cgroup.kill` count): the commands after it must still run, whichever way their shells
/// are started. The first shells also prove they were born inside their tree: their
/// `/proc/self/cgroup` names a cgroup of this process's own.
#[tokio::test]
async fn commands_after_a_tree_killed_whole_still_run_inside_their_own_cgroup() {
    let registry = Registry::with_defaults();
    for _ in 0..3 {
        let killed = run(
            &registry,
            json!({"commandType":"BASH_EXEC","command":"trap '' TERM; while true; do sleep 0.05; done","timeout_ms":100}),
        )
        .await;
        assert_failed(terminal(&killed), "TIMEOUT");
        for _ in 0..3 {
            let messages = run(&registry, bash("echo ok; cat /proc/$$/cgroup")).await;
            let end = terminal(&messages);
            assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:?}");
            let output = data(&messages);
            assert!(output.starts_with("ok\n"), "{output:?}");
            let trees = &registry.confinement().process_trees;
            if matches!(trees, Some(cmdr_executors::TreeMechanism::Cgroup(_))) {
                let own = format!("/cmdr-{}/c", std::process::id());
                assert!(
                    output.contains(&own),
                    "not in a cgroup of its own: {output:?}"
                );
            }
        }
    }
}

/// A descriptor cmdr inherited without close-on-exec (from a careless parent: a socket to
/// a privileged service, say) must not reach the commands it runs.
#[tokio::test]
async fn a_descriptor_cmdr_inherited_without_close_on_exec_does_not_reach_the_shell() {
    let registry = Registry::with_defaults();
    let null = std::fs::File::open("/dev/null").unwrap();
    // `dup` makes a copy without close-on-exec, as an inherited descriptor would be.
    let leaked = nix::unistd::dup(&null).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&leaked);
    let messages = run(&registry, bash("exec ls /proc/self/fd")).await;
    let end = terminal(&messages);
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:?}");
    let fds: Vec<i32> = data(&messages)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert!(fds.contains(&0) && fds.contains(&2), "{fds:?}");
    assert!(!fds.contains(&fd), "fd {fd} reached the shell: {fds:?}");
}

#[tokio::test]
async fn an_orphan_holding_the_pipes_does_not_hang_the_result() {
    let registry = Registry::with_defaults();
    let started = Instant::now();
    let messages = run(&registry, bash("sleep 30 & echo $!; echo started")).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    let end = terminal(&messages);
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:?}");
    let output = data(&messages);
    let pid: i32 = output.lines().next().unwrap().parse().unwrap();
    assert!(output.ends_with("started\n"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .ok();
}

#[tokio::test]
async fn output_is_coalesced_not_one_message_per_line() {
    let registry = Registry::with_defaults();
    let messages = run(
        &registry,
        bash("for i in $(seq 1 5000); do echo line $i; done"),
    )
    .await;
    let expected: String = (1..=5000).map(|i| format!("line {i}\n")).collect();
    assert_eq!(data(&messages), expected);
    assert!(
        messages.len() < 100,
        "{} messages for 5000 lines",
        messages.len()
    );
    assert!(messages
        .iter()
        .all(|m| m.result_data.len() <= 2 * FLUSH_BYTES));
}

#[tokio::test]
async fn utf8_is_never_split_and_invalid_bytes_become_replacement_characters() {
    let registry = Registry::with_defaults();
    let script = "for i in $(seq 1 40000); do printf '€'; done; printf 'a\\377b'";
    let messages = run(&registry, bash(script)).await;
    let expected = format!("{}a\u{FFFD}b", "€".repeat(40000));
    assert_eq!(data(&messages), expected);
    assert!(messages.len() > 2, "the output spans several chunks");
}

#[tokio::test]
async fn binary_output_arrives_as_text_with_replacements() {
    let registry = Registry::with_defaults();
    let messages = run(&registry, bash("head -c 300000 /dev/urandom")).await;
    assert_eq!(terminal(&messages).status, ExecutionStatus::Succeeded);
    assert!(data(&messages).chars().count() > 100_000);
}

#[tokio::test]
async fn final_cwd_is_absent_when_the_script_replaces_the_exit_trap() {
    let registry = Registry::with_defaults();
    let messages = run(&registry, bash("trap 'echo bye' EXIT; cd /")).await;
    let end = terminal(&messages);
    assert_eq!(end.status, ExecutionStatus::Succeeded);
    assert_eq!(end.final_cwd, None);
    assert!(end.message.contains("Final CWD: unknown"));
    assert_eq!(data(&messages), "bye\n");
}

#[tokio::test]
async fn syntax_errors_fail_with_bash_own_message() {
    let registry = Registry::with_defaults();
    let messages = run(&registry, bash("echo (")).await;
    assert_failed(terminal(&messages), "EXIT_STATUS");
    assert!(data(&messages).contains("syntax error"), "{messages:?}");
    assert!(
        data(&messages).contains("line 1"),
        "line numbers are the user's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_shell_commands_each_end_once() {
    let registry = Registry::with_defaults();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..1000 {
        let registry = registry.clone();
        tasks.spawn(async move {
            let dir = ["/", "/tmp", "/usr", "/var"][i % 4];
            let messages = run(&registry, bash(&format!("cd {dir}; echo {i}"))).await;
            let end = terminal(&messages);
            assert_eq!(end.status, ExecutionStatus::Succeeded);
            assert_eq!(
                end.final_cwd.as_deref(),
                Some(dir),
                "each shell reports its own cwd"
            );
            assert_eq!(data(&messages), format!("{i}\n"));
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    assert_eq!(registry.in_flight_count(), 0);
}

#[tokio::test]
async fn configured_variables_reach_every_shell_and_the_commands_own_win() {
    let mut config = cmdr_executors::RegistryConfig::default();
    config.bash.env = vec![
        ("CMDR_T_A".to_owned(), "from-config".to_owned()),
        ("CMDR_T_B".to_owned(), "from-config".to_owned()),
    ];
    let registry = Registry::with_config(config);
    let messages = run(
        &registry,
        json!({"commandType":"BASH_EXEC","command":"echo $CMDR_T_A $CMDR_T_B",
               "env":{"CMDR_T_B":"own"}}),
    )
    .await;
    assert_eq!(data(&messages), "from-config own\n");
}
