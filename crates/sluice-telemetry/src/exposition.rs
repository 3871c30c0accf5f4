//! Prometheus text exposition (format 0.0.4) primitives shared by `/metrics`' families: a
//! histogram's counts ([`Hist`]) and its lines ([`hist`]), and label-value escaping ([`esc`]).

use std::fmt::Write;

/// A histogram's cumulative bucket counts, sum and count.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hist {
    pub(crate) counts: Vec<u64>,
    pub(crate) sum: f64,
    pub(crate) count: u64,
}

impl Hist {
    pub(crate) fn observe(&mut self, bounds: &[f64], v: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; bounds.len()];
        }
        for (i, b) in bounds.iter().enumerate() {
            if v <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }

    /// Add another histogram's counts (of the same bounds) to these.
    pub(crate) fn add(&mut self, other: &Hist) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (c, o) in self.counts.iter_mut().zip(&other.counts) {
            *c += o;
        }
        self.sum += other.sum;
        self.count += other.count;
    }
}

/// Escape a Prometheus label value.
pub(crate) fn esc(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn num(v: f64) -> String {
    if v.is_infinite() {
        "+Inf".into()
    } else {
        format!("{v}")
    }
}

/// Write a histogram's `_bucket`, `_sum` and `_count` lines.
pub(crate) fn hist(o: &mut String, name: &str, labels: &str, bounds: &[f64], h: &Hist) {
    for (i, b) in bounds.iter().enumerate() {
        let c = h.counts.get(i).copied().unwrap_or(0);
        let _ = writeln!(o, "{name}_bucket{{{labels},le=\"{}\"}} {c}", num(*b));
    }
    let _ = writeln!(o, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(o, "{name}_sum{{{labels}}} {}", h.sum);
    let _ = writeln!(o, "{name}_count{{{labels}}} {}", h.count);
}
