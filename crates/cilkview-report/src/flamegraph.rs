//! `PREFIX.folded` and `PREFIX.svg` of `--profile PREFIX`: the critical path as collapsed stacks
//! (one line per calling context: the call sites from the root, and the context's local span on
//! span; the lines add up to the span) and the flame graph of it, drawn by `inferno`.

use std::path::PathBuf;

use crate::{prefixed, Artifact, Destination, ExportError, Exporter, RunReport};

pub struct FlameGraphExporter {
    pub prefix: PathBuf,
}

impl FlameGraphExporter {
    /// Collapsed stacks of the critical path: `root;site;site value`. Empty without a profile.
    pub fn to_folded(report: &RunReport) -> String {
        let (Some(sites), Some(contexts)) = (
            report.call_sites.as_deref(),
            report.call_contexts.as_deref(),
        ) else {
            return String::new();
        };
        let root = std::path::Path::new(&report.program)
            .file_name()
            .map(|f| f.to_string_lossy().replace([';', ' '], "_"))
            .unwrap_or_else(|| "program".into());
        let mut out = String::new();
        for (i, c) in contexts.iter().enumerate() {
            if c.local_on_span.span == 0 {
                continue;
            }
            let mut line = root.clone();
            for s in report.context_stack(i) {
                line.push(';');
                line.push_str(&sites[s].label());
            }
            out.push_str(&format!("{line} {}\n", c.local_on_span.span));
        }
        out
    }

    /// The flame graph (SVG) of the folded stacks.
    pub fn to_svg(report: &RunReport, folded: &str) -> Result<Vec<u8>, ExportError> {
        let mut options = inferno::flamegraph::Options::default();
        options.title = format!("Critical path of {}", report.program);
        options.count_name = format!("{} of span", report.unit);
        let mut svg = Vec::new();
        let lines: Vec<&str> = folded.lines().collect();
        if lines.is_empty() {
            // inferno refuses an empty input; draw the run as one frame.
            let one = format!("{} {}", "(no call site)", report.measures.span.max(1));
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
        vec![
            Destination::File(prefixed(&self.prefix, "folded")),
            Destination::File(prefixed(&self.prefix, "svg")),
        ]
    }

    fn render(&self, report: &RunReport) -> Result<Vec<Artifact>, ExportError> {
        let folded = Self::to_folded(report);
        let svg = Self::to_svg(report, &folded)?;
        Ok(vec![
            Artifact {
                destination: Destination::File(prefixed(&self.prefix, "folded")),
                bytes: folded.into_bytes(),
            },
            Artifact {
                destination: Destination::File(prefixed(&self.prefix, "svg")),
                bytes: svg,
            },
        ])
    }
}
