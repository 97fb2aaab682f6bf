//! What a report by time (`--counter native`) cannot resolve, said as warnings: strands too
//! fine for the clock, or short enough that `--repeat` would help, and the work's bound from the
//! marks' own cost; for the whole run and for each region finer than it (a region of fine strands
//! inside a coarse program is not seen in the whole run's mean).

use cilkview_report::RunReport;

/// The warnings on `report`'s times, its run having hit `hits` marks (`can_repeat`: whether
/// `--repeat` could be asked for).
pub(crate) fn time_warnings(report: &RunReport, hits: u64, can_repeat: bool) -> Vec<String> {
    let work = report.measures.work;
    let mut out: Vec<String> = strand_time_warning(hits, work, can_repeat)
        .into_iter()
        .chain(hit_cost_bound(hits, work))
        .collect();
    let whole_too_fine = hits > 0 && work / hits < TOO_FINE_NS;
    for r in &report.regions {
        let Some(events) = r.events.filter(|&n| n > 0) else {
            continue;
        };
        // A region says more than the whole run where its strands are finer (its bound larger).
        let finer =
            u128::from(r.measures.work) * u128::from(hits) < u128::from(work) * u128::from(events);
        if !finer {
            continue;
        }
        let said = |w: String| format!("region \"{}\": {w}", r.label);
        let mean = r.measures.work / events;
        if mean < TOO_FINE_NS && !whole_too_fine {
            out.push(said(too_fine(mean)));
        }
        out.extend(hit_cost_bound(events, r.measures.work).map(said));
    }
    out
}

/// Strands shorter on average than this (ns) say that `--repeat` would help.
const SHORT_STRANDS_NS: u64 = 500_000;
/// Strands shorter on average than this (ns) are of the order of the stub's own cost taken off
/// each (~10 ns, its spread a few ns): time cannot resolve them.
const TOO_FINE_NS: u64 = 25;

/// What a time-based measure of `hits` strands of `work_ns` in all cannot see: strands too fine
/// for time at all, or (when `--repeat` could help) short ones, which the machine's
/// interruptions lengthen — and the span, a longest path, collects them.
fn strand_time_warning(hits: u64, work_ns: u64, can_repeat: bool) -> Option<String> {
    if hits == 0 {
        return None;
    }
    let mean = work_ns / hits;
    let shown = if mean < 1000 {
        format!("{mean} ns")
    } else {
        format!("{:.1} µs", mean as f64 / 1000.0)
    };
    if mean < TOO_FINE_NS {
        return Some(too_fine(mean));
    }
    (can_repeat && mean < SHORT_STRANDS_NS).then(|| {
        format!(
            "strands are short (mean {shown} between marks): each interruption of the machine (a \
             timer tick, the hypervisor; 15–40 µs on a VM) lengthens the strand it lands in and \
             the span collects them, so the parallelism by time reads low; --repeat 5 (or auto) \
             leaves each strand's interrupted runs out and states the noise bound"
        )
    })
}

/// Strands of `mean` ns, below [`TOO_FINE_NS`].
fn too_fine(mean: u64) -> String {
    format!(
        "strands are too fine for time (mean {mean} ns between marks, the order of the mark's own \
         cost taken off each: the counter's reason says it): work and span by time say little \
         here; count instructions (--counter emulate) or mark coarser strands"
    )
}

/// How far a mark hit's cost in a program may be from the one measured at start-up and taken
/// off each strand (ns): measured 1.7–5.5 ns more on cilkbench's fib, nqueens and cholesky (their
/// untraced kernels' CPU time against the work; docs/benchmarks.md).
pub(crate) const HIT_COST_SPREAD_NS: u64 = 5;

/// The work's bound from the marks' own cost, where it exceeds 5% of the work: `hits` hits ×
/// [`HIT_COST_SPREAD_NS`] against `work` (ns).
pub(crate) fn hit_cost_bound(hits: u64, work: u64) -> Option<String> {
    let bound = hits.saturating_mul(HIT_COST_SPREAD_NS);
    (work > 0 && bound * 20 > work).then(|| {
        format!(
            "work by time is uncertain by ±{:.0}% from the marks' own cost: {hits} hits × \
             ~{HIT_COST_SPREAD_NS} ns, how far a hit's cost in a program may be from the one \
             measured at start-up and taken off each strand; mark coarser strands or count \
             instructions (--counter emulate) for a finer work",
            100.0 * bound as f64 / work as f64
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cilkview_engine::{Measures, RegionId, RegionMeasures, Report};

    /// A report of `work` ns in `hits` strands, with regions of (work, events).
    fn report(work: u64, regions: &[(u64, u64)]) -> RunReport {
        let m = |work| Measures {
            work,
            span: work,
            burdened_span: work,
            spawns: 0,
            syncs: 0,
        };
        let regions = regions
            .iter()
            .enumerate()
            .map(|(i, &(work, events))| RegionMeasures {
                id: RegionId(i as u32),
                count: 1,
                events,
                measures: m(work),
            });
        let engine = Report {
            total: m(work),
            regions: regions.collect(),
            ..Report::default()
        };
        RunReport::new(crate::tests::info(), &engine, |i| format!("r{i}"))
    }

    #[test]
    fn a_region_finer_than_its_run_is_said_apart() {
        // The fine tree of leaf 100 inside its plain trees: the run's 458,744 strands of 30 ns
        // on average, the region's 229,371 of 6 ns (1.4 ms).
        let r = report(14_000_000, &[(1_400_000, 229_371), (9_000_000, 100)]);
        let w = time_warnings(&r, 458_744, false);
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(
            w[0].starts_with("work by time is uncertain by ±16%"),
            "{w:?}"
        );
        assert!(
            w[1].starts_with("region \"r0\": strands are too fine for time (mean 6 ns between"),
            "{w:?}"
        );
        assert!(
            w[2].starts_with("region \"r0\": work by time is uncertain by ±82%"),
            "{w:?}"
        );
        // A run too fine already says so: its region's bound only.
        let w = time_warnings(&report(1_000_000, &[(100_000, 50_000)]), 100_000, false);
        assert!(
            w[0].starts_with("strands are too fine for time (mean 10 ns"),
            "{w:?}"
        );
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[2].starts_with("region \"r0\": work by time is uncertain by ±250%"));
        // A region as coarse as its run, or with no events: nothing of its own.
        let w = time_warnings(
            &report(50_000_000, &[(5_000_000, 100_000), (1, 0)]),
            1_000_000,
            false,
        );
        assert_eq!(w, [hit_cost_bound(1_000_000, 50_000_000).unwrap()]);
    }

    #[test]
    fn the_marks_own_cost_bounds_fine_grained_work() {
        // 177k hits in 12.5 ms (nqueens 10): ±7%; 1,000 hits in 12.5 ms: nothing to say.
        assert_eq!(
            hit_cost_bound(177_000, 12_500_000).unwrap(),
            "work by time is uncertain by ±7% from the marks' own cost: 177000 hits × ~5 ns, \
             how far a hit's cost in a program may be from the one measured at start-up and taken \
             off each strand; mark coarser strands or count instructions (--counter emulate) for \
             a finer work"
        );
        assert_eq!(hit_cost_bound(1_000, 12_500_000), None);
        assert_eq!(hit_cost_bound(1_000, 0), None);
    }
}
