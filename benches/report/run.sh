#!/usr/bin/env bash
# Runs every cmdr benchmark, each side by side with its reference, and builds the report:
# one Markdown table per bench, the run's context (date, commit, cores, load before and
# after) and the throughput-vs-concurrency plot. See benches/README.md.
#
#   benches/report/run.sh                        # every bench, full sizes (~5 min once built)
#   benches/report/run.sh executors per_command  # the cheap ones (BENCHMARKS.md keeps the rest)
#   benches/report/run.sh executors agent        # only these benches
#   CMDR_BENCH_QUICK=1 benches/report/run.sh     # smoke run of the whole pipeline
#
# Output: target/bench-report/ ($CMDR_BENCH_REPORT_DIR): <bench>.md (the tables, stdout),
# <bench>.log (progress, stderr), sweep.csv, meta.md, report.md (everything in one file).
# A full run then updates the rows of the benches that ran in benches/report/results.tsv
# and regenerates BENCHMARKS.md from it (benches/report/benchmarks.py).
# The plot goes to benches/report/throughput-vs-concurrency.png (committed; referenced by
# BENCHMARKS.md) in a full run, to the output folder in a quick run.
# Installs what is missing: wrk and nats-server (Debian packages), matplotlib (PyPI),
# swe-rex (PyPI, into a venv under target/).
# Exit status: 1 if a bench failed (its log says why); the others still run.
set -uo pipefail
cd "$(dirname "$0")/../.."

out=${CMDR_BENCH_REPORT_DIR:-$PWD/target/bench-report}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export CMDR_BENCH_REPORT_DIR=$out
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=(executors per_command nats agent serve)
quick=${CMDR_BENCH_QUICK:-}
[ "$quick" = 0 ] && quick=
mode=full
[ -n "$quick" ] && mode="quick (CMDR_BENCH_QUICK=1)"

# --- what the benches need ---------------------------------------------------------
apt_missing=()
command -v wrk >/dev/null 2>&1 || apt_missing+=(wrk)
command -v nats-server >/dev/null 2>&1 || apt_missing+=(nats-server)
if [ ${#apt_missing[@]} -gt 0 ]; then
  echo "report: installing ${apt_missing[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_missing[@]}" >/dev/null \
    || { echo "report: cannot install ${apt_missing[*]}" >&2; exit 1; }
fi
if ! python3 -c 'import matplotlib' 2>/dev/null; then
  echo "report: installing matplotlib" >&2
  python3 -m pip install -q matplotlib || { echo "report: cannot install matplotlib" >&2; exit 1; }
fi

# SWE-ReX's bash session, the executors bench's P1b reference (benches/support/session.rs).
if [[ " ${benches[*]} " == *" executors "* ]]; then
  venv=${CARGO_TARGET_DIR:-$PWD/target}/swerex-venv
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import swerex' 2>/dev/null; then
    echo "report: installing swe-rex into $venv" >&2
    { python3 -m venv "$venv" && "$venv/bin/pip" install -q swe-rex; } \
      || echo "report: cannot install swe-rex; row P1b will say so" >&2
  fi
fi

# --- build first, so compiling does not overlap a measurement ------------------------
build_args=()
for b in "${benches[@]}"; do build_args+=(--bench "$b"); done
cargo bench --no-run "${build_args[@]}" || { echo "report: build failed" >&2; exit 1; }

# --- run -----------------------------------------------------------------------------
load() { cut -d' ' -f1-3 /proc/loadavg; }
commit=$(git rev-parse --short=12 HEAD)
git diff --quiet HEAD -- src executors benches Cargo.toml Cargo.lock 2>/dev/null || commit="$commit (+ uncommitted changes)"
# The sweep (an executors group) writes sweep.csv: never plot an older one.
[[ " ${benches[*]} " == *" executors "* ]] && rm -f "$out/sweep.csv"
load_before=$(load)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
status=0
timings=()
for b in "${benches[@]}"; do
  echo "report: cargo bench --bench $b (load $(load))" >&2
  t0=$(date +%s)
  if cargo bench --bench "$b" >"$out/$b.md" 2>"$out/$b.log"; then rc=0; else rc=$?; status=1; fi
  timings+=("| \`cargo bench --bench $b\` | $(($(date +%s) - t0)) s | $rc | $(load) |")
  [ $rc -eq 0 ] || echo "report: $b failed ($rc); see $out/$b.log" >&2
done
load_after=$(load)

{
  echo "## Run"
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| started | $started |"
  echo "| finished | $(date -u +%Y-%m-%dT%H:%M:%SZ) |"
  echo "| commit | $commit |"
  echo "| mode | $mode |"
  echo "| cores (\`nproc\`) | $(nproc) |"
  echo "| CPU | $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1) |"
  echo "| memory | $(free -g | awk '/^Mem:/ {print $2 " GiB"}') |"
  echo "| kernel | $(uname -r) |"
  echo "| rustc | $(rustc --version) |"
  echo "| load before (\`/proc/loadavg\` 1/5/15 min) | $load_before |"
  echo "| load after | $load_after |"
  echo
  echo "| bench | time | exit | load after it |"
  echo "|---|---|---|---|"
  printf '%s\n' "${timings[@]}"
} >"$out/meta.md"

# --- plot ------------------------------------------------------------------------------
if [ -f "$out/sweep.csv" ]; then
  png_dir=benches/report
  [ -n "$quick" ] && png_dir=$out
  python3 benches/report/plot.py "$out/sweep.csv" "$png_dir/throughput-vs-concurrency.png" \
    --cores "$(nproc)" --note "$(nproc) vCPU, load ${load_before%% *} → ${load_after%% *}, $started${quick:+, QUICK}" \
    || status=1
fi

{
  cat "$out/meta.md"
  for b in "${benches[@]}"; do
    echo
    echo "## \`cargo bench --bench $b\`"
    cat "$out/$b.md"
  done
} >"$out/report.md"
echo "report: $out/report.md" >&2

# --- BENCHMARKS.md: the rows of the benches that ran, from a full run only --------------
if [ -z "$quick" ]; then
  python3 benches/report/benchmarks.py "$out" || status=1
fi
exit $status
