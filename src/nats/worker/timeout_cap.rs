//! A worker's cap on a command's `timeout_ms` (issue 32.8): a command asking for more is
//! refused with `INVALID_INPUT`, and one asking for none gets the cap as its deadline, so
//! one producer cannot hold a job for ever with commands that never end.

use std::time::Duration;

use cmdr_executors::{Command, ErrorCode, ExecutionStatus, OutputResult};

/// Default cap on a command's `timeout_ms` on a worker: one hour.
pub const DEFAULT_MAX_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// The `FAILED` answer of `command` when its `timeout_ms` is above `cap`; `None` when it
/// may run. One that asked for none keeps the registry's default deadline for its type
/// (`BASH_EXEC` 5 min, file commands 60 s) when that is within `cap`, and gets `cap`
/// otherwise (no default, or a longer one).
pub(super) fn admit(
    command: &mut Command,
    cap: Duration,
    registry_default: Option<Duration>,
) -> Option<OutputResult> {
    let Some(asked) = command.requested_timeout() else {
        if registry_default.is_none_or(|default| default > cap) {
            command.default_deadline(cap);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn bash(json: &str) -> Command {
        cmdr_executors::decode_command(json).unwrap()
    }

    /// A command without a deadline keeps the registry's default when it is within the
    /// cap (a worker's `BASH_EXEC` still ends at 5 min, not at the one-hour cap), and gets
    /// the cap when the default is longer or there is none.
    #[test]
    fn a_command_without_a_deadline_gets_the_shorter_of_the_default_and_the_cap() {
        let five_minutes = Some(Duration::from_secs(300));
        let json = r#"{"commandType":"BASH_EXEC","command":"sleep 1000"}"#;
        let mut command = bash(json);
        assert!(admit(&mut command, DEFAULT_MAX_TIMEOUT, five_minutes).is_none());
        assert_eq!(
            command.requested_timeout(),
            None,
            "the registry's 5 min applies"
        );
        let mut command = bash(json);
        assert!(admit(&mut command, Duration::from_secs(2), five_minutes).is_none());
        assert_eq!(command.requested_timeout(), Some(Duration::from_secs(2)));
        let mut command = bash(json);
        assert!(admit(&mut command, Duration::from_secs(2), None).is_none());
        assert_eq!(command.requested_timeout(), Some(Duration::from_secs(2)));
        let mut command = bash(r#"{"commandType":"BASH_EXEC","command":"true","timeout_ms":3000}"#);
        let refused = admit(&mut command, Duration::from_secs(2), five_minutes);
        assert_eq!(
            refused.and_then(|r| r.error_code).as_deref(),
            Some("INVALID_INPUT")
        );
    }
}
