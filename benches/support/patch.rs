//! Benchmark 4: `PATCH_FILE`. A 100,000-line file and a 1,000-hunk unified diff (each
//! hunk changes one line, with the usual 3 lines of context on each side, hunks spread
//! evenly), applied in place through the registry, against GNU `patch` applying it in
//! place to its own copy.
//!
//! Before each sample the original file is written back (not timed). After each sample
//! the patched file is compared with the expected text (not timed): both tools must
//! produce exactly the same file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use cmdr_executors::{combine_output_results, Command, PatchFileCommand, Registry};
use tokio::runtime::Runtime;

use crate::harness::Unit;
use crate::harness::{check_failed, compare, ensure, refused, succeeded, Failure, Sample, Side};
use crate::table::{Goal, Row};
use crate::Config;

/// Lines of context before and after each changed line.
const CONTEXT: usize = 3;

/// The three texts of the benchmark.
struct Texts {
    original: String,
    diff: String,
    patched: String,
}

/// Runs group 4.
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Vec<Row>, Failure> {
    let (lines, hunks) = cfg.size((100_000, 1_000), (20_000, 200));
    let texts = generate(lines, hunks)?;
    let dir = tempfile::Builder::new()
        .prefix("cmdr-bench-patch-")
        .tempdir_in("/tmp")?;
    let diff_path = dir.path().join("change.diff");
    std::fs::write(&diff_path, &texts.diff)?;
    let cmdr_file = dir.path().join("cmdr.txt");
    let gnu_file = dir.path().join("gnu.txt");
    let registry = rt.block_on(async { Registry::with_defaults() });
    let timings = compare(
        cfg.warmup,
        cfg.size(15, 5),
        vec![
            Side::new("PATCH_FILE", Unit::Run, || {
                rt.block_on(cmdr_patch(&registry, &cmdr_file, &texts))
            }),
            Side::new("GNU patch", Unit::Run, || {
                rt.block_on(gnu_patch(&gnu_file, &diff_path, &texts))
            }),
        ],
    );
    let [cmdr, gnu] =
        <[_; 2]>::try_from(timings).map_err(|_| check_failed("two timings expected"))?;
    let name = format!("4 PATCH_FILE {lines} lines / {hunks} hunks");
    Ok(vec![Row::new(name, &cmdr, &gnu, Goal::Above(1.0))])
}

fn line(i: usize) -> String {
    format!("original line {i:06}: let value_{i} = compute(input, {i});\n")
}

fn changed_line(i: usize) -> String {
    format!("patched line {i:06}: let value_{i} = compute_faster(input, {i});\n")
}

/// `lines` numbered lines, and a diff changing one line in the middle of every
/// `lines / hunks`-line stretch.
fn generate(lines: usize, hunks: usize) -> Result<Texts, Failure> {
    let spacing = lines / hunks.max(1);
    ensure(spacing > 2 * CONTEXT + 1, || {
        format!("{hunks} hunks do not fit in {lines} lines")
    })?;
    let changed = |i: usize| i % spacing == spacing / 2 && i / spacing < hunks;
    let mut texts = Texts {
        original: String::new(),
        diff: String::from("--- a/bench.txt\n+++ b/bench.txt\n"),
        patched: String::new(),
    };
    for i in 0..lines {
        texts.original.push_str(&line(i));
        let new = if changed(i) { changed_line(i) } else { line(i) };
        texts.patched.push_str(&new);
        if changed(i) {
            hunk(&mut texts.diff, i);
        }
    }
    Ok(texts)
}

/// Appends the hunk replacing line `i` (0-based).
fn hunk(diff: &mut String, i: usize) {
    let first = i - CONTEXT;
    let len = 2 * CONTEXT + 1;
    let _ = writeln!(diff, "@@ -{0},{len} +{0},{len} @@", first + 1);
    for c in first..i {
        let _ = write!(diff, " {}", line(c));
    }
    let _ = write!(diff, "-{}+{}", line(i), changed_line(i));
    for c in i + 1..=i + CONTEXT {
        let _ = write!(diff, " {}", line(c));
    }
}

fn check_patched(who: &str, path: &Path, texts: &Texts) -> Result<(), Failure> {
    let got = std::fs::read_to_string(path)?;
    if got == texts.patched {
        return Ok(());
    }
    let at = got
        .lines()
        .zip(texts.patched.lines())
        .position(|(a, b)| a != b)
        .map_or("the end".to_owned(), |n| format!("line {}", n + 1));
    Err(check_failed(format!(
        "{who}: wrong output, first difference at {at}"
    )))
}

async fn cmdr_patch(registry: &Registry, file: &Path, texts: &Texts) -> Sample {
    tokio::fs::write(file, &texts.original).await?;
    let command = Command::PatchFile(PatchFileCommand {
        file_path: PathBuf::from(file),
        patch: texts.diff.clone(),
        ..PatchFileCommand::default()
    });
    let started = Instant::now();
    let stream = registry.execute(command).await.map_err(refused)?;
    let result = combine_output_results(stream, None).await;
    let elapsed = started.elapsed();
    succeeded(result)?;
    check_patched("PATCH_FILE", file, texts)?;
    Ok(elapsed)
}

async fn gnu_patch(file: &Path, diff: &Path, texts: &Texts) -> Sample {
    tokio::fs::write(file, &texts.original).await?;
    let mut patch = tokio::process::Command::new("patch");
    patch
        .args(["-s", "--no-backup-if-mismatch"])
        .arg(file)
        .arg(diff)
        .stdin(Stdio::null());
    let started = Instant::now();
    let output = patch.output().await?;
    let elapsed = started.elapsed();
    ensure(output.status.success(), || {
        format!(
            "GNU patch: {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )
    })?;
    check_patched("GNU patch", file, texts)?;
    Ok(elapsed)
}
