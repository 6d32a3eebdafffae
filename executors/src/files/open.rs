//! From a command's path to handles: the directory a file lives in (plus its name there),
//! an open regular file, an open directory.
//!
//! Unconfined, paths are opened as given (symlinks followed, as a shell would). Confined
//! (`--allow-root`), [`PathPolicy::locate`] resolves the path and names the rule it breaks;
//! then the resolved path is opened relative to the root's handle with `openat2`, which
//! refuses any symbolic link, magic link or `..` leaving the root: a link swapped in
//! after the check makes the command fail with `PATH_NOT_ALLOWED`, never escape. Every
//! later step (stat, open, temp file, rename, delete, listing) is relative to the
//! directory handle, never a path walked again.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};

use super::kind::{require_regular, Identity};
use super::procfs::{open_free, refuse_process_dir};
use crate::confine::{Located, PathPolicy};
use crate::error::ExecError;

/// Mode of directories `create_dirs` makes (before the umask).
const NEW_DIR_MODE: u32 = 0o777;

/// A file a command changes: a handle on its directory and its name there.
#[derive(Debug)]
pub(crate) struct Target {
    /// The directory.
    pub(crate) dir: OwnedFd,
    /// The file's name in it (one component).
    pub(crate) name: OsString,
    /// The path, for messages (as the command gave it).
    pub(crate) shown: PathBuf,
}

/// Whether a missing parent directory is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parents {
    /// Missing parents are an error.
    Existing,
    /// Missing parents are created (`create_dirs`).
    Create,
}

/// `INVALID_INPUT` when a required path field is empty.
pub(crate) fn require_path(path: &Path, field: &str) -> Result<(), ExecError> {
    if path.as_os_str().is_empty() {
        return Err(ExecError::InvalidInput(format!(
            "{field} is empty: give the path of a file"
        )));
    }
    Ok(())
}

impl Target {
    /// The file `path` names, for a change: its directory opened (created first with
    /// [`Parents::Create`]), the last component its name. A final symbolic link is
    /// followed: its target is what changes. `Ok(None)`: the parent directory does not
    /// exist (and is not to be created).
    pub(crate) fn locate(
        policy: &PathPolicy,
        path: &Path,
        role: &'static str,
        parents: Parents,
    ) -> Result<Option<Self>, ExecError> {
        let dir_and_name = beneath_or_free(policy, path, role, |located| match located {
            Located::Free(given) => {
                let target = follow_final_link(given, |link| {
                    refuse_link_dir(link, policy, path, role).map_err(Failed::Error)
                })?;
                let (parent, name) = split(&target, path).map_err(Failed::Error)?;
                let dir = open_free_dir(&parent, path, parents).map_err(Failed::Error)?;
                if let Some(dir) = &dir {
                    refuse_process_dir(dir, policy, path, role).map_err(Failed::Error)?;
                }
                Ok(dir.map(|dir| (dir, name)))
            }
            Located::Beneath {
                root,
                relative,
                cross_mounts,
                ..
            } => {
                let (parent, name) = split(relative, path).map_err(Failed::Error)?;
                let dir = open_beneath_dir(root, &parent, parents, *cross_mounts)
                    .map_err(|e| failed(e, path))?;
                if let Some(dir) = &dir {
                    refuse_process_dir(dir, policy, path, role).map_err(Failed::Error)?;
                    // A final link is followed, but only by the resolving path (checked).
                    if is_link(dir, &name) {
                        return Err(Failed::Link);
                    }
                }
                Ok(dir.map(|dir| (dir, name)))
            }
        })?;
        Ok(dir_and_name.map(|(dir, name)| Target {
            dir,
            name,
            shown: path.to_path_buf(),
        }))
    }

    /// The file's entry now (`None`: it does not exist), not following a link.
    pub(crate) fn stat(&self) -> Result<Option<FileStat>, ExecError> {
        match nix::sys::stat::fstatat(
            &self.dir,
            self.name.as_os_str(),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(stat) => Ok(Some(stat)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(ExecError::io(&self.shown, e.into())),
        }
    }

    /// The existing regular file, opened for reading (not following a link, not
    /// blocking), checked to be the inode `seen` names.
    pub(crate) fn open_seen(&self, seen: &FileStat) -> Result<File, ExecError> {
        let fd = nix::fcntl::openat(
            &self.dir,
            self.name.as_os_str(),
            read_flags() | OFlag::O_NOFOLLOW,
            Mode::empty(),
        )
        .map_err(|e| ExecError::io(&self.shown, e.into()))?;
        verify(fd, &Identity::of(seen), &self.shown)
    }
}

/// Opens the regular file `path` for reading: checked to be a regular file before it is
/// opened (nothing else is ever opened), opened without blocking, and checked again.
pub(crate) fn open_regular(
    policy: &PathPolicy,
    path: &Path,
    role: &'static str,
) -> Result<File, ExecError> {
    beneath_or_free(policy, path, role, |located| {
        let (stat, fd) = match located {
            Located::Free(given) => {
                let stat = nix::sys::stat::stat(given).map_err(|e| io(path, e))?;
                require_regular(&stat, path).map_err(Failed::Error)?;
                let fd = open_free(given, read_flags()).map_err(|e| free_failed(e, path))?;
                (stat, fd)
            }
            Located::Beneath {
                root,
                relative,
                cross_mounts,
                ..
            } => {
                // The kind from the entry (an outside file reached through a link swapped
                // in meanwhile is only stat'ed, never opened: the open below is checked,
                // and must reach the same inode).
                let stat = nix::sys::stat::fstatat(
                    *root,
                    relative.as_path(),
                    AtFlags::AT_SYMLINK_NOFOLLOW,
                )
                .map_err(|e| failed(e, path))?;
                if SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFLNK
                {
                    return Err(Failed::Link);
                }
                require_regular(&stat, path).map_err(Failed::Error)?;
                let fd = open_beneath(root, relative, read_flags(), *cross_mounts)
                    .map_err(|e| failed(e, path))?;
                (stat, fd)
            }
        };
        refuse_process_dir(&fd, policy, path, role).map_err(Failed::Error)?;
        verify(fd, &Identity::of(&stat), path).map_err(Failed::Error)
    })
}

/// Opens the directory `path` (for a listing); also returns its absolute path (resolved
/// when confined; made absolute and cleaned of `.`/`..` otherwise, as `ls` would show it).
pub(crate) fn open_directory(
    policy: &PathPolicy,
    path: &Path,
    role: &'static str,
) -> Result<(OwnedFd, PathBuf), ExecError> {
    let flags = OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
    let failed = |e| match e {
        Errno::ENOTDIR => Failed::Error(ExecError::InvalidInput(format!(
            "{} is not a directory",
            path.display()
        ))),
        e => failed(e, path),
    };
    beneath_or_free(policy, path, role, |located| match located {
        Located::Free(given) => {
            let fd = open_free(given, flags).map_err(|e| match e {
                Errno::ELOOP => free_failed(e, path),
                e => failed(e),
            })?;
            refuse_process_dir(&fd, policy, path, role).map_err(Failed::Error)?;
            Ok((fd, absolute(given)))
        }
        Located::Beneath {
            root,
            relative,
            resolved,
            cross_mounts,
        } => {
            let fd = open_beneath(root, relative, flags, *cross_mounts).map_err(failed)?;
            refuse_process_dir(&fd, policy, path, role).map_err(Failed::Error)?;
            Ok((fd, resolved.clone()))
        }
    })
}

/// Whether `name` in `dir` is a symbolic link.
fn is_link(dir: &OwnedFd, name: &OsStr) -> bool {
    nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|stat| {
        SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFLNK
    })
}

/// Why an attempt to open a located path failed.
enum Failed {
    /// The kernel met a symbolic link, or `..` leaving the root: resolve, or refuse.
    Link,
    /// Anything else, as the command's error.
    Error(ExecError),
}

/// The failure for an errno met opening `path`.
fn failed(e: Errno, path: &Path) -> Failed {
    match e {
        Errno::ELOOP | Errno::EXDEV => Failed::Link,
        Errno::ENOTDIR => Failed::Error(ExecError::InvalidInput(format!(
            "{}: a parent of the path is not a directory (or it is not a directory)",
            path.display()
        ))),
        e => Failed::Error(ExecError::io(path, e.into())),
    }
}

/// The failure for an errno met opening `path` unconfined: a link loop or a magic link
/// (`/proc/<pid>/fd/N`, never followed) is `PATH_NOT_ALLOWED`.
fn free_failed(e: Errno, path: &Path) -> Failed {
    match e {
        Errno::ELOOP => Failed::Error(ExecError::PathNotAllowed(
            PathPolicy::unrestricted().refused(
                path,
                "file_path",
                "a /proc magic link (or a symbolic link loop) is on its way; file commands \
                 never follow magic links",
            ),
        )),
        e => io(path, e),
    }
}

fn io(path: &Path, e: Errno) -> Failed {
    Failed::Error(ExecError::io(path, e.into()))
}

/// Runs `attempt` on where `path` lies: first as written (fast, when it is simple and
/// beneath a root — no symlink resolution), then, if the kernel met a link on the way, on
/// the path with every link resolved and checked; a link met again (swapped in after the
/// check) is `PATH_NOT_ALLOWED`.
fn beneath_or_free<T>(
    policy: &PathPolicy,
    path: &Path,
    role: &'static str,
    attempt: impl Fn(&Located<'_>) -> Result<T, Failed>,
) -> Result<T, ExecError> {
    if let Some(located) = policy.locate_lexically(path) {
        match attempt(&located) {
            Err(Failed::Link) => {}
            Err(Failed::Error(e)) => return Err(e),
            Ok(done) => return Ok(done),
        }
    }
    let located = policy.locate(path, role)?;
    match attempt(&located) {
        Ok(done) => Ok(done),
        Err(Failed::Error(e)) => Err(e),
        // Unconfined, a link loop is just an I/O error.
        Err(Failed::Link) if !policy.is_restricted() => {
            Err(ExecError::io(path, Errno::ELOOP.into()))
        }
        Err(Failed::Link) => Err(ExecError::PathNotAllowed(policy.refused(
            path,
            role,
            "a symbolic link or `..` leads out of the allowed roots, or a mount point inside \
             a root is crossed without --cross-mounts (the kernel refused it)",
        ))),
    }
}

fn read_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC
}

/// The opened `fd` as a file, if it is a regular file and the inode `expected` names.
fn verify(fd: OwnedFd, expected: &Identity, path: &Path) -> Result<File, ExecError> {
    let stat = nix::sys::stat::fstat(&fd).map_err(|e| ExecError::io(path, e.into()))?;
    require_regular(&stat, path)?;
    if !expected.same_inode(&stat) {
        return Err(ExecError::Conflict {
            path: path.to_path_buf(),
            detail: "the file was replaced while being opened".to_owned(),
        });
    }
    Ok(File::from(fd))
}

/// A parent and a last component of `path`; `INVALID_INPUT` when there is no file name
/// (`/`, `..`, a path ending in `/`).
fn split(path: &Path, shown: &Path) -> Result<(PathBuf, OsString), ExecError> {
    let name = match path.components().next_back() {
        Some(Component::Normal(name)) if !path.as_os_str().as_encoded_bytes().ends_with(b"/") => {
            name.to_os_string()
        }
        _ => {
            return Err(ExecError::NotAFile {
                path: shown.to_path_buf(),
                kind: "a directory",
                hint: "; use LIST_DIRECTORY",
            })
        }
    };
    let parent = path.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok((parent, name))
}

/// `path` with a final symbolic link followed (even a dangling one), as writes do: one
/// link at a time by its text (never through a magic link, whose text names no path the
/// command could use), up to the kernel's limit. `check` vets each link before its
/// text is read.
fn follow_final_link<E>(path: &Path, check: impl Fn(&Path) -> Result<(), E>) -> Result<PathBuf, E> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_FINAL_LINKS {
        let is_link = std::fs::symlink_metadata(&current).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            break;
        }
        check(&current)?;
        current = match std::fs::read_link(&current) {
            Ok(link) if link.is_absolute() => link,
            Ok(link) => current.parent().map(|p| p.join(&link)).unwrap_or(link),
            Err(_) => break,
        };
    }
    Ok(current)
}

/// `PATH_NOT_ALLOWED` when the directory holding the link `link` is a process
/// directory under a procfs (its links are magic: `/proc/<pid>/fd/N`).
fn refuse_link_dir(
    link: &Path,
    policy: &PathPolicy,
    path: &Path,
    role: &'static str,
) -> Result<(), ExecError> {
    let parent = match link.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match open_free(parent, OFlag::O_PATH | OFlag::O_DIRECTORY) {
        Ok(dir) => refuse_process_dir(&dir, policy, path, role),
        Err(Errno::ELOOP) => Err(ExecError::PathNotAllowed(policy.refused(
            path,
            role,
            super::procfs::WHY,
        ))),
        Err(_) => Ok(()),
    }
}

/// Final links followed by writes before giving up (Linux's own limit).
const MAX_FINAL_LINKS: usize = 40;

/// Opens the directory `parent` by name (unconfined); `None` if it is missing and not
/// to be created.
fn open_free_dir(
    parent: &Path,
    shown: &Path,
    parents: Parents,
) -> Result<Option<OwnedFd>, ExecError> {
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let flags = OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
    match open_free(parent, flags) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::ENOENT) if parents == Parents::Create => {
            std::fs::create_dir_all(parent).map_err(|e| ExecError::io(parent, e))?;
            open_free(parent, flags)
                .map(Some)
                .map_err(|e| ExecError::io(parent, e.into()))
        }
        Err(Errno::ELOOP) => match free_failed(Errno::ELOOP, shown) {
            Failed::Error(e) => Err(e),
            Failed::Link => Err(ExecError::io(shown, Errno::ELOOP.into())),
        },
        Err(Errno::ENOENT) => Ok(None),
        Err(Errno::ENOTDIR) => Err(ExecError::InvalidInput(format!(
            "{}: a parent of the path is not a directory",
            shown.display()
        ))),
        Err(e) => Err(ExecError::io(parent, e.into())),
    }
}

/// Opens `relative` beneath `root` with the kernel's checks; a mount point on the way is
/// refused (`EXDEV`) unless `cross_mounts`.
fn open_beneath(
    root: &OwnedFd,
    relative: &Path,
    flags: OFlag,
    cross_mounts: bool,
) -> Result<OwnedFd, Errno> {
    if relative.as_os_str().is_empty() {
        return root.try_clone().map_err(|_| Errno::EMFILE);
    }
    if super::kernel_check().is_err() {
        // Old kernels: the path was checked, then it is opened by name (not race-free; the
        // start-up report and /health say so).
        return nix::fcntl::openat(root, relative, flags | OFlag::O_CLOEXEC, Mode::empty());
    }
    let mut resolve = ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS;
    if !cross_mounts {
        resolve |= ResolveFlag::RESOLVE_NO_XDEV;
    }
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC)
        .resolve(resolve);
    nix::fcntl::openat2(root, relative, how)
}

/// Opens the directory `parent` beneath `root`, creating what is missing with
/// [`Parents::Create`] (one component at a time, each opened with the kernel's checks).
fn open_beneath_dir(
    root: &OwnedFd,
    parent: &Path,
    parents: Parents,
    cross_mounts: bool,
) -> Result<Option<OwnedFd>, Errno> {
    let flags = OFlag::O_DIRECTORY | OFlag::O_RDONLY;
    match open_beneath(root, parent, flags, cross_mounts) {
        Ok(fd) => return Ok(Some(fd)),
        Err(Errno::ENOENT) if parents == Parents::Create => {}
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut dir = root.try_clone().map_err(|_| Errno::EMFILE)?;
    for component in parent.components() {
        let Component::Normal(name) = component else {
            continue;
        };
        dir = open_or_make(&dir, name, flags, cross_mounts)?;
    }
    Ok(Some(dir))
}

/// The subdirectory `name` of `dir`, made first if missing.
fn open_or_make(
    dir: &OwnedFd,
    name: &OsStr,
    flags: OFlag,
    cross_mounts: bool,
) -> Result<OwnedFd, Errno> {
    match open_beneath(dir, Path::new(name), flags, cross_mounts) {
        Err(Errno::ENOENT) => {
            match nix::sys::stat::mkdirat(dir.as_fd(), name, Mode::from_bits_truncate(NEW_DIR_MODE))
            {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(e),
            }
            open_beneath(dir, Path::new(name), flags, cross_mounts)
        }
        other => other,
    }
}

/// `path` made absolute (against cmdr's directory) with `.` and `..` applied lexically.
fn absolute(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(cwd) => cwd.join(path),
            Err(_) => return path.to_path_buf(),
        }
    };
    let mut out = PathBuf::from("/");
    for component in joined.components() {
        match component {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_paths_are_clean() {
        assert_eq!(absolute(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(absolute(Path::new(".")), cwd);
        assert_eq!(absolute(Path::new("x/..")), cwd);
    }

    #[test]
    fn split_needs_a_file_name() {
        let shown = Path::new("x");
        assert_eq!(
            split(Path::new("/a/b"), shown).unwrap(),
            (PathBuf::from("/a"), OsString::from("b"))
        );
        assert_eq!(
            split(Path::new("b"), shown).unwrap(),
            (PathBuf::new(), OsString::from("b"))
        );
        assert!(split(Path::new("/"), shown).is_err());
        assert!(split(Path::new("a/.."), shown).is_err());
        assert!(split(Path::new("a/"), shown).is_err());
    }
}
