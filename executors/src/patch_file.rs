//! `PATCH_FILE`: apply a unified diff to one file with [`crate::patch`], then write the
//! result atomically (or delete the file). On any failure the file is untouched.

use std::fs;
use std::io;
use std::path::Path;
use std::time::Instant;

use crate::atomic_write::write_atomic;
use crate::confine::PathPolicy;
use crate::error::ExecError;
use crate::executor::{run_blocking, ExecContext, ExecFuture, Executor};
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
    fn execute(&self, command: Command, _ctx: ExecContext) -> ExecFuture<'_> {
        Box::pin(async move {
            let cmd = PatchFileCommand::try_from(command)?;
            let started = Instant::now();
            let paths = self.paths.clone();
            let (summary, notes) = run_blocking(move || {
                paths.check(&cmd.file_path, "file_path")?;
                patch(&cmd.file_path, &cmd.patch)
            })
            .await?;
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
/// (offsets, fuzzy matches, recomputed headers).
fn patch(path: &Path, diff: &str) -> Result<(String, Vec<String>), ExecError> {
    let original = read_existing(path)?;
    let applied = apply_patch(original.as_deref(), diff)?;
    let verb = match &applied.file {
        PatchedFile::Modified(text) => {
            write_atomic(path, text.as_bytes(), false)?;
            "Successfully applied patch to"
        }
        PatchedFile::Created(text) => {
            write_atomic(path, text.as_bytes(), true)?;
            "Successfully created"
        }
        PatchedFile::Deleted => {
            fs::remove_file(path).map_err(|e| ExecError::io(path, e))?;
            "Successfully deleted"
        }
    };
    let summary = format!(
        "{verb} {} ({} hunk{})",
        path.display(),
        applied.hunks,
        if applied.hunks == 1 { "" } else { "s" }
    );
    Ok((summary, applied.notes))
}

/// The file's text, `None` when it does not exist.
fn read_existing(path: &Path) -> Result<Option<String>, ExecError> {
    match fs::read(path) {
        Ok(bytes) => {
            let size = bytes.len() as u64;
            String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| ExecError::NotText {
                    path: path.to_path_buf(),
                    size,
                })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ExecError::io(path, e)),
    }
}
