//! The sweep: throughput against concurrency, cmdr and its reference side by side at
//! every level (the data of the plot in `BENCHMARKS.md`).
//!
//! - `BASH_EXEC true` through `Registry::with_defaults()` against `tokio::process`
//!   `/bin/bash -c true` (group 2's sides), with 1, 2, 4, 8, 16 and 32 commands at once.
//! - The no-op registry (group 1's) against `tokio::spawn` + oneshot, with 1 to 1,000
//!   commands in flight.
//!
//! At level `c`, `c` tasks each run their share of the sample's commands one after the
//! other (a closed loop: `c` commands in flight all the time), so level 1 is sequential.
//! Besides its rows in the table, the sweep writes `sweep.csv` (one line per series and
//! level) to the report folder (see [`report_dir`]). For the `BASH_EXEC` series it also
//! records the CPU each side used per command (this process and the shells it reaped,
//! from `/proc/self/stat`; the sides never run at the same time, so a sample's CPU is its
//! own): once the cores are saturated, throughput is cores / CPU per command.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::path::PathBuf;

use cmdr_executors::Registry;
use tokio::runtime::Runtime;

use crate::bash::{cmdr_true, raw_true, repeat};
use crate::harness::{compare, Failure, Measured, Sample, Side, Timing, Unit};
use crate::overhead::{execute_noop, noop_registry, on_worker, spawn_round_trip, template};
use crate::table::{Goal, Row};
use crate::Config;

/// Concurrency levels of the `BASH_EXEC true` series.
const BASH_LEVELS: [usize; 6] = [1, 2, 4, 8, 16, 32];

/// Commands in flight in the no-op series.
const NOOP_LEVELS: [usize; 7] = [1, 3, 10, 30, 100, 300, 1_000];

/// One level of one series: both sides' timings.
struct Point {
    series: &'static str,
    concurrency: usize,
    cmdr: Timing,
    reference: Timing,
    /// Median CPU seconds per command (this process and its children), cmdr and
    /// reference; measured for the `BASH_EXEC` series only.
    cpu: Option<(f64, f64)>,
}

/// Runs the sweep group; its rows, plus a broken row if the CSV could not be written.
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Vec<Row>, Failure> {
    let mut points = bash_series(rt, cfg);
    points.extend(noop_series(rt, cfg));
    let mut rows: Vec<Row> = points.iter().map(row).collect();
    match write_csv(&points) {
        Ok(path) => eprintln!("   wrote {}", path.display()),
        Err(e) => rows.push(Row::broken("sweep CSV", e)),
    }
    Ok(rows)
}

/// `BASH_EXEC true` against `bash -c true` at every level of [`BASH_LEVELS`].
fn bash_series(rt: &Runtime, cfg: &Config) -> Vec<Point> {
    let registry = rt.block_on(async { Registry::with_defaults() });
    // 192 = 6 × 32: every level runs the same number of commands per sample.
    let per_sample = cfg.size(192, 32);
    BASH_LEVELS
        .iter()
        .map(|&c| {
            eprintln!("   BASH_EXEC true, {c} at once");
            let each = (per_sample / c).max(1);
            let unit = Unit::Commands((each * c) as f64);
            let registry = registry.clone();
            let (cmdr_cpu, raw_cpu) = (CpuLog::new(each * c), CpuLog::new(each * c));
            let timings = compare(
                cfg.warmup,
                cfg.samples,
                vec![
                    Side::new(format!("sweep: BASH_EXEC true, {c} at once"), unit, || {
                        let registry = registry.clone();
                        cmdr_cpu.time(|| {
                            rt.block_on(repeat(c, each, move || cmdr_true(registry.clone())))
                        })
                    }),
                    Side::new(format!("sweep: bash -c true, {c} at once"), unit, || {
                        raw_cpu.time(|| rt.block_on(repeat(c, each, raw_true)))
                    }),
                ],
            );
            let cpu = cmdr_cpu.median(cfg.warmup).zip(raw_cpu.median(cfg.warmup));
            if let Some((ours, theirs)) = cpu {
                eprintln!(
                    "    CPU per command: BASH_EXEC {:.3} ms, bash -c {:.3} ms",
                    ours * 1e3,
                    theirs * 1e3
                );
            }
            Point {
                cpu,
                ..point("bash_true", c, timings)
            }
        })
        .collect()
}

/// The no-op registry against spawn + oneshot at every level of [`NOOP_LEVELS`].
fn noop_series(rt: &Runtime, cfg: &Config) -> Vec<Point> {
    let registry = rt.block_on(async { noop_registry() });
    let per_sample = cfg.size(20_000, 2_000);
    NOOP_LEVELS
        .iter()
        .map(|&c| {
            eprintln!("   no-op, {c} in flight");
            let each = (per_sample / c).max(1);
            let unit = Unit::Commands((each * c) as f64);
            let registry = registry.clone();
            let timings = compare(
                cfg.warmup,
                cfg.samples,
                vec![
                    Side::new(
                        format!("sweep: registry no-op, {c} in flight"),
                        unit,
                        || {
                            let registry = registry.clone();
                            let job = move || {
                                let registry = registry.clone();
                                async move { execute_noop(&registry, template()).await }
                            };
                            on_worker(rt, repeat(c, each, job))
                        },
                    ),
                    Side::new(
                        format!("sweep: spawn + oneshot, {c} in flight"),
                        unit,
                        || on_worker(rt, repeat(c, each, || spawn_round_trip(template()))),
                    ),
                ],
            );
            point("noop", c, timings)
        })
        .collect()
}

fn point(series: &'static str, concurrency: usize, timings: Vec<Timing>) -> Point {
    let mut timings = timings.into_iter();
    let missing = || Err(crate::harness::check_failed("two timings expected"));
    Point {
        series,
        concurrency,
        cmdr: timings.next().unwrap_or_else(missing),
        reference: timings.next().unwrap_or_else(missing),
        cpu: None,
    }
}

/// CPU time of every sample of one side, per command.
struct CpuLog {
    commands: f64,
    per_command: RefCell<Vec<f64>>,
}

impl CpuLog {
    fn new(commands: usize) -> Self {
        Self {
            commands: commands as f64,
            per_command: RefCell::new(Vec::new()),
        }
    }

    /// Runs one sample and logs the CPU it used (nothing when `/proc` cannot be read).
    fn time(&self, sample: impl FnOnce() -> Sample) -> Sample {
        let before = cpu_seconds();
        let elapsed = sample()?;
        if let (Some(before), Some(after)) = (before, cpu_seconds()) {
            self.per_command
                .borrow_mut()
                .push((after - before) / self.commands);
        }
        Ok(elapsed)
    }

    /// The median over the samples after the first `warmup`.
    fn median(&self, warmup: usize) -> Option<f64> {
        let mut v: Vec<f64> = self
            .per_command
            .borrow()
            .iter()
            .skip(warmup)
            .copied()
            .collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => v.get(n / 2).copied(),
            _ => Some((v.get(n / 2 - 1)? + v.get(n / 2)?) / 2.0),
        }
    }
}

/// CPU seconds used so far by this process and its reaped children (user + system):
/// fields 14–17 of `/proc/self/stat`, in clock ticks of 1/100 s (Linux's `USER_HZ`).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; the fields after it are plain.
    let (_, rest) = stat.rsplit_once(')')?;
    let ticks: Option<Vec<f64>> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|f| f.parse::<f64>().ok())
        .collect();
    let ticks = ticks?;
    (ticks.len() == 4).then(|| ticks.iter().sum::<f64>() / 100.0)
}

fn row(p: &Point) -> Row {
    let cpu = p.cpu.map_or_else(String::new, |(ours, theirs)| {
        format!(" (CPU/cmd {:.2} vs {:.2} ms)", ours * 1e3, theirs * 1e3)
    });
    let name = match p.series {
        "bash_true" => format!("S1 BASH_EXEC `true`, {} at once{cpu}", p.concurrency),
        _ => format!("S2 registry no-op, {} in flight{cpu}", p.concurrency),
    };
    Row::new(name, &p.cmdr, &p.reference, Goal::Info)
}

/// Where the report files go: `$CMDR_BENCH_REPORT_DIR`, else `bench-report/` in
/// `$CARGO_TARGET_DIR`, else `target/bench-report/` in the workspace.
pub fn report_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CMDR_BENCH_REPORT_DIR") {
        return PathBuf::from(dir);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from,
    );
    target.join("bench-report")
}

/// Commands per second: median, slowest sample, fastest sample (empty when no figure).
fn rates(timing: &Timing) -> [String; 3] {
    match timing {
        Ok(Measured {
            median, min, max, ..
        }) => [median, max, min].map(|secs| format!("{:.1}", 1.0 / secs)),
        Err(_) => [String::new(), String::new(), String::new()],
    }
}

/// The CSV text: a header, then one line per point.
fn csv(points: &[Point]) -> String {
    let mut out = String::from(
        "series,concurrency,cmdr_cmd_s,cmdr_cmd_s_slowest,cmdr_cmd_s_fastest,\
         reference_cmd_s,reference_cmd_s_slowest,reference_cmd_s_fastest,ratio,samples,\
         cmdr_cpu_ms_per_cmd,reference_cpu_ms_per_cmd\n",
    );
    for p in points {
        let ratio = match (&p.cmdr, &p.reference) {
            (Ok(c), Ok(r)) => format!("{:.4}", r.median / c.median),
            _ => String::new(),
        };
        let samples = p.cmdr.as_ref().map_or(0, |m| m.samples);
        let [c, c_lo, c_hi] = rates(&p.cmdr);
        let [r, r_lo, r_hi] = rates(&p.reference);
        let (cpu_c, cpu_r) = p.cpu.map_or_else(
            || (String::new(), String::new()),
            |(c, r)| (format!("{:.4}", c * 1e3), format!("{:.4}", r * 1e3)),
        );
        let _ = writeln!(
            out,
            "{},{},{c},{c_lo},{c_hi},{r},{r_lo},{r_hi},{ratio},{samples},{cpu_c},{cpu_r}",
            p.series, p.concurrency
        );
    }
    out
}

fn write_csv(points: &[Point]) -> Result<PathBuf, Failure> {
    let dir = report_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("sweep.csv");
    std::fs::write(&path, csv(points))?;
    Ok(path)
}
