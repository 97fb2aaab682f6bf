//! Measures and the speedup estimates derived from them (pure arithmetic).

use crate::event::RegionId;
use crate::profile::Profile;

/// Work, span and burdened span of a (sub-)computation, with its spawn and sync counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measures {
    /// T1: total cost of all strands.
    pub work: u64,
    /// T∞: cost of the longest path through the dag.
    pub span: u64,
    /// Longest path through the burdened dag (a burden on every continuation edge).
    pub burdened_span: u64,
    pub spawns: u64,
    pub syncs: u64,
}

/// `a / b` as a ratio, with the conventions of the report: an empty computation (0 / 0) has
/// ratio 1 (it is serial); anything else over 0 cannot happen for consistent measures (span ≥ 1
/// whenever work ≥ 1) but is reported as infinite rather than panicking.
fn ratio(a: u64, b: u64) -> f64 {
    match (a, b) {
        (0, 0) => 1.0,
        (_, 0) => f64::INFINITY,
        _ => a as f64 / b as f64,
    }
}

impl Measures {
    /// Parallelism T1/T∞: the maximum possible speedup on any number of cores.
    pub fn parallelism(&self) -> f64 {
        ratio(self.work, self.span)
    }

    /// Burdened parallelism T1 / burdened span: below P means P cores cannot pay for the
    /// scheduling overhead of migrating tasks.
    pub fn burdened_parallelism(&self) -> f64 {
        ratio(self.work, self.burdened_span)
    }

    /// Average maximal strand: work / (1 + 2·spawns + syncs), as in the Cilkview report.
    pub fn average_maximal_strand(&self) -> f64 {
        self.work as f64 / (1 + 2 * self.spawns + self.syncs) as f64
    }

    /// Speedup range on `cores` processors with span coefficient `delta` (Cilkview uses 0.85).
    pub fn speedup(&self, cores: u32, delta: f64) -> Speedup {
        speedup(self, cores, delta)
    }

    /// Sum of measures of two computations run one after the other (how a repeated region
    /// accumulates).
    pub fn then(&self, other: &Measures) -> Measures {
        Measures {
            work: self.work.saturating_add(other.work),
            span: self.span.saturating_add(other.span),
            burdened_span: self.burdened_span.saturating_add(other.burdened_span),
            spawns: self.spawns.saturating_add(other.spawns),
            syncs: self.syncs.saturating_add(other.syncs),
        }
    }
}

impl Measures {
    /// Measures of two computations that run in parallel from start to end (the threads of one
    /// process): work, spawns and syncs add up; the span is the longer one.
    pub fn beside(&self, other: &Measures) -> Measures {
        Measures {
            work: self.work.saturating_add(other.work),
            span: self.span.max(other.span),
            burdened_span: self.burdened_span.max(other.burdened_span),
            spawns: self.spawns.saturating_add(other.spawns),
            syncs: self.syncs.saturating_add(other.syncs),
        }
    }
}

/// Measures of one label, accumulated over every time its region ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionMeasures {
    pub id: RegionId,
    /// How many times a region with this label ended.
    pub count: u64,
    /// The events after each of its begins up to and including its end: its strands, summed
    /// over every time it ran (its mean strand is the work over these).
    pub events: u64,
    pub measures: Measures,
}

/// How many malformed or partial-stream situations the engine absorbed (see docs/engine.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Anomalies {
    /// Function exits, spawn returns, iteration or loop ends with no matching opener
    /// (normal when a stream starts in the middle of a run).
    pub unmatched_closers: u64,
    /// Iteration begins outside any parallel loop.
    pub stray_iterations: u64,
    /// Region ends with no open region of that label in the current function instance, and
    /// region begins between the iterations of a parallel loop.
    pub unmatched_regions: u64,
    /// Regions still open when their function instance (or the stream) ended; they were ended there.
    pub implicit_region_ends: u64,
    /// Frames closed implicitly because a closer skipped over them (e.g. a missing function exit).
    pub implicit_frame_ends: u64,
}

impl Anomalies {
    pub fn is_clean(&self) -> bool {
        *self == Anomalies::default()
    }

    fn add(&mut self, o: &Anomalies) {
        self.unmatched_closers += o.unmatched_closers;
        self.stray_iterations += o.stray_iterations;
        self.unmatched_regions += o.unmatched_regions;
        self.implicit_region_ends += o.implicit_region_ends;
        self.implicit_frame_ends += o.implicit_frame_ends;
    }
}

/// Everything the engine measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    pub total: Measures,
    /// Number of events consumed.
    pub events: u64,
    /// Per label, ordered by id.
    pub regions: Vec<RegionMeasures>,
    pub anomalies: Anomalies,
    /// Call-site profile, when the engine was built with [`crate::Engine::with_profile`].
    pub profile: Option<Profile>,
}

impl Report {
    /// The report of two event streams that ran in parallel from start to end — the threads of
    /// one process, each measured by its own engine. The totals combine with
    /// [`Measures::beside`]; a label measured in both accumulates (as a repeated region does).
    pub fn beside(mut self, other: Report) -> Report {
        self.total = self.total.beside(&other.total);
        self.events += other.events;
        self.anomalies.add(&other.anomalies);
        for r in other.regions {
            match self.regions.iter_mut().find(|mine| mine.id == r.id) {
                Some(mine) => {
                    mine.count += r.count;
                    mine.events += r.events;
                    mine.measures = mine.measures.then(&r.measures);
                }
                None => self.regions.push(r),
            }
        }
        self.regions.sort_by_key(|r| r.id);
        self.profile = match (self.profile.take(), other.profile) {
            (Some(a), Some(b)) => Some(a.beside(b)),
            (a, b) => a.or(b),
        };
        self
    }
}

/// The speedup range predicted for one core count: a row of the speedup table, or the prediction
/// beside a measured speedup. An undefined bound (a span of 0) is written `null` in JSON.
// (Features `serde` and `schemars`: the report's and the benchmark's JSON; `null` reads as NaN.)
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Speedup {
    pub cores: u32,
    /// Burdened lower bound T1 / (T1/P + 2δ(1 − 1/P)·burdened span); 1 (at most the upper
    /// bound) with no spawns.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "nullable"))]
    pub lower: f64,
    /// min(P, parallelism): the work law and the span law.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "nullable"))]
    pub upper: f64,
}

/// A bound as written: JSON has no NaN, so an undefined one is `null`, read back as NaN.
#[cfg(feature = "serde")]
fn nullable<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    use serde::Deserialize;
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// The default span coefficient δ of the Cilkview paper.
pub const DEFAULT_SPAN_COEFFICIENT: f64 = 0.85;

/// Speedup bounds on `cores` processors (see docs/engine.md for the formula and its source).
pub fn speedup(m: &Measures, cores: u32, delta: f64) -> Speedup {
    speedup_with_task_cost(m, cores, delta, 0)
}

/// [`speedup`] with a runtime's cost per spawn charged to the work of the lower bound on two
/// cores or more (libgomp's locked task queue, `run --openmp`):
/// T1 / ((T1 + spawns·task_cost)/P + 2δ(1 − 1/P)·burdened span). The upper bound and the
/// one-core estimate (1) are unchanged: the cost is a queue's contention, between nothing and
/// the calibrated cost. A `task_cost` of 0 is [`speedup`] exactly.
pub fn speedup_with_task_cost(m: &Measures, cores: u32, delta: f64, task_cost: u64) -> Speedup {
    let p = f64::from(cores.max(1));
    let t1 = m.work as f64;
    let upper = p.min(m.parallelism());
    let lower = if m.work == 0 {
        1.0
    } else if m.spawns == 0 {
        // Nothing spawned, nothing stolen: no burden is paid, and the serial run is the run.
        upper.min(1.0)
    } else {
        let runtime = if cores > 1 {
            m.spawns as f64 * task_cost as f64
        } else {
            0.0
        };
        let denominator =
            (t1 + runtime) / p + 2.0 * delta * (1.0 - 1.0 / p) * m.burdened_span as f64;
        (t1 / denominator).min(upper)
    };
    Speedup {
        cores: cores.max(1),
        lower,
        upper,
    }
}

/// The speedup bound a lock sets, held for `held` of the run's `work`: its critical sections run
/// one at a time, so no schedule finishes before `held`, and the speedup is at most
/// `work / held` (docs/locks.md). Infinite when the lock holds nothing.
pub fn contention_bound(work: u64, held: u64) -> f64 {
    if held == 0 {
        f64::INFINITY
    } else {
        work as f64 / held as f64
    }
}

impl Speedup {
    /// The same range under a further upper `bound` (a lock's [`contention_bound`]): both
    /// bounds at most it.
    pub fn within(self, bound: f64) -> Speedup {
        Speedup {
            cores: self.cores,
            lower: self.lower.min(bound),
            upper: self.upper.min(bound),
        }
    }
}

/// The core counts of the report's speedup table: 2, 4, 8, … up to `max`, and `max` itself when it
/// is not a power of two. Empty for `max` < 2.
pub fn core_counts(max: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut p: u32 = 2;
    while p <= max {
        out.push(p);
        match p.checked_mul(2) {
            Some(next) => p = next,
            None => break,
        }
    }
    if max >= 2 && out.last() != Some(&max) {
        out.push(max);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock held for a quarter of the work caps the speedup at 4, below P and the parallelism.
    #[test]
    fn a_lock_held_for_a_quarter_of_the_work_bounds_the_speedup_at_4() {
        let m = Measures {
            work: 1_000_000,
            span: 10_000,
            burdened_span: 12_000,
            spawns: 100,
            syncs: 100,
        };
        let bound = contention_bound(m.work, 250_000);
        assert_eq!(bound, 4.0);
        let s = speedup(&m, 8, DEFAULT_SPAN_COEFFICIENT).within(bound);
        assert_eq!((s.cores, s.upper), (8, 4.0));
        assert!(s.lower <= 4.0);
        let two = speedup(&m, 2, DEFAULT_SPAN_COEFFICIENT);
        assert_eq!(two.within(bound), two, "below the bound nothing changes");
        assert_eq!(contention_bound(m.work, 0), f64::INFINITY);
    }

    /// The Cilkview paper's Figure 6 (quicksort): the numbers it prints must come out of our formulas.
    #[test]
    fn figure_6() {
        let m = Measures {
            work: 5_570_609_776,
            span: 261_374_874,
            burdened_span: 262_078_779,
            spawns: 8_518_398,
            syncs: 8_518_398,
        };
        assert_eq!(format!("{:.2}", m.parallelism()), "21.31");
        assert_eq!(format!("{:.2}", m.burdened_parallelism()), "21.26");
        assert_eq!(format!("{:.0}", m.average_maximal_strand()), "218");
        let expected = [
            (2, "1.85", "2.00"),
            (4, "3.23", "4.00"),
            (8, "5.13", "8.00"),
            (16, "7.27", "16.00"),
            (32, "9.20", "21.31"),
        ];
        let cores = core_counts(32);
        assert_eq!(cores, vec![2, 4, 8, 16, 32]);
        for (p, lo, hi) in expected {
            let s = m.speedup(p, DEFAULT_SPAN_COEFFICIENT);
            assert_eq!(
                (format!("{:.2}", s.lower), format!("{:.2}", s.upper)),
                (lo.to_string(), hi.to_string()),
                "P = {p}"
            );
        }
    }

    #[test]
    fn one_core_and_empty() {
        let m = Measures {
            work: 100,
            span: 10,
            burdened_span: 1000,
            ..Measures::default()
        };
        let s = m.speedup(1, 0.85);
        assert_eq!((s.lower, s.upper), (1.0, 1.0));
        let empty = Measures::default();
        assert_eq!(empty.parallelism(), 1.0);
        assert_eq!(empty.speedup(8, 0.85).lower, 1.0);
        assert_eq!(empty.average_maximal_strand(), 0.0);
    }

    #[test]
    fn lower_never_exceeds_upper() {
        // A serial program with no burden: the formula alone would give P/(1+…) but never above 1.
        let m = Measures {
            work: 1000,
            span: 1000,
            burdened_span: 1000,
            ..Measures::default()
        };
        for p in [2, 4, 64] {
            let s = m.speedup(p, 0.0);
            assert!(s.lower <= s.upper && s.upper == 1.0, "{s:?}");
        }
    }

    /// An unmarked program (no spawns) runs as its serial run on any core count: its range is
    /// 1 – 1, not a lower bound below 1 from a burden no steal ever pays.
    #[test]
    fn no_spawns_is_exactly_serial() {
        let m = Measures {
            work: 108_507,
            span: 108_507,
            burdened_span: 108_507,
            ..Measures::default()
        };
        for p in [2, 4, 32] {
            let s = m.speedup(p, 0.85);
            assert_eq!((s.lower, s.upper), (1.0, 1.0), "P = {p}");
        }
        let one_spawn = Measures {
            spawns: 1,
            syncs: 1,
            ..m
        };
        assert!(one_spawn.speedup(2, 0.85).lower < 1.0);
    }

    #[test]
    fn reports_of_parallel_threads_combine() {
        let m = |work, span| Measures {
            work,
            span,
            burdened_span: span + 1,
            spawns: 1,
            syncs: 2,
        };
        let region = |id, work| RegionMeasures {
            id: RegionId(id),
            count: 1,
            events: work / 2,
            measures: m(work, work),
        };
        let a = Report {
            total: m(100, 40),
            events: 5,
            regions: vec![region(0, 10), region(2, 5)],
            anomalies: Anomalies::default(),
            profile: None,
        };
        let b = Report {
            total: m(50, 50),
            events: 3,
            regions: vec![region(1, 7), region(2, 6)],
            anomalies: Anomalies {
                unmatched_closers: 1,
                ..Anomalies::default()
            },
            profile: None,
        };
        let c = a.beside(b);
        assert_eq!(
            c.total,
            Measures {
                work: 150,
                span: 50,
                burdened_span: 51,
                spawns: 2,
                syncs: 4
            }
        );
        assert_eq!(c.events, 8);
        assert_eq!(c.anomalies.unmatched_closers, 1);
        let ids: Vec<u32> = c.regions.iter().map(|r| r.id.0).collect();
        assert_eq!(ids, [0, 1, 2]);
        let r2 = &c.regions[2];
        assert_eq!((r2.count, r2.events, r2.measures.work), (2, 5, 11));
    }

    #[test]
    fn core_count_tables() {
        assert_eq!(core_counts(1), Vec::<u32>::new());
        assert_eq!(core_counts(2), vec![2]);
        assert_eq!(core_counts(12), vec![2, 4, 8, 12]);
        assert_eq!(core_counts(u32::MAX).len(), 32);
    }
}
