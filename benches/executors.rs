//! cmdr executor benchmarks: each figure is a ratio against a reference tool measured in
//! the same run, side by side. See `benches/README.md`.
//!
//! ```text
//! cargo bench --bench executors                     # everything (a few minutes)
//! cargo bench --bench executors -- bash patch       # only groups whose name matches
//! cargo bench --bench executors -- sweep           # throughput vs concurrency (+ CSV)
//! CMDR_BENCH_QUICK=1 cargo bench --bench executors  # smoke run, small sizes, < 30 s
//! ```
//!
//! Prints a Markdown table on stdout (progress on stderr). Exits with status 1 when a
//! result check failed (wrong output, a reference tool failing); a cmdr command that
//! reports `FAILED` only shows as "engine error" in its row.

/// The allocator of the `cmdr` binary (src/main.rs), so in-process figures are its
/// (its smaller first arena, which only shapes a process's first allocations, is not copied).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/bash.rs"]
mod bash;
#[path = "support/confine.rs"]
mod confine;
#[path = "support/exec_output.rs"]
mod exec_output;
#[path = "support/file_read.rs"]
mod file_read;
#[path = "support/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "support/latency.rs"]
mod latency;
#[path = "support/list_dir.rs"]
mod list_dir;
#[path = "support/overhead.rs"]
mod overhead;
#[path = "support/patch.rs"]
mod patch;
#[path = "support/process_flood.rs"]
mod process_flood;
#[path = "support/process_output.rs"]
mod process_output;
#[path = "support/session.rs"]
mod session;
#[path = "support/startup.rs"]
mod startup;
#[path = "support/sweep.rs"]
mod sweep;
#[path = "support/table.rs"]
mod table;

use std::process::ExitCode;
use std::time::Instant;

use tokio::runtime::Runtime;

use crate::harness::Failure;
use crate::table::Row;

/// Settings shared by every group.
pub struct Config {
    /// Smoke mode: small sizes, few samples.
    pub quick: bool,
    /// Measured samples per side (after `warmup`).
    pub samples: usize,
    /// Unmeasured samples per side first.
    pub warmup: usize,
}

impl Config {
    fn from_env() -> Self {
        let quick = std::env::var_os("CMDR_BENCH_QUICK").is_some_and(|v| v != "0" && !v.is_empty());
        Self {
            quick,
            samples: if quick { 3 } else { 7 },
            warmup: 1,
        }
    }

    /// `full` in a full run, `quick` in a smoke run.
    pub fn size<T>(&self, full: T, quick: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }
}

/// A benchmark group: its name (what filters match) and how to run it.
type Group = (
    &'static str,
    fn(&Runtime, &Config) -> Result<Vec<Row>, Failure>,
);

const GROUPS: [Group; 12] = [
    ("overhead", overhead::run),
    ("bash", bash::run),
    ("file_read", file_read::run),
    ("patch", patch::run),
    ("list_dir", list_dir::run),
    ("sweep", sweep::run),
    ("confine", confine::run),
    ("session", session::run),
    ("process_output", process_output::run),
    ("process_flood", process_flood::run),
    ("exec_output", exec_output::run),
    ("startup", startup::run),
];

fn main() -> ExitCode {
    let config = Config::from_env();
    // Cargo passes `--bench`; everything else not starting with `-` is a group filter.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot build the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mode = if config.quick { "quick" } else { "full" };
    eprintln!(
        "cmdr executor benchmarks: {mode} mode, {} warm-up + {} measured samples per side",
        config.warmup, config.samples
    );
    let mut rows = Vec::new();
    for (name, run) in GROUPS {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        eprintln!("== {name}");
        let started = Instant::now();
        match run(&runtime, &config) {
            Ok(group) => rows.extend(group),
            Err(e) => rows.push(Row::broken(name, e)),
        }
        eprintln!("   ({name}: {:.1} s)", started.elapsed().as_secs_f64());
    }
    drop(runtime);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("\n### cmdr executors — {mode} mode, {cores} cores, medians\n");
    println!("{}", table::render(&rows));
    if rows.iter().any(Row::check_failed) {
        eprintln!("a result check failed: these figures are not to be trusted");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
