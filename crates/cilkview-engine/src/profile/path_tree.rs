//! The paths of the profiler's frames since their last syncs, as a tree of segments, so that a
//! child may start after a sibling's end (`SpawnAfter`) and a strand may wait for one
//! (`WaitFor`) with the on-span data of the path that reaches it (docs/engine.md, "Call-site
//! profiles", dependences).
//!
//! A frame's paths since its last sync all begin where its last sync ended (its prefix `p`): each
//! is a chain of *segments* — a part of the continuation between two spawns, or a child from where
//! it started to its end — each segment a [`PathProf`] whose prof holds the on-span entries of the
//! invocations in it, so a prefix shared by many paths (the continuation up to a spawn, which the
//! child's path and the continuation's both go through) is stored once. At a spawn the frame
//! closes its continuation into a segment if that part holds invocations (else the child copies
//! its length: two numbers) and, when the child returns, the child's path becomes a segment after
//! the one it started from, its end, listed among the frame's children (child j's end is the
//! frame's j-th). The sync takes the longest chain, unions its segments into `p` and frees the
//! others: O(1) amortized per segment. All frames' segments and children are on two stacks, a
//! frame's from its `base` and `first` (those of the frames below it are below).

use super::cilkprof::PathProf;
use super::context_map::Arena;

/// No segment: the path begins at the frame's last sync.
pub(super) const START: u32 = u32::MAX;

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
        let total = self.total(after).saturating_add(path.span);
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
        for seg in self.segments.drain(base..) {
            seg.path.free(arena);
        }
        self.children.truncate(first as usize);
    }
}
