//! Worker side of liveness (see `producer::liveness`): which commands this worker holds,
//! from the moment it accepted one until its terminal result is published, and the
//! answers on `cmdr.alive.<worker_id>.<producer>`, to that producer's commands only.

use std::sync::Arc;

use async_nats::{Client, Subscriber};
use dashmap::DashMap;
use futures_util::StreamExt;

use crate::nats::subjects;
use crate::nats::wire::Alive;

/// Worker side: the commands accepted and not yet finished, by id (a count, since a
/// duplicate id may be received while the first is held).
#[derive(Debug, Clone)]
pub(in crate::nats) struct Holding {
    worker_id: String,
    ids: Arc<DashMap<String, usize>>,
}

impl Holding {
    /// Worker `worker_id`, holding nothing.
    pub(in crate::nats) fn new(worker_id: &str) -> Self {
        Self {
            worker_id: worker_id.to_owned(),
            ids: Arc::default(),
        }
    }

    /// This worker's id (one subject token).
    pub(in crate::nats) fn worker_id(&self) -> &str {
        &self.worker_id
    }

    /// The command `id` was accepted.
    pub(in crate::nats) fn hold(&self, id: &str) {
        *self.ids.entry(id.to_owned()).or_insert(0) += 1;
    }

    /// The command `id` has published its terminal result (or was dropped).
    pub(in crate::nats) fn release(&self, id: &str) {
        self.ids.remove_if_mut(id, |_, count| {
            *count = count.saturating_sub(1);
            *count == 0
        });
    }

    /// Whether `id` is held.
    pub(in crate::nats) fn has(&self, id: &str) -> bool {
        self.ids.contains_key(id)
    }

    /// Answers every request on `cmdr.alive.<worker_id>.<producer>` until the
    /// subscription ends: whether that producer's command is held. A producer asking
    /// about another's command (the payload names another producer) learns nothing: the
    /// answer is "not running".
    pub(in crate::nats) async fn answer(self, mut requests: Subscriber, client: Client) {
        while let Some(request) = requests.next().await {
            let Some(reply) = request.reply else {
                continue;
            };
            let asker = request.subject.rsplit('.').next().unwrap_or_default();
            let command_id = String::from_utf8_lossy(&request.payload).into_owned();
            let own =
                subjects::unscoped(&command_id).is_some_and(|(producer, _)| producer == asker);
            let answer = Alive {
                running: own && self.has(&command_id),
                command_id,
            };
            let Ok(body) = serde_json::to_vec(&answer) else {
                continue;
            };
            if let Err(e) = client.publish(reply, body.into()).await {
                tracing::warn!("answering a liveness check: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn holding_counts_duplicates() {
        let holding = Holding::new("w1");
        holding.hold("a");
        holding.hold("a");
        holding.release("a");
        assert!(holding.has("a"), "the first is still held");
        holding.release("a");
        assert!(!holding.has("a"));
        holding.release("never-held");
        assert!(!holding.has("never-held"));
        assert_eq!(holding.worker_id(), "w1");
    }
}
