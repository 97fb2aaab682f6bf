//! The paths of the profiler's frames since their last syncs, as a tree of segments, so that a
//! child may start after a sibling's end (`SpawnAfter`) and a strand may wait for one
//! (`WaitFor`) with the on-span data of the path that reaches it (docs/engine.md, "Call-site
//! profiles", dependences).
//!
//! A frame's paths since its last sync all begin where its last sync ended (its prefix `p`): each
//! is a chain of *segments* — a part of the continuation between two spawns, or a child from where
//! it started to its end — each segment a [`PathProf`] whose prof holds the on-span entries of the
//! invocations in it, so a prefix shared by many paths (the continuation up to a spawn, which the
//! child's path and the continuation's both go through) is stored once. At each spawn the frame
//! closes its continuation into a segment and, when the child returns, the child's path becomes
//! a segment after the one it started from: a frame's segments are pairs (continuation, child),
//! so child j's end is its segment `base + 2j + 1`. The sync takes the longest chain, unions its
//! segments into `p` and frees the others: O(1) amortized per segment. All frames' segments are
//! on one stack, a frame's from its `base` (those of the frames below it are below).

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
}

impl PathTree {
    /// Where the next frame's segments will begin.
    pub fn len(&self) -> u32 {
        self.segments.len() as u32
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

    /// The segment ending child `j` of the frame whose segments begin at `base`, if the frame
    /// has that child.
    pub fn child(&self, base: u32, j: u64) -> Option<u32> {
        let s = u64::from(base)
            .checked_add(j.checked_mul(2)?.checked_add(1)?)
            .filter(|&s| s < u64::from(self.len()))?;
        Some(s as u32)
    }

    /// The frame's children's ends, in spawn order.
    pub fn children(&self, base: u32) -> impl Iterator<Item = u32> {
        (base.saturating_add(1)..self.len()).step_by(2)
    }

    /// Unions the chain ending with segment `end` (`START`: none) into `into`, frees every other
    /// segment from `base`, and drops them all: the frame whose segments begin at `base` syncs.
    pub fn join(
        &mut self,
        base: u32,
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
    }
}
