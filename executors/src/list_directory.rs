//! `LIST_DIRECTORY`: one line per entry, sorted by name (docs/contract.md §3):
//!
//! ```text
//! Listing for /srv/app:
//!   [DIR ] drwxr-xr-x 2025-04-11T07:41:39Z       4096 src
//!   [FILE] -rw-r--r-- 2025-04-11T07:41:39Z         46 README.md
//!   [FILE] lrwxrwxrwx 2025-04-11T07:41:39Z          9 latest -> README.md
//!   [ERROR] vanished.txt: No such file or directory (os error 2)
//! ```
//! The directory is shown by its absolute path (`LIST_DIRECTORY .` lists
//! `Listing for /srv/app:`). It is opened once (under `--allow-root`, beneath its root's
//! handle with the kernel's checks) and every entry is `lstat`ed relative to that handle
//! (a symlink is listed as itself, with its target). Times are UTC RFC 3339, so listings
//! read the same on every machine. An entry that cannot be stat'ed becomes an `[ERROR]`
//! line instead of failing the listing. The whole listing is built in one blocking task:
//! an async `stat` per entry is an order of magnitude slower.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use nix::fcntl::AtFlags;
use nix::sys::stat::{FileStat, SFlag};

use crate::confine::PathPolicy;
use crate::error::ExecError;
use crate::executor::{run_blocking, ExecContext, ExecFuture, Executor};
use crate::files::open::{open_directory, require_path};
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
            require_path(&cmd.path, "path")?;
            let started = Instant::now();
            let path = cmd.path.clone();
            let paths = self.paths.clone();
            let (listing, entries) = run_blocking(move || {
                let (dir, shown) = open_directory(&paths, &cmd.path, "path")?;
                list(dir, &shown)
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

/// Builds the listing of the open directory `dir`, shown as `shown` (absolute); returns it
/// with the number of entries. Every entry is `lstat`ed relative to the handle.
fn list(dir: OwnedFd, shown: &Path) -> Result<(String, usize), ExecError> {
    let io = |e: nix::errno::Errno| ExecError::io(shown, e.into());
    let stats = dir.try_clone().map_err(|e| ExecError::io(shown, e))?;
    let reader = nix::dir::Dir::from_fd(dir).map_err(io)?;
    let mut entries: Vec<(OsString, nix::Result<FileStat>)> = Vec::new();
    for entry in reader {
        let entry = entry.map_err(io)?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        let stat = nix::sys::stat::fstatat(&stats, name, AtFlags::AT_SYMLINK_NOFOLLOW);
        entries.push((name.to_os_string(), stat));
    }
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut out = String::with_capacity(32 + entries.len() * 72);
    let _ = writeln!(out, "Listing for {}:", shown.display());
    for (name, stat) in &entries {
        let shown_name = name.to_string_lossy();
        match stat {
            Ok(stat) => entry_line(&mut out, &stats, name, &shown_name, stat),
            Err(e) => {
                let e = std::io::Error::from(*e);
                let _ = writeln!(out, "  [ERROR] {shown_name}: {e}");
            }
        }
    }
    Ok((out, entries.len()))
}

fn entry_line(out: &mut String, dir: &OwnedFd, name: &OsStr, shown: &str, stat: &FileStat) {
    let kind = SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits());
    let tag = if kind == SFlag::S_IFDIR {
        "[DIR ]"
    } else {
        "[FILE]"
    };
    let modified = u64::try_from(stat.st_mtime)
        .map(|secs| {
            let time = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
            humantime::format_rfc3339_seconds(time).to_string()
        })
        .unwrap_or_else(|_| "-".to_owned());
    let _ = write!(
        out,
        "  {tag} {}{} {modified} {:>10} {shown}",
        type_char(kind),
        permission_bits(stat.st_mode),
        stat.st_size
    );
    if kind == SFlag::S_IFLNK {
        if let Ok(target) = nix::fcntl::readlinkat(dir, name) {
            let _ = write!(out, " -> {}", Path::new(&target).display());
        }
    }
    out.push('\n');
}

fn type_char(kind: SFlag) -> char {
    match kind {
        SFlag::S_IFDIR => 'd',
        SFlag::S_IFLNK => 'l',
        SFlag::S_IFIFO => 'p',
        SFlag::S_IFSOCK => 's',
        SFlag::S_IFCHR => 'c',
        SFlag::S_IFBLK => 'b',
        _ => '-',
    }
}

/// `ls -l` style permission bits: rwx triplets with setuid/setgid/sticky.
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
