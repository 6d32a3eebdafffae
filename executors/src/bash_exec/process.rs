//! Starting the shell in its own process group, signalling the group, and reading the
//! final working directory the shell reports on its way out.

use std::io::{ErrorKind, Read};
use std::net::Shutdown;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

use super::sandbox::Sandbox;
use super::tree::Tree;
use crate::error::ExecError;
use crate::process::{Pty, TermSize};
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
    /// Every process of the command, also those that left the group.
    tree: Option<Tree>,
    /// `None` for a background process (its stdin is a pipe for input).
    cwd_report: Option<UnixStream>,
    /// Set once the shell has been reaped; until then, dropping kills the group.
    pub(super) exited: bool,
}

impl Shell {
    /// Starts `shell -c <script>` in `dir` with the command's environment; through
    /// `sandbox` (so that the shell inherits its Landlock restriction) when given.
    pub(super) async fn spawn(
        spawn: &SpawnOptions<'_>,
        cmd: &BashExecCommand,
        dir: Option<&Path>,
        sandbox: Option<&Sandbox>,
    ) -> Result<Self, ExecError> {
        let spawn_error = |source| ExecError::Spawn {
            program: spawn.shell.display().to_string(),
            source,
        };
        let tree = Tree::new(spawn.cgroups);
        let (report, stdin) = stdin_socket().map_err(spawn_error)?;
        let command = shell_command(spawn, cmd, dir, &tree, ShellStdin::Report(stdin));
        let spawned = spawn_through(command, sandbox).await?;
        // Adopted (or not) before it may run anything: the script's first step waits for
        // this end of its stdin to shut.
        if let Ok(child) = &spawned {
            if let Some(pid) = child.id() {
                tree.adopt(pid);
            }
        }
        if let Err(e) = report.shutdown(Shutdown::Write) {
            tracing::debug!("shutting the shell's stdin: {e}");
        }
        let child = spawned.map_err(spawn_error)?;
        Ok(Self::new(child, tree, Some(report)))
    }

    /// Starts a background shell (docs/processes.md): like [`Shell::spawn`], but its
    /// stdin is a pipe cmdr keeps for `PROCESS_INPUT`, and no working directory is
    /// reported. Returns the shell and that pipe.
    pub(super) async fn spawn_background(
        spawn: &SpawnOptions<'_>,
        cmd: &BashExecCommand,
        dir: Option<&Path>,
        sandbox: Option<&Sandbox>,
    ) -> Result<(Self, ChildStdin), ExecError> {
        let spawn_error = |source| ExecError::Spawn {
            program: spawn.shell.display().to_string(),
            source,
        };
        let tree = Tree::new(spawn.cgroups);
        let command = shell_command(spawn, cmd, dir, &tree, ShellStdin::Piped);
        let mut child = spawn_through(command, sandbox)
            .await?
            .map_err(spawn_error)?;
        let mut stdin = child.stdin.take().ok_or_else(|| {
            spawn_error(std::io::Error::other("the shell's stdin pipe is missing"))
        })?;
        if tree.adopts() {
            if let Some(pid) = child.id() {
                tree.adopt(pid);
            }
            // The script's first step reads this line: it runs once adopted.
            stdin.write_all(b"\n").await.map_err(spawn_error)?;
        }
        Ok((Self::new(child, tree, None), stdin))
    }

    /// Starts a `tty` background shell (docs/processes.md, "Terminals"): like
    /// [`Shell::spawn_background`], but under a new pseudo-terminal of `size` (its stdin,
    /// stdout and stderr, and its controlling terminal, through `setsid --ctty`). Returns
    /// the shell and the terminal's master side.
    pub(super) async fn spawn_terminal(
        spawn: &SpawnOptions<'_>,
        cmd: &BashExecCommand,
        dir: Option<&Path>,
        sandbox: Option<&Sandbox>,
        size: TermSize,
    ) -> Result<(Self, Arc<Pty>), ExecError> {
        let spawn_error = |source| ExecError::Spawn {
            program: spawn.shell.display().to_string(),
            source,
        };
        if spawn.tty_setsid.is_none() {
            return Err(spawn_error(std::io::Error::other(
                "a tty process needs setsid(1) (util-linux), which was not found",
            )));
        }
        let (pty, terminal) = Pty::open(size).map_err(spawn_error)?;
        let tree = Tree::new(spawn.cgroups);
        let (go_ahead, theirs) = if tree.adopts() {
            let (ours, theirs) = UnixStream::pair().map_err(spawn_error)?;
            (Some(ours), Some(OwnedFd::from(theirs)))
        } else {
            (None, None)
        };
        let stdin = ShellStdin::Terminal {
            terminal,
            go_ahead: theirs,
        };
        let command = shell_command(spawn, cmd, dir, &tree, stdin);
        let child = spawn_through(command, sandbox)
            .await?
            .map_err(spawn_error)?;
        if let Some(mut go_ahead) = go_ahead {
            if let Some(pid) = child.id() {
                tree.adopt(pid);
            }
            // The script's first step reads this line: it runs once adopted.
            std::io::Write::write_all(&mut go_ahead, b"\n").map_err(spawn_error)?;
        }
        Ok((Self::new(child, tree, None), Arc::new(pty)))
    }

    fn new(mut child: Child, tree: Tree, cwd_report: Option<UnixStream>) -> Self {
        let pgid = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .map(Pid::from_raw);
        let stdout = child.stdout.take();
        if let Some(pipe) = &stdout {
            grow_pipe(pipe);
        }
        Self {
            stdout,
            stderr: child.stderr.take(),
            child,
            pgid,
            tree: Some(tree),
            cwd_report,
            exited: false,
        }
    }

    /// The shell's process id, while it runs.
    pub(super) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Sends `signal` to the shell's whole tree: its process group (children,
    /// grandchildren …) and every process that left it ([`Tree`]).
    pub(super) fn signal_group(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            if let Err(e) = killpg(pgid, signal) {
                tracing::debug!(%pgid, ?signal, "killpg: {e}");
            }
        }
        if let Some(tree) = &self.tree {
            tree.signal(signal);
        }
    }

    /// The directory the shell reported on exit, if it did.
    pub(super) fn final_cwd(&mut self) -> Option<String> {
        let mut bytes = Vec::new();
        let mut reader = self.cwd_report.as_mut()?.take(CWD_REPORT_MAX);
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
        if let Some(tree) = self.tree.take() {
            tree.release();
        }
    }
}

/// Spawns `command`, through `sandbox` (so the shell inherits its Landlock restriction)
/// when given. The outer error is the sandbox's, the inner one the spawn's.
async fn spawn_through(
    mut command: tokio::process::Command,
    sandbox: Option<&Sandbox>,
) -> Result<std::io::Result<Child>, ExecError> {
    Ok(match sandbox {
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
    })
}

/// What the shell's stdin is.
enum ShellStdin {
    /// One-shot commands: the shell's end of the socket that reports its final working
    /// directory (end-of-file for reads).
    Report(OwnedFd),
    /// Background processes: a pipe cmdr writes input to.
    Piped,
    /// `tty` background processes: the terminal side of a pseudo-terminal (stdin, stdout
    /// and stderr), and, when the shell waits to be adopted, the socket it reads the
    /// go-ahead from (on its stderr until then).
    Terminal {
        terminal: OwnedFd,
        go_ahead: Option<OwnedFd>,
    },
}

/// `TERM` of `tty` processes (unless the configured or the command's `env` sets it).
pub const TERMINAL_TYPE: &str = "xterm-256color";

/// The script and stdio of a `tty` shell: the terminal everywhere, except that while the
/// shell waits to be adopted its stderr is the go-ahead socket (reading the terminal would
/// echo the go-ahead into the output); it then points stderr at the terminal.
fn terminal_stdio(
    terminal: OwnedFd,
    go_ahead: Option<OwnedFd>,
    script: &str,
) -> (String, [Stdio; 3]) {
    let copies = [terminal.try_clone(), terminal.try_clone()];
    let [Ok(stdout), Ok(stderr)] = copies else {
        // Out of descriptors: the spawn fails on the closed stdio it is given.
        return (String::new(), [Stdio::null(), Stdio::null(), Stdio::null()]);
    };
    match go_ahead {
        Some(go_ahead) => (
            format!("read -r _ <&2; exec 2>&1; {script}"),
            [terminal.into(), stdout.into(), go_ahead.into()],
        ),
        None => (
            script.to_owned(),
            [terminal.into(), stdout.into(), stderr.into()],
        ),
    }
}

/// cmdr's end of the shell's stdin (non-blocking; shut for writing once the shell is
/// spawned) and the shell's end.
fn stdin_socket() -> std::io::Result<(UnixStream, OwnedFd)> {
    let (ours, theirs) = UnixStream::pair()?;
    ours.set_nonblocking(true)?;
    Ok((ours, OwnedFd::from(theirs)))
}

/// How shells are started: the same for every command of an executor.
#[derive(Debug, Clone)]
pub(super) struct SpawnOptions<'a> {
    /// The shell.
    pub(super) shell: &'a Path,
    /// The environment it starts with (nothing else of cmdr's is inherited).
    pub(super) base_env: &'a [(String, String)],
    /// Variables set for every shell, before the command's own.
    pub(super) env: &'a [(String, String)],
    /// A cgroup per command where one can be made ([`Tree`]).
    pub(super) cgroups: bool,
    /// `setsid` to run the shell through, in a session of its own, when cmdr has a
    /// controlling terminal (see [`session_leader`]).
    pub(super) setsid: Option<&'a Path>,
    /// `setsid` (wherever cmdr runs) for `tty` processes: `setsid --ctty` makes their
    /// terminal the controlling terminal of their new session.
    pub(super) tty_setsid: Option<&'a Path>,
}

/// Variables of cmdr's environment that would make a non-interactive bash run code or
/// change its behaviour before the script: dropped unless the command's `env` sets them.
pub const SHELL_STARTUP_VARS: [&str; 4] = ["BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS"];

/// `shell --norc -c <script>` in its own process group (its own session, through
/// `setsid`, when cmdr has a terminal), with the configured `env` and then the command's
/// own variables, stdin from `stdin`, output piped, the script prefixed (on the same
/// line, so bash's line numbers stay the user's) with: a wait for cmdr to adopt it into its
/// tree (when it has a cgroup), a copy of stdin on [`CWD_REPORT_FD`] and the EXIT trap
/// that reports `$PWD` there.
///
/// `--norc`: bash runs `~/.bashrc` for `-c` when its stdin is a socket and `SHLVL` is
/// unset (as under systemd or Docker); a command must not run rc files, whatever the
/// parent environment.
fn shell_command(
    spawn: &SpawnOptions<'_>,
    cmd: &BashExecCommand,
    dir: Option<&Path>,
    tree: &Tree,
    stdin: ShellStdin,
) -> tokio::process::Command {
    let fd = CWD_REPORT_FD;
    let wait = if tree.adopts() { "read -r _; " } else { "" };
    let mut ctty = None;
    let (script, [stdin, stdout, stderr]) = match stdin {
        ShellStdin::Report(stdin) => (
            format!(
                "{wait}exec {fd}>&0; trap 'printf \"\\0%s\" \"$PWD\" >&{fd}' EXIT; {}",
                cmd.command
            ),
            [Stdio::from(stdin), Stdio::piped(), Stdio::piped()],
        ),
        ShellStdin::Piped => (
            format!("{wait}{}", cmd.command),
            [Stdio::piped(), Stdio::piped(), Stdio::piped()],
        ),
        ShellStdin::Terminal { terminal, go_ahead } => {
            ctty = spawn.tty_setsid;
            terminal_stdio(terminal, go_ahead, &cmd.command)
        }
    };
    let mut command = match (ctty, spawn.setsid) {
        // A terminal becomes the controlling terminal of the shell's new session.
        (Some(setsid), _) => {
            let mut command = tokio::process::Command::new(setsid);
            command.arg("--ctty").arg(spawn.shell);
            command
        }
        (None, Some(setsid)) => {
            let mut command = tokio::process::Command::new(setsid);
            command.arg(spawn.shell);
            command
        }
        (None, None) => {
            let mut command = tokio::process::Command::new(spawn.shell);
            command.process_group(0);
            command
        }
    };
    command
        .arg("--norc")
        .arg("-c")
        .arg(script)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        .kill_on_drop(true);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    // Only what the environment policy built (never cmdr's secrets, never the variables
    // that make bash run code first), then cmdr's own markers, then the command's `env`.
    command.env_clear();
    command.envs(spawn.base_env.iter().map(|(k, v)| (k, v)));
    if ctty.is_some() {
        // The terminal is cmdr's, not the one cmdr may run in: say what it speaks.
        command.env("TERM", TERMINAL_TYPE);
    }
    command.envs(spawn.env.iter().map(|(k, v)| (k, v)));
    if let Some((key, value)) = tree.marker() {
        command.env(key, value);
    }
    if let Some(env) = &cmd.env {
        command.envs(env);
    }
    command
}

/// `setsid` when cmdr has a controlling terminal: a shell sharing it could push input into
/// it (`TIOCSTI`), answering cmdr's own questions on the terminal or typing into the
/// user's shell after cmdr exits. In a session of its own a shell has no terminal at all.
/// `None` without a terminal (servers, CI) or without `setsid` (then a warning).
pub(super) fn session_leader() -> Option<PathBuf> {
    std::fs::File::open("/dev/tty").ok()?;
    let found = setsid_program();
    if found.is_none() {
        tracing::warn!("cmdr has a terminal but no setsid(1) was found: shells share the terminal");
    }
    found
}

/// `setsid(1)`, where it is.
pub(super) fn setsid_program() -> Option<PathBuf> {
    ["/usr/bin/setsid", "/bin/setsid"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Bytes the shell's stdout pipe may hold (the kernel's default is 64 KiB): a command
/// printing fast writes ahead while cmdr encodes instead of blocking and waking on every
/// 64 KiB (`BASH_EXEC cat` of 100 MB: ~12 % faster; 1 MiB gave ~20 %). Not more: the
/// kernel charges a user's pipes by capacity, and past `pipe-user-pages-soft` (64 MiB by
/// default) every new pipe of that user, the commands' own `a | b` included, is cut to one
/// page. One-shot commands, background processes and sessions all get it: 64 commands and
/// 32 background shells at once × 256 KiB stay near a third of that budget.
const PIPE_SIZE: i32 = 256 << 10;

/// Grows `pipe` to [`PIPE_SIZE`] where the kernel allows it (best effort).
fn grow_pipe(pipe: &impl std::os::fd::AsFd) {
    use nix::fcntl::{fcntl, FcntlArg};
    if let Err(e) = fcntl(pipe, FcntlArg::F_SETPIPE_SZ(PIPE_SIZE)) {
        tracing::debug!("growing a pipe: {e}");
    }
}
