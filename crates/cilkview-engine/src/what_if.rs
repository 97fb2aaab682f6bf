//! What-if analysis (pure arithmetic over a call-site profile): the measures of the run had the
//! code of some call sites been K times cheaper or parallel, and the shortest list of sites whose
//! own code to parallelize for a target parallelism (greedy by span removed, as TaskProf2 does).
//! Model and exactness: docs/what-if.md.
//!
//! The code of a call site is everything its invocations run, nested calls included: in the
//! calling-context tree, the local work and the local span on span of every context with the site
//! on its stack. Recursion is folded (a site is on a stack once), so each strand is counted once.
//! - **work** after = Σ over contexts of local work × the work factor of its stack: exact;
//! - **span** after = the length of the measured critical path with its strands rescaled: Σ over
//!   contexts of local span on span × the span factor of its stack. The critical path only gets
//!   shorter; another path may become the longest, so this is a lower bound of the span after
//!   the change, equal to it while the measured path stays the longest;
//! - **burdened span** after = burdened span − the span removed (the burdened critical path is
//!   taken to run through the same strands), never below the span after.

use crate::Measures;

/// What a what-if does to the code of a site.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Change {
    /// K times faster: work and span divided by K (K > 0; below 1, slower).
    Faster(f64),
    /// Parallel K ways (work kept, span divided by K), or perfectly (`None`: span 0).
    Parallel(Option<f64>),
}

impl Change {
    /// (work factor, span factor).
    fn factors(self) -> (f64, f64) {
        match self {
            Change::Faster(k) => (1.0 / k, 1.0 / k),
            Change::Parallel(Some(k)) => (1.0, 1.0 / k),
            Change::Parallel(None) => (1.0, 0.0),
        }
    }
}

/// One node of the calling-context tree, as the what-if needs it (a parent before its children).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextCost {
    pub parent: Option<usize>,
    /// The context's call site (an index into the profile's sites); `None` for the root.
    pub site: Option<usize>,
    /// The work of its invocations outside nested call sites.
    pub local_work: u64,
    /// The critical path's strands that ran in its invocations outside nested call sites.
    pub local_span_on_span: u64,
}

/// One change: the sites whose code it changes (a `file:line` or a function may name several,
/// nested in one another: their code is changed once), and how.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteChange {
    pub sites: Vec<usize>,
    pub change: Change,
}

/// The measures after `changes` (each applies once to a strand, however many of its sites are
/// on the strand's stack; two changes on one strand multiply). `spawns` and `syncs` are kept.
pub fn what_if(before: &Measures, contexts: &[ContextCost], changes: &[SiteChange]) -> Measures {
    // Per context, which changes apply (its parent's, and those naming its site).
    let mut applied: Vec<Vec<bool>> = Vec::with_capacity(contexts.len());
    let (mut work_cut, mut span_cut) = (0.0, 0.0);
    for c in contexts {
        let mut mine = c
            .parent
            .and_then(|p| applied.get(p).cloned())
            .unwrap_or_else(|| vec![false; changes.len()]);
        if let Some(site) = c.site {
            for (m, ch) in mine.iter_mut().zip(changes) {
                *m |= ch.sites.contains(&site);
            }
        }
        let (w, s) =
            mine.iter()
                .zip(changes)
                .filter(|(m, _)| **m)
                .fold((1.0, 1.0), |(w, s), (_, ch)| {
                    let (cw, cs) = ch.change.factors();
                    (w * cw, s * cs)
                });
        work_cut += c.local_work as f64 * (1.0 - w);
        span_cut += c.local_span_on_span as f64 * (1.0 - s);
        applied.push(mine);
    }
    after_cuts(before, work_cut, span_cut)
}

/// The measures after changing a part of the run of known work and span (a region, whose
/// instances are taken to lie on the critical path: docs/what-if.md).
pub fn what_if_part(before: &Measures, part_work: u64, part_span: u64, change: Change) -> Measures {
    let (w, s) = change.factors();
    after_cuts(
        before,
        part_work.min(before.work) as f64 * (1.0 - w),
        part_span.min(before.span) as f64 * (1.0 - s),
    )
}

/// `before` less `work_cut` of work and `span_cut` of span (rounded to the nearest unit).
fn after_cuts(before: &Measures, work_cut: f64, span_cut: f64) -> Measures {
    let less = |x: u64, cut: f64| (x as f64 - cut).round().max(0.0) as u64;
    let span = less(before.span, span_cut);
    Measures {
        work: less(before.work, work_cut),
        span,
        burdened_span: less(before.burdened_span, span_cut).max(span),
        ..*before
    }
}

/// One step of a [`plan`]: the site whose own code is parallelized, and the measures once it and
/// the steps before it are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanStep {
    pub site: usize,
    /// The span this step removes.
    pub span_removed: u64,
    pub after: Measures,
}

/// The shortest list of sites (chosen greedily) whose own code made perfectly parallel brings
/// the parallelism to `target`.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub steps: Vec<PlanStep>,
    /// Whether the last step reaches the target.
    pub reached: bool,
    /// The span left with every site parallelized: the critical path's strands under no call
    /// site (serial whatever the sites do).
    pub serial_span: u64,
}

/// Greedy plan (TaskProf2's order): at each step, the site whose own code (its strands outside
/// the call sites nested in it, all its invocations: the profile's local span on span) removes
/// the most span from the measured critical path when made perfectly parallel (ties: the lower
/// index), until `work / span ≥ target`. An outer site's own code excludes its nested sites', so
/// the steps are disjoint and the outermost call (which holds everything) is not a step.
/// Sites that remove nothing are never chosen; if the target cannot be reached, `steps` are
/// all those that help and `reached` is false.
pub fn plan(before: &Measures, contexts: &[ContextCost], sites: usize, target: f64) -> Plan {
    let mut removed = vec![0u64; sites];
    let mut serial_span = 0u64;
    for c in contexts {
        match c.site.filter(|&s| s < sites) {
            Some(s) => removed[s] += c.local_span_on_span,
            None => serial_span += c.local_span_on_span,
        }
    }
    let mut order: Vec<usize> = (0..sites).filter(|&s| removed[s] > 0).collect();
    order.sort_by(|&a, &b| removed[b].cmp(&removed[a]).then(a.cmp(&b)));
    let mut current = *before;
    let mut steps = Vec::new();
    for site in order {
        if current.parallelism() >= target {
            break;
        }
        let span_removed = removed[site].min(current.span);
        current.span -= span_removed;
        current.burdened_span = current
            .burdened_span
            .saturating_sub(span_removed)
            .max(current.span);
        steps.push(PlanStep {
            site,
            span_removed,
            after: current,
        });
    }
    Plan {
        reached: current.parallelism() >= target,
        steps,
        serial_span: serial_span.min(before.span),
    }
}

/// The parallelism of the run were each site alone made perfectly parallel (the profile's
/// "parallelism if parallel" column): per site, work / (span − its span on the critical path).
pub fn parallelism_if_parallel(
    before: &Measures,
    contexts: &[ContextCost],
    sites: usize,
) -> Vec<f64> {
    let mut removed = vec![0u64; sites];
    for (c, stack) in contexts.iter().zip(stacks(contexts)) {
        for s in stack.into_iter().filter(|&s| s < sites) {
            removed[s] += c.local_span_on_span;
        }
    }
    removed
        .into_iter()
        .map(|r| {
            Measures {
                span: before.span.saturating_sub(r),
                ..*before
            }
            .parallelism()
        })
        .collect()
}

/// Each context's sites from the root (each site once).
fn stacks(contexts: &[ContextCost]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::with_capacity(contexts.len());
    for c in contexts {
        let mut stack = c
            .parent
            .and_then(|p| out.get(p).cloned())
            .unwrap_or_default();
        if let Some(s) = c.site.filter(|s| !stack.contains(s)) {
            stack.push(s);
        }
        out.push(stack);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// run() { spawn sibling (20); helper() (100); sync; outer() (10 own + inner 30) } + 5 root.
    fn profile() -> (Measures, Vec<ContextCost>) {
        let ctx = |parent, site, local_work, local_span_on_span| ContextCost {
            parent,
            site,
            local_work,
            local_span_on_span,
        };
        let contexts = vec![
            ctx(None, None, 5, 5),
            ctx(Some(0), Some(0), 20, 0),    // sibling, off the span
            ctx(Some(0), Some(1), 100, 100), // helper
            ctx(Some(0), Some(2), 10, 10),   // outer
            ctx(Some(3), Some(3), 30, 30),   // inner, in outer
        ];
        let before = Measures {
            work: 165,
            span: 145,
            burdened_span: 1145,
            spawns: 1,
            syncs: 1,
        };
        (before, contexts)
    }

    #[test]
    fn a_site_k_times_faster_divides_its_work_and_its_span() {
        let (before, contexts) = profile();
        let after = what_if(&before, &contexts, &[one(1, Change::Faster(4.0))]);
        assert_eq!(
            (after.work, after.span, after.burdened_span),
            (90, 70, 1070)
        );
        assert_eq!((after.spawns, after.syncs), (1, 1));
    }

    #[test]
    fn a_site_includes_what_it_calls() {
        let (before, contexts) = profile();
        let after = what_if(&before, &contexts, &[one(2, Change::Faster(2.0))]);
        assert_eq!((after.work, after.span), (145, 125));
    }

    #[test]
    fn parallel_keeps_the_work_and_divides_the_span() {
        let (before, contexts) = profile();
        let after = what_if(&before, &contexts, &[one(1, Change::Parallel(Some(4.0)))]);
        assert_eq!((after.work, after.span), (165, 70));
        let after = what_if(&before, &contexts, &[one(1, Change::Parallel(None))]);
        assert_eq!(
            (after.work, after.span, after.burdened_span),
            (165, 45, 1045)
        );
    }

    #[test]
    fn nested_changes_multiply_and_off_span_sites_cut_only_work() {
        let (before, contexts) = profile();
        let both = [one(2, Change::Faster(2.0)), one(3, Change::Faster(3.0))];
        let after = what_if(&before, &contexts, &both);
        // outer own 10 → 5; inner 30 → 5.
        assert_eq!((after.work, after.span), (135, 115));
        let after = what_if(&before, &contexts, &[one(0, Change::Faster(2.0))]);
        assert_eq!((after.work, after.span), (155, 145));
    }

    fn one(site: usize, change: Change) -> SiteChange {
        SiteChange {
            sites: vec![site],
            change,
        }
    }

    #[test]
    fn a_change_naming_nested_sites_applies_once() {
        let (before, contexts) = profile();
        // outer and inner, nested (a function called at both, a recursion through two sites).
        let twice = SiteChange {
            sites: vec![2, 3],
            change: Change::Faster(2.0),
        };
        let after = what_if(&before, &contexts, &[twice]);
        assert_eq!((after.work, after.span), (145, 125));
    }

    #[test]
    fn a_region_on_the_critical_path() {
        let (before, _) = profile();
        let after = what_if_part(&before, 40, 40, Change::Faster(2.0));
        assert_eq!((after.work, after.span), (145, 125));
    }

    #[test]
    fn the_plan_takes_the_largest_span_first_and_stops_at_the_target() {
        let (before, contexts) = profile();
        let plan = plan(&before, &contexts, 4, 3.0);
        assert!(plan.reached);
        assert_eq!(plan.steps.len(), 1);
        assert_eq!((plan.steps[0].site, plan.steps[0].span_removed), (1, 100));
        assert_eq!(plan.steps[0].after.span, 45);
        assert_eq!(plan.serial_span, 5);
    }

    #[test]
    fn each_step_is_a_sites_own_code() {
        let (before, contexts) = profile();
        let plan = plan(&before, &contexts, 4, 1000.0);
        assert!(!plan.reached);
        let order: Vec<_> = plan
            .steps
            .iter()
            .map(|s| (s.site, s.span_removed))
            .collect();
        // Own code: outer's 10, inner's 30 (not outer's 40 and then nothing).
        assert_eq!(order, vec![(1, 100), (3, 30), (2, 10)]);
        assert_eq!(plan.steps.last().unwrap().after.span, plan.serial_span);
    }

    #[test]
    fn parallelism_if_each_site_alone_were_parallel() {
        let (before, contexts) = profile();
        let p = parallelism_if_parallel(&before, &contexts, 4);
        assert_eq!(
            p,
            vec![165.0 / 145.0, 165.0 / 45.0, 165.0 / 105.0, 165.0 / 115.0]
        );
    }
}
