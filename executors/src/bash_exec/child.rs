//! [`ShellChild`]: a shell started by [`super::spawn`], watched through its pidfd.
//!
//! Waiting is cancel-safe (the pidfd turns readable when the shell exits; only then is it
//! reaped, with `WNOHANG`). Dropped before it was reaped, the shell is killed (`SIGKILL`
//! through the pidfd, so never another process that reused its pid) and reaped in the
//! background, so no zombie is left behind.
//!
//! Where pidfds are missing (Linux before 5.3, or a seccomp profile refusing
//! `pidfd_open`), the exit is watched through a pipe that a thread closes once `waitid`
//! sees the shell exit, without reaping it ([`ExitWatch::Pipe`]); signals then go by pid,
//! which is as safe while the shell is unreaped: a zombie keeps its pid.

#![allow(
    unsafe_code,
    reason = "pidfd and waitid calls on a child only this module reaps; no crate waits on a pidfd without reaping"
)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use nix::libc;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// How a shell's exit is seen.
pub(crate) enum ExitWatch {
    /// Its pidfd: readable once it exits; signals go through it.
    Pidfd(OwnedFd),
    /// The read end of a pipe closed once it has exited ([`exit_pipe`]); signals go by pid.
    Pipe(OwnedFd),
}

/// A started shell.
pub(crate) struct ShellChild {
    pid: libc::pid_t,
    /// The descriptor that turns readable at its exit: registered with the runtime at the
    /// first wait.
    exit: Option<ExitFd>,
    /// Whether that descriptor is a pidfd (else an [`ExitWatch::Pipe`]).
    is_pidfd: bool,
    status: Option<ExitStatus>,
}

/// The exit descriptor, before and after its registration with the runtime.
enum ExitFd {
    Plain(OwnedFd),
    Watched(AsyncFd<OwnedFd>),
}

impl ExitFd {
    fn raw(&self) -> i32 {
        match self {
            ExitFd::Plain(fd) => fd.as_raw_fd(),
            ExitFd::Watched(fd) => fd.as_raw_fd(),
        }
    }
}

impl ShellChild {
    /// The child `pid`, whose exit `watch` sees.
    pub(super) fn new(pid: libc::pid_t, watch: ExitWatch) -> Self {
        let (fd, is_pidfd) = match watch {
            ExitWatch::Pidfd(fd) => (fd, true),
            ExitWatch::Pipe(fd) => (fd, false),
        };
        Self {
            pid,
            exit: Some(ExitFd::Plain(fd)),
            is_pidfd,
            status: None,
        }
    }

    /// The process id, until the shell has been reaped.
    pub(crate) fn id(&self) -> Option<u32> {
        self.status.is_none().then_some(self.pid as u32)
    }

    /// Waits for the shell to exit and reaps it (at once if it already was).
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.status {
                return Ok(status);
            }
            let pid = self.pid;
            let reaped = {
                let watched = self.watched()?;
                let mut ready = watched.readable().await?;
                let reaped = reap(pid, false)?;
                if reaped.is_none() {
                    ready.clear_ready();
                }
                reaped
            };
            if let Some(status) = reaped {
                self.status = Some(status);
                self.exit = None;
            }
        }
    }

    /// The exit descriptor registered with the runtime (the first call registers it).
    fn watched(&mut self) -> io::Result<&AsyncFd<OwnedFd>> {
        if let Some(ExitFd::Plain(_)) = &self.exit {
            if let Some(ExitFd::Plain(fd)) = self.exit.take() {
                self.exit = Some(ExitFd::Watched(watch(fd)?));
            }
        }
        match &self.exit {
            Some(ExitFd::Watched(fd)) => Ok(fd),
            _ => Err(io::Error::other("the shell's exit descriptor is gone")),
        }
    }
}

impl Drop for ShellChild {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        let Some(exit) = self.exit.take() else {
            return;
        };
        // SAFETY: plain system calls. The pidfd names this child and no other; so does its
        // pid, as it is not reaped yet (only this value reaps it).
        unsafe {
            if self.is_pidfd {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    exit.raw(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            } else {
                libc::kill(self.pid, libc::SIGKILL);
            }
        }
        if let Ok(Some(_)) = reap(self.pid, false) {
            return;
        }
        let pid = self.pid;
        let plain = match exit {
            ExitFd::Plain(fd) => fd,
            ExitFd::Watched(fd) => fd.into_inner(),
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Ok(watched) = watch(plain) {
                        let _ = watched.readable().await;
                    }
                    let _ = reap(pid, true);
                });
            }
            Err(_) => {
                std::thread::spawn(move || {
                    let _ = reap(pid, true);
                    drop(plain);
                });
            }
        }
    }
}

/// A pipe whose read end turns readable (end of file) once our child `pid` has exited: a
/// thread waits for that with `waitid(WNOWAIT)`, which leaves the child to be reaped by its
/// [`ShellChild`], then closes the write end. For systems without pidfds: one thread per
/// running shell.
pub(super) fn exit_pipe(pid: libc::pid_t) -> io::Result<OwnedFd> {
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    std::thread::Builder::new()
        .name("cmdr-exit-watch".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            while !exited(pid) {}
            drop(write);
        })?;
    Ok(read)
}

/// Waits until our child `pid` has exited, without reaping it; false when interrupted.
fn exited(pid: libc::pid_t) -> bool {
    // SAFETY: `waitid` writes only into the local `info`.
    let rc = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    };
    // Anything but an interruption ends the watch: exited, or (reaped already) no child.
    rc == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted
}

/// `fd` (a pidfd or an [`exit_pipe`]) registered with the runtime (readable once the
/// process has exited).
fn watch(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the descriptor is owned here and registered nowhere else; the `AsyncFd`
    // deregisters it before closing it.
    unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(|e| e.into_parts().1)
}

/// `waitpid` of our child `pid`: its status once it has exited (`None`: still running,
/// when not `blocking`).
fn reap(pid: libc::pid_t, blocking: bool) -> io::Result<Option<ExitStatus>> {
    let flags = if blocking { 0 } else { libc::WNOHANG };
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waits for our own child into a local.
        let rc = unsafe { libc::waitpid(pid, &mut status, flags) };
        if rc == pid {
            return Ok(Some(ExitStatus::from_raw(status)));
        }
        if rc == 0 {
            return Ok(None);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
