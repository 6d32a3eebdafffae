//! Starting the shell in its own process group, signalling the group, and reading the
//! final working directory the shell reports on its way out.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;

use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::{pipe2, Pid};
use tokio::process::{Child, ChildStderr, ChildStdout};

use super::sandbox::Sandbox;
use crate::error::ExecError;
use crate::protocol::BashExecCommand;

/// The lowest fd number the shell's EXIT trap writes `$PWD` to. High, so scripts that use
/// low numbers (`exec 3<file`, flock's customary 200) do not collide with it; each command
/// gets its own number at or above this one.
pub const CWD_REPORT_FD: i32 = 600;

/// Serialises the moment a report pipe is inheritable (between clearing its close-on-exec
/// flag and closing the parent's copy), so that shells spawned concurrently do not inherit
/// each other's pipes.
static SPAWN_WINDOW: Mutex<()> = Mutex::new(());

/// Longest working-directory report read back (paths are at most 4 KiB on Linux).
const CWD_REPORT_MAX: u64 = 16 * 1024;

/// A running shell: the child, its output pipes, and the cwd report pipe.
pub(super) struct Shell {
    pub(super) child: Child,
    pub(super) stdout: Option<ChildStdout>,
    pub(super) stderr: Option<ChildStderr>,
    pgid: Option<Pid>,
    cwd_report: File,
    /// Set once the shell has been reaped; until then, dropping kills the group.
    pub(super) exited: bool,
}

impl Shell {
    /// Starts `shell -c <script>` in `dir` with the command's environment; through
    /// `sandbox` (so that the shell inherits its Landlock restriction) when given.
    pub(super) async fn spawn(
        shell: &Path,
        cmd: &BashExecCommand,
        dir: Option<&Path>,
        env: &[(String, String)],
        sandbox: Option<&Sandbox>,
    ) -> Result<Self, ExecError> {
        let spawn_error = |source| ExecError::Spawn {
            program: shell.display().to_string(),
            source,
        };
        // Non-blocking on both ends: we read what is there after the shell exits; the
        // shell writes a few bytes into an empty pipe, which never blocks.
        let (report_read, report_write) =
            pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK).map_err(|e| spawn_error(e.into()))?;
        let report_write = high_fd(report_write);
        let mut command = shell_command(shell, cmd, dir, report_write.as_raw_fd());
        if !env.is_empty() {
            // Before the command's own variables, which therefore win.
            let own = cmd.env.iter().flatten().map(|(k, _)| k.as_str());
            let own: Vec<&str> = own.collect();
            command.envs(
                env.iter()
                    .filter(|(k, _)| !own.contains(&k.as_str()))
                    .cloned(),
            );
        }
        let spawned = match sandbox {
            None => spawn_inheriting(&mut command, report_write),
            Some(sandbox) => {
                let runtime = tokio::runtime::Handle::current();
                sandbox
                    .run(move || {
                        let _context = runtime.enter();
                        spawn_inheriting(&mut command, report_write)
                    })
                    .await?
            }
        };
        let mut child = spawned.map_err(spawn_error)?;
        let pgid = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .map(Pid::from_raw);
        Ok(Self {
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            child,
            pgid,
            cwd_report: File::from(report_read),
            exited: false,
        })
    }

    /// Sends `signal` to the shell's whole process group (children, grandchildren …).
    pub(super) fn signal_group(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            if let Err(e) = killpg(pgid, signal) {
                tracing::debug!(%pgid, ?signal, "killpg: {e}");
            }
        }
    }

    /// The directory the shell reported on exit, if it did.
    pub(super) fn final_cwd(&mut self) -> Option<String> {
        let mut bytes = Vec::new();
        let mut reader = (&mut self.cwd_report).take(CWD_REPORT_MAX);
        match reader.read_to_end(&mut bytes) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => tracing::debug!("reading the cwd report: {e}"),
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        (!text.is_empty()).then_some(text)
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        if !self.exited {
            self.signal_group(Signal::SIGKILL);
        }
    }
}

/// `shell -c <script>` in its own process group, stdin from `/dev/null`, output piped,
/// the script prefixed with the EXIT trap that reports `$PWD` on `report_fd`.
fn shell_command(
    shell: &Path,
    cmd: &BashExecCommand,
    dir: Option<&Path>,
    report_fd: i32,
) -> tokio::process::Command {
    let script = format!(
        "trap 'printf %s \"$PWD\" >&{report_fd}' EXIT; {}",
        cmd.command
    );
    let mut command = tokio::process::Command::new(shell);
    command
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    if let Some(env) = &cmd.env {
        command.envs(env);
    }
    command
}

/// Moves `fd` to a number at or above [`CWD_REPORT_FD`] (keeping close-on-exec), or
/// leaves it where it is if the fd limit does not allow that.
fn high_fd(fd: OwnedFd) -> OwnedFd {
    match rustix::io::fcntl_dupfd_cloexec(&fd, CWD_REPORT_FD) {
        Ok(high) => high,
        Err(e) => {
            tracing::debug!("cannot move the cwd report fd above {CWD_REPORT_FD}: {e}");
            fd
        }
    }
}

/// Spawns `command` with `report` inherited by the child under the same fd number.
///
/// No `pre_exec` hook (which would force a slow `fork`): the descriptor is made
/// inheritable just for the spawn, which then takes std's `posix_spawn` (vfork) path.
fn spawn_inheriting(
    command: &mut tokio::process::Command,
    report: OwnedFd,
) -> std::io::Result<Child> {
    let _window = SPAWN_WINDOW
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    fcntl(report.as_fd(), FcntlArg::F_SETFD(FdFlag::empty())).map_err(std::io::Error::from)?;
    let child = command.spawn();
    drop(report);
    child
}
