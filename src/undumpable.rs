//! [`hide_from_commands`]: cmdr's own memory and environment are not readable by the
//! commands it runs.
//!
//! Commands run as cmdr's user, and a process may read `/proc/<pid>/environ` and
//! `/proc/<pid>/mem` of any process of its user: a background process (or a prompt
//! injection that gets a shell) could read `/proc/$PPID/environ` and take cmdr's secrets
//! — `CMDR_AUTH_TOKEN`, the model's API key, the NATS credentials — which the environment
//! policy keeps out of the commands' own environment. Marking cmdr not dumpable
//! (`PR_SET_DUMPABLE` 0) makes those files its own-only: the kernel then refuses them to
//! every other process without `CAP_SYS_PTRACE`, and cmdr leaves no core dump. The
//! commands are not affected: `execve` makes each of them dumpable again.
//!
//! What it does not hide: `/proc/<pid>/cmdline` stays world-readable, so a secret passed
//! as an argument (`--auth-token`) is visible to the commands — pass secrets in the
//! environment. A command running as root (or with `CAP_SYS_PTRACE`) reads anything.

/// Makes this process not dumpable (see the module docs); a failure is logged, not fatal.
pub fn hide_from_commands() {
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!("cannot hide cmdr's environment from its commands (PR_SET_DUMPABLE): {e}");
    }
}
