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

/// Path lengths of a frame (or of a region within one), relative to where it began, given `acc`,
/// the run's cost so far (the sum of every strand's: the engine's running total). The frame's
/// work is `acc - start`; its span (the longest path to the current point of the continuation) is
/// the work minus `slack`, the work that is not on that path (its spawned children's, and what
/// its calls had off their own spans); its burdened span the work minus `bslack`. A strand run in
/// the frame adds as much to its work as to its spans, so it changes no field: only the running
/// total moves. `cspan` is the longest path ending at the end of a child spawned since the last
/// sync (0 when none: all lengths are ≥ 0, so 0 plays the paper's −∞); `cbspan` the same in the
/// burdened dag.
///
/// Sums wrap at 2^64 (no saturation checks on the hot path): every length is at most the run's
/// total cost plus `burden` per spawn, which [`crate::Engine::sums_fit`] checks for a whole run;
/// `bslack` wraps below zero when burdens make the burdened span exceed the work, and the lengths
/// computed from it are exact all the same.
///
/// Scalar fields, in an order where no two that are combined alike are neighbours: the
/// compiler would otherwise pair `slack`/`bslack` and `cspan`/`cbspan` into 16-byte vector loads
/// that read what two 8-byte stores just wrote — a store-forwarding stall (measured in an
/// earlier form of this struct: the hottest instruction of the analysis).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Paths {
    slack: u64,
    cspan: u64,
    /// The running total when the frame began.
    pub start: u64,
    bslack: u64,
    cbspan: u64,
}

impl Paths {
    /// A frame that begins when the run's cost is `acc`.
    #[inline(always)]
    pub fn new(acc: u64) -> Paths {
        Paths {
            slack: 0,
            cspan: 0,
            start: acc,
            bslack: 0,
            cbspan: 0,
        }
    }

    /// The work, span and burdened span up to the point where the run's cost is `acc`.
    #[inline(always)]
    pub fn cur(&self, acc: u64) -> Cost {
        let work = acc.wrapping_sub(self.start);
        Cost {
            work,
            span: work.wrapping_sub(self.slack),
            bspan: work.wrapping_sub(self.bslack),
        }
    }

    /// The measures as if synced now, without changing them.
    #[inline(always)]
    pub fn synced(&self, acc: u64) -> Cost {
        let c = self.cur(acc);
        Cost {
            work: c.work,
            span: c.span.max(self.cspan),
            bspan: c.bspan.max(self.cbspan),
        }
    }

    /// A part that ran in series in this frame ended (a call, a loop) with measures `c`: its
    /// work is in the running total already, and as much of it as `c`'s span is on the path.
    #[inline(always)]
    pub fn serial(&mut self, c: Cost) {
        self.slack = self.slack.wrapping_add(c.work.wrapping_sub(c.span));
        self.bslack = self.bslack.wrapping_add(c.work.wrapping_sub(c.bspan));
    }

    /// A child spawned when the running total was `child_start` returned with measures `c`; the
    /// continuation edge carries `burden`. Nothing ran in this frame meanwhile: its paths at the
    /// spawn are those at `child_start`. The child began no earlier than `after` (the ends of
    /// the siblings it depends on; zero: none). Returns where the child's paths end.
    #[inline(always)]
    pub fn child_returned(&mut self, c: Cost, child_start: u64, burden: u64, after: End) -> End {
        let at = self.cur(child_start);
        let end = End {
            span: at.span.max(after.span).wrapping_add(c.span),
            bspan: at.bspan.max(after.bspan).wrapping_add(c.bspan),
        };
        self.cspan = self.cspan.max(end.span);
        self.cbspan = self.cbspan.max(end.bspan);
        // The child's work is off the continuation's path; the burden is on the burdened one.
        self.slack = self.slack.wrapping_add(c.work);
        self.bslack = self.bslack.wrapping_add(c.work.wrapping_sub(burden));
        end
    }

    /// The strand that begins here, the running total being `acc`, starts no earlier than `end`
    /// (a child's, which stays out: `cspan` keeps it for the next sync).
    #[inline(always)]
    pub fn wait_for(&mut self, acc: u64, end: End) {
        let c = self.cur(acc);
        self.slack = c.work.wrapping_sub(c.span.max(end.span));
        self.bslack = c.work.wrapping_sub(c.bspan.max(end.bspan));
    }

    /// Joins the children spawned since the last sync, the running total being `acc`.
    #[inline(always)]
    pub fn sync(&mut self, acc: u64) {
        let c = self.synced(acc);
        self.slack = c.work.wrapping_sub(c.span);
        self.bslack = c.work.wrapping_sub(c.bspan);
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
