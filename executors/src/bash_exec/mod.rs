//! `BASH_EXEC`: run a script with `/bin/bash -c`, streaming its output.
//!
//! - The shell runs in its own process group with stdin at end-of-file (a command that
//!   reads stdin gets EOF at once and never hangs).
//! - stdout and stderr are read concurrently and interleaved into `RUNNING` chunks
//!   ([`pump`]): small writes are coalesced, characters are never split, invalid bytes
//!   become U+FFFD.
//! - Cancel and timeout (the runtime fires `ctx.cancel`) send SIGTERM to the whole group,
//!   then SIGKILL after [`BashExecConfig::kill_grace`].
//! - The final working directory is reported by an EXIT trap writing `$PWD` to fd
//!   [`process::CWD_REPORT_FD`], a copy of stdin, which is a socket back to cmdr (see
//!   `process::Shell`): no temp file, nothing added to the output, no lock. If
//!   the script replaces the EXIT trap or `exec`s another program, `finalCwd` is absent.
//! - Background processes left running by a script that exits normally keep running; the
//!   result does not wait for them beyond [`pump::DRAIN_AFTER_EXIT`].

mod background;
mod child;
mod domain;
mod env;
mod env_policy;
mod process;
mod pump;
mod sandbox;
mod sandbox_status;
mod session;
mod session_frame;
mod spawn;
mod tree;

use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::confine::PathPolicy;
use crate::error::ExecError;
use crate::executor::{ExecContext, ExecFuture, Executor};
use crate::outcome::{human_duration, Outcome};
use crate::process::ProcessTable;
use crate::protocol::{BashExecCommand, Command};
use crate::ErrorCode;

pub use background::DEFAULT_YIELD;

pub use env_policy::{EnvPolicy, Inherit, CORE_VARS, DEFAULT_EXCLUDES, NEVER_INHERITED};
pub use process::{CWD_REPORT_FD, SHELL_STARTUP_VARS};
pub use pump::{DRAIN_AFTER_EXIT, FLUSH_BYTES, FLUSH_INTERVAL};
pub use sandbox::{Sandbox, SandboxStatus};
pub use tree::{remove_cgroups, TreeMechanism, MARKER_VAR};

/// Settings of the `BASH_EXEC` executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashExecConfig {
    /// The shell (default `/bin/bash`; a login shell is avoided on purpose: 2–3× slower).
    pub shell: PathBuf,
    /// Deadline for commands without `timeout_ms` (default 5 minutes).
    pub default_timeout: Option<Duration>,
    /// Time between SIGTERM and SIGKILL when a command is stopped.
    pub kill_grace: Duration,
    /// Directory for commands without `working_dir` (default: cmdr's own).
    pub default_working_dir: Option<PathBuf>,
    /// Variables set for every shell, before (so below) the command's own `env`.
    pub env: Vec<(String, String)>,
    /// Track each command's processes in a cgroup of its own where cmdr can make one
    /// (default); `false`: the environment marker only (see [`TreeMechanism`]).
    pub cgroups: bool,
    /// How the environment shells start with is built from cmdr's own (default: all of
    /// it but secrets and cmdr's own variables; see [`EnvPolicy`]).
    pub env_policy: EnvPolicy,
}

impl Default for BashExecConfig {
    fn default() -> Self {
        Self {
            shell: PathBuf::from("/bin/bash"),
            default_timeout: Some(Duration::from_secs(300)),
            kill_grace: Duration::from_secs(2),
            default_working_dir: None,
            env: Vec::new(),
            cgroups: true,
            env_policy: EnvPolicy::default(),
        }
    }
}

/// The `BASH_EXEC` executor.
#[derive(Debug, Clone, Default)]
pub struct BashExec {
    config: BashExecConfig,
    /// `setsid` when cmdr has a controlling terminal (shells get none).
    setsid: Option<PathBuf>,
    /// `setsid` for `tty` processes (found wherever cmdr runs).
    tty_setsid: Option<PathBuf>,
    /// The environment shells start with ([`BashExecConfig::env_policy`] applied to
    /// cmdr's environment once, when the executor is made).
    base_env: Arc<[(String, String)]>,
    /// Where `working_dir` may point.
    paths: PathPolicy,
    /// The scopes' Landlock domains, when confined (`--landlock`).
    sandbox: Option<Arc<Sandbox>>,
    /// Where background processes go; `None`: `background` is refused.
    processes: Option<ProcessTable>,
    /// The persistent shell sessions by name.
    sessions: Arc<session::Sessions>,
}

impl BashExec {
    /// An executor with `config`.
    pub fn new(config: BashExecConfig) -> Self {
        Self {
            base_env: config.env_policy.apply_to_process().into(),
            config,
            setsid: process::session_leader(),
            tty_setsid: process::setsid_program(),
            ..Self::default()
        }
    }

    /// How this executor finds every process of a command it stops.
    pub fn tree_mechanism(&self) -> TreeMechanism {
        tree::mechanism(self.config.cgroups)
    }

    /// Confines `working_dir` (and the default directory) to `paths`.
    pub fn with_paths(mut self, paths: PathPolicy) -> Self {
        self.paths = paths;
        self
    }

    /// Runs `background` commands as processes of `table` (docs/processes.md).
    pub fn with_processes(mut self, table: ProcessTable) -> Self {
        self.processes = Some(table);
        self
    }

    /// Spawns every shell through `sandbox`: in its scope's Landlock domain, its writes
    /// confined.
    pub fn with_sandbox(mut self, sandbox: Arc<Sandbox>) -> Self {
        self.sandbox = Some(sandbox);
        self
    }
}

impl Executor for BashExec {
    fn execute(&self, command: Command, ctx: ExecContext) -> ExecFuture<'_> {
        Box::pin(async move {
            let cmd = BashExecCommand::try_from(command)?;
            env::check(cmd.env.as_ref())?;
            // A session command without `working_dir` stays where its session is: only a
            // new session's start directory is resolved (and checked), when it starts.
            let stays = cmd.session.is_some() && cmd.working_dir.is_none();
            let dir = if stays { None } else { self.working_dir(&cmd)? };
            let started = Instant::now();
            let spawn = process::SpawnOptions {
                shell: &self.config.shell,
                base_env: cmd.base_env.as_deref().unwrap_or(&self.base_env),
                env: &self.config.env,
                cgroups: self.config.cgroups,
                setsid: self.setsid.as_deref(),
                tty_setsid: self.tty_setsid.as_deref(),
            };
            // Held until the command ends, so its scope's domain is not ended as idle.
            let domain = match &self.sandbox {
                Some(sandbox) => Some(sandbox.domain(&ctx.scope)?),
                None => None,
            };
            let sandbox = domain.as_deref();
            if cmd.ready.is_some() && !cmd.background {
                return Err(ExecError::InvalidInput(
                    "ready applies to background processes only (set background: true)".to_owned(),
                ));
            }
            let tty = background::terminal_size(&cmd)?;
            if cmd.session.is_some() {
                let Some(table) = &self.processes else {
                    return Err(ExecError::InvalidInput(
                        "shell sessions are not enabled in this registry".to_owned(),
                    ));
                };
                let start_dir = || self.working_dir(&cmd);
                let launch = session::Launch {
                    table,
                    spawn: &spawn,
                    dir: dir.as_deref(),
                    start_dir: &start_dir,
                    sandbox,
                };
                let grace = self.config.kill_grace;
                return self.sessions.run(&launch, &cmd, &ctx, grace).await;
            }
            if cmd.background {
                let Some(table) = &self.processes else {
                    return Err(ExecError::InvalidInput(
                        "background processes are not enabled in this registry".to_owned(),
                    ));
                };
                let launch = background::Launch {
                    table,
                    spawn: &spawn,
                    dir: dir.as_deref(),
                    sandbox,
                    tty,
                };
                return background::start(&launch, &cmd, &ctx).await;
            }
            let mut shell = process::Shell::spawn(&spawn, &cmd, dir.as_deref(), sandbox).await?;
            let pumped = pump::pump(&mut shell, &ctx, self.config.kill_grace).await;
            let final_cwd = shell.final_cwd();
            let status = pumped?;
            Ok(outcome(status, final_cwd, started.elapsed()))
        })
    }
}

impl BashExec {
    /// The directory to start in; `None`: cmdr's own (inherited, no syscall spent on it).
    fn working_dir(&self, cmd: &BashExecCommand) -> Result<Option<PathBuf>, ExecError> {
        let dir = match (&cmd.working_dir, &self.config.default_working_dir) {
            (Some(dir), _) if dir.as_os_str().is_empty() => None,
            (Some(dir), _) => Some(dir.clone()),
            (None, default) => default.clone(),
        };
        let Some(dir) = dir else {
            self.check_inherited_dir()?;
            return Ok(None);
        };
        if !dir.is_absolute() {
            return Err(ExecError::InvalidInput(format!(
                "working_dir must be an absolute path, got '{}'",
                dir.display()
            )));
        }
        self.paths.check(&dir, "working_dir")?;
        match std::fs::metadata(&dir) {
            Ok(meta) if meta.is_dir() => Ok(Some(dir)),
            Ok(_) => Err(ExecError::InvalidInput(format!(
                "working_dir {} is not a directory",
                dir.display()
            ))),
            Err(e) => Err(ExecError::io(&dir, e)),
        }
    }
}

impl BashExec {
    /// When confined, a command without `working_dir` would run in cmdr's own directory:
    /// allowed only if that lies beneath a root too.
    fn check_inherited_dir(&self) -> Result<(), ExecError> {
        if !self.paths.is_restricted() {
            return Ok(());
        }
        let cwd = std::env::current_dir().map_err(|e| ExecError::io(".".as_ref(), e))?;
        self.paths
            .check(&cwd, "working directory (no working_dir given; cmdr's own)")?;
        Ok(())
    }
}

/// The terminal outcome for how the shell exited.
fn outcome(status: ExitStatus, final_cwd: Option<String>, elapsed: Duration) -> Outcome {
    let cwd_text = final_cwd.as_deref().unwrap_or("unknown");
    let message = format!(
        "Command finished in {}. Final CWD: {cwd_text}.",
        human_duration(elapsed)
    );
    let mut outcome = match (status.code(), signal_of(status)) {
        (Some(0), _) => Outcome::succeeded(message),
        (Some(code), _) => Outcome::failed(message, format!("exit status {code}"))
            .with_error_code(ErrorCode::ExitStatus),
        (None, Some(signal)) => Outcome::failed(message, format!("killed by signal {signal}"))
            .with_error_code(ErrorCode::Killed),
        (None, None) => {
            Outcome::failed(message, "exited abnormally").with_error_code(ErrorCode::Killed)
        }
    };
    outcome.exit_code = status.code();
    outcome.final_cwd = final_cwd;
    outcome
}

fn signal_of(status: ExitStatus) -> Option<String> {
    use std::os::unix::process::ExitStatusExt;
    let signal = status.signal()?;
    Some(
        nix::sys::signal::Signal::try_from(signal)
            .map(|s| s.as_str().to_owned())
            .unwrap_or_else(|_| signal.to_string()),
    )
}
