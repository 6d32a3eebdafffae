//! Building a command's one terminal [`OutputResult`] — written once, here, for every
//! executor and every way a command can end.

use std::time::Duration;

use crate::error::ExecError;
use crate::inflight::StopReason;
use crate::outcome::Outcome;
use crate::protocol::{CommandType, ExecutionStatus, OutputResult};
use crate::ErrorCode;

/// The terminal result for how the executor ended (`result`) and why it was stopped, if
/// it was (`stopped`): a stop reason explains a failure better than the executor's view
/// of it (a shell killed by SIGTERM "failed" because the command timed out).
pub(crate) fn terminal_result(
    command_id: &str,
    command_type: CommandType,
    result: Result<Outcome, ExecError>,
    stopped: Option<StopReason>,
    elapsed: Duration,
) -> OutputResult {
    let mut out = match (result, stopped) {
        (Ok(outcome), _) if outcome.status == ExecutionStatus::Succeeded => {
            from_outcome(command_id, command_type, outcome)
        }
        (Ok(outcome), Some(reason)) => {
            let err = ExecError::from(reason);
            let mut out = from_outcome(command_id, command_type, outcome);
            out.error = err.to_string();
            out.error_code = Some(err.code().into());
            out
        }
        (Ok(outcome), None) => from_outcome(command_id, command_type, outcome),
        (Err(err @ ExecError::Panicked(_)), _) | (Err(err), None) => {
            failed_result(command_id, command_type.as_str(), &err)
        }
        (Err(_), Some(reason)) => {
            failed_result(command_id, command_type.as_str(), &ExecError::from(reason))
        }
    };
    out.duration_ms = Some(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
    out
}

fn from_outcome(command_id: &str, command_type: CommandType, outcome: Outcome) -> OutputResult {
    OutputResult {
        command_id: command_id.to_owned(),
        command_type: command_type.as_str().to_owned(),
        status: outcome.status,
        message: outcome.message,
        error: outcome.error,
        result_data: outcome.result_data,
        error_code: outcome.error_code,
        exit_code: outcome.exit_code,
        final_cwd: outcome.final_cwd,
        process_state: outcome.process.as_ref().map(|p| p.state.to_owned()),
        next_offset: outcome.process.as_ref().and_then(|p| p.next_offset),
        truncated_before: outcome.process.as_ref().and_then(|p| p.truncated_before),
        output_bytes: outcome.process.as_ref().and_then(|p| p.output_bytes),
        exited_at: outcome.process.as_ref().and_then(|p| p.exited_at.clone()),
        signal: outcome.process.as_ref().and_then(|p| p.signal.clone()),
        process_id: outcome.process.map(|p| p.process_id),
        ..Default::default()
    }
}

/// A `FAILED` result for an error that ended a command before or instead of an outcome.
pub(crate) fn failed_result(command_id: &str, command_type: &str, err: &ExecError) -> OutputResult {
    let message = match err {
        ExecError::Cancelled => "Command was cancelled.".to_owned(),
        ExecError::TimedOut(_) => "Command timed out.".to_owned(),
        ExecError::ShuttingDown => "Command was not run: cmdr is shutting down.".to_owned(),
        _ => format!("{command_type} failed."),
    };
    OutputResult {
        command_id: command_id.to_owned(),
        command_type: command_type.to_owned(),
        status: ExecutionStatus::Failed,
        message,
        error: err.to_string(),
        error_code: Some(err.code().into()),
        ..Default::default()
    }
}

/// A `FAILED` result for a command refused before it ran (undecodable, duplicate id …).
pub(crate) fn rejected_result(
    command_id: &str,
    command_type: &str,
    error: String,
    code: ErrorCode,
) -> OutputResult {
    OutputResult {
        command_id: command_id.to_owned(),
        command_type: command_type.to_owned(),
        status: ExecutionStatus::Failed,
        message: "Command rejected before execution.".to_owned(),
        error,
        error_code: Some(code.into()),
        ..Default::default()
    }
}
