//! The predicted speedup range of a report at any core count (for benchmarks and plots).

use cilkview_engine::{speedup_with_task_cost, Speedup};

use crate::RunReport;

/// The range at P: `lower` the burdened-span bound, `upper` min(P, parallelism).
pub fn predicted(report: &RunReport, cores: u32) -> Speedup {
    speedup_with_task_cost(
        &report.measures.measured(),
        cores,
        report.span_coefficient,
        report.task_cost(),
    )
}
