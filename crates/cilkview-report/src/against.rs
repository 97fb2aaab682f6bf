//! `report TIME.json --against EXACT.json`: a report by time set beside an exact one of the same
//! program, region by region. Work by time over work in instructions is the program's average
//! time per instruction; the same over the span is the critical path's. Where the critical path
//! runs much slower per instruction than the average, its strands wait on memory or the kernel
//! (page faults, system calls): its parallelism by time is lower than by instructions, and that
//! is a finding about the program, not the measurement's noise (docs/counters.md).

use std::fmt::Write;

use cilkview_events::{CostUnit, CounterMode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{MeasuresReport, RunReport};

/// How much slower per instruction the critical path must run than the average before the
/// report says so: twice (one run's span by time also holds the machine's interruptions, a few
/// % to tens of % of a short span; `--repeat` narrows them).
pub const SLOWER_PATH: f64 = 2.0;

/// The comparison: the exact report's file and counter, and a row per part measured in both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgainstReport {
    /// The exact report's file, as given.
    pub file: String,
    /// The counter of the exact report (`"emulate"`, `"step"`, `"hw"`, or `"native"` by rdpmc).
    pub counter: CounterMode,
    /// The whole program first (label `""`), then each region both reports have, by label.
    pub parts: Vec<AgainstPart>,
}

/// One part (the whole program or a region) by time and by instructions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgainstPart {
    /// The region's label; `""` for the whole program.
    pub label: String,
    /// Nanoseconds per instruction over the work.
    pub work_ns_per_instruction: f64,
    /// Nanoseconds per instruction over the span (the critical path).
    pub span_ns_per_instruction: f64,
    /// The second over the first: how much slower per instruction the critical path runs.
    pub span_slower: f64,
    /// Parallelism by time and by instructions.
    pub parallelism_by_time: f64,
    pub parallelism_by_instructions: f64,
}

/// Why two reports cannot be set side by side.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AgainstError {
    #[error(
        "--against compares a report by time with an exact one: {0} counts {1}, not nanoseconds"
    )]
    NotTime(String, CostUnit),
    #[error("--against needs an exact report (instructions): {0} counts {1}")]
    NotExact(String, CostUnit),
    #[error(
        "--against compares two runs of one program: {time} ran `{time_program}`, {exact} ran \
         `{exact_program}`"
    )]
    OtherProgram {
        time: String,
        time_program: String,
        exact: String,
        exact_program: String,
    },
}

/// `time` (nanoseconds) beside `exact` (instructions), read from `time_file` and `exact_file`.
pub fn time_against_exact(
    time: &RunReport,
    time_file: &str,
    exact: &RunReport,
    exact_file: &str,
) -> Result<AgainstReport, AgainstError> {
    if time.unit != CostUnit::Nanoseconds {
        return Err(AgainstError::NotTime(time_file.into(), time.unit));
    }
    if exact.unit != CostUnit::Instructions {
        return Err(AgainstError::NotExact(exact_file.into(), exact.unit));
    }
    if command(time) != command(exact) {
        let line = |r: &RunReport| command(r).join(" ");
        return Err(AgainstError::OtherProgram {
            time: time_file.into(),
            time_program: line(time),
            exact: exact_file.into(),
            exact_program: line(exact),
        });
    }
    let mut parts = vec![part("", &time.measures, &exact.measures)];
    for region in &time.regions {
        if let Some(other) = exact.regions.iter().find(|r| r.label == region.label) {
            parts.push(part(&region.label, &region.measures, &other.measures));
        }
    }
    Ok(AgainstReport {
        file: exact_file.into(),
        counter: exact.counter.mode,
        parts,
    })
}

/// The program and its arguments.
fn command(r: &RunReport) -> Vec<&str> {
    std::iter::once(r.program.as_str())
        .chain(r.args.iter().map(String::as_str))
        .collect()
}

fn part(label: &str, time: &MeasuresReport, exact: &MeasuresReport) -> AgainstPart {
    let per = |ns: u64, instructions: u64| ns as f64 / instructions.max(1) as f64;
    let work = per(time.work, exact.work);
    let span = per(time.span, exact.span);
    let parallelism = |m: &MeasuresReport| m.work as f64 / m.span.max(1) as f64;
    AgainstPart {
        label: label.into(),
        work_ns_per_instruction: work,
        span_ns_per_instruction: span,
        span_slower: span / work,
        parallelism_by_time: parallelism(time),
        parallelism_by_instructions: parallelism(exact),
    }
}

/// The text report's section, and a line for each part whose critical path runs
/// [`SLOWER_PATH`] times slower or more.
pub(crate) fn section(out: &mut String, report: &RunReport) {
    let Some(against) = &report.against else {
        return;
    };
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Time per instruction (against {}, counted by {})",
        crate::text::printable(&against.file),
        against.counter.name()
    );
    let _ = writeln!(
        out,
        "{:<32} {:>14} {:>14} {:>13} {:>24}",
        "", "work ns/instr", "span ns/instr", "span slower", "parallelism time / instr"
    );
    for p in &against.parts {
        let name = part_name(&p.label);
        let _ = writeln!(
            out,
            "{:<32} {:>14.3} {:>14.3} {:>12.1}x {:>11.2} / {:.2}",
            name,
            p.work_ns_per_instruction,
            p.span_ns_per_instruction,
            p.span_slower,
            p.parallelism_by_time,
            p.parallelism_by_instructions
        );
    }
    for p in against
        .parts
        .iter()
        .filter(|p| p.span_slower >= SLOWER_PATH)
    {
        let _ = writeln!(
            out,
            "{}: the critical path runs {:.1}x slower per instruction than the work as a whole: \
             its strands wait on memory or the kernel (page faults, system calls); parallelism \
             {:.2} by time against {:.2} by instructions is the program's, not noise",
            part_name(&p.label),
            p.span_slower,
            p.parallelism_by_time,
            p.parallelism_by_instructions
        );
    }
}

fn part_name(label: &str) -> String {
    if label.is_empty() {
        "whole program".into()
    } else {
        format!("region \"{}\"", crate::text::printable(label))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(unit: CostUnit, work: u64, span: u64, regions: &[(&str, u64, u64)]) -> RunReport {
        let json = serde_json::json!({
            "program": "./strassen", "args": ["-n", "512"], "unit": unit,
            "counter": {"mode": if unit == CostUnit::Nanoseconds { "native" } else { "emulate" },
                        "reason": ""},
            "work": work, "span": span, "burdened_span": span,
            "regions": regions.iter().map(|(l, w, s)| serde_json::json!(
                {"label": l, "work": w, "span": s, "burdened_span": s})).collect::<Vec<_>>(),
        });
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_critical_path_slower_per_instruction_is_said() {
        // cilkbench's strassen 512: the kernel 240M instructions, span 3.3M; by time 120 ms,
        // span 19.6 ms (11.9x slower per instruction than the work).
        let exact = report(
            CostUnit::Instructions,
            250_000_000,
            3_500_000,
            &[("kernel", 240_000_000, 3_340_000), ("only here", 1, 1)],
        );
        let mut time = report(
            CostUnit::Nanoseconds,
            125_000_000,
            20_000_000,
            &[("kernel", 120_000_000, 19_600_000)],
        );
        let against = time_against_exact(&time, "t.json", &exact, "e.json").unwrap();
        assert_eq!(against.counter, CounterMode::Emulate);
        assert_eq!(against.parts.len(), 2);
        let kernel = &against.parts[1];
        assert_eq!(kernel.label, "kernel");
        assert!((kernel.work_ns_per_instruction - 0.5).abs() < 1e-12);
        assert!((kernel.span_slower - 19.6 / 3.34 / 0.5).abs() < 1e-9);
        assert!((kernel.parallelism_by_instructions - 240.0 / 3.34).abs() < 1e-9);
        time.against = Some(against);
        let mut text = String::new();
        section(&mut text, &time);
        assert!(text.contains("Time per instruction (against e.json, counted by emulate)"));
        assert!(text.contains(
            "region \"kernel\": the critical path runs 11.7x slower per instruction than the work"
        ));
        assert!(text.contains("whole program: the critical path runs 11.4x slower"));
    }

    #[test]
    fn a_path_as_fast_as_the_work_says_nothing() {
        let exact = report(CostUnit::Instructions, 1_000_000, 10_000, &[]);
        let mut time = report(CostUnit::Nanoseconds, 400_000, 5_000, &[]);
        time.against = Some(time_against_exact(&time, "t", &exact, "e").unwrap());
        let mut text = String::new();
        section(&mut text, &time);
        assert!(text.contains("1.2x"), "{text}");
        assert!(!text.contains("critical path runs"), "{text}");
    }

    #[test]
    fn the_units_and_the_program_must_fit() {
        let exact = report(CostUnit::Instructions, 1, 1, &[]);
        let time = report(CostUnit::Nanoseconds, 1, 1, &[]);
        assert_eq!(
            time_against_exact(&exact, "a", &exact, "b")
                .unwrap_err()
                .to_string(),
            "--against compares a report by time with an exact one: a counts instructions, not \
             nanoseconds"
        );
        assert_eq!(
            time_against_exact(&time, "a", &time, "b")
                .unwrap_err()
                .to_string(),
            "--against needs an exact report (instructions): b counts nanoseconds"
        );
        let mut other = exact.clone();
        other.args = vec!["-n".into(), "1024".into()];
        assert_eq!(
            time_against_exact(&time, "a", &other, "b")
                .unwrap_err()
                .to_string(),
            "--against compares two runs of one program: a ran `./strassen -n 512`, b ran \
             `./strassen -n 1024`"
        );
    }
}
