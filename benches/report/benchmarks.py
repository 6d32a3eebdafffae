#!/usr/bin/env python3
"""Builds BENCHMARKS.md: one row per benchmark, from the latest figures.

    benches/report/benchmarks.py [REPORT_DIR]

The figures live in benches/report/results.tsv (one line per benchmark: what it is, its
goal, the command that reproduces it, its latest figures and when they were measured).
Given the output folder of a run of benches/report/run.sh (target/bench-report/), every
row whose bench ran there is updated first: a bench's Markdown table row whose first cell
starts with the row's key gives cmdr, reference, ratio, goal and met (several matching
rows, as in the sweep, give the range of their ratios), and the row's `measured` becomes
the run's date and commit (from meta.md). Rows of benches that did not run keep their
figures and their date: BENCHMARKS.md shows how old each one is. Rows without a key (the
benches whose output is not a `| benchmark | … |` table: NATS latency, serve, the NATS
cluster) are updated by hand in results.tsv. The machine section comes from the meta.md
of the latest run that updated anything (kept in benches/report/machine.md).

Standard library only.
"""

import csv
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RESULTS = os.path.join(HERE, "results.tsv")
MACHINE = os.path.join(HERE, "machine.md")
NOTES = os.path.join(HERE, "notes.md")
OUT = os.path.join(ROOT, "BENCHMARKS.md")
FIELDS = ["id", "bench", "key", "benchmark", "cmdr", "reference", "ratio", "goal", "met",
          "reproduce", "measured"]


def read_results():
    with open(RESULTS, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    for row in rows:
        missing = [k for k in FIELDS if row.get(k) is None]
        if missing:
            sys.exit(f"benchmarks.py: {RESULTS}: row {row.get('id')} lacks {missing}")
    return rows


def write_results(rows):
    with open(RESULTS, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, FIELDS, delimiter="\t", lineterminator="\n")
        w.writeheader()
        for row in rows:
            w.writerow({k: row[k] for k in FIELDS})


def cells(line):
    """The cells of one Markdown table line (escaped pipes kept)."""
    inner = line.strip()[1:-1]
    parts = re.split(r"(?<!\\)\|", inner)
    return [p.strip() for p in parts]


def table_rows(path):
    """Every data row of every `| benchmark | … |` table in a bench's output, as
    [name, cmdr, reference, ratio, goal, met]. A label holding an unescaped `|` (e.g.
    `bash -c 'cat FILE | cat'`) splits a cell in two: the extra cells are joined back into
    the reference, where the labels are; a table with two reference columns (the agent
    bench's) gives them joined by " / "."""
    rows, width = [], 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("|"):
                width = 0
                continue
            c = cells(line)
            if c and c[0] == "benchmark":
                width = len(c)
                continue
            if width >= 6 and not set(c[0]) <= set("-: ") and len(c) >= width:
                extra = len(c) - width
                refs = c[2:-3]
                glued = [" \\| ".join(refs[: extra + 1])] + refs[extra + 1 :]
                rows.append([c[0], c[1], " / ".join(glued), c[-3], c[-2], c[-1]])
    return rows


def meta(report_dir):
    """Date, commit and the machine table of a run (its meta.md)."""
    path = os.path.join(report_dir, "meta.md")
    if not os.path.exists(path):
        return None
    text = open(path, encoding="utf-8").read()
    field = lambda name: (re.search(rf"^\| {re.escape(name)} \| (.*) \|$", text, re.M) or [None, ""])[1]
    return {
        "date": field("started")[:10],
        "commit": field("commit"),
        "mode": field("mode"),
        "text": text,
    }


def ratio_value(text):
    try:
        return float(text.replace("**", ""))
    except ValueError:
        return None


def judged(kept, goal, met, ratio):
    """The goal and met? cells: the bench's own, unless results.tsv decides otherwise —
    a goal retired (kept, judged "—"), or a goal the bench prints as information only
    (`—`) that results.tsv states as `≥ x …` (judged on the ratio here)."""
    if kept.startswith("retired"):
        return kept, "—"
    if goal == "—" and kept.startswith("≥ "):
        bound = ratio_value(kept[2:].split()[0])
        value = ratio_value(ratio)
        if bound is None or value is None:
            return kept, "n/a"
        return kept, "yes" if value >= bound else "**no**"
    return goal, met


def update(rows, report_dir):
    """Updates `rows` from the bench outputs in `report_dir`; the number updated."""
    run = meta(report_dir)
    if run is None:
        sys.exit(f"benchmarks.py: no meta.md in {report_dir}")
    if run["mode"] != "full":
        print("benchmarks.py: a quick run; BENCHMARKS.md is built from full runs only",
              file=sys.stderr)
        return 0
    outputs = {}
    updated = 0
    for row in rows:
        if not row["key"]:
            continue
        bench = row["bench"]
        if bench not in outputs:
            path = os.path.join(report_dir, f"{bench}.md")
            outputs[bench] = table_rows(path) if os.path.exists(path) else None
        found = [c for c in outputs[bench] or [] if c[0].startswith(row["key"])]
        if not found:
            continue
        if len(found) == 1:
            c = found[0]
            row["cmdr"], row["reference"] = c[1], c[2]
            row["ratio"] = c[-3]
            row["goal"], row["met"] = judged(row["goal"], c[-2], c[-1], c[-3])
        else:
            ratios = [r for r in (ratio_value(c[-3]) for c in found) if r is not None]
            row["cmdr"] = row["reference"] = "see the plot"
            row["ratio"] = f"{min(ratios):.2f}–{max(ratios):.2f}" if ratios else "—"
            row["goal"], row["met"] = found[0][-2], "—"
        row["measured"] = f"{run['date']}, `{run['commit']}`"
        updated += 1
    if updated:
        with open(MACHINE, "w", encoding="utf-8") as f:
            f.write(run["text"])
    return updated


def latest_commit(machine):
    """The commit of the latest run, from its meta.md (machine.md)."""
    m = re.search(r"^\| commit \| (.*) \|$", machine, re.M)
    return m[1] if m else None


def render(rows):
    machine = open(MACHINE, encoding="utf-8").read() if os.path.exists(MACHINE) else ""
    machine = re.sub(r"^## Run\n", "", machine).strip()
    notes = open(NOTES, encoding="utf-8").read().strip() if os.path.exists(NOTES) else ""
    latest = latest_commit(machine)
    out = [
        "# cmdr benchmarks",
        "",
        "<!-- Generated by benches/report/benchmarks.py from benches/report/results.tsv;",
        "     edit those, not this file. -->",
        "",
        "One row per benchmark, each measured **side by side with its reference in the same",
        "run** and quoted as a ratio: **ratio = reference time / cmdr time** (= cmdr throughput",
        "/ reference throughput; above 1, cmdr is faster). Figures are medians. A row's",
        "`measured` says when and on which commit its figures were taken: rows older than the",
        "latest run were not rerun then, and are as true as that build. Rebuild this file with",
        "`benches/report/run.sh` (every bench, ~5 min once built) or `benches/report/run.sh",
        "executors per_command` (the cheap ones); the command in each row reproduces it alone.",
        "",
        "How each bench works and what it checks: [benches/README.md](benches/README.md). Why",
        "the figures are what they are, what was kept and what was tried:",
        "[docs/performance.md](docs/performance.md). The lab notes of earlier sessions are in",
        "git history (`git log -p -- BENCHMARKS.md`).",
        "",
        "## The table",
        "",
        "| # | benchmark | cmdr | reference | ratio | goal | met? | measured | reproduce |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        measured = r["measured"]
        if latest and f"`{latest}`" not in measured and measured != "—":
            measured += " (**stale**: not in the latest run)"
        out.append("| " + " | ".join([
            r["id"], r["benchmark"], r["cmdr"], r["reference"], r["ratio"], r["goal"],
            r["met"], measured, r["reproduce"],
        ]) + " |")
    out += [
        "",
        "Goals are those decided for each benchmark (issue 34 for PC1, PC1m and PC2; the",
        "issue that introduced the others, `benches/README.md`); \"—\" marks a row for",
        "information. S1 and S2 are ranges over their concurrency levels; the plot:",
        "",
        "![BASH_EXEC true and the no-op registry against their references at 1 to 32 (1,000) "
        "commands at once](benches/report/throughput-vs-concurrency.png)",
        "",
        notes,
        "",
        "## The machine of the latest run",
        "",
        machine or "(no run recorded)",
        "",
        "A shared 2-vCPU VM: other work runs on the same cores, so a ratio moves by ±0.1–0.3",
        "between runs (the spread of every side is in each bench's output,",
        "`target/bench-report/<bench>.md`). Read a ratio near its goal as \"about there\".",
        "",
    ]
    return "\n".join(out)


def main():
    rows = read_results()
    if len(sys.argv) > 1:
        n = update(rows, sys.argv[1])
        print(f"benchmarks.py: {n} rows updated from {sys.argv[1]}", file=sys.stderr)
        write_results(rows)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(render(rows))
    print(f"benchmarks.py: wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
