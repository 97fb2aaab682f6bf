//! `run --locks`: the work done while holding each lock, by the call site that acquires it, and
//! the speedup bound that the most held one sets (docs/locks.md).

use std::fmt::Write;

use cilkview_engine::contention_bound;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::text::{cost, printable};
use crate::RunReport;

/// The `locks` block of a report (present for `run --locks`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LocksReport {
    /// Each lock, by the call site that acquired it, the most work held first; empty when the
    /// program acquired none.
    pub sites: Vec<LockSiteReport>,
}

/// One lock, named by the call that acquired it (a lock acquired at two sites is two entries).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LockSiteReport {
    /// The function containing the acquiring call.
    pub function: String,
    /// The acquiring call's `file:line` (or symbol+offset without line information).
    pub location: String,
    /// Acquisitions (successful `lock`, `trylock`, `timedlock`, `wrlock` calls) at this site.
    pub acquisitions: u64,
    /// The work done while holding the lock, from each acquisition to its release, in the
    /// report's unit.
    pub held_work: u64,
    /// `held_work` / the run's work.
    pub share: f64,
    /// work / `held_work`: the speedup no schedule can pass while these critical sections run
    /// one at a time; `null` when nothing was held.
    pub bound: Option<f64>,
}

impl LockSiteReport {
    /// The entry of a site whose lock was acquired `acquisitions` times and held for `held_work`
    /// of the run's `work`.
    pub fn new(
        function: String,
        location: String,
        acquisitions: u64,
        held_work: u64,
        work: u64,
    ) -> LockSiteReport {
        let bound = contention_bound(work, held_work);
        LockSiteReport {
            function,
            location,
            acquisitions,
            held_work,
            share: held_work as f64 / work.max(1) as f64,
            bound: bound.is_finite().then_some(bound),
        }
    }
}

impl LocksReport {
    /// The lock that bounds the speedup most (the most work held), with its bound.
    pub fn binding(&self) -> Option<(&LockSiteReport, f64)> {
        let top = self.sites.iter().max_by_key(|s| s.held_work)?;
        Some((top, top.bound?))
    }
}

impl RunReport {
    /// Records the locks of a `--locks` run (sorted, most work held first) and bounds the speedup
    /// table by the most held one: min(P, parallelism, work / held work).
    pub fn set_locks(&mut self, mut locks: LocksReport) {
        locks.sites.sort_by(|a, b| {
            b.held_work
                .cmp(&a.held_work)
                .then(a.location.cmp(&b.location))
        });
        self.locks = Some(locks);
        self.bound_by_locks();
    }

    /// The most held lock's speedup bound; infinite without locks.
    pub fn lock_bound(&self) -> f64 {
        self.locks
            .as_ref()
            .and_then(LocksReport::binding)
            .map_or(f64::INFINITY, |(_, bound)| bound)
    }

    /// The speedup table within the bound of the most held lock, if any.
    pub(crate) fn bound_by_locks(&mut self) {
        if let Some((_, bound)) = self.locks.as_ref().and_then(LocksReport::binding) {
            for row in &mut self.speedup {
                *row = row.within(bound);
            }
        }
    }
}

/// The text report's line under the speedup table, when a lock bounds it.
pub(crate) fn bound_line(out: &mut String, report: &RunReport) {
    let Some((site, bound)) = report.locks.as_ref().and_then(LocksReport::binding) else {
        return;
    };
    let parallelism = report.measures.measured().parallelism();
    let binding = if bound < parallelism {
        "below the parallelism: the lock binds"
    } else {
        "above the parallelism: the span binds"
    };
    let _ = writeln!(
        out,
        "Lock bound: {bound:.2} ({binding}), the lock acquired at {} in {}, held for {:.1}% of \
         the work",
        printable(&site.location),
        printable(&site.function),
        100.0 * site.share
    );
}

/// The text report's section of the locks.
pub(crate) fn section(out: &mut String, report: &RunReport) {
    let Some(locks) = &report.locks else {
        return;
    };
    let _ = writeln!(out);
    let _ = writeln!(out, "Locks (by acquiring call site)");
    if locks.sites.is_empty() {
        let _ = writeln!(
            out,
            "No lock acquired (pthread mutex, spin lock, rwlock for writing)."
        );
        return;
    }
    for s in locks.sites.iter().take(SHOWN) {
        let bound = s.bound.map_or("-".to_string(), |b| format!("{b:.2}"));
        let _ = writeln!(
            out,
            "{} ({}): {} acquisitions, held {} = {:.1}% of the work, bound {bound}",
            printable(&s.location),
            printable(&s.function),
            s.acquisitions,
            cost(s.held_work, report.unit),
            100.0 * s.share
        );
    }
    if locks.sites.len() > SHOWN {
        let _ = writeln!(
            out,
            "… and {} more (the JSON's `locks` has them all)",
            locks.sites.len() - SHOWN
        );
    }
}

/// The locks the text report lists, the most held first.
const SHOWN: usize = 10;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_held_lock_binds_and_entries_say_share_and_bound() {
        let site = |loc: &str, held| LockSiteReport::new("f".into(), loc.into(), 3, held, 1000);
        let locks = LocksReport {
            sites: vec![site("a.c:1", 100), site("a.c:2", 250), site("a.c:3", 0)],
        };
        let (top, bound) = locks.binding().unwrap();
        assert_eq!((top.location.as_str(), bound), ("a.c:2", 4.0));
        assert_eq!(top.share, 0.25);
        assert_eq!(locks.sites[2].bound, None);
        assert!(LocksReport::default().binding().is_none());
    }
}
