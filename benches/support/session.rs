//! Persistent shell sessions: `BASH_EXEC echo hi` with `session`, sequential, through
//! `Registry::with_defaults()`, against the floor of any session implementation — one
//! persistent `bash` fed `echo hi; echo <marker>` on a pipe and read up to the marker —
//! and against SWE-ReX's bash session (`LocalRuntime`, driven by
//! `support/swerex_session.py` in the venv `benches/report/run.sh` makes), in the same run.
//! Goals (issue 18): ≥ 10,000 commands/s (≤ 100 µs per command), ≥ 1,000× SWE-ReX.
//! Both Rust sides run as tasks on the runtime's workers, as a transport would drive them.

use std::io::{BufRead, BufReader as StdBufReader, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmdr_executors::{BashExecCommand, Command, Registry};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::runtime::Runtime;

use crate::harness::{check_failed, compare, ensure, refused, Failure, Sample, Side, Unit};
use crate::overhead::on_worker;
use crate::table::{Goal, Row};
use crate::Config;

/// Runs the group.
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Vec<Row>, Failure> {
    let registry = rt.block_on(async { Registry::with_defaults() });
    let n = cfg.size(2000, 100);
    let n_swerex = cfg.size(30, 5);
    let raw = Arc::new(tokio::sync::Mutex::new(rt.block_on(RawSession::start())?));
    let mut swerex = SweRex::start();
    let timings = compare(
        cfg.warmup,
        cfg.samples,
        vec![
            Side::new(
                "BASH_EXEC echo hi, session, sequential",
                Unit::Commands(n as f64),
                || {
                    let registry = registry.clone();
                    on_worker(rt, async move { cmdr_session(&registry, n).await })
                },
            ),
            Side::new(
                "persistent bash on a pipe, sequential",
                Unit::Commands(n as f64),
                || {
                    let raw = raw.clone();
                    on_worker(rt, async move { raw.lock().await.run(n).await })
                },
            ),
            Side::new(
                "SWE-ReX bash session (LocalRuntime), sequential",
                Unit::Commands(n_swerex as f64),
                || match swerex.as_mut() {
                    Ok(rex) => rex.run(n_swerex),
                    Err(e) => Err(e.clone()),
                },
            ),
        ],
    );
    let [cmdr, bare, rex] =
        <[_; 3]>::try_from(timings).map_err(|_| check_failed("three timings expected"))?;
    Ok(vec![
        Row::new(
            "P1a session `echo hi`, sequential",
            &cmdr,
            &bare,
            Goal::AtMostMicros(100.0),
        ),
        Row::new(
            "P1b session `echo hi` vs SWE-ReX",
            &cmdr,
            &rex,
            Goal::AtLeast(1000.0),
        ),
    ])
}

/// `n` commands in one session, each checked.
async fn cmdr_session(registry: &Registry, n: usize) -> Sample {
    let started = Instant::now();
    for _ in 0..n {
        let command = Command::BashExec(BashExecCommand {
            command: "echo hi".to_owned(),
            session: Some("bench".to_owned()),
            ..BashExecCommand::default()
        });
        let mut stream = registry.execute(command).await.map_err(refused)?;
        let mut data = String::new();
        let mut code = None;
        while let Some(message) = stream.next().await {
            data.push_str(&message.result_data);
            if message.status.is_terminal() {
                code = message.exit_code;
            }
        }
        ensure(data == "hi\n" && code == Some(0), || {
            format!("session echo hi: {data:?}, exit {code:?}")
        })?;
    }
    Ok(started.elapsed())
}

/// One bash reading commands from a pipe.
struct RawSession {
    _child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: BufReader<tokio::process::ChildStdout>,
}

impl RawSession {
    async fn start() -> Result<Self, Failure> {
        let mut child = tokio::process::Command::new("/bin/bash")
            .arg("--norc")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(check_failed("bash: no pipes"));
        };
        Ok(Self {
            _child: child,
            stdin,
            stdout: BufReader::new(stdout),
        })
    }

    async fn run(&mut self, n: usize) -> Sample {
        let started = Instant::now();
        let mut line = String::new();
        for _ in 0..n {
            self.stdin.write_all(b"echo hi; echo __end__\n").await?;
            let mut seen = String::new();
            loop {
                line.clear();
                if self.stdout.read_line(&mut line).await? == 0 {
                    return Err(check_failed("bash ended"));
                }
                if line == "__end__\n" {
                    break;
                }
                seen.push_str(&line);
            }
            ensure(seen == "hi\n", || format!("raw session: {seen:?}"))?;
        }
        Ok(started.elapsed())
    }
}

/// SWE-ReX's bash session, in a Python process answering "run N commands" requests.
struct SweRex {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: StdBufReader<std::process::ChildStdout>,
}

impl SweRex {
    /// Starts the driver, or says why it cannot run (not a check failure: an optional side).
    fn start() -> Result<Self, Failure> {
        let python = swerex_python();
        if !python.exists() {
            return Err(Failure::Engine(format!(
                "SWE-ReX not installed: python3 -m venv {venv} && {venv}/bin/pip install swe-rex \
                 (benches/report/run.sh does it)",
                venv = python
                    .parent()
                    .and_then(|p| p.parent())
                    .unwrap_or(&python)
                    .display()
            )));
        }
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/support/swerex_session.py");
        let mut child = std::process::Command::new(&python)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Failure::Engine(format!("cannot start {}: {e}", python.display())))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(check_failed("SWE-ReX driver: no pipes"));
        };
        let mut rex = Self {
            child,
            stdin,
            stdout: StdBufReader::new(stdout),
        };
        let first = rex.line()?;
        ensure(first == "ready", || {
            format!("SWE-ReX driver said {first:?}")
        })?;
        Ok(rex)
    }

    fn line(&mut self) -> Result<String, Failure> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            return Err(Failure::Engine("the SWE-ReX driver ended".into()));
        }
        Ok(line.trim_end().to_owned())
    }

    /// `n` commands; the time the driver measured around them (its reply is not timed).
    fn run(&mut self, n: usize) -> Sample {
        writeln!(self.stdin, "{n}")?;
        self.stdin.flush()?;
        let answer = self.line()?;
        let secs: f64 = answer
            .parse()
            .map_err(|_| check_failed(format!("SWE-ReX: {answer}")))?;
        Ok(Duration::from_secs_f64(secs))
    }
}

impl Drop for SweRex {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The venv's Python: `$CMDR_BENCH_SWEREX_PYTHON`, else `swerex-venv/bin/python` in
/// `$CARGO_TARGET_DIR` (or the workspace's `target/`).
fn swerex_python() -> PathBuf {
    if let Some(python) = std::env::var_os("CMDR_BENCH_SWEREX_PYTHON") {
        return PathBuf::from(python);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from,
    );
    target.join("swerex-venv/bin/python")
}
