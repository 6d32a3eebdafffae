//! The timing helper: warm-up, then interleaved samples of every side, medians.
//!
//! Each side is a closure that runs one sample and returns the time of its measured part
//! (setup and result checks stay outside that part). Sides run in turn, in alternating
//! order (A B C, C B A, …), so load from other processes falls on all of them alike.

use std::fmt;
use std::time::Duration;

use cmdr_executors::{ExecutionStatus, OutputResult, ResultStream};

/// Why a side produced no figure.
#[derive(Debug, Clone)]
pub enum Failure {
    /// cmdr answered `FAILED` (or refused the command): no figure, but not a bench bug.
    Engine(String),
    /// A result was wrong, or the harness itself could not run: the run is not trustworthy.
    Check(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Engine(e) => write!(f, "engine error: {e}"),
            Failure::Check(e) => write!(f, "CHECK FAILED: {e}"),
        }
    }
}

impl<E: std::error::Error> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::Check(e.to_string())
    }
}

/// A failed check with a message.
pub fn check_failed(message: impl Into<String>) -> Failure {
    Failure::Check(message.into())
}

/// Fails with `message` unless `ok`.
pub fn ensure(ok: bool, message: impl FnOnce() -> String) -> Result<(), Failure> {
    if ok {
        Ok(())
    } else {
        Err(Failure::Check(message()))
    }
}

/// The time of one sample's measured part.
pub type Sample = Result<Duration, Failure>;

/// What one sample does `count` of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    /// Commands (or process runs): shown as time per command and commands/s.
    Commands(f64),
    /// Bytes: shown as GB/s.
    Bytes(f64),
    /// One operation per sample: shown as its time.
    Run,
}

impl Unit {
    fn count(self) -> f64 {
        match self {
            Unit::Commands(n) | Unit::Bytes(n) => n,
            Unit::Run => 1.0,
        }
    }
}

/// One side of a comparison.
pub struct Side<'a> {
    label: String,
    unit: Unit,
    run: Box<dyn FnMut() -> Sample + 'a>,
}

impl<'a> Side<'a> {
    /// A side called `label` whose samples each do `unit`.
    pub fn new(label: impl Into<String>, unit: Unit, run: impl FnMut() -> Sample + 'a) -> Self {
        Self {
            label: label.into(),
            unit,
            run: Box::new(run),
        }
    }
}

/// Medians of one side, per unit.
#[derive(Debug, Clone)]
pub struct Measured {
    /// What was measured.
    pub label: String,
    /// What a sample does.
    pub unit: Unit,
    /// Median seconds per unit.
    pub median: f64,
    /// Fastest and slowest sample, seconds per unit.
    pub min: f64,
    /// Slowest sample, seconds per unit.
    pub max: f64,
    /// Samples taken.
    pub samples: usize,
}

impl Measured {
    /// The figure as shown in the table.
    pub fn figure(&self) -> String {
        match self.unit {
            Unit::Commands(_) => format!(
                "{}/cmd ({} cmd/s)",
                secs(self.median),
                per_second(1.0 / self.median)
            ),
            Unit::Bytes(_) => format!("{:.2} GB/s", 1e-9 / self.median),
            Unit::Run => secs(self.median),
        }
    }

    /// Median and spread, for the notes under the table.
    pub fn spread(&self) -> String {
        let pct = |x: f64| (x / self.median - 1.0) * 100.0;
        format!(
            "{}: {} (n={}, min {:+.0}%, max {:+.0}%)",
            self.label,
            self.figure(),
            self.samples,
            pct(self.min),
            pct(self.max)
        )
    }
}

/// A side's result: its medians, or why it has none.
pub type Timing = Result<Measured, Failure>;

/// Runs `warmup` then `samples` samples of every side, interleaved; one result per side,
/// in order. A side that fails stops being run; the others go on.
pub fn compare(warmup: usize, samples: usize, mut sides: Vec<Side<'_>>) -> Vec<Timing> {
    let mut taken: Vec<Result<Vec<Duration>, Failure>> =
        sides.iter().map(|_| Ok(Vec::new())).collect();
    for round in 0..warmup + samples {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..sides.len()).collect()
        } else {
            (0..sides.len()).rev().collect()
        };
        for i in order {
            let (Some(side), Some(Ok(times))) = (sides.get_mut(i), taken.get_mut(i)) else {
                continue;
            };
            match (side.run)() {
                Ok(t) if round >= warmup => times.push(t),
                Ok(_) => {}
                Err(e) => {
                    eprintln!("    {}: {e}", side.label);
                    if let Some(slot) = taken.get_mut(i) {
                        *slot = Err(e);
                    }
                }
            }
        }
    }
    sides
        .iter()
        .zip(taken)
        .map(|(side, times)| times.and_then(|t| summarise(side, t)))
        .collect()
}

fn summarise(side: &Side<'_>, mut times: Vec<Duration>) -> Timing {
    times.sort_unstable();
    let per_unit = |d: &Duration| d.as_secs_f64() / side.unit.count();
    let n = times.len();
    let (Some(first), Some(last)) = (times.first(), times.last()) else {
        return Err(check_failed("no samples taken"));
    };
    let mid = |i: usize| times.get(i).map(per_unit).unwrap_or(f64::NAN);
    let median = if n % 2 == 1 {
        mid(n / 2)
    } else {
        (mid(n / 2 - 1) + mid(n / 2)) / 2.0
    };
    let measured = Measured {
        label: side.label.clone(),
        unit: side.unit,
        median,
        min: per_unit(first),
        max: per_unit(last),
        samples: n,
    };
    eprintln!("    {}", measured.spread());
    Ok(measured)
}

/// `secs` seconds in a readable unit.
pub fn secs(secs: f64) -> String {
    if secs < 1e-6 {
        format!("{:.0} ns", secs * 1e9)
    } else if secs < 1e-3 {
        format!("{:.2} µs", secs * 1e6)
    } else if secs < 1.0 {
        format!("{:.2} ms", secs * 1e3)
    } else {
        format!("{secs:.2} s")
    }
}

fn per_second(rate: f64) -> String {
    if rate >= 1e6 {
        format!("{:.2}M", rate / 1e6)
    } else if rate >= 1e4 {
        format!("{:.0}k", rate / 1e3)
    } else {
        format!("{rate:.0}")
    }
}

/// The terminal result of `result`, or an engine error when cmdr reported `FAILED`.
pub fn succeeded(result: OutputResult) -> Result<OutputResult, Failure> {
    match result.status {
        ExecutionStatus::Succeeded => Ok(result),
        ExecutionStatus::Failed => {
            let code = result.error_code.as_deref().unwrap_or("no code");
            Err(Failure::Engine(format!("{code}: {}", result.error)))
        }
        ExecutionStatus::Running => Err(check_failed("the last message was RUNNING")),
    }
}

/// Reads `stream` to its end, dropping `RUNNING` data; returns the one terminal result.
pub async fn drain(mut stream: ResultStream) -> Result<OutputResult, Failure> {
    let mut terminal = None;
    while let Some(message) = stream.next().await {
        ensure(terminal.is_none(), || "a message after the terminal".into())?;
        if message.status.is_terminal() {
            terminal = Some(message);
        }
    }
    succeeded(terminal.ok_or_else(|| check_failed("the stream ended without a terminal"))?)
}

/// An engine error for a command cmdr refused.
pub fn refused(e: cmdr_executors::SubmitError) -> Failure {
    Failure::Engine(format!("{}: {e}", e.code()))
}
