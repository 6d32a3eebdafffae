//! cmdr's own process directory is not a file to serve (issue 32.5): file commands
//! refuse a handle that lies in a process directory of a procfs (`/proc/<pid>/…`,
//! `/proc/self`, `/proc/thread-self`, the same through any other procfs mount),
//! whatever the allowed roots.
//!
//! The check is on the opened descriptor, not on the path string: `fstatfs` says whether
//! it is on a procfs, and the kernel's own name for it (`/proc/self/fd/N`) whether a
//! process directory (a numeric component) lies on its way. Magic links
//! (`/proc/<pid>/fd/N`, `/proc/<pid>/root`, `/proc/<pid>/cwd`) are never followed by
//! file commands: see [`open_free`].

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Component, Path};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;
use nix::sys::statfs::{fstatfs, PROC_SUPER_MAGIC};

use crate::confine::PathPolicy;
use crate::error::ExecError;

/// Why such a path is refused (in the `PATH_NOT_ALLOWED` message).
pub(crate) const WHY: &str = "it lies in a process directory under /proc (cmdr's own or \
     another process's descriptors, memory and environment are never served by file commands)";

/// `PATH_NOT_ALLOWED` when `fd` lies in a process directory of a procfs.
pub(crate) fn refuse_process_dir(
    fd: &impl AsFd,
    policy: &PathPolicy,
    path: &Path,
    role: &'static str,
) -> Result<(), ExecError> {
    if in_process_dir(fd) {
        return Err(ExecError::PathNotAllowed(policy.refused(path, role, WHY)));
    }
    Ok(())
}

/// Whether `fd` is on a procfs, inside a process directory (or cannot be told apart
/// from one: then it counts as one).
fn in_process_dir(fd: &impl AsFd) -> bool {
    let Ok(fs) = fstatfs(fd) else {
        return false;
    };
    if fs.filesystem_type() != PROC_SUPER_MAGIC {
        return false;
    }
    let link = format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd());
    match std::fs::read_link(link) {
        Ok(name) => name.components().any(|c| match c {
            Component::Normal(part) => {
                let part = part.as_encoded_bytes();
                part == b"self"
                    || part == b"thread-self"
                    || (!part.is_empty() && part.iter().all(u8::is_ascii_digit))
            }
            _ => false,
        }),
        Err(_) => true,
    }
}

/// Opens `path` unconfined (symbolic links followed, as a shell would) but never through
/// a magic link (`RESOLVE_NO_MAGICLINKS`): `/proc/<pid>/fd/N` does not reach what a
/// process holds open. Old kernels without `openat2`: a plain `open`.
pub(crate) fn open_free(path: &Path, flags: OFlag) -> Result<OwnedFd, Errno> {
    if super::kernel_check().is_err() {
        return nix::fcntl::open(path, flags | OFlag::O_CLOEXEC, Mode::empty());
    }
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_MAGICLINKS);
    nix::fcntl::openat2(nix::fcntl::AT_FDCWD, path, how)
}
