//! The executor tools — `bash_exec`, `file_read`, `file_write`, `patch_file`,
//! `list_directory` — each one command through the shared registry, answered with the
//! combined `OutputResult` (docs/contract.md §3) as JSON; a `FAILED` result is a tool error.

use std::path::PathBuf;

use cmdr_executors::{
    combine_output_results_limited, BashExecCommand, Command, ExecutionStatus, FileReadCommand,
    FileWriteCommand, ListDirectoryCommand, PatchFileCommand,
};
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::RoleServer;

use super::params::{
    BashExecParams, FileReadParams, FileWriteParams, ListDirectoryParams, PatchFileParams,
};
use super::tools::{json_result, CmdrMcp};

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
            ..BashExecCommand::default()
        });
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
    /// cancellation, which stops it) and answers with the combined result.
    async fn execute(
        &self,
        mut command: Command,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let id = command.ensure_command_id().to_owned();
        let command_type = command.command_type();
        let cancel = self.call_cancel(context);
        let result = match self.state.registry.execute(command).await {
            Ok(stream) => {
                let limit = self.state.combined_limit;
                combine_output_results_limited(stream, Some(cancel.token()), limit).await
            }
            Err(refused) => refused.to_result(&id, command_type.as_str()),
        };
        json_result(&result, result.status == ExecutionStatus::Failed)
    }
}
