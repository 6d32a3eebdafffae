//! `PATCH_FILE`: apply a unified diff to one file with [`crate::patch`], then write the
//! result atomically (or delete the file). On any failure the file is untouched.

use std::io::Read;
use std::path::Path;
use std::time::Instant;

use nix::sys::stat::FileStat;
use tokio_util::sync::CancellationToken;

use crate::atomic_write::missing_parent;
use crate::confine::PathPolicy;
use crate::error::ExecError;
use crate::executor::{run_blocking, ExecContext, ExecFuture, Executor};
use crate::files::kind::require_regular;
use crate::files::open::{require_path, Parents};
use crate::files::{lock, replace, Target};
use crate::outcome::{human_duration, Outcome};
use crate::patch::{apply_patch, PatchedFile};
use crate::protocol::{Command, PatchFileCommand};

/// The `PATCH_FILE` executor.
#[derive(Debug, Clone, Default)]
pub struct PatchFile {
    paths: PathPolicy,
}

impl PatchFile {
    /// An executor that patches only where `paths` allows.
    pub fn new(paths: PathPolicy) -> Self {
        Self { paths }
    }
}

impl Executor for PatchFile {
    fn execute(&self, command: Command, ctx: ExecContext) -> ExecFuture<'_> {
        Box::pin(async move {
            let cmd = PatchFileCommand::try_from(command)?;
            require_path(&cmd.file_path, "file_path")?;
            let started = Instant::now();
            let paths = self.paths.clone();
            let cancel = ctx.cancel.clone();
            let (summary, notes) =
                run_blocking(move || patch(&paths, &cmd.file_path, &cmd.patch, &cancel)).await?;
            let mut message = format!("{summary} in {}.", human_duration(started.elapsed()));
            for note in notes {
                message.push(' ');
                message.push_str(&note);
                message.push('.');
            }
            Ok(Outcome::succeeded(message))
        })
    }
}

/// Applies `diff` to `path`; returns the summary for the message and the engine's notes
/// (offsets, fuzzy matches, recomputed headers, what the replace could not keep).
///
/// The file is read and replaced under its mutation lock, so concurrent patches of one
/// file apply one after the other; a change by another process between the read and the
/// replace is `CONFLICT`.
fn patch(
    paths: &PathPolicy,
    path: &Path,
    diff: &str,
    cancel: &CancellationToken,
) -> Result<(String, Vec<String>), ExecError> {
    let target = Target::locate(paths, path, "file_path", Parents::Existing)?;
    let _lock = target
        .as_ref()
        .map(|target| lock::lock(target, cancel))
        .transpose()?;
    let before = match &target {
        Some(target) => target.stat()?,
        None => None,
    };
    let original = match (&target, &before) {
        (Some(target), Some(before)) => Some(read_text(target, before)?),
        _ => None,
    };
    let applied = apply_patch(original.as_deref(), diff)?;
    let mut notes = applied.notes;
    let verb = match &applied.file {
        PatchedFile::Modified(text) | PatchedFile::Created(text) => {
            let created = matches!(applied.file, PatchedFile::Created(_));
            let kept = match &target {
                Some(target) => replace::replace(target, text.as_bytes(), before.as_ref(), cancel)?,
                // The parent is missing: only a creation may make it.
                None => create(paths, path, text, cancel)?,
            };
            notes.extend(kept.notes());
            if created {
                "Successfully created"
            } else {
                "Successfully applied patch to"
            }
        }
        PatchedFile::Deleted => {
            let (Some(target), Some(before)) = (&target, &before) else {
                return Err(ExecError::NotFound(path.to_path_buf()));
            };
            replace::delete(target, before, cancel)?;
            "Successfully deleted"
        }
    };
    let summary = format!(
        "{verb} {} ({} hunk{})",
        path.display(),
        applied.hunks,
        if applied.hunks == 1 { "" } else { "s" }
    );
    Ok((summary, notes))
}

/// Creates `path` (and its missing parents) with `text`.
fn create(
    paths: &PathPolicy,
    path: &Path,
    text: &str,
    cancel: &CancellationToken,
) -> Result<replace::Kept, ExecError> {
    let target = Target::locate(paths, path, "file_path", Parents::Create)?
        .ok_or_else(|| missing_parent(path))?;
    let _lock = lock::lock(&target, cancel)?;
    // It did not exist when the patch was read: if it does now, that is a conflict.
    replace::replace(&target, text.as_bytes(), None, cancel)
}

/// The text of the existing regular file `before` names.
fn read_text(target: &Target, before: &FileStat) -> Result<String, ExecError> {
    require_regular(before, &target.shown)?;
    let mut file = target.open_seen(before)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| ExecError::io(&target.shown, e))?;
    let size = bytes.len() as u64;
    String::from_utf8(bytes).map_err(|_| ExecError::NotText {
        path: target.shown.clone(),
        size,
    })
}
