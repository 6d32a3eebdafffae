//! Agent-loop benchmarks: the incremental `<shell>` tag detector (`ShellTagDetector`), fed
//! the model's text in 64-byte chunks and whole, side by side in the same run with
//! whole-text references (the grammar's regex, and a plain substring search for the tag
//! pairs). See `benches/README.md`.
//!
//! ```text
//! cargo bench --bench agent                       # 64 MiB per text (~10 s once built)
//! cargo bench --bench agent -- dense              # only texts whose name matches
//! CMDR_BENCH_QUICK=1 cargo bench --bench agent    # smoke run, 8 MiB per text
//! ```
//!
//! Prints a Markdown table on stdout (progress on stderr). Exits with status 1 when a
//! check failed (a side's commands differ from the regex's).

/// The allocator of the `cmdr` binary (src/main.rs), so in-process figures are its
/// (its smaller first arena, which only shapes a process's first allocations, is not copied).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[allow(dead_code)]
#[path = "support/harness.rs"]
mod harness;
#[path = "support/tags.rs"]
mod tags;

use std::process::ExitCode;
use std::time::Instant;

use crate::harness::{compare, Failure, Measured, Side, Timing, Unit};

/// Bytes per chunk when feeding like a model stream (deltas are small).
const CHUNK: usize = 64;

/// Sizes of a full or a quick run.
struct Config {
    quick: bool,
    /// Bytes per text.
    len: usize,
    /// Unmeasured samples per side first.
    warmup: usize,
    /// Measured samples per side.
    samples: usize,
}

impl Config {
    fn from_env() -> Self {
        let quick = std::env::var_os("CMDR_BENCH_QUICK").is_some_and(|v| v != "0" && !v.is_empty());
        Self {
            quick,
            len: if quick { 8 << 20 } else { 64 << 20 },
            warmup: 1,
            samples: if quick { 3 } else { 7 },
        }
    }
}

/// A text to scan: its name (what filters match), how it is made, the detector's goal.
struct Input {
    name: &'static str,
    label: &'static str,
    make: fn(usize) -> String,
    /// Minimum MB/s for the detector, in both feeding modes.
    goal_mb_s: f64,
}

const INPUTS: [Input; 2] = [
    Input {
        name: "plain",
        label: "plain prose, no tags",
        make: tags::plain_text,
        goal_mb_s: 1000.0,
    },
    Input {
        name: "dense",
        label: "tag-dense (a command per ~100 B)",
        make: tags::dense_text,
        goal_mb_s: 300.0,
    },
];

/// One line of the table: the detector in one feeding mode, and the references.
struct Row {
    name: String,
    cmdr: Timing,
    regex: Timing,
    find: Timing,
    goal_mb_s: f64,
}

/// Measures one text: four sides, interleaved; two rows (chunked and whole).
fn run(input: &Input, cfg: &Config) -> Result<Vec<Row>, Failure> {
    let started = Instant::now();
    let text = (input.make)(cfg.len);
    let chunks = tags::chunks(&text, CHUNK);
    let re = tags::regex()?;
    let expected = tags::by_regex(&re, &text);
    let lt = text.bytes().filter(|&b| b == b'<').count();
    eprintln!(
        "    {} bytes, {} chunks, {lt} '<', {} commands (made in {:.1} s)",
        text.len(),
        chunks.len(),
        expected.len(),
        started.elapsed().as_secs_f64()
    );
    let unit = Unit::Bytes(text.len() as f64);
    let whole = [text.as_str()];
    let timings = compare(
        cfg.warmup,
        cfg.samples,
        vec![
            Side::new(format!("detector, {CHUNK} B chunks"), unit, || {
                tags::detector_sample(&chunks, &expected)
            }),
            Side::new("detector, whole text", unit, || {
                tags::detector_sample(&whole, &expected)
            }),
            Side::new("regex captures_iter", unit, || {
                tags::reference_sample("regex", &expected, || tags::by_regex(&re, &text))
            }),
            Side::new("str::find tag pairs", unit, || {
                tags::reference_sample("str::find", &expected, || tags::by_find(&text))
            }),
        ],
    );
    let [chunked, whole, regex, find] = <[Timing; 4]>::try_from(timings)
        .map_err(|_| harness::check_failed("compare returned the wrong number of sides"))?;
    let row = |mode: &str, cmdr: Timing| Row {
        name: format!("{}, {mode}", input.label),
        cmdr,
        regex: regex.clone(),
        find: find.clone(),
        goal_mb_s: input.goal_mb_s,
    };
    Ok(vec![
        row(&format!("{CHUNK} B chunks"), chunked),
        row("whole text", whole),
    ])
}

/// Median throughput in MB/s (10^6 bytes per second).
fn mb_s(m: &Measured) -> f64 {
    1e-6 / m.median
}

fn cell(timing: &Timing) -> String {
    match timing {
        Ok(m) => format!("{:.0} MB/s", mb_s(m)),
        Err(e) => e.to_string().replace('|', "\\|").replace('\n', " "),
    }
}

/// The Markdown table, then the spread of every side.
fn render(rows: &[Row]) -> String {
    let mut out = String::from(
        "| benchmark | cmdr detector | regex `captures_iter` | `str::find` tag pairs \
         | cmdr / regex | goal | met? |\n|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        let met = match &row.cmdr {
            Ok(cmdr) if mb_s(cmdr) >= row.goal_mb_s => "yes",
            Ok(_) => "**no**",
            Err(_) => "n/a",
        };
        let ratio = match (&row.cmdr, &row.regex) {
            (Ok(cmdr), Ok(regex)) => format!("{:.2}", regex.median / cmdr.median),
            _ => "—".to_owned(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {ratio} | ≥ {:.0} MB/s | {met} |\n",
            row.name,
            cell(&row.cmdr),
            cell(&row.regex),
            cell(&row.find),
            row.goal_mb_s
        ));
    }
    out.push_str("\ncmdr / regex = regex time / detector time (>1: the detector is faster). ");
    out.push_str("Spread per side (MB/s; slowest and fastest sample against the median):\n");
    let mut seen: Vec<String> = Vec::new();
    for (name, m) in rows.iter().flat_map(|r| {
        [&r.cmdr, &r.regex, &r.find]
            .into_iter()
            .filter_map(|t| t.as_ref().ok())
            .map(|m| (r.name.split(',').next().unwrap_or_default(), m))
    }) {
        let key = format!("{name}: {}", m.label);
        if seen.contains(&key) {
            continue;
        }
        let pct = |secs: f64| (m.median / secs - 1.0) * 100.0;
        out.push_str(&format!(
            "- {key}: {:.0} MB/s (n={}, slowest {:+.0}%, fastest {:+.0}%)\n",
            mb_s(m),
            m.samples,
            pct(m.max),
            pct(m.min)
        ));
        seen.push(key);
    }
    out
}

fn main() -> ExitCode {
    let cfg = Config::from_env();
    // Cargo passes `--bench`; everything else not starting with `-` is a text filter.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mode = if cfg.quick { "quick" } else { "full" };
    eprintln!(
        "cmdr agent benchmarks: {mode} mode, {} MiB per text, {} warm-up + {} measured \
         samples per side",
        cfg.len >> 20,
        cfg.warmup,
        cfg.samples
    );
    let mut rows = Vec::new();
    for input in &INPUTS {
        if !filters.is_empty() && !filters.iter().any(|f| input.name.contains(f.as_str())) {
            continue;
        }
        eprintln!("== {}", input.name);
        let started = Instant::now();
        match run(input, &cfg) {
            Ok(group) => rows.extend(group),
            Err(e) => {
                eprintln!("    {e}");
                rows.push(Row {
                    name: input.label.to_owned(),
                    cmdr: Err(e.clone()),
                    regex: Err(e.clone()),
                    find: Err(e),
                    goal_mb_s: input.goal_mb_s,
                });
            }
        }
        eprintln!(
            "   ({}: {:.1} s)",
            input.name,
            started.elapsed().as_secs_f64()
        );
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "\n### cmdr agent — `<shell>` detector, {mode} mode, {} MiB per text, {cores} cores, \
         medians\n",
        cfg.len >> 20
    );
    println!("{}", render(&rows));
    let failed = rows.iter().any(|r| {
        [&r.cmdr, &r.regex, &r.find]
            .iter()
            .any(|t| matches!(t, Err(Failure::Check(_))))
    });
    if failed {
        eprintln!("a result check failed: these figures are not to be trusted");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
