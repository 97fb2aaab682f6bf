//! The text table "top call sites on the span" (`--top N`, default 10), sorted by local span on
//! span: where the critical path's instructions ran.

use std::fmt::Write;

use num_format::{Locale, ToFormattedString};

use crate::{Artifact, Destination, ExportError, Exporter, RunReport};

/// Renders the table to standard error (after the text report).
pub struct TopSitesExporter {
    pub top: usize,
}

impl Default for TopSitesExporter {
    fn default() -> Self {
        TopSitesExporter { top: 10 }
    }
}

fn n(v: u64) -> String {
    v.to_formatted_string(&Locale::en)
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

impl TopSitesExporter {
    /// The table, or an empty string when the report has no call-site profile.
    pub fn to_text(&self, report: &RunReport) -> String {
        let Some(sites) = report.call_sites.as_deref() else {
            return String::new();
        };
        let span = report.profiled().span;
        // Sites none of whose instructions lie on the critical path are not "on the span".
        let mut order: Vec<usize> = (0..sites.len())
            .filter(|&i| sites[i].local_on_span.span > 0)
            .collect();
        order.sort_by_key(|&i| std::cmp::Reverse(sites[i].local_on_span.span));
        let rows: Vec<[String; 7]> = order
            .iter()
            .take(self.top)
            .map(|&i| {
                let s = &sites[i];
                [
                    crate::text::printable(&s.location).into_owned(),
                    crate::text::printable(&s.function).into_owned(),
                    crate::text::printable(&s.kind).into_owned(),
                    n(s.local_on_span.span),
                    format!("{:.1}%", percent(s.local_on_span.span, span)),
                    format!("{:.2}", s.on_span.parallelism()),
                    format!("{:.2}", s.on_work.parallelism()),
                ]
            })
            .collect();
        let header = [
            "location",
            "function",
            "kind",
            "local span on span",
            "of span",
            "par. on span",
            "par. on work",
        ];
        let mut out = String::new();
        let shown = rows.len();
        let of = match &report.profile_region {
            Some(label) => format!(" of region {label}"),
            None => String::new(),
        };
        let off_span = sites.len() - order.len();
        let _ = writeln!(
            out,
            "Top {shown} of {} call sites on the span{of} (by local span on span{}):",
            order.len(),
            if off_span > 0 {
                format!("; {off_span} more have none of it")
            } else {
                String::new()
            }
        );
        table(&mut out, &header.map(String::from), &rows);
        let outside = report.outside_call_sites();
        let _ = writeln!(
            out,
            "  outside every call site: {} ({:.1}% of the span)",
            n(outside.span),
            percent(outside.span, span)
        );
        if report.profile_region.is_none() && outside.span > span / 2 {
            let _ = writeln!(
                out,
                "  (most of the span is under no call site: start-up, main, exit; \
                 --profile-region LABEL profiles one region)"
            );
        }
        out
    }
}

/// The header and rows, each column as wide as its widest cell: the first three (location,
/// function, kind) aligned left, the numbers right.
fn table(out: &mut String, header: &[String; 7], rows: &[[String; 7]]) {
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    for cells in std::iter::once(header).chain(rows) {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(&width).enumerate() {
            let pad = w - c.chars().count();
            if i < 3 {
                let _ = write!(l, "{c}{}  ", " ".repeat(pad));
            } else {
                let _ = write!(l, "{}{c}  ", " ".repeat(pad));
            }
        }
        let _ = writeln!(out, "  {}", l.trim_end());
    }
}

impl Exporter for TopSitesExporter {
    fn destinations(&self) -> Vec<Destination> {
        vec![Destination::Stderr]
    }

    fn render(&self, report: &RunReport) -> Result<Vec<Artifact>, ExportError> {
        let text = self.to_text(report);
        if text.is_empty() {
            return Ok(Vec::new());
        }
        // A blank line after the text report's last section.
        Ok(vec![Artifact {
            destination: Destination::Stderr,
            bytes: format!("\n{text}").into_bytes(),
        }])
    }
}
