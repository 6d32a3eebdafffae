#!/usr/bin/env python3
"""Draws the throughput-vs-concurrency plot from the executors bench's sweep.csv.

    python3 benches/report/plot.py target/bench-report/sweep.csv OUT.png [--note TEXT] [--cores N]

Two columns, one per series of the sweep (`BASH_EXEC true` vs `bash -c true`; the no-op
registry vs `tokio::spawn` + oneshot): commands/s against concurrency on top (medians;
the bars span the slowest and the fastest sample), cmdr / reference below (>1: cmdr
faster; the dashed line is the goal where one exists). With --cores N and the CSV's CPU
columns, dotted lines mark N cores / CPU per command for each side. Needs matplotlib
(`pip install matplotlib`; benches/report/run.sh installs it if missing).
"""

import argparse
import csv
import sys
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
from matplotlib.ticker import FuncFormatter  # noqa: E402


@dataclass
class Series:
    """How one series of the CSV is drawn."""

    key: str
    title: str
    cmdr: str
    reference: str
    xlabel: str
    goal: float | None


SERIES = [
    Series(
        "bash_true",
        "BASH_EXEC `true`: process spawn throughput",
        "cmdr: BASH_EXEC true (registry)",
        "reference: tokio::process bash -c true",
        "commands at once",
        0.9,
    ),
    Series(
        "noop",
        "No-op executor: registry + actor overhead",
        "cmdr: registry, no-op executor",
        "reference: tokio::spawn + oneshot",
        "commands in flight",
        None,
    ),
]


def load(path):
    """Rows of the CSV grouped by series, sorted by concurrency; only complete rows."""
    by_series = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if not row["cmdr_cmd_s"] or not row["reference_cmd_s"]:
                print(f"plot: no figure for {row['series']} at {row['concurrency']}", file=sys.stderr)
                continue
            parsed = {k: (v if k == "series" else float(v) if v else None) for k, v in row.items()}
            by_series.setdefault(row["series"], []).append(parsed)
    for rows in by_series.values():
        rows.sort(key=lambda r: r["concurrency"])
    return by_series


def side(ax, rows, prefix, label, style):
    """One side's medians, with bars from the slowest to the fastest sample."""
    x = [r["concurrency"] for r in rows]
    y = [r[f"{prefix}_cmd_s"] for r in rows]
    lo = [r[f"{prefix}_cmd_s"] - r[f"{prefix}_cmd_s_slowest"] for r in rows]
    hi = [r[f"{prefix}_cmd_s_fastest"] - r[f"{prefix}_cmd_s"] for r in rows]
    ax.errorbar(x, y, yerr=[lo, hi], label=label, capsize=3, **style)


def ceiling(ax, rows, cores):
    """Dotted lines at cores / (median CPU per command over the levels): the most each
    side could do with every core busy."""
    for prefix, color, name in (("cmdr", "tab:blue", "cmdr"), ("reference", "tab:gray", "reference")):
        per_cmd = sorted(r[f"{prefix}_cpu_ms_per_cmd"] for r in rows)
        cpu_ms = per_cmd[len(per_cmd) // 2]
        ax.axhline(
            cores * 1e3 / cpu_ms, color=color, linestyle=":", linewidth=1,
            label=f"{name}: {cores} cores / {cpu_ms:.2f} ms CPU per command",
        )


def readable(value, _pos):
    """Tick labels like 1.2k, 350k, 1.5M."""
    if value >= 1e6:
        return f"{value / 1e6:g}M"
    if value >= 1e3:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def column(axes, series, rows, cores):
    """The throughput panel and the ratio panel of one series (CPU ceilings if `cores`)."""
    top, bottom = axes
    x = [r["concurrency"] for r in rows]
    side(top, rows, "cmdr", series.cmdr, {"marker": "o", "color": "tab:blue"})
    side(top, rows, "reference", series.reference, {"marker": "s", "color": "tab:gray", "linestyle": "--"})
    if cores and all(r.get("cmdr_cpu_ms_per_cmd") and r.get("reference_cpu_ms_per_cmd") for r in rows):
        ceiling(top, rows, cores)
    top.set_title(series.title, fontsize=10)
    top.set_ylabel("commands/s (median)")
    top.set_ylim(bottom=0)
    top.yaxis.set_major_formatter(FuncFormatter(readable))
    top.legend(fontsize=8, loc="best")
    ratios = [r["ratio"] for r in rows]
    bottom.plot(x, ratios, marker="o", color="tab:blue", label="cmdr / reference")
    bottom.axhline(1.0, color="black", linewidth=0.8)
    if series.goal is not None:
        bottom.axhline(series.goal, color="tab:red", linestyle=":", label=f"goal ≥ {series.goal}")
    for xi, ri in zip(x, ratios):
        bottom.annotate(f"{ri:.2f}", (xi, ri), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    low = min(ratios + [series.goal or 1.0, 1.0])
    high = max(ratios + [1.0])
    bottom.set_ylim(max(0.0, low - 0.15), high + 0.15)
    bottom.set_ylabel("ratio (>1: cmdr faster)")
    bottom.set_xlabel(series.xlabel)
    bottom.legend(fontsize=8, loc="best")
    for ax in axes:
        ax.set_xscale("log", base=2 if series.key == "bash_true" else 10)
        ax.set_xticks(x)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
        ax.grid(True, which="major", alpha=0.3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", help="sweep.csv written by `cargo bench --bench executors -- sweep`")
    parser.add_argument("out", help="the PNG to write")
    parser.add_argument("--note", default="", help="the run's context, shown under the title")
    parser.add_argument("--cores", type=int, default=0, help="draw the CPU ceiling for this many cores")
    args = parser.parse_args()
    by_series = load(args.csv)
    present = [s for s in SERIES if by_series.get(s.key)]
    if not present:
        print(f"plot: no complete rows in {args.csv}", file=sys.stderr)
        return 1
    fig, axes = plt.subplots(
        2, len(present), figsize=(6.2 * len(present), 7.2), squeeze=False,
        gridspec_kw={"height_ratios": [3, 1.4]},
    )
    for i, series in enumerate(present):
        column((axes[0][i], axes[1][i]), series, by_series[series.key], args.cores)
    title = "cmdr throughput vs concurrency, side by side with the reference in the same run"
    fig.suptitle(title + (f"\n{args.note}" if args.note else ""), fontsize=11)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"plot: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
