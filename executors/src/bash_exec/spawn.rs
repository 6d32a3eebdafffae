//! Starting a shell straight inside its cgroup: `clone3(CLONE_INTO_CGROUP)`.
//!
//! Moving a running process into a cgroup (writing its pid to `cgroup.procs`) takes the
//! kernel's global cgroup write lock, whose first taker after a quiet spell waits for an
//! RCU grace period: 4–20 ms on the machines measured (BENCHMARKS.md, X3), paid by every
//! command started more than a few milliseconds after the previous one — that is, by
//! nearly every command an agent runs. A process *created* inside the cgroup pays none of
//! it (the fork path takes the lock's cheap read side), and is in its tree before it runs
//! a single instruction of its own, so nothing has to wait to be adopted.
//!
//! std and tokio spawn with `posix_spawn` or `fork`, neither of which can name a cgroup, so
//! shells are spawned here: everything the child needs is prepared first (C strings,
//! pointer arrays, descriptors); the child (sharing cmdr's memory until `execve` on
//! x86-64, like `posix_spawn`; a one-thread copy elsewhere) only makes system calls
//! (signal dispositions, process group, stdio, directory, `execve`) and reports a
//! failure's `errno` through a close-on-exec pipe, the way std does. Where
//! `clone3` or `CLONE_INTO_CGROUP` is missing (kernels before 5.7, seccomp profiles that
//! refuse `clone3`), the child is forked and moves itself into the cgroup before `execve`.

#![allow(
    unsafe_code,
    reason = "clone3/fork and the child's async-signal-safe set-up before execve; std's Command cannot start a child inside a cgroup"
)]

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::libc;

use super::child::{exit_pipe, ExitWatch, ShellChild};

/// One of the shell's standard descriptors.
pub(super) enum Io {
    /// This descriptor, as is (a socket, a terminal, …).
    Fd(OwnedFd),
    /// A new pipe: cmdr writes, the shell reads (stdin).
    PipeToChild,
    /// A new pipe: the shell writes, cmdr reads (stdout, stderr).
    PipeFromChild,
}

/// What to start (owned: it may be handed to the Landlock spawner thread).
pub(super) struct ShellSpec {
    /// The program: a path, or a name looked up in the child's `PATH`.
    pub(super) program: PathBuf,
    /// Arguments after the program's name.
    pub(super) args: Vec<OsString>,
    /// The whole environment, in order; a later value of a name replaces an earlier one.
    pub(super) env: Vec<(OsString, OsString)>,
    /// The working directory, when not cmdr's.
    pub(super) dir: Option<PathBuf>,
    /// stdin, stdout, stderr.
    pub(super) stdio: [Io; 3],
    /// In a process group of its own (`setpgid(0, 0)`).
    pub(super) new_group: bool,
    /// The cgroup to start in.
    pub(super) cgroup: Option<CgroupFds>,
}

/// A cgroup's open directory and `cgroup.procs` (for the fallback), borrowed from the
/// command's `Tree`, which outlives the spawn.
#[derive(Debug, Clone, Copy)]
pub(super) struct CgroupFds {
    /// The cgroup's directory.
    pub(super) dir: RawFd,
    /// Its `cgroup.procs`, open for writing.
    pub(super) procs: RawFd,
}

/// A started shell: the child and cmdr's ends of the pipes asked for.
pub(super) struct Spawned {
    /// The child.
    pub(super) child: ShellChild,
    /// cmdr's end of the stdin pipe, if one was asked for.
    pub(super) stdin: Option<OwnedFd>,
    /// cmdr's end of the stdout pipe, if one was asked for.
    pub(super) stdout: Option<OwnedFd>,
    /// cmdr's end of the stderr pipe, if one was asked for.
    pub(super) stderr: Option<OwnedFd>,
}

/// Starts `spec`; returns once the shell has `execve`d (or the error that stopped it).
pub(super) fn spawn(spec: ShellSpec) -> io::Result<Spawned> {
    let program = resolve(&spec.program, &spec.env)?;
    let argv = c_strings(
        std::iter::once(spec.program.as_os_str()).chain(spec.args.iter().map(OsString::as_os_str)),
    )?;
    let envp = c_strings(environment(&spec.env).iter().map(OsString::as_os_str))?;
    let dir = spec
        .dir
        .as_deref()
        .map(|d| c_string(d.as_os_str()))
        .transpose()?;
    let mut ours: [Option<OwnedFd>; 3] = [None, None, None];
    let mut theirs: Vec<OwnedFd> = Vec::with_capacity(3);
    for (i, io) in spec.stdio.into_iter().enumerate() {
        match io {
            Io::Fd(fd) => theirs.push(fd),
            Io::PipeToChild => {
                let (read, write) = pipe()?;
                theirs.push(read);
                ours[i] = Some(write);
            }
            Io::PipeFromChild => {
                let (read, write) = pipe()?;
                theirs.push(write);
                ours[i] = Some(read);
            }
        }
    }
    let stdio = [
        theirs[0].as_raw_fd(),
        theirs[1].as_raw_fd(),
        theirs[2].as_raw_fd(),
    ];
    let (argv, envp) = (pointers(&argv), pointers(&envp));
    let child = loop {
        let (report_read, report_write) = pipe()?;
        let setup = ChildSetup {
            program: &program,
            argv: &argv,
            envp: &envp,
            dir: dir.as_deref(),
            stdio,
            new_group: spec.new_group,
            procs: None,
            report: report_write.as_raw_fd(),
        };
        let into = spec
            .cgroup
            .filter(|_| !INTO_CGROUP_FAILS.load(Ordering::Relaxed));
        let (pid, pidfd) = start(&setup, into, spec.cgroup)?;
        drop(report_write);
        // The pidfd is ours from here: whatever happens below, the child is reaped.
        let child = ShellChild::new(pid, pidfd);
        match exec_outcome(report_read)? {
            Outcome::Started => break child,
            Outcome::Vanished if into.is_some() => {
                // Killed by the kernel before it ran (see `INTO_CGROUP_FAILS`): from now on
                // shells move themselves in.
                INTO_CGROUP_FAILS.store(true, Ordering::Relaxed);
                tracing::debug!(
                    "a shell cloned into its cgroup was killed at birth; moving shells in instead"
                );
            }
            Outcome::Vanished => {
                return Err(io::Error::other("the shell was killed before it started"))
            }
        }
    };
    drop(theirs);
    let [stdin, stdout, stderr] = ours;
    Ok(Spawned {
        child,
        stdin,
        stdout,
        stderr,
    })
}

/// Set once a shell cloned into its cgroup was killed at birth. Linux (seen on 6.18)
/// compares a `cgroup.kill` sequence number of the *parent's* cgroup with the target's
/// and kills the child when they differ: a cgroup that was ever killed, or any cgroup
/// while cmdr's own was (a service restarted in place), kills every child cloned into it.
/// cmdr never reuses a killed cgroup; this catches the rest.
static INTO_CGROUP_FAILS: AtomicBool = AtomicBool::new(false);

/// `clone3` into the cgroup `into`; failing that (or without it), `clone3` or `fork` with
/// the child moving itself into `cgroup`. Returns the pid and a pidfd.
fn start(
    child: &ChildSetup<'_>,
    into: Option<CgroupFds>,
    cgroup: Option<CgroupFds>,
) -> io::Result<(libc::pid_t, ExitWatch)> {
    if let Some(fds) = into {
        match clone3(child, Some(fds.dir)) {
            Err(e) if unsupported(&e) => {}
            started => return started,
        }
    }
    let child = ChildSetup {
        procs: cgroup.map(|fds| fds.procs),
        ..*child
    };
    match clone3(&child, None) {
        Err(e) if unsupported(&e) => fork(&child),
        started => started,
    }
}

/// Errors that mean "this kernel (or its seccomp profile) cannot do that clone".
fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSYS | libc::EINVAL | libc::E2BIG | libc::EPERM)
    )
}

/// The kernel's `struct clone_args` (`linux/sched.h`, version 2: with `cgroup`).
#[repr(C, align(8))]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `CLONE_INTO_CGROUP` (Linux 5.7), not in every libc crate.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Bytes of the child's own stack while it shares cmdr's memory (it needs a few hundred).
#[cfg(target_arch = "x86_64")]
const CHILD_STACK: usize = 64 * 1024;

/// `clone3` with a pidfd, into `cgroup` when given. On x86-64 the child shares cmdr's
/// memory and this thread waits until it has run `execve` or exited (`CLONE_VM |
/// CLONE_VFORK`, as `posix_spawn` does): no page tables are copied and cmdr takes no
/// copy-on-write faults afterwards, whatever its size. Elsewhere the child is a copy
/// (like after `fork`).
fn clone3(child: &ChildSetup<'_>, cgroup: Option<RawFd>) -> io::Result<(libc::pid_t, ExitWatch)> {
    let mut pidfd: libc::c_int = -1;
    let mut args = CloneArgs {
        flags: libc::CLONE_PIDFD as u64,
        pidfd: std::ptr::addr_of_mut!(pidfd) as u64,
        exit_signal: libc::SIGCHLD as u64,
        ..CloneArgs::default()
    };
    if let Some(fd) = cgroup {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = fd as u64;
    }
    let blocked = SignalsBlocked::new()?;
    let pid = clone3_call(&mut args, child);
    drop(blocked);
    if pid < 0 {
        return Err(io::Error::from_raw_os_error((-pid) as i32));
    }
    // SAFETY: with `CLONE_PIDFD` the kernel stored a new descriptor we now own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok((pid as libc::pid_t, ExitWatch::Pidfd(pidfd)))
}

/// The `clone3` system call on its own stack, the child running [`child_entry`] there:
/// the pid, or `-errno`.
#[cfg(target_arch = "x86_64")]
fn clone3_call(args: &mut CloneArgs, child: &ChildSetup<'_>) -> i64 {
    // 16-byte aligned, as the ABI wants the stack.
    let mut stack = vec![0_u128; CHILD_STACK / 16];
    args.flags |= (libc::CLONE_VM | libc::CLONE_VFORK) as u64;
    args.stack = stack.as_mut_ptr() as u64;
    args.stack_size = (stack.len() * 16) as u64;
    let entry: extern "C" fn(*const ChildSetup<'_>) -> ! = child_entry;
    let ret: i64;
    // SAFETY: `args` is a valid `clone_args` with a stack this function owns until the
    // call returns, which with `CLONE_VFORK` is after the child has run `execve` or
    // exited. The parent only executes `syscall` (rax, rcx, r11 clobbered). The child
    // starts after `syscall` with rax = 0 on the new stack (16-byte aligned, so aligned as
    // a call expects) and calls `child_entry(child)`, which never returns; it shares
    // memory but only reads `child`, which outlives the call.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, r12",
            "call r13",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 => ret,
            in("rdi") std::ptr::from_mut(args),
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") std::ptr::from_ref(child),
            in("r13") entry,
            lateout("rcx") _,
            lateout("r11") _,
        );
    }
    drop(stack);
    ret
}

/// Without the x86-64 trampoline: a fork-like `clone3` (the child runs on a copy).
#[cfg(not(target_arch = "x86_64"))]
fn clone3_call(args: &mut CloneArgs, child: &ChildSetup<'_>) -> i64 {
    // SAFETY: `args` is a valid `clone_args` of the size passed. Without `CLONE_VM` the
    // child runs on a copy of this thread's memory and stack, like after `fork`; it only
    // runs `ChildSetup::run`, which makes system calls and never returns.
    // `c_long` is `i32` on 32-bit targets.
    #[allow(clippy::useless_conversion)]
    let pid = i64::from(unsafe {
        libc::syscall(
            libc::SYS_clone3,
            std::ptr::from_mut(args),
            std::mem::size_of::<CloneArgs>(),
        )
    });
    if pid == 0 {
        child.run();
    }
    if pid < 0 {
        return -i64::from(
            io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL),
        );
    }
    pid
}

/// Where a child sharing cmdr's memory starts.
#[cfg(target_arch = "x86_64")]
extern "C" fn child_entry(child: *const ChildSetup<'_>) -> ! {
    // SAFETY: the pointer is the parent's `&ChildSetup`, alive while the parent waits.
    unsafe { (*child).run() }
}

/// `fork`, for kernels or sandboxes without `clone3`; the pidfd from `pidfd_open`, or,
/// without pidfds (Linux before 5.3, a seccomp profile refusing them), an [`exit_pipe`].
fn fork(child: &ChildSetup<'_>) -> io::Result<(libc::pid_t, ExitWatch)> {
    fork_watched(child, pidfd_open)
}

/// `pidfd_open` of `pid`.
fn pidfd_open(pid: libc::pid_t) -> io::Result<ExitWatch> {
    // SAFETY: plain system call; the pid is our unreaped child, so it names that process.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `pidfd_open` returned a new descriptor we now own.
    Ok(ExitWatch::Pidfd(unsafe {
        OwnedFd::from_raw_fd(fd as RawFd)
    }))
}

/// [`fork`], the child's exit watched through `open` (an [`exit_pipe`] where it says the
/// system has no pidfds).
fn fork_watched(
    child: &ChildSetup<'_>,
    open: fn(libc::pid_t) -> io::Result<ExitWatch>,
) -> io::Result<(libc::pid_t, ExitWatch)> {
    let blocked = SignalsBlocked::new()?;
    // SAFETY: the child only runs `ChildSetup::run` (system calls, never returns).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        child.run();
    }
    drop(blocked);
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    let watched = match open(pid) {
        Err(e) if unsupported(&e) => exit_pipe(pid).map(ExitWatch::Pipe),
        opened => opened,
    };
    match watched {
        Ok(watch) => Ok((pid, watch)),
        Err(e) => {
            // SAFETY: kill and reap our own child (it cannot be waited on otherwise).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            Err(e)
        }
    }
}

/// Every signal blocked on this thread while a child is made, so that no signal handler
/// of cmdr's runs in the child before it resets them; restored on drop.
struct SignalsBlocked(libc::sigset_t);

impl SignalsBlocked {
    fn new() -> io::Result<Self> {
        // SAFETY: sigset_t is plain data, filled by sigfillset; pthread_sigmask gets valid
        // pointers.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            let rc = libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            Ok(Self(old))
        }
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in `new`.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut());
        }
    }
}

/// Everything the child uses, prepared before it exists (it may not allocate).
#[derive(Clone, Copy)]
struct ChildSetup<'a> {
    program: &'a CString,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    dir: Option<&'a std::ffi::CStr>,
    stdio: [RawFd; 3],
    new_group: bool,
    /// `cgroup.procs` to move itself into (when it could not be created there).
    procs: Option<RawFd>,
    /// Where a failure's `errno` goes (closed on `execve`).
    report: RawFd,
}

impl ChildSetup<'_> {
    /// The child's whole life before `execve`: only system calls, no allocation, no locks.
    fn run(&self) -> ! {
        // SAFETY: called only in the new child (one thread; sharing cmdr's memory while the
        // parent thread waits, or a copy of it): every call is async-signal-safe, nothing
        // is allocated or written but locals, and every pointer was prepared (and
        // NUL-terminated) before the clone.
        unsafe {
            let failed = |stage: i32| self.fail(stage);
            // First: proof that it lived to run (see `Outcome::Vanished`).
            let alive = [STAGE_ALIVE, 0];
            libc::write(
                self.report,
                alive.as_ptr().cast(),
                std::mem::size_of_val(&alive),
            );
            default_signals();
            if let Some(procs) = self.procs {
                if libc::write(procs, b"0".as_ptr().cast(), 1) != 1 {
                    failed(STAGE_CGROUP);
                }
            }
            if self.new_group && libc::setpgid(0, 0) != 0 {
                failed(STAGE_GROUP);
            }
            // Out of the way of 0–2 first, so that no dup2 overwrites a later source.
            let mut fds = self.stdio;
            for fd in &mut fds {
                if *fd < 3 {
                    *fd = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3);
                    if *fd < 0 {
                        failed(STAGE_STDIO);
                    }
                }
            }
            for (target, fd) in fds.iter().enumerate() {
                if libc::dup2(*fd, target as RawFd) < 0 {
                    failed(STAGE_STDIO);
                }
            }
            // Nothing beyond stdio reaches the shell, not even a descriptor cmdr itself
            // inherited without close-on-exec from whatever started it (best effort:
            // Linux 5.11). Marked, not closed: the report pipe must outlive a failing
            // `execve`.
            libc::syscall(
                libc::SYS_close_range,
                3_u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            if let Some(dir) = self.dir {
                if libc::chdir(dir.as_ptr()) != 0 {
                    failed(STAGE_DIR);
                }
            }
            libc::execve(
                self.program.as_ptr(),
                self.argv.as_ptr(),
                self.envp.as_ptr(),
            );
            failed(STAGE_EXEC)
        }
    }
}

impl ChildSetup<'_> {
    /// In the child: reports `stage` and the current `errno`, then exits 127.
    ///
    /// # Safety
    /// Only in the child.
    unsafe fn fail(&self, stage: i32) -> ! {
        let errno = *libc::__errno_location();
        let word = [stage, errno];
        libc::write(
            self.report,
            word.as_ptr().cast(),
            std::mem::size_of_val(&word),
        );
        libc::_exit(127)
    }
}

/// Which step of the child failed (the report's first word); [`STAGE_ALIVE`] comes first.
const STAGE_ALIVE: i32 = 0;
const STAGE_CGROUP: i32 = 1;
const STAGE_GROUP: i32 = 2;
const STAGE_STDIO: i32 = 3;
const STAGE_DIR: i32 = 4;
const STAGE_EXEC: i32 = 5;

/// In the child: every signal back to its default disposition, and none blocked.
///
/// Ignored ones too: cmdr may itself have been started with signals ignored (a shell
/// runs a job started with `&` with `SIGINT` and `SIGQUIT` ignored, and Rust ignores
/// `SIGPIPE`), and a command must not inherit that, or the interrupt a timeout or a
/// PTY's Ctrl-C sends would not reach it (docs/processes.md, "Signals a command starts with").
///
/// # Safety
/// Only in a freshly cloned child.
unsafe fn default_signals() {
    let mut default: libc::sigaction = std::mem::zeroed();
    default.sa_sigaction = libc::SIG_DFL;
    for signal in 1..libc::SIGRTMAX() {
        if signal != libc::SIGKILL && signal != libc::SIGSTOP {
            libc::sigaction(signal, &default, std::ptr::null_mut());
        }
    }
    let mut none: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut none);
    libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
}

/// How a child's start ended.
enum Outcome {
    /// It ran `execve`.
    Started,
    /// It died before running anything of its own (killed by the kernel at birth).
    Vanished,
}

/// Waits for the child's `execve` (the report pipe closes after its "alive" word) or its
/// failure report.
fn exec_outcome(report: OwnedFd) -> io::Result<Outcome> {
    let mut file = std::fs::File::from(report);
    let mut bytes = Vec::with_capacity(16);
    std::io::Read::read_to_end(&mut file, &mut bytes)?;
    let words: Vec<i32> = bytes
        .chunks_exact(4)
        .map(|w| i32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let Some(failure) = words.get(2..4) else {
        return Ok(if words.is_empty() {
            Outcome::Vanished
        } else {
            Outcome::Started
        });
    };
    let (stage, errno) = (failure[0], failure[1]);
    let error = io::Error::from_raw_os_error(errno);
    let context = match stage {
        STAGE_EXEC => return Err(error),
        STAGE_DIR => "cannot enter the working directory",
        STAGE_CGROUP => "cannot join the command's cgroup",
        STAGE_GROUP => "cannot make a process group",
        _ => "cannot set up stdio",
    };
    Err(io::Error::new(error.kind(), format!("{context}: {error}")))
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)
}

/// The environment as `NAME=value` entries, one per name (the last value wins).
fn environment(env: &[(OsString, OsString)]) -> Vec<OsString> {
    let mut merged: std::collections::BTreeMap<&OsStr, &OsStr> = std::collections::BTreeMap::new();
    for (name, value) in env {
        merged.insert(name, value);
    }
    merged
        .into_iter()
        .map(|(name, value)| {
            let mut entry = OsString::with_capacity(name.len() + value.len() + 1);
            entry.push(name);
            entry.push("=");
            entry.push(value);
            entry
        })
        .collect()
}

/// `program` as a path to `execve`: itself when it names a path, else the first match on
/// the child's `PATH` (or cmdr's).
fn resolve(program: &Path, env: &[(OsString, OsString)]) -> io::Result<CString> {
    if program.as_os_str().as_bytes().contains(&b'/') {
        return c_string(program.as_os_str());
    }
    let path = env
        .iter()
        .rev()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.clone())
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .map_or_else(
            || Err(io::Error::from(io::ErrorKind::NotFound)),
            |found| c_string(found.as_os_str()),
        )
}

fn c_string(text: &OsStr) -> io::Result<CString> {
    CString::new(text.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "an argument or variable holds a NUL byte",
        )
    })
}

fn c_strings<'a>(texts: impl Iterator<Item = &'a OsStr>) -> io::Result<Vec<CString>> {
    texts.map(c_string).collect()
}

/// NULL-terminated pointers to `strings` (which must outlive them).
fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::bash_exec::tree::Tree;

    /// `/bin/sh -c <script>` with stdout piped, in `tree`'s cgroup.
    fn sh(script: &str, tree: &Tree, dir: Option<&str>) -> ShellSpec {
        ShellSpec {
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".into(), script.into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            dir: dir.map(PathBuf::from),
            stdio: [Io::PipeToChild, Io::PipeFromChild, Io::PipeFromChild],
            new_group: true,
            cgroup: tree.cgroup(),
        }
    }

    /// How a test starts its child.
    #[derive(Debug, Clone, Copy)]
    enum How {
        /// `clone3` into the cgroup.
        Into,
        /// `clone3`, the child moving itself in.
        MoveIn,
        /// `fork` (kernels or sandboxes without `clone3`), the child moving itself in.
        Fork,
        /// `fork` where `pidfd_open` is refused (`ENOSYS`): the exit watched by a thread.
        ForkWithoutPidfd,
    }

    /// Runs `spec` started `how`; returns its stdout and exit status.
    async fn output(spec: ShellSpec, how: How) -> (String, std::process::ExitStatus) {
        let (mut child, out_read) = started(spec, how);
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(out_read), &mut text).unwrap();
        (text, child.wait().await.unwrap())
    }

    /// Starts `spec` `how`; returns the shell and the read end of its stdout and stderr.
    fn started(spec: ShellSpec, how: How) -> (ShellChild, OwnedFd) {
        let cgroup = spec.cgroup;
        let program = resolve(&spec.program, &spec.env).unwrap();
        let argv = c_strings(
            std::iter::once(spec.program.as_os_str())
                .chain(spec.args.iter().map(OsString::as_os_str)),
        )
        .unwrap();
        let envp = c_strings(environment(&spec.env).iter().map(OsString::as_os_str)).unwrap();
        let (out_read, out_write) = pipe().unwrap();
        let (report_read, report_write) = pipe().unwrap();
        let null = std::fs::File::open("/dev/null").unwrap();
        let setup = ChildSetup {
            program: &program,
            argv: &pointers(&argv),
            envp: &pointers(&envp),
            dir: None,
            stdio: [
                null.as_raw_fd(),
                out_write.as_raw_fd(),
                out_write.as_raw_fd(),
            ],
            new_group: true,
            procs: None,
            report: report_write.as_raw_fd(),
        };
        let (pid, pidfd) = match how {
            How::Into => start(&setup, cgroup, cgroup),
            How::MoveIn => start(&setup, None, cgroup),
            How::Fork => fork(&ChildSetup {
                procs: cgroup.map(|fds| fds.procs),
                ..setup
            }),
            How::ForkWithoutPidfd => fork_watched(
                &ChildSetup {
                    procs: cgroup.map(|fds| fds.procs),
                    ..setup
                },
                |_| Err(io::Error::from_raw_os_error(libc::ENOSYS)),
            ),
        }
        .unwrap();
        drop((report_write, out_write));
        let child = ShellChild::new(pid, pidfd);
        assert!(matches!(
            exec_outcome(report_read).unwrap(),
            Outcome::Started
        ));
        (child, out_read)
    }

    /// Without pidfds (a seccomp profile refusing `pidfd_open`, Linux before 5.3) the exit
    /// is seen through the watch thread's pipe, and a shell dropped while it runs is killed
    /// by its pid and reaped: neither a process nor a zombie is left.
    #[tokio::test]
    async fn without_pidfds_exits_are_seen_and_a_dropped_shell_is_killed_and_reaped() {
        let tree = Tree::new(false);
        let (text, status) =
            output(sh("echo out; exit 7", &tree, None), How::ForkWithoutPidfd).await;
        assert_eq!((text.as_str(), status.code()), ("out\n", Some(7)));
        let (child, _out) = started(sh("exec sleep 300", &tree, None), How::ForkWithoutPidfd);
        let pid = child.id().expect("running");
        let proc = PathBuf::from(format!("/proc/{pid}"));
        assert!(proc.exists());
        drop(child);
        cmdr_test_support::results::eventually("the dropped shell is killed and reaped", || {
            !proc.exists()
        })
        .await;
    }

    #[tokio::test]
    async fn a_shell_is_in_its_cgroup_from_birth_or_moves_itself_in_before_execve_even_forked() {
        for how in [How::Into, How::MoveIn, How::Fork, How::ForkWithoutPidfd] {
            let tree = Tree::new(true);
            let Some(_) = tree.cgroup() else {
                eprintln!("no writable cgroup v2 here: nothing to check");
                return;
            };
            let (text, status) = output(
                sh("cat /proc/$$/cgroup; ps -o pgid= -p $$", &tree, None),
                how,
            )
            .await;
            assert!(status.success(), "{status:?}: {text}");
            let own = format!("/cmdr-{}/c", std::process::id());
            assert!(text.contains(&own), "{how:?}: {text}");
            tree.release();
        }
    }

    /// Linux kills a child cloned into a cgroup that had `cgroup.kill` written: the spawn
    /// notices (no "alive" word) and starts the shell again, moving itself in.
    #[tokio::test]
    async fn a_shell_cloned_into_a_killed_cgroup_is_started_again_and_moves_itself_in() {
        let tree = Tree::new(true);
        if tree.cgroup().is_none() {
            eprintln!("no writable cgroup v2 here: nothing to check");
            return;
        }
        tree.signal(nix::sys::signal::Signal::SIGKILL);
        let mut spawned = spawn(sh("cat /proc/$$/cgroup", &tree, None)).unwrap();
        let status = spawned.child.wait().await.unwrap();
        let mut text = String::new();
        let stdout = spawned.stdout.take().unwrap();
        std::io::Read::read_to_string(&mut std::fs::File::from(stdout), &mut text).unwrap();
        assert!(status.success(), "{status:?}: {text}");
        let own = format!("/cmdr-{}/c", std::process::id());
        assert!(text.contains(&own), "{text}");
        tree.release();
    }

    #[tokio::test]
    async fn failures_before_execve_are_reported_with_their_cause() {
        let tree = Tree::new(false);
        let missing = ShellSpec {
            program: PathBuf::from("/nonexistent/shell"),
            ..sh("true", &tree, None)
        };
        let e = spawn(missing).err().expect("a missing program fails");
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        let e = spawn(sh("true", &tree, Some("/nonexistent/dir")))
            .err()
            .expect("a missing directory fails");
        assert!(e.to_string().contains("working directory"), "{e}");
        let nul = ShellSpec {
            args: vec!["-c".into(), "echo a\0b".into()],
            ..sh("true", &tree, None)
        };
        let e = spawn(nul).err().expect("a NUL byte fails");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    }

    #[tokio::test]
    async fn the_child_gets_default_signals_an_empty_mask_and_the_last_value_of_a_variable() {
        let tree = Tree::new(false);
        let status_lines = ShellSpec {
            program: PathBuf::from("grep"),
            args: vec![
                "-E".into(),
                "^Sig(Blk|Ign)".into(),
                "/proc/self/status".into(),
            ],
            ..sh("", &tree, None)
        };
        let (text, status) = output(status_lines, How::MoveIn).await;
        assert!(status.success(), "{status:?}: {text}");
        assert!(text.contains("SigBlk:\t0000000000000000"), "{text}");
        // SIGPIPE is not left ignored, as Rust leaves it in cmdr itself.
        let ignored = text
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:\t"))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .expect("SigIgn");
        assert_eq!(ignored & (1 << (libc::SIGPIPE - 1)), 0, "{text}");
        let twice = ShellSpec {
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("X".into(), "first".into()),
                ("X".into(), "last".into()),
            ],
            ..sh("echo X=$X", &tree, None)
        };
        let (text, _) = output(twice, How::MoveIn).await;
        assert_eq!(text, "X=last\n");
    }
}
