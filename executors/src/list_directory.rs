//! `LIST_DIRECTORY`: one line per entry, sorted by name (SPEC §3):
//!
//! ```text
//! Listing for /srv/app:
//!   [DIR ] drwxr-xr-x 2025-04-11T07:41:39Z       4096 src
//!   [FILE] -rw-r--r-- 2025-04-11T07:41:39Z         46 README.md
//!   [FILE] lrwxrwxrwx 2025-04-11T07:41:39Z          9 latest -> README.md
//!   [ERROR] vanished.txt: No such file or directory (os error 2)
//! ```
//! Entries are `lstat`ed (a symlink is listed as itself, with its target). Times are UTC
//! RFC 3339, so listings read the same on every machine. An entry that cannot be stat'ed
//! becomes an `[ERROR]` line instead of failing the listing. The whole listing is built in
//! one blocking task: an async `stat` per entry is an order of magnitude slower.

use std::fmt::Write as _;
use std::fs::{self, Metadata};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::time::Instant;

use crate::confine::PathPolicy;
use crate::error::ExecError;
use crate::executor::{run_blocking, ExecContext, ExecFuture, Executor};
use crate::outcome::{human_duration, Outcome};
use crate::protocol::{Command, ListDirectoryCommand};

/// The `LIST_DIRECTORY` executor.
#[derive(Debug, Clone, Default)]
pub struct ListDirectory {
    paths: PathPolicy,
}

impl ListDirectory {
    /// An executor that lists only where `paths` allows.
    pub fn new(paths: PathPolicy) -> Self {
        Self { paths }
    }
}

impl Executor for ListDirectory {
    fn execute(&self, command: Command, _ctx: ExecContext) -> ExecFuture<'_> {
        Box::pin(async move {
            let cmd = ListDirectoryCommand::try_from(command)?;
            let started = Instant::now();
            let path = cmd.path.clone();
            let paths = self.paths.clone();
            let (listing, entries) = run_blocking(move || {
                paths.check(&cmd.path, "path")?;
                list(&cmd.path)
            })
            .await?;
            let message = format!(
                "Successfully listed directory '{}' in {} ({entries} entries).",
                path.display(),
                human_duration(started.elapsed())
            );
            Ok(Outcome::succeeded(message).with_data(listing))
        })
    }
}

/// Builds the listing of `dir`; returns it with the number of entries.
pub fn list(dir: &Path) -> Result<(String, usize), ExecError> {
    let meta = fs::metadata(dir).map_err(|e| ExecError::io(dir, e))?;
    if !meta.is_dir() {
        return Err(ExecError::InvalidInput(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    let reader = fs::read_dir(dir).map_err(|e| ExecError::io(dir, e))?;
    let mut entries: Vec<(Vec<u8>, Result<Metadata, std::io::Error>)> = Vec::new();
    for entry in reader {
        let entry = entry.map_err(|e| ExecError::io(dir, e))?;
        let name = entry.file_name().into_encoded_bytes();
        entries.push((name, fs::symlink_metadata(entry.path())));
    }
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut out = String::with_capacity(32 + entries.len() * 72);
    let _ = writeln!(out, "Listing for {}:", dir.display());
    for (name, meta) in &entries {
        let name = String::from_utf8_lossy(name);
        match meta {
            Ok(meta) => entry_line(&mut out, dir, &name, meta),
            Err(e) => {
                let _ = writeln!(out, "  [ERROR] {name}: {e}");
            }
        }
    }
    Ok((out, entries.len()))
}

fn entry_line(out: &mut String, dir: &Path, name: &str, meta: &Metadata) {
    let kind = if meta.is_dir() { "[DIR ]" } else { "[FILE]" };
    let modified = meta
        .modified()
        .map(|t| humantime::format_rfc3339_seconds(t).to_string())
        .unwrap_or_else(|_| "-".to_owned());
    let _ = write!(
        out,
        "  {kind} {} {modified} {:>10} {name}",
        mode_string(meta),
        meta.len()
    );
    if meta.file_type().is_symlink() {
        if let Ok(target) = fs::read_link(dir.join(name)) {
            let _ = write!(out, " -> {}", target.display());
        }
    }
    out.push('\n');
}

/// `ls -l` style mode: type character then rwx triplets with setuid/setgid/sticky.
pub fn mode_string(meta: &Metadata) -> String {
    let ft = meta.file_type();
    let kind = if ft.is_dir() {
        'd'
    } else if ft.is_symlink() {
        'l'
    } else if ft.is_fifo() {
        'p'
    } else if ft.is_socket() {
        's'
    } else if ft.is_char_device() {
        'c'
    } else if ft.is_block_device() {
        'b'
    } else {
        '-'
    };
    let mut s = String::with_capacity(10);
    s.push(kind);
    s.push_str(&permission_bits(meta.mode()));
    s
}

fn permission_bits(mode: u32) -> String {
    let bit = |mask: u32, c: char| if mode & mask != 0 { c } else { '-' };
    let special = |exec: bool, set: bool, lower: char, upper: char| match (exec, set) {
        (true, true) => lower,
        (false, true) => upper,
        (true, false) => 'x',
        (false, false) => '-',
    };
    [
        bit(0o400, 'r'),
        bit(0o200, 'w'),
        special(mode & 0o100 != 0, mode & 0o4000 != 0, 's', 'S'),
        bit(0o040, 'r'),
        bit(0o020, 'w'),
        special(mode & 0o010 != 0, mode & 0o2000 != 0, 's', 'S'),
        bit(0o004, 'r'),
        bit(0o002, 'w'),
        special(mode & 0o001 != 0, mode & 0o1000 != 0, 't', 'T'),
    ]
    .into_iter()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::permission_bits;

    #[test]
    fn permission_bits_match_ls() {
        assert_eq!(permission_bits(0o755), "rwxr-xr-x");
        assert_eq!(permission_bits(0o644), "rw-r--r--");
        assert_eq!(permission_bits(0o4755), "rwsr-xr-x");
        assert_eq!(permission_bits(0o1777), "rwxrwxrwt");
        assert_eq!(permission_bits(0o2640), "rw-r-S---");
    }
}
