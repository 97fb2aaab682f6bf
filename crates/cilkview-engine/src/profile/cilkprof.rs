//! The profiling half of the engine: Cilkprof's algorithm (paper Figure 3 with a prof per span
//! variable, §4) over a shadow of the engine's frame stack. The engine calls one hook per event;
//! each costs O(1) amortized. See docs/engine.md, "Call-site profiles".

use super::context_map::{Arena, Entry};
use super::frames::PFrame;
use super::path_tree::{PathTree, Start};
use super::tables::{Tables, ROOT};
use super::{CallSite, Profile, SiteKind, WorkSpan};
use crate::frame::FrameKind;

/// The function instance of a call held by the frame at depth d (`PFrame::hold_call`) is
/// d with this bit set: distinct from every frame's depth.
const HELD_CALL: u32 = 1 << 31;

#[derive(Clone, Debug)]
pub(crate) struct Profiler {
    tables: Tables,
    arena: Arena,
    /// The frames' paths since their last syncs.
    tree: PathTree,
    /// The frames, `stack[depth]` the top one; the slots above it are kept for reuse.
    stack: Vec<PFrame>,
    depth: usize,
    /// The site of the call held, if a call is: a frame begun and not pushed yet, the engine's
    /// pending one (a leaf call or iteration, whose frame the engine never pushes if the next
    /// event is its end), whose kind the engine tells.
    held_site: Option<CallSite>,
    /// The cost of the strands the held call ran before its latest (regions that held one
    /// strand, measured at their begins with no frame pushed, as the engine's batches do); set
    /// when a call is held. (A held iteration's go to its loop's chunk either way: an iteration
    /// is no invocation, its frame's strands are its loop's.)
    held_cost: u64,
}

impl Profiler {
    pub fn new() -> Self {
        Profiler {
            tables: Tables::new(),
            arena: Arena::new(),
            tree: PathTree::default(),
            stack: vec![PFrame::new(ROOT, 0, &PathTree::default())],
            depth: 0,
            held_site: None,
            held_cost: 0,
        }
    }

    #[inline(always)]
    fn top(&mut self) -> &mut PFrame {
        &mut self.stack[self.depth]
    }

    /// A function at `site` was entered (its entry's strand already told): its frame is pushed
    /// at the next event unless that event is its exit.
    #[inline(always)]
    pub fn hold_call(&mut self, site: Option<CallSite>) {
        self.held_site = site;
        self.held_cost = 0;
    }

    /// The held frame, of `kind` (a function's or an iteration's), pushed now (a call's begun
    /// before the strands it ran so far), the running total being `acc`: the next event is not
    /// its end. (An iteration's frame is held with nothing to do: its chunk, if it opens one,
    /// begins with the loop's current path.)
    #[inline(always)]
    pub fn push_held(&mut self, kind: FrameKind, acc: u64) {
        if kind == FrameKind::Function {
            let start = acc.wrapping_sub(self.held_cost);
            self.push(FrameKind::Function, self.held_site, start)
        } else {
            self.push(FrameKind::Iteration, None, acc)
        }
    }

    /// A strand of `cost` ran in the held frame, which stays held (a region that held one
    /// strand, measured at its begin).
    #[inline(always)]
    pub fn strand_in_held(&mut self, cost: u64) {
        self.held_cost = self.held_cost.wrapping_add(cost);
    }

    /// The held call ends at this event, whose strand of `cost` was its last: what pushing its
    /// frame, its strands and popping it would do, without the frame. (A call without a site:
    /// strands of its caller's, in line.)
    #[inline(always)]
    pub fn end_held_call(&mut self, cost: u64) {
        if let Some(site) = self.held_site {
            self.leaf_invocation(site, cost);
        }
    }

    /// The held iteration ends at this event, whose strand of `cost` was all it held (as
    /// [`Profiler::end_held_call`]), the running total now `acc`; `closes`: its chunk closes
    /// with it (the engine counts).
    #[inline(always)]
    pub fn end_held_iteration(&mut self, acc: u64, closes: bool) {
        if closes {
            self.chunk_closed(acc);
        }
    }

    /// The top frame is a loop whose open chunk closes now (the engine's count of its
    /// iterations says when: its last iteration ended, or the loop ends), the running total
    /// being `acc`.
    #[inline(always)]
    pub fn chunk_closed(&mut self, acc: u64) {
        let f = &mut self.stack[self.depth];
        if f.is_loop {
            f.lp.chunk_closed(&mut self.arena, &mut f.paths.c, acc);
        }
    }

    /// A call at `site` whose frame held strands (no frame, nothing nested) ended, the last of
    /// `last` ([`Profiler::strand_in_held`] the others): [`Profiler::push`] and
    /// [`Profiler::pop`] of an invocation, without the frame.
    #[inline(always)]
    fn leaf_invocation(&mut self, site: CallSite, last: u64) {
        let cost = last.wrapping_add(self.held_cost);
        let (tables, arena, f) = (
            &mut self.tables,
            &mut self.arena,
            &mut self.stack[self.depth],
        );
        let (ctx, entry) = tables.leaf(site, f.ctx, f.instance, cost);
        let keys = tables.keys();
        // The invocation's strand (in the running total): on the path, owned by the invocation
        // (nothing of it local to the parent).
        f.local_work = f.local_work.wrapping_add(cost);
        let p = f.current();
        p.own = p.own.wrapping_add(cost);
        p.prof.update(arena, keys, ctx, entry);
    }

    /// A frame is pushed, begun at the running total `start` (now, or for a held call before
    /// the strands it ran held); `site` only for function enters and spawns. (A strand changes
    /// nothing here: the frames' current paths and local work are live, `frames.rs`, against
    /// the engine's running total, which every hook is given.)
    #[inline(always)]
    pub fn push(&mut self, kind: FrameKind, site: Option<CallSite>, start: u64) {
        let (top, tree) = (&mut self.stack[self.depth], &mut self.tree);
        let (ctx, caller) = (top.ctx, top.instance);
        let from = if kind == FrameKind::Spawn {
            top.spawning(tree, start)
        } else {
            Start::default()
        };
        self.push_above(kind, site, start, (ctx, caller), from);
    }

    /// The held call, a function's, pushed (see [`Profiler::push_held`]), the running total
    /// being `acc`, and at once a spawn at `site` in it, its first event, at `now`: the
    /// function's frame, just begun, not looked up again (its continuation holds no
    /// invocation, it has spawned nothing: the child starts after it).
    #[inline(always)]
    pub fn push_held_call_spawning(&mut self, acc: u64, site: Option<CallSite>, now: u64) {
        if self.held_site.is_none() && self.top_holds_call() {
            // A call without a site, held by the top frame (no frame of its own): the child
            // starts after that frame's continuation.
            let top = &mut self.stack[self.depth];
            let from = top.paths.spawning(&mut self.tree, now);
            let function = (top.ctx, top.instance);
            self.push_above(FrameKind::Spawn, site, now, function, from);
            return;
        }
        let top = &self.stack[self.depth];
        let (ctx, caller) = (top.ctx, top.instance);
        let start = acc.wrapping_sub(self.held_cost);
        let held = (FrameKind::Function, self.held_site);
        let function = self.push_above(held.0, held.1, start, (ctx, caller), Start::default());
        let from = Start::first_in_fresh(now.wrapping_sub(start));
        self.push_above(FrameKind::Spawn, site, now, function, from);
    }

    /// A call of a function without a site begins: held by the top frame if it can
    /// ([`PFrame::hold_call`]), in a function instance of its own (the top frame's depth with
    /// [`HELD_CALL`]). Whether it is.
    #[inline(always)]
    fn top_holds_call(&mut self) -> bool {
        let depth = self.depth;
        self.stack[depth].hold_call(depth as u32 | HELD_CALL)
    }

    /// A frame of `kind` pushed above the top frame, whose context and function instance are
    /// `(ctx, caller)`, begun at the running total `start`, a spawned one starting at `from`
    /// in its parent: the new top frame's context and function instance.
    #[inline(always)]
    fn push_above(
        &mut self,
        kind: FrameKind,
        site: Option<CallSite>,
        start: u64,
        (ctx, caller): (u32, u32),
        from: Start,
    ) -> (u32, u32) {
        let depth = self.depth + 1;
        // A call of a function without a site held by the top frame, if it can: no frame.
        if kind == FrameKind::Function && site.is_none() && self.top_holds_call() {
            return (ctx, self.stack[self.depth].instance);
        }
        // A function frame is a new function instance; any other frame runs in its parent's.
        let instance = if kind == FrameKind::Function {
            depth as u32
        } else {
            caller
        };
        let (ctx, invocation) = match site {
            None => (ctx, None),
            Some(site) => {
                let kind = if kind == FrameKind::Spawn {
                    SiteKind::Spawn
                } else {
                    SiteKind::Call
                };
                let (ctx, invocation) = self.tables.open(kind, site, ctx, caller);
                (ctx, Some(invocation))
            }
        };
        let f = self.enter_slot(ctx, instance, invocation, start);
        // Only a spawned frame's start in its parent is read.
        if kind == FrameKind::Spawn {
            f.from = from;
        }
        (ctx, instance)
    }

    /// The next slot of the stack, set up as the top frame, begun at the running total `start`;
    /// that frame.
    #[inline(always)]
    fn enter_slot(
        &mut self,
        ctx: u32,
        instance: u32,
        invocation: Option<super::tables::Invocation>,
        start: u64,
    ) -> &mut PFrame {
        self.depth += 1;
        let f = if self.depth < self.stack.len() {
            &mut self.stack[self.depth]
        } else {
            Self::grow(&mut self.stack, &self.tree)
        };
        f.begin(ctx, instance, invocation, start);
        f
    }

    /// One more slot on the stack (deeper than ever before), the new top.
    #[cold]
    #[inline(never)]
    fn grow<'a>(stack: &'a mut Vec<PFrame>, tree: &PathTree) -> &'a mut PFrame {
        stack.push(PFrame::new(ROOT, 0, tree));
        stack.last_mut().expect("just pushed")
    }

    /// A loop's frame is pushed, the running total being `acc`.
    pub fn push_loop(&mut self, acc: u64) {
        let (ctx, instance) = (self.top().ctx, self.top().instance);
        // Its control, live from `acc` on, is the slot's continuation, begun so.
        self.enter_slot(ctx, instance, None, acc).is_loop = true;
    }

    #[inline(always)]
    pub fn sync(&mut self, acc: u64) {
        let keys = self.tables.keys();
        let f = &mut self.stack[self.depth];
        f.sync(&mut self.arena, keys, &mut self.tree, acc);
    }

    /// `SpawnAfter{sibling}` in the top frame.
    pub fn spawn_after(&mut self, sibling: u64) {
        let f = &mut self.stack[self.depth];
        if !f.is_loop {
            f.paths.spawn_after(&mut self.tree, sibling);
        }
    }

    /// `WaitFor{sibling}` in the top frame.
    pub fn wait_for(&mut self, sibling: u64, acc: u64) {
        let f = &mut self.stack[self.depth];
        if !f.is_loop {
            f.paths
                .wait_for(&mut self.arena, &mut self.tree, sibling, acc);
        }
    }

    /// The top frame, of `kind`, ends and folds into its parent the way the engine's `pop` does;
    /// the engine measured it `work` and `span` (its own measures are those, or more by strands
    /// it ran while held, which the engine gave its parent: the same work and span). (The frame
    /// is worked on in its slot, which it leaves with empty paths for the next push.)
    #[inline(always)]
    pub fn pop(&mut self, kind: FrameKind, work: u64, span: u64, acc: u64) {
        let keys = self.tables.keys();
        let arena = &mut self.arena;
        let top = &mut self.stack[self.depth];
        if top.holds_call {
            // The call the top frame holds ends (the engine ends frames innermost first).
            debug_assert_eq!(kind, FrameKind::Function);
            top.end_call(arena, keys, &mut self.tree, acc);
            return;
        }
        let (below, above) = self.stack.split_at_mut(self.depth);
        let (f, parent) = (
            &mut above[0],
            below.last_mut().expect("never pops the root"),
        );
        self.depth -= 1;
        if f.is_loop {
            // Its open chunk, if any, was closed first (`Profiler::chunk_closed`); the slot
            // is left as no loop's, its chunks and control empty.
            f.is_loop = false;
            let tree = f.lp.take_best();
            let mut control = std::mem::take(&mut f.paths.c);
            control.flip(acc);
            parent.child_ended(f.start, acc, Some(f.local_work(acc)));
            let into = parent.current();
            into.then_live(arena, keys, tree);
            into.then_live(arena, keys, control);
            return;
        }
        f.paths.sync_to_end(arena, keys, &mut self.tree, acc);
        let local_work = f.local_work(acc);
        // The frame's path, worked on in its slot (moved out only into the tree or a loop).
        let path = &mut f.paths.p;
        let ws = WorkSpan::new(acc.wrapping_sub(f.start), path.span);
        debug_assert_eq!(
            ws.span.wrapping_sub(span),
            ws.work.wrapping_sub(work),
            "profiler and engine disagree on a span"
        );
        match f.invocation {
            Some(inv) => {
                let entry = self.tables.close(f.ctx, inv, ws, local_work, path.own);
                path.own = 0;
                path.prof.update(arena, keys, f.ctx, entry);
                parent.child_ended(f.start, acc, None);
            }
            None => parent.child_ended(f.start, acc, Some(local_work)),
        }
        match kind {
            FrameKind::Spawn => {
                let path = std::mem::take(path);
                parent.spawned(arena, keys, &mut self.tree, f.from, path)
            }
            // An iteration's: the loop's chunk closes after, if it does
            // (`Profiler::chunk_closed`).
            FrameKind::Iteration | FrameKind::Function | FrameKind::Root | FrameKind::Loop => {
                parent.current().absorb_live(arena, keys, path)
            }
        }
    }

    /// Nodes of the arena (its high-water mark), for memory tests.
    #[allow(dead_code)]
    pub fn arena_capacity(&self) -> usize {
        self.arena.capacity()
    }

    /// Ends the root (every other frame has been popped) whose measures are `work`, `span`, the
    /// running total being `acc`.
    pub fn finish(mut self, work: u64, span: u64, acc: u64) -> Profile {
        debug_assert_eq!(self.depth, 0);
        let keys = self.tables.keys();
        let root = &mut self.stack[0];
        root.sync(&mut self.arena, keys, &mut self.tree, acc);
        debug_assert_eq!(
            root.paths.p.span, span,
            "profiler and engine disagree on the span"
        );
        let on_span: Vec<(u32, Entry)> = root.paths.p.prof.drain(&mut self.arena, keys);
        let (local_work, local_span) = (root.local_work(acc), root.paths.p.own);
        self.tables
            .into_profile(WorkSpan::new(work, span), local_work, local_span, on_span)
    }
}
