//! Soak traffic through the agent loop with the fake model: streamed runs and runs to
//! completion whose reply has a `<shell>` command, stateless runs, and streams abandoned
//! while the model is still talking (the run must stop and persist as `stopped`).
//! Conversations are used for a few runs each, so their history stays small.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::Ctx;
use crate::fake_llm::Reply;
use crate::http_support::SseReader;

/// Runs on one conversation before a new one is started.
const RUNS_PER_CONVERSATION: u32 = 10;

/// Agent run `n` (`n` picks the route); the lane is sequential, so the fake model's
/// script holds exactly this run's replies.
pub async fn run(ctx: Arc<Ctx>, n: u64) -> Result<(), String> {
    match n % 4 {
        0 => streamed(&ctx, n).await,
        1 => to_completion(&ctx, n).await,
        2 => stateless(&ctx, n).await,
        _ => abandoned(&ctx, n).await,
    }
}

/// The conversation to continue, if the current one is not used up.
fn conversation(ctx: &Ctx) -> Option<String> {
    let mut current = ctx.conversation.lock().unwrap();
    match &*current {
        (Some(id), uses) if *uses < RUNS_PER_CONVERSATION => {
            let id = id.clone();
            current.1 += 1;
            Some(id)
        }
        _ => None,
    }
}

fn remember(ctx: &Ctx, id: &str) {
    let mut current = ctx.conversation.lock().unwrap();
    if current.0.as_deref() != Some(id) {
        *current = (Some(id.to_owned()), 1);
    }
}

fn shell_replies(command: &str) -> [Reply; 2] {
    [
        Reply::text(&format!("Let me check. <shell>{command}</shell>")),
        Reply::text("All done."),
    ]
}

/// Checks an agent event stream: one final event, `done`, and the command's output.
fn check_events(events: &[Value], output: &str) -> Result<(), String> {
    let finals = events
        .iter()
        .filter(|e| e["type"] == "done" || e["type"] == "error")
        .count();
    let last = events.last().ok_or("no events")?;
    if finals != 1 || last["type"] != "done" || last["reason"] != "completed" {
        return Err(format!("agent stream ended badly: {events:?}"));
    }
    let ran = events.iter().any(|e| {
        e["type"] == "tool-result"
            && e["status"] == "completed"
            && e["result"].as_str().is_some_and(|r| r.contains(output))
    });
    if !ran {
        return Err(format!("no tool-result with {output:?}: {events:?}"));
    }
    Ok(())
}

async fn streamed(ctx: &Ctx, n: u64) -> Result<(), String> {
    let label = "agent stream";
    let output = format!("agent-{n}");
    ctx.llm.push(shell_replies(&format!("echo {output}")));
    ctx.tally.sent(label);
    let mut body = json!({"message": format!("stream {n}")});
    if let Some(id) = conversation(ctx) {
        body["conversationId"] = json!(id);
    }
    let events = post_sse(ctx, "/agents/helper/stream", &body)
        .await?
        .all()
        .await;
    let id = events
        .first()
        .and_then(|e| e["conversationId"].as_str())
        .ok_or("no conversation event")?;
    remember(ctx, id);
    check_events(&events, &output)?;
    ctx.tally.ended(label);
    Ok(())
}

async fn to_completion(ctx: &Ctx, n: u64) -> Result<(), String> {
    let label = "agent run";
    ctx.llm.push(shell_replies(&format!("printf run-{n}")));
    ctx.tally.sent(label);
    let mut body = json!({"instruction": format!("run {n}")});
    if let Some(id) = conversation(ctx) {
        body["conversationId"] = json!(id);
    }
    let response = ctx
        .http
        .post(format!("{}/agents/helper/run", ctx.api))
        .json(&body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let answer: Value = response.json().await.map_err(|e| e.to_string())?;
    if status != 200 || answer["status"] != "completed" {
        return Err(format!("agent run {n}: {status} {answer}"));
    }
    remember(
        ctx,
        answer["conversationId"]
            .as_str()
            .ok_or("no conversationId")?,
    );
    ctx.tally.ended(label);
    Ok(())
}

async fn stateless(ctx: &Ctx, n: u64) -> Result<(), String> {
    let label = "agent stateless";
    let output = format!("stateless-{n}");
    ctx.llm.push(shell_replies(&format!("echo {output}")));
    ctx.tally.sent(label);
    let body = json!({"messages": [
        {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": format!("stateless {n}")}
    ]});
    let events = post_sse(ctx, "/api/agent", &body).await?.all().await;
    check_events(&events, &output)?;
    ctx.tally.ended(label);
    Ok(())
}

/// A stream dropped while the model is mid-reply: the model's stream must be closed and
/// the partial turn persisted as `stopped`.
async fn abandoned(ctx: &Ctx, n: u64) -> Result<(), String> {
    let label = "agent abandoned stream";
    let disconnects = ctx.llm.disconnects();
    ctx.llm.push([Reply::Hang(vec![format!("thinking {n}")])]);
    ctx.tally.sent(label);
    let mut sse = post_sse(
        ctx,
        "/agents/helper/stream",
        &json!({"message": format!("hang {n}")}),
    )
    .await?;
    let opening = sse.event().await.ok_or("no conversation event")?;
    let id = opening["conversationId"]
        .as_str()
        .ok_or("no conversationId")?
        .to_owned();
    sse.until(|e| e["type"] == "text").await;
    drop(sse);
    tokio::time::timeout(
        Duration::from_secs(20),
        ctx.llm.wait_disconnects(disconnects + 1),
    )
    .await
    .map_err(|_| format!("abandoned run {n}: the model stream stays open"))?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while last_turn_status(ctx, &id).await? != "stopped" {
        if tokio::time::Instant::now() > deadline {
            return Err(format!("abandoned run {n}: not persisted as stopped"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    ctx.tally.ended(label);
    Ok(())
}

async fn last_turn_status(ctx: &Ctx, id: &str) -> Result<String, String> {
    let turns: Value = ctx
        .http
        .get(format!("{}/conversations/{id}/turns", ctx.api))
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    let last = turns["items"]
        .as_array()
        .and_then(|t| t.last())
        .cloned()
        .unwrap_or_default();
    if last["role"] != "assistant" {
        return Ok(String::new());
    }
    Ok(last["status"].as_str().unwrap_or_default().to_owned())
}

async fn post_sse(ctx: &Ctx, path: &str, body: &Value) -> Result<SseReader, String> {
    let response = ctx
        .http
        .post(format!("{}{path}", ctx.api))
        .json(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if response.status() != 200 {
        let status = response.status();
        return Err(format!(
            "POST {path}: {status} {}",
            response.text().await.unwrap_or_default()
        ));
    }
    Ok(SseReader::new(response))
}
