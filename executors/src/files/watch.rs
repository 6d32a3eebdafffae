//! Blocking file operations that outlived their command.
//!
//! File commands run on blocking threads, which cannot be interrupted: a read from a hung
//! network file system, or any system call the kernel never returns from, keeps its
//! thread after the command ended with `TIMEOUT` or `CANCELLED`. Enough of them exhaust
//! the blocking pool and file commands stop answering. Every blocking operation is
//! registered here while its thread runs; one whose command already ended is *wedged*.
//! [`wedged`] counts them, so `/health` can say so instead of `ok`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use dashmap::DashMap;

/// One blocking operation.
#[derive(Debug)]
struct Op {
    started: Instant,
    /// Set when its command's future ended (done, timed out, cancelled).
    command_ended: AtomicBool,
}

static OPS: LazyLock<DashMap<u64, Arc<Op>>> = LazyLock::new(DashMap::new);
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Blocking operations whose command ended while they still run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Wedged {
    /// How many.
    pub count: usize,
    /// How long the oldest has been running.
    pub oldest: Option<Duration>,
}

/// The blocking operations wedged now.
pub fn wedged() -> Wedged {
    let mut out = Wedged::default();
    for op in OPS.iter() {
        if op.command_ended.load(Ordering::Acquire) {
            out.count += 1;
            let age = op.started.elapsed();
            out.oldest = Some(out.oldest.map_or(age, |o| o.max(age)));
        }
    }
    out
}

/// Registers an operation; returns the guard its thread holds while it runs and the guard
/// its command's future holds.
pub(crate) fn start() -> (Running, Waiting) {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let op = Arc::new(Op {
        started: Instant::now(),
        command_ended: AtomicBool::new(false),
    });
    OPS.insert(id, op.clone());
    (Running { id }, Waiting { op })
}

/// Held by the blocking thread: the operation is unregistered when it returns.
pub(crate) struct Running {
    id: u64,
}

impl Drop for Running {
    fn drop(&mut self) {
        OPS.remove(&self.id);
    }
}

/// Held by the command's future: dropping it (the command ended) marks the operation as
/// one nobody waits for.
pub(crate) struct Waiting {
    op: Arc<Op>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.op.command_ended.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::run_blocking;

    /// A blocking file operation whose command ended (here: its future dropped, as on a
    /// timeout) while its thread still runs is wedged until the thread returns.
    #[tokio::test]
    async fn an_operation_that_outlives_its_command_is_wedged_until_it_returns() {
        let (release, blocked) = std::sync::mpsc::channel::<()>();
        let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
        let command = tokio::spawn(run_blocking(move || {
            let _ = started_tx.send(());
            let _ = blocked.recv();
            Ok(())
        }));
        started.await.unwrap();
        assert_eq!(wedged().count, 0, "its command still waits for it");
        command.abort();
        let _ = command.await;
        let now = wedged();
        assert_eq!(now.count, 1);
        assert!(now.oldest.is_some());
        release.send(()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while wedged().count != 0 {
            assert!(Instant::now() < deadline, "the thread returned");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
