//! The measures a frame (a function instance, a spawned child, an iteration) or a region keeps
//! while it runs, kept so that a strand changes none of them (docs/engine.md, "Strands cost one
//! addition").

/// Work, span and burdened span of a serial block: the three quantities that compose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cost {
    pub work: u64,
    pub span: u64,
    pub bspan: u64,
}

impl Cost {
    pub fn strand(c: u64) -> Cost {
        Cost {
            work: c,
            span: c,
            bspan: c,
        }
    }
}

/// Where a path ends, in a frame's span and burdened span (a spawned child's end, relative to
/// where its parent frame began).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct End {
    pub span: u64,
    pub bspan: u64,
}

impl End {
    /// The later of two ends, path by path.
    pub fn max(self, o: End) -> End {
        End {
            span: self.span.max(o.span),
            bspan: self.bspan.max(o.bspan),
        }
    }
}

/// Path lengths of a frame (or of a region within one), given `acc`, the run's cost so far (the
/// sum of every strand's: the engine's running total). Lengths are in the frame's coordinate: a
/// frame pushed on another continues its parent's ([`Paths::child_of`]: its paths start where its
/// parent's current path is at its begin), the root and a region have their own (they begin at
/// 0). The frame's work is `acc - start`; its span (the longest path to the current point of the
/// continuation) is `acc - pos`: `pos` is the running total less that length, which a strand
/// run in the frame does not change (it adds as much to the one as to the other); its burdened
/// span `acc - bpos`. So only the running total moves. `cspan` is the longest path ending at the
/// end of a child spawned since the last sync (0 when none: all lengths are ≥ 0, so 0 plays the
/// paper's −∞); `cbspan` the same in the burdened dag. In one coordinate a child's end is where
/// its own path ends: a child's return takes its end as it is, with no length of the parent's
/// added (docs/engine.md, "Strands cost one addition").
///
/// Sums wrap at 2^64 (no saturation checks on the hot path): every length is at most the run's
/// total cost plus `burden` per spawn, which [`crate::Engine::sums_fit`] checks for a whole run;
/// `bpos` wraps below zero when burdens make the burdened span exceed the running total, and the
/// lengths computed from it are exact all the same (burdened lengths are compared, never their
/// positions). A span never exceeds the running total (no burden on it; the run's total cost
/// fits), so `pos` stays between 0 and it, and a sync compares positions ([`Paths::sync`]).
///
/// Scalar fields, in an order where no two that are combined alike are neighbours: the
/// compiler would otherwise pair `pos`/`bpos` and `cspan`/`cbspan` into 16-byte vector loads
/// that read what two 8-byte stores just wrote — a store-forwarding stall (measured in an
/// earlier form of this struct: the hottest instruction of the analysis).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Paths {
    pos: u64,
    cspan: u64,
    /// The running total when the frame began.
    pub start: u64,
    bpos: u64,
    cbspan: u64,
}

impl Paths {
    /// A frame (or region) that begins when the run's cost is `acc`, in a coordinate of its own.
    #[inline(always)]
    pub fn new(acc: u64) -> Paths {
        Paths {
            pos: acc,
            cspan: 0,
            start: acc,
            bpos: acc,
            cbspan: 0,
        }
    }

    /// A frame that begins when the run's cost is `acc`, pushed on a frame of paths `parent`: in
    /// its parent's coordinate (its paths continue the parent's current ones).
    #[inline(always)]
    pub fn child_of(parent: &Paths, acc: u64) -> Paths {
        Paths {
            pos: parent.pos,
            cspan: 0,
            start: acc,
            bpos: parent.bpos,
            cbspan: 0,
        }
    }

    /// Where the current paths are when the running total is `acc` (a frame's child that
    /// begins then begins there).
    #[inline(always)]
    pub fn at(&self, acc: u64) -> End {
        End {
            span: acc.wrapping_sub(self.pos),
            bspan: acc.wrapping_sub(self.bpos),
        }
    }

    /// Where the paths end if the frame synced now, the running total being `acc`.
    #[inline(always)]
    pub fn synced_end(&self, acc: u64) -> End {
        let at = self.at(acc);
        End {
            span: at.span.max(self.cspan),
            bspan: at.bspan.max(self.cbspan),
        }
    }

    /// The work, span and burdened span up to the point where the run's cost is `acc`, of paths
    /// in a coordinate of their own (the root's, a region's).
    #[inline(always)]
    pub fn cur(&self, acc: u64) -> Cost {
        let at = self.at(acc);
        Cost {
            work: acc.wrapping_sub(self.start),
            span: at.span,
            bspan: at.bspan,
        }
    }

    /// The measures as if synced now, without changing them, of paths in a coordinate of their
    /// own.
    #[inline(always)]
    pub fn synced(&self, acc: u64) -> Cost {
        let end = self.synced_end(acc);
        Cost {
            work: acc.wrapping_sub(self.start),
            span: end.span,
            bspan: end.bspan,
        }
    }

    /// The measures of a frame whose paths end at `end` (its own, in its parent's coordinate),
    /// the running total being `acc`, its parent's paths being `parent`: its lengths from its
    /// begin (its parent's paths then, which a parent keeps while its child runs).
    #[inline(always)]
    pub fn cost_to(&self, end: End, acc: u64, parent: &Paths) -> Cost {
        let origin = parent.at(self.start);
        Cost {
            work: acc.wrapping_sub(self.start),
            span: end.span.wrapping_sub(origin.span),
            bspan: end.bspan.wrapping_sub(origin.bspan),
        }
    }

    /// A part that ran in series in this frame ended (a call, a loop) with measures `c`: its
    /// work is in the running total already, and as much of it as `c`'s span is on the path.
    #[inline(always)]
    pub fn serial(&mut self, c: Cost) {
        self.pos = self.pos.wrapping_add(c.work.wrapping_sub(c.span));
        self.bpos = self.bpos.wrapping_add(c.work.wrapping_sub(c.bspan));
    }

    /// A call that ran in series in this frame, in its coordinate, ended where its paths end,
    /// `end`, the running total being `acc`: the frame's paths go on from there.
    #[inline(always)]
    pub fn continue_from(&mut self, acc: u64, end: End) {
        self.pos = acc.wrapping_sub(end.span);
        self.bpos = acc.wrapping_sub(end.bspan);
    }

    /// A child spawned when the running total was `child_start` returned with measures `c`; the
    /// continuation edge carries `burden`. Nothing ran in this frame meanwhile: its paths at the
    /// spawn are those at `child_start`. The child began no earlier than `after` (the ends of
    /// the siblings it depends on; zero: none). Returns where the child's paths end.
    #[inline(always)]
    pub fn child_returned(&mut self, c: Cost, child_start: u64, burden: u64, after: End) -> End {
        let at = self.at(child_start);
        let end = End {
            span: at.span.max(after.span).wrapping_add(c.span),
            bspan: at.bspan.max(after.bspan).wrapping_add(c.bspan),
        };
        self.child_ended(end, c.work, burden);
        end
    }

    /// A child spawned, in this frame's coordinate, whose paths end at `end` returned, its work
    /// being `work` (nothing ran in this frame meanwhile); the continuation edge carries `burden`.
    #[inline(always)]
    pub fn child_ended(&mut self, end: End, work: u64, burden: u64) {
        self.cspan = self.cspan.max(end.span);
        self.cbspan = self.cbspan.max(end.bspan);
        // The child's work is off the continuation's path; the burden is on the burdened one.
        self.pos = self.pos.wrapping_add(work);
        self.bpos = self.bpos.wrapping_add(work.wrapping_sub(burden));
    }

    /// The strand that begins here, the running total being `acc`, starts no earlier than `end`
    /// (a child's, which stays out: `cspan` keeps it for the next sync).
    #[inline(always)]
    pub fn wait_for(&mut self, acc: u64, end: End) {
        let at = self.at(acc);
        self.continue_from(acc, at.max(end));
    }

    /// Joins the children spawned since the last sync, the running total being `acc`.
    #[inline(always)]
    pub fn sync(&mut self, acc: u64) {
        // The span's path goes on from the later of its current end and its children's: in
        // positions, the lower of `pos` and `acc - cspan` (`acc - max(acc - pos, cspan)`: no
        // length wraps, as none exceeds the running total when there is no burden). The
        // burdened lengths may exceed it (`bpos` wraps): compared as lengths.
        debug_assert!(
            self.pos <= acc && self.cspan <= acc,
            "a span over the running total"
        );
        self.pos = self.pos.min(acc.wrapping_sub(self.cspan));
        self.bpos = acc.wrapping_sub(self.synced_end(acc).bspan);
        self.cspan = 0;
        self.cbspan = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::{Cost, End, Paths};

    #[test]
    fn strands_move_only_the_running_total() {
        // A frame begun at 100: a strand of 5, a child of (work 20, span 8, bspan 8) spawned at
        // 105, a strand of 3 after it, then a sync; burden 1,000.
        let mut p = Paths::new(100);
        p.child_returned(
            Cost {
                work: 20,
                span: 8,
                bspan: 8,
            },
            105,
            1_000,
            End::default(),
        );
        let acc = 105 + 20 + 3;
        assert_eq!(
            p.cur(acc),
            Cost {
                work: 28,
                span: 8,
                bspan: 1_008
            }
        );
        assert_eq!(
            p.synced(acc),
            Cost {
                work: 28,
                span: 13,
                bspan: 1_008
            }
        );
        p.sync(acc);
        assert_eq!(p.cur(acc), p.synced(acc));
        // A call of (work 10, span 4, bspan 4) then: the work adds, the span by 4.
        p.serial(Cost {
            work: 10,
            span: 4,
            bspan: 4,
        });
        assert_eq!(
            p.cur(acc + 10),
            Cost {
                work: 38,
                span: 17,
                bspan: 1_012
            }
        );
    }
}
