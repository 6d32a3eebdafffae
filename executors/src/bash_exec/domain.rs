//! One scope's Landlock domain: a spawner thread that restricts itself once, with a fresh
//! ruleset (writes beneath the allowed roots, signals and abstract Unix sockets scoped to
//! the domain), and then performs every `BASH_EXEC` spawn of that scope (docs/confinement.md,
//! "One Landlock domain per scope").
//!
//! Landlock restricts a thread and every process it starts afterwards, and each
//! `landlock_restrict_self` makes a new domain. So every process of a scope shares one
//! domain (a later command can still signal an earlier one's background job), while
//! another scope's processes, and cmdr itself, are outside it: the kernel refuses
//! signals, ptrace (so `/proc/<pid>/fd`, `environ`, `mem`) and abstract-socket connections
//! from the domain to them. The thread ends when its [`Domain`] is dropped (the scope
//! ended, or sat idle with nothing running: see `sandbox`).

use std::path::PathBuf;
use std::sync::{mpsc, Arc, OnceLock};

use landlock::{
    path_beneath_rules, Access, AccessFs, LandlockStatus, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope as LandlockScope, ABI,
};

use super::sandbox_status::SandboxStatus;
use crate::error::ExecError;
use crate::process::Scope;

/// The newest Landlock ABI whose rights cmdr asks for (best effort below it): v5's write
/// rights (with device ioctls) and v6's signal and abstract-socket scoping.
const LANDLOCK_ABI: ABI = ABI::V6;

type Job = Box<dyn FnOnce() + Send>;

/// What every domain is restricted to: writes beneath these paths only.
#[derive(Debug)]
pub(super) struct Rules {
    /// The allowed roots and the writable device files that exist.
    pub(super) writable: Vec<PathBuf>,
}

/// A scope's spawner thread (its Landlock domain). Dropping it ends the thread once the
/// spawns already handed over are done.
#[derive(Debug)]
pub(crate) struct Domain {
    jobs: mpsc::Sender<Job>,
    /// Why the thread could not restrict itself, if it could not (it then spawns nothing).
    failed: Arc<OnceLock<String>>,
}

impl Domain {
    /// Starts the spawner thread of `scope`; it restricts itself before its first spawn.
    pub(super) fn start(scope: &Scope, rules: Arc<Rules>) -> Result<Self, ExecError> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let failed = Arc::new(OnceLock::new());
        let reason = Arc::clone(&failed);
        let scope_name = scope.to_string();
        std::thread::Builder::new()
            .name("cmdr-scope-spawner".to_owned())
            .spawn(move || serve(&rules, &queue, &reason, &scope_name))
            .map_err(|source| ExecError::Spawn {
                program: "the Landlock spawner thread of this scope".to_owned(),
                source,
            })?;
        Ok(Self { jobs, failed })
    }

    /// Runs `work` on the scope's restricted thread (so that what it spawns joins the
    /// scope's domain) and returns its result.
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
            program: "the Landlock spawner thread of this scope".to_owned(),
            source: std::io::Error::other(match self.failed.get() {
                Some(why) => format!("it could not restrict itself: {why}"),
                None => "it is gone".to_owned(),
            }),
        };
        self.jobs.send(job).map_err(|_| lost())?;
        rx.await.map_err(|_| lost())
    }
}

/// The spawner thread: restricts itself, then runs jobs until its [`Domain`] is dropped.
/// If the restriction fails it runs nothing (each job fails; nothing runs unconfined).
fn serve(rules: &Rules, queue: &mpsc::Receiver<Job>, failed: &OnceLock<String>, scope: &str) {
    match restrict_this_thread(rules) {
        SandboxStatus::Unsupported(why) => {
            tracing::warn!(%scope, "the scope's spawner could not restrict itself: {why}");
            let _ = failed.set(why);
            return;
        }
        status => tracing::debug!(%scope, %status, "a scope's Landlock domain"),
    }
    while let Ok(job) = queue.recv() {
        // A panicking spawn fails its own command (its result sender is dropped), not
        // every later one.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}

/// Restricts the calling thread (and its future children) to a new Landlock domain:
/// writing only beneath `rules.writable`, and signalling, tracing and reaching abstract
/// Unix sockets only within the domain.
pub(super) fn restrict_this_thread(rules: &Rules) -> SandboxStatus {
    let write = AccessFs::from_write(LANDLOCK_ABI);
    let restricted = Ruleset::default()
        .handle_access(write)
        .and_then(|ruleset| ruleset.scope(LandlockScope::from_all(LANDLOCK_ABI)))
        .and_then(|ruleset| ruleset.create())
        .and_then(|ruleset| ruleset.add_rules(path_beneath_rules(&rules.writable, write)))
        .and_then(|ruleset| ruleset.restrict_self());
    match restricted {
        Ok(status) => match status.ruleset {
            RulesetStatus::FullyEnforced => SandboxStatus::Enforced,
            RulesetStatus::PartiallyEnforced => partial(status.landlock),
            RulesetStatus::NotEnforced => SandboxStatus::Unsupported(format!(
                "this kernel does not enforce Landlock ({:?})",
                status.landlock
            )),
        },
        Err(e) => SandboxStatus::Unsupported(format!("Landlock set-up failed: {e}")),
    }
}

/// What a partly enforcing kernel (one whose Landlock ABI is older than cmdr's) enforces.
fn partial(landlock: LandlockStatus) -> SandboxStatus {
    let abi = match landlock {
        LandlockStatus::Available { effective_abi, .. } => effective_abi,
        LandlockStatus::NotEnabled | LandlockStatus::NotImplemented => ABI::Unsupported,
    };
    SandboxStatus::PartiallyEnforced {
        all_write_rights: AccessFs::from_write(abi) == AccessFs::from_write(LANDLOCK_ABI),
        scopes: LandlockScope::from_all(abi) == LandlockScope::from_all(LANDLOCK_ABI),
    }
}
