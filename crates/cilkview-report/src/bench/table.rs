//! The benchmark's table on standard error: per worker count the median time and speedup with
//! the trials' range, the efficiency, and the predicted range with where the speedup lies.

use std::fmt::Write as _;

use cilkview_bench::{BenchReport, Placement};

use crate::{Artifact, Destination, ExportError, Exporter};

/// A run shorter than this (hyperfine's threshold) is mostly the cost of starting it: its
/// speedups say little.
const SHORT_RUN_SECONDS: f64 = 0.005;

/// A median speedup above P by more than this factor gets a note: more than P workers can give.
const SUPERLINEAR: f64 = 1.05;

/// Renders to standard error.
#[derive(Clone, Copy, Debug, Default)]
pub struct BenchTableExporter {
    /// A blank line first: the table follows an analysis's report (`run --bench`).
    pub after_report: bool,
}

impl BenchTableExporter {
    /// The table's text.
    pub fn to_text(report: &BenchReport) -> String {
        let mut out = String::new();
        let mut command = report.program.clone();
        for a in &report.args {
            command.push(' ');
            command.push_str(a);
        }
        let _ = writeln!(
            out,
            "cilkview-rs bench: {command}\n{} trial(s) per worker count after {} warm-up run(s); \
             workers set by {}; median [min – max]",
            report.trials,
            report.warmup,
            report.workers_env.join(", ")
        );
        let predicted = report.results.iter().any(|r| r.predicted.is_some());
        let _ = write!(
            out,
            "{:>4}  {:>26}  {:>22}  {:>10}",
            "P", "time (s)", "speedup", "efficiency"
        );
        if predicted {
            let _ = write!(out, "  {:>15}  measured vs predicted", "predicted");
        }
        let _ = writeln!(out);
        rows(&mut out, report);
        findings(&mut out, report);
        out
    }
}

/// One line per worker count: time, speedup, efficiency, and the prediction where there is one.
fn rows(out: &mut String, report: &BenchReport) {
    for r in &report.results {
        let _ = write!(
            out,
            "{:>4}  {:>26}  {:>22}  {:>9.0}%",
            r.cores,
            format!(
                "{:.4} [{:.4} – {:.4}]",
                r.time.median, r.time.min, r.time.max
            ),
            format!(
                "{:.2} [{:.2} – {:.2}]",
                r.speedup.median, r.speedup.min, r.speedup.max
            ),
            r.efficiency * 100.0
        );
        if let (Some(p), Some(place)) = (&r.predicted, r.placement) {
            let _ = write!(
                out,
                "  {:>15}  {}",
                format!("{:.2} – {:.2}", p.lower, p.upper),
                match place {
                    Placement::Inside => "inside",
                    Placement::Above => "ABOVE (faster than predicted)",
                    Placement::Below => "BELOW (slower than predicted)",
                }
            );
        }
        let _ = writeln!(out);
    }
}

/// What the table says beyond its numbers: below the prediction, runs too short to time, the
/// memory bandwidth.
fn findings(out: &mut String, report: &BenchReport) {
    if report
        .results
        .iter()
        .any(|r| r.placement == Some(Placement::Below))
    {
        let _ = writeln!(
            out,
            "Below the predicted range: something the instruction counts cannot see holds the \
                 program back (memory bandwidth, contention, false sharing, the runtime's own \
                 costs). Try --bandwidth."
        );
    }
    if let Some(r) = report
        .results
        .iter()
        .find(|r| r.cores > 1 && r.speedup.median > f64::from(r.cores) * SUPERLINEAR)
    {
        let _ = writeln!(
            out,
            "note: at P={} the speedup {:.2} exceeds P: the machine's speed moved between the \
                 trials (a virtual machine's host, the CPUs' clock), or the data fit the caches \
                 of more cores better; more trials on a quiet machine tell them apart",
            r.cores, r.speedup.median
        );
    }
    if let Some(fastest) = report
        .results
        .iter()
        .map(|r| r.time.min)
        .filter(|t| t.is_finite())
        .min_by(f64::total_cmp)
        .filter(|&t| t < SHORT_RUN_SECONDS)
    {
        let _ = writeln!(
            out,
            "warning: the fastest run took {:.1} ms: under {:.0} ms, starting the process and \
                 the clock's noise weigh on every speedup; give the program more work (a larger \
                 input)",
            fastest * 1e3,
            SHORT_RUN_SECONDS * 1e3
        );
    }
    if let Some(b) = &report.bandwidth {
        let _ = writeln!(
            out,
            "Memory bandwidth: {} copies at once {:.4} s [{:.4} – {:.4}], one alone {:.4} s: {}",
            b.copies,
            b.together.median,
            b.together.min,
            b.together.max,
            b.alone.median,
            b.explain()
        );
    }
}

impl Exporter<BenchReport> for BenchTableExporter {
    fn destinations(&self) -> Vec<Destination> {
        vec![Destination::Stderr]
    }

    fn render(&self, report: &BenchReport) -> Result<Vec<Artifact>, ExportError> {
        let mut text = if self.after_report {
            "\n".to_string()
        } else {
            String::new()
        };
        text.push_str(&Self::to_text(report));
        Ok(vec![Artifact {
            destination: Destination::Stderr,
            bytes: text.into_bytes(),
        }])
    }
}
