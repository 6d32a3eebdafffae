//! The executor tools — `bash_exec`, `file_read`, `file_write`, `patch_file`,
//! `list_directory`, and the process tools `start_process`, `process_input`,
//! `process_output`, `kill_process`, `list_processes` (docs/processes.md) — each one
//! command through the shared registry in the session's process scope (`mcp:<session
//! id>`, see `session_scope`), answered with the combined `OutputResult`
//! (docs/contract.md §3) as JSON; a `FAILED` result is a tool error.

use std::path::PathBuf;

use cmdr_executors::{
    combine_output_results_limited, BashExecCommand, Command, ExecutionStatus, FileReadCommand,
    FileWriteCommand, ListDirectoryCommand, OutputResult, PatchFileCommand, ProcessInputCommand,
    ProcessKillCommand, ProcessListCommand, ProcessOutputCommand, ReadyCheck,
};
use futures_util::StreamExt;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use tokio::sync::Mutex;

use super::params::{
    BashExecParams, FileReadParams, FileWriteParams, KillProcessParams, ListDirectoryParams,
    PatchFileParams, ProcessInputParams, ProcessOutputParams, StartProcessParams,
};
use super::progress::Progress;
use super::tools::{json_result, CmdrMcp};

/// Passes `message` on, telling the client first when it is a queue note (queued, started).
async fn report_queue(progress: &Mutex<Progress>, message: OutputResult) -> OutputResult {
    if message.queue.is_some() {
        progress.lock().await.send(message.message.clone()).await;
    }
    message
}

impl CmdrMcp {
    pub(super) async fn bash_exec(
        &self,
        p: BashExecParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let command = Command::BashExec(BashExecCommand {
            command: p.command,
            working_dir: p.working_dir.map(PathBuf::from),
            timeout_ms: p.timeout_ms,
            env: p.env,
            session: p.session,
            ..BashExecCommand::default()
        });
        self.execute(command, context).await
    }

    pub(super) async fn start_process(
        &self,
        p: StartProcessParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let ready = p.ready.map(|r| ReadyCheck {
            output: r.output,
            port: r.port,
            http: r.http,
            timeout_ms: r.timeout_ms,
            all: r.all,
        });
        let command = Command::BashExec(BashExecCommand {
            command: p.command,
            working_dir: p.working_dir.map(PathBuf::from),
            env: p.env,
            background: true,
            yield_ms: p.yield_ms,
            timeout_ms: p.timeout_ms,
            ready,
            tty: p.tty,
            cols: p.cols,
            rows: p.rows,
            ..BashExecCommand::default()
        });
        self.execute(command, context).await
    }

    pub(super) async fn process_input(
        &self,
        p: ProcessInputParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let command = Command::ProcessInput(ProcessInputCommand {
            process_id: p.process_id,
            input: p.input,
            close_stdin: p.close_stdin,
            yield_ms: p.yield_ms,
            cols: p.cols,
            rows: p.rows,
            ..ProcessInputCommand::default()
        });
        self.execute(command, context).await
    }

    pub(super) async fn process_output(
        &self,
        p: ProcessOutputParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let command = Command::ProcessOutput(ProcessOutputCommand {
            process_id: p.process_id,
            offset: p.offset,
            max_bytes: p.max_bytes,
            wait_ms: p.wait_ms,
            ..ProcessOutputCommand::default()
        });
        self.execute(command, context).await
    }

    pub(super) async fn kill_process(
        &self,
        p: KillProcessParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let command = Command::ProcessKill(ProcessKillCommand {
            process_id: p.process_id,
            signal: p.signal,
            grace_ms: p.grace_ms,
            ..ProcessKillCommand::default()
        });
        self.execute(command, context).await
    }

    pub(super) async fn list_processes(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let command = Command::ProcessList(ProcessListCommand::default());
        self.execute(command, context).await
    }

    pub(super) async fn file_read(
        &self,
        p: FileReadParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let command = Command::FileRead(FileReadCommand {
            file_path: PathBuf::from(p.file_path),
            start_line: p.start_line,
            end_line: p.end_line,
            ..FileReadCommand::default()
        });
        self.execute(command, context).await
    }

    pub(super) async fn file_write(
        &self,
        p: FileWriteParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let command = Command::FileWrite(FileWriteCommand {
            file_path: PathBuf::from(p.file_path),
            content: p.content,
            create_dirs: p.create_dirs,
            ..FileWriteCommand::default()
        });
        self.execute(command, context).await
    }

    pub(super) async fn patch_file(
        &self,
        p: PatchFileParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let command = Command::PatchFile(PatchFileCommand {
            file_path: PathBuf::from(p.file_path),
            patch: p.patch,
            ..PatchFileCommand::default()
        });
        self.execute(command, context).await
    }

    pub(super) async fn list_directory(
        &self,
        p: ListDirectoryParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let command = Command::ListDirectory(ListDirectoryCommand {
            path: PathBuf::from(p.path),
            ..ListDirectoryCommand::default()
        });
        self.execute(command, context).await
    }

    /// Runs `command` in the registry until its terminal result (or the call's
    /// cancellation, which stops it) and answers with the combined result. A command
    /// queued for a slot says so, and when it starts, as progress notifications (when the
    /// call asked for progress).
    async fn execute(
        &self,
        mut command: Command,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let id = command.ensure_command_id().to_owned();
        let command_type = command.command_type();
        let cancel = self.call_cancel(context);
        let scope = self.session.scope(context);
        let result = match self.state.registry.execute_in(scope, command).await {
            Ok(stream) => {
                let limit = self.state.combined_limit;
                let progress = Mutex::new(Progress::new(context));
                let stream = stream.then(|message| report_queue(&progress, message));
                combine_output_results_limited(Box::pin(stream), Some(cancel.token()), limit).await
            }
            Err(refused) => refused.to_result(&id, command_type.as_str()),
        };
        json_result(&result, result.status == ExecutionStatus::Failed)
    }
}
