//! Benchmark 2: `BASH_EXEC true` through `Registry::with_defaults()`, against spawning
//! `/bin/bash -c true` directly with `tokio::process` (stdin null, stdout and stderr
//! piped and read to EOF, as cmdr does).

use std::future::Future;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

use cmdr_executors::{BashExecCommand, Command, Registry};
use tokio::io::AsyncReadExt;
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

use crate::harness::{check_failed, compare, drain, ensure, refused, Failure, Sample, Side, Unit};
use crate::overhead::join_all;
use crate::table::{Goal, Row};
use crate::Config;

/// Commands running at once in the concurrent case.
const AT_ONCE: usize = 8;

/// Runs group 2.
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Vec<Row>, Failure> {
    let registry = rt.block_on(async { Registry::with_defaults() });
    let seq = cfg.size(200, 20);
    let per_worker = cfg.size(60, 5);
    let total = per_worker * AT_ONCE;
    let cmdr = |r: Registry| move || cmdr_true(r.clone());
    let timings = compare(
        cfg.warmup,
        cfg.samples,
        vec![
            Side::new("BASH_EXEC true, sequential", commands(seq), || {
                rt.block_on(repeat(1, seq, cmdr(registry.clone())))
            }),
            Side::new("tokio bash -c true, sequential", commands(seq), || {
                rt.block_on(repeat(1, seq, raw_true))
            }),
            Side::new("BASH_EXEC true, 8 at once", commands(total), || {
                rt.block_on(repeat(AT_ONCE, per_worker, cmdr(registry.clone())))
            }),
            Side::new("tokio bash -c true, 8 at once", commands(total), || {
                rt.block_on(repeat(AT_ONCE, per_worker, raw_true))
            }),
        ],
    );
    let [cmdr_seq, raw_seq, cmdr_par, raw_par] =
        <[_; 4]>::try_from(timings).map_err(|_| check_failed("four timings expected"))?;
    Ok(vec![
        Row::new(
            "2a BASH_EXEC `true`, sequential",
            &cmdr_seq,
            &raw_seq,
            Goal::AtLeast(0.9),
        ),
        Row::new(
            "2b BASH_EXEC `true`, 8 at once",
            &cmdr_par,
            &raw_par,
            Goal::AtLeast(0.9),
        ),
    ])
}

fn commands(n: usize) -> Unit {
    Unit::Commands(n as f64)
}

/// `workers` tasks, each running `job` `each` times in a row.
pub async fn repeat<F, Fut>(workers: usize, each: usize, job: F) -> Sample
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Failure>> + Send + 'static,
{
    let job = Arc::new(job);
    let started = Instant::now();
    let mut set = JoinSet::new();
    for _ in 0..workers {
        let job = job.clone();
        set.spawn(async move {
            for _ in 0..each {
                job().await?;
            }
            Ok(())
        });
    }
    join_all(set).await?;
    Ok(started.elapsed())
}

/// `BASH_EXEC true` through `registry`, drained; checks exit code 0 and no output.
pub async fn cmdr_true(registry: Registry) -> Result<(), Failure> {
    let command = Command::BashExec(BashExecCommand {
        command: "true".to_owned(),
        ..BashExecCommand::default()
    });
    let stream = registry.execute(command).await.map_err(refused)?;
    let result = drain(stream).await?;
    ensure(result.exit_code == Some(0), || {
        format!("BASH_EXEC true: exit code {:?}", result.exit_code)
    })?;
    ensure(result.result_data.is_empty(), || {
        format!("BASH_EXEC true printed {:?}", result.result_data)
    })
}

/// `/bin/bash -c true` spawned with `tokio::process`, both pipes read to EOF; checks
/// success and no output.
pub async fn raw_true() -> Result<(), Failure> {
    let mut child = tokio::process::Command::new("/bin/bash")
        .args(["-c", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(check_failed("bash: no stdout/stderr pipe"));
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let (read_out, read_err) =
        tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
    read_out?;
    read_err?;
    let status = child.wait().await?;
    ensure(status.success() && out.is_empty() && err.is_empty(), || {
        format!(
            "bash -c true: {status}, {} + {} bytes",
            out.len(),
            err.len()
        )
    })
}
