//! Processes that outlive a command (docs/processes.md).
//!
//! - `log`: [`OutputLog`], a process's output addressed by byte offset, bounded, shared by
//!   any number of readers.
//! - `names`: [`KillSignal`] and [`local_number`], the names clients write.
//! - `table`: [`ProcessTable`] and [`Process`], the background processes of a registry.
//! - `ready`: [`Readiness`], when a starting process counts as ready.
//! - `pty`, `stdin`: [`Pty`], the pseudo-terminal of a `tty` process, and [`Stdin`],
//!   where input goes (a pipe or that terminal).
//! - `input`, `output`, `kill`, `list`: the executors of `PROCESS_INPUT`,
//!   `PROCESS_OUTPUT`, `PROCESS_KILL` and `PROCESS_LIST`.
//!
//! `BASH_EXEC` with `background: true` starts them (`bash_exec::background`).

mod input;
mod kill;
mod list;
mod log;
mod names;
mod output;
mod pty;
pub(crate) mod ready;
mod stdin;
mod table;

pub use crate::scope::Scope;
pub use input::ProcessInputExec;
pub use kill::ProcessKillExec;
pub use list::ProcessListExec;
pub use log::{OutputLog, Slice};
pub use names::{local_number, KillSignal, UnknownSignal};
pub use output::ProcessOutputExec;
pub use pty::{Pty, PtyReader, TermSize, DEFAULT_COLS, DEFAULT_ROWS};
pub use ready::{Readiness, DEFAULT_READY_TIMEOUT};
pub use stdin::Stdin;
pub use table::{Control, Process, ProcessLimits, ProcessState, ProcessTable, Slot};

use crate::outcome::{Outcome, ProcessStatus};
use crate::ErrorCode;

/// The process fields of a terminal result for `process` in `state` (read once by the
/// caller, so that its message says the same) after reading up to `next`.
fn status_of(
    process: &Process,
    state: ProcessState,
    next: u64,
    truncated_before: Option<u64>,
) -> ProcessStatus {
    ProcessStatus {
        process_id: process.id.clone(),
        state: state.name(),
        next_offset: Some(next),
        truncated_before,
        output_bytes: Some(process.log.end()),
        exited_at: process.exited_at().map(timestamp),
        signal: state.signal_name(),
    }
}

/// `outcome` with the report on `process` in `state` after reading up to `next`: its
/// exit code, its process fields, `TIMEOUT` when its lifetime ended it, and the time left
/// of a lifetime while it runs.
pub(crate) fn report(
    mut outcome: Outcome,
    process: &Process,
    state: ProcessState,
    next: u64,
    truncated_before: Option<u64>,
) -> Outcome {
    outcome.exit_code = state.exit_code();
    outcome.process = Some(status_of(process, state, next, truncated_before));
    if state.timed_out() && outcome.error_code.is_none() {
        outcome.error_code = Some(ErrorCode::Timeout.into());
    }
    if let (ProcessState::Running, Some(at)) = (state, process.expires_at()) {
        let left = at
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default();
        outcome.message.push_str(&format!(
            " Its lifetime ends in {} (at {}).",
            crate::outcome::human_duration(left),
            timestamp(at)
        ));
    }
    outcome
}

/// A time as the process fields give it (RFC 3339, milliseconds).
pub(crate) fn timestamp(at: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// What a read up to `next` left of the output of `process`: the words to add to its
/// message when more has been produced than was returned (a model must not take the part
/// for the whole), else nothing.
pub(crate) fn rest_note(process: &Process, next: u64) -> String {
    match process.log.available().saturating_sub(next) {
        0 => String::new(),
        rest => format!(" {rest} more bytes follow: read on from offset {next}."),
    }
}
