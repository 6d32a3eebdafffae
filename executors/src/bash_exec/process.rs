//! Starting the shell in its own process group, signalling the group, and reading the
//! final working directory the shell reports on its way out.

use std::ffi::OsString;
use std::io::{ErrorKind, Read};
use std::net::Shutdown;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::net::unix::pipe;

use super::child::ShellChild;
use super::domain::Domain;
use super::spawn::{self, Io, ShellSpec, Spawned};
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
/// trap writes `$PWD` there. Nothing has to be inherited beyond stdio (every other
/// descriptor is close-on-exec), so shells are spawned concurrently and no shell ever
/// holds another's report channel. Shells start inside their cgroup ([`spawn`]).
pub(super) struct Shell {
    pub(super) child: ShellChild,
    pub(super) stdout: Option<pipe::Receiver>,
    pub(super) stderr: Option<pipe::Receiver>,
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
    /// `sandbox` (the scope's Landlock domain, which the shell joins) when given.
    pub(super) async fn spawn(
        spawn: &SpawnOptions<'_>,
        cmd: &BashExecCommand,
        dir: Option<&Path>,
        sandbox: Option<&Domain>,
    ) -> Result<Self, ExecError> {
        let spawn_error = |source| ExecError::Spawn {
            program: spawn.shell.display().to_string(),
            source,
        };
        let tree = Tree::new(spawn.cgroups);
        let (report, stdin) = stdin_socket().map_err(spawn_error)?;
        let spawned = spawn_through(spawn, cmd, dir, &tree, ShellStdin::Report(stdin), sandbox)
            .await?
            .map_err(spawn_error);
        if let Err(e) = report.shutdown(Shutdown::Write) {
            tracing::debug!("shutting the shell's stdin: {e}");
        }
        Self::new(spawned?, tree, Some(report)).map_err(spawn_error)
    }

    /// Starts a background shell (docs/processes.md): like [`Shell::spawn`], but its
    /// stdin is a pipe cmdr keeps for `PROCESS_INPUT`, and no working directory is
    /// reported. Returns the shell and that pipe.
    pub(super) async fn spawn_background(
        spawn: &SpawnOptions<'_>,
        cmd: &BashExecCommand,
        dir: Option<&Path>,
        sandbox: Option<&Domain>,
    ) -> Result<(Self, pipe::Sender), ExecError> {
        let spawn_error = |source| ExecError::Spawn {
            program: spawn.shell.display().to_string(),
            source,
        };
        let tree = Tree::new(spawn.cgroups);
        let mut spawned = spawn_through(spawn, cmd, dir, &tree, ShellStdin::Piped, sandbox)
            .await?
            .map_err(spawn_error)?;
        let stdin = spawned
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("the shell's stdin pipe is missing"))
            .and_then(pipe::Sender::from_owned_fd)
            .map_err(spawn_error)?;
        Ok((Self::new(spawned, tree, None).map_err(spawn_error)?, stdin))
    }

    /// Starts a `tty` background shell (docs/processes.md, "Terminals"): like
    /// [`Shell::spawn_background`], but under a new pseudo-terminal of `size` (its stdin,
    /// stdout and stderr, and its controlling terminal, through `setsid --ctty`). Returns
    /// the shell and the terminal's master side.
    pub(super) async fn spawn_terminal(
        spawn: &SpawnOptions<'_>,
        cmd: &BashExecCommand,
        dir: Option<&Path>,
        sandbox: Option<&Domain>,
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
        let stdin = ShellStdin::Terminal(terminal);
        let spawned = spawn_through(spawn, cmd, dir, &tree, stdin, sandbox)
            .await?
            .map_err(spawn_error)?;
        let shell = Self::new(spawned, tree, None).map_err(spawn_error)?;
        Ok((shell, Arc::new(pty)))
    }

    fn new(spawned: Spawned, tree: Tree, cwd_report: Option<UnixStream>) -> std::io::Result<Self> {
        let Spawned {
            child,
            stdout,
            stderr,
            ..
        } = spawned;
        let pgid = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .map(Pid::from_raw);
        if let Some(pipe) = &stdout {
            grow_pipe(pipe);
        }
        // Registered with the runtime: the shell's output is read asynchronously.
        let stdout = stdout.map(pipe::Receiver::from_owned_fd).transpose()?;
        let stderr = stderr.map(pipe::Receiver::from_owned_fd).transpose()?;
        Ok(Self {
            stdout,
            stderr,
            child,
            pgid,
            tree: Some(tree),
            cwd_report,
            exited: false,
        })
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

/// Spawns the shell for `cmd` ([`shell_spec`]), through `sandbox` (the scope's Landlock
/// domain, which the shell joins) when given. The outer error is the domain's, the inner
/// one the spawn's.
async fn spawn_through(
    spawn: &SpawnOptions<'_>,
    cmd: &BashExecCommand,
    dir: Option<&Path>,
    tree: &Tree,
    stdin: ShellStdin,
    sandbox: Option<&Domain>,
) -> Result<std::io::Result<Spawned>, ExecError> {
    let spec = match shell_spec(spawn, cmd, dir, tree, stdin) {
        Ok(spec) => spec,
        Err(e) => return Ok(Err(e)),
    };
    Ok(match sandbox {
        None => spawn::spawn(spec),
        Some(sandbox) => sandbox.run(move || spawn::spawn(spec)).await?,
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
    /// and stderr).
    Terminal(OwnedFd),
}

/// `TERM` of `tty` processes (unless the configured or the command's `env` sets it).
pub const TERMINAL_TYPE: &str = "xterm-256color";

/// The stdio of a `tty` shell: the terminal everywhere.
fn terminal_stdio(terminal: OwnedFd) -> std::io::Result<[Io; 3]> {
    let stdout = terminal.try_clone()?;
    let stderr = terminal.try_clone()?;
    Ok([Io::Fd(terminal), Io::Fd(stdout), Io::Fd(stderr)])
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
/// `setsid`, when cmdr has a terminal), inside the tree's cgroup when it has one, with the
/// configured `env` and then the command's own variables, stdin from `stdin`, output
/// piped, the script prefixed (on the same line, so bash's line numbers stay the user's)
/// with a copy of stdin on [`CWD_REPORT_FD`] and the EXIT trap that reports `$PWD` there.
///
/// `--norc`: bash runs `~/.bashrc` for `-c` when its stdin is a socket and `SHLVL` is
/// unset (as under systemd or Docker); a command must not run rc files, whatever the
/// parent environment.
fn shell_spec(
    spawn: &SpawnOptions<'_>,
    cmd: &BashExecCommand,
    dir: Option<&Path>,
    tree: &Tree,
    stdin: ShellStdin,
) -> std::io::Result<ShellSpec> {
    let fd = CWD_REPORT_FD;
    let mut ctty = None;
    let (script, stdio) = match stdin {
        ShellStdin::Report(stdin) => (
            format!(
                "exec {fd}>&0; trap 'printf \"\\0%s\" \"$PWD\" >&{fd}' EXIT; {}",
                cmd.command
            ),
            [Io::Fd(stdin), Io::PipeFromChild, Io::PipeFromChild],
        ),
        ShellStdin::Piped => (
            cmd.command.clone(),
            [Io::PipeToChild, Io::PipeFromChild, Io::PipeFromChild],
        ),
        ShellStdin::Terminal(terminal) => {
            ctty = spawn.tty_setsid;
            (cmd.command.clone(), terminal_stdio(terminal)?)
        }
    };
    let mut args: Vec<OsString> = Vec::with_capacity(5);
    let (program, new_group) = match (ctty, spawn.setsid) {
        // A terminal becomes the controlling terminal of the shell's new session.
        (Some(setsid), _) => {
            args.extend(["--ctty".into(), spawn.shell.into()]);
            (setsid, false)
        }
        (None, Some(setsid)) => {
            args.push(spawn.shell.into());
            (setsid, false)
        }
        (None, None) => (spawn.shell, true),
    };
    args.extend(["--norc".into(), "-c".into(), script.into()]);
    // Only what the environment policy built (never cmdr's secrets, never the variables
    // that make bash run code first), then cmdr's own markers, then the command's `env`.
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut set = |key: &str, value: &str| env.push((key.into(), value.into()));
    spawn.base_env.iter().for_each(|(k, v)| set(k, v));
    if ctty.is_some() {
        // The terminal is cmdr's, not the one cmdr may run in: say what it speaks.
        set("TERM", TERMINAL_TYPE);
    }
    spawn.env.iter().for_each(|(k, v)| set(k, v));
    if let Some((key, value)) = tree.marker() {
        set(key, value);
    }
    if let Some(vars) = &cmd.env {
        vars.iter().for_each(|(k, v)| set(k, v));
    }
    Ok(ShellSpec {
        program: program.to_path_buf(),
        args,
        env,
        dir: dir.map(Path::to_path_buf),
        stdio,
        new_group,
        cgroup: tree.cgroup(),
    })
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
