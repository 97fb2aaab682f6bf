//! The text report, laid out as Figure 6 of the Cilkview paper.

use std::fmt::Write;

use cilkview_engine::Measures;
use cilkview_events::CostUnit;
use num_format::{Locale, ToFormattedString};

use crate::{Artifact, Destination, ExportError, Exporter, RunReport, Speedup};

/// Renders to standard error; `verbose` (`-v`) adds each note's long form.
#[derive(Clone, Copy, Debug, Default)]
pub struct TextExporter {
    pub verbose: bool,
}

fn n(v: u64) -> String {
    v.to_formatted_string(&Locale::en)
}

/// A cost as a reader takes it in: instructions counted with separators, a time in the unit that
/// keeps it between 1 and 1000 (14,950,322 ns reads `14.95 ms`). JSON keeps the raw number.
pub(crate) fn cost(v: u64, unit: CostUnit) -> String {
    match unit {
        CostUnit::Instructions => format!("{} {unit}", n(v)),
        CostUnit::Nanoseconds => {
            let ns = v as f64;
            match v {
                0..=999 => format!("{v} ns"),
                1_000..=999_999 => format!("{:.2} µs", ns / 1e3),
                1_000_000..=999_999_999 => format!("{:.2} ms", ns / 1e6),
                _ => format!("{:.2} s", ns / 1e9),
            }
        }
    }
}

fn profile(out: &mut String, m: &Measures, unit: CostUnit) {
    let _ = writeln!(out, "Work: {}", cost(m.work, unit));
    let _ = writeln!(out, "Span: {}", cost(m.span, unit));
    let _ = writeln!(out, "Burdened span: {}", cost(m.burdened_span, unit));
    let _ = writeln!(out, "Parallelism: {:.2}", m.parallelism());
    let _ = writeln!(out, "Burdened parallelism: {:.2}", m.burdened_parallelism());
    let _ = writeln!(out, "Spawns: {}", n(m.spawns));
    let _ = writeln!(out, "Syncs: {}", n(m.syncs));
}

fn table(out: &mut String, rows: &[Speedup]) {
    for r in rows {
        let _ = writeln!(
            out,
            "{} processors: {:.2} – {:.2}",
            r.cores, r.lower, r.upper
        );
    }
}

/// A cost in the side-by-side table's cells: instructions as counted (the header says so), a time
/// in human units.
fn short_cost(v: u64, unit: CostUnit) -> String {
    match unit {
        CostUnit::Instructions => n(v),
        CostUnit::Nanoseconds => cost(v, unit),
    }
}

/// The whole run and each region in one table: a small run's whole-program numbers are mostly
/// its serial start-up, the region's are the computation's.
fn side_by_side(out: &mut String, report: &RunReport) {
    let mut rows = vec![("whole program".to_string(), report.measures.measured())];
    rows.extend(report.regions.iter().map(|r| {
        (
            format!("region \"{}\"", printable(&r.label)),
            r.measures.measured(),
        )
    }));
    const TITLE: &str = "Whole program and regions";
    let width = rows
        .iter()
        .map(|(name, _)| name.chars().count())
        .chain([TITLE.len()])
        .max()
        .unwrap_or(0);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:width$}  {:>15}  {:>15}  {:>11}  {:>20}  {:>10}",
        TITLE, "work", "span", "parallelism", "burdened parallelism", "% of work"
    );
    for (name, m) in &rows {
        let _ = writeln!(
            out,
            "{name:width$}  {:>15}  {:>15}  {:>11.2}  {:>20.2}  {:>9.1}%",
            short_cost(m.work, report.unit),
            short_cost(m.span, report.unit),
            m.parallelism(),
            m.burdened_parallelism(),
            100.0 * m.work as f64 / report.measures.work.max(1) as f64
        );
    }
}

/// `s` safe to print on a terminal: control characters (escape sequences, newlines that would
/// forge a line of their own) are shown escaped (`\u{1b}`, `\n`); the rest as it is. A report
/// read back from JSON is not trusted to be the tool's own.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return s.into();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

impl TextExporter {
    /// The report as text (the notes in one line each).
    pub fn to_text(report: &RunReport) -> String {
        TextExporter::default().text(report)
    }

    /// The report as text, the notes' long forms too if `self.verbose`.
    pub fn text(&self, report: &RunReport) -> String {
        let mut out = String::new();
        let mut command = printable(&report.program).into_owned();
        for a in &report.args {
            command.push(' ');
            command.push_str(&printable(a));
        }
        match &report.attach {
            None => {
                let _ = writeln!(out, "cilkview-rs: {command} ({})", report.ending());
            }
            Some(a) => {
                let _ = writeln!(
                    out,
                    "cilkview-rs: attached to process {} ({command}) at {} for {:.1} s, {}; \
                     the measures cover only that window",
                    a.pid,
                    a.started_at,
                    a.seconds,
                    match a.ended.as_str() {
                        "exited" => format!("until it ended ({})", report.ending()),
                        "duration" => "until --duration elapsed; it runs on".to_string(),
                        _ => "until stopped; it runs on".to_string(),
                    }
                );
            }
        }
        let _ = writeln!(
            out,
            "Counter: {} — {}",
            report.counter.mode,
            printable(&report.counter.reason)
        );
        for note in &report.counter.notes {
            let _ = writeln!(out, "note: {}", printable(&note.text));
            if let (true, Some(detail)) = (self.verbose, &note.detail) {
                let _ = writeln!(out, "      {}", printable(detail));
            }
        }
        let _ = writeln!(
            out,
            "Model: burden {} per continuation, span coefficient {}",
            cost(report.burden, report.unit),
            report.span_coefficient
        );
        if let Some(runtime) = &report.runtime {
            runtime.to_text(report.unit, &mut out);
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "1) Parallelism Profile");
        let m = report.measures.measured();
        profile(&mut out, &m, report.unit);
        let _ = writeln!(
            out,
            "Average maximal strand: {} (work per strand between marks)",
            cost(m.average_maximal_strand().round() as u64, report.unit)
        );
        let _ = writeln!(out);
        let _ = writeln!(out, "2) Speedup Estimate");
        table(&mut out, &report.speedup);
        crate::locks::bound_line(&mut out, report);
        if !report.regions.is_empty() {
            side_by_side(&mut out, report);
        }
        region_sections(&mut out, report);
        crate::locks::section(&mut out, report);
        crate::what_if_text::sections(&mut out, report);
        crate::against::section(&mut out, report);
        out
    }
}

/// Each region's profile and speedup table, numbered after the whole run's two sections.
fn region_sections(out: &mut String, report: &RunReport) {
    let max_cores = report.max_cores();
    for (i, r) in report.regions.iter().enumerate() {
        let _ = writeln!(out);
        let _ = writeln!(out, "{}) Region \"{}\"", i + 3, printable(&r.label));
        profile(out, &r.measures.measured(), report.unit);
        let _ = writeln!(out, "Speedup Estimate");
        table(
            out,
            &crate::speedup_table(
                &r.measures.measured(),
                max_cores,
                report.span_coefficient,
                report.task_cost(),
            ),
        );
    }
}

impl Exporter for TextExporter {
    fn destinations(&self) -> Vec<Destination> {
        vec![Destination::Stderr]
    }

    fn render(&self, report: &RunReport) -> Result<Vec<Artifact>, ExportError> {
        Ok(vec![Artifact {
            destination: Destination::Stderr,
            bytes: self.text(report).into_bytes(),
        }])
    }
}

/// The report's warnings (`warning: …`, one line each), before everything else on standard
/// error.
pub struct WarningsExporter;

impl Exporter for WarningsExporter {
    fn destinations(&self) -> Vec<Destination> {
        vec![Destination::Stderr]
    }

    fn render(&self, report: &RunReport) -> Result<Vec<Artifact>, ExportError> {
        let mut text = String::new();
        for w in &report.warnings {
            let _ = writeln!(text, "warning: {}", printable(w));
        }
        Ok(vec![Artifact {
            destination: Destination::Stderr,
            bytes: text.into_bytes(),
        }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_in_human_units_and_instructions_as_counted() {
        let ns = CostUnit::Nanoseconds;
        assert_eq!(cost(14_950_322, ns), "14.95 ms");
        assert_eq!(cost(5_000, ns), "5.00 µs");
        assert_eq!(cost(850, ns), "850 ns");
        assert_eq!(cost(2_345_000_000, ns), "2.35 s");
        assert_eq!(
            cost(14_950_322, CostUnit::Instructions),
            "14,950,322 instructions"
        );
    }
}
