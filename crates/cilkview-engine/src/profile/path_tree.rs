//! The paths of the profiler's frames since their last syncs, as a tree of segments, so that a
//! child may start after a sibling's end (`SpawnAfter`) and a strand may wait for one
//! (`WaitFor`) with the on-span data of the path that reaches it (docs/engine.md, "Call-site
//! profiles", dependences).
//!
//! A frame's paths since its last sync all begin where its last sync ended (its prefix `p`): each
//! is a chain of *segments* — a part of the continuation between two spawns, or a child from where
//! it started to its end — each segment a [`PathProf`] whose prof holds the on-span entries of the
//! invocations in it, so a prefix shared by many paths (the continuation up to a spawn, which the
//! child's path and the continuation's both go through) is stored once. At a spawn the frame closes
//! its continuation into a segment if that part holds invocations (else the child copies its
//! length: two numbers) and, when the child returns, the child's path becomes a segment after the
//! one it started from, its end, listed among the frame's children (child j's end is the frame's
//! j-th); a frame's only child since its sync, begun at it, stays in the frame (`sole`) and goes on
//! the tree only if the frame pushes there or looks a child up before its sync. The sync takes the
//! longest chain, unions its segments into `p` and frees the others: O(1) amortized per segment.
//! All frames' segments and children are on two stacks, a frame's from its `base` and `first`
//! (those of the frames below it are below). A frame's side of it is [`FramePaths`].

use super::context_map::Arena;
use super::frames::PathProf;

/// No segment: the path begins at the frame's last sync.
const START: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Segment {
    /// The segment this one follows (`START`: none).
    after: u32,
    /// Length of the chain from the frame's last sync through this segment.
    total: u64,
    path: PathProf,
}

#[derive(Clone, Debug, Default)]
pub(super) struct PathTree {
    segments: Vec<Segment>,
    /// The segments ending the children spawned since their frames' last syncs, in spawn order.
    children: Vec<u32>,
}

impl PathTree {
    /// Where the next frame's segments will begin.
    pub fn len(&self) -> u32 {
        self.segments.len() as u32
    }

    /// Where the next frame's children will begin.
    pub fn first_child(&self) -> u32 {
        self.children.len() as u32
    }

    /// Length of the chain ending with segment `s` (`START`: 0).
    pub fn total(&self, s: u32) -> u64 {
        self.segments.get(s as usize).map_or(0, |x| x.total)
    }

    /// Appends `path` after segment `after` (`START`: at the frame's last sync); returns it.
    pub fn push(&mut self, after: u32, path: PathProf) -> u32 {
        let total = self.total(after).wrapping_add(path.span);
        self.segments.push(Segment { after, total, path });
        self.len() - 1
    }

    /// A child's path `path`, which began after segment `after`, ended: its end is the frame's
    /// next child.
    pub fn push_child(&mut self, after: u32, path: PathProf) {
        let s = self.push(after, path);
        self.children.push(s);
    }

    /// The segment ending child `j` of the frame whose children begin at `first`, if the frame
    /// has that child.
    pub fn child(&self, first: u32, j: u64) -> Option<u32> {
        let i = usize::try_from(j).ok()?.checked_add(first as usize)?;
        self.children.get(i).copied()
    }

    /// The ends of the frame's children (from `first`), in spawn order.
    pub fn children(&self, first: u32) -> &[u32] {
        self.children.get(first as usize..).unwrap_or_default()
    }

    /// The frame whose segments and children begin at `base` and `first` has one child since its
    /// last sync and no other segment (the child began at the sync): its segment removed, its
    /// chain's length and path.
    pub fn pop_sole_child(&mut self, base: u32, first: u32) -> Option<(u64, PathProf)> {
        if self.children.len() != first as usize + 1 || self.segments.len() != base as usize + 1 {
            return None;
        }
        self.children.pop();
        let seg = self.segments.pop()?;
        debug_assert_eq!(seg.after, START);
        Some((seg.total, seg.path))
    }

    /// Unions the chain ending with segment `end` (`START`: none) into `into`, frees every other
    /// segment from `base`, and drops them and the children from `first`: the frame whose
    /// segments and children begin there syncs.
    pub fn join(
        &mut self,
        base: u32,
        first: u32,
        end: u32,
        into: &mut PathProf,
        arena: &mut Arena,
        keys: usize,
    ) {
        let mut s = end;
        while let Some(seg) = self.segments.get_mut(s as usize) {
            s = seg.after;
            into.then(arena, keys, std::mem::take(&mut seg.path));
        }
        let base = (base as usize).min(self.segments.len());
        for seg in &mut self.segments[base..] {
            if !seg.path.prof.is_empty() {
                seg.path.prof.free(arena);
            }
        }
        self.segments.truncate(base);
        self.children.truncate(first as usize);
    }
}

/// Where a spawned child starts in its parent: after segment `after` of the tree, then a part of
/// the parent's continuation that holds no invocation, of length `span` (`own` of it local).
#[derive(Clone, Copy, Debug)]
pub(super) struct Start {
    after: u32,
    span: u64,
    own: u64,
}

impl Start {
    fn at(after: u32) -> Start {
        Start {
            after,
            span: 0,
            own: 0,
        }
    }

    /// The start of the first child of a frame that has spawned nothing yet, whose
    /// continuation since its start holds no invocation and is `span` long, all of it local:
    /// what [`FramePaths::spawning`] gives a frame just begun.
    pub(super) fn first_in_fresh(span: u64) -> Start {
        Start {
            after: START,
            span,
            own: span,
        }
    }
}

impl Default for Start {
    /// At the frame's last sync.
    fn default() -> Start {
        Start::at(START)
    }
}

/// A frame's paths: Figure 3's prefix `p` (the frame's start to its last sync) and, since that
/// sync, the continuation (segment `cur` of the tree, then `c`), the children's ends (in the
/// tree) and `after`. `c` is live in a frame that is no loop (see `frames.rs`): what reads its
/// lengths is given the running total.
#[derive(Clone, Debug)]
pub(super) struct FramePaths {
    pub p: PathProf,
    /// The continuation since segment `cur` (`START`: since the last sync).
    pub c: PathProf,
    cur: u32,
    /// The longest end of the siblings the next spawned child depends on (`SpawnAfter`; `START`:
    /// none yet).
    after: u32,
    /// Where this frame's segments and children begin in the tree (while `on_tree`).
    base: u32,
    first: u32,
    /// Whether the frame has segments or children on the tree (from `base` and `first`): it
    /// put some there since its last sync. (The frames above it take theirs off as they end.)
    on_tree: bool,
    /// Whether the frame's only child since its last sync is `sole`, not in the tree: it began
    /// at that sync, and the frame has pushed nothing on the tree since (a fork-join's common
    /// case; it goes on the tree, as child 0, before the frame pushes anything there).
    has_sole: bool,
    /// That child's path, from the frame's last sync (empty when there is none).
    sole: PathProf,
}

impl FramePaths {
    /// The paths of a frame that begins now, whose segments and children will be those pushed on
    /// `tree` from now on.
    pub fn new(tree: &PathTree) -> FramePaths {
        FramePaths {
            p: PathProf::default(),
            c: PathProf::default(),
            cur: START,
            after: START,
            base: tree.len(),
            first: tree.first_child(),
            on_tree: false,
            has_sole: false,
            sole: PathProf::default(),
        }
    }

    /// The paths of a frame that begins now, at the running total `acc`, in a slot whose paths
    /// are empty (a new slot's, or those a frame left when it ended: `p` moved out, synced);
    /// where its segments and children begin is set when it puts its first on the tree.
    #[inline(always)]
    pub fn begin(&mut self, acc: u64) {
        debug_assert!(self.p.prof.is_empty() && self.c.prof.is_empty() && !self.has_sole);
        debug_assert!(self.p.span == 0 && self.p.own == 0);
        debug_assert!(self.cur == START && self.after == START && !self.on_tree);
        self.c.live_from(acc);
    }

    /// Whether the frame has nothing outstanding: no child since its last sync (so no
    /// dependence on one either).
    #[inline(always)]
    pub fn settled(&self) -> bool {
        !self.has_sole && !self.on_tree
    }

    /// Length of the current path since the last sync.
    fn cur_total(&self, tree: &PathTree) -> u64 {
        tree.total(self.cur).wrapping_add(self.c.span)
    }

    /// The frame spawns a child at the running total `acc`: returns where it starts, the longer
    /// of the current path (whose part since `cur` becomes a segment if it holds invocations)
    /// and `after` (ties: the current path).
    /// (In line when the frame's children so far are none or the sole one, the continuation
    /// holds no invocation and no dependence waits: the child starts after it.)
    #[inline(always)]
    pub fn spawning(&mut self, tree: &mut PathTree, acc: u64) -> Start {
        if !self.has_sole && self.c.prof.is_empty() && self.after == START {
            return Start {
                after: self.cur,
                span: acc.wrapping_sub(self.c.span),
                own: acc.wrapping_sub(self.c.own),
            };
        }
        self.spawning_general(tree, acc)
    }

    /// [`FramePaths::spawning`] out of line.
    #[inline(never)]
    fn spawning_general(&mut self, tree: &mut PathTree, acc: u64) -> Start {
        self.c.flip(acc);
        let start = self.spawning_at(tree);
        self.c.flip(acc);
        start
    }

    /// [`FramePaths::spawning`] with `c`'s lengths.
    fn spawning_at(&mut self, tree: &mut PathTree) -> Start {
        self.sole_to_tree(tree);
        let here = if self.c.prof.is_empty() {
            Start {
                after: self.cur,
                span: self.c.span,
                own: self.c.own,
            }
        } else {
            self.onto_tree(tree);
            self.cur = tree.push(self.cur, std::mem::take(&mut self.c));
            Start::at(self.cur)
        };
        let after = std::mem::replace(&mut self.after, START);
        if after != START && tree.total(after) > tree.total(here.after).wrapping_add(here.span) {
            Start::at(after)
        } else {
            here
        }
    }

    /// A spawned child that started at `from` returned with path `x`: its end, a segment of the
    /// tree until the sync.
    /// (In line when it is the frame's sole child so far; on the tree out of line.)
    #[inline(always)]
    pub fn spawned(&mut self, tree: &mut PathTree, from: Start, mut x: PathProf) {
        x.span = x.span.wrapping_add(from.span);
        x.own = x.own.wrapping_add(from.own);
        let first_here = from.after == START && !self.has_sole;
        if first_here && !self.on_tree {
            self.has_sole = true;
            self.sole = x;
            return;
        }
        self.spawned_on_tree(tree, from, x);
    }

    /// [`FramePaths::spawned`] when the child goes on the tree.
    #[inline(never)]
    fn spawned_on_tree(&mut self, tree: &mut PathTree, from: Start, x: PathProf) {
        self.sole_to_tree(tree);
        self.onto_tree(tree);
        tree.push_child(from.after, x);
    }

    /// The sole child, if any, put on the tree (as child 0, begun at the last sync): the frame
    /// is about to push something there or to look its children up.
    #[inline(always)]
    fn sole_to_tree(&mut self, tree: &mut PathTree) {
        if self.has_sole {
            self.has_sole = false;
            self.onto_tree(tree);
            tree.push_child(START, std::mem::take(&mut self.sole));
        }
    }

    /// The frame is about to put a segment or child on the tree: if it is its first since its
    /// last sync, its segments and children begin where the tree ends now (those of the frames
    /// above it, ended, are off it).
    #[inline(always)]
    fn onto_tree(&mut self, tree: &PathTree) {
        if !self.on_tree {
            self.on_tree = true;
            self.base = tree.len();
            self.first = tree.first_child();
        }
    }

    /// The segment ending the frame's child `j`, if the frame has that child.
    fn child(&self, tree: &PathTree, j: u64) -> Option<u32> {
        if self.on_tree {
            tree.child(self.first, j)
        } else {
            None
        }
    }

    /// The next child spawned starts no earlier than child `j` ends (none such: no constraint).
    pub fn spawn_after(&mut self, tree: &mut PathTree, j: u64) {
        self.sole_to_tree(tree);
        if let Some(end) = self.child(tree, j) {
            if self.after == START || tree.total(end) > tree.total(self.after) {
                self.after = end;
            }
        }
    }

    /// The strand that begins now, at the running total `acc`, starts no earlier than child `j`
    /// ends: the current path is the longer of the two (ties: the continuation; none such: no
    /// constraint).
    pub fn wait_for(&mut self, arena: &mut Arena, tree: &mut PathTree, j: u64, acc: u64) {
        self.sole_to_tree(tree);
        self.c.flip(acc);
        if let Some(end) = self.child(tree, j) {
            if tree.total(end) > self.cur_total(tree) {
                // The continuation since `cur` is on no other path (a child that started in it
                // holds a copy of its length: it held no invocation).
                std::mem::take(&mut self.c).free(arena);
                self.cur = end;
            }
        }
        self.c.flip(acc);
    }

    /// Figure 3, lines 14–19, over the tree, at the running total `acc`: the longest of the
    /// current path and the children's ends (ties: the continuation, then the later child) goes
    /// into `p`; `c`, empty, is live from `acc` on.
    #[inline(always)]
    pub fn sync(&mut self, arena: &mut Arena, keys: usize, tree: &mut PathTree, acc: u64) {
        self.c.flip(acc);
        self.sync_at(arena, keys, tree);
        debug_assert!(self.c.span == 0 && self.c.own == 0 && self.c.prof.is_empty());
        self.c.live_from(acc);
    }

    /// [`FramePaths::sync`] of a frame that ends (its `c` left empty, not live: the slot's
    /// next frame begins it).
    #[inline(always)]
    pub fn sync_to_end(&mut self, arena: &mut Arena, keys: usize, tree: &mut PathTree, acc: u64) {
        self.c.flip(acc);
        self.sync_at(arena, keys, tree);
    }

    /// [`FramePaths::sync`] with `c`'s lengths.
    #[inline(always)]
    fn sync_at(&mut self, arena: &mut Arena, keys: usize, tree: &mut PathTree) {
        if self.has_sole {
            // The sole child's chain is its path (it began at the last sync).
            self.has_sole = false;
            let path = std::mem::take(&mut self.sole);
            self.sync_sole(arena, keys, path.span, path);
            return;
        }
        if !self.on_tree {
            // Nothing spawned since the last sync: the continuation alone.
            debug_assert!(self.cur == START && self.after == START);
            self.p.absorb(arena, keys, &mut self.c);
            return;
        }
        if self.cur == START {
            if let Some((total, path)) = tree.pop_sole_child(self.base, self.first) {
                self.on_tree = false;
                self.sync_sole(arena, keys, total, path);
                return;
            }
        }
        self.sync_children(arena, keys, tree);
    }

    /// [`FramePaths::sync`] with one child since the last sync, started at it (a fork-join's
    /// common case), whose chain is `total` long and its path `path`: the longer of it and the
    /// continuation (ties: the continuation).
    #[inline(always)]
    fn sync_sole(&mut self, arena: &mut Arena, keys: usize, total: u64, path: PathProf) {
        if total > self.c.span {
            std::mem::take(&mut self.c).free(arena);
            self.p.then(arena, keys, path);
        } else {
            self.p.absorb(arena, keys, &mut self.c);
            path.free(arena);
        }
        self.after = START;
    }

    /// [`FramePaths::sync`] with children spawned since the last sync, more than one or not all
    /// from it.
    #[inline(never)]
    fn sync_children(&mut self, arena: &mut Arena, keys: usize, tree: &mut PathTree) {
        let mut longest: Option<(u32, u64)> = None;
        for &end in tree.children(self.first) {
            let total = tree.total(end);
            if longest.is_none_or(|(_, t)| total >= t) {
                longest = Some((end, total));
            }
        }
        let c = std::mem::take(&mut self.c);
        let end = match longest {
            Some((end, total)) if total > tree.total(self.cur).wrapping_add(c.span) => {
                c.free(arena);
                end
            }
            _ => {
                self.p.then(arena, keys, c);
                self.cur
            }
        };
        tree.join(self.base, self.first, end, &mut self.p, arena, keys);
        self.on_tree = false;
        self.cur = START;
        self.after = START;
    }
}
