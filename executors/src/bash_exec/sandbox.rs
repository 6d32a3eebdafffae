//! Landlock for `BASH_EXEC` (`--landlock`): shells may write only beneath the allowed
//! roots (and to a few device files such as `/dev/null`); reading stays unrestricted.
//!
//! Landlock restricts a thread and every process it starts afterwards. So a few dedicated
//! threads (one per core, 2 to 8) restrict themselves once, at start-up, and perform
//! every `BASH_EXEC` spawn; the rest of cmdr (its database, its own files) is unaffected,
//! and spawning keeps its fast path (the child shares memory until `execve`, see
//! `spawn`). A spawn costs one hand-off to such a thread and back; several spawn at once.
//!
//! Where the kernel lacks Landlock (or some of its write rights), [`SandboxStatus`] says
//! so plainly; cmdr reports it at start-up and in `/health`, and never claims more than
//! the kernel enforces.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};

use landlock::{
    path_beneath_rules, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, ABI,
};

use crate::error::ExecError;

/// The newest Landlock ABI whose write rights cmdr asks for (best effort below it).
const LANDLOCK_ABI: ABI = ABI::V6;

/// Device files shells commonly write to, allowed besides the roots (when they exist).
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

/// What the kernel enforces for `BASH_EXEC` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxStatus {
    /// Every write right cmdr asked for is enforced.
    Enforced,
    /// Landlock is active, but this kernel lacks some of the write rights (older ABI).
    PartiallyEnforced,
    /// Nothing is enforced: the kernel has no (enabled) Landlock; the reason says why.
    Unsupported(String),
}

impl fmt::Display for SandboxStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SandboxStatus::Enforced => write!(f, "enforced"),
            SandboxStatus::PartiallyEnforced => {
                write!(
                    f,
                    "partially enforced (this kernel's Landlock lacks some write rights)"
                )
            }
            SandboxStatus::Unsupported(why) => write!(f, "not enforced: {why}"),
        }
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// The restricted spawner threads.
#[derive(Debug)]
pub struct Sandbox {
    jobs: mpsc::Sender<Job>,
}

impl Sandbox {
    /// Starts the spawner threads (one per core, 2 to 8), each restricted to writing
    /// beneath `roots`. Returns the sandbox only when Landlock enforces something, with
    /// what it enforces.
    pub fn start(roots: &[PathBuf]) -> (Option<Self>, SandboxStatus) {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get().clamp(2, 8))
            .unwrap_or(2);
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let (status_tx, status_rx) = mpsc::channel();
        for i in 0..threads {
            let (roots, queue, status_tx) = (roots.to_vec(), queue.clone(), status_tx.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("cmdr-landlock-spawner-{i}"))
                .spawn(move || serve(&roots, &queue, &status_tx));
            if let Err(e) = spawned {
                return (
                    None,
                    SandboxStatus::Unsupported(format!("no spawner thread: {e}")),
                );
            }
        }
        drop(status_tx);
        let mut status = None;
        for _ in 0..threads {
            match status_rx.recv() {
                Ok(SandboxStatus::Unsupported(why)) => {
                    return (None, SandboxStatus::Unsupported(why));
                }
                Ok(enforced) => status = Some(enforced),
                Err(_) => break,
            }
        }
        match status {
            Some(status) => (Some(Self { jobs }), status),
            None => (
                None,
                SandboxStatus::Unsupported("the spawner threads died".to_owned()),
            ),
        }
    }

    /// Runs `work` on a restricted thread (so that what it spawns inherits the
    /// restriction) and returns its result.
    pub(super) async fn run<T, F>(&self, work: F) -> Result<T, ExecError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(work());
        });
        let lost = || ExecError::Spawn {
            program: "the Landlock spawner thread".to_owned(),
            source: std::io::Error::other("it is gone"),
        };
        self.jobs.send(job).map_err(|_| lost())?;
        rx.await.map_err(|_| lost())
    }
}

/// One spawner thread: restricts itself, reports how, then runs jobs until the sandbox is
/// dropped (or exits at once when nothing could be enforced).
fn serve(
    roots: &[PathBuf],
    queue: &Mutex<mpsc::Receiver<Job>>,
    status: &mpsc::Sender<SandboxStatus>,
) {
    let restricted = restrict_this_thread(roots);
    let enforced = !matches!(restricted, SandboxStatus::Unsupported(_));
    let _ = status.send(restricted);
    if !enforced {
        return;
    }
    loop {
        let job = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        let Ok(job) = job else { return };
        // A panicking spawn fails its own command (its result sender is dropped), not
        // every later one.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}

/// Restricts the calling thread (and its future children) to writing beneath `roots`.
fn restrict_this_thread(roots: &[PathBuf]) -> SandboxStatus {
    let write = AccessFs::from_write(LANDLOCK_ABI);
    let devices = WRITABLE_DEVICES
        .iter()
        .map(Path::new)
        .filter(|p| p.exists());
    let paths: Vec<&Path> = roots.iter().map(PathBuf::as_path).chain(devices).collect();
    let restricted = Ruleset::default()
        .handle_access(write)
        .and_then(|ruleset| ruleset.create())
        .and_then(|ruleset| ruleset.add_rules(path_beneath_rules(&paths, write)))
        .and_then(|ruleset| ruleset.restrict_self());
    match restricted {
        Ok(status) => match status.ruleset {
            RulesetStatus::FullyEnforced => SandboxStatus::Enforced,
            RulesetStatus::PartiallyEnforced => SandboxStatus::PartiallyEnforced,
            RulesetStatus::NotEnforced => SandboxStatus::Unsupported(format!(
                "this kernel does not enforce Landlock ({:?})",
                status.landlock
            )),
        },
        Err(e) => SandboxStatus::Unsupported(format!("Landlock set-up failed: {e}")),
    }
}
