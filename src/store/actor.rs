//! The store actor: one thread owns the `Connection` and runs the closures it is sent, in
//! order, answering each on a oneshot. Async callers await the answer, so no query ever
//! runs on (or blocks) a runtime thread. The thread ends, closing the connection, when
//! the [`Worker`] is dropped and the queued jobs are done; the drop waits for that, so a
//! process that exits right after leaves a closed database (no `-wal` or `-shm` file
//! beside it) rather than a connection cut off mid-close.

use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;
use std::thread;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::{StoreError, StoreFuture};

/// A unit of work for the store thread.
type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// A handle to the store thread.
#[derive(Debug)]
pub(super) struct Worker {
    /// `None` only while dropping.
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Worker {
    /// Starts the thread, handing it the connection.
    pub(super) fn spawn(conn: Connection, name: &str) -> Result<Self, StoreError> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread = thread::Builder::new()
            .name(format!("cmdr-store {name}"))
            .spawn(move || serve(conn, &queue))
            .map_err(|err| StoreError::Database(format!("cannot start the store thread: {err}")))?;
        Ok(Self {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// Runs `work` on the store thread and resolves to its result.
    pub(super) fn call<T, F>(&self, work: F) -> StoreFuture<'static, T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            // The caller may have gone away; nothing to do about an unread answer.
            let _ = reply.send(work(conn));
        });
        let sent = self
            .jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        Box::pin(async move {
            if !sent {
                return Err(stopped());
            }
            answer.await.unwrap_or_else(|_| Err(stopped()))
        })
    }
}

impl Drop for Worker {
    /// Ends the queue and waits for the thread to finish the queued jobs and close the
    /// connection (not when dropped on that thread itself, which cannot wait for itself).
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            if thread.thread().id() != thread::current().id() && thread.join().is_err() {
                tracing::error!("the store thread panicked");
            }
        }
    }
}

/// The thread's loop: one job at a time until every handle is gone. A panicking job drops
/// its reply (its caller sees an error); the connection rolls back any open transaction
/// (a `Transaction` rolls back on drop) and the loop goes on.
fn serve(mut conn: Connection, queue: &mpsc::Receiver<Job>) {
    while let Ok(job) = queue.recv() {
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| job(&mut conn)));
        if outcome.is_err() {
            tracing::error!("a store job panicked");
        }
    }
}

/// The error of a job whose thread is gone or that panicked.
fn stopped() -> StoreError {
    StoreError::Database("the store thread stopped before answering".to_owned())
}
