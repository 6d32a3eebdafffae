//! A fair share of a worker's jobs between producers (issue 32.8): commands wait in one
//! queue per producer, and the next job goes to the producer after the last one served
//! (round robin) among those running fewer than their share. A producer whose commands
//! never end holds at most its share of the jobs, so the others' commands still start.

use std::collections::{HashMap, VecDeque};

/// Commands waiting per producer, and how many of each producer's run.
#[derive(Debug)]
pub(super) struct FairQueue<T> {
    share: usize,
    waiting: HashMap<String, VecDeque<T>>,
    running: HashMap<String, usize>,
    /// Producers with waiting commands, in the order they are served next.
    turns: VecDeque<String>,
}

impl<T> FairQueue<T> {
    /// Each producer runs at most `share` commands at once (at least 1).
    pub(super) fn new(share: usize) -> Self {
        Self {
            share: share.max(1),
            waiting: HashMap::new(),
            running: HashMap::new(),
            turns: VecDeque::new(),
        }
    }

    /// `item` of `producer` waits for its turn.
    pub(super) fn push(&mut self, producer: &str, item: T) {
        let queue = self.waiting.entry(producer.to_owned()).or_default();
        if queue.is_empty() {
            self.turns.push_back(producer.to_owned());
        }
        queue.push_back(item);
    }

    /// The next command to start, from the first producer in turn below its share;
    /// counted as running until [`FairQueue::done`].
    pub(super) fn next(&mut self) -> Option<(String, T)> {
        let position = self
            .turns
            .iter()
            .position(|p| self.running.get(p).copied().unwrap_or(0) < self.share)?;
        let producer = self.turns.remove(position)?;
        let queue = self.waiting.get_mut(&producer)?;
        let item = queue.pop_front()?;
        if queue.is_empty() {
            self.waiting.remove(&producer);
        } else {
            self.turns.push_back(producer.clone());
        }
        *self.running.entry(producer.clone()).or_insert(0) += 1;
        Some((producer, item))
    }

    /// A command of `producer` has ended.
    pub(super) fn done(&mut self, producer: &str) {
        if let Some(count) = self.running.get_mut(producer) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.running.remove(producer);
            }
        }
    }

    /// Every waiting command, in turn order (at shutdown: they are answered, not run).
    pub(super) fn drain(&mut self) -> Vec<T> {
        let mut all = Vec::new();
        for producer in std::mem::take(&mut self.turns) {
            all.extend(self.waiting.remove(&producer).into_iter().flatten());
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_producer_past_its_share_waits_while_others_go_first() {
        let mut queue = FairQueue::new(1);
        for n in 0..3 {
            queue.push("flood", format!("flood-{n}"));
        }
        queue.push("other", "other-0".to_owned());
        assert_eq!(queue.next().map(|(_, c)| c).as_deref(), Some("flood-0"));
        assert_eq!(queue.next().map(|(_, c)| c).as_deref(), Some("other-0"));
        assert_eq!(queue.next(), None, "flood is at its share");
        queue.done("flood");
        assert_eq!(queue.next().map(|(_, c)| c).as_deref(), Some("flood-1"));
        assert_eq!(queue.drain(), ["flood-2"]);
        assert_eq!(queue.next(), None);
    }

    #[test]
    fn producers_take_turns() {
        let mut queue = FairQueue::new(10);
        for n in 0..2 {
            queue.push("a", format!("a{n}"));
            queue.push("b", format!("b{n}"));
        }
        let order: Vec<String> = std::iter::from_fn(|| queue.next().map(|(_, c)| c)).collect();
        assert_eq!(order, ["a0", "b0", "a1", "b1"]);
    }
}
