//! What an executor hands back when it is done; the runtime turns it into the command's
//! one terminal [`OutputResult`](crate::OutputResult).

use std::time::Duration;

use crate::protocol::ExecutionStatus;

/// The end of a command, as the executor saw it.
///
/// An executor returns `Ok(Outcome)` for anything it finished — including a shell command
/// that exited non-zero, which is [`Outcome::failed`] with an exit code — and
/// `Err(ExecError)` when it could not do the work at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// `SUCCEEDED` or `FAILED` (never `RUNNING`).
    pub status: ExecutionStatus,
    /// Human-readable summary.
    pub message: String,
    /// What went wrong (empty on success).
    pub error: String,
    /// Stable code of `error`, when there is one.
    pub error_code: Option<String>,
    /// Final data, for commands that do not stream (e.g. a listing).
    pub result_data: String,
    /// Exit status of a process, when one ran and exited normally.
    pub exit_code: Option<i32>,
    /// Final working directory of a shell, when it reported one.
    pub final_cwd: Option<String>,
    /// Process commands: where the process stands.
    pub process: Option<ProcessStatus>,
}

/// A process command's report on its process (the `processId`, `processState`,
/// `nextOffset` and `truncatedBefore` fields of the terminal result).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcessStatus {
    /// The process.
    pub process_id: String,
    /// `running` or `exited`.
    pub state: &'static str,
    /// The output offset to read from next.
    pub next_offset: Option<u64>,
    /// The offset asked for was older than the retained output, which starts here.
    pub truncated_before: Option<u64>,
    /// The bytes of output produced so far (`outputBytes`).
    pub output_bytes: Option<u64>,
    /// When it exited (`exitedAt`, RFC 3339), once it has.
    pub exited_at: Option<String>,
    /// The signal that ended it (`signal`: `KILL`, `TERM` …), when one did.
    pub signal: Option<String>,
}

impl Outcome {
    /// A successful end with a summary message.
    pub fn succeeded(message: impl Into<String>) -> Self {
        Self {
            status: ExecutionStatus::Succeeded,
            message: message.into(),
            error: String::new(),
            error_code: None,
            result_data: String::new(),
            exit_code: None,
            final_cwd: None,
            process: None,
        }
    }

    /// A failed end: `message` summarises, `error` says what went wrong.
    pub fn failed(message: impl Into<String>, error: impl Into<String>) -> Self {
        Self {
            status: ExecutionStatus::Failed,
            error: error.into(),
            ..Self::succeeded(message)
        }
    }

    /// Sets the result data.
    pub fn with_data(mut self, data: impl Into<String>) -> Self {
        self.result_data = data.into();
        self
    }

    /// Sets the stable error code.
    pub fn with_error_code(mut self, code: impl Into<String>) -> Self {
        self.error_code = Some(code.into());
        self
    }
}

/// Formats a duration for messages the way people read them: `850µs`, `12ms`, `1.5s`,
/// `2m05s`.
pub fn human_duration(d: Duration) -> String {
    let micros = d.as_micros();
    if micros < 1_000 {
        format!("{micros}µs")
    } else if micros < 1_000_000 {
        format!("{}ms", d.as_millis())
    } else if d.as_secs() < 60 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_duration_picks_a_readable_unit() {
        assert_eq!(human_duration(Duration::from_micros(850)), "850µs");
        assert_eq!(human_duration(Duration::from_millis(12)), "12ms");
        assert_eq!(human_duration(Duration::from_millis(1_500)), "1.5s");
        assert_eq!(human_duration(Duration::from_secs(125)), "2m05s");
    }
}
