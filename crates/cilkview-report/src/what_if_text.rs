//! The text report's "What if" and "Plan" sections (`--what-if`, `--target-parallelism`).

use std::fmt::Write;

use cilkview_events::CostUnit;
use num_format::{Locale, ToFormattedString};

use crate::{PlanReport, RunReport, WhatIfReport};

fn n(v: u64) -> String {
    v.to_formatted_string(&Locale::en)
}

/// Both sections, when the report has them.
pub(crate) fn sections(out: &mut String, report: &RunReport) {
    if let Some(w) = &report.what_if {
        what_if(out, w, report);
    }
    if let Some(p) = &report.target_plan {
        plan(out, p, report);
    }
}

fn what_if(out: &mut String, w: &WhatIfReport, report: &RunReport) {
    let unit: CostUnit = report.unit;
    let sites = report.call_sites.as_deref().unwrap_or_default();
    let _ = writeln!(out);
    let _ = writeln!(out, "What if");
    for c in &w.changes {
        let named: Vec<String> = c
            .sites
            .iter()
            .filter_map(|&i| sites.get(i))
            .map(|s| s.label())
            .collect();
        let what = if named.is_empty() {
            "the region, taken to lie on the critical path".to_string()
        } else {
            format!(
                "{} call site{}: {}",
                named.len(),
                plural(named.len()),
                named.join("; ")
            )
        };
        let _ = writeln!(out, "  {}  ({what})", c.spec);
    }
    let (b, a) = (&w.before.measures, &w.after.measures);
    let _ = writeln!(out, "{:24}{:>20}    {:>20}", "", "measured", "what-if");
    let row = |out: &mut String, name: &str, x: String, y: String| {
        let _ = writeln!(out, "{name:24}{x:>20} -> {y:>20}");
    };
    row(out, &format!("Work ({unit})"), n(b.work), n(a.work));
    row(out, &format!("Span ({unit})"), n(b.span), n(a.span));
    row(out, "Burdened span", n(b.burdened_span), n(a.burdened_span));
    row(
        out,
        "Parallelism",
        format!("{:.2}", b.parallelism),
        format!("{:.2}", a.parallelism),
    );
    row(
        out,
        "Burdened parallelism",
        format!("{:.2}", b.burdened_parallelism),
        format!("{:.2}", a.burdened_parallelism),
    );
    for (x, y) in w.before.speedup.iter().zip(&w.after.speedup) {
        row(
            out,
            &format!("Speedup, {} processors", x.cores),
            format!("{:.2} – {:.2}", x.lower, x.upper),
            format!("{:.2} – {:.2}", y.lower, y.upper),
        );
    }
    let _ = writeln!(
        out,
        "(work exact; span: the measured critical path rescaled, a lower bound that is exact \
         while that path stays the longest)"
    );
}

fn plan(out: &mut String, p: &PlanReport, report: &RunReport) {
    let sites = report.call_sites.as_deref().unwrap_or_default();
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Plan for parallelism {} (now {:.2}): make the own code of these call sites parallel, in this order",
        p.target, report.measures.parallelism
    );
    for (i, s) in p.steps.iter().enumerate() {
        let name = sites
            .get(s.site)
            .map_or_else(|| format!("{} {}", s.function, s.location), |c| c.label());
        let _ = writeln!(
            out,
            "  {}. {name}  span -{} {} -> parallelism {:.2}",
            i + 1,
            n(s.span_removed),
            report.unit,
            s.parallelism
        );
    }
    if p.steps.is_empty() && p.reached {
        let _ = writeln!(out, "  nothing: the parallelism is already {}", p.target);
    }
    if !p.reached {
        let _ = writeln!(
            out,
            "  not reachable by parallelizing call sites: the serial part is {} {} \
             (the critical path outside every call site): parallelism at most {:.2}",
            n(p.serial_span),
            report.unit,
            ratio(report.measures.work, p.serial_span)
        );
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        f64::INFINITY
    } else {
        a as f64 / b as f64
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
