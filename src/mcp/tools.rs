//! [`CmdrMcp`], the MCP tool handler: the tool list with the input schemas, and
//! `tools/call` dispatch onto the agent service (`agent_tools`) and the registry
//! (`executor_tools`). Arguments are decoded here, once, against the same structs their
//! schemas come from.

use std::time::Duration;

use rmcp::handler::server::common::schema_for_input;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::cancel::CallCancel;
use super::errors::{internal, invalid_params};
use super::params::{
    BashExecParams, FileReadParams, FileWriteParams, ListAgentsParams, ListCommandsParams,
    ListDirectoryParams, PatchFileParams, RunAgentInstructionParams, RunCommandParams,
};
use crate::server::AppState;

/// What `initialize` tells the client about the tools.
const INSTRUCTIONS: &str = "\
cmdr runs AI agents and shell/file commands on this machine.
- list_agents, then run_agent_instruction {agentName, instruction} runs an agent to the end and \
returns its answer and conversationId; pass conversationId again to continue the conversation.
- list_commands / run_command run an agent's predefined command (a sequence of instructions).
- bash_exec, file_read, file_write, patch_file, list_directory run one command directly and \
return its combined result (status, message, error, resultData); a FAILED result is a tool error.
Runs send progress notifications when the request has a progressToken; cancelling the request \
stops the run (the partial turn is kept as 'stopped'). One run at a time per conversation: a \
second one fails with error code 409 (data.code RUN_IN_PROGRESS).";

/// The MCP server: every tool of docs/contract.md §7 over one [`AppState`]. Cheap to clone.
#[derive(Clone)]
pub struct CmdrMcp {
    pub(super) state: AppState,
    /// Fired to stop every call of this server (stdio: the client hung up); a child of
    /// the state's shutdown token.
    pub(super) stop: CancellationToken,
    /// The calls in progress, so a server can wait for stopped runs to persist.
    pub(super) calls: TaskTracker,
}

impl CmdrMcp {
    /// A server over `state`.
    pub fn new(state: AppState) -> Self {
        let stop = state.run_token();
        Self {
            state,
            stop,
            calls: TaskTracker::new(),
        }
    }

    /// Stops every call in progress and waits (at most `grace`) until they have ended —
    /// stopped runs have persisted their `stopped` turns by then.
    pub async fn stop_calls(&self, grace: Duration) {
        self.stop.cancel();
        self.calls.close();
        if tokio::time::timeout(grace, self.calls.wait())
            .await
            .is_err()
        {
            tracing::warn!("MCP tool calls still running after {grace:?}; leaving them");
        }
    }

    /// The cancellation of one call of `context`.
    pub(super) fn call_cancel(&self, context: &RequestContext<RoleServer>) -> CallCancel {
        CallCancel::new(self.stop.child_token(), context)
    }

    async fn dispatch(
        &self,
        name: &str,
        args: Option<JsonObject>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        match name {
            "list_agents" => {
                let ListAgentsParams {} = parse(name, args)?;
                self.list_agents().await
            }
            "list_commands" => self.list_commands(parse(name, args)?).await,
            "run_agent_instruction" => {
                self.run_agent_instruction(parse(name, args)?, context)
                    .await
            }
            "run_command" => self.run_command(parse(name, args)?, context).await,
            "bash_exec" => Ok(self.bash_exec(parse(name, args)?, context).await),
            "file_read" => Ok(self.file_read(parse(name, args)?, context).await),
            "file_write" => Ok(self.file_write(parse(name, args)?, context).await),
            "patch_file" => Ok(self.patch_file(parse(name, args)?, context).await),
            "list_directory" => Ok(self.list_directory(parse(name, args)?, context).await),
            other => Err(invalid_params(format!(
                "unknown tool '{other}'; see tools/list"
            ))),
        }
    }
}

impl ServerHandler for CmdrMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cmdr", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()?))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().ok()?.into_iter().find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let _call = self.calls.token();
        let result = self
            .dispatch(&request.name, request.arguments, &context)
            .await?;
        Ok(result.into())
    }
}

/// Every tool, with its input schema.
pub fn tools() -> Result<Vec<Tool>, ErrorData> {
    let read_only = || ToolAnnotations::new().read_only(true);
    Ok(vec![
        tool::<ListAgentsParams>(
            "list_agents",
            "List the agents: {\"agents\":[{name, description}]}.",
            read_only(),
        )?,
        tool::<RunAgentInstructionParams>(
            "run_agent_instruction",
            "Run an agent on an instruction until it is done (it may run shell commands). \
             Returns {agentName, conversationId, modelId, status, answer}; status is \
             completed, stopped, max-iterations or failed (then with error {code, message}). \
             Pass conversationId to continue a conversation.",
            ToolAnnotations::new().destructive(true).open_world(true),
        )?,
        tool::<ListCommandsParams>(
            "list_commands",
            "List the valid commands of an agent ({agentName, commands:[{name, description}]}), \
             or, without agentName, of every agent ({agents:[{agentName, commands}]}).",
            read_only(),
        )?,
        tool::<RunCommandParams>(
            "run_command",
            "Run an agent command (its instructions one after the other, in one \
             conversation) until it is done. Returns {agentName, commandName, \
             conversationId, modelId, status, answer}.",
            ToolAnnotations::new().destructive(true).open_world(true),
        )?,
        tool::<BashExecParams>(
            "bash_exec",
            "Run a shell script with /bin/bash -c and return the combined result: status \
             (SUCCEEDED or FAILED), message, error, resultData (stdout and stderr \
             interleaved), exitCode, finalCwd, durationMs.",
            ToolAnnotations::new().destructive(true).open_world(true),
        )?,
        tool::<FileReadParams>(
            "file_read",
            "Read a text file, whole or a line range (1-based, inclusive); the content is \
             in resultData.",
            read_only(),
        )?,
        tool::<FileWriteParams>(
            "file_write",
            "Write a file atomically (replacing it), optionally creating its directories.",
            ToolAnnotations::new().destructive(true).idempotent(true),
        )?,
        tool::<PatchFileParams>(
            "patch_file",
            "Apply a unified diff to one file (--- /dev/null creates it, +++ /dev/null \
             deletes it).",
            ToolAnnotations::new().destructive(true),
        )?,
        tool::<ListDirectoryParams>(
            "list_directory",
            "List a directory: one line per entry ([DIR ]/[FILE], mode, modified time, \
             size, name) in resultData.",
            read_only(),
        )?,
    ])
}

fn tool<P: JsonSchema + 'static>(
    name: &'static str,
    description: &'static str,
    annotations: ToolAnnotations,
) -> Result<Tool, ErrorData> {
    let schema = schema_for_input::<P>().map_err(|e| {
        tracing::error!(tool = name, error = %e, "bad input schema");
        internal(cmdr_executors::ErrorCode::InternalError.as_str())
    })?;
    Ok(Tool::new(name, description, schema).with_annotations(annotations))
}

/// The arguments of `tool` as `P`; schema violations are `-32602` `INVALID_REQUEST`.
fn parse<P: DeserializeOwned>(tool: &str, args: Option<JsonObject>) -> Result<P, ErrorData> {
    let args = serde_json::Value::Object(args.unwrap_or_default());
    serde_json::from_value(args)
        .map_err(|e| invalid_params(format!("invalid arguments for {tool}: {e}")))
}

/// A tool result whose one text content is `value` as JSON.
pub(super) fn json_result(value: &impl Serialize, is_error: bool) -> CallToolResult {
    match serde_json::to_string(value) {
        Ok(text) => {
            let content = vec![ContentBlock::text(text)];
            if is_error {
                CallToolResult::error(content)
            } else {
                CallToolResult::success(content)
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "could not serialize a tool result");
            CallToolResult::error(vec![ContentBlock::text(
                r#"{"error":"cmdr could not serialize the result"}"#,
            )])
        }
    }
}
