//! P3: an output flood. 100 background processes, each printing 1 MB/s (a 100,000-byte
//! block every 100 ms, paced by the clock) for 30 s (3 s quick), through
//! `Registry::with_config` (default output limits: 256 KiB of each log in memory, 16 MiB
//! retained, the rest spilled; the running-process limits raised to 100). Measured: cmdr's
//! CPU (this process's own user + system time, `getrusage(RUSAGE_SELF)`: the actors
//! reading 100 pipes into their logs; the writers are other processes) per MB of output,
//! and its RSS (sampled every 100 ms) against the configured memory caps. Reference, in
//! the same run right after: the same 100 writers, each piped into its own `cat > FILE`;
//! the CPU of the `cat`s alone (`getrusage(RUSAGE_CHILDREN)` across reaping only them)
//! per MB. Checks: every log holds exactly the bytes written (its end offset), retains
//! the last `log_cap` of them when more came (`truncatedBefore` from offset 0), ends with
//! the writer's last line; every reference file has every byte.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use cmdr_executors::{
    BashExecCommand, Command, ProcessLimits, ProcessOutputCommand, ProcessState, Registry,
    RegistryConfig, Scope,
};
use nix::sys::resource::{getrusage, UsageWho};
use tokio::runtime::Runtime;

use crate::harness::{check_failed, drain, ensure, refused, Failure, Measured, Timing, Unit};
use crate::table::{Goal, Row};
use crate::Config;

/// Background processes at once.
const WRITERS: usize = 100;
/// Bytes each writer prints per block; 10 blocks per second.
const BLOCK: usize = 100_000;

/// Runs the group.
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Vec<Row>, Failure> {
    let seconds = cfg.size(30, 3);
    let dir = tempfile::Builder::new().prefix("cmdr-bench-").tempdir()?;
    let limits = ProcessLimits {
        max_running: WRITERS + 8,
        max_running_per_scope: WRITERS + 8,
        ..ProcessLimits::default()
    };
    let mb = (WRITERS * BLOCK * 10 * seconds) as f64 / 1e6;
    eprintln!("    {WRITERS} writers × 1 MB/s × {seconds} s = {mb:.0} MB per side");
    let cmdr = rt.block_on(rt.spawn(cmdr_flood(limits, seconds)))??;
    let cats = reference_flood(dir.path(), seconds)?;
    let caps = WRITERS * (limits.log_memory + limits.log_memory / 2);
    let grown = cmdr.peak_rss.saturating_sub(cmdr.rss_before);
    eprintln!(
        "    cmdr: CPU {:.2} s, RSS {:.1} → peak {:.1} MiB (+{:.1}); logs in memory at most \
         {:.1} MiB, on disk {:.1} MiB; cap {:.1} MiB in memory ({WRITERS} × 1.5 × {} KiB)",
        cmdr.cpu,
        mib(cmdr.rss_before),
        mib(cmdr.peak_rss),
        mib(grown),
        mib(cmdr.peak_log_memory),
        mib(cmdr.disk_bytes),
        mib(caps),
        limits.log_memory / 1024
    );
    eprintln!("    cat > file: CPU {:.2} s", cats);
    let per_mb = |label: &str, cpu: f64| -> Timing {
        Ok(Measured {
            label: label.to_owned(),
            unit: Unit::Run,
            median: cpu / mb,
            min: cpu / mb,
            max: cpu / mb,
            samples: 1,
        })
    };
    let within = if cmdr.peak_log_memory <= caps {
        "within"
    } else {
        "**over**"
    };
    Ok(vec![Row::new(
        format!(
            "P3 {WRITERS} processes × 1 MB/s × {seconds} s: CPU per MB (logs in memory at most \
             {:.1} MiB, {within} their cap {:.1} MiB; cmdr RSS +{:.1} MiB)",
            mib(cmdr.peak_log_memory),
            mib(caps),
            mib(grown),
        ),
        &per_mb("cmdr, CPU per MB", cmdr.cpu),
        &per_mb("100 × `cat > file`, CPU per MB", cats),
        Goal::Info,
    )])
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The writer: `seconds` × 10 blocks of 1,000 lines of 99 `x`, one block every 100 ms by
/// the clock (unbuffered: one `write` per block), then `end`.
fn writer(seconds: usize) -> String {
    format!(
        "exec perl -MTime::HiRes=time,sleep -e '$|=1; my $b = (\"x\" x 99 . \"\\n\") x 1000; \
         my $t = time; for my $i (1..{}) {{ my $w = $t + $i * 0.1 - time; sleep($w) if $w > 0; \
         print $b }} print \"end\\n\"'",
        seconds * 10
    )
}

/// Bytes one writer prints.
fn written(seconds: usize) -> u64 {
    (seconds * 10 * BLOCK + 4) as u64
}

/// What the cmdr side measured.
struct CmdrFlood {
    cpu: f64,
    rss_before: usize,
    peak_rss: usize,
    peak_log_memory: usize,
    disk_bytes: usize,
}

async fn cmdr_flood(limits: ProcessLimits, seconds: usize) -> Result<CmdrFlood, Failure> {
    let registry = Registry::with_config(RegistryConfig {
        processes: limits,
        ..RegistryConfig::default()
    });
    let rss_before = rss()?;
    let cpu_before = own_cpu()?;
    let mut ids = Vec::with_capacity(WRITERS);
    for _ in 0..WRITERS {
        let command = Command::BashExec(BashExecCommand {
            command: writer(seconds),
            background: true,
            yield_ms: Some(0),
            ..BashExecCommand::default()
        });
        let started = drain(registry.execute(command).await.map_err(refused)?).await?;
        ids.push(
            started
                .process_id
                .ok_or_else(|| check_failed("background start without processId"))?,
        );
    }
    let table = registry.processes();
    let scope = Scope::default();
    let processes = ids
        .iter()
        .map(|id| {
            table
                .get(&scope, id)
                .map_err(|e| check_failed(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let deadline = Instant::now() + Duration::from_secs(seconds as u64 + 60);
    let (mut peak_rss, mut peak_log_memory) = (rss_before, 0);
    loop {
        peak_rss = peak_rss.max(rss()?);
        peak_log_memory = peak_log_memory.max(processes.iter().map(|p| p.log.memory_bytes()).sum());
        if processes.iter().all(|p| p.state() != ProcessState::Running) {
            break;
        }
        ensure(Instant::now() < deadline, || {
            "the writers did not finish in time".into()
        })?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cpu = own_cpu()? - cpu_before;
    let disk_bytes = processes.iter().map(|p| p.log.disk_bytes() as usize).sum();
    for (id, process) in ids.iter().zip(&processes) {
        check_log(&registry, id, process.log.end(), process.log.cap(), seconds).await?;
    }
    registry.shutdown(Duration::from_secs(1)).await;
    Ok(CmdrFlood {
        cpu,
        rss_before,
        peak_rss,
        peak_log_memory,
        disk_bytes,
    })
}

/// Every byte counted, the last `cap` retained, the tail intact.
async fn check_log(
    registry: &Registry,
    id: &str,
    end: u64,
    cap: usize,
    seconds: usize,
) -> Result<(), Failure> {
    let expected = written(seconds);
    ensure(end == expected, || {
        format!("{id}: {end} bytes, {expected} written")
    })?;
    let read = |offset: u64| {
        Command::ProcessOutput(ProcessOutputCommand {
            process_id: id.to_owned(),
            offset: Some(offset),
            max_bytes: Some(200),
            ..ProcessOutputCommand::default()
        })
    };
    let first = drain(registry.execute(read(0)).await.map_err(refused)?).await?;
    let kept_from = expected.saturating_sub(cap as u64);
    let told = (kept_from > 0).then_some(kept_from);
    ensure(first.truncated_before == told, || {
        format!(
            "{id}: truncatedBefore {:?}, expected {told:?}",
            first.truncated_before
        )
    })?;
    let tail = drain(
        registry
            .execute(read(expected - 104))
            .await
            .map_err(refused)?,
    )
    .await?;
    let line = format!("{}\n", "x".repeat(99));
    ensure(tail.result_data == format!("{line}end\n"), || {
        format!("{id}: the output ends with {:?}", tail.result_data)
    })
}

/// The reference: the same writers, each into its own `cat > FILE`; the `cat`s' CPU.
fn reference_flood(dir: &Path, seconds: usize) -> Result<f64, Failure> {
    let mut pairs = Vec::with_capacity(WRITERS);
    for i in 0..WRITERS {
        let mut writer = std::process::Command::new("/bin/bash")
            .arg("-c")
            .arg(writer(seconds))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()?;
        let pipe = writer
            .stdout
            .take()
            .ok_or_else(|| check_failed("writer: no stdout"))?;
        let file = std::fs::File::create(dir.join(format!("out{i}")))?;
        let cat = std::process::Command::new("cat")
            .stdin(Stdio::from(pipe))
            .stdout(Stdio::from(file))
            .spawn()?;
        pairs.push((writer, cat));
    }
    for (writer, _) in &mut pairs {
        let status = writer.wait()?;
        ensure(status.success(), || format!("writer: {status}"))?;
    }
    let before = children_cpu()?;
    for (_, cat) in &mut pairs {
        let status = cat.wait()?;
        ensure(status.success(), || format!("cat: {status}"))?;
    }
    let cpu = children_cpu()? - before;
    for i in 0..WRITERS {
        let size = std::fs::metadata(dir.join(format!("out{i}")))?.len();
        ensure(size == written(seconds), || {
            format!("cat {i}: {size} bytes, {} written", written(seconds))
        })?;
    }
    Ok(cpu)
}

/// User + system seconds of this process's own threads.
fn own_cpu() -> Result<f64, Failure> {
    cpu_of(UsageWho::RUSAGE_SELF)
}

/// User + system seconds of the children reaped so far.
fn children_cpu() -> Result<f64, Failure> {
    cpu_of(UsageWho::RUSAGE_CHILDREN)
}

fn cpu_of(who: UsageWho) -> Result<f64, Failure> {
    let usage = getrusage(who).map_err(|e| check_failed(format!("getrusage: {e}")))?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Ok(secs(usage.user_time()) + secs(usage.system_time()))
}

/// This process's resident set, in bytes (`VmRSS`).
fn rss() -> Result<usize, Failure> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| check_failed("no VmRSS in /proc/self/status"))
}
