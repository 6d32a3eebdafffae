//! [`SandboxStatus`]: what the kernel enforces for `BASH_EXEC` under `--landlock`,
//! reported at start-up and in `/health` (never more than the kernel enforces).

use std::fmt;

/// What the kernel enforces for `BASH_EXEC`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxStatus {
    /// Everything cmdr asked for is enforced: every write right, and the scoping of
    /// signals and abstract Unix sockets to each scope's domain.
    Enforced,
    /// Landlock is active, but this kernel's Landlock (an older ABI) lacks some of it.
    PartiallyEnforced {
        /// Every write right is enforced (else some, such as truncation or device
        /// ioctls, are not).
        all_write_rights: bool,
        /// Signals and abstract Unix sockets are scoped to each scope's domain (Landlock
        /// ABI 6, Linux 6.12). Ptrace across domains is refused by every Landlock.
        scopes: bool,
    },
    /// Nothing is enforced: the kernel has no (enabled) Landlock; the reason says why.
    Unsupported(String),
}

impl SandboxStatus {
    /// Whether the kernel refuses a scope's shells signals and abstract Unix socket
    /// connections to processes outside the scope's domain.
    pub fn isolates_scopes(&self) -> bool {
        match self {
            SandboxStatus::Enforced => true,
            SandboxStatus::PartiallyEnforced { scopes, .. } => *scopes,
            SandboxStatus::Unsupported(_) => false,
        }
    }
}

impl fmt::Display for SandboxStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SandboxStatus::Enforced => write!(f, "enforced"),
            SandboxStatus::PartiallyEnforced {
                all_write_rights,
                scopes,
            } => {
                let mut lacks = Vec::new();
                if !all_write_rights {
                    lacks.push("some write rights");
                }
                if !scopes {
                    lacks.push("the scoping of signals and abstract sockets per client");
                }
                write!(
                    f,
                    "partially enforced (this kernel's Landlock lacks {})",
                    lacks.join(" and ")
                )
            }
            SandboxStatus::Unsupported(why) => write!(f, "not enforced: {why}"),
        }
    }
}
