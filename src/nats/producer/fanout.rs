//! `PROCESS_LIST` over the whole pool: each live worker's list (found by `discovery`),
//! merged into one result.

use std::sync::Arc;

use cmdr_executors::{Command, ExecutionStatus, OutputResult};
use futures_util::StreamExt;

use super::route::{Holds, Target};
use super::{rejected, Producer, ProducerError};
use crate::nats::wire::WorkerInfo;

impl Producer {
    /// `PROCESS_LIST` of client scope `scope` on every worker of `workers`, merged into
    /// one result for `id`.
    pub(super) async fn list_everywhere(
        &self,
        command: &Command,
        (id, scope): (&str, &Arc<str>),
        workers: Vec<WorkerInfo>,
    ) -> OutputResult {
        let parts = workers.into_iter().enumerate().map(|(n, info)| {
            let mut part = command.clone();
            *part.command_id_mut() = format!("{id}-{n}");
            let target = Target {
                worker: info.worker,
                scope: scope.clone(),
                holds: Holds::Part,
            };
            async move {
                let worker = target.worker.clone();
                (worker, self.one_part(part, target).await)
            }
        });
        let answers = futures_util::future::join_all(parts).await;
        merge(id, command.command_type().as_str(), answers)
    }

    /// One worker's terminal result for `part`.
    async fn one_part(&self, part: Command, target: Target) -> OutputResult {
        let (id, ty) = (part.command_id().to_owned(), part.command_type());
        let mut stream = match self.submit_to_worker(part, target).await {
            Ok(stream) => stream,
            Err(e) => return rejected(&id, ty.as_str(), &e),
        };
        let mut last = None;
        while let Some(result) = stream.next().await {
            last = Some(result);
        }
        last.unwrap_or_else(|| {
            let lost = ProducerError::Nats("the worker's results ended early".to_owned());
            rejected(&id, ty.as_str(), &lost)
        })
    }
}

/// One `PROCESS_LIST` result from every worker's: the entries of those that answered,
/// oldest first; the message names those that did not. Fails only when none answered.
fn merge(id: &str, command_type: &str, answers: Vec<(String, OutputResult)>) -> OutputResult {
    let mut entries: Vec<serde_json::Value> = Vec::new();
    let mut missing = Vec::new();
    let mut failure = None;
    let mut listed_any = false;
    for (worker, answer) in answers {
        let listed = (answer.status == ExecutionStatus::Succeeded)
            .then(|| serde_json::from_str::<Vec<serde_json::Value>>(&answer.result_data).ok())
            .flatten();
        match listed {
            Some(list) => {
                listed_any = true;
                entries.extend(list);
            }
            None => {
                missing.push(format!("{worker} ({})", answer.error));
                failure.get_or_insert(answer);
            }
        }
    }
    if let (false, Some(mut failure)) = (listed_any, failure) {
        id.clone_into(&mut failure.command_id);
        return failure;
    }
    entries.sort_by(|a, b| a["startedAt"].as_str().cmp(&b["startedAt"].as_str()));
    let running = entries.iter().filter(|e| e["state"] == "running").count();
    let mut message = format!("{} processes ({running} running).", entries.len());
    if !missing.is_empty() {
        message.push_str(&format!(" Not listed: {}.", missing.join(", ")));
    }
    let mut result = rejected(id, command_type, &ProducerError::Nats(String::new()));
    result.status = ExecutionStatus::Succeeded;
    result.message = message;
    result.error = String::new();
    result.error_code = None;
    result.result_data = serde_json::to_string(&entries).unwrap_or_else(|_| "[]".to_owned());
    result
}
