//! Starting the shell in its own process group, signalling the group, and reading the
//! final working directory the shell reports on its way out.

use std::io::{ErrorKind, Read};
use std::net::Shutdown;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Stdio;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, ChildStderr, ChildStdout};

use super::sandbox::Sandbox;
use crate::error::ExecError;
use crate::protocol::BashExecCommand;

/// The fd the shell's EXIT trap writes `$PWD` to: a copy of its stdin (see [`Shell`]).
/// High, so scripts that use low numbers (`exec 3<file`, flock's customary 200) do not
/// collide with it.
pub const CWD_REPORT_FD: i32 = 600;

/// Longest working-directory report read back (paths are at most 4 KiB on Linux).
const CWD_REPORT_MAX: u64 = 16 * 1024;

/// A running shell: the child, its output pipes, and cmdr's end of its stdin socket.
///
/// The shell's stdin is one end of a socket pair whose other end cmdr shut down for
/// writing at once: a command reading stdin gets end-of-file at once, as from
/// `/dev/null`, and never hangs. The socket also carries the final working directory the
/// other way: the script's prefix keeps a copy of stdin on [`CWD_REPORT_FD`] and its EXIT
/// trap writes `$PWD` there. Nothing has to be inherited beyond stdio, so shells are
/// spawned concurrently (std's `posix_spawn` path, no lock, no `pre_exec`), and no shell
/// ever holds another's report channel.
pub(super) struct Shell {
    pub(super) child: Child,
    pub(super) stdout: Option<ChildStdout>,
    pub(super) stderr: Option<ChildStderr>,
    pgid: Option<Pid>,
    cwd_report: UnixStream,
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
        let (report, stdin) = stdin_socket().map_err(spawn_error)?;
        let mut command = shell_command(shell, cmd, dir, env, stdin);
        let spawned = match sandbox {
            None => command.spawn(),
            Some(sandbox) => {
                let runtime = tokio::runtime::Handle::current();
                sandbox
                    .run(move || {
                        let _context = runtime.enter();
                        command.spawn()
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
            cwd_report: report,
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
        // Only what follows the last NUL: a script that wrote to its stdin itself cannot
        // pass that off as the directory (a path holds no NUL).
        let report = bytes.rsplit(|b| *b == 0).next().unwrap_or_default();
        let text = String::from_utf8_lossy(report).into_owned();
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

/// cmdr's end of the shell's stdin (shut for writing, non-blocking) and the shell's end.
fn stdin_socket() -> std::io::Result<(UnixStream, OwnedFd)> {
    let (ours, theirs) = UnixStream::pair()?;
    ours.shutdown(Shutdown::Write)?;
    ours.set_nonblocking(true)?;
    Ok((ours, OwnedFd::from(theirs)))
}

/// `shell -c <script>` in its own process group, with the configured `env` and then the
/// command's own variables, stdin from `stdin`, output piped, the
/// script prefixed (on the same line, so bash's line numbers stay the user's) with a copy
/// of stdin on [`CWD_REPORT_FD`] and the EXIT trap that reports `$PWD` there.
fn shell_command(
    shell: &Path,
    cmd: &BashExecCommand,
    dir: Option<&Path>,
    env: &[(String, String)],
    stdin: OwnedFd,
) -> tokio::process::Command {
    let fd = CWD_REPORT_FD;
    let script = format!(
        "exec {fd}>&0; trap 'printf \"\\0%s\" \"$PWD\" >&{fd}' EXIT; {}",
        cmd.command
    );
    let mut command = tokio::process::Command::new(shell);
    command
        .arg("-c")
        .arg(script)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    // The configured variables first: the command's own, set after, win.
    command.envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(env) = &cmd.env {
        command.envs(env);
    }
    command
}
