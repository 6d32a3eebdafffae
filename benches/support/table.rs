//! Rows of the result table and their Markdown rendering.
//!
//! `ratio` is always reference time / cmdr time per unit, i.e. cmdr throughput /
//! reference throughput: above 1 means cmdr is faster.

use crate::harness::{Failure, Measured, Timing};

/// What a row has to show to meet its goal.
#[derive(Debug, Clone, Copy)]
pub enum Goal {
    /// ratio ≥ x.
    AtLeast(f64),
    /// ratio > x.
    Above(f64),
    /// cmdr's own time per command ≤ x µs (absolute, not a ratio).
    AtMostMicros(f64),
    /// cmdr's own time (a latency, a run) ≤ x µs (absolute, not a ratio).
    LatencyAtMostMicros(f64),
    /// cmdr's own throughput ≥ x GB/s (absolute, not a ratio).
    AtLeastGBps(f64),
    /// Shown for information only.
    Info,
}

impl Goal {
    fn text(self) -> String {
        match self {
            Goal::AtLeast(x) => format!("≥ {x:.2}"),
            Goal::Above(x) => format!("> {x:.2}"),
            Goal::AtMostMicros(x) => format!("≤ {x} µs/cmd"),
            Goal::LatencyAtMostMicros(x) => format!("≤ {x} µs"),
            Goal::AtLeastGBps(x) => format!("≥ {x} GB/s"),
            Goal::Info => "—".to_owned(),
        }
    }

    fn met(self, cmdr: &Measured, ratio: f64) -> Option<bool> {
        match self {
            Goal::AtLeast(x) => Some(ratio >= x),
            Goal::Above(x) => Some(ratio > x),
            Goal::AtMostMicros(x) | Goal::LatencyAtMostMicros(x) => Some(cmdr.median * 1e6 <= x),
            Goal::AtLeastGBps(x) => Some(1e-9 / cmdr.median >= x),
            Goal::Info => None,
        }
    }
}

/// One benchmark, cmdr and its reference side by side.
pub struct Row {
    name: String,
    cmdr: Timing,
    reference: Timing,
    goal: Goal,
}

impl Row {
    /// A row comparing `cmdr` with `reference`.
    pub fn new(name: impl Into<String>, cmdr: &Timing, reference: &Timing, goal: Goal) -> Self {
        Self {
            name: name.into(),
            cmdr: cmdr.clone(),
            reference: reference.clone(),
            goal,
        }
    }

    /// A row for a benchmark that could not even be set up.
    pub fn broken(name: impl Into<String>, failure: Failure) -> Self {
        Self {
            name: name.into(),
            cmdr: Err(failure.clone()),
            reference: Err(failure),
            goal: Goal::Info,
        }
    }

    /// Whether a check failed in this row (the run is not to be trusted).
    pub fn check_failed(&self) -> bool {
        [&self.cmdr, &self.reference]
            .iter()
            .any(|t| matches!(t, Err(Failure::Check(_))))
    }

    fn ratio(&self) -> Option<(f64, &Measured)> {
        let (Ok(cmdr), Ok(reference)) = (&self.cmdr, &self.reference) else {
            return None;
        };
        Some((reference.median / cmdr.median, cmdr))
    }

    fn cells(&self) -> [String; 6] {
        let (ratio, met) = match self.ratio() {
            Some((r, cmdr)) => (
                format!("{r:.3}"),
                match self.goal.met(cmdr, r) {
                    Some(true) => "yes",
                    Some(false) => "**no**",
                    None => "—",
                },
            ),
            None => ("—".to_owned(), "n/a"),
        };
        [
            self.name.clone(),
            cell(&self.cmdr, false),
            cell(&self.reference, true),
            ratio,
            self.goal.text(),
            met.to_owned(),
        ]
    }
}

fn cell(timing: &Timing, labelled: bool) -> String {
    match timing {
        Ok(m) if labelled => format!("{}: {}", m.label, m.figure()),
        Ok(m) => m.figure(),
        Err(e) => {
            let text: String = e.to_string().replace('|', "\\|").replace('\n', " ");
            let mut short: String = text.chars().take(140).collect();
            if short.len() < text.len() {
                short.push('…');
            }
            short
        }
    }
}

/// The Markdown table, then the spread of every measured side.
pub fn render(rows: &[Row]) -> String {
    let mut out = String::from(
        "| benchmark | cmdr | reference | ratio | goal | met? |\n|---|---|---|---|---|---|\n",
    );
    for row in rows {
        out.push_str(&format!("| {} |\n", row.cells().join(" | ")));
    }
    out.push_str("\nratio = reference time / cmdr time (>1: cmdr faster). Spread per side:\n");
    let mut seen: Vec<&str> = Vec::new();
    for m in rows
        .iter()
        .flat_map(|r| [&r.cmdr, &r.reference])
        .filter_map(|t| t.as_ref().ok())
    {
        if !seen.contains(&m.label.as_str()) {
            seen.push(&m.label);
            out.push_str(&format!("- {}\n", m.spread()));
        }
    }
    out
}

/// Picks the faster of two reference timings (the one a goal is judged against).
pub fn faster<'t>(a: &'t Timing, b: &'t Timing) -> Timing {
    match (a, b) {
        (Ok(x), Ok(y)) => Ok(if x.median <= y.median { x } else { y }.clone()),
        (Ok(x), Err(_)) | (Err(_), Ok(x)) => Ok(x.clone()),
        (Err(e), Err(_)) => Err(e.clone()),
    }
}
