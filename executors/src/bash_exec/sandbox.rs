//! Landlock for `BASH_EXEC` (`--landlock`): shells may write only beneath the allowed
//! roots (and to a few device files such as `/dev/null`); reading stays unrestricted. And
//! each scope (an MCP session, the REST scope, a conversation …) gets a Landlock domain of
//! its own ([`Domain`]): its shells cannot signal, trace (`/proc/<pid>/fd`, `environ`,
//! `mem`) or reach the abstract Unix sockets of another scope's processes, nor signal or
//! trace cmdr (docs/confinement.md, "One Landlock domain per scope").
//!
//! Landlock restricts a thread and every process it starts afterwards. So each scope has
//! a spawner thread, started with the scope's first `BASH_EXEC` and restricted once, that
//! performs every spawn of that scope; the rest of cmdr (its database, its own files) is
//! unaffected, and spawning keeps its fast path (the child shares memory until `execve`,
//! see `spawn`). A spawn costs one hand-off to that thread and back. The thread ends when
//! the scope ends ([`Sandbox::end_scope`]), or when the scope has sat idle for
//! [`IDLE_DOMAIN`] with no command in flight and no background process running.
//!
//! Where the kernel lacks Landlock (or some of its write rights, or the scoping of signals
//! and abstract sockets), [`SandboxStatus`] says so plainly; cmdr reports it at start-up
//! and in `/health`, and never claims more than the kernel enforces.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use super::domain::{restrict_this_thread, Domain, Rules};
pub use super::sandbox_status::SandboxStatus;
use crate::error::ExecError;
use crate::process::{ProcessState, ProcessTable, Scope};

/// Device files shells commonly write to, allowed besides the roots (when they exist).
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

/// A scope's domain idle this long (no spawn), with no command in flight and no
/// background process running, is ended: its thread goes (the scope's next command starts
/// a new domain).
pub const IDLE_DOMAIN: Duration = Duration::from_secs(10 * 60);

/// Domains (a thread each) a registry keeps at most: past it, the least recently used
/// one nothing holds ends, or the new scope's command is refused.
pub const MAX_DOMAINS: usize = 64;

/// How often the idle domains are looked for (at a scope's next command).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The Landlock domains of one registry's scopes.
#[derive(Debug)]
pub struct Sandbox {
    rules: Arc<Rules>,
    /// How long a domain may sit idle ([`IDLE_DOMAIN`]).
    idle: Duration,
    /// How often idle domains are looked for ([`SWEEP_EVERY`]).
    sweep_every: Duration,
    /// The processes, to tell whether an idle scope still has some running.
    processes: ProcessTable,
    domains: Mutex<Domains>,
}

#[derive(Debug)]
struct Domains {
    by_scope: HashMap<Scope, Entry>,
    swept: Instant,
}

#[derive(Debug)]
struct Entry {
    domain: Arc<Domain>,
    used: Instant,
}

impl Sandbox {
    /// A sandbox restricting shells to writing beneath `roots`, each scope in a domain of
    /// its own; `processes` is the table the executor's background processes join. Checks
    /// on a probe thread what this kernel enforces; returns the sandbox only when Landlock
    /// enforces something, with what it enforces.
    pub fn start(roots: &[PathBuf], processes: ProcessTable) -> (Option<Self>, SandboxStatus) {
        let devices = WRITABLE_DEVICES
            .iter()
            .map(Path::new)
            .filter(|p| p.exists())
            .map(Path::to_path_buf);
        let rules = Arc::new(Rules {
            writable: roots.iter().cloned().chain(devices).collect(),
        });
        let status = probe(&rules);
        if let SandboxStatus::Unsupported(_) = status {
            return (None, status);
        }
        let domains = Domains {
            by_scope: HashMap::new(),
            swept: Instant::now(),
        };
        let sandbox = Self {
            rules,
            idle: IDLE_DOMAIN,
            sweep_every: SWEEP_EVERY,
            processes,
            domains: Mutex::new(domains),
        };
        (Some(sandbox), status)
    }

    /// The domain of `scope`, started now if it has none.
    pub(crate) fn domain(&self, scope: &Scope) -> Result<Arc<Domain>, ExecError> {
        let mut domains = self.lock();
        let now = Instant::now();
        if now.duration_since(domains.swept) >= self.sweep_every {
            domains.swept = now;
            domains
                .by_scope
                .retain(|scope, entry| !self.idle(scope, entry, now));
        }
        if let Some(entry) = domains.by_scope.get_mut(scope) {
            entry.used = now;
            return Ok(Arc::clone(&entry.domain));
        }
        if domains.by_scope.len() >= MAX_DOMAINS {
            self.make_room(&mut domains)?;
        }
        let domain = Arc::new(Domain::start(scope, Arc::clone(&self.rules))?);
        let entry = Entry {
            domain: Arc::clone(&domain),
            used: now,
        };
        domains.by_scope.insert(scope.clone(), entry);
        Ok(domain)
    }

    /// At [`MAX_DOMAINS`], ends the least recently used domain that nothing holds (no
    /// command in flight, no process of its scope running), however recently it was
    /// used; when every domain is held, refuses (`TOO_MANY_PROCESSES`): a client naming a
    /// new scope per command cannot grow cmdr's threads without bound.
    fn make_room(&self, domains: &mut Domains) -> Result<(), ExecError> {
        let free = domains
            .by_scope
            .iter()
            .filter(|(scope, entry)| self.unheld(scope, entry))
            .min_by_key(|(_, entry)| entry.used)
            .map(|(scope, _)| scope.clone());
        match free {
            Some(scope) => {
                domains.by_scope.remove(&scope);
                Ok(())
            }
            None => Err(ExecError::TooManyProcesses(format!(
                "{MAX_DOMAINS} scopes have shells running under Landlock; end one first"
            ))),
        }
    }

    /// Ends the domain of `scope` (its thread goes once the spawns in flight are done);
    /// the scope's next command starts a new one.
    pub fn end_scope(&self, scope: &Scope) {
        self.lock().by_scope.remove(scope);
    }

    /// The number of scopes with a domain now.
    pub fn domains(&self) -> usize {
        self.lock().by_scope.len()
    }

    /// Whether `scope`'s domain may end: idle long enough, no command holding it, and no
    /// background process of the scope running.
    fn idle(&self, scope: &Scope, entry: &Entry, now: Instant) -> bool {
        now.duration_since(entry.used) >= self.idle && self.unheld(scope, entry)
    }

    /// Whether nothing holds `scope`'s domain: no command holding it, and no background
    /// process of the scope running.
    fn unheld(&self, scope: &Scope, entry: &Entry) -> bool {
        Arc::strong_count(&entry.domain) == 1
            && self
                .processes
                .list(scope)
                .iter()
                .all(|p| p.state() != ProcessState::Running)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Domains> {
        self.domains.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What the kernel enforces, found by restricting a short-lived thread with the rules.
fn probe(rules: &Arc<Rules>) -> SandboxStatus {
    let (tx, rx) = mpsc::channel();
    let rules = Arc::clone(rules);
    let spawned = std::thread::Builder::new()
        .name("cmdr-landlock-probe".to_owned())
        .spawn(move || {
            let _ = tx.send(restrict_this_thread(&rules));
        });
    if let Err(e) = spawned {
        return SandboxStatus::Unsupported(format!("no probe thread: {e}"));
    }
    rx.recv()
        .unwrap_or_else(|_| SandboxStatus::Unsupported("the Landlock probe thread died".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::ProcessLimits;

    /// A sandbox whose domains are idle at once and swept at every command, or `None`
    /// where this kernel has no Landlock.
    fn eager() -> Option<Sandbox> {
        let root = std::env::temp_dir();
        let table = ProcessTable::new(ProcessLimits::default());
        let (sandbox, _) = Sandbox::start(&[root], table);
        let mut sandbox = sandbox?;
        sandbox.idle = Duration::ZERO;
        sandbox.sweep_every = Duration::ZERO;
        Some(sandbox)
    }

    #[test]
    fn an_idle_domain_ends_unless_a_command_holds_it() {
        let Some(sandbox) = eager() else {
            eprintln!("SKIPPED: no Landlock here");
            return;
        };
        let (alice, bob) = (Scope::new("alice"), Scope::new("bob"));
        let held = sandbox.domain(&alice).unwrap();
        drop(sandbox.domain(&bob).unwrap());
        assert_eq!(sandbox.domains(), 2);
        // Bob's domain is idle and unused: the next command (of anyone) ends it; Alice's
        // is held by a command in flight and stays, the same domain.
        let again = sandbox.domain(&alice).unwrap();
        assert_eq!(sandbox.domains(), 1);
        assert!(Arc::ptr_eq(&held, &again));
        drop((held, again));
        drop(sandbox.domain(&bob).unwrap());
        assert_eq!(sandbox.domains(), 1, "Alice's ended, Bob has a new one");
        sandbox.end_scope(&bob);
        assert_eq!(sandbox.domains(), 0);
    }
}
