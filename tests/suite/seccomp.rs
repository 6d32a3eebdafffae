//! `cmdr exec` inside a seccomp profile that refuses `clone3` and `pidfd_open` with
//! `ENOSYS`, as container runtimes' profiles have (and as kernels before 5.3 answer):
//! shells are forked, their exits seen without pidfds, and a command past its deadline is
//! still stopped, its shell reaped.

#![allow(unsafe_code)]

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use cmdr_executors::{ErrorCode, OutputResult};
use nix::libc;

/// `AUDIT_ARCH_X86_64` (`linux/audit.h`): the architecture the filter checks.
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

/// Installs, in this process (a child before `execve`), a filter answering `clone3` and
/// `pidfd_open` with `ENOSYS` and allowing every other system call.
fn refuse_clone3_and_pidfds() -> std::io::Result<()> {
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let ret = libc::BPF_RET | libc::BPF_K;
    let filter = [
        stmt(load, 4), // seccomp_data.arch
        jump(AUDIT_ARCH_X86_64, 1, 0),
        stmt(ret, libc::SECCOMP_RET_ALLOW),
        stmt(load, 0), // seccomp_data.nr
        jump(libc::SYS_clone3 as u32, 2, 0),
        jump(libc::SYS_pidfd_open as u32, 1, 0),
        stmt(ret, libc::SECCOMP_RET_ALLOW),
        stmt(ret, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
    ];
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
    // SAFETY: the closure only makes system calls (no allocation) between fork and exec.
    unsafe { command.pre_exec(refuse_clone3_and_pidfds) };
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
fn without_clone3_and_pidfds_commands_run_and_stop() {
    let results = exec_refused(&[
        r#"{"commandType":"BASH_EXEC","command_id":"out","command":"echo hi; exit 3"}"#,
        r#"{"commandType":"BASH_EXEC","command_id":"late","command":"sleep 300","timeout_ms":300}"#,
    ]);
    let of = |id: &str| -> Vec<&OutputResult> {
        results.iter().filter(|r| r.command_id == id).collect()
    };
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
}
