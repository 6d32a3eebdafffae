//! `cmdr exec` inside a seccomp profile that refuses the system calls of the last kernel
//! years (`clone3`, pidfds, `close_range`, `openat2`) with `ENOSYS`, as container
//! runtimes' profiles do and older kernels answer: shells are forked, their exits seen
//! without pidfds, a command past its deadline is still stopped, and files are still
//! written and read.

#![allow(unsafe_code)]

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use cmdr_executors::{ErrorCode, ExecutionStatus, OutputResult};
use nix::libc;

/// `AUDIT_ARCH_X86_64` (`linux/audit.h`): the architecture the filter checks.
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

/// What kernels before 5.3 lack, and what container profiles refuse: `clone3`, pidfds,
/// `close_range` (5.9) and `openat2` (5.6).
const REFUSED: [libc::c_long; 5] = [
    libc::SYS_clone3,
    libc::SYS_pidfd_open,
    libc::SYS_pidfd_send_signal,
    libc::SYS_close_range,
    libc::SYS_openat2,
];

/// Instructions of the filter: four to check the architecture and load the number, one
/// test per refused call, and the two returns.
const FILTER_LEN: usize = 4 + REFUSED.len() + 2;

/// A filter answering the [`REFUSED`] system calls with `ENOSYS` and allowing every other.
fn filter() -> [libc::sock_filter; FILTER_LEN] {
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |k: u32, jt: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf: 0,
        k,
    };
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let ret = libc::BPF_RET | libc::BPF_K;
    let allow = stmt(ret, libc::SECCOMP_RET_ALLOW);
    let mut filter = [allow; FILTER_LEN];
    filter[0] = stmt(load, 4); // seccomp_data.arch
    filter[1] = jump(AUDIT_ARCH_X86_64, 1); // else: allow (filter[2])
    filter[3] = stmt(load, 0); // seccomp_data.nr
    let n = REFUSED.len() as u8;
    for (i, nr) in (0u8..).zip(REFUSED) {
        // Past the remaining tests and the allow, to the refusal.
        filter[4 + usize::from(i)] = jump(nr as u32, n - i);
    }
    filter[FILTER_LEN - 1] = stmt(ret, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32);
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

/// The results `cmdr exec` prints for `commands` (JSON lines on its stdin) run under the
/// filter.
fn exec_refused(commands: &[&str]) -> Vec<OutputResult> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cmdr"));
    command
        .args(["exec", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let filter = filter();
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
    String::from_utf8(output.stdout)
        .expect("UTF-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a result line"))
        .collect()
}

#[test]
fn without_new_system_calls_commands_run_and_stop() {
    let dir = tempfile::tempdir().expect("a directory");
    let file = dir.path().join("f.txt");
    let write = serde_json::json!({"commandType": "FILE_WRITE", "command_id": "w",
        "file_path": file, "content": "written\n"});
    let read = serde_json::json!({"commandType": "FILE_READ", "command_id": "r",
        "file_path": file});
    let (write, read) = (write.to_string(), read.to_string());
    let results = exec_refused(&[
        r#"{"commandType":"BASH_EXEC","command_id":"mode","command":"grep '^Seccomp:' /proc/self/status"}"#,
        r#"{"commandType":"BASH_EXEC","command_id":"out","command":"echo hi; exit 3"}"#,
        r#"{"commandType":"BASH_EXEC","command_id":"late","command":"sleep 300","timeout_ms":300}"#,
        &write,
        &read,
    ]);
    let of = |id: &str| -> Vec<&OutputResult> {
        results.iter().filter(|r| r.command_id == id).collect()
    };
    let mode: String = of("mode").iter().map(|r| r.result_data.as_str()).collect();
    assert_eq!(mode, "Seccomp:\t2\n", "the shells run filtered");
    let out = of("out");
    let data: String = out.iter().map(|r| r.result_data.as_str()).collect();
    assert_eq!(data, "hi\n", "{out:#?}");
    let last = out.last().expect("a terminal");
    assert_eq!(last.exit_code, Some(3), "{last:#?}");
    let late = of("late");
    let last = late.last().expect("a terminal");
    assert!(last.status.is_terminal(), "{last:#?}");
    assert_eq!(
        last.error_code.as_deref(),
        Some(ErrorCode::Timeout.as_str()),
        "{last:#?}"
    );
    let written = of("w");
    let last = written.last().expect("a terminal");
    assert_eq!(last.status, ExecutionStatus::Succeeded, "{last:#?}");
    let read = of("r");
    let data: String = read.iter().map(|r| r.result_data.as_str()).collect();
    assert_eq!(data, "written\n", "{read:#?}");
}
