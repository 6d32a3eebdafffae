//! Soak traffic on the raw job runner (`POST /commands`): every command type, as SSE or
//! `?combine=true`, questions answered through the input route; and commands stopped on
//! purpose — a client that vanishes mid-stream, an explicit cancel, an endless printer
//! abandoned — each checked to have really stopped (its process gone).

use std::sync::Arc;

use cmdr_executors::OutputResult;
use serde_json::{json, Value};

use super::Ctx;
use crate::cases::{Case, Kind, KINDS};
use crate::http_support::{gone, SseReader};

/// Command `n` of lane `lane`, of every type in turn, checked in full.
pub async fn command(ctx: Arc<Ctx>, lane: usize, n: u64) -> Result<(), String> {
    let kind = KINDS[n as usize % KINDS.len()];
    let combine = (n as usize / KINDS.len()).is_multiple_of(2) && kind != Kind::Input;
    let case = Case::new(kind, &ctx.dir, &format!("r{lane}-{n}"));
    let mode = if combine { "combined" } else { "sse" };
    let label = format!(
        "rest {} {mode}",
        case.json["commandType"].as_str().unwrap_or("?")
    );
    ctx.tally.sent(&label);
    let messages = if combine {
        vec![combined(&ctx, &case.json).await?]
    } else {
        streamed(&ctx, &case).await?
    };
    case.check(&messages)?;
    case.remove_files();
    ctx.tally.ended(&label);
    Ok(())
}

async fn combined(ctx: &Ctx, command: &Value) -> Result<OutputResult, String> {
    let response = ctx
        .http
        .post(format!("{}/commands?combine=true", ctx.api))
        .json(command)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("combine: {}", response.status()));
    }
    response.json().await.map_err(|e| e.to_string())
}

async fn streamed(ctx: &Ctx, case: &Case) -> Result<Vec<OutputResult>, String> {
    let mut sse = open(ctx, &case.json).await?;
    let key = sse.input_key.clone().unwrap_or_default();
    let mut messages = Vec::new();
    while let Some(event) = sse.event().await {
        let message: OutputResult = serde_json::from_value(event).map_err(|e| e.to_string())?;
        if case.kind == Kind::Input && messages.is_empty() {
            answer(ctx, &case.id, &key).await?;
        }
        messages.push(message);
    }
    Ok(messages)
}

async fn open(ctx: &Ctx, command: &Value) -> Result<SseReader, String> {
    let response = ctx
        .http
        .post(format!("{}/commands", ctx.api))
        .json(command)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if response.status() != 200 {
        return Err(format!("POST /commands: {}", response.status()));
    }
    Ok(SseReader::new(response))
}

/// Answers the question of `id` with its requester `key`; the prompt is streamed just
/// before the question is registered, so "not waiting" is retried for a while.
async fn answer(ctx: &Ctx, id: &str, key: &str) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let response = ctx
            .http
            .post(format!("{}/commands/{id}/input", ctx.api))
            .json(&json!({"value": Case::answer(id), "key": key}))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        match response.status().as_u16() {
            200 => return Ok(()),
            404 if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            status => return Err(format!("answering {id}: {status}")),
        }
    }
}

/// A long command stopped on purpose (`n` picks how), then checked gone.
pub async fn stopped(ctx: Arc<Ctx>, n: u64) -> Result<(), String> {
    let id = format!("stop-{n}");
    let (label, script, read) = match n % 3 {
        0 => ("rest abandoned sleep", "echo $$; exec sleep 600", 1),
        1 => ("rest cancelled sleep", "echo $$; exec sleep 600", 1),
        _ => ("rest abandoned yes", "echo $$; exec yes endless", 4),
    };
    ctx.tally.sent(label);
    let command = json!({"command_id": id, "commandType": "BASH_EXEC", "command": script});
    let mut sse = open(&ctx, &command).await?;
    let first = sse.event().await.ok_or("no first event")?;
    let pid: i32 = first["resultData"]
        .as_str()
        .and_then(|d| d.lines().next())
        .and_then(|l| l.parse().ok())
        .ok_or(format!("no pid in {first}"))?;
    for _ in 1..read {
        sse.event().await.ok_or("the stream ended")?;
    }
    if n % 3 == 1 {
        cancel(&ctx, &id).await?;
        let rest = sse.all().await;
        let terminals: Vec<&Value> = rest.iter().filter(|e| e["status"] != "RUNNING").collect();
        if terminals.len() != 1 || terminals[0]["errorCode"] != "CANCELLED" {
            return Err(format!("{id}: cancelled stream ended with {terminals:?}"));
        }
    } else {
        drop(sse);
    }
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while !gone(pid) {
        if tokio::time::Instant::now() > deadline {
            return Err(format!("{id}: process {pid} still runs"));
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    ctx.tally.ended(label);
    Ok(())
}

async fn cancel(ctx: &Ctx, id: &str) -> Result<(), String> {
    let response = ctx
        .http
        .post(format!("{}/commands/{id}/cancel", ctx.api))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    match response.status().as_u16() {
        200 => Ok(()),
        status => Err(format!("cancelling {id}: {status}")),
    }
}
