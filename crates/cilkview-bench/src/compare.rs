//! The measured speedups beside a predicted range.

use cilkview_engine::Speedup;
use serde::{Deserialize, Serialize};

use crate::BenchReport;

/// Where a measured speedup lies relative to the predicted range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// The trials' speedups (min to max) overlap the range.
    Inside,
    /// Even the slowest trial beat the upper bound (superlinear effects: caches, or a
    /// prediction from a different input).
    Above,
    /// Even the fastest trial fell short of the lower bound (memory bandwidth, contention,
    /// false sharing, a runtime's overheads: what the instruction counts cannot see).
    Below,
}

impl Placement {
    /// Classifies the interval `[min, max]` of measured speedups against `range`.
    pub fn of(min: f64, max: f64, range: &Speedup) -> Placement {
        if min > range.upper {
            Placement::Above
        } else if max < range.lower {
            Placement::Below
        } else {
            Placement::Inside
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Inside => "inside",
            Placement::Above => "above",
            Placement::Below => "below",
        }
    }
}

/// Annotates every result that has a predicted range (`predict(P)`) with it and its placement.
pub fn compare(report: &mut BenchReport, predict: impl Fn(u32) -> Option<Speedup>) {
    for r in &mut report.results {
        r.predicted = predict(r.cores);
        r.placement = r
            .predicted
            .map(|range| Placement::of(r.speedup.min, r.speedup.max, &range));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement() {
        let r = Speedup {
            cores: 4,
            lower: 2.0,
            upper: 3.0,
        };
        assert_eq!(Placement::of(1.0, 2.1, &r), Placement::Inside);
        assert_eq!(Placement::of(2.9, 3.5, &r), Placement::Inside);
        assert_eq!(Placement::of(3.1, 3.5, &r), Placement::Above);
        assert_eq!(Placement::of(1.0, 1.9, &r), Placement::Below);
    }
}
