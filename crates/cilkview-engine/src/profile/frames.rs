//! The profiler's frames: a shadow of the engine's frame stack, each frame with Figure 3's span
//! variables as paths (`PathProf`), a loop's with its chunks (`LoopProf`). See docs/engine.md,
//! "Call-site profiles".
//!
//! A strand adds to the profiler's running total and to nothing else, as to the engine's: the
//! path a frame's code runs on (its *current* path) and the frame's local work are kept *live*,
//! each length as the running total less it (`PathProf::flip` turns a live path into its lengths
//! and back), so that a strand lengthens them without being told. A child's work, which the
//! running total gained while it ran, is taken back out of its parent's when it returns
//! (`PathProf::advance`). Every other path holds its lengths.

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

    /// A live path as its lengths at the running total `acc`, or a path's lengths as a live
    /// path from `acc` on (each length `acc` less it: the same map both ways).
    #[inline(always)]
    pub(super) fn flip(&mut self, acc: u64) {
        self.span = acc.wrapping_sub(self.span);
        self.own = acc.wrapping_sub(self.own);
    }

    /// The path made empty and live from the running total `acc` on (its lengths, whatever
    /// they were, dropped: a path taken, cleared or newly begun).
    #[inline(always)]
    pub(super) fn live_from(&mut self, acc: u64) {
        self.span = acc;
        self.own = acc;
    }

    /// A live path: `work` the running total gained that is not on it (a child's, ended).
    #[inline(always)]
    pub(super) fn advance(&mut self, work: u64) {
        self.span = self.span.wrapping_add(work);
        self.own = self.own.wrapping_add(work);
    }

    /// A live path: followed by `o` (lengths) in series, `o` left empty; `o`'s lengths are
    /// already in the running total (see [`PathProf::advance`]).
    #[inline(always)]
    pub(super) fn absorb_live(&mut self, arena: &mut Arena, keys: usize, o: &mut PathProf) {
        self.span = self.span.wrapping_sub(o.span);
        self.own = self.own.wrapping_sub(o.own);
        o.span = 0;
        o.own = 0;
        if !o.prof.is_empty() {
            self.then_prof(arena, keys, std::mem::take(&mut o.prof));
        }
    }

    /// A live path: followed by `o` in series (as [`PathProf::absorb_live`]).
    #[inline(always)]
    pub(super) fn then_live(&mut self, arena: &mut Arena, keys: usize, mut o: PathProf) {
        self.absorb_live(arena, keys, &mut o);
    }

    pub(super) fn free(self, arena: &mut Arena) {
        let mut p = self.prof;
        p.free(arena);
    }

    /// The path's prof emptied (its lengths kept: to be set).
    #[inline(always)]
    pub(super) fn free_prof(&mut self, arena: &mut Arena) {
        if !self.prof.is_empty() {
            self.prof.free(arena);
        }
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

/// A parallel loop's chunks: its critical path runs through its longest chunk (the
/// divide-and-conquer tree adds nothing to the unburdened span), so its frame keeps the longest
/// chunk so far beside the path its code runs on (the frame's continuation, live: the loop
/// control since the last chunk closed, and the iterations of the open chunk, if any, after it;
/// a chunk's path begins with the control before it, so a chunk opens without a change here) —
/// mirroring the engine's `LoopState`, which counts the iterations and says when a chunk closes
/// (`Profiler::chunk_closed`). Kept in its frame's slot, empty when the frame is no loop.
#[derive(Clone, Debug, Default)]
pub(super) struct LoopProf {
    /// Whether a chunk has closed: then `best` is the longest (else `best` is empty).
    has_best: bool,
    best: PathProf,
}

impl LoopProf {
    /// The open chunk, the live path `cur`, closes at the running total `acc`: the longer of it
    /// and the longest so far is kept (ties: the earlier); `cur`, empty, is live from `acc` on.
    #[inline(always)]
    pub(super) fn chunk_closed(&mut self, arena: &mut Arena, cur: &mut PathProf, acc: u64) {
        let span = acc.wrapping_sub(cur.span);
        if self.has_best && self.best.span >= span {
            // Its lengths are set below.
            cur.free_prof(arena);
        } else if cur.prof.is_empty() {
            // A chunk that holds no invocation (its iterations leaves): its lengths alone.
            self.best.free_prof(arena);
            self.best.span = span;
            self.best.own = acc.wrapping_sub(cur.own);
            self.has_best = true;
        } else {
            cur.flip(acc);
            self.best.clear(arena);
            std::mem::swap(&mut self.best, cur);
            self.has_best = true;
        }
        cur.live_from(acc);
    }

    /// The longest chunk (an empty path if none closed), taken: the loop ends.
    #[inline(always)]
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
    /// Work in the frame outside nested call sites, live (the running total less it).
    pub(super) local_work: u64,
    /// The running total when the frame began.
    pub(super) start: u64,
    /// Figure 3's span variables: the prefix p, the continuation c, the paths since the last
    /// sync in the profiler's tree.
    pub(super) paths: FramePaths,
    /// For a spawned frame: where it starts in its parent.
    pub(super) from: Start,
    /// Whether the frame is a loop's (its code's path then `paths.c`, its chunks `lp`).
    pub(super) is_loop: bool,
    pub(super) lp: LoopProf,
    /// Whether the frame holds a call of a function without a site, begun when the frame had
    /// nothing outstanding (no child since its last sync), in place of that call's own frame
    /// (`Profiler::push_above`): its code runs in the call's function instance, `instance`,
    /// until the call ends (the frame's own is then `outer_instance`).
    pub(super) holds_call: bool,
    pub(super) outer_instance: u32,
}

impl PFrame {
    /// A frame whose paths since its last sync will begin at the top of `tree`.
    pub(super) fn new(ctx: u32, instance: u32, tree: &PathTree) -> Self {
        PFrame {
            ctx,
            instance,
            invocation: None,
            local_work: 0,
            start: 0,
            paths: FramePaths::new(tree),
            from: Start::default(),
            is_loop: false,
            lp: LoopProf::default(),
            holds_call: false,
            outer_instance: 0,
        }
    }

    /// The slot set up as a frame that begins now, at the running total `acc` (its paths are
    /// empty: see `Profiler::pop`).
    #[inline(always)]
    pub(super) fn begin(
        &mut self,
        ctx: u32,
        instance: u32,
        invocation: Option<Invocation>,
        acc: u64,
    ) {
        self.ctx = ctx;
        self.instance = instance;
        self.invocation = invocation;
        self.local_work = acc;
        self.start = acc;
        self.paths.begin(acc);
    }

    /// A call of a function without a site begins in the frame, which holds it (see
    /// `holds_call`), if it is no loop's, holds no other and has nothing outstanding (else
    /// the call gets a frame of its own): whether it does. `instance` is the call's function
    /// instance.
    #[inline(always)]
    pub(super) fn hold_call(&mut self, instance: u32) -> bool {
        if self.is_loop || self.holds_call || !self.paths.settled() {
            return false;
        }
        self.holds_call = true;
        self.outer_instance = self.instance;
        self.instance = instance;
        true
    }

    /// The call the frame holds ends at the running total `acc`: its function's children
    /// joined (its implicit sync, when it has any outstanding), the frame's own instance back.
    /// What popping the call's frame into this one would do: the call's path and local work
    /// are this frame's, in series after what ran in it before the call.
    #[inline(always)]
    pub(super) fn end_call(
        &mut self,
        arena: &mut Arena,
        keys: usize,
        tree: &mut PathTree,
        acc: u64,
    ) {
        self.holds_call = false;
        self.instance = self.outer_instance;
        if !self.paths.settled() {
            self.sync(arena, keys, tree, acc);
        }
    }

    /// The frame's local work at the running total `acc`.
    #[inline(always)]
    pub(super) fn local_work(&self, acc: u64) -> u64 {
        acc.wrapping_sub(self.local_work)
    }

    /// A child that began at the running total `start` ended at `acc`: its work taken back out
    /// of the frame's live lengths (none of it runs on the frame's current path), and out of its
    /// local work unless `local` (the child's local work, which is the frame's too: a child that
    /// is no invocation of a call site).
    #[inline(always)]
    pub(super) fn child_ended(&mut self, start: u64, acc: u64, local: Option<u64>) {
        let work = acc.wrapping_sub(start);
        self.local_work = self
            .local_work
            .wrapping_add(work.wrapping_sub(local.unwrap_or(0)));
        self.current().advance(work);
    }

    /// The path the frame's code now runs on (a loop's: the open chunk, or the control).
    #[inline(always)]
    pub(super) fn current(&mut self) -> &mut PathProf {
        &mut self.paths.c
    }

    /// The frame spawns a child at the running total `acc`: where it starts (none in a loop's
    /// control code, whose spawns are serial).
    #[inline(always)]
    pub(super) fn spawning(&mut self, tree: &mut PathTree, acc: u64) -> Start {
        if self.is_loop {
            Start::default()
        } else {
            self.paths.spawning(tree, acc)
        }
    }

    /// A spawned child that started at `from` returned with path `x` (its work already taken
    /// out, see [`PFrame::child_ended`]).
    #[inline(always)]
    pub(super) fn spawned(
        &mut self,
        arena: &mut Arena,
        keys: usize,
        tree: &mut PathTree,
        from: Start,
        x: PathProf,
    ) {
        if self.is_loop {
            self.paths.c.then_live(arena, keys, x)
        } else {
            self.paths.spawned(tree, from, x)
        }
    }

    /// The frame syncs at the running total `acc`.
    #[inline(always)]
    pub(super) fn sync(&mut self, arena: &mut Arena, keys: usize, tree: &mut PathTree, acc: u64) {
        if !self.is_loop {
            self.paths.sync(arena, keys, tree, acc);
        }
    }
}
