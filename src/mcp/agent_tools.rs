//! The agent tools — `list_agents`, `list_commands`, `run_agent_instruction`,
//! `run_command` — each a thin translation onto the agent service.

use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde::Serialize;
use tokio::sync::mpsc;

use super::errors::service_error;
use super::params::{ListCommandsParams, RunAgentInstructionParams, RunCommandParams};
use super::progress::Progress;
use super::tools::{json_result, CmdrMcp};
use crate::agent::RunOutcome;
use crate::agents::{AgentSummary, CommandEntry};
use crate::service::{PreparedRun, RunInfo, RunTarget, ServiceError};

/// `{"agents":[{name, description}]}`.
#[derive(Serialize)]
struct Agents {
    agents: Vec<AgentSummary>,
}

/// One valid command: `{name, description}`.
#[derive(Serialize)]
struct CommandItem {
    name: String,
    description: String,
}

/// The valid commands of one agent: `{agentName, commands}`.
#[derive(Serialize)]
struct AgentCommands {
    #[serde(rename = "agentName")]
    agent_name: String,
    commands: Vec<CommandItem>,
}

/// Every agent's valid commands: `{"agents":[{agentName, commands}]}`.
#[derive(Serialize)]
struct AllCommands {
    agents: Vec<AgentCommands>,
}

/// What a run tool returns.
#[derive(Serialize)]
struct RunResult {
    #[serde(flatten)]
    info: RunInfo,
    /// `completed`, `stopped`, `max-iterations` or `failed`.
    status: &'static str,
    /// The final assistant text.
    answer: String,
    /// Why a `failed` run failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<RunError>,
}

#[derive(Serialize)]
struct RunError {
    code: String,
    message: String,
}

impl CmdrMcp {
    pub(super) async fn list_agents(&self) -> Result<CallToolResult, ErrorData> {
        let agents = self.state.service.list_agents().await.map_err(to_error)?;
        Ok(json_result(&Agents { agents }, false))
    }

    pub(super) async fn list_commands(
        &self,
        params: ListCommandsParams,
    ) -> Result<CallToolResult, ErrorData> {
        if let Some(agent) = params.agent_name {
            let listing = self.agent_commands(agent).await?;
            return Ok(json_result(&listing, false));
        }
        let names = self.state.service.list_agents().await.map_err(to_error)?;
        let mut agents = Vec::with_capacity(names.len());
        for agent in names {
            agents.push(self.agent_commands(agent.name).await?);
        }
        Ok(json_result(&AllCommands { agents }, false))
    }

    /// The valid commands of `agent` (invalid files are disabled and left out).
    async fn agent_commands(&self, agent: String) -> Result<AgentCommands, ErrorData> {
        let entries = self
            .state
            .service
            .list_commands(&agent)
            .await
            .map_err(to_error)?;
        let commands = entries
            .into_iter()
            .filter(|entry| !entry.disabled)
            .map(
                |CommandEntry {
                     name, description, ..
                 }| CommandItem { name, description },
            )
            .collect();
        Ok(AgentCommands {
            agent_name: agent,
            commands,
        })
    }

    pub(super) async fn run_agent_instruction(
        &self,
        params: RunAgentInstructionParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let target = RunTarget {
            agent: params.agent_name,
            conversation_id: params.conversation_id,
            working_folder: params.working_folder,
        };
        let run = self
            .state
            .service
            .prepare_instruction(target, params.instruction)
            .await
            .map_err(to_error)?;
        Ok(self.drive(run, context).await)
    }

    pub(super) async fn run_command(
        &self,
        params: RunCommandParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let target = RunTarget {
            agent: params.agent_name,
            conversation_id: params.conversation_id,
            working_folder: params.working_folder,
        };
        let run = self
            .state
            .service
            .prepare_command(target, &params.command_name)
            .await
            .map_err(to_error)?;
        Ok(self.drive(run, context).await)
    }

    /// Runs a checked run to its end, reporting progress, stopping when the call is
    /// cancelled; a `failed` run is a tool error (`isError: true`).
    async fn drive(
        &self,
        run: PreparedRun,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let info = run.info().clone();
        let cancel = self.call_cancel(context);
        let (tx, rx) = mpsc::channel(64);
        let (outcome, answer) = tokio::join!(
            run.run(tx, cancel.token().clone()),
            Progress::new(context).follow(rx)
        );
        let status = outcome.status_name();
        let error = match outcome {
            RunOutcome::Failed { code, message } => Some(RunError { code, message }),
            _ => None,
        };
        let failed = error.is_some();
        let result = RunResult {
            info,
            status,
            answer,
            error,
        };
        json_result(&result, failed)
    }
}

fn to_error(error: ServiceError) -> ErrorData {
    service_error(&error)
}
