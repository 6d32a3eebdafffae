//! Processes left behind by a `cmdr` that died in the middle of a run.
//!
//! A SIGKILLed (or OOM-killed) `cmdr` cannot stop the commands it started: a shell that
//! prints dies of SIGPIPE at its next write, but a silent one (`sleep 300`, a server it
//! started) would run on for nobody. So every shell cmdr starts carries
//! [`OWNER_VAR`]` = <this process's identity>` (see [`crate::owner`]) in its environment,
//! which its descendants inherit. When a store opening the database finds a run left
//! open by a process that is gone (`crate::recovery`), [`reap`] kills every process
//! still carrying that dead owner's identity.
//!
//! Only owners that died **mid-run** are reaped: the background processes of a `cmdr`
//! that ended normally (say a server a script started with `nohup … &`) are never
//! touched, and neither are those of a live `cmdr`. A descendant that cleared its
//! environment (`env -i`) escapes; a supervisor that kills the whole control group
//! (systemd `KillMode=control-group`) covers that too.

use std::fs;

use cmdr_executors::RegistryConfig;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The environment variable naming the `cmdr` process a shell belongs to.
pub const OWNER_VAR: &str = "CMDR_OWNER";

/// Marks every shell `config` will start with this process's identity.
pub fn mark_shells(config: &mut RegistryConfig) {
    config
        .bash
        .env
        .push((OWNER_VAR.to_owned(), crate::owner::this_process()));
}

/// SIGKILLs every process whose environment names one of `dead_owners`; returns their
/// pids. Processes that cannot be read (another user's, already gone) are skipped.
pub fn reap(dead_owners: &[String]) -> Vec<u32> {
    if dead_owners.is_empty() {
        return Vec::new();
    }
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    let mut killed = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(environ) = fs::read(entry.path().join("environ")) else {
            continue;
        };
        let owned = owner_in(&environ).is_some_and(|o| dead_owners.iter().any(|d| d == o));
        let Ok(raw) = i32::try_from(pid) else {
            continue;
        };
        if owned && kill(Pid::from_raw(raw), Signal::SIGKILL).is_ok() {
            killed.push(pid);
        }
    }
    if !killed.is_empty() {
        tracing::warn!(
            ?killed,
            "killed processes left running by a cmdr that died mid-run"
        );
    }
    killed
}

/// The value of [`OWNER_VAR`] in a `/proc/<pid>/environ` image (NUL-separated).
fn owner_in(environ: &[u8]) -> Option<&str> {
    let prefix = format!("{OWNER_VAR}=");
    environ
        .split(|byte| *byte == 0)
        .find_map(|pair| pair.strip_prefix(prefix.as_bytes()))
        .and_then(|value| std::str::from_utf8(value).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_is_read_from_an_environ_image() {
        let image = b"PATH=/bin\0CMDR_OWNER=boot:12:34\0HOME=/root\0";
        assert_eq!(owner_in(image), Some("boot:12:34"));
        assert_eq!(owner_in(b"PATH=/bin\0XCMDR_OWNER=a\0"), None);
        assert_eq!(owner_in(b""), None);
    }

    #[test]
    fn nothing_is_reaped_without_dead_owners() {
        assert!(reap(&[]).is_empty());
        assert!(reap(&["boot:0:0".to_owned()]).is_empty());
    }
}
