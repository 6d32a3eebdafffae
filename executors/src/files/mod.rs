//! How file commands touch the file system: every step on handles, never by re-walking a
//! path string.
//!
//! - [`open`]: a command's path becomes a handle on its directory plus a name in it
//!   ([`Target`]), or an open regular file. Under `--allow-root` the resolved path is opened
//!   *relative to a handle on its root* with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
//!   | RESOLVE_NO_MAGICLINKS)`: the kernel refuses a path that leaves the root, a symbolic
//!   link swapped in after the check, a `/proc/<pid>/cwd` magic link, a `..` out of it.
//! - [`procfs`]: process directories under any procfs are refused whatever the roots,
//!   checked on the opened handle; magic links are never followed.
//! - [`kind`]: only regular files are read or replaced (`NOT_A_FILE` otherwise), checked
//!   without opening anything else (a FIFO would block, a device could act).
//! - [`lock`]: mutations of one file are serialised inside a cmdr process.
//! - [`replace`]: the atomic replace (temp file, owner and mode kept, fsync, a conflict
//!   check, `renameat`, directory fsync) and delete, relative to the directory handle.
//! - [`leftovers`]: temp files carry their writer's identity, so a later write to the
//!   same directory removes those of writers that died.
//! - [`watch`]: blocking file operations still running after their command ended are
//!   counted, for `/health`.

pub(crate) mod kind;
pub(crate) mod leftovers;
pub mod lock;
pub(crate) mod open;
pub(crate) mod procfs;
pub(crate) mod replace;
pub mod watch;

use std::sync::OnceLock;

use nix::fcntl::{OFlag, OpenHow, ResolveFlag};

pub(crate) use open::Target;

/// Whether the kernel checks confined paths (`openat2`, Linux 5.6+): `Ok(())`, or why not.
pub fn kernel_check() -> Result<(), &'static str> {
    static PROBE: OnceLock<Result<(), &'static str>> = OnceLock::new();
    *PROBE.get_or_init(|| {
        let how = OpenHow::new()
            .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_BENEATH);
        match nix::fcntl::openat2(nix::fcntl::AT_FDCWD, ".", how) {
            Ok(_) => Ok(()),
            Err(nix::errno::Errno::ENOSYS) => Err("the kernel has no openat2 (Linux 5.6+)"),
            Err(_) => Err("openat2 failed on cmdr's own directory"),
        }
    })
}
