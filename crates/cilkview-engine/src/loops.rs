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
/// far (O(log chunks) memory) and the chunk being filled.
#[derive(Clone, Debug)]
pub(crate) struct LoopState {
    grain: u64,
    /// Iterations completed in the open chunk.
    in_chunk: u64,
    /// The open chunk, if any: its iterations and the loop control between them run serially.
    chunk: Option<Cost>,
    /// Loop-control cost seen while no chunk is open: charged to the next chunk, or after the loop.
    control: Cost,
    subtrees: Vec<Subtree>,
}

impl LoopState {
    pub fn new(grain: u64) -> Self {
        LoopState {
            grain: grain.max(1),
            in_chunk: 0,
            chunk: None,
            control: Cost::default(),
            subtrees: Vec::new(),
        }
    }

    /// This state as [`LoopState::new`] makes it, its subtree stack's memory kept.
    pub fn reset(&mut self, grain: u64) {
        self.grain = grain.max(1);
        self.in_chunk = 0;
        self.chunk = None;
        self.control = Cost::default();
        self.subtrees.clear();
    }

    #[inline]
    pub fn serial(&mut self, c: Cost) {
        match &mut self.chunk {
            Some(chunk) => chunk.add(c),
            None => self.control.add(c),
        }
    }

    #[inline]
    pub fn begin_iteration(&mut self) {
        if self.chunk.is_none() {
            self.chunk = Some(std::mem::take(&mut self.control));
        }
    }

    #[inline]
    pub fn end_iteration(&mut self, iteration: Cost, burden: u64) {
        self.serial(iteration);
        self.in_chunk += 1;
        if self.in_chunk >= self.grain {
            self.flush_chunk(burden);
        }
    }

    fn flush_chunk(&mut self, burden: u64) {
        if let Some(chunk) = self.chunk.take() {
            self.in_chunk = 0;
            let mut right = Subtree {
                leaves: 1,
                cost: chunk,
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
    }

    /// Closes the loop: returns the tree's measures, its number of chunks, and the trailing
    /// loop-control cost that runs after it.
    /// The state is left with no subtrees, for [`LoopState::reset`].
    pub fn finish(&mut self, burden: u64) -> (Cost, u64, Cost) {
        self.flush_chunk(burden);
        let mut acc: Option<Subtree> = None;
        while let Some(left) = self.subtrees.pop() {
            acc = Some(match acc {
                None => left,
                Some(right) => join(left, right, burden),
            });
        }
        match acc {
            Some(tree) => (tree.cost, tree.leaves, std::mem::take(&mut self.control)),
            None => (Cost::default(), 0, std::mem::take(&mut self.control)),
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
