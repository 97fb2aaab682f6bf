//! The profiler's frames: a shadow of the engine's frame stack, each frame with Figure 3's span
//! variables as paths (`PathProf`), a loop's with its chunks (`LoopProf`). See docs/engine.md,
//! "Call-site profiles".

use super::context_map::{Arena, ContextMap};
use super::path_tree::{FramePaths, PathTree, Start};
use super::tables::Invocation;

/// A path (a span variable of Figure 3) and the on-span data of the invocations on it.
#[derive(Clone, Debug, Default)]
pub(super) struct PathProf {
    pub(super) span: u64,
    /// Length of the path's strands that ran under no call site nested in the frame's context:
    /// the local span of the invocation that will own it.
    pub(super) own: u64,
    pub(super) prof: ContextMap,
}

impl PathProf {
    /// `self` followed by `o` in series.
    #[inline(always)]
    pub(super) fn then(&mut self, arena: &mut Arena, keys: usize, o: PathProf) {
        self.span = self.span.wrapping_add(o.span);
        self.own = self.own.wrapping_add(o.own);
        // Most paths that follow hold no invocation (a strand, a call of an unprofiled
        // function): nothing to union; into a path that holds none, the prof moves whole (in
        // line); only two lists are spliced out of line.
        if !o.prof.is_empty() {
            self.then_prof(arena, keys, o.prof);
        }
    }

    /// `self` followed by `o` in series, `o` left empty (as `then(take(o))`, in place).
    #[inline(always)]
    pub(super) fn absorb(&mut self, arena: &mut Arena, keys: usize, o: &mut PathProf) {
        self.span = self.span.wrapping_add(o.span);
        self.own = self.own.wrapping_add(o.own);
        o.span = 0;
        o.own = 0;
        if !o.prof.is_empty() {
            self.then_prof(arena, keys, std::mem::take(&mut o.prof));
        }
    }

    /// The prof part of [`PathProf::then`], for a non-empty `o`: moved whole into a path that
    /// holds none (in line), else the two unioned (out of line).
    #[inline(always)]
    fn then_prof(&mut self, arena: &mut Arena, keys: usize, o: ContextMap) {
        if self.prof.is_empty() {
            self.prof = o;
        } else {
            self.union_prof(arena, keys, o);
        }
    }

    /// The prof part of [`PathProf::then`] when both profs hold something.
    #[inline(never)]
    fn union_prof(&mut self, arena: &mut Arena, keys: usize, mut o: ContextMap) {
        self.prof.union(arena, keys, &mut o);
    }

    /// A strand of `cost` at the end of the path.
    #[inline(always)]
    pub(super) fn strand(&mut self, cost: u64) {
        self.span = self.span.wrapping_add(cost);
        self.own = self.own.wrapping_add(cost);
    }

    pub(super) fn free(self, arena: &mut Arena) {
        let mut p = self.prof;
        p.free(arena);
    }

    /// Empties the path in place.
    #[inline(always)]
    pub(super) fn clear(&mut self, arena: &mut Arena) {
        self.span = 0;
        self.own = 0;
        if !self.prof.is_empty() {
            self.prof.free(arena);
        }
    }
}

/// A parallel loop: its critical path runs through its longest chunk (the divide-and-conquer tree
/// adds nothing to the unburdened span), so it keeps the open chunk, the loop control not yet in a
/// chunk, and the longest chunk so far — mirroring the engine's `LoopState`. (Paths kept in place,
/// with flags, not in options: a chunk opens and closes by swaps.)
#[derive(Clone, Debug, Default)]
pub(super) struct LoopProf {
    pub(super) grain: u64,
    pub(super) in_chunk: u64,
    /// Whether a chunk is open: then `chunk` is it (else `chunk` is empty).
    open: bool,
    chunk: PathProf,
    pub(super) control: PathProf,
    /// Whether a chunk has closed: then `best` is the longest (else `best` is empty).
    has_best: bool,
    best: PathProf,
}

impl LoopProf {
    /// The path that code of the loop now runs on: the open chunk, or the control.
    #[inline(always)]
    pub(super) fn current(&mut self) -> &mut PathProf {
        if self.open {
            &mut self.chunk
        } else {
            &mut self.control
        }
    }

    pub(super) fn serial(&mut self, arena: &mut Arena, keys: usize, x: PathProf) {
        self.current().then(arena, keys, x);
    }

    /// An iteration begins: a chunk opens unless one is open (the control so far is its start).
    #[inline(always)]
    pub(super) fn begin_iteration(&mut self) {
        if !self.open {
            self.open = true;
            std::mem::swap(&mut self.chunk, &mut self.control);
        }
    }

    /// An iteration whose path is `x` ended: a chunk of `grain` iterations closes.
    #[inline]
    pub(super) fn end_iteration(&mut self, arena: &mut Arena, keys: usize, x: PathProf) {
        self.serial(arena, keys, x);
        self.iteration_ended(arena);
    }

    /// An iteration that held one strand of `cost` ended.
    #[inline(always)]
    pub(super) fn end_leaf_iteration(&mut self, arena: &mut Arena, cost: u64) {
        self.current().strand(cost);
        self.iteration_ended(arena);
    }

    #[inline(always)]
    fn iteration_ended(&mut self, arena: &mut Arena) {
        self.in_chunk += 1;
        if self.in_chunk >= self.grain {
            self.flush(arena);
        }
    }

    /// The open chunk, if any, closes: the longer of it and the longest so far is kept (ties:
    /// the earlier).
    pub(super) fn flush(&mut self, arena: &mut Arena) {
        if self.open {
            self.open = false;
            self.in_chunk = 0;
            if self.has_best && self.best.span >= self.chunk.span {
                self.chunk.clear(arena);
            } else {
                self.best.clear(arena);
                std::mem::swap(&mut self.best, &mut self.chunk);
                self.has_best = true;
            }
        }
    }

    /// The longest chunk (an empty path if none closed), taken: the loop ends.
    pub(super) fn take_best(&mut self) -> PathProf {
        self.has_best = false;
        std::mem::take(&mut self.best)
    }
}

/// A frame of the profiler's stack. Frames are slots reused from one push to the next: a
/// popped frame leaves its paths empty, and a push sets its few words in place.
#[derive(Clone, Debug)]
pub(super) struct PFrame {
    /// The calling context the frame's strands belong to.
    pub(super) ctx: u32,
    /// The function instance the frame's code runs in: the stack index of the innermost
    /// function frame (itself for a function frame; the root is 0).
    pub(super) instance: u32,
    /// For a frame that is an invocation of a call site.
    pub(super) invocation: Option<Invocation>,
    /// Work in the frame outside nested call sites.
    pub(super) local_work: u64,
    /// Figure 3's span variables: the prefix p, the continuation c, the paths since the last
    /// sync in the profiler's tree.
    pub(super) paths: FramePaths,
    /// For a spawned frame: where it starts in its parent.
    pub(super) from: Start,
    pub(super) lp: Option<Box<LoopProf>>,
}

impl PFrame {
    /// A frame whose paths since its last sync will begin at the top of `tree`.
    pub(super) fn new(ctx: u32, instance: u32, tree: &PathTree) -> Self {
        PFrame {
            ctx,
            instance,
            invocation: None,
            local_work: 0,
            paths: FramePaths::new(tree),
            from: Start::default(),
            lp: None,
        }
    }

    /// The slot set up as a frame that begins now (its paths are empty: see `Profiler::pop`).
    #[inline(always)]
    pub(super) fn begin(
        &mut self,
        ctx: u32,
        instance: u32,
        invocation: Option<Invocation>,
        tree: &PathTree,
    ) {
        self.ctx = ctx;
        self.instance = instance;
        self.invocation = invocation;
        self.local_work = 0;
        self.paths.begin(tree);
    }

    /// The path the frame's code now runs on.
    #[inline(always)]
    pub(super) fn current(&mut self) -> &mut PathProf {
        match &mut self.lp {
            Some(lp) => lp.current(),
            None => &mut self.paths.c,
        }
    }

    pub(super) fn serial(&mut self, arena: &mut Arena, keys: usize, x: PathProf) {
        self.current().then(arena, keys, x);
    }

    /// The frame spawns a child: where it starts (none in a loop's control code, whose spawns
    /// are serial).
    pub(super) fn spawning(&mut self, tree: &mut PathTree) -> Start {
        match self.lp {
            Some(_) => Start::default(),
            None => self.paths.spawning(tree),
        }
    }

    /// A spawned child that started at `from` returned with path `x`.
    pub(super) fn spawned(
        &mut self,
        arena: &mut Arena,
        keys: usize,
        tree: &mut PathTree,
        from: Start,
        x: PathProf,
    ) {
        match self.lp {
            Some(_) => self.serial(arena, keys, x),
            None => self.paths.spawned(tree, from, x),
        }
    }

    #[inline(always)]
    pub(super) fn sync(&mut self, arena: &mut Arena, keys: usize, tree: &mut PathTree) {
        if self.lp.is_none() {
            self.paths.sync(arena, keys, tree);
        }
    }
}
