//! [`RegistryBuilder`]: the one way cmdr builds an in-process registry.

use std::sync::Arc;
use std::time::Duration;

use cmdr_executors::{EnvPolicy, InputBroker, PathPolicy, Registry, RegistryConfig};

/// Builds a [`Registry`]: confinement, the shells' environment policy, who answers
/// `REQUEST_USER_INPUT`, a default `BASH_EXEC` timeout, the concurrency limit. Every shell it starts is marked as
/// this process's (see [`crate::orphans`]), so that a cmdr restarted after a crash can
/// kill what this one left running.
#[derive(Default)]
pub struct RegistryBuilder {
    config: RegistryConfig,
    worker: bool,
}

impl RegistryBuilder {
    /// Nothing confined, the default environment policy, nobody to answer questions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Confines file commands and working directories to `paths`; with `landlock`, shells'
    /// writes too.
    pub fn confine(mut self, paths: PathPolicy, landlock: bool) -> Self {
        self.config.paths = paths;
        self.config.landlock = landlock;
        self
    }

    /// How shells' environments are built.
    pub fn shell_env(mut self, policy: EnvPolicy) -> Self {
        self.config.bash.env_policy = policy;
        self
    }

    /// Who answers `REQUEST_USER_INPUT` (the terminal, the web UI, the producer …).
    pub fn input_broker(mut self, broker: Arc<dyn InputBroker>) -> Self {
        self.config.input_broker = broker;
        self
    }

    /// How long a shell session may stay unused before it is ended (`--session-idle-secs`).
    pub fn session_idle(mut self, idle: Duration) -> Self {
        self.config.processes.session_idle = idle;
        self
    }

    /// The timeout of `BASH_EXEC` commands that give none.
    pub fn default_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.config.bash.default_timeout = timeout;
        self
    }

    /// Process ids start with `prefix` (`<prefix>p1` …): a NATS worker's id and `-`, so an
    /// id names the worker holding the process.
    pub fn process_id_prefix(mut self, prefix: String) -> Self {
        self.config.process_id_prefix = Some(prefix);
        self
    }

    /// Marks the shells as a `cmdr worker`'s, so that any worker on the host kills them once
    /// this process is dead (see [`crate::orphans::reap_dead_workers`]). Only for a process
    /// that kills its processes itself whenever it ends normally.
    pub fn worker_shells(mut self) -> Self {
        self.worker = true;
        self
    }

    /// How many commands of one type (`BASH_EXEC`, each file command, `LIST_DIRECTORY`)
    /// run at once; further ones are queued, and told so (`--max-concurrent`).
    /// `REQUEST_USER_INPUT` and the process commands, which mostly wait, keep
    /// [`cmdr_executors::WAITING_ACTOR_LIMIT`].
    pub fn max_concurrent(mut self, limit: usize) -> Self {
        self.config.bash_actor.max_concurrent = limit;
        self.config.file_actor.max_concurrent = limit;
        self
    }

    /// Where commands may reach, as configured so far.
    pub fn paths(&self) -> &PathPolicy {
        &self.config.paths
    }

    /// The registry, its shells marked for orphan reaping.
    pub fn build(self) -> Registry {
        let mut config = self.config;
        crate::orphans::mark_shells(&mut config);
        if self.worker {
            crate::orphans::mark_worker_shells(&mut config);
        }
        Registry::with_config(config)
    }
}
