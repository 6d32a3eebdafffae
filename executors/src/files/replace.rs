//! Replacing a file's content so that readers see the old file or the new one, never a
//! mix, and a failure (disk full, crash, conflict) leaves the old file intact — all
//! relative to a handle on the file's directory.
//!
//! 1. A temp file in the same directory ([`leftovers::temp_name`]), created new and
//!    owner-only, gets the content, the old file's permission bits (a new file:
//!    [`NEW_FILE_MODE`]) and, when cmdr may (as root), the old file's owner and group.
//! 2. fsync, then the **conflict check**: the file's entry must still be what the command
//!    started from (same inode, size, modification and change times; or still absent) —
//!    else someone outside this cmdr changed it meanwhile, and the command fails with
//!    `CONFLICT`, nothing written. (Changes through this cmdr are serialised, see
//!    [`super::lock`]; the check and the rename are two steps, so a change landing in the
//!    microseconds between them is not seen.)
//! 3. `renameat` over the name, fsync of the directory. The temp file is removed on every
//!    failure.
//!
//! Hard links: the rename puts a new inode under this one name; other names of the old
//! file keep the old content. The result says so when the file had other links.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;

use nix::errno::Errno;
use nix::sys::stat::{FileStat, Mode};
use nix::unistd::{Gid, Uid, UnlinkatFlags};
use tokio_util::sync::CancellationToken;

use super::kind::Identity;
use super::leftovers;
use super::open::Target;
use crate::error::ExecError;

/// Permission bits of files cmdr creates (what a 022 umask gives).
pub const NEW_FILE_MODE: u32 = 0o644;

/// What a replace could not keep, for the result message.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Kept {
    /// The old file's owner could not be kept (cmdr is not root): the file is now
    /// cmdr's user's.
    pub(crate) owner_lost: bool,
    /// Other hard links of the old file, which keep the old content.
    pub(crate) other_links: u64,
}

impl Kept {
    /// Notes for the result message (empty when nothing is worth saying).
    pub(crate) fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.other_links > 0 {
            notes.push(format!(
                "The file had {} other hard link{}; {} the old content",
                self.other_links,
                if self.other_links == 1 { "" } else { "s" },
                if self.other_links == 1 {
                    "it keeps"
                } else {
                    "they keep"
                }
            ));
        }
        if self.owner_lost {
            notes.push("Its owner could not be kept (cmdr is not root)".to_owned());
        }
        notes
    }
}

/// Replaces `target`'s content with `content`; `before` is its entry when the command
/// started (`None`: it did not exist). Nothing is replaced once `cancel` has fired (the
/// command timed out or was cancelled while this thread waited or wrote).
pub(crate) fn replace(
    target: &Target,
    content: &[u8],
    before: Option<&FileStat>,
    cancel: &CancellationToken,
) -> Result<Kept, ExecError> {
    leftovers::sweep_once(&target.dir);
    let temp = TempFile::create(target)?;
    let kept = temp.fill(content, before)?;
    check_unchanged(target, before)?;
    if cancel.is_cancelled() {
        return Err(ExecError::Cancelled);
    }
    temp.rename_over(target)?;
    sync_dir(target);
    Ok(kept)
}

/// Deletes `target`'s file, if it is still what `before` says and the command is still
/// wanted.
pub(crate) fn delete(
    target: &Target,
    before: &FileStat,
    cancel: &CancellationToken,
) -> Result<(), ExecError> {
    check_unchanged(target, Some(before))?;
    if cancel.is_cancelled() {
        return Err(ExecError::Cancelled);
    }
    nix::unistd::unlinkat(
        target.dir.as_fd(),
        target.name.as_os_str(),
        UnlinkatFlags::NoRemoveDir,
    )
    .map_err(|e| ExecError::io(&target.shown, e.into()))?;
    sync_dir(target);
    Ok(())
}

/// `CONFLICT` unless the file's entry is still what `before` says.
fn check_unchanged(target: &Target, before: Option<&FileStat>) -> Result<(), ExecError> {
    let now = target.stat()?;
    let change = match (before, &now) {
        (None, None) => None,
        (None, Some(_)) => Some("it was created meanwhile".to_owned()),
        (Some(_), None) => Some("it was deleted meanwhile".to_owned()),
        (Some(before), Some(now)) => Identity::of(before).change(&Identity::of(now)),
    };
    match change {
        None => Ok(()),
        Some(detail) => Err(ExecError::Conflict {
            path: target.shown.clone(),
            detail,
        }),
    }
}

/// A temp file in the target's directory, removed on drop unless renamed.
struct TempFile<'a> {
    target: &'a Target,
    name: OsString,
    file: File,
    renamed: bool,
}

impl<'a> TempFile<'a> {
    fn create(target: &'a Target) -> Result<Self, ExecError> {
        let name = leftovers::temp_name();
        let fd = leftovers::create(&target.dir, &name)
            .map_err(|e| ExecError::io(&target.shown, e.into()))?;
        Ok(Self {
            target,
            name,
            file: File::from(fd),
            renamed: false,
        })
    }

    /// Writes the content, sets mode and owner, fsyncs.
    fn fill(&self, content: &[u8], before: Option<&FileStat>) -> Result<Kept, ExecError> {
        let io = |e: std::io::Error| ExecError::io(&self.target.shown, e);
        let nix_io = |e: Errno| io(e.into());
        (&self.file).write_all(content).map_err(io)?;
        let mode = before.map_or(NEW_FILE_MODE, |b| b.st_mode & 0o7777);
        nix::sys::stat::fchmod(&self.file, Mode::from_bits_truncate(mode)).map_err(nix_io)?;
        let mut kept = Kept::default();
        if let Some(before) = before {
            kept.other_links = before.st_nlink.saturating_sub(1);
            kept.owner_lost = !self.keep_owner(before)?;
        }
        self.file.sync_all().map_err(io)?;
        Ok(kept)
    }

    /// Gives the temp file `before`'s owner and group; false when not permitted.
    fn keep_owner(&self, before: &FileStat) -> Result<bool, ExecError> {
        let ours = nix::sys::stat::fstat(&self.file)
            .map_err(|e| ExecError::io(&self.target.shown, e.into()))?;
        if ours.st_uid == before.st_uid && ours.st_gid == before.st_gid {
            return Ok(true);
        }
        let owner = Some(Uid::from_raw(before.st_uid));
        let group = Some(Gid::from_raw(before.st_gid));
        match nix::unistd::fchown(&self.file, owner, group) {
            Ok(()) => {
                // chown clears set-user/group-ID bits: set the mode again.
                let mode = Mode::from_bits_truncate(before.st_mode & 0o7777);
                nix::sys::stat::fchmod(&self.file, mode)
                    .map_err(|e| ExecError::io(&self.target.shown, e.into()))?;
                Ok(true)
            }
            Err(Errno::EPERM) => Ok(false),
            Err(e) => Err(ExecError::io(&self.target.shown, e.into())),
        }
    }

    fn rename_over(mut self, target: &Target) -> Result<(), ExecError> {
        nix::fcntl::renameat(
            &target.dir,
            self.name.as_os_str(),
            &target.dir,
            target.name.as_os_str(),
        )
        .map_err(|e| ExecError::io(&target.shown, e.into()))?;
        self.renamed = true;
        Ok(())
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if self.renamed {
            return;
        }
        let removed = nix::unistd::unlinkat(
            self.target.dir.as_fd(),
            self.name.as_os_str(),
            UnlinkatFlags::NoRemoveDir,
        );
        if let Err(e) = removed {
            tracing::warn!(name = ?self.name, "could not remove a temp file: {e}");
        }
    }
}

/// Makes the rename durable. Best effort: some filesystems refuse to fsync directories.
fn sync_dir(target: &Target) {
    if let Err(e) = nix::unistd::fsync(&target.dir) {
        tracing::debug!(dir = %target.shown.display(), "directory fsync failed: {e}");
    }
}
