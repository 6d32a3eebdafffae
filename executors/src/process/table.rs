//! [`ProcessTable`]: the background processes of one registry, by id.
//!
//! Each entry is a [`Process`]: what was started, its output log, its state, its stdin
//! and the channel to the actor that owns the child (spawned by `BASH_EXEC` with
//! `background`), and the [`Scope`] it belongs to. The table shows each scope only its
//! own processes, enforces the limits on running processes (in all and per scope), keeps
//! a few exited ones readable, stops a scope's processes when it ends and every process
//! when the registry shuts down.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::log::OutputLog;
use super::pty::Pty;
use super::stdin::Stdin;
use crate::error::ExecError;
use crate::scope::Scope;

/// How long a failed write of input waits for the process's exit to be recorded before
/// it says the process closed its input instead (the actor drains pipes for 250 ms).
const INPUT_EXIT_WAIT: Duration = Duration::from_millis(400);

/// Limits of a process table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessLimits {
    /// Processes running at once in the whole registry (default 32); one more is
    /// `TOO_MANY_PROCESSES`.
    pub max_running: usize,
    /// Processes running at once in one scope (default 16); one more is
    /// `TOO_MANY_PROCESSES`.
    pub max_running_per_scope: usize,
    /// Exited processes kept readable (default 32; the oldest go first).
    pub max_exited: usize,
    /// Output bytes kept per process (default 16 MiB; older output is dropped and readers
    /// are told `truncatedBefore`).
    pub log_cap: usize,
    /// Output bytes kept in memory per process (default 256 KiB); older ones, up to
    /// `log_cap`, are spilled to an unlinked temporary file.
    pub log_memory: usize,
    /// Shell sessions kept at once in one scope (default 8), apart from `max_running_per_scope`
    /// (a session is a process too): one more is `TOO_MANY_PROCESSES`, so one client's
    /// sessions cannot take the process places of a scope others share.
    pub max_sessions_per_scope: usize,
    /// How long a session may sit without a command before its shell is ended (default
    /// 30 min).
    pub session_idle: std::time::Duration,
}

impl Default for ProcessLimits {
    fn default() -> Self {
        Self {
            max_running: 32,
            max_running_per_scope: 16,
            max_exited: 32,
            log_cap: 16 * 1024 * 1024,
            log_memory: 256 * 1024,
            max_sessions_per_scope: 8,
            session_idle: std::time::Duration::from_secs(30 * 60),
        }
    }
}

impl ProcessLimits {
    /// An empty output log with these limits.
    pub fn output_log(&self) -> OutputLog {
        OutputLog::spilling(self.log_memory, self.log_cap)
    }
}

/// Where a process stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessState {
    /// Still running.
    Running,
    /// Gone: its exit code, or the signal that ended it.
    Exited {
        /// The exit code, when it exited normally.
        code: Option<i32>,
        /// The signal that killed it, if one did.
        signal: Option<i32>,
        /// It was stopped at the end of its lifetime (`timeout_ms` of its start).
        timed_out: bool,
    },
}

impl ProcessState {
    /// How the process is, in words (`running`, `exited with code 0`, `killed by signal
    /// TERM` …) for the messages of the commands about it.
    pub fn describe(self) -> String {
        match self {
            ProcessState::Running => "running".to_owned(),
            ProcessState::Exited {
                timed_out: true, ..
            } => "stopped at the end of its lifetime (timeout_ms)".to_owned(),
            ProcessState::Exited {
                code: Some(code), ..
            } => format!("exited with code {code}"),
            ProcessState::Exited {
                signal: Some(signal),
                ..
            } => format!("killed by signal {signal}"),
            ProcessState::Exited { .. } => "exited".to_owned(),
        }
    }

    /// `running` or `exited`, as in `processState`.
    pub fn name(self) -> &'static str {
        match self {
            ProcessState::Running => "running",
            ProcessState::Exited { .. } => "exited",
        }
    }

    /// The exit code, once exited normally.
    pub fn exit_code(self) -> Option<i32> {
        match self {
            ProcessState::Running => None,
            ProcessState::Exited { code, .. } => code,
        }
    }

    /// Whether it was stopped at the end of its lifetime.
    pub fn timed_out(self) -> bool {
        matches!(
            self,
            ProcessState::Exited {
                timed_out: true,
                ..
            }
        )
    }

    /// The name of the signal that ended it (`KILL`, `TERM` …; its number if it has no
    /// name), when one did.
    pub fn signal_name(self) -> Option<String> {
        let ProcessState::Exited {
            signal: Some(number),
            ..
        } = self
        else {
            return None;
        };
        Some(match nix::sys::signal::Signal::try_from(number) {
            Ok(signal) => signal.as_str().trim_start_matches("SIG").to_owned(),
            Err(_) => number.to_string(),
        })
    }
}

/// A request to the actor that owns a process's child.
#[derive(Debug)]
pub enum Control {
    /// Send `signal` to the whole tree, then SIGKILL after `grace`.
    Kill {
        /// The first signal.
        signal: nix::sys::signal::Signal,
        /// Time before SIGKILL.
        grace: Duration,
    },
}

/// One background process.
#[derive(Debug)]
pub struct Process {
    /// Its id (`p1`, `p2` …, after the table's id prefix if it has one).
    pub id: String,
    /// The scope it belongs to.
    scope: Scope,
    /// The command that started it.
    pub command: String,
    /// The shell's process id.
    pub pid: Option<u32>,
    /// When it started.
    pub started_at: SystemTime,
    /// Its output.
    pub log: OutputLog,
    state: watch::Sender<ProcessState>,
    stdin: tokio::sync::Mutex<Option<Stdin>>,
    /// Its pseudo-terminal, when started with `tty`.
    terminal: Option<Arc<Pty>>,
    control: mpsc::Sender<Control>,
    /// Where a `PROCESS_OUTPUT` without `offset` starts: where the last read stopped.
    read_offset: AtomicU64,
    /// The session's name, when this process is a persistent shell session.
    session: std::sync::OnceLock<String>,
    /// When it exited, once it has.
    exited_at: std::sync::OnceLock<SystemTime>,
    /// When its lifetime ends (`timeout_ms` of its start), if it has one.
    expires_at: std::sync::OnceLock<SystemTime>,
}

impl Process {
    /// A running process that will take `slot`, whose actor listens on `control`; its
    /// output goes to `log`.
    pub fn new(
        slot: &Slot,
        command: String,
        pid: Option<u32>,
        log: OutputLog,
        stdin: impl Into<Stdin>,
        control: mpsc::Sender<Control>,
    ) -> Self {
        let stdin = stdin.into();
        Self {
            terminal: stdin.terminal().cloned(),
            id: slot.id.clone(),
            scope: slot.scope.clone(),
            command,
            pid,
            started_at: SystemTime::now(),
            log,
            state: watch::channel(ProcessState::Running).0,
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            control,
            read_offset: AtomicU64::new(0),
            session: std::sync::OnceLock::new(),
            exited_at: std::sync::OnceLock::new(),
            expires_at: std::sync::OnceLock::new(),
        }
    }

    /// The scope it belongs to.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// Marks this process as the shell of session `name`.
    pub fn set_session(&self, name: &str) {
        let _ = self.session.set(name.to_owned());
    }

    /// The session's name, when this process is a persistent shell session.
    pub fn session(&self) -> Option<&str> {
        self.session.get().map(String::as_str)
    }

    /// Where it stands now.
    pub fn state(&self) -> ProcessState {
        *self.state.borrow()
    }

    /// Records that it exited (the actor calls this once its output is drained): the
    /// state first, then the log's close, so that whoever is woken by the close (a long
    /// poll, an SSE follower, a start waiting out `yield_ms`) sees how it exited.
    pub fn set_exited(&self, code: Option<i32>, signal: Option<i32>, timed_out: bool) {
        let _ = self.exited_at.set(SystemTime::now());
        self.state.send_replace(ProcessState::Exited {
            code,
            signal,
            timed_out,
        });
        self.log.close();
    }

    /// Gives it a lifetime ending at `at` (its actor stops it then).
    pub fn set_expires_at(&self, at: SystemTime) {
        let _ = self.expires_at.set(at);
    }

    /// When its lifetime ends, if it has one.
    pub fn expires_at(&self) -> Option<SystemTime> {
        self.expires_at.get().copied()
    }

    /// When it exited, once it has.
    pub fn exited_at(&self) -> Option<SystemTime> {
        self.exited_at.get().copied()
    }

    /// Waits until it has exited, at most `timeout`; its state then.
    pub async fn wait_exit(&self, timeout: Duration) -> ProcessState {
        let mut state = self.state.subscribe();
        let exited = |s: &ProcessState| matches!(s, ProcessState::Exited { .. });
        let _ = tokio::time::timeout(timeout, state.wait_for(exited)).await;
        self.state()
    }

    /// Writes `input` to its stdin (then gives it end-of-file when `close`: a pipe is
    /// closed, a terminal gets `^D`), waiting as long as the process takes to read it.
    pub async fn write_input(&self, input: &[u8], close: bool) -> Result<(), ExecError> {
        self.write_input_within(input, close, Duration::MAX).await
    }

    /// Writes `input` like [`Process::write_input`], but gives up when the process takes
    /// none of it for `stall` (its pipe or terminal queue full: it is not reading): then
    /// `INPUT_BLOCKED`, saying how much went in, and the rest is dropped. A process that
    /// keeps reading, however slowly, gets all of it. Its input is free again for the
    /// next writer either way (nothing waits on a process that does not read).
    pub async fn write_input_within(
        &self,
        input: &[u8],
        close: bool,
        stall: Duration,
    ) -> Result<(), ExecError> {
        if self.state() != ProcessState::Running {
            return Err(self.exited_error());
        }
        let mut stdin = self.stdin.lock().await;
        let Some(sink) = stdin.as_mut() else {
            return Err(ExecError::InvalidInput(format!(
                "the stdin of process '{}' is closed",
                self.id
            )));
        };
        let blocked = |written| ExecError::InputBlocked {
            id: self.id.clone(),
            written,
            total: input.len(),
            stalled: stall,
        };
        let mut written = 0;
        while let Some(rest) = input.get(written..).filter(|r| !r.is_empty()) {
            match tokio::time::timeout(stall, sink.write_some(rest)).await {
                Ok(Ok(n)) => written += n,
                Ok(Err(e)) => return Err(self.write_failed(&e).await),
                Err(_) => return Err(blocked(written)),
            }
        }
        match tokio::time::timeout(stall, sink.finish(close)).await {
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false)) => {
                *stdin = None;
                Ok(())
            }
            Ok(Err(e)) => Err(self.write_failed(&e).await),
            Err(_) => Err(blocked(written)),
        }
    }

    /// `PROCESS_EXITED`, with its exit code when known.
    fn exited_error(&self) -> ExecError {
        ExecError::ProcessExited {
            id: self.id.clone(),
            code: self.state().exit_code(),
        }
    }

    /// Why writing its input failed with `e`: it exited (its exit is recorded once its
    /// output is drained, so that is waited for briefly), or it lives on with its input
    /// closed (`exec 0<&-`).
    async fn write_failed(&self, e: &std::io::Error) -> ExecError {
        tracing::debug!(process = %self.id, "writing input: {e}");
        match self.wait_exit(INPUT_EXIT_WAIT).await {
            ProcessState::Running => ExecError::InvalidInput(format!(
                "process '{}' has closed its input ({e}): it reads no more",
                self.id
            )),
            ProcessState::Exited { .. } => self.exited_error(),
        }
    }

    /// Its pseudo-terminal, when started with `tty`.
    pub fn terminal(&self) -> Option<&Arc<Pty>> {
        self.terminal.as_ref()
    }

    /// Asks the actor to stop the process.
    pub async fn kill(&self, signal: nix::sys::signal::Signal, grace: Duration) {
        let _ = self.control.send(Control::Kill { signal, grace }).await;
    }

    /// Asks the actor to stop the process now, from code that cannot wait (the request
    /// is dropped only when the actor has four pending already, or is gone).
    pub fn kill_now(&self, signal: nix::sys::signal::Signal) {
        let _ = self.control.try_send(Control::Kill {
            signal,
            grace: Duration::ZERO,
        });
    }

    /// Where the default reader stopped.
    pub fn read_offset(&self) -> u64 {
        self.read_offset.load(Ordering::Relaxed)
    }

    /// Where the last read stopped: the next read without an offset starts there.
    pub fn set_read_offset(&self, to: u64) {
        self.read_offset.store(to, Ordering::Relaxed);
    }
}

/// The background processes of one registry, each in its [`Scope`]. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ProcessTable {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    limits: ProcessLimits,
    entries: Mutex<Entries>,
    next: AtomicU64,
    shutdown: CancellationToken,
    /// What every id starts with before `p<N>` (e.g. a NATS worker's id and `-`).
    id_prefix: String,
}

/// What the table's lock guards.
#[derive(Debug, Default)]
struct Entries {
    /// The processes, by number (`p<N>`).
    processes: BTreeMap<u64, Arc<Process>>,
    /// Starts reserved and not inserted yet: their scope, and whether the scope was ended
    /// meanwhile (the process is then stopped as soon as it is inserted).
    starting: BTreeMap<u64, (Scope, bool)>,
}

impl Entries {
    /// Running or starting processes, in all and in `scope`.
    fn running(&self, scope: &Scope) -> (usize, usize) {
        let mut all = self.starting.len();
        let mut mine = self.starting.values().filter(|(s, _)| s == scope).count();
        for p in self.processes.values() {
            if p.state() == ProcessState::Running {
                all += 1;
                mine += usize::from(p.scope() == scope);
            }
        }
        (all, mine)
    }
}

/// A process about to start: its id, counted against the limits until it is inserted
/// ([`ProcessTable::insert`]) or dropped (the start failed).
#[derive(Debug)]
pub struct Slot {
    table: ProcessTable,
    n: u64,
    id: String,
    scope: Scope,
}

impl Slot {
    /// The id the process will have.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The scope it will belong to.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.table.lock().starting.remove(&self.n);
    }
}

impl Default for ProcessTable {
    fn default() -> Self {
        Self::new(ProcessLimits::default())
    }
}

impl ProcessTable {
    /// An empty table with `limits`.
    pub fn new(limits: ProcessLimits) -> Self {
        Self::with_id_prefix(limits, String::new())
    }

    /// An empty table whose ids are `<id_prefix>p1`, `<id_prefix>p2` … (so an id can name
    /// the instance holding it, e.g. a NATS worker: docs/nats.md).
    pub fn with_id_prefix(limits: ProcessLimits, id_prefix: String) -> Self {
        Self {
            inner: Arc::new(Inner {
                limits,
                entries: Mutex::new(Entries::default()),
                next: AtomicU64::new(1),
                shutdown: CancellationToken::new(),
                id_prefix,
            }),
        }
    }

    /// Its limits.
    pub fn limits(&self) -> ProcessLimits {
        self.inner.limits
    }

    /// Fires when the registry shuts down: every actor stops its process.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.inner.shutdown.clone()
    }

    /// A slot for one more process of `scope`, if the limits allow it now (in all, and in
    /// the scope).
    pub fn reserve(&self, scope: &Scope) -> Result<Slot, ExecError> {
        let limits = self.inner.limits;
        let mut entries = self.lock();
        let (all, mine) = entries.running(scope);
        if mine >= limits.max_running_per_scope {
            return Err(ExecError::TooManyProcesses(format!(
                "{mine} running in this scope, the most it may run at once"
            )));
        }
        if all >= limits.max_running {
            return Err(ExecError::TooManyProcesses(format!(
                "{all} running in this cmdr, the most it may run at once"
            )));
        }
        let n = self.inner.next.fetch_add(1, Ordering::Relaxed);
        entries.starting.insert(n, (scope.clone(), false));
        Ok(Slot {
            table: self.clone(),
            n,
            id: format!("{}p{n}", self.inner.id_prefix),
            scope: scope.clone(),
        })
    }

    /// Adds a started process under its `slot`, dropping the oldest exited ones beyond the
    /// limit. A process whose scope ended while it started is stopped at once.
    pub fn insert(&self, slot: Slot, process: Arc<Process>) {
        let doomed = {
            let mut entries = self.lock();
            let doomed = entries
                .starting
                .remove(&slot.n)
                .is_some_and(|(_, doomed)| doomed);
            entries.processes.insert(slot.n, Arc::clone(&process));
            let exited: Vec<u64> = entries
                .processes
                .iter()
                .filter(|(_, p)| p.state() != ProcessState::Running)
                .map(|(n, _)| *n)
                .collect();
            let excess = exited.len().saturating_sub(self.inner.limits.max_exited);
            for n in exited.into_iter().take(excess) {
                entries.processes.remove(&n);
            }
            doomed
        };
        if doomed {
            tracing::debug!(process = %process.id, scope = %slot.scope, "scope ended while it started");
            process.kill_now(nix::sys::signal::Signal::SIGKILL);
        }
    }

    /// The process with this id in `scope`; one of another scope is not found, exactly
    /// like an unknown id.
    pub fn get(&self, scope: &Scope, id: &str) -> Result<Arc<Process>, ExecError> {
        let not_found = || ExecError::ProcessNotFound(id.to_owned());
        let n = id
            .strip_prefix(self.inner.id_prefix.as_str())
            .and_then(super::names::local_number)
            .ok_or_else(not_found)?;
        self.lock()
            .processes
            .get(&n)
            .filter(|p| p.scope() == scope)
            .cloned()
            .ok_or_else(not_found)
    }

    /// Every process of `scope`, oldest first.
    pub fn list(&self, scope: &Scope) -> Vec<Arc<Process>> {
        self.lock()
            .processes
            .values()
            .filter(|p| p.scope() == scope)
            .cloned()
            .collect()
    }

    /// Every process of every scope, oldest first.
    pub fn list_all(&self) -> Vec<Arc<Process>> {
        self.lock().processes.values().cloned().collect()
    }

    /// Stops every process of `scope` (SIGTERM to the whole tree, SIGKILL after `grace`),
    /// including those starting now, waits for them (at most `grace` plus a second), and
    /// forgets them: the scope is empty after. The scope may be used again.
    pub async fn end_scope(&self, scope: &Scope, grace: Duration) {
        let ending: Vec<Arc<Process>> = {
            let mut entries = self.lock();
            for (s, doomed) in entries.starting.values_mut() {
                *doomed |= s == scope;
            }
            entries
                .processes
                .values()
                .filter(|p| p.scope() == scope)
                .cloned()
                .collect()
        };
        stop_all(&ending, grace).await;
        self.lock()
            .processes
            .retain(|_, p| !(p.scope() == scope && p.state() != ProcessState::Running));
        tracing::debug!(%scope, processes = ending.len(), "scope ended");
    }

    /// Stops every process (SIGTERM, then SIGKILL after `grace`) and waits for them, at
    /// most `grace` plus a second.
    pub async fn shutdown(&self, grace: Duration) {
        self.inner.shutdown.cancel();
        stop_all(&self.list_all(), grace).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.inner.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Sends SIGTERM (SIGKILL after `grace`) to those of `processes` still running and waits
/// until they are gone, at most `grace` plus a second.
async fn stop_all(processes: &[Arc<Process>], grace: Duration) {
    let running: Vec<&Arc<Process>> = processes
        .iter()
        .filter(|p| p.state() == ProcessState::Running)
        .collect();
    for process in &running {
        process.kill(nix::sys::signal::Signal::SIGTERM, grace).await;
    }
    let wait = grace + Duration::from_secs(1);
    futures_util::future::join_all(running.iter().map(|p| p.wait_exit(wait))).await;
}
