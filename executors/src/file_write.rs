//! `FILE_WRITE`: replace a file's content atomically (see [`crate::atomic_write`]).

use std::time::Instant;

use crate::atomic_write::write_atomic;
use crate::confine::PathPolicy;
use crate::executor::{run_blocking, ExecContext, ExecFuture, Executor};
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
    fn execute(&self, command: Command, _ctx: ExecContext) -> ExecFuture<'_> {
        Box::pin(async move {
            let cmd = FileWriteCommand::try_from(command)?;
            let started = Instant::now();
            let bytes = cmd.content.len();
            let path = cmd.file_path.clone();
            let create_dirs = cmd.create_dirs.unwrap_or(false);
            let paths = self.paths.clone();
            run_blocking(move || {
                paths.check(&cmd.file_path, "file_path")?;
                write_atomic(&cmd.file_path, cmd.content.as_bytes(), create_dirs)
            })
            .await?;
            Ok(Outcome::succeeded(format!(
                "File writing finished successfully to '{}' in {} ({bytes} bytes written).",
                path.display(),
                human_duration(started.elapsed())
            )))
        })
    }
}
