//! P2: how soon a long-polling `PROCESS_OUTPUT` (`wait_ms`) delivers what a background
//! process writes, against the same write read straight from a pipe, in the same run.
//!
//! Each side has its own `cat <> FIFO` (opened read-write, so it never sees end-of-file):
//! cmdr's started with `BASH_EXEC` `background`, the reference's spawned by tokio with its
//! stdout piped to the bench. A round: a reader task starts waiting (cmdr: `PROCESS_OUTPUT`
//! from the next offset with `wait_ms` 10 s; reference: a read of the pipe), the bench
//! lets it settle (2 ms, not timed), notes the time and writes one line into the FIFO;
//! the reader notes when the line is in its hands. Latency = that time − the write's;
//! `cat`'s own hop from the FIFO to its stdout is on both sides. Rounds alternate the
//! order of the sides; median and p99 per side (`latency.rs`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmdr_executors::{BashExecCommand, Command, ExecutionStatus, ProcessOutputCommand, Registry};
use tokio::io::AsyncBufReadExt;
use tokio::runtime::Runtime;
use tokio::sync::Mutex;

use crate::harness::{check_failed, ensure, refused, Failure, Measured, Timing, Unit};
use crate::latency::{interleave, timed_job, Latency};
use crate::table::{Goal, Row};
use crate::Config;

/// How long the reader gets to start waiting before the line is written.
const SETTLE: Duration = Duration::from_millis(2);

/// Runs the group.
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Vec<Row>, Failure> {
    let dir = tempfile::Builder::new().prefix("cmdr-bench-").tempdir()?;
    let rounds = cfg.size(1000, 100);
    let warmup = cfg.size(50, 10);
    let latencies = rt.block_on(rt.spawn(measure(dir.path().to_owned(), warmup, rounds)))??;
    let [cmdr, pipe] =
        <[_; 2]>::try_from(latencies).map_err(|_| check_failed("two latencies expected"))?;
    let name = match (&cmdr, &pipe) {
        (Ok(c), Ok(p)) => format!(
            "P2 `PROCESS_OUTPUT` `wait_ms`: write → delivery, median (p99: cmdr {}, pipe {})",
            crate::harness::secs(c.p99),
            crate::harness::secs(p.p99)
        ),
        _ => "P2 `PROCESS_OUTPUT` `wait_ms`: write → delivery".to_owned(),
    };
    Ok(vec![Row::new(
        name,
        &timing("PROCESS_OUTPUT wait_ms, one line", cmdr),
        &timing("the same line read from a pipe", pipe),
        Goal::LatencyAtMostMicros(1000.0),
    )])
}

/// A latency as a one-unit timing: its median, and the p99 as its "slowest" (the spread
/// line under the table then reads "max" = p99).
fn timing(label: &str, latency: Latency) -> Timing {
    latency.map(|s| Measured {
        label: label.to_owned(),
        unit: Unit::Run,
        median: s.median,
        min: s.median,
        max: s.p99,
        samples: s.n,
    })
}

async fn measure(dir: PathBuf, warmup: usize, rounds: usize) -> Result<Vec<Latency>, Failure> {
    let registry = Registry::with_defaults();
    let cmdr = CmdrSide::start(&registry, &dir.join("cmdr.fifo")).await?;
    let pipe = PipeSide::start(&dir.join("pipe.fifo")).await?;
    let (cmdr, pipe) = (Arc::new(Mutex::new(cmdr)), Arc::new(Mutex::new(pipe)));
    let jobs = vec![
        (
            "PROCESS_OUTPUT wait_ms",
            timed_job(move || {
                let (side, registry) = (cmdr.clone(), registry.clone());
                async move { side.lock().await.round(&registry).await }
            }),
        ),
        (
            "pipe read",
            timed_job(move || {
                let side = pipe.clone();
                async move { side.lock().await.round().await }
            }),
        ),
    ];
    Ok(interleave(warmup, rounds, jobs).await)
}

/// `mkfifo path`.
fn make_fifo(path: &Path) -> Result<(), Failure> {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU)
        .map_err(|e| check_failed(format!("mkfifo {}: {e}", path.display())))
}

/// Opens the FIFO for writing without waiting for a reader (read-write).
fn open_fifo(path: &Path) -> Result<std::fs::File, Failure> {
    Ok(std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?)
}

/// The line of round `n`.
fn line(n: u64) -> String {
    format!("line {n}\n")
}

/// cmdr's side: a background `cat` and the offset read so far.
struct CmdrSide {
    id: String,
    fifo: std::fs::File,
    offset: u64,
    n: u64,
}

impl CmdrSide {
    async fn start(registry: &Registry, fifo: &Path) -> Result<Self, Failure> {
        make_fifo(fifo)?;
        let command = Command::BashExec(BashExecCommand {
            command: format!("exec cat <> '{}'", fifo.display()),
            background: true,
            yield_ms: Some(0),
            ..BashExecCommand::default()
        });
        let result =
            crate::harness::drain(registry.execute(command).await.map_err(refused)?).await?;
        let id = result
            .process_id
            .ok_or_else(|| check_failed("background start without processId"))?;
        Ok(Self {
            id,
            fifo: open_fifo(fifo)?,
            offset: 0,
            n: 0,
        })
    }

    async fn round(&mut self, registry: &Registry) -> Result<Duration, Failure> {
        let command = Command::ProcessOutput(ProcessOutputCommand {
            process_id: self.id.clone(),
            offset: Some(self.offset),
            wait_ms: Some(10_000),
            ..ProcessOutputCommand::default()
        });
        let mut stream = registry.execute(command).await.map_err(refused)?;
        let reader = tokio::spawn(async move {
            let mut last = None;
            while let Some(message) = stream.next().await {
                if message.status.is_terminal() {
                    last = Some((message, Instant::now()));
                }
            }
            last
        });
        tokio::time::sleep(SETTLE).await;
        self.n += 1;
        let expected = line(self.n);
        let written = Instant::now();
        self.fifo.write_all(expected.as_bytes())?;
        let (result, delivered) = reader
            .await?
            .ok_or_else(|| check_failed("PROCESS_OUTPUT: no terminal result"))?;
        ensure(result.status == ExecutionStatus::Succeeded, || {
            format!("PROCESS_OUTPUT failed: {}", result.error)
        })?;
        ensure(result.result_data == expected, || {
            format!(
                "PROCESS_OUTPUT: {:?}, expected {expected:?}",
                result.result_data
            )
        })?;
        self.offset = result
            .next_offset
            .ok_or_else(|| check_failed("PROCESS_OUTPUT without nextOffset"))?;
        Ok(delivered.saturating_duration_since(written))
    }
}

/// The reference: the same `cat`, its stdout a pipe read by the bench.
struct PipeSide {
    _child: tokio::process::Child,
    fifo: std::fs::File,
    stdout: Option<tokio::io::BufReader<tokio::process::ChildStdout>>,
    n: u64,
}

impl PipeSide {
    async fn start(fifo: &Path) -> Result<Self, Failure> {
        make_fifo(fifo)?;
        let mut child = tokio::process::Command::new("/bin/bash")
            .arg("-c")
            .arg(format!("exec cat <> '{}'", fifo.display()))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| check_failed("cat: no stdout"))?;
        Ok(Self {
            _child: child,
            fifo: open_fifo(fifo)?,
            stdout: Some(tokio::io::BufReader::new(stdout)),
            n: 0,
        })
    }

    async fn round(&mut self) -> Result<Duration, Failure> {
        let mut stdout = self
            .stdout
            .take()
            .ok_or_else(|| check_failed("the pipe was lost in an earlier round"))?;
        let reader = tokio::spawn(async move {
            let mut got = String::new();
            let read = stdout.read_line(&mut got).await;
            (stdout, read.map(|_| (got, Instant::now())))
        });
        tokio::time::sleep(SETTLE).await;
        self.n += 1;
        let expected = line(self.n);
        let written = Instant::now();
        self.fifo.write_all(expected.as_bytes())?;
        let (stdout, read) = reader.await?;
        self.stdout = Some(stdout);
        let (got, delivered) = read?;
        ensure(got == expected, || {
            format!("pipe: {got:?}, expected {expected:?}")
        })?;
        Ok(delivered.saturating_duration_since(written))
    }
}
