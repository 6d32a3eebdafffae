//! Persistent shell sessions: `BASH_EXEC` with `session: "<name>"` (docs/processes.md).
//!
//! The first command for a name starts one long-lived bash — spawned like a background
//! process (environment policy, sandbox, cgroup, stdin a pipe) and entered in the
//! [`ProcessTable`] (listed, killable) — running a small loop: read a frame (a token and
//! the command, [`session_frame`](super::session_frame)) from its stdin pipe; `eval` the
//! command in the shell itself (so `cd`, variables and functions carry over) with stdin
//! `/dev/null` and stderr joined to stdout (one stream, in the order written, as one-shot
//! commands report it); then print an end marker holding the token, `$?` and `$PWD`. Output before the marker
//! is the command's, streamed as it comes; the result has the same shape as a one-shot
//! command (exit code, final cwd).
//!
//! A timeout or cancel interrupts the command, not the session: SIGINT to the session's
//! process group (the loop traps INT, so bash lives on and prints the marker, exit 130);
//! a command that ignores SIGINT gets SIGKILL after the grace, which ends the session
//! (the next command starts a new one, and says so). Commands of one session run one at a
//! time, in order. A command that exits the shell (`exit 3`) ends the session with its
//! status.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use tokio::sync::mpsc;

use super::domain::Domain;
use super::process::{Shell, SpawnOptions};
use super::pump::{read_some, sleep_until};
use super::session_frame::{frame, marker, new_token, LOOP, MAX_COMMAND};
use crate::error::ExecError;
use crate::executor::ExecContext;
use crate::outcome::{human_duration, Outcome};
use crate::process::{Control, Process, ProcessState, ProcessTable, Scope};
use crate::protocol::BashExecCommand;
use crate::utf8::Utf8Decoder;
use crate::ErrorCode;

/// Bytes per read from each pipe.
const READ_BUF: usize = 64 * 1024;
/// A session's output chunks are sent at least this often while a command prints.
const CHUNK_BYTES: usize = 64 * 1024;

/// Where and how a session's shell is started.
pub(super) struct Launch<'a> {
    /// The process table it joins.
    pub(super) table: &'a ProcessTable,
    /// How shells are spawned.
    pub(super) spawn: &'a SpawnOptions<'a>,
    /// The command's own `working_dir`: the session `cd`s there before the command.
    pub(super) dir: Option<&'a Path>,
    /// Where a new session's shell starts (the command's `working_dir`, else the
    /// executor's default, else cmdr's own directory), or why it may not start there.
    /// Only a new session needs it: a later command without `working_dir` stays where the
    /// session is.
    pub(super) start_dir: &'a (dyn Fn() -> Result<Option<PathBuf>, ExecError> + Sync),
    /// The scope's Landlock domain (its spawner thread), when confined.
    pub(super) sandbox: Option<&'a Domain>,
}

/// A session's name within its scope: two scopes may each have a session `dev`.
type Key = (Scope, String);

/// The named sessions of one executor, by scope and name.
#[derive(Debug, Default)]
pub(super) struct Sessions {
    by_name: Mutex<HashMap<Key, Arc<SessionHandle>>>,
    /// Held while a session's shell starts, so two first commands for one name get one
    /// shell.
    starting: tokio::sync::Mutex<()>,
}

/// A running session: its process entry and the channel to its actor.
#[derive(Debug)]
struct SessionHandle {
    process: Arc<Process>,
    requests: mpsc::Sender<Request>,
    /// One command at a time.
    turn: tokio::sync::Mutex<()>,
}

/// A command for the session's actor.
#[derive(Debug)]
struct Request {
    token: u128,
    /// The frame to write ([`frame`]).
    frame: Vec<u8>,
    events: mpsc::Sender<Event>,
}

/// What the actor reports about the current command.
#[derive(Debug)]
enum Event {
    Output(String),
    Done {
        code: i32,
        cwd: String,
    },
    /// The session's shell ended while the command ran.
    Ended(ProcessState),
}

impl Sessions {
    /// Runs `cmd` in its session (started if needed).
    pub(super) async fn run(
        &self,
        launch: &Launch<'_>,
        cmd: &BashExecCommand,
        ctx: &ExecContext,
        kill_grace: Duration,
    ) -> Result<Outcome, ExecError> {
        let name = cmd.session.clone().unwrap_or_default();
        check(cmd, &name)?;
        let started = Instant::now();
        let dir = launch.dir;
        let key: Key = (ctx.scope.clone(), name.clone());
        let (session, fresh) = self.session(launch, &key).await?;
        let _turn = session.turn.lock().await;
        let (events_tx, mut events) = mpsc::channel(16);
        let token = new_token();
        let dir = dir.map(|d| std::os::unix::ffi::OsStrExt::as_bytes(d.as_os_str()));
        let request = Request {
            token,
            frame: frame(token, dir, &cmd.command),
            events: events_tx,
        };
        if session.requests.send(request).await.is_err() {
            self.forget(&key, &session);
            return Err(ExecError::InvalidInput(format!(
                "session '{name}' ended; send the command again to start a new one"
            )));
        }
        if fresh {
            let note = format!(
                "[cmdr: started shell session '{name}' ({})]\n",
                session.process.id
            );
            tracing::debug!("{note}");
        }
        let mut interrupted: Option<tokio::time::Instant> = None;
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                () = ctx.cancel.cancelled(), if interrupted.is_none() => {
                    session.process.kill(Signal::SIGINT, Duration::ZERO).await;
                    interrupted = Some(tokio::time::Instant::now() + kill_grace);
                    continue;
                }
                () = sleep_until(interrupted) => {
                    // It ignored SIGINT: the session goes with it.
                    session.process.kill(Signal::SIGKILL, Duration::ZERO).await;
                    interrupted = None;
                    continue;
                }
            };
            match event {
                Some(Event::Output(text)) => {
                    let _ = ctx.output.send("Command output", text).await;
                }
                Some(Event::Done { code, cwd }) => {
                    return Ok(done(&name, code, cwd, started.elapsed(), ctx));
                }
                ended_event => {
                    let reported = match ended_event {
                        Some(Event::Ended(state)) => state,
                        _ => session.process.state(),
                    };
                    let state = match session.process.state() {
                        ProcessState::Running => reported,
                        exited => exited,
                    };
                    self.forget(&key, &session);
                    if ctx.cancel.is_cancelled() {
                        return Err(ExecError::Cancelled);
                    }
                    return Ok(ended(&name, state, started.elapsed()));
                }
            }
        }
    }

    /// The session called `name`, started now when there is none (or it ended).
    async fn session(
        &self,
        launch: &Launch<'_>,
        key: &Key,
    ) -> Result<(Arc<SessionHandle>, bool), ExecError> {
        let (scope, name) = key;
        let Launch {
            table,
            spawn,
            start_dir,
            sandbox,
            ..
        } = *launch;
        if let Some(existing) = self.running(key) {
            return Ok((existing, false));
        }
        let _starting = self.starting.lock().await;
        if let Some(existing) = self.running(key) {
            return Ok((existing, false));
        }
        self.check_room(scope, table.limits().max_sessions_per_scope)?;
        let dir = start_dir()?;
        let dir = dir.as_deref();
        let loop_cmd = BashExecCommand {
            command: LOOP.to_owned(),
            ..BashExecCommand::default()
        };
        let slot = table.reserve(scope)?;
        let (shell, stdin) = Shell::spawn_background(spawn, &loop_cmd, dir, sandbox).await?;
        let (control, controls) = mpsc::channel(4);
        let process = Arc::new(Process::new(
            &slot,
            format!("session {name}"),
            shell.pid(),
            table.limits().output_log(),
            stdin,
            control,
        ));
        process.set_session(name);
        table.insert(slot, Arc::clone(&process));
        let (requests, requests_rx) = mpsc::channel(1);
        tokio::spawn(actor(
            shell,
            Arc::clone(&process),
            requests_rx,
            controls,
            table.shutdown_token(),
            table.limits().session_idle,
        ));
        let handle = Arc::new(SessionHandle {
            process,
            requests,
            turn: tokio::sync::Mutex::new(()),
        });
        let mut by_name = self.lock();
        // Sessions that ended (killed, or their scope ended) are forgotten here.
        by_name.retain(|_, s| s.process.state() == ProcessState::Running);
        by_name.insert(key.clone(), Arc::clone(&handle));
        Ok((handle, true))
    }

    /// Refuses a new session in `scope` when it already keeps `max` running ones.
    fn check_room(&self, scope: &Scope, max: usize) -> Result<(), ExecError> {
        let kept = self
            .lock()
            .iter()
            .filter(|((s, _), h)| s == scope && h.process.state() == ProcessState::Running)
            .count();
        if kept >= max {
            return Err(ExecError::TooManyProcesses(format!(
                "{kept} sessions in this scope, the most it may keep (end one, or let it idle out)"
            )));
        }
        Ok(())
    }

    /// The running session under `key`, if any.
    fn running(&self, key: &Key) -> Option<Arc<SessionHandle>> {
        self.lock()
            .get(key)
            .filter(|s| s.process.state() == ProcessState::Running)
            .cloned()
    }

    /// Drops `session` from the names (if it is still the one under `name`).
    fn forget(&self, key: &Key, session: &Arc<SessionHandle>) {
        let mut by_name = self.lock();
        if by_name.get(key).is_some_and(|s| Arc::ptr_eq(s, session)) {
            by_name.remove(key);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<SessionHandle>>> {
        self.by_name.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What a session command may not carry.
fn check(cmd: &BashExecCommand, name: &str) -> Result<(), ExecError> {
    let invalid = |why: &str| Err(ExecError::InvalidInput(why.to_owned()));
    if name.trim().is_empty() || name.len() > 128 {
        return invalid("session must be a name of 1 to 128 characters");
    }
    if cmd.background || cmd.ready.is_some() {
        return invalid("session and background cannot be combined");
    }
    if cmd.env.is_some() {
        return invalid(
            "env cannot be given with session (export variables in the session instead)",
        );
    }
    if cmd.command.contains('\0') {
        return invalid("a session command cannot contain NUL characters");
    }
    if cmd.command.len() > MAX_COMMAND {
        return invalid("a session command can have at most 16 MiB");
    }
    Ok(())
}

/// The result of a command that ran to its end marker.
fn done(name: &str, code: i32, cwd: String, elapsed: Duration, ctx: &ExecContext) -> Outcome {
    let message = format!(
        "Command finished in {} (session {name}). Final CWD: {cwd}.",
        human_duration(elapsed)
    );
    let mut outcome = if ctx.cancel.is_cancelled() {
        Outcome::failed(message, "interrupted (SIGINT); the session goes on")
            .with_error_code(ErrorCode::Cancelled)
    } else if code == 0 {
        Outcome::succeeded(message)
    } else {
        Outcome::failed(message, format!("exit status {code}"))
            .with_error_code(ErrorCode::ExitStatus)
    };
    outcome.exit_code = Some(code);
    outcome.final_cwd = Some(cwd);
    outcome
}

/// The result of a command during which the session's shell ended.
fn ended(name: &str, state: ProcessState, elapsed: Duration) -> Outcome {
    let message = format!(
        "The shell of session {name} ended after {} ({}); the next command starts a new session.",
        human_duration(elapsed),
        state.describe()
    );
    let mut outcome = match state.exit_code() {
        Some(0) => Outcome::succeeded(message),
        Some(code) => Outcome::failed(message, format!("exit status {code}"))
            .with_error_code(ErrorCode::ExitStatus),
        None => {
            Outcome::failed(message, "the session was killed").with_error_code(ErrorCode::Killed)
        }
    };
    outcome.exit_code = state.exit_code();
    outcome
}

/// The session's actor: writes commands, splits the output at the markers.
async fn actor(
    mut shell: Shell,
    process: Arc<Process>,
    mut requests: mpsc::Receiver<Request>,
    mut controls: mpsc::Receiver<Control>,
    shutdown: tokio_util::sync::CancellationToken,
    idle: Duration,
) {
    let idle_deadline = || Some(tokio::time::Instant::now() + idle);
    let mut idle_at = idle_deadline();
    let (mut stdout, mut stderr) = (shell.stdout.take(), shell.stderr.take());
    let (mut out_buf, mut err_buf) = (Vec::with_capacity(READ_BUF), Vec::with_capacity(READ_BUF));
    let mut current: Option<Current> = None;
    let mut kill_at: Option<tokio::time::Instant> = None;
    let status = loop {
        tokio::select! {
            n = read_some(&mut stdout, &mut out_buf) => {
                if !take(n, &mut out_buf, &mut stdout) {
                    continue;
                }
                if let Some(cur) = current.as_mut() {
                    cur.stdout(&out_buf, &process).await;
                }
                out_buf.clear();
            }
            n = read_some(&mut stderr, &mut err_buf) => {
                if !take(n, &mut err_buf, &mut stderr) {
                    continue;
                }
                if let Some(cur) = current.as_mut() {
                    cur.stderr(&err_buf, &process).await;
                }
                err_buf.clear();
            }
            request = requests.recv(), if current.is_none() => {
                let Some(request) = request else { break None };
                if process.write_input(&request.frame, false).await.is_err() {
                    let _ = request.events.send(Event::Ended(process.state())).await;
                    continue;
                }
                current = Some(Current::new(request));
                idle_at = None;
            }
            control = controls.recv() => match control {
                Some(Control::Kill { signal, grace }) => {
                    shell.signal_group(signal);
                    if grace > Duration::ZERO {
                        kill_at = Some(tokio::time::Instant::now() + grace);
                    }
                }
                None => {}
            },
            () = sleep_until(kill_at) => {
                shell.signal_group(Signal::SIGKILL);
                kill_at = None;
            }
            () = sleep_until(idle_at), if current.is_none() => {
                tracing::info!(process = %process.id, "session idle for {idle:?}: ending its shell");
                shell.signal_group(Signal::SIGKILL);
                idle_at = None;
            }
            () = shutdown.cancelled() => {
                shell.signal_group(Signal::SIGKILL);
                break shell.child.wait().await.ok();
            }
            exited = shell.child.wait() => break exited.ok(),
        }
        if current.as_ref().is_some_and(Current::finished) {
            if let Some(cur) = current.take() {
                cur.finish().await;
            }
            idle_at = idle_deadline();
        }
    };
    shell.exited = status.is_some();
    shell.signal_group(Signal::SIGKILL);
    let (code, signal) = status.map_or((None, None), |s| {
        use std::os::unix::process::ExitStatusExt;
        (s.code(), s.signal())
    });
    process.set_exited(code, signal, false);
    if let Some(cur) = current.take() {
        let _ = cur.events.send(Event::Ended(process.state())).await;
    }
}

/// The command being run: its marker parsers and where its events go.
struct Current {
    events: mpsc::Sender<Event>,
    out: MarkerSplitter,
    out_text: Utf8Decoder,
    err_text: Utf8Decoder,
    /// `rc:cwd` read after the stdout marker, up to its NUL.
    tail: Vec<u8>,
    result: Option<(i32, String)>,
}

impl Current {
    fn new(request: Request) -> Self {
        Self {
            events: request.events,
            out: MarkerSplitter::new(marker(request.token)),

            out_text: Utf8Decoder::default(),
            err_text: Utf8Decoder::default(),
            tail: Vec::new(),
            result: None,
        }
    }

    async fn stdout(&mut self, bytes: &[u8], process: &Process) {
        if self.out.found {
            self.take_tail(bytes);
            return;
        }
        let (output, after) = self.out.feed(bytes);
        self.emit(output, true, process).await;
        if let Some(after) = after {
            self.take_tail(&after);
        }
    }

    /// What the session's shell itself writes to stderr while the command runs.
    async fn stderr(&mut self, bytes: &[u8], process: &Process) {
        self.emit(bytes.to_vec(), false, process).await;
    }

    fn take_tail(&mut self, bytes: &[u8]) {
        if self.result.is_some() {
            return;
        }
        self.tail.extend_from_slice(bytes);
        if let Some(end) = self.tail.iter().position(|b| *b == 0) {
            let text = String::from_utf8_lossy(&self.tail[..end]).into_owned();
            let (code, cwd) = text.split_once(':').unwrap_or(("1", ""));
            self.result = Some((code.parse().unwrap_or(1), cwd.to_owned()));
        }
    }

    async fn emit(&mut self, bytes: Vec<u8>, stdout: bool, process: &Process) {
        if bytes.is_empty() {
            return;
        }
        process.log.append(&bytes);
        let mut text = String::new();
        let decoder = if stdout {
            &mut self.out_text
        } else {
            &mut self.err_text
        };
        decoder.decode(&bytes, &mut text);
        for piece in chunks(text) {
            let _ = self.events.send(Event::Output(piece)).await;
        }
    }

    fn finished(&self) -> bool {
        self.result.is_some()
    }

    async fn finish(mut self) {
        let mut rest = String::new();
        self.out_text.finish(&mut rest);
        self.err_text.finish(&mut rest);
        if !rest.is_empty() {
            let _ = self.events.send(Event::Output(rest)).await;
        }
        if let Some((code, cwd)) = self.result.take() {
            let _ = self.events.send(Event::Done { code, cwd }).await;
        }
    }
}

/// Splits a byte stream at the first occurrence of a marker, holding back a tail that may
/// be the marker's start.
struct MarkerSplitter {
    marker: Vec<u8>,
    held: Vec<u8>,
    found: bool,
}

impl MarkerSplitter {
    fn new(marker: Vec<u8>) -> Self {
        Self {
            marker,
            held: Vec::new(),
            found: false,
        }
    }

    /// The output certainly before the marker, and (once found) the bytes after it.
    fn feed(&mut self, bytes: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
        self.held.extend_from_slice(bytes);
        if let Some(at) = memchr::memmem::find(&self.held, &self.marker) {
            self.found = true;
            let after = self.held.split_off(at + self.marker.len());
            self.held.truncate(at);
            return (std::mem::take(&mut self.held), Some(after));
        }
        let keep = (1..self.marker.len())
            .rev()
            .find(|&n| self.held.ends_with(&self.marker[..n]))
            .unwrap_or(0);
        let rest = self.held.split_off(self.held.len() - keep);
        (std::mem::replace(&mut self.held, rest), None)
    }
}

/// `text` in pieces of at most [`CHUNK_BYTES`] (at character boundaries).
fn chunks(text: String) -> Vec<String> {
    if text.len() <= CHUNK_BYTES {
        return vec![text];
    }
    let mut pieces = Vec::new();
    let mut rest = text.as_str();
    while !rest.is_empty() {
        let mut cut = rest.len().min(CHUNK_BYTES);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        pieces.push(rest[..cut].to_owned());
        rest = &rest[cut..];
    }
    pieces
}

/// Whether a read returned data (`false`: the pipe closed, or failed, and is dropped).
fn take<P>(read: std::io::Result<usize>, buf: &mut Vec<u8>, pipe: &mut Option<P>) -> bool {
    match read {
        Ok(n) if n > 0 => true,
        Ok(_) => {
            *pipe = None;
            false
        }
        Err(e) => {
            tracing::debug!("reading session output: {e}");
            buf.clear();
            *pipe = None;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_found_across_reads_and_output_before_it_is_released() {
        let mut s = MarkerSplitter::new(b"\x1eCMDR:t:".to_vec());
        let (out, after) = s.feed(b"hello\n\x1eCM");
        assert_eq!((out.as_slice(), after), (b"hello\n".as_slice(), None));
        let (out, after) = s.feed(b"DR:t:0:/tmp\0");
        assert_eq!(out, b"");
        assert_eq!(after.as_deref(), Some(b"0:/tmp\0".as_slice()));
        assert!(s.found);
        let mut s = MarkerSplitter::new(b"\x1eCMDR:t:".to_vec());
        let (out, _) = s.feed(b"a\nb\n");
        assert_eq!(out, b"a\nb\n", "plain text is released at once");
    }

    #[test]
    fn a_session_command_is_checked() {
        let ok = BashExecCommand {
            command: "ls".into(),
            ..BashExecCommand::default()
        };
        assert!(check(&ok, "main").is_ok());
        assert!(check(&ok, " ").is_err());
        assert!(check(
            &BashExecCommand {
                command: "a\0b".into(),
                ..ok.clone()
            },
            "x"
        )
        .is_err());
        assert!(check(
            &BashExecCommand {
                background: true,
                ..ok
            },
            "x"
        )
        .is_err());
    }
}
