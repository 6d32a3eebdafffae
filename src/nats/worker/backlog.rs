//! What a core worker has accepted but not started yet, bounded by a count and by bytes, so
//! that a flood of commands cannot grow a worker's memory without end: past either limit,
//! a command is answered `busy` and left to the producer (which tries again, so another
//! worker of the queue group may take it).

use std::sync::atomic::{AtomicUsize, Ordering};

/// Accepted-but-waiting commands, by count and payload bytes.
#[derive(Debug)]
pub(super) struct Backlog {
    count: AtomicUsize,
    bytes: AtomicUsize,
    max_count: usize,
    max_bytes: usize,
}

impl Backlog {
    /// A backlog of at most `max_count` commands and `max_bytes` bytes of payload.
    pub(super) fn new(max_count: usize, max_bytes: usize) -> Self {
        Self {
            count: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            max_count: max_count.max(1),
            max_bytes,
        }
    }

    /// Takes a command of `size` bytes if both limits allow it (one command is always
    /// taken when the backlog is empty, however large).
    pub(super) fn try_admit(&self, size: usize) -> bool {
        let count = self.count.fetch_add(1, Ordering::AcqRel);
        let bytes = self.bytes.fetch_add(size, Ordering::AcqRel);
        let fits = count < self.max_count && (count == 0 || bytes + size <= self.max_bytes);
        if !fits {
            self.release(size);
        }
        fits
    }

    /// A command of `size` bytes left the backlog (it started, or was answered).
    pub(super) fn release(&self, size: usize) {
        self.count.fetch_sub(1, Ordering::AcqRel);
        self.bytes.fetch_sub(size, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_by_count_and_by_bytes() {
        let backlog = Backlog::new(2, 100);
        assert!(backlog.try_admit(1_000), "one is always taken");
        assert!(!backlog.try_admit(1), "over the byte budget");
        backlog.release(1_000);
        assert!(backlog.try_admit(40));
        assert!(backlog.try_admit(40));
        assert!(!backlog.try_admit(1), "over the count");
        backlog.release(40);
        assert!(backlog.try_admit(60));
        assert!(!backlog.try_admit(60));
    }
}
