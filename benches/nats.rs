//! NATS transport benchmarks: remote commands (`Producer::submit` → in-process worker →
//! results back) side by side with the same commands on a local registry and with a bare
//! NATS request/reply, in the same run. See `benches/README.md`.
//!
//! ```text
//! cargo bench --bench nats                       # latency and throughput (~1-2 min)
//! cargo bench --bench nats -- latency            # only groups whose name matches
//! CMDR_BENCH_QUICK=1 cargo bench --bench nats    # smoke run, < 30 s
//! cargo bench --bench nats -- profile            # only `remote, 1 worker`, for `perf`
//! ```
//!
//! Needs `nats-server` (2.9+) on `PATH`; starts private servers on free ports. Prints
//! Markdown tables on stdout (progress on stderr). Exits with status 1 when a check
//! failed (a stream not ending with exactly one `SUCCEEDED`, a wrong reply, a command
//! run twice or lost).

/// The allocator of the `cmdr` binary (src/main.rs), so in-process figures are its
/// (its smaller first arena, which only shapes a process's first allocations, is not copied).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[allow(dead_code)]
#[path = "support/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "support/latency.rs"]
mod latency;
#[path = "support/nats_bus.rs"]
mod nats_bus;
#[path = "support/nats_jobs.rs"]
mod nats_jobs;
#[path = "support/nats_latency.rs"]
mod nats_latency;
#[allow(dead_code)]
#[path = "support/table.rs"]
mod table;

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use cmdr_executors::Registry;
use tokio::runtime::Runtime;

use crate::harness::{compare, Failure, Side, Timing, Unit};
use crate::latency::{interleave, Job};
use crate::nats_bus::{noop_registry, Bus};
use crate::nats_jobs::{bare, exited_cleanly, in_flight, local, no_check, remote, Check};
use crate::nats_latency::LatencyRow;
use crate::table::{Goal, Row};

/// Commands in flight at once in the throughput group.
const IN_FLIGHT: usize = 256;

/// Sizes of a full or a quick run.
struct Config {
    quick: bool,
    /// Latency: unmeasured rounds, then measured rounds (one command per side each).
    latency_rounds: (usize, usize),
    /// Throughput: unmeasured samples, measured samples, commands per sample.
    throughput: (usize, usize, usize),
}

impl Config {
    fn from_env() -> Self {
        let quick = std::env::var_os("CMDR_BENCH_QUICK").is_some_and(|v| v != "0" && !v.is_empty());
        if quick {
            Self {
                quick,
                latency_rounds: (30, 300),
                throughput: (1, 3, 2_000),
            }
        } else {
            Self {
                quick,
                latency_rounds: (200, 2_000),
                throughput: (1, 7, 20_000),
            }
        }
    }
}

/// The servers: one per worker set (every worker subscribes to `cmdr.commands.>`, so
/// different pools cannot share a server). The latency buses also get a bare responder,
/// so each remote side is compared with request/reply on its own server.
struct Buses {
    bash: Bus,
    solo: Bus,
    pair: Bus,
}

impl Buses {
    async fn start() -> Result<Self, Failure> {
        let buses = Self {
            bash: Bus::with_default_worker().await?,
            solo: Bus::with_noop_workers(1).await?,
            pair: Bus::with_noop_workers(2).await?,
        };
        for bus in [&buses.bash, &buses.solo] {
            nats_bus::start_responder(&bus.server, nats_jobs::reply_payload()?).await?;
        }
        Ok(buses)
    }

    /// Checks that every no-op command ran exactly once; stops every worker.
    async fn finish(self) -> Result<(), Failure> {
        for (name, bus) in [("1 worker", &self.solo), ("2 workers", &self.pair)] {
            eprintln!("   runs per worker, {name}: {:?}", bus.exactly_once()?);
        }
        for bus in [self.bash, self.solo, self.pair] {
            bus.stop().await?;
        }
        Ok(())
    }
}

/// Runs `sample` as a task on the runtime's workers, as a transport task would.
fn on_worker<T: Send + 'static>(
    rt: &Runtime,
    sample: impl Future<Output = Result<T, Failure>> + Send + 'static,
) -> Result<T, Failure> {
    rt.block_on(rt.spawn(sample))?
}

/// Group 1: sequential latency, the no-op and the bash variants.
fn latency(rt: &Runtime, cfg: &Config, buses: &Buses) -> Result<Vec<LatencyRow>, Failure> {
    let (warmup, rounds) = cfg.latency_rounds;
    let mut rows = Vec::new();
    let variants = [
        ("1a no-op executor", &buses.solo, true, no_check as Check),
        ("1b BASH_EXEC `true`", &buses.bash, false, exited_cleanly),
    ];
    for (name, bus, noop, check) in variants {
        eprintln!("   {name}");
        // Built inside the runtime: registries spawn their actors.
        let registry = rt.block_on(async {
            if noop {
                noop_registry(Arc::default())
            } else {
                Registry::with_defaults()
            }
        });
        let requester = rt.block_on(bus.server.connect())?;
        let jobs = vec![
            ("remote", remote(bus, check)),
            ("local", local(registry, check)),
            ("bare request/reply", bare(requester)?),
        ];
        let latencies = on_worker(
            rt,
            async move { Ok(interleave(warmup, rounds, jobs).await) },
        )?;
        let [remote, local, bare] = <[_; 3]>::try_from(latencies)
            .map_err(|_| harness::check_failed("three latencies expected"))?;
        let name = name.to_owned();
        rows.push(LatencyRow {
            name,
            remote,
            local,
            bare,
        });
    }
    Ok(rows)
}

/// Group 2: throughput of no-op commands, 256 in flight, with 1 and 2 workers.
fn throughput(rt: &Runtime, cfg: &Config, buses: &Buses) -> Result<Vec<Row>, Failure> {
    let (warmup, samples, total) = cfg.throughput;
    let registry = rt.block_on(async { noop_registry(Arc::default()) });
    let bare_job = bare(rt.block_on(buses.solo.server.connect())?)?;
    let side = |label: &str, job: Job| {
        Side::new(label, Unit::Commands(total as f64), move || {
            on_worker(rt, in_flight(job.clone(), total, IN_FLIGHT))
        })
    };
    let timings = compare(
        warmup,
        samples,
        vec![
            side("remote, 1 worker", remote(&buses.solo, no_check)),
            side("remote, 2 workers", remote(&buses.pair, no_check)),
            side("local registry", local(registry, no_check)),
            side("bare request/reply", bare_job),
        ],
    );
    let [one, two, local, bare] =
        <[_; 4]>::try_from(timings).map_err(|_| harness::check_failed("four timings expected"))?;
    let row =
        |name: &str, cmdr: &Timing, reference: &Timing| Row::new(name, cmdr, reference, Goal::Info);
    Ok(vec![
        row("2a no-op, 1 worker vs local registry", &one, &local),
        row("2b no-op, 1 worker vs bare request/reply", &one, &bare),
        row("2c no-op, 2 workers vs local registry", &two, &local),
        row("2d no-op, 2 workers vs bare request/reply", &two, &bare),
        row("2e no-op, 2 workers vs 1 worker", &two, &one),
    ])
}

/// `profile` (run only when named): the throughput group's `remote, 1 worker` side alone,
/// for `perf record` (the other sides would blur its profile). Prints the rate.
fn profile(rt: &Runtime, cfg: &Config, buses: &Buses) -> Result<String, Failure> {
    let (_, samples, total) = cfg.throughput;
    let job = remote(&buses.solo, no_check);
    let mut out = String::new();
    for _ in 0..samples {
        let elapsed = on_worker(rt, in_flight(job.clone(), total, IN_FLIGHT))?;
        let rate = total as f64 / elapsed.as_secs_f64();
        out.push_str(&format!(
            "remote, 1 worker, {IN_FLIGHT} in flight: {rate:.0} cmd/s\n"
        ));
    }
    Ok(out)
}

/// Both groups (as filtered); the tables, and whether every check passed.
fn run(
    rt: &Runtime,
    cfg: &Config,
    wanted: impl Fn(&str) -> bool,
    filters_name: impl Fn(&str) -> bool,
) -> (String, bool) {
    let buses = match rt.block_on(Buses::start()) {
        Ok(buses) => buses,
        Err(e) => return (format!("setup failed: {e}\n"), false),
    };
    let mut out = String::new();
    let mut ok = true;
    if wanted("latency") {
        eprintln!("== latency");
        match latency(rt, cfg, &buses) {
            Ok(rows) => {
                ok &= !rows.iter().any(LatencyRow::failed);
                out.push_str(&nats_latency::render(&rows));
            }
            Err(e) => {
                ok = false;
                out.push_str(&format!("latency: {e}\n"));
            }
        }
        let (w, n) = cfg.latency_rounds;
        out.push_str(&format!(
            "\n{n} commands per side ({w} warm-up), one at a time, interleaved; overhead \
             per percentile = difference of the percentiles.\n\n"
        ));
    }
    if wanted("throughput") {
        eprintln!("== throughput");
        let rows = throughput(rt, cfg, &buses).unwrap_or_else(|e| vec![Row::broken("2", e)]);
        ok &= !rows.iter().any(Row::check_failed);
        out.push_str(&table::render(&rows));
    }
    if filters_name("profile") {
        eprintln!("== profile");
        match profile(rt, cfg, &buses) {
            Ok(rates) => out.push_str(&rates),
            Err(e) => {
                ok = false;
                out.push_str(&format!("profile: {e}\n"));
            }
        }
    }
    if let Err(e) = rt.block_on(buses.finish()) {
        ok = false;
        out.push_str(&format!("\n{e}\n"));
    }
    (out, ok)
}

fn main() -> ExitCode {
    let cfg = Config::from_env();
    // Cargo passes `--bench`; everything else not starting with `-` is a group filter.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted =
        |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()));
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot build the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mode = if cfg.quick { "quick" } else { "full" };
    eprintln!("cmdr NATS benchmarks: {mode} mode");
    let started = Instant::now();
    let named = |name: &str| filters.iter().any(|f| name.contains(f.as_str()));
    let (tables, ok) = run(&rt, &cfg, wanted, named);
    drop(rt);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("\n### cmdr over NATS — {mode} mode, {cores} cores\n\n{tables}");
    eprintln!("({:.1} s)", started.elapsed().as_secs_f64());
    if !ok {
        eprintln!("a check failed: these figures are not to be trusted");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
