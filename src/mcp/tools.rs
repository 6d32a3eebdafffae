//! [`CmdrMcp`], the MCP tool handler: the tool list with the input schemas, and
//! `tools/call` dispatch onto the agent service (`agent_tools`) and the registry
//! (`executor_tools`). Arguments are decoded here, once, against the same structs their
//! schemas come from.

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::common::schema_for_input;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeRequestParams, InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
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
    BashExecParams, FileReadParams, FileWriteParams, KillProcessParams, ListAgentsParams,
    ListCommandsParams, ListDirectoryParams, ListProcessesParams, PatchFileParams,
    ProcessInputParams, ProcessOutputParams, RunAgentInstructionParams, RunCommandParams,
    StartProcessParams,
};
use super::session_scope::SessionScope;
use crate::server::AppState;

/// What `initialize` tells the client about the tools.
const INSTRUCTIONS: &str = "\
cmdr runs AI agents and shell/file commands on this machine.
- list_agents, then run_agent_instruction {agentName, instruction} runs an agent to the end and \
returns its answer and conversationId; pass conversationId again to continue the conversation.
- list_commands / run_command run an agent's predefined command (a sequence of instructions).
- bash_exec, file_read, file_write, patch_file, list_directory run one command directly and \
return its combined result (status, message, error, resultData); a FAILED result is a tool error.
- start_process runs a command in the background (a dev server, a watcher, a prompt; tty: true for one that needs a terminal) and returns its processId; process_output reads its output by offset, process_input writes to its stdin, kill_process stops it, list_processes lists them. bash_exec with session keeps a shell's state.
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
    /// The process scope of this handler's session.
    pub(super) session: Arc<SessionScope>,
}

impl CmdrMcp {
    /// A server over `state`.
    pub fn new(state: AppState) -> Self {
        let stop = state.run_token();
        let session = Arc::new(SessionScope::new(state.registry.clone()));
        Self {
            state,
            stop,
            calls: TaskTracker::new(),
            session,
        }
    }

    /// A clone for one more session: the same server, a process scope of its own (ended
    /// when the session's handler is dropped).
    pub fn for_session(&self) -> Self {
        Self {
            session: Arc::new(SessionScope::new(self.state.registry.clone())),
            ..self.clone()
        }
    }

    /// Ends this session's process scope now: its processes are stopped.
    pub async fn end_session(&self) {
        self.session.end().await;
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
            "bash_exec" => {
                refuse_terminal(args.as_ref())?;
                Ok(self.bash_exec(parse(name, args)?, context).await)
            }
            "file_read" => Ok(self.file_read(parse(name, args)?, context).await),
            "file_write" => Ok(self.file_write(parse(name, args)?, context).await),
            "patch_file" => Ok(self.patch_file(parse(name, args)?, context).await),
            "list_directory" => Ok(self.list_directory(parse(name, args)?, context).await),
            "start_process" => Ok(self.start_process(parse(name, args)?, context).await),
            "process_input" => Ok(self.process_input(parse(name, args)?, context).await),
            "process_output" => Ok(self.process_output(parse(name, args)?, context).await),
            "kill_process" => Ok(self.kill_process(parse(name, args)?, context).await),
            "list_processes" => {
                let ListProcessesParams {} = parse(name, args)?;
                Ok(self.list_processes(context).await)
            }
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

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // Only a session's handler is initialized: its calls may use the session's scope.
        self.session.mark_initialized();
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
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
             completed, stopped, max-iterations, max-tokens, repeating or failed (then with \
             error {code, message}). \
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
             interleaved), exitCode, finalCwd, durationMs. It gets no input and no \
             terminal: an interactive program runs with start_process (tty for a terminal).",
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
        tool::<StartProcessParams>(
            "start_process",
            "Start a command in the background (it keeps running): returns processId, \
             processState and the first output (within yield_ms, or until ready: an output \
             regex, a port or an http URL). FAILED READY_TIMEOUT leaves it running. With \
             tty it runs on a pseudo-terminal of cols x rows (for programs that insist on \
             one); its output is then the terminal's (echoed input, \\r\\n, escape \
             sequences).",
            ToolAnnotations::new().destructive(true).open_world(true),
        )?,
        tool::<ProcessInputParams>(
            "process_input",
            "Write to a background process's stdin (close_stdin to send end-of-file; on a \
             tty, input is typed: \\u0003 is Ctrl-C) and/or resize a tty process's \
             terminal with cols/rows; returns the output that follows within yield_ms.",
            ToolAnnotations::new().destructive(true),
        )?,
        tool::<ProcessOutputParams>(
            "process_output",
            "Read a background process's output from a byte offset (default: where the \
             last read stopped); nextOffset, processState, exitCode once exited, \
             truncatedBefore when older output was dropped. wait_ms long-polls.",
            read_only(),
        )?,
        tool::<KillProcessParams>(
            "kill_process",
            "Stop a background process and its whole tree (signal, then SIGKILL after \
             grace_ms); returns once it is gone.",
            ToolAnnotations::new().destructive(true),
        )?,
        tool::<ListProcessesParams>(
            "list_processes",
            "List the background processes: JSON array in resultData of {processId, \
             command, pid, state, startedAt, exitCode?, outputBytes, tty}.",
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

/// `bash_exec` with `tty`, `cols` or `rows`: `-32602` `INVALID_REQUEST` saying where a
/// terminal is to be had (a one-shot command gets no input and a session's stdin carries
/// its protocol, so neither runs on a terminal; docs/processes.md "Terminals").
fn refuse_terminal(args: Option<&JsonObject>) -> Result<(), ErrorData> {
    let asked = ["tty", "cols", "rows"]
        .into_iter()
        .find(|key| args.is_some_and(|a| a.contains_key(*key)));
    match asked {
        Some(key) => Err(invalid_params(format!(
            "bash_exec has no `{key}`: its commands (one-shot or in a session) get no \
             terminal; start an interactive program with start_process and tty: true, then \
             answer it with process_input"
        ))),
        None => Ok(()),
    }
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
