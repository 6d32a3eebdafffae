//! "Its whole process tree": processes that left the command's process group (`setsid`,
//! `setsid -f`, a double-fork daemon) die with the command on timeout, cancel and a reader
//! that went away, with cgroups and with the environment-marker fallback. Also: shells run
//! no rc files, and `env` names the kernel cannot set are refused.

use cmdr_executors::{BashExecConfig, Registry, RegistryConfig, ResultStream, TreeMechanism};
use serde_json::json;

use super::{assert_failed, collect, command, data, eventually, run, terminal};

/// Three ways out of the process group, each printing the escaped process's pid from
/// inside it (so after it left), then a long sleep.
const ESCAPES: &str = r#"setsid sh -c 'echo $$; exec sleep 301' &
setsid -f sh -c 'echo $$; exec sleep 302'
python3 -c 'import os, sys, time
if os.fork(): sys.exit(0)
os.setsid()
if os.fork(): sys.exit(0)
print(os.getpid(), flush=True)
time.sleep(303)'
sleep 1000"#;

fn registry(cgroups: bool) -> Registry {
    Registry::with_config(RegistryConfig {
        bash: BashExecConfig {
            cgroups,
            ..BashExecConfig::default()
        },
        ..RegistryConfig::default()
    })
}

/// True when `pid` no longer runs (gone, or a zombie).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// Reads output until the three escaped pids are printed; checks they left the group.
async fn escaped_pids(stream: &mut ResultStream) -> Vec<i32> {
    let mut seen = String::new();
    while seen.lines().count() < 3 {
        let message = stream.next().await.expect("output before the end");
        seen.push_str(&message.result_data);
    }
    let pids: Vec<i32> = seen.lines().map(|l| l.trim().parse().unwrap()).collect();
    let ours = nix::unistd::getsid(None).unwrap();
    for pid in &pids {
        let session = nix::unistd::getsid(Some(nix::unistd::Pid::from_raw(*pid))).unwrap();
        assert_ne!(session, ours, "{pid} left the shell's session (and group)");
    }
    pids
}

async fn all_gone(pids: &[i32]) {
    eventually("every escaped process is gone", || {
        pids.iter().all(|&p| gone(p))
    })
    .await;
}

#[tokio::test]
async fn cancel_kills_processes_that_left_the_group() {
    for cgroups in [true, false] {
        let registry = registry(cgroups);
        let json = json!({"commandType": "BASH_EXEC", "command": ESCAPES});
        let mut stream = registry.execute(command(json)).await.unwrap();
        let pids = escaped_pids(&mut stream).await;
        assert!(registry.cancel(stream.command_id()));
        assert_failed(terminal(&collect(stream).await), "CANCELLED");
        all_gone(&pids).await;
    }
}

#[tokio::test]
async fn timeout_kills_processes_that_left_the_group() {
    for cgroups in [true, false] {
        let registry = registry(cgroups);
        let json = json!({"commandType": "BASH_EXEC", "command": ESCAPES, "timeout_ms": 3000});
        let mut stream = registry.execute(command(json)).await.unwrap();
        let pids = escaped_pids(&mut stream).await;
        assert_failed(terminal(&collect(stream).await), "TIMEOUT");
        all_gone(&pids).await;
    }
}

#[tokio::test]
async fn a_reader_that_goes_away_takes_the_escaped_processes_with_it() {
    for cgroups in [true, false] {
        let registry = registry(cgroups);
        let json = json!({"commandType": "BASH_EXEC", "command": ESCAPES});
        let mut stream = registry.execute(command(json)).await.unwrap();
        let pids = escaped_pids(&mut stream).await;
        drop(stream);
        all_gone(&pids).await;
    }
}

#[tokio::test]
async fn the_mechanism_in_force_is_reported() {
    let marker = registry(false);
    assert_eq!(
        marker.confinement().process_trees,
        Some(TreeMechanism::Marker)
    );
    let auto = registry(true);
    let mechanism = auto.confinement().process_trees.clone().unwrap();
    // This machine (root, cgroup v2 mounted) gives cgroups; elsewhere the marker.
    if let TreeMechanism::Cgroup(base) = &mechanism {
        assert!(base.join("cgroup.procs").exists(), "{mechanism}");
    }
}

/// Background processes of a script that ends normally keep running (by design), and
/// the script's cgroup is not torn down under them.
#[tokio::test]
async fn background_processes_of_a_finished_script_keep_running() {
    let registry = registry(true);
    let messages = run(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": "setsid sleep 304 >/dev/null 2>&1 & echo $!"}),
    )
    .await;
    assert_eq!(terminal(&messages).exit_code, Some(0));
    let pid: i32 = data(&messages).trim().parse().unwrap();
    assert!(!gone(pid), "the background process still runs");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL).unwrap();
}

/// bash runs `~/.bashrc` for `-c` when stdin is a socket and `SHLVL` is unset (systemd,
/// Docker), and `$BASH_ENV` for every non-interactive shell: neither may run.
#[test]
fn shells_run_no_rc_files_whatever_the_environment() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".bashrc"), "echo RC-RAN\n").unwrap();
    let bash_env = home.path().join("bash_env.sh");
    std::fs::write(&bash_env, "echo BASH_ENV-RAN\n").unwrap();
    let out = assert_cmd::Command::cargo_bin("cmdr")
        .unwrap()
        .args([
            "exec",
            "--combine",
            r#"{"command_id":"rc","commandType":"BASH_EXEC","command":"echo ok; set -o | grep -c '^xtrace *on' || true"}"#,
        ])
        .env("HOME", home.path())
        .env_remove("SHLVL")
        .env("SSH_CLIENT", "10.0.0.1 5000 22")
        .env("BASH_ENV", &bash_env)
        .env("SHELLOPTS", "xtrace")
        .output()
        .unwrap();
    let result: cmdr_executors::OutputResult = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result.result_data, "ok\n0\n", "{result:?}");
}

#[tokio::test]
async fn env_names_that_cannot_be_set_are_refused() {
    let registry = Registry::with_defaults();
    for env in [
        json!({"A=B": "c"}),
        json!({"": "x"}),
        json!({"A": "x\u{0}y"}),
    ] {
        let messages = run(
            &registry,
            json!({"commandType": "BASH_EXEC", "command": "env", "env": env}),
        )
        .await;
        assert_eq!(messages.len(), 1, "nothing ran: {messages:?}");
        assert_failed(terminal(&messages), "INVALID_INPUT");
        assert!(terminal(&messages).error.contains("env "), "{messages:?}");
    }
    // A command's own value with '=' in it is fine.
    let messages = run(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": "echo \"$A\"", "env": {"A": "b=c"}}),
    )
    .await;
    assert_eq!(data(&messages), "b=c\n");
}

/// `cmdr exec` puts its shell in a cgroup under `cmdr-<pid>/` and removes them when it
/// exits, so the next cmdr has nothing to sweep at start-up (issue 19).
#[tokio::test]
async fn cmdr_exec_leaves_no_cgroup_behind() {
    let Some(TreeMechanism::Cgroup(ours)) = registry(true).confinement().process_trees.clone()
    else {
        return; // No writable cgroup v2 here: the marker leaves nothing behind.
    };
    let parent = ours.parent().unwrap().to_owned();
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("cmdr"))
        .args([
            "exec",
            "--combine",
            r#"{"commandType":"BASH_EXEC","command":"cat /proc/self/cgroup"}"#,
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let result: cmdr_executors::OutputResult = serde_json::from_slice(&out.stdout).unwrap();
    let base = format!("cmdr-{pid}");
    assert!(
        result.result_data.contains(&format!("/{base}/")),
        "the shell ran in a cgroup of cmdr's: {}",
        result.result_data
    );
    assert!(!parent.join(&base).exists(), "{base} removed at exit");
}

/// Where cgroup v2 is mounted showing the whole hierarchy, and this process's cgroup
/// directory under it; `None` where this host has no such mount.
fn own_cgroup() -> Option<(String, std::path::PathBuf)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = info.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let fields: Vec<&str> = left.split_whitespace().collect();
        (right.starts_with("cgroup2 ") && fields.get(3) == Some(&"/"))
            .then(|| fields.get(4).map(|at| at.to_string()))?
    })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new(&mount).join(own.trim_start_matches('/'));
    Some((mount, dir))
}

/// A container sharing the host's cgroup namespace sees only its own subtree at the
/// cgroup2 mount point, while `/proc/self/cgroup` names that subtree from the host's
/// root: cmdr must still find its cgroup and kill trees with cgroups, not fall back to
/// the environment marker. Reproduced in a private mount namespace (`unshare --mount`)
/// where a cgroup of this test's is bind-mounted over the mount point and cmdr runs in it.
#[test]
fn a_cgroup_subtree_mounted_alone_is_still_used_for_process_trees() {
    let Some((mount, own)) = own_cgroup() else {
        return; // no cgroup v2 on this host
    };
    let subtree = own.join(format!("cmdr-subtree-test-{}", std::process::id()));
    if std::fs::create_dir(&subtree).is_err() {
        return; // cgroups are not ours to make here (not root, not delegated)
    }
    let script = format!(
        "echo $$ > {subtree}/cgroup.procs && mount --bind {subtree} {mount} && exec {cmdr} exec '{json}'",
        subtree = subtree.display(),
        cmdr = env!("CARGO_BIN_EXE_cmdr"),
        json = r#"{"commandType":"BASH_EXEC","command":"true"}"#,
    );
    let output = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .env("CMDR_LOG", "debug")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir(&subtree);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("process trees: cgroup v2"),
        "cmdr fell back: {stderr}"
    );
    assert!(!subtree.exists(), "cmdr removed its cgroups at exit");
}
