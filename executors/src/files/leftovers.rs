//! Temp files of atomic writes, and the ones writers that died left behind.
//!
//! A temp file is named `.cmdr-write-<pid>-<start>-<random>`: the writing process's pid
//! and start time (clock ticks since boot, `/proc/<pid>/stat`), which together name one
//! process for the life of the machine. A SIGKILL between creating it and renaming it
//! leaves it behind; the first write to the same directory by a later cmdr (or a later
//! write of any cmdr process, once per directory) removes every such file whose writer is
//! gone. Files of live writers are never touched, nor any file not named like this (temp
//! files of cmdr before this naming, `.cmdr-write-XXXXXX`, are removed once a day old).

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::{LazyLock, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;
use nix::unistd::UnlinkatFlags;

/// What every temp file's name starts with.
pub(crate) const PREFIX: &str = ".cmdr-write-";

/// Age past which an old-style temp file (no writer named) is a leftover.
const OLD_STYLE_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// Directories swept by this process, at most this many remembered (then forgotten).
const SWEPT_MAX: usize = 4096;

static SWEPT: LazyLock<Mutex<HashSet<(u64, u64)>>> = LazyLock::new(Mutex::default);

/// A fresh temp file name for this process.
pub(crate) fn temp_name() -> OsString {
    let random = uuid::Uuid::new_v4().simple().to_string();
    OsString::from(format!(
        "{PREFIX}{}-{}-{}",
        std::process::id(),
        own_start(),
        random.get(..12).unwrap_or(&random)
    ))
}

/// Removes the leftovers of dead writers in `dir`, once per directory and process.
pub(crate) fn sweep_once(dir: &OwnedFd) {
    let Ok(stat) = nix::sys::stat::fstat(dir) else {
        return;
    };
    {
        let Ok(mut swept) = SWEPT.lock() else {
            return;
        };
        if swept.len() >= SWEPT_MAX {
            swept.clear();
        }
        if !swept.insert((stat.st_dev, stat.st_ino)) {
            return;
        }
    }
    sweep(dir);
}

/// Removes the leftovers of dead writers in `dir`; returns how many.
pub(crate) fn sweep(dir: &OwnedFd) -> usize {
    // A new open file description: a listing must not share a directory offset.
    let flags = OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
    let Ok(entries) = nix::dir::Dir::openat(dir, ".", flags, Mode::empty()) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.into_iter().flatten() {
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if is_leftover(dir, name) {
            match nix::unistd::unlinkat(dir.as_fd(), name, UnlinkatFlags::NoRemoveDir) {
                Ok(()) => removed += 1,
                Err(e) => tracing::debug!(?name, "removing a leftover temp file: {e}"),
            }
        }
    }
    if removed > 0 {
        tracing::info!(removed, "removed temp files left by writers that died");
    }
    removed
}

/// Whether `name` in `dir` is a temp file whose writer is gone.
fn is_leftover(dir: &OwnedFd, name: &OsStr) -> bool {
    let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
        return false;
    };
    let mut parts = rest.splitn(3, '-');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(pid), Some(start), Some(_)) => match (pid.parse::<u32>(), start.parse::<u64>()) {
            (Ok(pid), Ok(start)) => start_of(pid) != Some(start),
            _ => false,
        },
        _ => old_style_expired(dir, name),
    }
}

/// An old-style temp file (`.cmdr-write-XXXXXX`) last changed over a day ago.
fn old_style_expired(dir: &OwnedFd, name: &OsStr) -> bool {
    let Ok(stat) = nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) else {
        return false;
    };
    let Ok(modified) = u64::try_from(stat.st_mtime) else {
        return false;
    };
    let modified = SystemTime::UNIX_EPOCH + Duration::from_secs(modified);
    SystemTime::now()
        .duration_since(modified)
        .is_ok_and(|age| age > OLD_STYLE_MAX_AGE)
}

/// This process's start time.
fn own_start() -> u64 {
    static START: OnceLock<u64> = OnceLock::new();
    *START.get_or_init(|| start_of(std::process::id()).unwrap_or(0))
}

/// The start time of a running (not zombie) process `pid`, in clock ticks since boot.
fn start_of(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: read after the last ')'.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    // After the state (field 3), the start time is field 22: 19 fields further.
    fields.nth(18)?.parse().ok()
}

/// Creates the temp file `name` in `dir` (new, not following links, owner-only until its
/// mode is set).
pub(crate) fn create(dir: &OwnedFd, name: &OsStr) -> nix::Result<OwnedFd> {
    nix::fcntl::openat(
        dir,
        name,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_name_a_live_writer_and_dead_ones_are_found() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = crate::confine::open_root(tmp.path()).unwrap();
        let ours = temp_name();
        std::fs::write(tmp.path().join(&ours), "x").unwrap();
        // pid 0 never runs a user process.
        let dead = format!("{PREFIX}0-{}-abcdef", own_start());
        std::fs::write(tmp.path().join(&dead), "x").unwrap();
        // Our pid, another start time: a previous process with the same pid.
        let reused = format!("{PREFIX}{}-1-abcdef", std::process::id());
        std::fs::write(tmp.path().join(&reused), "x").unwrap();
        std::fs::write(tmp.path().join(".cmdr-write-Ab12Cd"), "fresh old-style").unwrap();
        std::fs::write(tmp.path().join("unrelated"), "x").unwrap();
        assert_eq!(sweep(&dir), 2);
        assert!(tmp.path().join(&ours).exists());
        assert!(!tmp.path().join(&dead).exists());
        assert!(!tmp.path().join(&reused).exists());
        assert!(tmp.path().join(".cmdr-write-Ab12Cd").exists());
        assert!(tmp.path().join("unrelated").exists());
    }
}
