//! What a caller pays per command on a running cmdr (issue 34's goals), each side by side
//! with its reference in the same run. See `benches/README.md`.
//!
//! ```text
//! cargo bench --bench per_command                     # every group (~1 min once built)
//! cargo bench --bench per_command -- stream           # only groups whose name matches
//! CMDR_BENCH_QUICK=1 cargo bench --bench per_command  # smoke run
//! ```
//!
//! Groups:
//! - `stream` (PC1, PC1m): `BASH_EXEC true` written, one after another, to one long-lived
//!   `cmdr exec -` (JSON Lines on stdin, each written once the previous terminal line is
//!   read), and the `bash_exec` tool called the same way on one long-lived `cmdr mcp`
//!   (stdio), against `/bin/bash -c true` spawned per command, one after another.
//!   Goal: ratio ≥ 0.8 (cmdr's time per command at most 1.25× bash's).
//! - `output` (PC2): `BASH_EXEC cat FILE` (100 MB of build-log-like text, 20 MB quick)
//!   through `cmdr exec`, stdout to `/dev/null`, spawn to exit, against the same command
//!   `| cat` (`bash -c 'cat FILE | cat'`) to `/dev/null`. Goal: ratio ≥ 0.75.
//!
//! The `cmdr` binary is the one Cargo built for this bench (release settings). Checked
//! outside the timed part: every `cmdr exec -` line is a `SUCCEEDED` with exit code 0,
//! every MCP answer a result that is not an error, `bash -c true` prints nothing, and one
//! `cmdr exec` of the output command with its output piped here gives back the file
//! exactly, with one `SUCCEEDED` terminal.

/// The allocator of the `cmdr` binary (src/main.rs), as in the other benches.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "support/table.rs"]
#[allow(dead_code)]
mod table;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::time::Instant;

use cmdr_executors::{ExecutionStatus, OutputResult};

use crate::harness::{check_failed, compare, ensure, Failure, Sample, Side, Timing, Unit};
use crate::table::{Goal, Row};

/// The `cmdr` binary of this build.
const CMDR: &str = env!("CARGO_BIN_EXE_cmdr");

/// The command of group `stream`.
const TRUE: &str = r#"{"commandType":"BASH_EXEC","command":"true"}"#;

/// Settings shared by every group.
struct Config {
    /// Smoke mode: small sizes, few samples.
    quick: bool,
    /// Measured samples per side (after `warmup`).
    samples: usize,
    /// Unmeasured samples per side first.
    warmup: usize,
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
    fn size<T>(&self, full: T, quick: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }
}

/// A group: its name (what filters match) and how to run it.
type Group = (&'static str, fn(&Config) -> Result<Vec<Row>, Failure>);

const GROUPS: [Group; 2] = [("stream", stream), ("output", output)];

fn main() -> ExitCode {
    let config = Config::from_env();
    // Cargo passes `--bench`; everything else not starting with `-` is a group filter.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mode = if config.quick { "quick" } else { "full" };
    eprintln!(
        "cmdr per-command benchmarks: {mode} mode, {} warm-up + {} measured samples per side",
        config.warmup, config.samples
    );
    let mut rows = Vec::new();
    for (name, run) in GROUPS {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        eprintln!("== {name}");
        let started = Instant::now();
        match run(&config) {
            Ok(group) => rows.extend(group),
            Err(e) => rows.push(Row::broken(name, e)),
        }
        eprintln!("   ({name}: {:.1} s)", started.elapsed().as_secs_f64());
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("\n### cmdr per command — {mode} mode, {cores} cores, medians\n");
    println!("{}", table::render(&rows));
    if rows.iter().any(Row::check_failed) {
        eprintln!("a result check failed: these figures are not to be trusted");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

// --- group `stream` ------------------------------------------------------------------

/// PC1 and PC1m: `true` through one running `cmdr exec -` and one running `cmdr mcp`,
/// against `bash -c true` spawned per command.
fn stream(cfg: &Config) -> Result<Vec<Row>, Failure> {
    let runs = cfg.size(200, 20);
    let unit = Unit::Commands(runs as f64);
    let home = tempfile::Builder::new()
        .prefix("cmdr-bench-per-command-")
        .tempdir_in("/tmp")?;
    let mut exec = Running::start(Command::new(CMDR).args(["exec", "-"]))?;
    let mut mcp = Running::start(
        Command::new(CMDR)
            .arg("mcp")
            .env("CMDR_AGENTS_DIR", home.path())
            .env("CMDR_DB", home.path().join("cmdr.sqlite3"))
            .env("CMDR_DATA_DIR", home.path())
            .env_remove("CMDR_LLM_BASE_URL"),
    )?;
    mcp.initialize()?;
    let timings = compare(
        cfg.warmup,
        cfg.samples,
        vec![
            Side::new("one `cmdr exec -`, commands on stdin", unit, || {
                exec.commands(runs)
            }),
            Side::new("one `cmdr mcp` (stdio), `bash_exec` calls", unit, || {
                mcp.tool_calls(runs)
            }),
            Side::new("bash -c true", unit, || bash_true(runs)),
        ],
    );
    exec.finish()?;
    mcp.finish()?;
    let [exec, mcp, bash] = three(timings)?;
    Ok(vec![
        Row::new(
            "PC1 `BASH_EXEC true` per command, one running `cmdr exec -`",
            &exec,
            &bash,
            Goal::AtLeast(0.8),
        ),
        Row::new(
            "PC1m `bash_exec` `true` per call, one running `cmdr mcp` (stdio)",
            &mcp,
            &bash,
            Goal::AtLeast(0.8),
        ),
    ])
}

fn three(timings: Vec<Timing>) -> Result<[Timing; 3], Failure> {
    <[_; 3]>::try_from(timings).map_err(|_| check_failed("three timings expected"))
}

/// A long-lived cmdr process fed lines on stdin, answering lines on stdout.
struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    line: String,
    next_id: u64,
}

impl Running {
    fn start(command: &mut Command) -> Result<Self, Failure> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(check_failed(format!("{command:?}: no pipes")));
        };
        Ok(Self {
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout),
            line: String::new(),
            next_id: 1,
        })
    }

    fn send(&mut self, message: &str) -> Result<(), Failure> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| check_failed("stdin closed"))?;
        writeln!(stdin, "{message}")?;
        stdin.flush()?;
        Ok(())
    }

    fn read_line(&mut self) -> Result<&str, Failure> {
        self.line.clear();
        let n = self.stdout.read_line(&mut self.line)?;
        ensure(n > 0, || "cmdr closed its stdout".into())?;
        Ok(&self.line)
    }

    /// `runs` of [`TRUE`], each written once the previous terminal line is read.
    fn commands(&mut self, runs: usize) -> Sample {
        let started = Instant::now();
        for _ in 0..runs {
            self.send(TRUE)?;
            let line = self.read_line()?;
            ensure(
                line.contains(r#""status":"SUCCEEDED""#) && line.contains(r#""exitCode":0"#),
                || format!("cmdr exec -: {line:?}"),
            )?;
        }
        Ok(started.elapsed())
    }

    /// The MCP handshake (not timed).
    fn initialize(&mut self) -> Result<(), Failure> {
        let id = self.take_id();
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"bench","version":"0"}}}}}}"#
        ))?;
        self.answer(id)?;
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
    }

    /// `runs` `bash_exec` calls of `true`, each sent once the previous answer is read.
    fn tool_calls(&mut self, runs: usize) -> Sample {
        let started = Instant::now();
        for _ in 0..runs {
            let id = self.take_id();
            self.send(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"bash_exec","arguments":{{"command":"true"}}}}}}"#
            ))?;
            let answer = self.answer(id)?;
            ensure(
                answer.contains(r#""result""#)
                    && !answer.contains(r#""isError":true"#)
                    && answer.contains(r#"SUCCEEDED"#),
                || format!("cmdr mcp: {answer:?}"),
            )?;
        }
        Ok(started.elapsed())
    }

    fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// The line answering JSON-RPC request `id` (notifications before it are skipped).
    fn answer(&mut self, id: u64) -> Result<String, Failure> {
        let wanted = format!(r#""id":{id}"#);
        loop {
            let line = self.read_line()?;
            if line.contains(&wanted) {
                return Ok(line.to_owned());
            }
        }
    }

    /// Closes stdin and waits for a clean exit.
    fn finish(mut self) -> Result<(), Failure> {
        drop(self.stdin.take());
        let status = self.child.wait()?;
        ensure(status.success(), || format!("cmdr exited {status}"))
    }
}

/// `runs` of `/bin/bash -c true`, one after another, stdin null, stdout and stderr piped
/// and read to their end (as a caller that wants the output does); checks they print
/// nothing.
fn bash_true(runs: usize) -> Sample {
    let mut total = std::time::Duration::ZERO;
    for _ in 0..runs {
        let started = Instant::now();
        let output = Command::new("/bin/bash")
            .args(["-c", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()?;
        total += started.elapsed();
        ensure(
            output.status.success() && output.stdout.is_empty() && output.stderr.is_empty(),
            || format!("bash -c true: {output:?}"),
        )?;
    }
    Ok(total)
}

// --- group `output` ------------------------------------------------------------------

/// PC2: 100 MB printed by `BASH_EXEC cat FILE` through `cmdr exec` against `cat FILE |
/// cat`, both to `/dev/null`, whole processes.
fn output(cfg: &Config) -> Result<Vec<Row>, Failure> {
    let mb = cfg.size(100, 20);
    let dir = tempfile::Builder::new()
        .prefix("cmdr-bench-per-command-output-")
        .tempdir_in("/tmp")?;
    let path = dir.path().join("out.txt");
    let text = log_text(mb * 1_000_000);
    std::fs::File::create(&path)?.write_all(text.as_bytes())?;
    let file = path.display().to_string();
    let command =
        serde_json::json!({"commandType": "BASH_EXEC", "command": format!("cat '{file}'")})
            .to_string();
    check_output(&command, &text)?;
    let pipe = format!("cat '{file}' | cat");
    let unit = Unit::Bytes(text.len() as f64);
    let timings = compare(
        cfg.warmup,
        cfg.samples,
        vec![
            Side::new("cmdr exec BASH_EXEC `cat FILE`", unit, || {
                to_dev_null(Command::new(CMDR).args(["exec", &command]))
            }),
            Side::new("bash -c 'cat FILE | cat'", unit, || {
                to_dev_null(Command::new("/bin/bash").args(["-c", &pipe]))
            }),
        ],
    );
    let [cmdr, piped] =
        <[_; 2]>::try_from(timings).map_err(|_| check_failed("two timings expected"))?;
    Ok(vec![Row::new(
        format!("PC2 `BASH_EXEC` output, {mb} MB → `cmdr exec` → /dev/null"),
        &cmdr,
        &piped,
        Goal::AtLeast(0.75),
    )])
}

/// Text like a build log: lines of mixed length with quotes, backslashes, tabs and some
/// multi-byte UTF-8 (bytes JSON must escape or check), `len` bytes, cut at a character
/// boundary (as `benches/support/exec_output.rs`'s, row X1).
fn log_text(len: usize) -> String {
    let mut text = String::with_capacity(len + 200);
    let mut i = 0u64;
    while text.len() < len {
        let pad = "x".repeat((i % 60) as usize);
        text.push_str(&format!(
            "{i:08} compiling \"crate-{}\" at C:\\src\\lib.rs\tok {pad} é€\n",
            i % 97
        ));
        i += 1;
    }
    let mut cut = len;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text
}

/// One run of `command`, stdin null, stdout to `/dev/null`, spawn to exit.
fn to_dev_null(command: &mut Command) -> Sample {
    let started = Instant::now();
    let status = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()?;
    let elapsed = started.elapsed();
    ensure(status.success(), || format!("{command:?}: {status}"))?;
    Ok(elapsed)
}

/// One run of `cmdr exec COMMAND` with its output piped here: every line an
/// `OutputResult`, the `RUNNING` data equal to `text`, one `SUCCEEDED` terminal.
fn check_output(command: &str, text: &str) -> Result<(), Failure> {
    let out = Command::new(CMDR)
        .args(["exec", command])
        .stdin(Stdio::null())
        .output()?;
    ensure(out.status.success(), || {
        format!("cmdr exec {command}: {}", out.status)
    })?;
    let mut data = String::with_capacity(text.len());
    let mut terminals = 0;
    for line in out.stdout.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let result: OutputResult = serde_json::from_slice(line)?;
        match result.status {
            ExecutionStatus::Running => data.push_str(&result.result_data),
            ExecutionStatus::Succeeded => terminals += 1,
            ExecutionStatus::Failed => return Err(check_failed(result.error)),
        }
    }
    ensure(terminals == 1, || format!("{terminals} terminals"))?;
    ensure(data == text, || {
        format!("output differs ({} of {} bytes)", data.len(), text.len())
    })
}
