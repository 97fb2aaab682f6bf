//! The predicted speedup range of a report at any core count (for benchmarks and plots).

use cilkview_engine::speedup_with_task_cost;

use crate::{RunReport, SpeedupRow};

/// The range at P: `lower` the burdened-span bound, `upper` min(P, parallelism).
pub fn predicted(report: &RunReport, cores: u32) -> SpeedupRow {
    let s = speedup_with_task_cost(
        &report.measures(),
        cores,
        report.span_coefficient,
        report.task_cost(),
    );
    SpeedupRow {
        cores: s.cores,
        lower: s.lower,
        upper: s.upper,
    }
}
