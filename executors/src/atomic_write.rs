//! [`write_atomic`]: replace a file's content atomically, as `FILE_WRITE` does — for
//! library users who write files next to the commands they run.
//!
//! The work is done by `files` (temp file, owner and mode kept, conflict check, rename,
//! all relative to a handle on the directory); see docs/architecture.md.

use std::path::Path;

use tokio_util::sync::CancellationToken;

use crate::confine::PathPolicy;
use crate::error::ExecError;
use crate::files::open::Parents;
use crate::files::{lock, replace, Target};

pub use crate::files::replace::NEW_FILE_MODE;

/// Writes `content` to `path` atomically; creates missing parent directories when
/// `create_dirs`. Serialised with cmdr's own writes of the same file. Blocking: call from a
/// blocking thread.
pub fn write_atomic(path: &Path, content: &[u8], create_dirs: bool) -> Result<(), ExecError> {
    let parents = if create_dirs {
        Parents::Create
    } else {
        Parents::Existing
    };
    let target = Target::locate(&PathPolicy::unrestricted(), path, "file_path", parents)?
        .ok_or_else(|| missing_parent(path))?;
    let never = CancellationToken::new();
    let _lock = lock::lock(&target, &never)?;
    let before = target.stat()?;
    if let Some(before) = &before {
        crate::files::kind::require_regular(before, path)?;
    }
    replace::replace(&target, content, before.as_ref(), &never).map(|_| ())
}

/// `INVALID_INPUT`: the parent of `path` does not exist and is not to be created.
pub(crate) fn missing_parent(path: &Path) -> ExecError {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    ExecError::InvalidInput(format!(
        "parent directory {} does not exist (set create_dirs to create it)",
        parent.display()
    ))
}
