//! Parallel loops in the engine: a loop's iterations, grouped in chunks of `grain`, form the
//! balanced divide-and-conquer tree a Cilk runtime builds for `cilk_for` (docs/engine.md,
//! "Parallel loops"), counted in O(log chunks) memory.

use crate::paths::Cost;

/// A complete, perfect subtree of a parallel loop's divide-and-conquer tree.
#[derive(Clone, Copy, Debug)]
struct Subtree {
    leaves: u64,
    cost: Cost,
}

/// The state of a parallel loop: a binary counter of perfect subtrees over the chunks completed so
/// far (O(log chunks) memory) and the serial segment being run: the open chunk, or the loop
/// control before the next one.
///
/// The segment is kept as a frame's paths are (see `Paths`): where it began in the running total
/// (`mark`) and what of its work is off its span and burdened span (`slack`, `bslack`), so that a
/// strand of the loop, its control code's or a leaf iteration's, costs it nothing: its work is
/// the running total's. An iteration with marks inside ends as a part whose measures
/// (`serial`) move the slacks.
///
/// The state of no loop (`Default`, a frame's that is no loop's) has a grain of 0: a leaf
/// iteration's end then finds the chunk full, and only there learns that there is no loop.
#[derive(Clone, Debug, Default)]
pub(crate) struct LoopState {
    /// Iterations a chunk: 1 or more for a loop, 0 for no loop.
    grain: u64,
    /// Iterations completed in the open chunk. 0 (no chunk open): the segment is loop
    /// control, charged to the next chunk or after the loop; more: the segment is the chunk's
    /// (its iterations and the loop control between them run serially). An iteration's begin
    /// changes nothing: iterations of one loop do not overlap, so at its end, when this counts
    /// it, the chunk is open, and between its begin and end no chunk is closed.
    in_chunk: u64,
    /// The running total when the segment began.
    mark: u64,
    slack: u64,
    bslack: u64,
    subtrees: Vec<Subtree>,
}

impl LoopState {
    /// A loop of chunks of `grain` that begins when the running total is `acc`.
    pub fn new(grain: u64, acc: u64) -> Self {
        LoopState {
            grain: grain.max(1),
            in_chunk: 0,
            mark: acc,
            slack: 0,
            bslack: 0,
            subtrees: Vec::new(),
        }
    }

    /// Whether this is a loop's state (not the `Default`, no loop's).
    #[inline(always)]
    pub fn is_loop(&self) -> bool {
        self.grain != 0
    }

    /// This state, if it is a loop's.
    #[inline(always)]
    pub fn as_loop(&mut self) -> Option<&mut LoopState> {
        self.is_loop().then_some(self)
    }

    /// This state as [`LoopState::new`] makes it, its subtree stack's memory kept.
    pub fn reset(&mut self, grain: u64, acc: u64) {
        self.grain = grain.max(1);
        self.in_chunk = 0;
        self.mark = acc;
        self.slack = 0;
        self.bslack = 0;
        self.subtrees.clear();
    }

    /// A part of measures `c` that ran in series in the loop ended (its work is in the running
    /// total already).
    #[inline(always)]
    pub fn serial(&mut self, c: Cost) {
        self.slack = self.slack.wrapping_add(c.work.wrapping_sub(c.span));
        self.bslack = self.bslack.wrapping_add(c.work.wrapping_sub(c.bspan));
    }

    /// An iteration of measures `c` ended, the running total being `acc` (a loop's state).
    #[inline(always)]
    pub fn end_iteration(&mut self, c: Cost, burden: u64, acc: u64) {
        self.serial(c);
        self.end_leaf_iteration(burden, acc);
    }

    /// An iteration that was one strand (in the running total already) ended, the running total
    /// being `acc`. Whether this is a loop's state (if not, nothing was done).
    #[inline(always)]
    pub fn end_leaf_iteration(&mut self, burden: u64, acc: u64) -> bool {
        let in_chunk = self.in_chunk + 1;
        if in_chunk < self.grain {
            self.in_chunk = in_chunk;
            return true;
        }
        if !self.is_loop() {
            return false;
        }
        self.in_chunk = in_chunk;
        self.flush_chunk(burden, acc);
        true
    }

    /// [`LoopState::end_leaf_iteration`] for a profiling engine: `None` if this is no loop's
    /// state (nothing was done), else whether the iteration closed its chunk.
    #[inline(always)]
    pub fn end_leaf_iteration_closing(&mut self, burden: u64, acc: u64) -> Option<bool> {
        let in_chunk = self.in_chunk + 1;
        if in_chunk < self.grain {
            self.in_chunk = in_chunk;
            return Some(false);
        }
        if !self.is_loop() {
            return None;
        }
        self.in_chunk = in_chunk;
        self.flush_chunk(burden, acc);
        Some(true)
    }

    /// Whether a chunk is open (some of its iterations ended, it has not closed).
    #[inline(always)]
    pub fn chunk_open(&self) -> bool {
        self.in_chunk != 0
    }

    /// The segment's measures, the running total being `acc`, and a new one begun there.
    fn take_segment(&mut self, acc: u64) -> Cost {
        let work = acc.wrapping_sub(self.mark);
        let c = Cost {
            work,
            span: work.wrapping_sub(self.slack),
            bspan: work.wrapping_sub(self.bslack),
        };
        (self.mark, self.slack, self.bslack) = (acc, 0, 0);
        c
    }

    fn flush_chunk(&mut self, burden: u64, acc: u64) {
        if self.in_chunk == 0 {
            return;
        }
        self.in_chunk = 0;
        let mut right = Subtree {
            leaves: 1,
            cost: self.take_segment(acc),
        };
        while let Some(left) = self.subtrees.last().copied() {
            if left.leaves != right.leaves {
                break;
            }
            self.subtrees.pop();
            right = join(left, right, burden);
        }
        self.subtrees.push(right);
    }

    /// Closes the loop, the running total being `acc`: returns the tree's measures, its number
    /// of chunks, and the trailing loop-control cost that runs after it.
    /// The state is left with no subtrees, for [`LoopState::reset`].
    #[inline(always)]
    pub fn finish(&mut self, burden: u64, acc: u64) -> (Cost, u64, Cost) {
        self.flush_chunk(burden, acc);
        let tail = self.take_segment(acc);
        let mut tree: Option<Subtree> = None;
        while let Some(left) = self.subtrees.pop() {
            tree = Some(match tree {
                None => left,
                Some(right) => join(left, right, burden),
            });
        }
        match tree {
            Some(tree) => (tree.cost, tree.leaves, tail),
            None => (Cost::default(), 0, tail),
        }
    }
}

/// The node of the divide-and-conquer tree over `left` then `right`: the left subtree is spawned,
/// the right one is the continuation (so its paths carry one burden more), then both are synced.
fn join(left: Subtree, right: Subtree, burden: u64) -> Subtree {
    Subtree {
        leaves: left.leaves + right.leaves,
        cost: Cost {
            work: left.cost.work.saturating_add(right.cost.work),
            span: left.cost.span.max(right.cost.span),
            bspan: left.cost.bspan.max(right.cost.bspan.saturating_add(burden)),
        },
    }
}
