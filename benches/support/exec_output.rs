//! Group X (issue 19, "output at the speed of the pipe"): `cmdr exec` printing 100 MB of
//! command output as JSON Lines to `/dev/null`.
//!
//! X1: `BASH_EXEC cat FILE` through the release `cmdr exec`, against the same command
//! with one extra `| cat` (`bash -c 'cat FILE | cat'`): the floor of any program that
//! relays a pipe. X2: `FILE_READ` of the same file through `cmdr exec`, against
//! `serde_json` escaping the same text in 64 KiB chunks into a buffer (what printing it
//! as JSON costs at least) and `cat FILE > /dev/null`. Each side is a whole process run,
//! spawn to exit; the file is written once and read warm. X2e (information): cmdr's own
//! escaper (`cmdr::json_escape`) on the same 64 KiB chunks, against `serde_json`.
//! Checked outside the timed part: one run of each cmdr command with its output piped
//! here, every line valid JSON, the `resultData` of its `RUNNING` lines equal to the file,
//! one `SUCCEEDED` terminal.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

use cmdr_executors::{ExecutionStatus, OutputResult};

use crate::harness::{check_failed, compare, ensure, Failure, Sample, Side, Unit};
use crate::table::{Goal, Row};
use crate::Config;

/// The release `cmdr` this bench was built with.
const CMDR: &str = env!("CARGO_BIN_EXE_cmdr");

/// Runs group X.
pub fn run(_rt: &tokio::runtime::Runtime, cfg: &Config) -> Result<Vec<Row>, Failure> {
    let mb = cfg.size(100, 20);
    let dir = tempfile::Builder::new()
        .prefix("cmdr-bench-exec-output-")
        .tempdir_in("/tmp")?;
    let path = dir.path().join("out.txt");
    let text = text(mb * 1_000_000);
    std::fs::File::create(&path)?.write_all(text.as_bytes())?;
    let file = path.display().to_string();
    let bash = serde_json::json!({"commandType": "BASH_EXEC", "command": format!("cat '{file}'")});
    let read = serde_json::json!({"commandType": "FILE_READ", "file_path": file});
    let (bash, read) = (bash.to_string(), read.to_string());
    check(&bash, &text)?;
    check(&read, &text)?;
    let unit = Unit::Bytes(text.len() as f64);
    let pipe = format!("cat '{file}' | cat");
    let timings = compare(
        cfg.warmup,
        cfg.samples,
        vec![
            Side::new("cmdr exec BASH_EXEC cat", unit, || {
                timed(Command::new(CMDR).args(["exec", &bash]))
            }),
            Side::new("bash -c 'cat FILE | cat'", unit, || {
                timed(Command::new("bash").args(["-c", &pipe]))
            }),
            Side::new("cmdr exec FILE_READ", unit, || {
                timed(Command::new(CMDR).args(["exec", &read]))
            }),
            Side::new("serde_json escaping, 64 KiB chunks", unit, || {
                escaped(&text, |chunk, out| Ok(serde_json::to_writer(out, chunk)?))
            }),
            Side::new("cmdr's escaper, 64 KiB chunks", unit, || {
                escaped(&text, |chunk, out| {
                    cmdr::json_escape::escape_into(chunk, out);
                    Ok(())
                })
            }),
            Side::new("cat FILE > /dev/null", unit, || {
                timed(Command::new("cat").arg(&path))
            }),
        ],
    );
    let [cmdr_bash, piped, cmdr_read, serde, ours, cat] =
        <[_; 6]>::try_from(timings).map_err(|_| check_failed("six timings expected"))?;
    let name = |what: &str| format!("X{what} {mb} MB → cmdr exec → /dev/null");
    Ok(vec![
        Row::new(name("1 BASH_EXEC"), &cmdr_bash, &piped, Goal::AtLeast(0.9)),
        Row::new(
            name("2 FILE_READ"),
            &cmdr_read,
            &serde,
            Goal::AtLeastGBps(1.0),
        ),
        Row::new(name("2 FILE_READ (vs cat)"), &cmdr_read, &cat, Goal::Info),
        Row::new(
            format!("X2e cmdr's JSON escaper, {mb} MB in 64 KiB chunks"),
            &ours,
            &serde,
            Goal::Info,
        ),
    ])
}

/// Text like a build log: lines of mixed length with quotes, backslashes, tabs and some
/// multi-byte UTF-8, `len` bytes (cut at a character boundary, then padded with `.`).
fn text(len: usize) -> String {
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
    while !text.is_char_boundary(len) {
        text.pop();
    }
    text.truncate(len);
    text
}

/// One run of `command` with stdout to `/dev/null`, spawn to exit.
fn timed(command: &mut Command) -> Sample {
    let started = Instant::now();
    let status = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()?;
    let elapsed = started.elapsed();
    ensure(status.success(), || format!("{command:?}: {status}"))?;
    Ok(elapsed)
}

/// `escape` writing `text` as 64 KiB JSON strings into one reused buffer.
fn escaped(text: &str, escape: impl Fn(&str, &mut Vec<u8>) -> Result<(), Failure>) -> Sample {
    let mut out = Vec::with_capacity(200 * 1024);
    let (mut rest, mut written) = (text, 0);
    let started = Instant::now();
    while !rest.is_empty() {
        let mut cut = rest.len().min(64 * 1024);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (chunk, tail) = rest.split_at(cut);
        out.clear();
        escape(chunk, &mut out)?;
        written += out.len();
        rest = tail;
    }
    let elapsed = started.elapsed();
    ensure(written > text.len(), || "nothing escaped".into())?;
    Ok(elapsed)
}

/// One run of `cmdr exec COMMAND`, output checked against `text`.
fn check(command: &str, text: &str) -> Result<(), Failure> {
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
        format!(
            "{command}: output differs ({} of {} bytes)",
            data.len(),
            text.len()
        )
    })
}
