//! Soak traffic over MCP (streamable HTTP): the executor tools and the listing tools on
//! one session after another; every 50 calls a new session, the old one closed with
//! `DELETE` or (every other one) simply abandoned to the server's idle timeout.

use std::sync::Arc;

use cmdr_executors::OutputResult;
use serde_json::json;

use super::Ctx;
use crate::cases::{Case, Kind, KINDS};
use crate::rpc::{tool_json, Rpc, PROTOCOL};

/// Calls per session.
const CALLS_PER_SESSION: u32 = 50;

/// The tool serving `kind` (questions have none).
fn tool(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::Bash => Some("bash_exec"),
        Kind::Read => Some("file_read"),
        Kind::Write => Some("file_write"),
        Kind::Patch => Some("patch_file"),
        Kind::List => Some("list_directory"),
        Kind::Input => None,
    }
}

/// MCP call `n`: an executor tool, or `list_agents` in the questions' turn.
pub async fn call(ctx: Arc<Ctx>, n: u64) -> Result<(), String> {
    let mut session = ctx.mcp_session.lock().await;
    let (mut rpc, calls) = match session.take() {
        Some((rpc, calls)) if calls < CALLS_PER_SESSION => (rpc, calls),
        old => {
            if let Some((old, _)) = old {
                close(&ctx, old, n).await?;
            }
            ctx.tally.sent("mcp session");
            let (rpc, init) = Rpc::connect(&ctx.mcp, None).await;
            if init["result"]["serverInfo"]["name"] != "cmdr" {
                return Err(format!("initialize: {init}"));
            }
            ctx.tally.ended("mcp session");
            (rpc, 0)
        }
    };
    let kind = KINDS[n as usize % KINDS.len()];
    let result = match tool(kind) {
        Some(tool) => executor_tool(&ctx, &mut rpc, tool, kind, n).await,
        None => list_agents(&ctx, &mut rpc).await,
    };
    *session = Some((rpc, calls + 1));
    result
}

async fn executor_tool(
    ctx: &Ctx,
    rpc: &mut Rpc,
    tool: &str,
    kind: Kind,
    n: u64,
) -> Result<(), String> {
    let label = format!("mcp {tool}");
    let case = Case::new(kind, &ctx.dir, &format!("m{n}"));
    let mut arguments = case.json.clone();
    let object = arguments.as_object_mut().ok_or("not an object")?;
    object.remove("commandType");
    object.remove("command_id");
    ctx.tally.sent(&label);
    let answer = rpc.call(tool, arguments).await;
    let (value, is_error) = tool_json(&answer);
    let mut result: OutputResult = serde_json::from_value(value).map_err(|e| e.to_string())?;
    if is_error {
        return Err(format!("{tool}: {result:?}"));
    }
    result.command_id = case.id.clone();
    case.check(&[result])?;
    case.remove_files();
    ctx.tally.ended(&label);
    Ok(())
}

async fn list_agents(ctx: &Ctx, rpc: &mut Rpc) -> Result<(), String> {
    ctx.tally.sent("mcp list_agents");
    let answer = rpc.call("list_agents", json!({})).await;
    let (value, _) = tool_json(&answer);
    if value["agents"][0]["name"] != "helper" {
        return Err(format!("list_agents: {value}"));
    }
    ctx.tally.ended("mcp list_agents");
    Ok(())
}

/// Ends a session: `DELETE` for every other one, the others are left to time out.
async fn close(ctx: &Ctx, rpc: Rpc, n: u64) -> Result<(), String> {
    let Some(session) = rpc.session.clone() else {
        return Ok(());
    };
    if (n / u64::from(CALLS_PER_SESSION)) % 2 == 1 {
        return Ok(());
    }
    ctx.tally.sent("mcp session delete");
    let response = rpc
        .http
        .delete(&rpc.url)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", PROTOCOL)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("DELETE session: {}", response.status()));
    }
    ctx.tally.ended("mcp session delete");
    Ok(())
}
