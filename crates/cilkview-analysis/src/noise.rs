//! How far a time measurement can be trusted: `run --repeat`'s runs give a noise bound on work
//! (the spread of the runs' own work) and on span (the span with each strand at its shortest
//! run, below the reported one: what is left of the machine's noise on the critical path lies
//! between the two). Said in one report line.

/// The measures the line is about (nanoseconds).
pub(crate) struct NoiseLine<'a> {
    /// How many runs the costs come from.
    pub runs: u32,
    /// Each run's work, for the runs whose strands all matched the first run's.
    pub run_work: &'a [u64],
    /// The reported work and span.
    pub work: u64,
    pub span: u64,
    /// The span with each strand at its shortest run (3 runs or more).
    pub span_low: Option<u64>,
    /// The run whose work the report's is (its number, from 1), where the strands were scaled
    /// to it.
    pub median_run: Option<u32>,
}

impl NoiseLine<'_> {
    /// The work's bound: half the spread of the runs' work, relative to the work.
    pub fn work_bound(&self) -> Option<f64> {
        let (lo, hi) = (self.run_work.iter().min()?, self.run_work.iter().max()?);
        (self.run_work.len() >= 2 && self.work > 0)
            .then(|| (hi - lo) as f64 / 2.0 / self.work as f64)
    }

    /// The span's bound: how much lower the span by the strands' shortest runs is.
    pub fn span_bound(&self) -> Option<f64> {
        let low = self.span_low?;
        (self.span > 0).then(|| self.span.saturating_sub(low) as f64 / self.span as f64)
    }

    /// The report's noise block (`counter.noise` in JSON).
    pub fn summary(&self) -> cilkview_report::TimeNoise {
        cilkview_report::TimeNoise {
            run_work_least: self.run_work.iter().min().copied(),
            run_work_most: self.run_work.iter().max().copied(),
            run_work_median: median_low(self.run_work),
            span_at_shortest: self.span_low,
            median_run: self.median_run,
        }
    }

    /// The report's line.
    pub fn line(&self) -> String {
        let work = match (
            self.work_bound(),
            self.run_work.iter().min(),
            self.run_work.iter().max(),
        ) {
            (Some(b), Some(lo), Some(hi)) => format!(
                "work {} ±{:.1}% (its runs' work from {} to {})",
                ms(self.work),
                100.0 * b,
                ms(*lo),
                ms(*hi)
            ),
            _ => format!(
                "work {} (no bound: the runs' strands departed)",
                ms(self.work)
            ),
        };
        let span = match (self.span_bound(), self.span_low) {
            (Some(b), Some(low)) => format!(
                "span {} −{:.1}% ({} with each strand at its shortest run)",
                ms(self.span),
                100.0 * b,
                ms(low)
            ),
            _ => format!(
                "span {} (no bound from 2 runs: --repeat 3 or more gives one)",
                ms(self.span)
            ),
        };
        format!(
            "time noise over {} runs: {work}; {span}; differences within these are the machine's \
             noise",
            self.runs
        )
    }
}

/// The middle value of `values` (the lower middle one of an even number).
pub(crate) fn median_low(values: &[u64]) -> Option<u64> {
    median_index(values).map(|i| values[i])
}

/// Where in `values` its middle value is (the lower middle one of an even number; equal values
/// in their order).
pub(crate) fn median_index(values: &[u64]) -> Option<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by_key(|&i| (values[i], i));
    order.get(order.len().checked_sub(1)? / 2).copied()
}

/// Nanoseconds as milliseconds, 3 significant decimals.
fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_come_from_the_runs_and_the_minima() {
        let noise = NoiseLine {
            runs: 3,
            run_work: &[9_000_000, 10_000_000, 11_000_000],
            work: 10_000_000,
            span: 2_000_000,
            span_low: Some(1_500_000),
            median_run: Some(2),
        };
        assert_eq!(noise.work_bound(), Some(0.1));
        assert_eq!(noise.span_bound(), Some(0.25));
        let summary = noise.summary();
        assert_eq!(summary.span_at_shortest, Some(1_500_000));
        assert_eq!(summary.run_work_median, Some(10_000_000));
        assert_eq!(
            (summary.run_work_least, summary.run_work_most),
            (Some(9_000_000), Some(11_000_000))
        );
        assert_eq!(median_low(&[4, 1, 3, 2]), Some(2));
        assert_eq!(median_low(&[]), None);
        assert_eq!(
            noise.line(),
            "time noise over 3 runs: work 10.000 ms ±10.0% (its runs' work from 9.000 ms to \
             11.000 ms); span 2.000 ms −25.0% (1.500 ms with each strand at its shortest run); \
             differences within these are the machine's noise"
        );
    }

    #[test]
    fn the_median_is_found_where_it_lies() {
        assert_eq!(median_index(&[30, 10, 20]), Some(2));
        assert_eq!(median_index(&[40, 10, 30, 20]), Some(3));
        assert_eq!(median_index(&[5, 5, 5]), Some(1));
        assert_eq!(median_index(&[]), None);
        assert_eq!(median_low(&[40, 10, 30, 20]), Some(20));
    }

    #[test]
    fn two_runs_bound_the_work_only() {
        let noise = NoiseLine {
            runs: 2,
            run_work: &[1_000_000, 1_100_000],
            work: 1_000_000,
            span: 10_000,
            span_low: None,
            median_run: None,
        };
        assert_eq!(noise.span_bound(), None);
        assert!(noise.line().contains("±5.0%"), "{}", noise.line());
        assert!(
            noise.line().contains("no bound from 2 runs"),
            "{}",
            noise.line()
        );
    }
}
