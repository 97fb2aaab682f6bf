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

    /// Expected where the stream was cut: one that begins in the middle of the run (attach)
    /// closes what it never saw opened (a region's end included); one that ends before the
    /// program's own end leaves open what it was inside (found at the end: no `site`).
    fn explained_by(self, site: Option<MarkPlace>, cut: Cut) -> bool {
        let at_start = matches!(
            self,
            Problem::UnmatchedCloser | Problem::ImplicitFrameEnd | Problem::UnmatchedRegion
        );
        (cut.start && at_start) || (cut.end.is_some() && site.is_none())
    }

    fn is_region(self) -> bool {
        matches!(self, Problem::UnmatchedRegion | Problem::ImplicitRegionEnd)
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

/// Where a thread's stream was cut, so that marks seen without their partner are the cut's,
/// not the program's: `start`, it began in the middle of the run (attach); `end`, how it ended
/// before the program's own end ("killed by signal 2 (SIGINT)", "detached").
#[derive(Clone, Debug, Default)]
pub(crate) struct Cut {
    pub start: bool,
    pub end: Option<String>,
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

    /// The warnings: what the cut explains, said as the cut (never as the marks' fault), then the
    /// problems left, if any. `images` names the session's images.
    pub fn warnings(&self, images: &[(PathBuf, usize)], cut: &Cut) -> Vec<String> {
        let explained = |p: Problem, site: Option<MarkPlace>| p.explained_by(site, cut.clone());
        let mut out = Vec::new();
        let cut_regions = self
            .seen
            .keys()
            .any(|&(p, s)| p.is_region() && explained(p, s));
        if cut.start && cut_regions {
            out.push(
                "a region was open when the attach began or ended: its measures cover only the \
                 window"
                    .to_string(),
            );
        }
        let cut_at_end = self
            .seen
            .keys()
            .any(|&(p, s)| s.is_none() && explained(p, s));
        // An attach's report already says it covers a window.
        if let (Some(how), true, false) = (&cut.end, cut_at_end, cut.start) {
            out.push(format!(
                "the run ended ({how}) inside an open function, spawn, loop or region: the \
                 measures cover what ran until then"
            ));
        }
        let left: BTreeMap<(Problem, Option<MarkPlace>), u64> = self
            .seen
            .iter()
            .filter(|(&(p, s), _)| !explained(p, s))
            .map(|(k, n)| (*k, *n))
            .collect();
        out.extend(Nesting { seen: left }.problems(images));
        out
    }

    /// The warning of every problem seen, if any.
    fn problems(&self, images: &[(PathBuf, usize)]) -> Option<String> {
        let mut items: Vec<(&(Problem, Option<MarkPlace>), &u64)> = self.seen.iter().collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn images() -> Vec<(PathBuf, usize)> {
        vec![(PathBuf::from("/prog"), 3)]
    }

    /// A region end with no begin (at a mark), and a function and a region left open at the end.
    fn seen() -> Nesting {
        let mut n = Nesting::default();
        let none = Anomalies::default();
        let region_end = MarkPlace {
            image: 0,
            address: 0x1010,
            kind: MarkKind::RegionEnd,
        };
        let unmatched = Anomalies {
            unmatched_regions: 1,
            ..none
        };
        n.record(Some(region_end), &none, &unmatched);
        let open_at_end = Anomalies {
            implicit_frame_ends: 1,
            implicit_region_ends: 1,
            ..none
        };
        n.record(None, &none, &open_at_end);
        n
    }

    /// A run interrupted (Ctrl-C) inside open frames says so, not that the marks did not nest;
    /// what the cut does not explain (a region end never begun) still blames the marks.
    #[test]
    fn an_interrupted_run_is_said_to_be_interrupted() {
        let cut = Cut {
            start: false,
            end: Some("killed by signal 2 (SIGINT)".into()),
        };
        let w = seen().warnings(&images(), &cut);
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(
            w[0],
            "the run ended (killed by signal 2 (SIGINT)) inside an open function, spawn, loop or \
             region: the measures cover what ran until then"
        );
        assert!(w[1].starts_with("the marks did not nest"), "{w:?}");
        assert!(
            w[1].contains("region_end mark at /prog address 0x1010"),
            "{w:?}"
        );
        assert!(!w[1].contains("still open when the run ended"), "{w:?}");
    }

    /// Attached in the middle of a region and detached: the cut at both ends explains it all,
    /// and only the region's partial measures need saying (the report says it covers a window).
    #[test]
    fn attaching_mid_region_is_said_to_be_mid_region() {
        let cut = Cut {
            start: true,
            end: Some("detached".into()),
        };
        let w = seen().warnings(&images(), &cut);
        assert_eq!(
            w,
            [
                "a region was open when the attach began or ended: its measures cover only the \
              window"
            ]
        );
    }

    /// A run that exited on its own with open frames: the marks' fault, said as before.
    #[test]
    fn an_uncut_run_blames_the_marks() {
        let w = seen().warnings(&images(), &Cut::default());
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("still open when the run ended"), "{w:?}");
    }
}
