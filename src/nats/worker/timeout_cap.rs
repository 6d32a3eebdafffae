//! A worker's cap on a command's `timeout_ms` (issue 32.8): a command asking for more is
//! refused with `INVALID_INPUT`, and one asking for none gets the cap as its deadline, so
//! one producer cannot hold a job for ever with commands that never end.

use std::time::Duration;

use cmdr_executors::{Command, ErrorCode, ExecutionStatus, OutputResult};

/// Default cap on a command's `timeout_ms` on a worker: one hour.
pub const DEFAULT_MAX_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// The `FAILED` answer of `command` when its `timeout_ms` is above `cap`; `None` when it
/// may run, with `cap` as its deadline if it asked for none.
pub(super) fn admit(command: &mut Command, cap: Duration) -> Option<OutputResult> {
    let Some(asked) = command.requested_timeout() else {
        command.default_deadline(cap);
        return None;
    };
    if asked <= cap {
        return None;
    }
    Some(OutputResult {
        command_id: command.command_id().to_owned(),
        command_type: command.command_type().as_str().to_owned(),
        status: ExecutionStatus::Failed,
        message: "Command rejected before execution.".to_owned(),
        error: format!(
            "timeout_ms is {}: this worker allows at most {} ms (--max-timeout-ms)",
            asked.as_millis(),
            cap.as_millis()
        ),
        error_code: Some(ErrorCode::InvalidInput.into()),
        ..Default::default()
    })
}
