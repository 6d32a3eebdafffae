//! The Markdown table of per-command latency, remote vs local vs bare request/reply
//! (measured with `latency.rs`).

use crate::harness::secs;
use crate::latency::Latency;

/// Largest allowed overhead / bare request/reply (medians).
pub const GOAL: f64 = 2.0;

/// One latency row: remote and local runs of the same command, and the bare
/// request/reply measured alongside them.
pub struct LatencyRow {
    /// What ran.
    pub name: String,
    /// Through `Producer::submit` and a worker.
    pub remote: Latency,
    /// Through a local registry.
    pub local: Latency,
    /// `client.request` to a responder that answers at once.
    pub bare: Latency,
}

impl LatencyRow {
    /// Whether a side has no figure (a check failed).
    pub fn failed(&self) -> bool {
        self.remote.is_err() || self.local.is_err() || self.bare.is_err()
    }

    fn cells(&self) -> [String; 8] {
        let pair = |s: &Latency| match s {
            Ok(s) => format!("{} / {}", secs(s.median), secs(s.p99)),
            Err(e) => e.to_string().replace('|', "\\|"),
        };
        let (overhead, ratio, met) = match (&self.remote, &self.local, &self.bare) {
            (Ok(r), Ok(l), Ok(b)) => {
                let (median, p99) = (r.median - l.median, r.p99 - l.p99);
                let ratio = median / b.median;
                (
                    format!("{} / {}", signed(median), signed(p99)),
                    format!("{ratio:.2} / {:.2}", p99 / b.p99),
                    if ratio <= GOAL { "yes" } else { "**no**" },
                )
            }
            _ => ("—".to_owned(), "—".to_owned(), "n/a"),
        };
        [
            self.name.clone(),
            pair(&self.remote),
            pair(&self.local),
            overhead,
            pair(&self.bare),
            ratio,
            format!("≤ {GOAL:.0} (medians)"),
            met.to_owned(),
        ]
    }
}

fn signed(x: f64) -> String {
    if x < 0.0 {
        format!("−{}", secs(-x))
    } else {
        secs(x)
    }
}

/// The latency table (cells are median / p99).
pub fn render(rows: &[LatencyRow]) -> String {
    let mut out = String::from(
        "| latency, median / p99 | remote | local | overhead = remote − local | \
         bare request/reply | overhead / bare | goal | met? |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        out.push_str(&format!("| {} |\n", row.cells().join(" | ")));
    }
    out
}
