//! Benchmark 5: `LIST_DIRECTORY` of a directory with many entries, against `ls -l DIR > /dev/null`
//! spawned as a process, with the inherited locale and with `LC_ALL=C`.
//!
//! The listing must have one line per entry plus its header; each `ls` variant is checked
//! once (its output piped, `total` line plus one line per entry) before being timed.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use cmdr_executors::{combine_output_results, Command, ListDirectoryCommand, Registry};
use tokio::runtime::Runtime;

use crate::harness::Unit;
use crate::harness::{check_failed, compare, ensure, refused, succeeded, Failure, Sample, Side};
use crate::table::{Goal, Row};
use crate::Config;

/// Every this many entries, one is a directory rather than a file.
const DIR_EVERY: usize = 100;

/// Runs group 5.
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Vec<Row>, Failure> {
    let entries = cfg.size(100_000, 10_000);
    let dir = tempfile::Builder::new()
        .prefix("cmdr-bench-list-")
        .tempdir_in("/tmp")?;
    let started = Instant::now();
    populate(dir.path(), entries)?;
    eprintln!(
        "    created {entries} entries in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let registry = rt.block_on(async { Registry::with_defaults() });
    let path = dir.path();
    for c_locale in [false, true] {
        rt.block_on(check_ls(path, c_locale, entries))?;
    }
    let timings = compare(
        cfg.warmup,
        cfg.size(5, 3),
        vec![
            Side::new("LIST_DIRECTORY", Unit::Run, || {
                rt.block_on(cmdr_list(&registry, path, entries))
            }),
            Side::new("ls -l", Unit::Run, || rt.block_on(ls(path, false))),
            Side::new("LC_ALL=C ls -l", Unit::Run, || rt.block_on(ls(path, true))),
        ],
    );
    let [cmdr, ls_default, ls_c] =
        <[_; 3]>::try_from(timings).map_err(|_| check_failed("three timings expected"))?;
    let name = format!("5 LIST_DIRECTORY {}k entries", entries / 1000);
    let removing = Instant::now();
    dir.close()?;
    eprintln!(
        "    removed them in {:.1} s",
        removing.elapsed().as_secs_f64()
    );
    Ok(vec![
        Row::new(
            format!("{name} vs ls -l"),
            &cmdr,
            &ls_default,
            Goal::Above(1.0),
        ),
        Row::new(
            format!("{name} vs LC_ALL=C ls -l"),
            &cmdr,
            &ls_c,
            Goal::Above(1.0),
        ),
    ])
}

fn populate(dir: &Path, entries: usize) -> std::io::Result<()> {
    for i in 0..entries {
        let path = dir.join(format!("entry-{i:06}.txt"));
        if i % DIR_EVERY == DIR_EVERY - 1 {
            std::fs::create_dir(path)?;
        } else {
            File::create(path)?;
        }
    }
    Ok(())
}

async fn cmdr_list(registry: &Registry, dir: &Path, entries: usize) -> Sample {
    let command = Command::ListDirectory(ListDirectoryCommand {
        path: PathBuf::from(dir),
        ..ListDirectoryCommand::default()
    });
    let started = Instant::now();
    let stream = registry.execute(command).await.map_err(refused)?;
    let result = combine_output_results(stream, None).await;
    let elapsed = started.elapsed();
    let listing = succeeded(result)?.result_data;
    let lines = listing.lines().count();
    ensure(lines == entries + 1, || {
        format!("LIST_DIRECTORY: {lines} lines, {} expected", entries + 1)
    })?;
    let entry = listing.lines().find(|l| l.ends_with("entry-000099.txt"));
    ensure(entry.is_some_and(|l| l.contains("[DIR ]")), || {
        "LIST_DIRECTORY: entry-000099.txt is missing or not a directory".to_owned()
    })?;
    Ok(elapsed)
}

fn ls_command(dir: &Path, c_locale: bool) -> tokio::process::Command {
    let mut ls = tokio::process::Command::new("ls");
    ls.arg("-l").arg(dir).stdin(Stdio::null());
    if c_locale {
        ls.env("LC_ALL", "C");
    }
    ls
}

async fn ls(dir: &Path, c_locale: bool) -> Sample {
    let mut ls = ls_command(dir, c_locale);
    ls.stdout(File::create("/dev/null")?).stderr(Stdio::piped());
    let started = Instant::now();
    let output = ls.output().await?;
    let elapsed = started.elapsed();
    ensure(output.status.success(), || {
        format!("ls -l: {}", String::from_utf8_lossy(&output.stderr).trim())
    })?;
    Ok(elapsed)
}

/// `ls -l` prints `total …` and one line per entry.
async fn check_ls(dir: &Path, c_locale: bool, entries: usize) -> Result<(), Failure> {
    let output = ls_command(dir, c_locale).output().await?;
    let lines = output
        .stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty());
    let count = lines.count();
    ensure(output.status.success() && count == entries + 1, || {
        format!(
            "ls -l: {}, {count} lines, {} expected",
            output.status,
            entries + 1
        )
    })
}
