//! Marks that did not nest as fork-join control should, in words: which mark, how many times,
//! where (image and link-time address, the address `objdump -d` and `addr2line` use).

use std::collections::BTreeMap;
use std::path::PathBuf;

use cilkview_engine::Anomalies;
use cilkview_marks::MarkKind;

/// One kind of malformed nesting the engine absorbs (see `Anomalies`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Problem {
    UnmatchedCloser,
    StrayIteration,
    UnmatchedRegion,
    ImplicitRegionEnd,
    ImplicitFrameEnd,
}

impl Problem {
    fn what(self) -> &'static str {
        match self {
            Problem::UnmatchedCloser => "closed something never opened",
            Problem::StrayIteration => "began an iteration outside any parallel loop",
            Problem::UnmatchedRegion => {
                "ended a region not open in its function, or began one between a loop's iterations"
            }
            Problem::ImplicitRegionEnd => "left a region open until its function ended",
            Problem::ImplicitFrameEnd => {
                "closed frames left open inside it (a missing function exit or sync?)"
            }
        }
    }

    /// The problem when the end of a thread's stream found it.
    fn at_end(self) -> &'static str {
        match self {
            Problem::ImplicitRegionEnd => "a region was still open when the run ended",
            Problem::ImplicitFrameEnd => {
                "a function, spawn or loop was still open when the run ended (a missing exit or \
                 sync, or exit() called inside it?)"
            }
            other => other.what(),
        }
    }

    /// Expected when the stream begins in the middle of a run (attach).
    fn explained_by_partial_stream(self) -> bool {
        matches!(self, Problem::UnmatchedCloser | Problem::ImplicitFrameEnd)
    }

    /// The problems between two counts of the same engine, with their numbers.
    fn between(before: &Anomalies, after: &Anomalies) -> Vec<(Problem, u64)> {
        [
            (
                Problem::UnmatchedCloser,
                after.unmatched_closers - before.unmatched_closers,
            ),
            (
                Problem::StrayIteration,
                after.stray_iterations - before.stray_iterations,
            ),
            (
                Problem::UnmatchedRegion,
                after.unmatched_regions - before.unmatched_regions,
            ),
            (
                Problem::ImplicitRegionEnd,
                after.implicit_region_ends - before.implicit_region_ends,
            ),
            (
                Problem::ImplicitFrameEnd,
                after.implicit_frame_ends - before.implicit_frame_ends,
            ),
        ]
        .into_iter()
        .filter(|&(_, n)| n > 0)
        .collect()
    }
}

/// Where a probe's mark is: its kind, the image (index in the session's images) and its link-time
/// address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct MarkPlace {
    pub image: usize,
    pub address: u64,
    pub kind: MarkKind,
}

/// The nesting problems seen, per mark (`None`: at the end of a thread's stream).
#[derive(Default)]
pub(crate) struct Nesting {
    seen: BTreeMap<(Problem, Option<MarkPlace>), u64>,
}

/// How many problem sites the warning lists.
const LISTED: usize = 5;

impl Nesting {
    /// Records what changed between `before` and `after`, caused by the mark at `site`.
    #[inline]
    pub fn record(&mut self, site: Option<MarkPlace>, before: &Anomalies, after: &Anomalies) {
        if before == after {
            return;
        }
        for (problem, n) in Problem::between(before, after) {
            *self.seen.entry((problem, site)).or_default() += n;
        }
    }

    /// The warning, if any problem is left once those a partial stream explains are dropped.
    /// `images` names the session's images.
    pub fn warning(&self, images: &[(PathBuf, usize)], partial: bool) -> Option<String> {
        let mut items: Vec<(&(Problem, Option<MarkPlace>), &u64)> = self
            .seen
            .iter()
            .filter(|((p, _), _)| !(partial && p.explained_by_partial_stream()))
            .collect();
        if items.is_empty() {
            return None;
        }
        // Most frequent first; ties in mark order.
        items.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mut said: Vec<String> = items
            .iter()
            .take(LISTED)
            .map(|((problem, site), &n)| {
                let times = if n == 1 {
                    "once".to_string()
                } else {
                    format!("{n} times")
                };
                match site {
                    Some(s) => format!(
                        "the {} mark at {} address {:#x} {} ({times})",
                        s.kind,
                        images
                            .get(s.image)
                            .map_or("?".into(), |(p, _)| p.display().to_string()),
                        s.address,
                        problem.what()
                    ),
                    None => format!("{} ({times})", problem.at_end()),
                }
            })
            .collect();
        if items.len() > LISTED {
            said.push(format!("and {} more", items.len() - LISTED));
        }
        if items.iter().any(|((_, site), _)| site.is_some()) {
            said.push("`addr2line -e IMAGE ADDRESS` names the source line of a mark".into());
        }
        Some(format!(
            "the marks did not nest as fork-join control should; measures may be off: {}",
            said.join("; ")
        ))
    }
}
