//! `PREFIX.folded` and `PREFIX.svg` of `--profile PREFIX`: the critical path as collapsed stacks
//! (one line per calling context: the call sites from the root, and the context's local span on
//! span; the lines add up to the span) and the flame graph of it, drawn by `inferno`; and
//! `PREFIX.work.folded`, `PREFIX.work.svg`: the same of the work (each context's local work, all
//! its invocations), where the whole call structure shows even when the critical path is mostly
//! serial code. The code under no call site is its own bar, `(outside every call site)`. The
//! stacks start at the outermost call site: the graph's one root is inferno's `all`, and its
//! title names the program (and `[region LABEL]` with `--profile-region`).

use std::path::PathBuf;

use crate::{prefixed, Artifact, Destination, ExportError, Exporter, RunReport};

/// The frame of the code under no call site (start-up, `main`'s own code, exit: often most of a
/// small run's critical path).
pub const OUTSIDE_FRAME: &str = "(outside every call site)";

/// What a flame graph measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Each context's local span on span: the lines add up to the span.
    Span,
    /// Each context's local work: the lines add up to the work.
    Work,
}

pub struct FlameGraphExporter {
    pub prefix: PathBuf,
}

impl FlameGraphExporter {
    /// Collapsed stacks of the critical path: `site;site value`. Empty without a profile.
    pub fn to_folded(report: &RunReport) -> String {
        Self::folded(report, Measure::Span)
    }

    /// Collapsed stacks of `measure`: `site;site value` from the outermost call site, the code
    /// under no call site as `(outside every call site) value`. Empty without a profile.
    pub fn folded(report: &RunReport, measure: Measure) -> String {
        let (Some(sites), Some(contexts)) = (
            report.call_sites.as_deref(),
            report.call_contexts.as_deref(),
        ) else {
            return String::new();
        };
        // Each site's label once (a line names every site of its context's path: formatting
        // them per line cost more than the rest of a fine-grained run's analysis).
        let labels: Vec<String> = sites.iter().map(|s| s.label()).collect();
        let mut out = String::new();
        for (i, c) in contexts.iter().enumerate() {
            let value = match measure {
                Measure::Span => c.local_on_span.span,
                Measure::Work => c.local_work,
            };
            if value == 0 {
                continue;
            }
            let stack = report.context_stack(i);
            if stack.is_empty() {
                out.push_str(OUTSIDE_FRAME);
            }
            for (k, s) in stack.into_iter().enumerate() {
                if k > 0 {
                    out.push(';');
                }
                out.push_str(&labels[s]);
            }
            out.push(' ');
            out.push_str(&value.to_string());
            out.push('\n');
        }
        out
    }

    /// The flame graph (SVG) of the folded stacks of the critical path.
    pub fn to_svg(report: &RunReport, folded: &str) -> Result<Vec<u8>, ExportError> {
        Self::svg(report, folded, Measure::Span)
    }

    /// The flame graph (SVG) of folded stacks of `measure`.
    pub fn svg(report: &RunReport, folded: &str, measure: Measure) -> Result<Vec<u8>, ExportError> {
        let mut options = inferno::flamegraph::Options::default();
        let subject = report.profiled_subject();
        let (title, count, total) = match measure {
            Measure::Span => ("Critical path", "of span", report.profiled().span),
            Measure::Work => ("Work", "of work", report.profiled().work),
        };
        options.title = format!("{title} of {subject}");
        options.count_name = format!("{} {count}", report.unit);
        let mut svg = Vec::new();
        let lines: Vec<&str> = folded.lines().collect();
        if lines.is_empty() {
            // inferno refuses an empty input; draw the run as one frame.
            let one = format!("{} {}", "(no call site)", total.max(1));
            inferno::flamegraph::from_lines(&mut options, [one.as_str()], &mut svg)
        } else {
            inferno::flamegraph::from_lines(&mut options, lines, &mut svg)
        }
        .map_err(|e| ExportError::Io("flame graph", e))?;
        Ok(svg)
    }
}

impl Exporter for FlameGraphExporter {
    fn destinations(&self) -> Vec<Destination> {
        ["folded", "svg", "work.folded", "work.svg"]
            .into_iter()
            .map(|ext| Destination::File(prefixed(&self.prefix, ext)))
            .collect()
    }

    fn render(&self, report: &RunReport) -> Result<Vec<Artifact>, ExportError> {
        let mut out = Vec::new();
        for (measure, ext) in [(Measure::Span, ""), (Measure::Work, "work.")] {
            let folded = Self::folded(report, measure);
            let svg = Self::svg(report, &folded, measure)?;
            out.push(Artifact {
                destination: Destination::File(prefixed(&self.prefix, &format!("{ext}folded"))),
                bytes: folded.into_bytes(),
            });
            out.push(Artifact {
                destination: Destination::File(prefixed(&self.prefix, &format!("{ext}svg"))),
                bytes: svg,
            });
        }
        Ok(out)
    }
}
