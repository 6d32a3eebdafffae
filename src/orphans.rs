//! Processes left behind by a `cmdr` that was killed.
//!
//! A SIGKILLed (or OOM-killed) `cmdr` cannot stop the commands it started: a shell that
//! prints dies of SIGPIPE at its next write, but a silent one (`sleep 300`, a server it
//! started) would run on for nobody. So every shell cmdr starts carries
//! [`OWNER_VAR`]` = <this process's identity>` (see [`crate::owner`]) in its environment,
//! which its descendants inherit. Two clean-ups use it:
//!
//! - **Runs**: when a store opening the database finds a run left open by a process that
//!   is gone (`crate::recovery`), [`reap`] kills every process still carrying that dead
//!   owner's identity. Only owners that died **mid-run** are reaped this way: the
//!   background processes of a `cmdr` that ended normally (say a server a script started
//!   with `nohup … &`) are never touched.
//! - **Workers and servers**: the shells of a `cmdr worker`, `cmdr serve` and `cmdr mcp`
//!   also carry [`ROLE_VAR`]` = worker` ([`mark_worker_shells`]). Such a process kills its
//!   processes itself whenever it ends normally, so a shell of theirs that outlives its
//!   owner is an orphan of one that was killed: every `cmdr worker` sweeps its host for
//!   them at start-up and periodically, and every server at start-up
//!   ([`reap_dead_workers`], [`sweep_dead_workers`]), and kills them (issue 32.10).
//!
//! Never touched: the processes of a live owner (its identity — boot, pid and start
//! time — still matches a running process; a stopped or busy owner is alive), processes
//! of another user or in another PID namespace (an owner's pid means nothing there), and
//! a dead non-worker's processes by the worker sweep (its own recovery decides). A
//! descendant that cleared its environment (`env -i`) escapes; a supervisor that kills the
//! whole control group (systemd `KillMode=control-group`) covers that too.
//!
//! The kill goes through a pidfd opened before the environment is read again, so a pid
//! reused between reading and killing is never hit.

use std::collections::HashMap;
use std::fs;
use std::time::Duration;

use cmdr_executors::RegistryConfig;
use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};

/// The environment variable naming the `cmdr` process a shell belongs to.
pub const OWNER_VAR: &str = "CMDR_OWNER";

/// The environment variable naming what kind of `cmdr` owns a shell ([`WORKER_ROLE`]).
pub const ROLE_VAR: &str = "CMDR_OWNER_ROLE";

/// [`ROLE_VAR`]'s value in a `cmdr worker`'s shells.
pub const WORKER_ROLE: &str = "worker";

/// Marks every shell `config` will start with this process's identity.
pub fn mark_shells(config: &mut RegistryConfig) {
    config
        .bash
        .env
        .push((OWNER_VAR.to_owned(), crate::owner::this_process()));
}

/// Marks every shell `config` will start as a worker's, so that once this process is
/// dead any worker on the host reaps them ([`reap_dead_workers`]).
pub fn mark_worker_shells(config: &mut RegistryConfig) {
    config
        .bash
        .env
        .push((ROLE_VAR.to_owned(), WORKER_ROLE.to_owned()));
}

/// SIGKILLs every process whose environment names one of `dead_owners`; returns their
/// pids. Processes that cannot be read (another user's, already gone) are skipped.
pub fn reap(dead_owners: &[String]) -> Vec<u32> {
    if dead_owners.is_empty() {
        return Vec::new();
    }
    let killed = sweep(|marks| dead_owners.iter().any(|d| d == marks.owner));
    if !killed.is_empty() {
        tracing::warn!(
            ?killed,
            "killed processes left running by a cmdr that died mid-run"
        );
    }
    killed
}

/// SIGKILLs every process marked as a worker's ([`ROLE_VAR`]) whose owner is no longer
/// alive; returns their pids. A live owner's processes are never touched.
pub fn reap_dead_workers() -> Vec<u32> {
    let mut alive: HashMap<String, bool> = HashMap::new();
    let mut dead = Vec::new();
    let killed = sweep(|marks| {
        if marks.role != Some(WORKER_ROLE) {
            return false;
        }
        let owner_alive = *alive
            .entry(marks.owner.to_owned())
            .or_insert_with(|| crate::owner::is_alive(marks.owner));
        if !owner_alive && !dead.iter().any(|d: &String| d == marks.owner) {
            dead.push(marks.owner.to_owned());
        }
        !owner_alive
    });
    if killed.is_empty() {
        tracing::debug!("orphan sweep done: nothing to reap");
    } else {
        tracing::warn!(
            ?killed,
            dead_workers = ?dead,
            "orphan sweep done: killed processes left running by a cmdr worker that was killed"
        );
    }
    killed
}

/// Runs [`reap_dead_workers`] now, then every `every` (only once when `None`), off the
/// async threads. Runs until dropped.
pub async fn sweep_dead_workers(every: Option<Duration>) {
    loop {
        if let Err(e) = tokio::task::spawn_blocking(reap_dead_workers).await {
            tracing::warn!("sweeping for orphans: {e}");
        }
        let Some(every) = every else {
            return;
        };
        tokio::time::sleep(every).await;
    }
}

/// The marks in one process's environment.
struct Marks<'a> {
    owner: &'a str,
    role: Option<&'a str>,
}

/// SIGKILLs every other process of this PID namespace whose marks `doomed` selects;
/// returns their pids.
fn sweep(mut doomed: impl FnMut(&Marks) -> bool) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    let namespace = fs::read_link("/proc/self/ns/pid").ok();
    let mut killed = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|pid| *pid != me)
        else {
            continue;
        };
        let selected = |doomed: &mut dyn FnMut(&Marks) -> bool| {
            let environ = fs::read(entry.path().join("environ")).ok()?;
            let marks = marks_in(&environ)?;
            doomed(&marks).then_some(())
        };
        if selected(&mut doomed).is_none() {
            continue;
        }
        if fs::read_link(entry.path().join("ns/pid")).ok() != namespace {
            continue;
        }
        if kill_if_still(pid, || selected(&mut doomed).is_some()) {
            killed.push(pid);
        }
    }
    killed
}

/// SIGKILLs `pid` if `still` holds once a pidfd pins it: the process signalled is the one
/// `still` looked at, not a later one with a reused pid. Without pidfds (Linux < 5.3, or
/// a seccomp profile refusing `pidfd_open`, which answers `ENOSYS` or `EPERM`), a plain kill.
fn kill_if_still(pid: u32, still: impl FnOnce() -> bool) -> bool {
    let Some(target) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    match pidfd_open(target, PidfdFlags::empty()) {
        Ok(pidfd) => still() && pidfd_send_signal(&pidfd, Signal::KILL).is_ok(),
        Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => {
            still() && rustix::process::kill_process(target, Signal::KILL).is_ok()
        }
        Err(_) => false,
    }
}

/// The marks in a `/proc/<pid>/environ` image (NUL-separated): none without
/// [`OWNER_VAR`].
fn marks_in(environ: &[u8]) -> Option<Marks<'_>> {
    let value = |name: &str| {
        let prefix = format!("{name}=");
        environ
            .split(|byte| *byte == 0)
            .find_map(|pair| pair.strip_prefix(prefix.as_bytes()))
            .and_then(|value| std::str::from_utf8(value).ok())
    };
    Some(Marks {
        owner: value(OWNER_VAR)?,
        role: value(ROLE_VAR),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marks_are_read_from_an_environ_image() {
        let image = b"PATH=/bin\0CMDR_OWNER=boot:12:34\0HOME=/root\0";
        let marks = marks_in(image).unwrap();
        assert_eq!((marks.owner, marks.role), ("boot:12:34", None));
        let worker = b"CMDR_OWNER_ROLE=worker\0CMDR_OWNER=boot:12:34\0";
        let marks = marks_in(worker).unwrap();
        assert_eq!((marks.owner, marks.role), ("boot:12:34", Some("worker")));
        assert!(marks_in(b"PATH=/bin\0XCMDR_OWNER=a\0").is_none());
        assert!(marks_in(b"CMDR_OWNER_ROLE=worker\0").is_none());
        assert!(marks_in(b"").is_none());
    }

    #[test]
    fn nothing_is_reaped_without_dead_owners() {
        assert!(reap(&[]).is_empty());
        assert!(reap(&["boot:0:0".to_owned()]).is_empty());
    }
}
