//! The predicted speedup range of a report at any core count (for benchmarks and plots).

use cilkview_engine::speedup;

use crate::{RunReport, SpeedupRow};

/// The range at P: `lower` the burdened-span bound, `upper` min(P, parallelism).
pub fn predicted(report: &RunReport, cores: u32) -> SpeedupRow {
    let s = speedup(&report.measures(), cores, report.span_coefficient);
    SpeedupRow {
        cores: s.cores,
        lower: s.lower,
        upper: s.upper,
    }
}
