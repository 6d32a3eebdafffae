//! `BASH_EXEC` with `background: true` (docs/processes.md): the shell is started with a
//! stdin pipe (with `tty: true`, under a pseudo-terminal instead), handed to an actor task that owns it for the rest of its life, and entered
//! in the [`ProcessTable`]; the command itself streams the output seen within `yield_ms`
//! and ends with the process's id while the process keeps running.
//!
//! The actor reads stdout and stderr (or, for a `tty` process, its terminal's master side)
//! into the process's [`OutputLog`] (interleaved as they arrive, bounded), obeys kill requests (the signal to the whole tree, SIGKILL after
//! the grace), stops the process when the registry shuts down, and when the shell exits
//! kills what is left of its tree (a background job's helpers do not outlive it), drains
//! the pipes and records the exit.

use std::path::Path;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::domain::Domain;
use super::process::{Shell, SpawnOptions};
use super::pump::{read_with, sleep_until, DRAIN_AFTER_EXIT};
use crate::error::ExecError;
use crate::executor::ExecContext;
use crate::outcome::Outcome;
use crate::process::{
    report, Control, Process, ProcessState, ProcessTable, PtyReader, Readiness, Stdin, TermSize,
};
use crate::protocol::BashExecCommand;
use crate::ErrorCode;

/// How long a process at the end of its lifetime has between SIGTERM and SIGKILL.
const LIFETIME_GRACE: Duration = Duration::from_secs(2);

/// How long a background start waits for (and streams) first output by default.
pub const DEFAULT_YIELD: Duration = Duration::from_millis(1000);
/// Bytes per `RUNNING` chunk streamed while a start yields.
const YIELD_CHUNK: usize = 64 * 1024;

/// Where and how a background process starts.
pub(super) struct Launch<'a> {
    /// The table it joins.
    pub(super) table: &'a ProcessTable,
    /// How shells are started.
    pub(super) spawn: &'a SpawnOptions<'a>,
    /// Its working directory (checked).
    pub(super) dir: Option<&'a Path>,
    /// The scope's Landlock domain (its spawner thread), when confined.
    pub(super) sandbox: Option<&'a Domain>,
    /// Its terminal's size, for a `tty` process.
    pub(super) tty: Option<TermSize>,
}

/// The terminal size of a `tty` command (`None` without `tty`); `INVALID_INPUT` for
/// `tty` without `background` or with `session`, and for `cols`/`rows` without `tty` or
/// zero.
pub(super) fn terminal_size(cmd: &BashExecCommand) -> Result<Option<TermSize>, ExecError> {
    let invalid = |why: &str| Err(ExecError::InvalidInput(why.to_owned()));
    if !cmd.tty {
        if cmd.cols.is_some() || cmd.rows.is_some() {
            return invalid("cols and rows apply to tty processes (set tty: true)");
        }
        return Ok(None);
    }
    if cmd.session.is_some() {
        return invalid(
            "tty does not apply to sessions (a session's stdin carries its protocol): start \
             an interactive program with background: true and tty: true",
        );
    }
    if !cmd.background {
        return invalid(
            "tty applies to background processes (set background: true): a one-shot command \
             gets no input, so it has no terminal",
        );
    }
    if cmd.cols == Some(0) || cmd.rows == Some(0) {
        return invalid("cols and rows must be at least 1");
    }
    let default = TermSize::default();
    Ok(Some(TermSize {
        cols: cmd.cols.unwrap_or(default.cols),
        rows: cmd.rows.unwrap_or(default.rows),
    }))
}

/// Starts `cmd` as a background process of `launch.table`.
pub(super) async fn start(
    launch: &Launch<'_>,
    cmd: &BashExecCommand,
    ctx: &ExecContext,
) -> Result<Outcome, ExecError> {
    let Launch {
        table,
        spawn,
        dir,
        sandbox,
        tty,
    } = *launch;
    let readiness = cmd.ready.as_ref().map(Readiness::parse).transpose()?;
    let slot = table.reserve(&ctx.scope)?;
    let id = slot.id().to_owned();
    let (shell, stdin) = match tty {
        None => {
            let (shell, pipe) = Shell::spawn_background(spawn, cmd, dir, sandbox).await?;
            (shell, Stdin::Pipe(pipe))
        }
        Some(size) => {
            let (shell, pty) = Shell::spawn_terminal(spawn, cmd, dir, sandbox, size).await?;
            (shell, Stdin::Terminal(pty))
        }
    };
    let (control, requests) = mpsc::channel(4);
    let process = Arc::new(Process::new(
        &slot,
        cmd.command.clone(),
        shell.pid(),
        table.limits().output_log(),
        stdin,
        control,
    ));
    let lifetime = cmd.timeout_ms.map(Duration::from_millis);
    if let Some(lifetime) = lifetime {
        process.set_expires_at(std::time::SystemTime::now() + lifetime);
    }
    table.insert(slot, Arc::clone(&process));
    tokio::spawn(run(
        shell,
        Arc::clone(&process),
        requests,
        table.shutdown_token(),
        lifetime.map(|l| Instant::now() + l),
    ));
    if let Some(readiness) = readiness {
        return wait_ready(&process, readiness, ctx).await;
    }
    let yield_for = cmd.yield_ms.map_or(DEFAULT_YIELD, Duration::from_millis);
    let next = stream_first_output(&process, yield_for, ctx).await;
    process.set_read_offset(next);
    let state = process.state();
    let outcome = Outcome::succeeded(format!(
        "Started background process {id} (pid {}): {}.",
        process
            .pid
            .map_or_else(|| "?".to_owned(), |p| p.to_string()),
        state.describe()
    ));
    Ok(report(outcome, &process, state, next, None))
}

/// Streams the output until `readiness` passes (`SUCCEEDED`), the process exits first
/// (`FAILED` `PROCESS_EXITED`, with its exit code), or the wait times out (`FAILED`
/// `READY_TIMEOUT`; the process keeps running). Cancelled, the process is stopped.
async fn wait_ready(
    process: &Process,
    mut readiness: Readiness,
    ctx: &ExecContext,
) -> Result<Outcome, ExecError> {
    let started = Instant::now();
    let deadline = started + readiness.timeout;
    let mut offset = 0;
    let mut next_probe = Instant::now();
    let ready = loop {
        let slice = process.log.read(offset, YIELD_CHUNK);
        offset = slice.next_offset;
        if !slice.text.is_empty() {
            let ready = readiness.saw_output(&slice.text);
            let _ = ctx.output.send("Process output", slice.text).await;
            if ready {
                break true;
            }
        }
        if readiness.polls() && Instant::now() >= next_probe {
            if readiness.probe().await {
                break true;
            }
            next_probe = Instant::now() + crate::process::ready::POLL;
        }
        if process.log.is_closed() && offset >= process.log.end() {
            break false;
        }
        if Instant::now() >= deadline {
            break false;
        }
        let wake = if readiness.polls() {
            next_probe.min(deadline)
        } else {
            deadline
        };
        tokio::select! {
            _ = process.log.wait_beyond(offset, wake.saturating_duration_since(Instant::now())) => {}
            () = ctx.cancel.cancelled() => {
                process.kill(Signal::SIGTERM, Duration::from_secs(2)).await;
                return Err(ExecError::Cancelled);
            }
        }
    };
    process.set_read_offset(offset);
    let state = process.state();
    let took = crate::outcome::human_duration(started.elapsed());
    let outcome = if ready {
        Outcome::succeeded(format!(
            "Background process {} is ready ({}) after {took}.",
            process.id,
            readiness.describe()
        ))
    } else if state == ProcessState::Running {
        Outcome::failed(
            format!("Background process {} is still running.", process.id),
            format!(
                "not ready within {took}: waited for {} (the process still runs: read its \
                 output or PROCESS_KILL it)",
                readiness.describe()
            ),
        )
        .with_error_code(ErrorCode::ReadyTimeout)
    } else {
        Outcome::failed(
            format!("Background process {} {}.", process.id, state.describe()),
            format!(
                "the process {} before it was ready (waited for {})",
                state.describe(),
                readiness.describe()
            ),
        )
        .with_error_code(ErrorCode::ProcessExited)
    };
    Ok(report(outcome, process, state, offset, None))
}

/// Streams the output that appears within `yield_for` (or until the process exits or the
/// command is cancelled) as `RUNNING` chunks; the offset after the last byte sent.
async fn stream_first_output(process: &Process, yield_for: Duration, ctx: &ExecContext) -> u64 {
    let deadline = Instant::now() + yield_for;
    let mut offset = 0;
    loop {
        let slice = process.log.read(offset, YIELD_CHUNK);
        if !slice.text.is_empty() && ctx.output.send("Process output", slice.text).await.is_err() {
            return slice.next_offset;
        }
        offset = slice.next_offset;
        if process.log.is_closed() && offset >= process.log.end() {
            return offset;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || ctx.cancel.is_cancelled() {
            return offset;
        }
        tokio::select! {
            _ = process.log.wait_beyond(offset, left) => {}
            () = ctx.cancel.cancelled() => {}
        }
    }
}

/// The actor: owns the shell until it is gone.
async fn run(
    mut shell: Shell,
    process: Arc<Process>,
    mut requests: mpsc::Receiver<Control>,
    shutdown: tokio_util::sync::CancellationToken,
    expires: Option<Instant>,
) {
    let (mut stdout, mut stderr) = (shell.stdout.take(), shell.stderr.take());
    let mut terminal: Option<PtyReader> = process.terminal().map(|pty| pty.reader());
    let mut status: Option<ExitStatus> = None;
    let mut kill_at: Option<Instant> = None;
    let mut drain_until: Option<Instant> = None;
    let mut requests_open = true;
    let mut timed_out = false;
    while status.is_none() || stdout.is_some() || stderr.is_some() || terminal.is_some() {
        tokio::select! {
            n = read_with(&mut stdout, |b| process.log.append(b)) => take(&process, n, &mut stdout),
            n = read_with(&mut stderr, |b| process.log.append(b)) => take(&process, n, &mut stderr),
            n = read_with(&mut terminal, |b| process.log.append(b)) => take(&process, n, &mut terminal),
            exited = shell.child.wait(), if status.is_none() => {
                shell.exited = true;
                status = Some(exited.unwrap_or_else(|e| {
                    tracing::warn!(process = %process.id, "waiting for the shell: {e}");
                    std::os::unix::process::ExitStatusExt::from_raw(9)
                }));
                // What the shell left behind dies with it.
                shell.signal_group(Signal::SIGKILL);
                drain_until = Some(Instant::now() + DRAIN_AFTER_EXIT);
            }
            request = requests.recv(), if requests_open => match request {
                Some(Control::Kill { signal, grace }) => {
                    shell.signal_group(signal);
                    let at = Instant::now() + grace;
                    kill_at = Some(kill_at.map_or(at, |k| k.min(at)));
                }
                None => requests_open = false,
            },
            () = shutdown.cancelled(), if kill_at.is_none() && status.is_none() => {
                shell.signal_group(Signal::SIGTERM);
                kill_at = Some(Instant::now() + Duration::from_secs(2));
            }
            () = sleep_until(expires), if status.is_none() && !timed_out => {
                // Its lifetime is over: the tree gets SIGTERM, then SIGKILL after a grace.
                timed_out = true;
                shell.signal_group(Signal::SIGTERM);
                let at = Instant::now() + LIFETIME_GRACE;
                kill_at = Some(kill_at.map_or(at, |k| k.min(at)));
            }
            () = sleep_until(kill_at), if status.is_none() => {
                shell.signal_group(Signal::SIGKILL);
                kill_at = None;
            }
            () = sleep_until(drain_until) => break,
        }
    }
    let (code, signal) = match status {
        Some(status) => {
            use std::os::unix::process::ExitStatusExt;
            (status.code(), status.signal())
        }
        None => (None, None),
    };
    process.set_exited(code, signal, timed_out);
    tracing::debug!(process = %process.id, ?code, ?signal, "background process exited");
}

/// Closes the pipe on end-of-file or error (what a read returned is in the log already).
fn take<P>(process: &Process, read: std::io::Result<usize>, pipe: &mut Option<P>) {
    match read {
        Ok(n) if n > 0 => {}
        Ok(_) => *pipe = None,
        Err(e) => {
            tracing::debug!(process = %process.id, "reading output: {e}");
            *pipe = None;
        }
    }
}
