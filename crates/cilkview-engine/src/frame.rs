//! The engine's frames: one per open function instance, spawned child, loop iteration or loop,
//! with what each keeps while it runs (docs/engine.md, "The algorithm: a stack of frames").

use crate::event::RegionId;
use crate::loops::LoopState;
use crate::paths::{Cost, End, Paths};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameKind {
    Root = 0,
    Function = 1,
    Spawn = 2,
    Iteration = 3,
    Loop = 4,
}

#[derive(Clone, Debug)]
pub(crate) struct OpenRegion {
    pub(crate) id: RegionId,
    pub(crate) paths: Paths,
    pub(crate) spawns_at_begin: u64,
    pub(crate) syncs_at_begin: u64,
    /// The engine's events when it began (its begin included).
    pub(crate) events_at_begin: u64,
    /// The frame's children since its last sync that were spawned before the region began
    /// (their strands are not in the region's sub-dag: a dependence on them is not its edge).
    pub(crate) first: usize,
    /// Where the frame's children spawned in the region since the frame's last sync end, in the
    /// region's paths (child `first + i` at `i`).
    pub(crate) ends: Vec<End>,
    /// The dependences of the next child spawned, in the region's paths.
    pub(crate) after: End,
}

/// What few frames have: regions opened in them, or a loop's state (boxed, so that the frames
/// of plain calls and spawns stay small and cheap to push and pop).
#[derive(Clone, Debug, Default)]
pub(crate) struct FrameExtra {
    /// Regions opened in this frame, innermost last.
    pub(crate) regions: Vec<OpenRegion>,
    /// A loop's state, only for `FrameKind::Loop`; for other frames no loop's
    /// (`LoopState::is_loop`: no test of an `Option` when a leaf iteration ends).
    pub(crate) lp: LoopState,
    /// Where the siblings the next spawned child depends on end (`SpawnAfter`): it starts no
    /// earlier.
    pub(crate) after: End,
}

impl FrameExtra {
    /// For a loop: a part of it (an iteration, or a call, a spawn or a loop in its control code)
    /// ended, its work in the running total already: `f` gives it to the loop's state. Whether
    /// this is a loop (if not, nothing was done).
    #[inline(always)]
    pub(crate) fn loop_part_ended(&mut self, f: impl FnOnce(&mut LoopState)) -> bool {
        let Some(lp) = self.lp.as_loop() else {
            return false;
        };
        f(lp);
        true
    }
}

/// How many boxes of each kind [`Spares`] keeps: the frames with extras open at once in a
/// usual program (loops in loops, regions in recursion); beyond it, boxes are freed as before.
const SPARES: usize = 64;

/// Frame extras of frames that ended, kept for the next ones: loops and regions in a recursion
/// then cost no allocation per event (a loop's frame and its subtree stack, a region's frame
/// extra). A loop's extra is kept with its state in place, apart from the others (which have no
/// loop state): a new loop resets it where it is. Bounded by [`SPARES`]: memory stays flat.
#[derive(Clone, Debug, Default)]
pub(crate) struct Spares {
    // The boxes themselves are what is reused (a frame holds its extra boxed).
    #[allow(clippy::vec_box)]
    extras: Vec<Box<FrameExtra>>,
    #[allow(clippy::vec_box)]
    loops: Vec<Box<FrameExtra>>,
}

impl Spares {
    /// An empty frame extra.
    pub(crate) fn extra(&mut self) -> Box<FrameExtra> {
        self.extras.pop().unwrap_or_default()
    }

    /// The extra of a new loop's frame: the loop's state for chunks of `grain`, begun at the
    /// running total `acc`.
    pub(crate) fn loop_extra(&mut self, grain: u64, acc: u64) -> Box<FrameExtra> {
        match self.loops.pop() {
            Some(mut x) => {
                x.lp.reset(grain, acc);
                x
            }
            None => Box::new(FrameExtra {
                lp: LoopState::new(grain, acc),
                ..FrameExtra::default()
            }),
        }
    }

    /// The extra of a frame that ended, emptied, for a later frame (a loop's with its state).
    #[inline(always)]
    pub(crate) fn keep_extra(&mut self, mut x: Box<FrameExtra>) {
        let pool = if x.lp.is_loop() {
            &mut self.loops
        } else {
            &mut self.extras
        };
        if pool.len() < SPARES {
            x.regions.clear();
            x.after = End::default();
            pool.push(x);
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Frame {
    pub(crate) kind: FrameKind,
    pub(crate) paths: Paths,
    /// Where this frame's children spawned since its last sync begin in the engine's `ends`
    /// (children of the top frame only: those of the frames below it are there too, below).
    pub(crate) base: usize,
    pub(crate) extra: Option<Box<FrameExtra>>,
}

impl Frame {
    /// A frame that begins when the running total is `acc`.
    pub(crate) fn new(kind: FrameKind, acc: u64) -> Self {
        Frame {
            kind,
            paths: Paths::new(acc),
            base: 0,
            extra: None,
        }
    }

    /// A loop's frame, its extra taken from `spares` (no allocation once the engine has run a
    /// loop as deep as this one).
    pub(crate) fn new_loop(grain: u64, acc: u64, spares: &mut Spares) -> Self {
        Frame {
            extra: Some(spares.loop_extra(grain, acc)),
            ..Frame::new(FrameKind::Loop, acc)
        }
    }

    /// The frame's extra, if it holds nothing any more (no region open, no loop, no pending
    /// `SpawnAfter`: the frame behaves as one without), given back to `spares`: the frame then
    /// ends on the short path of a plain call or spawn.
    pub(crate) fn release_idle_extra(&mut self, spares: &mut Spares) {
        let idle =
            |x: &FrameExtra| x.regions.is_empty() && !x.lp.is_loop() && x.after == End::default();
        if self.extra.as_deref().is_some_and(idle) {
            if let Some(x) = self.extra.take() {
                spares.keep_extra(x);
            }
        }
    }

    /// The regions open in this frame (none: an empty slice).
    pub(crate) fn regions(&mut self) -> &mut [OpenRegion] {
        match &mut self.extra {
            Some(x) => &mut x.regions,
            None => &mut [],
        }
    }

    /// A part that ran in series in this frame (a call, a loop) ended with measures `c`.
    pub(crate) fn serial(&mut self, c: Cost) {
        match &mut self.extra {
            None => self.paths.serial(c),
            Some(x) => {
                if x.loop_part_ended(|lp| lp.serial(c)) {
                    return;
                }
                self.paths.serial(c);
                for r in &mut x.regions {
                    r.paths.serial(c);
                }
            }
        }
    }

    /// A child spawned when the running total was `start` returned with measures `c`. Where its
    /// paths end goes on `ends` (it is this frame's child number `ends.len() - base`).
    pub(crate) fn child_returned(&mut self, c: Cost, start: u64, burden: u64, ends: &mut Vec<End>) {
        // A spawn in a loop's control code (not inside an iteration): no frame to own it, so it
        // is measured as serial code of the loop.
        let in_loop = |x: &mut Box<FrameExtra>| x.loop_part_ended(|lp| lp.serial(c));
        if self.extra.as_mut().is_some_and(in_loop) {
            return;
        }
        let after = self
            .extra
            .as_mut()
            .map_or(End::default(), |x| std::mem::take(&mut x.after));
        ends.push(self.paths.child_returned(c, start, burden, after));
        for r in self.regions() {
            let after = std::mem::take(&mut r.after);
            let end = r.paths.child_returned(c, start, burden, after);
            r.ends.push(end);
        }
    }

    /// Whether the frame is a loop with no chunk open (after an iteration's end: it closed one).
    #[inline(always)]
    pub(crate) fn loop_between_chunks(&self) -> bool {
        self.extra
            .as_ref()
            .is_some_and(|x| x.lp.is_loop() && !x.lp.chunk_open())
    }

    /// An iteration ended with measures `c`, the running total being `acc`.
    pub(crate) fn iteration_ended(&mut self, c: Cost, burden: u64, acc: u64) {
        let in_loop =
            |x: &mut Box<FrameExtra>| x.loop_part_ended(|lp| lp.end_iteration(c, burden, acc));
        if !self.extra.as_mut().is_some_and(in_loop) {
            self.serial(c);
        }
    }

    /// Joins the outstanding children (theirs ends are on `ends` from `base`), the running total
    /// being `acc`; returns whether there were any.
    pub(crate) fn sync(&mut self, acc: u64, ends: &mut Vec<End>) -> bool {
        let had = ends.len() > self.base;
        ends.truncate(self.base);
        self.paths.sync(acc);
        if let Some(x) = &mut self.extra {
            x.after = End::default();
            for r in &mut x.regions {
                r.paths.sync(acc);
                r.first = 0;
                r.ends.clear();
                r.after = End::default();
            }
        }
        had
    }

    /// This frame's strand that begins at the running total `acc` starts no earlier than its child
    /// `sibling` ends (the `ends` of the children since its last sync begin at `base`); none
    /// such: no constraint.
    pub(crate) fn wait_for(&mut self, sibling: u64, acc: u64, ends: &[End]) {
        let Ok(j) = usize::try_from(sibling) else {
            return;
        };
        let Some(end) = self.base.checked_add(j).and_then(|i| ends.get(i)) else {
            return;
        };
        self.paths.wait_for(acc, *end);
        for r in self.regions() {
            if let Some(e) = j.checked_sub(r.first).and_then(|k| r.ends.get(k)) {
                r.paths.wait_for(acc, *e);
            }
        }
    }

    /// The next child this frame spawns starts no earlier than its child `sibling` ends (the
    /// `ends` of the children since its last sync begin at `base`); none such: no constraint.
    pub(crate) fn spawn_after(&mut self, sibling: u64, ends: &[End]) {
        let Some(end) = usize::try_from(sibling)
            .ok()
            .and_then(|j| ends.get(self.base.checked_add(j)?))
        else {
            return;
        };
        let x = self.extra.get_or_insert_with(Box::default);
        x.after = x.after.max(*end);
        for r in &mut x.regions {
            let k = usize::try_from(sibling).unwrap_or(usize::MAX);
            if let Some(e) = k.checked_sub(r.first).and_then(|k| r.ends.get(k)) {
                r.after = r.after.max(*e);
            }
        }
    }
}
