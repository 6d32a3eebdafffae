//! `FILE_WRITE`: replace a file's content atomically (see `files::replace`).
//!
//! Only a regular file (or a name that does not exist yet) is replaced: a directory, FIFO,
//! socket or device is `NOT_A_FILE`, never swapped for a regular file. A symlink is
//! followed: its target is replaced, the link stays. Writes of one file are serialised;
//! a change by another process during the write is `CONFLICT` (nothing written).

use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::atomic_write::missing_parent;
use crate::confine::PathPolicy;
use crate::error::ExecError;
use crate::executor::{run_blocking, ExecContext, ExecFuture, Executor};
use crate::files::kind::require_regular;
use crate::files::open::{require_path, Parents};
use crate::files::replace::Kept;
use crate::files::{lock, replace, Target};
use crate::outcome::{human_duration, Outcome};
use crate::protocol::{Command, FileWriteCommand};

/// The `FILE_WRITE` executor.
#[derive(Debug, Clone, Default)]
pub struct FileWrite {
    paths: PathPolicy,
}

impl FileWrite {
    /// An executor that writes only where `paths` allows.
    pub fn new(paths: PathPolicy) -> Self {
        Self { paths }
    }
}

impl Executor for FileWrite {
    fn execute(&self, command: Command, ctx: ExecContext) -> ExecFuture<'_> {
        Box::pin(async move {
            let cmd = FileWriteCommand::try_from(command)?;
            require_path(&cmd.file_path, "file_path")?;
            let started = Instant::now();
            let bytes = cmd.content.len();
            let path = cmd.file_path.clone();
            let paths = self.paths.clone();
            let cancel = ctx.cancel.clone();
            let kept = run_blocking(move || write(&paths, &cmd, &cancel)).await?;
            let mut message = format!(
                "File writing finished successfully to '{}' in {} ({bytes} bytes written).",
                path.display(),
                human_duration(started.elapsed())
            );
            for note in kept.notes() {
                message.push(' ');
                message.push_str(&note);
                message.push('.');
            }
            Ok(Outcome::succeeded(message))
        })
    }
}

fn write(
    paths: &PathPolicy,
    cmd: &FileWriteCommand,
    cancel: &CancellationToken,
) -> Result<Kept, ExecError> {
    let parents = if cmd.create_dirs.unwrap_or(false) {
        Parents::Create
    } else {
        Parents::Existing
    };
    let target = Target::locate(paths, &cmd.file_path, "file_path", parents)?
        .ok_or_else(|| missing_parent(&cmd.file_path))?;
    let _lock = lock::lock(&target, cancel)?;
    let before = target.stat()?;
    if let Some(before) = &before {
        require_regular(before, &cmd.file_path)?;
    }
    replace::replace(&target, cmd.content.as_bytes(), before.as_ref(), cancel)
}
