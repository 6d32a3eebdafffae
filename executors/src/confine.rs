//! Confinement of file commands and working directories to allowed roots
//! (`--allow-root DIR`).
//!
//! A [`PathPolicy`] holds the canonical allowed roots. [`PathPolicy::check`] resolves a
//! path the way the kernel will when the command uses it — relative to cmdr's working
//! directory, following every symlink (also one in the last component, also a dangling
//! one), applying `..` after the link it follows — and refuses it unless the result lies
//! beneath a root. Components that do not exist yet (a file `FILE_WRITE` creates, the
//! directories `create_dirs` makes) are taken as they are written, since nothing can
//! redirect them until they are created.
//!
//! The check names what is wrong in a clear message, but it is not what enforces the rule:
//! file commands then open the resolved path *relative to a handle on the root*, through
//! `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`, so the
//! kernel refuses any path that leaves the root, follows a link (one swapped in after the
//! check, or a `/proc/<pid>/cwd` magic link) or climbs out with `..` (see `files`).
//! Landlock, for `BASH_EXEC`, is the kernel-enforced layer for shells: see
//! `bash_exec::sandbox`.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use nix::fcntl::OFlag;
use std::sync::Arc;

/// Symlinks followed while resolving one path before giving up (Linux's own limit).
const MAX_SYMLINKS: usize = 40;

/// Which paths commands may use: everything (the default), or only paths beneath a set of
/// allowed roots. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct PathPolicy {
    /// Canonical roots; `None`: no restriction.
    roots: Option<Arc<[PathBuf]>>,
    /// A handle on each root (same order), opened once: paths are opened relative to it.
    handles: Arc<[OwnedFd]>,
    /// Whether file commands may cross a mount point beneath a root (`--cross-mounts`);
    /// by default they may not (`RESOLVE_NO_XDEV`).
    cross_mounts: bool,
}

impl PartialEq for PathPolicy {
    fn eq(&self, other: &Self) -> bool {
        self.roots == other.roots
    }
}

impl Eq for PathPolicy {}

/// Where a path allowed by a [`PathPolicy`] lies.
#[derive(Debug)]
pub(crate) enum Located<'a> {
    /// Anywhere (no restriction): the path as given.
    Free(PathBuf),
    /// Beneath a root: its handle, the path relative to it (symlinks resolved; empty for
    /// the root itself) and the whole resolved path (for messages).
    Beneath {
        root: &'a OwnedFd,
        relative: PathBuf,
        resolved: PathBuf,
        /// Whether the open may cross a mount point (`--cross-mounts`).
        cross_mounts: bool,
    },
}

/// Why a root could not be allowed.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    /// The root does not exist or cannot be resolved.
    #[error("--allow-root {}: {source}", .root.display())]
    Unresolvable {
        /// The root as given.
        root: PathBuf,
        /// Why it cannot be resolved.
        source: io::Error,
    },
    /// The root is not a directory.
    #[error("--allow-root {}: not a directory", .0.display())]
    NotADirectory(PathBuf),
}

/// A path refused by a [`PathPolicy`]: names the path, where it leads, and the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// What the path is (`file_path`, `working_dir` …).
    pub role: &'static str,
    /// The path as the command gave it.
    pub path: PathBuf,
    /// Where it resolves to (symlinks followed), or why it cannot be resolved.
    pub resolved: Result<PathBuf, String>,
    /// The allowed roots.
    pub roots: Arc<[PathBuf]>,
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ", self.role, self.path.display())?;
        match &self.resolved {
            Ok(resolved) if resolved == &self.path => write!(f, "is")?,
            Ok(resolved) => write!(f, "resolves to {}, which is", resolved.display())?,
            Err(why) => return write!(f, "cannot be resolved ({why}); denied by --allow-root"),
        }
        write!(f, " outside the allowed roots (--allow-root ")?;
        for (i, root) in self.roots.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{}", root.display())?;
        }
        write!(f, ")")
    }
}

impl std::error::Error for Denied {}

impl PathPolicy {
    /// No restriction: every path is allowed.
    pub fn unrestricted() -> Self {
        Self::default()
    }

    /// Only paths beneath `roots` are allowed. Each root must be an existing directory; it
    /// is canonicalised (a root given through a symlink allows the real directory).
    /// An empty list means no restriction.
    pub fn allow_roots<I, P>(roots: I) -> Result<Self, RootError>
    where
        I: IntoIterator<Item = P>,
        P: AsRef<Path>,
    {
        let mut canonical = Vec::new();
        for root in roots {
            let root = root.as_ref();
            let real = std::fs::canonicalize(root).map_err(|source| RootError::Unresolvable {
                root: root.to_path_buf(),
                source,
            })?;
            if !real.is_dir() {
                return Err(RootError::NotADirectory(root.to_path_buf()));
            }
            if !canonical.contains(&real) {
                canonical.push(real);
            }
        }
        if canonical.is_empty() {
            return Ok(Self::unrestricted());
        }
        let handles = canonical
            .iter()
            .map(|root| {
                open_root(root).map_err(|source| RootError::Unresolvable {
                    root: root.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            roots: Some(canonical.into()),
            handles: handles.into(),
            cross_mounts: false,
        })
    }

    /// Lets file commands cross mount points beneath the roots (`--cross-mounts`, issue
    /// 32.19); by default a mount placed inside a root is refused (`PATH_NOT_ALLOWED`).
    pub fn crossing_mounts(mut self, allowed: bool) -> Self {
        self.cross_mounts = allowed;
        self
    }

    /// Whether file commands may cross mount points beneath the roots.
    pub fn crosses_mounts(&self) -> bool {
        self.cross_mounts
    }

    /// Whether any restriction applies.
    pub fn is_restricted(&self) -> bool {
        self.roots.is_some()
    }

    /// The canonical allowed roots (empty when unrestricted).
    pub fn roots(&self) -> &[PathBuf] {
        self.roots.as_deref().unwrap_or(&[])
    }

    /// Allows `path` (resolved as described in the module docs) or says why not; `role`
    /// names it in the denial (`file_path`, `working_dir` …).
    /// Blocking: touches the file system (`lstat`, `readlink`) when restricted.
    pub fn check(&self, path: &Path, role: &'static str) -> Result<(), Denied> {
        self.locate(path, role).map(|_| ())
    }

    /// Like [`PathPolicy::check`], and says where the path lies: the root's handle and the
    /// path relative to it, for opening it there.
    pub(crate) fn locate(&self, path: &Path, role: &'static str) -> Result<Located<'_>, Denied> {
        let Some(roots) = &self.roots else {
            return Ok(Located::Free(path.to_path_buf()));
        };
        let denied = |resolved| Denied {
            role,
            path: path.to_path_buf(),
            resolved,
            roots: roots.clone(),
        };
        let real = resolve(path).map_err(|e| denied(Err(e.to_string())))?;
        let beneath = roots
            .iter()
            .zip(self.handles.iter())
            .find_map(|(root, handle)| {
                real.strip_prefix(root)
                    .ok()
                    .map(|relative| (handle, relative.to_path_buf()))
            });
        match beneath {
            Some((root, relative)) => Ok(Located::Beneath {
                root,
                relative,
                resolved: real,
                cross_mounts: self.cross_mounts,
            }),
            None => Err(denied(Ok(real))),
        }
    }

    /// Where `path` lies, without resolving symlinks: when it is absolute, free of `..` and
    /// lexically beneath a root. Opening it beneath the root with `RESOLVE_NO_SYMLINKS`
    /// then either reaches exactly what [`PathPolicy::locate`] would (no link on the way)
    /// or fails with `ELOOP`, after which the caller uses [`PathPolicy::locate`]. `None`:
    /// unrestricted, or not that simple.
    pub(crate) fn locate_lexically(&self, path: &Path) -> Option<Located<'_>> {
        let roots = self.roots.as_ref()?;
        let simple = path.is_absolute()
            && path
                .components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        if !simple {
            return None;
        }
        roots
            .iter()
            .zip(self.handles.iter())
            .find_map(|(root, handle)| {
                let relative = path.strip_prefix(root).ok()?;
                Some(Located::Beneath {
                    root: handle,
                    relative: relative.to_path_buf(),
                    resolved: path.to_path_buf(),
                    cross_mounts: self.cross_mounts,
                })
            })
    }

    /// The denial of `path` when the kernel refused to open it beneath its root (a link or
    /// `..` swapped in after the check): `why` says what the kernel saw.
    pub(crate) fn refused(&self, path: &Path, role: &'static str, why: &str) -> Denied {
        Denied {
            role,
            path: path.to_path_buf(),
            resolved: Err(why.to_owned()),
            roots: self.roots.clone().unwrap_or_else(|| Arc::from(Vec::new())),
        }
    }
}

/// `path` made absolute and free of symlinks, `.` and `..`, as far as it exists; the part
/// that does not exist yet is appended as written (with `..` applied lexically).
pub fn resolve(path: &Path) -> io::Result<PathBuf> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    let mut pending: VecDeque<OsString> = components(&absolute);
    let mut resolved = PathBuf::from("/");
    let mut links = 0usize;
    let mut missing = false;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        let candidate = resolved.join(&name);
        if missing {
            resolved = candidate;
            continue;
        }
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(io::Error::other("too many levels of symbolic links"));
                }
                let target = std::fs::read_link(&candidate)?;
                if target.is_absolute() {
                    resolved = PathBuf::from("/");
                }
                for part in components(&target).into_iter().rev() {
                    pending.push_front(part);
                }
            }
            Ok(_) => resolved = candidate,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing = true;
                resolved = candidate;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(resolved)
}

/// The normal and `..` components of `path` (root and `.` dropped).
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// Opens an allowed root (a directory) for the paths beneath it.
pub(crate) fn open_root(root: &Path) -> std::io::Result<OwnedFd> {
    let fd = nix::fcntl::open(
        root,
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    Ok(fd)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "s").unwrap();
        (tmp, root, outside)
    }

    #[test]
    fn unrestricted_allows_everything() {
        assert!(PathPolicy::unrestricted()
            .check(Path::new("/etc/passwd"), "path")
            .is_ok());
        assert!(!PathPolicy::allow_roots(Vec::<PathBuf>::new())
            .unwrap()
            .is_restricted());
    }

    #[test]
    fn inside_allowed_outside_denied() {
        let (_tmp, root, outside) = setup();
        let policy = PathPolicy::allow_roots([&root]).unwrap();
        assert!(policy.check(&root, "path").is_ok());
        assert!(policy.check(&root.join("sub/new/file.txt"), "path").is_ok());
        let denied = policy.check(&outside.join("secret"), "path").unwrap_err();
        let text = denied.to_string();
        assert!(
            text.contains("outside the allowed roots (--allow-root "),
            "{text}"
        );
        assert!(text.contains(&root.display().to_string()), "{text}");
    }

    #[test]
    fn dot_dot_cannot_escape() {
        let (_tmp, root, _outside) = setup();
        let policy = PathPolicy::allow_roots([&root]).unwrap();
        assert!(policy
            .check(&root.join("sub/../../outside/secret"), "path")
            .is_err());
        assert!(policy
            .check(&root.join("missing/../../outside/x"), "path")
            .is_err());
        assert!(policy.check(&root.join("sub/../sub/x"), "path").is_ok());
        // A sibling whose name starts with the root's is not beneath it.
        let sibling = PathBuf::from(format!("{}-evil", root.display()));
        assert!(policy.check(&sibling, "path").is_err());
    }

    #[test]
    fn symlinks_are_followed() {
        let (_tmp, root, outside) = setup();
        symlink(&outside, root.join("escape")).unwrap();
        symlink(outside.join("nothing-yet"), root.join("dangling")).unwrap();
        symlink("sub", root.join("inner")).unwrap();
        symlink("../outside/secret", root.join("relative-escape")).unwrap();
        let policy = PathPolicy::allow_roots([&root]).unwrap();
        assert!(policy.check(&root.join("escape/secret"), "path").is_err());
        assert!(policy.check(&root.join("escape"), "path").is_err());
        assert!(policy.check(&root.join("dangling"), "path").is_err());
        assert!(policy.check(&root.join("relative-escape"), "path").is_err());
        assert!(policy.check(&root.join("inner/x"), "path").is_ok());
        // `..` after a link applies to the link's target, as the kernel does.
        assert!(policy.check(&root.join("inner/../sub"), "path").is_ok());
    }

    #[test]
    fn symlink_loops_are_denied_not_hung() {
        let (_tmp, root, _outside) = setup();
        symlink(root.join("b"), root.join("a")).unwrap();
        symlink(root.join("a"), root.join("b")).unwrap();
        let policy = PathPolicy::allow_roots([&root]).unwrap();
        let denied = policy.check(&root.join("a"), "path").unwrap_err();
        assert!(
            denied.to_string().contains("cannot be resolved"),
            "{denied}"
        );
    }

    #[test]
    fn a_root_given_through_a_link_allows_the_real_directory() {
        let (tmp, root, _outside) = setup();
        let link = tmp.path().join("link-to-root");
        symlink(&root, &link).unwrap();
        let policy = PathPolicy::allow_roots([&link]).unwrap();
        assert_eq!(policy.roots(), std::slice::from_ref(&root));
        assert!(policy.check(&link.join("sub"), "path").is_ok());
        assert!(policy.check(&root.join("sub"), "path").is_ok());
    }

    #[test]
    fn bad_roots_are_refused() {
        let (_tmp, root, outside) = setup();
        assert!(matches!(
            PathPolicy::allow_roots([root.join("nope")]),
            Err(RootError::Unresolvable { .. })
        ));
        assert!(matches!(
            PathPolicy::allow_roots([outside.join("secret")]),
            Err(RootError::NotADirectory(_))
        ));
    }
}
