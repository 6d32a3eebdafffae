//! `cmdr exec` inside seccomp profiles that refuse newer system calls, as container
//! runtimes' profiles do and older kernels would:
//!
//! - `clone3` answered `ENOSYS`, pidfds, `close_range` and `openat2` `EPERM` (as Docker's
//!   profiles did before they listed them): shells are forked, their exits seen without
//!   pidfds, a command past its deadline is still stopped, and files are still written
//!   and read;
//! - without Landlock, `--landlock` is reported not enforced, and nothing is claimed.

#![allow(
    unsafe_code,
    reason = "installs a seccomp filter in the child before exec (pre_exec, prctl)"
)]

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use cmdr_executors::{ErrorCode, ExecutionStatus, OutputResult};
use nix::libc;

/// `AUDIT_ARCH_X86_64` (`linux/audit.h`): the architecture the filter checks.
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

/// Docker's default profile, in what matters here: `clone3` answered `ENOSYS` (so that
/// the C library falls back to `clone`), and calls it does not list answered `EPERM`, as
/// older profiles did pidfds, `close_range` and `openat2`.
const DOCKER_LIKE: [(libc::c_long, libc::c_int); 5] = [
    (libc::SYS_clone3, libc::ENOSYS),
    (libc::SYS_pidfd_open, libc::EPERM),
    (libc::SYS_pidfd_send_signal, libc::EPERM),
    (libc::SYS_close_range, libc::EPERM),
    (libc::SYS_openat2, libc::EPERM),
];

/// A kernel without Landlock (or a profile refusing it), and without `openat2` (5.6).
const NO_LANDLOCK: [(libc::c_long, libc::c_int); 4] = [
    (libc::SYS_landlock_create_ruleset, libc::ENOSYS),
    (libc::SYS_landlock_add_rule, libc::ENOSYS),
    (libc::SYS_landlock_restrict_self, libc::ENOSYS),
    (libc::SYS_openat2, libc::ENOSYS),
];

/// A filter answering each `refused` system call with its errno and allowing every other.
fn filter(refused: &[(libc::c_long, libc::c_int)]) -> Vec<libc::sock_filter> {
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    // When equal, on to the next instruction; else past it.
    let unless = |k: u32| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt: 0,
        jf: 1,
        k,
    };
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let ret = libc::BPF_RET | libc::BPF_K;
    let allow = stmt(ret, libc::SECCOMP_RET_ALLOW);
    let mut filter = vec![
        stmt(load, 4), // seccomp_data.arch
        libc::sock_filter {
            jt: 1, // x86-64: on to the number
            jf: 0, // anything else: allowed
            ..unless(AUDIT_ARCH_X86_64)
        },
        allow,
        stmt(load, 0), // seccomp_data.nr
    ];
    for &(nr, errno) in refused {
        filter.push(unless(nr as u32));
        filter.push(stmt(ret, libc::SECCOMP_RET_ERRNO | errno as u32));
    }
    filter.push(allow);
    filter
}

/// Installs `filter` in this process (a child between fork and exec: system calls only).
fn install(filter: &[libc::sock_filter]) -> std::io::Result<()> {
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: plain prctl calls; the filter outlives the call that copies it in.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &program as *const libc::sock_fprog,
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// What `cmdr exec <flags> -` prints for `commands` (JSON lines on its stdin) when run
/// with the `refused` system calls answered with their errno: its results, and its stderr.
fn exec_refused(
    refused: &[(libc::c_long, libc::c_int)],
    flags: &[&str],
    commands: &[&str],
) -> (Vec<OutputResult>, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cmdr"));
    command
        .arg("exec")
        .args(flags)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let filter = filter(refused);
    // SAFETY: between fork and exec the closure only makes system calls (the filter was
    // built before the fork).
    unsafe { command.pre_exec(move || install(&filter)) };
    let mut child = command.spawn().expect("cmdr starts");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        for line in commands {
            writeln!(stdin, "{line}").expect("written");
        }
    }
    let output = child.wait_with_output().expect("cmdr ends");
    let results = String::from_utf8(output.stdout)
        .expect("UTF-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a result line"))
        .collect();
    (
        results,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The text of `id`'s output messages, in order.
fn data_of(results: &[OutputResult], id: &str) -> String {
    results
        .iter()
        .filter(|r| r.command_id == id)
        .map(|r| r.result_data.as_str())
        .collect()
}

#[test]
fn under_a_docker_like_profile_commands_run_and_stop() {
    let dir = tempfile::tempdir().expect("a directory");
    let file = dir.path().join("f.txt");
    let write = serde_json::json!({"commandType": "FILE_WRITE", "command_id": "w",
        "file_path": file, "content": "written\n"});
    let read = serde_json::json!({"commandType": "FILE_READ", "command_id": "r",
        "file_path": file});
    let (write, read) = (write.to_string(), read.to_string());
    let (results, _) = exec_refused(
        &DOCKER_LIKE,
        &[],
        &[
            r#"{"commandType":"BASH_EXEC","command_id":"mode","command":"grep '^Seccomp:' /proc/self/status"}"#,
            r#"{"commandType":"BASH_EXEC","command_id":"out","command":"echo hi; exit 3"}"#,
            r#"{"commandType":"BASH_EXEC","command_id":"late","command":"sleep 300","timeout_ms":300}"#,
            &write,
            &read,
        ],
    );
    let last = |id: &str| {
        results
            .iter()
            .rfind(|r| r.command_id == id)
            .unwrap_or_else(|| panic!("no result for {id}: {results:#?}"))
    };
    assert_eq!(
        data_of(&results, "mode"),
        "Seccomp:\t2\n",
        "the shells run filtered"
    );
    assert_eq!(data_of(&results, "out"), "hi\n");
    assert_eq!(last("out").exit_code, Some(3), "{:#?}", last("out"));
    let late = last("late");
    assert!(late.status.is_terminal(), "{late:#?}");
    assert_eq!(
        late.error_code.as_deref(),
        Some(ErrorCode::Timeout.as_str())
    );
    assert_eq!(
        last("w").status,
        ExecutionStatus::Succeeded,
        "{:#?}",
        last("w")
    );
    assert_eq!(data_of(&results, "r"), "written\n");
}

/// Asked for `--landlock` where Landlock is refused, cmdr says on stderr that shells'
/// writes are not enforced, and claims nothing: a write outside the allowed root is not
/// stopped (docs/confinement.md). Without `openat2`, it says file commands are checked,
/// then opened by name. Commands still run.
#[test]
fn landlock_refused_is_reported_not_enforced_and_nothing_is_claimed() {
    let root = tempfile::tempdir().expect("a root");
    let outside = tempfile::tempdir().expect("outside");
    let target = outside.path().join("made-by-shell.txt");
    let script = serde_json::json!({"commandType": "BASH_EXEC", "command_id": "w",
        "command": format!("echo out > {} && echo wrote", target.display()),
        "working_dir": root.path()});
    let root_flag = root.path().display().to_string();
    let (results, stderr) = exec_refused(
        &NO_LANDLOCK,
        &["--allow-root", &root_flag, "--landlock"],
        &[&script.to_string()],
    );
    assert!(
        stderr.contains("BASH_EXEC writes: Landlock not enforced: "),
        "{stderr}"
    );
    assert!(stderr.contains("checked, then opened by name"), "{stderr}");
    assert_eq!(data_of(&results, "w"), "wrote\n", "{results:#?}");
    assert_eq!(std::fs::read_to_string(&target).expect("written"), "out\n");
}
