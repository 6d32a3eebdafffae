//! Benchmark X3 (`startup`): one-shot `cmdr exec` of `BASH_EXEC true`, the whole process
//! from spawn to exit (start-up, the command, shutdown), against `bash -c true` spawned
//! the same way. The cmdr binary is the one Cargo built for this bench (release profile).
//! Row X3c is the streamed form: the same command written again and again to one running
//! `cmdr exec -` (each after the previous one's terminal line), per command.
//!
//! Both sides are spawned with `std::process::Command`, stdin null, stdout and stderr
//! piped and read to their end; outside the timed part cmdr's output must be exactly one
//! `SUCCEEDED` line with `"exitCode":0` and nothing on stderr, bash's nothing at all.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;

use crate::harness::{compare, ensure, Failure, Sample, Side, Timing, Unit};
use crate::table::{Goal, Row};
use crate::Config;

/// The `cmdr` binary of this build.
const CMDR: &str = env!("CARGO_BIN_EXE_cmdr");

/// The one command `cmdr exec` runs.
const COMMAND: &str = r#"{"commandType":"BASH_EXEC","command":"true"}"#;

/// The pause before each run of row X3b: an agent's commands come seconds apart, and
/// some kernel costs (an RCU grace period for a cgroup move) are only paid after a pause.
const SPACED: Duration = Duration::from_millis(100);

/// Runs group X3: back to back (X3), with a pause before each run (X3b), and streamed to
/// one running `cmdr exec -` (X3c).
pub fn run(_rt: &Runtime, cfg: &Config) -> Result<Vec<Row>, Failure> {
    let runs = cfg.size(100, 10);
    let spaced_runs = cfg.size(20, 5);
    let one_shot = "cmdr exec BASH_EXEC true";
    let back_to_back = versus_bash(cfg, one_shot, runs, Duration::ZERO, || {
        repeat(runs, Duration::ZERO, cmdr_exec)
    })?;
    let spaced = versus_bash(cfg, one_shot, spaced_runs, SPACED, || {
        repeat(spaced_runs, SPACED, cmdr_exec)
    })?;
    let streamed = versus_bash(
        cfg,
        "one `cmdr exec -`, commands on stdin",
        runs,
        Duration::ZERO,
        || streamed(runs),
    )?;
    Ok(vec![
        Row::new(
            "X3 `cmdr exec` BASH_EXEC `true`, whole process",
            &back_to_back[0],
            &back_to_back[1],
            // ≤ 2× `bash -c true`.
            Goal::AtLeast(0.5),
        ),
        Row::new(
            "X3b same, each run 100 ms after the previous one",
            &spaced[0],
            &spaced[1],
            Goal::AtLeast(0.5),
        ),
        Row::new(
            "X3c `BASH_EXEC true` streamed to one running `cmdr exec -`",
            &streamed[0],
            &streamed[1],
            Goal::Info,
        ),
    ])
}

/// `cmdr` (a sample of `runs` commands) against `bash -c true` run `runs` times, each
/// after `pause` (not timed).
fn versus_bash(
    cfg: &Config,
    label: &str,
    runs: usize,
    pause: Duration,
    cmdr: impl FnMut() -> Sample,
) -> Result<[Timing; 2], Failure> {
    let unit = Unit::Commands(runs as f64);
    let timings = compare(
        cfg.warmup,
        cfg.samples,
        vec![
            Side::new(label, unit, cmdr),
            Side::new("bash -c true", unit, || repeat(runs, pause, bash_true)),
        ],
    );
    <[_; 2]>::try_from(timings).map_err(|_| crate::harness::check_failed("two timings expected"))
}

/// `runs` runs of `job`, each after `pause`; only the runs are timed.
fn repeat(runs: usize, pause: Duration, job: fn() -> Sample) -> Sample {
    let mut total = Duration::ZERO;
    for _ in 0..runs {
        std::thread::sleep(pause);
        total += job()?;
    }
    Ok(total)
}

/// Runs `command` to its exit; returns the time and its stdout and stderr.
fn timed(command: &mut Command) -> Result<(std::time::Duration, String, String), Failure> {
    let started = Instant::now();
    let output = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()?;
    let elapsed = started.elapsed();
    ensure(output.status.success(), || {
        format!(
            "{command:?}: {} ({})",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    Ok((
        elapsed,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ))
}

/// One `cmdr exec` of [`COMMAND`]; checks its one `SUCCEEDED` line.
fn cmdr_exec() -> Sample {
    let (elapsed, out, err) = timed(Command::new(CMDR).args(["exec", COMMAND]))?;
    let lines: Vec<&str> = out.lines().collect();
    ensure(
        lines.len() == 1
            && lines
                .iter()
                .all(|l| l.contains(r#""status":"SUCCEEDED""#) && l.contains(r#""exitCode":0"#))
            && err.is_empty(),
        || format!("cmdr exec: stdout {out:?}, stderr {err:?}"),
    )?;
    Ok(elapsed)
}

/// `runs` of [`COMMAND`] through one `cmdr exec -`, each written once the previous one's
/// terminal line is read (every line must be a `SUCCEEDED` with exit code 0); times the
/// commands, not the process's start or exit.
fn streamed(runs: usize) -> Sample {
    let mut child = Command::new(CMDR)
        .args(["exec", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(crate::harness::check_failed("cmdr exec -: no pipes"));
    };
    let mut stdout = BufReader::new(stdout);
    let mut line = String::new();
    let started = Instant::now();
    for _ in 0..runs {
        writeln!(stdin, "{COMMAND}")?;
        stdin.flush()?;
        line.clear();
        stdout.read_line(&mut line)?;
        ensure(
            line.contains(r#""status":"SUCCEEDED""#) && line.contains(r#""exitCode":0"#),
            || format!("cmdr exec -: {line:?}"),
        )?;
    }
    let elapsed = started.elapsed();
    drop(stdin);
    let status = child.wait()?;
    ensure(status.success(), || format!("cmdr exec -: {status}"))?;
    Ok(elapsed)
}

/// One `/bin/bash -c true`; checks it printed nothing.
fn bash_true() -> Sample {
    let (elapsed, out, err) = timed(Command::new("/bin/bash").args(["-c", "true"]))?;
    ensure(out.is_empty() && err.is_empty(), || {
        format!("bash -c true printed {out:?} / {err:?}")
    })?;
    Ok(elapsed)
}
